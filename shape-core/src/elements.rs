//! The number of elements of an array: one rule for every stage (shapes,
//! lowering, ragged rows, host data), each choosing only what to do when
//! the count does not fit.

/// The number of elements of an array whose axes have the sizes `dims`:
/// their product, exactly; 0 when any axis is empty, whatever the sizes
/// of the others; `None` when the product does not fit in a `u128`.
///
/// ```
/// use shape_core::element_count;
/// assert_eq!(element_count(&[2, 3]), Some(6));
/// assert_eq!(element_count(&[]), Some(1));
/// assert_eq!(element_count(&[u64::MAX, u64::MAX, u64::MAX, 0]), Some(0));
/// assert_eq!(element_count(&[u64::MAX, u64::MAX, u64::MAX]), None);
/// ```
pub fn element_count(dims: &[u64]) -> Option<u128> {
    if dims.contains(&0) {
        return Some(0);
    }
    dims.iter()
        .try_fold(1u128, |acc, &d| acc.checked_mul(u128::from(d)))
}

/// [`element_count`] as a buffer length: saturating at `u64::MAX`, a
/// length no allocation can have, so that the allocation fails and says
/// so rather than wrapping to a small buffer.
///
/// ```
/// use shape_core::buffer_len;
/// assert_eq!(buffer_len(&[4, 5]), 20);
/// assert_eq!(buffer_len(&[1 << 40, 1 << 40]), u64::MAX);
/// assert_eq!(buffer_len(&[1 << 40, 1 << 40, 0]), 0);
/// ```
pub fn buffer_len(dims: &[u64]) -> u64 {
    element_count(dims).map_or(u64::MAX, |n| u64::try_from(n).unwrap_or(u64::MAX))
}
