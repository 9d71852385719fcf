//! wgpu backend benchmarks, on whatever adapter is present (printed first):
//!
//! - `host_overhead`: host time per kernel launch with a warm pipeline
//!   cache (validation, parameter packing, bind group, recording, and the
//!   batched submission), excluding device time: one-element launches,
//!   waiting for the device outside the timed region;
//! - `broadcast_add`: a generated broadcast add `out[i, j] = a[i, j] + b[j]`
//!   against a hand-written WGSL kernel for the same operation on the
//!   same buffers, each timed to completion;
//! - `latency`: one launch to completion when its kernel structure is new
//!   (shader generation, compilation, pipeline creation) against one whose
//!   structure is cached.
//!
//! `cargo bench -p backend-wgpu --bench dispatch`

use std::time::{Duration, Instant};

mod common;
use common::hand_written;

use backend_wgpu::{WgpuBackend, WgpuBuffer, WgpuOptions};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use shape_core::kernel::{Accumulate, BinaryOp, Expr, IterKind, Kernel, Launch, Layout};
use shape_core::Backend;

fn gpu() -> Option<WgpuBackend> {
    match WgpuBackend::new() {
        Ok(gpu) => {
            eprintln!("adapter: {}", gpu.name());
            Some(gpu)
        }
        Err(e) => {
            eprintln!("no adapter, wgpu benchmarks skipped: {e}");
            None
        }
    }
}

fn add_kernel(constant: Option<f32>) -> Kernel {
    let sum = Expr::Binary(
        BinaryOp::Add,
        Box::new(Expr::Load(0)),
        Box::new(Expr::Load(1)),
    );
    Kernel::new(
        vec![IterKind::Parallel, IterKind::Parallel],
        2,
        match constant {
            Some(c) => Expr::Binary(BinaryOp::Mul, Box::new(sum), Box::new(Expr::Const(c))),
            None => sum,
        },
        Accumulate::Assign,
    )
}

/// The launch of `out[i, j] = a[i, j] + b[j]` on a `rows` x `cols` matrix.
fn add_launch(rows: u64, cols: u64) -> Launch {
    let matrix = Layout::new(0, vec![cols, 1], rows * cols);
    Launch::new(
        vec![rows, cols],
        matrix.clone(),
        vec![matrix, Layout::new(0, vec![0, 1], cols)],
    )
}

/// Times `iters` one-element launches with a warm cache. `record_only`:
/// nothing is submitted inside the timed region, so the software adapters
/// (which execute on the same CPU cores) do not compete with the host
/// work; otherwise submissions happen as configured and are timed too.
fn host_overhead_with(c: &mut Criterion, name: &str, options: WgpuOptions, record_only: bool) {
    let Ok(mut gpu) = WgpuBackend::with_options(options) else {
        return;
    };
    let kernel = add_kernel(None);
    let launch = add_launch(1, 1);
    let a = gpu.upload(&[1.0]).unwrap();
    let b = gpu.upload(&[2.0]).unwrap();
    let mut out = gpu.alloc(1).unwrap();
    gpu.execute(&kernel, &launch, &mut out, &[&a, &b]).unwrap();
    gpu.wait().unwrap();
    c.bench_function(name, |bench| {
        bench.iter_custom(|iters| {
            let start = Instant::now();
            for _ in 0..iters {
                gpu.execute(&kernel, &launch, &mut out, &[&a, &b]).unwrap();
            }
            if !record_only {
                gpu.flush().unwrap();
            }
            let host = start.elapsed();
            gpu.wait().unwrap();
            host
        })
    });
    assert_eq!(gpu.download(&out).unwrap(), vec![3.0]);
}

fn host_overhead(c: &mut Criterion) {
    if gpu().is_none() {
        return;
    }
    host_overhead_with(
        c,
        "host_overhead/launch_and_submit",
        WgpuOptions::default(),
        false,
    );
    let record_only = WgpuOptions {
        max_pending_dispatches: usize::MAX,
        ..WgpuOptions::default()
    };
    host_overhead_with(c, "host_overhead/launch_recorded", record_only, true);
}

const HAND_WRITTEN: &str = "
@group(0) @binding(0) var<uniform> cols: vec4<u32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@group(0) @binding(2) var<storage, read> a: array<f32>;
@group(0) @binding(3) var<storage, read> b: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = gid.x + gid.y * groups.x * 64u;
    if (i >= arrayLength(&out)) { return; }
    out[i] = a[i] + b[i % cols.x];
}
";

