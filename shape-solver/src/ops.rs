//! Operation logic: the constraints each kind of operation imposes.
//!
//! Broadcasting operations relate the result (`cur`) to each operand
//! (`subr`) by row inequalities; einsum and permute relate every row to a
//! template built from the spec by row equalities.

use std::fmt;
use std::sync::Arc;

use shape_core::spec::{AxisKind, RowSpec, RowVarName, ShapeSpec};
use shape_core::{Dim, EinsumSpec, KnownDim, Label, Row, RowKind, Shape};

use crate::constraint::Constraint;
use crate::origin::{OpRef, Origin, Relation, RowSite, Why};

use crate::solver::Solver;

/// What an operation does to shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum OpKind {
    /// A pointwise function of one tensor (`relu`, `exp`, ...): the result
    /// broadcasts from the operand in all three rows.
    Unary(Arc<str>),
    /// A pointwise function of two tensors (`add`, `mul`, ...): numpy-style
    /// broadcasting in each of the three rows.
    Binary(Arc<str>),
    /// `a * b`: `b`'s outputs feed `a`'s inputs (matrix multiplication,
    /// function composition); batch axes broadcast.
    Compose,
    /// An einsum over one or two operands, given by a spec.
    Einsum(Arc<EinsumOp>),
    /// Swaps the input and output rows; batch axes are kept.
    Transpose,
    /// Drops the leftmost batch axis.
    BatchSlice,
}

impl OpKind {
    /// How many operands the operation takes.
    pub fn arity(&self) -> usize {
        match self {
            OpKind::Unary(_) | OpKind::Transpose | OpKind::BatchSlice => 1,
            OpKind::Binary(_) | OpKind::Compose => 2,
            OpKind::Einsum(e) => e.spec.operands.len(),
        }
    }

    /// The name used in messages.
    pub fn name(&self) -> Arc<str> {
        static NAMES: std::sync::LazyLock<[Arc<str>; 3]> = std::sync::LazyLock::new(|| {
            ["compose".into(), "transpose".into(), "batch_slice".into()]
        });
        match self {
            OpKind::Unary(n) | OpKind::Binary(n) => n.clone(),
            OpKind::Compose => NAMES[0].clone(),
            OpKind::Einsum(e) => e.name.clone(),
            OpKind::Transpose => NAMES[1].clone(),
            OpKind::BatchSlice => NAMES[2].clone(),
        }
    }

    /// For operations whose result broadcasts from its operands: each
    /// `(result row, operand position (1-based), operand row)` with
    /// `result row >= operand row`.
    pub(crate) fn result_bounds(&self) -> &'static [(RowKind, usize, RowKind)] {
        use RowKind::{Batch as B, Input as I, Output as O};
        match self {
            OpKind::Unary(_) => &[(B, 1, B), (I, 1, I), (O, 1, O)],
            OpKind::Binary(_) => &[
                (B, 1, B),
                (B, 2, B),
                (I, 1, I),
                (I, 2, I),
                (O, 1, O),
                (O, 2, O),
            ],
            OpKind::Compose => &[(B, 1, B), (B, 2, B), (I, 2, I), (O, 1, O)],
            OpKind::Transpose => &[(B, 1, B), (I, 1, O), (O, 1, I)],
            OpKind::Einsum(_) | OpKind::BatchSlice => &[],
        }
    }

    /// An einsum (or, with one operand, a permute) of the given spec.
    pub fn einsum(spec: EinsumSpec) -> OpKind {
        OpKind::Einsum(Arc::new(EinsumOp::new(spec)))
    }
}

/// A parsed einsum spec together with the texts its messages use, computed
/// once so that applying the same spec many times formats nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EinsumOp {
    spec: EinsumSpec,
    name: Arc<str>,
    /// Per spec (result first, then operands), per row kind: what the
    /// constraint tying that row to the spec says.
    row_rules: Vec<[Arc<str>; 3]>,
}

impl EinsumOp {
    /// Prepares a parsed spec.
    pub fn new(spec: EinsumSpec) -> EinsumOp {
        let name: Arc<str> = if spec.operands.len() == 1 {
            format!("permute \"{spec}\"").into()
        } else {
            format!("einsum \"{spec}\"").into()
        };
        let row_rules = std::iter::once(&spec.result)
            .chain(&spec.operands)
            .map(|s| {
                RowKind::ALL.map(|kind| -> Arc<str> {
                    match s.row(kind) {
                        Some(r) => format!("to match \"{}\" of the spec", RowText(r)).into(),
                        None if kind == RowKind::Batch => {
                            "to equal the batch rows of the other operands".into()
                        }
                        None => "to be empty, as the spec does not write it".into(),
                    }
                })
            })
            .collect();
        EinsumOp {
            spec,
            name,
            row_rules,
        }
    }

    /// The spec.
    pub fn spec(&self) -> &EinsumSpec {
        &self.spec
    }
}

impl fmt::Display for OpKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// Builds the constraints of one operation instance. Position 0 is the
/// result, positions 1.. the operands.
pub(crate) struct OpContext<'a, 'b, 'c> {
    pub solver: &'b mut Solver,
    pub op: Arc<OpRef>,
    pub shapes: &'c [&'a Shape],
}

