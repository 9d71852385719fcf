//! Tiled contractions on a real adapter, against the CPU reference, with
//! sizes around the tile and slab boundaries (on wgpu's GL backend,
//! which does not tile, the same cases check the other schedules). Without an adapter these tests skip, unless
//! `SHAPE_REQUIRE_GPU=1` (CI) makes them fail.

use backend_cpu::CpuBackend;
use backend_wgpu::tiled::TileConfig;
use backend_wgpu::WgpuOptions;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use shape_core::kernel::{matmul, Accumulate, BinaryOp, Expr, IterKind, Kernel, Launch, Layout};
use shape_core::Backend;
use shape_tests::gpu::SharedWgpu;

static DEFAULT: SharedWgpu = SharedWgpu::new(WgpuOptions::default);

fn untiled() -> WgpuOptions {
    WgpuOptions {
        tiled_contractions: false,
        ..WgpuOptions::default()
    }
}
static UNTILED: SharedWgpu = SharedWgpu::new(untiled);

/// A contraction over iterators `batch`, `m`, `n` and one or two
/// reduction iterators, in a random order, with each operand stored
/// row-major in its own random axis order.
#[derive(Clone, Debug)]
struct Contraction {
    /// Iterator order: a permutation of 0 (batch), 1 (m), 2 (n), 3 and
    /// maybe 4 (reductions).
    order: Vec<usize>,
    /// Sizes of batch, m, n, and the reductions.
    sizes: Vec<u64>,
    /// Whether operand 0 stores its reduction axes first, and the same
    /// for operand 1 (a transposed operand).
    a_points_first: bool,
    b_points_first: bool,
    body: u8,
    accumulate: Accumulate,
    seed: u64,
}

/// A row-major layout of the logical axes `axes` (concept indices) over
/// the kernel's iterators, `at[c]` being the iterator of concept `c`.
fn layout(axes: &[usize], sizes: &[u64], at: &[usize], iterators: usize) -> Layout {
    let mut strides = vec![0; iterators];
    let mut step = 1;
    for &c in axes.iter().rev() {
        strides[at[c]] = step;
        step *= sizes[c];
    }
    Layout::new(0, strides, step)
}

impl Contraction {
    fn kernel_and_launch(&self) -> (Kernel, Launch) {
        let n_iter = self.order.len();
        // at[c]: the iterator that concept c (0 batch, 1 m, 2 n, 3.. reductions) sits at.
        let mut at = vec![0; n_iter];
        for (k, &c) in self.order.iter().enumerate() {
            at[c] = k;
        }
        let iterators: Vec<IterKind> = self
            .order
            .iter()
            .map(|&c| {
                if c >= 3 {
                    IterKind::Reduction
                } else {
                    IterKind::Parallel
                }
            })
            .collect();
        let sizes: Vec<u64> = self.order.iter().map(|&c| self.sizes[c]).collect();
        let points: Vec<usize> = (3..n_iter).collect();
        let with = |own: usize, points_first: bool| {
            let mut axes = vec![0];
            if points_first {
                axes.extend(&points);
                axes.push(own);
            } else {
                axes.push(own);
                axes.extend(&points);
            }
            axes
        };
        let a = layout(&with(1, self.a_points_first), &self.sizes, &at, n_iter);
        let b = layout(&with(2, self.b_points_first), &self.sizes, &at, n_iter);
        let out = layout(&[0, 1, 2], &self.sizes, &at, n_iter);
        let (x, y) = (Box::new(Expr::Load(0)), Box::new(Expr::Load(1)));
        let body = match self.body {
            0 => Expr::Binary(BinaryOp::Mul, x, y),
            1 => {
                let d = Expr::Binary(BinaryOp::Sub, x, y);
                Expr::Binary(BinaryOp::Mul, Box::new(d.clone()), Box::new(d))
            }
            _ => Expr::Binary(BinaryOp::Max, x, y),
        };
        (
            Kernel::new(iterators, 2, body, self.accumulate),
            Launch::new(sizes, out, vec![a, b]),
        )
    }

