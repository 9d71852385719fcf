//! Small programs with every inferred shape beside them.

use shape_solver::{Graph, GraphError};
use shape_tests::inference::infer;
use shape_tests::render_inferred;

#[test]
fn mlp() {
    insta::assert_snapshot!(infer(r"
        input x: 32|784
        param w1
        param b1: 256
        param w2
        param b2: 64
        param w3
        z1 = w1 @ x
        a1 = z1 + b1
        h1 = relu(a1)
        z2 = w2 @ h1
        a2 = z2 + b2
        h2 = relu(a2)
        y = w3 @ h2
        input target: 32|10
        diff = y - target
        require y: 32|->10
    "), @r"
        x      : 32|->784
        w1     : |784->256
        b1     : |->256
        w2     : |256->64
        b2     : |->64
        w3     : |64->10
        z1     : 32|->256
        a1     : 32|->256
        h1     : 32|->256
        z2     : 32|->64
        a2     : 32|->64
        h2     : 32|->64
        y      : 32|->10
        target : 32|->10
        diff   : 32|->10
        ");
}

#[test]
fn broadcasting_batch_and_permutes() {
    insta::assert_snapshot!(infer(r#"
        input imgs: 5,1|h,w->rgb:3
        require imgs: 5,1|28,28->3
        input mask: 7|28,1->1
        masked = imgs * mask
        first = batch_slice(masked)
        t = transpose(first)
        input m: 28,28->2
        mt = m @ t
        swapped = permute("..b..|h,w->c=>..b..|c->w,h", masked)
    "#), @r"
        imgs    : 5, 1|28, 28->rgb:3
        mask    : 7|28, 1->1
        masked  : 5, 7|28, 28->rgb:3
        first   : 7|28, 28->rgb:3
        t       : 7|rgb:3->28, 28
        m       : |28, 28->2
        mt      : 7|rgb:3->2
        swapped : 5, 7|rgb:3->28, 28
        ");
}

/// `softmax` is not a function of the text language (its shape rule is
/// any pointwise function's): this one is built through the graph API.
#[test]
fn attention_block() -> Result<(), GraphError> {
    use shape_solver::OpKind::{Binary, Unary};
    let es = |s: &str| shape_solver::OpKind::einsum(shape_core::EinsumSpec::parse(s).unwrap());
    let mut g = Graph::new();
    let named = |g: &mut Graph, name: &str, kind, operands: &[_]| {
        g.apply_named(name, kind, operands).unwrap()
    };
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
