//! Pointwise functions of one tensor: `id`, and every function of the
//! scalar table (`neg`, `exp`, `log`, `sqrt`, `relu`, `sigmoid`, ...). The
//! result broadcasts from the operand in all three rows.

use std::sync::Arc;

use shape_core::kernel::{Accumulate, Expr, UnaryOp};

use crate::graph::GraphError;
use crate::lowering::{Lowered, LoweringCx};
use crate::operation::{ConstraintCx, Operation};
use crate::projections::ProjectionBuilder;
use crate::registry::{OpEntry, Operator};
use crate::sample::SampleCx;

/// A pointwise function of one value: a copy, or a function of the
/// scalar table ([`shape_core::scalar`], where each is defined once).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnaryFunction {
    /// `x` (a copy).
    Id,
    /// A function of the scalar table.
    Op(UnaryOp),
}

impl UnaryFunction {
    /// Every function, in the order listings show them: the copy, then
    /// the scalar table's.
    pub fn all() -> impl Iterator<Item = UnaryFunction> {
        std::iter::once(UnaryFunction::Id).chain(UnaryOp::ALL.iter().map(|&op| UnaryFunction::Op(op)))
    }

    /// The name it is called by.
    pub fn name(self) -> &'static str {
        match self {
            UnaryFunction::Id => "id",
            UnaryFunction::Op(op) => op.name(),
        }
    }

    fn summary(self) -> &'static str {
        match self {
            UnaryFunction::Id => "a copy",
            UnaryFunction::Op(op) => op.summary(),
        }
    }

    /// The scalar computation of operand 0.
    pub fn body(self) -> Expr {
        match self {
            UnaryFunction::Id => Expr::Load(0),
            UnaryFunction::Op(op) => Expr::Unary(op, Box::new(Expr::Load(0))),
        }
    }

    /// Whether random programs may draw it: it keeps values finite enough
    /// for backends to agree within their tolerance.
    fn sampled(self) -> bool {
        match self {
            UnaryFunction::Id => true,
            UnaryFunction::Op(op) => op.keeps_values_finite(),
        }
    }
}

/// A pointwise function of one tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Unary(pub UnaryFunction);

impl Operation for Unary {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn arity(&self) -> usize {
        1
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        cx.broadcast_all();
    }

    fn project(&self, cx: &mut ProjectionBuilder<'_>) {
        cx.broadcast_all();
    }

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        cx.single_kernel(self.0.body(), Accumulate::Assign)
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("{}({})", self.0.name(), operands.join(", "))
    }

    fn pointwise(&self) -> bool {
        true
    }
}

fn sample(f: UnaryFunction, cx: &mut dyn SampleCx) -> Result<Option<crate::TensorId>, GraphError> {
    let t = cx.pick();
    cx.graph().apply(Arc::new(Unary(f)), &[t]).map(Some)
}

pub(super) fn entries() -> Vec<OpEntry> {
    UnaryFunction::all()
        .map(|f| {
            let mut entry = OpEntry::fixed(f.name(), f.summary(), Arc::new(Unary(f)));
            if let UnaryFunction::Op(op) = f {
                if let Some(prefix) = op.prefix_operator() {
                    entry = entry.with_operator(Operator::Prefix(prefix));
                }
            }
            if f.sampled() {
                entry = entry.with_sampler(move |cx| sample(f, cx));
            }
            entry
        })
        .collect()
}
