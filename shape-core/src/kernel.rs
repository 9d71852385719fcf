//! The kernel IR: one backend-independent description of a loop nest.
//!
//! A [`Kernel`] says *what* is computed: how many loop iterators there are
//! and which of them are reductions, how many operands are read, the scalar
//! computation per point, and how results accumulate. It never holds a
//! size: the iterator sizes and every tensor's offset and per-iterator
//! strides come at launch time in a [`Launch`], so one compiled kernel
//! serves every size of the same structure.
//!
//! Every way an operation indexes a tensor is an affine map from the
//! iterators: broadcasting is a zero stride, a diagonal is the sum of two
//! axes' strides on one iterator, a fixed index or a slice is an offset.

use std::fmt;

/// Whether a loop iterator spans the result or is summed (reduced) away.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IterKind {
    /// Each value of the iterator addresses a different result element.
    Parallel,
    /// The iterator does not address the result: values are accumulated.
    Reduction,
}

/// How computed values combine into the result element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Accumulate {
    /// Each result element is written once (no reduction iterators).
    Assign,
    /// Sum.
    Add,
    /// Product.
    Mul,
    /// Maximum.
    Max,
    /// Minimum.
    Min,
}

impl Accumulate {
    /// The value a reduction starts from.
    pub fn identity(self) -> f32 {
        match self {
            Accumulate::Assign | Accumulate::Add => 0.0,
            Accumulate::Mul => 1.0,
            Accumulate::Max => f32::NEG_INFINITY,
            Accumulate::Min => f32::INFINITY,
        }
    }

    /// Combines an accumulated value with a new one.
    pub fn combine(self, acc: f32, x: f32) -> f32 {
        match self {
            Accumulate::Assign => x,
            Accumulate::Add => acc + x,
            Accumulate::Mul => acc * x,
            Accumulate::Max => crate::scalar::max_number(acc, x),
            Accumulate::Min => crate::scalar::min_number(acc, x),
        }
    }
}

pub use crate::scalar::{relu, BinaryOp, UnaryOp, WithBinary, WithUnary};

/// A comparison, giving 1.0 when it holds and 0.0 otherwise
/// (`#[non_exhaustive]`, as [`UnaryOp`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CompareOp {
    /// `a < b`
    Lt,
    /// `a <= b`
    Le,
    /// `a == b`
    Eq,
    /// `a != b`
    Ne,
}

/// The scalar computation at one point of the loop nest.
///
/// `#[non_exhaustive]`: kinds still to come (a size passed as a launch
/// value, an opaque user function) are additions. A backend refuses a body
/// it cannot run with a typed error rather than running something else.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Expr {
    /// The element of operand `n` at this point.
    Load(usize),
    /// A constant.
    Const(f32),
    /// A unary function.
    Unary(UnaryOp, Box<Expr>),
    /// A binary function.
    Binary(BinaryOp, Box<Expr>, Box<Expr>),
    /// A comparison.
    Compare(CompareOp, Box<Expr>, Box<Expr>),
    /// `if cond != 0 { a } else { b }`.
    Select(Box<Expr>, Box<Expr>, Box<Expr>),
    /// The value accumulated at this result element: only in a kernel's
    /// epilogue ([`Kernel::with_epilogue`]), where it is the reduction's
    /// result before it is written.
    Accumulated,
}

impl Expr {
    /// The value at a point, given the loaded operand values
    /// ([`Expr::Accumulated`] is NaN: use [`Expr::eval_at`] for an
    /// epilogue).
    pub fn eval(&self, loads: &[f32]) -> f32 {
        self.eval_at(loads, f32::NAN)
    }

    /// The value at a point, given the loaded operand values and the
    /// value accumulated there (what [`Expr::Accumulated`] reads).
    ///
    /// ```
    /// use shape_core::kernel::{BinaryOp, Expr};
    /// let bias_add = Expr::Binary(BinaryOp::Add, Box::new(Expr::Accumulated), Box::new(Expr::Load(2)));
    /// assert_eq!(bias_add.eval_at(&[0.0, 0.0, 0.5], 2.0), 2.5);
    /// ```
    pub fn eval_at(&self, loads: &[f32], acc: f32) -> f32 {
        let eval = |e: &Expr| e.eval_at(loads, acc);
        match self {
            Expr::Accumulated => acc,
            Expr::Load(i) => loads.get(*i).copied().unwrap_or(f32::NAN),
            Expr::Const(c) => *c,
            Expr::Unary(op, a) => op.eval(eval(a)),
            Expr::Binary(op, a, b) => op.eval(eval(a), eval(b)),
            Expr::Compare(op, a, b) => {
                let (x, y) = (eval(a), eval(b));
                let holds = match op {
                    CompareOp::Lt => x < y,
                    CompareOp::Le => x <= y,
                    CompareOp::Eq => x == y,
                    CompareOp::Ne => x != y,
                };
                if holds {
                    1.0
                } else {
                    0.0
                }
            }
            Expr::Select(c, a, b) => {
                if eval(c) != 0.0 {
                    eval(a)
                } else {
                    eval(b)
                }
            }
        }
    }

