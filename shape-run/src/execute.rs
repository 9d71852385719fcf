//! Following a plan on a backend: data in, kernels launched step by
//! step with buffers from the pool, ragged operations lowered row by row,
//! results out.

use std::collections::{HashMap, HashSet};

use shape_core::{Backend, RaggedAxis};
use std::sync::Arc;

use shape_graph::{BufferRef, GraphError, Lowered, OpId, SolvedGraph, Step, TensorId, TensorKind};
use shape_solver::OpRef;

use crate::error::{BackendFailure, RunError};
use crate::host::{HostTensor, Inputs, RunInputs, RunOutputs};
use crate::options::RunOptions;
use crate::plan::{PlannedOp, RunPlan};
use crate::pool::Pool;

/// [`RunGraph::run`](crate::RunGraph::run).
pub(crate) fn run<B: Backend>(
    solved: &SolvedGraph,
    backend: &mut B,
    inputs: RunInputs<'_>,
    outputs: &[TensorId],
    options: &RunOptions,
) -> Result<RunOutputs, RunError> {
    if solved.needs_binding() {
        // Run-time sizes take their values from the data.
        let bound = crate::bind::bind_inputs(solved, inputs.inputs(), &[])?;
        return run(&bound, backend, inputs, outputs, options);
    }
    let plan = crate::plan::plan(solved, outputs, options)?;
    run_plan(solved, backend, &plan, inputs)
}

