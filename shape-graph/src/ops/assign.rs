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

/// Assignment into a tensor that exists already (`d[...] <- s`, DyND's
/// `a[...] = b` on an initialized array): operand 0 is the destination,
/// which gives the result its shape (every row equal, a ragged one its
/// rows), and operand 1 the source, broadcast into it one way as in
/// [`Assign`]. Every element of the result is the source's; the
/// destination's values are not read.
///
/// ```
/// use std::sync::Arc;
/// use shape_graph::{ops::AssignExisting, Graph};
/// let mut g = Graph::new();
/// let d = g.input("d", "2, 3")?;
/// let s = g.input("s", "3")?;
/// let d2 = g.apply_named("d", Arc::new(AssignExisting), &[d, s])?;
/// let solved = g.solve()?;
/// assert_eq!(solved.shape(d2)?.to_string(), "|->2, 3");
/// # Ok::<(), shape_graph::GraphError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct AssignExisting;

impl Operation for AssignExisting {
    fn name(&self) -> &str {
        "assign"
    }

    fn arity(&self) -> usize {
        2
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        for kind in RowKind::ALL {
            cx.equal(RowSite::result(kind), RowSite::operand(0, kind));
            let (dest, source) = (RowSite::result(kind), RowSite::operand(1, kind));
            let why = cx.why_between(dest, source, Relation::Broadcasts);
            let c = Constraint::Assign {
                dest: cx.shape(0).row(kind).clone(),
                source: cx.shape(2).row(kind).clone(),
                why,
            };
            cx.add(c);
        }
    }

    fn project(&self, cx: &mut ProjectionBuilder<'_>) {
        for kind in RowKind::ALL {
            cx.equal_from(RowSite::result(kind), 0, RowSite::operand(0, kind));
            cx.broadcast(RowSite::result(kind), RowSite::operand(1, kind));
        }
    }

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        cx.single_kernel(Expr::Load(1), Accumulate::Assign)
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("assign({})", operands.join(", "))
    }

    fn pointwise(&self) -> bool {
        true
    }
}
