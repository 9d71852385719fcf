//! The CPU backend, with two paths.
//!
//! The reference path ([`CpuBackend::reference`]) runs plain nested loops
//! over the kernel's iterators, in the simplest form that is obviously
//! right: for each point of the parallel iterators, the reduction iterators
//! are run to the end with a local accumulator, and the result element is
//! written once. This path is the oracle: every other backend's results
//! are compared against it. The coalesced path ([`CpuBackend::coalesced`])
//! merges contiguous loops first and runs specialised inner loops, with
//! bit-identical results.
//!
//! ```
//! use backend_cpu::CpuBackend;
//! use shape_core::kernel::{Accumulate, Expr, IterKind, Kernel, Launch, Layout};
//! use shape_core::Backend;
//!
//! // out[i] = sum_j a[i, j]: a 2x3 matrix summed over its rows' elements.
//! let kernel = Kernel::new(
//!     vec![IterKind::Parallel, IterKind::Reduction],
//!     1,
//!     Expr::Load(0),
//!     Accumulate::Add,
//! );
//! let launch = Launch::new(
//!     vec![2, 3],
//!     Layout::new(0, vec![1, 0], 2),
//!     vec![Layout::new(0, vec![3, 1], 6)],
//! );
//! let mut cpu = CpuBackend::new();
//! let a = cpu.upload(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
//! let mut out = cpu.alloc(2).unwrap();
//! cpu.execute(&kernel, &launch, &mut out, &[&a]).unwrap();
//! assert_eq!(cpu.download(&out).unwrap(), vec![6.0, 15.0]);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use shape_core::kernel::{Expr, IterKind, Kernel, Launch, LaunchError};
use shape_core::Backend;

/// A failure of the CPU backend.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum CpuError {
    /// The launch does not fit the kernel or its buffers, or addresses
    /// outside a buffer.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// A buffer larger than the backend allows.
    #[error("a buffer of {elements} f32 elements ({bytes} bytes) exceeds the CPU backend's limit of {limit} bytes per buffer")]
    BufferTooLarge {
        /// Elements asked for.
        elements: usize,
        /// Their size in bytes.
        bytes: u128,
        /// The limit.
        limit: u64,
    },
    /// A buffer within the limit that memory cannot hold.
    #[error(
        "out of memory: a buffer of {elements} f32 elements ({bytes} bytes) could not be allocated"
    )]
    OutOfMemory {
        /// Elements asked for.
        elements: usize,
        /// Their size in bytes.
        bytes: u128,
    },
}

impl CpuError {
    /// A stable, machine-readable name for the error's kind: the
    /// variant's name in snake case, or the launch error's own kind.
    pub fn kind(&self) -> &'static str {
        if let CpuError::Launch(e) = self {
            return e.kind();
        }
        self.into()
    }
}

mod contraction;
mod fast;
mod jobs;
mod transposed;

/// Which of the two CPU execution paths runs kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum CpuPath {
    /// Plain nested loops: the oracle.
    #[default]
    Reference,
    /// Coalesced loops with specialised inner loops; bit-identical results.
    Coalesced,
}

/// The CPU backend; buffers are plain vectors.
#[derive(Clone, Debug)]
pub struct CpuBackend {
    path: CpuPath,
    max_buffer_bytes: u64,
    threads: fast::Threads,
    /// Whether contractions may fuse multiply-adds ([`CpuBackend::fast_math`]).
    fused: bool,
}

/// The least work (points of a launch) worth a thread of its own, by
/// default: 2^20. Measured on the 2-core development machine (`cargo
/// bench -p backend-cpu --bench threads`, docs/performance.md): the
/// calling thread works alongside the pool, so a second thread costs a
/// few microseconds; a pointwise add gains from 2^20 elements (1.06x to
/// 1.12x; 1.4x to 1.7x at 2^22) and breaks even at 2^18, and a 128^3
/// contraction (2^21 points) gains 1.2x.
pub const DEFAULT_MIN_WORK_PER_THREAD: u64 = 1 << 20;

