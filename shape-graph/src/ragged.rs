//! Ragged (`var`) axes at run time, as DyND's var dims: the data's rows,
//! and operations lowered row by row.
//!
//! A ragged axis's length differs from one position of the axes before it
//! (in memory order: its *rows*) to the next. Its data is stored as the
//! values of every row one after another, with the offset where each row
//! starts ([`RaggedAxis`]). Inference keeps `var` as a size of its own
//! (`shape_core::Size::Ragged`); the lengths exist only once data is
//! given, so an operation that touches a ragged tensor is lowered when
//! the graph runs, once per row: each row is an ordinary launch of the
//! operation's own kernel, with that row's lengths as sizes and its start
//! as offset (DyND's "var to strided" kernel, one level of its hierarchy).
//! Rows of the same lengths share one lowering.
//!
//! Broadcasting is checked row by row, as DyND checks it when it runs: a
//! row of length 1 broadcasts (it is read at 0), a row of the length it
//! meets is read in step, and any other length is
//! [`GraphError::RaggedRow`], naming the operation, the tensor, the row
//! and both lengths. A launch never reads or writes outside its row.

use std::collections::HashMap;

use shape_core::kernel::{Accumulate, IterKind, Layout, RowTable};
use shape_core::{buffer_len, element_count, KnownDim, RaggedAxis, RowKind, SolvedShape};

use crate::graph::{GraphError, OpId, SolvedGraph};
use crate::lowering::{layout_of, BufferRef, LowerOptions, Lowered, LoweringCx, Step};
use crate::projections::{AxisIndex, ProjectionBuilder, Projections};

/// The memory-order position of a solved shape's ragged axis, if it has
/// one; more than one, or one with no axis before it, is refused.
pub(crate) fn ragged_position(
    graph: &SolvedGraph,
    t: crate::TensorId,
) -> Result<Option<usize>, GraphError> {
    let shape = graph.shape(t)?;
    let mut found = None;
    let mut j = 0;
    for kind in RowKind::MEMORY_ORDER {
        for d in shape.row(kind) {
            if d.is_ragged() {
                let refuse = |reason: &str| GraphError::RaggedLayout {
                    tensor: graph.graph().tensor_ref(t).map(Box::new).ok(),
                    shape: shape.to_string(),
                    reason: reason.to_string(),
                };
                if found.is_some() {
                    return Err(refuse(
                        "it has more than one ragged axis; one per tensor is supported",
                    ));
                }
                found = Some(j);
            }
            j += 1;
        }
    }
    Ok(found)
}

/// What running a ragged operation takes
/// ([`SolvedGraph::lower_ragged`]): its per-row steps, the length of its
/// result's buffer and, for a ragged result, its rows.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct RaggedLowered {
    /// The steps, one launch per row (or one over the rows laid end to
    /// end where that is the same computation).
    pub lowered: Lowered,
    /// The number of values of the result's buffer.
    pub result_len: u64,
    /// The rows of the result, when it is ragged.
    pub result_rows: Option<RaggedAxis>,
}

/// One tensor of a ragged operation.
struct Tensor<'a> {
    shape: &'a SolvedShape,
    dims: Vec<u64>,
    /// The ragged axis (memory order) and the rows of the data.
    ragged: Option<(usize, Option<&'a RaggedAxis>)>,
    /// Values in its buffer.
    len: u64,
}

impl Tensor<'_> {
    /// The values of one position of the ragged axis (saturating: a
    /// length past 2^64 fails allocation clearly).
    fn inner(&self, var: usize) -> u64 {
        buffer_len(&self.dims[var + 1..])
    }
}

/// A ragged operation being lowered: the operation and its tensors, the
/// result first.
struct RaggedOp<'a> {
    op: OpId,
    operation: &'a std::sync::Arc<dyn crate::Operation>,
    op_ref: std::sync::Arc<shape_solver::OpRef>,
    tensors: Vec<Tensor<'a>>,
}

impl RaggedOp<'_> {
    /// The error for what a ragged run does not take, naming the
    /// operation.
    fn unsupported(&self, reason: String) -> GraphError {
        GraphError::RaggedLowering {
            op: self.op_ref.clone(),
            reason,
        }
    }

    /// The result's rows, in its own order, from every point's lengths
    /// (and the result's buffer length from them); `None` for a dense
    /// result.
    fn result_rows(
        &mut self,
        loops: &RowLoops,
        lengths: &[u64],
    ) -> Result<Option<RaggedAxis>, GraphError> {
        Ok(match self.tensors[0].ragged {
            Some((var, _)) => {
                let rows = buffer_len(&self.tensors[0].dims[..var]);
                let mut row_len: Vec<u64> = Vec::new();
                row_len
                    .try_reserve_exact(usize::try_from(rows).unwrap_or(usize::MAX))
                    .map_err(|_| {
                        self.unsupported("its result has more rows than fit in memory".into())
                    })?;
                row_len.resize(rows as usize, 0);
                let mut point = vec![0u64; loops.row_iters.len()];
                for ls in lengths.chunks(self.tensors.len()) {
                    row_len[loops.row_of(0, &point)] = ls[0];
                    advance(&mut point, &loops.row_sizes);
                }
                let axis = RaggedAxis::from_lengths(var, &row_len)
                    .map_err(|e| self.unsupported(e.to_string()))?;
                self.tensors[0].len = axis.total().saturating_mul(self.tensors[0].inner(var));
                Some(axis)
            }
            None => None,
        })
    }
}

