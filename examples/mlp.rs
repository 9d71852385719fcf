//! Infers the parameter shapes of a three-layer MLP from its input and
//! output sizes, explains where two of the sizes came from, and shows the
//! error a mismatched input gets.
//!
//! `cargo run --example mlp`

use shape_core::RowKind;
use shape_solver::{Graph, GraphError};

fn main() -> Result<(), GraphError> {
    let mut g = Graph::new();
    // Only the data and two hidden sizes (on the biases) are given.
    let x = g.input("x", "32|784")?;
    let w1 = g.parameter("w1")?;
    let b1 = g.parameter_with_spec("b1", "256")?;
    let w2 = g.parameter("w2")?;
    let b2 = g.parameter_with_spec("b2", "64")?;
    let w3 = g.parameter("w3")?;

    let h1 = g.compose(w1, x)?;
    let h1 = g.add(h1, b1)?;
    let h1 = g.unary("relu", h1)?;
    let h2 = g.compose(w2, h1)?;
    let h2 = g.add(h2, b2)?;
    let h2 = g.unary("relu", h2)?;
    let y = g.compose(w3, h2)?;
    g.require(y, "32|->10")?;

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
    let z = g.input("z", "32|100")?;
    match g.compose(w1, z) {
        Ok(_) => println!("\nunexpectedly accepted"),
        Err(e) => println!("\nA mismatched input is rejected:\n  {e}"),
    }

    println!(
        "\nExecution (CPU reference and wgpu backends) is not built yet; this demo runs shape inference only."
    );
    Ok(())
}
