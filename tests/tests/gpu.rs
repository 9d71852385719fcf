//! The wgpu backend on a real adapter (Mesa's llvmpipe in CI), checked
//! against the CPU reference. Without an adapter these tests skip, unless
//! `SHAPE_REQUIRE_GPU=1` (CI) makes them fail.

use backend_cpu::CpuBackend;
use backend_wgpu::{LoopBudget, WgpuBackend, WgpuError, WgpuOptions};
use proptest::prelude::*;
use proptest::test_runner::{FileFailurePersistence, TestCaseError};
use shape_core::kernel::{Accumulate, Expr, IterKind, Kernel, Launch, LaunchError, Layout};
use shape_core::Backend;
use shape_graph::Graph;
use shape_run::{RunError, RunGraph};
use shape_tests::differential::{
    assert_backends_agree, compare_backends, ProgramRunner, Tolerance,
};
use shape_tests::gpu::{wgpu_or_skip, wgpu_with, SharedWgpu};
use shape_tests::kernels::{kernel_cases, KernelCase};
use shape_tests::programs::{programs, programs_with_empty_axes, Program};
use shape_tests::strided::strided_views;

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../proptest-regressions/gpu.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn wgpu_agrees_with_the_cpu_reference_on_random_kernels(case in kernel_cases()) {
        random_kernel_agrees(&DEFAULT, "wgpu_agrees_with_the_cpu_reference_on_random_kernels", &case)?;
    }

    #[test]
    fn wgpu_agrees_with_the_cpu_reference_on_random_programs(p in programs(8)) {
        random_program_agrees(&DEFAULT, "wgpu_agrees_with_the_cpu_reference_on_random_programs", &p)?;
    }

    /// Programs over empty axes: wgpu agrees with the reference, or both
    /// fail with the same error.
    #[test]
    fn wgpu_runs_empty_axes_as_the_reference_does(p in programs_with_empty_axes(6)) {
        let Ok(solved) = p.graph.solve() else { return Ok(()) };
        let Err(e) = CpuBackend::reference().run_solved(&solved, &p) else {
            return random_program_agrees(&DEFAULT, "wgpu_runs_empty_axes_as_the_reference_does", &p);
        };
        let found = DEFAULT.with("wgpu_runs_empty_axes_as_the_reference_does", |gpu| gpu.run_solved(&solved, &p));
        if let Some(found) = found {
            // The same failure, in the same operation; only the backend's
            // name differs.
            let what = |m: &str| m.split_once(" failed in ").map(|(_, rest)| rest.to_string());
            prop_assert_eq!(what(&e), found.err().as_deref().and_then(what));
        }
    }

    /// Strided inputs (issue 31, item 4): views of every dense input
    /// (Fortran order, permuted, sliced, broadcast at stride 0), uploaded
    /// as they lie and read with their own strides, give on wgpu what the
    /// CPU reference gives on C-contiguous copies.
    #[test]
    fn wgpu_reads_strided_inputs_as_the_reference_reads_copies(p in programs(6), seed in any::<u64>()) {
        let (contiguous, strided) = strided_views(&p, seed);
        let Ok(solved) = p.graph.solve() else { return Ok(()) };
        let expected = CpuBackend::reference().run_solved(&solved, &contiguous).unwrap();
        let found = DEFAULT.with("wgpu_reads_strided_inputs_as_the_reference_reads_copies", |gpu| gpu.run_solved(&solved, &strided));
        if let Some(found) = found {
            let found = found.unwrap();
            for t in &p.results {
                for (i, (e, f)) in expected[t].iter().zip(&found[t]).enumerate() {
                    prop_assert!(Tolerance::GPU.agrees(*e, *f), "tensor {} element {}: cpu {:?}, gpu {:?}", p.graph.name(*t).unwrap(), i, e, f);
                }
            }
        }
    }

    /// With only the last result asked for, pointwise chains run fused.
    #[test]
    fn wgpu_agrees_with_the_cpu_reference_on_fused_programs(p in programs(8)) {
        let Some(&last) = p.results.last() else { return Ok(()) };
        let only_last = Program { results: vec![last], ..p };
        random_program_agrees(&DEFAULT, "wgpu_agrees_with_the_cpu_reference_on_fused_programs", &only_last)?;
    }
}

/// The default backend, shared by the random tests.
static DEFAULT: SharedWgpu = SharedWgpu::new(WgpuOptions::default);

/// Checks a random kernel case on `gpu` against the CPU reference, where
/// every value computed for an element is finite.
fn random_kernel_agrees(
    gpu: &SharedWgpu,
    test: &str,
    case: &KernelCase,
) -> Result<(), TestCaseError> {
    if let Some(found) = gpu.with(test, |gpu| run_case(gpu, case)) {
        let expected = run_case(&mut CpuBackend::reference(), case);
        let finite = case.finite_elements();
        for (i, (e, f)) in expected.iter().zip(&found).enumerate() {
            prop_assert!(
                !finite[i] || Tolerance::GPU.agrees(*e, *f),
                "{}: result element {}: cpu {:?}, gpu {:?}",
                case.kernel,
                i,
                e,
                f
            );
        }
    }
    Ok(())
}

/// Checks a random program on `gpu` against the CPU reference.
fn random_program_agrees(gpu: &SharedWgpu, test: &str, p: &Program) -> Result<(), TestCaseError> {
    let outcome = gpu.with(test, |gpu| {
        compare_backends(p, &mut [&mut CpuBackend::reference(), gpu], Tolerance::GPU)
    });
    if let Some(Err(d)) = outcome {
        prop_assert!(false, "{}", d);
    }
    Ok(())
}

/// Runs a random kernel case on `backend` and reads its result back.
fn run_case<B: Backend>(backend: &mut B, case: &KernelCase) -> Vec<f32> {
    let buffers: Vec<B::Buffer> = case
        .operands
        .iter()
        .map(|d| backend.upload(d).unwrap())
        .collect();
    let refs: Vec<&B::Buffer> = buffers.iter().collect();
    let mut out = backend.alloc(case.launch.result.len as usize).unwrap();
    backend
        .execute(&case.kernel, &case.launch, &mut out, &refs)
        .unwrap();
    backend.download(&out).unwrap()
}

