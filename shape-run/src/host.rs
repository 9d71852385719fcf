//! Tensors' values on the host, a run's data and its outputs.

use std::collections::HashMap;

use shape_core::{element_count, DataError, RaggedAxis};
use shape_graph::TensorId;

/// A tensor's values on the host, with the sizes of its axes in memory
/// order (batch, output, input).
///
/// The values lie in a buffer at element strides: row-major (C order) for
/// every constructor but [`HostTensor::strided`] and
/// [`HostTensor::fortran`], which make a view (Fortran order, a transposed
/// or sliced view, a broadcast with stride 0) that a run reads in place,
/// without a copy. Ragged values are always in C order.
#[derive(Clone, Debug)]
pub struct HostTensor {
    dims: Vec<u64>,
    values: Vec<f32>,
    /// The element stride of each axis in `values`.
    strides: Vec<u64>,
    /// Where the element at index all zeros is in `values`.
    offset: u64,
    /// The rows of a ragged axis; `dims` then holds its longest row.
    pub(crate) ragged: Option<RaggedAxis>,
}

impl PartialEq for HostTensor {
    /// The same dims, rows and values in memory order, however they lie
    /// in their buffers (a Fortran-ordered tensor equals its C-ordered
    /// copy).
    fn eq(&self, other: &HostTensor) -> bool {
        if self.dims != other.dims || self.ragged != other.ragged {
            return false;
        }
        if self.is_c_contiguous() && other.is_c_contiguous() {
            return self.values == other.values;
        }
        let n = element_count(&self.dims).unwrap_or(0);
        (0..u64::try_from(n).unwrap_or(u64::MAX)).all(|i| self.at_flat(i) == other.at_flat(i))
    }
}

impl HostTensor {
    /// Values with the dims of their axes in memory order.
    ///
    /// ```
    /// use shape_run::HostTensor;
    /// let t = HostTensor::new(vec![2, 3], vec![0.0; 6]).unwrap();
    /// assert_eq!(t.len(), 6);
    /// assert!(HostTensor::new(vec![2, 3], vec![0.0; 5]).is_err());
    /// ```
    pub fn new(dims: Vec<u64>, values: Vec<f32>) -> Result<HostTensor, DataError> {
        let expected = elements(&dims);
        HostTensor::checked(dims, values, None, expected)
    }

    /// The tensor, when `values` holds the `expected` number of values.
    fn checked(
        dims: Vec<u64>,
        values: Vec<f32>,
        ragged: Option<RaggedAxis>,
        expected: u128,
    ) -> Result<HostTensor, DataError> {
        if expected != values.len() as u128 {
            return Err(DataError::Length {
                dims,
                expected,
                found: values.len(),
            });
        }
        Ok(HostTensor {
            strides: row_major(&dims),
            dims,
            values,
            offset: 0,
            ragged,
        })
    }

    /// A view of `values`: the element at index `(i0, i1, ..)` (dims in
    /// memory order) is the one at `offset` plus the sum of `ij` times
    /// `strides[j]`. Strides are in elements and may be anything a view of
    /// one buffer has: C order, Fortran order, a transposed or sliced view,
    /// or 0 to repeat one value along an axis (a broadcast). A run reads
    /// the buffer as it is, with loops ordered by these strides.
    ///
    /// Fails ([`DataError::Strides`]) for another number of strides than
    /// dims, or when an element it addresses lies past the end of `values`.
    ///
    /// ```
    /// use shape_run::HostTensor;
    /// // The transpose of [[1, 2, 3], [4, 5, 6]], without a copy.
    /// let t = HostTensor::strided(vec![3, 2], vec![1, 3], 0, vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    /// assert_eq!(t.to_string(), "[[1, 4], [2, 5], [3, 6]]");
    /// // A row repeated four times (stride 0).
    /// let b = HostTensor::strided(vec![4, 3], vec![0, 1], 0, vec![1.0, 2.0, 3.0])?;
    /// assert_eq!(b.to_contiguous()?.values().len(), 12);
    /// // Element (1, 2) would be at 1 * 3 + 2 * 1 = 5, past the end.
    /// assert!(HostTensor::strided(vec![2, 3], vec![3, 1], 0, vec![0.0; 5]).is_err());
    /// # Ok::<(), shape_run::DataError>(())
    /// ```
    pub fn strided(
        dims: Vec<u64>,
        strides: Vec<u64>,
        offset: u64,
        values: Vec<f32>,
    ) -> Result<HostTensor, DataError> {
        if strides.len() != dims.len() {
            return Err(DataError::Strides {
                reason: format!("{} strides for {} dims", strides.len(), dims.len()),
            });
        }
        if let Some(last) = last_address(&dims, &strides, offset) {
            if last >= values.len() as u128 {
                return Err(DataError::Strides {
                    reason: format!(
                        "dims {dims:?} at strides {strides:?} from offset {offset} address element {last}, but {} values were given",
                        values.len()
                    ),
                });
            }
        }
        Ok(HostTensor {
            dims,
            values,
            strides,
            offset,
            ragged: None,
        })
    }

