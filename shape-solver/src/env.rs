//! The environment: persistent maps from variables to their entries.
//!
//! Variables are dense ids, so the maps are `imbl::Vector`s indexed by id:
//! cloning an environment is O(1) and an update copies O(log n) nodes,
//! which is what lets a solver state be forked for what-if queries.

use std::sync::Arc;

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
    /// Not solved yet: the inequalities it takes part in. Shared, so that
    /// cloning an environment (or a chunk of it) copies pointers only.
    Open(Arc<DimBounds>),
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
    Solved { value: Arc<Row> },
    /// Not solved yet. Beside the pointer, what finalization's checks of
    /// upper bounds need first, read without following it (see
    /// [`upper_hint`]).
    Open {
        bounds: Arc<RowBounds>,
        upper_hint: u32,
    },
}

#[derive(Clone, Debug, Default)]
pub(crate) struct RowBounds {
    /// Row inequalities that could not be simplified further while this
    /// variable is unknown, retried when it is solved, in the order they
    /// were stored: those where it is the operand side (its upper bounds,
    /// which finalization reads) and the rest (it is the result side, or on
    /// both sides). One list for both keeps a variable to one allocation.
    pub ineqs: Ineqs,
    /// Other deferred constraints (element counts, slices).
    pub watchers: Vec<Constraint>,
    /// How many template expansions led to this variable (bounds the
    /// growth of rows through cyclic inequalities).
    pub depth: u32,
}

/// The `upper_hint` of an open row entry with these bounds: 0 when no upper
/// bound is stored; 2 + id when the first one's result row ends in row
/// variable `id`; 1 otherwise (it is closed, or the id does not fit).
pub(crate) fn upper_hint(b: &RowBounds) -> u32 {
    match b.uppers().next().map(|s| s.cur.tail) {
        None => 0,
        Some(RowTail::Open(v)) => v.0.checked_add(2).unwrap_or(1),
        Some(RowTail::Closed) => 1,
    }
}

impl RowBounds {
    /// The stored inequalities that bound this variable from above.
    pub fn uppers(&self) -> impl Iterator<Item = &StoredIneq> {
        self.ineqs.iter().filter(|s| s.upper)
    }

    /// The other stored inequalities.
    pub fn lowers(&self) -> impl Iterator<Item = &StoredIneq> {
        self.ineqs.iter().filter(|s| !s.upper)
    }
}

/// A short list of stored inequalities whose first entries live in the
/// bounds' own allocation: most row variables store one to three, so this
/// saves an allocation per variable and keeps what finalization reads next
/// to the bounds' header.
#[derive(Clone, Debug, Default)]
pub(crate) struct Ineqs {
    /// Filled in order; `rest` is used only once both are taken.
    head: [Option<StoredIneq>; 2],
    rest: Vec<StoredIneq>,
}

impl Ineqs {
    pub fn len(&self) -> usize {
        self.head.iter().take_while(|s| s.is_some()).count() + self.rest.len()
    }