    /// The expression with each load of operand `k` replaced by
    /// `load(k)` (to renumber operands, or to inline another expression).
    ///
    /// ```
    /// use shape_core::kernel::{BinaryOp, Expr};
    /// let sum = Expr::Binary(BinaryOp::Add, Box::new(Expr::Load(0)), Box::new(Expr::Load(1)));
    /// assert_eq!(sum.map_loads(&|k| Expr::Load(k + 2)).to_string(), "add(in2, in3)");
    /// ```
    pub fn map_loads(&self, load: &dyn Fn(usize) -> Expr) -> Expr {
        let sub = |e: &Expr| Box::new(e.map_loads(load));
        match self {
            Expr::Load(k) => load(*k),
            Expr::Unary(op, a) => Expr::Unary(*op, sub(a)),
            Expr::Binary(op, a, b) => Expr::Binary(*op, sub(a), sub(b)),
            Expr::Compare(op, a, b) => Expr::Compare(*op, sub(a), sub(b)),
            Expr::Select(c, a, b) => Expr::Select(sub(c), sub(a), sub(b)),
            Expr::Const(_) | Expr::Accumulated => self.clone(),
        }
    }

    /// Whether the expression loads operand `o`.
    pub fn reads(&self, o: usize) -> bool {
        match self {
            Expr::Load(i) => *i == o,
            Expr::Const(_) | Expr::Accumulated => false,
            Expr::Unary(_, a) => a.reads(o),
            Expr::Binary(_, a, b) | Expr::Compare(_, a, b) => a.reads(o) || b.reads(o),
            Expr::Select(c, a, b) => c.reads(o) || a.reads(o) || b.reads(o),
        }
    }

    /// Whether the expression reads [`Expr::Accumulated`].
    pub fn reads_accumulated(&self) -> bool {
        match self {
            Expr::Accumulated => true,
            Expr::Load(_) | Expr::Const(_) => false,
            Expr::Unary(_, a) => a.reads_accumulated(),
            Expr::Binary(_, a, b) | Expr::Compare(_, a, b) => {
                a.reads_accumulated() || b.reads_accumulated()
            }
            Expr::Select(c, a, b) => {
                c.reads_accumulated() || a.reads_accumulated() || b.reads_accumulated()
            }
        }
    }

    /// The highest operand index loaded, plus one.
    pub fn operands_used(&self) -> usize {
        match self {
            Expr::Load(i) => i + 1,
            Expr::Const(_) | Expr::Accumulated => 0,
            Expr::Unary(_, a) => a.operands_used(),
            Expr::Binary(_, a, b) | Expr::Compare(_, a, b) => {
                a.operands_used().max(b.operands_used())
            }
            Expr::Select(c, a, b) => c
                .operands_used()
                .max(a.operands_used())
                .max(b.operands_used()),
        }
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::Load(i) => write!(f, "in{i}"),
            Expr::Const(c) => write!(f, "{c:?}"),
            Expr::Unary(op, a) => write!(f, "{}({a})", op.name()),
            Expr::Binary(op, a, b) => write!(f, "{}({a}, {b})", op.name()),
            Expr::Compare(op, a, b) => write!(f, "{}({a}, {b})", format!("{op:?}").to_lowercase()),
            Expr::Select(c, a, b) => write!(f, "select({c}, {a}, {b})"),
            Expr::Accumulated => f.write_str("acc"),
        }
    }
}

/// A kernel: the structure of a loop nest, without sizes.
///
/// `#[non_exhaustive]`: build one with [`Kernel::new`], so that fields
/// still to come (such as launch values) are additions.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Kernel {
    /// The loop iterators, outermost first.
    pub iterators: Vec<IterKind>,
    /// How many operand tensors are read.
    pub operands: usize,
    /// The value computed at each point.
    pub body: Expr,
    /// How values combine into a result element.
    pub accumulate: Accumulate,
    /// What is written to a result element, computed from the value
    /// accumulated there ([`Expr::Accumulated`]) and operands read at the
    /// element's parallel point only (their strides along reduction
    /// iterators are 0): a contraction's bias and activation, fused.
    /// `None` writes the accumulated value.
    pub epilogue: Option<Expr>,
}

impl Kernel {
    /// A kernel over `iterators` reading `operands` tensors, computing
    /// `body` at each point and combining values by `accumulate`.
    pub fn new(
        iterators: Vec<IterKind>,
        operands: usize,
        body: Expr,
        accumulate: Accumulate,
    ) -> Kernel {
        Kernel {
            iterators,
            operands,
            body,
            accumulate,
            epilogue: None,
        }
    }

    /// This kernel with `epilogue` applied to each accumulated value
    /// before it is written (see [`Kernel::epilogue`]).
    ///
    /// ```
    /// use shape_core::kernel::{Accumulate, BinaryOp, Expr, IterKind, Kernel, UnaryOp};
    /// // relu(sum_k a[i, k] * b[k] + bias[i])
    /// let kernel = Kernel::new(
    ///     vec![IterKind::Parallel, IterKind::Reduction],
    ///     3,
    ///     Expr::Binary(BinaryOp::Mul, Box::new(Expr::Load(0)), Box::new(Expr::Load(1))),
    ///     Accumulate::Add,
    /// )
    /// .with_epilogue(Expr::Unary(
    ///     UnaryOp::Relu,
    ///     Box::new(Expr::Binary(BinaryOp::Add, Box::new(Expr::Accumulated), Box::new(Expr::Load(2)))),
    /// ));
    /// assert_eq!(kernel.to_string(), "for [i0, r1]: out += mul(in0, in1); then relu(add(acc, in2))");
    /// ```
    pub fn with_epilogue(mut self, epilogue: Expr) -> Kernel {
        self.epilogue = Some(epilogue);
        self
    }

    /// The operands the epilogue reads, in order (none without one).
    pub fn epilogue_operands(&self) -> Vec<usize> {
        match &self.epilogue {
            Some(e) => (0..self.operands).filter(|&o| e.reads(o)).collect(),
            None => Vec::new(),
        }
    }