    /// Values in Fortran (column-major) order: the first axis fastest, as
    /// a `.npy` file with `fortran_order: True` holds them. Read in place.
    ///
    /// ```
    /// use shape_run::HostTensor;
    /// let f = HostTensor::fortran(vec![2, 3], vec![1.0, 4.0, 2.0, 5.0, 3.0, 6.0])?;
    /// let c = HostTensor::new(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
    /// assert_eq!(f, c);
    /// assert_eq!(f.strides(), &[1, 2]);
    /// assert!(!f.is_c_contiguous());
    /// # Ok::<(), shape_run::DataError>(())
    /// ```
    pub fn fortran(dims: Vec<u64>, values: Vec<f32>) -> Result<HostTensor, DataError> {
        let expected = elements(&dims);
        if expected != values.len() as u128 {
            return Err(DataError::Length {
                dims,
                expected,
                found: values.len(),
            });
        }
        let mut reversed: Vec<u64> = dims.iter().rev().copied().collect();
        reversed = row_major(&reversed);
        reversed.reverse();
        Ok(HostTensor {
            dims,
            values,
            strides: reversed,
            offset: 0,
            ragged: None,
        })
    }

    /// The element stride of each axis in the buffer ([`HostTensor::values`]).
    pub fn strides(&self) -> &[u64] {
        &self.strides
    }

    /// Where the first element (index all zeros) is in the buffer.
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// Whether the buffer holds exactly the values, in C (row-major)
    /// order: true for every tensor but a view made by
    /// [`HostTensor::strided`] or [`HostTensor::fortran`] (and for those
    /// whose strides happen to be C order's), and for ragged values.
    /// The strides of axes of length 1 do not matter.
    pub fn is_c_contiguous(&self) -> bool {
        if self.ragged.is_some() {
            return true;
        }
        let n = elements(&self.dims);
        if n != self.values.len() as u128 {
            return false;
        }
        n == 0
            || (self.offset == 0
                && (self
                    .dims
                    .iter()
                    .zip(&self.strides)
                    .zip(row_major(&self.dims)))
                .all(|((&d, &s), c)| d <= 1 || s == c))
    }

    /// The values in C order in a buffer of their own: a copy of a view,
    /// a clone of a C-contiguous tensor. Fails rather than aborting when
    /// memory cannot be had.
    pub fn to_contiguous(&self) -> Result<HostTensor, DataError> {
        if self.is_c_contiguous() {
            return Ok(self.clone());
        }
        let n = elements(&self.dims);
        let mut values = try_vec(n)?;
        values.extend((0..n as u64).map(|i| self.at_flat(i).unwrap_or(0.0)));
        HostTensor::new(self.dims.clone(), values)
    }

    /// [`HostTensor::to_contiguous`], without a copy when the values are
    /// already in C order.
    pub fn into_contiguous(self) -> Result<HostTensor, DataError> {
        if self.is_c_contiguous() {
            return Ok(self);
        }
        self.to_contiguous()
    }

    /// The value at flat index `i` in C order (the dense values only).
    fn at_flat(&self, i: u64) -> Option<f32> {
        if self.ragged.is_some() || self.is_c_contiguous() {
            return self.values.get(usize::try_from(i).ok()?).copied();
        }
        let mut rest = i;
        let mut at = self.offset;
        for (&d, &s) in self.dims.iter().zip(&self.strides).rev() {
            if d == 0 {
                return None;
            }
            at = at.checked_add((rest % d).checked_mul(s)?)?;
            rest /= d;
        }
        self.values.get(usize::try_from(at).ok()?).copied()
    }

