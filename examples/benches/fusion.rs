//! Fusion (issue 18, item 3): a three-layer MLP forward pass at width 1024,
//! `relu(w @ x + b)` per layer, planned with and without fusion: kernels
//! launched, bytes the kernels read and write, and the time of a run on
//! the CPU backend and, where an adapter exists, on wgpu, at batches of 16
//! and 64.
//!
//! `cargo bench -p shape-examples --bench fusion [-- ROUNDS]`
//!
//! Each layer becomes one kernel: the bias add and the relu fuse into a
//! pointwise kernel, which becomes the contraction's epilogue. Times are
//! medians of the rounds (default 5), unfused and fused runs alternating;
//! a run uploads the inputs (12.6 MB of weights), runs every kernel and
//! reads the output back.

use std::time::Instant;

use backend_cpu::CpuBackend;
use backend_wgpu::WgpuBackend;
use shape_core::Backend;
use shape_graph::{BufferRef, Graph, SolvedGraph, TensorId};
use shape_run::{HostTensor, Inputs, RunGraph, RunOptions, RunPlan};

const WIDTH: u64 = 1024;
/// Batches: 16 rows run each contraction one invocation per result
/// element on wgpu; 64 run them tiled (see docs/wgpu-backend.md).
const BATCHES: [u64; 2] = [16, 64];

fn network(batch: u64) -> (SolvedGraph, Vec<(TensorId, u64)>, TensorId) {
    let mut g = Graph::new();
    let x = g.input("x", &format!("{batch}|{WIDTH}")).expect("a spec");
    let mut leaves = vec![(x, batch * WIDTH)];
    let mut h = x;
    for layer in 0..3 {
        let w = g
            .parameter_with_spec(&format!("w{layer}"), &format!("{WIDTH}->{WIDTH}"))
            .expect("a spec");
        let b = g
            .parameter_with_spec(&format!("b{layer}"), &WIDTH.to_string())
            .expect("a spec");
        leaves.push((w, WIDTH * WIDTH));
        leaves.push((b, WIDTH));
        let z = g.compose(w, h).expect("a layer");
        let z = g.add(z, b).expect("a bias");
        h = g.unary("relu", z).expect("an activation");
    }
    (g.solve().expect("the network solves"), leaves, h)
}

/// Kernels launched and bytes their launches read and write.
fn traffic(plan: &RunPlan) -> (usize, u128) {
    let mut kernels = 0;
    let mut bytes = 0u128;
    for op in plan.ops() {
        for step in &op.lowered.steps {
            kernels += 1;
            let reads: u128 = step
                .launch
                .operands
                .iter()
                .zip(&step.operands)
                .filter(|(_, r)| !matches!(r, BufferRef::Result))
                .map(|(l, _)| u128::from(l.len))
                .sum();
            bytes += (reads + u128::from(step.launch.result.len)) * 4;
        }
    }
    (kernels, bytes)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Medians of `rounds` runs of the network unfused and fused, in
/// alternation (unfused, fused, unfused, ...), so that both see the same
/// load; each run uploads its inputs, runs every kernel and reads the
/// output back.
fn time_runs<B: Backend>(
    backend: &mut B,
    solved: &SolvedGraph,
    leaves: &[(TensorId, u64)],
    out: TensorId,
    rounds: usize,
) -> (f64, f64) {
    let plans = [RunOptions::default().unfused(), RunOptions::default()]
        .map(|options| solved.plan(&[out], &options).expect("a plan"));
    let mut times = [Vec::with_capacity(rounds), Vec::with_capacity(rounds)];
    for _ in 0..rounds {
        for (plan, times) in plans.iter().zip(&mut times) {
            let mut inputs = Inputs::new();
            for &(t, n) in leaves {
                let dims = solved.shape(t).expect("a shape").memory_dims();
                let values = (0..n).map(|i| ((i % 7) as f32 - 3.0) / 64.0).collect();
                inputs = inputs.with(t, HostTensor::new(dims, values).expect("values"));
            }
            let start = Instant::now();
            solved
                .run_plan(backend, plan, inputs)
                .expect("the network runs");
            times.push(start.elapsed().as_secs_f64());
        }
    }
    let [u, f] = times;
    (median(u), median(f))
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(5);
    let mut gpu = match WgpuBackend::new() {
        Ok(gpu) => {
            println!("wgpu: {}", gpu.name());
            Some(gpu)
        }
        Err(e) => {
            println!("wgpu: no adapter ({e}); skipped");
            None
        }
    };
    for batch in BATCHES {
        println!("batch {batch}:");
        let (solved, leaves, out) = network(batch);
        for (name, options) in [
            ("unfused", RunOptions::default().unfused()),
            ("fused", RunOptions::default()),
        ] {
            let (kernels, bytes) = traffic(&solved.plan(&[out], &options).expect("a plan"));
            println!(
                "{name:>10}: {kernels} kernels, {:.1} MB read and written",
                bytes as f64 / 1e6
            );
        }
        let (u, f) = time_runs(&mut CpuBackend::coalesced(), &solved, &leaves, out, rounds);
        println!(
            "  cpu (coalesced): unfused {:.2} ms, fused {:.2} ms, fused/unfused {:.3}",
            u * 1e3,
            f * 1e3,
            f / u
        );
        if let Some(gpu) = gpu.as_mut() {
            let (u, f) = time_runs(gpu, &solved, &leaves, out, rounds);
            println!(
                "  wgpu: unfused {:.2} ms, fused {:.2} ms, fused/unfused {:.3}",
                u * 1e3,
                f * 1e3,
                f / u
            );
        }
    }
}
