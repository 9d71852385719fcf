//! One steady-state round of the solver benchmarks, for instruction and
//! cache-miss counts that do not depend on how busy the machine is.
//!
//! A first round builds, solves and frees the synthetic network (so the
//! allocator is in the state a benchmark loop leaves it in); the second,
//! `measured_round`, builds and solves it again. Count only the second:
//!
//! ```text
//! cargo build --release -p shape-graph --example solve_round
//! valgrind --tool=callgrind --cache-sim=yes --LL=1048576,16,64 \
//!     --toggle-collect='*measured_round*' \
//!     target/release/examples/solve_round 10000
//! callgrind_annotate --show=Ir,DLmr --sort=DLmr callgrind.out.*
//! ```
//!
//! `--LL=1048576,16,64` models a 1 MiB last-level cache: the 1,000-operation
//! network's state fits in it and the 10,000-operation one's does not, which
//! is where the two sizes' costs per operation part (docs/performance.md).

#[path = "../benches/support/network.rs"]
mod network;

use shape_graph::{Graph, SolvedGraph};

#[inline(never)]
fn measured_round(n: usize) -> (Graph, SolvedGraph) {
    let (g, _) = network::synthetic_network(n).expect("the network is well-shaped");
    let solved = g.solve().expect("the network solves");
    (g, solved)
}

fn main() {
    let n: usize = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 10_000,
        Some(Ok(n)) => n,
        Some(Err(e)) => {
            eprintln!("usage: solve_round [OPERATIONS]: {e}");
            std::process::exit(2);
        }
    };
    let (g, _) = network::synthetic_network(n).expect("the network is well-shaped");
    let solved = g.solve().expect("the network solves");
    network::free_untimed((g, solved));
    let round = std::hint::black_box(measured_round(n));
    println!("{n} operations: {} tensors solved", round.0.num_tensors());
}