/// The hand-written kernel, bound to the backend's buffers.
struct HandWritten {
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    groups: (u32, u32),
}

impl HandWritten {
    fn new(gpu: &WgpuBackend, out: &WgpuBuffer, a: &WgpuBuffer, b: &WgpuBuffer, cols: u32) -> Self {
        let (pipeline, bind_group) = hand_written(
            gpu,
            "hand-written broadcast add",
            HAND_WRITTEN,
            [cols, 0, 0, 0],
            &[out.raw(), a.raw(), b.raw()],
        );
        let max = gpu.limits().max_compute_workgroups_per_dimension;
        let groups = (out.len() as u32).div_ceil(64);
        let groups = if groups <= max {
            (groups, 1)
        } else {
            (max, groups.div_ceil(max))
        };
        HandWritten {
            pipeline,
            bind_group,
            groups,
        }
    }

    fn run(&self, gpu: &WgpuBackend) {
        let mut encoder = gpu.device().create_command_encoder(&Default::default());
        {
            let mut pass = encoder.begin_compute_pass(&Default::default());
            pass.set_pipeline(&self.pipeline);
            pass.set_bind_group(0, &self.bind_group, &[]);
            pass.dispatch_workgroups(self.groups.0, self.groups.1, 1);
        }
        gpu.queue().submit([encoder.finish()]);
        gpu.device()
            .poll(wgpu::PollType::wait_indefinitely())
            .unwrap();
    }
}

fn broadcast_add(c: &mut Criterion) {
    let Some(mut gpu) = gpu() else { return };
    let (rows, cols) = (2048u64, 2048u64);
    let kernel = add_kernel(None);
    let launch = add_launch(rows, cols);
    let a_values: Vec<f32> = (0..rows * cols).map(|i| (i % 97) as f32).collect();
    let b_values: Vec<f32> = (0..cols).map(|j| j as f32 * 0.5).collect();
    let a = gpu.upload(&a_values).unwrap();
    let b = gpu.upload(&b_values).unwrap();
    let mut generated_out = gpu.alloc((rows * cols) as usize).unwrap();
    let hand_out = gpu.alloc((rows * cols) as usize).unwrap();
    let hand = HandWritten::new(&gpu, &hand_out, &a, &b, cols as u32);
    // Both kernels compute the same values.
    gpu.execute(&kernel, &launch, &mut generated_out, &[&a, &b])
        .unwrap();
    gpu.wait().unwrap();
    hand.run(&gpu);
    assert_eq!(
        gpu.download(&generated_out).unwrap(),
        gpu.download(&hand_out).unwrap()
    );

    let mut group = c.benchmark_group("broadcast_add_2048x2048");
    // Bytes moved: read a, write out (b stays in cache).
    group.throughput(Throughput::Bytes(rows * cols * 8));
    group.bench_function("generated", |bench| {
        bench.iter(|| {
            gpu.execute(&kernel, &launch, &mut generated_out, &[&a, &b])
                .unwrap();
            gpu.wait().unwrap();
        })
    });
    group.bench_function("hand_written", |bench| bench.iter(|| hand.run(&gpu)));
    group.finish();
}

fn latency(c: &mut Criterion) {
    let Some(mut gpu) = gpu() else { return };
    let launch = add_launch(4, 4);
    let a = gpu.upload(&[1.0; 16]).unwrap();
    let b = gpu.upload(&[1.0; 4]).unwrap();
    let mut out = gpu.alloc(16).unwrap();
    let mut group = c.benchmark_group("latency");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    let mut fresh = 0u32;
    group.bench_function("first_call_new_kernel", |bench| {
        bench.iter(|| {
            // A constant never used before: a kernel structure not in the cache.
            fresh += 1;
            let kernel = add_kernel(Some(fresh as f32));
            gpu.execute(&kernel, &launch, &mut out, &[&a, &b]).unwrap();
            gpu.wait().unwrap();
        })
    });
    let cached = add_kernel(Some(0.5));
    gpu.execute(&cached, &launch, &mut out, &[&a, &b]).unwrap();
    group.bench_function("cached_call", |bench| {
        bench.iter(|| {
            gpu.execute(&cached, &launch, &mut out, &[&a, &b]).unwrap();
            gpu.wait().unwrap();
        })
    });
    group.finish();
}

criterion_group!(benches, host_overhead, broadcast_add, latency);
criterion_main!(benches);
