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
/// Row tiles per packed block of `a`: 32 tiles of 6 rows by `KC` steps,
/// 192 KiB, stay in the second-level cache while every column strip of
/// the packed `b` passes over them. Each block reads all of the packed
/// `b` once: 32 tiles against 16 made 512^3 6% faster on one thread and
/// on two in alternating binaries of `cargo bench -p backend-cpu --bench
/// threads`, and made no clear difference in `--bench contraction` (which
/// runs numpy between rounds); streaming all of `a` once per strip had
/// left two threads 1.07 times as fast as one.
const MC_TILES: usize = 32;

/// The most values of `b` packed at once (16 MiB): a longer reduction
/// packs its blocks in groups that fit. The unit tests use 16,384 values
/// (two blocks of 32 columns) to reach more than one group with small
/// operands.
const B_PACK_MAX: usize = if cfg!(test) { 1 << 14 } else { 4 << 20 };

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

/// Row tiles in the smallest job on several threads (the largest is a
/// block of `a`, [`MC_TILES`]): a job reads every packed strip of `b`
/// again, worth it for 4 tiles' arithmetic. Jobs shrink towards the end so
/// that the threads end together (a sleeping vCPU took 50 us to 4 ms to
/// wake on the 2-core VM: the thread that starts late takes fewer).
const MIN_JOB_TILES: usize = 4;

