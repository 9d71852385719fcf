//! What an operation is: one type that says everything about it.
//!
//! An [`Operation`] gives its arity, the shape constraints it adds
//! ([`Operation::constrain`]), how its loop nest indexes its tensors
//! ([`Operation::project`]), the kernels that compute it
//! ([`Operation::lower`]) and how the text language writes it
//! ([`Operation::spell`]). The built-in operations live one per file in
//! `ops/`; other crates implement the trait for their own and apply them
//! with [`crate::Graph::apply`], or register them in a
//! [`crate::Registry`] so that they can be called by name.

use std::fmt;
use std::sync::Arc;

use shape_core::{Dim, DimVar, Row, RowKind, RowVar, Shape};

use crate::graph::GraphError;
use crate::lowering::{Lowered, LoweringCx};
use crate::projections::ProjectionBuilder;
use shape_solver::Constraint;
use shape_solver::Solver;
use shape_solver::{OpRef, Origin, Relation, RowSite, Why};

/// One kind of operation on tensors.
///
/// Positions: 0 is the result, `1..=arity` are the operands in order (a
/// [`RowSite`] names one row of one of them).
///
/// ```
/// use std::sync::Arc;
/// use shape_core::kernel::{Accumulate, BinaryOp, Expr};
/// use shape_graph::{ConstraintCx, Graph, Lowered, LoweringCx, Operation, ProjectionBuilder};
///
/// /// `max(x, floor)`, pointwise.
/// #[derive(Debug)]
/// struct AtLeast(f32);
///
/// impl Operation for AtLeast {
///     fn name(&self) -> &str { "at_least" }
///     fn arity(&self) -> usize { 1 }
///     fn constrain(&self, cx: &mut ConstraintCx<'_>) { cx.broadcast_all() }
///     fn project(&self, cx: &mut ProjectionBuilder<'_>) { cx.broadcast_all() }
///     fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, shape_graph::GraphError> {
///         let body = Expr::Binary(BinaryOp::Max, Box::new(Expr::Load(0)), Box::new(Expr::Const(self.0)));
///         cx.single_kernel(body, Accumulate::Assign)
///     }
///     fn spell(&self, operands: &[&str]) -> String {
///         format!("at_least({}, {})", operands.join(", "), self.0)
///     }
/// }
///
/// let mut g = Graph::new();
/// let x = g.input("x", "2|3")?;
/// let y = g.apply(Arc::new(AtLeast(0.5)), &[x])?;
/// assert_eq!(g.solve()?.shape(y)?.to_string(), "2|->3");
/// # Ok::<(), shape_graph::GraphError>(())
/// ```
pub trait Operation: fmt::Debug + Send + Sync + 'static {
    /// The name messages use: `add`, `compose`, `einsum "ij;jk=>ik"`.
    fn name(&self) -> &str;

    /// How many operands it takes.
    fn arity(&self) -> usize;

    /// Adds the constraints relating the result's rows to the operands'.
    /// The result starts with three open rows; constraints are solved
    /// together with everything else in the graph, in any order.
    fn constrain(&self, cx: &mut ConstraintCx<'_>);

    /// Relates the axes of the result and the operands for the loop nest
    /// of [`Operation::lower`]: axes tied together share an iterator.
    /// Runs on solved shapes, afresh for every operation, so sizes found
    /// equal elsewhere never share an iterator here.
    fn project(&self, cx: &mut ProjectionBuilder<'_>);

    /// The kernels that compute the result, with their launches.
    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError>;

    /// The call that writes this operation in the text language, given
    /// its operands' names: `relu(x)`, `compose(w, x)`,
    /// `einsum("ij;jk=>ik", a, b)`.
    fn spell(&self, operands: &[&str]) -> String;

    /// Whether the operation relates each row of its result to the same
    /// row of each operand by broadcasting and nothing else (an
    /// elementwise function). A parameter used only by such operations may
    /// keep an input row that nothing gives empty, as a bias does; any
    /// other use leaves that to the user. False unless an operation says so.
    fn pointwise(&self) -> bool {
        false
    }

    /// The part of the operation's spec that describes the tensor at
    /// `position` (0 the result, `i >= 1` operand `i - 1`), for size
    /// statements that capture one of its labels or row variables
    /// (`size d = j of y`). `None` for operations without a spec.
    fn spec_part(&self, _position: usize) -> Option<&shape_core::ShapeSpec> {
        None
    }
}

/// The shape constraints of one application of an [`Operation`].
pub struct ConstraintCx<'a> {
    pub(crate) solver: &'a mut Solver,
    pub(crate) op: Arc<OpRef>,
    pub(crate) shapes: &'a [&'a Shape],
}

