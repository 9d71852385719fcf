//! The graph API: tensors, operations, solving, reading shapes back.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::num::NonZeroU64;
use std::sync::{Arc, OnceLock};

use imbl::Vector;
use rustc_hash::{FxHashMap, FxHashSet};

use shape_core::chunks::ChunkVec;
use shape_core::spec::{ShapeSpec, SpecError};
use shape_core::{
    Dim, DimVar, KnownDim, Row, RowConstraint, RowKind, RowTail, RowVar, Shape, SolvedShape,
};

use crate::operation::{ConstraintCx, Operation};
use crate::ops::{self, terminal};
use crate::registry::{BuildArgs, Registry};
use shape_solver::Constraint;
use shape_solver::ShapeError;
use shape_solver::Solver;
use shape_solver::{Definition, OpRef, Origin, TensorRef};
use shape_solver::{Provenance, RowDefaults, Solution};

/// A tensor in a [`Graph`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TensorId(pub(crate) usize);

impl TensorId {
    /// The tensor's index in its graph (creation order).
    pub fn index(self) -> usize {
        self.0
    }
}

/// An operation in a [`Graph`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub(crate) usize);

impl OpId {
    /// The operation's index in its graph (creation order).
    pub fn index(self) -> usize {
        self.0
    }
}

/// How a tensor came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// Data supplied by the user, with a declared (partial) shape.
    Input,
    /// A learned value whose shape is inferred from its uses.
    Parameter,
    /// A constant with a declared shape or element count.
    Constant,
    /// The result of an operation.
    Result(OpId),
}

/// A tensor's record: 56 bytes for a result or a parameter without a spec
/// (its shape is three row variables, or none for a parameter's batch
/// row, its kind the operation that made it), a box for the rest.
#[derive(Clone, Debug)]
pub(crate) struct Tensor {
    pub(crate) name: Arc<str>,
    /// For a result named by number: its operation and operands
    /// (`add(h, b1)`), for messages (see [`TensorRef::definition`]).
    definition: Option<Definition>,
    body: TensorBody,
}

#[derive(Clone, Debug)]
enum TensorBody {
    /// A result of operation `op` (a parameter where `op` is
    /// [`BARE_NONE`]) whose rows (batch, input, output) are open rows of
    /// these variables with no dims, or empty closed rows where a variable
    /// is [`BARE_NONE`]: what [`Graph::apply`] and [`Graph::parameter`]
    /// make.
    Bare { op: u32, rows: [u32; 3] },
    /// Anything else.
    Declared(Box<Declared>),
}

#[derive(Clone, Debug)]
struct Declared {
    kind: TensorKind,
    shape: Shape,
    /// The spec it was declared with, for size statements that capture a
    /// name of it.
    spec: Option<Arc<ShapeSpec>>,
}

/// No operation (a parameter) or no row variable (an empty closed row) in
/// [`TensorBody::Bare`].
const BARE_NONE: u32 = u32::MAX;

/// A row with no dims and no constraint: its row variable if open,
/// [`BARE_NONE`] if closed.
fn bare_row(row: &Row) -> Option<u32> {
    if !row.dims.is_empty() || row.constraint != RowConstraint::Unconstrained {
        return None;
    }
    match row.tail {
        RowTail::Open(RowVar(v)) => (v != BARE_NONE).then_some(v),
        RowTail::Closed => Some(BARE_NONE),
    }
}

fn unbare_row(v: u32) -> Row {
    if v == BARE_NONE {
        Row::empty()
    } else {
        Row::open(RowVar(v), Vec::new())
    }
}

impl Tensor {
    fn new(
        name: Arc<str>,
        definition: Option<Definition>,
        kind: TensorKind,
        shape: Shape,
        spec: Option<Arc<ShapeSpec>>,
    ) -> Tensor {
        let op = match kind {
            _ if spec.is_some() => None,
            TensorKind::Result(op) => u32::try_from(op.0).ok().filter(|&op| op != BARE_NONE),
            TensorKind::Parameter => Some(BARE_NONE),
            _ => None,
        };
        let compact = op.and_then(|op| {
            Some(TensorBody::Bare {
                op,
                rows: [
                    bare_row(&shape.batch)?,
                    bare_row(&shape.input)?,
                    bare_row(&shape.output)?,
                ],
            })
        });
        let body = compact
            .unwrap_or_else(|| TensorBody::Declared(Box::new(Declared { kind, shape, spec })));
        Tensor {
            name,
            definition,
            body,
        }
    }

    pub(crate) fn kind(&self) -> TensorKind {
        match &self.body {
            TensorBody::Bare { op: BARE_NONE, .. } => TensorKind::Parameter,
            TensorBody::Bare { op, .. } => TensorKind::Result(OpId(*op as usize)),
            TensorBody::Declared(d) => d.kind,
        }
    }

    /// Its rows, unresolved: the variables the solver knows it by.
    pub(crate) fn shape(&self) -> Cow<'_, Shape> {
        match &self.body {
            TensorBody::Bare { rows, .. } => Cow::Owned(Shape {
                batch: unbare_row(rows[0]),
                input: unbare_row(rows[1]),
                output: unbare_row(rows[2]),
            }),
            TensorBody::Declared(d) => Cow::Borrowed(&d.shape),
        }
    }

    /// One of its rows, unresolved.
    pub(crate) fn row(&self, kind: RowKind) -> Cow<'_, Row> {
        match &self.body {
            TensorBody::Bare { rows, .. } => {
                let i = match kind {
                    RowKind::Batch => 0,
                    RowKind::Input => 1,
                    RowKind::Output => 2,
                };
                Cow::Owned(unbare_row(rows[i]))
            }
            TensorBody::Declared(d) => Cow::Borrowed(d.shape.row(kind)),
        }
    }

    fn spec(&self) -> Option<&Arc<ShapeSpec>> {
        match &self.body {
            TensorBody::Bare { .. } => None,
            TensorBody::Declared(d) => d.spec.as_ref(),
        }
    }
}

/// An operation node.
#[derive(Clone, Debug)]
struct OpNode {
    op: Arc<dyn Operation>,
    operands: Operands,
    result: TensorId,
    /// The ids of the origins recorded while it was applied: a name given
    /// to its result later is written into them.
    origins: std::ops::Range<u32>,
}

/// An operation's operands: inline for the usual one or two.
#[derive(Clone, Debug)]
enum Operands {
    Inline { ids: [TensorId; 2], len: u8 },
    Spilled(Box<[TensorId]>),
}

impl Operands {
    fn new(ts: &[TensorId]) -> Operands {
        match ts {
            [] => Operands::Inline {
                ids: [TensorId(0); 2],
                len: 0,
            },
            [a] => Operands::Inline {
                ids: [*a, TensorId(0)],
                len: 1,
            },
            [a, b] => Operands::Inline {
                ids: [*a, *b],
                len: 2,
            },
            _ => Operands::Spilled(ts.into()),
        }
    }

    fn as_slice(&self) -> &[TensorId] {
        match self {
            Operands::Inline { ids, len } => &ids[..usize::from(*len)],
            Operands::Spilled(ts) => ts,
        }
    }
}

/// What a malformed spec was for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpecContext {
    /// The declared shape of a tensor.
    Declared {
        /// The tensor's name.
        tensor: Arc<str>,
    },
    /// A shape required of a tensor.
    Required {
        /// The tensor's name.
        tensor: Arc<str>,
    },
    /// The spec argument of a call (`einsum`, `permute`, ...).
    Call {
        /// The function.
        function: Arc<str>,
        /// The spec text.
        spec: Arc<str>,
    },
}

impl fmt::Display for SpecContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SpecContext::Declared { tensor } => write!(f, "the declared shape of `{tensor}`"),
            SpecContext::Required { tensor } => write!(f, "the required shape of `{tensor}`"),
            SpecContext::Call { function, spec } => write!(f, "{function} \"{spec}\""),
        }
    }
}

/// Why a constant's declared shape cannot hold its values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConstantProblem {
    /// No values at all.
    Empty,
    /// More than one row has a row variable: the count can decide the
    /// axes of one.
    RowVariable,
}

impl ConstantProblem {
    fn describe(&self, spec: &str) -> String {
        match self {
            ConstantProblem::Empty => "a constant needs at least one element".into(),
            ConstantProblem::RowVariable => format!("at most one row of \"{spec}\" may have a row variable when the element count is given"),
        }
    }
}

