//! Einsum over one or two operands (`einsum "ij;jk=>ik"`), and permute,
//! its one-operand form (`permute "ij=>ji"`).
//!
//! Every row of every tensor is made *equal* to a template built from the
//! spec: one fresh dim variable per label, shared across the spec; one row
//! variable per `..name..`, and `...` in a row of kind `k` shared by all
//! rows of kind `k`. A batch row the spec does not write is that shared
//! batch variable; an input row it does not write is empty. Labels missing
//! from the result are reduced by a sum.

use std::fmt;
use std::num::NonZeroU64;
use std::sync::Arc;

use shape_core::kernel::{Accumulate, BinaryOp, Expr, IterKind};
use shape_core::spec::{AffineIndex, AxisKind, AxisSpec, RowSpec, RowVarName, ShapeSpec};
use shape_core::{Dim, EinsumSpec, KnownDim, Row, RowKind, RowVar};

use shape_solver::Constraint;
use crate::graph::GraphError;
use crate::lowering::{Lowered, LoweringCx};
use crate::operation::{ConstraintCx, Operation};
use shape_solver::RowSite;
use crate::projections::{AffineKernel, AxisIndex, AxisSite, ProjectionBuilder};
use crate::registry::{BuildArgs, OpEntry};
use crate::sample::SampleCx;

/// How an einsum combines the values that meet in one result element:
/// the labels its result leaves out are reduced by this.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Reduction {
    /// A sum (`einsum`, `permute`).
    #[default]
    Sum,
    /// The largest value (`einsum_max`); NaN is ignored unless every value
    /// is NaN, as in `f32::max`.
    Max,
    /// The smallest value (`einsum_min`).
    Min,
    /// The product (`einsum_prod`).
    Product,
}

impl Reduction {
    /// Every reduction.
    pub const ALL: [Reduction; 4] = [
        Reduction::Sum,
        Reduction::Max,
        Reduction::Min,
        Reduction::Product,
    ];

    /// The name of the einsum that reduces this way in the text language
    /// and the registry.
    pub fn function(self) -> &'static str {
        match self {
            Reduction::Sum => "einsum",
            Reduction::Max => "einsum_max",
            Reduction::Min => "einsum_min",
            Reduction::Product => "einsum_prod",
        }
    }

    /// The kernel accumulation that implements it.
    pub fn accumulate(self) -> Accumulate {
        match self {
            Reduction::Sum => Accumulate::Add,
            Reduction::Max => Accumulate::Max,
            Reduction::Min => Accumulate::Min,
            Reduction::Product => Accumulate::Mul,
        }
    }
}

/// An einsum (or, with one operand, a permute) of a parsed spec, with the
/// texts its messages use, computed once so that applying the same spec
/// many times formats nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Einsum {
    spec: EinsumSpec,
    reduction: Reduction,
    name: Arc<str>,
    /// Per spec (result first, then operands), per row kind: what the
    /// constraint tying that row to the spec says.
    row_rules: Vec<[Arc<str>; 3]>,
}

impl Einsum {
    /// Prepares a parsed spec; the labels the result leaves out are
    /// summed.
    pub fn new(spec: EinsumSpec) -> Einsum {
        Einsum::with_reduction(spec, Reduction::Sum)
    }

    /// Prepares a parsed spec whose left-out labels are reduced by
    /// `reduction`.
    ///
    /// ```
    /// use shape_core::EinsumSpec;
    /// use shape_graph::ops::{Einsum, Reduction};
    /// use shape_graph::Operation;
    /// let rows_max = Einsum::with_reduction(EinsumSpec::parse("ut=>t").unwrap(), Reduction::Max);
    /// assert_eq!(rows_max.name(), "einsum_max \"ut=>t\"");
    /// ```
    pub fn with_reduction(spec: EinsumSpec, reduction: Reduction) -> Einsum {
        let name: Arc<str> = match (reduction, spec.operands.len()) {
            (Reduction::Sum, 1) => format!("permute \"{spec}\"").into(),
            (r, _) => format!("{} \"{spec}\"", r.function()).into(),
        };
        let row_rules = std::iter::once(&spec.result)
            .chain(&spec.operands)
            .map(|s| {
                RowKind::ALL.map(|kind| -> Arc<str> {
                    match s.row(kind) {
                        Some(r) => format!("to match \"{}\" of the spec", RowText(r)).into(),
                        None if kind == RowKind::Batch && !writes_batch(&spec) => {
                            "to equal the batch rows of the other operands".into()
                        }
                        None => "to be empty, as the spec does not write it".into(),
                    }
                })
            })
            .collect();
        Einsum {
            spec,
            reduction,
            name,
            row_rules,
        }
    }

