//! The solver's API around the rules: transactions, forks, foreign
//! variables, provenance, the step limit, and problems of 100,000
//! operations.

use shape_core::{Dim, RowKind};
use shape_graph::{Graph, GraphError};
use shape_lang::inference::infer;
use shape_solver::{ShapeError, Solver, StepBudget};

use crate::{closed, k, open, v, Fixture};

#[test]
fn a_failed_call_leaves_the_solver_unchanged() {
    let mut f = Fixture::new();
    let (a, b) = (f.dim(), f.dim());
    let stats = f.s.stats();
    let err =
        f.s.add_all([f.eq(v(a), k(3)), f.eq(v(b), v(a)), f.eq(v(b), k(4))]);
    assert!(err.is_err());
    assert_eq!(f.now(a), v(a));
    assert_eq!(f.s.stats(), stats);
}

/// Transactions nest: a call that fails inside a caller's transaction is
/// undone alone, and the caller goes on from where it was.
#[test]
fn a_failed_add_inside_a_transaction_is_undone_alone() {
    let mut f = Fixture::new();
    let (a, b, c) = (f.dim(), f.dim(), f.dim());
    let (a3, b_is_a, b4, c5, c6) = (
        f.eq(v(a), k(3)),
        f.eq(v(b), v(a)),
        f.eq(v(b), k(4)),
        f.eq(v(c), k(5)),
        f.eq(v(c), k(6)),
    );
    let why = f.why;
    let kept: Result<(), ShapeError> = f.s.transaction(|s| {
        s.add(a3.clone())?;
        let before = s.stats();
        // Refused as a whole: `b` stays open, `a` stays 3, and the row the
        // inner transaction made is gone.
        let refused = s.transaction(|s| {
            let r = s.fresh_row();
            s.add(shape_solver::Constraint::RowEq {
                a: open(r, []),
                b: closed([k(2)]),
                why,
            })?;
            s.add_all([b_is_a.clone(), b4.clone()])
        });
        assert!(refused.is_err());
        assert_eq!(
            s.stats(),
            before,
            "the inner transaction's variables are gone"
        );
        assert_eq!(s.resolve_dim(&v(b)).unwrap(), v(b));
        assert_eq!(s.resolve_dim(&v(a)).unwrap(), k(3));
        s.add(c5.clone())
    });
    kept.unwrap();
    assert_eq!((f.now(a), f.now(b), f.now(c)), (k(3), v(b), k(5)));
    // An outer transaction that fails takes back the inner ones it
    // committed.
    let undone: Result<(), ShapeError> = f.s.transaction(|s| {
        s.add(b_is_a.clone())?;
        s.add(c6)
    });
    assert!(undone.is_err());
    assert_eq!((f.now(a), f.now(b), f.now(c)), (k(3), v(b), k(5)));
}

#[test]
fn a_failed_graph_call_leaves_the_graph_unchanged() {
    let mut g = Graph::new();
    let a = g.input("a", "3").unwrap();
    let b = g.input("b", "4").unwrap();
    let err = g.add(a, b).unwrap_err();
    assert!(
        matches!(err, GraphError::Shape(ShapeError::DimMismatch { .. })),
        "{err}"
    );
    assert_eq!((g.num_ops(), g.num_tensors()), (0, 2));
    // A slice refused by a later operation: the slice itself still works.
    let t0 = g.input("t0", "..b..|3").unwrap();
    let t1 = g.batch_slice(t0).unwrap();
    assert!(g.einsum("i;i=>i", &[t0, t1]).is_err());
    g.require(t0, "4,5|3").unwrap();
    assert_eq!(g.solve().unwrap().shape(t1).unwrap().to_string(), "5|->3");
}

#[test]
fn forks_are_independent() {
    let mut f = Fixture::new();
    let d = f.dim();
    let mut fork = f.s.clone();
    fork.add(f.eq(v(d), k(8))).unwrap();
    assert_eq!(fork.resolve_dim(&v(d)).unwrap(), k(8));
    assert_eq!(f.now(d), v(d));
}

#[test]
fn a_clone_made_inside_a_transaction_rolls_back_on_its_own() {
    let mut f = Fixture::new();
    let d = f.dim();
    let (three, four) = (f.eq(v(d), k(3)), f.eq(v(d), k(4)));
    let _: Result<(), ShapeError> = f.s.transaction(|s| {
        let mut fork = s.clone();
        assert!(fork.add_all([three, four]).is_err());
        assert_eq!(fork.resolve_dim(&v(d)).unwrap(), v(d));
        Ok(())
    });
}