    /// Quarter integers in [-2, 2]: products and sums of up to a few
    /// thousand of them are exact in f32, so any order agrees bit for bit.
    fn values(&self, len: u64, salt: u64) -> Vec<f32> {
        let mut state = (self.seed ^ salt.wrapping_mul(0x9e37_79b9_7f4a_7c15)) | 1;
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                ((state >> 40) % 17) as f32 / 4.0 - 2.0
            })
            .collect()
    }
}

/// Sizes near multiples of the tiles and slabs of both configurations.
fn near_tiles() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(2u64),
        Just(5),
        Just(8),
        Just(16),
        Just(31),
        Just(32),
        Just(33),
        Just(63),
        Just(64),
        Just(65),
        Just(97),
        Just(128),
        Just(129),
    ]
}

fn near_slabs() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(1u64),
        Just(7),
        Just(8),
        Just(9),
        Just(15),
        Just(16),
        Just(17),
        Just(33),
        Just(100),
    ]
}

fn contractions() -> impl Strategy<Value = Contraction> {
    (
        (1u64..4, near_tiles(), near_tiles(), near_slabs()),
        prop::option::of(1u64..4),
        any::<u64>(),
        (any::<bool>(), any::<bool>()),
        0u8..3,
        prop_oneof![
            Just(Accumulate::Add),
            Just(Accumulate::Max),
            Just(Accumulate::Min)
        ],
    )
        .prop_map(
            |((batch, m, n, k), second, seed, (a_first, b_first), body, accumulate)| {
                let mut sizes = vec![batch, m, n, k];
                if let Some(s) = second {
                    sizes.push(s);
                }
                let mut order: Vec<usize> = (0..sizes.len()).collect();
                // A permutation from the seed (Fisher-Yates).
                let mut state = seed | 1;
                for i in (1..order.len()).rev() {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    order.swap(i, (state % (i as u64 + 1)) as usize);
                }
                Contraction {
                    order,
                    sizes,
                    a_points_first: a_first,
                    b_points_first: b_first,
                    body,
                    accumulate,
                    seed,
                }
            },
        )
}

fn run<B: Backend>(
    backend: &mut B,
    kernel: &Kernel,
    launch: &Launch,
    a: &[f32],
    b: &[f32],
) -> Vec<f32>
where
    B::Error: std::fmt::Debug,
{
    let a = backend.upload(a).unwrap();
    let b = backend.upload(b).unwrap();
    let mut out = backend.alloc(launch.result.len as usize).unwrap();
    backend
        .execute(kernel, launch, &mut out, &[&a, &b])
        .unwrap();
    backend.download(&out).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(48),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../proptest-regressions/gpu_contractions.txt"))),
        ..ProptestConfig::default()
    })]

    /// Every contraction runs tiled (rows or columns below half a tile
    /// as batched tiles, when there are batch points and one reduction
    /// iterator; else per element), and matches the reference exactly
    /// (its values make every order exact).
    #[test]
    fn tiled_contractions_match_the_reference_exactly(c in contractions()) {
        let (kernel, launch) = c.kernel_and_launch();
        let a = c.values(launch.operands[0].len, 1);
        let b = c.values(launch.operands[1].len, 2);
        let found = DEFAULT.with("tiled_contractions_match_the_reference_exactly", |gpu| {
            let before = gpu.cache_stats();
            let found = run(gpu, &kernel, &launch, &a, &b);
            let after = gpu.cache_stats();
            let passes = (after.tiled_passes - before.tiled_passes, after.batched_passes - before.batched_passes);
            (found, passes, gpu.tile_config().is_some())
        });
        if let Some((found, (tiled, batched), tiles)) = found {
            let expected = run(&mut CpuBackend::reference(), &kernel, &launch, &a, &b);
            // Everything tiles (nothing on GL); below half a 64-row tile,
            // as a batched tile.
            // Batched tiles need batch points and one reduction iterator.
            let small = c.sizes[1] < 32 || c.sizes[2] < 32;
            let batchable = c.sizes[0] >= 2 && c.sizes.len() == 4;
            prop_assert_eq!(tiled, u64::from(tiles && (!small || batchable)), "{} {:?}: tiled passes", kernel, launch.sizes);
            prop_assert_eq!(batched, u64::from(tiles && small && batchable), "{} {:?}: batched passes", kernel, launch.sizes);
            for (i, (e, f)) in expected.iter().zip(&found).enumerate() {
                // Equal values; the sign of a zero that max or min picks
                // from -0.0 and 0.0 is left to the adapter.
                prop_assert!(
                    e == f || (e.is_nan() && f.is_nan()),
                    "{} {:?}: element {}: cpu {:?}, gpu {:?}", kernel, launch.sizes, i, e, f
                );
            }
        }
    }
}

