//! Contraction benchmarks, on whatever adapter is present (printed first):
//! a 512 × 512 × 512 matrix product `out[i, j] = Σ_k a[i, k] b[k, j]`
//! (row-major, 1 MiB per matrix) run three ways on the same buffers:
//!
//! - `generated_tiled`: the kernel IR's contraction, which the backend
//!   runs as a tiled kernel ([`backend_wgpu::tiled`]);
//! - `hand_written_tiled`: a tiled WGSL matrix product written by hand for
//!   this one layout (64 × 64 tiles, 16 × 16 invocations of 4 × 4
//!   results, slabs of 16), with its sizes in a uniform;
//! - `generated_per_element`: the same kernel IR with tiling turned off
//!   (one invocation per result element, the schedule before tiling).
//!
//! All three accumulate each result over `k` in order, so on quarter
//! integers they agree exactly; the benchmark checks that first. Before
//! the criterion groups, the pairs are timed in alternation and their
//! medians and ratios printed (what both sides measured under the same
//! load).
//!
//! Two more shapes compare the schedules of issue 32 with hand-written
//! kernels and with the schedules before them (alternating medians only):
//!
//! - `small_batched`: 4096 products of 8 × 8 × 8 and 512 of 16 × 16 × 64:
//!   the batched tile, against a hand-written kernel of one invocation
//!   per result (64 per workgroup, several batch points each) and against
//!   one invocation per element (`WgpuOptions::batched_tiles = false`);
//! - `long_split_k`: a 64 × 64 product with 65,536 points per result:
//!   split-K, against a hand-written split-K (the tiled kernel above over
//!   chunks of 1,024 points into partials, then one invocation per result
//!   adding its partials in order) and against the workgroup reduction
//!   (`WgpuOptions::split_k_contractions = false`).
//!
//! `cargo bench -p backend-wgpu --bench contraction`

use std::time::Duration;

mod common;
use common::{hand_written, open, paired};

use backend_wgpu::{WgpuBackend, WgpuBuffer, WgpuOptions};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use shape_core::kernel::{matmul, Kernel, Launch};
use shape_core::Backend;

const SIZE: u64 = 512;

const HAND_WRITTEN: &str = r#"
struct Sizes { m: u32, n: u32, k: u32, pad: u32 }
@group(0) @binding(0) var<uniform> sizes: Sizes;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;