impl Default for CpuBackend {
    fn default() -> Self {
        CpuBackend::reference()
    }
}

/// The bound [`CpuBackend::fast_math`] keeps to, as a fraction of the sum
/// of the magnitudes of the products, per product: a contraction of `k`
/// products differs from the reference by at most `k *
/// FAST_MATH_TOLERANCE * sum |a * b|` (each of the reference's `k`
/// roundings is at most half an ulp, 2^-24 relative, of a partial sum
/// bounded by `sum |a * b|`; the fused path drops some of them, and its
/// own are as small).
pub const FAST_MATH_TOLERANCE: f32 = 1.0 / 8_388_608.0;

/// The default limit on one buffer: 8 GiB.
pub const DEFAULT_MAX_BUFFER_BYTES: u64 = 8 << 30;

impl CpuBackend {
    /// The reference path, the oracle other backends are checked against.
    pub fn new() -> CpuBackend {
        CpuBackend::reference()
    }

    /// The reference path.
    pub fn reference() -> CpuBackend {
        CpuBackend {
            path: CpuPath::Reference,
            max_buffer_bytes: DEFAULT_MAX_BUFFER_BYTES,
            threads: fast::Threads {
                count: 1,
                min_work: DEFAULT_MIN_WORK_PER_THREAD,
            },
            fused: false,
        }
    }

    /// The coalesced strided path, on as many threads as the machine has
    /// ([`std::thread::available_parallelism`]); the values do not depend
    /// on the number of threads.
    pub fn coalesced() -> CpuBackend {
        let count = std::thread::available_parallelism().map_or(1, |n| n.get());
        CpuBackend {
            path: CpuPath::Coalesced,
            max_buffer_bytes: DEFAULT_MAX_BUFFER_BYTES,
            threads: fast::Threads {
                count,
                min_work: DEFAULT_MIN_WORK_PER_THREAD,
            },
            fused: false,
        }
    }

    /// This backend on at most `n` threads (at least one). The coalesced
    /// path splits a launch's first parallel iterator between them, every
    /// result element computed by one thread in the reference's order, so
    /// results are bit-identical for every `n`; the reference path always
    /// runs on one.
    ///
    /// ```
    /// use backend_cpu::CpuBackend;
    /// assert_eq!(CpuBackend::coalesced().threads(3).thread_count(), 3);
    /// assert_eq!(CpuBackend::reference().threads(3).thread_count(), 1);
    /// ```
    pub fn threads(mut self, n: usize) -> CpuBackend {
        if self.path == CpuPath::Coalesced {
            self.threads.count = n.max(1);
        }
        self
    }

    /// This backend giving each thread at least `points` points of a
    /// launch ([`DEFAULT_MIN_WORK_PER_THREAD`] by default); `0` splits
    /// every launch that can be split (tests use it to run the threaded
    /// path on small launches).
    pub fn with_min_work_per_thread(mut self, points: u64) -> CpuBackend {
        self.threads.min_work = points;
        self
    }

    /// This backend with contractions that fuse each multiply-add into
    /// one rounding (FMA, where the machine has it): faster, and no longer
    /// bit-identical to the reference. Each result element still adds its
    /// products in the reference's order, so it differs from the
    /// reference by at most the reference's own rounding error: for a
    /// reduction of `k` products, `|fast - reference| <= k * 2^-23 *
    /// sum |a * b|` ([`FAST_MATH_TOLERANCE`] states it for tests). Only the
    /// coalesced path has it; the reference path ignores it.
    ///
    /// ```
    /// use backend_cpu::CpuBackend;
    /// assert!(CpuBackend::coalesced().fast_math().is_fast_math());
    /// assert!(!CpuBackend::reference().fast_math().is_fast_math());
    /// ```
    pub fn fast_math(mut self) -> CpuBackend {
        self.fused = self.path == CpuPath::Coalesced;
        self
    }