    /// How the labels the result leaves out are reduced.
    pub fn reduction(&self) -> Reduction {
        self.reduction
    }

    /// Parses `text`; `what` (`einsum` or `permute`) names the spec in
    /// errors.
    pub fn parse(text: &str, what: &str) -> Result<Einsum, GraphError> {
        EinsumSpec::parse(text)
            .map(Einsum::new)
            .map_err(|source| GraphError::Spec {
                context: crate::graph::SpecContext::Call {
                    function: Arc::from(what),
                    spec: Arc::from(text),
                },
                source: Box::new(source),
            })
    }

    /// The spec.
    pub fn spec(&self) -> &EinsumSpec {
        &self.spec
    }

    /// The row a spec row stands for at `site`: one dim variable per label
    /// (shared across the spec), one row variable per row variable name; a
    /// fixed index is an axis of at least index + 1 elements, and a
    /// `label:size` the label's variable, of that size.
    fn template<'s>(
        cx: &mut ConstraintCx<'_>,
        site: RowSite,
        r: &'s RowSpec,
        what: &Arc<str>,
        dims: &mut Vec<(&'s str, Dim)>,
        rows: &mut Vec<(&'s RowVarName, RowVar)>,
    ) -> Row {
        let mut entries = |axes: &'s [AxisSpec], trailing: bool| -> Vec<Dim> {
            let n = axes.len();
            let mut out = Vec::with_capacity(n);
            for (j, a) in axes.iter().enumerate() {
                // Axes after the row variable are counted from the end, as
                // the solver's messages count them.
                let at = |why: shape_solver::Why| if trailing { why.at_axis(n - 1 - j) } else { why };
                out.push(match &a.kind {
                    AxisKind::Label(l) => {
                        lookup_or(dims, l.as_str(), || Dim::Var(cx.fresh_dim()))
                    }
                    AxisKind::Size(n) => Dim::Known(KnownDim::sized(*n)),
                    // Einsum specs refuse `var`; one built by hand is ragged.
                    AxisKind::Ragged => Dim::Known(KnownDim::ragged()),
                    AxisKind::LabeledSize(l, size) => {
                        let d = lookup_or(dims, l.as_str(), || Dim::Var(cx.fresh_dim()));
                        let why = cx.why_row(site, format!("to have {size} elements on the axis `{l}:{size}`").into());
                        cx.add(Constraint::DimEq {
                            a: d.clone(),
                            b: Dim::Known(KnownDim::sized(*size)),
                            why: at(why),
                        });
                        d
                    }
                    AxisKind::Fixed(i) => {
                        let d = Dim::Var(cx.fresh_dim());
                        let min = i.checked_add(1).and_then(NonZeroU64::new);
                        let why = cx.why_row(site, fixed_index_rule(*i).into());
                        cx.add(Constraint::DimAtLeast {
                            dim: d.clone(),
                            min: min.unwrap_or(NonZeroU64::MAX),
                            why: at(why),
                        });
                        d
                    }
                    AxisKind::Anonymous => Dim::Var(cx.fresh_dim()),
                    AxisKind::Affine(a) => {
                        let input = Dim::Var(cx.fresh_dim());
                        let over = lookup_or(dims, a.over.as_str(), || Dim::Var(cx.fresh_dim()));
                        let why = cx.why_row(site, format!("to be the input of the convolution `{a}`").into());
                        let kernel = match &a.kernel {
                            Some((k, size)) => {
                                let d = lookup_or(dims, k.as_str(), || Dim::Var(cx.fresh_dim()));
                                if let Some(n) = size {
                                    cx.add(Constraint::DimEq {
                                        a: d.clone(),
                                        b: Dim::Known(KnownDim::new(*n)),
                                        why: at(why),
                                    });
                                }
                                d
                            }
                            None => Dim::Known(KnownDim::one()),
                        };
                        cx.add(Constraint::DimAffine {
                            input: input.clone(),
                            over,
                            kernel,
                            stride: a.stride,
                            dilation: a.dilation,
                            padded: a.padded,
                            why: at(why),
                        });
                        input
                    }
                });
            }
            out
        };
        let before = entries(&r.before, false);
        let after = entries(&r.axes, true);
        match &r.row_var {
            Some((name, _)) => {
                let v = lookup_or(rows, name, || cx.fresh_row());
                cx.flanked_row(site, before, v, after, what.clone())
            }
            None => Row::closed(after),
        }
    }
}

