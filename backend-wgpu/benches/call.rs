//! Vectorized calls on wgpu (on whatever adapter is present, printed
//! first): host time per call with a warm pipeline, from fresh sizes to a
//! recorded dispatch (resolving the call, the kernel's strides, the
//! parameter block, the bind group, recording), waiting for the device
//! outside the timed region. The goal is under 20 µs plus device time.
//!
//! `cargo bench -p backend-wgpu --bench call`

use std::time::{Duration, Instant};

use backend_wgpu::WgpuBackend;
use criterion::{criterion_group, criterion_main, Criterion};
use shape_call::{Arg, CallArgs, Function};
use shape_core::Backend;

fn bench(c: &mut Criterion) {
    let mut gpu = match WgpuBackend::new() {
        Ok(g) => {
            eprintln!("adapter: {}", g.name());
            g
        }
        Err(e) => {
            eprintln!("no adapter, wgpu call benchmarks skipped: {e}");
            return;
        }
    };
    let f = Function::parse("fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }")
        .expect("dot3");
    let args = |n: u64| {
        CallArgs::new()
            .arg(Arg::tensor(&[n, 3]))
            .arg(Arg::tensor(&[3]))
    };
    let bound = f.bind(&args(1)).expect("binds");
    // Buffers big enough for every size used; each call sees other sizes.
    let sizes: Vec<u64> = (1..=16).collect();
    let a = gpu.upload(&[0.5; 48]).expect("a");
    let b = gpu.upload(&[0.25; 3]).expect("b");
    let mut outs = Vec::new();
    for &n in &sizes {
        outs.push(gpu.alloc(n as usize).expect("out"));
    }
    let mut ins = Vec::new();
    for &n in &sizes {
        ins.push(gpu.upload(&vec![0.5; 3 * n as usize]).expect("a"));
    }
    drop(a);
    let mut group = c.benchmark_group("call");
    group.bench_function("host_per_call", |bencher| {
        bencher.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for i in 0..iters {
                let k = (i % sizes.len() as u64) as usize;
                let start = Instant::now();
                let resolved = bound.call(&args(sizes[k])).expect("resolves");
                let kernel = bound.kernel(&resolved).expect("a kernel");
                gpu.run_call(&kernel, &[&ins[k], &b, &outs[k]])
                    .expect("runs");
                total += start.elapsed();
                if i % 256 == 255 {
                    gpu.wait().expect("device");
                }
            }
            gpu.wait().expect("device");
            total
        })
    });
    group.finish();
    let stats = gpu.cache_stats();
    eprintln!(
        "call pipelines compiled: {}, reused: {}",
        stats.call_compiles, stats.call_hits
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
