//! Running a solved graph on a backend.
//!
//! [`SolvedGraph::plan`] decides how: over the operation graph (petgraph),
//! it keeps only the operations the requested outputs depend on, orders
//! them topologically, lowers each to its kernels, finds each tensor's
//! last use, and assigns buffers so that a freed buffer is reused by a
//! later one of the same size. The plan knows its peak memory before
//! anything runs. [`SolvedGraph::run`] follows a plan on any
//! [`Backend`], with typed inputs and outputs ([`HostTensor`]) that carry
//! their shape.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use petgraph::algo::toposort;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{Dfs, NodeFiltered, Reversed};
use shape_core::{Backend, SolvedShape};

use crate::graph::{GraphError, OpId, SolvedGraph, TensorId, TensorKind};
use crate::lowering::{BufferRef, Lowered, Step};
use crate::ragged::RaggedAxis;
use shape_core::kernel::{Expr, Kernel, Launch, Layout};
use shape_solver::{OpRef, TensorRef};

/// A tensor's values on the host, in memory order (batch, output, input;
/// row-major), with the sizes of its axes in that order.
#[derive(Clone, Debug, PartialEq)]
pub struct HostTensor {
    dims: Vec<u64>,
    values: Vec<f32>,
    /// The rows of a ragged axis; `dims` then holds its longest row.
    ragged: Option<RaggedAxis>,
}

/// Host data that does not fit its dims, or memory that cannot be had.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum DataError {
    /// The number of values differs from the product of the dims.
    #[error("dims {dims:?} hold {expected} values but {found} were given")]
    Length {
        /// The dims.
        dims: Vec<u64>,
        /// Their product.
        expected: u128,
        /// The values given.
        found: usize,
    },
    /// Row offsets of ragged data that do not describe rows.
    #[error("the row offsets of ragged data are invalid: {reason}")]
    RaggedOffsets {
        /// What is wrong.
        reason: String,
    },
    /// The values do not fit in memory.
    #[error("out of memory: {elements} values need {bytes} bytes, which could not be allocated")]
    OutOfMemory {
        /// The values asked for.
        elements: u128,
        /// Their size.
        bytes: u128,
    },
}

impl DataError {
    /// A stable, machine-readable name for the error's kind.
    pub fn kind(&self) -> &'static str {
        self.into()
    }
}

impl HostTensor {
    /// Values with the dims of their axes in memory order.
    ///
    /// ```
    /// use shape_graph::HostTensor;
    /// let t = HostTensor::new(vec![2, 3], vec![0.0; 6]).unwrap();
    /// assert_eq!(t.len(), 6);
    /// assert!(HostTensor::new(vec![2, 3], vec![0.0; 5]).is_err());
    /// ```
    pub fn new(dims: Vec<u64>, values: Vec<f32>) -> Result<HostTensor, DataError> {
        let expected = elements(&dims);
        HostTensor::checked(dims, values, None, expected)
    }

    /// The tensor, when `values` holds the `expected` number of values.
    fn checked(
        dims: Vec<u64>,
        values: Vec<f32>,
        ragged: Option<RaggedAxis>,
        expected: u128,
    ) -> Result<HostTensor, DataError> {
        if expected != values.len() as u128 {
            return Err(DataError::Length {
                dims,
                expected,
                found: values.len(),
            });
        }
        Ok(HostTensor {
            dims,
            values,
            ragged,
        })
    }

    /// Ragged values: `outer` are the dims before the ragged axis (in
    /// memory order), which has one row per position of them, of the
    /// lengths `lengths`; `inner` are the dims after it. The values are
    /// the rows one after another, row-major within each. [`HostTensor::dims`]
    /// then gives the longest row's length for the ragged axis.
    ///
    /// ```
    /// use shape_graph::HostTensor;
    /// // [[1], [2, 3]]
    /// let t = HostTensor::ragged(vec![2], &[1, 2], vec![], vec![1.0, 2.0, 3.0]).unwrap();
    /// assert_eq!(t.dims(), &[2, 2]);
    /// assert_eq!(t.ragged_axis().unwrap().offsets(), &[0, 1, 3]);
    /// assert_eq!(t.to_string(), "[[1], [2, 3]]");
    /// assert!(HostTensor::ragged(vec![2], &[1, 2], vec![], vec![1.0]).is_err());
    /// ```
    pub fn ragged(
        outer: Vec<u64>,
        lengths: &[u64],
        inner: Vec<u64>,
        values: Vec<f32>,
    ) -> Result<HostTensor, DataError> {
        let rows = elements(&outer);
        let axis = RaggedAxis::from_lengths(outer.len(), lengths)?;
        if rows != lengths.len() as u128 {
            return Err(DataError::RaggedOffsets {
                reason: format!(
                    "the dims {outer:?} before the ragged axis have {rows} rows, but {} lengths were given",
                    lengths.len()
                ),
            });
        }
        let expected = (axis.total() as u128).saturating_mul(elements(&inner));
        let mut dims = outer;
        dims.push(axis.longest());
        dims.extend(inner);
        HostTensor::checked(dims, values, Some(axis), expected)
    }

    /// The rows of the ragged axis, for ragged values.
    pub fn ragged_axis(&self) -> Option<&RaggedAxis> {
        self.ragged.as_ref()
    }

    /// These values as ragged values along `axis`, every row of the same
    /// length (the data of a dense tensor given for a ragged one).
    fn into_ragged(self, axis: usize) -> Result<HostTensor, DataError> {
        if self.ragged.is_some() {
            return Ok(self);
        }
        let rows = elements(&self.dims[..axis]);
        let len = self.dims[axis];
        let mut lengths = Vec::new();
        let count = usize::try_from(rows).unwrap_or(usize::MAX);
        lengths
            .try_reserve_exact(count)
            .map_err(|_| DataError::OutOfMemory {
                elements: rows,
                bytes: rows.saturating_mul(8),
            })?;
        lengths.resize(count, len);
        HostTensor::ragged(
            self.dims[..axis].to_vec(),
            &lengths,
            self.dims[axis + 1..].to_vec(),
            self.values,
        )
    }

    /// A tensor of these dims with every value `value`; fails rather than
    /// aborting when memory cannot be had.
    pub fn filled(dims: Vec<u64>, value: f32) -> Result<HostTensor, DataError> {
        let n = elements(&dims);
        let oom = || DataError::OutOfMemory {
            elements: n,
            bytes: n.saturating_mul(4),
        };
        let len = usize::try_from(n).map_err(|_| oom())?;
        let mut values = Vec::new();
        values.try_reserve_exact(len).map_err(|_| oom())?;
        values.resize(len, value);
        Ok(HostTensor {
            dims,
            values,
            ragged: None,
        })
    }

    /// The sizes of the axes, in memory order.
    pub fn dims(&self) -> &[u64] {
        &self.dims
    }