fn names(ts: &[Arc<str>]) -> String {
    if ts.is_empty() {
        "none".to_string()
    } else {
        ts.iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// The tensors whose data gave a run-time size two values
/// ([`GraphError::SizeConflict`]); `None` for a value given by number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConflictingData {
    /// The tensor whose data gave the first value.
    pub first: Option<TensorRef>,
    /// The tensor whose data gave the other value.
    pub second: Option<TensorRef>,
}

/// Operations of one name, by spec text, then by operand count (an entry
/// such as `concat` builds a different operation for each count): looked
/// up by `&str` without allocating.
type BySpec = FxHashMap<Arc<str>, FxHashMap<usize, Arc<dyn Operation>>>;

/// An operation with its operands and result.
pub(crate) type OpParts<'a> = (&'a Arc<dyn Operation>, &'a [TensorId], TensorId);

/// A failure of a graph call.
///
/// [`GraphError::kind`] names each kind of failure for programs (shapec's
/// `--json` prints it): the variant's name in snake case, or the
/// [`ShapeError`]'s own kind.
#[derive(
    Clone, Debug, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames,
)]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum GraphError {
    /// The shapes do not fit together.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// A malformed shape or einsum spec.
    #[error("in {context}: {source}")]
    Spec {
        /// What the spec was for.
        context: SpecContext,
        /// The parse error.
        source: Box<SpecError>,
    },
    /// A call of a function the graph's registry does not have.
    #[error("unknown function `{name}`; the functions are {}", known.join(", "))]
    UnknownFunction {
        /// The name called.
        name: String,
        /// The names there are.
        known: Vec<String>,
    },
    /// A function that takes a spec string was called without one.
    #[error("`{function}` takes a spec string before its tensors")]
    SpecExpected {
        /// The function.
        function: String,
    },
    /// A function that takes no spec string was given one.
    #[error("`{function}` takes tensors only, no spec string")]
    SpecUnexpected {
        /// The function.
        function: String,
    },
    /// A function registered under a name that is taken.
    #[error("a function called `{name}` is already registered")]
    DuplicateFunction {
        /// The name.
        name: String,
    },
    /// A permute given a spec of more than one operand.
    #[error("permute takes a spec of one operand, but \"{spec}\" has {operands}; use einsum")]
    PermuteSpec {
        /// The spec.
        spec: String,
        /// Its operands.
        operands: usize,
    },
    /// An operation id that this graph did not create.
    #[error("unknown operation id {0}: it was not created by this graph")]
    UnknownOp(usize),
    /// A tensor id that this graph did not create.
    #[error("unknown tensor id {0}: it was not created by this graph")]
    UnknownTensor(usize),
    /// An operator a registry entry declares that the program language
    /// cannot read, or that another entry writes already.
    #[error("the operator `{symbol}` cannot be registered: {reason}")]
    InvalidOperator {
        /// The operator as given.
        symbol: String,
        /// What is wrong.
        reason: String,
    },
    /// A tensor handle of another [`Scope`](crate::Scope) given to this
    /// one.
    #[error(
        "`{name}` belongs to another scope: a tensor handle works only with the scope that made it"
    )]
    ForeignTensor {
        /// The tensor's name in its own scope.
        name: Arc<str>,
    },
    /// An operation given the wrong number of operands.
    #[error(
        "{op} takes {expected} operand(s) but was given {found}: {}",
        names(given)
    )]
    Arity {
        /// The operation.
        op: Arc<str>,
        /// Operands it takes.
        expected: usize,
        /// Operands given.
        found: usize,
        /// The names of the tensors given (unknown ids are left out).
        given: Vec<Arc<str>>,
    },
    /// An axis index past the end of a solved row.
    #[error(
        "`{}` has no {kind} axis {axis}: its {kind} row has length {len} (axes count from 0)",
        tensor.name
    )]
    NoSuchAxis {
        /// The tensor.
        tensor: TensorRef,
        /// The row.
        kind: RowKind,
        /// The axis asked for.
        axis: usize,
        /// The number of axes the row has.
        len: usize,
    },
    /// A constant whose element count does not fit its declared shape.
    #[error("constant `{name}`: {}", problem.describe(spec))]
    Constant {
        /// The constant's name.
        name: Arc<str>,
        /// Its declared spec.
        spec: Arc<str>,
        /// What does not fit.
        problem: ConstantProblem,
    },
    /// A parameter's shape, or a named size of an input, that nothing
    /// gives: only finalization's defaults would close it.
    #[error("{} is never given: {}", what.subject(tensor), what.remedy())]
    NotGiven {
        /// The parameter or input.
        tensor: TensorRef,
        /// What of it is not given.
        what: NotGiven,
    },
    /// A convolution with padding whose padded elements no value can
    /// stand for: a maximum, minimum or product over the products of two
    /// operands.
    #[error("{op} pads an operand under a reduction of two operands' products other than a sum, which is not supported: pad with a sum, or reduce one operand")]
    PaddingUnsupported {
        /// The operation.
        op: Arc<OpRef>,
    },
    /// An operation whose lowering assigns (`Accumulate::Assign`) over
    /// reduction iterators: each result element would keep only the last
    /// value along them (the last of six inputs, six times), on every
    /// backend alike. Refused by [`crate::LoweringCx::single_kernel`]
    /// unless the operation writes one value per result element and says
    /// so with [`crate::LoweringCx::single_kernel_writing_once`].
    #[error("{op} assigns each result element while its loop nest reduces over axes its result does not have, so every element would keep only the last value: give its lowering a reduction (a sum, maximum, minimum or product), or, if each element is written once, lower it with `single_kernel_writing_once`")]
    AssignOverReduction {
        /// The operation.
        op: Arc<OpRef>,
    },
    /// A size id that this graph did not make.
    #[error("unknown size id {0}: it was not made by this graph")]
    UnknownSize(usize),
    /// A solved size that breaks a bound stated on it, or a run-time size
    /// bound to 0 (run-time sizes are at least 1; `statement` is then
    /// `usize::MAX`).
    #[error("{}", size_bound_text(name, bound, *value, *statement))]
    SizeBound {
        /// The size.
        name: Arc<str>,
        /// The bound.
        bound: SizeBound,
        /// The solved size.
        value: u64,
        /// The statement's position among the graph's size statements
        /// (as [`shape_solver::Origin::Size`] numbers them).
        statement: usize,
    },
    /// A size statement that captures a name the tensor's spec does not
    /// write.
    #[error(
        "{} `{name}` in the spec of the operation that made {tensor}, nor in its declared spec",
        if *row_var { "no row variable" } else { "no label" }
    )]
    NoSuchName {
        /// The tensor.
        tensor: TensorRef,
        /// The name looked for.
        name: Arc<str>,
        /// Whether a row variable was looked for (`..name..`).
        row_var: bool,
    },
    /// A run-time size with no value where one is needed: reading a
    /// shape, lowering or running before its sizes are bound (with
    /// [`SolvedGraph::bind`] or from the data's dims, [`SolvedGraph::bind_dims`]).
    #[error(
        "the run-time size `{name}` has no value{}: give it a value, or give data for an input whose shape has it",
        tensor.as_ref().map_or(String::new(), |t| format!(" (in the shape of {t})"))
    )]
    UnboundSize {
        /// The size.
        name: Arc<str>,
        /// The tensor whose shape needed it, if one did.
        tensor: Option<TensorRef>,
    },
    /// Binding a value to a size that is not a run-time size.
    #[error("`{name}` is not a run-time size (declare it with `size {name}` alone); only run-time sizes are bound")]
    NotRunTime {
        /// The size.
        name: Arc<str>,
    },
    /// Two inputs' data give a run-time size two values.
    #[error("the run-time size `{name}` is {first} by {first_at} but {second} by {second_at}")]
    SizeConflict {
        /// The size.
        name: Arc<str>,
        /// The first value found.
        first: u64,
        /// Where: `--size NAME=N`, or the data of a tensor at an axis
        /// (memory order).
        first_at: String,
        /// The other value.
        second: u64,
        /// Where.
        second_at: String,
        /// The tensors whose data gave the two values, where data did.
        tensors: Box<ConflictingData>,
    },
    /// Bound sizes that break a guard inference left.
    #[error(transparent)]
    Guard(#[from] shape_solver::guard::GuardFailure),
    /// Two guards on one run-time size that no value passes together
    /// (`b == 2` from a requirement, `b >= 3` from a size statement):
    /// found by inference, since every binding would be refused.
    #[error(
        "the checks on run-time sizes contradict each other: `{}` ({}) and `{}` ({}) hold for no value",
        first.requires(), first.context, second.requires(), second.context
    )]
    GuardConflict {
        /// The earlier guard.
        first: Box<shape_solver::guard::SizeGuard>,
        /// The guard that contradicts it.
        second: Box<shape_solver::guard::SizeGuard>,
    },
    /// A size statement's size is a ragged axis, which has no one value.
    #[error("the size `{name}` is a ragged axis (`var`): its rows have lengths of their own, not one number")]
    RaggedSize {
        /// The size.
        name: Arc<str>,
    },
    /// A ragged tensor whose layout cannot be stored as values and row
    /// offsets.
    #[error("{} has the shape {shape}, which cannot be stored as ragged rows: {reason}", tensor.as_ref().map_or("a tensor".to_string(), |t| t.to_string()))]
    RaggedLayout {
        /// The tensor.
        tensor: Option<Box<TensorRef>>,
        /// Its solved shape.
        shape: String,
        /// Why not.
        reason: String,
    },
    /// An operation defined outside this crate (a call of a user's
    /// function, `shape-call`'s `CallOp`) could not be lowered at the
    /// solved sizes; `kind` is its own error's kind.
    #[error("{op} cannot be lowered: {reason}")]
    Lowering {
        /// The operation.
        op: Arc<OpRef>,
        /// The operation's own error kind.
        kind: &'static str,
        /// Why not.
        reason: String,
    },
    /// An operation that a ragged run cannot lower row by row.
    #[error("{op} cannot run on ragged data: {reason}")]
    RaggedLowering {
        /// The operation.
        op: Arc<OpRef>,
        /// Why not.
        reason: String,
    },
    /// A row of ragged data whose length does not broadcast with what it
    /// meets (DyND's check, made when the data is known).
    #[error("in {op}, {} {tensor} has length {length} at {}, along axis {axis} (memory order), where {required} is needed: {}", if *ragged { "the ragged axis of" } else { "the axis of" }, if row.is_empty() { "its only row".to_string() } else { format!("row ({row})") }, if *ragged { format!("a row's length must be 1 or {required}") } else { format!("the rows it meets have length {required}") })]
    RaggedRow {
        /// The operation.
        op: Arc<OpRef>,
        /// The tensor.
        tensor: Box<TensorRef>,
        /// The axis, in memory order.
        axis: usize,
        /// The row: the values of the iterators over the axes before the
        /// ragged axes (empty for a ragged axis first, whose value is its
        /// only row: the message says so).
        row: String,
        /// The length found.
        length: u64,
        /// The length it meets.
        required: u64,
        /// Whether the axis is the tensor's ragged one (rather than a
        /// fixed size meeting ragged rows).
        ragged: bool,
    },
    /// A batch slice asked for an index its batch axis does not have.
    #[error("{op} takes batch index {index}, but the batch axis it slices has size {size}")]
    SliceOutOfRange {
        /// The batch slice.
        op: Arc<OpRef>,
        /// The index asked for.
        index: u64,
        /// The size of the sliced axis.
        size: u64,
    },
}

