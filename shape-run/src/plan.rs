//! Planning a run: the operations the outputs need, in order, lowered,
//! fused, with each tensor's last use and the run's peak memory.

use std::collections::{HashMap, HashSet};

use petgraph::algo::toposort;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::{Dfs, NodeFiltered, Reversed};
use shape_graph::{BufferRef, Graph, GraphError, Lowered, OpId, SolvedGraph, TensorId};

use crate::fusion::{fuse_epilogues, fuse_pointwise};
use crate::options::RunOptions;
use crate::pool::Pool;

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
    /// For a ragged operation, the ragged operations that run with it
    /// (in order, before it): each one's result is read by the next of
    /// the group alone, so the run lowers them all for the rows it knows
    /// and fuses their steps as a dense chain's are fused (see
    /// [`RunGraph::plan`](crate::RunGraph::plan)). Empty otherwise.
    pub fused: Vec<OpId>,
}

/// How a run goes, decided before it starts: which operations run in which
/// order, when each buffer is freed, and how much memory the run needs.
#[derive(Clone, Debug)]
pub struct RunPlan {
    pub(crate) ops: Vec<PlannedOp>,
    pub(crate) leaves: Vec<TensorId>,
    pub(crate) outputs: Vec<TensorId>,
    /// `outputs` as a set, for the fusions run with each ragged group.
    pub(crate) output_set: HashSet<TensorId>,
    pub(crate) leaf_releases: Vec<TensorId>,
    pub(crate) peak_bytes: u128,
    pub(crate) allocated_bytes: u128,
    pub(crate) options: RunOptions,
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
    /// reuse, and the outputs. Ragged tensors count as empty here: their
    /// lengths come with the data ([`RunPlan::peak_bytes_for`] counts
    /// them).
    pub fn peak_bytes(&self) -> u128 {
        self.peak_bytes
    }

    /// [`RunPlan::peak_bytes`] for this data: the run followed with the
    /// rows `inputs` give, so that ragged tensors count their real bytes,
    /// their values (4 bytes each) and their offsets (8 bytes for each
    /// row and one more, held to the end of the run as the run holds
    /// them). Each ragged operation is lowered for its rows and fused as
    /// the run fuses it: a fused-away intermediate takes nothing. For a
    /// plan without ragged tensors it is [`RunPlan::peak_bytes`] (data
    /// not given counts as the shape says).
    ///
    /// ```
    /// use shape_graph::Graph;
    /// use shape_run::{HostTensor, Inputs, RunGraph, RunOptions};
    /// let mut g = Graph::new();
    /// let x = g.input("x", "2, var")?;
    /// let y = g.unary("exp", x)?;
    /// let solved = g.solve()?;
    /// let plan = solved.plan(&[y], &RunOptions::default())?;
    /// assert_eq!(plan.peak_bytes(), 0);
    /// // Rows of 1 and 2: x and y hold 3 values (12 bytes) and 3 offsets
    /// // (24 bytes) each.
    /// let data = HostTensor::ragged(vec![2], &[1, 2], vec![], vec![1.0, 2.0, 3.0])?;
    /// let inputs = Inputs::new().with(x, data);
    /// assert_eq!(plan.peak_bytes_for(&solved, &inputs)?, 2 * (12 + 24));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn peak_bytes_for(
        &self,
        solved: &SolvedGraph,
        inputs: &crate::Inputs,
    ) -> Result<u128, crate::RunError> {
        let mut memory = Memory::default();
        let mut pool = Pool::new();
        let mut rows: HashMap<TensorId, shape_core::RaggedAxis> = HashMap::new();
        for &t in &self.leaves {
            let axes = solved.ragged_axes(t)?;
            let len = match (axes.is_empty(), inputs.get(t)) {
                (false, Some(data)) => {
                    let r = data
                        .rows_along(&axes)
                        .map_err(|e| GraphError::RaggedLayout {
                            tensor: solved.graph().tensor_ref(t).ok().map(Box::new),
                            shape: solved.shape(t).map(|s| s.to_string()).unwrap_or_default(),
                            reason: e.to_string(),
                        })?;
                    memory.offsets(&r);
                    rows.insert(t, r);
                    data.values().len() as u64
                }
                (true, Some(data)) => data.values().len() as u64,
                (_, None) => len_of(solved, t)?,
            };
            memory.leaf(t, len);
        }
        memory.note();
        for planned in &self.ops {
            if planned.ragged {
                // The buffers are the same with or without row tables.
                let group = crate::execute::lower_group(solved, self, planned, &mut rows, false)?;
                for (op, lowered, len) in group {
                    let result = result_of(solved.graph(), op)?;
                    memory.result(&mut pool, result, len, &lowered.scratch);
                    if let Some(r) = rows.get(&result) {
                        memory.offsets(r);
                    }
                }
            } else {
                let result = result_of(solved.graph(), planned.op)?;
                let scratch = &planned.lowered.scratch;
                memory.result(&mut pool, result, planned.result_len, scratch);
            }
            for &t in &planned.releases {
                memory.free(&mut pool, t);
            }
        }
        Ok(memory.peak)
    }

    /// The bytes of all buffers the run allocates (without reuse, this is
    /// what every result and scratch buffer would take).
    pub fn allocated_bytes(&self) -> u128 {
        self.allocated_bytes
    }
}