/// The loops of a ragged operation: its projections with every ragged
/// axis as a placeholder size, the classes of its ragged axes, and which
/// iterators run over the rows and along the ragged axes.
struct RowLoops {
    structure: Projections,
    classes: Vec<VarClass>,
    /// The parallel iterators before a ragged axis: one point of them is
    /// one row of every ragged tensor.
    row_iters: Vec<usize>,
    /// The iterators along the ragged axes.
    var_iters: Vec<usize>,
    /// The sizes of `row_iters`.
    row_sizes: Vec<u64>,
    /// Per tensor (0: the result), its row number (flat, over the axes
    /// before its ragged axis) at a point of the row iterators, as a sum:
    /// a constant (fixed indices), and each row iterator's position in
    /// the point with its multiplier (the row-major weight of its axis).
    row_index: Vec<(u64, Vec<(usize, u64)>)>,
}

impl RowLoops {
    /// The loops of `r`, or an error for a structure a ragged run does
    /// not take (a reduction over the rows, a ragged axis moved before
    /// the axes its rows depend on).
    fn of(r: &RaggedOp<'_>) -> Result<RowLoops, GraphError> {
        let tensors = &r.tensors;
        // The structure: every ragged axis as a placeholder size above 1,
        // so that the operation's own projections say which iterators the
        // rows and the ragged axes are.
        let placeholder: Vec<SolvedShape> =
            tensors.iter().map(|t| with_ragged_as(t.shape, 2)).collect();
        let (structure, slot_classes) = {
            let mut builder = ProjectionBuilder::new(placeholder.iter().collect());
            r.operation.project(&mut builder);
            builder.finish_with_classes()
        };
        let classes = VarClass::of(tensors, &slot_classes);
        let mut row_iters: Vec<usize> = Vec::new();
        let mut var_iters: Vec<usize> = Vec::new();
        for (t, tensor) in tensors.iter().enumerate() {
            let Some((var, _)) = tensor.ragged else {
                continue;
            };
            let axes = axes_of(&structure, t);
            for a in &axes[..var] {
                match a {
                    AxisIndex::Iterator(k) if structure.kinds[*k] == IterKind::Parallel => {
                        row_iters.push(*k)
                    }
                    AxisIndex::Fixed(_) => {}
                    _ => {
                        return Err(r.unsupported(
                            "it reduces, slices or slides over an axis before a ragged axis".into(),
                        ))
                    }
                }
            }
            match axes[var] {
                AxisIndex::Iterator(k) => var_iters.push(k),
                _ => {
                    return Err(
                        r.unsupported("it fixes, slices or slides over a ragged axis".into())
                    )
                }
            }
        }
        row_iters.sort_unstable();
        row_iters.dedup();
        var_iters.sort_unstable();
        var_iters.dedup();
        if var_iters.iter().any(|k| row_iters.contains(k)) {
            return Err(
                r.unsupported("it moves a ragged axis before the axes its rows depend on".into())
            );
        }
        if let Some((var, _)) = tensors[0].ragged {
            let outer: Vec<usize> = structure.result[..var]
                .iter()
                .filter_map(|a| match a {
                    AxisIndex::Iterator(k) => Some(*k),
                    _ => None,
                })
                .collect();
            if row_iters.iter().any(|k| !outer.contains(k)) {
                return Err(r.unsupported(
                    "its ragged result's rows would depend on an axis after its ragged axis".into(),
                ));
            }
        }
        let row_sizes = row_iters.iter().map(|&k| structure.sizes[k]).collect();
        let row_index = tensors
            .iter()
            .enumerate()
            .map(|(t, tensor)| {
                let var = tensor.ragged.map_or(0, |(v, _)| v);
                let (mut base, mut terms) = (0u64, Vec::new());
                let mut mult = 1u64;
                for (j, a) in axes_of(&structure, t)[..var].iter().enumerate().rev() {
                    match a {
                        AxisIndex::Iterator(k) => {
                            if let Some(p) = row_iters.iter().position(|x| x == k) {
                                terms.push((p, mult));
                            }
                        }
                        AxisIndex::Fixed(c) => base = base.wrapping_add(c.wrapping_mul(mult)),
                        _ => {}
                    }
                    mult = mult.wrapping_mul(tensor.dims[j]);
                }
                (base, terms)
            })
            .collect();
        Ok(RowLoops {
            structure,
            classes,
            row_iters,
            var_iters,
            row_sizes,
            row_index,
        })
    }

    /// The row of tensor `t` (0: the result) at `point` of the row
    /// iterators.
    fn row_of(&self, t: usize, point: &[u64]) -> usize {
        let (base, terms) = &self.row_index[t];
        terms
            .iter()
            .fold(*base, |r, &(p, m)| r.wrapping_add(point[p].wrapping_mul(m))) as usize
    }
}

