//! Transposition: swaps the input and output rows; batch axes are kept.

use std::sync::Arc;

use shape_core::kernel::{Accumulate, Expr};
use shape_core::RowKind::{Batch as B, Input as I, Output as O};

use crate::graph::GraphError;
use crate::lowering::{Lowered, LoweringCx};
use crate::operation::{ConstraintCx, Operation};
use shape_solver::RowSite;
use crate::projections::ProjectionBuilder;
use crate::registry::OpEntry;
use crate::sample::SampleCx;

/// Swaps the input and output rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Transpose;

/// The result's rows broadcast from the operand's, input and output swapped.
fn relations() -> [(RowSite, RowSite); 3] {
    [
        (RowSite::result(B), RowSite::operand(0, B)),
        (RowSite::result(I), RowSite::operand(0, O)),
        (RowSite::result(O), RowSite::operand(0, I)),
    ]
}

impl Operation for Transpose {
    fn name(&self) -> &str {
        "transpose"
    }

    fn arity(&self) -> usize {
        1
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        for (left, right) in relations() {
            cx.broadcast(left, right);
        }
    }

    fn project(&self, cx: &mut ProjectionBuilder<'_>) {
        for (left, right) in relations() {
            cx.broadcast(left, right);
        }
    }

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        cx.single_kernel(Expr::Load(0), Accumulate::Assign)
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("transpose({})", operands.join(", "))
    }
}

fn sample(cx: &mut dyn SampleCx) -> Result<Option<crate::TensorId>, GraphError> {
    let t = cx.pick();
    cx.graph().apply(Arc::new(Transpose), &[t]).map(Some)
}

pub(super) fn entries() -> Vec<OpEntry> {
    vec![OpEntry::fixed(
        "transpose",
        "swaps the input and output axes",
        Arc::new(Transpose),
    )
    .with_sampler(sample)]
}
