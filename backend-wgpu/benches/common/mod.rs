//! What the wgpu benchmarks share: opening an adapter and timing two
//! sides in alternation.

use std::time::{Duration, Instant};

use backend_wgpu::{WgpuBackend, WgpuOptions};

/// A backend with `options`, or `None` (the benchmark is skipped, and
/// says so) without an adapter.
pub fn open(options: WgpuOptions) -> Option<WgpuBackend> {
    match WgpuBackend::with_options(options) {
        Ok(gpu) => Some(gpu),
        Err(e) => {
            eprintln!("no adapter, wgpu benchmarks skipped: {e}");
            None
        }
    }
}

/// Times `a` and `b` in alternation for `rounds` rounds and prints the
/// medians and the ratio of `a`'s to `b`'s.
pub fn paired(name: &str, rounds: usize, mut a: impl FnMut(), mut b: impl FnMut()) {
    let mut times = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let start = Instant::now();
        a();
        times.0.push(start.elapsed());
        let start = Instant::now();
        b();
        times.1.push(start.elapsed());
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (a, b) = (median(&mut times.0), median(&mut times.1));
    eprintln!(
        "{name}: medians of {rounds} alternating rounds {:.2} ms / {:.2} ms = {:.2}",
        a.as_secs_f64() * 1e3,
        b.as_secs_f64() * 1e3,
        a.as_secs_f64() / b.as_secs_f64()
    );
}