/// A two-layer MLP with a batch of `batch`, `d_in` features, `hidden`
/// hidden units and 3 outputs, with deterministic data.
fn mlp(batch: u64, d_in: u64, hidden: u64) -> Program {
    let mut g = Graph::new();
    let x = g.input("x", &format!("{batch}|{d_in}")).unwrap();
    let w1 = g.input("w1", &format!("{d_in}->{hidden}")).unwrap();
    let b1 = g.input("b1", &format!("{hidden}")).unwrap();
    let w2 = g.input("w2", &format!("{hidden}->3")).unwrap();
    let h = g.compose(w1, x).unwrap();
    let h = g.add(h, b1).unwrap();
    let h = g.unary("relu", h).unwrap();
    let y = g.compose(w2, h).unwrap();
    let s = g.einsum("b|->o=>b|->", &[y]).unwrap();
    let solved = g.solve().unwrap();
    let mut data = Vec::new();
    for name in ["x", "w1", "b1", "w2"] {
        let t = g
            .tensor_ids()
            .find(|&t| g.name(t).unwrap() == name)
            .unwrap();
        let n = solved.shape(t).unwrap().num_elems().unwrap() as usize;
        let values: Vec<f32> = (0..n).map(|i| ((i * 37 % 19) as f32 - 9.0) / 8.0).collect();
        data.push((name, values));
    }
    Program::with_named_data(g, vec![h, y, s], data).unwrap()
}

#[test]
fn the_adapter_runs_on_a_backend_that_wgpu_backend_allows() {
    let Some(gpu) = wgpu_or_skip("the_adapter_runs_on_a_backend_that_wgpu_backend_allows") else {
        return;
    };
    // CI runs these tests once per software adapter (WGPU_BACKEND=vulkan,
    // then gl): a set-up that fell back to the other one must not pass.
    eprintln!("adapter: {}", gpu.name());
    if let Some(allowed) = backend_wgpu::wgpu::Backends::from_env() {
        let backend = gpu.adapter_info().backend;
        assert!(
            allowed.contains(backend.into()),
            "WGPU_BACKEND allows {allowed:?} but the adapter is {}",
            gpu.name()
        );
    }
}

#[test]
fn the_pipeline_cache_compiles_each_kernel_structure_once() {
    let Some(mut gpu) = wgpu_or_skip("the_pipeline_cache_compiles_each_kernel_structure_once")
    else {
        return;
    };
    let small = mlp(2, 3, 4);
    assert_backends_agree(
        &small,
        &mut [&mut CpuBackend::reference(), &mut gpu],
        Tolerance::GPU,
    );
    let first = gpu.cache_stats();
    // compose with add and relu fused as its epilogue, compose, sum: 3
    // launches of 3 kernel structures.
    assert_eq!((first.misses, first.hits), (3, 0));
    assert_eq!(gpu.cached_pipelines(), 3);
    // The same program at other sizes compiles nothing new.
    let large = mlp(17, 50, 33);
    assert_backends_agree(
        &large,
        &mut [&mut CpuBackend::reference(), &mut gpu],
        Tolerance::GPU,
    );
    let second = gpu.cache_stats();
    assert_eq!((second.misses, second.hits), (3, 3));
    assert_eq!(gpu.cached_pipelines(), 3);
}

#[test]
fn launches_larger_than_one_grid_are_split_into_dispatches() {
    let options = WgpuOptions {
        max_workgroups_per_dimension: Some(2),
        ..WgpuOptions::default()
    };
    let Some(mut gpu) = wgpu_with(
        "launches_larger_than_one_grid_are_split_into_dispatches",
        options,
    ) else {
        return;
    };
    // 64 invocations per workgroup, at most 2x2 workgroups per dispatch:
    // 256 points per dispatch. h has 9 * 40 = 360 points: 2 dispatches.
    let p = mlp(9, 5, 40);
    assert_backends_agree(
        &p,
        &mut [&mut CpuBackend::reference(), &mut gpu],
        Tolerance::GPU,
    );
    let stats = gpu.cache_stats();
    assert!(
        stats.dispatches > stats.hits + stats.misses,
        "no launch was split: {stats:?}"
    );
    assert!(stats.two_dimensional_dispatches > 0, "{stats:?}");
}

#[test]
fn every_dispatch_submitted_on_its_own_gives_the_same_results() {
    let options = WgpuOptions {
        max_pending_dispatches: 1,
        max_workgroups_per_dimension: Some(1),
        ..WgpuOptions::default()
    };
    let Some(mut gpu) = wgpu_with(
        "every_dispatch_submitted_on_its_own_gives_the_same_results",
        options,
    ) else {
        return;
    };
    let p = mlp(5, 7, 30);
    assert_backends_agree(
        &p,
        &mut [&mut CpuBackend::reference(), &mut gpu],
        Tolerance::GPU,
    );
    let stats = gpu.cache_stats();
    // One workgroup per dispatch: the first layer's 150 points take 3
    // dispatches, the second layer and the sum one each.
    assert!(stats.dispatches >= 5, "{stats:?}");
    assert!(stats.submissions >= stats.dispatches, "{stats:?}");
}