impl GraphError {
    /// A stable, machine-readable name for the error's kind: the variant's
    /// name in snake case, defined with the variant, or the shape error's
    /// own kind.
    pub fn kind(&self) -> &'static str {
        match self {
            GraphError::Shape(e) => e.kind(),
            GraphError::Lowering { kind, .. } => kind,
            _ => self.into(),
        }
    }

    /// The operation the error is about, if it names one.
    pub fn op(&self) -> Option<&OpRef> {
        match self {
            GraphError::Shape(e) => e.context().and_then(Origin::op),
            GraphError::SliceOutOfRange { op, .. }
            | GraphError::PaddingUnsupported { op }
            | GraphError::AssignOverReduction { op }
            | GraphError::RaggedLowering { op, .. }
            | GraphError::Lowering { op, .. }
            | GraphError::RaggedRow { op, .. } => Some(op),
            GraphError::Spec { .. }
            | GraphError::UnknownFunction { .. }
            | GraphError::SpecExpected { .. }
            | GraphError::SpecUnexpected { .. }
            | GraphError::DuplicateFunction { .. }
            | GraphError::PermuteSpec { .. }
            | GraphError::UnknownOp(_)
            | GraphError::UnknownTensor(_)
            | GraphError::ForeignTensor { .. }
            | GraphError::InvalidOperator { .. }
            | GraphError::Arity { .. }
            | GraphError::NoSuchAxis { .. }
            | GraphError::NotGiven { .. }
            | GraphError::UnknownSize(_)
            | GraphError::SizeBound { .. }
            | GraphError::NoSuchName { .. }
            | GraphError::UnboundSize { .. }
            | GraphError::RaggedSize { .. }
            | GraphError::RaggedLayout { .. }
            | GraphError::NotRunTime { .. }
            | GraphError::SizeConflict { .. }
            | GraphError::Constant { .. } => None,
            GraphError::Guard(g) => g.guard.context.op(),
            GraphError::GuardConflict { second, first } => {
                second.context.op().or_else(|| first.context.op())
            }
        }
    }
}

fn size_bound_text(name: &str, bound: &SizeBound, value: u64, statement: usize) -> String {
    if statement == usize::MAX {
        format!(
            "the run-time size `{name}` is {value}, but run-time sizes are at least 1 (a bound such as `size {name} >= 0` does not lower that); write a size that may be 0 as a number"
        )
    } else {
        format!("the size `{name}` is {value}, which breaks the statement `size {name} {bound}`")
    }
}

/// What of a tensor's shape nothing gives (see [`GraphError::NotGiven`]).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotGiven {
    /// How many axes a parameter's row has.
    Row(RowKind),
    /// The size of a parameter's axis (row, axis from the left).
    Axis(RowKind, usize),
    /// A size named in an input's declared shape.
    Named(Arc<str>),
    /// A size the program names (`size d == e`) that nothing gives.
    Size(Arc<str>),
}

impl NotGiven {
    /// What is not given, of which tensor.
    fn subject(&self, tensor: &TensorRef) -> String {
        match self {
            NotGiven::Size(name) => format!("the size `{name}`"),
            _ => format!("{} of {tensor}", self.describe()),
        }
    }

    fn describe(&self) -> String {
        match self {
            NotGiven::Row(kind) => format!("the {kind} size"),
            NotGiven::Axis(kind, axis) => format!("the size of {kind} axis {axis}"),
            NotGiven::Named(name) => format!("the size `{name}` in the declared shape"),
            NotGiven::Size(name) => format!("the size `{name}`"),
        }
    }

    fn remedy(&self) -> &'static str {
        match self {
            NotGiven::Row(_) | NotGiven::Axis(..) => {
                "declare it, or require a shape downstream (a parameter's shape is inferred from \
                 its uses, never guessed)"
            }
            NotGiven::Size(_) => {
                "give it a number, or tie it to a tensor's axis that something sizes \
                 (`size d = j of y`); an axis computed from operands of size 1 there is not \
                 sized by them, since 1 broadcasts to any size; a size is never guessed"
            }
            NotGiven::Named(_) => {
                "give it as a number, or require a shape that fixes it (an input's named sizes \
                 are not run-time sizes yet)"
            }
        }
    }
}

/// A tensor program under construction: tensors, operations and the
/// solver state their shapes induce.
///
/// Constraints are solved as operations are added, so a conflict is
/// reported by the call that introduces it; [`Graph::solve`] then closes
/// what is left open. Cloning a graph is cheap (persistent structures), so
/// a clone can be extended to ask "what if".
///
/// ```
/// use shape_graph::Graph;
/// let mut g = Graph::new();
/// let x = g.input("x", "8|784").unwrap();
/// let w1 = g.parameter("w1").unwrap();
/// let b1 = g.parameter_with_spec("b1", "64").unwrap();
/// let h = g.compose(w1, x).unwrap();
/// let h = g.add(h, b1).unwrap();
/// let h = g.unary("relu", h).unwrap();
/// let w2 = g.parameter("w2").unwrap();
/// let y = g.compose(w2, h).unwrap();
/// g.require(y, "8|->10").unwrap();
/// let s = g.solve().unwrap();
/// assert_eq!(s.shape(w1).unwrap().to_string(), "|784->64");
/// assert_eq!(s.shape(w2).unwrap().to_string(), "|64->10");
/// ```
#[derive(Clone, Debug)]
pub struct Graph {
    solver: Solver,
    tensors: ChunkVec<Tensor>,
    /// The tensors' shapes spelled out for [`Graph::shape_vars`], made on
    /// its first call after a tensor is added.
    shape_vars: OnceLock<Arc<[Shape]>>,
    ops: ChunkVec<OpNode>,
    registry: Arc<Registry>,
    /// Operations built by name so far, by name, spec text ("" for none)
    /// and operand count: a spec used many times is parsed once, and a
    /// function's applications share one instance. (These three maps are
    /// read once or more per operation, keyed by text: FxHash, as SipHash
    /// over spec texts showed in profiles.)
    built: FxHashMap<Arc<str>, BySpec>,
    /// Declared shape specs parsed so far, by their text (which origins
    /// share rather than copy).
    specs: FxHashMap<Arc<str>, Arc<ShapeSpec>>,
    /// Operation names in messages, shared by their uses.
    op_names: FxHashSet<Arc<str>>,
    /// The named sizes in inputs' declared shapes, which
    /// [`Graph::solve`] requires something other than a default to give.
    input_labels: Vector<(TensorId, Arc<str>, DimVar)>,
    /// The sizes the program names, in order of first use, and their
    /// variables by name (read by later specs that write the name).
    sizes: Vector<(Arc<str>, DimVar)>,
    size_dims: HashMap<Arc<str>, DimVar>,
    size_ids: HashMap<Arc<str>, usize>,
    /// Size statements made so far (they number their origins).
    size_statements: usize,
    /// Bounds stated on sizes (`size d % 8 == 0`), checked on the solved
    /// sizes by [`Graph::solve`].
    pub(crate) size_bounds: Vector<(SizeId, SizeBound, usize)>,
    /// The sizes known only at run time (`size b` alone), bound by
    /// [`SolvedGraph::bind`].
    pub(crate) run_time_sizes: Vector<SizeId>,
    /// How many times this graph (or a clone of it) was solved.
    pub(crate) solves: Arc<std::sync::atomic::AtomicU64>,
}