/// Checks that `inputs` gives exactly what `plan` reads, with the
/// right dims.
fn check_inputs(solved: &SolvedGraph, plan: &RunPlan, inputs: &Inputs) -> Result<(), RunError> {
    let graph = solved.graph();
    for t in inputs.tensors() {
        if let TensorKind::Result(_) = graph.kind(t)? {
            return Err(RunError::NotALeaf {
                tensor: graph.tensor_ref(t)?,
            });
        }
    }
    for &t in &plan.leaves {
        let shape = solved.shape(t)?;
        let tensor = || graph.tensor_ref(t);
        let Some(given) = inputs.get(t) else {
            return Err(RunError::MissingData {
                tensor: tensor()?,
                kind: graph.kind(t)?,
                shape: Box::new(shape.clone()),
            });
        };
        let dims = shape.memory_dims();
        let axes = solved.ragged_axes(t)?;
        let fits = if axes.is_empty() {
            given.ragged.is_none() && given.dims() == dims
        } else {
            // Ragged data along those axes, or dense data of any length
            // there; the other dims as the shape has them.
            given.dims().len() == dims.len()
                && (given.dims().iter().zip(&dims).enumerate())
                    .all(|(j, (g, d))| axes.contains(&j) || g == d)
                && given.ragged.as_ref().is_none_or(|r| r.axes() == axes)
        };
        if !fits {
            return Err(RunError::DataShape {
                tensor: tensor()?,
                shape: Box::new(shape.clone()),
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
fn check_empty_reductions(solved: &SolvedGraph, plan: &RunPlan) -> Result<(), RunError> {
    let mut dense: Vec<&PlannedOp> = plan.ops.iter().filter(|p| !p.ragged).collect();
    dense.sort_by_key(|p| p.op.index());
    for planned in dense {
        for step in &planned.lowered.steps {
            if let Err(e @ shape_core::kernel::LaunchError::EmptyReduction { .. }) =
                step.launch.empty_reduction(&step.kernel)
            {
                return Err(RunError::EmptyReduction {
                    op: solved.graph().op_ref(planned.op)?,
                    source: e,
                });
            }
        }
    }
    Ok(())
}

/// [`RunGraph::run_plan`](crate::RunGraph::run_plan): checks the data,
/// uploads it, runs each planned operation, and takes the outputs back.
pub(crate) fn run_plan<B: Backend>(
    solved: &SolvedGraph,
    backend: &mut B,
    plan: &RunPlan,
    inputs: RunInputs<'_>,
) -> Result<RunOutputs, RunError> {
    check_inputs(solved, plan, inputs.inputs())?;
    check_empty_reductions(solved, plan)?;
    let mut run = Execution {
        solved,
        backend,
        buffers: HashMap::with_capacity(plan.leaves.len()),
        views: HashMap::new(),
        rows: HashMap::new(),
        pool: Pool::new(),
    };
    run.upload_leaves(plan, inputs)?;
    for planned in &plan.ops {
        run.run_op(plan, planned)?;
    }
    run.take_outputs(plan)
}

/// The kernels of a planned ragged operation and of the ragged
/// operations of its group ([`PlannedOp::fused`]), each lowered for the
/// rows its operands have ([`SolvedGraph::lower_ragged`], recording each
/// result's rows in `rows`), then fused as a dense chain is fused (step by
/// step, for operations lowered a launch per run of rows) unless the plan
/// is unfused. What is left to run, in order: each operation with its
/// kernels and its result's length.
pub(crate) fn lower_group(
    solved: &SolvedGraph,
    plan: &RunPlan,
    planned: &PlannedOp,
    rows: &mut HashMap<TensorId, RaggedAxis>,
    row_tables: bool,
) -> Result<Vec<(OpId, Lowered, u64)>, RunError> {
    let options = plan.options.lowering().with_row_tables(row_tables);
    let graph = solved.graph();
    let members: Vec<OpId> = planned
        .fused
        .iter()
        .copied()
        .chain(std::iter::once(planned.op))
        .collect();
    let mut lowered = Vec::with_capacity(members.len());
    let mut lens = Vec::with_capacity(members.len());
    for &op in &members {
        let (_, operands, result) = graph.op(op).ok_or(GraphError::UnknownOp(op.index()))?;
        let operand_rows: Vec<Option<&RaggedAxis>> = operands.iter().map(|t| rows.get(t)).collect();
        let r = solved.lower_ragged(op, &operand_rows, &options)?;
        if let Some(axis) = r.result_rows {
            rows.insert(result, axis);
        }
        lowered.push(Some(r.lowered));
        lens.push(r.result_len);
    }
    if !plan.options.unfused && members.len() > 1 {
        // A member over a row table fuses only with members over row
        // tables: those lowered as one launch over the rows laid end to
        // end are lowered again over a table where their rows allow one.
        let over_table = |l: &Lowered| matches!(l.steps.as_slice(), [s] if s.launch.rows.is_some());
        if lowered.iter().flatten().any(over_table) {
            let tables = options.clone().with_tables_over_flat(true);
            for (i, &op) in members.iter().enumerate() {
                if lowered[i].as_ref().is_some_and(|l| !over_table(l)) {
                    let (_, operands, _) = graph.op(op).ok_or(GraphError::UnknownOp(op.index()))?;
                    let operand_rows: Vec<Option<&RaggedAxis>> =
                        operands.iter().map(|t| rows.get(t)).collect();
                    let again = solved.lower_ragged(op, &operand_rows, &tables)?;
                    if over_table(&again.lowered) {
                        lowered[i] = Some(again.lowered);
                    }
                }
            }
        }
        let outputs = &plan.output_set;
        let none = HashSet::new();
        crate::fusion::fuse_pointwise(graph, &members, &mut lowered, outputs, &none, true);
        crate::fusion::fuse_epilogues(graph, &members, &mut lowered, outputs, &none);
    }
    Ok(members
        .into_iter()
        .zip(lowered)
        .zip(lens)
        .filter_map(|((op, l), len)| l.map(|l| (op, l, len)))
        .collect())
}

/// A run in progress: the buffers of the tensors computed or given so
/// far, the rows of the ragged ones, and the free buffers.
struct Execution<'a, B: Backend> {
    solved: &'a SolvedGraph,
    backend: &'a mut B,
    buffers: HashMap<TensorId, B::Buffer>,
    /// The strided inputs uploaded as they are, and how their values lie
    /// in their buffers: the steps that read them read through these.
    views: HashMap<TensorId, crate::strided::View>,
    /// The rows of every ragged tensor, as the data gives them.
    rows: HashMap<TensorId, RaggedAxis>,
    pool: Pool<B::Buffer>,
}

impl<B: Backend> Execution<'_, B> {
    /// The error for a failed upload or download.
    fn moving(&self) -> impl Fn(B::Error) -> RunError {
        let name = self.backend.name();
        move |source| RunError::Backend {
            backend: name.clone(),
            op: None,
            source: BackendFailure::new(source),
        }
    }

    /// Hands the data of the plan's leaves to the backend (ragged data
    /// with its rows), and frees at once the buffers no step reads.
    fn upload_leaves(&mut self, plan: &RunPlan, mut inputs: RunInputs<'_>) -> Result<(), RunError> {
        let (solved, graph) = (self.solved, self.solved.graph());
        for &t in &plan.leaves {
            let mut given = inputs.take(t);
            let axes = solved.ragged_axes(t)?;
            if let (false, Some(data)) = (axes.is_empty(), given.take_if(|_| !axes.is_empty())) {
                let data = data
                    .into_ragged(&axes)
                    .map_err(|e| GraphError::RaggedLayout {
                        tensor: graph.tensor_ref(t).ok().map(Box::new),
                        shape: solved.shape(t).map(|s| s.to_string()).unwrap_or_default(),
                        reason: e.to_string(),
                    })?;
                self.rows.extend(data.ragged.clone().map(|r| (t, r)));
                given = Some(data);
            }
            if let Some(data) = given.take() {
                given = Some(self.in_place_or_contiguous(plan, t, data)?);
            }
            let values = given.map(HostTensor::into_values).unwrap_or_default();
            let buffer = self.backend.upload_owned(values).map_err(self.moving())?;
            self.buffers.insert(t, buffer);
        }
        drop(inputs);
        for &t in &plan.leaf_releases {
            if let Some(b) = self.buffers.remove(&t) {
                let len = self.backend.len(&b);
                self.pool.put(len, b);
            }
        }
        Ok(())
    }

    /// A leaf's data to upload: as it is, when it is in C order or every
    /// step that reads it can read it in place (its view then goes into
    /// `views`); otherwise copied into C order (an input that a ragged
    /// operation or a call reads, or that a kernel reads as a flat buffer).
    fn in_place_or_contiguous(
        &mut self,
        plan: &RunPlan,
        t: TensorId,
        data: HostTensor,
    ) -> Result<HostTensor, RunError> {
        if data.is_c_contiguous() {
            return Ok(data);
        }
        let graph = self.solved.graph();
        let view = crate::strided::View::of(&data);
        let in_place = crate::strided::read_in_place(self.solved, plan, t, &view)?;
        if in_place {
            self.views.insert(t, view);
            return Ok(data);
        }
        let tensor = graph.tensor_ref(t)?;
        data.into_contiguous()
            .map_err(|source| RunError::Data { tensor, source })
    }

    /// Runs one planned operation: its kernels (lowered now, row by row,
    /// for a ragged one, with the ragged operations of its group, fused
    /// where they can be), then frees what it read last.
    fn run_op(&mut self, plan: &RunPlan, planned: &PlannedOp) -> Result<(), RunError> {
        if planned.ragged {
            let row_tables = self.backend.runs_row_tables();
            let group = lower_group(self.solved, plan, planned, &mut self.rows, row_tables)?;
            for (op, lowered, result_len) in &group {
                self.run_lowered(*op, lowered, *result_len)?;
            }
            for (_, lowered, _) in group {
                crate::fusion::recycle_tables(lowered.steps);
            }
        } else {
            self.run_lowered(planned.op, &planned.lowered, planned.result_len)?;
        }
        for t in &planned.releases {
            if let Some(b) = self.buffers.remove(t) {
                let len = self.backend.len(&b);
                self.pool.put(len, b);
            }
        }
        Ok(())
    }

    /// Runs the kernels `lowered` of operation `op` into a result buffer
    /// of `result_len` values and scratch buffers from the pool.
    fn run_lowered(
        &mut self,
        op: OpId,
        lowered: &Lowered,
        result_len: u64,
    ) -> Result<(), RunError> {
        let graph = self.solved.graph();
        let op_ref = graph.op_ref(op)?;
        let (_, operands, result) = graph.op(op).ok_or(GraphError::UnknownOp(op.index()))?;
        let op = op_ref;
        let clear = !lowered.covers_result(result_len);
        let mut held = Held {
            out: Some(self.acquire(result_len, clear, &op)?),
            scratch: Vec::with_capacity(lowered.scratch.len()),
        };
        for &len in &lowered.scratch {
            held.scratch.push(Some(self.acquire(len, true, &op)?));
        }
        for (index, step) in lowered.steps.iter().enumerate() {
            held.run_step(
                &mut *self.backend,
                Tensors {
                    buffers: &self.buffers,
                    views: &self.views,
                },
                operands,
                &op,
                index,
                step,
            )?;
        }
        for (b, &len) in held.scratch.into_iter().zip(&lowered.scratch) {
            if let Some(b) = b {
                self.pool.put(len, b);
            }
        }
        let out =
            (held.out).ok_or_else(|| invalid(&op, lowered.steps.len(), "loses the result"))?;
        self.buffers.insert(result, out);
        Ok(())
    }

    /// A buffer of `len` values: a free one of that length (filled with
    /// zeros when `clear`), or a new one.
    fn acquire(&mut self, len: u64, clear: bool, op: &Arc<OpRef>) -> Result<B::Buffer, RunError> {
        let failed = backend_failed(&*self.backend, op);
        match self.pool.take(len) {
            Some(mut b) => {
                if clear {
                    self.backend.fill(&mut b, 0.0).map_err(failed)?;
                }
                Ok(b)
            }
            None => self.backend.alloc(to_usize(len)).map_err(failed),
        }
    }

    /// Takes the outputs' values back from the backend, with their dims
    /// (and rows, for a ragged output).
    fn take_outputs(mut self, plan: &RunPlan) -> Result<RunOutputs, RunError> {
        let (solved, graph) = (self.solved, self.solved.graph());
        let (backend, buffers, rows) = (&mut *self.backend, &mut self.buffers, &mut self.rows);
        // The free buffers go back before the outputs come down.
        drop(std::mem::replace(&mut self.pool, Pool::new()));
        let mut values = HashMap::with_capacity(plan.outputs.len());
        let backend_name = backend.name();
        for &t in &plan.outputs {
            let lost = |found: usize| -> Result<RunError, GraphError> {
                let shape = Box::new(solved.shape(t)?.clone());
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
            let data = backend.take(buffer).map_err(|source| RunError::Backend {
                backend: backend.name(),
                op: None,
                source: BackendFailure::new(source),
            })?;
            let dims = solved.shape(t)?.memory_dims();
            let tensor = match rows.remove(&t) {
                Some(r) => {
                    HostTensor::with_rows(dims, r, data).map_err(|e| GraphError::RaggedLayout {
                        tensor: graph.tensor_ref(t).ok().map(Box::new),
                        shape: solved.shape(t).map(|s| s.to_string()).unwrap_or_default(),
                        reason: format!("the values returned do not fill its rows: {e}"),
                    })?
                }
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

/// The tensors' buffers a step may read, and the views of the strided
/// inputs among them.
struct Tensors<'a, Buf> {
    buffers: &'a HashMap<TensorId, Buf>,
    views: &'a HashMap<TensorId, crate::strided::View>,
}

/// The buffers one operation writes: its result and its scratch
/// buffers (a slot is empty while a step writes it).
struct Held<Buf> {
    out: Option<Buf>,
    scratch: Vec<Option<Buf>>,
}

impl<Buf> Held<Buf> {
    /// Runs step `index` of the operation `op`, reading `operands`'
    /// buffers from `buffers` and its own.
    fn run_step<B: Backend<Buffer = Buf>>(
        &mut self,
        backend: &mut B,
        Tensors { buffers, views }: Tensors<'_, Buf>,
        operands: &[TensorId],
        op: &Arc<OpRef>,
        index: usize,
        step: &Step,
    ) -> Result<(), RunError> {
        if step.operands.contains(&step.result) {
            return Err(invalid(op, index, "reads the buffer it writes"));
        }
        // The written buffer leaves its slot while the step runs, so that
        // the buffers it reads can be borrowed beside it.
        let slot = match step.result {
            BufferRef::Result => &mut self.out,
            BufferRef::Scratch(i) => self
                .scratch
                .get_mut(i)
                .ok_or_else(|| invalid(op, index, "writes a scratch buffer it does not declare"))?,
            BufferRef::Operand(_) | BufferRef::Tensor(_) => {
                return Err(invalid(op, index, "writes an operand"))
            }
        };
        let mut target = slot
            .take()
            .ok_or_else(|| invalid(op, index, "writes a buffer it does not have"))?;
        let reads: Option<Vec<&Buf>> = step
            .operands
            .iter()
            .map(|r| match *r {
                BufferRef::Result => self.out.as_ref(),
                BufferRef::Operand(i) => operands.get(i).and_then(|t| buffers.get(t)),
                BufferRef::Tensor(t) => buffers.get(&t),
                BufferRef::Scratch(i) => self.scratch.get(i).and_then(Option::as_ref),
            })
            .collect();
        let reads = reads.ok_or_else(|| invalid(op, index, "reads a buffer it does not have"))?;
        let failed = backend_failed(&*backend, op);
        match &step.call {
            Some(call) => backend
                .run_call_step(call.step(), &mut target, &reads)
                .map_err(|e| match e {
                    shape_core::CallFailure::Backend(e) => failed(e),
                    shape_core::CallFailure::Call(source) => RunError::Call {
                        op: op.clone(),
                        source,
                    },
                })?,
            None => {
                // Strided inputs through their own strides (the upload
                // checked that every step can read them so).
                let strided = if views.is_empty() {
                    None
                } else {
                    crate::strided::strided_launch(step, operands, views)
                        .map_err(|_| invalid(op, index, "reads a strided input it cannot"))?
                };
                let launch = strided.as_ref().unwrap_or(&step.launch);
                backend
                    .execute(&step.kernel, launch, &mut target, &reads)
                    .map_err(failed)?
            }
        }
        match step.result {
            BufferRef::Scratch(i) => self.scratch[i] = Some(target),
            BufferRef::Result | BufferRef::Operand(_) | BufferRef::Tensor(_) => {
                self.out = Some(target)
            }
        }
        Ok(())
    }
}

/// The error for a backend that fails while running `op`.
fn backend_failed<B: Backend>(backend: &B, op: &Arc<OpRef>) -> impl FnOnce(B::Error) -> RunError {
    let (name, op) = (backend.name(), op.clone());
    move |source| RunError::Backend {
        backend: name,
        op: Some(op),
        source: BackendFailure::new(source),
    }
}

/// The error for a lowering of `op` whose step `step` asks for something
/// the runner cannot do: a defect of that operation.
fn invalid(op: &Arc<OpRef>, step: usize, problem: &'static str) -> RunError {
    RunError::InvalidLowering {
        op: op.clone(),
        step,
        problem,
    }
}

/// A buffer length as a `usize`; lengths past it fail allocation.
fn to_usize(len: u64) -> usize {
    usize::try_from(len).unwrap_or(usize::MAX)
}