    /// The positions of the iterators of `kind`, in order.
    pub fn iterators_of(&self, kind: IterKind) -> Vec<usize> {
        (0..self.iterators.len())
            .filter(|&k| self.iterators[k] == kind)
            .collect()
    }

    /// The value written for accumulated value `acc`, given the loads at
    /// the result element's point.
    pub fn finish(&self, loads: &[f32], acc: f32) -> f32 {
        match &self.epilogue {
            Some(e) => e.eval_at(loads, acc),
            None => acc,
        }
    }

    /// This kernel with another body.
    pub fn with_body(mut self, body: Expr) -> Kernel {
        self.body = body;
        self
    }

    /// This kernel with another accumulation.
    pub fn with_accumulate(mut self, accumulate: Accumulate) -> Kernel {
        self.accumulate = accumulate;
        self
    }
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let iters: Vec<String> = self
            .iterators
            .iter()
            .enumerate()
            .map(|(i, k)| match k {
                IterKind::Parallel => format!("i{i}"),
                IterKind::Reduction => format!("r{i}"),
            })
            .collect();
        write!(
            f,
            "for [{}]: out {} {}",
            iters.join(", "),
            match self.accumulate {
                Accumulate::Assign => "=",
                Accumulate::Add => "+=",
                Accumulate::Mul => "*=",
                Accumulate::Max => "max=",
                Accumulate::Min => "min=",
            },
            self.body
        )?;
        match &self.epilogue {
            Some(e) => write!(f, "; then {e}"),
            None => Ok(()),
        }
    }
}

/// The row-major matrix product `out[i, j] = sum_k a[i, k] * b[k, j]` of
/// an `m x k` and a `k x n` matrix, iterators `(i, j, k)`: the canonical
/// contraction, which tests and benchmarks of every backend run.
///
/// ```
/// let (kernel, launch) = shape_core::kernel::matmul(2, 3, 4);
/// assert_eq!(kernel.to_string(), "for [i0, i1, r2]: out += mul(in0, in1)");
/// assert_eq!(launch.sizes, vec![2, 3, 4]);
/// assert!(launch.check(&kernel).is_ok());
/// ```
pub fn matmul(m: u64, n: u64, k: u64) -> (Kernel, Launch) {
    let kernel = Kernel::new(
        vec![IterKind::Parallel, IterKind::Parallel, IterKind::Reduction],
        2,
        Expr::Binary(
            BinaryOp::Mul,
            Box::new(Expr::Load(0)),
            Box::new(Expr::Load(1)),
        ),
        Accumulate::Add,
    );
    let launch = Launch::new(
        vec![m, n, k],
        Layout::new(0, vec![n, 1, 0], m * n),
        vec![
            Layout::new(0, vec![k, 0, 1], m * k),
            Layout::new(0, vec![0, 1, n], k * n),
        ],
    );
    (kernel, launch)
}

/// Where a tensor's elements are: `offset + sum(strides[k] * i_k)`, in
/// elements, one stride per iterator of the kernel.
///
/// `#[non_exhaustive]`: build one with [`Layout::new`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Layout {
    /// The element at iterator values all zero.
    pub offset: u64,
    /// Elements to step per unit of each iterator (0 where the tensor does
    /// not vary with it: broadcasting, or a reduction for the result).
    pub strides: Vec<u64>,
    /// The number of elements of the tensor's buffer.
    pub len: u64,
}

impl Layout {
    /// A layout of a buffer of `len` elements.
    pub fn new(offset: u64, strides: Vec<u64>, len: u64) -> Layout {
        Layout {
            offset,
            strides,
            len,
        }
    }
}

/// Whether several points of a launch may write the same result element.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum Races {
    /// Every point of the parallel iterators writes its own element;
    /// a layout where two could write the same one is refused
    /// ([`LaunchError::WriteConflict`]). The default.
    #[default]
    Refused,
    /// The caller accepts that several points write one element and that
    /// any one of their values may remain (slangpy's fixed-shape output
    /// written by every call). Results are then backend-dependent, and
    /// differential tests do not compare them.
    Allowed,
}

/// The run-time parameters of one kernel execution.
///
/// `#[non_exhaustive]`: build one with [`Launch::new`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Launch {
    /// The size of each iterator.
    pub sizes: Vec<u64>,
    /// The result's layout.
    pub result: Layout,
    /// Each operand's layout.
    pub operands: Vec<Layout>,
    /// Whether racing writes to the result are accepted.
    pub races: Races,
    /// For a launch over the rows of ragged data: the table read at run
    /// time with each row's length and offsets ([`RowTable`]); `None`
    /// for an ordinary launch.
    pub rows: Option<std::sync::Arc<RowTable>>,
}

/// The rows of a launch over ragged data, read by the kernel at run time
/// (an indexed load): the launch runs once per row, with iterator `along`
/// of the row's length instead of its size in [`Launch::sizes`] (which is
/// at least the longest row), and every layout's offset replaced by the
/// row's. So rows of any lengths are one launch, where a launch per row
/// would cost a dispatch each on a GPU.
///
/// `#[non_exhaustive]`: build one with [`RowTable::new`].
///
/// ```
/// use shape_core::kernel::RowTable;
/// // Two rows of a launch with two operands: a length, then the result's
/// // offset and the operands'.
/// let t = RowTable::new(0, 2, vec![3, 0, 0, 0, 1, 3, 3, 3]).unwrap();
/// assert_eq!(t.len(), 2);
/// assert_eq!(t.row(1), (1, &[3, 3, 3][..]));
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct RowTable {
    /// The iterator whose extent is each row's length.
    pub along: usize,
    /// Layouts per row: the result and the operands.
    pub tensors: usize,
    /// One entry per row: its length, then the result's offset and each
    /// operand's (`1 + tensors` words a row).
    pub entries: Vec<u64>,
}

