//! The chains of `benches/support/chain.rs` at the sizes given on the
//! command line: building the graph, `Graph::solve`, and reading every
//! shape back, timed apart (one run each, in seconds).
//!
//! ```text
//! cargo run --release -p shape-graph --example permute_chain -- 2000 4000 8000 16000
//! ```

#[path = "../benches/support/chain.rs"]
mod chain;

use std::time::{Duration, Instant};

use chain::Chain;

struct Times {
    build: Duration,
    solve: Duration,
    read: Duration,
}

fn run(k: usize, which: Chain) -> Times {
    let start = Instant::now();
    let (g, _, end) = chain::chain(k, which).expect("the chain is well-shaped");
    let built = Instant::now();
    let solved = g.solve().expect("the chain solves");
    let done = Instant::now();
    for t in g.tensor_ids() {
        let shape = solved.shape(t).expect("a tensor of the graph");
        // Rotations swap the ends of every other tensor of their chain.
        if which != Chain::FlanksOpen || t == end {
            assert_eq!(shape.to_string(), which.shape());
        }
    }
    Times {
        build: built - start,
        solve: done - built,
        read: done.elapsed(),
    }
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![2_000, 4_000, 8_000, 16_000]
    } else {
        sizes
    };
    println!(
        "{:<10} {:>8} {:>10} {:>10} {:>10} {:>10}",
        "chain", "ops", "build s", "solve s", "read s", "total s"
    );
    for which in Chain::ALL {
        for &k in &sizes {
            let t = run(k, which);
            println!(
                "{:<10} {:>8} {:>10.4} {:>10.4} {:>10.4} {:>10.4}",
                format!("{which:?}"),
                k,
                t.build.as_secs_f64(),
                t.solve.as_secs_f64(),
                t.read.as_secs_f64(),
                (t.build + t.solve + t.read).as_secs_f64()
            );
        }
    }
}
