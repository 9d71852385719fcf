//! Rows: the batch, input or output axes of a shape.

use std::fmt;
use std::num::NonZeroU64;

use crate::dim::Dim;

/// A row variable: stands for any number of leading axes of a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RowVar(pub u32);

impl RowVar {
    /// The index of this variable in the solver's environment.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for RowVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "r{}", self.0)
    }
}

/// Which of a shape's three rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RowKind {
    /// Batch axes: shared by the data, never consumed by an operation.
    Batch,
    /// Input axes: consumed by composition (the right-hand side of `->`).
    Input,
    /// Output axes: produced by the tensor (the left-hand side of `->`).
    Output,
}

impl RowKind {
    /// The three kinds in memory order: batch, output, input (input last).
    pub const MEMORY_ORDER: [RowKind; 3] = [RowKind::Batch, RowKind::Output, RowKind::Input];
    /// The three kinds in spec order: `batch|input->output`.
    pub const ALL: [RowKind; 3] = [RowKind::Batch, RowKind::Input, RowKind::Output];

    /// The kind's name in lower case.
    pub fn name(self) -> &'static str {
        match self {
            RowKind::Batch => "batch",
            RowKind::Input => "input",
            RowKind::Output => "output",
        }
    }
}

impl fmt::Display for RowKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether a row may still grow leading axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RowTail {
    /// The row has exactly its dims; it can still broadcast against longer
    /// rows where it is an operand.
    Closed,
    /// The row starts with a row variable that may stand for more axes.
    Open(RowVar),
}

/// A constraint on all the axes of a row, including those a row variable
/// stands for.
///
/// More kinds (exact dims, strided element counts) are added as variants;
/// not `#[non_exhaustive]`, for the same reason as [`crate::Dim`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum RowConstraint {
    /// No constraint beyond the dims themselves.
    #[default]
    Unconstrained,
    /// The product of all the row's dims is exactly this number.
    TotalElems(NonZeroU64),
}

/// A row of axes: an optional leading row variable followed by dims.
///
/// Broadcasting aligns rows at their trailing end, so a row variable stands
/// for leading axes and substituting it prepends to `dims`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Row {
    /// The trailing axes that are spelled out.
    pub dims: Vec<Dim>,
    /// Whether a row variable stands for further leading axes.
    pub tail: RowTail,
    /// A constraint over the whole row.
    pub constraint: RowConstraint,
}

impl Row {
    /// A closed row of exactly these dims.
    pub fn closed(dims: Vec<Dim>) -> Row {
        Row {
            dims,
            tail: RowTail::Closed,
            constraint: RowConstraint::Unconstrained,
        }
    }

    /// An open row: `var` followed by `dims`.
    pub fn open(var: RowVar, dims: Vec<Dim>) -> Row {
        Row {
            dims,
            tail: RowTail::Open(var),
            constraint: RowConstraint::Unconstrained,
        }
    }

    /// The empty closed row.
    pub fn empty() -> Row {
        Row::closed(Vec::new())
    }

    /// This row with the given constraint.
    pub fn with_constraint(mut self, constraint: RowConstraint) -> Row {
        self.constraint = constraint;
        self
    }

    /// The leading row variable, if the row is open.
    pub fn row_var(&self) -> Option<RowVar> {
        match self.tail {
            RowTail::Open(v) => Some(v),
            RowTail::Closed => None,
        }
    }

    /// Whether the row has a fixed number of axes.
    pub fn is_closed(&self) -> bool {
        self.tail == RowTail::Closed
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        if let RowTail::Open(v) = self.tail {
            write!(f, "..{v}..")?;
            first = false;
        }
        for d in &self.dims {
            if !first {
                f.write_str(", ")?;
            }
            first = false;
            write!(f, "{d}")?;
        }
        Ok(())
    }
}
