//! A user's function as an operation of a `shape-graph` [`Graph`]
//! (behind the `graph` feature): [`CallOp`].
//!
//! Each operand is one argument. In a graph, an argument's dims for the
//! call-shape rules are its dims in memory order (batch, output, input),
//! and the rows are split the one way the solver can state before any
//! size is known: an argument's output row is exactly its parameter's
//! type dims (empty for a scalar), its input row is empty, and its batch
//! row is its argument shape. The call shape is NumPy's broadcasting of
//! the batch rows, which is the result's batch row; the result's output
//! row is the return type's dims (`vec3<f32>` gives `3`, a scalar none)
//! and its input row is empty. Sizes are then resolved by
//! [`crate::BoundCall::call`] itself when the operation is lowered, and
//! the result is one [`KernelStep`]: the CPU backend runs it through the
//! WGSL interpreter, the wgpu backend inlines the function.
//!
//! ```
//! use std::sync::Arc;
//! use shape_call::CallOp;
//! use shape_graph::Graph;
//!
//! let scale = CallOp::parse("fn scale(c: vec3<f32>, g: f32) -> vec3<f32> { return c * g; }")?;
//! let mut g = Graph::new();
//! let img = g.input("img", "4, 5|3")?;
//! let gain = g.parameter("gain")?;
//! let y = g.apply(Arc::new(scale), &[img, gain])?;
//! let solved = g.solve()?;
//! assert_eq!(solved.shape(y)?.to_string(), "4, 5|->3");
//! assert_eq!(solved.shape(gain)?.to_string(), "|->");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::sync::Arc;

use shape_core::{CallRef, Dim, Row, RowKind, SolvedShape};
use shape_graph::{ConstraintCx, GraphError, Lowered, LoweringCx, Operation, ProjectionBuilder};
use shape_solver::RowSite;

#[allow(unused_imports)]
use shape_graph::Graph;

use crate::arg::{Arg, CallArgs, OutputSpec};
use crate::bind::Function;
use crate::signature::{Direction, Signature};
use crate::step::KernelStep;
use crate::types::{Extent, ParamType};
use crate::CallError;

/// A function of value parameters that returns a value, applied to
/// tensors as an operation of a graph (see the module's rules).
#[derive(Clone, Debug)]
pub struct CallOp {
    function: Function,
    name: String,
    /// Each parameter's type dims.
    params: Vec<Vec<u64>>,
    /// The return type's dims.
    result: Vec<u64>,
}

fn fixed_dims(function: &str, what: &str, ty: &ParamType) -> Result<Vec<u64>, CallError> {
    let refuse = |reason: String| CallError::NotAnOperation {
        function: function.to_string(),
        reason,
    };
    if ty.accessed().is_some() || matches!(ty.leaf(), ParamType::Struct(_)) || !ty.is_concrete() {
        return Err(refuse(format!(
            "{what} has type {}; an operation's parameters and result are scalars, vectors, matrices or fixed arrays",
            ty.spelled(crate::Language::Wgsl)
        )));
    }
    ty.type_shape()
        .into_iter()
        .map(|e| match e {
            Extent::Fixed(n) => Ok(n),
            _ => Err(refuse(format!("{what} has a size that no type fixes"))),
        })
        .collect()
}

impl CallOp {
    /// The operation calling `function`, which must have one overload,
    /// `in` parameters of fixed-size value types (scalars, vectors,
    /// matrices, fixed arrays), a return value of such a type, and WGSL to
    /// run (WGSL source, or a Slang-style declaration with a WGSL body).
    /// Anything else is [`CallError::NotAnOperation`].
    pub fn new(function: Function) -> Result<CallOp, CallError> {
        let [sig] = function.overloads() else {
            return Err(CallError::NotAnOperation {
                function: (function.overloads().first())
                    .map_or_else(String::new, |s| s.name.to_string()),
                reason: "it has several overloads; an operation calls one function".into(),
            });
        };
        let name = sig.name.to_string();
        let refuse = |reason: &str| CallError::NotAnOperation {
            function: name.clone(),
            reason: reason.to_string(),
        };
        if sig.source().is_none() && sig.wgsl_body().is_none() {
            return Err(refuse(
                "it has no WGSL to run; give WGSL source, or a declaration with a WGSL body",
            ));
        }
        let Some(result) = &sig.result else {
            return Err(refuse(
                "it returns nothing; only a function that returns a value is an operation",
            ));
        };
        let mut params = Vec::with_capacity(sig.params.len());
        for p in &sig.params {
            if p.direction != Direction::In {
                return Err(refuse(&format!(
                    "parameter `{}` is written by the function (`out`, `inout` or a pointer); an operation's parameters are values it reads",
                    p.name
                )));
            }
            params.push(fixed_dims(
                &name,
                &format!("parameter `{}`", p.name),
                &p.ty,
            )?);
        }
        let result = fixed_dims(&name, "its return value", result)?;
        Ok(CallOp {
            function,
            name,
            params,
            result,
        })
    }

