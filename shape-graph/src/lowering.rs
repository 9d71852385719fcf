//! Lowering: an operation with its projections becomes one or more
//! kernels with their launches. A kernel depends only on the operation and
//! the structure of its projections; sizes, strides and offsets go into
//! the launch.

use std::sync::Arc;

use shape_core::kernel::{Accumulate, Expr, IterKind, Kernel, Launch, Layout};
use shape_core::{buffer_len, SolvedShape};

use crate::graph::{GraphError, OpId, SolvedGraph};
use crate::projections::{AxisIndex, ProjectionBuilder, Projections};
use shape_solver::symbolic::{var, Simplifier, Sym, SymExpr};
use shape_solver::OpRef;

/// A buffer one step of a lowered operation reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BufferRef {
    /// The operation's result.
    Result,
    /// Operand `n` (from 0).
    Operand(usize),
    /// Scratch buffer `n` of [`Lowered::scratch`].
    Scratch(usize),
    /// A tensor of the graph that is not the operation's own operand: a
    /// step fused from the operation that read it (see `shape-run`'s
    /// `RunPlan`).
    Tensor(crate::TensorId),
}

/// One kernel execution of a lowered operation.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The kernel.
    pub kernel: Kernel,
    /// Its sizes and layouts.
    pub launch: Launch,
    /// The buffer it writes.
    pub result: BufferRef,
    /// The buffers it reads, one per kernel operand.
    pub operands: Vec<BufferRef>,
    /// A call step ([`shape_core::CallStep`]: a user's function run once
    /// per call index) that runs instead of the kernel: the backend's
    /// [`shape_core::Backend::run_call_step`] reads `operands` in order
    /// and overwrites `result`. The kernel and launch then only describe
    /// what it writes (every element of the result, once), for planning;
    /// fusion leaves such a step alone. `None` for a kernel.
    pub call: Option<shape_core::CallRef>,
}

/// What an operation becomes: scratch buffers and the kernels that run,
/// in order, to compute its result.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Lowered {
    /// Lengths (in elements) of the scratch buffers the steps use; they
    /// start zero-filled and live only while the operation runs.
    pub scratch: Vec<u64>,
    /// The kernels, in the order they run.
    pub steps: Vec<Step>,
}

impl Lowered {
    /// One kernel that reads every operand in order and writes the result.
    ///
    /// The kernel is taken as it is: unlike
    /// [`LoweringCx::single_kernel`], nothing refuses an
    /// [`Accumulate::Assign`] over reduction iterators here (each result
    /// element would keep the last value along them), so an operation's
    /// lowering should prefer `single_kernel`, which checks.
    pub fn single(kernel: Kernel, launch: Launch) -> Lowered {
        let operands = (0..kernel.operands).map(BufferRef::Operand).collect();
        Lowered {
            scratch: Vec::new(),
            steps: vec![Step {
                kernel,
                launch,
                result: BufferRef::Result,
                operands,
                call: None,
            }],
        }
    }

    /// A single call step ([`Step::call`]) reading every operand in order
    /// (operand `i` holds `operand_lens[i]` elements) and writing the
    /// whole result of `result_len` elements.
    pub fn call(call: shape_core::CallRef, result_len: u64, operand_lens: &[u64]) -> Lowered {
        let kernel = Kernel::new(
            vec![IterKind::Parallel],
            operand_lens.len(),
            Expr::Const(0.0),
            Accumulate::Assign,
        );
        let reads = (operand_lens.iter())
            .map(|&len| Layout::new(0, vec![0], len))
            .collect();
        let launch = Launch::new(vec![result_len], Layout::new(0, vec![1], result_len), reads);
        Lowered {
            scratch: Vec::new(),
            steps: vec![Step {
                kernel,
                launch,
                result: BufferRef::Result,
                operands: (0..operand_lens.len()).map(BufferRef::Operand).collect(),
                call: Some(call),
            }],
        }
    }

