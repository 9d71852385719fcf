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

    let mut iterators: Vec<IterKind> = Vec::new();
    let mut sizes: Vec<u64> = Vec::new();
    let mut strides: Vec<Vec<u64>> = tensors().map(|_| Vec::new()).collect();
    for k in order {
        let kind = kernel.iterators[k];
        let size = launch.sizes[k];
        let mergeable = iterators.last() == Some(&kind)
            && tensors().zip(&strides).all(|(l, s)| {
                // The running iterator is the outer one: one step of it must
                // equal the new iterator's whole range.
                s.last().copied() == Some(l.strides[k] * size)
            });
        if mergeable {
            let last = sizes.len() - 1;
            sizes[last] *= size;
            for (s, l) in strides.iter_mut().zip(tensors()) {
                *s.last_mut().expect("merged iterator") = l.strides[k];
            }
        } else {
            iterators.push(kind);
            sizes.push(size);
            for (s, l) in strides.iter_mut().zip(tensors()) {
                s.push(l.strides[k]);
            }
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
