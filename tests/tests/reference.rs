//! Each operation's lowering against a plain Rust closure (issue 26): every
//! built-in operation has a reference and matches it on random shapes its
//! sampler draws; an assignment over reduction iterators is refused with a
//! typed error; and a wrong lowering that every backend runs alike fails
//! its reference check.

use std::sync::Arc;

use backend_cpu::CpuBackend;
use shape_core::kernel::{Accumulate, Expr};
use shape_core::RowKind;
use shape_graph::{
    ConstraintCx, Graph, GraphError, Lowered, LoweringCx, Operation, ProjectionBuilder, Registry,
};
use shape_solver::RowSite;
use shape_tests::differential::{assert_backends_agree, ProgramRunner, Tolerance};
use shape_tests::programs::Program;
use shape_tests::reference::{assert_op_matches, builtin_references, each_index, OpCheck, RefCase};

#[test]
fn every_built_in_operation_has_a_reference() {
    let references = builtin_references();
    let registry = Registry::builtin();
    let missing: Vec<&str> = registry
        .entries()
        .map(|e| e.name())
        .filter(|name| references.get(name).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "built-in operations without a reference in shape_tests::reference::builtin_references: {missing:?}"
    );
}

#[test]
fn every_built_in_operation_matches_its_reference() {
    let references = builtin_references();
    let registry = Registry::builtin();
    let mut failures = Vec::new();
    for entry in registry.entries() {
        match references.check_entry(entry) {
            Ok(n) => assert!(n > 0, "{}: no case compared", entry.name()),
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

#[test]
fn a_reference_check_reads_like_its_definition() {
    let registry = Registry::builtin();
    assert_op_matches(registry.get("sub").unwrap(), |c: &RefCase<'_>| {
        c.result
            .fill(|b, o, i| c.operands[0].get(b, o, i) - c.operands[1].get(b, o, i))
    });
    // A wrong closure fails: `sub` is not `add`.
    let wrong = OpCheck::entry(registry.get("sub").unwrap()).check(|c: &RefCase<'_>| {
        c.result
            .fill(|b, o, i| c.operands[0].get(b, o, i) + c.operands[1].get(b, o, i))
    });
    assert!(wrong.is_err(), "sub matched a + b");
}

/// The total of every element of its operand, lowered as `how` says.
#[derive(Debug, Clone, Copy)]
enum Total {
    /// A sum: right.
    Sum,
    /// An assignment through `single_kernel`: refused.
    Assign,
    /// An assignment through `single_kernel_writing_once`, a promise the
    /// operation does not keep: each result keeps the last element.
    WritingOnce,
    /// A maximum where a sum is meant.
    Max,
}

impl Operation for Total {
    fn name(&self) -> &str {
        "total"
    }

    fn arity(&self) -> usize {
        1
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        for kind in RowKind::ALL {
            cx.row_is(
                RowSite::result(kind),
                shape_core::Row::empty(),
                "to have no axes, as a total".into(),
            );
        }
    }

    // No axis of the result: every axis of the operand is reduced.
    fn project(&self, _cx: &mut ProjectionBuilder<'_>) {}

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        match self {
            Total::Sum => cx.single_kernel(Expr::Load(0), Accumulate::Add),
            Total::Assign => cx.single_kernel(Expr::Load(0), Accumulate::Assign),
            Total::WritingOnce => cx.single_kernel_writing_once(Expr::Load(0)),
            Total::Max => cx.single_kernel(Expr::Load(0), Accumulate::Max),
        }
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("total({})", operands.join(", "))
    }
}

/// The reference of a total: the sum of every value.
fn total(c: &RefCase<'_>) -> Vec<f32> {
    vec![c.operands[0].values.iter().fold(0.0, |a, x| a + x)]
}

/// A check of `how` on random tensors.
fn total_check(how: Total) -> OpCheck {
    OpCheck::new("total", move |cx| {
        let t = cx.pick();
        cx.graph().apply(Arc::new(how), &[t]).map(Some)
    })
}

fn six() -> (Program, shape_graph::TensorId) {
    let mut g = Graph::new();
    let x = g.input("x", "6").unwrap();
    let y = g.apply(Arc::new(Total::WritingOnce), &[x]).unwrap();
    let p = Program::with_named_data(g, vec![y], [("x", vec![0., 1., 2., 3., 4., 5.])]).unwrap();
    (p, y)
}

#[test]
fn an_assignment_over_a_reduction_is_refused() {
    let mut g = Graph::new();
    let x = g.input("x", "6").unwrap();
    let y = g.apply(Arc::new(Total::Assign), &[x]).unwrap();
    let solved = g.solve().unwrap();
    let e = solved
        .lower(
            g.producer(y).unwrap(),
            &shape_graph::LowerOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.kind(), "assign_over_reduction");
    let op = e.op().expect("the error names its operation").to_string();
    assert!(e.to_string().starts_with(&op), "{e}");
    assert!(op.contains("total"), "{op}");
    assert!(
        e.to_string().contains("single_kernel_writing_once"),
        "the message says what to do: {e}"
    );
    // Running refuses it too, before any kernel runs.
    let p = Program::with_named_data(g, vec![y], [("x", vec![0., 1., 2., 3., 4., 5.])]).unwrap();
    let err = CpuBackend::reference().run_solved(&solved, &p).unwrap_err();
    assert!(err.contains("assigns each result element"), "{err}");
    // The sum lowers.
    let mut g = Graph::new();
    let x = g.input("x", "6").unwrap();
    let y = g.apply(Arc::new(Total::Sum), &[x]).unwrap();
    let solved = g.solve().unwrap();
    solved
        .lower(
            g.producer(y).unwrap(),
            &shape_graph::LowerOptions::default(),
        )
        .unwrap();
}

#[test]
fn a_wrong_lowering_that_backends_agree_on_fails_its_reference_check() {
    // Kept by the backends alike: the last element, not the total.
    let (p, y) = six();
    let solved = p.graph.solve().unwrap();
    let out = CpuBackend::reference().run_solved(&solved, &p).unwrap();
    assert_eq!(out[&y], [5.0]);
    assert_backends_agree(
        &p,
        &mut [&mut CpuBackend::reference(), &mut CpuBackend::coalesced()],
        Tolerance::EXACT,
    );
    // The reference check sees it, and a maximum for a sum.
    for wrong in [Total::WritingOnce, Total::Max] {
        let e = total_check(wrong)
            .check(total)
            .expect_err("a wrong lowering");
        assert!(e.contains("the reference says"), "{wrong:?}: {e}");
    }
    // The right lowering passes.
    assert_eq!(total_check(Total::Sum).cases(16).check(total), Ok(16));
}

#[test]
#[should_panic(expected = "the reference says")]
fn assert_op_matches_panics_on_a_wrong_lowering() {
    assert_op_matches(total_check(Total::Max), total);
}

/// `a`, read where `b` only sets the loop nest (a result "shaped like"
/// `a`, given `b` for its side): `b`'s axes are reduced iterators, but
/// the body reads only `a`, which is the same all along them, so
/// assigning writes one value per result element, which the operation
/// says with `single_kernel_writing_once`.
#[derive(Debug)]
struct KeepLeft;

impl Operation for KeepLeft {
    fn name(&self) -> &str {
        "keep_left"
    }

    fn arity(&self) -> usize {
        2
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        for kind in RowKind::ALL {
            cx.equal(RowSite::result(kind), RowSite::operand(0, kind));
        }
    }

    fn project(&self, cx: &mut ProjectionBuilder<'_>) {
        for kind in RowKind::ALL {
            cx.equal_from(RowSite::operand(0, kind), 0, RowSite::result(kind));
        }
    }

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        cx.single_kernel_writing_once(Expr::Load(0))
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("keep_left({})", operands.join(", "))
    }
}

