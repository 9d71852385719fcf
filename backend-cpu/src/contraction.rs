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
pub(crate) const MR: usize = 6;
/// Columns of one register tile: two 8-lane vectors where the machine has
/// AVX2 (the tile is compiled for the widest vectors found at run time),
/// four 4-lane ones on baseline x86-64. With packed operands 6 x 16 keeps
/// twelve accumulators in registers (measured in `cargo bench -p
/// backend-cpu --bench contraction`).
pub(crate) const NR: usize = 16;
/// Reduction steps per block: a packed block of `b` (KC x NR) and of one
/// row tile of `a` (KC x MR) stay in the first-level cache together.
const KC: usize = 256;
/// Row tiles per packed block of `a`: 16 tiles of 6 rows by `KC` steps,
/// 96 KiB, stay in the second-level cache while every column strip of
/// the packed `b` passes over them (measured: streaming all of `a` once
/// per strip left two threads 1.07 times as fast as one at 512^3).
const MC_TILES: usize = 16;

/// The fewest result columns that take the tiled path (narrower results
/// run on the strided path).
const MIN_COLUMNS: u64 = 8;

/// How the two operands and the result are laid out along the last two
/// parallel iterators (`i`, then `j`) and the reduction iterators.
struct Plan<'a> {
    /// The operand that does not depend on `j` (`a[i, k]`).
    rows: (&'a [f32], &'a [u64], usize),
    /// The operand that does not depend on `i` (`b[k, j]`, or `b[j, k]`
    /// transposed: any stride along `j`, since it is packed).
    cols: (&'a [f32], &'a [u64], usize),
}

/// Runs the kernel as a register-tiled contraction when its coalesced
/// form is one: the body is `load 0 * load 1` summed, the last parallel
/// iterator `j` is contiguous in the result, follows one operand (with any
/// stride) and not the other, and the one before it (`i`) does not follow
/// that operand. Both operands are packed, so either may be transposed.
/// Returns false (having done nothing) otherwise.
pub(crate) fn try_execute(
    body: &Expr,
    accumulate: Accumulate,
    l: &Launch,
    np: usize,
    result: &mut [f32],
    ops: &[(&[f32], &[u64], usize)],
    fused: bool,
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
        ((_, 0), (0, bj)) if bj > 0 => Plan {
            rows: ops[0],
            cols: ops[1],
        },
        ((0, bj), (_, 0)) if bj > 0 => Plan {
            rows: ops[1],
            cols: ops[0],
        },
        _ => return false,
    };
    // The packed blocks, allocated fallibly: a launch too large for them
    // takes the strided path instead.
    let tiles = (l.sizes[i] as usize).div_ceil(MR).min(MC_TILES);
    let strips = (l.sizes[j] as usize).div_ceil(NR);
    let mut packs = Packs::default();
    let (a_len, b_len) = (tiles * MR * KC, strips.saturating_mul(NR * KC));
    if packs.a.try_reserve_exact(a_len).is_err() || packs.b.try_reserve_exact(b_len).is_err() {
        return false;
    }
    packs.a.resize(a_len, 0.0);
    packs.b.resize(b_len, 0.0);
    if fused {
        run::<true>(l, np, result, &plan, &mut packs);
    } else {
        run::<false>(l, np, result, &plan, &mut packs);
    }
    true
}

/// The packed blocks of a contraction: a block of `a` as row tiles (for
/// each of up to [`MC_TILES`] tiles, `KC` steps of `MR` values), and a
/// block of `b` as column strips (for each strip, `KC` steps of `NR`
/// values), zero-padded past the operands' edges.
#[derive(Default)]
struct Packs {
    a: Vec<f32>,
    b: Vec<f32>,
}

fn dot(strides: &[u64], index: &[u64]) -> usize {
    strides.iter().zip(index).map(|(s, i)| s * i).sum::<u64>() as usize
}