#[test]
fn tiled_contractions_at_new_sizes_compile_nothing() {
    let outcome = DEFAULT.with("tiled_contractions_at_new_sizes_compile_nothing", |gpu| {
        let mut counts = Vec::new();
        for (m, n, k) in [(64, 64, 64), (100, 37, 250), (333, 200, 17), (40, 1000, 3)] {
            let (kernel, launch) = matmul(m, n, k);
            let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 - 2.0).collect();
            let before = gpu.cache_stats();
            let found = run(gpu, &kernel, &launch, &a, &b);
            let after = gpu.cache_stats();
            let expected = run(&mut CpuBackend::reference(), &kernel, &launch, &a, &b);
            assert_eq!(found, expected, "{m}x{n}x{k}");
            counts.push((
                after.misses - before.misses,
                after.tiled_passes - before.tiled_passes,
            ));
        }
        (counts, gpu.tile_config().is_some())
    });
    if let Some((counts, tiles)) = outcome {
        // The first size compiles the one pipeline; the others reuse it.
        let misses: u64 = counts[1..].iter().map(|c| c.0).sum();
        assert_eq!(misses, 0, "{counts:?}");
        assert!(counts.iter().all(|c| c.1 == u64::from(tiles)), "{counts:?}");
    }
}

#[test]
fn small_and_long_contractions_take_their_tiled_schedules() {
    let outcome = DEFAULT.with(
        "small_and_long_contractions_take_their_tiled_schedules",
        |gpu| {
            let mut passes = Vec::new();
            // Too few rows, no batch (per element); a reduction long next to its
            // outputs and one past the budget (split-K); a 64x64 product
            // that tiles; a long reduction with few rows and columns (a
            // workgroup reduction).
            for (m, n, k) in [
                (4, 512, 64),
                (32, 32, 100_000),
                (64, 64, 5000),
                (64, 64, 64),
                (4, 4, 100_000),
            ] {
                let (kernel, launch) = matmul(m, n, k);
                let a = vec![0.25f32; (m * k) as usize];
                let b = vec![0.5f32; (k * n) as usize];
                let before = gpu.cache_stats();
                let found = run(gpu, &kernel, &launch, &a, &b);
                assert!(found.iter().all(|&v| v == 0.125 * k as f32), "{m}x{n}x{k}");
                let after = gpu.cache_stats();
                passes.push([
                    after.tiled_passes - before.tiled_passes,
                    after.batched_passes - before.batched_passes,
                    after.split_k_passes - before.split_k_passes,
                    after.workgroup_passes - before.workgroup_passes,
                ]);
            }
            (passes, gpu.tile_config().is_some())
        },
    );
    if let Some((passes, true)) = outcome {
        assert_eq!(
            passes,
            vec![
                [0, 0, 0, 0],
                [1, 0, 1, 0],
                [1, 0, 1, 0],
                [1, 0, 0, 0],
                [0, 0, 0, 1]
            ]
        );
    }
}

