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
    /// For a result nobody named (its name is a number, `t7`): the
    /// operation and operands that make it (`add(h, b1)`), which
    /// messages show after the name.
    pub definition: Option<Definition>,
}

/// What makes a result: its operation and its operands' names, shown as
/// `add(h, b1)` (as [`OpRef`] shows an operation). One allocation, the
/// names shared: a graph makes one for every result it names by number.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Definition(Arc<[Arc<str>]>);

impl Definition {
    /// The operation `op` of the operands named `operands`.
    pub fn new(op: Arc<str>, operands: impl IntoIterator<Item = Arc<str>>) -> Definition {
        Definition(std::iter::once(op).chain(operands).collect())
    }

    /// The operation's name.
    pub fn op(&self) -> &str {
        self.0.first().map_or("", |s| s)
    }

    /// The operands' names.
    pub fn operands(&self) -> impl Iterator<Item = &str> {
        self.0.iter().skip(1).map(|s| &**s)
    }

    /// The address of its names (the same for its clones).
    pub(crate) fn addr(&self) -> usize {
        Arc::as_ptr(&self.0).cast::<u8>() as usize
    }
}

impl fmt::Display for Definition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}(", self.op())?;
        for (i, o) in self.operands().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            f.write_str(o)?;
        }
        f.write_str(")")
    }
}

impl TensorRef {
    /// The tensor `id` called `name`.
    pub fn new(id: usize, name: Arc<str>) -> TensorRef {
        TensorRef {
            id,
            name,
            definition: None,
        }
    }

    /// This tensor, made by `definition` (see [`TensorRef::definition`]).
    pub fn with_definition(mut self, definition: Option<Definition>) -> TensorRef {
        self.definition = definition;
        self
    }
}

impl fmt::Display for TensorRef {
    /// `` `h` ``, or `` `t7` (add(h, b1)) `` for a result nobody named.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}`", self.name)?;
        match &self.definition {
            Some(d) => write!(f, " ({d})"),
            None => Ok(()),
        }
    }
}

/// One row of one of an operation's tensors; [`OpRef::tensor_at`] names
/// the tensor.
///
/// A position rather than the tensor itself: an operation records several
/// origins, and a copy of the tensor's name in each would make every origin
/// three times larger and cost a reference-count update per name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RowSite {
    /// The tensor's position in the operation: 0 is the result, `i >= 1`
    /// the operand `i - 1`.
    pub position: u32,
    /// Which of its rows.
    pub kind: RowKind,
}

impl RowSite {
    /// The row `kind` of an operation's result.
    pub fn result(kind: RowKind) -> RowSite {
        RowSite { position: 0, kind }
    }

    /// The row `kind` of an operation's operand `index` (from 0).
    pub fn operand(index: usize, kind: RowKind) -> RowSite {
        RowSite {
            // An operation has far fewer operands than `u32::MAX`: its
            // operand list is in memory.
            position: u32::try_from(index + 1).unwrap_or(u32::MAX),
            kind,
        }
    }
}

/// A [`RowSite`] with its operation, for messages.
struct SiteIn<'a>(&'a OpRef, RowSite);

impl fmt::Display for SiteIn<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the {} row of ", self.1.kind)?;
        match self.0.tensor_at(self.1.position) {
            // The operation's own result: the operation already says what
            // makes it.
            Some(t) if self.1.position == 0 => write!(f, "`{}`", t.name),
            Some(t) => write!(f, "{t}"),
            None => write!(f, "tensor #{} of the operation", self.1.position),
        }
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

impl OpRef {
    /// The tensor at a [`RowSite::position`]: 0 is the result, `i >= 1` the
    /// operand `i - 1`.
    pub fn tensor_at(&self, position: u32) -> Option<&TensorRef> {
        match position.checked_sub(1) {
            None => Some(&self.result),
            Some(i) => self.operands.get(i as usize),
        }
    }
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
    /// A size statement of the program (`size d = 64`, `size d = j of y`,
    /// `size d == e`): `shape_graph::Graph::set_size` and its kin.
    Size {
        /// The size it is about.
        name: Arc<str>,
        /// Its index among the graph's size statements, from 0.
        statement: usize,
        /// What it says, as written after the name (`= 64`).
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
    /// Whether this relates two operands' rows by broadcasting: the axes
    /// a product contracts (a matrix product's inner axes), which must be
    /// equal unless the second is 1.
    pub fn is_contraction(&self) -> bool {
        matches!(
            self,
            Origin::Op {
                left,
                right,
                relation: Relation::Broadcasts,
                ..
            } if left.position != 0 && right.position != 0
        )
    }

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
            Origin::Op {
                op, left, right, ..
            } => [left, right]
                .iter()
                .filter_map(|s| op.tensor_at(s.position))
                .collect(),
            Origin::OpRow { op, site, .. } => op.tensor_at(site.position).into_iter().collect(),
            Origin::Direct { .. } | Origin::Size { .. } | Origin::Finalization => vec![],
        }
    }
}

