//! The environment: persistent maps from variables to their entries.
//!
//! Variables are dense ids, so the maps are `imbl::Vector`s indexed by id:
//! cloning an environment shares them (it copies one bit per variable, the
//! set of unsolved ones) and an update copies O(log n) nodes, which is
//! what lets a solver state be forked for what-if queries.

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
    pub watchers: Watchers,
}

/// Deferred constraints waiting on a variable: usually none, so the list
/// is one pointer until the first arrives (bounds are read by the
/// thousand during finalization, and their size decides how many cache
/// lines each read touches).
// The box is the point: an 8-byte handle where a `Vec` would take 24 in
// every bounds, for a list that is almost always empty (an extra
// allocation in the rare case that it is not).
#[allow(clippy::box_collection)]
#[derive(Clone, Debug, Default)]
pub(crate) struct Watchers(Option<Box<Vec<Constraint>>>);

impl Watchers {
    /// Adds a waiting constraint (the list is allocated on the first).
    pub fn push(&mut self, c: Constraint) {
        self.0.get_or_insert_with(Box::default).push(c);
    }

    /// Keeps the first `len` constraints (for undoing a transaction).
    pub fn truncate(&mut self, len: usize) {
        if let Some(v) = &mut self.0 {
            v.truncate(len);
        }
    }
}

impl std::ops::Deref for Watchers {
    type Target = [Constraint];
    fn deref(&self) -> &[Constraint] {
        self.0.as_deref().map_or(&[], |v| v)
    }
}

/// What is known about a row variable.
#[derive(Clone, Debug)]
pub(crate) enum RowEntry {
    /// `r = dims ++ tail`: the dims in one shared allocation, the tail
    /// beside them, so that a row's length and end are known without
    /// following the pointer (most look-ups of a solved row ask only that).
    Solved { dims: Arc<[Dim]>, tail: RowTail },
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
    pub watchers: Watchers,
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
    pub cur: StoredRow,
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
            cur: self.cur.to_row(),
            subr: self.subr_row(),
            why: self.why,
        }
    }
}

/// The result side of a stored row inequality: its dims and how it ends.
/// Smaller than a [`Row`] (which also carries a row constraint, never set
/// here: a row's own constraint is emitted when the row is first used).
#[derive(Clone, Debug)]
pub(crate) struct StoredRow {
    pub dims: Box<[Dim]>,
    pub tail: RowTail,
}

impl StoredRow {
    /// `dims` followed by `tail`.
    pub fn new(dims: &[Dim], tail: RowTail) -> StoredRow {
        StoredRow {
            dims: dims.into(),
            tail,
        }
    }

    /// As a [`Row`], for a constraint to retry.
    pub fn to_row(&self) -> Row {
        Row {
            dims: self.dims.to_vec(),
            tail: self.tail,
            constraint: shape_core::RowConstraint::Unconstrained,
        }
    }

    /// The row variable it ends in, if any.
    pub fn row_var(&self) -> Option<RowVar> {
        match self.tail {
            RowTail::Open(v) => Some(v),
            RowTail::Closed => None,
        }
    }
}

/// A set of variable ids (the unsolved ones), one bit per id.
///
/// A plain vector, copied by every clone (1.25 KB per 10,000 variables):
/// behind an `Arc`, each change would pay an atomic uniqueness check, and
/// changes happen for every variable the solver creates or solves.
#[derive(Clone, Debug, Default)]
struct OpenSet {
    bits: Vec<u64>,
    len: usize,
}

impl OpenSet {
    fn len(&self) -> usize {
        self.len
    }

    fn contains(&self, id: usize) -> bool {
        self.bits
            .get(id / 64)
            .is_some_and(|word| word & (1 << (id % 64)) != 0)
    }

    fn set(&mut self, id: usize, open: bool) {
        let (w, mask) = (id / 64, 1u64 << (id % 64));
        let is = self.contains(id);
        if is == open {
            return;
        }
        if w >= self.bits.len() {
            self.bits.resize(w + 1, 0);
        }
        self.bits[w] ^= mask;
        if open {
            self.len += 1;
        } else {
            self.len -= 1;
        }
    }

