//! The fusion passes, as functions from a plan's lowerings to fewer,
//! larger ones: pointwise chains into their reader, pointwise steps into
//! the reduction they read as its epilogue.

use std::collections::{HashMap, HashSet};

use shape_core::kernel::{Expr, Kernel, Launch, Layout, RowTable};
use shape_graph::{BufferRef, Graph, Lowered, OpId, Step, TensorId};

use crate::plan::read_tensors;

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

/// Where each operation stands in `order`, and how many reads of each
/// tensor there are: what both fusions look up. An operation reads a
/// tensor as many times as its step that reads it most does (one step, or
/// one step per run of rows, for a ragged operation lowered row by row);
/// a ragged operation not lowered yet (in `ragged`) reads each operand.
fn fusion_index(
    graph: &Graph,
    order: &[OpId],
    lowered: &[Option<Lowered>],
    ragged: &HashSet<OpId>,
) -> (HashMap<OpId, usize>, HashMap<TensorId, usize>) {
    let position = order.iter().enumerate().map(|(i, &op)| (op, i)).collect();
    let mut readers: HashMap<TensorId, usize> = HashMap::new();
    for (&op, l) in order.iter().zip(lowered) {
        let (Some((_, operands, _)), Some(l)) = (graph.op(op), l) else {
            continue;
        };
        let mut counts: HashMap<TensorId, usize> = HashMap::new();
        if ragged.contains(&op) && l.steps.is_empty() {
            for &t in operands {
                *counts.entry(t).or_default() += 1;
            }
        }
        for step in &l.steps {
            let mut here: HashMap<TensorId, usize> = HashMap::new();
            let one = Lowered {
                scratch: Vec::new(),
                steps: vec![step.clone()],
            };
            for t in read_tensors(&one, operands) {
                *here.entry(t).or_default() += 1;
            }
            for (t, n) in here {
                let c = counts.entry(t).or_default();
                *c = (*c).max(n);
            }
        }
        for (t, n) in counts {
            *readers.entry(t).or_default() += n;
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
///
/// With `per_row` (ragged operations lowered for their rows, a launch per
/// run of rows), a producer of `k` steps fuses into a reader of `k` steps
/// step by step: the reader's step `i` computes, where it loads the
/// result, the producer's step `i`, which must write exactly the elements
/// that step reads (the same rows), for every `i`, or nothing fuses.
pub(crate) fn fuse_pointwise(
    graph: &Graph,
    order: &[OpId],
    lowered: &mut [Option<Lowered>],
    outputs: &HashSet<TensorId>,
    ragged: &HashSet<OpId>,
    per_row: bool,
) {
    let (position, readers) = fusion_index(graph, order, lowered, ragged);
    for c in 0..order.len() {
        let Some((_, c_operands, _)) = graph.op(order[c]) else {
            continue;
        };
        // Each operand in turn; a fused producer's own operands are then
        // candidates too (through `BufferRef::Tensor`).
        let mut j = 0;
        while let Some(consumer) = lowered[c].as_ref() {
            let steps = consumer.steps.as_slice();
            let step = match steps {
                [step] => step,
                [step, ..] if per_row => step,
                _ => break,
            };
            if j >= step.operands.len()
                || steps
                    .iter()
                    .any(|s| s.operands.get(j) != step.operands.get(j))
            {
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
                if made.steps.len() != steps.len() {
                    return None;
                }
                let fused: Option<Vec<Step>> = steps
                    .iter()
                    .zip(&made.steps)
                    .map(|(outer, inner)| fuse_step(outer, j, c_operands, inner, p_operands))
                    .collect();
                fused.map(|s| (p, s))
            });
            match fused {
                Some((p, s)) => {
                    if let Some(l) = lowered[p].take() {
                        recycle_tables(l.steps);
                    }
                    if let Some(l) = lowered[c].as_mut() {
                        recycle_tables(std::mem::replace(&mut l.steps, s));
                    }
                    // Operand `j` is now the producer's first operand.
                }
                None => j += 1,
            }
        }
    }
}

/// Gives back the memory of the row tables of `steps` that nothing else
/// holds, for the next tables ([`RowTable::recycle`]).
pub(crate) fn recycle_tables(steps: Vec<Step>) {
    for step in steps {
        if let Some(table) = step
            .launch
            .rows
            .and_then(|t| std::sync::Arc::try_unwrap(t).ok())
        {
            table.recycle();
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
    // A call step runs a user's function, not its kernel: never fused.
    let buffers_ok = |s: &Step| {
        s.result == BufferRef::Result
            && s.call.is_none()
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
    // Launches over row tables fuse only with each other, row for row.
    if outer.launch.rows.is_some() != inner.launch.rows.is_some() {
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
    let mut launch = Launch::new(
        outer.launch.sizes.clone(),
        outer.launch.result.clone(),
        layouts,
    );
    if let (Some(o), Some(i)) = (&outer.launch.rows, &inner.launch.rows) {
        launch = launch.with_rows(fused_rows(o, j, i, &at)?);
    }
    Some(Step {
        kernel: Kernel::new(
            outer.kernel.iterators.clone(),
            count,
            body,
            outer.kernel.accumulate,
        ),
        launch,
        result: BufferRef::Result,
        operands: refs,
        call: None,
    })
}

/// The row table of `outer` with its operand `j` computed by `inner`, row
/// for row: each row's length and offsets, `inner`'s operands' offsets in
/// place of operand `j`'s. `None` unless the tables have the same rows of
/// the same lengths along the same iterator (`at` maps `inner`'s
/// iterators to `outer`'s), and each row of `outer` reads operand `j`
/// exactly where that row of `inner` writes it.
fn fused_rows(
    outer: &RowTable,
    j: usize,
    inner: &RowTable,
    at: &[Option<usize>],
) -> Option<RowTable> {
    if outer.len() != inner.len() || at.get(inner.along).copied().flatten() != Some(outer.along) {
        return None;
    }
    // The fused launch's operands: the outer ones less `j`, and the inner.
    let operands = (outer.tensors + inner.tensors).checked_sub(3)?;
    let mut entries =
        RowTable::entries_with_capacity(outer.len().saturating_mul(2 + operands)).ok()?;
    // Each row: its length, then the result's offset and each operand's.
    let rows = (outer.entries.chunks_exact(outer.tensors + 1))
        .zip(inner.entries.chunks_exact(inner.tensors + 1));
    for (o, i) in rows {
        if o[0] != i[0] || o.get(2 + j) != i.get(1) {
            return None;
        }
        // Word by word: a row is a few words, and a copy call per part
        // cost more than the words.
        let words = o[..2 + j].iter().chain(&i[2..]).chain(&o[3 + j..]);
        for &w in words {
            entries.push(w);
        }
    }
    RowTable::new(outer.along, operands, entries)
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
pub(crate) fn fuse_epilogues(
    graph: &Graph,
    order: &[OpId],
    lowered: &mut [Option<Lowered>],
    outputs: &HashSet<TensorId>,
    ragged: &HashSet<OpId>,
) {
    let (position, readers) = fusion_index(graph, order, lowered, ragged);
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
    // A launch over a row table is not fused (its rows' offsets would
    // need the other step's too).
    let refused =
        |s: &Step| s.launch.races == shape_core::Races::Refused && s.launch.rows.is_none();
    let buffers_ok = |s: &Step| {
        s.result == BufferRef::Result
            && s.call.is_none()
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
        call: None,
    })
}
