//! The graph API: tensors, operations, solving, reading shapes back.

use std::collections::HashMap;
use std::fmt;
use std::num::NonZeroU64;
use std::sync::{Arc, OnceLock};

use imbl::Vector;
use shape_core::spec::{AxisKind, RowSpec, RowVarName, ShapeSpec, SpecError};
use shape_core::{Dim, EinsumSpec, KnownDim, Label, Row, RowKind, RowVar, Shape, SolvedShape};

use crate::constraint::Constraint;
use crate::error::ShapeError;
use crate::finalize::{Provenance, Solution};
use crate::ops::{OpContext, OpKind};
use crate::origin::{OpRef, Origin, TensorRef, Why};
use crate::solver::Solver;

/// A tensor in a [`Graph`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TensorId(pub(crate) usize);

impl TensorId {
    /// The tensor's index in its graph (creation order).
    pub fn index(self) -> usize {
        self.0
    }
}

/// An operation in a [`Graph`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OpId(pub(crate) usize);

impl OpId {
    /// The operation's index in its graph (creation order).
    pub fn index(self) -> usize {
        self.0
    }
}

/// How a tensor came to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensorKind {
    /// Data supplied by the user, with a declared (partial) shape.
    Input,
    /// A learned value whose shape is inferred from its uses.
    Parameter,
    /// A constant with a declared shape or element count.
    Constant,
    /// The result of an operation.
    Result(OpId),
}

#[derive(Clone, Debug)]
struct Tensor {
    name: Arc<str>,
    kind: TensorKind,
    shape: Shape,
}

/// An operation node.
#[derive(Clone, Debug)]
struct OpNode {
    kind: OpKind,
    operands: Operands,
    result: TensorId,
}

/// An operation's operands: inline for the usual one or two.
#[derive(Clone, Debug)]
enum Operands {
    Inline { ids: [TensorId; 2], len: u8 },
    Spilled(Box<[TensorId]>),
}

impl Operands {
    fn new(ts: &[TensorId]) -> Operands {
        match ts {
            [] => Operands::Inline {
                ids: [TensorId(0); 2],
                len: 0,
            },
            [a] => Operands::Inline {
                ids: [*a, TensorId(0)],
                len: 1,
            },
            [a, b] => Operands::Inline {
                ids: [*a, *b],
                len: 2,
            },
            _ => Operands::Spilled(ts.into()),
        }
    }

    fn as_slice(&self) -> &[TensorId] {
        match self {
            Operands::Inline { ids, len } => &ids[..usize::from(*len)],
            Operands::Spilled(ts) => ts,
        }
    }
}

/// A failure of a graph call.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GraphError {
    /// The shapes do not fit together.
    #[error(transparent)]
    Shape(#[from] ShapeError),
    /// A malformed shape or einsum spec.
    #[error("in {context}: {source}")]
    Spec {
        /// What the spec was for.
        context: String,
        /// The parse error.
        source: Box<SpecError>,
    },
    /// An operation that cannot be lowered to a kernel.
    #[error("cannot build a kernel for {op}: {what}")]
    Unsupported {
        /// The operation.
        op: String,
        /// Why not.
        what: String,
    },
    /// An operation id that this graph did not create.
    #[error("unknown operation id {0}: it was not created by this graph")]
    UnknownOp(usize),
    /// A tensor id that this graph did not create.
    #[error("unknown tensor id {0}: it was not created by this graph")]
    UnknownTensor(usize),
    /// An operation given the wrong number of operands.
    #[error("{op} takes {expected} operand(s) but was given {found}: {}", if given.is_empty() { "none".to_string() } else { given.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ") })]
    Arity {
        /// The operation.
        op: String,
        /// Operands it takes.
        expected: usize,
        /// Operands given.
        found: usize,
        /// The names of the tensors given (unknown ids are left out).
        given: Vec<String>,
    },
    /// An axis index past the end of a solved row.
    #[error(
        "`{tensor}` has no {kind} axis {axis}: its {kind} row has length {len} (axes count from 0)"
    )]
    NoSuchAxis {
        /// The tensor's name.
        tensor: String,
        /// The row.
        kind: RowKind,
        /// The axis asked for.
        axis: usize,
        /// The number of axes the row has.
        len: usize,
    },
    /// A constant whose element count does not fit its declared shape.
    #[error("constant `{name}`: {message}")]
    Constant {
        /// The constant's name.
        name: String,
        /// What is wrong.
        message: String,
    },
}

