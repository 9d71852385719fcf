//! Small programs with every inferred shape beside them.

use shape_solver::{Graph, GraphError};
use shape_tests::render_inferred;

/// Calls `function` (with `spec` first when it takes one), naming the
/// result `name`.
fn named(
    g: &mut Graph,
    name: &str,
    function: &str,
    spec: Option<&str>,
    operands: &[shape_solver::TensorId],
) -> shape_solver::TensorId {
    g.call_named(name, function, spec, operands).unwrap()
}

#[test]
fn mlp() -> Result<(), GraphError> {
    let mut g = Graph::new();
    let x = g.input("x", "32|784")?;
    let w1 = g.parameter("w1")?;
    let b1 = g.parameter_with_spec("b1", "256")?;
    let w2 = g.parameter("w2")?;
    let b2 = g.parameter_with_spec("b2", "64")?;
    let w3 = g.parameter("w3")?;
    let h1 = named(&mut g, "z1", "compose", None, &[w1, x]);
    let h1 = named(&mut g, "a1", "add", None, &[h1, b1]);
    let h1 = named(&mut g, "h1", "relu", None, &[h1]);
    let h2 = named(&mut g, "z2", "compose", None, &[w2, h1]);
    let h2 = named(&mut g, "a2", "add", None, &[h2, b2]);
    let h2 = named(&mut g, "h2", "relu", None, &[h2]);
    let y = named(&mut g, "y", "compose", None, &[w3, h2]);
    let target = g.input("target", "32|10")?;
    let _ = named(&mut g, "diff", "sub", None, &[y, target]);
    g.require(y, "32|->10")?;
    insta::assert_snapshot!(render_inferred(&g)?);
    Ok(())
}

#[test]
fn attention_block() -> Result<(), GraphError> {
    let mut g = Graph::new();
    let x = g.input("x", "8|16,64")?;
    let wq = g.parameter_with_spec("wq", "..i..->4,16")?;
    let wk = g.parameter("wk")?;
    let wv = g.parameter_with_spec("wv", "..i..->4,32")?;
    let wo = g.parameter("wo")?;
    let proj = "b|s,d;d->h,k=>b|s,h,k";
    let q = named(&mut g, "q", "einsum", Some(proj), &[x, wq]);
    let k = named(&mut g, "k", "einsum", Some(proj), &[x, wk]);
    let v = named(&mut g, "v", "einsum", Some(proj), &[x, wv]);
    let scores = named(
        &mut g,
        "scores",
        "einsum",
        Some("b|s,h,k;b|t,h,k=>b|h,s,t"),
        &[q, k],
    );
    let weights = named(&mut g, "weights", "exp", None, &[scores]);
    let mixed = named(
        &mut g,
        "mixed",
        "einsum",
        Some("b|h,s,t;b|t,h,k=>b|s,h,k"),
        &[weights, v],
    );
    let out = named(
        &mut g,
        "out",
        "einsum",
        Some("b|s,h,k;h,k->d=>b|s,d"),
        &[mixed, wo],
    );
    let _ = named(&mut g, "residual", "add", None, &[out, x]);
    insta::assert_snapshot!(render_inferred(&g)?);
    Ok(())
}

#[test]
fn broadcasting_batch_and_permutes() -> Result<(), GraphError> {
    let mut g = Graph::new();
    let imgs = g.input("imgs", "5,1|h,w->rgb:3")?;
    g.require(imgs, "5,1|28,28->3")?;
    let mask = g.input("mask", "7|28,1->1")?;
    let masked = named(&mut g, "masked", "mul", None, &[imgs, mask]);
    let first = named(&mut g, "first", "batch_slice", None, &[masked]);
    let t = named(&mut g, "t", "transpose", None, &[first]);
    let m = g.input("m", "28,28->2")?;
    let _ = named(&mut g, "mt", "compose", None, &[m, t]);
    let _ = named(
        &mut g,
        "swapped",
        "permute",
        Some("..b..|h,w->c=>..b..|c->w,h"),
        &[masked],
    );
    insta::assert_snapshot!(render_inferred(&g)?);
    Ok(())
}