impl RowTable {
    /// A table for a launch with `operands` operands whose iterator
    /// `along` varies by row; `entries` holds `2 + operands` words a row.
    /// `None` when `entries` is not a whole number of rows.
    pub fn new(along: usize, operands: usize, entries: Vec<u64>) -> Option<RowTable> {
        let tensors = operands + 1;
        entries
            .len()
            .is_multiple_of(tensors + 1)
            .then_some(RowTable {
                along,
                tensors,
                entries,
            })
    }

    /// The number of rows.
    #[inline]
    pub fn len(&self) -> usize {
        self.entries.len() / (self.tensors + 1)
    }

    /// Whether there is no row.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Row `r`'s length and offsets (the result's, then each operand's).
    #[inline]
    pub fn row(&self, r: usize) -> (u64, &[u64]) {
        let w = self.tensors + 1;
        let e = &self.entries[r * w..(r + 1) * w];
        (e[0], &e[1..])
    }

    /// The longest row (0 for none).
    pub fn longest(&self) -> u64 {
        (0..self.len()).map(|r| self.row(r).0).max().unwrap_or(0)
    }

    /// An empty list with room for `words` entries of a new table,
    /// allocated fallibly: the memory of a table given back on this thread
    /// ([`RowTable::recycle`]) where there is one, so that running over
    /// many rows does not fault fresh pages in for every table (a quarter
    /// of a run over 100,000 rows on the 2-core VM went to the kernel's
    /// page faults before).
    ///
    /// ```
    /// use shape_core::kernel::RowTable;
    /// let mut entries = RowTable::entries_with_capacity(4).unwrap();
    /// entries.extend([2, 0, 0, 0]);
    /// let table = RowTable::new(0, 2, entries).unwrap();
    /// table.recycle();
    /// // The next table on this thread gets that memory back, empty.
    /// assert!(RowTable::entries_with_capacity(4).unwrap().is_empty());
    /// ```
    pub fn entries_with_capacity(
        words: usize,
    ) -> Result<Vec<u64>, std::collections::TryReserveError> {
        let mut entries = SPARE_ENTRIES
            .with(|spare| {
                let mut spare = spare.borrow_mut();
                // The smallest that is large enough, else the largest (grown).
                let fits = (0..spare.len())
                    .filter(|&i| spare[i].capacity() >= words)
                    .min_by_key(|&i| spare[i].capacity());
                let pick = fits.or_else(|| (0..spare.len()).max_by_key(|&i| spare[i].capacity()));
                pick.map(|i| spare.swap_remove(i))
            })
            .unwrap_or_default();
        entries.clear();
        entries.try_reserve_exact(words)?;
        Ok(entries)
    }

    /// Gives the table's memory back, for the next table built on this
    /// thread ([`RowTable::entries_with_capacity`]); at most
    /// [`SPARE_TABLES`] tables and 64 MiB are kept.
    pub fn recycle(self) {
        SPARE_ENTRIES.with(|spare| {
            let mut spare = spare.borrow_mut();
            let kept: usize = spare.iter().map(Vec::capacity).sum();
            if spare.len() < SPARE_TABLES && kept + self.entries.capacity() <= SPARE_WORDS {
                spare.push(self.entries);
            }
        });
    }
}

/// The most tables' memory kept per thread for new tables
/// ([`RowTable::recycle`]).
pub const SPARE_TABLES: usize = 8;

/// The most words kept per thread for new tables (64 MiB).
const SPARE_WORDS: usize = 8 << 20;

