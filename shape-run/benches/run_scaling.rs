//! How running a graph grows with the number of results (issue 10,
//! finding 5: the runner once tested every result against the list of
//! outputs, so 100,000 results took 155 s).
//!
//! `cargo bench -p shape-run --bench run_scaling [-- N ...]`
//!
//! For each N (default 10,000 and 100,000) builds a chain of N pointwise
//! operations on a 16-element input, every result an output (as `shapec
//! run` asks for every assignment), solves it, and times planning and
//! running on the CPU backend apart from inference. Prints the times and,
//! for two sizes or more, the exponent fitted between the first and last
//! (1 is linear).

use std::time::Instant;

use backend_cpu::CpuBackend;
use shape_graph::Graph;
use shape_run::{HostTensor, Inputs, RunGraph, RunOptions};

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![10_000, 100_000]
    } else {
        sizes
    };
    let mut points = Vec::new();
    for &n in &sizes {
        let mut g = Graph::new();
        let x = g.input("x", "16").expect("a spec");
        let mut t = x;
        let mut outputs = Vec::with_capacity(n);
        for i in 0..n {
            let f = ["relu", "neg", "id"][i % 3];
            t = g.unary(f, t).expect("a pointwise chain");
            outputs.push(t);
        }
        let solved = g.solve().expect("the chain solves");
        let start = Instant::now();
        let inputs = Inputs::new().with(
            x,
            HostTensor::new(vec![16], vec![1.0; 16]).expect("16 values"),
        );
        let out = solved
            .run(
                &mut CpuBackend::coalesced(),
                inputs,
                &outputs,
                &RunOptions::default(),
            )
            .expect("the chain runs");
        let secs = start.elapsed().as_secs_f64();
        assert_eq!(out.iter().count(), n);
        println!("{n:>7} results: run {:>9.1} ms", secs * 1e3);
        points.push((n as f64, secs));
    }
    if let (Some(first), Some(last)) = (points.first(), points.last()) {
        if points.len() > 1 {
            let exponent = (last.1 / first.1).ln() / (last.0 / first.0).ln();
            println!("fitted exponent {exponent:.2} (1 is linear, 2 quadratic)");
        }
    }
}
