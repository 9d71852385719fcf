//! Every rule of the constraint semantics, checked on small cases with the
//! values worked out by hand.

use shape_core::{Dim, KnownDim, Label, Row, RowKind};
use shape_solver::{
    Constraint, Graph, GraphError, Origin, Relation, ShapeError, Solver, TotalElemsReason, Why,
};

fn k(n: u64) -> Dim {
    Dim::known(n).unwrap()
}

fn kl(n: u64, l: &str) -> Dim {
    Dim::Known(KnownDim::of(n).unwrap().with_label(Some(Label::new(l))))
}

fn why(s: &mut Solver) -> Why {
    Why::of(s.add_origin(Origin::Direct {
        what: "test".into(),
    }))
}

fn sizes(s: &shape_solver::Solution, r: &Row) -> Vec<u64> {
    s.row(r).unwrap().iter().map(KnownDim::size).collect()
}

fn dim_ineq(cur: Dim, subr: Dim) -> Result<(), ShapeError> {
    let mut s = Solver::new();
    let why = why(&mut s);
    s.add(Constraint::DimIneq { cur, subr, why })
}

#[test]
fn ground_dim_inequality_holds_iff_equal_or_operand_is_one() {
    assert!(dim_ineq(k(5), k(5)).is_ok());
    assert!(dim_ineq(k(5), k(1)).is_ok());
    assert!(dim_ineq(k(1), k(1)).is_ok());
    assert!(matches!(
        dim_ineq(k(1), k(5)),
        Err(ShapeError::DimMismatch {
            relation: Relation::Broadcasts,
            ..
        })
    ));
    assert!(matches!(
        dim_ineq(k(3), k(5)),
        Err(ShapeError::DimMismatch { .. })
    ));
}

#[test]
fn dim_equality_of_known_sizes() {
    let mut s = Solver::new();
    let w = why(&mut s);
    assert!(s
        .add(Constraint::DimEq {
            a: k(4),
            b: k(4),
            why: w
        })
        .is_ok());
    let err = s
        .add(Constraint::DimEq {
            a: k(4),
            b: k(1),
            why: w,
        })
        .unwrap_err();
    assert!(matches!(
        err,
        ShapeError::DimMismatch {
            relation: Relation::Equal,
            ..
        }
    ));
}

#[test]
fn variable_above_a_size_greater_than_one_takes_it() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let v = s.fresh_dim();
    s.add(Constraint::DimIneq {
        cur: Dim::Var(v),
        subr: k(7),
        why: w,
    })
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(v)).unwrap(), k(7));
}

#[test]
fn variable_above_one_stays_free_and_finalizes_to_one() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let v = s.fresh_dim();
    s.add(Constraint::DimIneq {
        cur: Dim::Var(v),
        subr: k(1),
        why: w,
    })
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(v)).unwrap(), Dim::Var(v));
    assert_eq!(s.finalize().unwrap().dim(&Dim::Var(v)).unwrap().size(), 1);
}

#[test]
fn variable_below_one_is_one() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let v = s.fresh_dim();
    s.add(Constraint::DimIneq {
        cur: k(1),
        subr: Dim::Var(v),
        why: w,
    })
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(v)).unwrap(), k(1));
}

#[test]
fn least_upper_bound_is_kept_and_finalization_takes_it() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let v = s.fresh_dim();
    s.add(Constraint::DimIneq {
        cur: k(6),
        subr: Dim::Var(v),
        why: w,
    })
    .unwrap();
    s.add(Constraint::DimIneq {
        cur: k(6),
        subr: Dim::Var(v),
        why: w,
    })
    .unwrap();
    // Still open: it could be 1 or 6.
    assert_eq!(s.resolve_dim(&Dim::Var(v)).unwrap(), Dim::Var(v));
    assert_eq!(s.finalize().unwrap().dim(&Dim::Var(v)).unwrap().size(), 6);
}

#[test]
fn two_different_upper_bounds_force_one() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let v = s.fresh_dim();
    s.add(Constraint::DimIneq {
        cur: k(3),
        subr: Dim::Var(v),
        why: w,
    })
    .unwrap();
    s.add(Constraint::DimIneq {
        cur: k(5),
        subr: Dim::Var(v),
        why: w,
    })
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(v)).unwrap(), k(1));
}

