//! Run-time sizes across backends: a graph solved once runs at many sizes
//! with no new solve (and on wgpu no new pipeline while no size becomes
//! 1), and a guard fails exactly when the bound sizes break numpy's
//! broadcasting.

use backend_cpu::CpuBackend;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use shape_graph::{Graph, SizeId, SolvedGraph, TensorId};
use shape_run::{HostTensor, Inputs, RunGraph, RunOptions};
use shape_tests::gpu::wgpu_or_skip;

/// A two-layer perceptron whose batch size is `b`: a run-time size, or
/// the number given.
fn mlp(batch: Option<u64>) -> (Graph, SizeId, Vec<TensorId>, TensorId) {
    let mut g = Graph::new();
    let b = match batch {
        None => g.run_time_size("b").unwrap(),
        Some(n) => {
            let b = g.size("b");
            g.set_size(b, n).unwrap();
            b
        }
    };
    let x = g.input("x", "b|5").unwrap();
    let w1 = g.parameter_with_spec("w1", "5->7").unwrap();
    let b1 = g.parameter_with_spec("b1", "7").unwrap();
    let w2 = g.parameter_with_spec("w2", "7->3").unwrap();
    let h = g.compose(w1, x).unwrap();
    let h = g.add(h, b1).unwrap();
    let h = g.unary("relu", h).unwrap();
    let y = g.compose(w2, h).unwrap();
    (g, b, vec![x, w1, b1, w2], y)
}

/// Deterministic values for the leaves at the bound shapes.
fn data(solved: &SolvedGraph, leaves: &[TensorId]) -> Inputs {
    let mut inputs = Inputs::new();
    for &t in leaves {
        let dims = solved.shape(t).unwrap().memory_dims();
        let n: u64 = dims.iter().product();
        let values = (0..n)
            .map(|i| ((i * 5 + t.index() as u64) % 9) as f32 / 4.0 - 1.0)
            .collect();
        inputs.insert(t, HostTensor::new(dims, values).unwrap());
    }
    inputs
}

fn run_fixed(n: u64) -> Vec<f32> {
    let (g, _, leaves, y) = mlp(Some(n));
    let solved = g.solve().unwrap();
    let inputs = data(&solved, &leaves);
    let mut out = solved
        .run(
            &mut CpuBackend::reference(),
            inputs,
            &[y],
            &RunOptions::default(),
        )
        .unwrap();
    out.remove(y).unwrap().into_values()
}

#[test]
fn one_solve_runs_at_many_batch_sizes_on_the_cpu() {
    let (g, b, leaves, y) = mlp(None);
    let solved = g.solve().unwrap();
    for n in [2, 3, 7, 1] {
        // The data alone binds `b`.
        let inputs = data(&solved.bind(&[(b, n)]).unwrap(), &leaves);
        for mut cpu in [CpuBackend::reference(), CpuBackend::coalesced()] {
            let mut out = solved
                .run(&mut cpu, inputs.clone(), &[y], &RunOptions::default())
                .unwrap();
            let got = out.remove(y).unwrap();
            assert_eq!(got.dims(), [n, 3]);
            assert_eq!(got.into_values(), run_fixed(n), "b = {n}");
        }
    }
    assert_eq!(g.solves(), 1, "one solve for every size");
}

#[test]
fn one_solve_runs_at_many_batch_sizes_on_wgpu_with_no_new_pipeline() {
    let Some(mut gpu) = wgpu_or_skip("one_solve_runs_at_many_batch_sizes_on_wgpu") else {
        return;
    };
    let (g, b, leaves, y) = mlp(None);
    let solved = g.solve().unwrap();
    let mut compiled = Vec::new();
    for n in [2, 3, 7] {
        let inputs = data(&solved.bind(&[(b, n)]).unwrap(), &leaves);
        let mut out = solved
            .run(&mut gpu, inputs, &[y], &RunOptions::default())
            .unwrap();
        assert_eq!(
            out.remove(y).unwrap().into_values(),
            run_fixed(n),
            "b = {n}"
        );
        compiled.push(gpu.cache_stats().misses);
    }
    assert!(compiled[0] > 0);
    assert_eq!(
        compiled[0], compiled[2],
        "sizes 3 and 7 compile nothing new: {compiled:?}"
    );
    assert_eq!(g.solves(), 1);
}