impl Operation for Einsum {
    fn name(&self) -> &str {
        &self.name
    }

    fn spec_part(&self, position: usize) -> Option<&ShapeSpec> {
        match position.checked_sub(1) {
            None => Some(&self.spec.result),
            Some(i) => self.spec.operands.get(i),
        }
    }

    fn arity(&self) -> usize {
        self.spec.operands.len()
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        let spec = &self.spec;
        let shared_batch = !writes_batch(spec);
        // An einsum names a handful of axes: a linear scan beats hashing.
        let mut dims: Vec<(&str, Dim)> = Vec::with_capacity(8);
        let mut rows: Vec<(&RowVarName, RowVar)> = Vec::new();
        let specs = std::iter::once(&spec.result).chain(&spec.operands);
        for (i, s) in specs.enumerate() {
            for (k, kind) in RowKind::ALL.into_iter().enumerate() {
                let site = RowSite {
                    position: i as u32,
                    kind,
                };
                let what = &self.row_rules[i][k];
                let template = match (s.row(kind), kind) {
                    (Some(r), _) => Self::template(cx, site, r, what, &mut dims, &mut rows),
                    (None, RowKind::Batch) if shared_batch => {
                        let v = lookup_or(&mut rows, &BATCH, || cx.fresh_row());
                        Row::open(v, vec![])
                    }
                    (None, _) => Row::empty(),
                };
                cx.row_is(site, template, what.clone());
            }
        }
    }

