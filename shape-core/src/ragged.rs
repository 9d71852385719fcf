//! The rows of a ragged (`var`) axis in data: DyND's var dim at run
//! time, shared by execution, the backends and the front ends.

use crate::data_error::DataError;

/// Where each row of a ragged axis starts, in positions along that axis.
///
/// A tensor of memory-order dims `outer.., var, inner..` has
/// `product(outer)` rows; row `r` has `offsets[r + 1] - offsets[r]`
/// positions, each of `product(inner)` values, stored after the rows
/// before it.
///
/// A tensor with more than one ragged axis (DyND's `3 * var * var`:
/// sentences of words of characters) has one level of offsets per ragged
/// axis: this value is the innermost level, and [`RaggedAxis::outer`]
/// holds the levels before it ([`RaggedAxis::nested`]). A level's rows
/// are the positions of the level before it laid end to end, times the
/// dense dims between the two.
///
/// ```
/// use shape_core::RaggedAxis;
/// // [[1], [2, 3]]: two rows, of lengths 1 and 2.
/// let rows = RaggedAxis::from_lengths(1, &[1, 2]).unwrap();
/// assert_eq!(rows.offsets(), &[0, 1, 3]);
/// assert_eq!(rows.row_len(1), 2);
/// assert_eq!(rows.row_len(7), 0);
/// assert_eq!(rows.longest(), 2);
/// assert!(RaggedAxis::new(1, vec![0, 2, 1]).is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RaggedAxis {
    axis: usize,
    offsets: Vec<u64>,
    /// The levels before this one, outermost first (each without levels
    /// of its own).
    outer: Vec<RaggedAxis>,
}

impl RaggedAxis {
    /// The rows of the ragged axis at memory-order position `axis`, from
    /// their start offsets (one more than there are rows: the last is the
    /// total length). Offsets start at 0 and never decrease.
    pub fn new(axis: usize, offsets: Vec<u64>) -> Result<RaggedAxis, DataError> {
        let bad = |reason: String| DataError::RaggedOffsets { reason };
        match offsets.first() {
            None => {
                return Err(bad(
                    "there is no offset (a ragged axis has rows + 1 of them)".into(),
                ))
            }
            Some(&first) if first != 0 => {
                return Err(bad(format!("the first offset is {first}, not 0")))
            }
            Some(_) => {}
        }
        if let Some(r) = offsets.windows(2).position(|w| w[1] < w[0]) {
            return Err(bad(format!(
                "row {r} ends at {} before it starts at {}",
                offsets[r + 1],
                offsets[r]
            )));
        }
        Ok(RaggedAxis {
            axis,
            offsets,
            outer: Vec::new(),
        })
    }

    /// The rows of the ragged axis at `axis`, from their lengths.
    pub fn from_lengths(axis: usize, lengths: &[u64]) -> Result<RaggedAxis, DataError> {
        let mut offsets = Vec::new();
        offsets
            .try_reserve_exact(lengths.len() + 1)
            .map_err(|_| DataError::OutOfMemory {
                elements: lengths.len() as u128 + 1,
                bytes: (lengths.len() as u128 + 1) * 8,
            })?;
        offsets.push(0u64);
        let mut total = 0u64;
        for &l in lengths {
            total = total
                .checked_add(l)
                .ok_or_else(|| DataError::RaggedOffsets {
                    reason: "the rows' lengths add up past 2^64".into(),
                })?;
            offsets.push(total);
        }
        Ok(RaggedAxis {
            axis,
            offsets,
            outer: Vec::new(),
        })
    }

    /// The levels of a tensor with several ragged axes: `outer`, the
    /// levels before `inner` (outermost first), then `inner`. Each level
    /// is one ragged axis's rows ([`RaggedAxis::new`]), at increasing
    /// axes; `dims` are the tensor's memory-order dims (a ragged axis's
    /// entry is not read), which fix how many rows each level has: the
    /// first, the product of the dims before it; every other, the
    /// positions of the level before it times the dims between them.
    ///
    /// ```
    /// use shape_core::RaggedAxis;
    /// // [[[1, 2], [3]], [[4, 5, 6]]]: dims 2, var, var.
    /// let words = RaggedAxis::from_lengths(1, &[2, 1]).unwrap();
    /// let chars = RaggedAxis::from_lengths(2, &[2, 1, 3]).unwrap();
    /// let rows = RaggedAxis::nested(vec![words], chars, &[2, 0, 0]).unwrap();
    /// assert_eq!(rows.axes(), vec![1, 2]);
    /// assert_eq!(rows.outer()[0].offsets(), &[0, 2, 3]);
    /// assert_eq!(rows.offsets(), &[0, 2, 3, 6]);
    /// let bad = RaggedAxis::from_lengths(2, &[2, 1]).unwrap();
    /// let words = RaggedAxis::from_lengths(1, &[2, 1]).unwrap();
    /// assert!(RaggedAxis::nested(vec![words], bad, &[2, 0, 0]).is_err());
    /// ```
    pub fn nested(
        outer: Vec<RaggedAxis>,
        mut inner: RaggedAxis,
        dims: &[u64],
    ) -> Result<RaggedAxis, DataError> {
        // Every level moved, not copied, into one flat list.
        let mut levels: Vec<RaggedAxis> = Vec::new();
        for mut level in outer {
            levels.append(&mut level.outer);
            levels.push(level);
        }
        levels.append(&mut inner.outer);
        inner.outer = levels;
        inner.check(dims)?;
        Ok(inner)
    }