/// A bound on a named size: `size d >= 1`, `size d <= 4096`,
/// `size d == 64`, `size d % 8 == 0` in the text language.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SizeBound {
    /// At least this: a constraint the solver uses (it also closes a
    /// size nothing else gives to this, not to 1).
    AtLeast(u64),
    /// At most this: checked once the size is solved.
    AtMost(u64),
    /// Exactly this: the same fact as `size d = n`.
    Equal(u64),
    /// A multiple of `modulus` plus `remainder`: checked once the size is
    /// solved.
    Remainder {
        /// The divisor, at least 1.
        modulus: NonZeroU64,
        /// The remainder, below the divisor.
        remainder: u64,
    },
}

impl SizeBound {
    /// Whether `size` meets the bound.
    pub fn holds(self, size: u64) -> bool {
        match self {
            SizeBound::AtLeast(n) => size >= n,
            SizeBound::AtMost(n) => size <= n,
            SizeBound::Equal(n) => size == n,
            SizeBound::Remainder { modulus, remainder } => size % modulus.get() == remainder,
        }
    }
}

impl fmt::Display for SizeBound {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SizeBound::AtLeast(n) => write!(f, ">= {n}"),
            SizeBound::AtMost(n) => write!(f, "<= {n}"),
            SizeBound::Equal(n) => write!(f, "== {n}"),
            SizeBound::Remainder { modulus, remainder } => write!(f, "% {modulus} == {remainder}"),
        }
    }
}

impl Default for Graph {
    fn default() -> Self {
        Graph::with_registry(Registry::builtin())
    }
}

impl Graph {
    /// An empty graph whose calls by name see the built-in operations.
    pub fn new() -> Graph {
        Graph::default()
    }

    /// An empty graph whose calls by name see `registry`.
    pub fn with_registry(registry: Arc<Registry>) -> Graph {
        Graph {
            solver: Solver::default(),
            tensors: ChunkVec::default(),
            shape_vars: OnceLock::new(),
            ops: ChunkVec::default(),
            registry,
            built: FxHashMap::default(),
            specs: FxHashMap::default(),
            op_names: FxHashSet::default(),
            input_labels: Vector::new(),
            sizes: Vector::new(),
            size_dims: HashMap::new(),
            size_ids: HashMap::new(),
            size_statements: 0,
            size_bounds: Vector::new(),
            run_time_sizes: Vector::new(),
            solves: Arc::default(),
        }
    }

    /// The operations callable by name.
    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    pub(crate) fn tensor(&self, t: TensorId) -> Result<&Tensor, GraphError> {
        self.tensors.get(t.0).ok_or(GraphError::UnknownTensor(t.0))
    }

    /// The tensor as messages name it (its id, name and where it was
    /// declared), for errors about it.
    pub fn tensor_ref(&self, t: TensorId) -> Result<TensorRef, GraphError> {
        let tensor = self.tensor(t)?;
        Ok(TensorRef::new(t.0, tensor.name.clone()).with_definition(tensor.definition.clone()))
    }

    fn names_of(&self, ts: &[TensorId]) -> Vec<Arc<str>> {
        ts.iter()
            .filter_map(|&t| self.tensors.get(t.0).map(|x| x.name.clone()))
            .collect()
    }

    /// The number of tensors.
    pub fn num_tensors(&self) -> usize {
        self.tensors.len()
    }

    /// The number of operations.
    pub fn num_ops(&self) -> usize {
        self.ops.len()
    }

    /// All tensor ids, in creation order.
    pub fn tensor_ids(&self) -> impl Iterator<Item = TensorId> {
        (0..self.tensors.len()).map(TensorId)
    }

    /// A tensor's name.
    pub fn name(&self, t: TensorId) -> Result<&str, GraphError> {
        Ok(&self.tensor(t)?.name)
    }

    /// A tensor's kind.
    pub fn kind(&self, t: TensorId) -> Result<TensorKind, GraphError> {
        Ok(self.tensor(t)?.kind())
    }

    /// The operation whose result `t` is, if any.
    pub fn producer(&self, t: TensorId) -> Option<OpId> {
        match self.tensors.get(t.0)?.kind() {
            TensorKind::Result(op) => Some(op),
            _ => None,
        }
    }

    /// All operation ids, in creation order (a topological order: an
    /// operation reads only tensors that exist when it is applied).
    pub fn op_ids(&self) -> impl Iterator<Item = OpId> {
        (0..self.ops.len()).map(OpId)
    }

    /// An operation, its operands and its result.
    pub fn op(&self, op: OpId) -> Option<(&dyn Operation, &[TensorId], TensorId)> {
        self.ops
            .get(op.0)
            .map(|o| (&*o.op, o.operands.as_slice(), o.result))
    }