    /// The values, in memory order.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// The values, taken out.
    pub fn into_values(self) -> Vec<f32> {
        self.values
    }

    /// The number of values.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether there are no values.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

impl std::fmt::Display for HostTensor {
    /// The values as nested lists, as numpy's `tolist` prints them
    /// (ragged rows with their own lengths).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut out = Vec::new();
        self.write_nested(&mut out, &|w, v| write!(w, "{v}"))
            .map_err(|_| std::fmt::Error)?;
        f.write_str(&String::from_utf8_lossy(&out))
    }
}

impl HostTensor {
    /// Writes the values as nested lists (`[[1, 2], [3]]`), each value by
    /// `value`: ragged rows with their own lengths, an empty axis as
    /// numpy's `tolist` writes it (`(2, 0)` is `[[], []]`), a tensor
    /// without axes as its bare value. Iterative, so thousands of axes
    /// cannot exhaust the stack.
    pub fn write_nested(
        &self,
        w: &mut dyn std::io::Write,
        value: &dyn Fn(&mut dyn std::io::Write, f32) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        let at = |i: u64| self.values.get(i as usize).copied().unwrap_or(0.0);
        match &self.ragged {
            None => nested_grid(w, &self.dims, &mut |w, i| value(w, at(i))),
            Some(rows) => {
                let axis = rows.axis();
                let inner = &self.dims[axis + 1..];
                let per = inner.iter().fold(1u64, |a, &d| a.saturating_mul(d));
                let mut dims = vec![0u64; inner.len() + 1];
                dims[1..].copy_from_slice(inner);
                nested_grid(w, &self.dims[..axis], &mut |w, r| {
                    dims[0] = rows.row_len(r as usize);
                    let start = rows.row_start(r as usize).saturating_mul(per);
                    nested_grid(w, &dims, &mut |w, k| value(w, at(start + k)))
                })
            }
        }
    }
}

/// Writes a grid of `dims` as nested lists, each element (by its flat
/// index) by `leaf`; without recursion.
fn nested_grid(
    w: &mut dyn std::io::Write,
    dims: &[u64],
    leaf: &mut dyn FnMut(&mut dyn std::io::Write, u64) -> std::io::Result<()>,
) -> std::io::Result<()> {
    if let Some(zero) = dims.iter().position(|&d| d == 0) {
        // Nothing below the first empty axis: the lists above it, each
        // holding an empty list.
        if zero == 0 {
            return w.write_all(b"[]");
        }
        return nested_grid(w, &dims[..zero], &mut |w, _| w.write_all(b"[]"));
    }
    // The number of elements each level spans.
    let mut spans = vec![1u64; dims.len()];
    let mut span = 1u64;
    for (level, &d) in dims.iter().enumerate().rev() {
        span = span.saturating_mul(d);
        spans[level] = span;
    }
    for i in 0..span {
        if i > 0 {
            w.write_all(b", ")?;
        }
        for _ in spans.iter().filter(|&&s| i.is_multiple_of(s)) {
            w.write_all(b"[")?;
        }
        leaf(w, i)?;
        for _ in spans.iter().filter(|&&s| (i + 1).is_multiple_of(s)) {
            w.write_all(b"]")?;
        }
    }
    Ok(())
}

/// The product of dims, saturating at `u128::MAX`.
fn elements(dims: &[u64]) -> u128 {
    dims.iter()
        .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128))
        .unwrap_or(u128::MAX)
}

/// The data of a run: values for the inputs, parameters and constants
/// the requested outputs depend on.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    tensors: HashMap<TensorId, HostTensor>,
}

impl Inputs {
    /// No data yet.
    pub fn new() -> Inputs {
        Inputs::default()
    }

    /// Gives `t` its values; returns what it had before.
    pub fn insert(&mut self, t: TensorId, values: HostTensor) -> Option<HostTensor> {
        self.tensors.insert(t, values)
    }

    /// This data with `t`'s values added.
    pub fn with(mut self, t: TensorId, values: HostTensor) -> Inputs {
        self.insert(t, values);
        self
    }

    /// The values of `t`, if given.
    pub fn get(&self, t: TensorId) -> Option<&HostTensor> {
        self.tensors.get(&t)
    }

    /// The tensors given values.
    pub fn tensors(&self) -> impl Iterator<Item = TensorId> + '_ {
        self.tensors.keys().copied()
    }
}

/// How a run goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunOptions {
    /// The batch index that batch slices take.
    pub slice: u64,
    /// Whether planning leaves every operation its own kernels (no
    /// fusion of pointwise chains; see [`SolvedGraph::plan`]).
    pub unfused: bool,
}

impl RunOptions {
    /// These options without fusion: every operation runs its own
    /// kernels and writes its result.
    pub fn unfused(mut self) -> RunOptions {
        self.unfused = true;
        self
    }

    /// These options with batch slices taking index `slice`.
    pub fn with_slice(mut self, slice: u64) -> RunOptions {
        self.slice = slice;
        self
    }
}

/// The values of a run's outputs.
#[derive(Clone, Debug, Default)]
pub struct RunOutputs {
    tensors: HashMap<TensorId, HostTensor>,
}

impl RunOutputs {
    /// The values of output `t`.
    pub fn get(&self, t: TensorId) -> Option<&HostTensor> {
        self.tensors.get(&t)
    }

    /// Takes the values of output `t` out.
    pub fn remove(&mut self, t: TensorId) -> Option<HostTensor> {
        self.tensors.remove(&t)
    }

    /// Every output with its values.
    pub fn iter(&self) -> impl Iterator<Item = (TensorId, &HostTensor)> {
        self.tensors.iter().map(|(&t, v)| (t, v))
    }
}

