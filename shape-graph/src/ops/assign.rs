//! Assignment into a declared shape (`d: 2, 3 <- s`): a copy whose source
//! broadcasts into the destination one way only, as DyND's assignment
//! kernels do. Unlike a pointwise function (`id`), whose result is "as
//! large as its uses allow" and so can widen its operand, the destination
//! never sizes its source (see [`Constraint::Assign`]).

use shape_core::kernel::{Accumulate, Expr};
use shape_core::RowKind;

use crate::graph::GraphError;
use crate::lowering::{Lowered, LoweringCx};
use crate::operation::{ConstraintCx, Operation};
use crate::projections::ProjectionBuilder;
use shape_solver::Constraint;
use shape_solver::{Relation, RowSite};

/// The copy of an assignment: operand 0 broadcast into the result, whose
/// shape the program declares (a requirement on it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Assign;

impl Operation for Assign {
    /// Shown as the copy it is (`d = id(s)`), as before the one-way rule.
    fn name(&self) -> &str {
        "id"
    }

    fn arity(&self) -> usize {
        1
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        for kind in RowKind::ALL {
            let (dest, source) = (RowSite::result(kind), RowSite::operand(0, kind));
            let why = cx.why_between(dest, source, Relation::Broadcasts);
            let c = Constraint::Assign {
                dest: cx.shape(0).row(kind).clone(),
                source: cx.shape(1).row(kind).clone(),
                why,
            };
            cx.add(c);
        }
    }

    fn project(&self, cx: &mut ProjectionBuilder<'_>) {
        cx.broadcast_all();
    }

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        cx.single_kernel(Expr::Load(0), Accumulate::Assign)
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("id({})", operands.join(", "))
    }

    fn pointwise(&self) -> bool {
        true
    }
}