impl OpContext<'_, '_, '_> {
    fn site(&self, i: usize, kind: RowKind) -> RowSite {
        RowSite {
            // An operation has far fewer operands than `u32::MAX`: its
            // operand list is in memory.
            position: u32::try_from(i).unwrap_or(u32::MAX),
            kind,
        }
    }

    /// `left.kl` related to `right.kr`.
    fn relate(
        &mut self,
        left: (usize, RowKind),
        right: (usize, RowKind),
        relation: Relation,
    ) -> Constraint {
        let origin = Origin::Op {
            op: self.op.clone(),
            left: self.site(left.0, left.1),
            right: self.site(right.0, right.1),
            relation,
        };
        let why = Why::of(self.solver.add_origin(origin));
        let a = self.shapes[left.0].row(left.1).clone();
        let b = self.shapes[right.0].row(right.1).clone();
        match relation {
            Relation::Equal => Constraint::RowEq { a, b, why },
            Relation::Broadcasts => Constraint::RowIneq {
                cur: a,
                subr: b,
                why,
            },
        }
    }

    fn row_why(&mut self, i: usize, kind: RowKind, what: Arc<str>) -> Why {
        let origin = Origin::OpRow {
            op: self.op.clone(),
            site: self.site(i, kind),
            what,
        };
        Why::of(self.solver.add_origin(origin))
    }

    /// Queues the constraints of `kind` applied to the shapes in this
    /// context on the solver, in order, as `Solver::add_all` would; the
    /// caller runs the solver.
    pub fn push_constraints(&mut self, kind: &OpKind) {
        use Relation::{Broadcasts as Ge, Equal as Eq};
        use RowKind::{Batch as B, Input as I, Output as O};
        match kind {
            OpKind::Unary(_) | OpKind::Binary(_) | OpKind::Compose | OpKind::Transpose => {
                if let OpKind::Compose = kind {
                    // The second operand's outputs feed the first's inputs.
                    let c = self.relate((1, I), (2, O), Ge);
                    self.solver.push(c);
                }
                for &(rk, operand, ok) in kind.result_bounds() {
                    let c = self.relate((0, rk), (operand, ok), Ge);
                    self.solver.push(c);
                }
            }
            OpKind::BatchSlice => {
                let why = self.row_why(
                    0,
                    B,
                    "to be the operand's batch row without its first axis".into(),
                );
                let drop_first = Constraint::DropFirst {
                    whole: self.shapes[1].batch.clone(),
                    rest: self.shapes[0].batch.clone(),
                    why,
                };
                self.solver.push(drop_first);
                let c = self.relate((0, I), (1, I), Eq);
                self.solver.push(c);
                let c = self.relate((0, O), (1, O), Eq);
                self.solver.push(c);
            }
            OpKind::Einsum(e) => self.einsum(e),
        }
    }

    fn einsum(&mut self, e: &EinsumOp) {
        let spec = &e.spec;
        // An einsum names a handful of axes: a linear scan beats hashing.
        let mut dims: Vec<(&str, Dim)> = Vec::with_capacity(8);
        let mut rows: Vec<(&RowVarName, shape_core::RowVar)> = Vec::new();
        let batch_name = RowVarName::OfKind(RowKind::Batch);
        let specs = std::iter::once(&spec.result).chain(&spec.operands);
        for (i, s) in specs.enumerate() {
            for (k, kind) in RowKind::ALL.into_iter().enumerate() {
                let template = match (s.row(kind), kind) {
                    (Some(r), _) => self.template(r, &mut dims, &mut rows),
                    (None, RowKind::Batch) => {
                        let v = lookup_or(&mut rows, &batch_name, || self.solver.fresh_row());
                        Row::open(v, vec![])
                    }
                    (None, _) => Row::empty(),
                };
                let why = self.row_why(i, kind, e.row_rules[i][k].clone());
                self.solver.push(Constraint::RowEq {
                    a: self.shapes[i].row(kind).clone(),
                    b: template,
                    why,
                });
            }
        }
    }

    fn template<'s>(
        &mut self,
        r: &'s RowSpec,
        dims: &mut Vec<(&'s str, Dim)>,
        rows: &mut Vec<(&'s RowVarName, shape_core::RowVar)>,
    ) -> Row {
        let ds = r
            .axes
            .iter()
            .map(|a| match &a.kind {
                AxisKind::Label(l) => {
                    lookup_or(dims, l.as_str(), || Dim::Var(self.solver.fresh_dim()))
                }
                AxisKind::Size(n) => Dim::Known(KnownDim::new(*n)),
                AxisKind::LabeledSize(l, n) => {
                    Dim::Known(KnownDim::new(*n).with_label(Some(Label::new(l))))
                }
                AxisKind::Anonymous => Dim::Var(self.solver.fresh_dim()),
            })
            .collect();
        match &r.row_var {
            Some((name, _)) => {
                let v = lookup_or(rows, name, || self.solver.fresh_row());
                Row::open(v, ds)
            }
            None => Row::closed(ds),
        }
    }
}

/// The value for `key`, made and remembered on first use.
fn lookup_or<K: PartialEq, V: Clone>(map: &mut Vec<(K, V)>, key: K, make: impl FnOnce() -> V) -> V {
    if let Some((_, v)) = map.iter().find(|(k, _)| *k == key) {
        return v.clone();
    }
    let v = make();
    map.push((key, v.clone()));
    v
}

/// A row spec printed on its own.
struct RowText<'a>(&'a RowSpec);

impl fmt::Display for RowText<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let spec = ShapeSpec {
            batch: None,
            input: None,
            output: self.0.clone(),
        };
        spec.fmt(f)
    }
}
