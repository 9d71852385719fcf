//! Terminals: tensors no operation computes (inputs, parameters,
//! constants), whose rows come from a declared spec.
//!
//! Labels are dimension variables local to one spec, digits are fixed
//! sizes, `..name..` is a row variable; rows the spec leaves out are empty.
//! Each fixed size becomes a variable equal to it, so that every axis's
//! solution remembers where its size came from.

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::Arc;

use shape_core::spec::{AxisKind, AxisSpec, RowSpec, RowVarName, ShapeSpec};
use shape_core::{Dim, DimVar, KnownDim, Label, Row, RowKind, RowVar, Shape};

use crate::constraint::Constraint;
use crate::graph::{ConstantProblem, GraphError};
use crate::origin::{Origin, TensorRef, Why};
use crate::solver::Solver;

/// Variables named in one spec.
#[derive(Default)]
pub(crate) struct SpecNames {
    dims: HashMap<String, DimVar>,
    rows: HashMap<RowVarName, RowVar>,
}

/// Builds a row of fresh variables for a spec row; fixed sizes become
/// equations recorded in `constraints`.
pub(crate) fn row_from_spec(
    solver: &mut Solver,
    r: &RowSpec,
    names: &mut SpecNames,
    why: Why,
    constraints: &mut Vec<Constraint>,
) -> Row {
    let n = r.axes.len();
    // Axes after the row variable are counted from the end, as the
    // solver's messages count them; a leading flank has no such position.
    let before = dims_from_spec(solver, &r.before, names, |_| why, constraints);
    let after = dims_from_spec(
        solver,
        &r.axes,
        names,
        |i| why.at_axis(n - 1 - i),
        constraints,
    );
    match &r.row_var {
        Some((name, _)) => {
            let v = *names
                .rows
                .entry(name.clone())
                .or_insert_with(|| solver.fresh_row());
            crate::flank::flanked_row(before, v, after, || solver.fresh_row(), why, constraints)
        }
        None => Row::closed(after),
    }
}

/// Fresh variables for axis entries; fixed sizes become equations recorded
/// in `constraints`, for the reason `why_at(i)` of entry `i`.
fn dims_from_spec(
    solver: &mut Solver,
    axes: &[AxisSpec],
    names: &mut SpecNames,
    why_at: impl Fn(usize) -> Why,
    constraints: &mut Vec<Constraint>,
) -> Vec<Dim> {
    let mut dims = Vec::with_capacity(axes.len());
    for (i, a) in axes.iter().enumerate() {
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
            why: why_at(i),
        });
    }
    dims
}

/// The shape of a declared tensor: the spec's rows (unwritten rows empty)
/// and, for a constant of `num_elems` values, the element count of its
/// output row. Adds the constraints to `solver` (inside the caller's
/// transaction).
pub(crate) fn declared_shape(
    solver: &mut Solver,
    tensor: &TensorRef,
    spec_text: &Arc<str>,
    spec: &ShapeSpec,
    num_elems: Option<(NonZeroU64, NonZeroU64)>,
) -> Result<Shape, GraphError> {
    let mut names = SpecNames::default();
    let mut constraints = Vec::new();
    let mut rows = Vec::with_capacity(3);
    for kind in RowKind::ALL {
        let origin = Origin::Declared {
            tensor: tensor.clone(),
            kind,
            spec: spec_text.clone(),
        };
        let why = Why::of(solver.add_origin(origin));
        rows.push(match spec.row(kind) {
            Some(r) => row_from_spec(solver, r, &mut names, why, &mut constraints),
            None => Row::empty(),
        });
    }
    let [batch, input, output]: [Row; 3] = rows.try_into().expect("three rows");
    // The count is one constraint with its own origin; it is not attached
    // to the tensor's row, which would repeat it on every use.
    if let Some((n, per_output)) = num_elems {
        let why = Why::of(solver.add_origin(Origin::ElementCount {
            tensor: tensor.clone(),
            spec: spec_text.clone(),
            num_elems: n.get(),
        }));
        constraints.push(Constraint::TotalElems {
            row: output.clone(),
            total: per_output,
            why,
        });
    }
    solver.add_all(constraints)?;
    Ok(Shape {
        batch,
        input,
        output,
    })
}

/// Adds `shape`'s rows equal to the rows `spec` writes (a shape required
/// of a tensor after it was created); unwritten rows are not constrained.
pub(crate) fn required_shape(
    solver: &mut Solver,
    tensor: &TensorRef,
    spec_text: &str,
    spec: &ShapeSpec,
    shape: &Shape,
) -> Result<(), GraphError> {
    let mut names = SpecNames::default();
    let mut constraints = Vec::new();
    let spec_text: Arc<str> = Arc::from(spec_text);
    for kind in RowKind::ALL {
        if let Some(r) = spec.row(kind) {
            let origin = Origin::Required {
                tensor: tensor.clone(),
                kind,
                spec: spec_text.clone(),
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
    Ok(solver.add_all(constraints)?)
}

/// For a constant: how many elements the output row holds, given that
/// the batch and input rows must be fixed sizes.
pub(crate) fn elements_per_output(
    name: &str,
    spec_text: &Arc<str>,
    spec: &ShapeSpec,
    n: NonZeroU64,
) -> Result<NonZeroU64, GraphError> {
    let fail = |problem: ConstantProblem| GraphError::Constant {
        name: name.into(),
        spec: spec_text.clone(),
        problem,
    };
    let mut others: u128 = 1;
    for kind in [RowKind::Batch, RowKind::Input] {
        let Some(r) = spec.row(kind) else { continue };
        if r.row_var.is_some() {
            return Err(fail(ConstantProblem::RowVariable));
        }
        for a in &r.axes {
            match &a.kind {
                AxisKind::Size(n) | AxisKind::LabeledSize(_, n) => {
                    others = others
                        .checked_mul(n.get() as u128)
                        .ok_or_else(|| fail(ConstantProblem::TooManyElements))?
                }
                _ => return Err(fail(ConstantProblem::UnknownSize)),
            }
        }
    }
    let total = n.get() as u128;
    if !total.is_multiple_of(others) {
        return Err(fail(ConstantProblem::Indivisible {
            elements: n.get(),
            per_row: others,
        }));
    }
    Ok(NonZeroU64::new((total / others) as u64).expect("a non-zero quotient"))
}
