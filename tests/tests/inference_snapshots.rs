//! Small programs with every inferred shape beside them.

use shape_solver::{Graph, GraphError};
use shape_tests::render_inferred;

fn named(
    g: &mut Graph,
    name: &str,
    kind: shape_solver::OpKind,
    operands: &[shape_solver::TensorId],
) -> shape_solver::TensorId {
    g.apply_named(name, kind, operands).unwrap()
}

#[test]
fn mlp() -> Result<(), GraphError> {
    use shape_solver::OpKind::{Binary, Compose, Unary};
    let mut g = Graph::new();
    let x = g.input("x", "32|784")?;
    let w1 = g.parameter("w1")?;
    let b1 = g.parameter_with_spec("b1", "256")?;
    let w2 = g.parameter("w2")?;
    let b2 = g.parameter_with_spec("b2", "64")?;
    let w3 = g.parameter("w3")?;
    let h1 = named(&mut g, "z1", Compose, &[w1, x]);
    let h1 = named(&mut g, "a1", Binary("add".into()), &[h1, b1]);
    let h1 = named(&mut g, "h1", Unary("relu".into()), &[h1]);
    let h2 = named(&mut g, "z2", Compose, &[w2, h1]);
    let h2 = named(&mut g, "a2", Binary("add".into()), &[h2, b2]);
    let h2 = named(&mut g, "h2", Unary("relu".into()), &[h2]);
    let y = named(&mut g, "y", Compose, &[w3, h2]);
    let target = g.input("target", "32|10")?;
    let _ = named(&mut g, "diff", Binary("sub".into()), &[y, target]);
    g.require(y, "32|->10")?;
    insta::assert_snapshot!(render_inferred(&g)?);
    Ok(())
}

#[test]
fn attention_block() -> Result<(), GraphError> {
    use shape_solver::OpKind::{Binary, Unary};
    let es = |s: &str| shape_solver::OpKind::einsum(shape_core::EinsumSpec::parse(s).unwrap());
    let mut g = Graph::new();
    let x = g.input("x", "8|16,64")?;
    let wq = g.parameter_with_spec("wq", "..i..->4,16")?;
    let wk = g.parameter("wk")?;
    let wv = g.parameter_with_spec("wv", "..i..->4,32")?;
    let wo = g.parameter("wo")?;
    let proj = "b|s,d;d->h,k=>b|s,h,k";
    let q = named(&mut g, "q", es(proj), &[x, wq]);
    let k = named(&mut g, "k", es(proj), &[x, wk]);
    let v = named(&mut g, "v", es(proj), &[x, wv]);
    let scores = named(&mut g, "scores", es("b|s,h,k;b|t,h,k=>b|h,s,t"), &[q, k]);
    let weights = named(&mut g, "weights", Unary("softmax".into()), &[scores]);
    let mixed = named(
        &mut g,
        "mixed",
        es("b|h,s,t;b|t,h,k=>b|s,h,k"),
        &[weights, v],
    );
    let out = named(&mut g, "out", es("b|s,h,k;h,k->d=>b|s,d"), &[mixed, wo]);
    let _ = named(&mut g, "residual", Binary("add".into()), &[out, x]);
    insta::assert_snapshot!(render_inferred(&g)?);
    Ok(())
}

#[test]
fn broadcasting_batch_and_permutes() -> Result<(), GraphError> {
    use shape_solver::OpKind::{BatchSlice, Binary, Compose, Transpose};
    let mut g = Graph::new();
    let imgs = g.input("imgs", "5,1|h,w->rgb:3")?;
    g.require(imgs, "5,1|28,28->3")?;
    let mask = g.input("mask", "7|28,1->1")?;
    let masked = named(&mut g, "masked", Binary("mul".into()), &[imgs, mask]);
    let first = named(&mut g, "first", BatchSlice, &[masked]);
    let t = named(&mut g, "t", Transpose, &[first]);
    let m = g.input("m", "28,28->2")?;
    let _ = named(&mut g, "mt", Compose, &[m, t]);
    let spec = shape_core::EinsumSpec::parse("..b..|h,w->c=>..b..|c->w,h").unwrap();
    let _ = named(
        &mut g,
        "swapped",
        shape_solver::OpKind::einsum(spec),
        &[masked],
    );
    insta::assert_snapshot!(render_inferred(&g)?);
    Ok(())
}
