//! Infers the parameter shapes of a three-layer MLP from its input and
//! output sizes, explains where two of the sizes came from, shows the error
//! a mismatched input gets, and runs a forward pass on the GPU (wgpu)
//! backend, checked against the CPU reference; where no GPU adapter
//! exists it says so and runs on the CPU.
//!
//! `cargo run --example mlp`

use std::collections::HashMap;

use backend_cpu::CpuBackend;
use backend_wgpu::WgpuBackend;
use shape_core::{Backend, RowKind};
use shape_solver::{Graph, GraphError, TensorId};

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
    let mut data = HashMap::new();
    for t in [x, w1, b1, w2, b2, w3] {
        data.insert(g.name(t)?.to_string(), values(&solved, t)?);
    }
    let mut cpu = CpuBackend::reference();
    let reference = solved.run(&mut cpu, &data, &[y], 0)?;
    let (backend, out) = match WgpuBackend::new() {
        Ok(mut gpu) => (gpu.name(), solved.run(&mut gpu, &data, &[y], 0)?),
        Err(e) => {
            println!("\nNo GPU adapter, so the forward pass runs on the CPU backend: {e}");
            (cpu.name(), reference.clone())
        }
    };
    println!("\nForward pass on {backend}: y ({}) =", solved.shape(y)?);
    for row in out[&y].chunks(3) {
        println!("  {row:?}");
    }
    let largest = out[&y]
        .iter()
        .zip(&reference[&y])
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    println!("Largest difference from the CPU reference: {largest:e}");
    Ok(())
}

/// Small deterministic values for a tensor, from its name and size.
fn values(solved: &shape_solver::SolvedGraph, t: TensorId) -> Result<Vec<f32>, GraphError> {
    let n = solved.shape(t)?.num_elems().unwrap_or(0) as usize;
    let seed = solved.graph().name(t)?.len();
    Ok((0..n)
        .map(|i| (((i * 7 + seed * 3) % 11) as f32 - 5.0) / 10.0)
        .collect())
}