/// Runs the kernel as a register-tiled contraction when its coalesced
/// form is one: the body is `load 0 * load 1` summed, the last parallel
/// iterator `j` is contiguous in the result, follows one operand (with any
/// stride) and not the other, and the one before it (`i`) does not follow
/// that operand. Both operands are packed, so either may be transposed.
/// Returns false (having done nothing) otherwise.
///
/// On more than one `worker` (as many as [`row_jobs`] allows), the row
/// tiles are handed out as jobs to whichever thread asks first, each
/// thread packing each group of blocks of `b` before its first job of the
/// group; each result element is still summed by one thread, in the
/// reference's order, so the values do not depend on the threads.
#[allow(clippy::too_many_arguments)]
pub(crate) fn try_execute(
    body: &Expr,
    accumulate: Accumulate,
    l: &Launch,
    np: usize,
    result: &mut [f32],
    ops: &[(&[f32], &[u64], usize)],
    fused: bool,
    workers: usize,
) -> bool {
    let n = l.sizes.len();
    if !is_product(body, accumulate) || ops.len() != 2 || np < 2 || n == np {
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
    let (rows_n, cols_n) = (l.sizes[i] as usize, l.sizes[j] as usize);
    let tiles = rows_n.div_ceil(MR);
    let workers = row_workers(l, np, workers);
    // The packed blocks, allocated fallibly: a launch too large for them
    // takes the strided path instead. `b` is packed a group of reduction
    // blocks at a time (all of them where they fit in `B_PACK_MAX`), so
    // that every job runs each block of the group in turn.
    let strips = cols_n.div_ceil(NR);
    let block_len = strips.saturating_mul(NR * KC);
    let steps = l.sizes[np..].iter().fold(1u64, |a, &s| a.saturating_mul(s));
    let blocks = usize::try_from(steps)
        .unwrap_or(usize::MAX)
        .div_ceil(KC)
        .max(1);
    let group = (B_PACK_MAX / block_len.max(1)).clamp(1, blocks);
    let a_len = tiles.min(MC_TILES) * MR * KC;
    let b_len = block_len.saturating_mul(group);
    // The packs of the last contraction on this thread are used again:
    // allocating and zeroing them afresh cost up to a third of a 512^3
    // launch in its first rounds (fresh pages).
    let mut packs = SPARE.with(|spare| std::mem::take(&mut *spare.borrow_mut()));
    if packs.len() < workers && packs.try_reserve_exact(workers - packs.len()).is_err() {
        return false;
    }
    while packs.len() < workers {
        packs.push(Packs::default());
    }
    for p in &mut packs[..workers] {
        if !fit(&mut p.a, a_len) || !fit(&mut p.b, b_len) {
            return false;
        }
        p.current = false;
    }
    if fused {
        run::<true>(l, np, result, &plan, block_len, &mut packs[..workers]);
    } else {
        run::<false>(l, np, result, &plan, block_len, &mut packs[..workers]);
    }
    let mut kept = 0;
    packs.retain(|p| {
        kept += p.a.capacity() + p.b.capacity();
        kept <= SPARE_MAX
    });
    SPARE.with(|spare| *spare.borrow_mut() = packs);
    true
}

/// Whether `body` accumulated by `accumulate` is a product of two
/// operands summed: what the register tiles compute.
pub(crate) fn is_product(body: &Expr, accumulate: Accumulate) -> bool {
    accumulate == Accumulate::Add
        && matches!(body, Expr::Binary(BinaryOp::Mul, a, b)
            if **a == Expr::Load(0) && **b == Expr::Load(1))
}

/// The threads, of the `wanted`, a contraction's rows give jobs to: each
/// at least two of the smallest, and one where rows of the result overlap
/// (jobs write runs of rows of their own only where a row's elements end
/// before the next row starts).
fn row_workers(l: &Launch, np: usize, wanted: usize) -> usize {
    let (i, j) = (np - 2, np - 1);
    let tiles = (l.sizes[i] as usize).div_ceil(MR);
    if (l.result.strides[i] as usize) < l.sizes[j] as usize {
        1
    } else {
        wanted.min(tiles / (2 * MIN_JOB_TILES)).max(1)
    }
}

/// Whether a contraction (of `np >= 2` parallel iterators) takes the
/// threads it is given in row jobs: yes on one thread, and on several
/// where its rows make jobs for more than one. A product of few rows is
/// better split by its callers, a part per thread.
pub(crate) fn row_jobs(l: &Launch, np: usize, wanted: usize) -> bool {
    np >= 2 && (wanted <= 1 || row_workers(l, np, wanted) > 1)
}

/// The most values of packs kept for the next contraction on a thread
/// (64 MiB): packs past it are dropped, the first ones kept.
const SPARE_MAX: usize = 16 << 20;

thread_local! {
    /// The packs of the last contraction run on this thread.
    static SPARE: std::cell::RefCell<Vec<Packs>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Makes `v` hold exactly `len` values, allocating fallibly; false if the
/// memory is not there.
fn fit(v: &mut Vec<f32>, len: usize) -> bool {
    if v.len() < len && v.try_reserve_exact(len - v.len()).is_err() {
        return false;
    }
    v.resize(len, 0.0);
    true
}

/// One thread's packed operands: a block of `a` as row tiles (for each
/// of up to [`MC_TILES`] tiles, `KC` steps of `MR` values), and a group of
/// blocks of `b` as column strips (for each strip, `KC` steps of `NR`
/// values), zero-padded past the operands' edges. Each thread packs its
/// own `b`: read by another core from the one that packed it, a shared
/// pack made the second thread's jobs 1.6 times as slow (the 2-core VM's
/// vCPUs may not share a cache).
#[derive(Default)]
struct Packs {
    a: Vec<f32>,
    b: Vec<f32>,
    /// Whether `b` holds the current group.
    current: bool,
}

fn dot(strides: &[u64], index: &[u64]) -> usize {
    strides.iter().zip(index).map(|(s, i)| s * i).sum::<u64>() as usize
}

/// Runs the contraction: for each outer index and each group of blocks
/// of `KC` reduction steps, runs the row tiles as jobs, each over every
/// block of the group in order, on one thread per [`Packs`]; a thread
/// packs the group's blocks of `b` (`block_len` values a block) before its
/// first job.
fn run<const FUSED: bool>(
    l: &Launch,
    np: usize,
    result: &mut [f32],
    plan: &Plan<'_>,
    block_len: usize,
    packs: &mut [Packs],
) {
    let n = l.sizes.len();
    let (i, j) = (np - 2, np - 1);
    let (rows_n, cols_n) = (l.sizes[i] as usize, l.sizes[j] as usize);
    let outer = &l.sizes[..i];
    let red = &l.sizes[np..];
    let (a, ast, aoff) = plan.rows;
    let (b, bst, boff) = plan.cols;
    let out = &l.result.strides;
    let (oi, bj) = (out[i] as usize, bst[j] as usize);
    // The reduction flattened in the reference's order: for each step,
    // where it starts in `a` and in `b`.
    let mut steps: Vec<(usize, usize)> = Vec::new();
    crate::fast::for_each_index(red, |r| {
        steps.push((dot(&ast[np..n], r), dot(&bst[np..n], r)));
    });
    // Blocks of the reduction, in order: a block's sums continue from the
    // partial sums the one before stored in the result, so every element
    // adds its products in the reference's order. An empty reduction
    // still writes its zeros (one empty block).
    let blocks: Vec<&[(usize, usize)]> = if steps.is_empty() {
        vec![&[]]
    } else {
        steps.chunks(KC).collect()
    };
    let group = packs
        .first()
        .map_or(1, |p| p.b.len() / block_len.max(1))
        .max(1);
    let tiles = rows_n.div_ceil(MR);
    // On several threads, jobs of `MC_TILES` tiles at first and smaller
    // ones towards the end (a part of what is left for each thread), so
    // that the threads end together; `MC_TILES` on one.
    let mut jobs: Vec<(usize, usize)> = Vec::new();
    let mut first = 0;
    while first < tiles {
        let left = tiles - first;
        let count = if packs.len() > 1 {
            left.div_ceil(2 * packs.len())
                .clamp(MIN_JOB_TILES, MC_TILES)
        } else {
            MC_TILES
        }
        .min(left);
        jobs.push((first, count));
        first += count;
    }
    // Where a job's rows start and end in the result, from the first
    // element of its first row to the last of its last.
    let span = |o0: usize, (first, count): (usize, usize)| {
        let last_row = ((first + count) * MR).min(rows_n) - 1;
        o0 + first * MR * oi..o0 + last_row * oi + cols_n
    };
    let arch = pulp::Arch::new();
    crate::fast::for_each_index(outer, |p| {
        let a0 = aoff + dot(&ast[..i], p);
        let b0 = boff + dot(&bst[..i], p);
        let o0 = l.result.offset as usize + dot(&out[..i], p);
        for (g, chunks) in blocks.chunks(group).enumerate() {
            let group = Group::<FUSED> {
                a: &a[a0..],
                ai: ast[i] as usize,
                b: &b[b0..],
                bj,
                blocks: chunks,
                continues: g > 0,
                block_len,
                rows_n,
                cols_n,
                oi,
                arch,
            };
            for p in packs.iter_mut() {
                p.current = false;
            }
            if let [pack] = packs {
                for &job in &jobs {
                    group.run_job(job, &mut result[span(o0, job)], pack);
                }
                continue;
            }
            // The jobs' rows of the result, split apart so that each
            // thread writes only its own (rows do not overlap:
            // `row_workers`).
            let rows = crate::jobs::split_apart(result, jobs.iter().map(|&job| span(o0, job)));
            let split: Vec<_> = jobs.iter().copied().zip(rows).collect();
            crate::jobs::run(split, packs, |pack, (job, rows)| {
                group.run_job(job, rows, pack)
            });
        }
    });
}

/// A group of blocks of the reduction of one contraction, with `b`
/// packed: what every job of the group reads.
struct Group<'a, const FUSED: bool> {
    /// `a` from its first element for this outer index.
    a: &'a [f32],
    /// `a`'s stride along the rows.
    ai: usize,
    /// Each block's reduction steps: where each starts in `a` (and `b`).
    blocks: &'a [&'a [(usize, usize)]],
    /// Whether sums continue from partial sums stored in the result (an
    /// earlier group's).
    continues: bool,
    /// `b` from its first element for this outer index.
    b: &'a [f32],
    /// `b`'s stride along the columns.
    bj: usize,
    /// Values of one packed block of `b`.
    block_len: usize,
    rows_n: usize,
    cols_n: usize,
    /// The result's stride along the rows.
    oi: usize,
    arch: pulp::Arch,
}