/// A failure while running a graph.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum RunError<E: std::error::Error + 'static> {
    /// The graph cannot be turned into kernels.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A tensor that no operation computes was given no data.
    #[error("no data for {} `{}`: give {} values (its solved shape is {shape})", kind_name(*kind), tensor.name, elements(&shape.memory_dims()))]
    MissingData {
        /// The tensor.
        tensor: TensorRef,
        /// Input, parameter or constant.
        kind: TensorKind,
        /// Its solved shape.
        shape: SolvedShape,
    },
    /// Data whose dims differ from the tensor's solved shape.
    #[error("`{}` needs dims {} (its solved shape is {shape}, in memory order: batch, output, input) but was given dims {found:?}", tensor.name, dims_text(shape))]
    DataShape {
        /// The tensor.
        tensor: TensorRef,
        /// Its solved shape.
        shape: SolvedShape,
        /// The dims given.
        found: Vec<u64>,
    },
    /// Data given for a tensor that an operation computes.
    #[error("`{}` is computed by the graph; only inputs, parameters and constants take data", tensor.name)]
    NotALeaf {
        /// The tensor.
        tensor: TensorRef,
    },
    /// The backend failed.
    #[error("backend {backend} failed {}: {source}", match op { Some(op) => format!("in op #{}", op.id), None => "while moving data".to_string() })]
    Backend {
        /// The backend's name.
        backend: String,
        /// The operation being run, or `None` for an upload or download.
        op: Option<Arc<OpRef>>,
        /// The backend's error.
        source: E,
    },
    /// A maximum, minimum or assignment over a reduction of no values
    /// (an empty axis), which has no value. Checked for every operation
    /// before any runs, so the earliest such operation in the graph's
    /// order is the one reported, whatever the backend and the plan's
    /// order.
    #[error("{op} cannot run: {source}")]
    EmptyReduction {
        /// The operation.
        op: Arc<OpRef>,
        /// What is empty.
        source: shape_core::kernel::LaunchError,
    },
    /// The backend gave back a result that is not the tensor's values: a
    /// number of values other than its shape holds, or none at all. A
    /// defect of the backend (or of the runner), never of the graph.
    #[error("backend {backend} gave back {found} values for `{}`, whose solved shape {shape} holds {expected}", tensor.name)]
    LostResult {
        /// The backend's name.
        backend: String,
        /// The result.
        tensor: TensorRef,
        /// Its solved shape.
        shape: Box<SolvedShape>,
        /// The values it holds.
        expected: u64,
        /// The values given back (0 when no buffer held it).
        found: u64,
    },
    /// An operation's lowering asks for something the runner cannot do
    /// (a step that reads the buffer it writes, or a buffer it does not
    /// have): a defect of that operation.
    #[error("{op} lowers to step {step}, which {problem}")]
    InvalidLowering {
        /// The operation.
        op: Arc<OpRef>,
        /// The step.
        step: usize,
        /// What is wrong.
        problem: &'static str,
    },
}

/// A shape's dims in memory order, `var` for a ragged axis: `[2, var]`.
fn dims_text(shape: &SolvedShape) -> String {
    let dims: Vec<String> = (shape_core::RowKind::MEMORY_ORDER.iter())
        .flat_map(|&k| shape.row(k).iter().map(|d| d.extent().to_string()))
        .collect();
    format!("[{}]", dims.join(", "))
}

fn kind_name(kind: TensorKind) -> &'static str {
    match kind {
        TensorKind::Input => "input",
        TensorKind::Parameter => "parameter",
        TensorKind::Constant => "constant",
        TensorKind::Result(_) => "result",
    }
}

impl<E: std::error::Error + 'static> RunError<E> {
    /// A stable, machine-readable name for the error's kind.
    pub fn kind(&self) -> &'static str {
        if let RunError::Graph(e) = self {
            return e.kind();
        }
        self.into()
    }
}

/// One operation of a [`RunPlan`].
#[derive(Clone, Debug)]
pub struct PlannedOp {
    /// The operation.
    pub op: OpId,
    /// Its kernels.
    pub lowered: Lowered,
    /// Elements of its result.
    pub result_len: u64,
    /// Tensors whose last use this operation is (their buffers are freed
    /// after it, for later operations to reuse).
    pub releases: Vec<TensorId>,
    /// Whether the operation touches a ragged tensor: then `lowered` is
    /// empty and `result_len` 0 until the run knows the data's rows, and
    /// the run lowers it row by row.
    pub ragged: bool,
}

/// How a run goes, decided before it starts: which operations run in which
/// order, when each buffer is freed, and how much memory the run needs.
#[derive(Clone, Debug)]
pub struct RunPlan {
    ops: Vec<PlannedOp>,
    leaves: Vec<TensorId>,
    outputs: Vec<TensorId>,
    leaf_releases: Vec<TensorId>,
    peak_bytes: u128,
    allocated_bytes: u128,
    options: RunOptions,
}

impl RunPlan {
    /// The operations, in the order they run.
    pub fn ops(&self) -> &[PlannedOp] {
        &self.ops
    }

    /// The inputs, parameters and constants the run reads.
    pub fn leaves(&self) -> &[TensorId] {
        &self.leaves
    }

    /// The tensors whose values the run returns.
    pub fn outputs(&self) -> &[TensorId] {
        &self.outputs
    }

    /// The most bytes of tensor data held at once: the leaves' data until
    /// their last use, live results and scratch, freed buffers kept for
    /// reuse, and the outputs. Ragged tensors count as empty: their
    /// lengths come with the data.
    pub fn peak_bytes(&self) -> u128 {
        self.peak_bytes
    }

    /// The bytes of all buffers the run allocates (without reuse, this is
    /// what every result and scratch buffer would take).
    pub fn allocated_bytes(&self) -> u128 {
        self.allocated_bytes
    }
}

/// Free buffers by length, for reuse.
struct Pool<T> {
    free: HashMap<u64, Vec<T>>,
}

impl<T> Pool<T> {
    fn new() -> Pool<T> {
        Pool {
            free: HashMap::new(),
        }
    }

    fn take(&mut self, len: u64) -> Option<T> {
        self.free.get_mut(&len)?.pop()
    }

    fn put(&mut self, len: u64, buffer: T) {
        self.free.entry(len).or_default().push(buffer);
    }
}

/// Counts what a run holds, to find its peak.
#[derive(Default)]
struct Memory {
    live: u128,
    pooled: u128,
    peak: u128,
    allocated: u128,
}

impl Memory {
    fn note(&mut self) {
        self.peak = self.peak.max(self.live + self.pooled);
    }

    /// A buffer of `len` elements: reused from the pool when one is free.
    fn acquire(&mut self, pool: &mut Pool<()>, len: u64) {
        let bytes = len as u128 * 4;
        if pool.take(len).is_some() {
            self.pooled -= bytes;
        } else {
            self.allocated += bytes;
        }
        self.live += bytes;
        self.note();
    }

    fn release(&mut self, pool: &mut Pool<()>, len: u64) {
        let bytes = len as u128 * 4;
        self.live -= bytes;
        self.pooled += bytes;
        pool.put(len, ());
    }
}

impl SolvedGraph {
    fn len_of(&self, t: TensorId) -> Result<u64, GraphError> {
        if self.is_ragged(t)? {
            return Ok(0);
        }
        let n = elements(&self.shape(t)?.memory_dims());
        Ok(u64::try_from(n).unwrap_or(u64::MAX))
    }

