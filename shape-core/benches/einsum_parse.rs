//! How parsing an einsum spec grows with its number of labels: permutes
//! (`"a0, a1, ...=>a1, a0, ..."`) of 4,000 and 64,000 labels, parsed in
//! alternation so that whatever else the machine does falls on both sizes
//! alike.
//!
//! `cargo bench -p shape-core --bench einsum_parse [-- ROUNDS]`
//!
//! Prints the median and fastest round per size and the ratio
//! t(64,000) / t(4,000). Linear growth gives about 16; the quadratic
//! checks this bench was written against gave about 256.

use std::time::{Duration, Instant};

use shape_core::spec::EinsumSpec;

const SIZES: [usize; 2] = [4_000, 64_000];

/// A permute of `n` labels: the operand lists them in order, the result
/// swaps neighbours.
fn permute_spec(n: usize) -> String {
    let labels: Vec<String> = (0..n).map(|i| format!("a{i}")).collect();
    let mut swapped = labels.clone();
    for pair in swapped.chunks_mut(2) {
        pair.reverse();
    }
    format!("{}=>{}", labels.join(", "), swapped.join(", "))
}

fn one_round(text: &str, n: usize) -> Duration {
    let start = Instant::now();
    let spec = EinsumSpec::parse(text).expect("the spec is well-formed");
    let took = start.elapsed();
    assert_eq!(spec.result.output.axes.len(), n);
    assert!(spec.reduced_labels().is_empty());
    took
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(9);
    let texts: Vec<String> = SIZES.iter().map(|&n| permute_spec(n)).collect();
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); SIZES.len()];
    for _ in 0..rounds {
        for (i, &n) in SIZES.iter().enumerate() {
            times[i].push(one_round(&texts[i], n));
        }
    }
    let mut medians = Vec::new();
    for (i, &n) in SIZES.iter().enumerate() {
        times[i].sort();
        let median = times[i][times[i].len() / 2];
        medians.push(median);
        println!(
            "einsum_parse/{n} labels: median {:?}, fastest {:?}",
            median, times[i][0]
        );
    }
    let ratio = medians[1].as_secs_f64() / medians[0].as_secs_f64();
    println!(
        "ratio t({}) / t({}) = {ratio:.1} (linear: {})",
        SIZES[1],
        SIZES[0],
        SIZES[1] / SIZES[0]
    );
}