    /// Ragged values: `outer` are the dims before the ragged axis (in
    /// memory order), which has one row per position of them, of the
    /// lengths `lengths`; `inner` are the dims after it. The values are
    /// the rows one after another, row-major within each. [`HostTensor::dims`]
    /// then gives the longest row's length for the ragged axis.
    ///
    /// ```
    /// use shape_run::HostTensor;
    /// // [[1], [2, 3]]
    /// let t = HostTensor::ragged(vec![2], &[1, 2], vec![], vec![1.0, 2.0, 3.0]).unwrap();
    /// assert_eq!(t.dims(), &[2, 2]);
    /// assert_eq!(t.ragged_axis().unwrap().offsets(), &[0, 1, 3]);
    /// assert_eq!(t.to_string(), "[[1], [2, 3]]");
    /// assert!(HostTensor::ragged(vec![2], &[1, 2], vec![], vec![1.0]).is_err());
    /// ```
    pub fn ragged(
        outer: Vec<u64>,
        lengths: &[u64],
        inner: Vec<u64>,
        values: Vec<f32>,
    ) -> Result<HostTensor, DataError> {
        let axis = RaggedAxis::from_lengths(outer.len(), lengths)?;
        let mut dims = outer;
        dims.push(0);
        dims.extend(inner);
        HostTensor::with_rows(dims, axis, values)
    }

    /// Ragged values of any number of ragged axes: `dims` in memory order
    /// (a ragged axis's entry is not read: it becomes the level's longest
    /// row), `rows` the offsets of every ragged axis
    /// ([`RaggedAxis::nested`]), `values` the innermost rows one after
    /// another, row-major within each.
    ///
    /// ```
    /// use shape_core::RaggedAxis;
    /// use shape_run::HostTensor;
    /// // [[[1, 2], [3]], [[4, 5, 6]]]: sentences of words of characters.
    /// let words = RaggedAxis::from_lengths(1, &[2, 1]).unwrap();
    /// let chars = RaggedAxis::from_lengths(2, &[2, 1, 3]).unwrap();
    /// let rows = RaggedAxis::nested(vec![words], chars, &[2, 0, 0]).unwrap();
    /// let t = HostTensor::with_rows(vec![2, 0, 0], rows, vec![1., 2., 3., 4., 5., 6.]).unwrap();
    /// assert_eq!(t.dims(), &[2, 2, 3]);
    /// assert_eq!(t.to_string(), "[[[1, 2], [3]], [[4, 5, 6]]]");
    /// ```
    pub fn with_rows(
        mut dims: Vec<u64>,
        rows: RaggedAxis,
        values: Vec<f32>,
    ) -> Result<HostTensor, DataError> {
        rows.check(&dims)?;
        for level in rows.levels() {
            dims[level.axis()] = level.longest();
        }
        let expected = (rows.total() as u128).saturating_mul(elements(&dims[rows.axis() + 1..]));
        HostTensor::checked(dims, values, Some(rows), expected)
    }

    /// Values whose count the caller knows is the product of `dims`.
    #[cfg(feature = "ndarray")]
    pub(crate) fn from_parts(dims: Vec<u64>, values: Vec<f32>) -> HostTensor {
        HostTensor {
            strides: row_major(&dims),
            dims,
            values,
            offset: 0,
            ragged: None,
        }
    }

    /// The rows of the ragged axis, for ragged values.
    pub fn ragged_axis(&self) -> Option<&RaggedAxis> {
        self.ragged.as_ref()
    }

    /// These values as ragged values along `axes` (memory order), every
    /// row of every level full (the data of a dense tensor given for a
    /// ragged one).
    pub(crate) fn into_ragged(self, axes: &[usize]) -> Result<HostTensor, DataError> {
        if self.ragged.is_some() {
            return Ok(self);
        }
        if !self.is_c_contiguous() {
            return Err(DataError::Strides {
                reason: format!(
                    "ragged data is read in C order, but these values lie at strides {:?}",
                    self.strides
                ),
            });
        }
        let rows = self.rows_along(axes)?;
        HostTensor::with_rows(self.dims, rows, self.values)
    }

    /// The rows of this data along `axes` (memory order): its own, or,
    /// for dense data, full rows at every level.
    pub(crate) fn rows_along(&self, axes: &[usize]) -> Result<RaggedAxis, DataError> {
        if let Some(r) = &self.ragged {
            return Ok(r.clone());
        }
        RaggedAxis::full(&self.dims, axes)
    }

