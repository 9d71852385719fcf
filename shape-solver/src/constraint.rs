//! The constraint language.

use std::num::NonZeroU64;

use shape_core::{Dim, Row};

use crate::origin::Why;

/// One constraint over dims and rows.
///
/// `cur >= subr` is broadcasting: `cur` belongs to the tensor that is
/// computed, `subr` to an operand that may be smaller than expected. For
/// known sizes `n >= m` holds when `n = m` or `m = 1`; for rows, `cur` has
/// at least as many axes as `subr` and is `>=` axis by axis, aligned at the
/// end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Constraint {
    /// Two dims are equal.
    DimEq {
        /// One side.
        a: Dim,
        /// The other side.
        b: Dim,
        /// Why.
        why: Why,
    },
    /// `cur >= subr` for one axis.
    DimIneq {
        /// The broadcast-to side.
        cur: Dim,
        /// The broadcast-from side.
        subr: Dim,
        /// Why.
        why: Why,
    },
    /// Two rows are equal: same number of axes, equal dims.
    RowEq {
        /// One side.
        a: Row,
        /// The other side.
        b: Row,
        /// Why.
        why: Why,
    },
    /// `cur >= subr` for a whole row.
    RowIneq {
        /// The broadcast-to side.
        cur: Row,
        /// The broadcast-from side.
        subr: Row,
        /// Why.
        why: Why,
    },
    /// `dest >= source` one way only: an assignment into a declared shape
    /// (`d: 2, 3 <- s`). Sizes flow from `source` to `dest` (a source size
    /// above 1 is the destination's), never back: unlike
    /// [`Constraint::RowIneq`] it gives the source no upper bound, so a
    /// source nothing else sizes closes as an unused intermediate would,
    /// and is then checked against the destination. Waits while either row
    /// is open and for the source's unknown sizes.
    Assign {
        /// The destination's row.
        dest: Row,
        /// The source's row.
        source: Row,
        /// Why.
        why: Why,
    },
    /// The product of the row's dims is `total`.
    TotalElems {
        /// The row.
        row: Row,
        /// The number of elements.
        total: NonZeroU64,
        /// Why.
        why: Why,
    },
    /// `total` is the sum of `parts` (the axis of a concatenation). Waits
    /// until all but one of the sizes are known.
    DimSum {
        /// The whole axis.
        total: Dim,
        /// The parts, in order.
        parts: Vec<Dim>,
        /// Why.
        why: Why,
    },
    /// `dim` has at least `min` elements: an einsum's fixed index
    /// `min - 1` addresses it. Waits while the size is unknown;
    /// finalization then closes the size to `min` where its defaults would
    /// have chosen less.
    DimAtLeast {
        /// The axis.
        dim: Dim,
        /// The fewest elements it may have.
        min: NonZeroU64,
        /// Why.
        why: Why,
    },
    /// A convolution's sizes: with `padded`, `input = stride × over`;
    /// without, `input = stride × (over − 1) + dilation × (kernel − 1) + 1`.
    /// Any one unknown follows from the others; waits until it can.
    DimAffine {
        /// The axis the window slides over.
        input: Dim,
        /// The output axis.
        over: Dim,
        /// The kernel axis (1 for a kernel of one tap).
        kernel: Dim,
        /// How far the window moves per output element.
        stride: NonZeroU64,
        /// The spacing of the kernel's taps.
        dilation: NonZeroU64,
        /// Whether the input is padded.
        padded: bool,
        /// Why.
        why: Why,
    },
    /// The product of the row's dims is the size `count` (a size statement
    /// `size n = ..r.. of x`). Waits until the count, or every size of a
    /// closed row, is known.
    RowCount {
        /// The row.
        row: Row,
        /// Its number of elements.
        count: Dim,
        /// Why.
        why: Why,
    },
    /// `rest` is `whole` without its first (leftmost) axis. Waits until
    /// `whole` has a known number of axes.
    ///
    /// A batch slice drops an axis it leaves free; a spec that writes axes
    /// before a row variable (`a, ..r..`) names it: `first` is `a`, and a
    /// chain of these constraints holds a leading flank of any length.
    DropFirst {
        /// The longer row.
        whole: Row,
        /// The row without the first axis.
        rest: Row,
        /// The first axis, when something names it.
        first: Option<Dim>,
        /// Why.
        why: Why,
    },
}

impl Constraint {
    /// The reason attached to the constraint.
    pub fn why(&self) -> Why {
        match self {
            Constraint::DimEq { why, .. }
            | Constraint::DimIneq { why, .. }
            | Constraint::RowEq { why, .. }
            | Constraint::RowIneq { why, .. }
            | Constraint::Assign { why, .. }
            | Constraint::TotalElems { why, .. }
            | Constraint::DimSum { why, .. }
            | Constraint::DimAtLeast { why, .. }
            | Constraint::RowCount { why, .. }
            | Constraint::DimAffine { why, .. }
            | Constraint::DropFirst { why, .. } => *why,
        }
    }
}
