//! The coalesced CPU path on one thread against all of the machine's,
//! as ratios of medians of alternating rounds measured in one run, and
//! where a launch starts to gain from threads.
//!
//! `cargo bench -p backend-cpu --bench threads`

use std::time::{Duration, Instant};

use backend_cpu::CpuBackend;
use shape_core::{Backend, Kernel, Launch};
use shape_graph::Graph;

fn kernel_of(g: &Graph, t: shape_graph::TensorId) -> (Kernel, Launch) {
    let s = g.solve().expect("well-shaped");
    let mut lowered = s
        .lower(g.producer(t).expect("a result"), &Default::default())
        .expect("lowerable");
    let step = lowered.steps.remove(0);
    (step.kernel, step.launch)
}

fn time(mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Medians of `rounds` alternating runs of `kernel` on `one` thread and on
/// `many`.
fn compare(
    name: &str,
    rounds: usize,
    (k, l): &(Kernel, Launch),
    operands: &[&Vec<f32>],
    out: &mut Vec<f32>,
    many: usize,
) {
    let mut one = CpuBackend::coalesced().threads(1);
    let mut all = CpuBackend::coalesced().threads(many);
    let (mut t1, mut tn) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        t1.push(time(|| one.execute(k, l, out, operands).expect("runs")));
        tn.push(time(|| all.execute(k, l, out, operands).expect("runs")));
    }
    let (a, b) = (median(t1), median(tn));
    println!(
        "{name}: 1 thread / {many} threads, medians of {rounds} alternating rounds: {:.3} ms / {:.3} ms = {:.2}x",
        a.as_secs_f64() * 1e3,
        b.as_secs_f64() * 1e3,
        a.as_secs_f64() / b.as_secs_f64()
    );
}

fn main() {
    let many = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!("threads available: {many}");
    let n = 4096u64;
    let mut g = Graph::new();
    let a = g.input("a", "4096,4096").expect("spec");
    let col = g.input("col", "4096,1").expect("spec");
    let add = g.add(a, col).expect("broadcast add");
    let sum = g.permute("ij=>i", a).expect("row sums");
    let x = g.input("x", "512,512").expect("spec");
    let y = g.input("y", "512,512").expect("spec");
    let mm = g.einsum("ik;kj=>ij", &[x, y]).expect("contraction");
    let xl = g.input("xl", "1024,1024").expect("spec");
    let yl = g.input("yl", "1024,1024").expect("spec");
    let mml = g.einsum("ik;kj=>ij", &[xl, yl]).expect("contraction");
    let big: Vec<f32> = (0..n * n).map(|i| (i % 1000) as f32 * 0.5).collect();
    let column: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let m: Vec<f32> = (0..512 * 512).map(|i| (i % 17) as f32 * 0.25).collect();
    let mut out = vec![0.0f32; (n * n) as usize];
    let mut sums = vec![0.0f32; n as usize];
    let mut prod = vec![0.0f32; 512 * 512];
    compare(
        "broadcast add 4096x4096",
        21,
        &kernel_of(&g, add),
        &[&big, &column],
        &mut out,
        many,
    );
    compare(
        "row sums 4096x4096",
        21,
        &kernel_of(&g, sum),
        &[&big],
        &mut sums,
        many,
    );
    compare(
        "contraction 512^3",
        31,
        &kernel_of(&g, mm),
        &[&m, &m],
        &mut prod,
        many,
    );
    let ml: Vec<f32> = (0..1024 * 1024).map(|i| (i % 19) as f32 * 0.25).collect();
    let mut prodl = vec![0.0f32; 1024 * 1024];
    compare(
        "contraction 1024^3",
        11,
        &kernel_of(&g, mml),
        &[&ml, &ml],
        &mut prodl,
        many,
    );

    // Where threads start to pay: a pointwise add of `size` elements,
    // split whatever its size, against one thread.
    println!("crossover (pointwise add, threads forced on every launch):");
    for exp in [12u32, 16, 18, 20, 22, 24] {
        let size = 1u64 << exp;
        let mut g = Graph::new();
        let p = g.input("p", &format!("{size}")).expect("spec");
        let q = g.input("q", &format!("{size}")).expect("spec");
        let s = g.add(p, q).expect("add");
        crossover(
            &format!("pointwise add of 2^{exp}"),
            &kernel_of(&g, s),
            size,
            size,
            many,
        );
    }
    println!("crossover (contraction n^3, threads forced on every launch):");
    for n in [16u64, 32, 64, 128] {
        let mut g = Graph::new();
        let x = g.input("x", &format!("{n},{n}")).expect("spec");
        let y = g.input("y", &format!("{n},{n}")).expect("spec");
        let s = g.einsum("ik;kj=>ij", &[x, y]).expect("contraction");
        crossover(
            &format!("contraction {n}^3 ({} points)", n * n * n),
            &kernel_of(&g, s),
            n * n,
            n * n,
            many,
        );
    }
}

/// One thread against `many` on every launch, however small.
fn crossover(name: &str, (k, l): &(Kernel, Launch), len: u64, out_len: u64, many: usize) {
    {
        let data: Vec<f32> = (0..len).map(|i| (i % 7) as f32).collect();
        let mut out = vec![0.0f32; out_len as usize];
        let mut one = CpuBackend::coalesced().threads(1);
        let mut all = CpuBackend::coalesced()
            .threads(many)
            .with_min_work_per_thread(0);
        let rounds = 101;
        let (mut t1, mut tn) = (Vec::new(), Vec::new());
        for _ in 0..rounds {
            t1.push(time(|| {
                one.execute(k, l, &mut out, &[&data, &data]).expect("runs")
            }));
            tn.push(time(|| {
                all.execute(k, l, &mut out, &[&data, &data]).expect("runs")
            }));
        }
        let (a, b) = (median(t1), median(tn));
        println!(
            "  {name}: {:.1} us / {:.1} us = {:.2}x",
            a.as_secs_f64() * 1e6,
            b.as_secs_f64() * 1e6,
            a.as_secs_f64() / b.as_secs_f64()
        );
    }
}
