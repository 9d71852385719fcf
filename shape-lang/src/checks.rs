//! Checks made before a program runs, so that a run that cannot succeed
//! fails at once, with an error placed in the text: the batch index
//! `--slice` takes, the element count of constants, and the largest buffer
//! a backend allows.

use shape_core::spec::{AxisKind, ShapeSpec};
use shape_graph::{GraphError, SolvedGraph, TensorId, TensorKind};
use shape_run::{RunGraph, RunOptions, RunPlan};

use crate::compile::Compiled;
use crate::error::ProgramError;
use crate::syntax::Span;

/// The library's plan of a run of the program's results
/// ([`RunGraph::plan`]): which operations run, when buffers are freed,
/// and the run's peak memory. A `--slice` outside the batch axis that a
/// `batch_slice` takes fails here, placed at that `batch_slice`.
pub fn plan(
    compiled: &Compiled,
    solved: &SolvedGraph,
    options: &RunOptions,
) -> Result<RunPlan, ProgramError> {
    solved
        .plan(&compiled.results, options)
        .map_err(|e| match e {
            GraphError::SliceOutOfRange { op, index, size } => ProgramError::SliceOutOfRange {
                slice: index,
                size,
                result: op.result.name.to_string(),
                span: compiled.map.op_span(op.id),
            },
            other => compiled.map.locate(other, None),
        })
}

/// Fails when the sizes written in a constant's spec multiply to more
/// than the number of values written: the solver would report the product
/// clamped to 64 bits.
pub fn constant_fits(
    name: &str,
    spec: &str,
    values: usize,
    span: &Span,
) -> Result<(), ProgramError> {
    let Ok(parsed) = ShapeSpec::parse(spec) else {
        // The solver reports a malformed spec, placed in the text.
        return Ok(());
    };
    let mut product: Option<u128> = Some(1);
    for (_, axis) in parsed.axes() {
        if let AxisKind::Size(n) | AxisKind::LabeledSize(_, n) = &axis.kind {
            product = product.and_then(|p| p.checked_mul(*n as u128));
        }
    }
    // Products that fit in 64 bits are exact in the solver's own error.
    if product.is_some_and(|p| p <= u64::MAX as u128) {
        return Ok(());
    }
    let text = product.map_or("more than 2^128".to_string(), |p| p.to_string());
    Err(ProgramError::ConstantTooLarge {
        name: name.to_string(),
        spec: spec.to_string(),
        values,
        product: text,
        span: span.clone(),
    })
}

/// The bytes of one tensor's buffer (`f32`s); `None` past 2^128.
pub fn buffer_bytes(solved: &SolvedGraph, t: TensorId) -> Option<u128> {
    // A ragged tensor's length comes with its data.
    if solved.is_ragged(t).unwrap_or(false) {
        return Some(0);
    }
    solved.shape(t).ok()?.num_elems()?.checked_mul(4)
}

/// Fails when a tensor's buffer is larger than `max_bytes`, the most a
/// backend allocates; names the tensor and points at where it is made.
pub fn buffers_fit(
    compiled: &Compiled,
    solved: &SolvedGraph,
    max_bytes: u64,
    backend: &str,
) -> Result<(), ProgramError> {
    let g = &compiled.graph;
    for t in g.tensor_ids() {
        let bytes = buffer_bytes(solved, t);
        if bytes.is_some_and(|b| b <= max_bytes as u128) {
            continue;
        }
        let name = g.name(t).unwrap_or("?");
        let shape = solved.shape(t).map(|s| s.to_string()).unwrap_or_default();
        let (op, span) = match g.kind(t) {
            Ok(TensorKind::Result(op)) => (
                g.op(op)
                    .map(|(operation, _, _)| operation.name().to_string()),
                compiled.map.op_span(op.index()),
            ),
            _ => (None, compiled.map.tensor_span(t.index())),
        };
        let needs = bytes.map_or("more than 2^128".to_string(), |b| b.to_string());
        return Err(ProgramError::Run {
            message: format!(
                "`{name}` (shape {shape}) needs a buffer of {needs} bytes, more than the {max_bytes} bytes per buffer that {backend} allows"
            ),
            op,
            span,
        });
    }
    Ok(())
}
