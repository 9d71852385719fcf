//! Shape errors: what conflicts, where, and where each fact came from.

use std::fmt;
use std::sync::Arc;

use shape_core::KnownDim;

use crate::origin::{Origin, Relation};

/// A known size together with the place it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DimFact {
    /// The size (and label).
    pub value: KnownDim,
    /// The constraint that introduced this size.
    pub origin: Arc<Origin>,
    /// The axis within that constraint's row, counted from the end.
    pub axis_from_end: Option<u32>,
}

impl DimFact {
    /// Where the size came from, with the axis when there is one.
    pub fn place(&self) -> String {
        match self.axis_from_end {
            Some(a) => format!("{} at {}", self.origin, AxisFromEnd(a)),
            None => self.origin.to_string(),
        }
    }
}

impl fmt::Display for DimFact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}, from {}", self.value, self.place())
    }
}

/// An axis position written Python-style from the end: `axis -1` is last.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AxisFromEnd(pub u32);

impl fmt::Display for AxisFromEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "axis -{}", self.0 + 1)
    }
}

fn at_axis(axis: &Option<u32>) -> String {
    match axis {
        Some(a) => format!(", at {}", AxisFromEnd(*a)),
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
        }
    }
}

/// A failure to solve shape constraints.
///
/// Every variant carries the constraint in which the failure showed up
/// (`context`), which names the operation, the tensors and the rows.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ShapeError {
    /// Two sizes that must agree do not.
    #[error(
        "size mismatch in {context}{}: {} {} {}; {} comes from {}, {} from {}",
        at_axis(axis), left.value,
        match relation { Relation::Equal => "is not equal to", Relation::Broadcasts => "cannot broadcast from" },
        right.value, left.value, left.place(), right.value, right.place()
    )]
    DimMismatch {
        /// The constraint where the conflict showed up.
        context: Arc<Origin>,
        /// The axis of the constraint's rows, from the end.
        axis: Option<u32>,
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
        axis: Option<u32>,
        /// One labeled size.
        left: Box<DimFact>,
        /// The other.
        right: Box<DimFact>,
    },
    /// Rows with a fixed number of axes disagree on it.
    #[error(
        "axis count mismatch in {context}: {} {left_row} has {}{left_len} axes but {} {right_row} has {}{right_len}{}",
        match relation { Relation::Equal => "the left row", Relation::Broadcasts => "the result row" },
        if left_row.starts_with("[..") { "at least " } else { "" },
        match relation { Relation::Equal => "the right row", Relation::Broadcasts => "the operand row" },
        if right_row.starts_with("[..") { "at least " } else { "" },
        match relation { Relation::Equal => "", Relation::Broadcasts => "; an operand cannot have more axes than the result it broadcasts to" }
    )]
    AxisCountMismatch {
        /// The constraint.
        context: Arc<Origin>,
        /// Equality or broadcasting.
        relation: Relation,
        /// The left (result) row, printed.
        left_row: String,
        /// Its number of spelled-out axes.
        left_len: usize,
        /// The right (operand) row, printed.
        right_row: String,
        /// Its number of spelled-out axes.
        right_len: usize,
    },
    /// A row variable would need infinitely many axes.
    #[error("infinite number of axes in {context}: the leading axes of a row would have to contain themselves plus more axes ({detail})")]
    InfiniteAxes {
        /// The constraint.
        context: Arc<Origin>,
        /// The row variable, by id (for debugging; messages do not show it).
        row_var: String,
        /// The rows involved.
        detail: String,
    },
    /// A `TotalElems` row cannot divide its total by its known sizes.
    #[error("element count mismatch in {context}: the row {row} must hold {total} elements, but {}", reason.explain(*known_product, *total))]
    TotalElems {
        /// The constraint.
        context: Arc<Origin>,
        /// The row, printed.
        row: String,
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
        /// The row, printed.
        row: String,
        /// The required number of elements.
        total: u64,
        /// How many sizes are unknown.
        unknowns: usize,
    },
    /// A batch slice of a tensor without batch axes.
    #[error("cannot slice in {context}: the row {row} has no axis to drop")]
    NothingToSlice {
        /// The constraint.
        context: Arc<Origin>,
        /// The row, printed.
        row: String,
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
            | ShapeError::InfiniteAxes { .. }
            | ShapeError::StepLimit { .. } => ErrorClass::Conflict,
            ShapeError::Underdetermined { .. } | ShapeError::Unsolved { .. } => {
                ErrorClass::Underdetermined
            }
            ShapeError::UnknownVariable { .. } => ErrorClass::Misuse,
        }
    }

    /// A stable, machine-readable name for the error's kind.
    pub fn kind(&self) -> &'static str {
        match self {
            ShapeError::DimMismatch { .. } => "dim_mismatch",
            ShapeError::LabelMismatch { .. } => "label_mismatch",
            ShapeError::AxisCountMismatch { .. } => "axis_count_mismatch",
            ShapeError::InfiniteAxes { .. } => "infinite_axes",
            ShapeError::TotalElems { .. } => "total_elems",
            ShapeError::Underdetermined { .. } => "underdetermined",
            ShapeError::NothingToSlice { .. } => "nothing_to_slice",
            ShapeError::UnknownVariable { .. } => "unknown_variable",
            ShapeError::Unsolved { .. } => "unsolved",
            ShapeError::StepLimit { .. } => "step_limit",
        }
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
            | ShapeError::NothingToSlice { context, .. }
            | ShapeError::StepLimit { context, .. } => Some(context),
            ShapeError::UnknownVariable { .. } | ShapeError::Unsolved { .. } => None,
        }
    }
}