impl TensorRef {
    /// This reference with tensor `id` called `name` (and no definition:
    /// a name given replaces it), if it is that tensor.
    fn renamed(&self, id: usize, name: &Arc<str>) -> Option<TensorRef> {
        (self.id == id).then(|| TensorRef::new(id, name.clone()))
    }
}

impl OpRef {
    /// This operation with tensor `id` called `name`, if it names it.
    fn renamed(&self, id: usize, name: &Arc<str>) -> Option<OpRef> {
        let result = self.result.renamed(id, name);
        let operands: Vec<Option<TensorRef>> =
            self.operands.iter().map(|t| t.renamed(id, name)).collect();
        if result.is_none() && operands.iter().all(Option::is_none) {
            return None;
        }
        Some(OpRef {
            id: self.id,
            name: self.name.clone(),
            operands: (operands.into_iter().zip(&self.operands))
                .map(|(new, old)| new.unwrap_or_else(|| old.clone()))
                .collect(),
            result: result.unwrap_or_else(|| self.result.clone()),
        })
    }
}

impl Origin {
    /// This origin with tensor `id` called `name`, if it names it.
    pub fn renamed(&self, id: usize, name: &Arc<str>) -> Option<Origin> {
        let mut new = self.clone();
        match &mut new {
            Origin::Declared { tensor, .. }
            | Origin::ElementCount { tensor, .. }
            | Origin::Required { tensor, .. } => *tensor = tensor.renamed(id, name)?,
            Origin::Op { op, .. } | Origin::OpRow { op, .. } => {
                *op = Arc::new(op.renamed(id, name)?)
            }
            Origin::Size { .. } | Origin::Direct { .. } | Origin::Finalization => return None,
        }
        Some(new)
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
                let (left, right) = (SiteIn(op, *left), SiteIn(op, *right));
                write!(f, "{op}, which makes {left} {rel} {right}")
            }
            Origin::OpRow { op, site, what } => {
                write!(f, "{op}, which requires {} {what}", SiteIn(op, *site))
            }
            Origin::Direct { what } => write!(f, "the constraint {what}"),
            Origin::Size { name, what, .. } => write!(f, "the size statement `size {name} {what}`"),
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
///
/// Eight bytes: every solved dim and every queued constraint carries one
/// or two, so its size shows in how much of the solver state stays in
/// cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Why {
    /// The origin.
    pub origin: OriginId,
    /// The axis counted from the end of the row, or [`Why::NO_AXIS`].
    axis: u32,
}

impl Why {
    /// The `axis` of a reason for a whole row. Axis counts stay far below
    /// it: a row has fewer axes than fit in memory.
    const NO_AXIS: u32 = u32::MAX;

    /// A reason for a whole row (no particular axis).
    pub fn of(origin: OriginId) -> Why {
        Why {
            origin,
            axis: Self::NO_AXIS,
        }
    }

    /// The axis, counted from the end of the row, if the reason is about
    /// one axis.
    pub fn axis_from_end(self) -> Option<crate::AxisFromEnd> {
        (self.axis != Self::NO_AXIS).then_some(crate::AxisFromEnd::before_last(self.axis))
    }

    /// The axis in 16 bits ([`u16::MAX`] for none), for records that keep
    /// it so; `None` where it does not fit.
    pub(crate) fn packed_axis(self) -> Option<u16> {
        if self.axis == Self::NO_AXIS {
            return Some(u16::MAX);
        }
        u16::try_from(self.axis).ok().filter(|&a| a != u16::MAX)
    }

    /// The reason of `origin` with an axis from [`Why::packed_axis`].
    pub(crate) fn unpacked(origin: OriginId, axis: u16) -> Why {
        Why {
            origin,
            axis: if axis == u16::MAX {
                Self::NO_AXIS
            } else {
                axis.into()
            },
        }
    }

    /// This reason narrowed to one axis, counted from the end of the rows.
    /// A reason that already carries an offset (a row inequality stored
    /// after its last axes were matched) counts from there.
    pub fn at_axis(self, from_end: usize) -> Why {
        let base = self.axis_from_end().map_or(0, crate::AxisFromEnd::after);
        let axis = u32::try_from(from_end)
            .ok()
            .and_then(|a| base.checked_add(a))
            .filter(|&a| a != Self::NO_AXIS)
            .unwrap_or(Self::NO_AXIS - 1);
        Why {
            origin: self.origin,
            axis,
        }
    }
}