#[inline(always)]
fn run<const FUSED: bool>(
    l: &Launch,
    np: usize,
    result: &mut [f32],
    plan: &Plan<'_>,
    packs: &mut Packs,
) {
    let n = l.sizes.len();
    let (i, j) = (np - 2, np - 1);
    let (rows_n, cols_n) = (l.sizes[i] as usize, l.sizes[j] as usize);
    let outer = &l.sizes[..i];
    let red = &l.sizes[np..];
    let (a, ast, aoff) = plan.rows;
    let (b, bst, boff) = plan.cols;
    let out = &l.result.strides;
    let (ai, oi, bj) = (ast[i] as usize, out[i] as usize, bst[j] as usize);
    // The reduction flattened in the reference's order: for each step,
    // where it starts in `a` and in `b`.
    let mut steps: Vec<(usize, usize)> = Vec::new();
    crate::fast::for_each_index(red, |r| {
        steps.push((dot(&ast[np..n], r), dot(&bst[np..n], r)));
    });
    let tiles = rows_n.div_ceil(MR);
    let arch = pulp::Arch::new();
    crate::fast::for_each_index(outer, |p| {
        let a0 = aoff + dot(&ast[..i], p);
        let b0 = boff + dot(&bst[..i], p);
        let o0 = l.result.offset as usize + dot(&out[..i], p);
        // Blocks of the reduction, in order: a block's sums continue from
        // the partial sums the one before stored in the result, so every
        // element adds its products in the reference's order.
        // An empty reduction still writes its zeros (one empty block).
        let blocks: Vec<&[(usize, usize)]> = if steps.is_empty() {
            vec![&[]]
        } else {
            steps.chunks(KC).collect()
        };
        for (block, chunk) in blocks.into_iter().enumerate() {
            let kc = chunk.len();
            // Every column strip of this block of `b`, packed once.
            for (s, c0) in (0..cols_n).step_by(NR).enumerate() {
                let nr = NR.min(cols_n - c0);
                let strip = &mut packs.b[s * NR * KC..][..kc * NR];
                for (k, &(_, bk)) in chunk.iter().enumerate() {
                    let row = &mut strip[k * NR..k * NR + nr];
                    if bj == 1 {
                        row.copy_from_slice(&b[b0 + bk + c0..][..nr]);
                    } else {
                        for (c, x) in row.iter_mut().enumerate() {
                            *x = b[b0 + bk + (c0 + c) * bj];
                        }
                    }
                    strip[k * NR + nr..(k + 1) * NR].fill(0.0);
                }
            }
            for first in (0..tiles).step_by(MC_TILES) {
                let block_tiles = MC_TILES.min(tiles - first);
                for bt in 0..block_tiles {
                    let t = first + bt;
                    let tile = &mut packs.a[bt * MR * KC..][..kc * MR];
                    for (k, &(ak, _)) in chunk.iter().enumerate() {
                        for row in 0..MR {
                            let r = t * MR + row;
                            tile[k * MR + row] = if r < rows_n { a[a0 + ak + r * ai] } else { 0.0 };
                        }
                    }
                }
                for (s, c0) in (0..cols_n).step_by(NR).enumerate() {
                    let nr = NR.min(cols_n - c0);
                    let strip = &packs.b[s * NR * KC..][..kc * NR];
                    for bt in 0..block_tiles {
                        let t = first + bt;
                        let mr = MR.min(rows_n - t * MR);
                        let mut acc = [[0.0f32; NR]; MR];
                        if block > 0 {
                            for (row, acc_row) in acc.iter_mut().enumerate().take(mr) {
                                let o = o0 + (t * MR + row) * oi + c0;
                                acc_row[..nr].copy_from_slice(&result[o..o + nr]);
                            }
                        }
                        // The register tile is compiled again with the
                        // widest vectors the machine has (AVX2 and FMA on
                        // x86-64 where present), chosen at run time:
                        // `Micro` is inlined into pulp's function for them
                        // (a closure was not, and ran on baseline SSE2).
                        // Rust never contracts `a * b + c` into a fused
                        // multiply-add: only `FUSED` asks for one.
                        let a_tile = &packs.a[bt * MR * KC..][..kc * MR];
                        acc = arch.dispatch(Micro::<FUSED> {
                            a: a_tile,
                            b: strip,
                            acc,
                        });
                        for (row, acc_row) in acc.iter().enumerate().take(mr) {
                            let o = o0 + (t * MR + row) * oi + c0;
                            result[o..o + nr].copy_from_slice(&acc_row[..nr]);
                        }
                    }
                }
            }
        }
    });
}

/// One register tile over a packed block, as a [`pulp::WithSimd`]
/// operation: `acc[r][c] += a[k][r] * b[k][c]` for each step `k` in
/// order, fused into one rounding when `FUSED`. The tile is taken and
/// given back by value, so it lives in registers.
struct Micro<'a, const FUSED: bool> {
    a: &'a [f32],
    b: &'a [f32],
    acc: [[f32; NR]; MR],
}

impl<const FUSED: bool> pulp::WithSimd for Micro<'_, FUSED> {
    type Output = [[f32; NR]; MR];

    #[inline(always)]
    fn with_simd<S: pulp::Simd>(self, _: S) -> Self::Output {
        let mut acc = self.acc;
        for (ak, bk) in self.a.chunks_exact(MR).zip(self.b.chunks_exact(NR)) {
            let (Ok(ak), Ok(bk)) = (<&[f32; MR]>::try_from(ak), <&[f32; NR]>::try_from(bk)) else {
                continue;
            };
            for r in 0..MR {
                let x = ak[r];
                for c in 0..NR {
                    acc[r][c] = if FUSED {
                        x.mul_add(bk[c], acc[r][c])
                    } else {
                        acc[r][c] + x * bk[c]
                    };
                }
            }
        }
        acc
    }
}