thread_local! {
    /// The memory of tables given back on this thread.
    static SPARE_ENTRIES: std::cell::RefCell<Vec<Vec<u64>>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// A kernel and launch that do not fit together.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum LaunchError {
    /// The launch has a different number of iterators or operands.
    #[error("the launch has {found} {what} but the kernel has {expected}")]
    Arity {
        /// `iterators` or `operands`.
        what: &'static str,
        /// The kernel's count.
        expected: usize,
        /// The launch's count.
        found: usize,
    },
    /// A launch's row table does not fit it ([`RowTable`]).
    #[error("the launch's row table does not fit it: {reason}")]
    Rows {
        /// What does not fit.
        reason: String,
    },
    /// A layout addresses an element past the end of its buffer.
    #[error("{tensor} addresses element {last} but its buffer has {len} elements")]
    OutOfBounds {
        /// The result or an operand.
        tensor: LaunchTensor,
        /// The largest element index addressed.
        last: u128,
        /// The buffer length.
        len: u64,
    },
    /// The kernel's body loads an operand the kernel does not declare.
    #[error("the kernel's body reads operand {index} but the kernel declares {operands} operands")]
    OperandIndex {
        /// The highest operand index loaded.
        index: usize,
        /// Operands declared.
        operands: usize,
    },
    /// The number of operand buffers given differs from the kernel's.
    #[error("the kernel reads {expected} operand buffers but {found} were given")]
    Buffers {
        /// Operands the kernel reads.
        expected: usize,
        /// Buffers given.
        found: usize,
    },
    /// Two points of the parallel iterators would write the same result
    /// element, and the launch did not allow it ([`Races::Allowed`]).
    #[error("parallel iterator {iterator} (size {size}) would write result elements that other points also write; give the result a layout with a distinct element per point, or allow the race explicitly")]
    WriteConflict {
        /// The iterator.
        iterator: usize,
        /// Its size.
        size: u64,
    },
    /// A kernel body that reads the accumulated value, which only an
    /// epilogue may.
    #[error(
        "the kernel's body reads the accumulated value (`acc`), which only its epilogue may read"
    )]
    AccumulatedInBody,
    /// An epilogue on a launch whose writes may race: it would apply to
    /// a value that other points also accumulate into.
    #[error("a kernel with an epilogue cannot allow racing writes: the epilogue would see partial values")]
    EpilogueWithRaces,
    /// An operand read by the epilogue that moves along a reduction
    /// iterator: the epilogue runs once per result element.
    #[error("the epilogue reads operand {operand}, whose stride along reduction iterator {iterator} is not 0: an epilogue reads operands at the result element's point only")]
    EpilogueAlongReduction {
        /// The operand.
        operand: usize,
        /// The reduction iterator.
        iterator: usize,
    },
    /// A reduction over no points (a reduction iterator of size 0, with
    /// result elements to write) whose accumulation has no value there: a
    /// maximum, a minimum, or an assignment of the last point.
    #[error("reduction iterator {iterator} has size 0, so each result element reduces no values, and {accumulation} of no values has none (a sum gives 0 and a product 1)")]
    EmptyReduction {
        /// The empty reduction iterator.
        iterator: usize,
        /// `a maximum`, `a minimum` or `an assignment`.
        accumulation: &'static str,
    },
    /// A buffer whose length differs from the one its layout declares.
    #[error("{tensor} has {found} elements but its layout says {expected}")]
    BufferLength {
        /// The result or an operand.
        tensor: LaunchTensor,
        /// The layout's length.
        expected: u64,
        /// The buffer's length.
        found: u64,
    },
}

impl LaunchError {
    /// A stable, machine-readable name for the error's kind: the
    /// variant's name in snake case.
    pub fn kind(&self) -> &'static str {
        self.into()
    }
}

/// Which buffer of a launch an error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LaunchTensor {
    /// The result buffer.
    Result,
    /// Operand buffer `n`, counted from 0.
    Operand(usize),
}

impl LaunchTensor {
    fn of(operand: Option<usize>) -> LaunchTensor {
        operand.map_or(LaunchTensor::Result, LaunchTensor::Operand)
    }
}

impl std::fmt::Display for LaunchTensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LaunchTensor::Result => f.write_str("the result"),
            LaunchTensor::Operand(i) => write!(f, "operand {i}"),
        }
    }
}

/// What a launch with an empty reduction writes instead
/// ([`Launch::empty_reduction`]): a kernel without reduction iterators
/// that writes the accumulation's identity through the epilogue, the
/// launch of it, and which of the original operands it reads (those of
/// the epilogue, renumbered in order).
#[derive(Clone, Debug, PartialEq)]
pub struct EmptyReduction {
    /// The kernel: the parallel iterators, body the identity.
    pub kernel: Kernel,
    /// Its launch: the parallel sizes, the result's and the epilogue
    /// operands' layouts along them.
    pub launch: Launch,
    /// The original operand behind each of its operands.
    pub operands: Vec<usize>,
}

impl Launch {
    /// For a launch with a reduction iterator of size 0 and result
    /// elements to write, what each element is: a sum of no values is 0
    /// and a product 1 (through the epilogue, if any), as numpy gives;
    /// a maximum, a minimum or an assignment of no values is an error
    /// ([`LaunchError::EmptyReduction`]). `Ok(None)` when nothing is to be
    /// written instead: no iterator of size 0, or an empty parallel
    /// iterator (no result element at all).
    ///
    /// ```
    /// use shape_core::kernel::{Accumulate, Expr, IterKind, Kernel, Launch, Layout};
    /// let sum = Kernel::new(vec![IterKind::Parallel, IterKind::Reduction], 1, Expr::Load(0), Accumulate::Add);
    /// let rows_of_nothing = Launch::new(vec![3, 0], Layout::new(0, vec![1, 0], 3), vec![Layout::new(0, vec![0, 1], 0)]);
    /// let fill = rows_of_nothing.empty_reduction(&sum)?.expect("three elements to write");
    /// assert_eq!(fill.kernel.to_string(), "for [i0]: out = 0.0");
    /// let max = sum.clone().with_accumulate(Accumulate::Max);
    /// assert_eq!(rows_of_nothing.empty_reduction(&max).unwrap_err().kind(), "empty_reduction");
    /// # Ok::<(), shape_core::kernel::LaunchError>(())
    /// ```
    pub fn empty_reduction(&self, kernel: &Kernel) -> Result<Option<EmptyReduction>, LaunchError> {
        let kinds = kernel.iterators.iter().zip(&self.sizes);
        if kinds
            .clone()
            .any(|(k, &s)| *k == IterKind::Parallel && s == 0)
        {
            return Ok(None);
        }
        let Some(iterator) = kinds
            .clone()
            .position(|(k, &s)| *k == IterKind::Reduction && s == 0)
        else {
            return Ok(None);
        };
        let accumulation = match kernel.accumulate {
            Accumulate::Add | Accumulate::Mul => None,
            Accumulate::Max => Some("a maximum"),
            Accumulate::Min => Some("a minimum"),
            Accumulate::Assign => Some("an assignment"),
        };
        if let Some(accumulation) = accumulation {
            return Err(LaunchError::EmptyReduction {
                iterator,
                accumulation,
            });
        }
        let parallel = kernel.iterators_of(IterKind::Parallel);
        let along = |l: &Layout| {
            let strides = parallel
                .iter()
                .map(|&k| l.strides.get(k).copied().unwrap_or(0));
            Layout::new(l.offset, strides.collect(), l.len)
        };
        let operands = kernel.epilogue_operands();
        let mut fill = Kernel::new(
            vec![IterKind::Parallel; parallel.len()],
            operands.len(),
            Expr::Const(kernel.accumulate.identity()),
            Accumulate::Assign,
        );
        fill.epilogue = kernel.epilogue.as_ref().map(|e| {
            e.map_loads(&|o| Expr::Load(operands.iter().position(|&r| r == o).unwrap_or(0)))
        });
        let mut launch = Launch::new(
            parallel.iter().map(|&k| self.sizes[k]).collect(),
            along(&self.result),
            operands.iter().map(|&o| along(&self.operands[o])).collect(),
        );
        launch.races = self.races;
        launch.check(&fill)?;
        Ok(Some(EmptyReduction {
            kernel: fill,
            launch,
            operands,
        }))
    }