/// The axis indices of tensor `t` (0: the result) in `p`.
fn axes_of(p: &Projections, t: usize) -> &[AxisIndex] {
    if t == 0 {
        &p.result
    } else {
        &p.operands[t - 1]
    }
}

impl SolvedGraph {
    /// Whether the tensor's solved shape has a ragged (`var`) axis.
    pub fn is_ragged(&self, t: crate::TensorId) -> Result<bool, GraphError> {
        Ok(ragged_position(self, t)?.is_some())
    }

    /// The position of the tensor's ragged (`var`) axis among its axes in
    /// memory order (batch, output, input), if it has one; a shape whose
    /// ragged axes cannot be stored as rows is
    /// [`GraphError::RaggedLayout`].
    ///
    /// ```
    /// use shape_graph::Graph;
    /// let mut g = Graph::new();
    /// let x = g.input("x", "3|2, var")?;
    /// let s = g.solve()?;
    /// assert_eq!(s.shape(x)?.to_string(), "3|->2, var");
    /// assert_eq!(s.ragged_axis(x)?, Some(2));
    /// # Ok::<(), shape_graph::GraphError>(())
    /// ```
    pub fn ragged_axis(&self, t: crate::TensorId) -> Result<Option<usize>, GraphError> {
        ragged_position(self, t)
    }

