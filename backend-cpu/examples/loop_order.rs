//! Times the coalesced CPU path on the two kernels that issue 17 measures
//! against numpy: a 512x512x512 contraction (`ik;kj=>ij`) and a 4096x4096
//! transposed copy (`ij=>ji`). Prints one line per kernel with the best
//! and median of `RUNS` runs, in milliseconds.
//!
//! `cargo run --release -p backend-cpu --example loop_order [RUNS]`
//!
//! `scripts/numpy_side_by_side.sh` runs it alternately with numpy.

use std::time::Instant;

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

fn time(runs: usize, mut f: impl FnMut()) -> (f64, f64) {
    let mut ms: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    (ms[0], ms[ms.len() / 2])
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5)
        .max(1);
    let mut cpu = CpuBackend::coalesced();

    let mut g = Graph::new();
    let a = g.input("a", "512,512").expect("spec");
    let b = g.input("b", "512,512").expect("spec");
    let mm = g.einsum("ik;kj=>ij", &[a, b]).expect("contraction");
    let (k, l) = kernel_of(&g, mm);
    let av: Vec<f32> = (0..512 * 512).map(|i| (i % 97) as f32 * 0.01).collect();
    let bv: Vec<f32> = (0..512 * 512).map(|i| (i % 89) as f32 * 0.02).collect();
    let (ab, bb) = (cpu.upload(&av).unwrap(), cpu.upload(&bv).unwrap());
    let mut out = cpu.alloc(512 * 512).unwrap();
    let (best, median) = time(runs, || cpu.execute(&k, &l, &mut out, &[&ab, &bb]).unwrap());
    println!("contraction_512 best_ms={best:.2} median_ms={median:.2}");

    let mut g = Graph::new();
    let x = g.input("x", "4096,4096").expect("spec");
    let t = g.permute("ij=>ji", x).expect("transpose");
    let (k, l) = kernel_of(&g, t);
    let xv: Vec<f32> = (0..4096 * 4096).map(|i| (i % 1000) as f32).collect();
    let xb = cpu.upload(&xv).unwrap();
    let mut out = cpu.alloc(4096 * 4096).unwrap();
    let (best, median) = time(runs, || cpu.execute(&k, &l, &mut out, &[&xb]).unwrap());
    println!("transpose_4096 best_ms={best:.2} median_ms={median:.2}");
}