    /// Checks that these levels fit a tensor of memory-order `dims` (a
    /// ragged axis's entry is not read): their axes increase, and each
    /// level has as many rows as the dims before it, and the level before
    /// it, make ([`RaggedAxis::nested`]).
    pub fn check(&self, dims: &[u64]) -> Result<(), DataError> {
        let bad = |reason: String| DataError::RaggedOffsets { reason };
        let (mut rows, mut from) = (1u128, 0usize);
        for (l, level) in self.levels().enumerate() {
            if level.axis < from || level.axis >= dims.len() {
                return Err(bad(format!(
                    "level {l} is at axis {}, which is not after the level before it among {} axes",
                    level.axis,
                    dims.len()
                )));
            }
            rows = dims[from..level.axis]
                .iter()
                .fold(rows, |n, &d| n.saturating_mul(d as u128));
            if level.rows() as u128 != rows {
                return Err(bad(format!(
                    "level {l} (axis {}) has {} rows where the levels and dims before it make {rows}",
                    level.axis,
                    level.rows()
                )));
            }
            rows = level.total() as u128;
            from = level.axis + 1;
        }
        Ok(())
    }

    /// Full rows at every one of `axes` (increasing, memory order) of a
    /// tensor of `dims`: dense data seen as ragged.
    pub fn full(dims: &[u64], axes: &[usize]) -> Result<RaggedAxis, DataError> {
        let mut levels: Vec<RaggedAxis> = Vec::with_capacity(axes.len());
        let (mut rows, mut from) = (1u64, 0usize);
        for &axis in axes {
            let Some(&len) = dims.get(axis) else {
                return Err(DataError::RaggedOffsets {
                    reason: format!("there is no axis {axis} among {} dims", dims.len()),
                });
            };
            rows = dims[from.min(axis)..axis]
                .iter()
                .fold(rows, |n, &d| n.saturating_mul(d));
            let count = usize::try_from(rows).unwrap_or(usize::MAX);
            let mut offsets: Vec<u64> = Vec::new();
            offsets
                .try_reserve_exact(count.saturating_add(1))
                .map_err(|_| DataError::OutOfMemory {
                    elements: rows as u128 + 1,
                    bytes: (rows as u128 + 1) * 8,
                })?;
            let mut total = 0u64;
            offsets.push(0);
            for _ in 0..count {
                total = total.saturating_add(len);
                offsets.push(total);
            }
            levels.push(RaggedAxis::new(axis, offsets)?);
            rows = total;
            from = axis + 1;
        }
        let Some(inner) = levels.pop() else {
            return Err(DataError::RaggedOffsets {
                reason: "no ragged axis was given".into(),
            });
        };
        RaggedAxis::nested(levels, inner, dims)
    }

    /// The levels before this one (outermost first): empty for a tensor
    /// with one ragged axis.
    pub fn outer(&self) -> &[RaggedAxis] {
        &self.outer
    }

    /// Every level, outermost first, this one last.
    pub fn levels(&self) -> impl Iterator<Item = &RaggedAxis> {
        self.outer.iter().chain(std::iter::once(self))
    }

    /// The ragged axes of every level, in memory order.
    pub fn axes(&self) -> Vec<usize> {
        self.levels().map(|l| l.axis).collect()
    }

    /// The level at memory-order axis `axis`, if one is there.
    pub fn level_at(&self, axis: usize) -> Option<&RaggedAxis> {
        self.levels().find(|l| l.axis == axis)
    }

    /// The values a buffer of these rows holds per position of the
    /// innermost level: the product of `dims` after it (saturating).
    pub fn buffer_len(&self, dims: &[u64]) -> u64 {
        self.total()
            .saturating_mul(crate::buffer_len(dims.get(self.axis + 1..).unwrap_or(&[])))
    }

    /// The ragged axis's position among the tensor's axes, in memory order.
    pub fn axis(&self) -> usize {
        self.axis
    }

    /// Where each row starts, then the total length.
    pub fn offsets(&self) -> &[u64] {
        &self.offsets
    }

    /// The number of rows.
    pub fn rows(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The length of row `r` (0 past the last row).
    pub fn row_len(&self, r: usize) -> u64 {
        match (self.offsets.get(r), self.offsets.get(r + 1)) {
            (Some(start), Some(end)) => end - start,
            _ => 0,
        }
    }

    /// Where row `r` starts, in positions along the axis (the total past
    /// the last row).
    pub fn row_start(&self, r: usize) -> u64 {
        self.offsets.get(r).copied().unwrap_or(self.total())
    }

    /// The sum of the rows' lengths.
    pub fn total(&self) -> u64 {
        self.offsets[self.offsets.len() - 1]
    }

    /// The length of the longest row (0 without rows).
    pub fn longest(&self) -> u64 {
        (0..self.rows()).map(|r| self.row_len(r)).max().unwrap_or(0)
    }

    /// The lengths of the rows, in order.
    pub fn lengths(&self) -> Vec<u64> {
        (0..self.rows()).map(|r| self.row_len(r)).collect()
    }
}