#[test]
fn bounds_pass_along_chains_of_variables() {
    // 5 >= a >= b: b's least upper bound is 5 as well.
    let mut s = Solver::new();
    let w = why(&mut s);
    let (a, b) = (s.fresh_dim(), s.fresh_dim());
    s.add(Constraint::DimIneq {
        cur: Dim::Var(a),
        subr: Dim::Var(b),
        why: w,
    })
    .unwrap();
    s.add(Constraint::DimIneq {
        cur: k(5),
        subr: Dim::Var(a),
        why: w,
    })
    .unwrap();
    let sol = s.finalize().unwrap();
    assert_eq!(sol.dim(&Dim::Var(a)).unwrap().size(), 5);
    assert_eq!(sol.dim(&Dim::Var(b)).unwrap().size(), 5);
    // And a conflict further down the chain is found: 3 >= b contradicts 5 >= b
    // only by forcing b = 1, and then a >= 1 still holds.
    s.add(Constraint::DimIneq {
        cur: k(3),
        subr: Dim::Var(b),
        why: w,
    })
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(b)).unwrap(), k(1));
}

#[test]
fn a_lower_bound_greater_than_one_travels_up() {
    // a >= b and b = 4 give a = 4.
    let mut s = Solver::new();
    let w = why(&mut s);
    let (a, b) = (s.fresh_dim(), s.fresh_dim());
    s.add(Constraint::DimIneq {
        cur: Dim::Var(a),
        subr: Dim::Var(b),
        why: w,
    })
    .unwrap();
    s.add(Constraint::DimEq {
        a: Dim::Var(b),
        b: k(4),
        why: w,
    })
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(a)).unwrap(), k(4));
}

#[test]
fn labels_must_agree_and_unlabeled_sizes_inherit_them() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let v = s.fresh_dim();
    s.add(Constraint::DimEq {
        a: Dim::Var(v),
        b: k(3),
        why: w,
    })
    .unwrap();
    s.add(Constraint::DimEq {
        a: Dim::Var(v),
        b: kl(3, "rgb"),
        why: w,
    })
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(v)).unwrap(), kl(3, "rgb"));
    let err = s
        .add(Constraint::DimEq {
            a: Dim::Var(v),
            b: kl(3, "hsv"),
            why: w,
        })
        .unwrap_err();
    assert!(matches!(err, ShapeError::LabelMismatch { .. }), "{err}");
    // A size-1 operand broadcasts whatever its label.
    assert!(dim_ineq(kl(3, "rgb"), kl(1, "x")).is_ok());
}

#[test]
fn row_equality_binds_the_row_variable_to_the_leading_surplus() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let (r, d) = (s.fresh_row(), s.fresh_dim());
    let open = Row::open(r, vec![Dim::Var(d)]);
    s.add(Constraint::RowEq {
        a: open.clone(),
        b: Row::closed(vec![k(2), k(3), k(4)]),
        why: w,
    })
    .unwrap();
    assert_eq!(
        s.resolve_row(&open).unwrap(),
        Row::closed(vec![k(2), k(3), k(4)])
    );
}

#[test]
fn row_equality_of_closed_rows_needs_equal_axis_counts() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let err = s
        .add(Constraint::RowEq {
            a: Row::closed(vec![k(2)]),
            b: Row::closed(vec![k(2), k(2)]),
            why: w,
        })
        .unwrap_err();
    assert!(matches!(
        err,
        ShapeError::AxisCountMismatch {
            left_len: 1,
            right_len: 2,
            ..
        }
    ));
}

#[test]
fn row_equality_with_itself_plus_axes_is_infinite() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let r = s.fresh_row();
    let err = s
        .add(Constraint::RowEq {
            a: Row::open(r, vec![]),
            b: Row::open(r, vec![k(2)]),
            why: w,
        })
        .unwrap_err();
    assert!(matches!(err, ShapeError::InfiniteAxes { .. }));
    // Through a second variable too.
    let q = s.fresh_row();
    s.add(Constraint::RowEq {
        a: Row::open(q, vec![]),
        b: Row::open(r, vec![k(2)]),
        why: w,
    })
    .unwrap();
    let err = s
        .add(Constraint::RowEq {
            a: Row::open(r, vec![]),
            b: Row::open(q, vec![]),
            why: w,
        })
        .unwrap_err();
    assert!(matches!(err, ShapeError::InfiniteAxes { .. }));
}

#[test]
fn ground_row_inequality() {
    let check = |cur: Vec<u64>, subr: Vec<u64>| {
        let mut s = Solver::new();
        let w = why(&mut s);
        s.add(Constraint::RowIneq {
            cur: Row::closed(cur.into_iter().map(k).collect()),
            subr: Row::closed(subr.into_iter().map(k).collect()),
            why: w,
        })
    };
    assert!(check(vec![5, 2, 3], vec![2, 3]).is_ok());
    assert!(check(vec![5, 2, 3], vec![1, 3]).is_ok());
    assert!(check(vec![5, 2, 3], vec![5, 1, 1]).is_ok());
    assert!(matches!(
        check(vec![2, 3], vec![5, 2, 3]),
        Err(ShapeError::AxisCountMismatch { .. })
    ));
    assert!(matches!(
        check(vec![2, 3], vec![2, 4]),
        Err(ShapeError::DimMismatch { axis: Some(0), .. })
    ));
}