    pub fn push(&mut self, s: StoredIneq) {
        match self.head.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some(s),
            None => self.rest.push(s),
        }
    }

    pub fn truncate(&mut self, len: usize) {
        let n = self.head.len();
        self.rest.truncate(len.saturating_sub(n));
        for slot in self.head.iter_mut().skip(len) {
            *slot = None;
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &StoredIneq> {
        self.head.iter().map_while(Option::as_ref).chain(&self.rest)
    }
}

/// A row inequality `cur >= [..subr..]` that waits on row variables: the
/// operand side is always a row variable alone, so only its id is kept.
#[derive(Clone, Debug)]
pub(crate) struct StoredIneq {
    /// The broadcast-to side.
    pub cur: Row,
    /// The operand side: this row variable and nothing else.
    pub subr: RowVar,
    pub why: Why,
    /// Whether it is stored on `subr` as one of its upper bounds.
    pub upper: bool,
}

impl StoredIneq {
    /// The operand side as a row.
    pub fn subr_row(&self) -> Row {
        Row::open(self.subr, Vec::new())
    }

    /// The constraint to retry.
    pub fn to_constraint(&self) -> Constraint {
        Constraint::RowIneq {
            cur: self.cur.clone(),
            subr: self.subr_row(),
            why: self.why,
        }
    }
}

fn is_open_dim(e: &DimEntry) -> bool {
    matches!(e, DimEntry::Open(_))
}

fn is_open_row(e: &RowEntry) -> bool {
    matches!(e, RowEntry::Open { .. })
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

/// The dims of a resolved row, allocated only when two or more pieces had
/// to be joined.
#[derive(Clone, Debug)]
pub(crate) enum ResolvedDims<'r> {
    /// Nothing was substituted: the row's own dims.
    Borrowed(&'r [Dim]),
    /// The row had no dims of its own and one solved variable: its value.
    Shared(Arc<Row>),
    /// Several pieces joined.
    Owned(Vec<Dim>),
}

impl std::ops::Deref for ResolvedDims<'_> {
    type Target = [Dim];
    fn deref(&self) -> &[Dim] {
        match self {
            ResolvedDims::Borrowed(d) => d,
            ResolvedDims::Shared(r) => &r.dims,
            ResolvedDims::Owned(d) => d,
        }
    }
}

/// A row after substituting solved row variables (dims not yet resolved).
#[derive(Clone, Debug)]
pub(crate) struct ResolvedRow<'r> {
    pub dims: ResolvedDims<'r>,
    pub tail: RowTail,
}

#[derive(Debug)]
pub(crate) struct Env {
    pub dims: Vector<DimEntry>,
    pub rows: Vector<RowEntry>,
    /// Shared empty bounds for new variables, so creating one allocates
    /// nothing until its bounds are first written.
    empty_dim: Arc<DimBounds>,
    empty_row: Arc<RowBounds>,
    /// The empty closed row, shared by every row variable solved to it.
    empty_value: Arc<Row>,
    /// How many dim and row variables are unsolved: lets finalization
    /// know that nothing is open without scanning every entry. Kept by
    /// every change of an entry's kind (here in this module only).
    open_dims: usize,
    open_rows: usize,
    /// The undo log of the open transaction, if any.
    journal: Option<Journal>,
    /// The undo log's buffer between transactions, kept for its capacity.
    spare_undo: Vec<Undo>,
}

impl Default for Env {
    fn default() -> Env {
        Env {
            dims: Vector::new(),
            rows: Vector::new(),
            empty_dim: Arc::default(),
            empty_row: Arc::default(),
            empty_value: Arc::new(Row::empty()),
            open_dims: 0,
            open_rows: 0,
            journal: None,
            spare_undo: Vec::new(),
        }
    }
}

/// A clone never inherits an open transaction: its changes are its own.
impl Clone for Env {
    fn clone(&self) -> Env {
        Env {
            dims: self.dims.clone(),
            rows: self.rows.clone(),
            empty_dim: self.empty_dim.clone(),
            empty_row: self.empty_row.clone(),
            empty_value: self.empty_value.clone(),
            open_dims: self.open_dims,
            open_rows: self.open_rows,
            journal: None,
            spare_undo: Vec::new(),
        }
    }
}

/// What it takes to undo a transaction: the old entries it overwrote (only
/// those that existed when it began; newer ones are truncated away).
#[derive(Clone, Debug)]
struct Journal {
    dims_len: usize,
    rows_len: usize,
    undo: Vec<Undo>,
}

#[derive(Clone, Debug)]
enum Undo {
    /// An entry that was replaced.
    Dim(usize, DimEntry),
    Row(usize, RowEntry),
    /// Bounds that were only appended to (and a bound that was set): undone
    /// by truncating, so recording them copies nothing.
    DimBounds {
        i: usize,
        cur: usize,
        subr: usize,
        watchers: usize,
        lub: Option<(KnownDim, Why)>,
    },
    RowBounds {
        i: usize,
        ineqs: usize,
        watchers: usize,
    },
}