#[test]
fn launches_over_the_same_buffers_share_a_bind_group() {
    let Some(mut gpu) = wgpu_or_skip("launches_over_the_same_buffers_share_a_bind_group") else {
        return;
    };
    let (kernel, launch) = sum_rows();
    let a = gpu.upload(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let mut out = gpu.alloc(2).unwrap();
    for _ in 0..10 {
        gpu.execute(&kernel, &launch, &mut out, &[&a]).unwrap();
    }
    assert_eq!(gpu.download(&out).unwrap(), vec![6.0, 15.0]);
    let stats = gpu.cache_stats();
    assert_eq!(
        (stats.dispatches, stats.bind_group_reuses),
        (10, 9),
        "{stats:?}"
    );
    assert_eq!(stats.submissions, 1, "{stats:?}");
}

#[test]
fn a_launch_past_the_device_grid_limit_runs_on_a_two_dimensional_grid() {
    let Some(mut gpu) =
        wgpu_or_skip("a_launch_past_the_device_grid_limit_runs_on_a_two_dimensional_grid")
    else {
        return;
    };
    // More workgroups than one grid dimension holds on any device
    // (65,535 * 64 = 4,194,240 points).
    let n = 4_200_017u64;
    let mut g = Graph::new();
    let a = g.input("a", &n.to_string()).unwrap();
    let b = g.input("b", "1").unwrap();
    let c = g.add(a, b).unwrap();
    let solved = g.solve().unwrap();
    let data = [
        ("a", (0..n).map(|i| (i % 1000) as f32).collect::<Vec<_>>()),
        ("b", vec![0.5]),
    ];
    let p = Program::with_named_data(g, vec![c], data).unwrap();
    let out = gpu.run_solved(&solved, &p).unwrap();
    let v = &out[&c];
    assert_eq!(v.len(), n as usize);
    for i in [0usize, 1, 4_194_239, 4_194_240, 4_194_304, n as usize - 1] {
        assert_eq!(v[i], (i % 1000) as f32 + 0.5, "element {i}");
    }
}

#[test]
fn long_reductions_agree_with_the_reference() {
    let Some(mut gpu) = wgpu_or_skip("long_reductions_agree_with_the_reference") else {
        return;
    };
    let mut g = Graph::new();
    let m = g.input("m", "3,20000").unwrap();
    let rows = g.einsum("ij=>i", &[m]).unwrap();
    let total = g.einsum("ij=>", &[m]).unwrap();
    let data = [(
        "m",
        (0..60_000).map(|i| ((i % 7) as f32 - 3.0) / 16.0).collect(),
    )];
    let p = Program::with_named_data(g, vec![rows, total], data).unwrap();
    assert_backends_agree(
        &p,
        &mut [&mut CpuBackend::reference(), &mut gpu],
        Tolerance::GPU,
    );
}

fn sum_rows() -> (Kernel, Launch) {
    (
        Kernel::new(
            vec![IterKind::Parallel, IterKind::Reduction],
            1,
            Expr::Load(0),
            Accumulate::Add,
        ),
        Launch::new(
            vec![2, 3],
            Layout::new(0, vec![1, 0], 2),
            vec![Layout::new(0, vec![3, 1], 6)],
        ),
    )
}

#[test]
fn kernels_run_directly_on_the_backend() {
    let Some(mut gpu) = wgpu_or_skip("kernels_run_directly_on_the_backend") else {
        return;
    };
    let (kernel, launch) = sum_rows();
    let a = gpu.upload(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
    let mut out = gpu.alloc(2).unwrap();
    gpu.execute(&kernel, &launch, &mut out, &[&a]).unwrap();
    assert_eq!(gpu.download(&out).unwrap(), vec![6.0, 15.0]);
    // A second run overwrites rather than accumulates.
    gpu.execute(&kernel, &launch, &mut out, &[&a]).unwrap();
    assert_eq!(gpu.download(&out).unwrap(), vec![6.0, 15.0]);
    let empty = gpu.alloc(0).unwrap();
    assert_eq!(gpu.download(&empty).unwrap(), Vec::<f32>::new());
    assert!(gpu.name().starts_with("wgpu: "), "{}", gpu.name());
}

#[test]
fn bad_launches_are_typed_errors_not_device_errors() {
    let Some(mut gpu) = wgpu_or_skip("bad_launches_are_typed_errors_not_device_errors") else {
        return;
    };
    let (kernel, launch) = sum_rows();
    let a = gpu.upload(&[1.0; 6]).unwrap();
    let mut out = gpu.alloc(2).unwrap();
    let e = gpu.execute(&kernel, &launch, &mut out, &[]).unwrap_err();
    assert!(
        matches!(
            e,
            WgpuError::Launch(LaunchError::Buffers {
                expected: 1,
                found: 0
            })
        ),
        "{e}"
    );
    let short = gpu.upload(&[1.0; 5]).unwrap();
    let e = gpu
        .execute(&kernel, &launch, &mut out, &[&short])
        .unwrap_err();
    assert!(
        matches!(
            e,
            WgpuError::Launch(LaunchError::BufferLength {
                expected: 6,
                found: 5,
                ..
            })
        ),
        "{e}"
    );
    let mut past_the_end = launch.clone();
    past_the_end.sizes = vec![2, 4];
    let e = gpu
        .execute(&kernel, &past_the_end, &mut out, &[&a])
        .unwrap_err();
    assert!(matches!(e, WgpuError::Launch(_)), "{e}");
    // A parallel iterator that does not move through the result.
    let mut racy = launch.clone();
    racy.result.strides = vec![0, 0];
    racy.result.len = 1;
    let mut one = gpu.alloc(1).unwrap();
    let e = gpu.execute(&kernel, &racy, &mut one, &[&a]).unwrap_err();
    assert!(
        matches!(
            e,
            WgpuError::Launch(LaunchError::WriteConflict {
                iterator: 0,
                size: 2
            })
        ),
        "{e}"
    );
    // A buffer of another device.
    let Some(mut other) = wgpu_or_skip("bad_launches_are_typed_errors_not_device_errors") else {
        return;
    };
    let foreign = other.upload(&[1.0; 6]).unwrap();
    let e = gpu
        .execute(&kernel, &launch, &mut out, &[&foreign])
        .unwrap_err();
    assert!(matches!(e, WgpuError::ForeignBuffer), "{e}");
    // The backend still works afterwards.
    gpu.execute(&kernel, &launch, &mut out, &[&a]).unwrap();
    assert_eq!(gpu.download(&out).unwrap(), vec![3.0, 3.0]);
}

#[test]
fn buffers_past_the_device_limit_fail_with_the_limit_named() {
    let Some(mut gpu) = wgpu_or_skip("buffers_past_the_device_limit_fail_with_the_limit_named")
    else {
        return;
    };
    let max = gpu.max_buffer_bytes();
    let e = gpu.alloc((max / 4 + 1) as usize).unwrap_err();
    let message = e.to_string();
    assert!(
        matches!(e, WgpuError::BufferTooLarge { limit, .. } if limit == max),
        "{message}"
    );
    assert!(message.contains(&max.to_string()), "{message}");
    // Through a graph: the error names the backend and the operation.
    let side = ((max / 4) as f64).sqrt() as u64 + 1;
    let mut g = Graph::new();
    let a = g.input("a", &side.to_string()).unwrap();
    let b = g.input("b", &side.to_string()).unwrap();
    let outer = g.einsum("i;j=>ij", &[a, b]).unwrap();
    let solved = g.solve().unwrap();
    let data = [
        ("a", vec![1.0; side as usize]),
        ("b", vec![1.0; side as usize]),
    ];
    let p = Program::with_named_data(g, vec![outer], data).unwrap();
    match solved.run(&mut gpu, p.inputs, &[outer], &p.options) {
        Err(RunError::Backend {
            op: Some(op),
            source,
            ..
        }) if op.id == 0
            && matches!(
                source.downcast_ref::<WgpuError>(),
                Some(WgpuError::BufferTooLarge { .. })
            ) => {}
        other => panic!("expected BufferTooLarge in op #0, got {other:?}"),
    }
}

#[test]
fn special_values_follow_the_cpu_reference() {
    use shape_core::kernel::{BinaryOp, CompareOp, UnaryOp};
    let Some(mut gpu) = wgpu_or_skip("special_values_follow_the_cpu_reference") else {
        return;
    };
    let values = [
        0.0,
        -0.0,
        1.0,
        -1.0,
        2.5,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        f32::MIN_POSITIVE,
        1e30,
    ];
    let n = values.len() as u64;
    let x = || Box::new(Expr::Load(0));
    let y = || Box::new(Expr::Load(1));
    let bodies = [
        Expr::Unary(UnaryOp::Log, x()),
        Expr::Unary(UnaryOp::Sqrt, x()),
        Expr::Unary(UnaryOp::Exp, x()),
        Expr::Unary(UnaryOp::Relu, x()),
        Expr::Binary(BinaryOp::Div, x(), y()),
        Expr::Binary(BinaryOp::Max, x(), y()),
        Expr::Binary(BinaryOp::Min, x(), y()),
        Expr::Binary(BinaryOp::Mul, x(), y()),
        Expr::Binary(BinaryOp::Max, Box::new(Expr::Unary(UnaryOp::Log, x())), y()),
        Expr::Compare(CompareOp::Lt, x(), y()),
        Expr::Compare(CompareOp::Le, x(), y()),
        Expr::Compare(CompareOp::Eq, x(), y()),
        Expr::Compare(CompareOp::Ne, x(), y()),
        Expr::Select(x(), y(), Box::new(Expr::Const(7.0))),
    ];
    // Every pair of values: x varies along iterator 0, y along iterator 1.
    let launch = Launch::new(
        vec![n, n],
        Layout::new(0, vec![n, 1], n * n),
        vec![Layout::new(0, vec![1, 0], n), Layout::new(0, vec![0, 1], n)],
    );
    // WGSL lets drivers assume no NaN or infinity occurs; software
    // adapters (llvmpipe, as in CI) keep IEEE semantics and are held to
    // the CPU everywhere, hardware ones only where all values are finite.
    let strict = gpu.adapter_info().device_type == backend_wgpu::wgpu::DeviceType::Cpu;
    let mut cpu = CpuBackend::reference();
    for body in bodies {
        let kernel = Kernel::new(
            vec![IterKind::Parallel, IterKind::Parallel],
            2,
            body,
            Accumulate::Assign,
        );
        let mut expected = cpu.alloc((n * n) as usize).unwrap();
        cpu.execute(
            &kernel,
            &launch,
            &mut expected,
            &[&values.to_vec(), &values.to_vec()],
        )
        .unwrap();
        let (a, c) = (gpu.upload(&values).unwrap(), gpu.upload(&values).unwrap());
        let mut out = gpu.alloc((n * n) as usize).unwrap();
        gpu.execute(&kernel, &launch, &mut out, &[&a, &c]).unwrap();
        let found = gpu.download(&out).unwrap();
        for (i, (e, f)) in expected.iter().zip(&found).enumerate() {
            let (x, y) = (values[i / n as usize], values[i % n as usize]);
            let finite = e.is_finite() && x.is_finite() && y.is_finite();
            assert!(
                (!strict && !finite) || Tolerance::GPU.agrees(*e, *f),
                "{kernel}: x = {}, y = {}: cpu {e}, gpu {f}",
                values[i / n as usize],
                values[i % n as usize]
            );
        }
    }
}

#[test]
fn kernels_past_the_binding_and_parameter_limits_are_refused() {
    use shape_core::kernel::BinaryOp;
    let Some(mut gpu) = wgpu_or_skip("kernels_past_the_binding_and_parameter_limits_are_refused")
    else {
        return;
    };
    // More operands than the device binds beside the result and the
    // parameter block.
    let limits = gpu.limits().clone();
    let bindable = (limits.max_storage_buffers_per_shader_stage as usize - 1)
        .min(limits.max_bindings_per_bind_group as usize - 2);
    let operands = bindable + 1;
    // llvmpipe binds 32 storage buffers; devices that allow thousands
    // skip this part.
    if operands <= 64 {
        let body = (1..operands).fold(Expr::Load(0), |sum, o| {
            Expr::Binary(BinaryOp::Add, Box::new(sum), Box::new(Expr::Load(o)))
        });
        let one = Layout::new(0, vec![1], 1);
        let kernel = Kernel::new(vec![IterKind::Parallel], operands, body, Accumulate::Assign);
        let launch = Launch::new(vec![1], one.clone(), vec![one; operands]);
        let buffers: Vec<_> = (0..operands).map(|_| gpu.upload(&[1.0]).unwrap()).collect();
        let refs: Vec<_> = buffers.iter().collect();
        let mut out = gpu.alloc(1).unwrap();
        let e = gpu.execute(&kernel, &launch, &mut out, &refs).unwrap_err();
        assert!(
            matches!(e, WgpuError::TooManyOperands { limit, .. } if limit as usize == bindable),
            "{e}"
        );
    }
    // So many iterators that the parameter block outgrows a uniform
    // binding (2 words per iterator for a kernel without operands).
    let block_limit = limits.max_uniform_buffer_binding_size.min(1 << 20);
    let n = (block_limit / 8 + 8) as usize;
    let kernel = Kernel::new(
        vec![IterKind::Parallel; n],
        0,
        Expr::Const(1.0),
        Accumulate::Assign,
    );
    let launch = Launch::new(vec![1; n], Layout::new(0, vec![0; n], 1), vec![]);
    let mut out = gpu.alloc(1).unwrap();
    let e = gpu.execute(&kernel, &launch, &mut out, &[]).unwrap_err();
    assert!(
        matches!(e, WgpuError::ParamsTooLarge { iterators, .. } if iterators == n),
        "{e}"
    );
    // The CPU runs it.
    let mut cpu = CpuBackend::reference();
    let mut out = cpu.alloc(1).unwrap();
    cpu.execute(&kernel, &launch, &mut out, &[]).unwrap();
    assert_eq!(out, vec![1.0]);
}

// Long reductions. Mesa's software adapters (lavapipe, llvmpipe through
// GL) stop a shader loop silently after 65,535 iterations per invocation,
// counting every loop: each case below printed a wrong value before
// reductions were split across invocations and passes.

/// Runs `einsum(spec)` over `inputs` (name, spec, values) on `backend`
/// and returns the result.
fn einsum_on(
    backend: &mut dyn ProgramRunner,
    spec: &str,
    inputs: &[(&str, &str, Vec<f32>)],
) -> Vec<f32> {
    let mut g = Graph::new();
    let ids: Vec<_> = inputs
        .iter()
        .map(|(name, shape, _)| g.input(name, shape).unwrap())
        .collect();
    let out = g.einsum(spec, &ids).unwrap();
    let solved = g.solve().unwrap();
    let data = inputs
        .iter()
        .map(|(name, _, values)| (*name, values.clone()));
    let p = Program::with_named_data(g, vec![out], data).unwrap();
    backend.run_solved(&solved, &p).unwrap()[&out].clone()
}

#[test]
fn a_sum_of_65536_ones_is_65536() {
    let Some(mut gpu) = wgpu_or_skip("a_sum_of_65536_ones_is_65536") else {
        return;
    };
    let sum = einsum_on(&mut gpu, "i=>", &[("a", "65536", vec![1.0; 65536])]);
    assert_eq!(sum, vec![65536.0]);
}

#[test]
fn an_outer_sum_of_256_by_256_ones_is_65536() {
    let Some(mut gpu) = wgpu_or_skip("an_outer_sum_of_256_by_256_ones_is_65536") else {
        return;
    };
    // Two reduction iterators: Mesa's budget counts the back-edges of
    // both loops (this printed 65027 = 254 * 256 + 3).
    let sum = einsum_on(
        &mut gpu,
        "i;j=>",
        &[("a", "256", vec![1.0; 256]), ("b", "256", vec![1.0; 256])],
    );
    assert_eq!(sum, vec![65536.0]);
}

#[test]
fn a_contraction_of_length_70000_agrees_with_the_reference() {
    let Some(mut gpu) = wgpu_or_skip("a_contraction_of_length_70000_agrees_with_the_reference")
    else {
        return;
    };
    let n = 70_000;
    let a: Vec<f32> = (0..n)
        .map(|i| ((i * 37 % 101) as f32 - 50.0) / 16.0)
        .collect();
    let b: Vec<f32> = (0..n).map(|i| ((i * 11 % 23) as f32 - 5.0) / 8.0).collect();
    let inputs = [("a", "70000", a), ("b", "70000", b)];
    let expected = einsum_on(&mut CpuBackend::reference(), "i;i=>", &inputs);
    let found = einsum_on(&mut gpu, "i;i=>", &inputs);
    assert!(
        Tolerance::GPU.agrees(expected[0], found[0]),
        "cpu {expected:?}, gpu {found:?}, relative difference {}",
        ((expected[0] - found[0]) / expected[0]).abs()
    );
}

#[test]
fn a_reduction_past_a_million_elements_is_exact() {
    let Some(mut gpu) = wgpu_or_skip("a_reduction_past_a_million_elements_is_exact") else {
        return;
    };
    // Quarter integers sum exactly in any order while the partial sums
    // stay below 2^22 in magnitude: this sum is 524,290.75.
    let n = 1_048_583usize;
    let values: Vec<f32> = (0..n).map(|i| (i % 5) as f32 / 4.0).collect();
    let expected: f64 = values.iter().map(|&v| v as f64).sum();
    assert_eq!(expected, 524_290.75);
    let sum = einsum_on(&mut gpu, "i=>", &[("a", &n.to_string(), values)]);
    assert_eq!(sum, vec![524_290.75]);
    // The same tensor as 3 rows of 349,528 (one workgroup reduction per
    // row) against the reference.
    let rows: Vec<f32> = (0..3 * 349_528)
        .map(|i| ((i % 7) as f32 - 3.0) / 2.0)
        .collect();
    let inputs = [("m", "3,349528", rows)];
    assert_eq!(
        einsum_on(&mut gpu, "ij=>i", &inputs),
        einsum_on(&mut CpuBackend::reference(), "ij=>i", &inputs)
    );
}

/// A reduction of `values` with `accumulate`, run directly on `backend`.
fn reduce<B: Backend>(backend: &mut B, accumulate: Accumulate, values: &[f32]) -> f32
where
    B::Error: std::fmt::Debug,
{
    let n = values.len() as u64;
    let kernel = Kernel::new(vec![IterKind::Reduction], 1, Expr::Load(0), accumulate);
    let launch = Launch::new(
        vec![n],
        Layout::new(0, vec![0], 1),
        vec![Layout::new(0, vec![1], n)],
    );
    let input = backend.upload(values).unwrap();
    let mut out = backend.alloc(1).unwrap();
    backend
        .execute(&kernel, &launch, &mut out, &[&input])
        .unwrap();
    backend.download(&out).unwrap()[0]
}

#[test]
fn max_min_and_product_reductions_see_every_element_past_the_loop_limit() {
    let Some(mut gpu) =
        wgpu_or_skip("max_min_and_product_reductions_see_every_element_past_the_loop_limit")
    else {
        return;
    };
    let n = 200_003;
    let mut values: Vec<f32> = (0..n).map(|i| ((i % 13) as f32 - 6.0) / 8.0).collect();
    // The extremes sit past element 65,535, and a NaN that max and min
    // ignore (as Rust's f32::max and f32::min do).
    values[150_001] = 9.5;
    values[190_000] = -7.25;
    values[100] = f32::NAN;
    assert_eq!(reduce(&mut gpu, Accumulate::Max, &values), 9.5);
    assert_eq!(reduce(&mut gpu, Accumulate::Min, &values), -7.25);
    // A product of ones with factors of 2 and 0.5 placed past the limit.
    let mut factors = vec![1.0f32; n];
    for i in (70_000..n).step_by(10_000) {
        factors[i] = 2.0;
    }
    factors[66_000] = 0.5;
    // Fourteen factors of 2 (70,000 to 200,000) and one of 0.5.
    assert_eq!(reduce(&mut gpu, Accumulate::Mul, &factors), 8192.0);
    // Any NaN makes a sum or a product NaN, wherever it is.
    factors[199_999] = f32::NAN;
    assert!(reduce(&mut gpu, Accumulate::Mul, &factors).is_nan());
    let mut ones = vec![1.0f32; n];
    ones[n - 1] = f32::NAN;
    assert!(reduce(&mut gpu, Accumulate::Add, &ones).is_nan());
}

/// Options that split every reduction of two points or more: one point
/// per invocation, so a workgroup covers 256 points and a third pass
/// starts past 65,536 points.
fn split_everything() -> WgpuOptions {
    WgpuOptions {
        loop_budget: LoopBudget::new(1).unwrap(),
        workgroup_reduction_threshold: 1,
        ..WgpuOptions::default()
    }
}

/// Three points per invocation: workgroups cover 768 points, and short
/// partial rows run per element when there are more outputs than partials.
fn split_in_threes() -> WgpuOptions {
    WgpuOptions {
        loop_budget: LoopBudget::new(3).unwrap(),
        workgroup_reduction_threshold: 1,
        ..WgpuOptions::default()
    }
}

static SPLIT: SharedWgpu = SharedWgpu::new(split_everything);
static SPLIT_IN_THREES: SharedWgpu = SharedWgpu::new(split_in_threes);

/// A reduction whose length sits near a workgroup or pass boundary.
#[derive(Clone, Debug)]
struct BoundaryCase {
    accumulate: Accumulate,
    /// Outputs, on a parallel iterator before (`true`) or after the
    /// reduction iterators.
    outputs: u64,
    outputs_first: bool,
    /// One or two reduction iterators.
    reduction: Vec<u64>,
    /// Budget 1 (`false`) or 3.
    threes: bool,
    seed: u64,
}

impl BoundaryCase {
    fn kernel_and_launch(&self) -> (Kernel, Launch) {
        let mut iterators = vec![IterKind::Reduction; self.reduction.len()];
        let mut sizes = self.reduction.clone();
        let at = if self.outputs_first { 0 } else { sizes.len() };
        iterators.insert(at, IterKind::Parallel);
        sizes.insert(at, self.outputs);
        // The operand is row-major over the iterators in kernel order.
        let mut strides = vec![0; sizes.len()];
        let mut step = 1;
        for k in (0..sizes.len()).rev() {
            strides[k] = step;
            step *= sizes[k];
        }
        let mut result_strides = vec![0; sizes.len()];
        result_strides[at] = 1;
        (
            Kernel::new(iterators, 1, Expr::Load(0), self.accumulate),
            Launch::new(
                sizes,
                Layout::new(0, result_strides, self.outputs),
                vec![Layout::new(0, strides, step)],
            ),
        )
    }

    /// Values whose reduction is exact in any order, so that the GPU's
    /// tree and the CPU's sequence must agree bit for bit: quarter
    /// integers for sums (partial sums stay far below 2^22); ±1 for
    /// products, with a factor of 2 or 0.5 every 2,048 elements (so that
    /// no partial product, whichever elements it takes, leaves 2^±100:
    /// an underflow in one order and not in another would differ);
    /// anything with NaNs (which max and min ignore) for max and min.
    fn values(&self, len: u64) -> Vec<f32> {
        let mut state = self.seed | 1;
        (0..len)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let r = state >> 40;
                match self.accumulate {
                    Accumulate::Mul if i.is_multiple_of(2048) => [2.0, 0.5][r as usize % 2],
                    Accumulate::Mul => [1.0, -1.0][r as usize % 2],
                    Accumulate::Max | Accumulate::Min if r.is_multiple_of(50) => f32::NAN,
                    _ => (r % 17) as f32 / 4.0 - 2.0,
                }
            })
            .collect()
    }
}

