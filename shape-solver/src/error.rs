//! Shape errors: what conflicts, where, and where each fact came from.

use std::fmt;
use std::sync::Arc;

use shape_core::{KnownDim, RowVar};

use crate::origin::{Origin, Relation};

/// A known size together with the place it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DimFact {
    /// The size (and label).
    pub value: KnownDim,
    /// The constraint that introduced this size.
    pub origin: Arc<Origin>,
    /// The axis within that constraint's row, counted from the end.
    pub axis_from_end: Option<AxisFromEnd>,
}

impl DimFact {
    /// Where the size came from, with the axis when there is one.
    pub fn place(&self) -> String {
        match self.axis_from_end {
            Some(a) => format!("{} at {}", self.origin, a),
            None => self.origin.to_string(),
        }
    }
}

impl fmt::Display for DimFact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, from {}", self.value, self.place())
    }
}

/// An axis counted from the end of its row, written Python-style in
/// messages and in `Debug` alike: the last axis is `axis -1`
/// (`AxisFromEnd(-1)`), the one before it `-2`. Errors, guards and
/// provenance carry axes in this one form.
///
/// ```
/// use shape_solver::AxisFromEnd;
/// let last = AxisFromEnd::last();
/// assert_eq!(last.to_string(), "axis -1");
/// assert_eq!(format!("{last:?}"), "AxisFromEnd(-1)");
/// assert_eq!(last.python_index(), -1);
/// assert_eq!(AxisFromEnd::from_python(-2), Some(AxisFromEnd::before_last(1)));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct AxisFromEnd(u32);

impl AxisFromEnd {
    /// The last axis of a row (`-1`).
    pub fn last() -> AxisFromEnd {
        AxisFromEnd(0)
    }

    /// The axis `n` places before the last (`-1 - n`).
    pub fn before_last(n: u32) -> AxisFromEnd {
        AxisFromEnd(n)
    }

    /// The axis of a Python-style negative index (`-1` is the last);
    /// `None` for an index of 0 or more.
    pub fn from_python(index: i64) -> Option<AxisFromEnd> {
        let n = index.checked_neg()?.checked_sub(1)?;
        u32::try_from(n).ok().map(AxisFromEnd)
    }

    /// The Python-style index: `-1` for the last axis.
    pub fn python_index(self) -> i64 {
        -i64::from(self.0) - 1
    }

    /// How many axes come after it in its row (0 for the last).
    pub fn after(self) -> u32 {
        self.0
    }

    /// The position from the left in a row of `len` axes, if it is in it.
    pub fn from_left(self, len: usize) -> Option<usize> {
        len.checked_sub(1)?.checked_sub(self.0 as usize)
    }
}

impl fmt::Display for AxisFromEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "axis {}", self.python_index())
    }
}

impl fmt::Debug for AxisFromEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AxisFromEnd({})", self.python_index())
    }
}

/// What two mismatched sizes break: `784 cannot broadcast from 100`, or
/// for a matrix product's tied axes `the inner sizes 784 and 100 differ`.
fn mismatch(context: &Origin, relation: Relation, left: &DimFact, right: &DimFact) -> String {
    let (l, r) = (&left.value, &right.value);
    if context.is_contraction() {
        return format!(
            "the inner sizes {l} and {r} differ (the axes a product contracts are equal, or the second is 1)"
        );
    }
    match relation {
        Relation::Equal => format!("{l} is not equal to {r}"),
        Relation::Broadcasts => format!("{l} cannot broadcast from {r}"),
    }
}

/// What two rows of different lengths break, with a hint where the
/// shorter one is a closed empty row of a product's contracted axes (a
/// parameter declared `->4` has an empty input row).
fn axis_counts(
    context: &Origin,
    relation: Relation,
    left_row: &RowFact,
    left_len: usize,
    right_row: &RowFact,
    right_len: usize,
) -> String {
    let at_least = |r: &RowFact| if r.open { "at least " } else { "" };
    let contraction = context.is_contraction();
    let (left, right, rule) = match relation {
        Relation::Equal => ("the left row", "the right row", ""),
        Relation::Broadcasts if contraction => (
            "the row of contracted axes",
            "the row contracted with it",
            "; a product contracts axes that both rows have",
        ),
        Relation::Broadcasts => (
            "the result row",
            "the operand row",
            "; an operand cannot have more axes than the result it broadcasts to",
        ),
    };
    let hint = if contraction && left_len == 0 && !left_row.open {
        " (a spec such as `->4` declares an empty input row; `_->4` or `..i..->4` leaves it open for inference)"
    } else {
        ""
    };
    format!(
        "{left} {left_row} has {}{left_len} axes but {right} {right_row} has {}{right_len}{rule}{hint}",
        at_least(left_row),
        at_least(right_row),
    )
}

