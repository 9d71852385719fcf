//! Ragged (`var`) axes at run time, as DyND's var dims: the data's rows,
//! and operations lowered row by row.
//!
//! A ragged axis's length differs from one position of the axes before it
//! (in memory order: its *rows*) to the next. Its data is stored as the
//! values of every row one after another, with the offset where each row
//! starts ([`RaggedAxis`]); a tensor with several ragged axes (DyND's
//! `3 * var * var`) has one level of offsets per ragged axis. Inference
//! keeps `var` as a size of its own (`shape_core::Size::Ragged`); the
//! lengths exist only once data is given, so an operation that touches a
//! ragged tensor is lowered when the graph runs, once per row of its
//! innermost ragged axis: each row is an ordinary launch of the
//! operation's own kernel, with that row's lengths as sizes and its start
//! as offset (DyND's "var to strided" kernel, one level of its
//! hierarchy). The rows are found by walking the levels: a point of the
//! iterators before the innermost ragged axis (an outer ragged axis's
//! iterator among them, its length read from the level before) is one
//! row. Rows of the same lengths share one lowering.
//!
//! Broadcasting is checked row by row, at every level, as DyND checks it
//! when it runs: a row of length 1 broadcasts (it is read at 0), a row of
//! the length it meets is read in step, and any other length is
//! [`GraphError::RaggedRow`], naming the operation, the tensor, the row
//! and both lengths. A launch never reads or writes outside its row.

use std::collections::HashMap;

use shape_core::kernel::{Accumulate, IterKind, Layout, RowTable};
use shape_core::{buffer_len, KnownDim, RaggedAxis, RowKind, SolvedShape};

use crate::graph::{GraphError, OpId, SolvedGraph};
use crate::lowering::{layout_of, BufferRef, LowerOptions, Lowered, LoweringCx, Step};
use crate::projections::{AxisIndex, ProjectionBuilder, Projections};