    /// Whether one step writes every element of a result of `len`
    /// elements, so that a reused buffer need not be cleared first.
    pub fn covers_result(&self, len: u64) -> bool {
        self.steps.iter().any(|s| {
            s.result == BufferRef::Result
                && s.launch.result.len == len
                && s.launch.parallel_points(&s.kernel) == len as u128
                && s.launch.overlapping_writes(&s.kernel).is_none()
        })
    }

    /// Whether some step lets several points write one element of the
    /// result ([`shape_core::Races::Allowed`]): such a result is not
    /// deterministic, and differential tests skip it.
    pub fn races(&self) -> bool {
        self.steps
            .iter()
            .any(|s| s.result == BufferRef::Result && s.launch.races == shape_core::Races::Allowed)
    }
}

/// How an operation is lowered: what the kernels take besides the
/// solved shapes.
///
/// ```
/// use shape_graph::LowerOptions;
/// assert_eq!(LowerOptions::default().slice, 0);
/// assert_eq!(LowerOptions::default().with_slice(3).slice, 3);
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LowerOptions {
    /// The batch index that batch slices take.
    pub slice: u64,
    /// Whether a ragged operation whose rows change length may be one
    /// launch over a row table ([`shape_core::kernel::RowTable`], for a
    /// backend that runs them: [`shape_core::Backend::runs_row_tables`])
    /// rather than a launch per run of rows.
    pub row_tables: bool,
    /// Whether a ragged operation whose rows could run as one launch over
    /// the rows laid end to end is lowered over a row table instead
    /// (with [`LowerOptions::row_tables`], where its rows change length):
    /// what fuses it with a neighbour lowered over a row table.
    pub tables_over_flat: bool,
}

impl LowerOptions {
    /// These options with a row table preferred to a launch over the rows
    /// laid end to end, or not.
    pub fn with_tables_over_flat(mut self, tables: bool) -> LowerOptions {
        self.tables_over_flat = tables;
        self
    }

    /// These options with row tables allowed or not.
    pub fn with_row_tables(mut self, row_tables: bool) -> LowerOptions {
        self.row_tables = row_tables;
        self
    }

    /// These options with batch slices taking index `slice`.
    pub fn with_slice(mut self, slice: u64) -> LowerOptions {
        self.slice = slice;
        self
    }
}

/// What an [`Operation::lower`](crate::Operation::lower) works with: the solved shapes of the
/// operation's tensors, its projections and the lowering's options.
pub struct LoweringCx<'a> {
    pub(crate) op: Arc<OpRef>,
    pub(crate) shapes: Vec<&'a SolvedShape>,
    pub(crate) projections: Projections,
    pub(crate) options: &'a LowerOptions,
}