    /// [`CallOp::new`] of a function read by [`Function::parse`] (WGSL
    /// source, `fn NAME(..) -> T { .. }`).
    pub fn parse(source: &str) -> Result<CallOp, CallError> {
        CallOp::new(Function::parse(source)?)
    }

    /// The function's signature.
    pub fn signature(&self) -> &Signature {
        &self.function.overloads()[0]
    }

    /// The function.
    pub fn function(&self) -> &Function {
        &self.function
    }

    /// Each parameter's type dims: the output row its argument must have.
    pub fn param_dims(&self) -> &[Vec<u64>] {
        &self.params
    }

    /// The return type's dims: the result's output row.
    pub fn result_dims(&self) -> &[u64] {
        &self.result
    }

    /// The call kernel of the operation at the solved shapes `result` and
    /// `operands`: every operand's batch row its argument shape, the
    /// result's its output, resolved by the call-shape rules.
    pub fn kernel(
        &self,
        result: &SolvedShape,
        operands: &[&SolvedShape],
    ) -> Result<crate::CallKernel, CallError> {
        let sig = self.signature();
        let batch = |s: &SolvedShape, what: &str| -> Result<Vec<u64>, CallError> {
            let dims = s.row(RowKind::Batch);
            if dims.iter().any(|d| d.is_ragged()) {
                return Err(CallError::NotAnOperation {
                    function: self.name.clone(),
                    reason: format!("{what} is ragged; a call runs on rectangular data"),
                });
            }
            dims.iter()
                .map(|d| {
                    d.static_size().ok_or_else(|| CallError::NotAnOperation {
                        function: self.name.clone(),
                        reason: format!(
                            "{what} has a size known only at run time that is not bound"
                        ),
                    })
                })
                .collect()
        };
        let mut args = CallArgs::new();
        for (i, (p, s)) in sig.params.iter().zip(operands).enumerate() {
            let what = format!("argument {} (`{}`)", i + 1, p.name);
            args = args.arg(Arg::tensor_of(p.ty.clone(), &batch(s, &what)?));
        }
        let out = Arg::Output(OutputSpec {
            elem: sig.result.clone(),
            dims: None,
            shape: Some(batch(result, "the result")?),
        });
        args = args.named("_result", out);
        let bound = self.function.bind(&args)?;
        let resolution = bound.call(&args)?;
        bound.kernel(&resolution)
    }
}

impl Operation for CallOp {
    fn name(&self) -> &str {
        &self.name
    }

    fn arity(&self) -> usize {
        self.params.len()
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        let row = |dims: &[u64]| Row::closed(dims.iter().map(|&n| Dim::sized(n)).collect());
        let why = |what: &str| -> Arc<str> { Arc::from(what) };
        for (i, dims) in self.params.iter().enumerate() {
            let p = &self.signature().params[i].name;
            cx.row_is(
                RowSite::operand(i, RowKind::Output),
                row(dims),
                why(&format!(
                    "its output row to be the type dims of parameter `{p}` of `{}`",
                    self.name
                )),
            );
            cx.row_is(
                RowSite::operand(i, RowKind::Input),
                Row::empty(),
                why(&format!("no input row for an argument of `{}`", self.name)),
            );
        }
        cx.row_is(
            RowSite::result(RowKind::Output),
            row(&self.result),
            why(&format!(
                "its output row to be the dims of the type `{}` returns",
                self.name
            )),
        );
        cx.row_is(
            RowSite::result(RowKind::Input),
            Row::empty(),
            why(&format!("no input row for the result of `{}`", self.name)),
        );
        for i in 0..self.params.len() {
            cx.broadcast(
                RowSite::result(RowKind::Batch),
                RowSite::operand(i, RowKind::Batch),
            );
        }
    }

    fn project(&self, _cx: &mut ProjectionBuilder<'_>) {
        // A call step indexes its buffers itself (the call kernel's
        // strides); it has no loop nest to project.
    }

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        let operands: Vec<&SolvedShape> = (1..=self.params.len()).map(|i| cx.shape(i)).collect();
        let kernel = self
            .kernel(cx.shape(0), &operands)
            .map_err(|e| GraphError::Lowering {
                op: cx.op_arc(),
                kind: e.kind(),
                reason: e.to_string(),
            })?;
        let lens: Vec<u64> = kernel.leaves.iter().map(|l| l.len).collect();
        let Some((result_len, operand_lens)) = lens.split_last() else {
            return Err(GraphError::Lowering {
                op: cx.op_arc(),
                kind: "not_an_operation",
                reason: "the call kernel has no result".into(),
            });
        };
        Ok(Lowered::call(
            CallRef::new(KernelStep::new(kernel)),
            *result_len,
            operand_lens,
        ))
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("{}({})", self.name, operands.join(", "))
    }
}
