//! An operation defined outside `shape-solver` (a clamp with two
//! parameters), taken through inference, both backends and the
//! differential harness, by the graph API, by name through a registry, and
//! in random programs.

use std::sync::Arc;

use backend_cpu::CpuBackend;
use shape_core::kernel::{Accumulate, BinaryOp, Expr};
use shape_graph::{
    ConstraintCx, Graph, GraphError, Lowered, LoweringCx, OpEntry, Operation, ProjectionBuilder,
    Registry, SampleCx, TensorId,
};
use shape_tests::differential::{assert_backends_agree, ProgramRunner, Tolerance};
use shape_tests::gpu::wgpu_or_skip;
use shape_tests::programs::{program_with, Program};
use shape_tests::reference::{assert_op_matches, RefCase};

/// `min(max(x, lo), hi)`, pointwise.
#[derive(Debug, Clone, Copy)]
struct Clamp {
    lo: f32,
    hi: f32,
}

impl Operation for Clamp {
    fn name(&self) -> &str {
        "clamp"
    }

    fn arity(&self) -> usize {
        1
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        cx.broadcast_all();
    }

    fn project(&self, cx: &mut ProjectionBuilder<'_>) {
        cx.broadcast_all();
    }

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        let at_least = Expr::Binary(
            BinaryOp::Max,
            Box::new(Expr::Load(0)),
            Box::new(Expr::Const(self.lo)),
        );
        let body = Expr::Binary(
            BinaryOp::Min,
            Box::new(at_least),
            Box::new(Expr::Const(self.hi)),
        );
        cx.single_kernel(body, Accumulate::Assign)
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("clamp({})", operands.join(", "))
    }
}

fn clamp_program() -> (Program, TensorId) {
    let mut g = Graph::new();
    let x = g.input("x", "2|3").unwrap();
    let b = g.input("b", "3").unwrap();
    let s = g.add(x, b).unwrap();
    let y = g
        .apply(Arc::new(Clamp { lo: -0.5, hi: 1.0 }), &[s])
        .unwrap();
    let p = Program::with_named_data(
        g,
        vec![s, y],
        [
            ("x", vec![-2.0, -0.25, 0.0, 0.5, 1.0, 4.0]),
            ("b", vec![0.0, 0.0, 0.75]),
        ],
    )
    .unwrap();
    (p, y)
}

#[test]
fn an_outside_operation_infers_shapes_and_runs_on_both_backends() {
    let (p, y) = clamp_program();
    let solved = p.graph.solve().unwrap();
    assert_eq!(solved.shape(y).unwrap().to_string(), "2|->3");
    let out = CpuBackend::reference().run_solved(&solved, &p).unwrap();
    assert_eq!(out[&y], vec![-0.5, -0.25, 0.75, 0.5, 1.0, 1.0]);
    let mut cpu = CpuBackend::coalesced();
    assert_backends_agree(
        &p,
        &mut [&mut CpuBackend::reference(), &mut cpu],
        Tolerance::EXACT,
    );
    if let Some(mut gpu) =
        wgpu_or_skip("an_outside_operation_infers_shapes_and_runs_on_both_backends")
    {
        assert_backends_agree(
            &p,
            &mut [&mut CpuBackend::reference(), &mut gpu],
            Tolerance::GPU,
        );
    }
}

#[test]
fn an_outside_operation_conflicts_like_a_built_in() {
    let mut g = Graph::new();
    let x = g.input("x", "2|3").unwrap();
    let c = g.apply(Arc::new(Clamp { lo: 0.0, hi: 1.0 }), &[x]).unwrap();
    g.require(c, "2|->4").unwrap_err();
    let err = g
        .apply(Arc::new(Clamp { lo: 0.0, hi: 1.0 }), &[x, x])
        .unwrap_err();
    assert_eq!(err.kind(), "arity");
    assert_eq!(
        err.to_string(),
        "clamp takes 1 operand(s) but was given 2: `x`, `x`"
    );
}