    /// Whether operation `op` touches a ragged tensor (and so is lowered
    /// row by row, with [`SolvedGraph::lower_ragged`], when it runs).
    pub fn op_is_ragged(&self, op: OpId) -> Result<bool, GraphError> {
        let (_, operands, result) = self
            .graph()
            .op_node(op)
            .ok_or(GraphError::UnknownOp(op.index()))?;
        for &t in std::iter::once(&result).chain(operands) {
            if self.is_ragged(t)? {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Lowers `op` row by row for the rows of its ragged operands' data
    /// (`rows[i]` for operand `i`, `None` for a dense one): what a run
    /// does once the data gives the rows.
    ///
    /// The phases: the operation's tensors with their data's rows, its
    /// loops (which iterators run over the rows and along the ragged
    /// axes), every row's lengths (checked as DyND checks broadcasting),
    /// the result's rows, then one launch over the rows laid end to end
    /// where that is the same computation, or a launch per run of rows.
    pub fn lower_ragged(
        &self,
        op: OpId,
        rows: &[Option<&RaggedAxis>],
        options: &LowerOptions,
    ) -> Result<RaggedLowered, GraphError> {
        let mut r = self.ragged_op(op, rows)?;
        let loops = RowLoops::of(&r)?;
        let lengths = self.row_lengths(&r, &loops)?;
        let result_rows = r.result_rows(&loops, &lengths)?;
        let steps = match self.flat_step(&r, &loops, &result_rows, options)? {
            Some(step) => vec![step],
            None => match self.row_table_step(&r, &loops, &lengths, &result_rows, options)? {
                Some(step) => vec![step],
                None => self.row_steps(&r, &loops, &lengths, &result_rows, options)?,
            },
        };
        Ok(RaggedLowered {
            lowered: Lowered {
                scratch: Vec::new(),
                steps,
            },
            result_len: r.tensors[0].len,
            result_rows,
        })
    }

    /// The operation `op` with its tensors, the result first, each with
    /// the rows its data gives (`rows[i]` for operand `i`).
    fn ragged_op<'a>(
        &'a self,
        op: OpId,
        rows: &[Option<&'a RaggedAxis>],
    ) -> Result<RaggedOp<'a>, GraphError> {
        let graph = self.graph();
        let (operation, operands, result) =
            graph.op_node(op).ok_or(GraphError::UnknownOp(op.index()))?;
        let mut r = RaggedOp {
            op,
            operation,
            op_ref: graph.op_ref(op)?,
            tensors: Vec::with_capacity(operands.len() + 1),
        };
        for (t, &id) in std::iter::once(&result).chain(operands).enumerate() {
            let shape = self.shape(id)?;
            let var = ragged_position(self, id)?;
            let data = if t == 0 {
                None
            } else {
                rows.get(t - 1).copied().flatten()
            };
            let mut dims = shape.memory_dims();
            if let Some(v) = var {
                dims[v] = 0;
            }
            let len = match (var, data) {
                (Some(v), Some(r)) => {
                    let inner = buffer_len(&dims[v + 1..]);
                    r.total().saturating_mul(inner)
                }
                (Some(_), None) if t > 0 => {
                    return Err(r.unsupported(format!(
                        "operand {} is ragged but its rows are unknown",
                        t - 1
                    )))
                }
                _ => buffer_len(&dims),
            };
            r.tensors.push(Tensor {
                shape,
                dims,
                ragged: var.map(|v| (v, data)),
                len,
            });
        }
        Ok(r)
    }

    /// The lengths of every row of the operation, checked: for each point
    /// of the row iterators (row-major), every tensor's length there (0
    /// for a dense one), `r.tensors.len()` entries a point.
    fn row_lengths(&self, r: &RaggedOp<'_>, loops: &RowLoops) -> Result<Vec<u64>, GraphError> {
        let tensors = &r.tensors;
        let points = element_count(&loops.row_sizes)
            .and_then(|n| u64::try_from(n).ok())
            .filter(|&n| usize::try_from(n).is_ok())
            .ok_or_else(|| r.unsupported("it has more rows than fit in memory".into()))?;
        let width = tensors.len();
        let mut lengths: Vec<u64> = Vec::new();
        lengths
            .try_reserve_exact((points as usize).saturating_mul(width))
            .map_err(|_| r.unsupported("it has more rows than fit in memory".into()))?;
        let mut point = vec![0u64; loops.row_iters.len()];
        let mut ls = vec![0u64; width];
        for _ in 0..points {
            ls.fill(0);
            for (t, tensor) in tensors.iter().enumerate().skip(1) {
                if let Some((_, Some(data))) = tensor.ragged {
                    let row = loops.row_of(t, &point);
                    if row >= data.rows() {
                        return Err(r.unsupported(format!(
                            "operand {} has {} rows where its shape has more",
                            t - 1,
                            data.rows()
                        )));
                    }
                    ls[t] = data.row_len(row);
                }
            }
            // Each class of axes a ragged axis is in: the length its rows
            // must have, checked for every member.
            for class in &loops.classes {
                let required = class.required(tensors, &ls);
                for &(t, j, tied) in &class.members {
                    let is_var = tensors[t].ragged.is_some_and(|(v, _)| v == j);
                    if t == 0 && is_var {
                        ls[0] = required;
                        continue;
                    }
                    let n = if is_var { ls[t] } else { tensors[t].dims[j] };
                    let fits = n == required || (n == 1 && !tied);
                    if !fits {
                        return Err(self.row_error(r.op, t, j, &point, n, required, is_var));
                    }
                }
            }
            lengths.extend_from_slice(&ls);
            advance(&mut point, &loops.row_sizes);
        }
        Ok(lengths)
    }

    /// One launch per run of rows: one lowering per distinct set of
    /// lengths (a [`RowPlan`]), then a launch per row; consecutive rows of
    /// the same lengths, evenly spaced in every buffer, share one launch
    /// (DyND's coalescing, along the rows).
    fn row_steps(
        &self,
        r: &RaggedOp<'_>,
        loops: &RowLoops,
        lengths: &[u64],
        result_rows: &Option<RaggedAxis>,
        options: &LowerOptions,
    ) -> Result<Vec<Step>, GraphError> {
        let tensors = &r.tensors;
        let (structure, row_iters) = (&loops.structure, &loops.row_iters);
        let width = tensors.len();
        let mut plans: Vec<RowPlan> = Vec::new();
        let mut plan_of: HashMap<Vec<u64>, usize> = HashMap::new();
        let ragged_slots: Vec<usize> = (0..tensors.len())
            .filter(|&t| tensors[t].ragged.is_some())
            .collect();
        let mut runs: Vec<RowRun> = Vec::new();
        let mut key: Vec<u64> = Vec::with_capacity(ragged_slots.len());
        let mut point = vec![0u64; row_iters.len()];
        for ls in lengths.chunks(width) {
            key.clear();
            key.extend(ragged_slots.iter().map(|&t| ls[t]));
            let id = match plan_of.get(&key) {
                Some(&id) => id,
                None => {
                    let Some((step, projections)) = lower_at(r, ls, options)? else {
                        return Err(r.unsupported(
                            "it lowers to more than one kernel (a padded copy, or several steps), which a ragged run does not take yet".into(),
                        ));
                    };
                    let plan = RowPlan::new(step, &projections, structure, tensors, row_iters, ls)
                        .map_err(|(t, var, required)| {
                            self.row_error(r.op, t, var, &point, ls[t], required, true)
                        })?;
                    plans.push(plan);
                    plan_of.insert(key.clone(), plans.len() - 1);
                    plans.len() - 1
                }
            };
            let plan = &plans[id];
            let offsets = plan.offsets(&point, |t, var| {
                let rows = match t {
                    0 => result_rows.as_ref(),
                    _ => tensors[t].ragged.and_then(|(_, data)| data),
                };
                let row = loops.row_of(t, &point);
                rows.map_or(0, |rows| {
                    rows.row_start(row).saturating_mul(tensors[t].inner(var))
                })
            });
            let next_in_run = point.last().is_some_and(|&v| v > 0);
            let joined = match runs.last_mut() {
                Some(run) if next_in_run && plan.innermost.is_some() => run.join(id, &offsets),
                _ => false,
            };
            if !joined {
                runs.push(RowRun {
                    plan: id,
                    offsets,
                    along: None,
                });
            }
            advance(&mut point, &loops.row_sizes);
        }
        Ok(runs.iter().map(|run| plans[run.plan].step(run)).collect())
    }

    /// The whole operation as one launch over a row table
    /// ([`shape_core::kernel::RowTable`]), where the options allow it and
    /// the rows change length: the operation's step lowered once with its
    /// ragged axis at the longest row (at least 2, so that the axis keeps
    /// its iterator), its row iterators pinned as a [`RowPlan`] pins them,
    /// and per row the row's length along that iterator and every
    /// layout's offset, which the backend reads when it runs (an indexed
    /// load). `None` (a launch per run of rows instead) when the rows are
    /// all of one length (one launch already), when the operation's ragged
    /// tensors differ in length at some row (a row of 1 broadcast against
    /// another length), or when an empty row would be an empty maximum,
    /// minimum or assignment (whose error the per-row path gives).
    fn row_table_step(
        &self,
        r: &RaggedOp<'_>,
        loops: &RowLoops,
        lengths: &[u64],
        result_rows: &Option<RaggedAxis>,
        options: &LowerOptions,
    ) -> Result<Option<Step>, GraphError> {
        let tensors = &r.tensors;
        let (structure, row_iters) = (&loops.structure, &loops.row_iters);
        if !options.row_tables || loops.var_iters.len() != 1 || row_iters.is_empty() {
            return Ok(None);
        }
        let width = tensors.len();
        let ragged: Vec<usize> = (0..width)
            .filter(|&t| tensors[t].ragged.is_some())
            .collect();
        let Some(&first) = ragged.first() else {
            return Ok(None);
        };
        // The rows' lengths are the ragged tensors' own: every other axis
        // they meet has one element (a dense size would fix the length,
        // and ragged rows of 1 would broadcast to it).
        let dense_member = loops
            .classes
            .iter()
            .flat_map(|c| &c.members)
            .any(|&(t, j, _)| {
                let is_var = tensors[t].ragged.is_some_and(|(v, _)| v == j);
                !is_var && tensors[t].dims[j] != 1
            });
        if dense_member {
            return Ok(None);
        }
        let mut longest = 0;
        let mut varies = false;
        for ls in lengths.chunks(width) {
            let len = ls[first];
            if ragged.iter().any(|&t| ls[t] != len) {
                return Ok(None);
            }
            varies |= len != lengths[first];
            longest = longest.max(len);
        }
        if !varies {
            return Ok(None);
        }
        // One plan for every row, lowered at the longest length.
        let padded = longest.max(2);
        let ls: Vec<u64> = (0..width)
            .map(|t| {
                if tensors[t].ragged.is_some() {
                    padded
                } else {
                    0
                }
            })
            .collect();
        let Some((step, projections)) = lower_at(r, &ls, options)? else {
            return Ok(None);
        };
        let along = match tensors[first].ragged {
            Some((var, _)) => match axes_of(&projections, first)[var] {
                AxisIndex::Iterator(k) => k,
                _ => return Ok(None),
            },
            None => return Ok(None),
        };
        let Ok(plan) = RowPlan::new(step, &projections, structure, tensors, row_iters, &ls) else {
            return Ok(None);
        };
        let kernel = &plan.step.kernel;
        let empty_is_error = kernel.iterators.get(along) == Some(&IterKind::Reduction)
            && !matches!(kernel.accumulate, Accumulate::Add | Accumulate::Mul);
        if empty_is_error && lengths.chunks(width).any(|ls| ls[first] == 0) {
            return Ok(None);
        }
        let mut entries: Vec<u64> = Vec::new();
        let rows = lengths.len() / width;
        entries
            .try_reserve_exact(rows.saturating_mul(1 + width))
            .map_err(|_| r.unsupported("its row table does not fit in memory".into()))?;
        let mut point = vec![0u64; row_iters.len()];
        for ls in lengths.chunks(width) {
            entries.push(ls[first]);
            let start = |t: usize, var: usize| {
                let rows = match t {
                    0 => result_rows.as_ref(),
                    _ => tensors[t].ragged.and_then(|(_, data)| data),
                };
                let row = loops.row_of(t, &point);
                rows.map_or(0, |rows| {
                    rows.row_start(row).saturating_mul(tensors[t].inner(var))
                })
            };
            plan.offsets_into(&point, start, &mut entries);
            advance(&mut point, &loops.row_sizes);
        }
        let mut step = plan.step;
        let operands = step.operands.len();
        let Some(table) = RowTable::new(along, operands, entries) else {
            return Ok(None);
        };
        step.launch = step.launch.with_rows(table);
        Ok(Some(step))
    }

    /// The whole operation as one launch over the rows laid end to end,
    /// when that is the same computation: every ragged tensor has the
    /// same rows (the same lengths, indexed by the same axes), their
    /// ragged axis is one parallel iterator, and no dense tensor varies
    /// along the rows or the ragged axis (a function of a ragged tensor,
    /// two ragged tensors of one structure, a weight along the axes after
    /// the ragged one). Then the rows are one row of the total length.
    fn flat_step(
        &self,
        r: &RaggedOp<'_>,
        loops: &RowLoops,
        result_rows: &Option<RaggedAxis>,
        options: &LowerOptions,
    ) -> Result<Option<Step>, GraphError> {
        let (operation, tensors) = (r.operation.as_ref(), &r.tensors);
        let (structure, row_iters) = (&loops.structure, &loops.row_iters);
        let [k] = loops.var_iters.as_slice() else {
            return Ok(None);
        };
        let Some((result_var, _)) = tensors[0].ragged else {
            return Ok(None);
        };
        if structure.kinds[*k] != IterKind::Parallel {
            return Ok(None);
        }
        let outer = &axes_of(structure, 0)[..result_var];
        let Some(rows) = result_rows else {
            return Ok(None);
        };
        for (t, tensor) in tensors.iter().enumerate() {
            let axes = axes_of(structure, t);
            match tensor.ragged {
                Some((var, data)) => {
                    let same_rows = t == 0 || data.is_some_and(|d| d.offsets() == rows.offsets());
                    // Within the row, only its own axes (the rows laid end
                    // to end have no row iterator).
                    let within = axes[var + 1..].iter().all(|a| match a {
                        AxisIndex::Iterator(i) => i != k && !row_iters.contains(i),
                        _ => true,
                    });
                    if !same_rows
                        || !within
                        || axes[var] != AxisIndex::Iterator(*k)
                        || axes[..var] != *outer
                        || tensor.dims[..var] != tensors[0].dims[..result_var]
                    {
                        return Ok(None);
                    }
                }
                None => {
                    let along = |a: &AxisIndex| match a {
                        AxisIndex::Iterator(i) => i == k || row_iters.contains(i),
                        _ => false,
                    };
                    if axes.iter().any(along) {
                        return Ok(None);
                    }
                }
            }
        }
        // One row of every position: the outer axes of 1, the ragged axis
        // of the total length.
        let total = rows.total();
        let shapes: Vec<SolvedShape> = tensors
            .iter()
            .map(|tensor| {
                let mut shape = with_ragged_as(tensor.shape, total);
                if let Some((var, _)) = tensor.ragged {
                    let mut j = 0;
                    for row in [&mut shape.batch, &mut shape.output, &mut shape.input] {
                        for d in row.iter_mut() {
                            if j < var {
                                *d = KnownDim::one().with_label(d.label().cloned());
                            }
                            j += 1;
                        }
                    }
                }
                shape
            })
            .collect();
        let projections = project(operation, shapes.iter().collect());
        let cx = LoweringCx {
            op: r.op_ref.clone(),
            shapes: shapes.iter().collect(),
            projections,
            options,
        };
        let Some(mut step) = single_step(operation.lower(&cx)?) else {
            return Ok(None);
        };
        // The ragged tensors' buffers hold exactly the rows.
        let slots = slot_tensors(&step);
        let launch = &mut step.launch;
        let layouts = std::iter::once(&mut launch.result).chain(&mut launch.operands);
        for (layout, t) in layouts.zip(slots) {
            if tensors[t].ragged.is_some() {
                layout.len = tensors[t].len;
            }
        }
        Ok(Some(step))
    }

    /// A row whose length does not fit what it meets.
    #[allow(clippy::too_many_arguments)]
    #[cold]
    fn row_error(
        &self,
        op: OpId,
        t: usize,
        axis: usize,
        point: &[u64],
        length: u64,
        required: u64,
        ragged: bool,
    ) -> GraphError {
        let graph = self.graph();
        let (_, operands, result) = match graph.op_node(op) {
            Some(parts) => parts,
            None => return GraphError::UnknownOp(op.index()),
        };
        let id = if t == 0 { result } else { operands[t - 1] };
        let row = point
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ");
        GraphError::RaggedRow {
            op: match graph.op_ref(op) {
                Ok(o) => o,
                Err(e) => return e,
            },
            tensor: match graph.tensor_ref(id) {
                Ok(r) => Box::new(r),
                Err(e) => return e,
            },
            axis,
            row,
            length,
            required,
            ragged,
        }
    }
}

/// The axes of an operation's tensors in one class with a ragged axis
/// (lined up by a broadcast, or tied as equal): `(tensor, axis, tied)`,
/// axes in memory order.
struct VarClass {
    members: Vec<(usize, usize, bool)>,
}

impl VarClass {
    /// The classes of the tensors' ragged axes, from each slot's class
    /// (slots numbered tensor after tensor, axes in memory order).
    fn of(tensors: &[Tensor<'_>], slot_classes: &[(usize, bool)]) -> Vec<VarClass> {
        let mut base = Vec::with_capacity(tensors.len());
        let mut next = 0;
        for t in tensors {
            base.push(next);
            next += t.dims.len();
        }
        let mut roots: Vec<usize> = tensors
            .iter()
            .zip(&base)
            .filter_map(|(t, &b)| t.ragged.map(|(var, _)| slot_classes[b + var].0))
            .collect();
        roots.sort_unstable();
        roots.dedup();
        let mut classes: Vec<VarClass> = roots
            .iter()
            .map(|_| VarClass {
                members: Vec::new(),
            })
            .collect();
        for (t, tensor) in tensors.iter().enumerate() {
            for j in 0..tensor.dims.len() {
                let (root, tied) = slot_classes[base[t] + j];
                if let Ok(c) = roots.binary_search(&root) {
                    classes[c].members.push((t, j, tied));
                }
            }
        }
        classes
    }

    /// The length the class's rows must have at one point, where `ls`
    /// gives each ragged tensor's row length: the result's own size when
    /// it is a number (a destination does not broadcast), else the first
    /// length other than 1 among the operands, else 1.
    fn required(&self, tensors: &[Tensor<'_>], ls: &[u64]) -> u64 {
        let extent = |&(t, j, _): &(usize, usize, bool)| match tensors[t].ragged {
            Some((var, _)) if var == j => ls[t],
            _ => tensors[t].dims[j],
        };
        let result_var = |&&(t, j, _): &&(usize, usize, bool)| {
            t == 0 && tensors[0].ragged.is_some_and(|(v, _)| v == j)
        };
        if let Some(m) = self.members.iter().find(|m| m.0 == 0 && !result_var(m)) {
            return extent(m);
        }
        (self.members.iter())
            .filter(|m| !result_var(m))
            .map(extent)
            .find(|&n| n != 1)
            .unwrap_or(1)
    }
}

/// How one set of rows' lengths runs: the operation's step for those
/// lengths with its row iterators pinned to 1, each ragged tensor's
/// layout relative to its row's start, and which of the step's iterators
/// each row iterator is.
struct RowPlan {
    /// The step; a ragged tensor's offset is relative to its row's start.
    step: Step,
    /// The tensor (0: the result) of each layout, result first, with its
    /// ragged axis if it has one.
    slots: Vec<(usize, Option<usize>)>,
    /// The step's iterator for each row iterator that indexes a ragged
    /// tensor's rows, with the row iterator's position.
    pins: Vec<(usize, usize)>,
    /// The step's iterator for the innermost row iterator, if any.
    innermost: Option<usize>,
}

impl RowPlan {
    /// The plan for `step`, lowered with `rp` for the lengths `lengths`;
    /// fails with `(tensor, axis, length needed)` when the step would read
    /// or write outside a ragged tensor's row.
    fn new(
        mut step: Step,
        rp: &Projections,
        structure: &Projections,
        tensors: &[Tensor<'_>],
        row_iters: &[usize],
        lengths: &[u64],
    ) -> Result<RowPlan, (usize, usize, u64)> {
        let iterators = rp.sizes.len();
        let mut pins: Vec<(usize, usize)> = Vec::new();
        let mut innermost = None;
        for (t, tensor) in tensors.iter().enumerate() {
            let Some((var, _)) = tensor.ragged else {
                continue;
            };
            for (a, s) in axes_of(rp, t)[..var]
                .iter()
                .zip(&axes_of(structure, t)[..var])
            {
                if let (AxisIndex::Iterator(k), AxisIndex::Iterator(ks)) = (a, s) {
                    if let Some(p) = row_iters.iter().position(|x| x == ks) {
                        if !pins.iter().any(|&(x, _)| x == *k) {
                            pins.push((*k, p));
                        }
                        if p + 1 == row_iters.len() {
                            innermost = Some(*k);
                        }
                    }
                }
            }
        }
        let slots: Vec<(usize, Option<usize>)> = slot_tensors(&step)
            .into_iter()
            .map(|t| (t, tensors[t].ragged.map(|(var, _)| var)))
            .collect();
        let pinned = |k: usize| pins.iter().any(|&(p, _)| p == k);
        let launch = &mut step.launch;
        let empty = (0..iterators).any(|k| launch.sizes[k] == 0 && !pinned(k));
        for (slot, &(t, var)) in slots.iter().enumerate() {
            let Some(var) = var else { continue };
            let tensor = &tensors[t];
            // Within the row: the ragged axis and the axes after it.
            let mut local = vec![lengths[t]];
            local.extend_from_slice(&tensor.dims[var + 1..]);
            let within = layout_of(&local, &axes_of(rp, t)[var..], iterators, 0);
            // Nothing outside the row: a length that only broadcasting
            // would accept where the operation ties axes (a contraction)
            // is refused here.
            if !empty {
                let last = (0..iterators)
                    .filter(|&k| !pinned(k))
                    .fold(within.offset, |acc, k| {
                        acc.saturating_add(
                            within.strides[k].saturating_mul(launch.sizes[k].saturating_sub(1)),
                        )
                    });
                if last >= lengths[t].saturating_mul(tensor.inner(var)) {
                    let required = match axes_of(rp, t)[var] {
                        AxisIndex::Iterator(k) => launch.sizes[k],
                        _ => 1,
                    };
                    return Err((t, var, required));
                }
            }
            let layout = if slot == 0 {
                &mut launch.result
            } else {
                &mut launch.operands[slot - 1]
            };
            *layout = Layout::new(within.offset, within.strides, tensor.len);
        }
        for &(k, _) in &pins {
            launch.sizes[k] = 1;
        }
        Ok(RowPlan {
            step,
            slots,
            pins,
            innermost,
        })
    }

    /// Each layout's offset (result first) for the row at `point`: the
    /// plan's, moved by the pinned iterators (an axis after a ragged one
    /// may be a row iterator too: a transposition within the row), plus a
    /// ragged tensor's row start, `start(tensor, ragged axis)`.
    fn offsets(&self, point: &[u64], start: impl Fn(usize, usize) -> u64) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.slots.len());
        self.offsets_into(point, start, &mut out);
        out
    }

    /// [`RowPlan::offsets`], appended to `out`.
    fn offsets_into(&self, point: &[u64], start: impl Fn(usize, usize) -> u64, out: &mut Vec<u64>) {
        let launch = &self.step.launch;
        let layouts = std::iter::once(&launch.result).chain(&launch.operands);
        out.extend(layouts.zip(&self.slots).map(|(layout, &(t, var))| {
            let moved = self.pins.iter().fold(layout.offset, |acc, &(k, p)| {
                acc.saturating_add(layout.strides[k].saturating_mul(point[p]))
            });
            moved.saturating_add(var.map_or(0, |var| start(t, var)))
        }));
    }

    /// The step of a run of rows: its first row's offsets, and for several
    /// rows the innermost row iterator stretched over them.
    fn step(&self, run: &RowRun) -> Step {
        let mut step = self.step.clone();
        let launch = &mut step.launch;
        let layouts = std::iter::once(&mut launch.result).chain(&mut launch.operands);
        for (layout, &o) in layouts.zip(&run.offsets) {
            layout.offset = o;
        }
        if let (Some((rows, deltas)), Some(k)) = (&run.along, self.innermost) {
            launch.sizes[k] = *rows;
            let layouts = std::iter::once(&mut launch.result).chain(&mut launch.operands);
            for (layout, &d) in layouts.zip(deltas) {
                layout.strides[k] = d;
            }
        }
        step
    }
}

/// Consecutive rows that run as one launch: the first row's offsets, and
/// once a second row joined, the rows so far and each layout's distance
/// between two rows (result first).
struct RowRun {
    plan: usize,
    offsets: Vec<u64>,
    along: Option<(u64, Vec<u64>)>,
}

impl RowRun {
    /// Takes the next row (of plan `plan`, at `offsets`) if it continues
    /// the run.
    fn join(&mut self, plan: usize, offsets: &[u64]) -> bool {
        if self.plan != plan {
            return false;
        }
        match &mut self.along {
            None => {
                // The distance to the second row; a result that does not
                // move would be written twice.
                let Some(deltas) = (self.offsets.iter().zip(offsets))
                    .map(|(a, b)| b.checked_sub(*a))
                    .collect::<Option<Vec<u64>>>()
                else {
                    return false;
                };
                if deltas[0] == 0 {
                    return false;
                }
                self.along = Some((2, deltas));
                true
            }
            Some((rows, deltas)) => {
                let fits =
                    (self.offsets.iter().zip(offsets).zip(deltas.iter())).all(|((a, b), d)| {
                        d.checked_mul(*rows).and_then(|x| x.checked_add(*a)) == Some(*b)
                    });
                if fits {
                    *rows += 1;
                }
                fits
            }
        }
    }
}

/// The operation's step with each tensor's ragged axis of length `ls[t]`
/// (a dense tensor's entry is not read), with the projections it was
/// lowered with; `None` when it lowers to more than one kernel.
fn lower_at(
    r: &RaggedOp<'_>,
    ls: &[u64],
    options: &LowerOptions,
) -> Result<Option<(Step, Projections)>, GraphError> {
    let shapes: Vec<SolvedShape> = (r.tensors.iter().zip(ls))
        .map(|(tensor, &n)| with_ragged_as(tensor.shape, n))
        .collect();
    let projections = project(r.operation.as_ref(), shapes.iter().collect());
    let cx = LoweringCx {
        op: r.op_ref.clone(),
        shapes: shapes.iter().collect(),
        projections,
        options,
    };
    Ok(single_step(r.operation.lower(&cx)?).map(|step| (step, cx.projections)))
}

/// The one step of a lowering that writes the result from the operands
/// (what a row takes), or `None`.
fn single_step(mut lowered: Lowered) -> Option<Step> {
    let single = lowered.steps.len() == 1
        && lowered.scratch.is_empty()
        && lowered.steps[0].result == BufferRef::Result
        && (lowered.steps[0].operands.iter()).all(|b| matches!(b, BufferRef::Operand(_)));
    single.then(|| lowered.steps.remove(0))
}

/// The tensor (0: the result) of each of a step's layouts, result first.
fn slot_tensors(step: &Step) -> Vec<usize> {
    std::iter::once(0)
        .chain(step.operands.iter().map(|b| match *b {
            BufferRef::Operand(i) => i + 1,
            _ => 0,
        }))
        .collect()
}

/// Steps a row-major multi-index.
fn advance(point: &mut [u64], sizes: &[u64]) {
    for j in (0..point.len()).rev() {
        point[j] += 1;
        if point[j] < sizes[j] {
            return;
        }
        point[j] = 0;
    }
}

/// `shape` with its ragged axis (if any) of size `n`.
fn with_ragged_as(shape: &SolvedShape, n: u64) -> SolvedShape {
    let mut out = shape.clone();
    for row in [&mut out.batch, &mut out.output, &mut out.input] {
        for d in row.iter_mut().filter(|d| d.is_ragged()) {
            *d = KnownDim::sized(n).with_label(d.label().cloned());
        }
    }
    out
}

/// The projections `operation` gives over `shapes`.
fn project(operation: &dyn crate::Operation, shapes: Vec<&SolvedShape>) -> Projections {
    let mut builder = ProjectionBuilder::new(shapes);
    operation.project(&mut builder);
    builder.finish()
}