#[test]
fn open_result_row_gets_a_template_of_the_operand_axes() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let r = s.fresh_row();
    let cur = Row::open(r, vec![]);
    s.add(Constraint::RowIneq {
        cur: cur.clone(),
        subr: Row::closed(vec![k(4), k(1), k(3)]),
        why: w,
    })
    .unwrap();
    let now = s.resolve_row(&cur).unwrap();
    assert_eq!(now.dims.len(), 3, "{now}");
    assert!(!now.is_closed());
    assert_eq!(now.dims[0], k(4));
    assert!(matches!(now.dims[1], Dim::Var(_)));
    assert_eq!(now.dims[2], k(3));
    assert_eq!(sizes(&s.finalize().unwrap(), &cur), vec![4, 1, 3]);
}

#[test]
fn operand_row_variable_below_a_closed_row_takes_its_axes_at_finalization() {
    // [2, 3] >= [..r..]: the operand is a leaf, so it takes the largest shape.
    let mut s = Solver::new();
    let w = why(&mut s);
    let r = s.fresh_row();
    let subr = Row::open(r, vec![]);
    s.add(Constraint::RowIneq {
        cur: Row::closed(vec![k(2), k(3)]),
        subr: subr.clone(),
        why: w,
    })
    .unwrap();
    assert_eq!(sizes(&s.finalize().unwrap(), &subr), vec![2, 3]);
}

#[test]
fn unconstrained_row_variables_finalize_empty_and_dims_to_one() {
    let mut s = Solver::new();
    let (r, d) = (s.fresh_row(), s.fresh_dim());
    let row = Row::open(r, vec![Dim::Var(d)]);
    assert_eq!(sizes(&s.finalize().unwrap(), &row), vec![1]);
}

#[test]
fn total_elems_solves_the_one_unknown() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let d = s.fresh_dim();
    let row = Row::closed(vec![k(2), Dim::Var(d), k(3)]);
    s.add(Constraint::TotalElems {
        row: row.clone(),
        total: 24.try_into().unwrap(),
        why: w,
    })
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(d)).unwrap(), k(4));
}

#[test]
fn total_elems_that_do_not_divide_fail() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let d = s.fresh_dim();
    let row = Row::closed(vec![k(5), Dim::Var(d)]);
    let err = s
        .add(Constraint::TotalElems {
            row,
            total: 24.try_into().unwrap(),
            why: w,
        })
        .unwrap_err();
    assert!(
        matches!(
            err,
            ShapeError::TotalElems {
                total: 24,
                known_product: 5,
                reason: TotalElemsReason::NotDivisible,
                ..
            }
        ),
        "{err}"
    );
    let err = s
        .add(Constraint::TotalElems {
            row: Row::closed(vec![k(2), k(3)]),
            total: 12.try_into().unwrap(),
            why: w,
        })
        .unwrap_err();
    assert!(matches!(
        err,
        ShapeError::TotalElems {
            reason: TotalElemsReason::NotEqual,
            ..
        }
    ));
}

#[test]
fn total_elems_waits_for_the_row_to_close() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let (r, d) = (s.fresh_row(), s.fresh_dim());
    let row = Row::open(r, vec![Dim::Var(d)]);
    s.add(Constraint::TotalElems {
        row: row.clone(),
        total: 12.try_into().unwrap(),
        why: w,
    })
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(d)).unwrap(), Dim::Var(d));
    s.add(Constraint::RowEq {
        a: row.clone(),
        b: Row::closed(vec![k(3), Dim::Var(d)]),
        why: w,
    })
    .unwrap();
    assert_eq!(s.resolve_dim(&Dim::Var(d)).unwrap(), k(4));
    // Finalization closes the row empty, which leaves one unknown too.
    let mut s = Solver::new();
    let (r, d) = (s.fresh_row(), s.fresh_dim());
    let w = why(&mut s);
    let row = Row::open(r, vec![Dim::Var(d)]);
    s.add(Constraint::TotalElems {
        row: row.clone(),
        total: 12.try_into().unwrap(),
        why: w,
    })
    .unwrap();
    assert_eq!(sizes(&s.finalize().unwrap(), &row), vec![12]);
}

#[test]
fn total_elems_with_two_unknowns_is_underdetermined() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let (a, b) = (s.fresh_dim(), s.fresh_dim());
    let row = Row::closed(vec![Dim::Var(a), Dim::Var(b)]);
    s.add(Constraint::TotalElems {
        row,
        total: 12.try_into().unwrap(),
        why: w,
    })
    .unwrap();
    assert!(matches!(
        s.finalize(),
        Err(ShapeError::Underdetermined {
            unknowns: 2,
            total: 12,
            ..
        })
    ));
    // Knowing one of them settles it.
    s.add(Constraint::DimEq {
        a: Dim::Var(a),
        b: k(3),
        why: w,
    })
    .unwrap();
    assert_eq!(s.finalize().unwrap().dim(&Dim::Var(b)).unwrap().size(), 4);
}

