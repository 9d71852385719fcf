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
        Ok(RaggedAxis { axis, offsets })
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
        Ok(RaggedAxis { axis, offsets })
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