    /// Plans a run that computes `outputs`.
    ///
    /// ```
    /// use shape_graph::{Graph, RunOptions};
    /// let mut g = Graph::new();
    /// let x = g.input("x", "1000")?;
    /// let a = g.unary("relu", x)?;
    /// let b = g.unary("exp", a)?;
    /// let c = g.unary("neg", b)?;
    /// let _unused = g.unary("log", x)?;
    /// let solved = g.solve()?;
    /// // `log` is not needed; relu, exp and neg fuse into one kernel, and
    /// // `a` and `b` are never written.
    /// let plan = solved.plan(&[c], &RunOptions::default())?;
    /// assert_eq!(plan.ops().len(), 1);
    /// assert_eq!(plan.ops()[0].lowered.steps[0].kernel.to_string(), "for [i0]: out = neg(exp(relu(in0)))");
    /// // Without fusion, two buffers of 4000 bytes: `b` reuses `x`'s once
    /// // `a` has read it, and `c` reuses `a`'s.
    /// let plan = solved.plan(&[c], &RunOptions::default().unfused())?;
    /// assert_eq!(plan.ops().len(), 3);
    /// assert_eq!(plan.peak_bytes(), 8_000);
    /// # Ok::<(), shape_graph::GraphError>(())
    /// ```
    pub fn plan(&self, outputs: &[TensorId], options: &RunOptions) -> Result<RunPlan, GraphError> {
        let graph = self.graph();
        let mut wanted = Vec::with_capacity(outputs.len());
        let mut seen = HashSet::with_capacity(outputs.len());
        for &t in outputs {
            graph.kind(t)?;
            if seen.insert(t) {
                wanted.push(t);
            }
        }
        // The operation graph: an edge from each producer to each reader.
        let mut deps: DiGraph<OpId, ()> = DiGraph::with_capacity(graph.num_ops(), graph.num_ops());
        let nodes: Vec<NodeIndex> = graph.op_ids().map(|op| deps.add_node(op)).collect();
        for op in graph.op_ids() {
            if let Some((_, operands, _)) = graph.op(op) {
                for &t in operands {
                    if let Some(producer) = graph.producer(t) {
                        deps.add_edge(nodes[producer.index()], nodes[op.index()], ());
                    }
                }
            }
        }
        // Only what the outputs depend on runs.
        let mut needed = vec![false; nodes.len()];
        let reversed = Reversed(&deps);
        let mut dfs = Dfs::empty(&reversed);
        for &t in &wanted {
            if let Some(op) = graph.producer(t) {
                dfs.move_to(nodes[op.index()]);
                while let Some(n) = dfs.next(&reversed) {
                    needed[n.index()] = true;
                }
            }
        }
        let filtered = NodeFiltered::from_fn(&deps, |n| needed[n.index()]);
        // Operations only read tensors that exist when they are applied,
        // so the graph has no cycle.
        let order: Vec<OpId> = toposort(&filtered, None)
            .map_err(|cycle| GraphError::UnknownOp(cycle.node_id().index()))?
            .into_iter()
            .map(|n| deps[n])
            .collect();

        // Lower every operation, then fuse pointwise chains. Operations on
        // ragged tensors are lowered when the run knows the rows; a plan
        // with any does not fuse.
        let mut ragged = HashSet::new();
        for &op in &order {
            if self.op_is_ragged(op)? {
                ragged.insert(op);
            }
        }
        let mut lowered: Vec<Option<Lowered>> = Vec::with_capacity(order.len());
        for &op in &order {
            lowered.push(Some(if ragged.contains(&op) {
                Lowered::default()
            } else {
                self.lower_dense(op, options)?
            }));
        }
        if !options.unfused && ragged.is_empty() {
            fuse_pointwise(graph, &order, &mut lowered, &seen);
            fuse_epilogues(graph, &order, &mut lowered, &seen);
        }
        let kept: Vec<(OpId, Lowered)> = order
            .iter()
            .zip(lowered)
            .filter_map(|(&op, l)| l.map(|l| (op, l)))
            .collect();
        let reads = |op: &OpId, l: &Lowered, operands: &[TensorId]| -> Vec<TensorId> {
            if ragged.contains(op) {
                operands.to_vec()
            } else {
                read_tensors(l, operands).collect()
            }
        };

        // The last step that reads each tensor; outputs live to the end.
        let mut last_use: HashMap<TensorId, usize> = HashMap::new();
        let mut leaves = Vec::new();
        let mut leaf_seen = HashSet::new();
        for (step, (op, l)) in kept.iter().enumerate() {
            let (_, operands, _) = graph.op(*op).ok_or(GraphError::UnknownOp(op.index()))?;
            for t in reads(op, l, operands) {
                last_use.insert(t, step);
                if graph.producer(t).is_none() && leaf_seen.insert(t) {
                    leaves.push(t);
                }
            }
        }
        for &t in &wanted {
            if graph.producer(t).is_none() && leaf_seen.insert(t) {
                leaves.push(t);
            }
        }
        let mut releases: Vec<Vec<TensorId>> = vec![Vec::new(); kept.len()];
        let mut leaf_releases = Vec::new();
        for (&t, &step) in &last_use {
            if !seen.contains(&t) {
                releases[step].push(t);
            }
        }
        for r in &mut releases {
            r.sort_unstable();
        }
        for &t in &leaves {
            if !last_use.contains_key(&t) && !seen.contains(&t) {
                leaf_releases.push(t);
            }
        }

        // Lower every operation, and count the memory as the runner will
        // use it.
        let mut memory = Memory::default();
        let mut pool = Pool::new();
        for &t in &leaves {
            let len = self.len_of(t)? as u128;
            memory.live += len * 4;
            memory.allocated += len * 4;
        }
        memory.note();
        let mut ops = Vec::with_capacity(kept.len());
        for (step, (op, lowered)) in kept.into_iter().enumerate() {
            let (_, _, result) = graph.op(op).ok_or(GraphError::UnknownOp(op.index()))?;
            let result_len = self.len_of(result)?;
            memory.acquire(&mut pool, result_len);
            for &len in &lowered.scratch {
                memory.acquire(&mut pool, len);
            }
            for &len in &lowered.scratch {
                memory.release(&mut pool, len);
            }
            for &t in &releases[step] {
                memory.release(&mut pool, self.len_of(t)?);
            }
            ops.push(PlannedOp {
                op,
                lowered,
                result_len,
                releases: std::mem::take(&mut releases[step]),
                ragged: ragged.contains(&op),
            });
        }
        Ok(RunPlan {
            ops,
            leaves,
            outputs: wanted,
            leaf_releases,
            peak_bytes: memory.peak,
            allocated_bytes: memory.allocated,
            options: options.clone(),
        })
    }