#[test]
fn failed_constraints_leave_the_solver_unchanged() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let (a, b) = (s.fresh_dim(), s.fresh_dim());
    let before = s.resolve_dim(&Dim::Var(a)).unwrap();
    let err = s.add_all([
        Constraint::DimEq {
            a: Dim::Var(a),
            b: k(3),
            why: w,
        },
        Constraint::DimEq {
            a: Dim::Var(b),
            b: Dim::Var(a),
            why: w,
        },
        Constraint::DimEq {
            a: Dim::Var(b),
            b: k(4),
            why: w,
        },
    ]);
    assert!(err.is_err());
    assert_eq!(s.resolve_dim(&Dim::Var(a)).unwrap(), before);
}

#[test]
fn forks_are_independent() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let v = s.fresh_dim();
    let mut fork = s.clone();
    fork.add(Constraint::DimEq {
        a: Dim::Var(v),
        b: k(8),
        why: w,
    })
    .unwrap();
    assert_eq!(fork.resolve_dim(&Dim::Var(v)).unwrap(), k(8));
    assert_eq!(s.resolve_dim(&Dim::Var(v)).unwrap(), Dim::Var(v));
}

#[test]
fn foreign_variables_are_errors_not_panics() {
    let s = Solver::new();
    let foreign = Dim::Var(shape_core::DimVar(99));
    assert!(matches!(
        s.resolve_dim(&foreign),
        Err(ShapeError::UnknownVariable { .. })
    ));
    let mut s = Solver::new();
    let w = why(&mut s);
    assert!(s
        .add(Constraint::DimEq {
            a: foreign,
            b: k(1),
            why: w
        })
        .is_err());
}

// ----- operations through the graph API -----------------------------------

fn shape_of(g: &Graph, t: shape_solver::TensorId) -> String {
    g.solve().unwrap().shape(t).unwrap().to_string()
}

#[test]
fn pointwise_binary_broadcasts_like_numpy_in_every_row() {
    let mut g = Graph::new();
    let a = g.input("a", "5,1|3->2,1").unwrap();
    let b = g.input("b", "4|1->1,7").unwrap();
    let c = g.add(a, b).unwrap();
    assert_eq!(shape_of(&g, c), "5, 4|3->2, 7");
}

#[test]
fn pointwise_binary_conflict_names_both_tensors() {
    let mut g = Graph::new();
    let a = g.input("a", "3").unwrap();
    let b = g.input("b", "4").unwrap();
    let err = g.add(a, b).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("`a`") && msg.contains("`b`"), "{msg}");
    assert!(matches!(
        err,
        GraphError::Shape(ShapeError::DimMismatch { .. })
    ));
    // The graph is unchanged by the failed call.
    assert_eq!(g.num_ops(), 0);
    assert_eq!(g.num_tensors(), 2);
}

#[test]
fn pointwise_unary_keeps_the_shape() {
    let mut g = Graph::new();
    let a = g.input("a", "2|3->4").unwrap();
    let b = g.unary("relu", a).unwrap();
    assert_eq!(shape_of(&g, b), "2|3->4");
}

#[test]
fn compose_is_matrix_multiplication_with_broadcast_batch() {
    let mut g = Graph::new();
    let w = g.input("w", "7|3->4").unwrap();
    let x = g.input("x", "1|2->3").unwrap();
    let y = g.compose(w, x).unwrap();
    assert_eq!(shape_of(&g, y), "7|2->4");
    let bad = g.input("bad", "5").unwrap();
    assert!(g.compose(w, bad).is_err());
}

#[test]
fn compose_infers_parameter_input_axes() {
    let mut g = Graph::new();
    let x = g.input("x", "8|28,28").unwrap();
    let w = g.parameter("w").unwrap();
    let b = g.parameter_with_spec("b", "10").unwrap();
    let y = g.compose(w, x).unwrap();
    let y = g.add(y, b).unwrap();
    let s = g.solve().unwrap();
    assert_eq!(s.shape(w).unwrap().to_string(), "|28, 28->10");
    assert_eq!(s.shape(y).unwrap().to_string(), "8|->10");
}

#[test]
fn transpose_swaps_input_and_output() {
    let mut g = Graph::new();
    let a = g.input("a", "2|3->4").unwrap();
    let t = g.transpose(a).unwrap();
    assert_eq!(shape_of(&g, t), "2|4->3");
}

#[test]
fn batch_slice_drops_the_leftmost_batch_axis() {
    let mut g = Graph::new();
    let a = g.input("a", "5,6|3->4").unwrap();
    let s = g.batch_slice(a).unwrap();
    assert_eq!(shape_of(&g, s), "6|3->4");
    let no_batch = g.input("n", "3->4").unwrap();
    let err = g.batch_slice(no_batch).unwrap_err();
    assert!(
        matches!(err, GraphError::Shape(ShapeError::NothingToSlice { .. })),
        "{err}"
    );
}