    pub(crate) fn op_node(&self, op: OpId) -> Option<OpParts<'_>> {
        self.ops
            .get(op.0)
            .map(|o| (&o.op, o.operands.as_slice(), o.result))
    }

    /// The operation as messages name it (its id, kind and operands),
    /// for errors about it.
    pub fn op_ref(&self, op: OpId) -> Result<Arc<OpRef>, GraphError> {
        let (operation, operands, result) = self.op(op).ok_or(GraphError::UnknownOp(op.0))?;
        Ok(Arc::new(OpRef {
            id: op.0,
            name: Arc::from(operation.name()),
            operands: operands
                .iter()
                .map(|&t| self.tensor_ref(t))
                .collect::<Result<_, _>>()?,
            result: self.tensor_ref(result)?,
        }))
    }

    /// The solver state (for direct constraints or inspection).
    pub fn solver(&self) -> &Solver {
        &self.solver
    }

    /// The tensor's shape as far as it is known now, variables included.
    pub fn shape(&self, t: TensorId) -> Result<Shape, GraphError> {
        let shape = self.tensor(t)?.shape();
        Ok(Shape {
            batch: self.solver.resolve_row(&shape.batch)?,
            input: self.solver.resolve_row(&shape.input)?,
            output: self.solver.resolve_row(&shape.output)?,
        })
    }

    /// The tensor's declared rows, unresolved: the variables the solver
    /// knows it by.
    #[deprecated(
        since = "0.1.0",
        note = "no user: `SolvedGraph::shape` gives the solved shape"
    )]
    pub fn shape_vars(&self, t: TensorId) -> Result<&Shape, GraphError> {
        self.tensor(t)?;
        // Results keep their row variables only: the shapes are spelled
        // out for every tensor on the first call after a tensor is added.
        let shapes = self.shape_vars.get_or_init(|| {
            self.tensors
                .iter()
                .map(|t| t.shape().into_owned())
                .collect()
        });
        Ok(&shapes[t.0])
    }

    fn push_tensor(&mut self, tensor: Tensor) -> TensorId {
        let id = TensorId(self.tensors.len());
        self.tensors.push_back(tensor);
        self.shape_vars.take();
        id
    }

    /// An operation name, allocated once per distinct name.
    fn op_name(&mut self, name: &str) -> Arc<str> {
        if let Some(n) = self.op_names.get(name) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(name);
        self.op_names.insert(n.clone());
        n
    }

    /// A declared shape spec, parsed once per distinct text, with its text.
    fn declared_spec(
        &mut self,
        text: &str,
        context: impl FnOnce() -> SpecContext,
    ) -> Result<(Arc<str>, Arc<ShapeSpec>), GraphError> {
        if let Some((k, v)) = self.specs.get_key_value(text) {
            return Ok((k.clone(), v.clone()));
        }
        let spec = Arc::new(Self::parse_spec(text, context)?);
        let key: Arc<str> = Arc::from(text);
        self.specs.insert(key.clone(), spec.clone());
        Ok((key, spec))
    }

    fn parse_spec(
        text: &str,
        context: impl FnOnce() -> SpecContext,
    ) -> Result<ShapeSpec, GraphError> {
        ShapeSpec::parse(text).map_err(|source| GraphError::Spec {
            context: context(),
            source: Box::new(source),
        })
    }

    /// Declares an input with a (partial) shape in the spec notation.
    ///
    /// Labels are dimension variables local to this spec, digits are fixed
    /// sizes, `..name..` is a row variable; rows the spec leaves out are
    /// empty (`"784"` has no batch and no input axes).
    pub fn input(&mut self, name: &str, spec: &str) -> Result<TensorId, GraphError> {
        self.declare(name, spec, TensorKind::Input, None)
    }

    /// Declares a parameter whose shape is inferred from its uses: no batch
    /// axes, any input and output axes.
    pub fn parameter(&mut self, name: &str) -> Result<TensorId, GraphError> {
        let shape = Shape {
            batch: Row::empty(),
            input: Row::open(self.solver.fresh_row(), vec![]),
            output: Row::open(self.solver.fresh_row(), vec![]),
        };
        Ok(self.push_tensor(Tensor::new(
            Arc::from(name),
            None,
            TensorKind::Parameter,
            shape,
            None,
        )))
    }

    /// Declares a parameter with a (partial) shape in the spec notation.
    pub fn parameter_with_spec(&mut self, name: &str, spec: &str) -> Result<TensorId, GraphError> {
        self.declare(name, spec, TensorKind::Parameter, None)
    }

    /// Declares a constant holding `num_elems` values laid out in the given
    /// shape; the output row must account for exactly the elements the
    /// batch and input rows leave, so one unknown output size is inferred.
    ///
    /// ```
    /// use shape_graph::Graph;
    /// let mut g = Graph::new();
    /// let c = g.constant("c", "3->k", 12).unwrap();
    /// assert_eq!(g.solve().unwrap().shape(c).unwrap().to_string(), "|3->4");
    /// ```
    pub fn constant(
        &mut self,
        name: &str,
        spec: &str,
        num_elems: u64,
    ) -> Result<TensorId, GraphError> {
        let n = NonZeroU64::new(num_elems).ok_or_else(|| GraphError::Constant {
            name: Arc::from(name),
            spec: Arc::from(spec),
            problem: ConstantProblem::Empty,
        })?;
        self.declare(name, spec, TensorKind::Constant, Some(n))
    }

    fn declare(
        &mut self,
        name: &str,
        spec_text: &str,
        kind: TensorKind,
        num_elems: Option<NonZeroU64>,
    ) -> Result<TensorId, GraphError> {
        let (spec_arc, spec) = self.declared_spec(spec_text, || SpecContext::Declared {
            tensor: Arc::from(name),
        })?;
        if num_elems.is_some() {
            terminal::check_counted_spec(name, &spec_arc, &spec)?;
        }
        let tref = TensorRef::new(self.tensors.len(), Arc::from(name));
        let mut labels = Vec::new();
        // The named sizes of an input must be given by something else: an
        // input's sizes are those of the data, which no default can know.
        let wanted = (kind == TensorKind::Input).then_some(&mut labels);
        let sizes = &self.size_dims;
        let shape = self.solver.transaction(|solver| {
            terminal::declared_shape(solver, &tref, &spec_arc, &spec, num_elems, wanted, sizes)
        })?;
        let id = self.push_tensor(Tensor::new(tref.name, None, kind, shape, Some(spec)));
        for (name, v) in labels {
            self.input_labels.push_back((id, name, v));
        }
        Ok(id)
    }

    /// Requires a tensor to have the shape given in the spec notation; rows
    /// the spec leaves out are not constrained.
    pub fn require(&mut self, t: TensorId, spec_text: &str) -> Result<(), GraphError> {
        let tref = self.tensor_ref(t)?;
        let spec = Self::parse_spec(spec_text, || SpecContext::Required {
            tensor: tref.name.clone(),
        })?;
        let shape = self.tensor(t)?.shape().into_owned();
        let sizes = &self.size_dims;
        self.solver.transaction(|solver| {
            terminal::required_shape(solver, &tref, spec_text, &spec, &shape, sizes)
        })?;
        Ok(())
    }

    /// Gives tensor `t` the name `name`: listings, later operations and
    /// every message call it that, the operation that made it included
    /// (operations applied to it before keep the name it had then).
    ///
    /// ```
    /// use shape_graph::Graph;
    /// let mut g = Graph::new();
    /// let x = g.input("x", "3")?;
    /// let y = g.unary("relu", x)?;
    /// g.rename(y, "activation")?;
    /// let z = g.unary("exp", y)?;
    /// assert_eq!(g.name(y)?, "activation");
    /// assert_eq!(g.op_ref(g.producer(z).unwrap())?.operands[0].name.as_ref(), "activation");
    /// # Ok::<(), shape_graph::GraphError>(())
    /// ```
    pub fn rename(&mut self, t: TensorId, name: &str) -> Result<(), GraphError> {
        let tensor = self
            .tensors
            .get_mut(t.0)
            .ok_or(GraphError::UnknownTensor(t.0))?;
        let name: Arc<str> = Arc::from(name);
        tensor.name = name.clone();
        tensor.definition = None;
        // The messages of the operation that made it name it too.
        if let TensorKind::Result(op) = tensor.kind() {
            if let Some(node) = self.ops.get(op.0) {
                let origins = node.origins.clone();
                self.solver.rename_in_origins(origins, t.0, &name);
            }
        }
        Ok(())
    }

    /// Applies an operation; the result is named `t<id>`.
    pub fn apply(
        &mut self,
        op: Arc<dyn Operation>,
        operands: &[TensorId],
    ) -> Result<TensorId, GraphError> {
        let name = numbered_name(b't', self.tensors.len());
        self.apply_arc(name, true, op, operands)
    }

    /// Applies an operation and names its result.
    pub fn apply_named(
        &mut self,
        name: &str,
        op: Arc<dyn Operation>,
        operands: &[TensorId],
    ) -> Result<TensorId, GraphError> {
        self.apply_arc(Arc::from(name), false, op, operands)
    }

    fn apply_arc(
        &mut self,
        result_name: Arc<str>,
        numbered: bool,
        operation: Arc<dyn Operation>,
        operands: &[TensorId],
    ) -> Result<TensorId, GraphError> {
        let op_name = self.op_name(operation.name());
        if operands.len() != operation.arity() {
            return Err(GraphError::Arity {
                op: op_name,
                expected: operation.arity(),
                found: operands.len(),
                given: self.names_of(operands),
            });
        }
        // Exactly as long as it needs (collecting through a `Result`
        // would allocate for four): one list for every operation applied.
        let mut operand_refs = Vec::with_capacity(operands.len());
        for &t in operands {
            operand_refs.push(self.tensor_ref(t)?);
        }
        // A result named by number is named in messages by what makes it,
        // spelled once its operands are known to exist.
        let definition = numbered
            .then(|| Definition::new(op_name.clone(), operand_refs.iter().map(|t| t.name.clone())));
        let op_id = OpId(self.ops.len());
        let result = TensorId(self.tensors.len());
        let op = Arc::new(OpRef {
            id: op_id.0,
            name: op_name,
            operands: operand_refs,
            result: TensorRef::new(result.0, result_name.clone())
                .with_definition(definition.clone()),
        });
        let first_origin = self.solver.num_origins();
        let tensors = &self.tensors;
        let result_shape = self.solver.transaction(|solver| {
            let result_shape = Shape {
                batch: Row::open(solver.fresh_row(), vec![]),
                input: Row::open(solver.fresh_row(), vec![]),
                output: Row::open(solver.fresh_row(), vec![]),
            };
            // Result first, then the operands: on the stack for the usual
            // one or two operands.
            let mut inline = [&result_shape; 3];
            let held: [Option<Cow<'_, Shape>>; 2] = std::array::from_fn(|i| {
                operands
                    .get(i)
                    .filter(|_| operands.len() < inline.len())
                    .map(|t| tensors[t.0].shape())
            });
            let spilled_held: Vec<Cow<'_, Shape>>;
            let spilled: Vec<&Shape>;
            let shapes: &[&Shape] = if operands.len() < inline.len() {
                for (slot, shape) in inline[1..].iter_mut().zip(held.iter().flatten()) {
                    *slot = shape;
                }
                &inline[..=operands.len()]
            } else {
                spilled_held = operands.iter().map(|t| tensors[t.0].shape()).collect();
                spilled = std::iter::once(&result_shape)
                    .chain(spilled_held.iter().map(|s| &**s))
                    .collect();
                &spilled
            };
            let mut cx = ConstraintCx { solver, op, shapes };
            // Queued straight onto the solver (no list in between), then
            // simplified: what `add_all` does inside this transaction.
            operation.constrain(&mut cx);
            solver.run()?;
            Ok::<_, ShapeError>(result_shape)
        })?;
        self.push_tensor(Tensor::new(
            result_name,
            definition,
            TensorKind::Result(op_id),
            result_shape,
            None,
        ));
        self.ops.push_back(OpNode {
            op: operation,
            operands: Operands::new(operands),
            result,
            origins: first_origin..self.solver.num_origins(),
        });
        Ok(result)
    }

    /// The operation `name` of the registry, built from `spec` (for
    /// operations that take one), or found built already.
    fn built(
        &mut self,
        name: &str,
        spec: Option<&str>,
        operands: usize,
    ) -> Result<Arc<dyn Operation>, GraphError> {
        let key = spec.unwrap_or("");
        let found = (self.built.get(name))
            .and_then(|m| m.get(key))
            .and_then(|m| m.get(&operands));
        if let Some(op) = found {
            return Ok(op.clone());
        }
        let entry = self.registry.lookup(name)?;
        match (entry.takes_spec(), spec) {
            (true, None) => {
                return Err(GraphError::SpecExpected {
                    function: name.to_string(),
                })
            }
            (false, Some(_)) => {
                return Err(GraphError::SpecUnexpected {
                    function: name.to_string(),
                })
            }
            _ => {}
        }
        let op = entry.build(&BuildArgs {
            name,
            spec,
            operands,
        })?;
        self.built
            .entry(Arc::from(name))
            .or_default()
            .entry(Arc::from(key))
            .or_default()
            .insert(operands, op.clone());
        Ok(op)
    }

    /// Calls the operation `name` of the graph's registry: with a spec
    /// string first for operations that take one (`einsum`, `permute`).
    /// An unknown name is an error here, when the graph is built.
    ///
    /// ```
    /// use shape_graph::{Graph, GraphError};
    /// let mut g = Graph::new();
    /// let x = g.input("x", "2,3")?;
    /// let y = g.call("permute", Some("ij=>ji"), &[x])?;
    /// assert_eq!(g.solve()?.shape(y)?.to_string(), "|->3, 2");
    /// assert_eq!(g.call("gelu", None, &[x]).unwrap_err().kind(), "unknown_function");
    /// # Ok::<(), GraphError>(())
    /// ```
    pub fn call(
        &mut self,
        name: &str,
        spec: Option<&str>,
        operands: &[TensorId],
    ) -> Result<TensorId, GraphError> {
        let op = self.built(name, spec, operands.len())?;
        self.apply(op, operands)
    }

    /// [`Graph::call`], naming the result.
    pub fn call_named(
        &mut self,
        result: &str,
        name: &str,
        spec: Option<&str>,
        operands: &[TensorId],
    ) -> Result<TensorId, GraphError> {
        let op = self.built(name, spec, operands.len())?;
        self.apply_named(result, op, operands)
    }

    /// A pointwise unary function of the registry, such as `relu` or `exp`.
    pub fn unary(&mut self, name: &str, a: TensorId) -> Result<TensorId, GraphError> {
        self.call(name, None, &[a])
    }

    /// A pointwise binary function of the registry, such as `add` or `mul`.
    pub fn binary(&mut self, name: &str, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.call(name, None, &[a, b])
    }

    /// Pointwise addition with broadcasting.
    pub fn add(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary("add", a, b)
    }

    /// Pointwise multiplication with broadcasting.
    pub fn mul(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary("mul", a, b)
    }

    /// `a * b` with `b`'s outputs feeding `a`'s inputs (matrix product).
    pub fn compose(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.apply(Arc::new(ops::Compose), &[a, b])
    }

    /// Swaps input and output axes.
    pub fn transpose(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.apply(Arc::new(ops::Transpose), &[a])
    }

    /// Drops the leftmost batch axis.
    pub fn batch_slice(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.apply(Arc::new(ops::BatchSlice), &[a])
    }

    /// Drops the leftmost batch axis, which has `range` elements: a slice
    /// over a static range fixes the operand's leading batch axis.
    ///
    /// ```
    /// use shape_graph::Graph;
    /// let mut g = Graph::new();
    /// let x = g.input("x", "..b..|3").unwrap();
    /// let s = g.batch_slice_range(x, 4).unwrap();
    /// let solved = g.solve().unwrap();
    /// assert_eq!(solved.shape(x).unwrap().to_string(), "4|->3");
    /// assert_eq!(solved.shape(s).unwrap().to_string(), "|->3");
    /// ```
    pub fn batch_slice_range(&mut self, a: TensorId, range: u64) -> Result<TensorId, GraphError> {
        let op = self.built("batch_slice_range", Some(&range.to_string()), 1)?;
        self.apply(op, &[a])
    }

    /// An einsum such as `"ij;jk=>ik"` over the given operands.
    pub fn einsum(&mut self, spec: &str, operands: &[TensorId]) -> Result<TensorId, GraphError> {
        let op = self.built("einsum", Some(spec), operands.len())?;
        self.apply(op, operands)
    }

    /// The operands one after another along their last output axis; the
    /// other axes broadcast as in a pointwise operation, and one unknown
    /// size among the parts and the whole is inferred from the others.
    ///
    /// ```
    /// use shape_graph::Graph;
    /// let mut g = Graph::new();
    /// let a = g.input("a", "4|2").unwrap();
    /// let b = g.parameter("b").unwrap();
    /// let c = g.concat(&[a, b]).unwrap();
    /// g.require(c, "4|->5").unwrap();
    /// let s = g.solve().unwrap();
    /// assert_eq!(s.shape(b).unwrap().to_string(), "|->3");
    /// ```
    pub fn concat(&mut self, parts: &[TensorId]) -> Result<TensorId, GraphError> {
        let op = self.built("concat", None, parts.len())?;
        self.apply(op, parts)
    }

    /// An einsum whose left-out labels are reduced by `reduction` instead
    /// of summed (`einsum_max`, `einsum_min`, `einsum_prod` in the text
    /// language): the row maximum of a softmax, a max-pool.
    ///
    /// ```
    /// use shape_graph::{ops::Reduction, Graph};
    /// let mut g = Graph::new();
    /// let x = g.input("x", "5, 3").unwrap();
    /// let column_max = g.einsum_reduced("u,t=>t", &[x], Reduction::Max).unwrap();
    /// assert_eq!(g.solve().unwrap().shape(column_max).unwrap().to_string(), "|->3");
    /// ```
    pub fn einsum_reduced(
        &mut self,
        spec: &str,
        operands: &[TensorId],
        reduction: ops::Reduction,
    ) -> Result<TensorId, GraphError> {
        let op = self.built(reduction.function(), Some(spec), operands.len())?;
        self.apply(op, operands)
    }

    /// A permutation (or reduction) of one operand: a unary einsum such as
    /// `"ij=>ji"`.
    pub fn permute(&mut self, spec: &str, a: TensorId) -> Result<TensorId, GraphError> {
        let op = self.built("permute", Some(spec), 1)?;
        self.apply(op, &[a])
    }

    /// Closes every open variable and returns every tensor's solved shape.
    /// The graph itself is unchanged, so it can be extended and solved
    /// again.
    pub fn solve(&self) -> Result<SolvedGraph, GraphError> {
        let solution = self.solver.finalize()?;
        self.check_given(&solution)?;
        for &(s, bound, statement) in &self.size_bounds {
            let (name, v) = self.size_var(s)?;
            // A run-time size's bounds are checked when it is bound.
            let Some(value) = solution.dim(&Dim::Var(v))?.static_size() else {
                continue;
            };
            if !bound.holds(value) {
                return Err(GraphError::SizeBound {
                    name,
                    bound,
                    value,
                    statement,
                });
            }
        }
        let guards = solution.guards();
        if let Some((first, second)) = shape_solver::guard::contradiction(&guards) {
            return Err(GraphError::GuardConflict {
                first: Box::new(first.clone()),
                second: Box::new(second.clone()),
            });
        }
        self.solves
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Ok(SolvedGraph {
            graph: self.clone(),
            shapes: (0..self.tensors.len().div_ceil(SHAPE_BLOCK))
                .map(|_| OnceLock::new())
                .collect(),
            solution: Arc::new(solution),
            bound: None,
        })
    }
}