fn at_axis(axis: &Option<AxisFromEnd>) -> String {
    match axis {
        Some(a) => format!(", at {a}"),
        None => String::new(),
    }
}

/// Why an element count cannot be met.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TotalElemsReason {
    /// The product of the known sizes does not divide the count.
    NotDivisible,
    /// Every size is known and their product differs from the count.
    NotEqual,
    /// One unknown size appears `power` times and the remaining count has
    /// no integer root of that degree.
    NoIntegerRoot {
        /// How many times the unknown appears.
        power: u32,
    },
    /// The sizes multiply past 2^64 − 1, which no size can hold (a row
    /// count, `size n = ..r.. of x`).
    Overflow,
}

impl TotalElemsReason {
    fn explain(self, known: u64, total: u64) -> String {
        match self {
            TotalElemsReason::NotDivisible => {
                format!("its known sizes multiply to {known}, which does not divide {total}")
            }
            TotalElemsReason::NotEqual => format!("its sizes multiply to {known}"),
            TotalElemsReason::NoIntegerRoot { power } => format!(
                "its known sizes multiply to {known}, and the {} left for one size appearing {power} times is not an integer power",
                total / known.max(1)
            ),
            TotalElemsReason::Overflow => {
                "its sizes multiply past 2^64 - 1, which no size can hold".to_string()
            }
        }
    }
}

/// A row as the solver knew it when an error showed up.
///
/// Printed as `[..., 3, ?]`: axes written before a row variable, `...`
/// where more axes may come (the row has a row variable), then each
/// spelled-out axis after it, `?` where a size is still unknown.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RowFact {
    /// Axes before the row variable (a leading flank); empty for a closed
    /// row.
    pub before: Vec<Option<KnownDim>>,
    /// Whether the row has a row variable, so more axes may come.
    pub open: bool,
    /// The spelled-out axes (after the row variable, if any), outermost
    /// first; `None` where the size is not known yet.
    pub dims: Vec<Option<KnownDim>>,
}

impl RowFact {
    /// A row from its openness and its axes.
    pub fn new(open: bool, dims: Vec<Option<KnownDim>>) -> Self {
        RowFact {
            before: Vec::new(),
            open,
            dims,
        }
    }

    /// This row with axes before its row variable.
    pub fn with_before(mut self, before: Vec<Option<KnownDim>>) -> Self {
        self.before = before;
        self
    }

    /// The number of axes spelled out, on both sides of the row variable.
    pub fn len(&self) -> usize {
        self.before.len() + self.dims.len()
    }

    /// Whether no axis is spelled out.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl fmt::Display for RowFact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let axis = |d: &Option<KnownDim>| match d {
            Some(k) => k.to_string(),
            None => "?".to_string(),
        };
        let dots = self.open.then(|| "...".to_string());
        let parts: Vec<String> = (self.before.iter().map(axis))
            .chain(dots)
            .chain(self.dims.iter().map(axis))
            .collect();
        write!(f, "[{}]", parts.join(", "))
    }
}

/// One constraint between two rows on a cycle that adds axes on every
/// round.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CycleStep {
    /// `result >= operand`: the operand broadcasts to the result.
    Broadcast {
        /// The result's row.
        result: RowFact,
        /// The operand's row.
        operand: RowFact,
    },
    /// A batch slice: `rest` is `whole` without its first axis.
    Slice {
        /// The sliced operand's batch row.
        whole: RowFact,
        /// The result's batch row.
        rest: RowFact,
        /// Whether the operand's row is the one that must grow (else the
        /// result's).
        operand_grows: bool,
    },
}

impl fmt::Display for CycleStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CycleStep::Broadcast { result, operand } => write!(f, "{result} >= {operand}"),
            CycleStep::Slice { whole, rest, .. } => {
                write!(f, "{whole} without its first axis is {rest}")
            }
        }
    }
}