    /// Runs the operations that `outputs` depend on, on `backend`, and
    /// returns their values.
    ///
    /// `inputs` gives the values of every input, parameter and constant
    /// the outputs depend on; the run takes them (a backend may keep them
    /// instead of copying). Buffers are freed after their last use and
    /// reused by later results of the same size.
    ///
    /// A graph with run-time sizes still to bind is bound from the data
    /// first ([`SolvedGraph::bind_inputs`]): its guards are checked before
    /// anything runs. To run one solved graph at many sizes, call `run` on
    /// it each time, or [`SolvedGraph::bind`] it once per size.
    ///
    /// ```
    /// use backend_cpu::CpuBackend;
    /// use shape_graph::{Graph, HostTensor, Inputs, RunOptions};
    ///
    /// let mut g = Graph::new();
    /// let w = g.input("w", "2->3")?;
    /// let x = g.input("x", "2")?;
    /// let y = g.compose(w, x)?;
    /// let solved = g.solve()?;
    /// let inputs = Inputs::new()
    ///     .with(w, HostTensor::new(vec![3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?)
    ///     .with(x, HostTensor::new(vec![2], vec![1.0, 1.0])?);
    /// let out = solved.run(&mut CpuBackend::new(), inputs, &[y], &RunOptions::default())?;
    /// assert_eq!(out.get(y).unwrap().values(), &[3.0, 7.0, 11.0]);
    /// assert_eq!(out.get(y).unwrap().dims(), &[3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn run<B: Backend>(
        &self,
        backend: &mut B,
        inputs: Inputs,
        outputs: &[TensorId],
        options: &RunOptions,
    ) -> Result<RunOutputs, RunError<B::Error>> {
        if self.needs_binding() {
            // Run-time sizes take their values from the data.
            let bound = self.bind_inputs(&inputs, &[])?;
            return bound.run(backend, inputs, outputs, options);
        }
        let plan = self.plan(outputs, options)?;
        self.run_plan(backend, &plan, inputs)
    }

    /// Checks that `inputs` gives exactly what `plan` reads, with the
    /// right dims.
    fn check_inputs<E: std::error::Error + 'static>(
        &self,
        plan: &RunPlan,
        inputs: &Inputs,
    ) -> Result<(), RunError<E>> {
        let graph = self.graph();
        for t in inputs.tensors() {
            if let TensorKind::Result(_) = graph.kind(t)? {
                return Err(RunError::NotALeaf {
                    tensor: graph.tensor_ref(t)?,
                });
            }
        }
        for &t in &plan.leaves {
            let shape = self.shape(t)?;
            let tensor = || graph.tensor_ref(t);
            let Some(given) = inputs.get(t) else {
                return Err(RunError::MissingData {
                    tensor: tensor()?,
                    kind: graph.kind(t)?,
                    shape: shape.clone(),
                });
            };
            let dims = shape.memory_dims();
            let fits = match crate::ragged::ragged_position(self, t)? {
                // Ragged data along that axis, or dense data of any length
                // there; the other dims as the shape has them.
                Some(axis) => {
                    given.dims().len() == dims.len()
                        && (given.dims().iter().zip(&dims).enumerate())
                            .all(|(j, (g, d))| j == axis || g == d)
                        && given.ragged.as_ref().is_none_or(|r| r.axis() == axis)
                }
                None => given.ragged.is_none() && given.dims() == dims,
            };
            if !fits {
                return Err(RunError::DataShape {
                    tensor: tensor()?,
                    shape: shape.clone(),
                    found: given.dims().to_vec(),
                });
            }
        }
        Ok(())
    }

    /// The first operation, in the graph's order, whose kernels reduce
    /// no values where that has no value (see
    /// [`RunError::EmptyReduction`]). Ragged operations are lowered, and
    /// checked, row by row as they run.
    fn check_empty_reductions<E: std::error::Error + 'static>(
        &self,
        plan: &RunPlan,
    ) -> Result<(), RunError<E>> {
        let mut dense: Vec<&PlannedOp> = plan.ops.iter().filter(|p| !p.ragged).collect();
        dense.sort_by_key(|p| p.op.index());
        for planned in dense {
            for step in &planned.lowered.steps {
                if let Err(e @ shape_core::kernel::LaunchError::EmptyReduction { .. }) =
                    step.launch.empty_reduction(&step.kernel)
                {
                    return Err(RunError::EmptyReduction {
                        op: self.graph().op_ref(planned.op)?,
                        source: e,
                    });
                }
            }
        }
        Ok(())
    }

    /// Runs a plan made by [`SolvedGraph::plan`] for this graph.
    pub fn run_plan<B: Backend>(
        &self,
        backend: &mut B,
        plan: &RunPlan,
        mut inputs: Inputs,
    ) -> Result<RunOutputs, RunError<B::Error>> {
        self.check_inputs(plan, &inputs)?;
        self.check_empty_reductions(plan)?;
        let graph = self.graph();
        let moving = |backend: &B| {
            let name = backend.name();
            move |source| RunError::Backend {
                backend: name,
                op: None,
                source,
            }
        };
        let mut buffers: HashMap<TensorId, B::Buffer> = HashMap::with_capacity(plan.leaves.len());
        // The rows of every ragged tensor, as the data gives them.
        let mut rows: HashMap<TensorId, RaggedAxis> = HashMap::new();
        for &t in &plan.leaves {
            let mut given = inputs.tensors.remove(&t);
            let axis = crate::ragged::ragged_position(self, t)?;
            if let (Some(axis), Some(data)) = (axis, axis.and_then(|_| given.take())) {
                let data = data
                    .into_ragged(axis)
                    .map_err(|e| GraphError::RaggedLayout {
                        tensor: graph.tensor_ref(t).ok().map(Box::new),
                        shape: self.shape(t).map(|s| s.to_string()).unwrap_or_default(),
                        reason: e.to_string(),
                    })?;
                rows.extend(data.ragged.clone().map(|r| (t, r)));
                given = Some(data);
            }
            let values = given.map(HostTensor::into_values).unwrap_or_default();
            let buffer = backend.upload_owned(values).map_err(moving(backend))?;
            buffers.insert(t, buffer);
        }
        drop(inputs);
        let mut pool: Pool<B::Buffer> = Pool::new();
        for &t in &plan.leaf_releases {
            if let Some(b) = buffers.remove(&t) {
                let len = backend.len(&b);
                pool.put(len, b);
            }
        }
        for planned in &plan.ops {
            let op = graph.op_ref(planned.op)?;
            let failed = |backend: &B| {
                let name = backend.name();
                let op = op.clone();
                move |source| RunError::Backend {
                    backend: name,
                    op: Some(op),
                    source,
                }
            };
            let invalid = |step: usize, problem| RunError::InvalidLowering {
                op: op.clone(),
                step,
                problem,
            };
            let (_, operands, result) = graph
                .op(planned.op)
                .ok_or(GraphError::UnknownOp(planned.op.index()))?;
            let row_lowered;
            let (lowered, result_len) = if planned.ragged {
                let operand_rows: Vec<Option<&RaggedAxis>> =
                    operands.iter().map(|t| rows.get(t)).collect();
                let r = self.lower_ragged(planned.op, &operand_rows, &plan.options)?;
                if let Some(axis) = r.result_rows {
                    rows.insert(result, axis);
                }
                row_lowered = r.lowered;
                (&row_lowered, r.result_len)
            } else {
                (&planned.lowered, planned.result_len)
            };
            let out = match pool.take(result_len) {
                Some(mut b) => {
                    if !lowered.covers_result(result_len) {
                        backend.fill(&mut b, 0.0).map_err(failed(backend))?;
                    }
                    b
                }
                None => backend
                    .alloc(to_usize(result_len))
                    .map_err(failed(backend))?,
            };
            let mut out = Some(out);
            let mut scratch: Vec<Option<B::Buffer>> = Vec::with_capacity(lowered.scratch.len());
            for &len in &lowered.scratch {
                let b = match pool.take(len) {
                    Some(mut b) => {
                        backend.fill(&mut b, 0.0).map_err(failed(backend))?;
                        b
                    }
                    None => backend.alloc(to_usize(len)).map_err(failed(backend))?,
                };
                scratch.push(Some(b));
            }
            for (index, step) in lowered.steps.iter().enumerate() {
                if step.operands.contains(&step.result) {
                    return Err(invalid(index, "reads the buffer it writes"));
                }
                // The written buffer leaves its slot while the step runs, so
                // that the buffers it reads can be borrowed beside it.
                let slot = match step.result {
                    BufferRef::Result => &mut out,
                    BufferRef::Scratch(i) => scratch.get_mut(i).ok_or_else(|| {
                        invalid(index, "writes a scratch buffer it does not declare")
                    })?,
                    BufferRef::Operand(_) | BufferRef::Tensor(_) => {
                        return Err(invalid(index, "writes an operand"))
                    }
                };
                let mut target = slot
                    .take()
                    .ok_or_else(|| invalid(index, "writes a buffer it does not have"))?;
                let reads: Option<Vec<&B::Buffer>> = step
                    .operands
                    .iter()
                    .map(|r| match *r {
                        BufferRef::Result => out.as_ref(),
                        BufferRef::Operand(i) => operands.get(i).and_then(|t| buffers.get(t)),
                        BufferRef::Tensor(t) => buffers.get(&t),
                        BufferRef::Scratch(i) => scratch.get(i).and_then(Option::as_ref),
                    })
                    .collect();
                let reads =
                    reads.ok_or_else(|| invalid(index, "reads a buffer it does not have"))?;
                backend
                    .execute(&step.kernel, &step.launch, &mut target, &reads)
                    .map_err(failed(backend))?;
                match step.result {
                    BufferRef::Scratch(i) => scratch[i] = Some(target),
                    BufferRef::Result | BufferRef::Operand(_) | BufferRef::Tensor(_) => {
                        out = Some(target)
                    }
                }
            }
            for (b, &len) in scratch.into_iter().zip(&lowered.scratch) {
                if let Some(b) = b {
                    pool.put(len, b);
                }
            }
            let out = out.ok_or_else(|| invalid(lowered.steps.len(), "loses the result"))?;
            buffers.insert(result, out);
            for t in &planned.releases {
                if let Some(b) = buffers.remove(t) {
                    let len = backend.len(&b);
                    pool.put(len, b);
                }
            }
        }
        drop(pool);
        let mut values = HashMap::with_capacity(plan.outputs.len());
        let backend_name = backend.name();
        for &t in &plan.outputs {
            let lost = |found: usize| -> Result<RunError<B::Error>, GraphError> {
                let shape = Box::new(self.shape(t)?.clone());
                Ok(RunError::LostResult {
                    backend: backend_name.clone(),
                    tensor: graph.tensor_ref(t)?,
                    expected: shape
                        .num_elems()
                        .map_or(u64::MAX, |n| u64::try_from(n).unwrap_or(u64::MAX)),
                    shape,
                    found: u64::try_from(found).unwrap_or(u64::MAX),
                })
            };
            let Some(buffer) = buffers.remove(&t) else {
                return Err(lost(0)?);
            };
            let data = backend.take(buffer).map_err(moving(backend))?;
            let dims = self.shape(t)?.memory_dims();
            let tensor = match rows.remove(&t) {
                Some(r) => HostTensor::ragged(
                    dims[..r.axis()].to_vec(),
                    &r.lengths(),
                    dims[r.axis() + 1..].to_vec(),
                    data,
                )
                .map_err(|e| GraphError::RaggedLayout {
                    tensor: graph.tensor_ref(t).ok().map(Box::new),
                    shape: self.shape(t).map(|s| s.to_string()).unwrap_or_default(),
                    reason: format!("the values returned do not fill its rows: {e}"),
                })?,
                None => {
                    let found = data.len();
                    match HostTensor::new(dims, data) {
                        Ok(tensor) => tensor,
                        Err(_) => return Err(lost(found)?),
                    }
                }
            };
            values.insert(t, tensor);
        }
        Ok(RunOutputs { tensors: values })
    }
}

