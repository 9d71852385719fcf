//! Shared helpers for the cross-crate tests, public so other crates can
//! test their own operations the same way:
//!
//! - [`inference::infer`]: a program in the text language with every
//!   inferred shape (or its error), for inference tests written as programs
//!   with inline snapshots;
//! - [`render_inferred`]: a graph and its solved shapes as a small program
//!   with every inferred shape beside it (for snapshot tests);
//! - [`programs`]: random well-shaped programs with random data;
//! - [`kernels`]: random kernels, launches and data, below the graph level;
//! - [`differential`]: running one program on several backends and
//!   reporting the first element where they disagree;
//! - [`calls`]: vectorized calls of WGSL functions against Rust closures;
//! - [`gpu`]: opening the wgpu backend in a test, failing rather than
//!   skipping when `SHAPE_REQUIRE_GPU=1`;
//! - [`conformance`]: the backend conformance suite, which a backend runs
//!   with one call of [`backend_conformance!`];
//! - [`reference`](mod@reference): each operation's lowering against a plain Rust closure
//!   ([`reference::assert_op_matches`]), on random shapes its sampler
//!   draws, and the references of every built-in operation;
//! - [`wgsl`]: random WGSL functions batched into one module per pipeline,
//!   for checking the CPU interpreter of WGSL against wgpu.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod calls;
pub mod conformance;
pub mod differential;
pub mod gpu;
pub mod grammar;
/// Inference tests written as programs (moved to `shape_lang::inference`).
pub mod inference {
    pub use shape_lang::inference::*;
}
pub mod kernels;
pub mod programs;
pub mod reference;
pub mod strided;
pub mod wgsl;

/// `proptest`, for a dependent crate's own differential tests without a
/// dependency line of its own (`use shape_tests::proptest::prelude::*`).
pub use proptest;

use shape_graph::{Graph, GraphError, TensorKind};

/// Renders every tensor of `g`, in creation order, as a line of a small
/// program with its solved shape on the right, in the style of
/// rust-analyzer's type-inference tests.
pub fn render_inferred(g: &Graph) -> Result<String, GraphError> {
    let solved = g.solve()?;
    let mut lines = Vec::new();
    for t in g.tensor_ids() {
        let name = g.name(t)?;
        let lhs = match g.kind(t)? {
            TensorKind::Input => format!("input {name}"),
            TensorKind::Parameter => format!("param {name}"),
            TensorKind::Constant => format!("const {name}"),
            TensorKind::Result(op) => {
                let (operation, operands, _) = g.op(op).ok_or(GraphError::UnknownOp(op.index()))?;
                let args = operands
                    .iter()
                    .map(|&o| g.name(o))
                    .collect::<Result<Vec<_>, _>>()?;
                format!("{name} = {}({})", operation.name(), args.join(", "))
            }
        };
        lines.push((lhs, solved.shape(t)?.to_string()));
    }
    let width = lines.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    Ok(lines
        .into_iter()
        .map(|(l, s)| format!("{l:<width$}  : {s}\n"))
        .collect())
}
