//! One self-attention head with a residual connection, built with the
//! Rust API: the same program as `examples/attention.shape`. Infers the
//! weights' shapes from the data and one head size, then runs a forward
//! pass on the GPU (wgpu) backend, or on the CPU where no GPU adapter
//! exists (saying so), and prints softmax rows with their sums.
//!
//! `cargo run --example attention`
//! (the text version: `cargo run -p shapec -- run examples/attention.shape`)

use shape_examples::{inputs, output, run_on_gpu_or_cpu};
use shape_graph::Graph;
use shape_run::HostTensor;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut g = Graph::new();
    // A batch of 2 sequences of 5 tokens with 8 features each.
    let x = g.input("x", "2|5,8")?;
    // Head size 4; `_` leaves the feature size to inference.
    let wq = g.parameter_with_spec("wq", "_,4")?;
    let wk = g.parameter_with_spec("wk", "_,4")?;
    let wv = g.parameter_with_spec("wv", "_,4")?;
    // Inferred entirely, from the residual connection.
    let wo = g.parameter("wo")?;
    let half = g.constant("half", "1", 1)?;

    // `...` is the batch row; `|de` says the weights have no batch axes.
    let project = "...|td;|de=>...|te";
    let q = g.einsum(project, &[x, wq])?;
    let k = g.einsum(project, &[x, wk])?;
    let v = g.einsum(project, &[x, wv])?;
    let scores = g.einsum("...|te;...|ue=>...|tu", &[q, k])?;
    let scores = g.mul(scores, half)?; // 1/sqrt(4)
    let p = g.unary("exp", scores)?;
    let z = g.permute("...|t,u=>...|t,one:1", p)?; // row sums, as a column
    let attn = g.binary("div", p, z)?; // softmax
    let o = g.einsum("...|tu;...|ue=>...|te", &[attn, v])?;
    let out = g.einsum("...|te;|ef=>...|tf", &[o, wo])?;
    let y = g.add(x, out)?;

    let solved = g.solve()?;
    println!("Inferred shapes (batch|input->output):");
    for (t, name) in [(wq, "wq"), (wo, "wo"), (attn, "attn"), (y, "y")] {
        println!("  {name:>4}: {}", solved.shape(t)?);
    }

    let mut data = inputs(&solved, &[x, wq, wk, wv, wo])?;
    data.insert(half, HostTensor::new(vec![1], vec![0.5])?);
    let (backend, out) = run_on_gpu_or_cpu(&solved, data, &[attn, y])?;
    println!("\nForward pass on {backend}:");
    for (i, row) in output(&out, attn)?.chunks(5).take(2).enumerate() {
        let sum: f32 = row.iter().sum();
        println!("  attn row {i}: {row:.3?} (sums to {sum:.4})");
    }
    println!("  y[0, 0, ..] = {:.3?}", &output(&out, y)?[..8]);
    Ok(())
}
