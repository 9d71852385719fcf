//! Batch slice: drops the leftmost batch axis, taking the element at the
//! run's slice index along it.

use std::num::NonZeroU64;
use std::sync::Arc;

use shape_core::kernel::{Accumulate, Expr};
use shape_core::spec::SpecError;
use shape_core::{Dim, KnownDim};
use shape_core::RowKind::{Batch as B, Input as I, Output as O};

use crate::graph::GraphError;
use crate::lowering::{Lowered, LoweringCx};
use crate::operation::{ConstraintCx, Operation};
use shape_solver::RowSite;
use crate::projections::{AxisIndex, AxisSite, ProjectionBuilder};
use shape_solver::Constraint;
use crate::registry::{BuildArgs, OpEntry};
use crate::sample::SampleCx;

/// Drops the leftmost batch axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct BatchSlice;

impl Operation for BatchSlice {
    fn name(&self) -> &str {
        "batch_slice"
    }

    fn arity(&self) -> usize {
        1
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        cx.drop_first(
            RowSite::operand(0, B),
            RowSite::result(B),
            "to be the operand's batch row without its first axis".into(),
        );
        cx.equal(RowSite::result(I), RowSite::operand(0, I));
        cx.equal(RowSite::result(O), RowSite::operand(0, O));
    }

    fn project(&self, cx: &mut ProjectionBuilder<'_>) {
        let batch = RowSite::operand(0, B);
        if cx.row_len(batch) > 0 {
            cx.fix(AxisSite { row: batch, axis: 0 }, AxisIndex::Slice);
        }
        cx.equal_from(batch, 1, RowSite::result(B));
        cx.equal_from(RowSite::operand(0, I), 0, RowSite::result(I));
        cx.equal_from(RowSite::operand(0, O), 0, RowSite::result(O));
    }

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        let size = cx.shape(1).batch.first().map_or(0, |d| d.size());
        if cx.slice() >= size {
            return Err(GraphError::SliceOutOfRange {
                op: cx.op_arc(),
                index: cx.slice(),
                size,
            });
        }
        cx.single_kernel(Expr::Load(0), Accumulate::Assign)
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("batch_slice({})", operands.join(", "))
    }
}

/// A batch slice over a static range (OCANNL's batch slice by a static
/// symbol of known range): as [`BatchSlice`], and the axis it drops has
/// `range` elements, so the slice's range fixes the operand's leading
/// batch axis (`batch_slice_range("4", h)` in the text language).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BatchSliceRange {
    /// The number of elements of the axis the slice drops.
    pub range: NonZeroU64,
}

impl Operation for BatchSliceRange {
    fn name(&self) -> &str {
        "batch_slice_range"
    }

    fn arity(&self) -> usize {
        1
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        let what = format!(
            "to be the operand's batch row without its first axis, of the slice's range {}",
            self.range
        );
        let why = cx.why_row(RowSite::result(B), what.into());
        let (whole, rest) = (
            cx.shape(1).row(B).clone(),
            cx.shape(0).row(B).clone(),
        );
        cx.add(Constraint::DropFirst {
            whole,
            rest,
            first: Some(Dim::Known(KnownDim::new(self.range))),
            why,
        });
        cx.equal(RowSite::result(I), RowSite::operand(0, I));
        cx.equal(RowSite::result(O), RowSite::operand(0, O));
    }

    fn project(&self, cx: &mut ProjectionBuilder<'_>) {
        BatchSlice.project(cx)
    }

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        BatchSlice.lower(cx)
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("batch_slice_range(\"{}\", {})", self.range, operands.join(", "))
    }
}

fn build_range(args: &BuildArgs<'_>) -> Result<Arc<dyn Operation>, GraphError> {
    let text = args.spec.ok_or_else(|| GraphError::SpecExpected {
        function: args.name.to_string(),
    })?;
    let range = text
        .trim()
        .parse::<u64>()
        .ok()
        .and_then(NonZeroU64::new)
        .ok_or_else(|| GraphError::Spec {
            context: crate::graph::SpecContext::Call {
                function: Arc::from(args.name),
                spec: Arc::from(text),
            },
            source: Box::new(SpecError {
                spec: text.to_string(),
                span: 0..text.len(),
                expected: "the slice's range, a whole number of at least 1".into(),
                found: format!("`{text}`"),
            }),
        })?;
    Ok(Arc::new(BatchSliceRange { range }))
}

/// A slice of a tensor with batch axes, if one is drawn.
fn sample(cx: &mut dyn SampleCx) -> Result<Option<crate::TensorId>, GraphError> {
    let t = cx.pick();
    let Some(&size) = cx.shape(t)?.sizes(B).first() else {
        return Ok(None);
    };
    cx.slices_batch(size);
    cx.graph().apply(Arc::new(BatchSlice), &[t]).map(Some)
}

pub(super) fn entries() -> Vec<OpEntry> {
    vec![
        OpEntry::fixed(
            "batch_slice",
            "drops the leftmost batch axis, taking the run's slice index along it",
            Arc::new(BatchSlice),
        )
        .with_sampler(sample),
        OpEntry::new(
            "batch_slice_range",
            "a batch slice whose dropped axis has the range given (a static range)",
            1..=1,
            build_range,
        )
        .with_spec(),
    ]
}