fn old_schedules() -> WgpuOptions {
    WgpuOptions {
        batched_tiles: false,
        split_k_contractions: false,
        ..WgpuOptions::default()
    }
}
static OLD_SCHEDULES: SharedWgpu = SharedWgpu::new(old_schedules);

/// `batch` products of `[m, k] x [k, n]`, row-major: iterators
/// `[b, i, j, r]`.
fn batched_matmul(batch: u64, m: u64, n: u64, k: u64) -> (Kernel, Launch) {
    let kernel = Kernel::new(
        vec![
            IterKind::Parallel,
            IterKind::Parallel,
            IterKind::Parallel,
            IterKind::Reduction,
        ],
        2,
        Expr::Binary(
            BinaryOp::Mul,
            Box::new(Expr::Load(0)),
            Box::new(Expr::Load(1)),
        ),
        Accumulate::Add,
    );
    let launch = Launch::new(
        vec![batch, m, n, k],
        Layout::new(0, vec![m * n, n, 1, 0], batch * m * n),
        vec![
            Layout::new(0, vec![m * k, k, 0, 1], batch * m * k),
            Layout::new(0, vec![k * n, 0, 1, n], batch * k * n),
        ],
    );
    (kernel, launch)
}

/// Values in [0, 1) that are not quarter integers: sums round, in
/// another order on split-K than on the reference, but do not cancel (a
/// sum that cancels to far below the sum of its terms' magnitudes may
/// differ by more than the tolerance in any other order: see "Agreement
/// with the CPU" in docs/wgpu-backend.md).
fn rounding_values(len: u64, salt: u64) -> Vec<f32> {
    let mut state = salt.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

/// The shapes on the new schedules: batched tiles for many small
/// products, split-K for reductions past the budget. Each is checked
/// against the reference within the GPU tolerance on rounding data,
/// exactly on quarter integers, against the old schedule, run twice for
/// the same bits, and counted as the schedule it should be.
#[test]
fn batched_and_split_k_contractions_agree_and_are_deterministic() {
    let cases = [
        // (batch, m, n, k, batched, split-K)
        (4096, 8, 8, 8, true, false),
        (512, 16, 16, 64, true, false),
        (3, 5, 70, 33, true, false),
        (1, 64, 64, 4500, false, true),
        (2, 40, 70, 4000, false, true),
    ];
    for (batch, m, n, k, batched, split) in cases {
        let (kernel, launch) = batched_matmul(batch, m, n, k);
        let name = format!("{batch}x{m}x{n}x{k}");
        let (la, lb) = (launch.operands[0].len, launch.operands[1].len);
        let quarters = Contraction {
            order: vec![],
            sizes: vec![],
            a_points_first: false,
            b_points_first: false,
            body: 0,
            accumulate: Accumulate::Add,
            seed: batch ^ m << 8 ^ k << 16,
        };
        let (qa, qb) = (quarters.values(la, 1), quarters.values(lb, 2));
        let (ra, rb) = (rounding_values(la, 3), rounding_values(lb, 4));
        let outcome = DEFAULT.with("batched_and_split_k_contractions", |gpu| {
            let before = gpu.cache_stats();
            let exact = run(gpu, &kernel, &launch, &qa, &qb);
            let rounded = run(gpu, &kernel, &launch, &ra, &rb);
            let again = run(gpu, &kernel, &launch, &ra, &rb);
            let after = gpu.cache_stats();
            let passes = (
                after.batched_passes - before.batched_passes,
                after.split_k_passes - before.split_k_passes,
            );
            (exact, rounded, again, passes, gpu.tile_config().is_some())
        });
        let Some((exact, rounded, again, passes, tiles)) = outcome else {
            return;
        };
        if tiles {
            assert_eq!(
                passes,
                (3 * u64::from(batched), 3 * u64::from(split)),
                "{name}: batched and split-K passes"
            );
        }
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&rounded), bits(&again), "{name}: two runs differ");
        let mut cpu = CpuBackend::reference();
        assert_eq!(exact, run(&mut cpu, &kernel, &launch, &qa, &qb), "{name}");
        let expected = run(&mut cpu, &kernel, &launch, &ra, &rb);
        for (i, (e, f)) in expected.iter().zip(&rounded).enumerate() {
            assert!(
                shape_tests::differential::Tolerance::GPU.agrees(*e, *f),
                "{name}: element {i}: cpu {e:?}, gpu {f:?}"
            );
        }
        let old = OLD_SCHEDULES.with("batched_and_split_k old schedules", |gpu| {
            let before = gpu.cache_stats();
            let found = run(gpu, &kernel, &launch, &qa, &qb);
            let after = gpu.cache_stats();
            (
                found,
                after.batched_passes + after.split_k_passes
                    - before.batched_passes
                    - before.split_k_passes,
            )
        });
        if let Some((found, new_passes)) = old {
            assert_eq!(new_passes, 0, "{name}: the old schedules took a new one");
            assert_eq!(found, exact, "{name}: old and new schedules differ");
        }
    }
}