    fn project(&self, cx: &mut ProjectionBuilder<'_>) {
        let spec = &self.spec;
        let shared_batch = !writes_batch(spec);
        let specs = std::iter::once(&spec.result).chain(&spec.operands);
        let mut keys: Vec<(EinsumKey<'_>, AxisSite)> = Vec::new();
        // Affine axes, placed once every label has its first site.
        let mut affines: Vec<(AxisSite, &AffineIndex)> = Vec::new();
        for (t, s) in specs.enumerate() {
            for kind in RowKind::ALL {
                let row = RowSite {
                    position: t as u32,
                    kind,
                };
                let len = cx.row_len(row);
                let (var, before, axes): (Option<&RowVarName>, &[_], &[_]) =
                    match (s.row(kind), kind) {
                        (Some(r), _) => (r.row_var.as_ref().map(|(n, _)| n), &r.before, &r.axes),
                        (None, RowKind::Batch) if shared_batch => (Some(&BATCH), &[], &[]),
                        (None, _) => (None, &[], &[]),
                    };
                // The solved row is the leading flank, the row variable's
                // axes, then the trailing axes.
                let spread = len.saturating_sub(axes.len());
                fn label(a: &AxisSpec) -> Option<EinsumKey<'_>> {
                    match &a.kind {
                        AxisKind::Label(l) | AxisKind::LabeledSize(l, _) => {
                            Some(EinsumKey::Label(l))
                        }
                        AxisKind::Fixed(i) => Some(EinsumKey::Fixed(*i)),
                        AxisKind::Affine(a) => Some(EinsumKey::Affine(a)),
                        AxisKind::Size(_) | AxisKind::Anonymous | AxisKind::Ragged => None,
                    }
                }
                for j in 0..len {
                    let key = if j < before.len() {
                        label(&before[j])
                    } else if j < spread {
                        var.map(|v| EinsumKey::RowVar(v, j - before.len()))
                    } else {
                        label(&axes[j - spread])
                    };
                    let Some(key) = key else { continue };
                    let at = AxisSite { row, axis: j };
                    if let EinsumKey::Fixed(i) = key {
                        cx.fix(at, AxisIndex::Fixed(i));
                        continue;
                    }
                    if let EinsumKey::Affine(a) = key {
                        affines.push((at, a));
                        continue;
                    }
                    match keys.iter().find(|(k, _)| *k == key) {
                        Some(&(_, first)) => cx.tie(first, at),
                        None => keys.push((key, at)),
                    }
                }
            }
        }
        for (at, a) in affines {
            let site_of = |name: &str| {
                keys.iter()
                    .find(|(k, _)| *k == EinsumKey::Label(name))
                    .map(|&(_, s)| s)
            };
            // The spec's check gives the output label a result axis, and the
            // kernel another operand's axis or a size of its own.
            let Some(over) = site_of(&a.over) else { continue };
            let kernel = match &a.kernel {
                None => None,
                Some((k, size)) => match site_of(k) {
                    Some(s) => Some(AffineKernel::Axis(s)),
                    None => Some(AffineKernel::Taps(size.map_or(1, |n| n.get()))),
                },
            };
            cx.affine(at, a.stride.get(), over, a.dilation.get(), kernel, a.padded);
        }
    }

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        let body = match self.spec.operands.len() {
            1 => Expr::Load(0),
            _ => Expr::Binary(
                BinaryOp::Mul,
                Box::new(Expr::Load(0)),
                Box::new(Expr::Load(1)),
            ),
        };
        // Without reduced loops a maximum, minimum or product of one value
        // is that value: assigned, so that NaN stays NaN.
        let reduces = cx.projections().kinds.contains(&IterKind::Reduction);
        let accumulate = match self.reduction {
            Reduction::Sum => Accumulate::Add,
            r if reduces => r.accumulate(),
            _ => Accumulate::Assign,
        };
        cx.single_kernel(body, accumulate)
    }

    fn spell(&self, operands: &[&str]) -> String {
        let f = match (self.reduction, self.spec.operands.len()) {
            (Reduction::Sum, 1) => "permute",
            (r, _) => r.function(),
        };
        format!("{f}(\"{}\", {})", self.spec, operands.join(", "))
    }
}

static BATCH: RowVarName = RowVarName::OfKind(RowKind::Batch);