/// A size a program names (`size d = ...` in the text language): one
/// dimension, shared by every later declaration or requirement whose spec
/// writes the name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SizeId(usize);

impl SizeId {
    /// Its index among the graph's sizes, in order of first use.
    pub fn index(self) -> usize {
        self.0
    }
}

impl Graph {
    /// The size called `name`, made on first use. Declarations and
    /// requirements made after it that write `name` in their spec mean
    /// this size (labels are otherwise local to their spec).
    ///
    /// ```
    /// use shape_graph::Graph;
    /// let mut g = Graph::new();
    /// let d = g.size("d");
    /// g.set_size(d, 64).unwrap();
    /// let x = g.input("x", "b|d").unwrap();
    /// g.require(x, "4|d").unwrap();
    /// let w = g.parameter_with_spec("w", "d->d").unwrap();
    /// let y = g.compose(w, x).unwrap();
    /// let s = g.solve().unwrap();
    /// assert_eq!(s.shape(y).unwrap().to_string(), "4|->64");
    /// assert_eq!(s.size(d).unwrap(), 64);
    /// ```
    pub fn size(&mut self, name: &str) -> SizeId {
        if let Some(s) = self.size_named(name) {
            return s;
        }
        let v = self.solver.fresh_dim();
        let name: Arc<str> = Arc::from(name);
        self.sizes.push_back((name.clone(), v));
        self.size_dims.insert(name.clone(), v);
        self.size_ids.insert(name, self.sizes.len() - 1);
        SizeId(self.sizes.len() - 1)
    }