#[test]
fn a_run_whose_data_breaks_a_guard_is_refused_before_anything_runs() {
    let mut g = Graph::new();
    g.run_time_size("b").unwrap();
    let x = g.input("x", "b|2").unwrap();
    let y = g.input("y", "4|2").unwrap();
    let z = g.add(x, y).unwrap();
    let solved = g.solve().unwrap();
    let inputs = Inputs::new()
        .with(x, HostTensor::filled(vec![3, 2], 1.0).unwrap())
        .with(y, HostTensor::filled(vec![4, 2], 1.0).unwrap());
    let mut errors = vec![solved
        .run(
            &mut CpuBackend::reference(),
            inputs.clone(),
            &[z],
            &RunOptions::default(),
        )
        .unwrap_err()
        .to_string()];
    if let Some(mut gpu) = wgpu_or_skip("a_run_whose_data_breaks_a_guard_is_refused") {
        let e = solved
            .run(&mut gpu, inputs, &[z], &RunOptions::default())
            .unwrap_err();
        errors.push(e.to_string());
        assert_eq!(gpu.cache_stats().dispatches, 0, "nothing ran");
    }
    assert!(
        errors[0].contains("`b` = 3 cannot broadcast to 4"),
        "{}",
        errors[0]
    );
    assert!(errors.iter().all(|e| *e == errors[0]), "{errors:?}");
}

/// numpy's broadcast of two sizes, or `None`.
fn numpy(a: u64, b: u64) -> Option<u64> {
    match (a, b) {
        _ if a == b => Some(a),
        (1, _) => Some(b),
        (_, 1) => Some(a),
        _ => None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "../proptest-regressions/run_time_sizes.txt",
        ))),
        ..ProptestConfig::default()
    })]

    /// `b` meets a static size or another run-time size `c` on a batch
    /// axis, in either order: binding succeeds exactly when numpy
    /// broadcasts the bound sizes, and then to numpy's size.
    #[test]
    fn a_guard_fails_exactly_when_broadcasting_fails(
        other in prop_oneof![(0u64..5).prop_map(Some), Just(None)],
        b in 1u64..6,
        c in 1u64..6,
        flip in any::<bool>(),
        via_result in any::<bool>(),
    ) {
        let mut g = Graph::new();
        let bs = g.run_time_size("b").unwrap();
        let cs = g.run_time_size("c").unwrap();
        let x = g.input("x", "b|2").unwrap();
        let y = match other {
            Some(n) => g.input("y", &format!("{n}|2")).unwrap(),
            None => g.input("y", "c|2").unwrap(),
        };
        let z = if flip { g.add(y, x).unwrap() } else { g.add(x, y).unwrap() };
        // Through one more result, so that the meeting happens on a
        // variable as well as on the sum itself.
        let z = if via_result { g.unary("exp", z).unwrap() } else { z };
        let solved = g.solve().unwrap();
        let other_size = other.unwrap_or(c);
        let bound = solved.bind(&[(bs, b), (cs, c)]);
        match numpy(b, other_size) {
            Some(n) => {
                let bound = bound.map_err(|e| TestCaseError::fail(e.to_string()))?;
                prop_assert_eq!(bound.shape(z).unwrap().batch[0].size(), n);
            }
            None => prop_assert_eq!(bound.unwrap_err().kind(), "guard"),
        }
    }

    /// On static sizes the symbolic graph, bound, has the shapes of the
    /// graph solved with the sizes written as numbers.
    #[test]
    fn bound_shapes_are_the_static_shapes(n in 1u64..9) {
        let (g, b, _, _) = mlp(None);
        let bound = g.solve().unwrap().bind(&[(b, n)]).unwrap();
        let (fixed, _, _, _) = mlp(Some(n));
        let fixed = fixed.solve().unwrap();
        for t in g.tensor_ids() {
            prop_assert_eq!(bound.shape(t).unwrap(), fixed.shape(t).unwrap());
        }
    }
}
