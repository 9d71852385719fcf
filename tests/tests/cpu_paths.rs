//! The coalesced CPU path against the reference path on random programs
//! and random kernels:
//! the results must be bit-identical, and so must the reference path's
//! results for the coalesced kernels themselves.

use backend_cpu::CpuBackend;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use shape_core::coalesce::coalesce;
use shape_core::Backend;
use shape_tests::differential::ProgramRunner;
use shape_tests::kernels::{kernel_cases, KernelCase};
use shape_tests::programs::{programs, programs_with_empty_axes, Program};
use shape_tests::strided::strided_views;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The result of a random kernel on `cpu`.
fn run_case(mut cpu: CpuBackend, case: &KernelCase) -> Vec<f32> {
    let refs: Vec<&Vec<f32>> = case.operands.iter().collect();
    let mut out = vec![0.0; case.launch.result.len as usize];
    cpu.execute(&case.kernel, &case.launch, &mut out, &refs)
        .unwrap();
    out
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../proptest-regressions/cpu_paths.txt"))),
        ..ProptestConfig::default()
    })]

    /// Random kernels (a third with epilogues), directly on the backends:
    /// the coalesced path's fast reductions followed by its epilogue pass
    /// give the reference's bits.
    #[test]
    fn coalesced_path_equals_reference_on_random_kernels(case in kernel_cases()) {
        let run = |cpu: CpuBackend| run_case(cpu, &case);
        prop_assert_eq!(
            bits(&run(CpuBackend::reference())),
            bits(&run(CpuBackend::coalesced())),
            "{}", case.kernel
        );
    }

    /// Every thread count gives the reference's bits: the threaded path
    /// forced on every launch it can split (issue 32).
    #[test]
    fn every_thread_count_gives_the_references_bits(case in kernel_cases(), threads in 1usize..6) {
        let run = |cpu: CpuBackend| run_case(cpu, &case);
        let threaded = CpuBackend::coalesced().threads(threads).with_min_work_per_thread(0);
        prop_assert_eq!(
            bits(&run(CpuBackend::reference())),
            bits(&run(threaded)),
            "{} on {} threads", case.kernel, threads
        );
    }

    /// The same on random programs, through planning and fusion.
    #[test]
    fn every_thread_count_gives_the_references_bits_on_programs(p in programs(8), threads in 2usize..6) {
        let solved = p.graph.solve().unwrap();
        let reference = CpuBackend::reference().run_solved(&solved, &p).unwrap();
        let threaded = CpuBackend::coalesced()
            .threads(threads)
            .with_min_work_per_thread(0)
            .run_solved(&solved, &p)
            .unwrap();
        for t in &p.results {
            prop_assert_eq!(bits(&reference[t]), bits(&threaded[t]), "tensor {}", p.graph.name(*t).unwrap());
        }
    }

    /// Strided inputs (issue 31, item 4): every dense input as a
    /// Fortran-ordered, permuted, sliced or broadcast (stride 0) view of
    /// its values, read in place with the strides it has, gives on each
    /// CPU path the bits of the same program on C-contiguous copies,
    /// fused or not.
    #[test]
    fn strided_inputs_give_the_bits_of_their_copies(p in programs(8), seed in any::<u64>(), unfused in any::<bool>()) {
        let (mut contiguous, mut strided) = strided_views(&p, seed);
        if unfused {
            contiguous.options = contiguous.options.clone().unfused();
            strided.options = strided.options.clone().unfused();
        }
        let solved = p.graph.solve().unwrap();
        for mut cpu in [CpuBackend::reference(), CpuBackend::coalesced()] {
            let expected = cpu.run_solved(&solved, &contiguous).unwrap();
            let found = cpu.run_solved(&solved, &strided).unwrap();
            for t in &p.results {
                prop_assert_eq!(bits(&expected[t]), bits(&found[t]), "tensor {} on {}", p.graph.name(*t).unwrap(), cpu.name());
            }
        }
    }

    #[test]
    fn coalesced_path_equals_reference(p in programs(8)) {
        let solved = p.graph.solve().unwrap();
        let reference = CpuBackend::reference().run_solved(&solved, &p).unwrap();
        let coalesced = CpuBackend::coalesced().run_solved(&solved, &p).unwrap();
        for t in &p.results {
            prop_assert_eq!(bits(&reference[t]), bits(&coalesced[t]), "tensor {}", p.graph.name(*t).unwrap());
        }
    }

    /// Fusion (issue 18): with only the last result asked for, pointwise
    /// chains fuse into single kernels; the values must be bit-identical
    /// to the unfused plan's on both CPU paths.
    #[test]
    fn fused_plans_equal_unfused_ones(p in programs(8)) {
        let solved = p.graph.solve().unwrap();
        let Some(&last) = p.results.last() else { return Ok(()) };
        let only_last = Program {
            graph: p.graph.clone(),
            inputs: p.inputs.clone(),
            results: vec![last],
            options: p.options.clone(),
        };
        let unfused = Program { options: p.options.clone().unfused(), ..only_last.clone() };
        for mut cpu in [CpuBackend::reference(), CpuBackend::coalesced()] {
            let fused = cpu.run_solved(&solved, &only_last).unwrap();
            let plain = cpu.run_solved(&solved, &unfused).unwrap();
            prop_assert_eq!(bits(&fused[&last]), bits(&plain[&last]));
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
            let lowered = solved.lower(op, &p.options.lowering()).unwrap();
            if lowered.steps.len() != 1 {
                // Several kernels into one result (a concatenation): the
                // whole run above already compares both paths on it.
                continue;
            }
            if lowered.steps[0].call.is_some() {
                // A call step (a WGSL function of the program) runs the
                // function, not its kernel, which only describes what it
                // writes: there is no kernel to coalesce. The whole runs
                // above compare it on both paths.
                continue;
            }
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
    let mut g = shape_graph::Graph::new();
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

/// Runs `spec` over operands of the given shapes on both CPU paths and
/// compares the results bit for bit.
fn both_paths_agree(
    spec: &str,
    shapes: &[String],
    unary: Option<&str>,
) -> Result<(), TestCaseError> {
    let mut g = shape_graph::Graph::new();
    let ids: Vec<_> = shapes
        .iter()
        .enumerate()
        .map(|(i, s)| g.input(&format!("x{i}"), s).unwrap())
        .collect();
    let mut r = g.einsum(spec, &ids).unwrap();
    if let Some(f) = unary {
        r = g.unary(f, r).unwrap();
    }
    let data: Vec<(String, Vec<f32>)> = ids
        .iter()
        .enumerate()
        .map(|(i, _)| {
            let n: usize = shapes[i]
                .split(',')
                .map(|d| d.trim().parse::<usize>().unwrap())
                .product();
            // Values whose sums round differently in another order.
            let v = (0..n)
                .map(|j| ((j * 7919 + i * 104729) % 1000) as f32 * 0.013 - 6.1)
                .collect();
            (format!("x{i}"), v)
        })
        .collect();
    let p = shape_tests::programs::Program::with_named_data(
        g,
        vec![r],
        data.iter().map(|(n, v)| (n.as_str(), v.clone())),
    )
    .unwrap();
    let solved = p.graph.solve().unwrap();
    let reference = CpuBackend::reference().run_solved(&solved, &p).unwrap();
    let coalesced = CpuBackend::coalesced().run_solved(&solved, &p).unwrap();
    prop_assert_eq!(
        bits(&reference[&r]),
        bits(&coalesced[&r]),
        "{} over {:?}",
        spec,
        shapes
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(64),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../proptest-regressions/cpu_paths.txt"))),
        ..ProptestConfig::default()
    })]

    /// Register tiles and blocked copies change the order in which
    /// elements are computed, never the order in which a sum adds: every
    /// result is the reference's, bit for bit, at sizes around the tiles'
    /// edges and with the operands in either role.
    #[test]
    fn loop_order_never_changes_a_result(
        (b, i, j, k, l) in (1usize..4, 1usize..19, 1usize..21, 1usize..12, 1usize..4),
        which in 0usize..6,
    ) {
        let s = |d: &[usize]| d.iter().map(|n| n.to_string()).collect::<Vec<_>>().join(", ");
        let cases: [(&str, Vec<String>, Option<&str>); 6] = [
            ("b, i, k; b, k, j => b, i, j", vec![s(&[b, i, k]), s(&[b, k, j])], None),
            ("k, j; i, k => i, j", vec![s(&[k, j]), s(&[i, k])], None),
            ("i, k, l; l, k, j => i, j", vec![s(&[i, k, l]), s(&[l, k, j])], None),
            ("i, j => j, i", vec![s(&[i * 3, j * 2])], None),
            ("b, i, j => j, b, i", vec![s(&[b, i * 2, j * 2])], Some("exp")),
            ("k, i; k, j => i, j", vec![s(&[k, i]), s(&[k, j])], Some("relu")),
        ];
        let (spec, shapes, f) = &cases[which];
        both_paths_agree(spec, shapes, *f)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../proptest-regressions/cpu_paths.txt"))),
        ..ProptestConfig::default()
    })]

    /// Programs over empty axes: both CPU paths give the same values
    /// bit for bit, or fail with the same error (a maximum over an empty
    /// axis, a batch slice of an empty batch).
    #[test]
    fn empty_axes_run_alike_on_both_cpu_paths(p in programs_with_empty_axes(6)) {
        let Ok(solved) = p.graph.solve() else { return Ok(()) };
        let reference = CpuBackend::reference().run_solved(&solved, &p);
        let coalesced = CpuBackend::coalesced().run_solved(&solved, &p);
        match (reference, coalesced) {
            (Ok(a), Ok(b)) => {
                for t in &p.results {
                    prop_assert_eq!(bits(&a[t]), bits(&b[t]));
                }
            }
            (Err(a), Err(b)) => prop_assert_eq!(
                a.replace("(reference)", ""),
                b.replace("(coalesced)", "")
            ),
            (a, b) => prop_assert!(false, "reference {:?}, coalesced {:?}", a.map(|_| ()), b.map(|_| ())),
        }
    }
}