fn boundary_cases() -> impl Strategy<Value = BoundaryCase> {
    (
        prop_oneof![
            Just(Accumulate::Add),
            Just(Accumulate::Mul),
            Just(Accumulate::Max),
            Just(Accumulate::Min)
        ],
        1u64..4,
        any::<bool>(),
        any::<bool>(),
        // Near m spans of a workgroup (or of a second pass, for budget 1).
        (1u64..4, any::<bool>(), -3i64..=3),
        1u64..5,
        any::<u64>(),
    )
        .prop_map(
            |(accumulate, outputs, outputs_first, threes, (m, second_pass, d), split, seed)| {
                let span = if threes { 768 } else { 256 };
                let scale = if second_pass && !threes {
                    span * 256
                } else {
                    span
                };
                let length = (m * scale).saturating_add_signed(d).max(1);
                // One iterator, or two whose product is near the length.
                let reduction = if split == 1 {
                    vec![length]
                } else {
                    vec![split, length.div_ceil(split)]
                };
                BoundaryCase {
                    accumulate,
                    outputs,
                    outputs_first,
                    reduction,
                    threes,
                    seed,
                }
            },
        )
}

/// Runs `kernel` over `launch` with one operand on `backend`.
fn run_one<B: Backend>(
    backend: &mut B,
    kernel: &Kernel,
    launch: &Launch,
    values: &[f32],
) -> Vec<f32>
where
    B::Error: std::fmt::Debug,
{
    let input = backend.upload(values).unwrap();
    let mut out = backend.alloc(launch.result.len as usize).unwrap();
    backend
        .execute(kernel, launch, &mut out, &[&input])
        .unwrap();
    backend.download(&out).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(64),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../proptest-regressions/gpu.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn reductions_around_workgroup_and_pass_boundaries_match_the_reference_exactly(case in boundary_cases()) {
        let (kernel, launch) = case.kernel_and_launch();
        let values = case.values(launch.operands[0].len);
        let shared = if case.threes { &SPLIT_IN_THREES } else { &SPLIT };
        let found = shared.with("reductions_around_workgroup_and_pass_boundaries", |gpu| {
            let before = gpu.cache_stats().workgroup_passes;
            let found = run_one(gpu, &kernel, &launch, &values);
            (found, gpu.cache_stats().workgroup_passes - before)
        });
        if let Some((found, passes)) = found {
            prop_assert!(passes >= 1, "{kernel} {:?}: no workgroup reduction ran", launch.sizes);
            let expected = run_one(&mut CpuBackend::reference(), &kernel, &launch, &values);
            for (i, (e, f)) in expected.iter().zip(&found).enumerate() {
                prop_assert!(
                    Tolerance::EXACT.agrees(*e, *f),
                    "{} {:?} ({} passes): element {}: cpu {:?}, gpu {:?}", kernel, launch.sizes, passes, i, e, f
                );
            }
        }
    }

    #[test]
    fn split_reductions_agree_with_the_cpu_reference_on_random_kernels(case in kernel_cases()) {
        random_kernel_agrees(&SPLIT, "split_reductions_agree_with_the_cpu_reference_on_random_kernels", &case)?;
    }

    #[test]
    fn split_reductions_agree_with_the_cpu_reference_on_random_programs(p in programs(8)) {
        random_program_agrees(&SPLIT, "split_reductions_agree_with_the_cpu_reference_on_random_programs", &p)?;
    }
}