impl Env {
    /// Adds an unsolved dim variable.
    pub fn push_dim(&mut self) -> DimVar {
        let v = DimVar(self.dims.len() as u32);
        self.dims.push_back(DimEntry::Open(self.empty_dim.clone()));
        self.open_dims += 1;
        v
    }

    /// Whether any dim or row variable is unsolved.
    pub fn any_open(&self) -> bool {
        self.open_dims > 0 || self.open_rows > 0
    }

    /// How many dim and row variables are unsolved.
    pub fn open_counts(&self) -> (usize, usize) {
        (self.open_dims, self.open_rows)
    }

    /// Keeps the open counts right when an entry changes from `old` to `new`.
    fn count_dim(&mut self, old: bool, new: bool) {
        self.open_dims = self.open_dims + usize::from(new) - usize::from(old);
    }

    fn count_row(&mut self, old: bool, new: bool) {
        self.open_rows = self.open_rows + usize::from(new) - usize::from(old);
    }

    /// The entry of a row variable solved to `value` (the empty row is
    /// shared rather than allocated again).
    pub fn solved_row(&self, value: Row) -> RowEntry {
        let value = if value.dims.is_empty() && value == *self.empty_value {
            self.empty_value.clone()
        } else {
            Arc::new(value)
        };
        RowEntry::Solved { value }
    }

    /// Adds an unsolved row variable at the given template depth.
    pub fn push_row(&mut self, depth: u32) -> RowVar {
        let v = RowVar(self.rows.len() as u32);
        let bounds = if depth == 0 {
            self.empty_row.clone()
        } else {
            Arc::new(RowBounds {
                depth,
                ..RowBounds::default()
            })
        };
        self.rows.push_back(RowEntry::Open {
            bounds,
            upper_hint: 0,
        });
        self.open_rows += 1;
        v
    }

    /// The template depth of an unsolved row variable.
    pub fn row_depth(&self, v: RowVar) -> u32 {
        match self.rows.get(v.index()) {
            Some(RowEntry::Open { bounds, .. }) => bounds.depth,
            _ => 0,
        }
    }

    /// Starts recording changes; returns false if a transaction is open
    /// already (the outer one then owns the undo).
    pub fn begin(&mut self) -> bool {
        if self.journal.is_some() {
            return false;
        }
        self.journal = Some(Journal {
            dims_len: self.dims.len(),
            rows_len: self.rows.len(),
            undo: std::mem::take(&mut self.spare_undo),
        });
        true
    }

    /// Keeps the changes of the open transaction.
    pub fn commit(&mut self) {
        if let Some(mut j) = self.journal.take() {
            j.undo.clear();
            self.spare_undo = j.undo;
        }
    }

    /// Undoes every change since [`Env::begin`].
    pub fn rollback(&mut self) {
        let Some(j) = self.journal.take() else { return };
        let dropped_dims = (j.dims_len..self.dims.len())
            .filter(|&i| is_open_dim(&self.dims[i]))
            .count();
        let dropped_rows = (j.rows_len..self.rows.len())
            .filter(|&i| is_open_row(&self.rows[i]))
            .count();
        self.open_dims -= dropped_dims;
        self.open_rows -= dropped_rows;
        self.dims.truncate(j.dims_len);
        self.rows.truncate(j.rows_len);
        for u in j.undo.into_iter().rev() {
            match u {
                Undo::Dim(i, e) => {
                    self.count_dim(is_open_dim(&self.dims[i]), is_open_dim(&e));
                    self.dims[i] = e;
                }
                Undo::Row(i, e) => {
                    self.count_row(is_open_row(&self.rows[i]), is_open_row(&e));
                    self.rows[i] = e;
                }
                Undo::DimBounds {
                    i,
                    cur,
                    subr,
                    watchers,
                    lub,
                } => {
                    if let DimEntry::Open(b) = &mut self.dims[i] {
                        let b = Arc::make_mut(b);
                        b.cur.truncate(cur);
                        b.subr.truncate(subr);
                        b.watchers.truncate(watchers);
                        b.lub = lub;
                    }
                }
                Undo::RowBounds { i, ineqs, watchers } => {
                    if let RowEntry::Open {
                        bounds,
                        upper_hint: hint,
                    } = &mut self.rows[i]
                    {
                        let b = Arc::make_mut(bounds);
                        b.ineqs.truncate(ineqs);
                        b.watchers.truncate(watchers);
                        *hint = upper_hint(b);
                    }
                }
            }
        }
    }