    /// A tensor of these dims with every value `value`; fails rather than
    /// aborting when memory cannot be had.
    pub fn filled(dims: Vec<u64>, value: f32) -> Result<HostTensor, DataError> {
        let n = elements(&dims);
        let mut values = try_vec(n)?;
        values.resize(n as usize, value);
        Ok(HostTensor {
            strides: row_major(&dims),
            dims,
            values,
            offset: 0,
            ragged: None,
        })
    }

    /// The sizes of the axes, in memory order.
    pub fn dims(&self) -> &[u64] {
        &self.dims
    }

    /// The buffer the values lie in: the values in memory order (C order)
    /// when [`HostTensor::is_c_contiguous`], as for every tensor a run
    /// returns; for a view, the buffer its strides address
    /// ([`HostTensor::to_contiguous`] gives the values in order).
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// The buffer ([`HostTensor::values`]), taken out.
    pub fn into_values(self) -> Vec<f32> {
        self.values
    }

    /// The number of values in the buffer (for a C-contiguous dense
    /// tensor, the product of the dims).
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether the buffer holds no values.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

impl std::fmt::Display for HostTensor {
    /// The values as nested lists, as numpy's `tolist` prints them
    /// (ragged rows with their own lengths).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = Vec::new();
        self.write_nested(&mut out, &|w, v| write!(w, "{v}"))
            .map_err(|_| std::fmt::Error)?;
        f.write_str(&String::from_utf8_lossy(&out))
    }
}

impl HostTensor {
    /// Writes the values as nested lists (`[[1, 2], [3]]`), each value by
    /// `value`: ragged rows with their own lengths, an empty axis as
    /// numpy's `tolist` writes it (`(2, 0)` is `[[], []]`), a tensor
    /// without axes as its bare value. Iterative, so thousands of axes
    /// cannot exhaust the stack.
    pub fn write_nested(
        &self,
        w: &mut dyn std::io::Write,
        value: &dyn Fn(&mut dyn std::io::Write, f32) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let at = |i: u64| self.at_flat(i).unwrap_or(0.0);
        match &self.ragged {
            None => nested_grid(w, &self.dims, &mut |w, i| value(w, at(i))),
            Some(rows) => {
                let levels: Vec<&RaggedAxis> = rows.levels().collect();
                let leaf = &mut |w: &mut dyn std::io::Write, i: u64| value(w, at(i));
                nested_grid(w, &self.dims[..levels[0].axis()], &mut |w, r| {
                    write_level(w, &levels, &self.dims, r, leaf)
                })
            }
        }
    }
}

/// Writes row `r` of the first of `levels` as nested lists: its
/// positions, each a grid of the dense dims up to the next level, whose
/// elements are that level's rows (or, for the innermost, values by
/// their index in the buffer). Recursion is one frame per ragged level.
fn write_level(
    w: &mut dyn std::io::Write,
    levels: &[&RaggedAxis],
    dims: &[u64],
    r: u64,
    leaf: &mut dyn FnMut(&mut dyn std::io::Write, u64) -> std::io::Result<()>,
) -> std::io::Result<()> {
    let (level, deeper) = (levels[0], &levels[1..]);
    let next = deeper.first().map_or(dims.len(), |n| n.axis());
    let between = &dims[level.axis() + 1..next];
    let mut grid = Vec::with_capacity(between.len() + 1);
    grid.push(level.row_len(r as usize));
    grid.extend_from_slice(between);
    let start = level
        .row_start(r as usize)
        .saturating_mul(shape_core::buffer_len(between));
    nested_grid(w, &grid, &mut |w, k| {
        let at = start.saturating_add(k);
        if deeper.is_empty() {
            leaf(w, at)
        } else {
            write_level(w, deeper, dims, at, leaf)
        }
    })
}

