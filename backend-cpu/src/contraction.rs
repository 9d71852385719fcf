//! Contractions (`out[.., i, j] = sum over k of a[.., i, k] * b[.., k, j]`)
//! by register tiles: a tile of `MR` rows by `NR` columns of the result
//! stays in registers while the whole reduction runs, so each loaded
//! element of the operands feeds several sums, and the column loop is a
//! vector loop.
//!
//! Every result element still adds its products one by one in the order
//! of the reduction iterators, starting from 0: the results are
//! bit-identical to the reference path's (no fused multiply-add; Rust does
//! not contract `a * b + c`).

use shape_core::kernel::{Accumulate, BinaryOp, Expr, Launch};

/// Rows of one register tile.
const MR: usize = 4;
/// Columns of one register tile: two 8-lane vectors where the machine has
/// AVX2 (the tile is compiled for the widest vectors found at run time),
/// four 4-lane ones on baseline x86-64. 16 measured 12.2 ms on a 512^3
/// product against 15 ms for 8 (and 13.5 ms for 6 rows of 16).
const NR: usize = 16;

/// The fewest result columns that take the tiled path (narrower strips
/// run as edge tiles, one element at a time).
const MIN_COLUMNS: u64 = 8;

/// How the two operands and the result are laid out along the last two
/// parallel iterators (`i`, then `j`) and the reduction iterators.
struct Plan<'a> {
    /// The operand that does not depend on `j` (`a[i, k]`).
    rows: (&'a [f32], &'a [u64], usize),
    /// The operand that does not depend on `i` (`b[k, j]`), contiguous
    /// along `j`.
    cols: (&'a [f32], &'a [u64], usize),
}

/// Runs the kernel as a register-tiled contraction when its coalesced
/// form is one: the body is `load 0 * load 1` summed, the last parallel
/// iterator `j` is contiguous in the result and in one operand and absent
/// from the other, the one before it (`i`) is absent from that operand.
/// Returns false (having done nothing) otherwise.
pub(crate) fn try_execute(
    body: &Expr,
    accumulate: Accumulate,
    l: &Launch,
    np: usize,
    result: &mut [f32],
    ops: &[(&[f32], &[u64], usize)],
) -> bool {
    let n = l.sizes.len();
    let is_product = matches!(body, Expr::Binary(BinaryOp::Mul, a, b)
        if **a == Expr::Load(0) && **b == Expr::Load(1));
    if !is_product || accumulate != Accumulate::Add || ops.len() != 2 || np < 2 || n == np {
        return false;
    }
    let (i, j) = (np - 2, np - 1);
    if l.result.strides[j] != 1 || l.sizes[j] < MIN_COLUMNS {
        return false;
    }
    let role = |o: &(&[f32], &[u64], usize)| (o.1[i], o.1[j]);
    let plan = match (role(&ops[0]), role(&ops[1])) {
        ((_, 0), (0, 1)) => Plan {
            rows: ops[0],
            cols: ops[1],
        },
        ((0, 1), (_, 0)) => Plan {
            rows: ops[1],
            cols: ops[0],
        },
        _ => return false,
    };
    // Compiled again with the widest vectors the machine has (AVX2 on
    // x86-64 where present), chosen at run time; no fused multiply-add
    // either way (Rust never contracts `a * b + c`).
    pulp::Arch::new().dispatch(|| run(l, np, result, &plan));
    true
}

fn dot(strides: &[u64], index: &[u64]) -> usize {
    strides.iter().zip(index).map(|(s, i)| s * i).sum::<u64>() as usize
}

#[inline(always)]
fn run(l: &Launch, np: usize, result: &mut [f32], plan: &Plan<'_>) {
    let n = l.sizes.len();
    let (i, j) = (np - 2, np - 1);
    let (rows_n, cols_n) = (l.sizes[i] as usize, l.sizes[j] as usize);
    let outer = &l.sizes[..i];
    let red = &l.sizes[np..];
    let (a, ast, aoff) = plan.rows;
    let (b, bst, boff) = plan.cols;
    let out = &l.result.strides;
    // Every reduction index but the last, in the reference's order.
    let outer_red: Vec<Vec<u64>> = {
        let mut all = Vec::new();
        crate::fast::for_each_index(&red[..red.len() - 1], |r| all.push(r.to_vec()));
        all
    };
    let k_n = red[red.len() - 1] as usize;
    let (ak, bk) = (ast[n - 1] as usize, bst[n - 1] as usize);
    let (ai, oi) = (ast[i] as usize, out[i] as usize);
    crate::fast::for_each_index(outer, |p| {
        let a0 = aoff + dot(&ast[..i], p);
        let b0 = boff + dot(&bst[..i], p);
        let o0 = l.result.offset as usize + dot(&out[..i], p);
        let red_base =
            |r: &[u64]| -> (usize, usize) { (dot(&ast[np..n - 1], r), dot(&bst[np..n - 1], r)) };
        // Column strips outermost: one strip of `b` (k_n x NR) stays in
        // the first-level cache while every row tile passes over it.
        let mut c0 = 0;
        while c0 < cols_n {
            let nr = NR.min(cols_n - c0);
            let mut r0 = 0;
            while r0 < rows_n {
                let mr = MR.min(rows_n - r0);
                if mr == MR && nr == NR {
                    let mut acc = [[0.0f32; NR]; MR];
                    for r in &outer_red {
                        let (ar, br) = red_base(r);
                        for k in 0..k_n {
                            let bs = &b[b0 + br + k * bk + c0..][..NR];
                            for (row, acc_row) in acc.iter_mut().enumerate() {
                                let x = a[a0 + ar + (r0 + row) * ai + k * ak];
                                for (s, &y) in acc_row.iter_mut().zip(bs) {
                                    *s += x * y;
                                }
                            }
                        }
                    }
                    for (row, acc_row) in acc.iter().enumerate() {
                        let o = o0 + (r0 + row) * oi + c0;
                        result[o..o + NR].copy_from_slice(acc_row);
                    }
                } else {
                    // An edge tile: the same order, one element at a time.
                    for row in 0..mr {
                        for col in 0..nr {
                            let mut s = 0.0f32;
                            for r in &outer_red {
                                let (ar, br) = red_base(r);
                                for k in 0..k_n {
                                    s += a[a0 + ar + (r0 + row) * ai + k * ak]
                                        * b[b0 + br + k * bk + c0 + col];
                                }
                            }
                            result[o0 + (r0 + row) * oi + c0 + col] = s;
                        }
                    }
                }
                r0 += mr;
            }
            c0 += nr;
        }
    });
}
