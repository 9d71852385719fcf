//! Reduction benchmarks, on whatever adapter is present (printed first),
//! each beside its reference in the same run:
//!
//! - `full_reduction_16M`: the sum of 16M elements (a workgroup reduction
//!   of 256 workgroups, then their partials) against a generated copy
//!   kernel over the same 64 MiB (which reads them and writes as many);
//! - `long_reduction_{1,16}x32768`: one and 16 row sums of 32,768
//!   elements as workgroup reductions against one invocation per row (the
//!   only schedule before workgroup reductions, forced here with the
//!   largest loop budget and no threshold; it cannot go past the budget).
//!
//! Every timing is a launch recorded, submitted and waited for. Before
//! each criterion group, the two sides are also timed in alternation
//! (A, B, A, B, ...) and the medians and their ratio printed: on a shared
//! machine, or on a software adapter that shares the CPU with everything
//! else, that ratio is what both sides measured under the same load.
//!
//! `cargo bench -p backend-wgpu --bench reduction`

use std::time::Duration;

mod common;
use common::{open, paired};

use backend_wgpu::{LoopBudget, WgpuBackend, WgpuBuffer, WgpuOptions};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use shape_core::kernel::{Accumulate, Expr, IterKind, Kernel, Launch, Layout};
use shape_core::Backend;

/// `rows` sums of `len` elements each, rows contiguous.
fn row_sums(rows: u64, len: u64) -> (Kernel, Launch) {
    (
        Kernel::new(
            vec![IterKind::Parallel, IterKind::Reduction],
            1,
            Expr::Load(0),
            Accumulate::Add,
        ),
        Launch::new(
            vec![rows, len],
            Layout::new(0, vec![1, 0], rows),
            vec![Layout::new(0, vec![len, 1], rows * len)],
        ),
    )
}

/// `out[i] = in[i]` over `n` elements.
fn copy(n: u64) -> (Kernel, Launch) {
    let vector = Layout::new(0, vec![1], n);
    (
        Kernel::new(
            vec![IterKind::Parallel],
            1,
            Expr::Load(0),
            Accumulate::Assign,
        ),
        Launch::new(vec![n], vector.clone(), vec![vector]),
    )
}

/// Quarter integers: sums of them are exact in any order, so every
/// schedule's result can be checked exactly.
fn data(n: u64) -> Vec<f32> {
    (0..n).map(|i| (i % 9) as f32 / 4.0 - 1.0).collect()
}

fn run(
    gpu: &mut WgpuBackend,
    (kernel, launch): &(Kernel, Launch),
    out: &mut WgpuBuffer,
    input: &WgpuBuffer,
) {
    gpu.execute(kernel, launch, out, &[input]).unwrap();
    gpu.wait().unwrap();
}

fn full_reduction(c: &mut Criterion) {
    let Some(mut gpu) = open(WgpuOptions::default()) else {
        return;
    };
    eprintln!("adapter: {}", gpu.name());
    let n = 1u64 << 24;
    let values = data(n);
    let expected: f64 = values.iter().map(|&v| v as f64).sum();
    let input = gpu.upload(&values).unwrap();
    let sum = row_sums(1, n);
    let mut total = gpu.alloc(1).unwrap();
    run(&mut gpu, &sum, &mut total, &input);
    assert_eq!(gpu.download(&total).unwrap(), vec![expected as f32]);
    let copy = copy(n);
    let mut copied = gpu.alloc(n as usize).unwrap();
    run(&mut gpu, &copy, &mut copied, &input);
    let gpu_cell = std::cell::RefCell::new(&mut gpu);
    paired(
        "full_reduction_16M sum / copy",
        21,
        || run(&mut gpu_cell.borrow_mut(), &sum, &mut total, &input),
        || run(&mut gpu_cell.borrow_mut(), &copy, &mut copied, &input),
    );

    let mut group = c.benchmark_group("full_reduction_16M");
    group
        .sample_size(20)
        .measurement_time(Duration::from_secs(10));
    // Bytes read: the input, for both.
    group.throughput(Throughput::Bytes(n * 4));
    group.bench_function("sum", |b| {
        b.iter(|| run(&mut gpu, &sum, &mut total, &input))
    });
    group.bench_function("copy", |b| {
        b.iter(|| run(&mut gpu, &copy, &mut copied, &input))
    });
    group.finish();
}

fn long_reduction(c: &mut Criterion) {
    let per_element = WgpuOptions {
        loop_budget: LoopBudget::MAX,
        workgroup_reduction_threshold: u64::MAX,
        ..WgpuOptions::default()
    };
    let (Some(mut split), Some(mut serial)) = (open(WgpuOptions::default()), open(per_element))
    else {
        return;
    };
    for rows in [1u64, 16] {
        let len = 32_768u64;
        let values = data(rows * len);
        let sums = row_sums(rows, len);
        let split_input = split.upload(&values).unwrap();
        let serial_input = serial.upload(&values).unwrap();
        let mut split_out = split.alloc(rows as usize).unwrap();
        let mut serial_out = serial.alloc(rows as usize).unwrap();
        let passes = split.cache_stats().workgroup_passes;
        run(&mut split, &sums, &mut split_out, &split_input);
        run(&mut serial, &sums, &mut serial_out, &serial_input);
        assert_eq!(
            split.download(&split_out).unwrap(),
            serial.download(&serial_out).unwrap()
        );
        assert!(split.cache_stats().workgroup_passes > passes);
        assert_eq!(serial.cache_stats().workgroup_passes, 0);
        let name = format!("long_reduction_{rows}x{len}");
        paired(
            &format!("{name} workgroup / per_element"),
            101,
            || run(&mut split, &sums, &mut split_out, &split_input),
            || run(&mut serial, &sums, &mut serial_out, &serial_input),
        );
        let mut group = c.benchmark_group(&name);
        group
            .sample_size(20)
            .measurement_time(Duration::from_secs(5));
        group.throughput(Throughput::Bytes(rows * len * 4));
        group.bench_function("workgroup", |b| {
            b.iter(|| run(&mut split, &sums, &mut split_out, &split_input))
        });
        group.bench_function("per_element", |b| {
            b.iter(|| run(&mut serial, &sums, &mut serial_out, &serial_input))
        });
        group.finish();
    }
}

criterion_group!(benches, full_reduction, long_reduction);
criterion_main!(benches);
