//! Inference time of the program shapes that were once super-linear,
//! at N and 10N statements, through the whole command line (parsing,
//! solving, warnings and output): `cargo bench -p shapec --bench scaling`.
//!
//! Prints the median of a few runs for each size and the ratio of 10N to
//! N, which stays near 10 for a linear path (issue 25 asks for at most
//! 12). A bench binary rather than criterion: one run of the largest
//! program takes seconds, so a handful of runs says enough.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A chain of `n` valid 2-tap convolutions over the run-time size `b`.
fn convolution_chain(n: usize) -> String {
    let mut text = String::from("size b\ninput x: b\n");
    let mut prev = "x".to_string();
    for i in 0..n {
        text.push_str(&format!(
            "param w{i}: 2\nh{i} = einsum(\"o<+k;k=>o\", {prev}, w{i})\n"
        ));
        prev = format!("h{i}");
    }
    text
}

/// A chain of `n` 3-tap convolutions of stride 2 over `b` (at most 60: a
/// longer one needs sizes past 2^64).
fn strided_chain(n: usize) -> String {
    let mut text = String::from("size b\ninput x: b\n");
    let mut prev = "x".to_string();
    for i in 0..n {
        text.push_str(&format!(
            "param w{i}: 3\nh{i} = einsum(\"2*o<+t;t=>o\", {prev}, w{i})\n"
        ));
        prev = format!("h{i}");
    }
    text
}

/// `n` independent statements whose results end in a fixed index (each
/// draws a `fixed_index` warning).
fn fixed_indices(n: usize) -> String {
    let mut text = String::from("input x: 3, 4\n");
    for i in 0..n {
        text.push_str(&format!("y{i} = permute(\"a,b=>a,b,1\", x)\n"));
    }
    text
}

fn infer(path: &Path) -> Duration {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let file = path.to_str().expect("a UTF-8 path");
    let start = Instant::now();
    let status = shapec::cli::main_with(["shapec", "infer", file], &mut out, &mut err);
    let took = start.elapsed();
    assert_eq!(status, 0, "{}", String::from_utf8_lossy(&err));
    took
}

fn median(path: &Path, runs: usize) -> Duration {
    let mut times: Vec<Duration> = (0..runs).map(|_| infer(path)).collect();
    times.sort();
    times[runs / 2]
}

fn main() {
    // `cargo bench` passes `--bench`; a filter picks programs by name.
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let dir: PathBuf = std::env::temp_dir().join(format!("shapec-scaling-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    type Program = fn(usize) -> String;
    let cases: [(&str, Program, usize); 3] = [
        ("convolution_chain", convolution_chain, 1_600),
        ("strided_chain", strided_chain, 6),
        ("fixed_indices", fixed_indices, 20_000),
    ];
    println!(
        "{:<20} {:>8} {:>12} {:>8} {:>12} {:>7}",
        "program", "N", "time", "10N", "time", "ratio"
    );
    for (name, program, n) in cases {
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let mut times = Vec::new();
        for size in [n, 10 * n] {
            let path = dir.join(format!("{name}-{size}.shape"));
            std::fs::write(&path, program(size)).expect("the program is written");
            times.push(median(&path, 3));
        }
        println!(
            "{name:<20} {n:>8} {:>10.1}ms {:>8} {:>10.1}ms {:>7.2}",
            times[0].as_secs_f64() * 1e3,
            10 * n,
            times[1].as_secs_f64() * 1e3,
            times[1].as_secs_f64() / times[0].as_secs_f64()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