impl LoweringCx<'_> {
    /// The operation being lowered, as messages name it.
    pub fn op(&self) -> &OpRef {
        &self.op
    }

    /// The operation, shared, for errors.
    pub fn op_arc(&self) -> Arc<OpRef> {
        self.op.clone()
    }

    /// The solved shape of the tensor at `position` (0: the result).
    pub fn shape(&self, position: usize) -> &SolvedShape {
        self.shapes[position]
    }

    /// The operation's projections, from [`Operation::project`](crate::Operation::project).
    pub fn projections(&self) -> &Projections {
        &self.projections
    }

    /// The batch index a batch slice takes in this lowering.
    pub fn slice(&self) -> u64 {
        self.options.slice
    }

    /// The layout of the tensor at `position`, stored contiguously in
    /// memory order, seen through the projections.
    pub fn layout(&self, position: usize) -> Layout {
        let axes = if position == 0 {
            &self.projections.result
        } else {
            &self.projections.operands[position - 1]
        };
        layout(
            self.shapes[position],
            axes,
            self.projections.sizes.len(),
            self.options.slice,
        )
    }

    /// The kernel over the projections' loop nest that computes `body` at
    /// each point from the operands in order, combining values by
    /// `reduce` when some iterator is reduced (and assigning otherwise).
    ///
    /// A `reduce` of [`Accumulate::Assign`] while some iterator is reduced
    /// is refused with [`GraphError::AssignOverReduction`]: every point
    /// along the reduced iterators would overwrite the one before, so each
    /// result element would keep only the last value, on every backend
    /// alike (a wrong lowering that differential tests cannot see). An
    /// operation that does write one value per result element (its
    /// reduced iterators have one element each, or its body is the same
    /// all along them) says so with
    /// [`LoweringCx::single_kernel_writing_once`].
    ///
    /// ```
    /// use shape_core::kernel::{Accumulate, Expr};
    /// use shape_graph::{
    ///     ConstraintCx, Graph, GraphError, Lowered, LoweringCx, Operation, ProjectionBuilder,
    /// };
    /// use shape_solver::RowSite;
    /// use shape_core::RowKind;
    ///
    /// /// A total of its operand that (wrongly) assigns instead of summing.
    /// #[derive(Debug)]
    /// struct LastOnly;
    /// impl Operation for LastOnly {
    ///     fn name(&self) -> &str { "last_only" }
    ///     fn arity(&self) -> usize { 1 }
    ///     fn constrain(&self, cx: &mut ConstraintCx<'_>) {
    ///         for kind in RowKind::ALL {
    ///             cx.row_is(RowSite::result(kind), shape_core::Row::empty(), "a total".into());
    ///         }
    ///     }
    ///     fn project(&self, _cx: &mut ProjectionBuilder<'_>) {}
    ///     fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
    ///         cx.single_kernel(Expr::Load(0), Accumulate::Assign)
    ///     }
    ///     fn spell(&self, operands: &[&str]) -> String { format!("last_only({})", operands[0]) }
    /// }
    ///
    /// let mut g = Graph::new();
    /// let x = g.input("x", "6")?;
    /// let y = g.apply(std::sync::Arc::new(LastOnly), &[x])?;
    /// let solved = g.solve()?;
    /// let e = solved.lower(g.producer(y).unwrap(), &Default::default()).unwrap_err();
    /// assert_eq!(e.kind(), "assign_over_reduction");
    /// # Ok::<(), GraphError>(())
    /// ```
    pub fn single_kernel(&self, body: Expr, reduce: Accumulate) -> Result<Lowered, GraphError> {
        let p = &self.projections;
        if !p.has_reduction() {
            return self.kernel_of(body, Accumulate::Assign);
        }
        if reduce == Accumulate::Assign {
            return Err(GraphError::AssignOverReduction { op: self.op_arc() });
        }
        self.kernel_of(body, reduce)
    }

    /// The kernel over the projections' loop nest that assigns `body` at
    /// each point, for an operation that writes one value per result
    /// element: its loop nest has no reduced iterators, or the operation
    /// guarantees that `body` is the same at every point along them (each
    /// of them has one element, or nothing `body` reads varies along
    /// them). Where the guarantee fails, each element keeps the value at
    /// the last point along the reduced iterators; no backend or
    /// differential test can tell, so [`LoweringCx::single_kernel`] refuses
    /// an assignment over reduced iterators and this is the one way to
    /// ask for it.
    pub fn single_kernel_writing_once(&self, body: Expr) -> Result<Lowered, GraphError> {
        self.kernel_of(body, Accumulate::Assign)
    }

    /// [`LoweringCx::single_kernel`] with the accumulation decided.
    fn kernel_of(&self, body: Expr, accumulate: Accumulate) -> Result<Lowered, GraphError> {
        let p = &self.projections;
        let operands = self.shapes.len() - 1;
        let mut lowered = Lowered::default();
        let mut reads = Vec::with_capacity(operands);
        let mut layouts = Vec::with_capacity(operands);
        for t in 1..=operands {
            match self.padded_copy(t, accumulate, &body, &mut lowered)? {
                Some((buffer, layout)) => {
                    reads.push(buffer);
                    layouts.push(layout);
                }
                None => {
                    reads.push(BufferRef::Operand(t - 1));
                    layouts.push(self.layout(t));
                }
            }
        }
        let kernel = Kernel::new(p.kinds.clone(), operands, body, accumulate);
        let launch = Launch::new(p.sizes.clone(), self.layout(0), layouts);
        lowered.steps.push(Step {
            kernel,
            launch,
            result: BufferRef::Result,
            operands: reads,
            call: None,
        });
        Ok(lowered)
    }

    /// For an operand read through padded affine axes (a convolution with
    /// padding): steps that copy it into a scratch buffer padded at both
    /// ends with the reduction's identity, and the layout the kernel reads
    /// it through. The padded elements then add nothing to a sum and win no
    /// maximum, as the issue's masked loads would; `None` for an operand
    /// without padding.
    fn padded_copy(
        &self,
        t: usize,
        accumulate: Accumulate,
        body: &Expr,
        lowered: &mut Lowered,
    ) -> Result<Option<(BufferRef, Layout)>, GraphError> {
        let p = &self.projections;
        let axes = &p.operands[t - 1];
        let dims = self.shapes[t].memory_dims();
        let pads: Vec<Option<(u64, u64)>> = axes
            .iter()
            .zip(&dims)
            .map(|(a, &n)| p.padding(a, n))
            .collect();
        if pads.iter().all(Option::is_none) {
            return Ok(None);
        }
        let identity = match accumulate {
            Accumulate::Max => f32::NEG_INFINITY,
            Accumulate::Min => f32::INFINITY,
            Accumulate::Mul => 1.0,
            _ => 0.0,
        };
        // The identity of the reduction is the identity of what one
        // operand's load contributes only when the body is that load, or a
        // product under a sum (0 times anything adds nothing).
        let exact =
            matches!(body, Expr::Load(_)) || (identity == 0.0 && accumulate != Accumulate::Mul);
        if !exact {
            return Err(GraphError::PaddingUnsupported { op: self.op_arc() });
        }
        let padded: Vec<u64> = dims
            .iter()
            .zip(&pads)
            .map(|(&n, pad)| {
                pad.map_or(n, |(before, after)| {
                    before.saturating_add(n).saturating_add(after)
                })
            })
            .collect();
        let (len, source_len) = (buffer_len(&padded), buffer_len(&dims));
        let (to, from) = (row_major_strides(&padded), row_major_strides(&dims));
        let offset = pads
            .iter()
            .zip(&to)
            .map(|(pad, &s)| pad.map_or(0, |(before, _)| before.saturating_mul(s)))
            .fold(0u64, u64::saturating_add);
        let scratch = BufferRef::Scratch(lowered.scratch.len());
        lowered.scratch.push(len);
        let source = BufferRef::Operand(t - 1);
        if identity != 0.0 {
            // Scratch starts zero-filled; another identity is written first
            // (the operand is read at one place only: a kernel needs one).
            lowered.steps.push(Step {
                kernel: Kernel::new(
                    vec![IterKind::Parallel],
                    1,
                    Expr::Const(identity),
                    Accumulate::Assign,
                ),
                launch: Launch::new(
                    vec![len],
                    Layout::new(0, vec![1], len),
                    vec![Layout::new(0, vec![0], source_len)],
                ),
                result: scratch,
                operands: vec![source],
                call: None,
            });
        }
        lowered.steps.push(Step {
            kernel: Kernel::new(
                vec![IterKind::Parallel; dims.len()],
                1,
                Expr::Load(0),
                Accumulate::Assign,
            ),
            launch: Launch::new(
                dims.clone(),
                Layout::new(offset, to, len),
                vec![Layout::new(0, from, source_len)],
            ),
            result: scratch,
            operands: vec![source],
            call: None,
        });
        let layout = layout_of(&padded, axes, p.sizes.len(), self.options.slice);
        Ok(Some((scratch, layout)))
    }
}

