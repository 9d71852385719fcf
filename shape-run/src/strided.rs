//! Strided inputs read in place: a kernel's layouts, lowered for tensors
//! stored contiguously in C order, rewritten for the strides the data
//! actually has.
//!
//! A lowered layout addresses a tensor of dims `d` at C-order strides `c`:
//! the element read at a point of the iterators is `offset + Σ l_k · it_k`,
//! which is `Σ c_j · idx_j` for the index `idx` the operation reads there.
//! When every `idx_j` is an affine function of the iterators with
//! non-negative coefficients (an axis read by an iterator, a diagonal, a
//! fixed index, a slice, a strided window), the same index at strides `s`
//! from offset `o` is `o + Σ s_j · idx_j`, again affine in the iterators:
//! [`view_layout`] finds it from the layout alone, and proves that it
//! holds at every point of the launch. A layout that reads the tensor some
//! other way (as a flat buffer) has no such form; the run then copies that
//! input into C order first.

use std::collections::HashMap;

use shape_core::kernel::{Launch, Layout};
use shape_graph::{BufferRef, GraphError, SolvedGraph, Step, TensorId};

use crate::host::{row_major, HostTensor};
use crate::plan::RunPlan;

/// How a tensor's values lie in a buffer: its dims (memory order), the
/// element stride of each, where the first element is, and the buffer's
/// length. What a run reads a strided input through, and what `shapec
/// infer --kernels --order` describes an input's order with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct View {
    /// The sizes of the axes, in memory order.
    pub dims: Vec<u64>,
    /// The element stride of each axis.
    pub strides: Vec<u64>,
    /// Where the element at index all zeros is.
    pub offset: u64,
    /// The number of elements of the buffer.
    pub len: u64,
}

impl View {
    /// A buffer holding `dims` in C (row-major) order.
    pub fn c_order(dims: &[u64]) -> View {
        View {
            dims: dims.to_vec(),
            strides: row_major(dims),
            offset: 0,
            len: shape_core::buffer_len(dims),
        }
    }

    /// A buffer holding `dims` in Fortran (column-major) order.
    ///
    /// ```
    /// use shape_run::View;
    /// assert_eq!(View::fortran(&[2, 3, 4]).strides, vec![1, 2, 6]);
    /// ```
    pub fn fortran(dims: &[u64]) -> View {
        let reversed: Vec<u64> = dims.iter().rev().copied().collect();
        let mut strides = row_major(&reversed);
        strides.reverse();
        View {
            dims: dims.to_vec(),
            strides,
            offset: 0,
            len: shape_core::buffer_len(dims),
        }
    }

    /// The view a tensor's values are read through.
    pub fn of(t: &HostTensor) -> View {
        View {
            dims: t.dims().to_vec(),
            strides: t.strides().to_vec(),
            offset: t.offset(),
            len: t.len() as u64,
        }
    }
}

/// The digits of `p` in the mixed radix `dims` (C order): the index of
/// the element at C-order position `p`, when `p` is inside.
fn digits(mut p: u128, dims: &[u64]) -> Option<Vec<u128>> {
    let mut out = vec![0u128; dims.len()];
    for (j, &d) in dims.iter().enumerate().rev() {
        let d = d as u128;
        if d == 0 {
            return None;
        }
        out[j] = p % d;
        p /= d;
    }
    (p == 0).then_some(out)
}