    /// A launch over iterators of `sizes`, writing through `result` and
    /// reading through `operands`; racing writes are refused.
    pub fn new(sizes: Vec<u64>, result: Layout, operands: Vec<Layout>) -> Launch {
        Launch {
            sizes,
            result,
            operands,
            races: Races::Refused,
            rows: None,
        }
    }

    /// This launch run once per row of `rows` ([`RowTable`]).
    pub fn with_rows(mut self, rows: RowTable) -> Launch {
        self.rows = Some(std::sync::Arc::new(rows));
        self
    }

    /// The ordinary launch of row `r` of a launch over rows: the row's
    /// length along the table's iterator and its offsets, without the
    /// table. `None` for an ordinary launch or a row past the table.
    pub fn row_launch(&self, r: usize) -> Option<Launch> {
        let rows = self.rows.as_ref()?;
        if r >= rows.len() {
            return None;
        }
        let (len, offsets) = rows.row(r);
        let mut launch = Launch {
            sizes: self.sizes.clone(),
            result: self.result.clone(),
            operands: self.operands.clone(),
            races: self.races,
            rows: None,
        };
        if let Some(size) = launch.sizes.get_mut(rows.along) {
            *size = len;
        }
        let layouts = std::iter::once(&mut launch.result).chain(&mut launch.operands);
        for (layout, &offset) in layouts.zip(offsets) {
            layout.offset = offset;
        }
        Some(launch)
    }

    /// This launch with racing writes to its result allowed.
    pub fn allowing_races(mut self) -> Launch {
        self.races = Races::Allowed;
        self
    }

    /// The number of points of the parallel iterators (the result elements
    /// written), saturating.
    pub fn parallel_points(&self, kernel: &Kernel) -> u128 {
        kernel
            .iterators
            .iter()
            .zip(&self.sizes)
            .filter(|(k, _)| **k == IterKind::Parallel)
            .fold(1u128, |acc, (_, &s)| acc.saturating_mul(s as u128))
    }

    /// A parallel iterator along which two points may write the same
    /// result element, with its size; `None` when every point writes its
    /// own element. A sufficient test: with the iterators sorted by result
    /// stride, each stride must exceed the largest offset the smaller ones
    /// reach.
    pub fn overlapping_writes(&self, kernel: &Kernel) -> Option<(usize, u64)> {
        self.overlapping_writes_at(kernel, &self.sizes)
    }

    /// [`Launch::overlapping_writes`] with the iterators of sizes `sizes`.
    fn overlapping_writes_at(&self, kernel: &Kernel, sizes: &[u64]) -> Option<(usize, u64)> {
        if sizes.contains(&0) {
            // No point at all: nothing is written twice.
            return None;
        }
        let mut parallel: Vec<(u64, u64, usize)> = (0..kernel.iterators.len())
            .filter(|&k| kernel.iterators[k] == IterKind::Parallel)
            .filter_map(|k| {
                let size = *sizes.get(k)?;
                let stride = *self.result.strides.get(k)?;
                (size > 1).then_some((stride, size, k))
            })
            .collect();
        parallel.sort_unstable();
        let mut reach = 0u128;
        for (stride, size, k) in parallel {
            if stride as u128 <= reach {
                return Some((k, size));
            }
            reach += stride as u128 * (size as u128 - 1);
        }
        None
    }

    /// [`Launch::check`], and that the buffers a backend was given match:
    /// one per operand, each as long as its layout says. Every backend
    /// runs this before a kernel.
    pub fn check_buffers(
        &self,
        kernel: &Kernel,
        result_len: u64,
        operand_lens: impl ExactSizeIterator<Item = u64>,
    ) -> Result<(), LaunchError> {
        self.check(kernel)?;
        if operand_lens.len() != kernel.operands {
            return Err(LaunchError::Buffers {
                expected: kernel.operands,
                found: operand_lens.len(),
            });
        }
        let lens = std::iter::once((None, &self.result, result_len)).chain(
            self.operands
                .iter()
                .zip(operand_lens)
                .enumerate()
                .map(|(i, (l, n))| (Some(i), l, n)),
        );
        for (operand, layout, found) in lens {
            if layout.len != found {
                return Err(LaunchError::BufferLength {
                    tensor: LaunchTensor::of(operand),
                    expected: layout.len,
                    found,
                });
            }
        }
        Ok(())
    }