var<workgroup> ta: array<f32, 1024>; // [k][m], 16 x 64
var<workgroup> tb: array<f32, 1024>; // [k][n], 16 x 64

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) lane: u32) {
    let m0 = wid.y * 64u;
    let n0 = wid.x * 64u;
    var acc: array<array<f32, 4>, 4>;
    for (var k0 = 0u; k0 < sizes.k; k0 = k0 + 16u) {
        for (var e = 0u; e < 4u; e = e + 1u) {
            let r = lane + e * 256u;
            // a: consecutive lanes read consecutive k of one row.
            let am = r / 16u;
            let ak = r % 16u;
            ta[ak * 64u + am] = a[(m0 + am) * sizes.k + k0 + ak];
            // b: consecutive lanes read consecutive n of one row.
            let bn = r % 64u;
            let bk = r / 64u;
            tb[bk * 64u + bn] = b[(k0 + bk) * sizes.n + n0 + bn];
        }
        workgroupBarrier();
        for (var kk = 0u; kk < 16u; kk = kk + 1u) {
            var av: array<f32, 4>;
            var bv: array<f32, 4>;
            for (var i = 0u; i < 4u; i = i + 1u) {
                av[i] = ta[kk * 64u + lid.y + i * 16u];
                bv[i] = tb[kk * 64u + lid.x + i * 16u];
            }
            for (var i = 0u; i < 4u; i = i + 1u) {
                for (var j = 0u; j < 4u; j = j + 1u) {
                    acc[i][j] = acc[i][j] + av[i] * bv[j];
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < 4u; i = i + 1u) {
        for (var j = 0u; j < 4u; j = j + 1u) {
            out[(m0 + lid.y + i * 16u) * sizes.n + n0 + lid.x + j * 16u] = acc[i][j];
        }
    }
}
"#;

/// The hand-written kernel, bound to the backend's buffers. It assumes
/// sizes that are multiples of 64 (the benchmark's).
struct HandWritten {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    groups: u32,
}

impl HandWritten {
    fn new(gpu: &WgpuBackend, out: &WgpuBuffer, a: &WgpuBuffer, b: &WgpuBuffer, size: u32) -> Self {
        let (pipeline, bind_group) = hand_written(
            gpu,
            "hand-written tiled matrix product",
            HAND_WRITTEN,
            [size, size, size, 0],
            &[out.raw(), a.raw(), b.raw()],
        );
        HandWritten {
            pipeline,
            bind_group,
            groups: size / 64,
        }
    }

    fn run(&self, gpu: &WgpuBackend) {
        let mut encoder = gpu.device().create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &self.bind_group, &[]);
            pass.dispatch_workgroups(self.groups, self.groups, 1);
        }
        gpu.queue().submit([encoder.finish()]);
        gpu.device()
            .poll(wgpu::PollType::wait_indefinitely())
            .unwrap();
    }
}

fn run(
    gpu: &mut WgpuBackend,
    (kernel, launch): &(Kernel, Launch),
    out: &mut WgpuBuffer,
    a: &WgpuBuffer,
    b: &WgpuBuffer,
) {
    gpu.execute(kernel, launch, out, &[a, b]).unwrap();
    gpu.wait().unwrap();
}

fn contraction(c: &mut Criterion) {
    let untiled = WgpuOptions {
        tiled_contractions: false,
        ..WgpuOptions::default()
    };
    let (Some(mut gpu), Some(mut plain)) = (open(WgpuOptions::default()), open(untiled)) else {
        return;
    };
    eprintln!("adapter: {}", gpu.name());
    let product = matmul(SIZE, SIZE, SIZE);
    let values = |salt: u64| -> Vec<f32> {
        (0..SIZE * SIZE)
            .map(|i| ((i * 7 + salt) % 9) as f32 / 4.0 - 1.0)
            .collect()
    };
    let (a_values, b_values) = (values(1), values(5));
    let (a, b) = (
        gpu.upload(&a_values).unwrap(),
        gpu.upload(&b_values).unwrap(),
    );
    let (pa, pb) = (
        plain.upload(&a_values).unwrap(),
        plain.upload(&b_values).unwrap(),
    );
    let len = (SIZE * SIZE) as usize;
    let mut tiled_out = gpu.alloc(len).unwrap();
    let hand_out = gpu.alloc(len).unwrap();
    let mut plain_out = plain.alloc(len).unwrap();
    let hand = HandWritten::new(&gpu, &hand_out, &a, &b, SIZE as u32);
    run(&mut gpu, &product, &mut tiled_out, &a, &b);
    assert_eq!(
        gpu.cache_stats().tiled_passes,
        1,
        "the product did not run tiled"
    );
    hand.run(&gpu);
    run(&mut plain, &product, &mut plain_out, &pa, &pb);
    let tiled_values = gpu.download(&tiled_out).unwrap();
    assert_eq!(tiled_values, gpu.download(&hand_out).unwrap());
    assert_eq!(tiled_values, plain.download(&plain_out).unwrap());

    let gpu_cell = std::cell::RefCell::new(&mut gpu);
    paired(
        "matmul_512 generated_tiled / hand_written_tiled",
        15,
        || run(&mut gpu_cell.borrow_mut(), &product, &mut tiled_out, &a, &b),
        || hand.run(&gpu_cell.borrow()),
    );
    paired(
        "matmul_512 generated_tiled / generated_per_element",
        7,
        || run(&mut gpu_cell.borrow_mut(), &product, &mut tiled_out, &a, &b),
        || run(&mut plain, &product, &mut plain_out, &pa, &pb),
    );

    let mut group = c.benchmark_group("matmul_512");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    // Multiply-adds.
    group.throughput(Throughput::Elements(SIZE * SIZE * SIZE));
    group.bench_function("generated_tiled", |bench| {
        bench.iter(|| run(&mut gpu, &product, &mut tiled_out, &a, &b))
    });
    group.bench_function("hand_written_tiled", |bench| bench.iter(|| hand.run(&gpu)));
    group.bench_function("generated_per_element", |bench| {
        bench.iter(|| run(&mut plain, &product, &mut plain_out, &pa, &pb))
    });
    group.finish();
}

/// One invocation per result of `batch` products `[m, k] x [k, n]`,
/// 64 invocations per workgroup (several batch points of small products).
const HAND_WRITTEN_BATCHED: &str = r#"
struct Sizes { batch: u32, m: u32, n: u32, k: u32 }
@group(0) @binding(0) var<uniform> sizes: Sizes;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let idx = gid.x + gid.y * groups.x * 64u;
    let per = sizes.m * sizes.n;
    let p = idx / per;
    if (p >= sizes.batch) { return; }
    let r = idx - p * per;
    let i = r / sizes.n;
    let j = r - i * sizes.n;
    let a0 = p * sizes.m * sizes.k + i * sizes.k;
    let b0 = p * sizes.k * sizes.n + j;
    var acc = 0.0;
    for (var kk = 0u; kk < sizes.k; kk = kk + 1u) {
        acc = acc + a[a0 + kk] * b[b0 + kk * sizes.n];
    }
    out[idx] = acc;
}
"#;