    /// Removes every id from `n` on.
    fn truncate(&mut self, n: usize) {
        let whole = n.div_ceil(64);
        if self.bits.len() <= n / 64 {
            // Every member is below `n`.
            return;
        }
        let bits = &mut self.bits;
        if !n.is_multiple_of(64) {
            let keep = (1u64 << (n % 64)) - 1;
            let removed = bits[n / 64] & !keep;
            self.len -= removed.count_ones() as usize;
            bits[n / 64] &= keep;
        }
        for word in bits.drain(whole.min(bits.len())..) {
            self.len -= word.count_ones() as usize;
        }
    }

    /// The members, lowest first.
    fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let b = rest.trailing_zeros();
                    rest &= rest - 1;
                    w as u32 * 64 + b
                })
            })
        })
    }
}

/// Where entry `i` is written: in the overlay's shadow of `map` when there
/// is one, else in `map`.
fn slot<'a, E: Clone>(
    map: &'a mut Vector<E>,
    over: Option<&'a mut Shadow<E>>,
    i: usize,
) -> Option<&'a mut E> {
    match over {
        None => map.get_mut(i),
        Some(over) => over.slot(map, i),
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
    /// The row had no dims of its own and one solved variable: its dims.
    Shared(Arc<[Dim]>),
    /// Several pieces joined.
    Owned(Vec<Dim>),
}

impl std::ops::Deref for ResolvedDims<'_> {
    type Target = [Dim];
    fn deref(&self) -> &[Dim] {
        match self {
            ResolvedDims::Borrowed(d) => d,
            ResolvedDims::Shared(d) => d,
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
    dims: Vector<DimEntry>,
    rows: Vector<RowEntry>,
    /// Entries written since [`Env::start_overlay`], which take precedence
    /// over `dims` and `rows`; shared by clones, copied on write.
    overlay: Option<Arc<Overlay>>,
    /// Shared empty bounds for new variables, so creating one allocates
    /// nothing until its bounds are first written.
    empty_dim: Arc<DimBounds>,
    empty_row: Arc<RowBounds>,
    /// No dims, shared by every row variable solved to no axes of its own.
    no_dims: Arc<[Dim]>,
    /// Which dim and row variables are unsolved: lets finalization find
    /// them without reading every entry. Kept by every change of an
    /// entry's kind (here in this module only).
    open_dims: OpenSet,
    open_rows: OpenSet,
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
            overlay: None,
            empty_dim: Arc::default(),
            empty_row: Arc::default(),
            no_dims: Arc::from([]),
            open_dims: OpenSet::default(),
            open_rows: OpenSet::default(),
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
            overlay: self.overlay.clone(),
            empty_dim: self.empty_dim.clone(),
            empty_row: self.empty_row.clone(),
            no_dims: self.no_dims.clone(),
            open_dims: self.open_dims.clone(),
            open_rows: self.open_rows.clone(),
            journal: None,
            spare_undo: Vec::new(),
        }
    }
}

/// Entries written over the persistent maps, by variable id, leaving the
/// maps themselves as they were.
///
/// Why: finalization rewrites nearly every entry of a state that the graph
/// keeps unfinalized (so that it can be extended and solved again). Writing
/// into the shared maps copies each 64-entry chunk on its first write, and
/// the copy clones every entry's `Arc`: one write to a separate heap
/// allocation per variable, scattered over the whole state. That cost grew
/// much faster than the state (25-30 times from 1,000 to 10,000
/// operations). Here an entry is copied only when it is written, into
/// dense vectors that nothing else holds.
#[derive(Clone, Debug)]
struct Overlay {
    dims: Shadow<DimEntry>,
    rows: Shadow<RowEntry>,
}

/// The entries written over one map since the overlay began.
#[derive(Clone, Debug)]
struct Shadow<E> {
    /// Variables from this id on were created after the overlay began:
    /// nothing else holds their entries, so they are written in the map.
    /// Below it, nothing grows, so the vectors are never reallocated
    /// (which would copy megabytes at a time).
    covered: usize,
    /// One bit per covered variable: whether `entries` holds it. Small
    /// enough to stay in cache, so that reading an entry that was never
    /// written touches the map only.
    written: Vec<u64>,
    entries: Vec<Option<E>>,
}

