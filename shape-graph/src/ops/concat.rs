//! Concatenation along the last output axis: `concat(a, b, ...)` puts the
//! operands one after another along their last output axis; every other
//! axis broadcasts as in a pointwise operation.
//!
//! The whole axis is the sum of the parts (a `DimSum` constraint): any one
//! unknown size among them is inferred from the others. Lowering gives one
//! copy kernel per operand, each writing its range of the result.

use std::sync::Arc;

use shape_core::kernel::{Accumulate, Expr, IterKind, Kernel, Launch};
use shape_core::{Dim, Row, RowKind};

use shape_solver::Constraint;
use crate::graph::GraphError;
use crate::lowering::{BufferRef, Lowered, LoweringCx, Step};
use crate::operation::{ConstraintCx, Operation};
use shape_solver::RowSite;
use crate::projections::{AxisIndex, AxisSite, ProjectionBuilder};
use crate::registry::{BuildArgs, OpEntry};
use crate::sample::SampleCx;

/// The most operands one concatenation takes.
pub const MAX_PARTS: usize = 64;

/// Concatenation of `parts` tensors along their last output axis.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Concat {
    parts: usize,
}

impl Concat {
    /// A concatenation of `parts` tensors (2 up to 64).
    pub fn new(parts: usize) -> Result<Concat, GraphError> {
        if (2..=MAX_PARTS).contains(&parts) {
            Ok(Concat { parts })
        } else {
            Err(GraphError::Arity {
                op: Arc::from("concat"),
                expected: parts.clamp(2, MAX_PARTS),
                found: parts,
                given: Vec::new(),
            })
        }
    }
}

impl Operation for Concat {
    fn name(&self) -> &str {
        "concat"
    }

    fn arity(&self) -> usize {
        self.parts
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        for kind in [RowKind::Batch, RowKind::Input] {
            for operand in 0..self.parts {
                cx.broadcast(RowSite::result(kind), RowSite::operand(operand, kind));
            }
        }
        // Output rows: `[..q.., whole]` and `[..p_i.., part_i]`, the
        // leading axes broadcasting like a pointwise operation's.
        let what: Arc<str> = "to end in the axis it concatenates".into();
        let lead = cx.fresh_row();
        let whole = Dim::Var(cx.fresh_dim());
        cx.row_is(
            RowSite::result(RowKind::Output),
            Row::open(lead, vec![whole.clone()]),
            what.clone(),
        );
        let mut parts = Vec::with_capacity(self.parts);
        for operand in 0..self.parts {
            let site = RowSite::operand(operand, RowKind::Output);
            let own = cx.fresh_row();
            let part = Dim::Var(cx.fresh_dim());
            cx.row_is(site, Row::open(own, vec![part.clone()]), what.clone());
            let why = cx.why_row(site, "to broadcast to the result's leading axes".into());
            cx.add(Constraint::RowIneq {
                cur: Row::open(lead, Vec::new()),
                subr: Row::open(own, Vec::new()),
                why,
            });
            parts.push(part);
        }
        let why = cx.why_row(
            RowSite::result(RowKind::Output),
            "to be as long as its parts together".into(),
        );
        cx.add(Constraint::DimSum {
            total: whole,
            parts,
            why,
        });
    }

    fn project(&self, cx: &mut ProjectionBuilder<'_>) {
        for kind in [RowKind::Batch, RowKind::Input] {
            for operand in 0..self.parts {
                cx.broadcast(RowSite::result(kind), RowSite::operand(operand, kind));
            }
        }
        // The leading output axes broadcast; the concatenated axis of the
        // result and of each part have iterators of their own.
        let result = RowSite::result(RowKind::Output);
        let lc = cx.row_len(result);
        for operand in 0..self.parts {
            let row = RowSite::operand(operand, RowKind::Output);
            let ls = cx.row_len(row);
            for i in 1..ls.min(lc) {
                let c = AxisSite {
                    row: result,
                    axis: lc - 1 - i,
                };
                let s = AxisSite {
                    row,
                    axis: ls - 1 - i,
                };
                if cx.shape(operand + 1).output[ls - 1 - i].size() == 1
                    && cx.shape(0).output[lc - 1 - i].size() != 1
                {
                    cx.fix(s, AxisIndex::Fixed(0));
                } else {
                    cx.tie(c, s);
                }
            }
        }
    }

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        let p = cx.projections();
        let result = cx.shape(0);
        // The result's last output axis, in memory order (batch, output,
        // input), and each part's.
        let last_output = |s: &shape_core::SolvedShape| s.batch.len() + s.output.len() - 1;
        let iterator = |index: &AxisIndex| match index {
            AxisIndex::Iterator(k) => Some(*k),
            _ => None,
        };
        let whole = iterator(&p.result[last_output(result)]);
        let part_iterators: Vec<Option<usize>> = (0..self.parts)
            .map(|i| iterator(&p.operands[i][last_output(cx.shape(i + 1))]))
            .collect();
        let full = cx.layout(0);
        let whole_stride = whole.map_or(0, |k| full.strides[k]);
        let mut steps = Vec::with_capacity(self.parts);
        let mut at = 0u64;
        for (i, own) in part_iterators.iter().enumerate() {
            // Iterate the other axes and this part's axis; the whole axis
            // and the other parts' axes stay at one point.
            let mut sizes = p.sizes.clone();
            for (j, other) in part_iterators.iter().enumerate() {
                if let (true, Some(k)) = (j != i, other) {
                    sizes[*k] = 1;
                }
            }
            let mut out = full.clone();
            if let Some(k) = whole {
                sizes[k] = 1;
                out.strides[k] = 0;
            }
            if let Some(k) = own {
                out.strides[*k] = out.strides[*k].saturating_add(whole_stride);
            }
            out.offset = out.offset.saturating_add(at.saturating_mul(whole_stride));
            let kernel = Kernel::new(
                vec![IterKind::Parallel; sizes.len()],
                1,
                Expr::Load(0),
                Accumulate::Assign,
            );
            let launch = Launch::new(sizes, out, vec![cx.layout(i + 1)]);
            steps.push(Step {
                kernel,
                launch,
                result: BufferRef::Result,
                operands: vec![BufferRef::Operand(i)],
                call: None,
            });
            at += cx.shape(i + 1).output.last().map_or(1, |d| d.size());
        }
        Ok(Lowered {
            scratch: Vec::new(),
            steps,
        })
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("concat({})", operands.join(", "))
    }
}

/// Concatenates a tensor with a new input along its last output axis.
fn sample(cx: &mut dyn SampleCx) -> Result<Option<crate::TensorId>, GraphError> {
    let t = cx.pick();
    let s = cx.shape(t)?;
    let Some(last) = s.output.last() else {
        return Ok(None);
    };
    let mut output = s.sizes(RowKind::Output);
    let n = output.len();
    output[n - 1] = 1 + cx.below(3) + last.size() % 2;
    let other = cx.input(&s.sizes(RowKind::Batch), &s.sizes(RowKind::Input), &output)?;
    let parts = if cx.below(2) == 0 {
        vec![t, other]
    } else {
        vec![other, t]
    };
    cx.graph().concat(&parts).map(Some)
}

fn build(args: &BuildArgs<'_>) -> Result<Arc<dyn Operation>, GraphError> {
    Ok(Arc::new(Concat::new(args.operands)?))
}

pub(super) fn entries() -> Vec<OpEntry> {
    vec![OpEntry::new(
        "concat",
        "tensors one after another along their last output axis",
        2..=MAX_PARTS,
        build,
    )
    .with_sampler(sample)]
}
