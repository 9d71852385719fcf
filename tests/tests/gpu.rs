//! The wgpu backend on a real adapter (Mesa's llvmpipe in CI), checked
//! against the CPU reference. Without an adapter these tests skip, unless
//! `SHAPE_REQUIRE_GPU=1` (CI) makes them fail.

use backend_cpu::CpuBackend;
use backend_wgpu::{WgpuError, WgpuOptions};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use shape_core::kernel::{Accumulate, Expr, IterKind, Kernel, Launch, LaunchError, Layout};
use shape_core::Backend;
use shape_solver::{Graph, RunError};
use shape_tests::differential::{
    assert_backends_agree, compare_backends, ProgramRunner, Tolerance,
};
use shape_tests::gpu::{wgpu_or_skip, wgpu_with, with_shared_wgpu};
use shape_tests::kernels::{kernel_cases, KernelCase};
use shape_tests::programs::{programs, Program};

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../proptest-regressions/gpu.txt"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn wgpu_agrees_with_the_cpu_reference_on_random_kernels(case in kernel_cases()) {
        let outcome = with_shared_wgpu("wgpu_agrees_with_the_cpu_reference_on_random_kernels", |gpu| {
            run_case(gpu, &case)
        });
        if let Some(found) = outcome {
            let expected = run_case(&mut CpuBackend::reference(), &case);
            let finite = case.finite_elements();
            for (i, (e, f)) in expected.iter().zip(&found).enumerate() {
                prop_assert!(
                    !finite[i] || Tolerance::GPU.agrees(*e, *f),
                    "{}: result element {}: cpu {:?}, gpu {:?}", case.kernel, i, e, f
                );
            }
        }
    }

    #[test]
    fn wgpu_agrees_with_the_cpu_reference_on_random_programs(p in programs(8)) {
        let outcome = with_shared_wgpu("wgpu_agrees_with_the_cpu_reference_on_random_programs", |gpu| {
            compare_backends(&p, &mut [&mut CpuBackend::reference(), gpu], Tolerance::GPU)
        });
        if let Some(Err(d)) = outcome {
            prop_assert!(false, "{}", d);
        }
    }
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
    // compose, add, relu, compose, sum: 5 launches, and the two composes
    // share one kernel structure.
    assert_eq!((first.misses, first.hits), (4, 1));
    assert_eq!(gpu.cached_pipelines(), 4);
    // The same program at other sizes compiles nothing new.
    let large = mlp(17, 50, 33);
    assert_backends_agree(
        &large,
        &mut [&mut CpuBackend::reference(), &mut gpu],
        Tolerance::GPU,
    );
    let second = gpu.cache_stats();
    assert_eq!((second.misses, second.hits), (4, 6));
    assert_eq!(gpu.cached_pipelines(), 4);
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
    // One workgroup per dispatch: 150 points take 3 dispatches.
    assert!(stats.dispatches > 5, "{stats:?}");
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
            source: WgpuError::BufferTooLarge { .. },
            ..
        }) if op.id == 0 => {}
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