/// The tiled kernel above over chunks of `chunk` points (workgroup z is
/// the chunk), writing partials `[chunk][m][n]`.
const HAND_WRITTEN_SPLIT: &str = r#"
struct Sizes { m: u32, n: u32, k: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> sizes: Sizes;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;

var<workgroup> ta: array<f32, 1024>; // [k][m], 16 x 64
var<workgroup> tb: array<f32, 1024>; // [k][n], 16 x 64

@compute @workgroup_size(16, 16)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>,
        @builtin(local_invocation_index) lane: u32) {
    let m0 = wid.y * 64u;
    let n0 = wid.x * 64u;
    let begin = wid.z * sizes.chunk;
    let end = min(sizes.k, begin + sizes.chunk);
    var acc: array<array<f32, 4>, 4>;
    for (var k0 = begin; k0 < end; k0 = k0 + 16u) {
        for (var e = 0u; e < 4u; e = e + 1u) {
            let r = lane + e * 256u;
            let am = r / 16u;
            let ak = r % 16u;
            ta[ak * 64u + am] = a[(m0 + am) * sizes.k + k0 + ak];
            let bn = r % 64u;
            let bk = r / 64u;
            tb[bk * 64u + bn] = b[(k0 + bk) * sizes.n + n0 + bn];
        }
        workgroupBarrier();
        for (var kk = 0u; kk < 16u; kk = kk + 1u) {
            var av: array<f32, 4>;
            var bv: array<f32, 4>;
            for (var i = 0u; i < 4u; i = i + 1u) {
                av[i] = ta[kk * 64u + lid.y + i * 16u];
                bv[i] = tb[kk * 64u + lid.x + i * 16u];
            }
            for (var i = 0u; i < 4u; i = i + 1u) {
                for (var j = 0u; j < 4u; j = j + 1u) {
                    acc[i][j] = acc[i][j] + av[i] * bv[j];
                }
            }
        }
        workgroupBarrier();
    }
    let plane = wid.z * sizes.m * sizes.n;
    for (var i = 0u; i < 4u; i = i + 1u) {
        for (var j = 0u; j < 4u; j = j + 1u) {
            out[plane + (m0 + lid.y + i * 16u) * sizes.n + n0 + lid.x + j * 16u] = acc[i][j];
        }
    }
}
"#;

/// Adds the partials `[chunk][m][n]` of each result in order.
const HAND_WRITTEN_PARTIALS: &str = r#"
struct Sizes { m: u32, n: u32, k: u32, chunk: u32 }
@group(0) @binding(0) var<uniform> sizes: Sizes;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> partials: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let idx = gid.x;
    let results = sizes.m * sizes.n;
    if (idx >= results) { return; }
    let splits = (sizes.k + sizes.chunk - 1u) / sizes.chunk;
    var acc = 0.0;
    for (var s = 0u; s < splits; s = s + 1u) {
        acc = acc + partials[s * results + idx];
    }
    out[idx] = acc;
}
"#;

/// Hand-written dispatches on `gpu`'s queue: each pipeline with its
/// bind group and grid, in order, then a wait.
fn run_hand(gpu: &WgpuBackend, steps: &[(&wgpu::ComputePipeline, &wgpu::BindGroup, [u32; 3])]) {
    let mut encoder = gpu.device().create_command_encoder(&Default::default());
    {
        let mut pass = encoder.begin_compute_pass(&Default::default());
        for (pipeline, bind_group, [x, y, z]) in steps {
            pass.set_pipeline(pipeline);
            pass.set_bind_group(0, *bind_group, &[]);
            pass.dispatch_workgroups(*x, *y, *z);
        }
    }
    gpu.queue().submit([encoder.finish()]);
    gpu.device()
        .poll(wgpu::PollType::wait_indefinitely())
        .unwrap();
}