/// Row sums of twice `rows` rows of `len` quarter integers on `gpu`,
/// checked against the reference. (The partials of a split reduction are
/// summed by a plain row sum: the doubling keeps the first pass's kernel
/// apart from the next passes'.)
fn row_sums(gpu: &mut WgpuBackend, rows: u64, len: u64) {
    let kernel = Kernel::new(
        vec![IterKind::Parallel, IterKind::Reduction],
        1,
        Expr::Binary(
            shape_core::kernel::BinaryOp::Mul,
            Box::new(Expr::Load(0)),
            Box::new(Expr::Const(2.0)),
        ),
        Accumulate::Add,
    );
    let launch = Launch::new(
        vec![rows, len],
        Layout::new(0, vec![1, 0], rows),
        vec![Layout::new(0, vec![len, 1], rows * len)],
    );
    let values: Vec<f32> = (0..rows * len)
        .map(|i| (i % 11) as f32 / 4.0 - 1.0)
        .collect();
    let expected = run_one(&mut CpuBackend::reference(), &kernel, &launch, &values);
    assert_eq!(
        run_one(gpu, &kernel, &launch, &values),
        expected,
        "{rows} rows of {len}"
    );
}

#[test]
fn split_reductions_compile_each_pass_structure_once() {
    // Three passes: 70,000 points are 274 workgroups of 256 per row, then
    // 2, then 1; the second and third passes share their kernel.
    let Some(mut gpu) = wgpu_with(
        "split_reductions_compile_each_pass_structure_once",
        split_everything(),
    ) else {
        return;
    };
    row_sums(&mut gpu, 2, 70_000);
    let first = gpu.cache_stats();
    assert_eq!(first.workgroup_passes, 3, "{first:?}");
    assert_eq!((first.misses, first.hits), (2, 1), "{first:?}");
    // Other sizes with as many passes compile nothing new.
    row_sums(&mut gpu, 3, 100_000);
    let second = gpu.cache_stats();
    assert_eq!(second.workgroup_passes, 6, "{second:?}");
    assert_eq!((second.misses, second.hits), (2, 4), "{second:?}");
    // Nor do fewer passes.
    row_sums(&mut gpu, 5, 300);
    let third = gpu.cache_stats();
    assert_eq!(third.workgroup_passes, 8, "{third:?}");
    assert_eq!((third.misses, third.hits), (2, 6), "{third:?}");

    // With the default options: a workgroup pass, then the partials per
    // element, at any length that needs two passes.
    let Some(mut gpu) = wgpu_or_skip("split_reductions_compile_each_pass_structure_once") else {
        return;
    };
    row_sums(&mut gpu, 2, 70_000);
    row_sums(&mut gpu, 3, 1_000_000);
    let stats = gpu.cache_stats();
    assert_eq!(stats.workgroup_passes, 2, "{stats:?}");
    assert_eq!((stats.misses, stats.hits), (2, 2), "{stats:?}");
}