    fn journal_for(&mut self, i: usize, dims: bool) -> Option<&mut Journal> {
        self.journal
            .as_mut()
            .filter(|j| i < if dims { j.dims_len } else { j.rows_len })
    }

    /// Replaces an entry, returning the old one (shared with the undo log
    /// while a transaction is open).
    pub fn set_dim(&mut self, v: DimVar, e: DimEntry) -> DimEntry {
        let now_open = is_open_dim(&e);
        let old = std::mem::replace(&mut self.dims[v.index()], e);
        self.count_dim(is_open_dim(&old), now_open);
        if let Some(j) = self.journal_for(v.index(), true) {
            j.undo.push(Undo::Dim(v.index(), old.clone()));
        }
        old
    }

    /// Replaces an entry, returning the old one.
    pub fn set_row(&mut self, v: RowVar, e: RowEntry) -> RowEntry {
        let now_open = is_open_row(&e);
        let old = std::mem::replace(&mut self.rows[v.index()], e);
        self.count_row(is_open_row(&old), now_open);
        if let Some(j) = self.journal_for(v.index(), false) {
            j.undo.push(Undo::Row(v.index(), old.clone()));
        }
        old
    }

    /// The entry of a dim variable, mutably, with the change recorded.
    /// The caller may change what the entry says but not whether it is
    /// solved (use [`Env::set_dim`] for that).
    pub fn dim_mut(&mut self, v: DimVar) -> Option<&mut DimEntry> {
        if v.index() >= self.dims.len() {
            return None;
        }
        let old = self.dims[v.index()].clone();
        if let Some(j) = self.journal_for(v.index(), true) {
            j.undo.push(Undo::Dim(v.index(), old));
        }
        self.dims.get_mut(v.index())
    }

    pub fn dim_entry(&self, v: DimVar) -> Result<&DimEntry, ShapeError> {
        // The error is built only when it is returned: building and
        // dropping it on every look-up shows in profiles.
        match self.dims.get(v.index()) {
            Some(e) => Ok(e),
            None => Err(ShapeError::UnknownVariable {
                what: "dim",
                id: v.0,
            }),
        }
    }

