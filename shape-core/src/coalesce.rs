//! Dimension coalescing: the same kernel over fewer, longer loops.
//!
//! Two adjacent iterators can become one when, for every tensor, stepping
//! the outer one is the same as stepping the inner one across its whole
//! range (`stride[outer] == stride[inner] * size[inner]`). Before merging,
//! parallel iterators are ordered by the result's strides (largest
//! outermost), so permuted layouts are walked in memory order where the
//! result allows. Reduction iterators keep their order and stay innermost,
//! so every reduction sums its values in the same order as before: the
//! coalesced kernel gives bit-identical results.

use crate::kernel::{IterKind, Kernel, Launch, Layout};

/// Coalesces a kernel and its launch. The result computes exactly what the
/// input did, usually with fewer iterators.
pub fn coalesce(kernel: &Kernel, launch: &Launch) -> (Kernel, Launch) {
    let tensors = || std::iter::once(&launch.result).chain(&launch.operands);
    let groups = loops(kernel, launch);
    let mut iterators: Vec<IterKind> = Vec::with_capacity(groups.len());
    let mut sizes: Vec<u64> = Vec::with_capacity(groups.len());
    let mut strides: Vec<Vec<u64>> = tensors().map(|_| Vec::new()).collect();
    for group in &groups {
        let Some(&inner) = group.last() else { continue };
        iterators.push(kernel.iterators[inner]);
        sizes.push(group.iter().map(|&k| launch.sizes[k]).product());
        for (s, l) in strides.iter_mut().zip(tensors()) {
            s.push(l.strides[inner]);
        }
    }
    let mut strides = strides.into_iter();
    let layout = |l: &Layout, s: Vec<u64>| Layout::new(l.offset, s, l.len);
    let result = layout(&launch.result, strides.next().unwrap_or_default());
    let operands = launch
        .operands
        .iter()
        .zip(strides)
        .map(|(l, s)| layout(l, s))
        .collect();
    let mut coalesced = Launch::new(sizes, result, operands);
    coalesced.races = launch.races;
    let mut merged = Kernel::new(
        iterators,
        kernel.operands,
        kernel.body.clone(),
        kernel.accumulate,
    );
    // Merged iterators keep their kind, so an epilogue's operands still
    // stay put along every reduction.
    merged.epilogue = kernel.epilogue.clone();
    (merged, coalesced)
}

/// The loops [`coalesce`] runs, outermost first: each the original
/// iterators it merges, outer to inner (size-1 iterators are dropped).
/// Parallel iterators come first, ordered by the result's strides
/// (largest outermost; ties by the operands' strides), then the
/// reductions in their own order; an iterator merges into the loop before
/// it when that loop is of the same kind and, for every tensor, one step
/// of the loop equals the iterator's whole range.
///
/// ```
/// use shape_core::coalesce::loops;
/// use shape_core::kernel::{Accumulate, Expr, IterKind, Kernel, Launch, Layout};
/// let copy = Kernel::new(vec![IterKind::Parallel; 2], 1, Expr::Load(0), Accumulate::Assign);
/// // A C-ordered copy of a 3 x 4 tensor is one loop; a copy of a
/// // Fortran-ordered one keeps two.
/// let c = Launch::new(vec![3, 4], Layout::new(0, vec![4, 1], 12), vec![Layout::new(0, vec![4, 1], 12)]);
/// assert_eq!(loops(&copy, &c), vec![vec![0, 1]]);
/// let f = Launch::new(vec![3, 4], Layout::new(0, vec![4, 1], 12), vec![Layout::new(0, vec![1, 3], 12)]);
/// assert_eq!(loops(&copy, &f), vec![vec![0], vec![1]]);
/// ```
pub fn loops(kernel: &Kernel, launch: &Launch) -> Vec<Vec<usize>> {
    let n = kernel.iterators.len();
    let tensors = || std::iter::once(&launch.result).chain(&launch.operands);
    // Size-1 iterators do nothing.
    let live: Vec<usize> = (0..n)
        .filter(|&k| launch.sizes.get(k).copied().unwrap_or(1) != 1)
        .collect();
    let mut parallel: Vec<usize> = live
        .iter()
        .copied()
        .filter(|&k| kernel.iterators[k] == IterKind::Parallel)
        .collect();
    let reduction: Vec<usize> = live
        .iter()
        .copied()
        .filter(|&k| kernel.iterators[k] == IterKind::Reduction)
        .collect();
    // Largest result stride outermost; ties by the operands' strides.
    parallel.sort_by(|&a, &b| {
        let key = |k: usize| -> Vec<u64> { tensors().map(|l| l.strides[k]).collect() };
        key(b).cmp(&key(a))
    });
    let order: Vec<usize> = parallel.into_iter().chain(reduction).collect();
    let mut groups: Vec<Vec<usize>> = Vec::new();
    for k in order {
        let kind = kernel.iterators[k];
        let size = launch.sizes[k];
        let mergeable = groups.last().is_some_and(|g| {
            let inner = g[g.len() - 1];
            kernel.iterators[inner] == kind
                // The running loop is the outer one: one step of it must
                // equal the new iterator's whole range.
                && tensors().all(|l| l.strides[inner] == l.strides[k] * size)
        });
        match groups.last_mut() {
            Some(g) if mergeable => g.push(k),
            _ => groups.push(vec![k]),
        }
    }
    groups
}