/// The layout that reads `view` at the same indices as `layout` reads the
/// tensor of the same dims stored in C order, over a launch of `sizes`;
/// `None` when `layout` does not read the tensor axis by axis (each index
/// an affine function of the iterators with non-negative coefficients
/// over the whole launch), or does not read a C-ordered buffer of those
/// dims at all.
///
/// ```
/// use shape_core::kernel::Layout;
/// use shape_run::{view_layout, View};
/// // A 2 x 3 tensor read by iterators (i0, i1) at C strides (3, 1) ...
/// let c = Layout::new(0, vec![3, 1], 6);
/// // ... read in Fortran order instead.
/// let f = view_layout(&c, &[2, 3], &View::fortran(&[2, 3])).unwrap();
/// assert_eq!(f, Layout::new(0, vec![1, 2], 6));
/// // Read as one flat loop of 6 it has no strided form.
/// assert_eq!(view_layout(&Layout::new(0, vec![1], 6), &[6], &View::fortran(&[2, 3])), None);
/// ```
pub fn view_layout(layout: &Layout, sizes: &[u64], view: &View) -> Option<Layout> {
    if layout.strides.len() != sizes.len() || view.strides.len() != view.dims.len() {
        return None;
    }
    if sizes.contains(&0) {
        // No point is read.
        return Some(Layout::new(0, vec![0; sizes.len()], view.len));
    }
    let n = shape_core::element_count(&view.dims)?;
    if layout.len as u128 != n {
        return None;
    }
    let base = digits(layout.offset as u128, &view.dims)?;
    // The index each iterator steps by, from its first step.
    let mut steps: Vec<Vec<u128>> = Vec::with_capacity(sizes.len());
    let mut last = layout.offset as u128;
    for (&l, &size) in layout.strides.iter().zip(sizes) {
        if size <= 1 || l == 0 {
            steps.push(vec![0; view.dims.len()]);
            continue;
        }
        let next = digits(layout.offset as u128 + l as u128, &view.dims)?;
        let step = next
            .iter()
            .zip(&base)
            .map(|(&a, &b)| a.checked_sub(b))
            .collect::<Option<Vec<u128>>>()?;
        steps.push(step);
        last = last.checked_add((l as u128).checked_mul(size as u128 - 1)?)?;
    }
    // At the last point, the index must be the sum of the steps: then the
    // index of every point lies between the first's and the last's, inside
    // the dims, and its C position decomposes into exactly those digits.
    let end = digits(last, &view.dims)?;
    for (j, &e) in end.iter().enumerate() {
        let expected = steps.iter().zip(sizes).try_fold(base[j], |a, (s, &size)| {
            a.checked_add(s[j].checked_mul(size.saturating_sub(1) as u128)?)
        })?;
        if e != expected {
            return None;
        }
    }
    let at = |index: &[u128]| -> Option<u64> {
        let sum = index
            .iter()
            .zip(&view.strides)
            .try_fold(view.offset as u128, |a, (&i, &s)| {
                a.checked_add(i.checked_mul(s as u128)?)
            })?;
        u64::try_from(sum).ok()
    };
    // The last element read lies inside the buffer (a view made by
    // `HostTensor::strided` always does; a hand-made one may not).
    if at(&end)? >= view.len {
        return None;
    }
    let offset = at(&base)?;
    let strides = steps
        .iter()
        .map(|s| {
            s.iter()
                .zip(&view.strides)
                .try_fold(0u128, |a, (&i, &st)| {
                    a.checked_add(i.checked_mul(st as u128)?)
                })
                .and_then(|v| u64::try_from(v).ok())
        })
        .collect::<Option<Vec<u64>>>()?;
    Some(Layout::new(offset, strides, view.len))
}

/// The tensor a step's buffer is, for a step of an operation with
/// `operands`.
pub(crate) fn tensor_of(r: &BufferRef, operands: &[TensorId]) -> Option<TensorId> {
    match *r {
        BufferRef::Operand(i) => operands.get(i).copied(),
        BufferRef::Tensor(t) => Some(t),
        BufferRef::Result | BufferRef::Scratch(_) => None,
    }
}

/// The launch of `step` (of an operation reading `operands`) with each
/// tensor that `views` names read through its view ([`view_layout`]);
/// `Ok(None)` when it reads none, `Err(t)` for the first tensor `t` it
/// cannot read in place (a layout with no strided form, or a call step).
///
/// ```
/// use std::collections::HashMap;
/// use shape_graph::Graph;
/// use shape_run::{strided_launch, RunGraph, RunOptions, View};
/// let mut g = Graph::new();
/// let x = g.input("x", "2,3")?;
/// let y = g.unary("exp", x)?;
/// let solved = g.solve()?;
/// let plan = solved.plan(&[y], &RunOptions::default())?;
/// let op = &plan.ops()[0];
/// let step = &op.lowered.steps[0];
/// let views = HashMap::from([(x, View::fortran(&[2, 3]))]);
/// let launch = strided_launch(step, &[x], &views).unwrap().unwrap();
/// assert_eq!(launch.operands[0].strides, vec![1, 2]);
/// # Ok::<(), shape_graph::GraphError>(())
/// ```
pub fn strided_launch(
    step: &Step,
    operands: &[TensorId],
    views: &HashMap<TensorId, View>,
) -> Result<Option<Launch>, TensorId> {
    let mut launch: Option<Launch> = None;
    for (j, r) in step.operands.iter().enumerate() {
        let Some((t, view)) = tensor_of(r, operands).and_then(|t| views.get(&t).map(|v| (t, v)))
        else {
            continue;
        };
        if step.call.is_some() {
            return Err(t);
        }
        let l = launch.get_or_insert_with(|| step.launch.clone());
        let Some(layout) = l.operands.get(j) else {
            return Err(t);
        };
        l.operands[j] = view_layout(layout, &step.launch.sizes, view).ok_or(t)?;
    }
    Ok(launch)
}