/// `batch` row-major products `[m, k] x [k, n]`: iterators `[b, i, j, r]`.
fn batched_matmul(batch: u64, m: u64, n: u64, k: u64) -> (Kernel, Launch) {
    use shape_core::kernel::{Accumulate, BinaryOp, Expr, IterKind, Layout};
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

fn quarters(len: u64, salt: u64) -> Vec<f32> {
    (0..len)
        .map(|i| ((i * 7 + salt) % 9) as f32 / 4.0 - 1.0)
        .collect()
}

/// The new schedule (`gpu`), the old one (`old`) and a hand-written
/// kernel on the same shape: checks that all three agree exactly (quarter
/// integers), then times new / hand-written and old / new in alternation.
fn compare(
    name: &str,
    gpu: &mut WgpuBackend,
    old: &mut WgpuBackend,
    (batch, m, n, k): (u64, u64, u64, u64),
    expect: fn(&backend_wgpu::CacheStats) -> u64,
) {
    let problem = batched_matmul(batch, m, n, k);
    let (a_values, b_values) = (quarters(batch * m * k, 1), quarters(batch * k * n, 5));
    let (a, b) = (
        gpu.upload(&a_values).unwrap(),
        gpu.upload(&b_values).unwrap(),
    );
    let (oa, ob) = (
        old.upload(&a_values).unwrap(),
        old.upload(&b_values).unwrap(),
    );
    let len = (batch * m * n) as usize;
    let mut new_out = gpu.alloc(len).unwrap();
    let hand_out = gpu.alloc(len).unwrap();
    let mut old_out = old.alloc(len).unwrap();
    let before = expect(&gpu.cache_stats());
    run(gpu, &problem, &mut new_out, &a, &b);
    assert_eq!(
        expect(&gpu.cache_stats()),
        before + 1,
        "{name}: not the new schedule"
    );
    run(old, &problem, &mut old_out, &oa, &ob);
    assert_eq!(
        expect(&old.cache_stats()),
        0,
        "{name}: the old schedule is new"
    );
    let chunk = 1024u32;
    let split = batch == 1 && m % 64 == 0 && n % 64 == 0;
    let pipelines = if split {
        let splits = (k as u32).div_ceil(chunk);
        let partials = gpu.alloc(len * splits as usize).unwrap();
        let uniform = [m as u32, n as u32, k as u32, chunk];
        let first = hand_written(
            gpu,
            "hand-written split-K",
            HAND_WRITTEN_SPLIT,
            uniform,
            &[partials.raw(), a.raw(), b.raw()],
        );
        let second = hand_written(
            gpu,
            "hand-written partials",
            HAND_WRITTEN_PARTIALS,
            uniform,
            &[hand_out.raw(), partials.raw()],
        );
        vec![
            (first, [(n / 64) as u32, (m / 64) as u32, splits]),
            (second, [(len as u32).div_ceil(64), 1, 1]),
        ]
    } else {
        let one = hand_written(
            gpu,
            "hand-written batched",
            HAND_WRITTEN_BATCHED,
            [batch as u32, m as u32, n as u32, k as u32],
            &[hand_out.raw(), a.raw(), b.raw()],
        );
        vec![(one, [(len as u32).div_ceil(64), 1, 1])]
    };
    let steps: Vec<_> = pipelines
        .iter()
        .map(|((p, g), grid)| (p, g, *grid))
        .collect();
    run_hand(gpu, &steps);
    let found = gpu.download(&new_out).unwrap();
    assert_eq!(
        found,
        gpu.download(&hand_out).unwrap(),
        "{name}: hand-written"
    );
    assert_eq!(
        found,
        old.download(&old_out).unwrap(),
        "{name}: old schedule"
    );
    let gpu_cell = std::cell::RefCell::new(gpu);
    paired(
        &format!("{name} new / hand_written"),
        10,
        || run(&mut gpu_cell.borrow_mut(), &problem, &mut new_out, &a, &b),
        || run_hand(&gpu_cell.borrow(), &steps),
    );
    paired(
        &format!("{name} old / new"),
        10,
        || run(old, &problem, &mut old_out, &oa, &ob),
        || run(&mut gpu_cell.borrow_mut(), &problem, &mut new_out, &a, &b),
    );
}

/// Issue 32's remaining schedules: alternating medians only.
fn remaining_schedules(_: &mut Criterion) {
    let old_options = WgpuOptions {
        batched_tiles: false,
        split_k_contractions: false,
        ..WgpuOptions::default()
    };
    let (Some(mut gpu), Some(mut old)) = (open(WgpuOptions::default()), open(old_options)) else {
        return;
    };
    if gpu.tile_config().is_none() {
        eprintln!("contractions are not tiled on {}: skipped", gpu.name());
        return;
    }
    let batched = |s: &backend_wgpu::CacheStats| s.batched_passes;
    let split_k = |s: &backend_wgpu::CacheStats| s.split_k_passes;
    compare(
        "small_batched 4096x8x8x8",
        &mut gpu,
        &mut old,
        (4096, 8, 8, 8),
        batched,
    );
    compare(
        "small_batched 512x16x16x64",
        &mut gpu,
        &mut old,
        (512, 16, 16, 64),
        batched,
    );
    compare(
        "long_split_k 64x64x65536",
        &mut gpu,
        &mut old,
        (1, 64, 64, 65_536),
        split_k,
    );
}

criterion_group!(benches, remaining_schedules, contraction);
criterion_main!(benches);
