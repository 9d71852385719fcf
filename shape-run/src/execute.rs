//! Following a plan on a backend: data in, kernels launched step by
//! step with buffers from the pool, ragged operations lowered row by row,
//! results out.

use std::collections::HashMap;

use shape_core::{Backend, RaggedAxis};
use shape_graph::{BufferRef, GraphError, SolvedGraph, TensorId, TensorKind};

use crate::error::RunError;
use crate::host::{HostTensor, Inputs, RunOutputs};
use crate::options::RunOptions;
use crate::plan::{PlannedOp, RunPlan};
use crate::pool::Pool;

/// [`RunGraph::run`](crate::RunGraph::run).
pub(crate) fn run<B: Backend>(
    solved: &SolvedGraph,
    backend: &mut B,
    inputs: Inputs,
    outputs: &[TensorId],
    options: &RunOptions,
) -> Result<RunOutputs, RunError<B::Error>> {
    if solved.needs_binding() {
        // Run-time sizes take their values from the data.
        let bound = crate::bind::bind_inputs(solved, &inputs, &[])?;
        return run(&bound, backend, inputs, outputs, options);
    }
    let plan = crate::plan::plan(solved, outputs, options)?;
    run_plan(solved, backend, &plan, inputs)
}

/// Checks that `inputs` gives exactly what `plan` reads, with the
/// right dims.
fn check_inputs<E: std::error::Error + 'static>(
    solved: &SolvedGraph,
    plan: &RunPlan,
    inputs: &Inputs,
) -> Result<(), RunError<E>> {
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
                shape: shape.clone(),
            });
        };
        let dims = shape.memory_dims();
        let fits = match solved.ragged_axis(t)? {
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
    solved: &SolvedGraph,
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
                    op: solved.graph().op_ref(planned.op)?,
                    source: e,
                });
            }
        }
    }
    Ok(())
}

/// Runs a plan made by [`SolvedGraph::plan`] for this graph.
pub(crate) fn run_plan<B: Backend>(
    solved: &SolvedGraph,
    backend: &mut B,
    plan: &RunPlan,
    mut inputs: Inputs,
) -> Result<RunOutputs, RunError<B::Error>> {
    check_inputs(solved, plan, &inputs)?;
    check_empty_reductions(solved, plan)?;
    let graph = solved.graph();
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
        let axis = solved.ragged_axis(t)?;
        if let (Some(axis), Some(data)) = (axis, axis.and_then(|_| given.take())) {
            let data = data
                .into_ragged(axis)
                .map_err(|e| GraphError::RaggedLayout {
                    tensor: graph.tensor_ref(t).ok().map(Box::new),
                    shape: solved.shape(t).map(|s| s.to_string()).unwrap_or_default(),
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
            let r = solved.lower_ragged(planned.op, &operand_rows, &plan.options.lowering())?;
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
                BufferRef::Scratch(i) => scratch
                    .get_mut(i)
                    .ok_or_else(|| invalid(index, "writes a scratch buffer it does not declare"))?,
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
            let reads = reads.ok_or_else(|| invalid(index, "reads a buffer it does not have"))?;
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
        let data = backend.take(buffer).map_err(moving(backend))?;
        let dims = solved.shape(t)?.memory_dims();
        let tensor = match rows.remove(&t) {
            Some(r) => HostTensor::ragged(
                dims[..r.axis()].to_vec(),
                &r.lengths(),
                dims[r.axis() + 1..].to_vec(),
                data,
            )
            .map_err(|e| GraphError::RaggedLayout {
                tensor: graph.tensor_ref(t).ok().map(Box::new),
                shape: solved.shape(t).map(|s| s.to_string()).unwrap_or_default(),
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

/// A buffer length as a `usize`; lengths past it fail allocation.
fn to_usize(len: u64) -> usize {
    usize::try_from(len).unwrap_or(usize::MAX)
}