    /// Whether contractions fuse multiply-adds ([`CpuBackend::fast_math`]).
    pub fn is_fast_math(&self) -> bool {
        self.fused
    }

    /// The most threads a launch runs on.
    pub fn thread_count(&self) -> usize {
        self.threads.count
    }

    /// This backend with another limit on the size of one buffer.
    pub fn with_max_buffer_bytes(mut self, bytes: u64) -> CpuBackend {
        self.max_buffer_bytes = bytes;
        self
    }

    fn check_limit(&self, len: usize) -> Result<(), CpuError> {
        let bytes = len as u128 * std::mem::size_of::<f32>() as u128;
        if bytes > self.max_buffer_bytes as u128 {
            return Err(CpuError::BufferTooLarge {
                elements: len,
                bytes,
                limit: self.max_buffer_bytes,
            });
        }
        Ok(())
    }

    fn buffer(&self, len: usize) -> Result<Vec<f32>, CpuError> {
        self.check_limit(len)?;
        let mut v = Vec::new();
        v.try_reserve_exact(len)
            .map_err(|_| CpuError::OutOfMemory {
                elements: len,
                bytes: len as u128 * std::mem::size_of::<f32>() as u128,
            })?;
        Ok(v)
    }

    /// The path this backend runs.
    pub fn path(&self) -> CpuPath {
        self.path
    }
}

/// Advances an odometer over `dims` (of `sizes`); false when it wraps.
fn advance(index: &mut [u64], dims: &[usize], sizes: &[u64]) -> bool {
    for &d in dims.iter().rev() {
        index[d] += 1;
        if index[d] < sizes[d] {
            return true;
        }
        index[d] = 0;
    }
    false
}

/// Applies `epilogue` to every result element in place, reading the
/// operands at the element's parallel point.
fn finish_in_place(
    kernel: &Kernel,
    epilogue: &Expr,
    launch: &Launch,
    result: &mut [f32],
    operands: &[&Vec<f32>],
) {
    let parallel = kernel.iterators_of(IterKind::Parallel);
    let read = kernel.epilogue_operands();
    let mut index = vec![0u64; kernel.iterators.len()];
    let mut loads = vec![0.0f32; kernel.operands];
    loop {
        for &o in &read {
            let layout = &launch.operands[o];
            loads[o] = operands[o][offset(layout.offset, &layout.strides, &index)];
        }
        let at = offset(launch.result.offset, &launch.result.strides, &index);
        result[at] = epilogue.eval_at(&loads, result[at]);
        if !advance(&mut index, &parallel, &launch.sizes) {
            break;
        }
    }
}

fn offset(layout_offset: u64, strides: &[u64], index: &[u64]) -> usize {
    (layout_offset + strides.iter().zip(index).map(|(s, i)| s * i).sum::<u64>()) as usize
}

impl Backend for CpuBackend {
    type Buffer = Vec<f32>;
    type Error = CpuError;

    fn name(&self) -> String {
        match self.path {
            CpuPath::Reference => "cpu (reference)".to_string(),
            CpuPath::Coalesced => "cpu (coalesced)".to_string(),
        }
    }

    fn alloc(&mut self, len: usize) -> Result<Vec<f32>, CpuError> {
        let mut v = self.buffer(len)?;
        v.resize(len, 0.0);
        Ok(v)
    }

    fn upload(&mut self, data: &[f32]) -> Result<Vec<f32>, CpuError> {
        let mut v = self.buffer(data.len())?;
        v.extend_from_slice(data);
        Ok(v)
    }

    fn download(&mut self, buffer: &Vec<f32>) -> Result<Vec<f32>, CpuError> {
        let mut v = self.buffer(buffer.len())?;
        v.extend_from_slice(buffer);
        Ok(v)
    }

    fn len(&self, buffer: &Vec<f32>) -> u64 {
        buffer.len() as u64
    }

    fn runs_row_tables(&self) -> bool {
        true
    }