impl<E: Clone> Shadow<E> {
    fn new(covered: usize) -> Shadow<E> {
        Shadow {
            covered,
            written: vec![0; covered.div_ceil(64)],
            entries: Vec::with_capacity(covered),
        }
    }

    fn is_written(&self, i: usize) -> bool {
        i < self.covered && self.written[i / 64] & (1 << (i % 64)) != 0
    }

    fn get(&self, i: usize) -> Option<&E> {
        if self.is_written(i) {
            self.entries[i].as_ref()
        } else {
            None
        }
    }

    /// Where entry `i` is written (copied here from `map` on the first
    /// write).
    fn slot<'a>(&'a mut self, map: &'a mut Vector<E>, i: usize) -> Option<&'a mut E> {
        if i >= self.covered {
            return map.get_mut(i);
        }
        if !self.is_written(i) {
            let base = map.get(i)?.clone();
            if self.entries.len() <= i {
                self.entries.resize(i + 1, None);
            }
            self.entries[i] = Some(base);
            self.written[i / 64] |= 1 << (i % 64);
        }
        self.entries[i].as_mut()
    }

    /// Forgets the entries of variables from `n` on (they were removed).
    fn truncate(&mut self, n: usize) {
        if n >= self.covered {
            return;
        }
        self.covered = n;
        self.entries.truncate(n);
        self.written.truncate(n.div_ceil(64));
        if let Some(last) = self.written.last_mut().filter(|_| !n.is_multiple_of(64)) {
            *last &= (1 << (n % 64)) - 1;
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
    /// From now on, writes go to an overlay instead of the persistent maps
    /// (see [`Overlay`]); for a state about to be rewritten wholesale while
    /// its maps stay shared with other clones.
    pub fn start_overlay(&mut self) {
        if self.overlay.is_none() {
            self.overlay = Some(Arc::new(Overlay {
                dims: Shadow::new(self.dims.len()),
                rows: Shadow::new(self.rows.len()),
            }));
        }
    }

    /// The number of dim variables.
    pub fn num_dims(&self) -> usize {
        self.dims.len()
    }

    /// The number of row variables.
    pub fn num_rows(&self) -> usize {
        self.rows.len()
    }

    /// The entry of dim variable `i`, as last written.
    pub fn dim_at(&self, i: usize) -> Option<&DimEntry> {
        match self.overlay.as_deref().and_then(|o| o.dims.get(i)) {
            Some(e) => Some(e),
            None => self.dims.get(i),
        }
    }

    /// The entry of row variable `i`, as last written.
    pub fn row_at(&self, i: usize) -> Option<&RowEntry> {
        match self.overlay.as_deref().and_then(|o| o.rows.get(i)) {
            Some(e) => Some(e),
            None => self.rows.get(i),
        }
    }

    /// Where dim variable `i`'s entry is written: in the overlay when there
    /// is one (copied there on the first write), else in the map.
    fn dim_slot(&mut self, i: usize) -> Option<&mut DimEntry> {
        slot(
            &mut self.dims,
            self.overlay.as_mut().map(|o| &mut Arc::make_mut(o).dims),
            i,
        )
    }

    /// Where row variable `i`'s entry is written (see [`Env::dim_slot`]).
    fn row_slot(&mut self, i: usize) -> Option<&mut RowEntry> {
        slot(
            &mut self.rows,
            self.overlay.as_mut().map(|o| &mut Arc::make_mut(o).rows),
            i,
        )
    }

    /// Adds an unsolved dim variable.
    pub fn push_dim(&mut self) -> DimVar {
        let v = DimVar(self.dims.len() as u32);
        self.dims.push_back(DimEntry::Open(self.empty_dim.clone()));
        self.open_dims.set(v.index(), true);
        v
    }

    /// Whether any dim or row variable is unsolved.
    pub fn any_open(&self) -> bool {
        self.open_dims.len() > 0 || self.open_rows.len() > 0
    }

    /// Whether a dim variable is unsolved (without reading its entry).
    pub fn is_open_dim(&self, v: DimVar) -> bool {
        self.open_dims.contains(v.index())
    }

    /// Whether a row variable is unsolved (without reading its entry).
    pub fn is_open_row(&self, v: RowVar) -> bool {
        self.open_rows.contains(v.index())
    }

    /// Whether the sets of unsolved variables say what the entries say
    /// (for debug assertions: it reads every entry).
    pub fn open_sets_match_entries(&self) -> bool {
        (0..self.dims.len())
            .all(|i| self.dim_at(i).is_some_and(is_open_dim) == self.open_dims.contains(i))
            && (0..self.rows.len())
                .all(|i| self.row_at(i).is_some_and(is_open_row) == self.open_rows.contains(i))
            && self
                .open_dims
                .iter()
                .all(|i| (i as usize) < self.dims.len())
            && self
                .open_rows
                .iter()
                .all(|i| (i as usize) < self.rows.len())
    }

    /// The unsolved dim variables, lowest id first.
    pub fn open_dims(&self) -> impl Iterator<Item = DimVar> + '_ {
        self.open_dims.iter().map(DimVar)
    }

    /// The unsolved row variables, lowest id first.
    pub fn open_rows(&self) -> impl Iterator<Item = RowVar> + '_ {
        self.open_rows.iter().map(RowVar)
    }