impl ConstraintCx<'_> {
    /// The shape of the tensor at `position` (0: the result), variables
    /// included.
    pub fn shape(&self, position: usize) -> &Shape {
        self.shapes[position]
    }

    /// The number of operands.
    pub fn operands(&self) -> usize {
        self.shapes.len() - 1
    }

    /// The operation being applied, as messages name it.
    pub fn op(&self) -> &OpRef {
        &self.op
    }

    /// A new dimension variable.
    pub fn fresh_dim(&mut self) -> DimVar {
        self.solver.fresh_dim()
    }

    /// A new row variable.
    pub fn fresh_row(&mut self) -> RowVar {
        self.solver.fresh_row()
    }

    fn row(&self, site: RowSite) -> Row {
        self.shapes[site.position as usize].row(site.kind).clone()
    }

    /// The reason for a constraint between two rows of this operation.
    pub fn why_between(&mut self, left: RowSite, right: RowSite, relation: Relation) -> Why {
        let origin = Origin::Op {
            op: self.op.clone(),
            left,
            right,
            relation,
        };
        Why::of(self.solver.add_origin(origin))
    }

    /// The reason for a constraint on one row; `what` completes "which
    /// requires the ... row of `t` ...".
    pub fn why_row(&mut self, site: RowSite, what: Arc<str>) -> Why {
        let origin = Origin::OpRow {
            op: self.op.clone(),
            site,
            what,
        };
        Why::of(self.solver.add_origin(origin))
    }

    /// `left` broadcasts from `right`: `right` may have fewer axes and
    /// size-1 axes where `left` has larger ones.
    pub fn broadcast(&mut self, left: RowSite, right: RowSite) {
        let why = self.why_between(left, right, Relation::Broadcasts);
        let c = Constraint::RowIneq {
            cur: self.row(left),
            subr: self.row(right),
            why,
        };
        self.solver.push(c);
    }

    /// The two rows are equal.
    pub fn equal(&mut self, a: RowSite, b: RowSite) {
        let why = self.why_between(a, b, Relation::Equal);
        let c = Constraint::RowEq {
            a: self.row(a),
            b: self.row(b),
            why,
        };
        self.solver.push(c);
    }

    /// The row at `site` equals `row` (built from fresh variables, such as
    /// an einsum template); `what` says why, for messages.
    pub fn row_is(&mut self, site: RowSite, row: Row, what: Arc<str>) {
        let why = self.why_row(site, what);
        let c = Constraint::RowEq {
            a: self.row(site),
            b: row,
            why,
        };
        self.solver.push(c);
    }

    /// The row `before ++ ..var.. ++ after` for the row at `site`: axes
    /// before a row variable (a leading flank), which the solver holds as
    /// first-axis constraints added here; `what` says why, for messages.
    /// With `before` empty this is `Row::open(var, after)`.
    pub fn flanked_row(
        &mut self,
        site: RowSite,
        before: Vec<Dim>,
        var: RowVar,
        after: Vec<Dim>,
        what: Arc<str>,
    ) -> Row {
        let why = self.why_row(site, what);
        let mut constraints = Vec::new();
        let row = shape_solver::flank::flanked_row(
            before,
            var,
            after,
            || self.solver.fresh_row(),
            why,
            &mut constraints,
        );
        for c in constraints {
            self.solver.push(c);
        }
        row
    }

    /// `rest` is the row `whole` without its first (leftmost) axis.
    pub fn drop_first(&mut self, whole: RowSite, rest: RowSite, what: Arc<str>) {
        let why = self.why_row(rest, what);
        let c = Constraint::DropFirst {
            whole: self.row(whole),
            rest: self.row(rest),
            first: None,
            why,
        };
        self.solver.push(c);
    }

    /// Any other constraint, with a reason made by [`ConstraintCx::why_row`]
    /// or [`ConstraintCx::why_between`].
    pub fn add(&mut self, c: Constraint) {
        self.solver.push(c);
    }

    /// The pointwise rule: every row of the result broadcasts from the
    /// same row of every operand (numpy's broadcasting, per row kind).
    pub fn broadcast_all(&mut self) {
        // Row kind first: the order constraints are queued in decides which
        // of two conflicting facts reports a conflict.
        for kind in RowKind::ALL {
            for operand in 0..self.operands() {
                self.broadcast(RowSite::result(kind), RowSite::operand(operand, kind));
            }
        }
    }
}