    fn upload_owned(&mut self, data: Vec<f32>) -> Result<Vec<f32>, CpuError> {
        // The data is kept, not copied: only the limit applies.
        self.check_limit(data.len())?;
        Ok(data)
    }

    fn take(&mut self, buffer: Vec<f32>) -> Result<Vec<f32>, CpuError> {
        Ok(buffer)
    }

    fn execute(
        &mut self,
        kernel: &Kernel,
        launch: &Launch,
        result: &mut Vec<f32>,
        operands: &[&Vec<f32>],
    ) -> Result<(), CpuError> {
        launch.check_buffers(
            kernel,
            result.len() as u64,
            operands.iter().map(|b| b.len() as u64),
        )?;
        if let Some(rows) = &launch.rows {
            return self.run_rows(kernel, launch, rows, result, operands);
        }
        self.run_checked(kernel, launch, result, operands)
    }
}

/// The reference loop's iterators by kind, index and loads, kept between
/// the rows of a launch over rows.
struct Scratch {
    parallel: Vec<usize>,
    reduction: Vec<usize>,
    index: Vec<u64>,
    loads: Vec<f32>,
}

impl Scratch {
    fn new(kernel: &Kernel) -> Scratch {
        let of = |kind| {
            kernel
                .iterators
                .iter()
                .enumerate()
                .filter(move |(_, &k)| k == kind)
                .map(|(i, _)| i)
        };
        Scratch {
            parallel: of(IterKind::Parallel).collect(),
            reduction: of(IterKind::Reduction).collect(),
            index: vec![0; kernel.iterators.len()],
            loads: vec![0.0; kernel.operands],
        }
    }
}

/// The reference loop: every parallel point in row-major order, its
/// reduction points in row-major order, combined in that order. The
/// launch has no empty iterator.
fn reference_loop(
    kernel: &Kernel,
    launch: &Launch,
    result: &mut [f32],
    operands: &[&Vec<f32>],
    scratch: &mut Scratch,
) {
    let Scratch {
        parallel,
        reduction,
        index,
        loads,
    } = scratch;
    index.fill(0);
    loop {
        let mut acc = kernel.accumulate.identity();
        loop {
            for (o, (layout, buf)) in launch.operands.iter().zip(operands).enumerate() {
                loads[o] = buf[offset(layout.offset, &layout.strides, index)];
            }
            acc = kernel.accumulate.combine(acc, kernel.body.eval(loads));
            if !advance(index, reduction, &launch.sizes) {
                break;
            }
        }
        result[offset(launch.result.offset, &launch.result.strides, index)] =
            kernel.finish(loads, acc);
        if !advance(index, parallel, &launch.sizes) {
            break;
        }
    }
}

impl CpuBackend {
    /// Runs a launch over rows that [`Launch::check_buffers`] accepted:
    /// each row as the launch [`Launch::row_launch`] gives, through the
    /// reference loop on either path (a row is a few elements; its
    /// results are the reference's in any case), with one launch and
    /// one scratch reused from row to row.
    fn run_rows(
        &mut self,
        kernel: &Kernel,
        launch: &Launch,
        rows: &shape_core::kernel::RowTable,
        result: &mut [f32],
        operands: &[&Vec<f32>],
    ) -> Result<(), CpuError> {
        let mut row = launch.clone();
        row.rows = None;
        let mut scratch = Scratch::new(kernel);
        for r in 0..rows.len() {
            let (len, offsets) = rows.row(r);
            row.sizes[rows.along] = len;
            let layouts = std::iter::once(&mut row.result).chain(&mut row.operands);
            for (layout, &o) in layouts.zip(offsets) {
                layout.offset = o;
            }
            if row.sizes.contains(&0) {
                // An empty row: nothing, or each result's reduction of no
                // values, as any launch.
                if let Some(fill) = row.empty_reduction(kernel)? {
                    let inputs: Vec<&Vec<f32>> =
                        fill.operands.iter().map(|&o| operands[o]).collect();
                    let mut s = Scratch::new(&fill.kernel);
                    reference_loop(&fill.kernel, &fill.launch, result, &inputs, &mut s);
                }
                continue;
            }
            reference_loop(kernel, &row, result, operands, &mut scratch);
        }
        Ok(())
    }
}