/// Whether a run of `plan` reads input `t`'s values through `view` in
/// place: when every kernel step that reads it has a strided form
/// ([`strided_launch`]) and no ragged operation reads it (those are
/// lowered row by row as the run goes, for data in C order). Otherwise
/// the run copies the input into C order first.
pub fn read_in_place(
    solved: &SolvedGraph,
    plan: &RunPlan,
    t: TensorId,
    view: &View,
) -> Result<bool, GraphError> {
    let graph = solved.graph();
    let views = HashMap::from([(t, view.clone())]);
    for planned in &plan.ops {
        let (_, operands, _) = graph
            .op(planned.op)
            .ok_or(GraphError::UnknownOp(planned.op.index()))?;
        if planned.ragged {
            for &op in planned.fused.iter().chain([&planned.op]) {
                let (_, operands, _) = graph.op(op).ok_or(GraphError::UnknownOp(op.index()))?;
                if operands.contains(&t) {
                    return Ok(false);
                }
            }
            continue;
        }
        for step in &planned.lowered.steps {
            if strided_launch(step, operands, &views).is_err() {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every point of a launch reads, through the rewritten layout, the
    /// element of the same index as through the C layout.
    fn agrees(layout: &Layout, sizes: &[u64], view: &View) {
        let v = view_layout(layout, sizes, view).expect("a strided form");
        let mut index = vec![0u64; sizes.len()];
        loop {
            let p: u64 = layout.offset
                + layout
                    .strides
                    .iter()
                    .zip(&index)
                    .map(|(s, i)| s * i)
                    .sum::<u64>();
            let q: u64 = v.offset
                + v.strides
                    .iter()
                    .zip(&index)
                    .map(|(s, i)| s * i)
                    .sum::<u64>();
            // The index of C position p.
            let mut rest = p;
            let mut expected = view.offset;
            for (j, &d) in view.dims.iter().enumerate().rev() {
                expected += (rest % d) * view.strides[j];
                rest /= d;
            }
            assert_eq!(q, expected, "at {index:?}");
            let mut k = sizes.len();
            loop {
                if k == 0 {
                    return;
                }
                k -= 1;
                index[k] += 1;
                if index[k] < sizes[k] {
                    break;
                }
                index[k] = 0;
            }
        }
    }

    #[test]
    fn transposes_diagonals_slices_and_broadcasts_keep_their_indices() {
        let f = View::fortran(&[3, 4]);
        // Read transposed: iterators (i0 over 4, i1 over 3).
        agrees(&Layout::new(0, vec![1, 4], 12), &[4, 3], &f);
        // A diagonal of a 3 x 3.
        agrees(&Layout::new(0, vec![4], 9), &[3], &View::fortran(&[3, 3]));
        // A fixed row 2, broadcast along i0.
        agrees(&Layout::new(8, vec![0, 1], 12), &[5, 4], &f);
        // A broadcast view (stride 0) and a sliced view.
        let b = View {
            dims: vec![3, 4],
            strides: vec![0, 1],
            offset: 0,
            len: 4,
        };
        agrees(&Layout::new(0, vec![4, 1], 12), &[3, 4], &b);
        let s = View {
            dims: vec![3, 4],
            strides: vec![10, 2],
            offset: 1,
            len: 30,
        };
        agrees(&Layout::new(0, vec![4, 1], 12), &[3, 4], &s);
    }

    #[test]
    fn a_flat_or_overflowing_read_has_no_strided_form() {
        let f = View::fortran(&[3, 4]);
        assert_eq!(view_layout(&Layout::new(0, vec![1], 12), &[12], &f), None);
        // Reads past the end.
        assert_eq!(
            view_layout(&Layout::new(0, vec![4, 1], 12), &[4, 4], &f),
            None
        );
        // Another buffer length.
        assert_eq!(
            view_layout(&Layout::new(0, vec![4, 1], 13), &[3, 4], &f),
            None
        );
        let huge = View {
            dims: vec![2, 2],
            strides: vec![u64::MAX, 1],
            offset: u64::MAX,
            len: 4,
        };
        assert_eq!(
            view_layout(&Layout::new(0, vec![2, 1], 4), &[2, 2], &huge),
            None
        );
    }
}
