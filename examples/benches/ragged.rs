//! Ragged dims (issue 17): the cost of running an operation row by row.
//!
//! `cargo bench -p shape-examples --bench ragged [-- ROUNDS]`
//!
//! The program is `s = sum_j (x[i, j] + b[i])` over `x: R, var`, run on
//! the CPU's coalesced path and, where an adapter exists, on wgpu, for
//! R = 10,000, 20,000 and 100,000 rows with
//! - **mixed** rows: lengths cycling through 0..8, a different length at
//!   every row: one launch over a row table per operation (a launch per
//!   row on a backend without row tables);
//! - **uniform** rows: every row of length 4, so that the rows share one
//!   launch (`RowRun`), against
//! - **dense**: the same values as `x: R, 4`, the strided program.
//!
//! Times are medians of the rounds (default 11); each round runs every
//! size and case in turn, so that the ratios compare runs made under the
//! same conditions. A run uploads the data, runs both operations and
//! reads the sums back.
//! The ratios to read: 20k/10k and 100k/10k for each (linear in the rows
//! is 2 and 10), mixed/dense (rows of changing lengths, one launch over a
//! row table per operation, against the strided tensor) and uniform/dense
//! (what the ragged path costs when rows share a launch).

use std::time::Instant;

use backend_cpu::CpuBackend;
use backend_wgpu::WgpuBackend;
use shape_core::Backend;
use shape_graph::Graph;
use shape_run::{HostTensor, Inputs, RunGraph, RunOptions};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[derive(Clone, Copy)]
enum Case {
    Mixed,
    Uniform,
    Dense,
}

/// One run of the program over `rows` rows, timed.
fn run<B: Backend>(backend: &mut B, rows: u64, case: Case) -> f64 {
    let mut g = Graph::new();
    let spec = match case {
        Case::Dense => format!("{rows}, 4"),
        Case::Mixed | Case::Uniform => format!("{rows}, var"),
    };
    let x = g.input("x", &spec).expect("a spec");
    let b = g.input("b", &format!("{rows}, 1")).expect("a spec");
    let y = g.add(x, b).expect("add");
    let s = g.einsum("ij=>i", &[y]).expect("a sum");
    let solved = g.solve().expect("solves");
    let lengths: Vec<u64> = (0..rows)
        .map(|r| match case {
            Case::Mixed => r % 8,
            Case::Uniform | Case::Dense => 4,
        })
        .collect();
    let total: u64 = lengths.iter().sum();
    let values: Vec<f32> = (0..total).map(|i| (i % 9) as f32 / 8.0).collect();
    let data = match case {
        Case::Dense => HostTensor::new(vec![rows, 4], values),
        Case::Mixed | Case::Uniform => HostTensor::ragged(vec![rows], &lengths, vec![], values),
    }
    .expect("data");
    let bias = HostTensor::new(vec![rows, 1], vec![0.5; rows as usize]).expect("data");
    let inputs = Inputs::new().with(x, data).with(b, bias);
    let start = Instant::now();
    let out = solved
        .run(backend, inputs, &[s], &RunOptions::default())
        .expect("runs");
    let elapsed = start.elapsed().as_secs_f64();
    assert_eq!(out.get(s).expect("sums").len() as u64, rows);
    elapsed
}

fn report<B: Backend>(name: &str, backend: &mut B, rounds: usize) {
    println!("{name}:");
    const SIZES: [u64; 3] = [10_000, 20_000, 100_000];
    // Every size and case in each round, so that a slower phase of the
    // machine falls on all of them alike.
    let mut times = vec![[Vec::new(), Vec::new(), Vec::new()]; SIZES.len()];
    for _ in 0..rounds {
        for (s, &rows) in SIZES.iter().enumerate() {
            for (i, case) in [Case::Mixed, Case::Uniform, Case::Dense]
                .into_iter()
                .enumerate()
            {
                times[s][i].push(run(backend, rows, case));
            }
        }
    }
    let mut medians = Vec::new();
    for (times, rows) in times.into_iter().zip(SIZES) {
        let [m, u, d] = times.map(median);
        println!(
            "  {rows:>6} rows: mixed {:.2} ms, uniform {:.2} ms, dense {:.2} ms, mixed/dense {:.2}, uniform/dense {:.2}",
            m * 1e3,
            u * 1e3,
            d * 1e3,
            m / d,
            u / d
        );
        medians.push((m, u, d));
    }
    let (m1, u1, d1) = medians[0];
    for ((m, u, d), label) in medians[1..].iter().zip(["20k/10k", "100k/10k"]) {
        println!(
            "  {label}: mixed {:.2}, uniform {:.2}, dense {:.2}",
            m / m1,
            u / u1,
            d / d1
        );
    }
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(11);
    report("cpu (coalesced)", &mut CpuBackend::coalesced(), rounds);
    match WgpuBackend::new() {
        Ok(mut gpu) => {
            let name = format!("wgpu ({})", gpu.name());
            report(&name, &mut gpu, rounds);
        }
        Err(e) => println!("wgpu: no adapter ({e}); skipped"),
    }
}