/// Counts what a run holds, to find its peak.
#[derive(Default)]
struct Memory {
    live: u128,
    pooled: u128,
    peak: u128,
    allocated: u128,
    /// The elements of each tensor held.
    held: HashMap<TensorId, u64>,
}

impl Memory {
    /// A leaf's data, held from the start.
    fn leaf(&mut self, t: TensorId, len: u64) {
        self.live += len as u128 * 4;
        self.allocated += len as u128 * 4;
        self.held.insert(t, len);
    }

    /// A ragged tensor's offsets, held to the end of the run.
    fn offsets(&mut self, rows: &shape_core::RaggedAxis) {
        self.live += rows
            .levels()
            .map(|l| l.offsets().len() as u128 * 8)
            .sum::<u128>();
        self.note();
    }

    /// An operation's result of `len` elements, and its scratch buffers
    /// while it runs.
    fn result(&mut self, pool: &mut Pool<()>, t: TensorId, len: u64, scratch: &[u64]) {
        self.acquire(pool, len);
        for &len in scratch {
            self.acquire(pool, len);
        }
        for &len in scratch {
            self.release(pool, len);
        }
        self.held.insert(t, len);
    }

    /// Frees a tensor's buffer, if it was ever written.
    fn free(&mut self, pool: &mut Pool<()>, t: TensorId) {
        if let Some(len) = self.held.remove(&t) {
            self.release(pool, len);
        }
    }

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

/// The tensor operation `op` computes.
fn result_of(graph: &Graph, op: OpId) -> Result<TensorId, GraphError> {
    graph
        .op(op)
        .map(|(_, _, r)| r)
        .ok_or(GraphError::UnknownOp(op.index()))
}

fn len_of(solved: &SolvedGraph, t: TensorId) -> Result<u64, GraphError> {
    if solved.is_ragged(t)? {
        return Ok(0);
    }
    let n = crate::host::elements(&solved.shape(t)?.memory_dims());
    Ok(u64::try_from(n).unwrap_or(u64::MAX))
}

/// [`RunGraph::plan`](crate::RunGraph::plan): the operations the outputs
/// need in order, lowered and fused, each tensor's last use, and the
/// memory the run will hold.
pub(crate) fn plan(
    solved: &SolvedGraph,
    outputs: &[TensorId],
    options: &RunOptions,
) -> Result<RunPlan, GraphError> {
    let graph = solved.graph();
    let mut wanted = Vec::with_capacity(outputs.len());
    let mut seen = HashSet::with_capacity(outputs.len());
    for &t in outputs {
        graph.kind(t)?;
        if seen.insert(t) {
            wanted.push(t);
        }
    }
    let order = needed_in_order(graph, &wanted)?;
    let (kept, ragged) = lowered_and_fused(solved, &order, &seen, options)?;
    let uses = LastUses::of(graph, &kept, &ragged, &wanted, &seen)?;
    let (ops, memory) = with_memory(solved, kept, &ragged, uses.releases, &uses.leaves)?;
    Ok(RunPlan {
        ops,
        leaves: uses.leaves,
        outputs: wanted,
        output_set: seen,
        leaf_releases: uses.leaf_releases,
        peak_bytes: memory.peak,
        allocated_bytes: memory.allocated,
        options: options.clone(),
    })
}

/// The operations the tensors `wanted` depend on, in an order where each
/// comes after those whose results it reads (over the operation graph,
/// with `petgraph`).
fn needed_in_order(graph: &Graph, wanted: &[TensorId]) -> Result<Vec<OpId>, GraphError> {
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
    for &t in wanted {
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
    let order = toposort(&filtered, None)
        .map_err(|cycle| GraphError::UnknownOp(cycle.node_id().index()))?;
    Ok(order.into_iter().map(|n| deps[n]).collect())
}

/// The operations a plan keeps after fusion, each with its kernels.
type Kept = Vec<(OpId, Lowered)>;

/// The ragged operations of a plan, and the groups of them the run
/// lowers and fuses together.
#[derive(Default)]
pub(crate) struct RaggedGroups {
    /// Every ragged operation.
    pub(crate) ops: HashSet<OpId>,
    /// For the last operation of each group, the others, in order.
    pub(crate) fused: HashMap<OpId, Vec<OpId>>,
}

/// Every operation of `order` lowered (an operation on ragged tensors is
/// left empty: the run lowers it when it knows the rows), then fused
/// unless `options` says not to; the operations fused away are left out.
/// Ragged operations are grouped instead: one whose result only one
/// ragged operation reads (and is not an output) runs with that reader,
/// which the run lowers and fuses with it once the rows are known.
fn lowered_and_fused(
    solved: &SolvedGraph,
    order: &[OpId],
    outputs: &HashSet<TensorId>,
    options: &RunOptions,
) -> Result<(Kept, RaggedGroups), GraphError> {
    let graph = solved.graph();
    let mut groups = RaggedGroups::default();
    for &op in order {
        if solved.op_is_ragged(op)? {
            groups.ops.insert(op);
        }
    }
    let mut lowered: Vec<Option<Lowered>> = Vec::with_capacity(order.len());
    for &op in order {
        lowered.push(Some(if groups.ops.contains(&op) {
            Lowered::default()
        } else {
            solved.lower(op, &options.lowering())?
        }));
    }
    if !options.unfused {
        fuse_pointwise(graph, order, &mut lowered, outputs, &groups.ops, false);
        fuse_epilogues(graph, order, &mut lowered, outputs, &groups.ops);
        group_ragged(graph, order, &mut lowered, outputs, &mut groups);
    }
    let kept: Vec<(OpId, Lowered)> = order
        .iter()
        .zip(lowered)
        .filter_map(|(&op, l)| l.map(|l| (op, l)))
        .collect();
    Ok((kept, groups))
}

/// Groups the ragged operations of `order` (see [`lowered_and_fused`]):
/// each one whose result is read by one ragged operation alone, once, and
/// is not an output leaves `lowered` and joins its reader's group.
fn group_ragged(
    graph: &Graph,
    order: &[OpId],
    lowered: &mut [Option<Lowered>],
    outputs: &HashSet<TensorId>,
    groups: &mut RaggedGroups,
) {
    let mut readers: HashMap<TensorId, (usize, OpId)> = HashMap::new();
    for (&op, l) in order.iter().zip(lowered.iter()) {
        let (Some((_, operands, _)), Some(l)) = (graph.op(op), l) else {
            continue;
        };
        let reads: Vec<TensorId> = if groups.ops.contains(&op) {
            operands.to_vec()
        } else {
            read_tensors(l, operands).collect()
        };
        for t in reads {
            let e = readers.entry(t).or_insert((0, op));
            e.0 += 1;
            e.1 = op;
        }
    }
    let mut joins: HashMap<OpId, OpId> = HashMap::new();
    for (&op, l) in order.iter().zip(lowered.iter()) {
        let Some((_, _, result)) = graph.op(op) else {
            continue;
        };
        if l.is_none() || !groups.ops.contains(&op) || outputs.contains(&result) {
            continue;
        }
        if let Some(&(1, reader)) = readers.get(&result) {
            if groups.ops.contains(&reader) {
                joins.insert(op, reader);
            }
        }
    }
    // Each joining operation's group is its reader's: found from the last
    // operation back, a reader's before its producers', so that a chain
    // of n joins takes n steps, not n^2 (each op walking to the root).
    let mut root_of: HashMap<OpId, OpId> = HashMap::with_capacity(joins.len());
    for &op in order.iter().rev() {
        if let Some(&reader) = joins.get(&op) {
            let root = root_of.get(&reader).copied().unwrap_or(reader);
            root_of.insert(op, root);
        }
    }
    for (i, &op) in order.iter().enumerate() {
        if let Some(&root) = root_of.get(&op) {
            groups.fused.entry(root).or_default().push(op);
            lowered[i] = None;
        }
    }
}

/// Where each tensor is read for the last time.
struct LastUses {
    /// The tensors no operation computes that the run reads, in order.
    leaves: Vec<TensorId>,
    /// For each kept operation, the tensors whose last use it is.
    releases: Vec<Vec<TensorId>>,
    /// The leaves no step reads (and that are not outputs): freed at once.
    leaf_releases: Vec<TensorId>,
}

impl LastUses {
    /// The last step that reads each tensor of `kept`; outputs (in
    /// `seen`) live to the end.
    fn of(
        graph: &Graph,
        kept: &[(OpId, Lowered)],
        ragged: &RaggedGroups,
        wanted: &[TensorId],
        seen: &HashSet<TensorId>,
    ) -> Result<LastUses, GraphError> {
        // A group reads what each of its operations reads.
        let reads = |op: &OpId, l: &Lowered, operands: &[TensorId]| -> Vec<TensorId> {
            if ragged.ops.contains(op) {
                let members = ragged.fused.get(op).map(Vec::as_slice).unwrap_or(&[]);
                let mut all = Vec::new();
                for &m in members {
                    all.extend(
                        graph
                            .op(m)
                            .map(|(_, o, _)| o.iter().copied())
                            .into_iter()
                            .flatten(),
                    );
                }
                all.extend_from_slice(operands);
                all
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
        for &t in wanted {
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
        Ok(LastUses {
            leaves,
            releases,
            leaf_releases,
        })
    }
}

/// The planned operations, with what each releases, and the memory the
/// run holds as the runner will use it (leaves first, then each result
/// and scratch buffer taken from the pool or allocated).
fn with_memory(
    solved: &SolvedGraph,
    kept: Kept,
    ragged: &RaggedGroups,
    mut releases: Vec<Vec<TensorId>>,
    leaves: &[TensorId],
) -> Result<(Vec<PlannedOp>, Memory), GraphError> {
    let graph = solved.graph();
    let mut memory = Memory::default();
    let mut pool = Pool::new();
    for &t in leaves {
        memory.leaf(t, len_of(solved, t)?);
    }
    memory.note();
    let mut ops = Vec::with_capacity(kept.len());
    for (step, (op, lowered)) in kept.into_iter().enumerate() {
        let fused = ragged.fused.get(&op).cloned().unwrap_or_default();
        // The ragged operations of a group, before their rows are known:
        // as if none fused.
        for &member in &fused {
            let result = result_of(graph, member)?;
            memory.result(&mut pool, result, len_of(solved, result)?, &[]);
        }
        let result = result_of(graph, op)?;
        let result_len = len_of(solved, result)?;
        memory.result(&mut pool, result, result_len, &lowered.scratch);
        for &t in &releases[step] {
            memory.free(&mut pool, t);
        }
        ops.push(PlannedOp {
            op,
            lowered,
            result_len,
            releases: std::mem::take(&mut releases[step]),
            ragged: ragged.ops.contains(&op),
            fused,
        });
    }
    Ok((ops, memory))
}

/// The tensors the steps of `l` read, for an operation with `operands`.
pub(crate) fn read_tensors<'a>(
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
