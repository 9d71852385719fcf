//! The environment: persistent maps from variables to their entries.
//!
//! Variables are dense ids, so the maps are `imbl::Vector`s indexed by id:
//! cloning an environment is O(1) and an update copies O(log n) nodes,
//! which is what lets a solver state be forked for what-if queries.

use imbl::Vector;
use shape_core::{Dim, DimVar, KnownDim, Row, RowTail, RowVar};

use crate::constraint::Constraint;
use crate::error::ShapeError;
use crate::origin::Why;

/// What is known about a dim variable.
#[derive(Clone, Debug)]
pub(crate) enum DimEntry {
    /// `v = value`; `source` says where a known value came from.
    Solved { value: Dim, why: Why, source: Why },
    /// Not solved yet: the inequalities it takes part in.
    Open(DimBounds),
}

/// Inequalities `cur >= v >= subr` and a least upper bound.
#[derive(Clone, Debug, Default)]
pub(crate) struct DimBounds {
    /// Variables known to be `>=` this one.
    pub cur: Vec<(DimVar, Why)>,
    /// Variables known to be `<=` this one.
    pub subr: Vec<(DimVar, Why)>,
    /// The least upper bound (a size > 1), with where it came from.
    pub lub: Option<(KnownDim, Why)>,
    /// Deferred constraints to retry once this variable is solved.
    pub watchers: Vec<Constraint>,
}

/// What is known about a row variable.
#[derive(Clone, Debug)]
pub(crate) enum RowEntry {
    /// `r = value`.
    Solved { value: Row, why: Why },
    /// Not solved yet.
    Open(RowBounds),
}

#[derive(Clone, Debug, Default)]
pub(crate) struct RowBounds {
    /// Row inequalities that could not be simplified further while this
    /// variable is unknown; retried when it is solved.
    pub ineqs: Vec<Constraint>,
    /// Other deferred constraints (element counts, slices).
    pub watchers: Vec<Constraint>,
    /// How many template expansions led to this variable; bounds growth.
    pub depth: u32,
}

/// A dim after substitution.
#[derive(Clone, Debug)]
pub(crate) enum ResolvedDim {
    Known {
        value: KnownDim,
        source: Why,
        /// The variable whose entry holds the value (for label updates).
        holder: Option<DimVar>,
    },
    Var(DimVar),
}

/// A row after substituting solved row variables (dims not yet resolved).
#[derive(Clone, Debug)]
pub(crate) struct ResolvedRow {
    pub dims: Vec<Dim>,
    pub tail: RowTail,
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Env {
    pub dims: Vector<DimEntry>,
    pub rows: Vector<RowEntry>,
}

impl Env {
    pub fn dim_entry(&self, v: DimVar) -> Result<&DimEntry, ShapeError> {
        self.dims.get(v.index()).ok_or(ShapeError::UnknownVariable {
            what: "dim",
            id: v.0,
        })
    }

    pub fn row_entry(&self, v: RowVar) -> Result<&RowEntry, ShapeError> {
        self.rows.get(v.index()).ok_or(ShapeError::UnknownVariable {
            what: "row",
            id: v.0,
        })
    }

    /// Follows solved variables to a known size or an unsolved root.
    /// `literal` is the source of `d` itself when it is a known size.
    pub fn resolve_dim(&self, d: &Dim, literal: Why) -> Result<ResolvedDim, ShapeError> {
        let mut holder = None;
        let mut cur = d.clone();
        let mut source = literal;
        loop {
            match cur {
                Dim::Known(value) => {
                    return Ok(ResolvedDim::Known {
                        value,
                        source,
                        holder,
                    })
                }
                Dim::Var(v) => match self.dim_entry(v)? {
                    DimEntry::Solved {
                        value, source: s, ..
                    } => {
                        holder = Some(v);
                        source = *s;
                        cur = value.clone();
                    }
                    DimEntry::Open(_) => return Ok(ResolvedDim::Var(v)),
                },
            }
        }
    }

    /// Substitutes solved row variables at the front of a row.
    pub fn resolve_row(&self, r: &Row) -> Result<ResolvedRow, ShapeError> {
        let mut tail = r.tail;
        let mut prefix: Vec<&[Dim]> = Vec::new();
        while let RowTail::Open(v) = tail {
            match self.row_entry(v)? {
                RowEntry::Solved { value, .. } => {
                    prefix.push(&value.dims);
                    tail = value.tail;
                }
                RowEntry::Open(_) => break,
            }
        }
        let mut dims = Vec::with_capacity(r.dims.len() + prefix.iter().map(|p| p.len()).sum::<usize>());
        for p in prefix.iter().rev() {
            dims.extend_from_slice(p);
        }
        dims.extend_from_slice(&r.dims);
        Ok(ResolvedRow { dims, tail })
    }

    pub fn dim_bounds(&self, v: DimVar) -> Option<&DimBounds> {
        match self.dims.get(v.index()) {
            Some(DimEntry::Open(b)) => Some(b),
            _ => None,
        }
    }

    pub fn row_bounds(&self, v: RowVar) -> Option<&RowBounds> {
        match self.rows.get(v.index()) {
            Some(RowEntry::Open(b)) => Some(b),
            _ => None,
        }
    }

    /// Applies `f` to the bounds of an unsolved dim variable.
    pub fn update_dim_bounds(&mut self, v: DimVar, f: impl FnOnce(&mut DimBounds)) {
        if let Some(DimEntry::Open(b)) = self.dims.get_mut(v.index()) {
            f(b)
        }
    }

    /// Applies `f` to the bounds of an unsolved row variable.
    pub fn update_row_bounds(&mut self, v: RowVar, f: impl FnOnce(&mut RowBounds)) {
        if let Some(RowEntry::Open(b)) = self.rows.get_mut(v.index()) {
            f(b)
        }
    }
}
