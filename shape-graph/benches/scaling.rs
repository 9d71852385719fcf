//! How solving time grows with the problem: the synthetic network, and
//! chains of identity permutes whose size is given first or last (issue 10,
//! finding 4; also a star of permutes and a chain over an open batch row),
//! at 1,000 and 10,000 operations, built and solved in
//! alternation so that whatever else the machine does falls on both sizes
//! alike, with graph building and finalization timed apart.
//!
//! `cargo bench -p shape-graph --bench scaling [-- ROUNDS]`
//!
//! Prints, per workload and size, the median and fastest round of building
//! (every operation added and simplified), finalization (`Graph::solve`
//! and, for the chains, reading every shape back) and both, then the
//! ratios t(10,000) / t(1,000). The goal is a total ratio of at most 12:
//! linear growth, with some room for a working set that leaves the caches.
//! Criterion's `solve` bench measures the sizes one after another, minutes
//! apart, so its ratio carries the drift between them.

use std::time::{Duration, Instant};

#[path = "support/chain.rs"]
mod chain;
#[path = "support/network.rs"]
mod network;

use chain::Chain;

const SIZES: [usize; 2] = [1_000, 10_000];

/// What a round builds and solves.
#[derive(Clone, Copy, Debug)]
enum Workload {
    Network,
    Chain(Chain),
}

/// One round's times.
#[derive(Clone, Copy)]
struct Round {
    build: Duration,
    finalize: Duration,
}

fn one_round(n: usize, work: Workload) -> Round {
    let start = Instant::now();
    let (g, out, expected) = match work {
        Workload::Network => {
            let (g, out) = network::synthetic_network(n).expect("the network is well-shaped");
            (g, out, "32, 16|->64")
        }
        Workload::Chain(which) => {
            let (g, _, end) = chain::chain(n, which).expect("the chain is well-shaped");
            (g, end, which.shape())
        }
    };
    let built = Instant::now();
    let solved = g.solve().expect("it solves");
    if let Workload::Chain(_) = work {
        // Reading every shape is where a chain given last was quadratic.
        for t in g.tensor_ids() {
            std::hint::black_box(solved.shape(t).expect("a tensor of the graph"));
        }
    }
    let done = Instant::now();
    let shape = solved.shape(out).expect("known tensor").to_string();
    assert_eq!(shape, expected);
    // Freed outside the timed part, as in the criterion bench.
    network::free_untimed((g, solved));
    Round {
        build: built - start,
        finalize: done - built,
    }
}

fn median(mut xs: Vec<Duration>) -> Duration {
    xs.sort();
    xs[xs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

struct Summary {
    build: (Duration, Duration),
    finalize: (Duration, Duration),
    total: (Duration, Duration),
}

/// (median, fastest) of each phase.
fn summarize(rounds: &[Round]) -> Summary {
    let pick = |f: &dyn Fn(&Round) -> Duration| {
        let xs: Vec<Duration> = rounds.iter().map(f).collect();
        let min = *xs.iter().min().expect("at least one round");
        (median(xs), min)
    };
    Summary {
        build: pick(&|r| r.build),
        finalize: pick(&|r| r.finalize),
        total: pick(&|r| r.build + r.finalize),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; a bare number is the round count.
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(40);
    measure(Workload::Network, rounds);
    for which in Chain::ALL {
        measure(Workload::Chain(which), rounds);
    }
}

fn measure(work: Workload, rounds: usize) {
    // Warm-up: the allocator's arenas grow to the larger size once.
    for &n in &SIZES {
        one_round(n, work);
    }
    // Ten small rounds per large one, so both sizes get about the same
    // wall time and the same share of any disturbance.
    let mut small = Vec::new();
    let mut large = Vec::new();
    for _ in 0..rounds {
        for _ in 0..10 {
            small.push(one_round(SIZES[0], work));
        }
        large.push(one_round(SIZES[1], work));
    }
    let (s, l) = (summarize(&small), summarize(&large));
    println!("{work:?}");
    println!(
        "{:<10} {:>8} {:>22} {:>22} {:>22}",
        "ops", "rounds", "build ms (med / min)", "finalize ms", "total ms"
    );
    for (n, count, x) in [(SIZES[0], small.len(), &s), (SIZES[1], large.len(), &l)] {
        println!(
            "{:<10} {:>8} {:>11.3} / {:>8.3} {:>11.3} / {:>8.3} {:>11.3} / {:>8.3}",
            n,
            count,
            ms(x.build.0),
            ms(x.build.1),
            ms(x.finalize.0),
            ms(x.finalize.1),
            ms(x.total.0),
            ms(x.total.1)
        );
    }
    let ratio = |a: Duration, b: Duration| b.as_secs_f64() / a.as_secs_f64();
    println!(
        "t(10000)/t(1000), medians: build {:.2}, finalize {:.2}, total {:.2}; fastest rounds: total {:.2}\n",
        ratio(s.build.0, l.build.0),
        ratio(s.finalize.0, l.finalize.0),
        ratio(s.total.0, l.total.0),
        ratio(s.total.1, l.total.1),
    );
}
