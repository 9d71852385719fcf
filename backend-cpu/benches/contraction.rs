//! The CPU contraction against BLAS: 512^3 and 1024^3 matrix products on
//! one thread, bit-identical (the default) and with fused multiply-adds
//! (`CpuBackend::fast_math`), beside numpy's `@` (OpenBLAS's `sgemm` with
//! `OPENBLAS_NUM_THREADS=1`) and `einsum`, measured in the same run:
//! rounds alternate between the two, and each figure is a median.
//!
//! `cargo bench -p backend-cpu --bench contraction`
//!
//! numpy runs as a child process (`python3`, or `SHAPE_PYTHON`); without
//! it the BLAS columns say so and the rest still runs.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use backend_cpu::CpuBackend;
use shape_core::Backend;

/// numpy, timing one product per line it reads (`matmul N` or `einsum
/// N`) and answering with the seconds it took.
const NUMPY: &str = r#"
import sys, time
import numpy as np
mats = {}
for line in sys.stdin:
    op, n = line.split(); n = int(n)
    if n not in mats:
        rng = np.random.default_rng(1)
        mats[n] = (rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32))
    a, b = mats[n]
    t = time.perf_counter()
    if op == "matmul":
        a @ b
    else:
        np.einsum("ij,jk->ik", a, b)
    print(time.perf_counter() - t, flush=True)
"#;

struct Numpy {
    child: std::process::Child,
    out: BufReader<std::process::ChildStdout>,
}

impl Numpy {
    fn start() -> Option<Numpy> {
        let python = std::env::var("SHAPE_PYTHON").unwrap_or_else(|_| "python3".into());
        let mut child = Command::new(python)
            .args(["-c", NUMPY])
            .env("OPENBLAS_NUM_THREADS", "1")
            .env("OMP_NUM_THREADS", "1")
            .env("MKL_NUM_THREADS", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .ok()?;
        let out = BufReader::new(child.stdout.take()?);
        let mut np = Numpy { child, out };
        np.time("matmul", 8)?;
        Some(np)
    }

    fn time(&mut self, op: &str, n: usize) -> Option<Duration> {
        writeln!(self.child.stdin.as_mut()?, "{op} {n}").ok()?;
        let mut line = String::new();
        self.out.read_line(&mut line).ok()?;
        line.trim().parse::<f64>().ok().map(Duration::from_secs_f64)
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let mut numpy = Numpy::start();
    if numpy.is_none() {
        println!("numpy not found (python3 with numpy, or SHAPE_PYTHON): BLAS columns left out");
    }
    for (n, rounds) in [(512u64, 15), (1024, 5)] {
        let (kernel, launch) = shape_core::kernel::matmul(n, n, n);
        let len = (n * n) as usize;
        let a: Vec<f32> = (0..len).map(|i| (i % 97) as f32 * 0.01).collect();
        let b: Vec<f32> = (0..len).map(|i| (i % 89) as f32 * 0.02).collect();
        let mut out = vec![0.0f32; len];
        let mut exact = CpuBackend::coalesced().threads(1);
        let mut fused = CpuBackend::coalesced().threads(1).fast_math();
        let mut run = |backend: &mut CpuBackend| {
            let start = Instant::now();
            backend
                .execute(&kernel, &launch, &mut out, &[&a, &b])
                .expect("runs");
            start.elapsed()
        };
        run(&mut exact);
        run(&mut fused);
        let (mut te, mut tf, mut tm, mut ts) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for round in 0..rounds {
            te.push(run(&mut exact));
            tf.push(run(&mut fused));
            if let Some(np) = numpy.as_mut() {
                tm.extend(np.time("matmul", n as usize));
                // einsum is slow: every other round.
                if round % 2 == 0 {
                    ts.extend(np.time("einsum", n as usize));
                }
            }
        }
        let (e, f) = (median(te), median(tf));
        print!(
            "{n}^3, one thread, medians of {rounds} alternating rounds: bit-identical {:.2} ms, fast math {:.2} ms",
            ms(e),
            ms(f)
        );
        if !tm.is_empty() && !ts.is_empty() {
            let (m, s) = (median(tm), median(ts));
            print!(
                "; numpy @ (OpenBLAS, 1 thread) {:.2} ms, einsum {:.2} ms; bit-identical / OpenBLAS = {:.2}x, fast math / OpenBLAS = {:.2}x, bit-identical / einsum = {:.2}x",
                ms(m),
                ms(s),
                ms(e) / ms(m),
                ms(f) / ms(m),
                ms(e) / ms(s)
            );
        }
        println!();
    }
}