/// A tensor program under construction: tensors, operations and the
/// solver state their shapes induce.
///
/// Constraints are solved as operations are added, so a conflict is
/// reported by the call that introduces it; [`Graph::solve`] then closes
/// what is left open. Cloning a graph is cheap (persistent structures), so
/// a clone can be extended to ask "what if".
///
/// ```
/// use shape_solver::Graph;
/// let mut g = Graph::new();
/// let x = g.input("x", "8|784").unwrap();
/// let w1 = g.parameter("w1").unwrap();
/// let b1 = g.parameter_with_spec("b1", "64").unwrap();
/// let h = g.compose(w1, x).unwrap();
/// let h = g.add(h, b1).unwrap();
/// let h = g.unary("relu", h).unwrap();
/// let w2 = g.parameter("w2").unwrap();
/// let y = g.compose(w2, h).unwrap();
/// g.require(y, "8|->10").unwrap();
/// let s = g.solve().unwrap();
/// assert_eq!(s.shape(w1).unwrap().to_string(), "|784->64");
/// assert_eq!(s.shape(w2).unwrap().to_string(), "|64->10");
/// ```
#[derive(Clone, Debug, Default)]
pub struct Graph {
    solver: Solver,
    tensors: Vector<Tensor>,
    ops: Vector<OpNode>,
    /// Einsum specs parsed so far, by their text.
    einsums: HashMap<Arc<str>, Arc<crate::ops::EinsumOp>>,
    /// Declared shape specs parsed so far, by their text (which origins
    /// share rather than copy).
    specs: HashMap<Arc<str>, Arc<ShapeSpec>>,
    /// Names of pointwise functions used so far, shared by their uses.
    functions: std::collections::HashSet<Arc<str>>,
}

impl Graph {
    /// An empty graph.
    pub fn new() -> Graph {
        Graph::default()
    }

    fn tensor(&self, t: TensorId) -> Result<&Tensor, GraphError> {
        self.tensors.get(t.0).ok_or(GraphError::UnknownTensor(t.0))
    }

    fn tensor_ref(&self, t: TensorId) -> Result<TensorRef, GraphError> {
        Ok(TensorRef {
            id: t.0,
            name: self.tensor(t)?.name.clone(),
        })
    }

    fn names_of(&self, ts: &[TensorId]) -> Vec<String> {
        ts.iter()
            .filter_map(|&t| self.tensors.get(t.0).map(|x| x.name.to_string()))
            .collect()
    }

    /// The number of tensors.
    pub fn num_tensors(&self) -> usize {
        self.tensors.len()
    }

    /// The number of operations.
    pub fn num_ops(&self) -> usize {
        self.ops.len()
    }

    /// All tensor ids, in creation order.
    pub fn tensor_ids(&self) -> impl Iterator<Item = TensorId> {
        (0..self.tensors.len()).map(TensorId)
    }

    /// A tensor's name.
    pub fn name(&self, t: TensorId) -> Result<&str, GraphError> {
        Ok(&self.tensor(t)?.name)
    }

    /// A tensor's kind.
    pub fn kind(&self, t: TensorId) -> Result<TensorKind, GraphError> {
        Ok(self.tensor(t)?.kind)
    }

    /// The operation whose result `t` is, if any.
    pub fn producer(&self, t: TensorId) -> Option<OpId> {
        match self.tensors.get(t.0)?.kind {
            TensorKind::Result(op) => Some(op),
            _ => None,
        }
    }

    /// All operation ids, in creation order (which is a topological order).
    pub fn op_ids(&self) -> impl Iterator<Item = OpId> {
        (0..self.ops.len()).map(OpId)
    }

    /// An operation's kind, operands and result.
    pub fn op(&self, op: OpId) -> Option<(&OpKind, &[TensorId], TensorId)> {
        self.ops
            .get(op.0)
            .map(|o| (&o.kind, o.operands.as_slice(), o.result))
    }