#[test]
fn an_operation_that_writes_once_says_so() {
    let mut g = Graph::new();
    let a = g.input("a", "2|3").unwrap();
    let b = g.input("b", "4").unwrap();
    let y = g.apply(Arc::new(KeepLeft), &[a, b]).unwrap();
    let solved = g.solve().unwrap();
    let lowered = solved
        .lower(
            g.producer(y).unwrap(),
            &shape_graph::LowerOptions::default(),
        )
        .unwrap();
    assert!(lowered.steps[0]
        .kernel
        .iterators
        .contains(&shape_core::kernel::IterKind::Reduction));
    let values: Vec<f32> = (0..6).map(|v| v as f32).collect();
    let p =
        Program::with_named_data(g, vec![y], [("a", values.clone()), ("b", vec![9.0; 4])]).unwrap();
    let out = CpuBackend::reference().run_solved(&solved, &p).unwrap();
    assert_eq!(out[&y], values);
    // And matches its reference on random shapes.
    OpCheck::new("keep_left", |cx| {
        let a = cx.pick();
        let n = 2 + cx.below(3);
        let b = cx.input(&[], &[], &[n])?;
        cx.graph().apply(Arc::new(KeepLeft), &[a, b]).map(Some)
    })
    .assert_matches(|c: &RefCase<'_>| c.result.fill(|b, o, i| c.operands[0].get(b, o, i)));
}

#[test]
fn each_index_is_row_major() {
    let all: Vec<Vec<usize>> = each_index(&[2, 3]).collect();
    assert_eq!(all.len(), 6);
    assert_eq!(all[4], vec![1, 1]);
    assert_eq!(each_index(&[]).count(), 1);
    assert_eq!(each_index(&[2, 0]).count(), 0);
}

/// A user's WGSL function as an operation ([`shape_call::CallOp`]) against
/// a closure of one call index written from the function's definition
/// (not from its WGSL), through [`per_call`]: arguments drawn by the row
/// rule of calls ([`OpCheck::call`]: a random tensor of the program, its
/// axes moved into its batch row for a scalar parameter, and new inputs
/// whose batch rows broadcast against it), run on the CPU reference (the
/// WGSL interpreter). A closure that is not the function fails.
#[test]
fn call_operations_match_closures_of_one_call_index() {
    use shape_call::CallOp;
    use shape_tests::reference::per_call;
    let op = |src: &str| CallOp::parse(src).unwrap();
    // Two scalars: the larger less half the smaller.
    OpCheck::call(op(
        "fn soft(a: f32, b: f32) -> f32 { return max(a, b) - 0.5 * min(a, b); }",
    ))
    .assert_matches(per_call(|a: &[&[f32]]| {
        let (x, y) = (a[0][0], a[1][0]);
        let (hi, lo) = if x > y { (x, y) } else { (y, x) };
        vec![hi - lo / 2.0]
    }));
    // A color scaled and kept in [0, 1], channel by channel.
    let tint = "fn tint(c: vec3<f32>, g: f32) -> vec3<f32> { return clamp(c * g, vec3<f32>(0.0), vec3<f32>(1.0)); }";
    OpCheck::call(op(tint)).assert_matches(per_call(|a: &[&[f32]]| {
        a[0].iter().map(|c| (c * a[1][0]).clamp(0.0, 1.0)).collect()
    }));
    // A loop and a helper: c0 x^3 + c1 x^2 + c2 x + c3, plus x squared.
    OpCheck::call(op("fn sq(x: f32) -> f32 { return x * x; }
         fn poly(x: f32, c: vec4<f32>) -> f32 {
             var acc = 0.0;
             for (var i = 0u; i < 4u; i++) { acc = acc * x + c[i]; }
             return acc + sq(x);
         }"))
    .assert_matches(per_call(|a: &[&[f32]]| {
        let (x, c) = (a[0][0], a[1]);
        vec![c[0] * x * x * x + c[1] * x * x + c[2] * x + c[3] + x * x]
    }));
    // A dot product of two vectors: a scalar of two vector arguments.
    OpCheck::call(op(
        "fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }",
    ))
    .assert_matches(per_call(|a: &[&[f32]]| {
        vec![(0..3).map(|k| a[0][k] * a[1][k]).sum()]
    }));
    // A closure that is not the function fails: no clamp.
    let wrong = OpCheck::call(op(tint)).check(per_call(|a: &[&[f32]]| {
        a[0].iter().map(|c| c * a[1][0]).collect()
    }));
    assert!(
        wrong.is_err_and(|e| e.contains("the reference says")),
        "tint matched a closure without its clamp"
    );
}

/// The WGSL functions the random programs call match their Rust closures
/// (what the conformance suite's `random_programs` composes its expected
/// values from) at every call index.
#[test]
fn the_random_programs_call_functions_match_their_closures() {
    for f in shape_tests::programs::CALL_FUNCTIONS {
        let op = shape_call::CallOp::parse(f.source).unwrap();
        OpCheck::call(op)
            .cases(16)
            .assert_matches(shape_tests::reference::per_call(f.rust));
    }
}

/// The assignment into an existing tensor (`d[...] <- s`) against a copy
/// written with numpy's broadcasting: the destination is a random tensor
/// of the program, the source a new input that broadcasts into it, and
/// every element of the result is the source's (the destination's values
/// are never read).
#[test]
fn assignments_copy_their_source_broadcast_into_the_destination() {
    use shape_graph::ops::AssignExisting;
    OpCheck::operation(Arc::new(AssignExisting))
        .assert_matches(|c: &RefCase<'_>| c.result.fill(|b, o, i| c.operands[1].get(b, o, i)));
    // A closure that reads the destination is not the operation.
    let wrong = OpCheck::operation(Arc::new(AssignExisting))
        .check(|c: &RefCase<'_>| c.result.fill(|b, o, i| c.operands[0].get(b, o, i)));
    assert!(wrong.is_err(), "{wrong:?}");
}
