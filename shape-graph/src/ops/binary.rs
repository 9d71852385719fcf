//! Pointwise functions of two tensors: `add`, `sub`, `mul`, `div`, `max`,
//! `min`, with numpy-style broadcasting in each of the three rows.

use std::sync::Arc;

use shape_core::kernel::{Accumulate, BinaryOp, Expr};
use shape_core::RowKind;

use crate::graph::GraphError;
use crate::lowering::{Lowered, LoweringCx};
use crate::operation::{ConstraintCx, Operation};
use crate::projections::ProjectionBuilder;
use crate::registry::{OpEntry, Operator};
use crate::sample::SampleCx;

/// A pointwise function of two values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BinaryFunction {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// The larger; a NaN operand yields the other (as `f32::max`).
    Max,
    /// The smaller; a NaN operand yields the other (as `f32::min`).
    Min,
}

impl BinaryFunction {
    /// Every function, in the order listings show them.
    pub const ALL: [BinaryFunction; 6] = [
        BinaryFunction::Add,
        BinaryFunction::Sub,
        BinaryFunction::Mul,
        BinaryFunction::Div,
        BinaryFunction::Max,
        BinaryFunction::Min,
    ];

    /// The name it is called by.
    pub fn name(self) -> &'static str {
        match self {
            BinaryFunction::Add => "add",
            BinaryFunction::Sub => "sub",
            BinaryFunction::Mul => "mul",
            BinaryFunction::Div => "div",
            BinaryFunction::Max => "max",
            BinaryFunction::Min => "min",
        }
    }

    /// The infix operator that writes it, if any.
    pub fn operator(self) -> Option<&'static str> {
        match self {
            BinaryFunction::Add => Some("+"),
            BinaryFunction::Sub => Some("-"),
            BinaryFunction::Mul => Some("*"),
            BinaryFunction::Div => Some("/"),
            BinaryFunction::Max | BinaryFunction::Min => None,
        }
    }

    fn scalar(self) -> BinaryOp {
        match self {
            BinaryFunction::Add => BinaryOp::Add,
            BinaryFunction::Sub => BinaryOp::Sub,
            BinaryFunction::Mul => BinaryOp::Mul,
            BinaryFunction::Div => BinaryOp::Div,
            BinaryFunction::Max => BinaryOp::Max,
            BinaryFunction::Min => BinaryOp::Min,
        }
    }

    /// The scalar computation of operands 0 and 1.
    pub fn body(self) -> Expr {
        Expr::Binary(
            self.scalar(),
            Box::new(Expr::Load(0)),
            Box::new(Expr::Load(1)),
        )
    }
}

/// A pointwise function of two tensors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Binary(pub BinaryFunction);

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
        cx.single_kernel(self.0.body(), Accumulate::Assign)
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("{}({})", self.0.name(), operands.join(", "))
    }

    fn pointwise(&self) -> bool {
        true
    }
}

/// The functions random programs draw (division is left out: dividing
/// by values near zero makes backends disagree beyond any tolerance).
const SAMPLED: [BinaryFunction; 4] = [
    BinaryFunction::Add,
    BinaryFunction::Mul,
    BinaryFunction::Sub,
    BinaryFunction::Max,
];

/// `t` with a new input that broadcasts to it, in either order.
fn sample(f: BinaryFunction, cx: &mut dyn SampleCx) -> Result<Option<crate::TensorId>, GraphError> {
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
    BinaryFunction::ALL
        .iter()
        .map(|&f| {
            let summary = match f {
                BinaryFunction::Add => "a + b",
                BinaryFunction::Sub => "a - b",
                BinaryFunction::Mul => "a * b",
                BinaryFunction::Div => "a / b",
                BinaryFunction::Max => "the larger of a and b",
                BinaryFunction::Min => "the smaller of a and b",
            };
            let mut entry = OpEntry::fixed(f.name(), summary, Arc::new(Binary(f)));
            if let Some(op) = f.operator() {
                entry = entry.with_operator(Operator::Infix(op));
            }
            if SAMPLED.contains(&f) {
                entry = entry.with_sampler(move |cx| sample(f, cx));
            }
            entry
        })
        .collect()
}
