//! Solving a synthetic network of N operations: a deep MLP whose hidden
//! sizes are mostly unknown, interleaved with attention-style einsums.
//!
//! `cargo bench -p shape-graph --bench solve`

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
#[path = "support/network.rs"]
mod network;

use network::{symbolic_network, synthetic_network};

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("solve_network");
    for n in [100usize, 1_000, 10_000] {
        if n >= 10_000 {
            group.sample_size(10);
        }
        // Building and solving are timed; freeing the graph afterwards is
        // not (see `network::free_untimed`), and it happens before the next
        // iteration so that every iteration reuses the same (already
        // mapped) memory.
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
                    network::free_untimed((g, solved));
                }
                total
            })
        });
    }
    group.finish();

    // The same network with run-time batch and sequence sizes: solving it
    // once, then binding it to sizes and reading every shape (which is
    // what running it at another size costs the solver).
    let mut group = c.benchmark_group("run_time_sizes");
    // 10k and 20k: binding is linear in the tensors (20k/10k near 2).
    for n in [1_000usize, 10_000, 20_000] {
        group.sample_size(10);
        group.bench_with_input(BenchmarkId::new("solve", n), &n, |b, &n| {
            b.iter_custom(|iters| {
                let mut total = std::time::Duration::ZERO;
                for _ in 0..iters {
                    let start = std::time::Instant::now();
                    let (g, out) = symbolic_network(n).expect("the network is well-shaped");
                    let solved = g.solve().expect("the network solves");
                    let shape = solved
                        .symbolic_shape(out)
                        .expect("known tensor")
                        .to_string();
                    total += start.elapsed();
                    assert_eq!(shape, "bs|->64");
                    network::free_untimed((g, solved));
                }
                total
            })
        });
        let (g, out) = symbolic_network(n).expect("the network is well-shaped");
        let solved = g.solve().expect("the network solves");
        let sizes: Vec<_> = g.run_time_sizes().map(|(s, _)| s).collect();
        group.bench_with_input(
            BenchmarkId::new("bind_and_read_every_shape", n),
            &n,
            |b, _| {
                let mut batch = 2;
                b.iter(|| {
                    batch = batch % 64 + 2;
                    let bound = solved
                        .bind(&[(sizes[0], batch), (sizes[1], 16)])
                        .expect("binds");
                    for t in g.tensor_ids() {
                        std::hint::black_box(bound.shape(t).expect("a shape"));
                    }
                    assert_eq!(bound.shape(out).expect("known").batch[0].size(), batch);
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