#[test]
fn the_threshold_keeps_reductions_within_the_budget_on_one_invocation() {
    let options = WgpuOptions {
        workgroup_reduction_threshold: u64::MAX,
        ..WgpuOptions::default()
    };
    let Some(mut gpu) = wgpu_with(
        "the_threshold_keeps_reductions_within_the_budget_on_one_invocation",
        options,
    ) else {
        return;
    };
    row_sums(&mut gpu, 1, 4096);
    assert_eq!(gpu.cache_stats().workgroup_passes, 0);
    // Past the budget, the reduction is split whatever the threshold.
    row_sums(&mut gpu, 1, 4097);
    assert_eq!(gpu.cache_stats().workgroup_passes, 1);
}

/// Launches with an iterator of size 0, on every backend: an empty
/// parallel iterator writes nothing; an empty reduction writes a sum's 0
/// and a product's 1 (through the epilogue), over whatever the result
/// held; a maximum, minimum or assignment of no values is an error.
#[test]
fn empty_reductions_write_their_identity_or_fail() {
    use shape_core::kernel::BinaryOp;
    fn run<B: Backend>(
        backend: &mut B,
        kernel: &Kernel,
        launch: &Launch,
    ) -> Result<Vec<f32>, String>
    where
        B::Error: std::fmt::Display,
    {
        let a = backend.upload(&[]).unwrap();
        let scale = backend.upload(&[2.0, 3.0, 4.0]).unwrap();
        let mut out = backend.upload(&[7.0, 7.0, 7.0]).unwrap();
        backend
            .execute(kernel, launch, &mut out, &[&a, &scale])
            .map_err(|e| e.to_string())?;
        Ok(backend.download(&out).unwrap())
    }
    let kernel = |accumulate| {
        Kernel::new(
            vec![IterKind::Parallel, IterKind::Reduction],
            2,
            Expr::Load(0),
            accumulate,
        )
    };
    let rows_of_nothing = Launch::new(
        vec![3, 0],
        Layout::new(0, vec![1, 0], 3),
        vec![Layout::new(0, vec![0, 1], 0), Layout::new(0, vec![1, 0], 3)],
    );
    let no_rows = Launch::new(
        vec![0, 5],
        Layout::new(0, vec![1, 0], 3),
        vec![Layout::new(0, vec![5, 1], 0), Layout::new(0, vec![1, 0], 3)],
    );
    let scaled = kernel(Accumulate::Mul).with_epilogue(Expr::Binary(
        BinaryOp::Add,
        Box::new(Expr::Accumulated),
        Box::new(Expr::Load(1)),
    ));
    // Each kernel and launch, with the values written or the error's text.
    type Expected = Result<Vec<f32>, &'static str>;
    let cases: Vec<(Kernel, &Launch, Expected)> = vec![
        (kernel(Accumulate::Add), &rows_of_nothing, Ok(vec![0.0; 3])),
        (kernel(Accumulate::Mul), &rows_of_nothing, Ok(vec![1.0; 3])),
        (scaled, &rows_of_nothing, Ok(vec![3.0, 4.0, 5.0])),
        (
            kernel(Accumulate::Max),
            &rows_of_nothing,
            Err("a maximum of no values"),
        ),
        (
            kernel(Accumulate::Min),
            &rows_of_nothing,
            Err("a minimum of no values"),
        ),
        (
            kernel(Accumulate::Assign),
            &rows_of_nothing,
            Err("an assignment of no values"),
        ),
        (kernel(Accumulate::Max), &no_rows, Ok(vec![7.0; 3])),
        (kernel(Accumulate::Add), &no_rows, Ok(vec![7.0; 3])),
    ];
    let mut gpu = wgpu_or_skip("empty_reductions_write_their_identity_or_fail");
    for (kernel, launch, expected) in cases {
        let mut found = vec![
            run(&mut CpuBackend::reference(), &kernel, launch),
            run(&mut CpuBackend::coalesced(), &kernel, launch),
        ];
        if let Some(gpu) = gpu.as_mut() {
            found.push(run(gpu, &kernel, launch));
        }
        for f in found {
            match (&expected, f) {
                (Ok(values), Ok(f)) => assert_eq!(&f, values, "{kernel} {:?}", launch.sizes),
                (Err(text), Err(e)) => assert!(e.contains(text), "{kernel}: {e}"),
                (e, f) => panic!("{kernel} {:?}: expected {e:?}, found {f:?}", launch.sizes),
            }
        }
    }
}