/// Writes a grid of `dims` as nested lists, each element (by its flat
/// index) by `leaf`; without recursion.
fn nested_grid(
    w: &mut dyn std::io::Write,
    dims: &[u64],
    leaf: &mut dyn FnMut(&mut dyn std::io::Write, u64) -> std::io::Result<()>,
) -> std::io::Result<()> {
    if let Some(zero) = dims.iter().position(|&d| d == 0) {
        // Nothing below the first empty axis: the lists above it, each
        // holding an empty list.
        if zero == 0 {
            return w.write_all(b"[]");
        }
        return nested_grid(w, &dims[..zero], &mut |w, _| w.write_all(b"[]"));
    }
    // The number of elements each level spans.
    let mut spans = vec![1u64; dims.len()];
    let mut span = 1u64;
    for (level, &d) in dims.iter().enumerate().rev() {
        span = span.saturating_mul(d);
        spans[level] = span;
    }
    for i in 0..span {
        if i > 0 {
            w.write_all(b", ")?;
        }
        for _ in spans.iter().filter(|&&s| i.is_multiple_of(s)) {
            w.write_all(b"[")?;
        }
        leaf(w, i)?;
        for _ in spans.iter().filter(|&&s| (i + 1).is_multiple_of(s)) {
            w.write_all(b"]")?;
        }
    }
    Ok(())
}

/// The stride of each axis of `dims` in C order (saturating).
pub(crate) fn row_major(dims: &[u64]) -> Vec<u64> {
    let mut strides = vec![1u64; dims.len()];
    for j in (0..dims.len().saturating_sub(1)).rev() {
        strides[j] = strides[j + 1].saturating_mul(dims[j + 1]);
    }
    strides
}

/// The largest element index a view of `dims` at `strides` from `offset`
/// addresses, or `None` when it has no elements (exact: past 2^64 is
/// still a number here, never a wrap).
pub(crate) fn last_address(dims: &[u64], strides: &[u64], offset: u64) -> Option<u128> {
    if dims.contains(&0) {
        return None;
    }
    Some(
        dims.iter()
            .zip(strides)
            .fold(offset as u128, |a, (&d, &s)| {
                a.saturating_add((d as u128 - 1).saturating_mul(s as u128))
            }),
    )
}

/// The number of values of `dims`, saturating at `u128::MAX` (a count
/// no data can have, so a length check fails).
pub(crate) fn elements(dims: &[u64]) -> u128 {
    element_count(dims).unwrap_or(u128::MAX)
}

impl TryFrom<(Vec<u64>, Vec<f32>)> for HostTensor {
    type Error = DataError;

    /// Values with their dims, in memory order ([`HostTensor::new`]).
    fn try_from((dims, values): (Vec<u64>, Vec<f32>)) -> Result<HostTensor, DataError> {
        HostTensor::new(dims, values)
    }
}

impl From<Vec<f32>> for HostTensor {
    /// A tensor of one axis holding `values`.
    fn from(values: Vec<f32>) -> HostTensor {
        HostTensor {
            dims: vec![values.len() as u64],
            values,
            strides: vec![1],
            offset: 0,
            ragged: None,
        }
    }
}

impl HostTensor {
    /// A tensor of two axes from its rows, which must all have the same
    /// length (otherwise [`DataError::Length`], naming the dims the first
    /// row implies).
    ///
    /// ```
    /// use shape_run::HostTensor;
    /// let t = HostTensor::from_rows(&[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])?;
    /// assert_eq!(t.dims(), &[2, 3]);
    /// assert_eq!(t.to_string(), "[[1, 2, 3], [4, 5, 6]]");
    /// assert!(HostTensor::from_rows(&[vec![1.0], vec![2.0, 3.0]]).is_err());
    /// // Rows of other lengths, even when the count would fit.
    /// assert!(HostTensor::from_rows(&[vec![1.0, 2.0], vec![3.0], vec![4.0, 5.0, 6.0]]).is_err());
    /// # Ok::<(), shape_run::DataError>(())
    /// ```
    pub fn from_rows<R: AsRef<[f32]>>(rows: &[R]) -> Result<HostTensor, DataError> {
        let width = rows.first().map_or(0, |r| r.as_ref().len());
        let total = rows.iter().map(|r| r.as_ref().len()).sum::<usize>();
        let mut values = try_vec(total as u128)?;
        let dims = vec![rows.len() as u64, width as u64];
        for r in rows {
            if r.as_ref().len() != width {
                return Err(DataError::Length {
                    expected: elements(&dims),
                    dims,
                    found: total,
                });
            }
            values.extend_from_slice(r.as_ref());
        }
        HostTensor::new(dims, values)
    }
}

/// The data of a run: values for the inputs, parameters and constants
/// the requested outputs depend on.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    pub(crate) tensors: HashMap<TensorId, HostTensor>,
}

impl Inputs {
    /// No data yet.
    pub fn new() -> Inputs {
        Inputs::default()
    }