    /// The solver state (for direct constraints or inspection).
    pub fn solver(&self) -> &Solver {
        &self.solver
    }

    /// The tensor's shape as far as it is known now, variables included.
    pub fn shape(&self, t: TensorId) -> Result<Shape, GraphError> {
        let shape = &self.tensor(t)?.shape;
        Ok(Shape {
            batch: self.solver.resolve_row(&shape.batch)?,
            input: self.solver.resolve_row(&shape.input)?,
            output: self.solver.resolve_row(&shape.output)?,
        })
    }

    /// The tensor's declared rows, unresolved: the variables the solver
    /// knows it by.
    pub fn shape_vars(&self, t: TensorId) -> Result<&Shape, GraphError> {
        Ok(&self.tensor(t)?.shape)
    }

    fn push_tensor(&mut self, name: &str, kind: TensorKind, shape: Shape) -> TensorId {
        self.push_tensor_named(Arc::from(name), kind, shape)
    }

    fn push_tensor_named(&mut self, name: Arc<str>, kind: TensorKind, shape: Shape) -> TensorId {
        let id = TensorId(self.tensors.len());
        self.tensors.push_back(Tensor { name, kind, shape });
        id
    }

    /// A function's name, allocated once per distinct name.
    fn function_name(&mut self, name: &str) -> Arc<str> {
        if let Some(n) = self.functions.get(name) {
            return n.clone();
        }
        let n: Arc<str> = Arc::from(name);
        self.functions.insert(n.clone());
        n
    }

    /// A declared shape spec, parsed once per distinct text, with its text.
    fn declared_spec(
        &mut self,
        text: &str,
        context: impl FnOnce() -> String,
    ) -> Result<(Arc<str>, Arc<ShapeSpec>), GraphError> {
        if let Some((k, v)) = self.specs.get_key_value(text) {
            return Ok((k.clone(), v.clone()));
        }
        let spec = Arc::new(Self::parse_spec(text, context)?);
        let key: Arc<str> = Arc::from(text);
        self.specs.insert(key.clone(), spec.clone());
        Ok((key, spec))
    }

    fn parse_spec(text: &str, context: impl FnOnce() -> String) -> Result<ShapeSpec, GraphError> {
        ShapeSpec::parse(text).map_err(|source| GraphError::Spec {
            context: context(),
            source: Box::new(source),
        })
    }

    /// Declares an input with a (partial) shape in the spec notation.
    ///
    /// Labels are dimension variables local to this spec, digits are fixed
    /// sizes, `..name..` is a row variable; rows the spec leaves out are
    /// empty (`"784"` has no batch and no input axes).
    pub fn input(&mut self, name: &str, spec: &str) -> Result<TensorId, GraphError> {
        self.declare(name, spec, TensorKind::Input, None)
    }

    /// Declares a parameter whose shape is inferred from its uses: no batch
    /// axes, any input and output axes.
    pub fn parameter(&mut self, name: &str) -> Result<TensorId, GraphError> {
        let shape = Shape {
            batch: Row::empty(),
            input: Row::open(self.solver.fresh_row(), vec![]),
            output: Row::open(self.solver.fresh_row(), vec![]),
        };
        Ok(self.push_tensor(name, TensorKind::Parameter, shape))
    }

    /// Declares a parameter with a (partial) shape in the spec notation.
    pub fn parameter_with_spec(&mut self, name: &str, spec: &str) -> Result<TensorId, GraphError> {
        self.declare(name, spec, TensorKind::Parameter, None)
    }

    /// Declares a constant holding `num_elems` values laid out in the given
    /// shape; the output row must account for exactly the elements the
    /// batch and input rows leave, so one unknown output size is inferred.
    ///
    /// ```
    /// use shape_solver::Graph;
    /// let mut g = Graph::new();
    /// let c = g.constant("c", "3->k", 12).unwrap();
    /// assert_eq!(g.solve().unwrap().shape(c).unwrap().to_string(), "|3->4");
    /// ```
    pub fn constant(
        &mut self,
        name: &str,
        spec: &str,
        num_elems: u64,
    ) -> Result<TensorId, GraphError> {
        let n = NonZeroU64::new(num_elems).ok_or_else(|| GraphError::Constant {
            name: name.to_string(),
            message: "a constant needs at least one element".into(),
        })?;
        self.declare(name, spec, TensorKind::Constant, Some(n))
    }