/// Split-K and batched launches at other sizes of the same classes
/// compile nothing new (the tile shape of a batched tile follows the
/// sizes: these keep it).
#[test]
fn split_k_and_batched_tiles_at_new_sizes_compile_nothing() {
    let outcome = DEFAULT.with(
        "split_k_and_batched_tiles_at_new_sizes_compile_nothing",
        |gpu| {
            let mut misses = Vec::new();
            for (batch, m, n, k) in [
                (2, 64, 64, 5000),
                (3, 100, 65, 7777),
                (64, 8, 8, 8),
                (100, 7, 5, 30),
            ] {
                let (kernel, launch) = batched_matmul(batch, m, n, k);
                let a = vec![0.5f32; launch.operands[0].len as usize];
                let b = vec![0.25f32; launch.operands[1].len as usize];
                let before = gpu.cache_stats().misses;
                let found = run(gpu, &kernel, &launch, &a, &b);
                assert!(
                    found.iter().all(|&v| v == 0.125 * k as f32),
                    "{batch}x{m}x{n}x{k}"
                );
                misses.push(gpu.cache_stats().misses - before);
            }
            misses
        },
    );
    if let Some(misses) = outcome {
        // Split-K compiles its tiled pass and the partials pass; the
        // batched tile one pipeline; the second of each nothing.
        assert_eq!(misses[1], 0, "{misses:?}");
        assert_eq!(misses[3], 0, "{misses:?}");
    }
}

#[test]
fn untiled_contractions_still_agree() {
    let (kernel, launch) = matmul(65, 33, 17);
    let a: Vec<f32> = (0..65 * 17).map(|i| (i % 9) as f32 / 4.0).collect();
    let b: Vec<f32> = (0..17 * 33).map(|i| (i % 11) as f32 / 4.0).collect();
    let outcome = UNTILED.with("untiled_contractions_still_agree", |gpu| {
        let found = run(gpu, &kernel, &launch, &a, &b);
        (found, gpu.cache_stats().tiled_passes)
    });
    if let Some((found, tiled)) = outcome {
        assert_eq!(tiled, 0);
        assert_eq!(
            found,
            run(&mut CpuBackend::reference(), &kernel, &launch, &a, &b)
        );
    }
}

#[test]
fn the_tile_configuration_fits_webgpu_default_limits() {
    let defaults = backend_wgpu::wgpu::Limits::default();
    assert_eq!(TileConfig::for_limits(&defaults), Some(TileConfig::LARGE));
    let downlevel = backend_wgpu::wgpu::Limits::downlevel_defaults();
    assert!(TileConfig::for_limits(&downlevel).is_some());
    let tiny = backend_wgpu::wgpu::Limits {
        max_compute_workgroup_storage_size: 1024,
        ..defaults
    };
    assert_eq!(TileConfig::for_limits(&tiny), None);
}