/// What lines an einsum axis up with others (or, for a fixed index,
/// addresses it on its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EinsumKey<'a> {
    Label(&'a str),
    RowVar(&'a RowVarName, usize),
    Fixed(u64),
    Affine(&'a AffineIndex),
}

/// Whether some part of the spec writes a batch row: then, as in OCANNL,
/// a part that does not write one has none, rather than sharing one row
/// variable with every other part.
fn writes_batch(spec: &EinsumSpec) -> bool {
    std::iter::once(&spec.result)
        .chain(&spec.operands)
        .any(|s| s.batch.is_some())
}

/// What a fixed index requires of its axis, as messages say it. Digits in
/// einsum specs were sizes before issue 13: the message says so, for
/// programs written then.
fn fixed_index_rule(index: u64) -> String {
    let n = u128::from(index) + 1;
    let s = if n == 1 { "" } else { "s" };
    format!(
        "to have at least {n} element{s} on the axis the spec's digit `{index}` indexes (a digit in \
         an einsum spec is a fixed index, a position, not a size: write a size as `label:size`)"
    )
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

/// `count` labels starting at `from`, comma-separated in a spec.
fn labels(count: usize, from: u8) -> Vec<String> {
    (0..count)
        .map(|k| ((from + k as u8) as char).to_string())
        .collect()
}

/// Reverses the output axes of a tensor, or sums its last one.
fn sample_permute(cx: &mut dyn SampleCx) -> Result<Option<crate::TensorId>, GraphError> {
    let t = cx.pick();
    let s = cx.shape(t)?;
    let (b, i, o) = (s.batch.len(), s.input.len(), s.output.len());
    if o == 0 {
        return Ok(None);
    }
    let ls = labels(o, b'a');
    let result = if cx.below(2) == 0 {
        let mut rev = ls.clone();
        rev.reverse();
        rev.join(",")
    } else {
        ls[..ls.len() - 1].join(",")
    };
    let bl = labels(b, b'm').join(",");
    let il = labels(i, b'u').join(",");
    let spec = format!("{bl}|{il}->{}=>{bl}|{il}->{result},", ls.join(","));
    cx.graph().permute(&spec, t).map(Some)
}

/// Contracts the last output axis of a tensor with a new vector.
fn sample_contraction(cx: &mut dyn SampleCx) -> Result<Option<crate::TensorId>, GraphError> {
    let t = cx.pick();
    let s = cx.shape(t)?;
    let Some(last) = s.output.last().map(KnownDim::size) else {
        return Ok(None);
    };
    let (b, i, o) = (s.batch.len(), s.input.len(), s.output.len());
    let v = cx.input(&[], &[], &[last])?;
    let ls = labels(o, b'a');
    let bl = labels(b, b'm').join(",");
    let il = labels(i, b'u').join(",");
    let keep = ls[..ls.len() - 1].join(",");
    let spec = format!(
        "{bl}|{il}->{};{}=>{bl}|{il}->{keep},",
        ls.join(","),
        ls[ls.len() - 1]
    );
    cx.graph().einsum(&spec, &[t, v]).map(Some)
}

/// Reduces the first output axis of a tensor by `reduction` (the first,
/// so that the result broadcasts back against the tensor).
fn sample_reduction(
    cx: &mut dyn SampleCx,
    reduction: Reduction,
) -> Result<Option<crate::TensorId>, GraphError> {
    let t = cx.pick();
    let s = cx.shape(t)?;
    let (b, i, o) = (s.batch.len(), s.input.len(), s.output.len());
    if o == 0 {
        return Ok(None);
    }
    let ls = labels(o, b'a');
    let bl = labels(b, b'm').join(",");
    let il = labels(i, b'u').join(",");
    let spec = format!(
        "{bl}|{il}->{}=>{bl}|{il}->{},",
        ls.join(","),
        ls[1..].join(",")
    );
    cx.graph()
        .call(reduction.function(), Some(&spec), &[t])
        .map(Some)
}

fn build(args: &BuildArgs<'_>) -> Result<Arc<dyn Operation>, GraphError> {
    let text = args.spec.ok_or_else(|| GraphError::SpecExpected {
        function: args.name.to_string(),
    })?;
    let reduction = Reduction::ALL
        .into_iter()
        .find(|r| r.function() == args.name)
        .unwrap_or_default();
    let op = Einsum::parse(text, args.name)?;
    let op = Einsum::with_reduction(op.spec, reduction);
    if args.name == "permute" && op.arity() != 1 {
        return Err(GraphError::PermuteSpec {
            spec: text.to_string(),
            operands: op.arity(),
        });
    }
    Ok(Arc::new(op))
}

pub(super) fn entries() -> Vec<OpEntry> {
    // `einsum_max`, `einsum_min`, `einsum_prod`: einsum with another
    // reduction, listed after `einsum`.
    let others = Reduction::ALL[1..].iter().map(|&r| {
        let how = match r {
            Reduction::Max => "a maximum",
            Reduction::Min => "a minimum",
            _ => "a product",
        };
        OpEntry::new(
            r.function(),
            &format!("like einsum, with the labels its result leaves out reduced by {how}"),
            1..=2,
            build,
        )
        .with_spec()
        .with_sampler(move |cx| sample_reduction(cx, r))
    });
    let mut entries = vec![
        OpEntry::new(
            "einsum",
            "a product of one or two tensors summed over the labels its result leaves out",
            1..=2,
            build,
        )
        .with_spec()
        .with_sampler(sample_contraction),
        OpEntry::new(
            "permute",
            "one tensor's axes rearranged (and summed over the labels its result leaves out)",
            1..=1,
            build,
        )
        .with_spec()
        .with_sampler(sample_permute),
    ];
    entries.splice(1..1, others);
    entries
}