/// The layout of a tensor stored contiguously in memory order, seen
/// through an operation's axis indices.
fn layout(shape: &SolvedShape, axes: &[AxisIndex], iterators: usize, slice: u64) -> Layout {
    layout_of(&shape.memory_dims(), axes, iterators, slice)
}

/// [`layout`] for a tensor of `dims` in memory order.
pub(crate) fn layout_of(dims: &[u64], axes: &[AxisIndex], iterators: usize, slice: u64) -> Layout {
    let axis_stride = row_major_strides(dims);
    let mut strides = vec![0u64; iterators];
    let mut offset = 0u64;
    // Saturating: a layout this large fails `Launch::check` or allocation
    // with a clear error instead of wrapping around.
    for (j, a) in axes.iter().enumerate() {
        match a {
            AxisIndex::Iterator(k) => strides[*k] = strides[*k].saturating_add(axis_stride[j]),
            AxisIndex::Fixed(c) => offset = offset.saturating_add(c.saturating_mul(axis_stride[j])),
            AxisIndex::Slice => {
                offset = offset.saturating_add(slice.saturating_mul(axis_stride[j]))
            }
            AxisIndex::Affine { .. } => {
                for (c, it) in a.affine_terms().into_iter().flatten() {
                    if let Some(k) = it {
                        strides[k] = strides[k].saturating_add(c.saturating_mul(axis_stride[j]));
                    }
                }
            }
        }
    }
    Layout::new(offset, strides, buffer_len(dims))
}