/// Epilogues on every schedule: `relu(acc + bias) * scale` written where
/// the reduction's result would be, checked exactly (quarter-integer data
/// keep every step exact) against both CPU paths.
mod epilogues {
    use super::*;
    use backend_wgpu::LoopBudget;
    use shape_core::kernel::UnaryOp;

    fn split() -> WgpuOptions {
        WgpuOptions {
            loop_budget: LoopBudget::new(3).unwrap(),
            workgroup_reduction_threshold: 1,
            ..WgpuOptions::default()
        }
    }
    static SPLIT: SharedWgpu = SharedWgpu::new(split);

    /// `relu(acc + in{bias}) * in{scale}`.
    fn epilogue(bias: usize, scale: usize) -> Expr {
        let sum = Expr::Binary(
            BinaryOp::Add,
            Box::new(Expr::Accumulated),
            Box::new(Expr::Load(bias)),
        );
        Expr::Binary(
            BinaryOp::Mul,
            Box::new(Expr::Unary(UnaryOp::Relu, Box::new(sum))),
            Box::new(Expr::Load(scale)),
        )
    }

    fn quarters(len: u64, salt: u64) -> Vec<f32> {
        (0..len)
            .map(|i| ((i * 7 + salt * 3) % 13) as f32 / 4.0 - 1.5)
            .collect()
    }

    /// Runs `kernel` over `launch` on `backend` with quarter-integer data.
    fn run_all<B: Backend>(backend: &mut B, kernel: &Kernel, launch: &Launch) -> Vec<f32>
    where
        B::Error: std::fmt::Debug,
    {
        let buffers: Vec<B::Buffer> = launch
            .operands
            .iter()
            .enumerate()
            .map(|(o, l)| backend.upload(&quarters(l.len, o as u64)).unwrap())
            .collect();
        let refs: Vec<&B::Buffer> = buffers.iter().collect();
        let mut out = backend.alloc(launch.result.len as usize).unwrap();
        backend.execute(kernel, launch, &mut out, &refs).unwrap();
        backend.download(&out).unwrap()
    }

    fn check(gpu: &SharedWgpu, test: &str, kernel: &Kernel, launch: &Launch) -> Option<u64> {
        let expected = run_all(&mut CpuBackend::reference(), kernel, launch);
        let coalesced = run_all(&mut CpuBackend::coalesced(), kernel, launch);
        assert_eq!(expected, coalesced, "{kernel}: the CPU paths differ");
        // Without the epilogue, the reference's values go through it by hand.
        let mut plain = kernel.clone();
        plain.epilogue = None;
        assert_ne!(
            run_all(&mut CpuBackend::reference(), &plain, launch),
            expected
        );
        gpu.with(test, |gpu| {
            let before = gpu.cache_stats();
            let found = run_all(gpu, kernel, launch);
            let after = gpu.cache_stats();
            assert_eq!(found, expected, "{kernel} {:?}", launch.sizes);
            after.workgroup_passes - before.workgroup_passes + after.tiled_passes
                - before.tiled_passes
        })
    }

    /// A matrix product `[m, k] x [k, n]` with a bias along `n` and a
    /// scale along `m` read by its epilogue.
    fn biased_matmul(m: u64, n: u64, k: u64) -> (Kernel, Launch) {
        let (kernel, launch) = matmul(m, n, k);
        let kernel = Kernel::new(kernel.iterators, 4, kernel.body, kernel.accumulate)
            .with_epilogue(epilogue(2, 3));
        let mut operands = launch.operands;
        operands.push(Layout::new(0, vec![0, 1, 0], n));
        operands.push(Layout::new(1, vec![1, 0, 0], m + 1));
        (kernel, Launch::new(launch.sizes, launch.result, operands))
    }

    #[test]
    fn on_a_tiled_contraction() {
        let (kernel, launch) = biased_matmul(65, 70, 33);
        let tiled = check(
            &DEFAULT,
            "epilogue on_a_tiled_contraction",
            &kernel,
            &launch,
        );
        let tiles = DEFAULT.with("epilogue tiles", |gpu| gpu.tile_config().is_some());
        if let (Some(tiled), Some(tiles)) = (tiled, tiles) {
            assert_eq!(tiled, u64::from(tiles));
        }
    }

