//! Solving a synthetic network of N operations: a deep MLP whose hidden
//! sizes are mostly unknown, interleaved with attention-style einsums.
//!
//! `cargo bench -p shape-solver --bench solve`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use shape_solver::{Graph, GraphError, TensorId};

/// A network of at least `n` operations; returns it with its last tensor.
fn synthetic_network(n: usize) -> Result<(Graph, TensorId), GraphError> {
    let mut g = Graph::new();
    let mut h = g.input("x", "32,16|64")?;
    let mut layer = 0;
    while g.num_ops() < n {
        // An MLP layer: the hidden size is given on every fourth layer only.
        let w = g.parameter(&format!("w{layer}"))?;
        let b = if layer % 4 == 3 {
            g.parameter_with_spec(&format!("b{layer}"), "64")?
        } else {
            g.parameter(&format!("b{layer}"))?
        };
        let z = g.compose(w, h)?;
        let z = g.add(z, b)?;
        h = g.unary("relu", z)?;
        if layer % 4 == 3 {
            // An attention block over the sequence axis.
            let wq = g.parameter_with_spec(&format!("wq{layer}"), "..i..->4,16")?;
            let wk = g.parameter(&format!("wk{layer}"))?;
            let wv = g.parameter_with_spec(&format!("wv{layer}"), "..i..->4,16")?;
            let wo = g.parameter(&format!("wo{layer}"))?;
            let proj = "b,s|d;d->h,k=>b,s|h,k";
            let q = g.einsum(proj, &[h, wq])?;
            let k = g.einsum(proj, &[h, wk])?;
            let v = g.einsum(proj, &[h, wv])?;
            let s = g.einsum("b,s|h,k;b,t|h,k=>b|h,s,t", &[q, k])?;
            let p = g.unary("softmax", s)?;
            let m = g.einsum("b|h,s,t;b,t|h,k=>b,s|h,k", &[p, v])?;
            let o = g.einsum("b,s|h,k;h,k->d=>b,s|d", &[m, wo])?;
            h = g.add(o, h)?;
        }
        layer += 1;
    }
    Ok((g, h))
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("solve_network");
    for n in [100usize, 1_000, 10_000] {
        if n >= 10_000 {
            group.sample_size(10);
        }
        // Building and solving are timed; freeing the graph afterwards is
        // not, and it happens before the next iteration so that every
        // iteration reuses the same (already mapped) memory.
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, &n| {
            b.iter_custom(|iters| {
                let mut total = std::time::Duration::ZERO;
                for _ in 0..iters {
                    let start = std::time::Instant::now();
                    let (g, out) = synthetic_network(n).expect("the network is well-shaped");
                    let solved = g.solve().expect("the network solves");
                    let shape = solved.shape(out).expect("known tensor").to_string();
                    total += start.elapsed();
                    assert_eq!(shape, "32, 16|->64");
                    drop((g, solved));
                }
                total
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
