//! Where constraints come from: operations, declarations and finalization.
//!
//! Every constraint carries a [`Why`], so a solved dimension can say which
//! operation and tensor fixed it, and an error can say where each of two
//! conflicting facts came from.

use std::fmt;
use std::sync::Arc;

use shape_core::RowKind;

/// A tensor as named in messages.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TensorRef {
    /// The tensor's index in its graph.
    pub id: usize,
    /// The tensor's name.
    pub name: Arc<str>,
}

impl fmt::Display for TensorRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", self.name)
    }
}

/// One row of one tensor.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RowSite {
    /// The tensor.
    pub tensor: TensorRef,
    /// Which of its rows.
    pub kind: RowKind,
}

impl fmt::Display for RowSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the {} row of {}", self.kind, self.tensor)
    }
}

/// An operation as named in messages.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OpRef {
    /// The operation's index in its graph.
    pub id: usize,
    /// What it does: `compose`, `add`, `einsum "ij;jk=>ik"`, ...
    pub name: Arc<str>,
    /// Its operands.
    pub operands: Vec<TensorRef>,
    /// Its result.
    pub result: TensorRef,
}

impl fmt::Display for OpRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let args: Vec<String> = self.operands.iter().map(|t| t.name.to_string()).collect();
        write!(
            f,
            "`{} = {}({})` (op #{})",
            self.result.name,
            self.name,
            args.join(", "),
            self.id
        )
    }
}

/// How two rows are related by a constraint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Relation {
    /// The rows are equal.
    Equal,
    /// The left row broadcasts from the right one (`cur >= subr`).
    Broadcasts,
}

/// The source of a constraint.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Origin {
    /// A tensor's declared shape.
    Declared {
        /// The tensor.
        tensor: TensorRef,
        /// Its row.
        kind: RowKind,
        /// The spec text it was declared with.
        spec: Arc<str>,
    },
    /// The element count of a constant.
    ElementCount {
        /// The constant.
        tensor: TensorRef,
        /// The spec text it was declared with.
        spec: Arc<str>,
        /// Its number of elements.
        num_elems: u64,
    },
    /// A shape the user required of a tensor after creating it.
    Required {
        /// The tensor.
        tensor: TensorRef,
        /// Its row.
        kind: RowKind,
        /// The spec text.
        spec: Arc<str>,
    },
    /// A relation an operation imposes between two rows.
    Op {
        /// The operation.
        op: Arc<OpRef>,
        /// The left row (the result side, `cur` for broadcasting).
        left: RowSite,
        /// The right row (the operand side, `subr` for broadcasting).
        right: RowSite,
        /// Equality or broadcasting.
        relation: Relation,
    },
    /// A constraint an operation imposes on one row.
    OpRow {
        /// The operation.
        op: Arc<OpRef>,
        /// The row.
        site: RowSite,
        /// What the constraint says.
        what: Arc<str>,
    },
    /// A constraint added directly through the solver API.
    Direct {
        /// The caller's description.
        what: Arc<str>,
    },
    /// Finalization's default: a variable closed to its least upper bound,
    /// to 1, or to no axes.
    Finalization,
}

impl Origin {
    /// The operation behind this origin, if any.
    pub fn op(&self) -> Option<&OpRef> {
        match self {
            Origin::Op { op, .. } | Origin::OpRow { op, .. } => Some(op),
            _ => None,
        }
    }

    /// The tensors this origin names.
    pub fn tensors(&self) -> Vec<&TensorRef> {
        match self {
            Origin::Declared { tensor, .. }
            | Origin::Required { tensor, .. }
            | Origin::ElementCount { tensor, .. } => {
                vec![tensor]
            }
            Origin::Op { left, right, .. } => vec![&left.tensor, &right.tensor],
            Origin::OpRow { site, .. } => vec![&site.tensor],
            Origin::Direct { .. } | Origin::Finalization => vec![],
        }
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Declared { tensor, kind, spec } => {
                write!(f, "the declared shape \"{spec}\" of {tensor} ({kind} row)")
            }
            Origin::ElementCount {
                tensor,
                spec,
                num_elems,
            } => {
                write!(
                    f,
                    "the {num_elems} elements of {tensor} declared as \"{spec}\""
                )
            }
            Origin::Required { tensor, kind, spec } => {
                write!(f, "the required shape \"{spec}\" of {tensor} ({kind} row)")
            }
            Origin::Op {
                op,
                left,
                right,
                relation,
            } => {
                let rel = match relation {
                    Relation::Equal => "equal to",
                    Relation::Broadcasts => "broadcast from",
                };
                write!(f, "{op}, which makes {left} {rel} {right}")
            }
            Origin::OpRow { op, site, what } => write!(f, "{op}, which requires {site} {what}"),
            Origin::Direct { what } => write!(f, "the constraint {what}"),
            Origin::Finalization => f.write_str("finalization's default"),
        }
    }
}

/// Index of an [`Origin`] in a solver's origin table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OriginId(pub(crate) u32);

/// Why a constraint holds: its origin and, for dimension constraints
/// derived from rows, the axis counted from the end of the row (0 is the
/// last axis).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Why {
    /// The origin.
    pub origin: OriginId,
    /// The axis, counted from the end of the row.
    pub axis_from_end: Option<u32>,
}

impl Why {
    /// A reason for a whole row (no particular axis).
    pub fn of(origin: OriginId) -> Why {
        Why {
            origin,
            axis_from_end: None,
        }
    }

    /// This reason narrowed to one axis, counted from the end of the rows.
    /// A reason that already carries an offset (a row inequality stored
    /// after its last axes were matched) counts from there.
    pub fn at_axis(self, from_end: usize) -> Why {
        Why {
            origin: self.origin,
            axis_from_end: Some(self.axis_from_end.unwrap_or(0) + from_end as u32),
        }
    }
}
