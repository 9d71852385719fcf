//! Shapes: batch, input and output rows.

use std::fmt;

use crate::dim::{Dim, KnownDim};
use crate::row::{Row, RowKind};
use crate::spec::write_rows;

/// A tensor's shape, possibly with unsolved variables: `batch|input->output`.
///
/// Memory layout is batch, then output, then input (input axes innermost).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shape {
    /// Batch axes.
    pub batch: Row,
    /// Input axes.
    pub input: Row,
    /// Output axes.
    pub output: Row,
}

impl Shape {
    /// The row of the given kind.
    pub fn row(&self, kind: RowKind) -> &Row {
        match kind {
            RowKind::Batch => &self.batch,
            RowKind::Input => &self.input,
            RowKind::Output => &self.output,
        }
    }

    /// The row of the given kind, mutably.
    #[deprecated(
        since = "0.1.0",
        note = "no user: write the field (`shape.batch`, `shape.input`, `shape.output`)"
    )]
    pub fn row_mut(&mut self, kind: RowKind) -> &mut Row {
        match kind {
            RowKind::Batch => &mut self.batch,
            RowKind::Input => &mut self.input,
            RowKind::Output => &mut self.output,
        }
    }
}

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = |row: &Row| -> Vec<String> {
            let mut out = Vec::new();
            if let Some(v) = row.row_var() {
                out.push(format!("..{v}.."));
            }
            out.extend(row.dims.iter().map(Dim::to_string));
            out
        };
        write_rows(
            f,
            &[
                entries(&self.batch),
                entries(&self.input),
                entries(&self.output),
            ],
        )
    }
}

/// A fully solved shape: every axis has a known size.
///
/// Produced only by finalization, so it cannot hold a variable.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct SolvedShape {
    /// Batch axes.
    pub batch: Vec<KnownDim>,
    /// Input axes.
    pub input: Vec<KnownDim>,
    /// Output axes.
    pub output: Vec<KnownDim>,
}

impl SolvedShape {
    /// The row of the given kind.
    pub fn row(&self, kind: RowKind) -> &[KnownDim] {
        match kind {
            RowKind::Batch => &self.batch,
            RowKind::Input => &self.input,
            RowKind::Output => &self.output,
        }
    }

    /// The sizes of the row of the given kind.
    pub fn sizes(&self, kind: RowKind) -> Vec<u64> {
        self.row(kind).iter().map(KnownDim::size).collect()
    }

    /// All sizes in memory order: batch, output, input.
    pub fn memory_dims(&self) -> Vec<u64> {
        RowKind::MEMORY_ORDER
            .iter()
            .flat_map(|&k| self.sizes(k))
            .collect()
    }

    /// The index per axis (batch, output, input; row-major, as in
    /// [`SolvedShape::memory_dims`]) of the element at position `flat` in
    /// memory order.
    ///
    /// ```
    /// use shape_core::{KnownDim, SolvedShape};
    /// let dims = |d: &[u64]| d.iter().map(|&n| KnownDim::of(n).unwrap()).collect();
    /// let s = SolvedShape { batch: dims(&[2]), input: dims(&[4]), output: dims(&[3]) };
    /// // Memory order is batch, output, input: dims [2, 3, 4].
    /// assert_eq!(s.unravel(23), vec![1, 2, 3]);
    /// assert_eq!(SolvedShape::default().unravel(0), Vec::<u64>::new());
    /// ```
    pub fn unravel(&self, flat: u64) -> Vec<u64> {
        let dims = self.memory_dims();
        let mut index = vec![0; dims.len()];
        let mut rest = flat;
        for (i, &d) in dims.iter().enumerate().rev() {
            if d > 0 {
                index[i] = rest % d;
                rest /= d;
            }
        }
        index
    }

    /// The number of elements (1 for a shape without axes), or `None` if
    /// it does not fit in 128 bits.
    pub fn num_elems(&self) -> Option<u128> {
        crate::element_count(&self.memory_dims())
    }
}

impl fmt::Display for SolvedShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let entries = |row: &[KnownDim]| row.iter().map(KnownDim::to_string).collect::<Vec<_>>();
        write_rows(
            f,
            &[
                entries(&self.batch),
                entries(&self.input),
                entries(&self.output),
            ],
        )
    }
}
