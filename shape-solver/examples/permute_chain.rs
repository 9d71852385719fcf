//! A chain of `k` identity permutes from a parameter, with the one fact
//! that fixes its size either first (on the parameter) or last (on the end
//! of the chain): times building the graph, `Graph::solve`, and reading
//! every shape back, apart.
//!
//! ```text
//! cargo run --release -p shape-solver --example permute_chain -- 2000 4000 8000 16000
//! ```
//!
//! With the fact last, every intermediate size is a chain of solved
//! variables that ends at the fixed one; a look-up that walks such chains
//! without shortening them made inference quadratic (issue 10, finding 4).

use std::time::{Duration, Instant};

use shape_solver::{Graph, GraphError};

/// Where the size-fixing `require` goes.
#[derive(Clone, Copy, Debug)]
enum Order {
    /// `require x: 5` on the parameter, before the chain.
    FactFirst,
    /// `require h_k: 5` on the chain's end, after it.
    FactLast,
    /// Every permute reads `x` (a star, not a chain), fact last.
    Star,
    /// A chain over an input with open batch axes (`..b..|5`), each
    /// permute keeping them (`...|i=>...|i`), the batch fixed last.
    BatchLast,
}

struct Times {
    build: Duration,
    solve: Duration,
    read: Duration,
}

fn chain(k: usize, order: Order) -> Result<Times, GraphError> {
    let start = Instant::now();
    let mut g = Graph::new();
    let x = match order {
        Order::BatchLast => g.input("x", "..b..|i")?,
        _ => g.parameter("x")?,
    };
    if let Order::FactFirst = order {
        g.require(x, "5")?;
    }
    let mut h = x;
    for _ in 0..k {
        h = match order {
            Order::Star => g.permute("i=>i", x)?,
            Order::BatchLast => g.permute("...|i=>...|i", h)?,
            _ => g.permute("i=>i", h)?,
        };
    }
    match order {
        Order::FactLast | Order::Star => g.require(h, "5")?,
        Order::BatchLast => g.require(h, "2|5")?,
        Order::FactFirst => {}
    }
    let built = Instant::now();
    let solved = g.solve()?;
    let done = Instant::now();
    for t in g.tensor_ids() {
        let shape = solved.shape(t)?.to_string();
        assert!(shape == "|->5" || shape == "2|->5", "{shape}");
    }
    let read = Instant::now();
    Ok(Times {
        build: built - start,
        solve: done - built,
        read: read - done,
    })
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
        "{:<10} {:>8} {:>12} {:>12} {:>12} {:>12}",
        "order", "ops", "build s", "solve s", "read s", "total s"
    );
    for order in [
        Order::FactFirst,
        Order::FactLast,
        Order::Star,
        Order::BatchLast,
    ] {
        for &k in &sizes {
            let t = chain(k, order).expect("the chain solves");
            println!(
                "{:<10} {:>8} {:>12.4} {:>12.4} {:>12.4} {:>12.4}",
                format!("{order:?}"),
                k,
                t.build.as_secs_f64(),
                t.solve.as_secs_f64(),
                t.read.as_secs_f64(),
                (t.build + t.solve + t.read).as_secs_f64()
            );
        }
    }
}
