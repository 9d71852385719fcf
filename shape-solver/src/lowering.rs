//! Lowering: an operation with its projections becomes a kernel and a
//! launch. The kernel depends only on the operation and the structure of
//! its projections; sizes, strides and offsets go into the launch.

use shape_core::kernel::{Accumulate, BinaryOp, Expr, IterKind, Kernel, Launch, Layout, UnaryOp};
use shape_core::SolvedShape;

use crate::graph::{GraphError, OpId, SolvedGraph};
use crate::ops::OpKind;
use crate::projections::{AxisIndex, Projections};
use crate::symbolic::{var, Simplifier, Sym, SymExpr};

/// The pointwise functions the kernels know by name.
pub const UNARY_FUNCTIONS: &[&str] = &["id", "neg", "exp", "log", "sqrt", "relu"];
/// The pointwise binary functions the kernels know by name.
pub const BINARY_FUNCTIONS: &[&str] = &["add", "sub", "mul", "div", "max", "min"];

fn unary(name: &str) -> Option<Expr> {
    let x = Box::new(Expr::Load(0));
    Some(match name {
        "id" => Expr::Load(0),
        "neg" => Expr::Unary(UnaryOp::Neg, x),
        "exp" => Expr::Unary(UnaryOp::Exp, x),
        "log" => Expr::Unary(UnaryOp::Log, x),
        "sqrt" => Expr::Unary(UnaryOp::Sqrt, x),
        "relu" => Expr::Unary(UnaryOp::Relu, x),
        _ => return None,
    })
}

fn binary(name: &str) -> Option<Expr> {
    let op = match name {
        "add" => BinaryOp::Add,
        "sub" => BinaryOp::Sub,
        "mul" => BinaryOp::Mul,
        "div" => BinaryOp::Div,
        "max" => BinaryOp::Max,
        "min" => BinaryOp::Min,
        _ => return None,
    };
    Some(Expr::Binary(
        op,
        Box::new(Expr::Load(0)),
        Box::new(Expr::Load(1)),
    ))
}

/// The layout of a tensor stored contiguously in memory order, seen
/// through an operation's axis indices.
fn layout(shape: &SolvedShape, axes: &[AxisIndex], iterators: usize, slice: u64) -> Layout {
    let dims = shape.memory_dims();
    let mut axis_stride = vec![1u64; dims.len()];
    for j in (0..dims.len().saturating_sub(1)).rev() {
        axis_stride[j] = axis_stride[j + 1].saturating_mul(dims[j + 1]);
    }
    let mut strides = vec![0u64; iterators];
    let mut offset = 0u64;
    // Saturating: a layout this large fails `Launch::check` or allocation
    // with a clear error instead of wrapping around.
    for (j, a) in axes.iter().enumerate() {
        match a {
            AxisIndex::Iterator(k) => strides[*k] = strides[*k].saturating_add(axis_stride[j]),
            AxisIndex::Fixed(c) => offset = offset.saturating_add(c.saturating_mul(axis_stride[j])),
            AxisIndex::Slice => {
                offset = offset.saturating_add(slice.saturating_mul(axis_stride[j]))
            }
        }
    }
    let len = dims
        .iter()
        .try_fold(1u64, |a, &d| a.checked_mul(d))
        .unwrap_or(u64::MAX);
    Layout {
        offset,
        strides,
        len,
    }
}