    /// The size called `name`, if the graph has one.
    pub fn size_named(&self, name: &str) -> Option<SizeId> {
        self.size_ids.get(name).copied().map(SizeId)
    }

    /// Every size the graph names, in order of first use.
    pub fn sizes(&self) -> impl Iterator<Item = (SizeId, &str)> {
        self.sizes
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (SizeId(i), &**n))
    }

    pub(crate) fn size_var(&self, s: SizeId) -> Result<(Arc<str>, DimVar), GraphError> {
        self.sizes
            .get(s.0)
            .cloned()
            .ok_or(GraphError::UnknownSize(s.0))
    }

    /// The origin of one size statement about `s`.
    pub(crate) fn size_origin(&mut self, name: Arc<str>, what: String) -> shape_solver::Why {
        let origin = Origin::Size {
            name,
            statement: self.size_statements,
            what: Arc::from(what),
        };
        self.size_statements += 1;
        shape_solver::Why::of(self.solver.add_origin(origin))
    }

    /// `size s = n`: the size is `n` (0 is an empty axis).
    pub fn set_size(&mut self, s: SizeId, n: u64) -> Result<(), GraphError> {
        self.size_is(s, n, format!("= {n}"))
    }

    /// The size is `n`, by a statement that reads `what` after its name
    /// (`= 64` or `== 64`, as written, for messages that quote it).
    fn size_is(&mut self, s: SizeId, n: u64, what: String) -> Result<(), GraphError> {
        let (name, v) = self.size_var(s)?;
        let why = self.size_origin(name, what);
        self.equal_sizes(Dim::Var(v), Dim::sized(n), why)
    }

    /// `size s >= n`, `size s <= n`, `size s == n`, `size s % m == r`: a
    /// bound on a size. `>=` and `==` are facts the solver uses; every
    /// bound is checked on the solved size by [`Graph::solve`]
    /// ([`GraphError::SizeBound`]).
    ///
    /// ```
    /// use std::num::NonZeroU64;
    /// use shape_graph::{Graph, SizeBound};
    /// let mut g = Graph::new();
    /// let d = g.size("d");
    /// g.bound_size(d, SizeBound::Remainder { modulus: NonZeroU64::new(8).unwrap(), remainder: 0 }).unwrap();
    /// let x = g.input("x", "2|d").unwrap();
    /// g.require(x, "2|12").unwrap();
    /// assert_eq!(g.solve().unwrap_err().kind(), "size_bound"); // 12 is not a multiple of 8
    /// ```
    pub fn bound_size(&mut self, s: SizeId, bound: SizeBound) -> Result<(), GraphError> {
        let (name, v) = self.size_var(s)?;
        let statement = self.size_statements;
        match bound {
            SizeBound::Equal(n) => self.size_is(s, n, bound.to_string())?,
            SizeBound::AtLeast(n) => {
                let why = self.size_origin(name, format!(">= {n}"));
                if let Some(min) = NonZeroU64::new(n) {
                    self.solver.transaction(|solver| {
                        solver.add(Constraint::DimAtLeast {
                            dim: Dim::Var(v),
                            min,
                            why,
                        })
                    })?;
                }
            }
            // Numbered like every size statement, so that origins and
            // errors can point at it.
            SizeBound::AtMost(_) | SizeBound::Remainder { .. } => {
                self.size_origin(name, bound.to_string());
            }
        }
        self.size_bounds.push_back((s, bound, statement));
        Ok(())
    }

    /// Two sizes are equal, for a size statement; undone on failure.
    pub(crate) fn equal_sizes(
        &mut self,
        a: Dim,
        b: Dim,
        why: shape_solver::Why,
    ) -> Result<(), GraphError> {
        self.solver
            .transaction(|solver| solver.add(Constraint::DimEq { a, b, why }))?;
        Ok(())
    }

    /// `size a == b`: the two sizes are equal.
    pub fn equate_sizes(&mut self, a: SizeId, b: SizeId) -> Result<(), GraphError> {
        let (name, v) = self.size_var(a)?;
        let (other, w) = self.size_var(b)?;
        let why = self.size_origin(name, format!("== {other}"));
        self.equal_sizes(Dim::Var(v), Dim::Var(w), why)
    }

    /// `size s = label of t`: the size is that of the axis `label` names
    /// in the spec of the operation that made `t` (its result first, then
    /// its operands, so a label the result sums away is found too), or in
    /// `t`'s declared spec.
    pub fn capture_label(&mut self, s: SizeId, t: TensorId, label: &str) -> Result<(), GraphError> {
        self.capture(s, t, label, false)
    }

    /// `size s = ..r.. of t`: the size is the number of elements of the
    /// axes the row variable `r` stands for in the spec of the operation
    /// that made `t`, or in `t`'s declared spec.
    pub fn capture_count(
        &mut self,
        s: SizeId,
        t: TensorId,
        row_var: &str,
    ) -> Result<(), GraphError> {
        self.capture(s, t, row_var, true)
    }

    fn capture(
        &mut self,
        s: SizeId,
        t: TensorId,
        name: &str,
        count: bool,
    ) -> Result<(), GraphError> {
        let (size_name, d) = self.size_var(s)?;
        let tref = self.tensor_ref(t)?;
        let not_found = || GraphError::NoSuchName {
            tensor: tref.clone(),
            name: Arc::from(name),
            row_var: count,
        };
        // The specs that can write the name, with the tensor each is of.
        let mut specs: Vec<(TensorId, Arc<ShapeSpec>)> = Vec::new();
        match self.producer(t).and_then(|op| self.op_node(op)) {
            Some((op, operands, result)) => {
                let tensors = std::iter::once(result).chain(operands.iter().copied());
                for (position, tensor) in tensors.enumerate() {
                    if let Some(spec) = op.spec_part(position) {
                        specs.push((tensor, Arc::new(spec.clone())));
                    }
                }
            }
            None => specs.extend(self.tensor(t)?.spec().cloned().map(|s| (t, s))),
        }
        let found = specs.iter().find_map(|(tensor, spec)| {
            let place = spec.find(name)?;
            let is_row = matches!(place, shape_core::spec::SpecPlace::RowVar { .. });
            (is_row == count).then(|| (*tensor, spec.clone(), place))
        });
        let Some((tensor, spec, place)) = found else {
            return Err(not_found());
        };
        let what = if count {
            format!("= ..{name}.. of {}", tref.name)
        } else {
            format!("= {name} of {}", tref.name)
        };
        let why = self.size_origin(size_name, what);
        let kind = match place {
            shape_core::spec::SpecPlace::Axis { kind, .. }
            | shape_core::spec::SpecPlace::RowVar { kind } => kind,
        };
        let Some(r) = spec.row(kind) else {
            return Err(not_found());
        };
        let tensor_row = self.tensor(tensor)?.row(kind).into_owned();
        self.solver.transaction(|solver| {
            let mut fresh = |at: Option<usize>, len: usize| -> Vec<Dim> {
                (0..len)
                    .map(|i| {
                        if Some(i) == at {
                            Dim::Var(d)
                        } else {
                            Dim::Var(solver.fresh_dim())
                        }
                    })
                    .collect()
            };
            let (lead, trail) = match place {
                shape_core::spec::SpecPlace::Axis {
                    leading: true,
                    index,
                    ..
                } => (Some(index), None),
                shape_core::spec::SpecPlace::Axis { index, .. } => (None, Some(index)),
                shape_core::spec::SpecPlace::RowVar { .. } => (None, None),
            };
            let before = fresh(lead, r.before.len());
            let after = fresh(trail, r.axes.len());
            let mut constraints = Vec::new();
            let template = match &r.row_var {
                Some(_) => {
                    let v = solver.fresh_row();
                    if count {
                        constraints.push(Constraint::RowCount {
                            row: Row::open(v, Vec::new()),
                            count: Dim::Var(d),
                            why,
                        });
                    }
                    shape_solver::flank::flanked_row(
                        before,
                        v,
                        after,
                        || solver.fresh_row(),
                        why,
                        &mut constraints,
                    )
                }
                None => Row::closed(after),
            };
            constraints.push(Constraint::RowEq {
                a: tensor_row,
                b: template,
                why,
            });
            solver.add_all(constraints)
        })?;
        Ok(())
    }
}