#[test]
fn batch_slice_of_a_parameter_waits_for_its_batch_row() {
    let mut g = Graph::new();
    let p = g.parameter_with_spec("p", "..b..|2").unwrap();
    let s = g.batch_slice(p).unwrap();
    let x = g.input("x", "3,4|2").unwrap();
    let _ = g.add(p, x).unwrap();
    assert_eq!(shape_of(&g, s), "4|->2");
}

#[test]
fn einsum_contraction_and_reduction() {
    let mut g = Graph::new();
    let a = g.input("a", "2,3").unwrap();
    let b = g.input("b", "3,5").unwrap();
    let c = g.einsum("ij;jk=>ik", &[a, b]).unwrap();
    assert_eq!(shape_of(&g, c), "|->2, 5");
    let r = g.permute("ij=>i", a).unwrap();
    assert_eq!(shape_of(&g, r), "|->2");
    let bad = g.input("bad", "4,5").unwrap();
    assert!(g.einsum("ij;jk=>ik", &[a, bad]).is_err());
}

#[test]
fn einsum_infers_a_parameter_from_the_spec() {
    let mut g = Graph::new();
    let x = g.input("x", "b|s,d").unwrap();
    let w = g.parameter("w").unwrap();
    g.require(x, "8|16,32").unwrap();
    let y = g.einsum("b|s,d;d->e=>b|s,e", &[x, w]).unwrap();
    g.require(y, "8|16,64").unwrap();
    let s = g.solve().unwrap();
    assert_eq!(s.shape(w).unwrap().to_string(), "|32->64");
    assert_eq!(s.shape(y).unwrap().to_string(), "8|->16, 64");
}

#[test]
fn einsum_row_variables_line_up_leading_axes() {
    let mut g = Graph::new();
    let a = g.input("a", "2,3,4,5").unwrap();
    let p = g.permute("..r..ij=>..r..ji", a).unwrap();
    assert_eq!(shape_of(&g, p), "|->2, 3, 5, 4");
    let s = g.permute("..r..ij=>ij", a).unwrap();
    assert_eq!(shape_of(&g, s), "|->4, 5");
}

#[test]
fn einsum_fixed_sizes_are_checked() {
    let mut g = Graph::new();
    let a = g.input("a", "2,3").unwrap();
    assert!(g.permute("i3=>i", a).is_ok());
    let err = g.permute("i4=>i", a).unwrap_err();
    assert!(
        matches!(err, GraphError::Shape(ShapeError::DimMismatch { .. })),
        "{err}"
    );
}

#[test]
fn einsum_with_the_wrong_operand_count_is_an_error() {
    let mut g = Graph::new();
    let a = g.input("a", "2").unwrap();
    assert!(matches!(
        g.einsum("i;i=>i", &[a]),
        Err(GraphError::Arity {
            expected: 2,
            found: 1,
            ..
        })
    ));
    assert!(g.einsum("i;i=>", &[a, a]).is_ok());
    assert!(matches!(
        g.einsum("i;i=>x", &[a, a]),
        Err(GraphError::Spec { .. })
    ));
}

#[test]
fn constants_infer_their_last_unknown_from_the_element_count() {
    let mut g = Graph::new();
    let c = g.constant("c", "2|3->k", 24).unwrap();
    assert_eq!(shape_of(&g, c), "2|3->4");
    assert!(matches!(
        g.constant("bad", "5->k", 24),
        Err(GraphError::Constant { .. })
    ));
    assert!(matches!(
        g.constant("bad", "k->3", 24),
        Err(GraphError::Constant { .. })
    ));
    let err = g.constant("bad", "2->5", 12).unwrap_err();
    assert!(
        matches!(err, GraphError::Shape(ShapeError::TotalElems { .. })),
        "{err}"
    );
}