    /// The entry of a row variable solved to `dims` followed by `tail`
    /// (no dims share one allocation rather than making another).
    pub fn solved_row(&self, dims: &[Dim], tail: RowTail) -> RowEntry {
        let dims = if dims.is_empty() {
            self.no_dims.clone()
        } else {
            Arc::from(dims)
        };
        RowEntry::Solved { dims, tail }
    }

    /// Adds an unsolved row variable at the given template depth.
    pub fn push_row(&mut self, depth: u32) -> RowVar {
        let v = RowVar(self.rows.len() as u32);
        self.open_rows.set(v.index(), true);
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
        v
    }

    /// The template depth of an unsolved row variable.
    pub fn row_depth(&self, v: RowVar) -> u32 {
        match self.row_at(v.index()) {
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
        self.open_dims.truncate(j.dims_len);
        self.open_rows.truncate(j.rows_len);
        self.dims.truncate(j.dims_len);
        self.rows.truncate(j.rows_len);
        if let Some(o) = &mut self.overlay {
            let o = Arc::make_mut(o);
            o.dims.truncate(j.dims_len);
            o.rows.truncate(j.rows_len);
        }
        for u in j.undo.into_iter().rev() {
            match u {
                Undo::Dim(i, e) => {
                    self.open_dims.set(i, is_open_dim(&e));
                    if let Some(slot) = self.dim_slot(i) {
                        *slot = e;
                    }
                }
                Undo::Row(i, e) => {
                    self.open_rows.set(i, is_open_row(&e));
                    if let Some(slot) = self.row_slot(i) {
                        *slot = e;
                    }
                }
                Undo::DimBounds {
                    i,
                    cur,
                    subr,
                    watchers,
                    lub,
                } => {
                    if let Some(DimEntry::Open(b)) = self.dim_slot(i) {
                        let b = Arc::make_mut(b);
                        b.cur.truncate(cur);
                        b.subr.truncate(subr);
                        b.watchers.truncate(watchers);
                        b.lub = lub;
                    }
                }
                Undo::RowBounds { i, ineqs, watchers } => {
                    if let Some(RowEntry::Open {
                        bounds,
                        upper_hint: hint,
                    }) = self.row_slot(i)
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
        self.open_dims.set(v.index(), is_open_dim(&e));
        let slot = self.dim_slot(v.index()).expect("a variable of this solver");
        let old = std::mem::replace(slot, e);
        if let Some(j) = self.journal_for(v.index(), true) {
            j.undo.push(Undo::Dim(v.index(), old.clone()));
        }
        old
    }

    /// Replaces an entry, returning the old one.
    pub fn set_row(&mut self, v: RowVar, e: RowEntry) -> RowEntry {
        self.open_rows.set(v.index(), is_open_row(&e));
        let slot = self.row_slot(v.index()).expect("a variable of this solver");
        let old = std::mem::replace(slot, e);
        if let Some(j) = self.journal_for(v.index(), false) {
            j.undo.push(Undo::Row(v.index(), old.clone()));
        }
        old
    }

    /// The entry of a dim variable, mutably, with the change recorded.
    /// The caller may change what the entry says but not whether it is
    /// solved (use [`Env::set_dim`] for that).
    pub fn dim_mut(&mut self, v: DimVar) -> Option<&mut DimEntry> {
        let old = self.dim_at(v.index())?.clone();
        if let Some(j) = self.journal_for(v.index(), true) {
            j.undo.push(Undo::Dim(v.index(), old));
        }
        self.dim_slot(v.index())
    }

    pub fn dim_entry(&self, v: DimVar) -> Result<&DimEntry, ShapeError> {
        // The error is built only when it is returned: building and
        // dropping it on every look-up shows in profiles.
        match self.dim_at(v.index()) {
            Some(e) => Ok(e),
            None => Err(ShapeError::UnknownVariable {
                what: "dim",
                id: v.0,
            }),
        }
    }

    pub fn row_entry(&self, v: RowVar) -> Result<&RowEntry, ShapeError> {
        match self.row_at(v.index()) {
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
                // An open variable ends the chain: the bitset says so
                // without its entry being read.
                Dim::Var(v) if self.is_open_dim(v) => return Ok(ResolvedDim::Var(v)),
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

    /// The number of axes, after substitution, of a row with `len` dims of
    /// its own that ends in `tail`, and the tail it ends in then.
    pub fn extent(&self, len: usize, tail: RowTail) -> Result<(usize, RowTail), ShapeError> {
        let (mut len, mut tail) = (len, tail);
        while let RowTail::Open(v) = tail {
            if self.is_open_row(v) {
                break;
            }
            match self.row_entry(v)? {
                RowEntry::Solved { dims, tail: t } => {
                    len += dims.len();
                    tail = *t;
                }
                RowEntry::Open { .. } => break,
            }
        }
        Ok((len, tail))
    }

    /// Substitutes solved row variables at the front of a row.
    pub fn resolve_row<'r>(&self, r: &'r Row) -> Result<ResolvedRow<'r>, ShapeError> {
        let v = match r.tail {
            RowTail::Open(v) if !self.is_open_row(v) => v,
            // Closed, or ending in an open variable: nothing to substitute.
            _ => {
                return Ok(ResolvedRow {
                    dims: ResolvedDims::Borrowed(&r.dims),
                    tail: r.tail,
                })
            }
        };
        let (first, first_tail) = match self.row_entry(v)? {
            RowEntry::Solved { dims, tail } => (dims, *tail),
            RowEntry::Open { .. } => {
                return Ok(ResolvedRow {
                    dims: ResolvedDims::Borrowed(&r.dims),
                    tail: r.tail,
                })
            }
        };
        // Walk the chain once to find its end and the total length.
        let mut tail = first_tail;
        let mut total = r.dims.len() + first.len();
        let mut levels = 1;
        while let RowTail::Open(w) = tail {
            if self.is_open_row(w) {
                break;
            }
            match self.row_entry(w)? {
                RowEntry::Solved { dims, tail: t } => {
                    total += dims.len();
                    tail = *t;
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
        let (mut piece, mut piece_tail): (&[Dim], RowTail) = (first, first_tail);
        loop {
            dims.extend(piece.iter().rev().cloned());
            let RowTail::Open(w) = piece_tail else { break };
            match self.row_entry(w)? {
                RowEntry::Solved { dims: d, tail: t } => (piece, piece_tail) = (d, *t),
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
        match self.dim_at(v.index()) {
            Some(DimEntry::Open(b)) => Some(b),
            _ => None,
        }
    }

    pub fn row_bounds(&self, v: RowVar) -> Option<&RowBounds> {
        match self.row_at(v.index()) {
            Some(RowEntry::Open { bounds, .. }) => Some(bounds),
            _ => None,
        }
    }

    /// Applies `f` to the bounds of an unsolved dim variable.
    /// `f` may only append to the bounds' lists and set the bound, which
    /// is what the undo log can take back without a copy.
    pub fn update_dim_bounds(&mut self, v: DimVar, f: impl FnOnce(&mut DimBounds)) {
        let i = v.index();
        let Some(DimEntry::Open(b)) = self.dim_at(i) else {
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
        if let Some(DimEntry::Open(b)) = self.dim_slot(i) {
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
        let over = self.overlay.as_mut().map(|o| &mut Arc::make_mut(o).rows);
        let Some(RowEntry::Open {
            bounds,
            upper_hint: hint,
        }) = slot(&mut self.rows, over, i)
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
#[cfg(test)]
mod tests {
    use super::*;
    use crate::origin::OriginId;

    fn why() -> Why {
        Why::of(OriginId(0))
    }

    fn solved(n: u64) -> DimEntry {
        DimEntry::Solved {
            value: Dim::known(n).expect("a size"),
            why: why(),
            source: why(),
        }
    }

    fn size(e: Option<&DimEntry>) -> Option<u64> {
        match e {
            Some(DimEntry::Solved {
                value: Dim::Known(k),
                ..
            }) => Some(k.size()),
            _ => None,
        }
    }

    #[test]
    fn entries_stay_small() {
        // Every solved dim, queued constraint and row holds these; their
        // size decides how much of a large network's state stays in cache.
        use std::mem::size_of;
        assert_eq!(size_of::<Dim>(), 16);
        assert_eq!(size_of::<Why>(), 8);
        assert!(size_of::<DimEntry>() <= 40);
        assert_eq!(size_of::<RowEntry>(), 24);
        assert!(size_of::<crate::origin::Origin>() <= 56);
        assert_eq!(size_of::<StoredIneq>(), 40);
        assert!(size_of::<RowBounds>() <= 120);
    }

    #[test]
    fn open_set_tracks_membership_and_truncates() {
        let mut s = OpenSet::default();
        for i in [0, 3, 63, 64, 65, 200] {
            s.set(i, true);
        }
        s.set(3, true);
        assert_eq!(s.len(), 6);
        s.set(64, false);
        s.set(64, false);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 3, 63, 65, 200]);
        s.truncate(65);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 3, 63]);
        assert_eq!(s.len(), 3);
        s.truncate(64);
        assert_eq!(s.len(), 3);
        s.truncate(1);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0]);
        assert_eq!(s.len(), 1);
        s.truncate(1000);
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn overlay_leaves_shared_maps_alone() {
        let mut base = Env::default();
        let vs: Vec<DimVar> = (0..100).map(|_| base.push_dim()).collect();
        base.set_dim(vs[5], solved(7));
        let mut over = base.clone();
        over.start_overlay();
        over.set_dim(vs[6], solved(8));
        over.update_dim_bounds(vs[9], |b| b.lub = Some((KnownDim::of(4).unwrap(), why())));
        let late = over.push_dim();
        over.set_dim(late, solved(9));
        // The overlay reads its own writes and the map's entries.
        assert_eq!(size(over.dim_at(5)), Some(7));
        assert_eq!(size(over.dim_at(6)), Some(8));
        assert_eq!(size(over.dim_at(late.index())), Some(9));
        assert!(over.dim_bounds(vs[9]).is_some_and(|b| b.lub.is_some()));
        assert_eq!(over.open_dims().count(), 98);
        // The state it was cloned from is unchanged.
        assert_eq!(size(base.dim_at(6)), None);
        assert!(base.dim_bounds(vs[9]).is_some_and(|b| b.lub.is_none()));
        assert_eq!(base.num_dims(), 100);
        assert_eq!(base.open_dims().count(), 99);
    }

    #[test]
    fn rollback_undoes_writes_through_the_overlay() {
        let mut env = Env::default();
        let vs: Vec<DimVar> = (0..10).map(|_| env.push_dim()).collect();
        env.start_overlay();
        env.set_dim(vs[0], solved(2));
        assert!(env.begin());
        env.set_dim(vs[1], solved(3));
        env.update_dim_bounds(vs[2], |b| b.lub = Some((KnownDim::of(4).unwrap(), why())));
        let new = env.push_dim();
        env.set_dim(new, solved(5));
        env.rollback();
        assert_eq!(size(env.dim_at(0)), Some(2));
        assert_eq!(size(env.dim_at(1)), None);
        assert!(env.dim_bounds(vs[2]).is_some_and(|b| b.lub.is_none()));
        assert_eq!(env.num_dims(), 10);
        assert_eq!(
            env.open_dims().map(|v| v.0).collect::<Vec<_>>(),
            (1..10).collect::<Vec<u32>>()
        );
    }
}