    pub fn row_entry(&self, v: RowVar) -> Result<&RowEntry, ShapeError> {
        match self.rows.get(v.index()) {
            Some(e) => Ok(e),
            None => Err(ShapeError::UnknownVariable {
                what: "row",
                id: v.0,
            }),
        }
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

    /// The number of axes of a row after substitution, and its tail.
    pub fn row_extent(&self, r: &Row) -> Result<(usize, RowTail), ShapeError> {
        let mut len = r.dims.len();
        let mut tail = r.tail;
        while let RowTail::Open(v) = tail {
            match self.row_entry(v)? {
                RowEntry::Solved { value } => {
                    len += value.dims.len();
                    tail = value.tail;
                }
                RowEntry::Open { .. } => break,
            }
        }
        Ok((len, tail))
    }

    /// Substitutes solved row variables at the front of a row.
    pub fn resolve_row<'r>(&self, r: &'r Row) -> Result<ResolvedRow<'r>, ShapeError> {
        let RowTail::Open(v) = r.tail else {
            return Ok(ResolvedRow {
                dims: ResolvedDims::Borrowed(&r.dims),
                tail: r.tail,
            });
        };
        let first = match self.row_entry(v)? {
            RowEntry::Solved { value } => value,
            RowEntry::Open { .. } => {
                return Ok(ResolvedRow {
                    dims: ResolvedDims::Borrowed(&r.dims),
                    tail: r.tail,
                })
            }
        };
        // Walk the chain once to find its end and the total length.
        let mut tail = first.tail;
        let mut total = r.dims.len() + first.dims.len();
        let mut levels = 1;
        while let RowTail::Open(w) = tail {
            match self.row_entry(w)? {
                RowEntry::Solved { value } => {
                    total += value.dims.len();
                    tail = value.tail;
                    levels += 1;
                }
                RowEntry::Open { .. } => break,
            }
        }
        if levels == 1 && r.dims.is_empty() {
            return Ok(ResolvedRow {
                dims: ResolvedDims::Shared(first.clone()),
                tail,
            });
        }
        // Pieces come innermost-last; fill back to front, then reverse.
        let mut dims = Vec::with_capacity(total);
        dims.extend(r.dims.iter().rev().cloned());
        let mut piece: &Row = first;
        loop {
            dims.extend(piece.dims.iter().rev().cloned());
            let RowTail::Open(w) = piece.tail else { break };
            match self.row_entry(w)? {
                RowEntry::Solved { value } => piece = value,
                RowEntry::Open { .. } => break,
            }
        }
        dims.reverse();
        Ok(ResolvedRow {
            dims: ResolvedDims::Owned(dims),
            tail,
        })
    }

    pub fn dim_bounds(&self, v: DimVar) -> Option<&DimBounds> {
        match self.dims.get(v.index()) {
            Some(DimEntry::Open(b)) => Some(b),
            _ => None,
        }
    }

    pub fn row_bounds(&self, v: RowVar) -> Option<&RowBounds> {
        match self.rows.get(v.index()) {
            Some(RowEntry::Open { bounds, .. }) => Some(bounds),
            _ => None,
        }
    }

    /// Applies `f` to the bounds of an unsolved dim variable.
    /// `f` may only append to the bounds' lists and set the bound, which
    /// is what the undo log can take back without a copy.
    pub fn update_dim_bounds(&mut self, v: DimVar, f: impl FnOnce(&mut DimBounds)) {
        let i = v.index();
        let Some(DimEntry::Open(b)) = self.dims.get(i) else {
            return;
        };
        let mark = Undo::DimBounds {
            i,
            cur: b.cur.len(),
            subr: b.subr.len(),
            watchers: b.watchers.len(),
            lub: b.lub.clone(),
        };
        if let Some(j) = self.journal_for(i, true) {
            j.undo.push(mark);
        }
        if let Some(DimEntry::Open(b)) = self.dims.get_mut(i) {
            f(Arc::make_mut(b))
        }
    }

    /// Applies `f` to the bounds of an unsolved row variable.
    /// `f` may only append to the bounds' lists.
    pub fn update_row_bounds(&mut self, v: RowVar, f: impl FnOnce(&mut RowBounds)) {
        let i = v.index();
        // One look-up: the entry is reached mutably once, and the undo
        // mark is taken from it before `f` runs.
        let journal = self.journal.as_mut().filter(|j| i < j.rows_len);
        let Some(RowEntry::Open {
            bounds,
            upper_hint: hint,
        }) = self.rows.get_mut(i)
        else {
            return;
        };
        if let Some(j) = journal {
            j.undo.push(Undo::RowBounds {
                i,
                ineqs: bounds.ineqs.len(),
                watchers: bounds.watchers.len(),
            });
        }
        let b = Arc::make_mut(bounds);
        f(b);
        *hint = upper_hint(b);
    }
}