#[test]
fn a_wait_past_its_limit_is_a_typed_error_and_the_backend_refuses_more_work() {
    // A zero limit cannot be met by enough work: a 512 x 512 x 512
    // contraction run one invocation per result element (134 M
    // multiply-adds), queued 1, 2, 4, ... times before one read-back, until
    // the wait returns `Timeout` (a software adapter at the first round, an
    // H200 within a few). What the device still runs is then unknown, so
    // the backend takes no further work.
    let options = WgpuOptions {
        wait_timeout: Some(std::time::Duration::ZERO),
        tiled_contractions: false,
        ..WgpuOptions::default()
    };
    let Some(mut gpu) = wgpu_with("a_wait_past_its_limit", options) else {
        return;
    };
    if gpu.adapter_info().backend == backend_wgpu::wgpu::Backend::Gl {
        // wgpu's GL backend finishes a submission before its wait starts
        // on llvmpipe, so no wait is ever short of time there.
        eprintln!("a_wait_past_its_limit: not on GL, whose submissions end before the wait");
        return;
    }
    let n = 512u64;
    let (kernel, launch) = shape_core::kernel::matmul(n, n, n);
    let a = gpu.upload(&vec![0.5; (n * n) as usize]).unwrap();
    let mut out = gpu.alloc((n * n) as usize).unwrap();
    let mut timed_out = None;
    for round in 0..12 {
        for _ in 0..1u32 << round {
            gpu.execute(&kernel, &launch, &mut out, &[&a, &a]).unwrap();
        }
        match gpu.download(&out) {
            // A device fast enough to finish: the values are right.
            Ok(values) => assert!(values.iter().all(|&v| v == 128.0), "round {round}"),
            Err(e) => {
                timed_out = Some(e);
                break;
            }
        }
    }
    let e = timed_out.expect("4095 queued contractions finished within a zero wait");
    assert_eq!(e.kind(), "timeout", "{e}");
    assert!(e.to_string().contains("SHAPE_WGPU_WAIT_TIMEOUT"), "{e}");
    let after = gpu.alloc(4).and_then(|b| gpu.download(&b)).unwrap_err();
    assert_eq!(after.kind(), "device_lost", "{after}");
}