    /// Gives `t` its values; returns what it had before.
    pub fn insert(&mut self, t: TensorId, values: HostTensor) -> Option<HostTensor> {
        self.tensors.insert(t, values)
    }

    /// This data with `t`'s values added.
    pub fn with(mut self, t: TensorId, values: HostTensor) -> Inputs {
        self.insert(t, values);
        self
    }

    /// The values of `t`, if given.
    pub fn get(&self, t: TensorId) -> Option<&HostTensor> {
        self.tensors.get(&t)
    }

    /// The tensors given values.
    pub fn tensors(&self) -> impl Iterator<Item = TensorId> + '_ {
        self.tensors.keys().copied()
    }
}

/// The values of a run's outputs.
#[derive(Clone, Debug, Default)]
pub struct RunOutputs {
    pub(crate) tensors: HashMap<TensorId, HostTensor>,
}

impl RunOutputs {
    /// The values of output `t`.
    pub fn get(&self, t: TensorId) -> Option<&HostTensor> {
        self.tensors.get(&t)
    }

    /// Takes the values of output `t` out.
    pub fn remove(&mut self, t: TensorId) -> Option<HostTensor> {
        self.tensors.remove(&t)
    }

    /// Every output with its values.
    pub fn iter(&self) -> impl Iterator<Item = (TensorId, &HostTensor)> {
        self.tensors.iter().map(|(&t, v)| (t, v))
    }
}

impl FromIterator<(TensorId, HostTensor)> for Inputs {
    fn from_iter<I: IntoIterator<Item = (TensorId, HostTensor)>>(iter: I) -> Inputs {
        Inputs {
            tensors: iter.into_iter().collect(),
        }
    }
}

impl Extend<(TensorId, HostTensor)> for Inputs {
    fn extend<I: IntoIterator<Item = (TensorId, HostTensor)>>(&mut self, iter: I) {
        self.tensors.extend(iter);
    }
}

impl RunOutputs {
    /// The number of outputs.
    pub fn len(&self) -> usize {
        self.tensors.len()
    }

    /// Whether there are no outputs.
    pub fn is_empty(&self) -> bool {
        self.tensors.is_empty()
    }
}

impl IntoIterator for RunOutputs {
    type Item = (TensorId, HostTensor);
    type IntoIter = std::collections::hash_map::IntoIter<TensorId, HostTensor>;

    /// Every output with its values, taken.
    fn into_iter(self) -> Self::IntoIter {
        self.tensors.into_iter()
    }
}

/// The data a run takes: [`Inputs`] by value, whose values the run may
/// keep (the CPU backend does, with no copy), or by reference, which the
/// run copies as it uploads them (so the same data can run on two
/// backends). Made by `From` from either.
#[derive(Debug)]
pub enum RunInputs<'a> {
    /// Data the run takes.
    Owned(Inputs),
    /// Data the run copies.
    Borrowed(&'a Inputs),
}

impl From<Inputs> for RunInputs<'_> {
    fn from(inputs: Inputs) -> Self {
        RunInputs::Owned(inputs)
    }
}

impl<'a> From<&'a Inputs> for RunInputs<'a> {
    fn from(inputs: &'a Inputs) -> Self {
        RunInputs::Borrowed(inputs)
    }
}

impl RunInputs<'_> {
    /// The data, to read.
    pub fn inputs(&self) -> &Inputs {
        match self {
            RunInputs::Owned(i) => i,
            RunInputs::Borrowed(i) => i,
        }
    }

    /// The values of `t`, taken (owned data) or copied (borrowed data).
    pub(crate) fn take(&mut self, t: TensorId) -> Option<HostTensor> {
        match self {
            RunInputs::Owned(i) => i.tensors.remove(&t),
            RunInputs::Borrowed(i) => i.get(t).cloned(),
        }
    }
}

/// An empty vector with room for `n` elements (so `n` fits in a
/// `usize`), or [`DataError::OutOfMemory`] where that room cannot be had
/// (never an abort).
fn try_vec<T>(n: u128) -> Result<Vec<T>, DataError> {
    let oom = || DataError::OutOfMemory {
        elements: n,
        bytes: n.saturating_mul(std::mem::size_of::<T>() as u128),
    };
    let len = usize::try_from(n).map_err(|_| oom())?;
    let mut v = Vec::new();
    v.try_reserve_exact(len).map_err(|_| oom())?;
    Ok(v)
}
