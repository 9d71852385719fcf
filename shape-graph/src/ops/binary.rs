//! Pointwise functions of two tensors: every binary function of the
//! scalar table (`add`, `sub`, `mul`, `div`, `max`, `min`, ...), with
//! numpy-style broadcasting in each of the three rows.

use std::sync::Arc;

use shape_core::kernel::{Accumulate, BinaryOp, Expr};
use shape_core::RowKind;

use crate::graph::GraphError;
use crate::lowering::{Lowered, LoweringCx};
use crate::operation::{ConstraintCx, Operation};
use crate::projections::ProjectionBuilder;
use crate::registry::{OpEntry, Operator};
use crate::sample::SampleCx;

/// A pointwise function of two values: a function of the scalar table
/// ([`shape_core::scalar`], where each is defined once).
#[deprecated(since = "0.1.0", note = "the scalar table's `shape_core::kernel::BinaryOp`")]
pub type BinaryFunction = BinaryOp;

/// A pointwise function of two tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Binary(pub BinaryOp);

impl Binary {
    /// The scalar computation of operands 0 and 1.
    pub fn body(self) -> Expr {
        Expr::Binary(self.0, Box::new(Expr::Load(0)), Box::new(Expr::Load(1)))
    }
}

impl Operation for Binary {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn arity(&self) -> usize {
        2
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        cx.broadcast_all();
    }

    fn project(&self, cx: &mut ProjectionBuilder<'_>) {
        cx.broadcast_all();
    }

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        cx.single_kernel(self.body(), Accumulate::Assign)
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("{}({})", self.0.name(), operands.join(", "))
    }

    fn pointwise(&self) -> bool {
        true
    }
}

/// `t` with a new input that broadcasts to it, in either order.
fn sample(f: BinaryOp, cx: &mut dyn SampleCx) -> Result<Option<crate::TensorId>, GraphError> {
    let t = cx.pick();
    let s = cx.shape(t)?;
    let (b, i, o) = (
        cx.broadcastable(&s.sizes(RowKind::Batch)),
        cx.broadcastable(&s.sizes(RowKind::Input)),
        cx.broadcastable(&s.sizes(RowKind::Output)),
    );
    let other = cx.input(&b, &i, &o)?;
    let operands = if cx.below(2) == 0 {
        [t, other]
    } else {
        [other, t]
    };
    cx.graph().apply(Arc::new(Binary(f)), &operands).map(Some)
}

pub(super) fn entries() -> Vec<OpEntry> {
    BinaryOp::ALL
        .iter()
        .map(|&f| {
            let mut entry = OpEntry::fixed(f.name(), f.summary(), Arc::new(Binary(f)));
            if let Some((symbol, precedence)) = f.infix_operator() {
                entry = entry.with_operator(Operator::Infix(symbol, precedence));
            }
            if f.sampled() {
                entry = entry.with_sampler(move |cx| sample(f, cx));
            }
            entry
        })
        .collect()
}
