//! Infers the parameter shapes of a three-layer MLP from its input and
//! output sizes, with the batch size `b` known only at run time, explains
//! where two of the sizes came from, shows the error a mismatched input
//! gets, and runs the one solved graph at three batch sizes on the GPU
//! (wgpu) backend, each checked against the CPU reference, with no new
//! solve and no new pipeline; where no GPU adapter exists it says so and
//! runs on the CPU.
//!
//! `cargo run --example mlp`

use backend_cpu::CpuBackend;
use shape_core::RowKind;
use shape_examples::{inputs, output, GpuOrCpu};
use shape_graph::Graph;
use shape_run::{RunGraph, RunOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut g = Graph::new();
    // Only the data and two hidden sizes (on the biases) are given; the
    // batch size is a run-time size.
    let b = g.run_time_size("b")?;
    let x = g.input("x", "b|8")?;
    let w1 = g.parameter("w1")?;
    let b1 = g.parameter_with_spec("b1", "16")?;
    let w2 = g.parameter("w2")?;
    let b2 = g.parameter_with_spec("b2", "12")?;
    let w3 = g.parameter("w3")?;

    let h1 = g.compose(w1, x)?;
    let h1 = g.add(h1, b1)?;
    let h1 = g.unary("relu", h1)?;
    let h2 = g.compose(w2, h1)?;
    let h2 = g.add(h2, b2)?;
    let h2 = g.unary("relu", h2)?;
    let y = g.compose(w3, h2)?;
    g.require(y, "b|->3")?;

    let solved = g.solve()?;
    println!("Inferred shapes (batch|input->output):");
    for t in g.tensor_ids() {
        println!("  {:>4}: {}", g.name(t)?, solved.symbolic_shape(t)?);
    }

    for (t, kind, axis) in [(w1, RowKind::Input, 0), (w3, RowKind::Output, 0)] {
        let why = solved.explain(t, kind, axis)?;
        println!(
            "\nWhy is {kind} axis {axis} of `{}` {}?\n  it comes from {}",
            g.name(t)?,
            why.value,
            why.source
        );
    }

    // A second input whose features do not fit w1.
    let mut what_if = g.clone();
    let z = what_if.input("z", "b|100")?;
    match what_if.compose(w1, z) {
        Ok(_) => println!("\nunexpectedly accepted"),
        Err(e) => println!("\nA mismatched input is rejected:\n  {e}"),
    }

    // One solved graph, three batch sizes: binding solves nothing, and the
    // GPU compiles its pipelines for the first size only.
    let mut backend = GpuOrCpu::new();
    if let GpuOrCpu::Cpu(_, why) = &backend {
        println!("\nNo GPU adapter, so this runs on the CPU backend: {why}");
    }
    let mut compiled = Vec::new();
    for n in [4, 32, 1000] {
        let at = solved.bind(&[(b, n)])?;
        let data = inputs(&at, &[x, w1, b1, w2, b2, w3])?;
        let reference = at.run(
            &mut CpuBackend::reference(),
            data.clone(),
            &[y],
            &RunOptions::default(),
        )?;
        let out = backend.run(&at, data, &[y])?;
        println!(
            "\nForward pass at b = {n} on {}: y ({})",
            backend.name(),
            at.shape(y)?
        );
        for row in output(&out, y)?.chunks(3).take(2) {
            println!("  {row:?}");
        }
        let largest = output(&out, y)?
            .iter()
            .zip(output(&reference, y)?)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        println!("  largest difference from the CPU reference: {largest:e}");
        compiled.extend(backend.pipelines_compiled());
    }
    println!("\nSolves: {}", g.solves());
    if let [first, .., last] = compiled[..] {
        println!(
            "Pipelines compiled: {first} for the first size, {} for the other two",
            last - first
        );
    }
    Ok(())
}
