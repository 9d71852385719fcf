//! Pointwise functions of one tensor: `id`, `neg`, `exp`, `log`, `sqrt`,
//! `relu`. The result broadcasts from the operand in all three rows.

use std::sync::Arc;

use shape_core::kernel::{Accumulate, Expr, UnaryOp};

use crate::graph::GraphError;
use crate::lowering::{Lowered, LoweringCx};
use crate::operation::{ConstraintCx, Operation};
use crate::projections::ProjectionBuilder;
use crate::registry::{OpEntry, Operator};
use crate::sample::SampleCx;

/// A pointwise function of one value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum UnaryFunction {
    /// `x` (a copy).
    Id,
    /// `-x`.
    Neg,
    /// `e^x`.
    Exp,
    /// The natural logarithm.
    Log,
    /// The square root.
    Sqrt,
    /// `max(x, 0)`.
    Relu,
}

impl UnaryFunction {
    /// Every function, in the order listings show them.
    pub const ALL: [UnaryFunction; 6] = [
        UnaryFunction::Id,
        UnaryFunction::Neg,
        UnaryFunction::Exp,
        UnaryFunction::Log,
        UnaryFunction::Sqrt,
        UnaryFunction::Relu,
    ];

    /// The name it is called by.
    pub fn name(self) -> &'static str {
        match self {
            UnaryFunction::Id => "id",
            UnaryFunction::Neg => "neg",
            UnaryFunction::Exp => "exp",
            UnaryFunction::Log => "log",
            UnaryFunction::Sqrt => "sqrt",
            UnaryFunction::Relu => "relu",
        }
    }

    fn summary(self) -> &'static str {
        match self {
            UnaryFunction::Id => "a copy",
            UnaryFunction::Neg => "-x",
            UnaryFunction::Exp => "e to the power x",
            UnaryFunction::Log => "the natural logarithm",
            UnaryFunction::Sqrt => "the square root",
            UnaryFunction::Relu => "max(x, 0)",
        }
    }

    /// The scalar computation of operand 0.
    pub fn body(self) -> Expr {
        let x = Box::new(Expr::Load(0));
        match self {
            UnaryFunction::Id => Expr::Load(0),
            UnaryFunction::Neg => Expr::Unary(UnaryOp::Neg, x),
            UnaryFunction::Exp => Expr::Unary(UnaryOp::Exp, x),
            UnaryFunction::Log => Expr::Unary(UnaryOp::Log, x),
            UnaryFunction::Sqrt => Expr::Unary(UnaryOp::Sqrt, x),
            UnaryFunction::Relu => Expr::Unary(UnaryOp::Relu, x),
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

/// The functions random programs draw: ones that keep values finite
/// enough for backends to agree within their tolerance.
const SAMPLED: [UnaryFunction; 4] = [
    UnaryFunction::Relu,
    UnaryFunction::Neg,
    UnaryFunction::Exp,
    UnaryFunction::Id,
];

fn sample(f: UnaryFunction, cx: &mut dyn SampleCx) -> Result<Option<crate::TensorId>, GraphError> {
    let t = cx.pick();
    cx.graph().apply(Arc::new(Unary(f)), &[t]).map(Some)
}

pub(super) fn entries() -> Vec<OpEntry> {
    UnaryFunction::ALL
        .iter()
        .map(|&f| {
            let mut entry = OpEntry::fixed(f.name(), f.summary(), Arc::new(Unary(f)));
            if f == UnaryFunction::Neg {
                entry = entry.with_operator(Operator::Prefix("-"));
            }
            if SAMPLED.contains(&f) {
                entry = entry.with_sampler(move |cx| sample(f, cx));
            }
            entry
        })
        .collect()
}