/// The built-in registry with `clamp` added: callable by name, and drawn
/// in random programs.
fn registry_with_clamp() -> Arc<Registry> {
    let mut registry = (*Registry::builtin()).clone();
    registry
        .register(
            OpEntry::fixed(
                "clamp",
                "values limited to [-0.5, 1]",
                Arc::new(Clamp { lo: -0.5, hi: 1.0 }),
            )
            .with_sampler(|cx: &mut dyn SampleCx| {
                let t = cx.pick();
                cx.graph()
                    .apply(Arc::new(Clamp { lo: -0.5, hi: 1.0 }), &[t])
                    .map(Some)
            }),
        )
        .unwrap();
    Arc::new(registry)
}

#[test]
fn an_outside_operation_is_called_by_name_through_its_registry() {
    let registry = registry_with_clamp();
    let mut g = Graph::with_registry(registry.clone());
    let x = g.input("x", "4").unwrap();
    let y = g.call("clamp", None, &[x]).unwrap();
    assert_eq!(g.solve().unwrap().shape(y).unwrap().to_string(), "|->4");
    // The built-in registry does not know it.
    assert_eq!(
        Graph::new().call("clamp", None, &[x]).unwrap_err().kind(),
        "unknown_function"
    );
    let mut again = (*registry).clone();
    assert_eq!(
        again
            .register(OpEntry::fixed(
                "clamp",
                "again",
                Arc::new(Clamp { lo: 0.0, hi: 0.0 })
            ))
            .unwrap_err()
            .kind(),
        "duplicate_function"
    );
}

#[test]
fn random_programs_with_an_outside_operation_agree_across_backends() {
    let registry = registry_with_clamp();
    let mut gpu = wgpu_or_skip("random_programs_with_an_outside_operation_agree_across_backends");
    let mut used = 0;
    for seed in 0..64 {
        let p = program_with(&registry, seed * 31 + 7, 6);
        used += p
            .graph
            .op_ids()
            .filter(|&op| p.graph.op(op).is_some_and(|(o, _, _)| o.name() == "clamp"))
            .count();
        assert_backends_agree(
            &p,
            &mut [&mut CpuBackend::reference(), &mut CpuBackend::coalesced()],
            Tolerance::EXACT,
        );
        if let Some(gpu) = gpu.as_mut() {
            assert_backends_agree(&p, &mut [&mut CpuBackend::reference(), gpu], Tolerance::GPU);
        }
    }
    assert!(used > 10, "clamp was drawn {used} times in 64 programs");
}

#[test]
fn an_outside_operation_matches_its_reference() {
    // The recipe of docs/architecture.md: the lowering against a plain
    // Rust closure, on random shapes the entry's sampler draws.
    let registry = registry_with_clamp();
    let entry = registry.get("clamp").unwrap().clone();
    assert_op_matches(&entry, |c: &RefCase<'_>| {
        c.result
            .fill(|b, o, i| c.operands[0].get(b, o, i).clamp(-0.5, 1.0))
    });
    // An `Arc<dyn Operation>`, drawn as a pointwise operation.
    let op: Arc<dyn Operation> = Arc::new(Clamp { lo: 0.0, hi: 0.5 });
    assert_op_matches(op, |c: &RefCase<'_>| {
        c.result
            .fill(|b, o, i| c.operands[0].get(b, o, i).clamp(0.0, 0.5))
    });
}

/// The built-in references and one for `clamp`.
fn references_with_clamp() -> shape_tests::reference::References {
    let mut r = shape_tests::reference::builtin_references();
    r.insert("clamp", |c: &RefCase<'_>| {
        c.result
            .fill(|b, o, i| c.operands[0].get(b, o, i).clamp(-0.5, 1.0))
    });
    r
}

// The conformance suite's random programs, drawn with `clamp` among the
// built-ins, checked against the references (the clamp's a plain
// closure), on the coalesced CPU path and on wgpu where there is one.
shape_tests::backend_conformance!(
    cpu_with_clamp,
    || Some(CpuBackend::coalesced()),
    Tolerance::EXACT,
    registry: registry_with_clamp(),
    references: references_with_clamp(),
);

shape_tests::backend_conformance!(
    wgpu_with_clamp,
    || wgpu_or_skip("wgpu_with_clamp"),
    Tolerance::GPU,
    registry: registry_with_clamp(),
    references: references_with_clamp(),
);
