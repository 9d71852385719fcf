//! Infers the parameter shapes of a three-layer MLP from its input and
//! output sizes, explains where two of the sizes came from, shows the error
//! a mismatched input gets, and runs a forward pass on the GPU (wgpu)
//! backend, checked against the CPU reference; where no GPU adapter
//! exists it says so and runs on the CPU.
//!
//! `cargo run --example mlp`

use backend_cpu::CpuBackend;
use shape_core::RowKind;
use shape_examples::{inputs, output, run_on_gpu_or_cpu};
use shape_solver::{Graph, RunOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut g = Graph::new();
    // Only the data and two hidden sizes (on the biases) are given.
    let x = g.input("x", "4|8")?;
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
    g.require(y, "4|->3")?;

    let solved = g.solve()?;
    println!("Inferred shapes (batch|input->output):");
    for item in solved.iter() {
        let (_, name, shape) = item?;
        println!("  {name:>4}: {shape}");
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
    let z = what_if.input("z", "4|100")?;
    match what_if.compose(w1, z) {
        Ok(_) => println!("\nunexpectedly accepted"),
        Err(e) => println!("\nA mismatched input is rejected:\n  {e}"),
    }

    // A forward pass with deterministic data.
    let data = inputs(&solved, &[x, w1, b1, w2, b2, w3])?;
    let reference = solved.run(
        &mut CpuBackend::reference(),
        data.clone(),
        &[y],
        &RunOptions::default(),
    )?;
    let (backend, out) = run_on_gpu_or_cpu(&solved, data, &[y])?;
    println!("\nForward pass on {backend}: y ({}) =", solved.shape(y)?);
    for row in output(&out, y)?.chunks(3) {
        println!("  {row:?}");
    }
    let largest = output(&out, y)?
        .iter()
        .zip(output(&reference, y)?)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!("Largest difference from the CPU reference: {largest:e}");
    Ok(())
}