impl CpuBackend {
    /// Runs a launch that [`Launch::check_buffers`] accepted.
    fn run_checked(
        &mut self,
        kernel: &Kernel,
        launch: &Launch,
        result: &mut Vec<f32>,
        operands: &[&Vec<f32>],
    ) -> Result<(), CpuError> {
        if launch.sizes.contains(&0) {
            // Nothing to write, or each element's reduction of no values.
            return match launch.empty_reduction(kernel)? {
                Some(fill) => {
                    let inputs: Vec<&Vec<f32>> =
                        fill.operands.iter().map(|&o| operands[o]).collect();
                    self.execute(&fill.kernel, &fill.launch, result, &inputs)
                }
                None => Ok(()),
            };
        }
        if self.path == CpuPath::Coalesced {
            match &kernel.epilogue {
                None => fast::execute(kernel, launch, result, operands, self.threads, self.fused),
                Some(epilogue) => {
                    // The fast paths know plain reductions; the epilogue
                    // then runs once per result element, as the reference
                    // runs it.
                    let mut plain = kernel.clone();
                    plain.epilogue = None;
                    fast::execute(&plain, launch, result, operands, self.threads, self.fused);
                    finish_in_place(kernel, epilogue, launch, result, operands);
                }
            }
            return Ok(());
        }
        reference_loop(kernel, launch, result, operands, &mut Scratch::new(kernel));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use shape_core::kernel::{Accumulate, Expr, Layout};

    #[test]
    fn a_failed_allocation_is_out_of_memory_not_over_the_limit() {
        // More than isize::MAX bytes: no allocator can give it, whatever
        // the limit says.
        let mut cpu = CpuBackend::new().with_max_buffer_bytes(u64::MAX);
        let e = cpu.alloc(usize::MAX / 4).unwrap_err();
        assert!(matches!(e, CpuError::OutOfMemory { .. }), "{e}");
        assert!(
            e.to_string().starts_with("out of memory: a buffer of "),
            "{e}"
        );
        let e = CpuBackend::new().alloc(3 << 30).unwrap_err();
        assert!(matches!(e, CpuError::BufferTooLarge { .. }), "{e}");
    }

    #[test]
    fn buffers_that_do_not_match_the_launch_are_typed_errors() {
        let kernel = Kernel::new(
            vec![IterKind::Parallel],
            1,
            Expr::Load(0),
            Accumulate::Assign,
        );
        let layout = Layout::new(0, vec![1], 3);
        let launch = Launch::new(vec![3], layout.clone(), vec![layout]);
        let mut cpu = CpuBackend::new();
        let mut out = vec![0.0; 3];
        let e = cpu.execute(&kernel, &launch, &mut out, &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "the kernel reads 1 operand buffers but 0 were given"
        );
        let e = cpu
            .execute(&kernel, &launch, &mut out, &[&vec![1.0; 2]])
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "operand 0 has 2 elements but its layout says 3"
        );
        let e = cpu
            .execute(&kernel, &launch, &mut vec![0.0; 4], &[&vec![1.0; 3]])
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the result has 4 elements but its layout says 3"
        );
        cpu.execute(&kernel, &launch, &mut out, &[&vec![1.0, 2.0, 3.0]])
            .unwrap();
        assert_eq!(out, vec![1.0, 2.0, 3.0]);
        // A body that reads an operand the kernel does not declare.
        let reads_missing = kernel.clone().with_body(Expr::Load(1));
        let e = cpu
            .execute(&reads_missing, &launch, &mut out, &[&vec![1.0; 3]])
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the kernel's body reads operand 1 but the kernel declares 1 operands"
        );
    }
}