impl Graph {
    /// Refuses a solution in which a parameter's shape, or a named size of
    /// an input, is known only by finalization's defaults (OCANNL's "You
    /// forgot to specify the hidden dimension(s)"): a default would give
    /// it no axes or size 1 in silence. Results keep the defaults.
    ///
    /// A parameter's row may be empty by a default only when it is the
    /// input row of a parameter used by pointwise operations alone (a
    /// bias), as in OCANNL.
    fn check_given(&self, solution: &Solution) -> Result<(), GraphError> {
        let mut pointwise_only: Option<HashSet<TensorId>> = None;
        for (i, t) in self.tensors.iter().enumerate() {
            if t.kind() != TensorKind::Parameter {
                continue;
            }
            let id = TensorId(i);
            for kind in RowKind::ALL {
                match solution.defaults_in(&t.row(kind))? {
                    RowDefaults::None => {}
                    RowDefaults::EmptyRow => {
                        let only = pointwise_only.get_or_insert_with(|| self.used_only_pointwise());
                        if kind != RowKind::Input || !only.contains(&id) {
                            return Err(self.not_given(id, NotGiven::Row(kind)));
                        }
                    }
                    RowDefaults::Axis(axis) => {
                        return Err(self.not_given(id, NotGiven::Axis(kind, axis)));
                    }
                }
            }
        }
        // A named size that only a default gives (`size d == e`, nothing
        // else) is refused like an input's named size.
        for (name, v) in self.sizes.iter() {
            if solution.sized_by_default(&Dim::Var(*v))? {
                return Err(GraphError::NotGiven {
                    tensor: TensorRef::new(usize::MAX, name.clone()),
                    what: NotGiven::Size(name.clone()),
                });
            }
        }
        for (id, name, v) in self.input_labels.iter() {
            if solution.sized_by_default(&Dim::Var(*v))? {
                return Err(self.not_given(*id, NotGiven::Named(name.clone())));
            }
        }
        Ok(())
    }

    /// Parameters that are operands of pointwise operations only.
    fn used_only_pointwise(&self) -> HashSet<TensorId> {
        let mut other = HashSet::new();
        for node in self.ops.iter() {
            if !node.op.pointwise() {
                other.extend(node.operands.as_slice().iter().copied());
            }
        }
        (0..self.tensors.len())
            .map(TensorId)
            .filter(|t| !other.contains(t))
            .collect()
    }

    fn not_given(&self, t: TensorId, what: NotGiven) -> GraphError {
        let tensor = self
            .tensor_ref(t)
            .unwrap_or_else(|_| TensorRef::new(t.0, Arc::from("?")));
        GraphError::NotGiven { tensor, what }
    }
}

/// `prefix` followed by `n` in decimal, written on the stack: one
/// allocation, and no formatting machinery (a name per operation adds up).
fn numbered_name(prefix: u8, n: usize) -> Arc<str> {
    let mut buf = [0u8; 24];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    i -= 1;
    buf[i] = prefix;
    Arc::from(std::str::from_utf8(&buf[i..]).expect("an ASCII prefix and digits"))
}

/// The result of [`Graph::solve`]: every tensor's shape, fully solved.
///
/// Every variable is solved; a tensor's shape is read out of the solution
/// the first time it is asked for, so solving costs nothing per tensor
/// that is never looked at.
#[derive(Clone, Debug)]
pub struct SolvedGraph {
    pub(crate) graph: Graph,
    /// The shapes read out so far, in blocks of [`SHAPE_BLOCK`] tensors
    /// allocated on first use: solving a large graph to read a few shapes
    /// does not allocate (and fault in) a cell for every tensor.
    pub(crate) shapes: Vec<OnceLock<ShapeBlock>>,
    pub(crate) solution: Arc<Solution>,
    /// The values of the run-time sizes, once bound.
    pub(crate) bound: Option<Arc<crate::binding::BoundSizes>>,
}

pub(crate) const SHAPE_BLOCK: usize = 64;
pub(crate) type ShapeBlock = Box<[OnceLock<SolvedShape>; SHAPE_BLOCK]>;

impl SolvedGraph {
    /// The tensor's solved shape.
    pub fn shape(&self, t: TensorId) -> Result<&SolvedShape, GraphError> {
        let block = self
            .shapes
            .get(t.0 / SHAPE_BLOCK)
            .filter(|_| t.0 < self.graph.tensors.len())
            .ok_or(GraphError::UnknownTensor(t.0))?
            .get_or_init(|| Box::new(std::array::from_fn(|_| OnceLock::new())));
        let cell = &block[t.0 % SHAPE_BLOCK];
        if let Some(s) = cell.get() {
            return Ok(s);
        }
        let shape = self.bind_shape(t, self.symbolic_shape(t)?)?;
        Ok(cell.get_or_init(|| shape))
    }

    /// The graph that was solved.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The solved environment.
    pub fn solution(&self) -> &Solution {
        &self.solution
    }

    /// Why axis `axis` (from the left) of row `kind` of tensor `t` has its
    /// size: the declaration, operation or default that fixed it.
    pub fn explain(
        &self,
        t: TensorId,
        kind: RowKind,
        axis: usize,
    ) -> Result<Provenance, GraphError> {
        let dims = self.solution.row_dims(&self.graph.tensor(t)?.row(kind))?;
        let Some(dim) = dims.get(axis) else {
            return Err(GraphError::NoSuchAxis {
                tensor: self.graph.tensor_ref(t)?,
                kind,
                axis,
                len: dims.len(),
            });
        };
        Ok(self.solution.provenance(dim)?)
    }

    /// The solved value of a size the graph names (a run-time size's
    /// bound value; [`GraphError::UnboundSize`] before it is bound).
    pub fn size(&self, s: SizeId) -> Result<u64, GraphError> {
        let (name, v) = self.graph.size_var(s)?;
        let dim = self.solution.dim(&Dim::Var(v))?;
        match dim.extent() {
            shape_core::Size::Static(n) => Ok(*n),
            shape_core::Size::Symbolic(sym) => self
                .eval_size(sym)
                .map_err(|_| GraphError::UnboundSize { name, tensor: None }),
            shape_core::Size::Ragged => Err(GraphError::RaggedSize { name }),
        }
    }

    /// The solved size a graph's size has: a number, or the run-time size
    /// itself (before and after binding).
    pub fn size_dim(&self, s: SizeId) -> Result<KnownDim, GraphError> {
        let (_, v) = self.graph.size_var(s)?;
        Ok(self.solution.dim(&Dim::Var(v))?)
    }

    /// Every tensor with its name and solved shape, in creation order.
    pub fn iter(&self) -> impl Iterator<Item = Result<(TensorId, &str, &SolvedShape), GraphError>> {
        self.graph.tensors.iter().enumerate().map(|(i, t)| {
            let id = TensorId(i);
            Ok((id, &*t.name, self.shape(id)?))
        })
    }
}

impl fmt::Display for SolvedGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for item in self.iter() {
            match item {
                Ok((_, name, shape)) => writeln!(f, "{name}: {shape}")?,
                Err(e) => writeln!(f, "{e}")?,
            }
        }
        Ok(())
    }
}