    fn declare(
        &mut self,
        name: &str,
        spec_text: &str,
        kind: TensorKind,
        num_elems: Option<NonZeroU64>,
    ) -> Result<TensorId, GraphError> {
        let (spec_arc, spec) =
            self.declared_spec(spec_text, || format!("the declared shape of `{name}`"))?;
        let per_output = match num_elems {
            Some(n) => Some((n, Self::elements_per_output(name, spec_text, &spec, n)?)),
            None => None,
        };
        let id = TensorId(self.tensors.len());
        let tref = TensorRef {
            id: id.0,
            name: Arc::from(name),
        };
        let shape = self.solver.transaction(|solver| {
            let mut names = SpecNames::default();
            let mut constraints = Vec::new();
            let mut rows = Vec::new();
            for kind in RowKind::ALL {
                let origin = Origin::Declared {
                    tensor: tref.clone(),
                    kind,
                    spec: spec_arc.clone(),
                };
                let why = Why::of(solver.add_origin(origin));
                rows.push(match spec.row(kind) {
                    Some(r) => row_from_spec(solver, r, &mut names, why, &mut constraints),
                    None => Row::empty(),
                });
            }
            let [batch, input, output]: [Row; 3] = rows.try_into().expect("three rows");
            // The count is one constraint with its own origin; it is not
            // attached to the tensor's row, which would repeat it on every use.
            if let Some((n, per_output)) = per_output {
                let why = Why::of(solver.add_origin(Origin::ElementCount {
                    tensor: tref.clone(),
                    spec: spec_arc.clone(),
                    num_elems: n.get(),
                }));
                constraints.push(Constraint::TotalElems {
                    row: output.clone(),
                    total: per_output,
                    why,
                });
            }
            solver.add_all(constraints)?;
            Ok::<_, GraphError>(Shape {
                batch,
                input,
                output,
            })
        })?;
        Ok(self.push_tensor_named(tref.name, kind, shape))
    }

    /// For a constant: how many elements the output row holds, given that
    /// the batch and input rows must be fixed sizes.
    fn elements_per_output(
        name: &str,
        spec_text: &str,
        spec: &ShapeSpec,
        n: NonZeroU64,
    ) -> Result<NonZeroU64, GraphError> {
        let fail = |message: String| GraphError::Constant {
            name: name.into(),
            message,
        };
        let mut others: u128 = 1;
        for kind in [RowKind::Batch, RowKind::Input] {
            let Some(r) = spec.row(kind) else { continue };
            if r.row_var.is_some() {
                return Err(fail(format!(
                    "the batch and input rows of \"{spec_text}\" must not have row variables when the element count is given"
                )));
            }
            for a in &r.axes {
                match &a.kind {
                    AxisKind::Size(n) | AxisKind::LabeledSize(_, n) => {
                        others = others.checked_mul(n.get() as u128).ok_or_else(|| {
                            fail(format!("the batch and input rows of \"{spec_text}\" hold more elements than fit in 128 bits"))
                        })?
                    }
                    _ => {
                        return Err(fail(format!(
                            "the batch and input rows of \"{spec_text}\" must be fixed sizes when the element count is given"
                        )))
                    }
                }
            }
        }
        let total = n.get() as u128;
        if !total.is_multiple_of(others) {
            return Err(fail(format!(
                "{total} elements do not fill whole rows of the {others} elements that the batch and input rows of \"{spec_text}\" hold"
            )));
        }
        Ok(NonZeroU64::new((total / others) as u64).expect("a non-zero quotient"))
    }

