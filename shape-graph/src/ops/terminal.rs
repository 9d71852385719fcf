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
use shape_core::{Dim, DimVar, KnownDim, Label, Row, RowKind, RowTail, RowVar, Shape};

use crate::graph::{ConstantProblem, GraphError};
use shape_solver::Constraint;
use shape_solver::Solver;
use shape_solver::{Origin, TensorRef, Why};

/// Variables named in one spec; a label that names one of the program's
/// sizes (`size d = 64`) is that size's variable.
///
/// Lists searched in order, keyed by the spec's own text: a spec names a
/// few labels, and hash maps of copied names were four allocations per
/// declaration.
#[derive(Default)]
pub(crate) struct SpecNames<'g, 's> {
    dims: Vec<(&'s str, DimVar)>,
    rows: Vec<(&'s RowVarName, RowVar)>,
    sizes: Option<&'g HashMap<Arc<str>, DimVar>>,
}

impl<'g> SpecNames<'g, '_> {
    /// Names that see the program's sizes.
    pub(crate) fn with_sizes(sizes: &'g HashMap<Arc<str>, DimVar>) -> Self {
        SpecNames {
            sizes: (!sizes.is_empty()).then_some(sizes),
            ..SpecNames::default()
        }
    }
}

/// The value `key` has in `list`, added as `make()` if it has none.
fn lookup_or<'s, K: PartialEq + ?Sized, V: Copy>(
    list: &mut Vec<(&'s K, V)>,
    key: &'s K,
    make: impl FnOnce() -> V,
) -> V {
    if let Some(&(_, v)) = list.iter().find(|(k, _)| *k == key) {
        return v;
    }
    let v = make();
    list.push((key, v));
    v
}

/// Builds a row of fresh variables for a spec row; fixed sizes become
/// equations recorded in `constraints`.
pub(crate) fn row_from_spec<'s>(
    solver: &mut Solver,
    r: &'s RowSpec,
    names: &mut SpecNames<'_, 's>,
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
            let v = lookup_or(&mut names.rows, name, || solver.fresh_row());
            shape_solver::flank::flanked_row(
                before,
                v,
                after,
                || solver.fresh_row(),
                why,
                constraints,
            )
        }
        None => Row::closed(after),
    }
}

/// Fresh variables for axis entries; fixed sizes become equations recorded
/// in `constraints`, for the reason `why_at(i)` of entry `i`.
fn dims_from_spec<'s>(
    solver: &mut Solver,
    axes: &'s [AxisSpec],
    names: &mut SpecNames<'_, 's>,
    why_at: impl Fn(usize) -> Why,
    constraints: &mut Vec<Constraint>,
) -> Vec<Dim> {
    let mut dims = Vec::with_capacity(axes.len());
    for (i, a) in axes.iter().enumerate() {
        let known = match &a.kind {
            AxisKind::Label(l) => {
                let sizes = names.sizes;
                let v = lookup_or(&mut names.dims, l.as_str(), || {
                    (sizes.and_then(|m| m.get(l.as_str()).copied()))
                        .unwrap_or_else(|| solver.fresh_dim())
                });
                dims.push(Dim::Var(v));
                continue;
            }
            // Shape specs refuse affine indices; one built by hand is an
            // unknown size.
            AxisKind::Anonymous | AxisKind::Affine(_) => {
                dims.push(Dim::Var(solver.fresh_dim()));
                continue;
            }
            // Shape specs read digits as sizes; a spec built by hand with a
            // fixed index asks for an axis that index fits in.
            AxisKind::Fixed(index) => {
                let v = solver.fresh_dim();
                dims.push(Dim::Var(v));
                constraints.push(Constraint::DimAtLeast {
                    dim: Dim::Var(v),
                    min: (index.checked_add(1).and_then(NonZeroU64::new))
                        .unwrap_or(NonZeroU64::MAX),
                    why: why_at(i),
                });
                continue;
            }
            AxisKind::Size(s) => KnownDim::sized(*s),
            AxisKind::Ragged => KnownDim::ragged(),
            AxisKind::LabeledSize(l, s) => KnownDim::sized(*s).with_label(Some(Label::new(l))),
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
    num_elems: Option<NonZeroU64>,
    labels: Option<&mut Vec<(Arc<str>, DimVar)>>,
    sizes: &HashMap<Arc<str>, DimVar>,
) -> Result<Shape, GraphError> {
    let mut names = SpecNames::with_sizes(sizes);
    let mut constraints = Vec::new();
    // In `RowKind::ALL`'s order, on the stack.
    let [batch, input, output]: [Row; 3] = std::array::from_fn(|k| {
        let kind = RowKind::ALL[k];
        let origin = Origin::Declared {
            tensor: tensor.clone(),
            kind,
            spec: spec_text.clone(),
        };
        let why = Why::of(solver.add_origin(origin));
        match spec.row(kind) {
            Some(r) => row_from_spec(solver, r, &mut names, why, &mut constraints),
            None => Row::empty(),
        }
    });
    // The count is one constraint with its own origin, over the axes of
    // all three rows (the product does not depend on their order, so the
    // one row variable a counted spec may have stands first); it is not
    // attached to the tensor's rows, which would repeat it on every use.
    if let Some(n) = num_elems {
        let why = Why::of(solver.add_origin(Origin::ElementCount {
            tensor: tensor.clone(),
            spec: spec_text.clone(),
            num_elems: n.get(),
        }));
        let dims = (batch.dims.iter())
            .chain(&output.dims)
            .chain(&input.dims)
            .cloned()
            .collect();
        let tail = [&batch, &output, &input]
            .into_iter()
            .find_map(|r| r.row_var())
            .map_or(RowTail::Closed, RowTail::Open);
        constraints.push(Constraint::TotalElems {
            row: Row {
                dims,
                tail,
                constraint: shape_core::RowConstraint::Unconstrained,
            },
            total: n,
            why,
        });
    }
    solver.add_all(constraints)?;
    if let Some(labels) = labels {
        let mut named: Vec<(Arc<str>, DimVar)> = (names.dims.into_iter())
            .map(|(name, v)| (Arc::from(name), v))
            .collect();
        named.sort_by_key(|&(_, v)| v);
        labels.extend(named);
    }
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
    sizes: &HashMap<Arc<str>, DimVar>,
) -> Result<(), GraphError> {
    let mut names = SpecNames::with_sizes(sizes);
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

/// For a constant: at most one of its rows may have a row variable; the
/// count then decides that variable's axes.
pub(crate) fn check_counted_spec(
    name: &str,
    spec_text: &Arc<str>,
    spec: &ShapeSpec,
) -> Result<(), GraphError> {
    let open = RowKind::ALL
        .into_iter()
        .filter(|&kind| spec.row(kind).is_some_and(|r| r.row_var.is_some()))
        .count();
    if open > 1 {
        return Err(GraphError::Constant {
            name: name.into(),
            spec: spec_text.clone(),
            problem: ConstantProblem::RowVariable,
        });
    }
    Ok(())
}