    /// Checks that the launch fits the kernel, that every access stays
    /// inside its buffer, and that no two points write one result element
    /// unless the launch allows it. Every backend runs this, so the CPU
    /// reference refuses exactly what other backends refuse.
    pub fn check(&self, kernel: &Kernel) -> Result<(), LaunchError> {
        let n = kernel.iterators.len();
        let arity = |what, expected, found| {
            if expected == found {
                Ok(())
            } else {
                Err(LaunchError::Arity {
                    what,
                    expected,
                    found,
                })
            }
        };
        arity("iterators", n, self.sizes.len())?;
        arity("operands", kernel.operands, self.operands.len())?;
        let used = kernel
            .body
            .operands_used()
            .max(kernel.epilogue.as_ref().map_or(0, |e| e.operands_used()));
        if used > kernel.operands {
            return Err(LaunchError::OperandIndex {
                index: used - 1,
                operands: kernel.operands,
            });
        }
        if kernel.body.reads_accumulated() {
            return Err(LaunchError::AccumulatedInBody);
        }
        if let Some(epilogue) = &kernel.epilogue {
            if self.races == Races::Allowed {
                return Err(LaunchError::EpilogueWithRaces);
            }
            for (o, layout) in self.operands.iter().enumerate() {
                if !epilogue.reads(o) {
                    continue;
                }
                let along = (0..n).find(|&k| {
                    kernel.iterators[k] == IterKind::Reduction
                        && self.sizes[k] > 1
                        && layout.strides.get(k).is_some_and(|&s| s != 0)
                });
                if let Some(iterator) = along {
                    return Err(LaunchError::EpilogueAlongReduction {
                        operand: o,
                        iterator,
                    });
                }
            }
        }
        let tensors = std::iter::once(&self.result).chain(&self.operands);
        for l in tensors {
            arity("strides", n, l.strides.len())?;
        }
        let Some(rows) = &self.rows else {
            self.check_extents(&self.sizes, |_| None)?;
            if self.races == Races::Refused {
                if let Some((iterator, size)) = self.overlapping_writes(kernel) {
                    return Err(LaunchError::WriteConflict { iterator, size });
                }
            }
            return Ok(());
        };
        self.check_rows(kernel, rows)
    }

    /// That every access of the launch with iterator sizes `sizes` stays
    /// inside its buffer, each layout's offset given by `offset(tensor)`
    /// (0: the result) or its own.
    fn check_extents(
        &self,
        sizes: &[u64],
        offset: impl Fn(usize) -> Option<u64>,
    ) -> Result<(), LaunchError> {
        if sizes.contains(&0) {
            return Ok(());
        }
        // Names are only formatted for an error: this runs on every launch.
        let tensors = std::iter::once((None, &self.result))
            .chain(self.operands.iter().enumerate().map(|(i, l)| (Some(i), l)));
        for (t, (operand, l)) in tensors.enumerate() {
            let last = offset(t).unwrap_or(l.offset) as u128
                + l.strides
                    .iter()
                    .zip(sizes)
                    .map(|(&s, &n)| s as u128 * (n as u128 - 1))
                    .sum::<u128>();
            if last >= l.len as u128 {
                return Err(LaunchError::OutOfBounds {
                    tensor: LaunchTensor::of(operand),
                    last,
                    len: l.len,
                });
            }
        }
        Ok(())
    }