    /// Requires a tensor to have the shape given in the spec notation; rows
    /// the spec leaves out are not constrained.
    pub fn require(&mut self, t: TensorId, spec_text: &str) -> Result<(), GraphError> {
        let tref = self.tensor_ref(t)?;
        let spec = Self::parse_spec(spec_text, || {
            format!("the required shape of `{}`", tref.name)
        })?;
        let shape = self.tensor(t)?.shape.clone();
        self.solver.transaction(|solver| {
            let mut names = SpecNames::default();
            let mut constraints = Vec::new();
            for kind in RowKind::ALL {
                if let Some(r) = spec.row(kind) {
                    let origin = Origin::Required {
                        tensor: tref.clone(),
                        kind,
                        spec: Arc::from(spec_text),
                    };
                    let why = Why::of(solver.add_origin(origin));
                    let row = row_from_spec(solver, r, &mut names, why, &mut constraints);
                    constraints.push(Constraint::RowEq {
                        a: shape.row(kind).clone(),
                        b: row,
                        why,
                    });
                }
            }
            solver.add_all(constraints)
        })?;
        Ok(())
    }

    /// Applies an operation; the result is named `t<id>`.
    pub fn apply(&mut self, kind: OpKind, operands: &[TensorId]) -> Result<TensorId, GraphError> {
        let name = numbered_name(b't', self.tensors.len());
        self.apply_arc(name, kind, operands)
    }

    /// Applies an operation and names its result.
    pub fn apply_named(
        &mut self,
        name: &str,
        kind: OpKind,
        operands: &[TensorId],
    ) -> Result<TensorId, GraphError> {
        self.apply_arc(Arc::from(name), kind, operands)
    }

    fn apply_arc(
        &mut self,
        result_name: Arc<str>,
        kind: OpKind,
        operands: &[TensorId],
    ) -> Result<TensorId, GraphError> {
        if operands.len() != kind.arity() {
            return Err(GraphError::Arity {
                op: kind.name().to_string(),
                expected: kind.arity(),
                found: operands.len(),
                given: self.names_of(operands),
            });
        }
        let operand_refs = operands
            .iter()
            .map(|&t| self.tensor_ref(t))
            .collect::<Result<Vec<_>, _>>()?;
        let op_id = OpId(self.ops.len());
        let result = TensorId(self.tensors.len());
        let op = Arc::new(OpRef {
            id: op_id.0,
            name: kind.name(),
            operands: operand_refs,
            result: TensorRef {
                id: result.0,
                name: result_name.clone(),
            },
        });
        let tensors = &self.tensors;
        let result_shape = self.solver.transaction(|solver| {
            let result_shape = Shape {
                batch: Row::open(solver.fresh_row(), vec![]),
                input: Row::open(solver.fresh_row(), vec![]),
                output: Row::open(solver.fresh_row(), vec![]),
            };
            // Result first, then the operands: on the stack for the usual
            // one or two operands.
            let mut inline = [&result_shape; 3];
            let spilled: Vec<&Shape>;
            let shapes: &[&Shape] = if operands.len() < inline.len() {
                for (slot, t) in inline[1..].iter_mut().zip(operands) {
                    *slot = &tensors[t.0].shape;
                }
                &inline[..=operands.len()]
            } else {
                spilled = std::iter::once(&result_shape)
                    .chain(operands.iter().map(|t| &tensors[t.0].shape))
                    .collect();
                &spilled
            };
            let mut ctx = OpContext { solver, op, shapes };
            // Queued straight onto the solver (no list in between), then
            // simplified: what `add_all` does inside this transaction.
            ctx.push_constraints(&kind);
            solver.run()?;
            Ok::<_, ShapeError>(result_shape)
        })?;
        self.tensors.push_back(Tensor {
            name: result_name,
            kind: TensorKind::Result(op_id),
            shape: result_shape,
        });
        self.ops.push_back(OpNode {
            kind,
            operands: Operands::new(operands),
            result,
        });
        Ok(result)
    }

    /// A pointwise unary function, such as `relu` or `exp`.
    pub fn unary(&mut self, name: &str, a: TensorId) -> Result<TensorId, GraphError> {
        let name = self.function_name(name);
        self.apply(OpKind::Unary(name), &[a])
    }

    /// A pointwise binary function, such as `add` or `mul`.
    pub fn binary(&mut self, name: &str, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        let name = self.function_name(name);
        self.apply(OpKind::Binary(name), &[a, b])
    }

