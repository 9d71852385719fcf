//! Copies (and one-operand pointwise functions) whose operand is read
//! across the result's memory order, such as a transpose: the two loops
//! involved are run in square blocks, so that the lines of the operand a
//! block reads are still cached when the block's next row reads them
//! again. Each element is computed exactly as elsewhere; only the order in
//! which elements are written changes.

use shape_core::kernel::{Expr, Launch};

/// Rows and columns of one block: an 8 x 8 tile is moved through locals.
const BLOCK: usize = 8;
/// Blocks of blocks: a strip of the operand this wide is read while its
/// lines are cached.
const OUTER: usize = 64;

/// Runs a kernel without reductions whose body reads one operand (`load
/// 0`, or a unary function of it) in blocks, when the result is
/// contiguous along the last iterator, the operand is not, and the operand
/// is contiguous along another iterator. Returns false (having done
/// nothing) otherwise.
pub(crate) fn try_execute(
    body: &Expr,
    l: &Launch,
    result: &mut [f32],
    ops: &[(&[f32], &[u64], usize)],
) -> bool {
    let n = l.sizes.len();
    let op = match body {
        Expr::Load(0) => None,
        Expr::Unary(op, a) if **a == Expr::Load(0) => Some(*op),
        _ => return false,
    };
    if ops.len() != 1 || n < 2 || l.result.strides[n - 1] != 1 {
        return false;
    }
    let (a, ast, aoff) = ops[0];
    let q = n - 1;
    if ast[q] <= 1 || l.sizes[q] < BLOCK as u64 {
        return false;
    }
    let Some(p) = (0..q).find(|&p| ast[p] == 1 && l.sizes[p] >= BLOCK as u64) else {
        return false;
    };
    let out = &l.result.strides;
    let others: Vec<usize> = (0..q).filter(|&k| k != p).collect();
    let other_sizes: Vec<u64> = others.iter().map(|&k| l.sizes[k]).collect();
    let (np_, nq) = (l.sizes[p] as usize, l.sizes[q] as usize);
    let (op_, oq) = (out[p] as usize, out[q] as usize);
    let aq = ast[q] as usize;
    crate::fast::for_each_index(&other_sizes, |idx| {
        let mut o0 = l.result.offset as usize;
        let mut a0 = aoff;
        for (&k, &i) in others.iter().zip(idx) {
            o0 += out[k] as usize * i as usize;
            a0 += ast[k] as usize * i as usize;
        }
        for pb0 in (0..np_).step_by(OUTER) {
            for qb in (0..nq).step_by(BLOCK) {
                let qn = BLOCK.min(nq - qb);
                for pb in (pb0..(pb0 + OUTER).min(np_)).step_by(BLOCK) {
                    let pn = BLOCK.min(np_ - pb);
                    if op.is_none() && pn == BLOCK && qn == BLOCK {
                        // A whole tile of a copy: eight contiguous reads into
                        // locals, eight contiguous writes out of them.
                        let mut tile = [[0.0f32; BLOCK]; BLOCK];
                        for (qi, t) in tile.iter_mut().enumerate() {
                            let at = a0 + pb + (qb + qi) * aq;
                            t.copy_from_slice(&a[at..at + BLOCK]);
                        }
                        for pi in 0..BLOCK {
                            let o = o0 + (pb + pi) * op_ + qb * oq;
                            for (qi, t) in tile.iter().enumerate() {
                                result[o + qi * oq] = t[pi];
                            }
                        }
                        continue;
                    }
                    for pi in pb..pb + pn {
                        let o = o0 + pi * op_ + qb * oq;
                        let src = (a, a0 + pi + qb * aq, aq);
                        match op {
                            None => crate::fast::map1(result, o, oq, src, qn, |x| x),
                            Some(f) => crate::fast::map1_op(f, result, o, oq, src, qn),
                        }
                    }
                }
            }
        }
    });
    true
}