/// The memory-order positions of a solved shape's ragged axes (empty for
/// a dense tensor).
pub(crate) fn ragged_positions(
    graph: &SolvedGraph,
    t: crate::TensorId,
) -> Result<Vec<usize>, GraphError> {
    let shape = graph.shape(t)?;
    let mut found = Vec::new();
    let mut j = 0;
    for kind in RowKind::MEMORY_ORDER {
        for d in shape.row(kind) {
            if d.is_ragged() {
                found.push(j);
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
    /// The rows of the result, when it is ragged (every level).
    pub result_rows: Option<RaggedAxis>,
}

/// One tensor of a ragged operation.
struct Tensor<'a> {
    shape: &'a SolvedShape,
    /// Its dims in memory order, a ragged axis's as 0.
    dims: Vec<u64>,
    /// The innermost ragged axis (memory order) and the rows of the data
    /// (every level; an operand's).
    ragged: Option<(usize, Option<&'a RaggedAxis>)>,
    /// The ragged axes before the innermost one (memory order).
    outer_vars: Vec<usize>,
    /// Values in its buffer.
    len: u64,
}

impl Tensor<'_> {
    /// The values of one position of the ragged axis (saturating: a
    /// length past 2^64 fails allocation clearly).
    fn inner(&self, var: usize) -> u64 {
        buffer_len(&self.dims[var + 1..])
    }

    /// Whether memory-order axis `j` is one of its ragged axes.
    fn is_var(&self, j: usize) -> bool {
        self.ragged.is_some_and(|(v, _)| v == j) || self.outer_vars.contains(&j)
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
}

/// The loops of a ragged operation: its projections with every ragged
/// axis as a placeholder size, the classes of its ragged axes, and which
/// iterators run over the rows and along the ragged axes.
struct RowLoops {
    structure: Projections,
    classes: Vec<VarClass>,
    /// The parallel iterators before an innermost ragged axis, in the
    /// order the rows are walked (each after the iterators its length
    /// depends on): one point of them is one row of every ragged tensor.
    /// An outer ragged axis's iterator is one of them.
    row_iters: Vec<usize>,
    /// The iterators along innermost ragged axes that are not row
    /// iterators: what a row's launch runs along.
    var_iters: Vec<usize>,
    /// Per row iterator: its size where it is dense, or the class of
    /// ragged axes it runs along (its length read from the data per row).
    row_sizes: Vec<RowSize>,
    /// The size an outer ragged axis's iterator is lowered at (its
    /// position is pinned per row; 2 keeps it an iterator, or the dense
    /// size its class meets).
    pinned_size: HashMap<usize, u64>,
}

/// The size of a row iterator.
#[derive(Clone, Copy)]
enum RowSize {
    /// A dense size.
    Dense(u64),
    /// The length of the rows of ragged class `c`, per row.
    Ragged(usize),
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
        let classes = VarClass::of(tensors, &slot_classes, &structure);
        let mut row_iters: Vec<usize> = Vec::new();
        let mut innermost: Vec<usize> = Vec::new();
        // The result's axes first, so that a ragged result's rows are
        // walked in its own order.
        for (t, tensor) in tensors.iter().enumerate() {
            let Some((var, _)) = tensor.ragged else {
                continue;
            };
            let axes = axes_of(&structure, t);
            for (j, a) in axes[..var].iter().enumerate() {
                match a {
                    AxisIndex::Iterator(k) if structure.kinds[*k] == IterKind::Parallel => {
                        if !row_iters.contains(k) {
                            row_iters.push(*k)
                        }
                    }
                    AxisIndex::Fixed(_) if !tensor.outer_vars.contains(&j) => {}
                    AxisIndex::Iterator(_) if tensor.outer_vars.contains(&j) => {
                        return Err(r.unsupported(
                            "it reduces along a ragged axis that has ragged axes after it; reduce along the inner one first (`ijk=>ij`, then `ij=>i`)".into(),
                        ))
                    }
                    _ if tensor.outer_vars.contains(&j) => {
                        return Err(
                            r.unsupported("it fixes, slices or slides over a ragged axis".into())
                        )
                    }
                    _ => {
                        return Err(r.unsupported(
                            "it reduces, slices or slides over an axis before a ragged axis".into(),
                        ))
                    }
                }
            }
            match axes[var] {
                AxisIndex::Iterator(k) => innermost.push(k),
                _ => {
                    return Err(
                        r.unsupported("it fixes, slices or slides over a ragged axis".into())
                    )
                }
            }
        }
        let mut var_iters: Vec<usize> = innermost
            .into_iter()
            .filter(|k| !row_iters.contains(k))
            .collect();
        var_iters.sort_unstable();
        var_iters.dedup();
        let position = |k: usize| row_iters.iter().position(|&x| x == k);
        // Each ragged axis's rows are known once the axes before it are.
        for (t, tensor) in tensors.iter().enumerate() {
            let Some((var, _)) = tensor.ragged else {
                continue;
            };
            let axes = axes_of(&structure, t);
            for u in tensor.outer_vars.iter().copied().chain([var]) {
                let at = match axes[u] {
                    AxisIndex::Iterator(k) => position(k).unwrap_or(usize::MAX),
                    _ => usize::MAX,
                };
                let depends_later = axes[..u].iter().any(|a| match a {
                    AxisIndex::Iterator(k) => position(*k).is_some_and(|p| p >= at),
                    _ => false,
                });
                if depends_later {
                    return Err(r.unsupported(
                        "it moves a ragged axis before the axes its rows depend on".into(),
                    ));
                }
            }
        }
        if let Some((var, _)) = tensors[0].ragged {
            // Its own innermost ragged axis may be a row iterator (a sum
            // along an operand's inner ragged axis).
            let outer: Vec<usize> = structure.result[..=var]
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
        let class_of = |k: usize| classes.iter().position(|c| c.iter == Some(k));
        let row_sizes: Vec<RowSize> = row_iters
            .iter()
            .map(|&k| class_of(k).map_or(RowSize::Dense(structure.sizes[k]), RowSize::Ragged))
            .collect();
        let pinned_size = row_iters
            .iter()
            .zip(&row_sizes)
            .filter_map(|(&k, size)| match size {
                RowSize::Ragged(c) => Some((k, classes[*c].dense_size(tensors).unwrap_or(2))),
                RowSize::Dense(_) => None,
            })
            .collect();
        Ok(RowLoops {
            structure,
            classes,
            row_iters,
            var_iters,
            row_sizes,
            pinned_size,
        })
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

/// Every row of a ragged operation, in the order they are walked: per
/// row, the point of the row iterators, and every tensor's innermost
/// length there, the length it is lowered at and where its row starts in
/// its buffer (0 for a dense tensor); with the result's rows.
struct Rows {
    /// `row_iters.len()` entries a row.
    points: Vec<u64>,
    /// `tensors.len()` entries a row: the innermost ragged length.
    lengths: Vec<u64>,
    /// `tensors.len()` entries a row: the innermost ragged axis's size in
    /// the row's lowering (its length, or, pinned, 1 where a row of 1
    /// broadcasts and the pinned size otherwise). Empty where no tensor's
    /// innermost ragged axis is pinned: then it is `lengths`
    /// ([`Rows::lowered`]).
    lowered: Vec<u64>,
    /// `tensors.len()` entries a row: the row's first value in the
    /// tensor's buffer.
    starts: Vec<u64>,
    /// Whether some outer ragged row of 1 broadcasts somewhere.
    outer_broadcast: bool,
    /// The result's rows (every level), for a ragged result.
    result_rows: Option<RaggedAxis>,
}

thread_local! {
    /// Lists of rows given back by [`Rows`] when it is dropped, taken by
    /// the next operation's walk: large lists would otherwise be mapped
    /// and unmapped, their pages faulted in, at every operation.
    static SPARE: std::cell::RefCell<Vec<Vec<u64>>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The most words of spare lists a thread keeps (32 MiB).
const SPARE_WORDS: usize = 1 << 22;

impl Drop for Rows {
    fn drop(&mut self) {
        SPARE.with(|spare| {
            let mut spare = spare.borrow_mut();
            for mut list in [
                std::mem::take(&mut self.points),
                std::mem::take(&mut self.lengths),
                std::mem::take(&mut self.lowered),
                std::mem::take(&mut self.starts),
            ] {
                let kept: usize = spare.iter().map(Vec::capacity).sum();
                if list.capacity() > 0 && kept + list.capacity() <= SPARE_WORDS && spare.len() < 8 {
                    list.clear();
                    spare.push(list);
                }
            }
        });
    }
}

impl Rows {
    /// The number of rows.
    fn count(&self, width: usize) -> usize {
        self.lengths.len() / width.max(1)
    }

    /// The sizes row `i` is lowered at (`width` entries).
    #[inline]
    fn lowered(&self, i: usize, width: usize) -> &[u64] {
        let all = if self.lowered.is_empty() {
            &self.lengths
        } else {
            &self.lowered
        };
        &all[i * width..(i + 1) * width]
    }
}

impl SolvedGraph {
    /// Whether the tensor's solved shape has a ragged (`var`) axis.
    pub fn is_ragged(&self, t: crate::TensorId) -> Result<bool, GraphError> {
        Ok(!ragged_positions(self, t)?.is_empty())
    }

    /// The position of the tensor's innermost ragged (`var`) axis among
    /// its axes in memory order (batch, output, input), if it has one
    /// ([`SolvedGraph::ragged_axes`] gives every one).
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
        Ok(ragged_positions(self, t)?.last().copied())
    }

    /// The positions of every ragged (`var`) axis of the tensor among its
    /// axes in memory order, outermost first: one level of offsets each
    /// in its data ([`RaggedAxis::nested`]).
    ///
    /// ```
    /// use shape_graph::Graph;
    /// let mut g = Graph::new();
    /// let x = g.input("x", "3, var, var")?;
    /// let s = g.solve()?;
    /// assert_eq!(s.ragged_axes(x)?, vec![1, 2]);
    /// # Ok::<(), shape_graph::GraphError>(())
    /// ```
    pub fn ragged_axes(&self, t: crate::TensorId) -> Result<Vec<usize>, GraphError> {
        ragged_positions(self, t)
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
    /// (`rows[i]` for operand `i`, every level; `None` for a dense one):
    /// what a run does once the data gives the rows.
    ///
    /// The phases: the operation's tensors with their data's rows, its
    /// loops (which iterators run over the rows and along the ragged
    /// axes), every row walked through the levels (lengths checked as
    /// DyND checks broadcasting, the result's rows built), then one
    /// launch over the rows laid end to end where that is the same
    /// computation, one launch over a row table, or a launch per run of
    /// rows.
    pub fn lower_ragged(
        &self,
        op: OpId,
        rows: &[Option<&RaggedAxis>],
        options: &LowerOptions,
    ) -> Result<RaggedLowered, GraphError> {
        let mut r = self.ragged_op(op, rows)?;
        let loops = RowLoops::of(&r)?;
        let mut walked = self.rows(&r, &loops)?;
        if let (Some((var, _)), Some(rows)) = (r.tensors[0].ragged, &walked.result_rows) {
            r.tensors[0].len = rows.total().saturating_mul(r.tensors[0].inner(var));
        }
        let result_rows = walked.result_rows.take();
        let flat = if options.row_tables && options.tables_over_flat {
            None
        } else {
            self.flat_step(&r, &loops, &result_rows, options)?
        };
        let steps = match flat {
            Some(step) => vec![step],
            None => match self.row_table_step(&r, &loops, &walked, options)? {
                Some(step) => vec![step],
                None => self.row_steps(&r, &loops, &walked, options)?,
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
            let mut vars = ragged_positions(self, id)?;
            let data = if t == 0 {
                None
            } else {
                rows.get(t - 1).copied().flatten()
            };
            let mut dims = shape.memory_dims();
            for &v in &vars {
                dims[v] = 0;
            }
            let innermost = vars.pop();
            let len = match (innermost, data) {
                (Some(_), Some(rows)) => {
                    if rows.axes().last() != innermost.as_ref()
                        || rows.axes()[..rows.axes().len() - 1] != vars[..]
                    {
                        return Err(r.unsupported(format!(
                            "operand {} has rows along axes {:?} where its shape has ragged axes {:?}",
                            t - 1,
                            rows.axes(),
                            ragged_positions(self, id)?
                        )));
                    }
                    rows.buffer_len(&dims)
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
                ragged: innermost.map(|v| (v, data)),
                outer_vars: vars,
                len,
            });
        }
        Ok(r)
    }

    /// Every row of the operation, walked level by level (a depth-first
    /// walk of the row iterators, an outer ragged axis's length read per
    /// row), each row's lengths checked as DyND checks broadcasting, and
    /// the result's rows built in its own order.
    fn rows(&self, r: &RaggedOp<'_>, loops: &RowLoops) -> Result<Rows, GraphError> {
        let tensors = &r.tensors;
        let width = tensors.len();
        let n = loops.row_iters.len();
        let walker = Walker::new(r, loops);
        let pos_of = walker.pos_of.clone();
        let structure = &loops.structure;
        // The result's levels: the axis, and the depth of its iterator
        // among the row iterators (`None`: along a row's launch).
        let result_levels: Vec<(usize, Option<usize>)> = match tensors[0].ragged {
            Some((var, _)) => (tensors[0].outer_vars.iter().copied().chain([var]))
                .map(|u| {
                    let depth = match axes_of(structure, 0)[u] {
                        AxisIndex::Iterator(k) => Some(pos_of[k]).filter(|&p| p != usize::MAX),
                        _ => None,
                    };
                    (u, depth)
                })
                .collect(),
            None => Vec::new(),
        };
        let mut result = ResultRows::new(result_levels.len());
        let too_many = || r.unsupported("it has more rows than fit in memory".into());
        // Row iterators of dense sizes only: the number of rows is known,
        // and each list is allocated once.
        let known: Option<usize> = loops.row_sizes.iter().try_fold(1usize, |n, s| match s {
            RowSize::Dense(s) => usize::try_from(*s).ok().and_then(|s| n.checked_mul(s)),
            RowSize::Ragged(_) => None,
        });
        let list = |per: usize| -> Result<Vec<u64>, GraphError> {
            let mut v = SPARE
                .with(|spare| spare.borrow_mut().pop())
                .unwrap_or_default();
            if let Some(rows) = known {
                v.try_reserve_exact(rows.saturating_mul(per))
                    .map_err(|_| too_many())?;
            }
            Ok(v)
        };
        // The innermost ragged axis's iterator position of each tensor
        // (`usize::MAX` along the row's launch).
        let pinned_at: Vec<Option<(usize, usize)>> = (0..width)
            .map(|t| {
                let (var, _) = tensors[t].ragged?;
                match axes_of(structure, t)[var] {
                    AxisIndex::Iterator(k) if pos_of[k] != usize::MAX => Some((k, pos_of[k])),
                    _ => None,
                }
            })
            .collect();
        let pinned_any = pinned_at.iter().any(Option::is_some);
        let mut out = Rows {
            points: list(n)?,
            lengths: list(width)?,
            lowered: if pinned_any { list(width)? } else { Vec::new() },
            starts: list(width)?,
            outer_broadcast: false,
            result_rows: None,
        };
        let leaf_classes: Vec<usize> = (0..loops.classes.len())
            .filter(|&c| {
                loops.classes[c]
                    .iter
                    .is_none_or(|k| pos_of.get(k).is_none_or(|&p| p == usize::MAX))
            })
            .collect();
        // What every row reads, found once: each operand's innermost
        // ragged axis, values per position and rows; each class checked
        // at a row, its lone operand if it has one, and whether it gives
        // the result's innermost length.
        let leaf_tensors: Vec<(usize, usize, u64, &RaggedAxis)> = (tensors.iter().enumerate())
            .skip(1)
            .filter_map(|(t, tensor)| match tensor.ragged {
                Some((var, Some(data))) => Some((t, var, tensor.inner(var), data)),
                _ => None,
            })
            .collect();
        let leaf_checks: Vec<(usize, Option<usize>, bool)> = leaf_classes
            .iter()
            .map(|&c| {
                let class = &loops.classes[c];
                let sets_result = tensors[0].ragged.is_some_and(|(var, _)| {
                    class.members.iter().any(|&(t, j, _)| t == 0 && j == var)
                });
                (c, class.lone_operand(tensors), sets_result)
            })
            .collect();
        let result_inner = tensors[0]
            .ragged
            .map_or(0, |(var, _)| tensors[0].inner(var));
        let (mut point, mut sizes) = (vec![0u64; n], vec![0u64; n]);
        let (mut ls, mut lowered, mut starts) =
            (vec![0u64; width], vec![0u64; width], vec![0u64; width]);
        // Appends a row: its point, lengths, lowered lengths (where a
        // ragged operand is pinned) and starts.
        let record = |out: &mut Rows,
                      point: &[u64],
                      ls: &[u64],
                      sizes: &[u64],
                      starts: &[u64],
                      lowered: &mut [u64]|
         -> Result<(), GraphError> {
            if pinned_any {
                for t in 0..width {
                    lowered[t] = match (tensors[t].ragged, pinned_at[t]) {
                        (None, _) => 0,
                        (Some(_), None) => ls[t],
                        (Some(_), Some((k, p))) => {
                            if ls[t] == 1 && sizes[p] != 1 {
                                1
                            } else {
                                loops.pinned_size.get(&k).copied().unwrap_or(2)
                            }
                        }
                    };
                }
            }
            let appended = append(&mut out.points, point)
                && append(&mut out.lengths, ls)
                && (!pinned_any || append(&mut out.lowered, lowered))
                && append(&mut out.starts, starts);
            appended.then_some(()).ok_or_else(too_many)
        };
        // The common case, walked without the general machinery: one row
        // iterator of a dense size, every ragged operand of one level read
        // at a row that moves by a fixed step, each length class given by
        // one operand, and the result's rows (if ragged) along the launch.
        // What it writes is what the general walk writes.
        let linear_leaves: Option<Vec<LinearLeaf<'_>>> = match loops.row_sizes[..] {
            [RowSize::Dense(count)]
                if result_levels.iter().all(|&(_, depth)| depth.is_none())
                    && result_levels.len() <= 1
                    && leaf_checks.iter().all(|&(_, lone, _)| lone.is_some()) =>
            {
                leaf_tensors
                    .iter()
                    .map(|&(t, var, inner, data)| {
                        let (base, terms) = walker.linear[t].as_ref()?;
                        let (base, step) = match terms[..] {
                            [] => (*base, 0),
                            [(0, m)] => (*base, m),
                            _ => return None,
                        };
                        // Every row it reads must be there: otherwise
                        // the general walk says which is missing.
                        let last = base.checked_add(step.checked_mul(count.checked_sub(1)?)?)?;
                        (data.axis() == var && last < data.rows() as u64).then(|| LinearLeaf {
                            t,
                            base,
                            step,
                            inner,
                            offsets: data.offsets(),
                        })
                    })
                    .collect::<Option<Vec<_>>>()
                    .filter(|_| count > 0)
            }
            _ => None,
        };
        let walked = linear_leaves.is_some();
        if let (Some(leaves), [RowSize::Dense(count)]) = (linear_leaves, &loops.row_sizes[..]) {
            sizes[0] = *count;
            let setting: Vec<usize> = leaf_checks
                .iter()
                .filter(|c| c.2)
                .filter_map(|c| c.1)
                .collect();
            for i in 0..*count {
                point[0] = i;
                for &LinearLeaf {
                    t,
                    base,
                    step,
                    inner,
                    offsets,
                } in &leaves
                {
                    let row = (base + i * step) as usize;
                    let (start, end) = (offsets[row], offsets[row + 1]);
                    ls[t] = end - start;
                    starts[t] = start.saturating_mul(inner);
                }
                for &t in &setting {
                    ls[0] = ls[t];
                }
                if let Some(last) = result_levels.len().checked_sub(1) {
                    result.add(last, ls[0]).ok_or_else(too_many)?;
                    starts[0] = result.start[last].saturating_mul(result_inner);
                }
                record(&mut out, &point, &ls, &sizes, &starts, &mut lowered)?;
            }
        }
        let mut d = 0;
        'walk: loop {
            if walked {
                break;
            }
            while d < n {
                let s = match loops.row_sizes[d] {
                    RowSize::Dense(s) => s,
                    RowSize::Ragged(c) => {
                        let (s, broadcast) = walker.class_length(self, c, &point, Some(d), &ls)?;
                        out.outer_broadcast |= broadcast;
                        s
                    }
                };
                sizes[d] = s;
                for (l, &(_, depth)) in result_levels.iter().enumerate() {
                    if depth == Some(d) {
                        result.add(l, s).ok_or_else(too_many)?;
                    }
                }
                if s == 0 {
                    break;
                }
                point[d] = 0;
                d += 1;
            }
            if d == n {
                ls.fill(0);
                starts.fill(0);
                for &(t, var, inner, data) in &leaf_tensors {
                    let row = walker.row(t, var, &point)?;
                    ls[t] = data.row_len(row);
                    starts[t] = data.row_start(row).saturating_mul(inner);
                }
                for &(c, lone, sets_result) in &leaf_checks {
                    // A class of one operand's innermost ragged axis (and
                    // the result's): its length, nothing to check.
                    let required = match lone {
                        Some(t) => ls[t],
                        None => walker.class_length(self, c, &point, None, &ls)?.0,
                    };
                    if sets_result {
                        ls[0] = required;
                    }
                }
                if let Some(&(_, depth)) = result_levels.last() {
                    let last = result_levels.len() - 1;
                    match depth {
                        Some(depth) => ls[0] = sizes[depth],
                        None => result.add(last, ls[0]).ok_or_else(too_many)?,
                    }
                    starts[0] = result.start[last].saturating_mul(result_inner);
                }
                record(&mut out, &point, &ls, &sizes, &starts, &mut lowered)?;
            }
            loop {
                if d == 0 {
                    break 'walk;
                }
                d -= 1;
                point[d] += 1;
                if point[d] < sizes[d] {
                    d += 1;
                    break;
                }
            }
        }
        if let Some((var, _)) = tensors[0].ragged {
            let mut levels = Vec::with_capacity(result_levels.len());
            for (&(axis, _), lengths) in result_levels.iter().zip(&result.lengths) {
                levels.push(
                    RaggedAxis::from_lengths(axis, lengths)
                        .map_err(|e| r.unsupported(e.to_string()))?,
                );
            }
            let inner = levels.pop().ok_or_else(too_many)?;
            debug_assert_eq!(inner.axis(), var);
            out.result_rows = Some(
                RaggedAxis::nested(levels, inner, &tensors[0].dims)
                    .map_err(|e| r.unsupported(e.to_string()))?,
            );
        }
        Ok(out)
    }

    /// One launch per run of rows: one lowering per distinct set of
    /// lengths (a [`RowPlan`]), then a launch per row; consecutive rows of
    /// the same lengths, evenly spaced in every buffer, share one launch
    /// (DyND's coalescing, along the rows).
    fn row_steps(
        &self,
        r: &RaggedOp<'_>,
        loops: &RowLoops,
        rows: &Rows,
        options: &LowerOptions,
    ) -> Result<Vec<Step>, GraphError> {
        let tensors = &r.tensors;
        let (structure, row_iters) = (&loops.structure, &loops.row_iters);
        let (width, n) = (tensors.len(), row_iters.len());
        let mut plans: Vec<RowPlan> = Vec::new();
        let mut plan_of: HashMap<&[u64], usize> = HashMap::new();
        let mut runs: Vec<RowRun> = Vec::new();
        let mut offsets: Vec<u64> = Vec::with_capacity(width);
        let mut last: Option<(&[u64], usize)> = None;
        for i in 0..rows.count(width) {
            let point = &rows.points[i * n..(i + 1) * n];
            let lowered = rows.lowered(i, width);
            // Consecutive rows mostly share a plan: no hash then.
            let known = match last {
                Some((l, id)) if l == lowered => Some(id),
                _ => plan_of.get(lowered).copied(),
            };
            let id = match known {
                Some(id) => id,
                None => {
                    let Some((step, projections)) = lower_at(r, loops, lowered, options)? else {
                        return Err(r.unsupported(
                            "it lowers to more than one kernel (a padded copy, or several steps), which a ragged run does not take yet".into(),
                        ));
                    };
                    let plan =
                        RowPlan::new(step, &projections, structure, tensors, row_iters, lowered)
                            .map_err(|(t, var, required)| {
                                let length = rows.lengths[i * width + t];
                                self.row_error(r.op, t, var, point, length, required, true)
                            })?;
                    plans.push(plan);
                    plan_of.insert(lowered, plans.len() - 1);
                    plans.len() - 1
                }
            };
            last = Some((lowered, id));
            let plan = &plans[id];
            offsets.clear();
            plan.offsets_into(
                point,
                &rows.starts[i * width..(i + 1) * width],
                &mut offsets,
            );
            let next_in_run = point.last().is_some_and(|&v| v > 0);
            let joined = match runs.last_mut() {
                Some(run) if next_in_run && plan.innermost.is_some() => run.join(id, &offsets),
                _ => false,
            };
            if !joined {
                runs.push(RowRun {
                    plan: id,
                    offsets: offsets.clone(),
                    along: None,
                });
            }
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
    /// another length, at any level), or when an empty row would be an
    /// empty maximum, minimum or assignment (whose error the per-row path
    /// gives).
    fn row_table_step(
        &self,
        r: &RaggedOp<'_>,
        loops: &RowLoops,
        rows: &Rows,
        options: &LowerOptions,
    ) -> Result<Option<Step>, GraphError> {
        let tensors = &r.tensors;
        let (structure, row_iters) = (&loops.structure, &loops.row_iters);
        let [leaf] = loops.var_iters.as_slice() else {
            return Ok(None);
        };
        if !options.row_tables || row_iters.is_empty() || rows.outer_broadcast {
            return Ok(None);
        }
        let (width, n) = (tensors.len(), row_iters.len());
        // The tensors whose innermost ragged axis a row's launch runs
        // along; the others' are pinned per row.
        let along_leaf = |t: usize| match tensors[t].ragged {
            Some((var, _)) => axes_of(structure, t)[var] == AxisIndex::Iterator(*leaf),
            None => false,
        };
        let ragged: Vec<usize> = (0..width).filter(|&t| along_leaf(t)).collect();
        let pinned: Vec<usize> = (0..width)
            .filter(|&t| tensors[t].ragged.is_some() && !along_leaf(t))
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
            .any(|&(t, j, _)| !tensors[t].is_var(j) && tensors[t].dims[j] != 1);
        if dense_member {
            return Ok(None);
        }
        let mut longest = 0;
        let mut varies = false;
        let first_len = rows.lengths.get(first).copied().unwrap_or(0);
        for (i, ls) in rows.lengths.chunks(width).enumerate() {
            let lowered = rows.lowered(i, width);
            let len = ls[first];
            if ragged.iter().any(|&t| ls[t] != len) {
                return Ok(None);
            }
            // A pinned ragged row of 1 broadcast: its own plan.
            if pinned
                .iter()
                .any(|&t| lowered[t] != rows.lowered(0, width)[t])
            {
                return Ok(None);
            }
            varies |= len != first_len;
            longest = longest.max(len);
        }
        if !varies {
            return Ok(None);
        }
        // One plan for every row, lowered at the longest length.
        let padded = longest.max(2);
        let mut ls: Vec<u64> = rows.lowered(0, width).to_vec();
        for &t in &ragged {
            ls[t] = padded;
        }
        let Some((step, projections)) = lower_at(r, loops, &ls, options)? else {
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
        if empty_is_error && rows.lengths.chunks(width).any(|ls| ls[first] == 0) {
            return Ok(None);
        }
        let count = rows.count(width);
        let mut entries = RowTable::entries_with_capacity(count.saturating_mul(1 + width))
            .map_err(|_| r.unsupported("its row table does not fit in memory".into()))?;
        // The largest point (row iterators of dense sizes) and start (a
        // tensor's length): no offset overflows below them, checked once.
        let max_point: Option<Vec<u64>> = (loops.row_sizes.iter())
            .map(|s| match s {
                RowSize::Dense(s) => Some(s.saturating_sub(1)),
                RowSize::Ragged(_) => None,
            })
            .collect();
        let max_start: Vec<u64> = tensors.iter().map(|t| t.len).collect();
        let exact = max_point.is_some_and(|m| plan.cannot_overflow(&m, &max_start));
        for i in 0..count {
            entries.push(rows.lengths[i * width + first]);
            let (point, starts) = (
                &rows.points[i * n..(i + 1) * n],
                &rows.starts[i * width..(i + 1) * width],
            );
            if exact {
                plan.offsets_with::<true>(point, starts, &mut entries);
            } else {
                plan.offsets_into(point, starts, &mut entries);
            }
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
                    let same_rows = t == 0
                        || data.is_some_and(|d| {
                            d.levels()
                                .map(|l| (l.axis(), l.offsets()))
                                .eq(rows.levels().map(|l| (l.axis(), l.offsets())))
                        });
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

/// What walking an operation's rows reads: the operation, its loops,
/// each iterator's position among the row iterators, the operands whose
/// rows are a linear function of the point (no ragged axis before their
/// innermost one), and scratch space.
struct Walker<'w, 'a> {
    r: &'w RaggedOp<'a>,
    loops: &'w RowLoops,
    /// Per iterator: its position among the row iterators
    /// (`usize::MAX`: not one).
    pos_of: Vec<usize>,
    /// Per tensor with one level: its row at a point, as a constant (fixed
    /// indices) plus each row iterator's position times its row-major
    /// weight.
    linear: Vec<Option<LinearRow>>,
}

/// A row number as a linear function of a point of the row iterators: a
/// constant, and each `(position, weight)`.
type LinearRow = (u64, Vec<(usize, u64)>);

/// Appends a few words (one by one: no call to copy them), or says that
/// memory ran out.
#[inline(always)]
fn append(v: &mut Vec<u64>, x: &[u64]) -> bool {
    if v.capacity() - v.len() < x.len() && v.try_reserve(x.len()).is_err() {
        return false;
    }
    for &w in x {
        v.push(w);
    }
    true
}

/// The result's rows as the walk finds them, per ragged level (outermost
/// first): every row's length so far, their total, and where the row
/// added last starts.
struct ResultRows {
    lengths: Vec<Vec<u64>>,
    total: Vec<u64>,
    start: Vec<u64>,
}

impl ResultRows {
    fn new(levels: usize) -> ResultRows {
        ResultRows {
            lengths: vec![Vec::new(); levels],
            total: vec![0; levels],
            start: vec![0; levels],
        }
    }

    /// Adds a row of `len` at level `l`; `None` if memory ran out.
    #[inline]
    fn add(&mut self, l: usize, len: u64) -> Option<()> {
        self.start[l] = self.total[l];
        self.total[l] = self.total[l].saturating_add(len);
        append(&mut self.lengths[l], &[len]).then_some(())
    }
}

/// A ragged operand of one level whose row moves by a fixed step with
/// the one row iterator (the walk's common case): row `base + i * step`
/// at row `i`, its start in values `offsets[row] * inner`.
#[derive(Clone, Copy)]
struct LinearLeaf<'d> {
    /// The tensor (result first).
    t: usize,
    base: u64,
    step: u64,
    /// Values per position along the ragged axis.
    inner: u64,
    /// The operand's row offsets.
    offsets: &'d [u64],
}

impl<'w, 'a> Walker<'w, 'a> {
    fn new(r: &'w RaggedOp<'a>, loops: &'w RowLoops) -> Walker<'w, 'a> {
        let mut pos_of = vec![usize::MAX; loops.structure.sizes.len()];
        for (p, &k) in loops.row_iters.iter().enumerate() {
            pos_of[k] = p;
        }
        let linear = (r.tensors.iter().enumerate())
            .map(|(t, tensor)| {
                let (var, _) = tensor.ragged?;
                if !tensor.outer_vars.is_empty() {
                    return None;
                }
                let (mut base, mut terms, mut mult) = (0u64, Vec::new(), 1u64);
                for (j, a) in axes_of(&loops.structure, t)[..var].iter().enumerate().rev() {
                    match a {
                        AxisIndex::Iterator(k) if pos_of[*k] != usize::MAX => {
                            terms.push((pos_of[*k], mult))
                        }
                        AxisIndex::Fixed(c) => base = base.wrapping_add(c.wrapping_mul(mult)),
                        _ => {}
                    }
                    mult = mult.wrapping_mul(tensor.dims[j]);
                }
                Some((base, terms))
            })
            .collect();
        Walker {
            r,
            loops,
            pos_of,
            linear,
        }
    }

    /// The row of operand `t` at the level of its ragged axis `upto`, at
    /// `point` (only the row iterators of the axes before `upto` are
    /// read): its axes before `upto` walked through its data's levels, a
    /// ragged row of length 1 read at 0 (it broadcasts).
    #[inline]
    fn row(&self, t: usize, upto: usize, point: &[u64]) -> Result<usize, GraphError> {
        let r = self.r;
        let tensor = &r.tensors[t];
        let Some((var, Some(data))) = tensor.ragged else {
            return Ok(0);
        };
        let too_few = |rows: usize| {
            r.unsupported(format!(
                "operand {} has {rows} rows where its shape has more",
                t - 1
            ))
        };
        let idx = match &self.linear[t] {
            Some((base, terms)) if upto == var => terms
                .iter()
                .fold(*base, |i, &(p, m)| i.wrapping_add(point[p].wrapping_mul(m))),
            _ => {
                let mut idx = 0u64;
                for (j, a) in axes_of(&self.loops.structure, t)[..upto].iter().enumerate() {
                    let p = match a {
                        AxisIndex::Iterator(k) => self
                            .pos_of
                            .get(*k)
                            .and_then(|&p| point.get(p))
                            .copied()
                            .unwrap_or(0),
                        AxisIndex::Fixed(c) => *c,
                        _ => 0,
                    };
                    idx = match data.level_at(j) {
                        Some(level) => {
                            let row = usize::try_from(idx).unwrap_or(usize::MAX);
                            if row >= level.rows() {
                                return Err(too_few(level.rows()));
                            }
                            let p = if level.row_len(row) == 1 { 0 } else { p };
                            level.row_start(row).saturating_add(p)
                        }
                        None => idx.saturating_mul(tensor.dims[j]).saturating_add(p),
                    };
                }
                idx
            }
        };
        let level = if upto == data.axis() {
            data
        } else {
            data.level_at(upto).unwrap_or(data)
        };
        let row = usize::try_from(idx).unwrap_or(usize::MAX);
        if row >= level.rows() {
            return Err(too_few(level.rows()));
        }
        Ok(row)
    }

    /// The length the members of ragged class `c` must have at `point`
    /// (at `depth`: the row iterators before it are set; `None`: at a
    /// row, where `inner` holds each tensor's innermost length), every
    /// member checked (DyND's rule: 1 or that length), and whether a row
    /// of 1 broadcast against another length.
    fn class_length(
        &self,
        graph: &SolvedGraph,
        c: usize,
        point: &[u64],
        depth: Option<usize>,
        inner: &[u64],
    ) -> Result<(u64, bool), GraphError> {
        let class = &self.loops.classes[c];
        let tensors = &self.r.tensors;
        // A member's length here (`None` for the result's ragged axes,
        // which take the class's).
        let extent = |t: usize, j: usize| -> Result<Option<u64>, GraphError> {
            let tensor = &tensors[t];
            Ok(if !tensor.is_var(j) {
                Some(tensor.dims[j])
            } else if t == 0 {
                None
            } else if depth.is_none() && tensor.ragged.is_some_and(|(v, _)| v == j) {
                // At a row: the innermost length, walked already.
                Some(inner[t])
            } else {
                let row = self.row(t, j, point)?;
                let level = tensor
                    .ragged
                    .and_then(|(_, d)| d)
                    .and_then(|d| d.level_at(j));
                Some(level.map_or(0, |l| l.row_len(row)))
            })
        };
        // The length the class's rows must have: the result's own size
        // when it is a number (a destination does not broadcast), else the
        // first length other than 1 among the operands, else 1; then every
        // member checked.
        let (mut result_size, mut operand) = (None, None);
        for &(t, j, _) in &class.members {
            match (t, extent(t, j)?) {
                (0, Some(n)) => result_size = result_size.or(Some(n)),
                (_, Some(n)) if n != 1 && t != 0 => operand = operand.or(Some(n)),
                _ => {}
            }
        }
        let required = result_size.or(operand).unwrap_or(1);
        let mut broadcast = false;
        for &(t, j, tied) in &class.members {
            let Some(n) = extent(t, j)? else { continue };
            let fits = n == required || (n == 1 && !tied);
            if !fits {
                let at = depth.map_or(point, |d| &point[..d]);
                let ragged = tensors[t].is_var(j);
                return Err(graph.row_error(self.r.op, t, j, at, n, required, ragged));
            }
            broadcast |= n != required && tensors[t].is_var(j);
        }
        Ok((required, broadcast))
    }
}

/// The axes of an operation's tensors in one class with a ragged axis
/// (lined up by a broadcast, or tied as equal): `(tensor, axis, tied)`,
/// axes in memory order, with the iterator they run along.
struct VarClass {
    members: Vec<(usize, usize, bool)>,
    /// The structure's iterator of the class (`None` if every member is
    /// fixed).
    iter: Option<usize>,
}

impl VarClass {
    /// The classes of the tensors' ragged axes (every level), from each
    /// slot's class (slots numbered tensor after tensor, axes in memory
    /// order).
    fn of(
        tensors: &[Tensor<'_>],
        slot_classes: &[(usize, bool)],
        structure: &Projections,
    ) -> Vec<VarClass> {
        let mut base = Vec::with_capacity(tensors.len());
        let mut next = 0;
        for t in tensors {
            base.push(next);
            next += t.dims.len();
        }
        let mut roots: Vec<usize> = Vec::new();
        for (t, &b) in tensors.iter().zip(&base) {
            if let Some((var, _)) = t.ragged {
                roots.extend(
                    t.outer_vars
                        .iter()
                        .chain([&var])
                        .map(|&v| slot_classes[b + v].0),
                );
            }
        }
        roots.sort_unstable();
        roots.dedup();
        let mut classes: Vec<VarClass> = roots
            .iter()
            .map(|_| VarClass {
                members: Vec::new(),
                iter: None,
            })
            .collect();
        for (t, tensor) in tensors.iter().enumerate() {
            for j in 0..tensor.dims.len() {
                let (root, tied) = slot_classes[base[t] + j];
                if let Ok(c) = roots.binary_search(&root) {
                    classes[c].members.push((t, j, tied));
                    if let AxisIndex::Iterator(k) = axes_of(structure, t)[j] {
                        classes[c].iter.get_or_insert(k);
                    }
                }
            }
        }
        classes
    }

    /// The operand whose innermost ragged axis is the class's only member
    /// besides the result's ragged axes, if that is so: then the class's
    /// length at a row is that operand's, and nothing can fail to fit.
    fn lone_operand(&self, tensors: &[Tensor<'_>]) -> Option<usize> {
        let mut lone = None;
        for &(t, j, _) in &self.members {
            let innermost = tensors[t].ragged.is_some_and(|(v, _)| v == j);
            match (t, innermost) {
                (0, true) => {}
                (_, true) if t != 0 && lone.is_none() => lone = Some(t),
                _ => return None,
            }
        }
        lone
    }

    /// The size of a dense member other than 1, if the class has one.
    fn dense_size(&self, tensors: &[Tensor<'_>]) -> Option<u64> {
        self.members
            .iter()
            .find(|&&(t, j, _)| !tensors[t].is_var(j) && tensors[t].dims[j] != 1)
            .map(|&(t, j, _)| tensors[t].dims[j])
    }
}

/// How one set of rows' lengths runs: the operation's step for those
/// lengths with its row iterators pinned to 1, each ragged tensor's
/// layout relative to its row's start, and which of the step's iterators
/// each row iterator is.
struct RowPlan {
    /// The step; a ragged tensor's offset is relative to its row's start.
    step: Step,
    /// The step's iterator for each row iterator that indexes a tensor,
    /// with the row iterator's position.
    pins: Vec<(usize, usize)>,
    /// The step's iterator for the innermost row iterator, if any.
    innermost: Option<usize>,
    /// Per layout (result first): its offset in the plan, the tensor whose
    /// row start it adds (ragged tensors only), and its stride along each
    /// pin, flat: what a row's offsets are computed from.
    moves: Vec<(u64, Option<usize>)>,
    pin_strides: Vec<u64>,
}

impl RowPlan {
    /// The plan for `step`, lowered with `rp` for the lengths `lengths`
    /// (each tensor's innermost ragged axis's size in the lowering);
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
        // Every axis along a row iterator, of any tensor: before a ragged
        // axis, a pinned ragged axis, or an axis after one (a
        // transposition within the row).
        for t in 0..tensors.len() {
            for (a, s) in axes_of(rp, t).iter().zip(axes_of(structure, t)) {
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
        let layouts = std::iter::once(&launch.result).chain(&launch.operands);
        let mut moves = Vec::with_capacity(slots.len());
        let mut pin_strides = Vec::with_capacity(slots.len() * pins.len());
        for (layout, &(t, var)) in layouts.zip(&slots) {
            moves.push((layout.offset, var.map(|_| t)));
            pin_strides.extend(pins.iter().map(|&(k, _)| layout.strides[k]));
        }
        Ok(RowPlan {
            step,
            pins,
            innermost,
            moves,
            pin_strides,
        })
    }

    /// Each layout's offset (result first) for the row at `point`,
    /// appended to `out`: the plan's, moved by the pinned iterators, plus
    /// a ragged tensor's row start (`starts`, per tensor).
    #[inline]
    fn offsets_into(&self, point: &[u64], starts: &[u64], out: &mut Vec<u64>) {
        self.offsets_with::<false>(point, starts, out)
    }

    /// [`RowPlan::offsets_into`], with plain arithmetic when `EXACT`: only
    /// where [`RowPlan::cannot_overflow`] said so for every point and start
    /// given (saturating, each multiply was a third of a row table's
    /// cost).
    #[inline]
    fn offsets_with<const EXACT: bool>(&self, point: &[u64], starts: &[u64], out: &mut Vec<u64>) {
        let pins = self.pins.len();
        for (i, &(offset, ragged)) in self.moves.iter().enumerate() {
            let strides = &self.pin_strides[i * pins..(i + 1) * pins];
            let mut o = offset;
            for (&stride, &(_, p)) in strides.iter().zip(&self.pins) {
                o = if EXACT {
                    o.wrapping_add(stride.wrapping_mul(point[p]))
                } else {
                    o.saturating_add(stride.saturating_mul(point[p]))
                };
            }
            let start = ragged.map_or(0, |t| starts[t]);
            out.push(if EXACT {
                o.wrapping_add(start)
            } else {
                o.saturating_add(start)
            });
        }
    }

    /// Whether no offset overflows for points up to `max_point` (by row
    /// iterator position) and starts up to `max_start` (by tensor).
    fn cannot_overflow(&self, max_point: &[u64], max_start: &[u64]) -> bool {
        let pins = self.pins.len();
        self.moves.iter().enumerate().all(|(i, &(offset, ragged))| {
            let strides = &self.pin_strides[i * pins..(i + 1) * pins];
            let moved = strides
                .iter()
                .zip(&self.pins)
                .try_fold(offset, |o, (&stride, &(_, p))| {
                    o.checked_add(stride.checked_mul(*max_point.get(p)?)?)
                });
            let start = ragged.map_or(Some(0), |t| max_start.get(t).copied());
            moved
                .zip(start)
                .and_then(|(o, s)| o.checked_add(s))
                .is_some()
        })
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

/// The operation's step with each tensor's innermost ragged axis of size
/// `lowered[t]` (a dense tensor's entry is not read) and every outer
/// ragged axis at its iterator's pinned size, with the projections it was
/// lowered with; `None` when it lowers to more than one kernel.
fn lower_at(
    r: &RaggedOp<'_>,
    loops: &RowLoops,
    lowered: &[u64],
    options: &LowerOptions,
) -> Result<Option<(Step, Projections)>, GraphError> {
    let shapes: Vec<SolvedShape> = (r.tensors.iter().enumerate())
        .map(|(t, tensor)| {
            let axes = axes_of(&loops.structure, t);
            with_ragged_sizes(tensor.shape, |j| {
                if tensor.ragged.is_some_and(|(v, _)| v == j) {
                    return lowered[t];
                }
                match axes[j] {
                    AxisIndex::Iterator(k) => loops.pinned_size.get(&k).copied().unwrap_or(2),
                    _ => 1,
                }
            })
        })
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

/// `shape` with every ragged axis of size `n`.
fn with_ragged_as(shape: &SolvedShape, n: u64) -> SolvedShape {
    with_ragged_sizes(shape, |_| n)
}

/// `shape` with its ragged axis at memory-order position `j` of size
/// `size(j)`.
fn with_ragged_sizes(shape: &SolvedShape, size: impl Fn(usize) -> u64) -> SolvedShape {
    let mut out = shape.clone();
    let mut j = 0;
    for row in [&mut out.batch, &mut out.output, &mut out.input] {
        for d in row.iter_mut() {
            if d.is_ragged() {
                *d = KnownDim::sized(size(j)).with_label(d.label().cloned());
            }
            j += 1;
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