/// The tensors the steps of `l` read, for an operation with `operands`.
fn read_tensors<'a>(
    l: &'a Lowered,
    operands: &'a [TensorId],
) -> impl Iterator<Item = TensorId> + 'a {
    l.steps
        .iter()
        .flat_map(|s| &s.operands)
        .filter_map(|r| match *r {
            BufferRef::Operand(i) => operands.get(i).copied(),
            BufferRef::Tensor(t) => Some(t),
            BufferRef::Result | BufferRef::Scratch(_) => None,
        })
}

/// The most tensors a fused kernel reads: each is a buffer binding on a
/// GPU, where 8 storage buffers per stage is a common limit.
const FUSED_OPERANDS: usize = 6;

/// The most expression nodes in a fused kernel's body: a chain of any
/// length fuses into kernels of bounded depth (evaluating and generating
/// code for a body recurse through it), each built in bounded time.
const FUSED_NODES: usize = 64;

/// The number of nodes of an expression.
fn expr_nodes(e: &Expr) -> usize {
    match e {
        Expr::Unary(_, a) => 1 + expr_nodes(a),
        Expr::Binary(_, a, b) | Expr::Compare(_, a, b) => 1 + expr_nodes(a) + expr_nodes(b),
        Expr::Select(c, a, b) => 1 + expr_nodes(c) + expr_nodes(a) + expr_nodes(b),
        _ => 1,
    }
}

/// Where each operation stands in `order`, and how many steps read each
/// tensor: what both fusions look up.
fn fusion_index(
    graph: &crate::Graph,
    order: &[OpId],
    lowered: &[Option<Lowered>],
) -> (HashMap<OpId, usize>, HashMap<TensorId, usize>) {
    let position = order.iter().enumerate().map(|(i, &op)| (op, i)).collect();
    let mut readers: HashMap<TensorId, usize> = HashMap::new();
    for (&op, l) in order.iter().zip(lowered) {
        if let (Some((_, operands, _)), Some(l)) = (graph.op(op), l) {
            for t in read_tensors(l, operands) {
                *readers.entry(t).or_default() += 1;
            }
        }
    }
    (position, readers)
}