/// The kernel and launch of the one contraction of `spec` over inputs of
/// `dims`, and the number of products each result element sums.
fn contraction(spec: &str, dims: &[Vec<u64>]) -> (shape_core::Kernel, shape_core::Launch, u64) {
    let mut g = shape_graph::Graph::new();
    let inputs: Vec<_> = dims
        .iter()
        .enumerate()
        .map(|(i, d)| {
            let sizes: Vec<String> = d.iter().map(u64::to_string).collect();
            g.input(&format!("x{i}"), &sizes.join(", ")).unwrap()
        })
        .collect();
    let out = g.einsum(spec, &inputs).unwrap();
    let solved = g.solve().unwrap();
    let mut lowered = solved
        .lower(g.producer(out).unwrap(), &Default::default())
        .unwrap();
    let step = lowered.steps.remove(0);
    let reduced: u64 = step
        .kernel
        .iterators
        .iter()
        .zip(&step.launch.sizes)
        .filter(|(k, _)| **k == shape_core::IterKind::Reduction)
        .map(|(_, &s)| s)
        .product();
    (step.kernel, step.launch, reduced)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(64),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../proptest-regressions/cpu_paths.txt"))),
        ..ProptestConfig::default()
    })]

    /// Contractions of every form the register tiles take (plain, with
    /// either operand transposed, batched, with two reduction axes; reductions
    /// longer than one packed block): the default path gives the
    /// reference's bits on any thread count, and fast math
    /// (`CpuBackend::fast_math`) stays within `k * FAST_MATH_TOLERANCE *
    /// sum |a * b|` of them, the bound its documentation states (the sums
    /// of magnitudes computed by the reference on the operands' absolute
    /// values).
    #[test]
    fn contractions_are_exact_by_default_and_bounded_with_fast_math(
        form in 0usize..5,
        // Up to 24 row tiles of 6: from 16 tiles (96 rows) the rows are
        // split into jobs between threads.
        (m, n, k, k2, b) in (prop_oneof![1u64..40, 90u64..145], 1u64..70, 0u64..600, 1u64..4, 1u64..3),
        threads in 1usize..4,
        seed in any::<u32>(),
    ) {
        let (spec, dims) = match form {
            0 => ("ij;jk=>ik", vec![vec![m, k], vec![k, n]]),
            1 => ("ji;jk=>ik", vec![vec![k, m], vec![k, n]]),
            2 => ("bij;bjk=>bik", vec![vec![b, m, k], vec![b, k, n]]),
            3 => ("ij;kj=>ik", vec![vec![m, k], vec![n, k]]),
            _ => ("ijl;jlk=>ik", vec![vec![m, k, k2], vec![k, k2, n]]),
        };
        let (kernel, launch, products) = contraction(spec, &dims);
        let mut state = u64::from(seed) | 1;
        let data: Vec<Vec<f32>> = dims
            .iter()
            .map(|d| {
                (0..d.iter().product::<u64>())
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        (state % 20_001) as f32 / 1000.0 - 10.0
                    })
                    .collect()
            })
            .collect();
        let run = |mut cpu: CpuBackend, data: &[Vec<f32>]| {
            let refs: Vec<&Vec<f32>> = data.iter().collect();
            let mut out = vec![0.0; launch.result.len as usize];
            cpu.execute(&kernel, &launch, &mut out, &refs).unwrap();
            out
        };
        let reference = run(CpuBackend::reference(), &data);
        let exact = run(CpuBackend::coalesced().threads(threads).with_min_work_per_thread(0), &data);
        prop_assert_eq!(bits(&reference), bits(&exact), "{} {:?}", spec, dims);
        let fast = run(CpuBackend::coalesced().threads(threads).with_min_work_per_thread(0).fast_math(), &data);
        let magnitudes: Vec<Vec<f32>> = data.iter().map(|d| d.iter().map(|x| x.abs()).collect()).collect();
        let sums = run(CpuBackend::reference(), &magnitudes);
        for (i, ((f, r), s)) in fast.iter().zip(&reference).zip(&sums).enumerate() {
            // 1% over the bound for the rounding of the bound itself.
            let bound = products as f32 * backend_cpu::FAST_MATH_TOLERANCE * s * 1.01;
            prop_assert!((f - r).abs() <= bound, "{} {:?} at {}: fast {} against {}, bound {}", spec, dims, i, f, r, bound);
        }
    }
}

/// The strided property test above exercises reads in place, not only the
/// copy into C order that a flat read falls back to: over 200 random
/// programs, most strided inputs are read where they lie.
#[test]
fn most_strided_inputs_of_random_programs_are_read_in_place() {
    use shape_run::{read_in_place, RunGraph, View};
    let (mut in_place, mut copied) = (0, 0);
    for seed in 0..200 {
        let p = shape_tests::programs::program(seed, 8);
        let (_, strided) = strided_views(&p, seed);
        let solved = p.graph.solve().unwrap();
        let plan = solved.plan(&p.results, &p.options).unwrap();
        for t in strided.inputs.tensors() {
            let given = strided.inputs.get(t).unwrap();
            if given.is_c_contiguous() {
                continue;
            }
            if read_in_place(&solved, &plan, t, &View::of(given)).unwrap() {
                in_place += 1;
            } else {
                copied += 1;
            }
        }
    }
    eprintln!("{in_place} strided inputs read in place, {copied} copied");
    assert!(
        in_place > 4 * copied,
        "{in_place} in place, {copied} copied"
    );
}