impl SolvedGraph {
    /// The kernel and launch that compute one operation, its result and
    /// operands stored contiguously in memory order (batch, output, input).
    /// `slice` is the batch index a batch slice takes (ignored otherwise).
    pub fn kernel(&self, op: OpId, slice: u64) -> Result<(Kernel, Launch), GraphError> {
        let (kind, operands, result) = self
            .graph()
            .op(op)
            .ok_or(GraphError::UnknownOp(op.index()))?;
        let p: Projections = self.projections(op)?;
        let has_reduction = p.kinds.contains(&IterKind::Reduction);
        let unsupported = |what: String| GraphError::Unsupported {
            op: kind.name().to_string(),
            what,
        };
        let (body, accumulate) = match kind {
            OpKind::Unary(name) => (
                unary(name).ok_or_else(|| {
                    unsupported(format!(
                        "no kernel for the function `{name}` (known: {})",
                        UNARY_FUNCTIONS.join(", ")
                    ))
                })?,
                Accumulate::Assign,
            ),
            OpKind::Binary(name) => (
                binary(name).ok_or_else(|| {
                    unsupported(format!(
                        "no kernel for the function `{name}` (known: {})",
                        BINARY_FUNCTIONS.join(", ")
                    ))
                })?,
                Accumulate::Assign,
            ),
            OpKind::Compose | OpKind::Einsum(_) if operands.len() == 2 => (
                Expr::Binary(
                    BinaryOp::Mul,
                    Box::new(Expr::Load(0)),
                    Box::new(Expr::Load(1)),
                ),
                if has_reduction {
                    Accumulate::Add
                } else {
                    Accumulate::Assign
                },
            ),
            OpKind::Einsum(_) => (
                Expr::Load(0),
                if has_reduction {
                    Accumulate::Add
                } else {
                    Accumulate::Assign
                },
            ),
            OpKind::Transpose | OpKind::BatchSlice => (Expr::Load(0), Accumulate::Assign),
            OpKind::Compose => return Err(unsupported("compose needs two operands".into())),
        };
        if let OpKind::BatchSlice = kind {
            let batch = self
                .shape(operands[0])?
                .batch
                .first()
                .map_or(0, |d| d.size());
            if slice >= batch {
                return Err(unsupported(format!(
                    "slice index {slice} is outside the batch axis of size {batch}"
                )));
            }
        }
        let n = p.sizes.len();
        let kernel = Kernel {
            iterators: p.kinds.clone(),
            operands: operands.len(),
            body,
            accumulate,
        };
        let launch = Launch {
            sizes: p.sizes.clone(),
            result: layout(self.shape(result)?, &p.result, n, slice),
            operands: operands
                .iter()
                .zip(&p.operands)
                .map(|(&t, axes)| Ok(layout(self.shape(t)?, axes, n, slice)))
                .collect::<Result<_, GraphError>>()?,
        };
        Ok((kernel, launch))
    }
}

impl SolvedGraph {
    /// The flat element index through which `op` addresses each of its
    /// tensors (the result first, then the operands), as a symbolic
    /// expression of the loop iterators `i0, i1, ...` and of each tensor's
    /// axis sizes `t{tensor}_{axis}` (axes in memory order), simplified
    /// with one e-graph for the whole operation: terms of broadcast axes
    /// drop out, and a diagonal's two terms share their iterator.
    ///
    /// This is the size-independent form a code generator emits; the
    /// launch's strides are these expressions evaluated at concrete sizes.
    pub fn index_expressions(&self, op: OpId) -> Result<Vec<SymExpr>, GraphError> {
        let (_, operands, result) = self
            .graph()
            .op(op)
            .ok_or(GraphError::UnknownOp(op.index()))?;
        let p = self.projections(op)?;
        let mut simplifier = Simplifier::new();
        let tensors = std::iter::once(result).chain(operands.iter().copied());
        let axes = std::iter::once(&p.result).chain(&p.operands);
        let mut out = Vec::new();
        for (t, (tensor, indices)) in tensors.zip(axes).enumerate() {
            let rank = self.shape(tensor)?.memory_dims().len();
            let mut e = SymExpr::default();
            let mut sum = None;
            for (j, index) in indices.iter().enumerate() {
                let mut term = match index {
                    // Structure first: a term at index 0 contributes nothing.
                    AxisIndex::Fixed(0) => continue,
                    AxisIndex::Iterator(k) => e.add(var(&format!("i{k}"))),
                    AxisIndex::Fixed(c) => e.add(Sym::Num(*c as i64)),
                    AxisIndex::Slice => e.add(var("slice")),
                };
                for later in j + 1..rank {
                    let size = e.add(var(&format!("t{t}_{later}")));
                    term = e.add(Sym::Mul([term, size]));
                }
                sum = Some(match sum {
                    Some(s) => e.add(Sym::Add([s, term])),
                    None => term,
                });
            }
            if sum.is_none() {
                e.add(Sym::Num(0));
            }
            out.push(simplifier.simplify(&e));
        }
        Ok(out)
    }
}
