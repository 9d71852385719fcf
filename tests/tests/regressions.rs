//! Every failure a property test once found and committed to
//! `proptest-regressions/`, as an explicit test: a seed there encodes the
//! generator's choices, so a change to a generator would silently make it
//! test something else; these stay what they were.

use backend_cpu::CpuBackend;
use shape_core::kernel::{Accumulate, BinaryOp, Expr, IterKind, Kernel, Launch, Layout, UnaryOp};
use shape_core::Backend;
use shape_tests::differential::Tolerance;
use shape_tests::gpu::wgpu_or_skip;
use shape_tests::kernels::KernelCase;

fn load() -> Box<Expr> {
    Box::new(Expr::Load(0))
}

/// `proptest-regressions/gpu.txt`: a body that subtracts an infinity from
/// itself. llvmpipe folded `x - x` to 0 where the CPU computes NaN; GPU
/// results are held to the CPU only where every intermediate is finite.
fn x_minus_x_case() -> KernelCase {
    // select(max(x - x, x), select(x, x, x) / sqrt(x), x), min-accumulated
    // (with no reduction iterator).
    let body = Expr::Select(
        Box::new(Expr::Binary(
            BinaryOp::Max,
            Box::new(Expr::Binary(BinaryOp::Sub, load(), load())),
            load(),
        )),
        Box::new(Expr::Binary(
            BinaryOp::Div,
            Box::new(Expr::Select(load(), load(), load())),
            Box::new(Expr::Unary(UnaryOp::Sqrt, load())),
        )),
        load(),
    );
    KernelCase {
        kernel: Kernel::new(vec![IterKind::Parallel; 4], 1, body, Accumulate::Min),
        launch: Launch::new(
            vec![4, 4, 3, 4],
            Layout::new(0, vec![48, 12, 4, 1], 192),
            vec![Layout::new(0, vec![12, 48, 1, 3], 192)],
        ),
        operands: vec![vec![
            -0.0,
            0.5,
            f32::NAN,
            -0.25,
            -1.5,
            -1.0,
            0.25,
            2.0,
            -1.75,
            -1.75,
            0.25,
            0.0,
            -0.75,
            1.25,
            -1.75,
            0.0,
            0.0,
            -1.25,
            1.0,
            -1.5,
            f32::NEG_INFINITY,
            -0.25,
            1.0,
            1.25,
            -1.0,
            1.5,
            -1.75,
            f32::NEG_INFINITY,
            -0.5,
            -0.0,
            0.0,
            -0.25,
            1.25,
            1.0,
            -1.75,
            -1.25,
            2.0,
            -1.5,
            1.25,
            2.0,
            -0.75,
            2.0,
            1.75,
            -2.0,
            -1.75,
            -1.75,
            1.25,
            -1.75,
            -2.0,
            f32::NEG_INFINITY,
            -0.25,
            -1.75,
            1.0,
            1.25,
            -0.0,
            -1.75,
            -0.75,
            1.25,
            1.75,
            1.5,
            -0.5,
            f32::NAN,
            0.25,
            1.25,
            -2.0,
            -2.0,
            -1.25,
            0.5,
            2.0,
            -1.0,
            1.25,
            -2.0,
            0.25,
            1.75,
            -2.0,
            -1.5,
            -2.0,
            0.0,
            2.0,
            -0.75,
            1.0,
            -1.75,
            0.5,
            f32::NEG_INFINITY,
            f32::INFINITY,
            1.5,
            f32::NEG_INFINITY,
            0.0,
            -2.0,
            0.5,
            -1.75,
            -1.75,
            f32::INFINITY,
            f32::INFINITY,
            1.25,
            -0.25,
            2.0,
            2.0,
            1.5,
            1.25,
            0.0,
            0.25,
            -2.0,
            1.0,
            0.0,
            f32::NAN,
            0.25,
            -2.0,
            0.25,
            0.25,
            1.5,
            1.25,
            -0.5,
            1.25,
            2.0,
            0.0,
            -2.0,
            -1.75,
            1.5,
            f32::NAN,
            -1.75,
            -2.0,
            2.0,
            -1.25,
            1.75,
            -1.25,
            1.25,
            f32::NEG_INFINITY,
            -0.25,
            1.25,
            2.0,
            0.75,
            -1.0,
            -0.75,
            2.0,
            -1.75,
            0.5,
            -1.75,
            1.75,
            1.25,
            -0.75,
            -1.75,
            0.25,
            -1.0,
            1.5,
            -1.25,
            1.75,
            0.25,
            1.0,
            1.75,
            1.75,
            -1.0,
            1.25,
            0.5,
            -1.25,
            -2.0,
            0.25,
            2.0,
            1.5,
            -1.75,
            1.25,
            0.0,
            -2.0,
            -2.0,
            0.75,
            -1.25,
            1.25,
            2.0,
            0.75,
            -1.0,
            1.25,
            -1.0,
            1.0,
            -0.25,
            1.5,
            1.5,
            1.0,
            -1.75,
            -0.75,
            1.0,
            -0.5,
            -2.0,
            2.0,
            -0.0,
            -1.0,
            2.0,
            1.75,
            0.0,
            -1.25,
            0.5,
            f32::INFINITY,
            -0.25,
        ]],
    }
}