    #[test]
    fn on_one_invocation_per_element() {
        let (kernel, launch) = biased_matmul(4, 5, 3);
        let passes = check(
            &UNTILED,
            "epilogue on_one_invocation_per_element",
            &kernel,
            &launch,
        );
        assert!(passes.is_none_or(|p| p == 0), "{passes:?}");
    }

    #[test]
    fn on_split_k() {
        let tiles = DEFAULT.with("epilogue tiles", |gpu| gpu.tile_config().is_some());
        let (m, n, k) = (65, 70, 5000);
        let (kernel, launch) = biased_matmul(m, n, k);
        let passes = check(&DEFAULT, "epilogue on_split_k", &kernel, &launch);
        if let (Some(passes), Some(true)) = (passes, tiles) {
            assert_eq!(passes, 1, "{m}x{n}x{k}");
        }
    }

    /// Row sums of 2 x 7000 with a bias and scale per row, split into
    /// workgroup passes (budget 3: several passes of partials).
    #[test]
    fn on_split_reductions() {
        let kernel = Kernel::new(
            vec![IterKind::Parallel, IterKind::Reduction],
            3,
            Expr::Load(0),
            Accumulate::Add,
        )
        .with_epilogue(epilogue(1, 2));
        let launch = Launch::new(
            vec![2, 7000],
            Layout::new(0, vec![1, 0], 2),
            vec![
                Layout::new(0, vec![7000, 1], 14000),
                Layout::new(0, vec![1, 0], 2),
                Layout::new(0, vec![1, 0], 2),
            ],
        );
        if let Some(passes) = check(&SPLIT, "epilogue on_split_reductions", &kernel, &launch) {
            assert!(passes >= 2, "{passes} workgroup passes");
        }
    }

    #[test]
    fn on_an_assignment_and_without_reductions() {
        for iterators in [
            vec![IterKind::Parallel, IterKind::Reduction],
            vec![IterKind::Parallel, IterKind::Parallel],
        ] {
            let reduces = iterators[1] == IterKind::Reduction;
            let kernel = Kernel::new(iterators, 3, Expr::Load(0), Accumulate::Assign)
                .with_epilogue(epilogue(1, 2));
            let along = if reduces { 0 } else { 1 };
            let launch = Launch::new(
                vec![3, 4],
                Layout::new(
                    0,
                    vec![4 * u64::from(!reduces) + u64::from(reduces), along],
                    12,
                ),
                vec![
                    Layout::new(0, vec![4, 1], 12),
                    Layout::new(0, vec![1, 0], 3),
                    Layout::new(0, vec![0, along], 4),
                ],
            );
            check(&DEFAULT, "epilogue on_an_assignment", &kernel, &launch);
        }
    }

    #[test]
    fn an_epilogue_that_reads_along_a_reduction_is_refused() {
        let (kernel, launch) = biased_matmul(4, 5, 3);
        let mut operands = launch.operands.clone();
        operands[2] = Layout::new(0, vec![0, 1, 5], 15);
        let bad = Launch::new(launch.sizes.clone(), launch.result.clone(), operands);
        let err = bad.check(&kernel).unwrap_err();
        assert_eq!(err.kind(), "epilogue_along_reduction");
        assert!(err.to_string().contains("operand 2"), "{err}");
        let body_reads_acc = Kernel::new(
            kernel.iterators.clone(),
            4,
            Expr::Accumulated,
            Accumulate::Add,
        );
        assert_eq!(
            launch.check(&body_reads_acc).unwrap_err().kind(),
            "accumulated_in_body"
        );
        let racing = launch.clone().allowing_races();
        assert_eq!(
            racing.check(&kernel).unwrap_err().kind(),
            "epilogue_with_races"
        );
    }
}
