//! Vectorized calls on wgpu (on whatever adapter is present, printed
//! first): host time per call with a warm pipeline, from fresh sizes to a
//! recorded dispatch (resolving the call, the kernel's strides, the
//! parameter block, the bind group, recording), waiting for the device
//! outside the timed region. The goal is under 20 µs plus device time.
//!
//! The `call_65536` group runs shape-call's `interpreter` bench calls on
//! wgpu (a dot product and a loop of 16 iterations over 65,536 call
//! indices): from host data to host data (`run_call_on_host`: upload,
//! dispatch, download), and on buffers already on the device (dispatch
//! and wait).
//!
//! `cargo bench -p backend-wgpu --features call --bench call`

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
    calls_65536(c, &mut gpu);
    let stats = gpu.cache_stats();
    eprintln!(
        "call pipelines compiled: {}, reused: {}",
        stats.call_compiles, stats.call_hits
    );
}

/// Call indices of the `call_65536` group (as shape-call's `interpreter`
/// group).
const CALLS: u64 = 1 << 16;

fn calls_65536(c: &mut Criterion, gpu: &mut WgpuBackend) {
    let mut group = c.benchmark_group("call_65536");
    group.sample_size(10);
    let n = CALLS as usize;
    let dot = "fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }";
    let powsum = "fn powsum(x: f32, n: u32) -> f32 { var s = 0.0; var p = 1.0; for (var i = 0u; i < n; i++) { s += p; p *= x; } return s; }";
    let a: Vec<f32> = (0..3 * n).map(|i| (i % 17) as f32 * 0.25 - 2.0).collect();
    let x: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 0.05 - 0.3).collect();
    let cases = [
        (
            "dot3",
            dot,
            CallArgs::new()
                .arg(Arg::tensor(&[CALLS, 3]))
                .arg(Arg::tensor(&[3])),
            vec![a, vec![0.5, -1.0, 2.0]],
        ),
        (
            "powsum16",
            powsum,
            CallArgs::new()
                .arg(Arg::tensor(&[CALLS]))
                .arg(Arg::Number(shape_call::Number::Int(16))),
            vec![x, vec![16.0]],
        ),
    ];
    for (name, source, args, data) in cases {
        let f = Function::parse(source).expect("parses");
        let bound = f.bind(&args).expect("binds");
        let kernel = bound
            .kernel(&bound.call(&args).expect("resolves"))
            .expect("a kernel");
        let buffers = kernel.buffers(data).expect("buffers");
        let mut reference = buffers.clone();
        kernel.run_interpreted(&mut reference).expect("interprets");
        let out = gpu
            .run_call_on_host(&kernel, buffers.clone())
            .expect("runs");
        let result = kernel.result.expect("a result");
        let worst = (out[result].iter().zip(&reference[result]))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        eprintln!("{name}: largest difference from the interpreter {worst}");
        group.bench_function(format!("{name}_host_to_host"), |b| {
            b.iter(|| {
                gpu.run_call_on_host(&kernel, buffers.clone())
                    .expect("runs")
            })
        });
        let device: Vec<_> = (buffers.iter())
            .map(|v| gpu.upload(v).expect("uploads"))
            .collect();
        let refs: Vec<_> = device.iter().collect();
        group.bench_function(format!("{name}_on_device"), |b| {
            b.iter(|| {
                gpu.run_call(&kernel, &refs).expect("runs");
                gpu.wait().expect("device")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