fn run_case<B: Backend>(backend: &mut B, case: &KernelCase) -> Vec<f32> {
    let buffers: Vec<B::Buffer> = case
        .operands
        .iter()
        .map(|v| backend.upload(v).unwrap())
        .collect();
    let refs: Vec<&B::Buffer> = buffers.iter().collect();
    let mut out = backend.alloc(case.launch.result.len as usize).unwrap();
    backend
        .execute(&case.kernel, &case.launch, &mut out, &refs)
        .unwrap();
    backend.download(&out).unwrap()
}

#[test]
fn x_minus_x_of_an_infinity_is_compared_only_where_finite() {
    let case = x_minus_x_case();
    let expected = run_case(&mut CpuBackend::reference(), &case);
    let finite = case.finite_elements();
    assert!(finite.iter().any(|&f| f) && finite.iter().any(|&f| !f));
    assert_eq!(
        run_case(&mut CpuBackend::coalesced(), &case).len(),
        expected.len()
    );
    let Some(mut gpu) = wgpu_or_skip("x_minus_x_of_an_infinity_is_compared_only_where_finite")
    else {
        return;
    };
    let found = run_case(&mut gpu, &case);
    for (i, ((e, f), ok)) in expected.iter().zip(&found).zip(&finite).enumerate() {
        assert!(
            !ok || Tolerance::GPU.agrees(*e, *f),
            "element {i}: cpu {e}, gpu {f}"
        );
    }
}

/// `proptest-regressions/wgsl_codegen.txt`: `select(x, log(0.0), x)`
/// over no iterators. WGSL folds expressions of constants at compile
/// time and rejected `log(0.0)`; constants are variables in generated
/// shaders, and the kernel runs to -inf.
#[test]
fn a_constant_part_that_folds_to_an_infinity_compiles_and_runs() {
    let kernel = Kernel::new(
        vec![],
        1,
        Expr::Select(
            load(),
            Box::new(Expr::Unary(UnaryOp::Log, Box::new(Expr::Const(0.0)))),
            load(),
        ),
        Accumulate::Assign,
    );
    let launch = Launch::new(
        vec![],
        Layout::new(0, vec![], 1),
        vec![Layout::new(0, vec![], 1)],
    );
    let case = KernelCase {
        kernel,
        launch,
        operands: vec![vec![1.0]],
    };
    assert_eq!(
        run_case(&mut CpuBackend::reference(), &case),
        vec![f32::NEG_INFINITY]
    );
    let Some(mut gpu) = wgpu_or_skip("a_constant_part_that_folds_to_an_infinity_compiles_and_runs")
    else {
        return;
    };
    assert_eq!(run_case(&mut gpu, &case), vec![f32::NEG_INFINITY]);
}

/// `proptest-regressions/cpu_paths.txt` (a seed of
/// `coalesced_path_equals_reference_on_random_kernels`): a kernel without
/// reduction iterators whose accumulation is not an assignment. The
/// reference starts every element from the accumulation's identity, so
/// `min=` of a NaN is +inf and `+=` of -0.0 is +0.0; the coalesced path's
/// loops assigned the body's value. Both paths (and wgpu) now agree.
#[test]
fn accumulations_without_reductions_start_from_their_identity() {
    for (accumulate, input, expected) in [
        (Accumulate::Min, f32::NAN, f32::INFINITY),
        (Accumulate::Max, f32::NAN, f32::NEG_INFINITY),
        (Accumulate::Add, -0.0, 0.0),
        (Accumulate::Mul, 2.0, 2.0),
    ] {
        for iterators in [
            vec![],
            vec![IterKind::Parallel],
            vec![IterKind::Parallel; 2],
        ] {
            let n = iterators.len();
            let case = KernelCase {
                kernel: Kernel::new(iterators, 1, Expr::Load(0), accumulate),
                launch: Launch::new(
                    vec![2; n],
                    Layout::new(0, (0..n).map(|k| 1 << (n - 1 - k)).collect(), 1 << n),
                    vec![Layout::new(
                        0,
                        (0..n).map(|k| 1 << (n - 1 - k)).collect(),
                        1 << n,
                    )],
                ),
                operands: vec![vec![input; 1 << n]],
            };
            let bits = |v: Vec<f32>| v.into_iter().map(f32::to_bits).collect::<Vec<_>>();
            let want = bits(vec![expected; 1 << n]);
            assert_eq!(
                bits(run_case(&mut CpuBackend::reference(), &case)),
                want,
                "{}",
                case.kernel
            );
            assert_eq!(
                bits(run_case(&mut CpuBackend::coalesced(), &case)),
                want,
                "{}",
                case.kernel
            );
            if let Some(mut gpu) =
                wgpu_or_skip("accumulations_without_reductions_start_from_their_identity")
            {
                let found = run_case(&mut gpu, &case);
                // The GPU is held to finite values (WGSL may assume no
                // NaN), and a shader compiler may fold `0.0 + x` to `x`, so
                // the sign of a zero is its own.
                if input.is_finite() {
                    assert_eq!(found, vec![expected; 1 << n], "{}", case.kernel);
                }
            }
        }
    }
}