/// The stride of each axis of a tensor of `dims` stored contiguously in
/// memory order (saturating).
fn row_major_strides(dims: &[u64]) -> Vec<u64> {
    let mut strides = vec![1u64; dims.len()];
    for j in (0..dims.len().saturating_sub(1)).rev() {
        strides[j] = strides[j + 1].saturating_mul(dims[j + 1]);
    }
    strides
}

impl SolvedGraph {
    /// The operation, its operands and result, or an error for an id this
    /// graph did not create.
    fn op_parts(&self, op: OpId) -> Result<crate::graph::OpParts<'_>, GraphError> {
        self.graph()
            .op_node(op)
            .ok_or(GraphError::UnknownOp(op.index()))
    }

    /// The projections of one operation.
    ///
    /// ```
    /// use shape_graph::{AxisIndex, Graph};
    /// use shape_core::IterKind;
    /// let mut g = Graph::new();
    /// let a = g.input("a", "2,3").unwrap();
    /// let b = g.input("b", "3,4").unwrap();
    /// let c = g.einsum("ij;jk=>ik", &[a, b]).unwrap();
    /// let s = g.solve().unwrap();
    /// let p = s.projections(g.producer(c).unwrap()).unwrap();
    /// assert_eq!(p.sizes, vec![2, 4, 3]);
    /// assert_eq!(p.kinds, vec![IterKind::Parallel, IterKind::Parallel, IterKind::Reduction]);
    /// assert_eq!(p.operands[0], vec![AxisIndex::Iterator(0), AxisIndex::Iterator(2)]);
    /// ```
    pub fn projections(&self, op: OpId) -> Result<Projections, GraphError> {
        let (operation, operands, result) = self.op_parts(op)?;
        let mut shapes = Vec::with_capacity(operands.len() + 1);
        shapes.push(self.shape(result)?);
        for &t in operands {
            shapes.push(self.shape(t)?);
        }
        let mut builder = ProjectionBuilder::new(shapes);
        operation.project(&mut builder);
        Ok(builder.finish())
    }

    /// The kernels that compute one operation with `options`,
    /// its result and operands stored contiguously in memory order
    /// (batch, output, input).
    ///
    /// ```
    /// use shape_graph::{Graph, LowerOptions};
    /// let mut g = Graph::new();
    /// let a = g.input("a", "2,3").unwrap();
    /// let s = g.permute("ij=>i", a).unwrap();
    /// let solved = g.solve().unwrap();
    /// let lowered = solved.lower(g.producer(s).unwrap(), &LowerOptions::default()).unwrap();
    /// assert_eq!(lowered.steps.len(), 1);
    /// assert_eq!(lowered.steps[0].kernel.to_string(), "for [i0, r1]: out += in0");
    /// ```
    pub fn lower(&self, op: OpId, options: &LowerOptions) -> Result<Lowered, GraphError> {
        if self.op_is_ragged(op)? {
            return Err(GraphError::RaggedLowering {
                op: self.graph().op_ref(op)?,
                reason: "its ragged rows' lengths come with the data: a run lowers it row by row"
                    .into(),
            });
        }
        self.lower_dense(op, options)
    }

    /// [`SolvedGraph::lower`] for an operation known to touch no ragged
    /// tensor.
    fn lower_dense(&self, op: OpId, options: &LowerOptions) -> Result<Lowered, GraphError> {
        let (operation, operands, result) = self.op_parts(op)?;
        let mut shapes = Vec::with_capacity(operands.len() + 1);
        shapes.push(self.shape(result)?);
        for &t in operands {
            shapes.push(self.shape(t)?);
        }
        let projections = self.projections(op)?;
        let cx = LoweringCx {
            op: self.graph().op_ref(op)?,
            shapes,
            projections,
            options,
        };
        operation.lower(&cx)
    }

    /// The flat element index through which `op` addresses each of its
    /// tensors (the result first, then the operands), as a symbolic
    /// expression of the loop iterators `i0, i1, ...` and of each tensor's
    /// axis sizes `t{tensor}_{axis}` (axes in memory order), simplified
    /// with one e-graph for the whole operation: terms of broadcast axes
    /// drop out, and a diagonal's two terms share their iterator.
    ///
    /// This is the size-independent form a code generator emits; the
    /// launch's strides are these expressions evaluated at concrete sizes
    /// (for an operand read through padded affine axes, the sizes of its
    /// padded copy, which the lowering makes first).
    pub fn index_expressions(&self, op: OpId) -> Result<Vec<SymExpr>, GraphError> {
        let (_, operands, result) = self.op_parts(op)?;
        let p = self.projections(op)?;
        let mut simplifier = Simplifier::new();
        let tensors = std::iter::once(result).chain(operands.iter().copied());
        let axes = std::iter::once(&p.result).chain(&p.operands);
        let mut out = Vec::new();
        for (t, (tensor, indices)) in tensors.zip(axes).enumerate() {
            let rank = self.shape(tensor)?.memory_dims().len();
            let mut e = SymExpr::default();
            let mut sum = None;
            for (j, index) in indices.iter().enumerate() {
                let mut term = match index {
                    // Structure first: a term at index 0 contributes nothing.
                    AxisIndex::Fixed(0) => continue,
                    AxisIndex::Iterator(k) => e.add(var(&format!("i{k}"))),
                    AxisIndex::Fixed(c) => e.add(Sym::Num(*c as i64)),
                    AxisIndex::Slice => e.add(var("slice")),
                    // A padded axis is read in a padded copy: its sizes are
                    // the copy's, which the expression names like any other.
                    AxisIndex::Affine { .. } => {
                        let mut sum = e.add(Sym::Num(0));
                        for (c, it) in index.affine_terms().into_iter().flatten() {
                            if let Some(k) = it {
                                let i = e.add(var(&format!("i{k}")));
                                let c = e.add(Sym::Num(c as i64));
                                let term = e.add(Sym::Mul([c, i]));
                                sum = e.add(Sym::Add([sum, term]));
                            }
                        }
                        sum
                    }
                };
                for later in j + 1..rank {
                    let size = e.add(var(&format!("t{t}_{later}")));
                    term = e.add(Sym::Mul([term, size]));
                }
                sum = Some(match sum {
                    Some(s) => e.add(Sym::Add([s, term])),
                    None => term,
                });
            }
            if sum.is_none() {
                e.add(Sym::Num(0));
            }
            out.push(simplifier.simplify(&e));
        }
        Ok(out)
    }
}
