//! Row equality and inequality (§2(c) and §2(d)): row variables, templates
//! and the rank-cycle guard.

use shape_core::KnownDim;
use shape_core::{Dim, Row};
use shape_lang::inference::infer;
use shape_solver::{AxesCycle, Constraint, ShapeError};

use crate::{closed, k, open, permutations, sizes, v, Fixture};

/// A known size as error facts hold it.
fn known(n: u64) -> Option<KnownDim> {
    k(n).as_known().cloned()
}

#[test]
fn a_row_variable_takes_the_leading_surplus_of_an_equal_row() {
    insta::assert_snapshot!(infer(r"
        input x: ..r.. d
        require x: 2,3,4
    "), @"x : |->2, 3, 4");
    let mut f = Fixture::new();
    let (r, d) = (f.row(), f.dim());
    let row = open(r, [v(d)]);
    f.add(f.row_eq(row.clone(), closed([k(2), k(3), k(4)])))
        .unwrap();
    assert_eq!(f.s.resolve_row(&row).unwrap(), closed([k(2), k(3), k(4)]));
}

#[test]
fn equal_closed_rows_need_equal_axis_counts() {
    insta::assert_snapshot!(infer("input x: 2\nrequire x: 2,2"), @r#"
        error[axis_count_mismatch] line 2: axis count mismatch in the required shape "2,2" of `x` (output row): the left row [2] has 1 axes but the right row [2, 2] has 2
        "#);
    let mut f = Fixture::new();
    let err = f
        .add(f.row_eq(closed([k(2)]), closed([k(2), k(2)])))
        .unwrap_err();
    // The rows are typed facts; the text is made only by `Display`.
    let ShapeError::AxisCountMismatch {
        left_len: 1,
        right_len: 2,
        left_row,
        right_row,
        ..
    } = &err
    else {
        panic!("{err}");
    };
    assert!(!left_row.open && !right_row.open);
    assert_eq!(left_row.dims, vec![known(2)]);
    assert_eq!(right_row.dims, vec![known(2), known(2)]);
    assert_eq!(right_row.to_string(), "[2, 2]");
}

#[test]
fn a_row_equal_to_itself_plus_axes_is_infinite() {
    let mut f = Fixture::new();
    let r = f.row();
    let err = f.add(f.row_eq(open(r, []), open(r, [k(2)]))).unwrap_err();
    let ShapeError::InfiniteAxes { row_var, cycle, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(*row_var, r);
    let AxesCycle::SelfEqual { left, right } = &**cycle else {
        panic!("{err}");
    };
    assert!(left.open && left.dims.is_empty());
    assert_eq!(right.dims, vec![known(2)]);
    assert_eq!(right.to_string(), "[..., 2]");
    // Through a second variable too.
    let q = f.row();
    f.add(f.row_eq(open(q, []), open(r, [k(2)]))).unwrap();
    let err = f.add(f.row_eq(open(r, []), open(q, []))).unwrap_err();
    assert!(matches!(err, ShapeError::InfiniteAxes { .. }), "{err}");
}

#[test]
fn closed_rows_broadcast_aligned_at_the_end() {
    // `w @ x` makes `w`'s input row broadcast from `x`'s output row.
    insta::assert_snapshot!(infer(r"
        input w: 5,2,3->7
        input a: 2,3
        input b: 1,3
        input c: 5,1,1
        ya = w @ a
        yb = w @ b
        yc = w @ c
    "), @r"
        w  : |5, 2, 3->7
        a  : |->2, 3
        b  : |->1, 3
        c  : |->5, 1, 1
        ya : |->7
        yb : |->7
        yc : |->7
        ");
    // An operand cannot have more axes than the result.
    insta::assert_snapshot!(infer("input w: 2,3->7\ninput x: 5,2,3\ny = w @ x"), @"error[axis_count_mismatch] line 3: axis count mismatch in `y = compose(w, x)` (op #0), which makes the input row of `w` broadcast from the output row of `x`: the row of contracted axes [2, 3] has 2 axes but the row contracted with it [5, 2, 3] has 3; a product contracts axes that both rows have");
    // The mismatch names the axis, counted from the end.
    insta::assert_snapshot!(infer("input w: 2,3->7\ninput x: 2,4\ny = w @ x"), @r#"
        error[dim_mismatch] line 3: size mismatch in `y = compose(w, x)` (op #0), which makes the input row of `w` broadcast from the output row of `x`, at axis -1: the inner sizes 3 and 4 differ (the axes a product contracts are equal, or the second is 1); 3 comes from the declared shape "2,3->7" of `w` (input row) at axis -1, 4 from the declared shape "2,4" of `x` (output row) at axis -1
          line 1: 3 comes from the declared shape "2,3->7" of `w` (input row) at axis -1
          line 2: 4 comes from the declared shape "2,4" of `x` (output row) at axis -1
        "#);
}

#[test]
fn an_open_result_row_gets_a_template_of_the_operand_axes() {
    insta::assert_snapshot!(infer(r"
        input x: 4,1,3
        y = relu(x)
    "), @r"
        x : |->4, 1, 3
        y : |->4, 1, 3
        ");
    // The template is there before finalization: known sizes above 1, a
    // variable above the 1.
    let mut f = Fixture::new();
    let r = f.row();
    let cur = open(r, []);
    f.add(f.row_ge(cur.clone(), closed([k(4), k(1), k(3)])))
        .unwrap();
    let now = f.s.resolve_row(&cur).unwrap();
    assert!(!now.is_closed(), "{now}");
    assert_eq!((&now.dims[0], &now.dims[2]), (&k(4), &k(3)), "{now}");
    assert!(matches!(now.dims[1], Dim::Var(_)), "{now}");
    assert_eq!(sizes(&f.finalize(), &cur), vec![4, 1, 3]);
}

#[test]
fn an_operand_row_below_a_closed_row_takes_its_axes_at_finalization() {
    // `x` is a leaf: it takes the largest shape its uses allow.
    insta::assert_snapshot!(infer(r"
        input w: 2,3->5
        param x
        y = w @ x
        require y: |->5
    "), @r"
        w : |2, 3->5
        x : |->2, 3
        y : |->5
        ");
}

#[test]
fn leading_axes_line_up_through_row_variables() {
    insta::assert_snapshot!(infer(r#"
        input a: 2,3,4,5
        p = permute("..r..ij=>..r..ji", a)
        s = permute("..r..ij=>ij", a)
    "#), @r"
        a : |->2, 3, 4, 5
        p : |->2, 3, 5, 4
        s : |->4, 5
        ");
}

#[test]
fn errors_from_stored_row_inequalities_name_the_right_axis() {
    // [..r.., 5, 4] >= [..q.., 4] matches the last axis and stores the rest.
    let mut f = Fixture::new();
    let (r, q) = (f.row(), f.row());
    f.add(f.row_ge(open(r, [k(5), k(4)]), open(q, [k(4)])))
        .unwrap();
    // q = [7] now meets the 5, which is axis -2 of the rows.
    let err = f.add(f.row_eq(open(q, []), closed([k(7)]))).unwrap_err();
    assert!(
        matches!(err, ShapeError::DimMismatch { axis: Some(a), .. } if a.python_index() == -2),
        "{err}"
    );
    assert!(err.to_string().contains("axis -2"), "{err}");
}

/// Broadcasting constraints among row variables whose lengths add up to
/// `rank(r1) >= rank(r1) + 3`: no finite rows satisfy them. Each expansion
/// with fresh axes rebuilt the cycle on new variables with more constraints
/// than before, so this once ran for hours (found by the order-independence
/// property); it is an error in every order, and the message names the
/// constraints on the cycle.
#[test]
fn a_cycle_of_broadcasts_that_adds_axes_is_an_error_in_every_order() {
    let mut f = Fixture::new();
    let (r0, r1, r2) = (f.row(), f.row(), f.row());
    let (d1, d3, d5) = (f.dim(), f.dim(), f.dim());
    let ge = |f: &mut Fixture, what, cur, subr| {
        let why = f.named(what);
        shape_solver::Constraint::RowIneq { cur, subr, why }
    };
    let cs = [
        // rank(r0) + 1 >= rank(r1)
        ge(&mut f, "c0", open(r0, [v(d3)]), open(r1, [])),
        // rank(r2) + 2 >= rank(r1)
        ge(&mut f, "c1", open(r2, [v(d5), v(d1)]), open(r1, [])),
        // rank(r2) >= rank(r0) + 2
        ge(&mut f, "c2", open(r2, []), open(r0, [k(3), k(4)])),
        // rank(r1) >= rank(r2) + 2
        ge(&mut f, "c3", open(r1, []), open(r2, [v(d3), v(d5)])),
    ];
    let mut first = String::new();
    for order in permutations(cs.len()) {
        let mut t = f.s.clone();
        let failed = order
            .iter()
            .map(|&i| t.add(cs[i].clone()))
            .find_map(Result::err)
            .unwrap_or_else(|| panic!("order {order:?} was accepted"));
        assert!(
            matches!(failed, ShapeError::InfiniteAxes { .. }),
            "order {order:?}: {failed}"
        );
        if order == [0, 1, 2, 3] {
            first = failed.to_string();
        }
    }
    insta::assert_snapshot!(first, @"infinite number of axes in the constraint c3: the leading axes of a row would have to contain themselves plus more axes ([...] >= [..., 3, 4, ?, ?], and through the constraint c2, then the constraint c0, the operand's leading axes already number at least the row's minus 1: a cycle of broadcasting constraints that adds 3 axes on every round)");
}

// ----- axes before a row variable (leading flanks) -------------------------

#[test]
fn axes_may_stand_before_and_after_a_row_variable() {
    insta::assert_snapshot!(infer(r"
        input x: 5, ..r.., 7
        require x: 5, 6, 6, 7
    "), @"x : |->5, 6, 6, 7");
    // A flank that does not fit is a conflict with both origins.
    let out = infer("input x: 5, ..r..\nrequire x: 4, 6");
    assert!(out.starts_with("error[dim_mismatch]"), "{out}");
    assert!(
        out.contains("\"5, ..r..\"") && out.contains("\"4, 6\""),
        "{out}"
    );
    // A flank longer than the row.
    let out = infer("input x: 5, 6, ..r..\nrequire x: 5");
    assert!(out.starts_with("error[axis_count_mismatch]"), "{out}");
}

#[test]
fn a_permute_rotates_a_row_through_its_row_variable() {
    // The issue's example: the last axis moves to the front.
    insta::assert_snapshot!(infer(r#"
        input t: |2, 3, 4
        r = permute("|..m.., n=>|n, ..m..", t)
    "#), @r"
    t : |->2, 3, 4
    r : |->4, 2, 3
    ");
    // Backwards, from a required result to a parameter, both ends moving.
    insta::assert_snapshot!(infer(r#"
        param w
        r = permute("a, ..m.., n=>n, ..m.., a", w)
        require r: 4, 2, 3, 5
    "#), @r"
    w : |->5, 2, 3, 4
    r : |->4, 2, 3, 5
    ");
}

#[test]
fn a_leading_flank_broadcasts_aligned_at_the_outer_edge() {
    // `w`'s leading 3 lines up with the first axis of `x`, the row
    // variable takes the middle.
    insta::assert_snapshot!(infer(r"
        param w: 3, ..r..
        input x: 2|3, 4, 5
        y = w * x
    "), @r"
    w : |->3, 4, 5
    x : 2|->3, 4, 5
    y : 2|->3, 4, 5
    ");
    insta::assert_snapshot!(infer(r"
        input a: 2, ..r..
        input c: 2, 3, 4
        y = a + c
    "), @r"
    a : |->2, 3, 4
    c : |->2, 3, 4
    y : |->2, 3, 4
    ");
}

#[test]
fn a_leading_flank_gives_the_same_shapes_in_every_order() {
    // Flanks are first-axis constraints: the shapes may not depend on the
    // order in which they meet the sizes.
    let mut f = Fixture::new();
    let r = f.row();
    let s = f.row();
    let a = f.dim();
    let facts = [
        Constraint::DropFirst {
            whole: open(s, []),
            rest: open(r, []),
            first: Some(v(a)),
            why: f.why,
        },
        f.row_eq(open(s, [k(7)]), closed([k(5), k(6), k(6), k(7)])),
        f.row_ge(open(r, []), closed([k(6)])),
    ];
    for order in permutations(facts.len()) {
        let mut g = Fixture::new();
        let (r2, s2, a2) = (g.row(), g.row(), g.dim());
        assert_eq!((r2, s2, a2), (r, s, a));
        for &i in &order {
            g.add(facts[i].clone()).unwrap();
        }
        let sol = g.s.finalize().unwrap();
        assert_eq!(sol.dim(&v(a)).unwrap().size(), 5, "{order:?}");
        let sizes: Vec<u64> = sol
            .row(&open(r, []))
            .unwrap()
            .iter()
            .map(|d| d.size())
            .collect();
        assert_eq!(sizes, [6, 6], "{order:?}");
    }
}

/// A row that carries its own element count (`Row::with_constraint`)
/// imposes it once a constraint uses the row: the count decides the one
/// unknown size, and a count the sizes cannot meet is `total_elems`.
#[test]
fn a_row_carrying_an_element_count_imposes_it_when_used() {
    use shape_core::RowConstraint;
    let count = |n: u64| RowConstraint::TotalElems(n.try_into().unwrap());
    let mut f = Fixture::new();
    let (d, r, result) = (f.dim(), f.row(), f.row());
    let counted = open(r, [v(d), k(3)]).with_constraint(count(12));
    f.s.add(Constraint::RowEq {
        a: Row::open(r, vec![]),
        b: closed([]),
        why: f.why,
    })
    .unwrap();
    f.s.add(Constraint::RowIneq {
        cur: open(result, []),
        subr: counted.clone(),
        why: f.why,
    })
    .unwrap();
    let sol = f.s.finalize().unwrap();
    assert_eq!(sizes(&sol, &counted), vec![4, 3]);
    // A count the known sizes do not divide.
    let mut f = Fixture::new();
    let (r, result) = (f.row(), f.row());
    let err =
        f.s.add(Constraint::RowIneq {
            cur: open(result, []),
            subr: open(r, [k(5)]).with_constraint(count(12)),
            why: f.why,
        })
        .and_then(|_| f.s.finalize().map(|_| ()))
        .unwrap_err();
    assert_eq!(err.kind(), "total_elems", "{err}");
}