/// Fuses pointwise chains in a plan's operations, in place: an
/// operation lowered to one step without reductions, whose result only
/// one step reads (and is not an output), moves into that reader when the
/// reader reads each of its elements exactly once, exactly where the
/// producer writes it (the same loop, or a reduction over it: `sum(relu(x))`
/// is one kernel; see [`read_once`]). The reader's
/// kernel then computes the producer's body where it loaded the result,
/// and the intermediate tensor is never written (`None` in `lowered`).
///
/// The values are the same: each element is computed by the same scalar
/// operations in the same order, only without the round trip through
/// memory.
fn fuse_pointwise(
    graph: &crate::Graph,
    order: &[OpId],
    lowered: &mut [Option<Lowered>],
    outputs: &HashSet<TensorId>,
) {
    let (position, readers) = fusion_index(graph, order, lowered);
    for c in 0..order.len() {
        let Some((_, c_operands, _)) = graph.op(order[c]) else {
            continue;
        };
        // Each operand in turn; a fused producer's own operands are then
        // candidates too (through `BufferRef::Tensor`).
        let mut j = 0;
        while let Some(consumer) = lowered[c].as_ref() {
            let [step] = consumer.steps.as_slice() else {
                break;
            };
            if j >= step.operands.len() {
                break;
            }
            let t = match step.operands[j] {
                BufferRef::Operand(i) => c_operands.get(i).copied(),
                BufferRef::Tensor(t) => Some(t),
                _ => None,
            };
            let producer = t
                .filter(|t| !outputs.contains(t) && readers.get(t) == Some(&1))
                .and_then(|t| graph.producer(t))
                .and_then(|p| position.get(&p).copied())
                .filter(|&p| p < c);
            let fused = producer.and_then(|p| {
                let (_, p_operands, _) = graph.op(order[p])?;
                let made = lowered[p].as_ref()?;
                let [inner] = made.steps.as_slice() else {
                    return None;
                };
                fuse_step(step, j, c_operands, inner, p_operands).map(|s| (p, s))
            });
            match fused {
                Some((p, s)) => {
                    lowered[p] = None;
                    if let Some(l) = lowered[c].as_mut() {
                        l.steps = vec![s];
                    }
                    // Operand `j` is now the producer's first operand.
                }
                None => j += 1,
            }
        }
    }
}

/// `outer` with its operand `j` (the result of `inner`) computed in place
/// by `inner`'s body, or `None` when they cannot be fused.
fn fuse_step(
    outer: &Step,
    j: usize,
    outer_operands: &[TensorId],
    inner: &Step,
    inner_operands: &[TensorId],
) -> Option<Step> {
    use shape_core::kernel::{Accumulate, IterKind};
    let buffers_ok = |s: &Step| {
        s.result == BufferRef::Result
            && s.launch.races == shape_core::Races::Refused
            && s.kernel.epilogue.is_none()
            && s.operands
                .iter()
                .all(|r| !matches!(r, BufferRef::Scratch(_) | BufferRef::Result))
    };
    let pointwise = inner.kernel.accumulate == Accumulate::Assign
        && inner
            .kernel
            .iterators
            .iter()
            .all(|k| *k == IterKind::Parallel);
    let count = outer.operands.len() - 1 + inner.operands.len();
    let small = expr_nodes(&outer.kernel.body) + expr_nodes(&inner.kernel.body) <= FUSED_NODES;
    if !(buffers_ok(outer) && buffers_ok(inner) && pointwise && small && count <= FUSED_OPERANDS) {
        return None;
    }
    let at = read_once(outer.launch.operands.get(j)?, &outer.launch.sizes, inner)?;
    // The inner operands' layouts over the outer iterators.
    let moved = |l: &Layout| {
        let places = at.iter().enumerate().filter_map(|(k, o)| o.map(|o| (k, o)));
        relaid(l, outer.launch.sizes.len(), places)
    };
    // Operands: the outer ones before `j`, the inner ones, the outer ones
    // after `j`; every reference to a tensor by name.
    let n = inner.operands.len();
    let mut refs = Vec::with_capacity(count);
    let mut layouts = Vec::with_capacity(count);
    for (k, (r, l)) in outer
        .operands
        .iter()
        .zip(&outer.launch.operands)
        .enumerate()
    {
        if k == j {
            for (r, l) in inner.operands.iter().zip(&inner.launch.operands) {
                refs.push(by_name(r, inner_operands)?);
                layouts.push(moved(l));
            }
        } else {
            refs.push(by_name(r, outer_operands)?);
            layouts.push(l.clone());
        }
    }
    let inner_body = inner.kernel.body.map_loads(&|m| Expr::Load(j + m));
    let body = outer.kernel.body.map_loads(&|k| match k.cmp(&j) {
        std::cmp::Ordering::Less => Expr::Load(k),
        std::cmp::Ordering::Equal => inner_body.clone(),
        std::cmp::Ordering::Greater => Expr::Load(k - 1 + n),
    });
    Some(Step {
        kernel: Kernel::new(
            outer.kernel.iterators.clone(),
            count,
            body,
            outer.kernel.accumulate,
        ),
        launch: Launch::new(
            outer.launch.sizes.clone(),
            outer.launch.result.clone(),
            layouts,
        ),
        result: BufferRef::Result,
        operands: refs,
    })
}

/// A step's buffer reference with operand `i` named: the tensor
/// `operands[i]`, which a fused step reads wherever it came from.
fn by_name(r: &BufferRef, operands: &[TensorId]) -> Option<BufferRef> {
    match *r {
        BufferRef::Operand(i) => operands.get(i).map(|&t| BufferRef::Tensor(t)),
        other => Some(other),
    }
}

/// `l` over a loop of `iterators` iterators: the stride along each
/// `(from, to)` of `places` moves from iterator `from` to iterator `to`;
/// every other iterator gets stride 0.
fn relaid(l: &Layout, iterators: usize, places: impl Iterator<Item = (usize, usize)>) -> Layout {
    let mut strides = vec![0u64; iterators];
    for (from, to) in places {
        if let (Some(&stride), Some(slot)) = (l.strides.get(from), strides.get_mut(to)) {
            *slot = stride;
        }
    }
    Layout::new(l.offset, strides, l.len)
}