/// Why a row would need infinitely many axes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum AxesCycle {
    /// A row equal to itself with more axes: `[..., 3] = [...]` with the
    /// same row variable on both sides.
    SelfEqual {
        /// The left row.
        left: RowFact,
        /// The right row.
        right: RowFact,
    },
    /// A constraint that would nest one more fresh row variable than any
    /// finite solution needs.
    TooDeep {
        /// The constraint that would add axes again.
        step: CycleStep,
    },
    /// A batch slice whose result shares its row variable with its operand.
    SharedSliceRow,
    /// A cycle of constraints found by the rank analysis: `step` would make
    /// a row longer, and the constraints `via` already make it at least as
    /// long as the row it must exceed.
    Ranks {
        /// The constraint that would make the row longer.
        step: CycleStep,
        /// The constraints on the way, in order.
        via: Vec<Arc<Origin>>,
        /// Axes gained on every round.
        surplus: u64,
        /// Axes the constraints on the way may drop (batch slices).
        cost: u64,
    },
}

impl fmt::Display for AxesCycle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AxesCycle::SelfEqual { left, right } => write!(f, "{left} = {right}"),
            AxesCycle::TooDeep { step } => {
                let among = match step {
                    CycleStep::Broadcast { .. } => "broadcasting constraints",
                    CycleStep::Slice { .. } => "constraints",
                };
                write!(
                    f,
                    "{step}: {among} among row variables form a cycle that adds axes on every round"
                )
            }
            AxesCycle::SharedSliceRow => {
                f.write_str("a batch slice whose result shares its row variable with its operand")
            }
            AxesCycle::Ranks {
                step,
                via,
                surplus,
                cost,
            } => {
                let (lead, what) = match step {
                    CycleStep::Broadcast { .. } => (
                        "the operand's leading axes already number at least the row's",
                        "broadcasting constraints",
                    ),
                    CycleStep::Slice {
                        operand_grows: true,
                        ..
                    } => (
                        "the result's leading axes already number at least the operand's",
                        "constraints",
                    ),
                    CycleStep::Slice { .. } => (
                        "the operand's leading axes already number at least the result's",
                        "constraints",
                    ),
                };
                write!(f, "{step}, and through ")?;
                for (i, o) in via.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", then ")?;
                    }
                    write!(f, "{o}")?;
                }
                write!(f, ", {lead}")?;
                if *cost > 0 {
                    write!(f, " minus {cost}")?;
                }
                let axes = if *surplus == 1 { "axis" } else { "axes" };
                write!(
                    f,
                    ": a cycle of {what} that adds {surplus} {axes} on every round"
                )
            }
        }
    }
}

/// Why the parts of a concatenated axis do not add up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SumReason {
    /// Every size is known and the parts add up to another total.
    NotEqual,
    /// The known parts, with at least 1 for each unknown one, already
    /// exceed the total.
    PartsExceedTotal,
    /// The sum is larger than a size can be (2^64 - 1).
    Overflow,
    /// One unknown part appears several times and the rest of the total
    /// is not a multiple of that count.
    NotDivisible,
    /// Two or more parts are unknown at finalization.
    Underdetermined,
}

impl SumReason {
    fn explain(self) -> &'static str {
        match self {
            SumReason::NotEqual => "the parts do not add up to the whole",
            SumReason::PartsExceedTotal => {
                "the known parts, with at least 1 for each unknown one, exceed the whole"
            }
            SumReason::Overflow => "the parts add up to more than 2^64 - 1",
            SumReason::NotDivisible => {
                "what the known parts leave cannot be split evenly among the repeated unknown one"
            }
            SumReason::Underdetermined => "two or more parts are unknown; give all but one of them",
        }
    }
}

/// Sizes printed `?` where unknown, for messages.
fn sizes_text(parts: &[Option<KnownDim>]) -> String {
    let parts: Vec<String> = parts
        .iter()
        .map(|p| {
            p.as_ref()
                .map_or("?".to_string(), |k| k.extent().to_string())
        })
        .collect();
    parts.join(" + ")
}

