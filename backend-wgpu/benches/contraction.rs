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

criterion_group!(benches, contraction);
criterion_main!(benches);