    /// Pointwise addition with broadcasting.
    pub fn add(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary("add", a, b)
    }

    /// Pointwise multiplication with broadcasting.
    pub fn mul(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.binary("mul", a, b)
    }

    /// `a * b` with `b`'s outputs feeding `a`'s inputs (matrix product).
    pub fn compose(&mut self, a: TensorId, b: TensorId) -> Result<TensorId, GraphError> {
        self.apply(OpKind::Compose, &[a, b])
    }

    /// Swaps input and output axes.
    pub fn transpose(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.apply(OpKind::Transpose, &[a])
    }

    /// Drops the leftmost batch axis.
    pub fn batch_slice(&mut self, a: TensorId) -> Result<TensorId, GraphError> {
        self.apply(OpKind::BatchSlice, &[a])
    }

    /// Parses an einsum spec, or finds it parsed already.
    fn einsum_op(
        &mut self,
        spec: &str,
        what: &str,
    ) -> Result<Arc<crate::ops::EinsumOp>, GraphError> {
        if let Some(op) = self.einsums.get(spec) {
            return Ok(op.clone());
        }
        let parsed = EinsumSpec::parse(spec).map_err(|source| GraphError::Spec {
            context: format!("{what} \"{spec}\""),
            source: Box::new(source),
        })?;
        let op = Arc::new(crate::ops::EinsumOp::new(parsed));
        self.einsums.insert(Arc::from(spec), op.clone());
        Ok(op)
    }

    /// An einsum such as `"ij;jk=>ik"` over the given operands.
    pub fn einsum(&mut self, spec: &str, operands: &[TensorId]) -> Result<TensorId, GraphError> {
        let op = self.einsum_op(spec, "einsum")?;
        self.apply(OpKind::Einsum(op), operands)
    }

    /// A permutation (or reduction) of one operand: a unary einsum such as
    /// `"ij=>ji"`.
    pub fn permute(&mut self, spec: &str, a: TensorId) -> Result<TensorId, GraphError> {
        let op = self.einsum_op(spec, "permute")?;
        if op.spec().operands.len() != 1 {
            return Err(GraphError::Arity {
                op: format!(
                    "permute \"{spec}\" (a spec with {} operands)",
                    op.spec().operands.len()
                ),
                expected: op.spec().operands.len(),
                found: 1,
                given: self.names_of(&[a]),
            });
        }
        self.apply(OpKind::Einsum(op), &[a])
    }

    /// Closes every open variable and returns every tensor's solved shape.
    /// The graph itself is unchanged, so it can be extended and solved
    /// again.
    pub fn solve(&self) -> Result<SolvedGraph, GraphError> {
        let solution = self.solver.finalize()?;
        Ok(SolvedGraph {
            graph: self.clone(),
            shapes: (0..self.tensors.len().div_ceil(SHAPE_BLOCK))
                .map(|_| OnceLock::new())
                .collect(),
            solution,
        })
    }
}

/// `prefix` followed by `n` in decimal, written on the stack: one
/// allocation, and no formatting machinery (a name per operation adds up).
fn numbered_name(prefix: u8, n: usize) -> Arc<str> {
    let mut buf = [0u8; 24];
    let mut i = buf.len();
    let mut n = n;
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    i -= 1;
    buf[i] = prefix;
    Arc::from(std::str::from_utf8(&buf[i..]).expect("an ASCII prefix and digits"))
}