/// A failure to solve shape constraints.
///
/// Every variant carries the constraint in which the failure showed up
/// (`context`), which names the operation, the tensors and the rows.
///
/// Its [`kind`](ShapeError::kind) is the variant's name in snake case.
#[derive(
    Clone, Debug, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames,
)]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum ShapeError {
    /// Two sizes that must agree do not.
    #[error(
        "size mismatch in {context}{}: {}; {} comes from {}, {} from {}",
        at_axis(axis), mismatch(context, *relation, left, right),
        left.value, left.place(), right.value, right.place()
    )]
    DimMismatch {
        /// The constraint where the conflict showed up.
        context: Arc<Origin>,
        /// The axis of the constraint's rows, from the end.
        axis: Option<AxisFromEnd>,
        /// Equality, or broadcasting of `right` to `left`.
        relation: Relation,
        /// The result-side (or first) size.
        left: Box<DimFact>,
        /// The operand-side (or second) size.
        right: Box<DimFact>,
    },
    /// Two sizes agree but carry different labels.
    #[error(
        "label mismatch in {context}{}: {} and {} are the same size with different labels; {} comes from {}, {} from {}",
        at_axis(axis), left.value, right.value, left.value, left.place(), right.value, right.place()
    )]
    LabelMismatch {
        /// The constraint where the conflict showed up.
        context: Arc<Origin>,
        /// The axis, from the end.
        axis: Option<AxisFromEnd>,
        /// One labeled size.
        left: Box<DimFact>,
        /// The other.
        right: Box<DimFact>,
    },
    /// Rows with a fixed number of axes disagree on it.
    #[error(
        "axis count mismatch in {context}: {}",
        axis_counts(context, *relation, left_row, *left_len, right_row, *right_len)
    )]
    AxisCountMismatch {
        /// The constraint.
        context: Arc<Origin>,
        /// Equality or broadcasting.
        relation: Relation,
        /// The left (result) row.
        left_row: Box<RowFact>,
        /// Its number of spelled-out axes.
        left_len: usize,
        /// The right (operand) row.
        right_row: Box<RowFact>,
        /// Its number of spelled-out axes.
        right_len: usize,
    },
    /// A row variable would need infinitely many axes.
    #[error("infinite number of axes in {context}: the leading axes of a row would have to contain themselves plus more axes ({cycle})")]
    InfiniteAxes {
        /// The constraint.
        context: Arc<Origin>,
        /// The row variable that would grow without end (messages do not
        /// show its id).
        row_var: RowVar,
        /// The rows and constraints involved.
        cycle: Box<AxesCycle>,
    },
    /// A `TotalElems` row cannot divide its total by its known sizes.
    #[error("element count mismatch in {context}: the row {row} must hold {total} elements, but {}", reason.explain(*known_product, *total))]
    TotalElems {
        /// The constraint.
        context: Arc<Origin>,
        /// The row.
        row: Box<RowFact>,
        /// The required number of elements.
        total: u64,
        /// The product of the row's known sizes (saturating).
        known_product: u64,
        /// What exactly does not fit.
        reason: TotalElemsReason,
    },
    /// A `TotalElems` row still has several unknown sizes at finalization.
    #[error("not enough information in {context}: the row {row} must hold {total} elements, but {unknowns} of its sizes are unknown; give all but one of them")]
    Underdetermined {
        /// The constraint.
        context: Arc<Origin>,
        /// The row.
        row: Box<RowFact>,
        /// The required number of elements.
        total: u64,
        /// How many sizes are unknown.
        unknowns: usize,
    },
    /// A row count (`size n = ..r.. of x`) whose size and row nothing
    /// decides.
    #[error("not enough information in {context}: neither the size nor the row {row} whose element count it is is given; give one of them (a count is never guessed)")]
    CountUnderdetermined {
        /// The constraint.
        context: Arc<Origin>,
        /// The row.
        row: Box<RowFact>,
    },
    /// The parts of a concatenated axis do not add up to its size.
    #[error("size mismatch in {context}: the concatenated axis is {} = {}: {}", total.as_ref().map_or("?".to_string(), |t| t.extent().to_string()), sizes_text(parts), reason.explain())]
    SumMismatch {
        /// The constraint.
        context: Arc<Origin>,
        /// The whole axis, when known.
        total: Option<KnownDim>,
        /// The parts, in order, where known.
        parts: Vec<Option<KnownDim>>,
        /// What does not fit.
        reason: SumReason,
    },
    /// A size that would have to be solved from a run-time size by
    /// arithmetic the e-graph cannot invert (a difference, a quotient
    /// that does not divide, a convolution's window).
    #[error("in {context}: {what} would depend on a run-time size ({size}) in a way inference cannot express; write that size as a number, or give the unknown one")]
    SymbolicUnsupported {
        /// The constraint.
        context: Arc<Origin>,
        /// What would have been solved.
        what: &'static str,
        /// The run-time size involved.
        size: String,
    },
    /// Arithmetic on a ragged (`var`) axis, whose length differs from row
    /// to row: an element count, a concatenation along it, a convolution
    /// over it or a fixed index into it.
    #[error("in {context}: {what} over the ragged axis `var` from {}, whose rows have lengths of their own, is not supported; only elementwise operations, reductions along it and assignments take ragged axes", ragged.place())]
    RaggedUnsupported {
        /// The constraint.
        context: Arc<Origin>,
        /// What would have been computed.
        what: &'static str,
        /// The ragged axis and where it came from.
        ragged: Box<DimFact>,
    },
    /// Convolution sizes that do not fit (see [`crate::Constraint::DimAffine`]).
    #[error(
        "convolution sizes do not fit in {context}{}: {}",
        at_axis(axis),
        problem
    )]
    Affine {
        /// The constraint.
        context: Arc<Origin>,
        /// The input axis, counted from the end of the context's row.
        axis: Option<AxisFromEnd>,
        /// What does not fit.
        problem: AffineProblem,
    },
    /// An axis with fewer elements than a fixed index into it needs.
    #[error("axis too short in {context}{}: it needs at least {min} elements but has {}, which comes from {}", at_axis(axis), found.value, found.place())]
    AxisTooShort {
        /// The constraint that needs the elements (an einsum's fixed index).
        context: Arc<Origin>,
        /// The axis, counted from the end of the context's row.
        axis: Option<AxisFromEnd>,
        /// The fewest elements the axis may have.
        min: u64,
        /// The size it has, and where that came from.
        found: Box<DimFact>,
    },
    /// A batch slice of a tensor without batch axes.
    #[error("cannot slice in {context}: the row {row} has no axis to drop")]
    NothingToSlice {
        /// The constraint.
        context: Arc<Origin>,
        /// The row.
        row: Box<RowFact>,
    },
    /// A variable that finalization could not close, or that was read
    /// before finalization.
    #[error("the {what} variable {id} has no value: it was read before finalization, or no rule could close it")]
    Unsolved {
        /// `dim` or `row`.
        what: &'static str,
        /// The variable's id.
        id: u32,
    },
    /// Solving took more steps than a problem of this size can need: the
    /// constraints keep producing work, as a cycle of broadcasts that adds
    /// axes on every round would (one that the solver's own checks for such
    /// cycles did not catch).
    #[error("step limit reached in {context}: {steps} steps, more than the {limit} that constraints of this size may take; they keep producing new work, as a cycle of broadcasting constraints that adds axes on every round would (or the solver's step budget is too small for them)")]
    StepLimit {
        /// The constraint being simplified when the limit was reached.
        context: Arc<Origin>,
        /// Steps taken.
        steps: u64,
        /// The limit for this problem ([`crate::Solver::step_limit`]).
        limit: u64,
    },
    /// A dimension or row variable that this solver never created.
    #[error("unknown {what} variable {id}: it was not created by this solver")]
    UnknownVariable {
        /// `dim` or `row`.
        what: &'static str,
        /// The variable's id.
        id: u32,
    },
}

