//! The constraints each operation imposes (§2(g)), as programs.

use shape_tests::inference::infer;

#[test]
fn pointwise_binary_broadcasts_like_numpy_in_every_row() {
    insta::assert_snapshot!(infer(r"
        input a: 5,1|3->2,1
        input b: 4|1->1,7
        c = a + b
    "), @r"
        a : 5, 1|3->2, 1
        b : 4|1->1, 7
        c : 5, 4|3->2, 7
        ");
}

#[test]
fn a_pointwise_conflict_names_both_tensors() {
    insta::assert_snapshot!(infer(r"
        input a: 3
        input b: 4
        c = a + b
    "), @r#"
        error[dim_mismatch] line 3: size mismatch in `c = add(a, b)` (op #0), which makes the output row of `c` broadcast from the output row of `a`, at axis -1: 4 cannot broadcast from 3; 4 comes from the declared shape "4" of `b` (output row) at axis -1, 3 from the declared shape "3" of `a` (output row) at axis -1
          line 2: 4 comes from the declared shape "4" of `b` (output row) at axis -1
          line 1: 3 comes from the declared shape "3" of `a` (output row) at axis -1
        "#);
}

#[test]
fn pointwise_unary_keeps_the_shape() {
    insta::assert_snapshot!(infer(r"
        input a: 2|3->4
        b = relu(a)
        c = -b
    "), @r"
        a : 2|3->4
        b : 2|3->4
        c : 2|3->4
        ");
}

#[test]
fn compose_is_matrix_multiplication_with_a_broadcast_batch() {
    insta::assert_snapshot!(infer(r"
        input w: 7|3->4
        input x: 1|2->3
        y = w @ x
    "), @r"
        w : 7|3->4
        x : 1|2->3
        y : 7|2->4
        ");
    insta::assert_snapshot!(infer(r"
        input w: 7|3->4
        input x: 5
        y = w @ x
    "), @r#"
        error[dim_mismatch] line 3: size mismatch in `y = compose(w, x)` (op #0), which makes the input row of `w` broadcast from the output row of `x`, at axis -1: 3 cannot broadcast from 5; 3 comes from the declared shape "7|3->4" of `w` (input row) at axis -1, 5 from the declared shape "5" of `x` (output row) at axis -1
          line 1: 3 comes from the declared shape "7|3->4" of `w` (input row) at axis -1
          line 2: 5 comes from the declared shape "5" of `x` (output row) at axis -1
        "#);
}

#[test]
fn compose_infers_a_parameter_from_its_operand_and_its_uses() {
    insta::assert_snapshot!(infer(r"
        input x: 8|28,28
        param w
        param b: 10
        y = w @ x + b
    "), @r"
        x   : 8|->28, 28
        w   : |28, 28->10
        b   : |->10
        y.1 : 8|->10
        y   : 8|->10
        ");
}

#[test]
fn transpose_swaps_input_and_output() {
    insta::assert_snapshot!(infer(r"
        input a: 2|3->4
        t = transpose(a)
    "), @r"
        a : 2|3->4
        t : 2|4->3
        ");
}

#[test]
fn einsum_contracts_and_reduces() {
    insta::assert_snapshot!(infer(r#"
        input a: 2,3
        input b: 3,5
        c = einsum("ij;jk=>ik", a, b)
        r = permute("ij=>i", a)
    "#), @r"
        a : |->2, 3
        b : |->3, 5
        c : |->2, 5
        r : |->2
        ");
    insta::assert_snapshot!(infer(r#"
        input a: 2,3
        input bad: 4,5
        c = einsum("ij;jk=>ik", a, bad)
    "#), @r#"
        error[dim_mismatch] line 3: size mismatch in `c = einsum "ij;jk=>ik"(a, bad)` (op #0), which requires the output row of `a` to match "ij" of the spec, at axis -1: 3 is not equal to 4; 3 comes from the declared shape "2,3" of `a` (output row) at axis -1, 4 from the declared shape "4,5" of `bad` (output row) at axis -2
          line 1: 3 comes from the declared shape "2,3" of `a` (output row) at axis -1
          line 2: 4 comes from the declared shape "4,5" of `bad` (output row) at axis -2
        "#);
}

#[test]
fn einsum_infers_a_parameter_from_the_spec() {
    insta::assert_snapshot!(infer(r#"
        input x: b|s,d
        param w
        require x: 8|16,32
        y = einsum("b|s,d;d->e=>b|s,e", x, w)
        require y: 8|16,64
    "#), @r"
        x : 8|->16, 32
        w : |32->64
        y : 8|->16, 64
        ");
}

#[test]
fn einsum_checks_its_fixed_sizes() {
    insta::assert_snapshot!(infer(r#"
        input a: 2,3
        p = permute("i3=>i", a)
    "#), @r"
        a : |->2, 3
        p : |->2
        ");
    insta::assert_snapshot!(infer(r#"
        input a: 2,3
        p = permute("i4=>i", a)
    "#), @r#"
        error[dim_mismatch] line 2: size mismatch in `p = permute "i4=>i"(a)` (op #0), which requires the output row of `a` to match "i4" of the spec, at axis -1: 3 is not equal to 4; 3 comes from the declared shape "2,3" of `a` (output row) at axis -1, 4 from `p = permute "i4=>i"(a)` (op #0), which requires the output row of `a` to match "i4" of the spec at axis -1
          line 1: 3 comes from the declared shape "2,3" of `a` (output row) at axis -1
        "#);
}

#[test]
fn einsum_takes_as_many_operands_as_its_spec_names() {
    insta::assert_snapshot!(infer(r#"
        input a: 2
        s = einsum("i;i=>", a, a)
    "#), @r"
        a : |->2
        s : |->
        ");
    insta::assert_snapshot!(infer(r#"
        input a: 2
        s = einsum("i;i=>i", a)
    "#), @r#"
        error[arguments] line 2: `einsum "i;i=>i"` takes 2 tensor(s), one per operand of its spec, but was given 1 tensor
        "#);
    insta::assert_snapshot!(infer(r#"
        input a: 2
        s = einsum("i;i=>x", a, a)
    "#), @r#"
        error[spec] line 2: invalid spec in einsum "i;i=>x": expected a result label that appears in an operand, found `x`, which no operand has
        "#);
}
