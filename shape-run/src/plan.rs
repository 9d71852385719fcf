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
}

/// How a run goes, decided before it starts: which operations run in which
/// order, when each buffer is freed, and how much memory the run needs.
#[derive(Clone, Debug)]
pub struct RunPlan {
    pub(crate) ops: Vec<PlannedOp>,
    pub(crate) leaves: Vec<TensorId>,
    pub(crate) outputs: Vec<TensorId>,
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

/// Every operation of `order` lowered (an operation on ragged tensors is
/// left empty: the run lowers it when it knows the rows), then fused
/// unless `options` or a ragged operation says not to; the operations
/// fused away are left out. Also the ragged operations.
fn lowered_and_fused(
    solved: &SolvedGraph,
    order: &[OpId],
    outputs: &HashSet<TensorId>,
    options: &RunOptions,
) -> Result<(Kept, HashSet<OpId>), GraphError> {
    let graph = solved.graph();
    // Lower every operation, then fuse pointwise chains. Operations on
    // ragged tensors are lowered when the run knows the rows; a plan
    // with any does not fuse.
    let mut ragged = HashSet::new();
    for &op in order {
        if solved.op_is_ragged(op)? {
            ragged.insert(op);
        }
    }
    let mut lowered: Vec<Option<Lowered>> = Vec::with_capacity(order.len());
    for &op in order {
        lowered.push(Some(if ragged.contains(&op) {
            Lowered::default()
        } else {
            solved.lower(op, &options.lowering())?
        }));
    }
    if !options.unfused && ragged.is_empty() {
        fuse_pointwise(graph, order, &mut lowered, outputs);
        fuse_epilogues(graph, order, &mut lowered, outputs);
    }
    let kept: Vec<(OpId, Lowered)> = order
        .iter()
        .zip(lowered)
        .filter_map(|(&op, l)| l.map(|l| (op, l)))
        .collect();
    Ok((kept, ragged))
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
        ragged: &HashSet<OpId>,
        wanted: &[TensorId],
        seen: &HashSet<TensorId>,
    ) -> Result<LastUses, GraphError> {
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
    ragged: &HashSet<OpId>,
    mut releases: Vec<Vec<TensorId>>,
    leaves: &[TensorId],
) -> Result<(Vec<PlannedOp>, Memory), GraphError> {
    let graph = solved.graph();
    let mut memory = Memory::default();
    let mut pool = Pool::new();
    for &t in leaves {
        let len = len_of(solved, t)? as u128;
        memory.live += len * 4;
        memory.allocated += len * 4;
    }
    memory.note();
    let mut ops = Vec::with_capacity(kept.len());
    for (step, (op, lowered)) in kept.into_iter().enumerate() {
        let (_, _, result) = graph.op(op).ok_or(GraphError::UnknownOp(op.index()))?;
        let result_len = len_of(solved, result)?;
        memory.acquire(&mut pool, result_len);
        for &len in &lowered.scratch {
            memory.acquire(&mut pool, len);
        }
        for &len in &lowered.scratch {
            memory.release(&mut pool, len);
        }
        for &t in &releases[step] {
            memory.release(&mut pool, len_of(solved, t)?);
        }
        ops.push(PlannedOp {
            op,
            lowered,
            result_len,
            releases: std::mem::take(&mut releases[step]),
            ragged: ragged.contains(&op),
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