/// Why the sizes of a convolution do not fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AffineProblem {
    /// The input size, when known.
    pub input: Option<u64>,
    /// The output size, when known.
    pub over: Option<u64>,
    /// The kernel size, when known.
    pub kernel: Option<u64>,
    /// The stride.
    pub stride: u64,
    /// The dilation.
    pub dilation: u64,
    /// Whether the input is padded.
    pub padded: bool,
}

impl AffineProblem {
    /// How many of the sizes that the relation involves are unknown (the
    /// kernel does not enter a padded convolution's sizes).
    pub fn unknowns(&self) -> usize {
        let kernel = if self.padded { None } else { Some(self.kernel) };
        [Some(self.input), Some(self.over), kernel]
            .into_iter()
            .flatten()
            .filter(Option::is_none)
            .count()
    }
}

impl fmt::Display for AffineProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: Option<u64>| v.map_or("?".to_string(), |n| n.to_string());
        let (i, o, k, s, d) = (
            show(self.input),
            show(self.over),
            show(self.kernel),
            self.stride,
            self.dilation,
        );
        if self.padded {
            write!(
                f,
                "a padded input has stride × output elements, but the input has {i}, the stride is {s} and the output has {o}"
            )?;
            if self.unknowns() >= 2 {
                write!(
                    f,
                    " (both unknown: give one of them, by a declared or required shape or a size statement; an input computed from operands of size 1 along this axis is not sized by them, since 1 broadcasts; a convolution's sizes are never guessed)"
                )?;
            } else if self.over.is_none() {
                write!(f, " (the stride does not divide the input)")?;
            }
            Ok(())
        } else {
            write!(
                f,
                "an input without padding has stride × (output − 1) + dilation × (kernel − 1) + 1 elements, but the input has {i}, the output {o}, the kernel {k}, the stride is {s} and the dilation {d}"
            )?;
            if self.unknowns() >= 2 {
                let missing: Vec<&str> = [
                    ("the input", self.input),
                    ("the output", self.over),
                    ("the kernel", self.kernel),
                ]
                .into_iter()
                .filter(|(_, v)| v.is_none())
                .map(|(name, _)| name)
                .collect();
                write!(
                    f,
                    " ({} unknown: give all but one, by a declared or required shape or a size statement; an input computed from operands of size 1 along this axis is not sized by them, since 1 broadcasts; a convolution's sizes are never guessed)",
                    missing.join(" and ")
                )?;
            } else if self.over.is_none() || self.kernel.is_none() {
                write!(f, " (no whole size of at least 1 fits the unknown one)")?;
            }
            Ok(())
        }
    }
}