/// Where each iterator of the pointwise step `inner` sits among the
/// outer iterators (of sizes `sizes`) when the outer step, reading
/// `inner`'s result through `read`, visits every element of it exactly
/// once and nowhere else: each outer iterator that moves (size above 1)
/// moves along one inner iterator of the same size and stride, and every
/// inner iterator that moves is one of them. `None` otherwise: fusing a
/// producer whose elements are read several times (a contraction's
/// operand) would compute them several times.
fn read_once(read: &Layout, sizes: &[u64], inner: &Step) -> Option<Vec<Option<usize>>> {
    let written = &inner.launch.result;
    if read.offset != written.offset || read.len != written.len {
        return None;
    }
    let mut at = vec![None; inner.launch.sizes.len()];
    let mut matched = 0;
    for (o, (&size, &stride)) in sizes.iter().zip(&read.strides).enumerate() {
        if size <= 1 {
            continue;
        }
        let k = (0..at.len()).find(|&k| {
            at[k].is_none()
                && inner.launch.sizes[k] == size
                && written.strides.get(k) == Some(&stride)
        })?;
        at[k] = Some(o);
        matched += 1;
    }
    let moving = inner.launch.sizes.iter().filter(|&&n| n > 1).count();
    (matched == moving).then_some(at)
}

/// Fuses pointwise steps into the reductions they read, in place: when a
/// one-step pointwise operation (after [`fuse_pointwise`]) reads the
/// result of a one-step reduction (a contraction, a sum) that nothing else
/// reads and that is not an output, over the reduction's parallel loop
/// and exactly where the reduction writes it, the reduction's kernel
/// takes the pointwise body as its epilogue ([`Kernel::epilogue`]) and
/// writes the pointwise result; the intermediate is never written.
///
/// The values are the same: the epilogue computes, from the same
/// accumulated `f32`, what the pointwise kernel computed from it after a
/// round trip through memory.
fn fuse_epilogues(
    graph: &crate::Graph,
    order: &[OpId],
    lowered: &mut [Option<Lowered>],
    outputs: &HashSet<TensorId>,
) {
    let (position, readers) = fusion_index(graph, order, lowered);
    for c in 0..order.len() {
        let Some((_, c_operands, _)) = graph.op(order[c]) else {
            continue;
        };
        let Some([step]) = lowered[c].as_ref().map(|l| l.steps.as_slice()) else {
            continue;
        };
        let fused = (0..step.operands.len()).find_map(|j| {
            let t = match step.operands[j] {
                BufferRef::Operand(i) => c_operands.get(i).copied(),
                BufferRef::Tensor(t) => Some(t),
                _ => None,
            }?;
            if outputs.contains(&t) || readers.get(&t) != Some(&1) {
                return None;
            }
            let p = position
                .get(&graph.producer(t)?)
                .copied()
                .filter(|&p| p < c)?;
            let (_, p_operands, _) = graph.op(order[p])?;
            let [inner] = lowered[p].as_ref()?.steps.as_slice() else {
                return None;
            };
            epilogue_step(inner, p_operands, step, j, c_operands).map(|s| (p, s))
        });
        if let Some((p, s)) = fused {
            lowered[p] = None;
            if let Some(l) = lowered[c].as_mut() {
                l.steps = vec![s];
            }
        }
    }
}

/// `inner` (a reduction) with `outer`'s body as its epilogue, where
/// `outer` reads `inner`'s result as its operand `j`; `None` when they
/// cannot be fused.
fn epilogue_step(
    inner: &Step,
    inner_operands: &[TensorId],
    outer: &Step,
    j: usize,
    outer_operands: &[TensorId],
) -> Option<Step> {
    use shape_core::kernel::{Accumulate, IterKind};
    let refused = |s: &Step| s.launch.races == shape_core::Races::Refused;
    let buffers_ok = |s: &Step| {
        s.result == BufferRef::Result
            && s.operands
                .iter()
                .all(|r| !matches!(r, BufferRef::Scratch(_) | BufferRef::Result))
    };
    let reduces = inner.kernel.iterators.contains(&IterKind::Reduction)
        && inner.kernel.accumulate != Accumulate::Assign
        && inner.kernel.epilogue.is_none();
    let pointwise = outer.kernel.accumulate == Accumulate::Assign
        && outer.kernel.epilogue.is_none()
        && outer
            .kernel
            .iterators
            .iter()
            .all(|k| *k == IterKind::Parallel);
    let fusable = reduces && pointwise && refused(inner) && refused(outer);
    if !fusable || !buffers_ok(inner) || !buffers_ok(outer) {
        return None;
    }
    // The outer loop must be the inner one's parallel iterators, in order,
    // and read the intermediate where the inner kernel writes it.
    let parallel = inner.kernel.iterators_of(IterKind::Parallel);
    let on_parallel = |l: &Layout| -> Vec<u64> { parallel.iter().map(|&k| l.strides[k]).collect() };
    let sizes: Vec<u64> = parallel.iter().map(|&k| inner.launch.sizes[k]).collect();
    let read = outer.launch.operands.get(j)?;
    let written = &inner.launch.result;
    let same_loop = sizes == outer.launch.sizes
        && read.offset == written.offset
        && read.len == written.len
        && read.strides == on_parallel(written);
    let count = inner.operands.len() + outer.operands.len() - 1;
    let small = expr_nodes(&inner.kernel.body) + expr_nodes(&outer.kernel.body) <= FUSED_NODES;
    if !(same_loop && small && count <= FUSED_OPERANDS) {
        return None;
    }
    // Outer layouts over the inner iterators: 0 along the reductions.
    let widen = |l: &Layout| {
        let places = parallel.iter().enumerate().map(|(i, &k)| (i, k));
        relaid(l, inner.kernel.iterators.len(), places)
    };
    let n = inner.operands.len();
    let mut refs = Vec::with_capacity(count);
    let mut layouts = Vec::with_capacity(count);
    for (r, l) in inner.operands.iter().zip(&inner.launch.operands) {
        refs.push(by_name(r, inner_operands)?);
        layouts.push(l.clone());
    }
    for (k, (r, l)) in outer
        .operands
        .iter()
        .zip(&outer.launch.operands)
        .enumerate()
    {
        if k != j {
            refs.push(by_name(r, outer_operands)?);
            layouts.push(widen(l));
        }
    }
    let epilogue = outer.kernel.body.map_loads(&|k| match k.cmp(&j) {
        std::cmp::Ordering::Less => Expr::Load(n + k),
        std::cmp::Ordering::Equal => Expr::Accumulated,
        std::cmp::Ordering::Greater => Expr::Load(n + k - 1),
    });
    Some(Step {
        kernel: Kernel::new(
            inner.kernel.iterators.clone(),
            count,
            inner.kernel.body.clone(),
            inner.kernel.accumulate,
        )
        .with_epilogue(epilogue),
        launch: Launch::new(
            inner.launch.sizes.clone(),
            widen(&outer.launch.result),
            layouts,
        ),
        result: BufferRef::Result,
        operands: refs,
    })
}

/// A buffer length as a `usize`; lengths past it fail allocation.
fn to_usize(len: u64) -> usize {
    usize::try_from(len).unwrap_or(usize::MAX)
}
