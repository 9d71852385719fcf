//! Dim equality and inequality (§2(a) and §2(b)): sizes, least upper
//! bounds, labels.
//!
//! In programs, `w @ x` makes `w`'s input row broadcast from `x`'s output
//! row, which is `cur >= subr` between two existing dims; a `require`
//! makes sizes equal.

use shape_lang::inference::infer;
use shape_solver::{Relation, ShapeError};

use crate::{k, kl, size, v, Fixture};

#[test]
fn a_size_broadcasts_from_itself_and_from_one_only() {
    insta::assert_snapshot!(infer(r"
        input w: 5->2
        input x: 5
        input one: 1
        y = w @ x
        z = w @ one
    "), @r"
        w   : |5->2
        x   : |->5
        one : |->1
        y   : |->2
        z   : |->2
        ");
    insta::assert_snapshot!(infer(r"
        input w: 1->2
        input x: 5
        y = w @ x
    "), @r#"
        error[dim_mismatch] line 3: size mismatch in `y = compose(w, x)` (op #0), which makes the input row of `w` broadcast from the output row of `x`, at axis -1: the inner sizes 1 and 5 differ (the axes a product contracts are equal, or the second is 1); 1 comes from the declared shape "1->2" of `w` (input row) at axis -1, 5 from the declared shape "5" of `x` (output row) at axis -1
          line 1: 1 comes from the declared shape "1->2" of `w` (input row) at axis -1
          line 2: 5 comes from the declared shape "5" of `x` (output row) at axis -1
        "#);
    insta::assert_snapshot!(infer("input w: 3->2\ninput x: 5\ny = w @ x"), @r#"
        error[dim_mismatch] line 3: size mismatch in `y = compose(w, x)` (op #0), which makes the input row of `w` broadcast from the output row of `x`, at axis -1: the inner sizes 3 and 5 differ (the axes a product contracts are equal, or the second is 1); 3 comes from the declared shape "3->2" of `w` (input row) at axis -1, 5 from the declared shape "5" of `x` (output row) at axis -1
          line 1: 3 comes from the declared shape "3->2" of `w` (input row) at axis -1
          line 2: 5 comes from the declared shape "5" of `x` (output row) at axis -1
        "#);
}

#[test]
fn known_sizes_that_must_be_equal_are_equal() {
    insta::assert_snapshot!(infer("input x: 4\nrequire x: 4"), @"x : |->4");
    insta::assert_snapshot!(infer("input x: 4\nrequire x: 1"), @r#"
        error[dim_mismatch] line 2: size mismatch in the required shape "1" of `x` (output row), at axis -1: 4 is not equal to 1; 4 comes from the declared shape "4" of `x` (output row) at axis -1, 1 from the required shape "1" of `x` (output row) at axis -1
          line 1: 4 comes from the declared shape "4" of `x` (output row) at axis -1
          line 2: 1 comes from the required shape "1" of `x` (output row) at axis -1
        "#);
    // The same rule between two sizes given directly, and the relation the
    // error reports.
    let mut f = Fixture::new();
    assert!(f.add(f.eq(k(4), k(4))).is_ok());
    let err = f.add(f.eq(k(4), k(1))).unwrap_err();
    assert!(
        matches!(
            err,
            ShapeError::DimMismatch {
                relation: Relation::Equal,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_variable_above_a_size_greater_than_one_takes_it_at_once() {
    insta::assert_snapshot!(infer(r"
        param w
        input x: 7
        y = w @ x
        require y: 3
    "), @r"
        w : |7->3
        x : |->7
        y : |->3
        ");
    // Solved while the constraint is added, not by finalization.
    let mut f = Fixture::new();
    let d = f.dim();
    f.add(f.ge(v(d), k(7))).unwrap();
    assert_eq!(f.now(d), k(7));
}

#[test]
fn a_variable_above_one_stays_free_and_finalizes_to_one() {
    insta::assert_snapshot!(infer(r"
        input x: 1
        y = exp(x)
    "), @r"
        x : |->1
        y : |->1
        ");
    let mut f = Fixture::new();
    let d = f.dim();
    f.add(f.ge(v(d), k(1))).unwrap();
    assert_eq!(f.now(d), v(d));
    assert_eq!(size(&f.finalize(), d), 1);
}

#[test]
fn a_variable_below_one_is_one() {
    insta::assert_snapshot!(infer(r"
        input w: 1->3
        param x: n
        y = w @ x
    "), @r"
        w : |1->3
        x : |->1
        y : |->3
        ");
    let mut f = Fixture::new();
    let d = f.dim();
    f.add(f.ge(k(1), v(d))).unwrap();
    assert_eq!(f.now(d), k(1));
}

#[test]
fn a_least_upper_bound_is_kept_and_finalization_takes_it() {
    insta::assert_snapshot!(infer(r"
        input w: 6->2
        param x: n
        y = w @ x
        z = w @ x
    "), @r"
        w : |6->2
        x : |->6
        y : |->2
        z : |->2
        ");
    // Until finalization it could still be 1 or 6.
    let mut f = Fixture::new();
    let d = f.dim();
    f.add(f.ge(k(6), v(d))).unwrap();
    f.add(f.ge(k(6), v(d))).unwrap();
    assert_eq!(f.now(d), v(d));
    assert_eq!(size(&f.finalize(), d), 6);
}

#[test]
fn two_different_upper_bounds_force_one() {
    insta::assert_snapshot!(infer(r"
        param x: n
        input w: 3->2
        input u: 5->2
        y = w @ x
        z = u @ x
    "), @r"
        x : |->1
        w : |3->2
        u : |5->2
        y : |->2
        z : |->2
        ");
    let mut f = Fixture::new();
    let d = f.dim();
    f.add(f.ge(k(3), v(d))).unwrap();
    f.add(f.ge(k(5), v(d))).unwrap();
    assert_eq!(f.now(d), k(1));
}

#[test]
fn bounds_pass_along_chains_of_variables() {
    // 5 >= h >= x: x's least upper bound is 5 as well.
    insta::assert_snapshot!(infer(r"
        param x: n
        h = relu(x)
        input w: 5->2
        y = w @ h
    "), @r"
        x : |->5
        h : |->5
        w : |5->2
        y : |->2
        ");
    // 3 >= x contradicts 5 >= x only by forcing x = 1, and h >= 1 still
    // holds: h keeps its bound.
    insta::assert_snapshot!(infer(r"
        param x: n
        h = relu(x)
        input w: 5->2
        y = w @ h
        input u: 3->2
        z = u @ x
    "), @r"
        x : |->1
        h : |->5
        w : |5->2
        y : |->2
        u : |3->2
        z : |->2
        ");
}

#[test]
fn a_lower_bound_greater_than_one_travels_up() {
    insta::assert_snapshot!(infer(r"
        param x
        h = relu(x)
        require x: 4
    "), @r"
        x : |->4
        h : |->4
        ");
    let mut f = Fixture::new();
    let (a, b) = (f.dim(), f.dim());
    f.add(f.ge(v(a), v(b))).unwrap();
    f.add(f.eq(v(b), k(4))).unwrap();
    assert_eq!(f.now(a), k(4));
}

#[test]
fn labels_must_agree_and_unlabeled_sizes_take_them() {
    insta::assert_snapshot!(infer(r"
        input x: 3
        require x: rgb:3
        h = relu(x)
    "), @r"
        x : |->rgb:3
        h : |->rgb:3
        ");
    insta::assert_snapshot!(infer(r"
        input x: rgb:3
        require x: hsv:3
    "), @r#"
        error[label_mismatch] line 2: label mismatch in the required shape "hsv:3" of `x` (output row), at axis -1: rgb:3 and hsv:3 are the same size with different labels; rgb:3 comes from the declared shape "rgb:3" of `x` (output row) at axis -1, hsv:3 from the required shape "hsv:3" of `x` (output row) at axis -1
          line 1: rgb:3 comes from the declared shape "rgb:3" of `x` (output row) at axis -1
          line 2: hsv:3 comes from the required shape "hsv:3" of `x` (output row) at axis -1
        "#);
    // A size-1 operand broadcasts whatever its label.
    insta::assert_snapshot!(infer(r"
        input a: rgb:3
        input b: x:1
        c = a + b
    "), @r"
        a : |->rgb:3
        b : |->x:1
        c : |->rgb:3
        ");
    // The variable holding an unlabeled size takes the label.
    let mut f = Fixture::new();
    let d = f.dim();
    f.add(f.eq(v(d), k(3))).unwrap();
    f.add(f.eq(v(d), kl(3, "rgb"))).unwrap();
    assert_eq!(f.now(d), kl(3, "rgb"));
    let err = f.add(f.eq(v(d), kl(3, "hsv"))).unwrap_err();
    assert!(matches!(err, ShapeError::LabelMismatch { .. }), "{err}");
}