#[test]
fn provenance_names_the_declaration_that_fixed_a_size() {
    let mut g = Graph::new();
    let x = g.input("x", "8|784").unwrap();
    let w = g.parameter("w").unwrap();
    let _y = g.compose(w, x).unwrap();
    let s = g.solve().unwrap();
    let p = s.explain(w, RowKind::Input, 0).unwrap();
    assert_eq!(p.value.size(), 784);
    assert!(
        p.source
            .to_string()
            .contains("declared shape \"8|784\" of `x`"),
        "{}",
        p.source
    );
    assert!(p.via.iter().any(|o| o.op().is_some()), "{:?}", p.via);
    let err = s.explain(w, RowKind::Input, 1).unwrap_err();
    assert!(
        matches!(
            err,
            GraphError::NoSuchAxis {
                axis: 1,
                len: 1,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "`w` has no input axis 1: its input row has length 1 (axes count from 0)"
    );
}

#[test]
fn unknown_tensor_ids_are_errors() {
    let mut g = Graph::new();
    let mut other = Graph::new();
    let a = other.input("a", "2").unwrap();
    let _ = other.input("b", "2").unwrap();
    let b = other.input("c", "2").unwrap();
    let _ = g.input("x", "2").unwrap();
    assert!(matches!(g.add(a, b), Err(GraphError::UnknownTensor(2))));
    assert!(g.shape(b).is_err());
}

// ----- regressions from review --------------------------------------------

#[test]
fn a_clone_made_inside_a_transaction_rolls_back_on_its_own() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let v = s.fresh_dim();
    let _: Result<(), ShapeError> = s.transaction(|s| {
        let mut fork = s.clone();
        let err = fork.add_all([
            Constraint::DimEq {
                a: Dim::Var(v),
                b: k(3),
                why: w,
            },
            Constraint::DimEq {
                a: Dim::Var(v),
                b: k(4),
                why: w,
            },
        ]);
        assert!(err.is_err());
        assert_eq!(fork.resolve_dim(&Dim::Var(v)).unwrap(), Dim::Var(v));
        Ok(())
    });
}

#[test]
fn element_counts_over_many_unknowns_do_not_multiply_work() {
    let mut s = Solver::new();
    let w = why(&mut s);
    let vars: Vec<_> = (0..24).map(|_| s.fresh_dim()).collect();
    let row = Row::closed(vars.iter().map(|&v| Dim::Var(v)).collect());
    s.add(Constraint::TotalElems {
        row,
        total: 2.try_into().unwrap(),
        why: w,
    })
    .unwrap();
    for &v in &vars[..23] {
        s.add(Constraint::DimEq {
            a: Dim::Var(v),
            b: k(1),
            why: w,
        })
        .unwrap();
    }
    assert_eq!(s.resolve_dim(&Dim::Var(vars[23])).unwrap(), k(2));
    // Quadratic at worst, never exponential.
    assert!(s.steps() < 5_000, "{} steps", s.steps());
}

#[test]
fn errors_from_stored_row_inequalities_name_the_right_axis() {
    // [..r.., 5, 4] >= [..q.., 4] matches the last axis and stores the rest.
    let mut s = Solver::new();
    let w = why(&mut s);
    let (r, q) = (s.fresh_row(), s.fresh_row());
    s.add(Constraint::RowIneq {
        cur: Row::open(r, vec![k(5), k(4)]),
        subr: Row::open(q, vec![k(4)]),
        why: w,
    })
    .unwrap();
    // q = [7] now meets the 5, which is axis -2 of the rows.
    let err = s
        .add(Constraint::RowEq {
            a: Row::open(q, vec![]),
            b: Row::closed(vec![k(7)]),
            why: w,
        })
        .unwrap_err();
    assert!(
        matches!(err, ShapeError::DimMismatch { axis: Some(1), .. }),
        "{err}"
    );
    assert!(err.to_string().contains("axis -2"), "{err}");
}

#[test]
fn an_element_count_without_an_integer_root_says_so() {
    let mut g = Graph::new();
    let err = g.constant("c", "k, k", 12).unwrap_err();
    assert!(
        matches!(
            err,
            GraphError::Shape(ShapeError::TotalElems {
                reason: TotalElemsReason::NoIntegerRoot { power: 2 },
                ..
            })
        ),
        "{err}"
    );
    assert!(g.constant("c", "k, k", 16).is_ok());
}

#[test]
fn a_batch_slice_that_shares_its_row_variable_is_an_error() {
    let mut g = Graph::new();
    let t0 = g.input("t0", "..b..|3").unwrap();
    let t1 = g.batch_slice(t0).unwrap();
    let err = g.einsum("i;i=>i", &[t0, t1]).unwrap_err();
    assert!(
        matches!(err, GraphError::Shape(ShapeError::InfiniteAxes { .. })),
        "{err}"
    );
    // The failed call left nothing behind: the slice still works.
    g.require(t0, "4,5|3").unwrap();
    assert_eq!(g.solve().unwrap().shape(t1).unwrap().to_string(), "5|->3");
}

#[test]
fn huge_sizes_are_errors_not_overflows() {
    let mut g = Graph::new();
    let big = u64::MAX.to_string();
    let err = g
        .constant("c", &format!("{big}, {big}, {big}->k"), 12)
        .unwrap_err();
    assert!(matches!(err, GraphError::Constant { .. }), "{err}");
    let x = g.input("x", &format!("{big}, {big}, {big}")).unwrap();
    assert_eq!(g.solve().unwrap().shape(x).unwrap().num_elems(), None);
}

#[test]
fn a_literal_size_is_its_own_source() {
    let s = Solver::new();
    let sol = s.finalize().unwrap();
    let p = sol.provenance(&k(3)).unwrap();
    assert_eq!(p.value.size(), 3);
    assert!(p.source.to_string().contains("directly"), "{}", p.source);
}

#[test]
fn rows_above_a_pending_slice_wait_for_it() {
    // Found by the random program generator: `t5` broadcasts from the slice
    // `t3`, whose batch row is only known once `t2`'s is; closing `t5`'s
    // batch row first (to empty) used to contradict the slice.
    let mut g = Graph::new();
    let in0 = g.input("in0", "1,4|4->4").unwrap();
    let in1 = g.input("in1", "4->3").unwrap();
    let t2 = g.compose(in1, in0).unwrap();
    let t3 = g.batch_slice(t2).unwrap();
    let in2 = g.input("in2", "3->3").unwrap();
    let t5 = g.compose(in2, t3).unwrap();
    let in3 = g.input("in3", "3->2").unwrap();
    let _t9 = g.compose(in3, t2).unwrap();
    let s = g.solve().unwrap();
    assert_eq!(s.shape(t3).unwrap().to_string(), "4|4->3");
    assert_eq!(s.shape(t5).unwrap().to_string(), "4|4->3");
}

/// Broadcasting constraints among row variables whose lengths add up to
/// `rank(r1) >= rank(r1) + 3`: no finite rows satisfy them. Each expansion
/// with fresh axes rebuilt the cycle on new variables with more constraints
/// than before, so this once ran for hours (found by the order-independence
/// property); it is an error in every order, and the message names the
/// constraints on the cycle.
#[test]
fn a_cycle_of_broadcasts_that_adds_axes_is_an_error_in_every_order() {
    let mut s = Solver::new();
    let (r0, r1, r2) = (s.fresh_row(), s.fresh_row(), s.fresh_row());
    let (d1, d3, d5) = (s.fresh_dim(), s.fresh_dim(), s.fresh_dim());
    let named = |s: &mut Solver, what: &str| {
        Why::of(s.add_origin(Origin::Direct {
            what: what.to_owned().into(),
        }))
    };
    let v = |d: shape_core::DimVar| Dim::Var(d);
    let cs = [
        // rank(r0) + 1 >= rank(r1)
        Constraint::RowIneq {
            cur: Row::open(r0, vec![v(d3)]),
            subr: Row::open(r1, vec![]),
            why: named(&mut s, "c0"),
        },
        // rank(r2) + 2 >= rank(r1)
        Constraint::RowIneq {
            cur: Row::open(r2, vec![v(d5), v(d1)]),
            subr: Row::open(r1, vec![]),
            why: named(&mut s, "c1"),
        },
        // rank(r2) >= rank(r0) + 2
        Constraint::RowIneq {
            cur: Row::open(r2, vec![]),
            subr: Row::open(r0, vec![k(3), k(4)]),
            why: named(&mut s, "c2"),
        },
        // rank(r1) >= rank(r2) + 2
        Constraint::RowIneq {
            cur: Row::open(r1, vec![]),
            subr: Row::open(r2, vec![v(d3), v(d5)]),
            why: named(&mut s, "c3"),
        },
    ];
    let mut messages = Vec::new();
    for order in permutations(cs.len()) {
        let mut t = s.clone();
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
            messages.push(failed.to_string());
        }
    }
    insta::assert_snapshot!(messages.join("\n"));
}

