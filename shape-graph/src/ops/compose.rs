//! Composition `a @ b`: `b`'s outputs feed `a`'s inputs, as in a matrix
//! product or `fun x -> a(b(x))`; batch axes broadcast.

use std::sync::Arc;

use shape_core::kernel::{Accumulate, BinaryOp, Expr};
use shape_core::RowKind::{Batch as B, Input as I, Output as O};

use crate::graph::GraphError;
use crate::lowering::{Lowered, LoweringCx};
use crate::operation::{ConstraintCx, Operation};
use shape_solver::RowSite;
use crate::projections::ProjectionBuilder;
use crate::registry::{OpEntry, Operator, Precedence};
use crate::sample::SampleCx;

/// `a @ b`: contracts `a`'s input row with `b`'s output row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Compose;

/// The rows a composition relates: `left` broadcasts from `right`, the
/// operator's input row from the operand's output row first.
const RELATIONS: [(RowSite, RowSite); 5] = [
    (op(0, I), op(1, O)),
    (res(B), op(0, B)),
    (res(B), op(1, B)),
    (res(I), op(1, I)),
    (res(O), op(0, O)),
];

const fn res(kind: shape_core::RowKind) -> RowSite {
    RowSite { position: 0, kind }
}

const fn op(index: u32, kind: shape_core::RowKind) -> RowSite {
    RowSite {
        position: index + 1,
        kind,
    }
}

impl Operation for Compose {
    fn name(&self) -> &str {
        "compose"
    }

    fn arity(&self) -> usize {
        2
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        for (left, right) in RELATIONS {
            cx.broadcast(left, right);
        }
    }

    fn project(&self, cx: &mut ProjectionBuilder<'_>) {
        for (left, right) in RELATIONS {
            cx.broadcast(left, right);
        }
    }

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        let product = Expr::Binary(
            BinaryOp::Mul,
            Box::new(Expr::Load(0)),
            Box::new(Expr::Load(1)),
        );
        cx.single_kernel(product, Accumulate::Add)
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("compose({})", operands.join(", "))
    }
}

/// `w @ t` with a new matrix `w` that consumes `t`'s outputs.
fn sample(cx: &mut dyn SampleCx) -> Result<Option<crate::TensorId>, GraphError> {
    let t = cx.pick();
    let outputs = cx.shape(t)?.sizes(O);
    let k = 1 + cx.below(3);
    let w = cx.input(&[], &outputs, &[k])?;
    cx.graph().apply(Arc::new(Compose), &[w, t]).map(Some)
}

pub(super) fn entries() -> Vec<OpEntry> {
    vec![OpEntry::fixed(
        "compose",
        "a @ b: b's outputs feed a's inputs (a matrix product)",
        Arc::new(Compose),
    )
    .with_operator(Operator::Infix("@", Precedence::PRODUCT))
    .with_sampler(sample)]
}
