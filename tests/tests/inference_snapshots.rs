//! Small programs with every inferred shape beside them.

use shape_tests::inference::infer;

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
fn attention_block() {
    insta::assert_snapshot!(infer(r#"
        input x: 8|16,64
        param wq: ..i..->4,16
        param wk
        param wv: ..i..->4,32
        param wo
        q = einsum("b|s,d;d->h,k=>b|s,h,k", x, wq)
        k = einsum("b|s,d;d->h,k=>b|s,h,k", x, wk)
        v = einsum("b|s,d;d->h,k=>b|s,h,k", x, wv)
        scores = einsum("b|s,h,k;b|t,h,k=>b|h,s,t", q, k)
        weights = exp(scores)
        mixed = einsum("b|h,s,t;b|t,h,k=>b|s,h,k", weights, v)
        out = einsum("b|s,h,k;h,k->d=>b|s,d", mixed, wo)
        residual = out + x
    "#), @r"
        x        : 8|->16, 64
        wq       : |64->4, 16
        wk       : |64->4, 16
        wv       : |64->4, 32
        wo       : |4, 32->64
        q        : 8|->16, 4, 16
        k        : 8|->16, 4, 16
        v        : 8|->16, 4, 32
        scores   : 8|->4, 16, 16
        weights  : 8|->4, 16, 16
        mixed    : 8|->16, 4, 32
        out      : 8|->16, 64
        residual : 8|->16, 64
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