/// Builds a row of fresh variables for a spec row; fixed sizes become
/// equations recorded in `constraints`, so every tensor axis is a
/// variable whose solution remembers where its size came from.
fn row_from_spec(
    solver: &mut Solver,
    r: &RowSpec,
    names: &mut SpecNames,
    why: Why,
    constraints: &mut Vec<Constraint>,
) -> Row {
    let n = r.axes.len();
    let mut dims = Vec::with_capacity(n);
    for (i, a) in r.axes.iter().enumerate() {
        let known = match &a.kind {
            AxisKind::Label(l) => {
                let v = *names
                    .dims
                    .entry(l.clone())
                    .or_insert_with(|| solver.fresh_dim());
                dims.push(Dim::Var(v));
                continue;
            }
            AxisKind::Anonymous => {
                dims.push(Dim::Var(solver.fresh_dim()));
                continue;
            }
            AxisKind::Size(s) => KnownDim::new(*s),
            AxisKind::LabeledSize(l, s) => KnownDim::new(*s).with_label(Some(Label::new(l))),
        };
        let v = solver.fresh_dim();
        dims.push(Dim::Var(v));
        constraints.push(Constraint::DimEq {
            a: Dim::Var(v),
            b: Dim::Known(known),
            why: why.at_axis(n - 1 - i),
        });
    }
    match &r.row_var {
        Some((name, _)) => {
            let v = *names
                .rows
                .entry(name.clone())
                .or_insert_with(|| solver.fresh_row());
            Row::open(v, dims)
        }
        None => Row::closed(dims),
    }
}

/// Variables named in one spec.
#[derive(Default)]
struct SpecNames {
    dims: HashMap<String, shape_core::DimVar>,
    rows: HashMap<RowVarName, RowVar>,
}

/// The result of [`Graph::solve`]: every tensor's shape, fully solved.
///
/// Every variable is solved; a tensor's shape is read out of the solution
/// the first time it is asked for, so solving costs nothing per tensor
/// that is never looked at.
#[derive(Clone, Debug)]
pub struct SolvedGraph {
    graph: Graph,
    /// The shapes read out so far, in blocks of [`SHAPE_BLOCK`] tensors
    /// allocated on first use: solving a large graph to read a few shapes
    /// does not allocate (and fault in) a cell for every tensor.
    shapes: Vec<OnceLock<ShapeBlock>>,
    solution: Solution,
}

const SHAPE_BLOCK: usize = 64;
type ShapeBlock = Box<[OnceLock<SolvedShape>; SHAPE_BLOCK]>;

impl SolvedGraph {
    /// The tensor's solved shape.
    pub fn shape(&self, t: TensorId) -> Result<&SolvedShape, GraphError> {
        let block = self
            .shapes
            .get(t.0 / SHAPE_BLOCK)
            .filter(|_| t.0 < self.graph.tensors.len())
            .ok_or(GraphError::UnknownTensor(t.0))?
            .get_or_init(|| Box::new(std::array::from_fn(|_| OnceLock::new())));
        let cell = &block[t.0 % SHAPE_BLOCK];
        if let Some(s) = cell.get() {
            return Ok(s);
        }
        let rows = &self.graph.tensor(t)?.shape;
        let shape = SolvedShape {
            batch: self.solution.row(&rows.batch)?,
            input: self.solution.row(&rows.input)?,
            output: self.solution.row(&rows.output)?,
        };
        Ok(cell.get_or_init(|| shape))
    }

    /// The graph that was solved.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    /// The solved environment.
    pub fn solution(&self) -> &Solution {
        &self.solution
    }

    /// Why axis `axis` (from the left) of row `kind` of tensor `t` has its
    /// size: the declaration, operation or default that fixed it.
    pub fn explain(
        &self,
        t: TensorId,
        kind: RowKind,
        axis: usize,
    ) -> Result<Provenance, GraphError> {
        let dims = self
            .solution
            .row_dims(self.graph.tensor(t)?.shape.row(kind))?;
        let Some(dim) = dims.get(axis) else {
            return Err(GraphError::NoSuchAxis {
                tensor: self.graph.name(t)?.to_string(),
                kind,
                axis,
                len: dims.len(),
            });
        };
        Ok(self.solution.provenance(dim)?)
    }

    /// Every tensor with its name and solved shape, in creation order.
    pub fn iter(&self) -> impl Iterator<Item = Result<(TensorId, &str, &SolvedShape), GraphError>> {
        self.graph.tensors.iter().enumerate().map(|(i, t)| {
            let id = TensorId(i);
            Ok((id, &*t.name, self.shape(id)?))
        })
    }
}

impl fmt::Display for SolvedGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for item in self.iter() {
            match item {
                Ok((_, name, shape)) => writeln!(f, "{name}: {shape}")?,
                Err(e) => writeln!(f, "{e}")?,
            }
        }
        Ok(())
    }
}