#[test]
fn foreign_variables_are_errors_not_panics() {
    let mut f = Fixture::new();
    let foreign = Dim::Var(shape_core::DimVar(99));
    assert!(matches!(
        f.s.resolve_dim(&foreign),
        Err(ShapeError::UnknownVariable { .. })
    ));
    assert!(f.add(f.eq(foreign, k(1))).is_err());
    let foreign_row = shape_core::RowVar(7);
    assert!(f.add(f.row_eq(open(foreign_row, []), closed([]))).is_err());
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

#[test]
fn provenance_names_the_declaration_that_fixed_a_size() {
    let mut g = Graph::new();
    let x = g.input("x", "8|784").unwrap();
    let w = g.parameter("w").unwrap();
    let y = g.compose(w, x).unwrap();
    g.require(y, "8|->10").unwrap();
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
    insta::assert_snapshot!(err, @"`w` has no input axis 1: its input row has length 1 (axes count from 0)");
}

/// Look-ups shorten chains of variables bound to each other; provenance
/// still names every step of the chain. A star of permutes of one tensor
/// walks (and so compresses) the chain while the graph is built, reading
/// every shape compresses it in the solution.
#[test]
fn provenance_keeps_every_step_of_a_compressed_chain() {
    for star in [false, true] {
        let mut g = Graph::new();
        let x = g.parameter("x").unwrap();
        let mut h = x;
        for _ in 0..5 {
            h = g.permute("i=>i", if star { x } else { h }).unwrap();
        }
        g.require(h, "5").unwrap();
        let s = g.solve().unwrap();
        let before = s.explain(x, RowKind::Output, 0).unwrap();
        for t in g.tensor_ids() {
            assert_eq!(s.shape(t).unwrap().to_string(), "|->5");
        }
        let after = s.explain(x, RowKind::Output, 0).unwrap();
        assert_eq!(before, after);
        // The first permute binds `x`'s row; the other four each equate two
        // sizes.
        let ops: Vec<usize> = after
            .via
            .iter()
            .filter_map(|o| o.op().map(|op| op.id))
            .collect();
        assert_eq!(ops, vec![1, 2, 3, 4], "star {star}: {:?}", after.via);
        assert!(
            after.source.to_string().contains("required shape"),
            "{}",
            after.source
        );
    }
}

#[test]
fn a_literal_size_is_its_own_source() {
    let sol = Solver::new().finalize().unwrap();
    let p = sol.provenance(&k(3)).unwrap();
    assert_eq!(p.value.size(), 3);
    assert!(p.source.to_string().contains("directly"), "{}", p.source);
}

#[test]
fn huge_sizes_are_errors_not_overflows() {
    let big = u64::MAX;
    insta::assert_snapshot!(infer(&format!("const c: {big}, {big}, {big}->k = [1]")), @r#"
        error[total_elems] line 1: element count mismatch in the 1 elements of `c` declared as "18446744073709551615, 18446744073709551615, 18446744073709551615->k": its known sizes multiply to more than 2^128, more than the 1 values written
        "#);
    let mut g = Graph::new();
    let x = g.input("x", &format!("{big}, {big}, {big}")).unwrap();
    assert_eq!(g.solve().unwrap().shape(x).unwrap().num_elems(), None);
}

#[test]
fn the_step_limit_grows_with_what_was_given() {
    let b = StepBudget::default();
    let mut s = Solver::new();
    assert_eq!(s.step_limit(), b.base);
    let d = s.fresh_dim();
    let r = s.fresh_row();
    assert_eq!(s.step_limit(), b.base + 2 * b.per_given);
    let why =
        shape_solver::Why::of(s.add_origin(shape_solver::Origin::Direct { what: "x".into() }));
    s.add(shape_solver::Constraint::RowEq {
        a: open(r, []),
        b: closed([v(d)]),
        why,
    })
    .unwrap();
    assert_eq!(s.step_limit(), b.base + 3 * b.per_given);
}

/// The limit stops a call that takes more steps than the budget allows,
/// names the constraint it was simplifying, and undoes the call.
#[test]
fn a_call_past_the_step_limit_fails_and_is_undone() {
    let mut f = Fixture::new();
    f.s.set_step_budget(StepBudget {
        base: 10,
        per_given: 0,
    });
    let d = f.dim();
    let stats = f.s.stats();
    // One step each: twenty are too many.
    let one_step = f.ge(v(d), k(1));
    let err = f.s.add_all(vec![one_step.clone(); 20]).unwrap_err();
    assert!(
        matches!(
            err,
            ShapeError::StepLimit {
                steps: 11,
                limit: 10,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(err.kind(), "step_limit");
    insta::assert_snapshot!(err, @"step limit reached in the constraint test: 11 steps, more than the 10 that constraints of this size may take; they keep producing new work, as a cycle of broadcasting constraints that adds axes on every round would (or the solver's step budget is too small for them)");
    assert_eq!(f.s.stats(), stats, "the failed call was undone");
    // Ten are not.
    f.s.add_all(vec![one_step; 10]).unwrap();
}

/// Issue 10, finding 4: a chain of identity permutes whose size is fixed
/// last, and the same chain fixed first, a star of permutes of one tensor,
/// and a chain over an open batch row: each of 100,000 operations solves,
/// and in a number of steps proportional to the operations (the times are
/// in the scaling benchmark).
#[test]
fn long_chains_solve_in_every_order_within_a_linear_number_of_steps() {
    const OPS: usize = 100_000;
    for shape in ["fact last", "fact first", "star", "batch"] {
        let mut g = Graph::new();
        let x = match shape {
            "batch" => g.input("x", "..b..|i").unwrap(),
            _ => g.parameter("x").unwrap(),
        };
        if shape == "fact first" {
            g.require(x, "5").unwrap();
        }
        let mut h = x;
        for _ in 0..OPS {
            h = match shape {
                "star" => g.permute("i=>i", x),
                "batch" => g.permute("...|i=>...|i", h),
                _ => g.permute("i=>i", h),
            }
            .unwrap();
        }
        match shape {
            "batch" => g.require(h, "2|5").unwrap(),
            "fact first" => {}
            _ => g.require(h, "5").unwrap(),
        }
        let steps = g.solver().steps();
        assert!(steps < 16 * OPS as u64, "{shape}: {steps} steps");
        let solved = g.solve().unwrap();
        let expected = if shape == "batch" { "2|->5" } else { "|->5" };
        for t in [x, h] {
            assert_eq!(solved.shape(t).unwrap().to_string(), expected, "{shape}");
        }
    }
}