    /// [`Launch::check`] for a launch over rows: the table fits the
    /// launch, every row stays inside every buffer, and (unless racing
    /// writes are allowed) each row writes its own elements, the rows'
    /// results one after another.
    fn check_rows(&self, kernel: &Kernel, rows: &RowTable) -> Result<(), LaunchError> {
        let bad = |reason: String| Err(LaunchError::Rows { reason });
        if rows.along >= self.sizes.len() {
            return bad(format!(
                "its varying iterator {} is not one of the launch's {}",
                rows.along,
                self.sizes.len()
            ));
        }
        if rows.tensors != 1 + self.operands.len() {
            return bad(format!(
                "it has offsets for {} tensors where the launch has {}",
                rows.tensors,
                1 + self.operands.len()
            ));
        }
        let along_parallel = kernel.iterators.get(rows.along) == Some(&IterKind::Parallel);
        if self.races == Races::Refused {
            // Within a row: a shorter row writes a subset of what the
            // longest writes, so the longest decides.
            let mut longest = self.sizes.clone();
            longest[rows.along] = if along_parallel { rows.longest() } else { 1 };
            if let Some((iterator, size)) = self.overlapping_writes_at(kernel, &longest) {
                return Err(LaunchError::WriteConflict { iterator, size });
            }
        }
        // Only the varying iterator's size changes from row to row: each
        // layout's extent along the others is summed once.
        let along = rows.along;
        let others_empty = (self.sizes.iter().enumerate()).any(|(k, &n)| k != along && n == 0);
        let extent_without = |l: &Layout, parallel_only: bool| -> u128 {
            (l.strides.iter().zip(&self.sizes).enumerate())
                .filter(|&(k, _)| k != along)
                .filter(|&(k, _)| {
                    !parallel_only || kernel.iterators.get(k) == Some(&IterKind::Parallel)
                })
                .map(|(_, (&s, &n))| s as u128 * (n as u128).saturating_sub(1))
                .sum()
        };
        let layouts: Vec<&Layout> = std::iter::once(&self.result)
            .chain(&self.operands)
            .collect();
        let bases: Vec<u128> = layouts.iter().map(|l| extent_without(l, false)).collect();
        let written_base = extent_without(&self.result, true);
        let mut written_to: Option<u128> = None;
        for r in 0..rows.len() {
            let (len, offsets) = rows.row(r);
            if len > self.sizes[along] {
                return bad(format!(
                    "row {r} has length {len}, longer than the launch's {}",
                    self.sizes[along]
                ));
            }
            if !others_empty && len > 0 {
                for (t, (l, base)) in layouts.iter().zip(&bases).enumerate() {
                    let last =
                        offsets[t] as u128 + base + l.strides[along] as u128 * (len as u128 - 1);
                    if last >= l.len as u128 {
                        return Err(LaunchError::OutOfBounds {
                            tensor: LaunchTensor::of(t.checked_sub(1)),
                            last,
                            len: l.len,
                        });
                    }
                }
            }
            // The elements a row writes: along a reduction, even an empty
            // row writes each of its results (the reduction's identity).
            let written_len = if along_parallel { len } else { 1 };
            if self.races == Races::Refused && !others_empty && written_len > 0 {
                // The rows' results in order and apart.
                let first = offsets[0] as u128;
                if written_to.is_some_and(|end| first <= end) {
                    return bad(format!(
                        "row {r} writes the result from element {first}, which an earlier row wrote"
                    ));
                }
                let along_written = if along_parallel {
                    self.result.strides[along] as u128 * (written_len as u128 - 1)
                } else {
                    0
                };
                written_to = Some(first + written_base + along_written);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod row_table_tests {
    use super::*;

    #[test]
    fn a_recycled_table_lends_its_memory_to_the_next_and_the_pool_is_bounded() {
        // A fresh thread: its pool starts empty.
        std::thread::spawn(|| {
            let mut big = RowTable::entries_with_capacity(3_000).unwrap();
            big.extend(std::iter::repeat_n(1, 3_000));
            let small = RowTable::new(0, 2, vec![1; 8]).unwrap();
            let ptr = big.as_ptr();
            RowTable::new(0, 2, big).unwrap().recycle();
            small.recycle();
            // The smallest that fits: the small one's memory for a small
            // table, the big one's (emptied) for a large one.
            assert!(RowTable::entries_with_capacity(4).unwrap().capacity() < 3_000);
            let again = RowTable::entries_with_capacity(2_000).unwrap();
            assert_eq!((again.as_ptr(), again.len()), (ptr, 0));
            // At most SPARE_TABLES tables are kept.
            for _ in 0..2 * SPARE_TABLES {
                RowTable::new(0, 0, vec![0; 2]).unwrap().recycle();
            }
            let kept = SPARE_ENTRIES.with(|s| s.borrow().len());
            assert_eq!(kept, SPARE_TABLES);
        })
        .join()
        .unwrap();
    }

    /// `out[r, j] = in0[r, j] * 2` over rows laid end to end: a launch of
    /// one iterator along the row, rows of lengths 2, 0 and 3.
    fn doubling() -> (Kernel, Launch) {
        let kernel = Kernel::new(
            vec![IterKind::Parallel],
            1,
            Expr::Binary(
                BinaryOp::Mul,
                Box::new(Expr::Load(0)),
                Box::new(Expr::Const(2.0)),
            ),
            Accumulate::Assign,
        );
        let launch = Launch::new(
            vec![3],
            Layout::new(0, vec![1], 5),
            vec![Layout::new(0, vec![1], 5)],
        );
        (kernel, launch)
    }

    fn table(entries: Vec<u64>) -> RowTable {
        RowTable::new(0, 1, entries).expect("whole rows")
    }

    #[test]
    fn rows_that_fit_are_accepted_and_spelled_out_as_launches() {
        let (kernel, launch) = doubling();
        let launch = launch.with_rows(table(vec![2, 0, 0, 0, 2, 2, 3, 2, 2]));
        assert_eq!(launch.check(&kernel), Ok(()));
        let row = launch.row_launch(2).expect("row 2");
        assert_eq!(row.sizes, [3]);
        assert_eq!((row.result.offset, row.operands[0].offset), (2, 2));
        assert!(row.rows.is_none());
        assert!(launch.row_launch(3).is_none());
        assert_eq!(launch.rows.as_ref().map(|r| r.longest()), Some(3));
    }

    #[test]
    fn rows_that_do_not_fit_are_typed_errors() {
        let (kernel, launch) = doubling();
        // Not whole rows.
        assert!(RowTable::new(0, 1, vec![1, 0]).is_none());
        // A row past the end of the buffers.
        let past = launch.clone().with_rows(table(vec![3, 3, 3]));
        assert!(matches!(
            past.check(&kernel),
            Err(LaunchError::OutOfBounds { last: 5, .. })
        ));
        // Longer than the launch's size.
        let long = launch.clone().with_rows(table(vec![4, 0, 0]));
        assert_eq!(long.check(&kernel).map_err(|e| e.kind()), Err("rows"));
        // An iterator the launch does not have.
        let mut along = table(vec![1, 0, 0]);
        along.along = 3;
        let along = launch.clone().with_rows(along);
        assert_eq!(along.check(&kernel).map_err(|e| e.kind()), Err("rows"));
        // Two rows writing the same element.
        let overlap = launch.clone().with_rows(table(vec![2, 0, 0, 2, 1, 1]));
        let e = overlap.check(&kernel).unwrap_err();
        assert_eq!(e.kind(), "rows");
        assert!(
            e.to_string()
                .contains("row 1 writes the result from element 1"),
            "{e}"
        );
        // Unless racing writes are allowed.
        let racing = launch
            .allowing_races()
            .with_rows(table(vec![2, 0, 0, 2, 1, 1]));
        assert_eq!(racing.check(&kernel), Ok(()));
    }
}
