//! CPU kernel throughput on 16M-element f32 tensors, beside `memcpy` of
//! the same bytes measured in the same run.
//!
//! `cargo bench -p backend-cpu --bench kernels`
//!
//! Throughput counts the bytes a kernel must move: both operands read and
//! the result written (the broadcast column and the row sums are small).

use backend_cpu::CpuBackend;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use shape_core::{Backend, Kernel, Launch};
use shape_graph::Graph;

const N: usize = 4096;

fn kernel_of(g: &Graph, t: shape_graph::TensorId) -> (Kernel, Launch) {
    let s = g.solve().expect("well-shaped");
    let mut lowered = s
        .lower(g.producer(t).expect("a result"), &Default::default())
        .expect("lowerable");
    let step = lowered.steps.remove(0);
    (step.kernel, step.launch)
}

fn bench(c: &mut Criterion) {
    let mut g = Graph::new();
    let a = g.input("a", "4096,4096").expect("spec");
    let col = g.input("col", "4096,1").expect("spec");
    let add = g.add(a, col).expect("broadcast add");
    let sum = g.permute("ij=>i", a).expect("row sums");
    let tr = g.permute("ij=>ji", a).expect("transpose");
    let (add_k, add_l) = kernel_of(&g, add);
    let (sum_k, sum_l) = kernel_of(&g, sum);
    let (tr_k, tr_l) = kernel_of(&g, tr);

    let big: Vec<f32> = (0..N * N).map(|i| (i % 1000) as f32 * 0.5).collect();
    let column: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let mut out = vec![0.0f32; N * N];
    let mut sums = vec![0.0f32; N];
    let bytes = (N * N * 4) as u64;

    let mut group = c.benchmark_group("cpu_16M_f32");
    group.sample_size(10);
    group.throughput(Throughput::Bytes(2 * bytes));
    group.bench_function("memcpy", |b| b.iter(|| out.copy_from_slice(&big)));
    let mut fast = CpuBackend::coalesced();
    let mut reference = CpuBackend::reference();
    group.bench_function("broadcast_add/coalesced", |b| {
        b.iter(|| {
            fast.execute(&add_k, &add_l, &mut out, &[&big, &column])
                .expect("runs")
        })
    });
    group.bench_function("broadcast_add/reference", |b| {
        b.iter(|| {
            reference
                .execute(&add_k, &add_l, &mut out, &[&big, &column])
                .expect("runs")
        })
    });
    group.bench_function("transpose_copy/coalesced", |b| {
        b.iter(|| fast.execute(&tr_k, &tr_l, &mut out, &[&big]).expect("runs"))
    });
    group.throughput(Throughput::Bytes(bytes));
    group.bench_function("row_sum/coalesced", |b| {
        b.iter(|| {
            fast.execute(&sum_k, &sum_l, &mut sums, &[&big])
                .expect("runs")
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