/// `s` with all of `cs` added, in every order (each order with the state
/// it gave); every constraint must be accepted.
fn added_in_every_order(s: &Solver, cs: &[Constraint]) -> Vec<(Vec<usize>, Solver)> {
    permutations(cs.len())
        .into_iter()
        .map(|order| {
            let mut t = s.clone();
            for &i in &order {
                t.add(cs[i].clone())
                    .unwrap_or_else(|e| panic!("order {order:?}: {e}"));
            }
            (order, t)
        })
        .collect()
}

/// Every ordering of `0..n`.
fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for at in 0..=p.len() {
            let mut q = p.clone();
            q.insert(at, n - 1);
            out.push(q);
        }
    }
    out
}

/// An element count with two unknown sizes, `d4 * d0 = 4`, under two dims
/// that broadcast from them and are bounded by nothing else. Closing either
/// upper dim to 1 would decide the count (1 x 4 or 4 x 1) by which of the
/// two templates' fresh dims got the lower id, and so by the order of the
/// constraints (found by the order-independence property). The upper dims
/// wait with the count, which is then underdetermined in every order.
#[test]
fn dims_above_an_undecided_element_count_wait_for_it_in_every_order() {
    let mut s = Solver::new();
    let (r0, r2) = (s.fresh_row(), s.fresh_row());
    let (d0, d1, d4) = (s.fresh_dim(), s.fresh_dim(), s.fresh_dim());
    let w = why(&mut s);
    let v = |d: shape_core::DimVar| Dim::Var(d);
    let cs = [
        Constraint::RowEq {
            a: Row::open(r2, vec![]),
            b: Row::closed(vec![v(d4)]),
            why: w,
        },
        Constraint::DimIneq {
            cur: v(d0),
            subr: v(d1),
            why: w,
        },
        Constraint::RowIneq {
            cur: Row::open(r0, vec![]),
            subr: Row::open(r2, vec![v(d0)]),
            why: w,
        },
        Constraint::TotalElems {
            row: Row::closed(vec![v(d4), v(d0)]),
            total: 4.try_into().unwrap(),
            why: w,
        },
    ];
    for (order, t) in added_in_every_order(&s, &cs) {
        let err = t.finalize().unwrap_err();
        assert!(
            matches!(err, ShapeError::Underdetermined { unknowns: 2, .. }),
            "order {order:?}: {err}"
        );
    }
    // One more fact decides it, in every order.
    let mut t = s.clone();
    cs.iter().for_each(|c| t.add(c.clone()).unwrap());
    t.add(Constraint::DimEq {
        a: v(d0),
        b: k(2),
        why: w,
    })
    .unwrap();
    let sol = t.finalize().unwrap();
    assert_eq!(sizes(&sol, &Row::open(r2, vec![])), vec![2]);
    assert_eq!(sizes(&sol, &Row::open(r0, vec![])), vec![2, 2]);
}