/// The broad class of a [`ShapeError`]: what the user has to do about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// Facts contradict each other: sizes, labels, axis counts, element
    /// counts, a row that would need infinitely many axes. Which constraint
    /// reports it, and so the precise [`ShapeError::kind`], depends on which
    /// fact came last.
    Conflict,
    /// The constraints leave a choice that the solver will not guess.
    Underdetermined,
    /// The API was given a variable from another solver.
    Misuse,
}

impl ShapeError {
    /// The error's class; the same constraints added in any order fail
    /// with the same class.
    pub fn class(&self) -> ErrorClass {
        match self {
            ShapeError::DimMismatch { .. }
            | ShapeError::LabelMismatch { .. }
            | ShapeError::AxisCountMismatch { .. }
            | ShapeError::TotalElems { .. }
            | ShapeError::NothingToSlice { .. }
            | ShapeError::AxisTooShort { .. }
            | ShapeError::InfiniteAxes { .. }
            | ShapeError::StepLimit { .. } => ErrorClass::Conflict,
            ShapeError::SymbolicUnsupported { .. } => ErrorClass::Underdetermined,
            ShapeError::RaggedUnsupported { .. } => ErrorClass::Conflict,
            ShapeError::Underdetermined { .. }
            | ShapeError::CountUnderdetermined { .. }
            | ShapeError::Unsolved { .. } => ErrorClass::Underdetermined,
            ShapeError::SumMismatch { reason, .. } => match reason {
                SumReason::Underdetermined => ErrorClass::Underdetermined,
                _ => ErrorClass::Conflict,
            },
            ShapeError::Affine { problem, .. } if problem.unknowns() >= 2 => {
                ErrorClass::Underdetermined
            }
            ShapeError::Affine { .. } => ErrorClass::Conflict,
            ShapeError::UnknownVariable { .. } => ErrorClass::Misuse,
        }
    }

    /// For a size mismatch, what the two sizes break, as the message says
    /// it (`784 cannot broadcast from 100`, `the inner sizes 784 and 100
    /// differ`); `None` for other errors.
    pub fn mismatch_text(&self) -> Option<String> {
        match self {
            ShapeError::DimMismatch {
                context,
                relation,
                left,
                right,
                ..
            } => Some(mismatch(context, *relation, left, right)),
            _ => None,
        }
    }

    /// A stable, machine-readable name for the error's kind: the variant's
    /// name in snake case (`dim_mismatch`, `infinite_axes`, ...).
    pub fn kind(&self) -> &'static str {
        self.into()
    }

    /// The constraint in which the error showed up, if any.
    pub fn context(&self) -> Option<&Origin> {
        match self {
            ShapeError::DimMismatch { context, .. }
            | ShapeError::LabelMismatch { context, .. }
            | ShapeError::AxisCountMismatch { context, .. }
            | ShapeError::InfiniteAxes { context, .. }
            | ShapeError::TotalElems { context, .. }
            | ShapeError::Underdetermined { context, .. }
            | ShapeError::CountUnderdetermined { context, .. }
            | ShapeError::NothingToSlice { context, .. }
            | ShapeError::AxisTooShort { context, .. }
            | ShapeError::Affine { context, .. }
            | ShapeError::SumMismatch { context, .. }
            | ShapeError::SymbolicUnsupported { context, .. }
            | ShapeError::RaggedUnsupported { context, .. }
            | ShapeError::StepLimit { context, .. } => Some(context),
            ShapeError::UnknownVariable { .. } | ShapeError::Unsolved { .. } => None,
        }
    }
}
