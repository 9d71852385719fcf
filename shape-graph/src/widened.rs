//! Axes that a later use widened: OCANNL's rule makes a computed tensor
//! "as large as its uses allow", so in
//!
//! ```text
//! const x: 2, 1 = [1, 2]
//! input y: 2, 4
//! h = x * 1
//! s = einsum("a,b=>a", h)      # sums h's second axis
//! m = y + h                    # makes h 2, 4: s is [4, 8], not [1, 2]
//! ```
//!
//! the last line changes `s`. That is the documented rule, but numpy code
//! never does it, so [`SolvedGraph::widened_axes`] finds each place where
//! it changes a value: an axis of a pointwise result that is larger than
//! every operand's axis it was computed from (each is 1 or missing), which
//! another operation reduces, concatenates, indexes or slides a window
//! along. Broadcasting a widened axis elementwise changes no value, so it
//! is not reported.

use shape_core::{IterKind, RowKind};

use crate::graph::{GraphError, OpId, SolvedGraph, TensorId, TensorKind};
use crate::projections::{AxisIndex, Projections};

/// What an operation does along a widened axis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum WidenedUse {
    /// Sums (or takes the maximum, ...) along it.
    Reduces,
    /// Concatenates along it.
    Concatenates,
    /// Reads one position of it (a fixed index).
    Indexes,
    /// Slides a convolution's window along it.
    Windows,
}

impl WidenedUse {
    /// The verb, as messages use it.
    pub fn verb(self) -> &'static str {
        match self {
            WidenedUse::Reduces => "reduces",
            WidenedUse::Concatenates => "concatenates",
            WidenedUse::Indexes => "indexes",
            WidenedUse::Windows => "slides a window",
        }
    }
}

/// An axis of a computed tensor widened by a later use, where the size it
/// was widened to changes a value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WidenedAxis {
    /// The widened tensor.
    pub tensor: TensorId,
    /// Its axis, in memory order (batch, output, input).
    pub axis: usize,
    /// The row the axis is in.
    pub row: RowKind,
    /// The size it has.
    pub size: u64,
    /// The operation that computed it (each operand had 1 there or no
    /// axis at all).
    pub computed_by: OpId,
    /// The first operation that uses it with an axis of `size` beside it:
    /// the use that widened it.
    pub widened_by: Option<OpId>,
    /// The operation that sees the widened size.
    pub seen_by: OpId,
    /// What that operation does along the axis.
    pub seen_as: WidenedUse,
}

/// The row and the position in it of each memory-order axis.
fn axis_rows(shape: &shape_core::SolvedShape) -> Vec<(RowKind, usize, usize)> {
    let mut out = Vec::new();
    for kind in [RowKind::Batch, RowKind::Output, RowKind::Input] {
        let n = shape.row(kind).len();
        for i in 0..n {
            // (row, position from the left, position from the end)
            out.push((kind, i, n - 1 - i));
        }
    }
    out
}

impl SolvedGraph {
    /// Every axis a later use widened where the widened size changes a
    /// value, in the order of the operations that see them: an axis of a
    /// pointwise result larger than every operand's axis it was computed
    /// from (each is 1 or missing), which another operation reduces,
    /// concatenates, indexes or slides a window along ([`WidenedAxis`]).
    /// OCANNL's rule makes an intermediate as large as its uses allow;
    /// numpy never widens a computed array, so a front end can warn here.
    pub fn widened_axes(&self) -> Result<Vec<WidenedAxis>, GraphError> {
        let g = self.graph();
        // The operations that read each tensor, in order.
        let mut readers: Vec<Vec<(OpId, usize)>> = vec![Vec::new(); g.tensor_ids().count()];
        for op in g.op_ids() {
            if let Some((_, operands, _)) = g.op(op) {
                for (p, t) in operands.iter().enumerate() {
                    if let Some(r) = readers.get_mut(t.index()) {
                        r.push((op, p));
                    }
                }
            }
        }
        let mut found = Vec::new();
        for op in g.op_ids() {
            let Some((operation, operands, result)) = g.op(op) else {
                continue;
            };
            if !operation.pointwise() || readers[result.index()].is_empty() {
                continue;
            }
            if !matches!(g.kind(result)?, TensorKind::Result(_)) {
                continue;
            }
            let shape = self.shape(result)?;
            let operand_shapes = operands
                .iter()
                .map(|&t| self.shape(t))
                .collect::<Result<Vec<_>, _>>()?;
            for (axis, (kind, _, from_end)) in axis_rows(shape).into_iter().enumerate() {
                let Some(size) = shape.row(kind)[shape.row(kind).len() - 1 - from_end]
                    .static_size()
                    .filter(|n| *n > 1)
                else {
                    continue;
                };
                // Every operand has 1 there or no axis at all.
                let from_operands = operand_shapes.iter().any(|s| {
                    let row = s.row(kind);
                    row.len() > from_end && row[row.len() - 1 - from_end].static_size() != Some(1)
                });
                if from_operands {
                    continue;
                }
                if let Some(w) = self.first_sight(result, axis, size, op, &readers)? {
                    found.push(w);
                }
            }
        }
        found.sort_by_key(|w| (w.seen_by.index(), w.tensor.index(), w.axis));
        Ok(found)
    }

    /// The first reader of `t` that reduces, concatenates, indexes or
    /// windows along `axis`, with the first reader that ties it to an
    /// axis of `size` elsewhere.
    fn first_sight(
        &self,
        t: TensorId,
        axis: usize,
        size: u64,
        computed_by: OpId,
        readers: &[Vec<(OpId, usize)>],
    ) -> Result<Option<WidenedAxis>, GraphError> {
        let g = self.graph();
        let mut widened_by = None;
        let mut seen = None;
        for &(op, position) in &readers[t.index()] {
            let Some((operation, _, _)) = g.op(op) else {
                continue;
            };
            let p: Projections = self.projections(op)?;
            let Some(index) = p.operands.get(position).and_then(|a| a.get(axis)) else {
                continue;
            };
            let how = match index {
                AxisIndex::Fixed(_) => Some(WidenedUse::Indexes),
                AxisIndex::Affine { .. } => Some(WidenedUse::Windows),
                AxisIndex::Iterator(k) if p.kinds.get(*k) == Some(&IterKind::Reduction) => {
                    Some(WidenedUse::Reduces)
                }
                AxisIndex::Iterator(k) if operation.name() == "concat" => {
                    // A part's concatenated axis has an iterator of its own,
                    // which the result's axis does not share.
                    (!p.result.contains(&AxisIndex::Iterator(*k)))
                        .then_some(WidenedUse::Concatenates)
                }
                AxisIndex::Iterator(k) => {
                    let shared = p.result.iter().chain(p.operands.iter().flatten());
                    if widened_by.is_none()
                        && shared.filter(|i| **i == AxisIndex::Iterator(*k)).count() > 1
                        && p.sizes.get(*k) == Some(&size)
                    {
                        widened_by = Some(op);
                    }
                    None
                }
                _ => None,
            };
            if let (Some(how), None) = (how, seen) {
                seen = Some((op, how));
            }
        }
        Ok(seen.map(|(seen_by, seen_as)| {
            let shape = self.shape(t).ok();
            let row = shape
                .map(|s| axis_rows(s)[axis].0)
                .unwrap_or(RowKind::Output);
            WidenedAxis {
                tensor: t,
                axis,
                row,
                size,
                computed_by,
                widened_by,
                seen_by,
                seen_as,
            }
        }))
    }
}
