//! The coalesced strided path: the kernel is coalesced first, then run
//! with the innermost loop specialised for the common bodies (a copy, a
//! unary or binary function of loads, a sum or a dot product), so that the
//! inner loop is a plain strided loop the compiler can optimise.
//!
//! Values are combined in exactly the order of the reference path, so the
//! results are bit-identical.

use shape_core::coalesce::coalesce;

use crate::transposed;
use shape_core::kernel::{
    Accumulate, BinaryOp, Expr, IterKind, Kernel, Launch, UnaryOp, WithBinary, WithUnary,
};

/// `map1` with the function inlined: one monomorphic loop per function
/// (through the scalar table's [`UnaryOp::with`]).
pub(crate) fn map1_op(
    op: UnaryOp,
    out: &mut [f32],
    o: usize,
    os: usize,
    a: (&[f32], usize, usize),
    n: usize,
) {
    struct Map1<'a, 'b> {
        out: &'a mut [f32],
        o: usize,
        os: usize,
        a: (&'b [f32], usize, usize),
        n: usize,
    }
    impl WithUnary for Map1<'_, '_> {
        type Output = ();
        fn call(self, f: impl Fn(f32) -> f32 + Copy) {
            map1(self.out, self.o, self.os, self.a, self.n, f);
        }
    }
    op.with(Map1 { out, o, os, a, n });
}

/// `map2` with the function inlined: one monomorphic loop per function
/// (through the scalar table's [`BinaryOp::with`]).
fn map2_op(
    op: BinaryOp,
    out: &mut [f32],
    o: usize,
    os: usize,
    a: (&[f32], usize, usize),
    b: (&[f32], usize, usize),
    n: usize,
) {
    struct Map2<'a, 'b> {
        out: &'a mut [f32],
        o: usize,
        os: usize,
        a: (&'b [f32], usize, usize),
        b: (&'b [f32], usize, usize),
        n: usize,
    }
    impl WithBinary for Map2<'_, '_> {
        type Output = ();
        fn call(self, f: impl Fn(f32, f32) -> f32 + Copy) {
            map2(self.out, self.o, self.os, self.a, self.b, self.n, f);
        }
    }
    op.with(Map2 {
        out,
        o,
        os,
        a,
        b,
        n,
    });
}

/// Iterates an odometer over `sizes`, calling `f` with the index.
pub(crate) fn for_each_index(sizes: &[u64], mut f: impl FnMut(&[u64])) {
    if sizes.contains(&0) {
        return;
    }
    let mut index = vec![0u64; sizes.len()];
    loop {
        f(&index);
        let mut d = sizes.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            index[d] += 1;
            if index[d] < sizes[d] {
                break;
            }
            index[d] = 0;
        }
    }
}

fn dot(strides: &[u64], index: &[u64]) -> usize {
    strides.iter().zip(index).map(|(s, i)| s * i).sum::<u64>() as usize
}

/// How a launch may be spread over threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Threads {
    /// The most threads to use.
    pub(crate) count: usize,
    /// The least work (points of the launch) a thread is given: smaller
    /// launches run on fewer threads, one below twice this.
    pub(crate) min_work: u64,
}

/// Runs a checked kernel; buffers have been validated by the caller. The
/// first parallel iterator is split into ranges, handed out to threads as
/// they ask ([`crate::jobs`]), when the
/// result's elements of each range are a contiguous run of their own:
/// every result element is still computed by one thread, in the
/// reference's order, so the values do not depend on the thread count.
pub(crate) fn execute(
    kernel: &Kernel,
    launch: &Launch,
    result: &mut [f32],
    operands: &[&Vec<f32>],
    threads: Threads,
    fused: bool,
) {
    let (k, l) = coalesce(kernel, launch);
    let points: u64 = l.sizes.iter().fold(1u64, |a, &s| a.saturating_mul(s));
    let wanted = (points / threads.min_work.max(1)).min(threads.count as u64) as usize;
    // A matrix product (no batch iterator before its rows) with rows
    // enough for jobs splits its row tiles into jobs, each thread with its
    // own packed `b`; a batched one, or one of few rows, splits its first
    // iterator below, one product per part.
    let np = parallel_count(&k);
    let product = crate::contraction::is_product(&k.body, k.accumulate);
    if product && np == 2 && k.iterators.len() > np && crate::contraction::row_jobs(&l, np, wanted)
    {
        let ops = operand_views(operands, &l);
        if crate::contraction::try_execute(
            &k.body,
            k.accumulate,
            &l,
            np,
            result,
            &ops,
            fused,
            wanted,
        ) {
            return;
        }
    }
    let first = l.sizes.first().copied().unwrap_or(0);
    let threads = wanted.min(first as usize);
    // A product packs all of `b` in each part: one part per thread.
    let per_thread = if product { 1 } else { PARTS_PER_THREAD };
    let parts = threads.saturating_mul(per_thread).min(first as usize);
    match (threads >= 2 && k.iterators.first() == Some(&IterKind::Parallel))
        .then(|| split_first(&l, parts))
        .flatten()
    {
        Some(ranges) => run_split(&k, &l, result, operands, &ranges, threads, fused),
        None => execute_coalesced(&k, &l, result, operands, fused),
    }
}

/// Parts of the first iterator per thread: handed out as threads ask, so
/// that a thread that starts late takes fewer.
const PARTS_PER_THREAD: usize = 4;

/// The first iterator's ranges, `parts` of them, each with the span of
/// result elements it writes, when each range writes a contiguous run that
/// no other range touches (the first iterator's result stride is at least
/// the extent of everything inside it); `None` otherwise.
fn split_first(l: &Launch, parts: usize) -> Option<Vec<(u64, u64)>> {
    if l.result.strides[0] < inner_extent(l) {
        return None;
    }
    let n = l.sizes[0];
    let parts = parts as u64;
    Some(
        (0..parts)
            .map(|p| (n * p / parts, n * (p + 1) / parts))
            .filter(|(a, b)| a < b)
            .collect(),
    )
}

/// The result elements one index of the first iterator spans: from its
/// first to its last, inclusive.
fn inner_extent(l: &Launch) -> u64 {
    (l.sizes.iter().zip(&l.result.strides))
        .skip(1)
        .map(|(&n, &s)| (n - 1) * s)
        .sum::<u64>()
        + 1
}

/// Runs each range of the first iterator on its own part of `result`,
/// the ranges handed out to `threads` threads as they ask
/// ([`crate::jobs::run`]).
fn run_split(
    k: &Kernel,
    l: &Launch,
    result: &mut [f32],
    operands: &[&Vec<f32>],
    ranges: &[(u64, u64)],
    threads: usize,
    fused: bool,
) {
    let stride0 = l.result.strides[0];
    let inner = inner_extent(l);
    let spans = ranges.iter().map(|&(start, end)| {
        let from = l.result.offset + start * stride0;
        from as usize..(l.result.offset + (end - 1) * stride0 + inner) as usize
    });
    let results = crate::jobs::split_apart(result, spans);
    let parts: Vec<(Launch, &mut [f32])> = (ranges.iter().zip(results))
        .map(|(&(start, end), mine)| {
            let mut part = l.clone();
            part.sizes[0] = end - start;
            part.result.offset = 0;
            for (op, layout) in part.operands.iter_mut().zip(&l.operands) {
                op.offset = layout.offset + start * layout.strides[0];
            }
            (part, mine)
        })
        .collect();
    crate::jobs::run(parts, &mut vec![(); threads], |_, (part, mine)| {
        execute_coalesced(k, &part, mine, operands, fused)
    });
}

/// The parallel iterators of a coalesced kernel, which come first
/// (coalescing puts the reductions innermost).
fn parallel_count(k: &Kernel) -> usize {
    let np = k
        .iterators
        .iter()
        .take_while(|&&i| i == IterKind::Parallel)
        .count();
    debug_assert!(k.iterators[np..].iter().all(|&i| i == IterKind::Reduction));
    np
}

/// Each operand's values with its strides and offset in `l`.
fn operand_views<'a>(
    operands: &[&'a Vec<f32>],
    l: &'a Launch,
) -> Vec<(&'a [f32], &'a [u64], usize)> {
    operands
        .iter()
        .zip(&l.operands)
        .map(|(b, lay)| (b.as_slice(), lay.strides.as_slice(), lay.offset as usize))
        .collect()
}

/// Runs a coalesced kernel on one thread; `fused` lets contractions use
/// fused multiply-adds.
fn execute_coalesced(
    k: &Kernel,
    l: &Launch,
    result: &mut [f32],
    operands: &[&Vec<f32>],
    fused: bool,
) {
    let n = k.iterators.len();
    let np = parallel_count(k);
    let out_strides = &l.result.strides;
    let ops = operand_views(operands, l);

    if np == n {
        // No reduction: the innermost parallel iterator is the inner loop.
        // An accumulation other than an assignment still starts from its
        // identity, as the reference does (`0.0 + -0.0` is `0.0`, and a
        // maximum ignores a NaN): the specialized loops below only assign.
        let assign = k.accumulate == Accumulate::Assign;
        let value = |loads: &[f32]| {
            k.accumulate
                .combine(k.accumulate.identity(), k.body.eval(loads))
        };
        if n == 0 {
            let loads: Vec<f32> = ops.iter().map(|(b, _, off)| b[*off]).collect();
            result[l.result.offset as usize] = value(&loads);
            return;
        }
        if assign && transposed::try_execute(&k.body, l, result, &ops) {
            return;
        }
        let (outer, inner) = (&l.sizes[..n - 1], l.sizes[n - 1] as usize);
        let os = out_strides[n - 1] as usize;
        for_each_index(outer, |idx| {
            let o0 = l.result.offset as usize + dot(&out_strides[..n - 1], idx);
            let base: Vec<usize> = ops
                .iter()
                .map(|(_, st, off)| off + dot(&st[..n - 1], idx))
                .collect();
            let step: Vec<usize> = ops.iter().map(|(_, st, _)| st[n - 1] as usize).collect();
            match &k.body {
                _ if !assign => {
                    let mut loads = vec![0.0; ops.len()];
                    for i in 0..inner {
                        for (j, (b, _, _)) in ops.iter().enumerate() {
                            loads[j] = b[base[j] + i * step[j]];
                        }
                        result[o0 + i * os] = value(&loads);
                    }
                }
                Expr::Load(0) => map1(result, o0, os, (ops[0].0, base[0], step[0]), inner, |x| x),
                Expr::Unary(op, a) if **a == Expr::Load(0) => {
                    map1_op(*op, result, o0, os, (ops[0].0, base[0], step[0]), inner)
                }
                Expr::Binary(op, a, b) if **a == Expr::Load(0) && **b == Expr::Load(1) => map2_op(
                    *op,
                    result,
                    o0,
                    os,
                    (ops[0].0, base[0], step[0]),
                    (ops[1].0, base[1], step[1]),
                    inner,
                ),
                body => {
                    let mut loads = vec![0.0; ops.len()];
                    for i in 0..inner {
                        for (j, (b, _, _)) in ops.iter().enumerate() {
                            loads[j] = b[base[j] + i * step[j]];
                        }
                        result[o0 + i * os] = body.eval(&loads);
                    }
                }
            }
        });
        return;
    }

    // Reductions: for each result element, run the reduction iterators with
    // the innermost one as the inner loop.
    if crate::contraction::try_execute(&k.body, k.accumulate, l, np, result, &ops, fused, 1) {
        return;
    }
    let (par, red) = l.sizes.split_at(np);
    let inner = red[red.len() - 1] as usize;
    let outer_red = &red[..red.len() - 1];
    if outer_red.is_empty() && np >= 1 && k.body == Expr::Load(0) && k.accumulate == Accumulate::Add
    {
        interleaved_sums(l, np, result, ops[0]);
        return;
    }
    for_each_index(par, |pidx| {
        let o = l.result.offset as usize + dot(&out_strides[..np], pidx);
        let mut acc = k.accumulate.identity();
        for_each_index(outer_red, |ridx| {
            let base: Vec<usize> = ops
                .iter()
                .map(|(_, st, off)| off + dot(&st[..np], pidx) + dot(&st[np..n - 1], ridx))
                .collect();
            let step: Vec<usize> = ops.iter().map(|(_, st, _)| st[n - 1] as usize).collect();
            acc = match (&k.body, k.accumulate) {
                (Expr::Load(0), Accumulate::Add) => sum(acc, ops[0].0, base[0], step[0], inner),
                (Expr::Binary(BinaryOp::Mul, a, b), Accumulate::Add)
                    if **a == Expr::Load(0) && **b == Expr::Load(1) =>
                {
                    dot_product(
                        acc,
                        (ops[0].0, base[0], step[0]),
                        (ops[1].0, base[1], step[1]),
                        inner,
                    )
                }
                (body, accumulate) => {
                    let mut loads = vec![0.0; ops.len()];
                    let mut acc = acc;
                    for i in 0..inner {
                        for (j, (b, _, _)) in ops.iter().enumerate() {
                            loads[j] = b[base[j] + i * step[j]];
                        }
                        acc = accumulate.combine(acc, body.eval(&loads));
                    }
                    acc
                }
            };
        });
        result[o] = acc;
    });
}

#[inline]
pub(crate) fn map1(
    out: &mut [f32],
    o: usize,
    os: usize,
    (a, ao, as_): (&[f32], usize, usize),
    n: usize,
    f: impl Fn(f32) -> f32,
) {
    if n == 0 {
        return;
    }
    if os == 1 && as_ == 1 {
        for (y, &x) in out[o..o + n].iter_mut().zip(&a[ao..ao + n]) {
            *y = f(x);
        }
    } else {
        for i in 0..n {
            out[o + i * os] = f(a[ao + i * as_]);
        }
    }
}

#[inline]
fn map2(
    out: &mut [f32],
    o: usize,
    os: usize,
    (a, ao, as_): (&[f32], usize, usize),
    (b, bo, bs): (&[f32], usize, usize),
    n: usize,
    f: impl Fn(f32, f32) -> f32,
) {
    if n == 0 {
        return;
    }
    match (os, as_, bs) {
        (1, 1, 1) => {
            for ((y, &x), &z) in out[o..o + n]
                .iter_mut()
                .zip(&a[ao..ao + n])
                .zip(&b[bo..bo + n])
            {
                *y = f(x, z);
            }
        }
        (1, 1, 0) => {
            let z = b[bo];
            for (y, &x) in out[o..o + n].iter_mut().zip(&a[ao..ao + n]) {
                *y = f(x, z);
            }
        }
        (1, 0, 1) => {
            let x = a[ao];
            for (y, &z) in out[o..o + n].iter_mut().zip(&b[bo..bo + n]) {
                *y = f(x, z);
            }
        }
        _ => {
            for i in 0..n {
                out[o + i * os] = f(a[ao + i * as_], b[bo + i * bs]);
            }
        }
    }
}

#[inline]
fn sum(acc: f32, a: &[f32], ao: usize, as_: usize, n: usize) -> f32 {
    if as_ == 1 {
        a[ao..ao + n].iter().fold(acc, |s, &x| s + x)
    } else {
        (0..n).fold(acc, |s, i| s + a[ao + i * as_])
    }
}

#[inline]
fn dot_product(
    acc: f32,
    (a, ao, as_): (&[f32], usize, usize),
    (b, bo, bs): (&[f32], usize, usize),
    n: usize,
) -> f32 {
    if as_ == 1 && bs == 1 {
        a[ao..ao + n]
            .iter()
            .zip(&b[bo..bo + n])
            .fold(acc, |s, (&x, &y)| s + x * y)
    } else {
        (0..n).fold(acc, |s, i| s + a[ao + i * as_] * b[bo + i * bs])
    }
}

/// Sums over one reduction iterator, eight result elements at a time: each
/// sum still adds its values in order (so results are bit-identical to the
/// reference), but eight independent sums keep the adder busy.
fn interleaved_sums(
    l: &Launch,
    np: usize,
    result: &mut [f32],
    (a, ast, aoff): (&[f32], &[u64], usize),
) {
    const LANES: usize = 8;
    let n = l.sizes.len();
    let (outer_par, last_par) = (&l.sizes[..np - 1], l.sizes[np - 1] as usize);
    let inner = l.sizes[n - 1] as usize;
    let (a_last, a_red) = (ast[np - 1] as usize, ast[n - 1] as usize);
    let out = &l.result.strides;
    let o_last = out[np - 1] as usize;
    for_each_index(outer_par, |pidx| {
        let a0 = aoff + dot(&ast[..np - 1], pidx);
        let o0 = l.result.offset as usize + dot(&out[..np - 1], pidx);
        let mut p = 0;
        while p + LANES <= last_par {
            let mut acc = [0.0f32; LANES];
            for i in 0..inner {
                let at = a0 + p * a_last + i * a_red;
                for (j, s) in acc.iter_mut().enumerate() {
                    *s += a[at + j * a_last];
                }
            }
            for (j, s) in acc.iter().enumerate() {
                result[o0 + (p + j) * o_last] = *s;
            }
            p += LANES;
        }
        for q in p..last_par {
            result[o0 + q * o_last] = sum(0.0, a, a0 + q * a_last, a_red, inner);
        }
    });
}