/// Two row variables that bound each other in a cycle, each also at least
/// one axis long, so each is expanded by a template. Closing one of the
/// cycle's open variables first decided the lengths (`r0 = [1]`,
/// `r2 = [1, 1, 1]`, or `r0 = [1, 1]`, `r2 = [1]`), and which one was first
/// went by id, which for templates follows the order of the constraints
/// (found by the order-independence property). Rule 5 now closes all that
/// is left at once, the shortest rows the constraints allow.
#[test]
fn closing_a_cycle_of_row_bounds_does_not_depend_on_the_order() {
    let mut s = Solver::new();
    let (r0, _, r2) = (s.fresh_row(), s.fresh_row(), s.fresh_row());
    let d0 = Dim::Var(s.fresh_dim());
    let w = why(&mut s);
    let cs = [
        Constraint::RowIneq {
            cur: Row::open(r2, vec![d0.clone()]),
            subr: Row::open(r0, vec![]),
            why: w,
        },
        Constraint::RowIneq {
            cur: Row::open(r0, vec![d0.clone(), d0.clone()]),
            subr: Row::open(r2, vec![]),
            why: w,
        },
        Constraint::RowIneq {
            cur: Row::open(r2, vec![]),
            subr: Row::closed(vec![d0.clone()]),
            why: w,
        },
        Constraint::RowIneq {
            cur: Row::open(r0, vec![]),
            subr: Row::closed(vec![d0.clone()]),
            why: w,
        },
    ];
    for (order, t) in added_in_every_order(&s, &cs) {
        let sol = t.finalize().unwrap();
        let lens = (
            sizes(&sol, &Row::open(r0, vec![])),
            sizes(&sol, &Row::open(r2, vec![])),
        );
        assert_eq!(lens, (vec![1], vec![1]), "order {order:?}");
    }
}

/// A cycle `rank(r2) <= rank(r1) + 1`, `rank(r2) >= rank(r1)` reached
/// through a row equality `r0 = [..r2.., d]`: in one order `r2` stays open,
/// in another it is bound to the template variable expanded from `r0`, so
/// no naming of the cycle's variables is the same in both (found by the
/// order-independence property). All rows left close empty at once.
#[test]
fn closing_a_cycle_reached_through_an_equality_does_not_depend_on_the_order() {
    let mut s = Solver::new();
    let (r0, r1, r2) = (s.fresh_row(), s.fresh_row(), s.fresh_row());
    let d0 = Dim::Var(s.fresh_dim());
    let w = why(&mut s);
    let cs = [
        Constraint::RowEq {
            a: Row::open(r2, vec![d0.clone(), d0.clone()]),
            b: Row::open(r0, vec![d0.clone()]),
            why: w,
        },
        Constraint::RowIneq {
            cur: Row::open(r1, vec![d0.clone()]),
            subr: Row::open(r2, vec![]),
            why: w,
        },
        Constraint::RowIneq {
            cur: Row::open(r0, vec![]),
            subr: Row::open(r1, vec![d0.clone()]),
            why: w,
        },
    ];
    for (order, t) in added_in_every_order(&s, &cs) {
        let sol = t.finalize().unwrap();
        let lens = [r0, r1, r2].map(|r| sizes(&sol, &Row::open(r, vec![])));
        assert_eq!(lens, [vec![1], vec![], vec![]], "order {order:?}");
    }
}