impl<const FUSED: bool> Group<'_, FUSED> {
    /// Packs every block of the group into `packed`, `block_len` values a
    /// block.
    fn pack_b(&self, packed: &mut [f32]) {
        let (cols_n, bj) = (self.cols_n, self.bj);
        for (chunk, packed) in self.blocks.iter().zip(packed.chunks_mut(self.block_len)) {
            for (s, c0) in (0..cols_n).step_by(NR).enumerate() {
                let nr = NR.min(cols_n - c0);
                let strip = &mut packed[s * NR * KC..][..chunk.len() * NR];
                for (k, &(_, bk)) in chunk.iter().enumerate() {
                    let row = &mut strip[k * NR..k * NR + nr];
                    if bj == 1 {
                        let src = &self.b[bk + c0..][..nr];
                        match <&[f32; NR]>::try_from(src) {
                            // A whole strip's row: a copy of known length,
                            // no call (a call per 16 values was most of
                            // packing).
                            Ok(whole) => row.copy_from_slice(whole),
                            Err(_) => row.copy_from_slice(src),
                        }
                    } else {
                        for (c, x) in row.iter_mut().enumerate() {
                            *x = self.b[bk + (c0 + c) * bj];
                        }
                    }
                    strip[k * NR + nr..(k + 1) * NR].fill(0.0);
                }
            }
        }
    }

    /// Runs the row tiles `first..first + count` over every block of the
    /// group in order and every column strip, `MC_TILES` tiles at a time
    /// packed into `packs.a` (with `packs.b` packed first if it is not
    /// current); `rows` is the result from the first element of
    /// the job's first row.
    fn run_job(&self, (first, count): (usize, usize), rows: &mut [f32], packs: &mut Packs) {
        let (rows_n, cols_n, oi) = (self.rows_n, self.cols_n, self.oi);
        if !packs.current {
            self.pack_b(&mut packs.b);
            packs.current = true;
        }
        let Packs {
            a: pack, b: b_pack, ..
        } = packs;
        for sub in (first..first + count).step_by(MC_TILES) {
            let block_tiles = MC_TILES.min(first + count - sub);
            for (bi, chunk) in self.blocks.iter().enumerate() {
                let kc = chunk.len();
                let continues = self.continues || bi > 0;
                // Steps one apart in `a` (a row-major `a`): each row of a
                // tile is read as one run.
                let runs = chunk.windows(2).all(|w| w[1].0 == w[0].0 + 1);
                for bt in 0..block_tiles {
                    let t = sub + bt;
                    let tile = &mut pack[bt * MR * KC..][..kc * MR];
                    match chunk.first() {
                        Some(&(ak, _)) if runs && (t + 1) * MR <= rows_n => {
                            for row in 0..MR {
                                let src = &self.a[ak + (t * MR + row) * self.ai..][..kc];
                                for (k, &x) in src.iter().enumerate() {
                                    tile[k * MR + row] = x;
                                }
                            }
                        }
                        _ => {
                            for (k, &(ak, _)) in chunk.iter().enumerate() {
                                for row in 0..MR {
                                    let r = t * MR + row;
                                    tile[k * MR + row] = if r < rows_n {
                                        self.a[ak + r * self.ai]
                                    } else {
                                        0.0
                                    };
                                }
                            }
                        }
                    }
                }
                let packed = &b_pack[bi * self.block_len..][..self.block_len];
                for (s, c0) in (0..cols_n).step_by(NR).enumerate() {
                    let nr = NR.min(cols_n - c0);
                    let strip = &packed[s * NR * KC..][..kc * NR];
                    for bt in 0..block_tiles {
                        let t = sub + bt;
                        let mr = MR.min(rows_n - t * MR);
                        let mut acc = [[0.0f32; NR]; MR];
                        let at = |row: usize| ((t - first) * MR + row) * oi + c0;
                        if continues {
                            for (row, acc_row) in acc.iter_mut().enumerate().take(mr) {
                                acc_row[..nr].copy_from_slice(&rows[at(row)..][..nr]);
                            }
                        }
                        // The register tile is compiled again with the
                        // widest vectors the machine has (AVX2 and FMA on
                        // x86-64 where present), chosen at run time:
                        // `Micro` is inlined into pulp's function for them
                        // (a closure was not, and ran on baseline SSE2).
                        // Rust never contracts `a * b + c` into a fused
                        // multiply-add: only `FUSED` asks for one.
                        acc = self.arch.dispatch(Micro::<FUSED> {
                            a: &pack[bt * MR * KC..][..kc * MR],
                            b: strip,
                            acc,
                        });
                        for (row, acc_row) in acc.iter().enumerate().take(mr) {
                            rows[at(row)..][..nr].copy_from_slice(&acc_row[..nr]);
                        }
                    }
                }
            }
        }
    }
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
