//! The coalesced CPU path against the reference path on random programs:
//! the results must be bit-identical, and so must the reference path's
//! results for the coalesced kernels themselves.

use backend_cpu::CpuBackend;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use shape_core::coalesce::coalesce;
use shape_core::Backend;
use shape_tests::differential::ProgramRunner;
use shape_tests::programs::programs;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../proptest-regressions/cpu_paths.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn coalesced_path_equals_reference(p in programs(8)) {
        let solved = p.graph.solve().unwrap();
        let reference = CpuBackend::reference().run_solved(&solved, &p).unwrap();
        let coalesced = CpuBackend::coalesced().run_solved(&solved, &p).unwrap();
        for t in &p.results {
            prop_assert_eq!(bits(&reference[t]), bits(&coalesced[t]), "tensor {}", p.graph.name(*t).unwrap());
        }
    }

    #[test]
    fn coalescing_preserves_every_kernel(p in programs(6)) {
        let solved = p.graph.solve().unwrap();
        let mut cpu = CpuBackend::reference();
        let all = cpu.run_solved(&solved, &p).unwrap();
        let g = solved.graph();
        for op in g.op_ids() {
            let (_, operands, result) = g.op(op).unwrap();
            let lowered = solved.lower(op, &p.options).unwrap();
            prop_assert_eq!(lowered.steps.len(), 1);
            let (kernel, launch) = (&lowered.steps[0].kernel, &lowered.steps[0].launch);
            let (k2, l2) = coalesce(kernel, launch);
            prop_assert!(k2.iterators.len() <= kernel.iterators.len());
            // Operand values: inputs from the data, results from the full run.
            let values: Vec<Vec<f32>> = operands
                .iter()
                .map(|t| all.get(t).cloned().unwrap_or_else(|| p.inputs.get(*t).unwrap().values().to_vec()))
                .collect();
            let bufs: Vec<Vec<f32>> = values.iter().map(|v| cpu.upload(v).unwrap()).collect();
            let refs: Vec<&Vec<f32>> = bufs.iter().collect();
            let mut out = cpu.alloc(l2.result.len as usize).unwrap();
            cpu.execute(&k2, &l2, &mut out, &refs).unwrap();
            prop_assert_eq!(bits(&out), bits(&all[&result]));
        }
    }
}

#[test]
fn contiguous_pointwise_kernels_become_one_loop() {
    let mut g = shape_solver::Graph::new();
    let a = g.input("a", "4,5|6->7").unwrap();
    let b = g.input("b", "4,5|6->7").unwrap();
    let c = g.add(a, b).unwrap();
    let s = g.solve().unwrap();
    let lowered = s
        .lower(g.producer(c).unwrap(), &Default::default())
        .unwrap();
    let (k, l) = (&lowered.steps[0].kernel, &lowered.steps[0].launch);
    assert_eq!(k.iterators.len(), 4);
    let (k2, l2) = coalesce(k, l);
    assert_eq!(k2.iterators.len(), 1);
    assert_eq!(l2.sizes, vec![4 * 5 * 6 * 7]);
    // A transposed read cannot merge across the swapped axes.
    let m = g.input("m", "8,9").unwrap();
    let t = g.permute("ij=>ji", m).unwrap();
    let s = g.solve().unwrap();
    let lowered = s
        .lower(g.producer(t).unwrap(), &Default::default())
        .unwrap();
    let (k2, _) = coalesce(&lowered.steps[0].kernel, &lowered.steps[0].launch);
    assert_eq!(k2.iterators.len(), 2);
}