#[cfg(test)]
mod loop_order_tests {
    use super::*;
    use shape_core::coalesce::coalesce;
    use shape_core::kernel::{Accumulate, Expr, Layout};

    fn values(n: usize, seed: usize) -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7919 + seed) % 1000) as f32 * 0.013 - 6.1)
            .collect()
    }

    fn bits(v: &[f32]) -> Vec<u32> {
        v.iter().map(|x| x.to_bits()).collect()
    }

    /// Runs on both paths, checks that `engaged` takes the coalesced form,
    /// and compares bit for bit.
    fn check(
        kernel: &Kernel,
        launch: &Launch,
        inputs: &[Vec<f32>],
        engaged: impl Fn(&Kernel, &Launch, &mut [f32], &[(&[f32], &[u64], usize)]) -> bool,
    ) {
        let refs: Vec<&Vec<f32>> = inputs.iter().collect();
        let n = launch.result.len as usize;
        let mut expected = vec![0.0; n];
        CpuBackend::reference()
            .execute(kernel, launch, &mut expected, &refs)
            .unwrap();
        let mut got = vec![0.0; n];
        CpuBackend::coalesced()
            .execute(kernel, launch, &mut got, &refs)
            .unwrap();
        assert_eq!(bits(&got), bits(&expected));
        let (k, l) = coalesce(kernel, launch);
        let ops: Vec<(&[f32], &[u64], usize)> = inputs
            .iter()
            .zip(&l.operands)
            .map(|(b, lay)| (b.as_slice(), lay.strides.as_slice(), lay.offset as usize))
            .collect();
        let mut direct = vec![0.0; n];
        assert!(
            engaged(&k, &l, &mut direct, &ops),
            "the path did not take the kernel"
        );
        assert_eq!(bits(&direct), bits(&expected));
    }

    #[test]
    fn only_products_of_rows_enough_for_two_threads_take_row_jobs() {
        // 16 row tiles of 6 (96 rows) give two threads two jobs of 4
        // tiles at least; fewer rows split a part per thread instead (64 x
        // 4096 by 4096 x 4096 would otherwise run on one thread).
        for (m, threads, jobs) in [
            (64, 2, false),
            (90, 2, false),
            (96, 2, true),
            (512, 2, true),
            (8, 1, true),
        ] {
            let (kernel, launch) = shape_core::kernel::matmul(m, 64, 64);
            let (k, l) = coalesce(&kernel, &launch);
            let np = k
                .iterators
                .iter()
                .filter(|&&i| i == IterKind::Parallel)
                .count();
            assert_eq!(
                crate::contraction::row_jobs(&l, np, threads),
                jobs,
                "{m} rows"
            );
        }
    }

    #[test]
    fn reductions_longer_than_one_group_of_packed_blocks_continue_in_order() {
        // In the unit tests a group of packed `b` holds 16,384 values: two
        // blocks of 256 steps at 32 columns. 600 steps take two groups,
        // the second continuing from the sums the first stored, on one
        // thread (13 rows) and on two (96 rows: 16 tiles, jobs split
        // between two of the three threads asked for).
        for m in [13, 96] {
            let (n, k) = (32, 600);
            let (kernel, launch) = shape_core::kernel::matmul(m, n, k);
            let inputs = [values((m * k) as usize, 3), values((k * n) as usize, 4)];
            check(&kernel, &launch, &inputs, |k, l, out, ops| {
                crate::contraction::try_execute(&k.body, k.accumulate, l, 2, out, ops, false, 3)
            });
        }
    }

    #[test]
    fn register_tiles_take_contractions_of_any_size() {
        // out[i, j] = sum_k a[i, k] * b[k, j], sizes off the tiles' edges.
        // Reductions past one packed block (256 steps) continue from the
        // partial sums stored in the result, in order.
        for (m, n, k) in [
            (9, 17, 5),
            (4, 8, 2),
            (13, 8, 33),
            (5, 23, 7),
            (7, 19, 600),
            (30, 33, 257),
            (6, 16, 0),
        ] {
            let (kernel, mut launch) = shape_core::kernel::matmul(m, n, k);
            let inputs = [values((m * k) as usize, 1), values((k * n) as usize, 2)];
            check(&kernel, &launch, &inputs, |k, l, out, ops| {
                let np = k
                    .iterators
                    .iter()
                    .filter(|&&i| i == IterKind::Parallel)
                    .count();
                crate::contraction::try_execute(&k.body, k.accumulate, l, np, out, ops, false, 1)
            });
            // `b` transposed (`b[j, k]`): packed, so it takes the tiles too
            // (with no reduction, `b` follows no iterator at all).
            if k == 0 {
                continue;
            }
            launch.operands[1] = Layout::new(0, vec![0, k, 1], k * n);
            check(&kernel, &launch, &inputs, |k, l, out, ops| {
                let np = k
                    .iterators
                    .iter()
                    .filter(|&&i| i == IterKind::Parallel)
                    .count();
                crate::contraction::try_execute(&k.body, k.accumulate, l, np, out, ops, false, 1)
            });
        }
    }

    #[test]
    fn fast_math_contractions_stay_within_the_stated_bound() {
        for (m, n, k) in [(9, 17, 5), (13, 8, 33), (7, 19, 600), (64, 64, 300)] {
            let (kernel, launch) = shape_core::kernel::matmul(m, n, k);
            let (a, b) = (values((m * k) as usize, 1), values((k * n) as usize, 2));
            let mut expected = vec![0.0; (m * n) as usize];
            CpuBackend::reference()
                .execute(&kernel, &launch, &mut expected, &[&a, &b])
                .unwrap();
            let mut fast = vec![0.0; (m * n) as usize];
            let mut backend = CpuBackend::coalesced().fast_math();
            backend
                .execute(&kernel, &launch, &mut fast, &[&a, &b])
                .unwrap();
            let (m, n, k) = (m as usize, n as usize, k as usize);
            let mut differs = false;
            for i in 0..m {
                for j in 0..n {
                    let magnitude: f32 = (0..k).map(|r| (a[i * k + r] * b[r * n + j]).abs()).sum();
                    let bound = k as f32 * FAST_MATH_TOLERANCE * magnitude;
                    let (x, y) = (fast[i * n + j], expected[i * n + j]);
                    assert!(
                        (x - y).abs() <= bound,
                        "{m}x{n}x{k} at ({i}, {j}): {x} against {y}, bound {bound}"
                    );
                    differs |= x != y;
                }
            }
            // Where the machine fuses, some element rounds differently.
            #[cfg(target_arch = "x86_64")]
            let fma = std::arch::is_x86_feature_detected!("fma");
            #[cfg(not(target_arch = "x86_64"))]
            let fma = false;
            if k >= 33 && fma {
                assert!(differs, "fast math changed nothing");
            }
        }
    }

    #[test]
    fn blocked_copies_take_transposes_of_any_size() {
        for (m, n) in [(8, 8), (33, 17), (9, 64), (40, 11)] {
            for body in [
                Expr::Load(0),
                Expr::Unary(shape_core::kernel::UnaryOp::Exp, Box::new(Expr::Load(0))),
            ] {
                let kernel = Kernel::new(vec![IterKind::Parallel; 2], 1, body, Accumulate::Assign);
                // out[j, i] = a[i, j]: the result's order is (j, i).
                let launch = Launch::new(
                    vec![n, m],
                    Layout::new(0, vec![m, 1], m * n),
                    vec![Layout::new(0, vec![1, n], m * n)],
                );
                let inputs = [values((m * n) as usize, 3)];
                check(&kernel, &launch, &inputs, |k, l, out, ops| {
                    crate::transposed::try_execute(&k.body, l, out, ops)
                });
            }
        }
    }
}
