//! The environment: what is known about every dim and row variable, in two
//! versioned stores (see `store`), and the look-ups that substitute solved
//! variables.
//!
//! Variables are dense ids. Cloning an environment shares the stores'
//! persistent vectors (it copies one bit per variable, the sets of open
//! ones) and an update copies O(log n) nodes, which is what lets a solver
//! state be forked for what-if queries.

use std::sync::Arc;

use shape_core::{Dim, DimVar, KnownDim, Row, RowTail, RowVar};

use crate::constraint::Constraint;
use crate::error::ShapeError;
use crate::origin::{OriginId, Why};
use crate::store::{Entry, Link, LinkCache, Snapshot, Store};

/// What is known about a dim variable.
///
/// 24 bytes: there are four dim variables per operation of the usual
/// network, and most of them end up holding a plain size.
#[derive(Clone, Debug)]
pub(crate) enum DimEntry {
    /// Not solved yet: the inequalities it takes part in. Shared, so that
    /// cloning an environment (or a chunk of it) copies pointers only.
    Open(Arc<DimBounds>),
    /// `v = size`, a static size without a label below 2^32 whose
    /// reasons' axes fit in 16 bits, stored inline (see [`Sized`]).
    Sized(Sized),
    /// `v = value` for any other known size (labelled or symbolic).
    Known(Box<Known>),
    /// `v = to`, another variable. `next` is a variable further along the
    /// same chain (`to` at first, moved on by path compression); `to`
    /// stays, so that a size's provenance can name every step.
    Alias { to: DimVar, next: DimVar, why: Why },
}

const _: () = assert!(std::mem::size_of::<DimEntry>() <= 24);

/// `from` of [`DimEntry::Sized`] when the size came through no variable.
const NO_VAR: u32 = u32::MAX;

/// A [`Known`] plain size in 20 bytes: the size, `from` ([`NO_VAR`] for
/// none), and the two reasons' origins and axes (see [`Why::packed_axis`]).
/// 365,000 of the 420,000 dims at 100,000 operations hold one, each with a
/// `from` and two different reasons.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sized {
    size: u32,
    from: u32,
    why: u32,
    source: u32,
    why_axis: u16,
    source_axis: u16,
}

impl Sized {
    fn new(size: u64, why: Why, source: Why, from: Option<DimVar>) -> Option<Sized> {
        Some(Sized {
            size: u32::try_from(size).ok()?,
            from: match from {
                None => NO_VAR,
                Some(f) if f.0 != NO_VAR => f.0,
                Some(_) => return None,
            },
            why: why.origin.0,
            source: source.origin.0,
            why_axis: why.packed_axis()?,
            source_axis: source.packed_axis()?,
        })
    }

    pub fn size(self) -> u64 {
        self.size.into()
    }

    pub fn why(self) -> Why {
        Why::unpacked(OriginId(self.why), self.why_axis)
    }

    pub fn source(self) -> Why {
        Why::unpacked(OriginId(self.source), self.source_axis)
    }

    pub fn from(self) -> Option<DimVar> {
        (self.from != NO_VAR).then_some(DimVar(self.from))
    }
}

/// A solved dim: `v = value`; `source` says where the size came from,
/// `why` the relation that gave it to `v`, and `from` the variable it came
/// through when that variable was solved already (so that a size's
/// provenance can name every step back to its source).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Known {
    pub value: KnownDim,
    pub why: Why,
    pub source: Why,
    pub from: Option<DimVar>,
}

impl DimEntry {
    /// The entry of a variable solved to `value` (see [`Known`]).
    pub fn known(value: KnownDim, why: Why, source: Why, from: Option<DimVar>) -> DimEntry {
        let sized = match value.static_size() {
            Some(size) if value.label().is_none() && value == KnownDim::sized(size) => {
                Sized::new(size, why, source, from)
            }
            _ => None,
        };
        match sized {
            Some(s) => DimEntry::Sized(s),
            None => DimEntry::Known(Box::new(Known {
                value,
                why,
                source,
                from,
            })),
        }
    }

    /// What a solved entry knows, if it is one.
    pub fn as_known(&self) -> Option<Known> {
        match self {
            &DimEntry::Sized(s) => Some(Known {
                value: KnownDim::sized(s.size()),
                why: s.why(),
                source: s.source(),
                from: s.from(),
            }),
            DimEntry::Known(k) => Some((**k).clone()),
            DimEntry::Open(_) | DimEntry::Alias { .. } => None,
        }
    }
}

/// What an update of a dim's bounds can be undone with.
#[derive(Clone, Debug)]
pub(crate) struct DimMark {
    cur: usize,
    subr: usize,
    watchers: usize,
    lub: Option<(KnownDim, Why)>,
}

impl Entry for DimEntry {
    type Appended = DimMark;

    fn link(&self) -> Link {
        match self {
            DimEntry::Open(_) => Link::Open,
            DimEntry::Sized(_) | DimEntry::Known(_) => Link::End,
            DimEntry::Alias { next, .. } => Link::Alias(next.0),
        }
    }

    fn relink(&mut self, to: u32) {
        if let DimEntry::Alias { next, .. } = self {
            *next = DimVar(to);
        }
    }

    fn appended(&self) -> Option<DimMark> {
        match self {
            DimEntry::Open(b) => Some(DimMark {
                cur: b.cur.len(),
                subr: b.subr.len(),
                watchers: b.watchers.len(),
                lub: b.lub.clone(),
            }),
            _ => None,
        }
    }

    fn restore(&mut self, mark: DimMark) {
        if let DimEntry::Open(b) = self {
            let b = Arc::make_mut(b);
            b.cur.truncate(mark.cur);
            b.subr.truncate(mark.subr);
            b.watchers.truncate(mark.watchers);
            b.lub = mark.lub;
        }
    }

    fn for_each_neighbour(&self, mut f: impl FnMut(u32)) {
        if let DimEntry::Open(b) = self {
            for (v, _) in b.cur.iter().chain(&b.subr) {
                f(v.0);
            }
        }
    }
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
    /// Path compression moves the tail past variables solved to another
    /// variable and nothing else: the row is the same.
    Solved {
        dims: Arc<Box<[Dim]>>,
        tail: PackedTail,
    },
    /// `r = dims ++ tail` for one to [`INLINE_VARS`] dims that are all
    /// variables, stored inline (unused slots are [`NO_VAR`]): what a
    /// template's fresh axes are solved to, a quarter of a million rows at
    /// 100,000 operations, each of which took an allocation of 40 to 88
    /// bytes as a `Solved`.
    Vars {
        vars: [u32; INLINE_VARS],
        tail: PackedTail,
    },
    /// Not solved yet. Beside the pointer, what finalization's checks of
    /// upper bounds need first, read without following it.
    Open {
        bounds: Arc<RowBounds>,
        first_upper: PackedFirstUpper,
    },
}

/// The most dims a [`RowEntry::Vars`] holds (what keeps the entry at 16
/// bytes; at 100,000 operations 235,000 rows are solved to one or two
/// variables and 10,000 to three).
pub(crate) const INLINE_VARS: usize = 2;

/// A [`RowTail`] in four bytes, so that a row's entry takes 16: the row
/// variable's id, or [`NO_VAR`] for a closed row. Row variables are
/// counted in `u32`s, and one with the last id would need 100 GB of
/// entries before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PackedTail(u32);

impl PackedTail {
    fn new(tail: RowTail) -> PackedTail {
        match tail {
            RowTail::Closed => PackedTail(NO_VAR),
            RowTail::Open(v) => {
                debug_assert!(v.0 != NO_VAR);
                PackedTail(v.0)
            }
        }
    }

    fn get(self) -> RowTail {
        if self.0 == NO_VAR {
            RowTail::Closed
        } else {
            RowTail::Open(RowVar(self.0))
        }
    }
}

/// A [`FirstUpper`] in four bytes (see [`PackedTail`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PackedFirstUpper(u32);

impl PackedFirstUpper {
    const NONE: PackedFirstUpper = PackedFirstUpper(NO_VAR);
    const CLOSED: u32 = NO_VAR - 1;

    fn new(f: FirstUpper) -> PackedFirstUpper {
        match f {
            FirstUpper::None => PackedFirstUpper::NONE,
            FirstUpper::Closed => PackedFirstUpper(Self::CLOSED),
            FirstUpper::EndsIn(v) => {
                debug_assert!(v.0 < Self::CLOSED);
                PackedFirstUpper(v.0)
            }
        }
    }

    fn get(self) -> FirstUpper {
        match self.0 {
            NO_VAR => FirstUpper::None,
            Self::CLOSED => FirstUpper::Closed,
            v => FirstUpper::EndsIn(RowVar(v)),
        }
    }
}

/// The dims of a solved row variable: its entry's shared list, or its
/// inline variables spelled out.
#[derive(Clone, Debug)]
pub(crate) enum SolvedDims<'a> {
    Shared(&'a Arc<Box<[Dim]>>),
    Inline(InlineDims),
}

impl std::ops::Deref for SolvedDims<'_> {
    type Target = [Dim];
    fn deref(&self) -> &[Dim] {
        match self {
            SolvedDims::Shared(d) => d,
            SolvedDims::Inline(d) => d,
        }
    }
}

/// Up to [`INLINE_VARS`] dim variables as dims, on the stack.
#[derive(Clone, Debug)]
pub(crate) struct InlineDims {
    dims: [Dim; INLINE_VARS],
    len: u8,
}

impl InlineDims {
    fn of(vars: &[u32; INLINE_VARS]) -> InlineDims {
        let len = vars.iter().take_while(|&&v| v != NO_VAR).count();
        InlineDims {
            dims: std::array::from_fn(|i| Dim::Var(DimVar(vars[i]))),
            // At most `INLINE_VARS`.
            len: len as u8,
        }
    }
}

impl std::ops::Deref for InlineDims {
    type Target = [Dim];
    fn deref(&self) -> &[Dim] {
        &self.dims[..self.len as usize]
    }
}

impl RowEntry {
    /// A solved entry's dims and tail (`None` for an open one).
    pub fn solved(&self) -> Option<(SolvedDims<'_>, RowTail)> {
        match self {
            RowEntry::Solved { dims, tail } => Some((SolvedDims::Shared(dims), tail.get())),
            RowEntry::Vars { vars, tail } => {
                Some((SolvedDims::Inline(InlineDims::of(vars)), tail.get()))
            }
            RowEntry::Open { .. } => None,
        }
    }

    /// A solved entry's tail, and whether it has no dims of its own.
    fn solved_tail(&self) -> Option<(RowTail, bool)> {
        match self {
            RowEntry::Solved { dims, tail } => Some((tail.get(), dims.is_empty())),
            // Never empty: no dims are stored as `Solved`.
            RowEntry::Vars { tail, .. } => Some((tail.get(), false)),
            RowEntry::Open { .. } => None,
        }
    }
}

/// How the first upper bound stored on an open row variable ends, as it
/// was when stored: enough for finalization to pass by most variables
/// without reading their bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FirstUpper {
    /// No upper bound is stored.
    None,
    /// The first upper bound's result row is closed.
    Closed,
    /// The first upper bound's result row ends in this row variable.
    EndsIn(RowVar),
}

impl FirstUpper {
    fn of(b: &RowBounds) -> FirstUpper {
        match b.uppers().next().map(|s| s.cur.tail) {
            None => FirstUpper::None,
            Some(RowTail::Closed) => FirstUpper::Closed,
            Some(RowTail::Open(v)) => FirstUpper::EndsIn(v),
        }
    }
}

/// What an update of a row's bounds can be undone with.
#[derive(Clone, Debug)]
pub(crate) struct RowMark {
    ineqs: usize,
    watchers: usize,
}

impl Entry for RowEntry {
    type Appended = RowMark;

    fn link(&self) -> Link {
        match self.solved_tail() {
            None => Link::Open,
            Some((RowTail::Closed, _)) => Link::End,
            Some((RowTail::Open(v), true)) => Link::Alias(v.0),
            Some((RowTail::Open(v), false)) => Link::Through(v.0),
        }
    }

    fn relink(&mut self, to: u32) {
        if let RowEntry::Solved { tail, .. } | RowEntry::Vars { tail, .. } = self {
            if tail.get() != RowTail::Closed {
                *tail = PackedTail::new(RowTail::Open(RowVar(to)));
            }
        }
    }

    fn appended(&self) -> Option<RowMark> {
        match self {
            RowEntry::Open { bounds, .. } => Some(RowMark {
                ineqs: bounds.ineqs.len(),
                watchers: bounds.watchers.len(),
            }),
            RowEntry::Solved { .. } | RowEntry::Vars { .. } => None,
        }
    }

    fn restore(&mut self, mark: RowMark) {
        if let RowEntry::Open {
            bounds,
            first_upper,
        } = self
        {
            let b = Arc::make_mut(bounds);
            b.ineqs.truncate(mark.ineqs);
            b.watchers.truncate(mark.watchers);
            *first_upper = PackedFirstUpper::new(FirstUpper::of(b));
        }
    }

    fn for_each_neighbour(&self, mut f: impl FnMut(u32)) {
        if let RowEntry::Open { bounds, .. } = self {
            for s in bounds.ineqs.iter() {
                if let Some(v) = s.cur.row_var() {
                    f(v.0);
                }
                f(s.subr.0);
            }
        }
    }
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
    /// A pointer rather than a `Vec`: two thirds of the bounds never use
    /// it, and 16 bytes less keeps the bounds at 88 (an allocation of 112
    /// rather than 144 bytes, 108,000 of them at 100,000 operations).
    rest: Rest,
}

/// The stored inequalities past the first two (see [`Ineqs::rest`]).
// The box is the point: an 8-byte handle where a `Vec` takes 24, for a
// list that is empty in most bounds.
#[allow(clippy::box_collection)]
#[derive(Clone, Debug, Default)]
struct Rest(Option<Box<Vec<StoredIneq>>>);

impl Rest {
    fn as_slice(&self) -> &[StoredIneq] {
        self.0.as_deref().map_or(&[], |v| v)
    }
}

impl Ineqs {
    pub fn len(&self) -> usize {
        self.head.iter().take_while(|s| s.is_some()).count() + self.rest.as_slice().len()
    }

    pub fn push(&mut self, s: StoredIneq) {
        match self.head.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some(s),
            None => {
                // A third is common (a fifth of the open rows at the end of
                // the benchmark network), a fourth rare: room for one, not
                // the four a first push reserves.
                let rest = self
                    .rest
                    .0
                    .get_or_insert_with(|| Box::new(Vec::with_capacity(1)));
                rest.push(s)
            }
        }
    }

    pub fn truncate(&mut self, len: usize) {
        let n = self.head.len();
        if let Some(rest) = &mut self.rest.0 {
            rest.truncate(len.saturating_sub(n));
        }
        for slot in self.head.iter_mut().skip(len) {
            *slot = None;
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &StoredIneq> {
        self.head
            .iter()
            .map_while(Option::as_ref)
            .chain(self.rest.as_slice())
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
    pub dims: StoredDims,
    pub tail: RowTail,
}

/// The dims of a [`StoredRow`] behind a thin pointer, none for no dims
/// (nine in ten stored rows have none): what keeps a [`StoredIneq`] at 32
/// bytes.
// A box of a box: the outer one makes the handle 8 bytes.
#[allow(clippy::redundant_allocation)]
#[derive(Clone, Debug, Default)]
pub(crate) struct StoredDims(Option<Box<Box<[Dim]>>>);

impl std::ops::Deref for StoredDims {
    type Target = [Dim];
    fn deref(&self) -> &[Dim] {
        self.0.as_deref().map_or(&[], |d| d)
    }
}

impl StoredRow {
    /// `dims` followed by `tail`.
    pub fn new(dims: &[Dim], tail: RowTail) -> StoredRow {
        StoredRow {
            dims: StoredDims((!dims.is_empty()).then(|| Box::new(dims.into()))),
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
    Shared(Arc<Box<[Dim]>>),
    /// The row had no dims of its own and one solved variable whose
    /// dims are stored inline: them.
    Inline(InlineDims),
    /// Several pieces joined.
    Owned(Vec<Dim>),
}

impl std::ops::Deref for ResolvedDims<'_> {
    type Target = [Dim];
    fn deref(&self) -> &[Dim] {
        match self {
            ResolvedDims::Borrowed(d) => d,
            ResolvedDims::Shared(d) => d,
            ResolvedDims::Inline(d) => d,
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

/// A snapshot of both stores (see [`Env::snapshot`]).
#[derive(Debug)]
#[must_use = "a snapshot is committed or rolled back"]
pub(crate) struct EnvSnapshot {
    dims: Snapshot,
    rows: Snapshot,
}

/// The template depths whose new row variables share empty bounds.
const SHARED_DEPTHS: usize = 16;

#[derive(Clone, Debug)]
pub(crate) struct Env {
    pub dims: Store<DimEntry>,
    pub rows: Store<RowEntry>,
    /// Shared empty bounds for new variables, so creating one allocates
    /// nothing until its bounds are first written.
    empty_dim: Arc<DimBounds>,
    /// Likewise for row variables, by template depth from 0: a template's
    /// row variable is often solved before anything is stored on it.
    empty_rows: Vec<Arc<RowBounds>>,
    /// No dims, shared by every row variable solved to no axes of its own.
    no_dims: Arc<Box<[Dim]>>,
    /// Counts the writes that change what a row variable is or what bounds
    /// it (not the compression of chains): what finalization read about
    /// rows stays true while it is unchanged.
    row_writes: u64,
}

impl Default for Env {
    fn default() -> Env {
        Env {
            dims: Store::default(),
            rows: Store::default(),
            empty_dim: Arc::default(),
            empty_rows: vec![Arc::default()],
            no_dims: Arc::default(),
            row_writes: 0,
        }
    }
}

impl Env {
    /// The number of dim variables.
    pub fn num_dims(&self) -> usize {
        self.dims.len()
    }

    /// The number of row variables.
    pub fn num_rows(&self) -> usize {
        self.rows.len()
    }

    /// Adds an unsolved dim variable.
    pub fn push_dim(&mut self) -> DimVar {
        DimVar(self.dims.push(DimEntry::Open(self.empty_dim.clone())))
    }

    /// Adds an unsolved row variable at the given template depth.
    pub fn push_row(&mut self, depth: u32) -> RowVar {
        let fresh = |depth| {
            Arc::new(RowBounds {
                depth,
                ..RowBounds::default()
            })
        };
        // Shared up to a depth that templates rarely pass (the list is
        // copied with every clone of the environment).
        let d = depth as usize;
        let bounds = if d < SHARED_DEPTHS {
            while self.empty_rows.len() <= d {
                let next = u32::try_from(self.empty_rows.len()).unwrap_or(u32::MAX);
                self.empty_rows.push(fresh(next));
            }
            self.empty_rows[d].clone()
        } else {
            fresh(depth)
        };
        RowVar(self.rows.push(RowEntry::Open {
            bounds,
            first_upper: PackedFirstUpper::NONE,
        }))
    }

    /// Opens a snapshot of both stores.
    pub fn snapshot(&mut self) -> EnvSnapshot {
        EnvSnapshot {
            dims: self.dims.snapshot(),
            rows: self.rows.snapshot(),
        }
    }

    /// Keeps the changes since `s`.
    pub fn commit(&mut self, s: EnvSnapshot) {
        self.rows.commit(s.rows);
        self.dims.commit(s.dims);
    }

    /// Undoes every change since `s`.
    pub fn rollback_to(&mut self, s: EnvSnapshot) {
        self.rows.rollback_to(s.rows);
        self.dims.rollback_to(s.dims);
        self.row_writes += 1;
    }

    /// Writes go to overlays from now on (see `store`).
    pub fn start_overlay(&mut self) {
        self.dims.start_overlay();
        self.rows.start_overlay();
    }

    /// Turns change tracking on or off in both stores.
    pub fn track_changes(&mut self, on: bool) {
        self.dims.track_changes(on);
        self.rows.track_changes(on);
    }

    /// Whether any dim or row variable is unsolved.
    pub fn any_open(&self) -> bool {
        self.dims.any_open() || self.rows.any_open()
    }

    /// Whether a dim variable is unsolved (without reading its entry).
    pub fn is_open_dim(&self, v: DimVar) -> bool {
        self.dims.is_open(v.0)
    }

    /// Whether a row variable is unsolved (without reading its entry).
    pub fn is_open_row(&self, v: RowVar) -> bool {
        self.rows.is_open(v.0)
    }

    /// The unsolved dim variables, lowest id first.
    pub fn open_dims(&self) -> impl Iterator<Item = DimVar> + '_ {
        self.dims.open_ids().map(DimVar)
    }

    /// The unsolved row variables, lowest id first.
    pub fn open_rows(&self) -> impl Iterator<Item = RowVar> + '_ {
        self.rows.open_ids().map(RowVar)
    }

    /// Whether the sets of unsolved variables say what the entries say
    /// (for debug assertions: it reads every entry).
    pub fn open_sets_match_entries(&self) -> bool {
        self.dims.open_set_matches_entries() && self.rows.open_set_matches_entries()
    }

    /// The entry of a row variable solved to `dims` followed by `tail`
    /// (no dims share one allocation rather than making another, and up
    /// to [`INLINE_VARS`] variables make none).
    pub fn solved_row(&self, dims: &[Dim], tail: RowTail) -> RowEntry {
        if (1..=INLINE_VARS).contains(&dims.len()) {
            let mut vars = [NO_VAR; INLINE_VARS];
            let all_vars = dims.iter().zip(&mut vars).all(|(d, slot)| match d {
                Dim::Var(v) if v.0 != NO_VAR => {
                    *slot = v.0;
                    true
                }
                _ => false,
            });
            if all_vars {
                return RowEntry::Vars {
                    vars,
                    tail: PackedTail::new(tail),
                };
            }
        }
        let dims = if dims.is_empty() {
            self.no_dims.clone()
        } else {
            Arc::new(dims.into())
        };
        RowEntry::Solved {
            dims,
            tail: PackedTail::new(tail),
        }
    }

    /// How many times a row variable was solved or its bounds written (see
    /// `row_writes`).
    pub fn row_writes(&self) -> u64 {
        self.row_writes
    }

    /// The template depth of an unsolved row variable.
    pub fn row_depth(&self, v: RowVar) -> u32 {
        match self.rows.get(v.0) {
            Some(RowEntry::Open { bounds, .. }) => bounds.depth,
            _ => 0,
        }
    }

    /// Solves a dim variable; returns its old entry (`None` for a variable
    /// of another solver).
    pub fn set_dim(&mut self, v: DimVar, e: DimEntry) -> Option<DimEntry> {
        self.dims.set(v.0, e)
    }

    /// Solves a row variable; returns its old entry.
    pub fn set_row(&mut self, v: RowVar, e: RowEntry) -> Option<RowEntry> {
        self.row_writes += 1;
        self.rows.set(v.0, e)
    }

    pub fn dim_entry(&self, v: DimVar) -> Result<&DimEntry, ShapeError> {
        // The error is built only when it is returned: building and
        // dropping it on every look-up shows in profiles.
        match self.dims.get(v.0) {
            Some(e) => Ok(e),
            None => Err(unknown_dim(v)),
        }
    }

    pub fn row_entry(&self, v: RowVar) -> Result<&RowEntry, ShapeError> {
        match self.rows.get(v.0) {
            Some(e) => Ok(e),
            None => Err(unknown_row(v)),
        }
    }

    pub fn dim_bounds(&self, v: DimVar) -> Option<&DimBounds> {
        match self.dims.get(v.0) {
            Some(DimEntry::Open(b)) => Some(b),
            _ => None,
        }
    }

    pub fn row_bounds(&self, v: RowVar) -> Option<&RowBounds> {
        match self.rows.get(v.0) {
            Some(RowEntry::Open { bounds, .. }) => Some(bounds),
            _ => None,
        }
    }

    /// How much is recorded on an unsolved dim variable (what binding it
    /// would move to another variable).
    pub fn dim_load(&self, v: DimVar) -> usize {
        self.dim_bounds(v)
            .map_or(0, |b| b.cur.len() + b.subr.len() + b.watchers.len())
    }

    /// How much is stored on an unsolved row variable.
    pub fn row_load(&self, v: RowVar) -> usize {
        self.row_bounds(v)
            .map_or(0, |b| b.ineqs.len() + b.watchers.len())
    }

    /// The bounds of an unsolved row variable, as a handle of their own (to
    /// read while look-ups compress chains).
    pub fn row_bounds_shared(&self, v: RowVar) -> Option<Arc<RowBounds>> {
        match self.rows.get(v.0) {
            Some(RowEntry::Open { bounds, .. }) => Some(bounds.clone()),
            _ => None,
        }
    }

    /// How the first upper bound of an open row variable ends (`None` for
    /// a solved one too).
    pub fn first_upper(&self, v: RowVar) -> FirstUpper {
        match self.rows.get(v.0) {
            Some(RowEntry::Open { first_upper, .. }) => first_upper.get(),
            _ => FirstUpper::None,
        }
    }

    /// Applies `f` to the bounds of an unsolved dim variable.
    /// `f` may only append to the bounds' lists and set the bound, which
    /// is what the undo log can take back without a copy.
    pub fn update_dim_bounds(&mut self, v: DimVar, f: impl FnOnce(&mut DimBounds)) {
        self.dims.update(v.0, |e| {
            if let DimEntry::Open(b) = e {
                f(Arc::make_mut(b));
            }
        });
    }

    /// Applies `f` to the bounds of an unsolved row variable.
    /// `f` may only append to the bounds' lists.
    pub fn update_row_bounds(&mut self, v: RowVar, f: impl FnOnce(&mut RowBounds)) {
        self.row_writes += 1;
        self.rows.update(v.0, |e| {
            if let RowEntry::Open {
                bounds,
                first_upper,
            } = e
            {
                let b = Arc::make_mut(bounds);
                f(b);
                *first_upper = PackedFirstUpper::new(FirstUpper::of(b));
            }
        });
    }

    /// Adds a label to the known size a solved dim variable holds.
    pub fn relabel(&mut self, v: DimVar, label: shape_core::Label) {
        self.dims.modify(v.0, |e| {
            if let Some(k) = e.as_known() {
                *e = DimEntry::known(k.value.with_label(Some(label)), k.why, k.source, k.from);
            }
        });
    }

    /// Follows solved variables to a known size or an unsolved root,
    /// compressing the chain on the way. `literal` is the source of `d`
    /// itself when it is a known size.
    pub fn resolve_dim(&mut self, d: &Dim, literal: Why) -> Result<ResolvedDim, ShapeError> {
        resolve_dim(self, d, literal)
    }

    /// The number of axes, after substitution, of a row with `len` dims of
    /// its own that ends in `tail`, and the tail it ends in then.
    pub fn extent(&mut self, len: usize, tail: RowTail) -> Result<(usize, RowTail), ShapeError> {
        extent(self, len, tail)
    }

    /// Substitutes solved row variables at the front of a row.
    pub fn resolve_row<'r>(&mut self, r: &'r Row) -> Result<ResolvedRow<'r>, ShapeError> {
        resolve_row(self, r)
    }

    /// Look-ups that leave the environment as it is.
    pub fn read_only(&self) -> ReadOnly<'_> {
        ReadOnly(self)
    }
}

fn unknown_dim(v: DimVar) -> ShapeError {
    ShapeError::UnknownVariable {
        what: "dim",
        id: v.0,
    }
}

fn unknown_row(v: RowVar) -> ShapeError {
    ShapeError::UnknownVariable {
        what: "row",
        id: v.0,
    }
}

/// How a look-up follows chains of solved variables: in a state that is
/// still solved (compressing them in the stores), read-only, or in a
/// finished solution (compressing them in caches beside it).
///
/// The walks themselves are written once, below; they read each entry on
/// the way once, and report a chain of two or more aliases to the lookup,
/// which shortens it where it may.
pub(crate) trait Lookup {
    fn env(&self) -> &Env;
    /// A known end of the alias chain from `v`, kept beside the entries.
    fn known_dim_end(&self, _v: DimVar) -> Option<DimVar> {
        None
    }
    fn known_row_end(&self, _v: RowVar) -> Option<RowVar> {
        None
    }
    /// The alias chain from `v` ends at `end`, two or more steps away.
    fn dim_chain(&mut self, v: DimVar, end: DimVar);
    fn row_chain(&mut self, v: RowVar, end: RowVar);
    /// Solved row variable `v`'s value continues with a variable whose
    /// alias chain ends at `end`.
    fn row_skips_to(&mut self, v: RowVar, end: RowVar);
}

impl Lookup for Env {
    fn env(&self) -> &Env {
        self
    }
    fn dim_chain(&mut self, v: DimVar, end: DimVar) {
        self.dims.compress(v.0, end.0);
    }
    fn row_chain(&mut self, v: RowVar, end: RowVar) {
        self.rows.compress(v.0, end.0);
    }
    fn row_skips_to(&mut self, v: RowVar, end: RowVar) {
        self.rows.relink(v.0, end.0);
    }
}

/// Look-ups that compress nothing, for a state borrowed immutably.
pub(crate) struct ReadOnly<'a>(&'a Env);

impl Lookup for ReadOnly<'_> {
    fn env(&self) -> &Env {
        self.0
    }
    fn dim_chain(&mut self, _: DimVar, _: DimVar) {}
    fn row_chain(&mut self, _: RowVar, _: RowVar) {}
    fn row_skips_to(&mut self, _: RowVar, _: RowVar) {}
}

/// Look-ups in a finished solution, whose chains are compressed in caches
/// beside it.
pub(crate) struct Cached<'a> {
    pub env: &'a Env,
    pub dims: &'a LinkCache,
    pub rows: &'a LinkCache,
}

impl Lookup for Cached<'_> {
    fn env(&self) -> &Env {
        self.env
    }
    fn known_dim_end(&self, v: DimVar) -> Option<DimVar> {
        self.dims.get(v.0).map(DimVar)
    }
    fn known_row_end(&self, v: RowVar) -> Option<RowVar> {
        self.rows.get(v.0).map(RowVar)
    }
    fn dim_chain(&mut self, v: DimVar, end: DimVar) {
        self.env.dims.compress_into(v.0, end.0, self.dims);
    }
    fn row_chain(&mut self, v: RowVar, end: RowVar) {
        self.env.rows.compress_into(v.0, end.0, self.rows);
    }
    fn row_skips_to(&mut self, _: RowVar, _: RowVar) {}
}

/// See [`Env::resolve_dim`].
pub(crate) fn resolve_dim(
    l: &mut impl Lookup,
    d: &Dim,
    literal: Why,
) -> Result<ResolvedDim, ShapeError> {
    let v = match d {
        Dim::Known(value) => {
            return Ok(ResolvedDim::Known {
                value: value.clone(),
                source: literal,
                holder: None,
            })
        }
        Dim::Var(v) => *v,
    };
    let (mut at, mut hops) = (v, 0);
    let env = l.env();
    // An open variable ends the chain: the set says so without its entry
    // being read.
    let resolved = loop {
        if env.is_open_dim(at) {
            break ResolvedDim::Var(at);
        }
        if let Some(end) = l.known_dim_end(at) {
            (at, hops) = (end, hops + 1);
            continue;
        }
        match env.dim_entry(at)? {
            &DimEntry::Sized(s) => {
                break ResolvedDim::Known {
                    value: KnownDim::sized(s.size()),
                    source: s.source(),
                    holder: Some(at),
                }
            }
            DimEntry::Known(k) => {
                break ResolvedDim::Known {
                    value: k.value.clone(),
                    source: k.source,
                    holder: Some(at),
                }
            }
            DimEntry::Alias { next, .. } => {
                at = *next;
                hops += 1;
            }
            DimEntry::Open(_) => break ResolvedDim::Var(at),
        }
    };
    if hops >= 2 {
        l.dim_chain(v, at);
    }
    Ok(resolved)
}

/// Follows `tail` through solved row variables, handing each one's dims
/// to `piece` (the row's own tail first, so innermost last), and returns
/// the tail the row ends in. Runs of aliases on the way are shortened.
fn walk_row(
    l: &mut impl Lookup,
    tail: RowTail,
    mut piece: impl FnMut(&[Dim]),
) -> Result<RowTail, ShapeError> {
    let RowTail::Open(mut at) = tail else {
        return Ok(tail);
    };
    // The solved variable with dims of its own whose tail led here.
    let mut before: Option<RowVar> = None;
    loop {
        let start = at;
        let mut hops = 0;
        let env = l.env();
        let next = loop {
            if env.is_open_row(at) {
                break None;
            }
            if let Some(end) = l.known_row_end(at) {
                (at, hops) = (end, hops + 1);
                continue;
            }
            match env.row_entry(at)? {
                RowEntry::Solved { dims, tail } => match tail.get() {
                    RowTail::Open(w) if dims.is_empty() => {
                        at = w;
                        hops += 1;
                    }
                    tail => {
                        piece(dims);
                        break Some(tail);
                    }
                },
                RowEntry::Vars { vars, tail } => {
                    piece(&InlineDims::of(vars));
                    break Some(tail.get());
                }
                RowEntry::Open { .. } => break None,
            }
        };
        if hops >= 2 {
            l.row_chain(start, at);
        }
        if let (Some(b), true) = (before, hops > 0) {
            l.row_skips_to(b, at);
        }
        match next {
            None => return Ok(RowTail::Open(at)),
            Some(RowTail::Closed) => return Ok(RowTail::Closed),
            Some(RowTail::Open(w)) => {
                before = Some(at);
                at = w;
            }
        }
    }
}

/// See [`Env::extent`].
pub(crate) fn extent(
    l: &mut impl Lookup,
    len: usize,
    tail: RowTail,
) -> Result<(usize, RowTail), ShapeError> {
    let mut len = len;
    let tail = walk_row(l, tail, |dims| len += dims.len())?;
    Ok((len, tail))
}

/// See [`Env::resolve_row`].
pub(crate) fn resolve_row<'r>(
    l: &mut impl Lookup,
    r: &'r Row,
) -> Result<ResolvedRow<'r>, ShapeError> {
    let borrowed = |tail| ResolvedRow {
        dims: ResolvedDims::Borrowed(&r.dims),
        tail,
    };
    let RowTail::Open(v) = r.tail else {
        return Ok(borrowed(r.tail));
    };
    // The common cases read one entry: nothing to substitute, or one
    // solved variable whose value ends closed or in an open variable.
    let env = l.env();
    if env.is_open_row(v) {
        return Ok(borrowed(r.tail));
    }
    if let Some((dims, tail)) = env.row_entry(v)?.solved() {
        let one_level = match tail {
            RowTail::Closed => true,
            RowTail::Open(w) => env.is_open_row(w) && !dims.is_empty(),
        };
        if one_level && r.dims.is_empty() {
            let dims = match dims {
                SolvedDims::Shared(d) => ResolvedDims::Shared(d.clone()),
                SolvedDims::Inline(d) => ResolvedDims::Inline(d),
            };
            return Ok(ResolvedRow { dims, tail });
        }
        if one_level {
            let mut all = Vec::with_capacity(dims.len() + r.dims.len());
            all.extend_from_slice(&dims);
            all.extend_from_slice(&r.dims);
            return Ok(ResolvedRow {
                dims: ResolvedDims::Owned(all),
                tail,
            });
        }
    }
    // Pieces come innermost-last; fill back to front, then reverse.
    let mut dims: Vec<Dim> = r.dims.iter().rev().cloned().collect();
    let tail = walk_row(l, r.tail, |piece| dims.extend(piece.iter().rev().cloned()))?;
    if dims.len() == r.dims.len() {
        return Ok(borrowed(tail));
    }
    dims.reverse();
    Ok(ResolvedRow {
        dims: ResolvedDims::Owned(dims),
        tail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::origin::OriginId;

    fn why() -> Why {
        Why::of(OriginId(0))
    }

    #[test]
    fn entries_stay_small() {
        // Every solved dim, queued constraint and row holds these; their
        // size decides how much of a large network's state stays in cache.
        use std::mem::size_of;
        // 24 since sizes may be 0 (a `u64`, with no niche for the tag): the
        // solve bench measured the same times as with 16 (30.6 ms against
        // 31.2 ms at 10,000 operations, one run each).
        assert_eq!(size_of::<Dim>(), 24);
        assert_eq!(size_of::<Why>(), 8);
        assert_eq!(size_of::<DimEntry>(), 24);
        assert_eq!(size_of::<RowEntry>(), 16);
        // 72 since a result named by number carries its definition for
        // messages (`t7` (add(h, b1))); origins are one per statement or
        // operation, never one per constraint (`Why` is their index).
        assert!(size_of::<crate::origin::Origin>() <= 72);
        assert_eq!(size_of::<StoredIneq>(), 32);
        assert_eq!(size_of::<RowBounds>(), 88);
    }

    fn alias(to: DimVar) -> DimEntry {
        DimEntry::Alias {
            to,
            next: to,
            why: why(),
        }
    }

    #[test]
    fn dim_chains_compress_but_keep_every_step_for_provenance() {
        let mut env = Env::default();
        let vs: Vec<DimVar> = (0..5).map(|_| env.push_dim()).collect();
        for w in vs.windows(2) {
            env.set_dim(w[0], alias(w[1]));
        }
        let known = KnownDim::of(6).unwrap();
        env.set_dim(vs[4], DimEntry::known(known.clone(), why(), why(), None));
        let r = env.resolve_dim(&Dim::Var(vs[0]), why()).unwrap();
        assert!(
            matches!(r, ResolvedDim::Known { ref value, holder: Some(h), .. } if *value == known && h == vs[4])
        );
        for w in vs.windows(2) {
            assert!(
                matches!(env.dim_entry(w[0]).unwrap(), DimEntry::Alias { to, next, .. } if *to == w[1] && *next == vs[4])
            );
        }
    }

    #[test]
    fn row_chains_skip_aliases_and_keep_their_dims() {
        // r0 = [a, ..r1..], r1 = r2, r2 = r3, r3 = [b] (closed).
        let mut env = Env::default();
        let rs: Vec<RowVar> = (0..4).map(|_| env.push_row(0)).collect();
        let (a, b) = (Dim::Var(env.push_dim()), Dim::Var(env.push_dim()));
        let e = env.solved_row(std::slice::from_ref(&a), RowTail::Open(rs[1]));
        env.set_row(rs[0], e);
        for w in rs[1..].windows(2) {
            let e = env.solved_row(&[], RowTail::Open(w[1]));
            env.set_row(w[0], e);
        }
        let e = env.solved_row(std::slice::from_ref(&b), RowTail::Closed);
        env.set_row(rs[3], e);
        let row = Row::open(rs[0], vec![]);
        let plain = resolve_row(&mut env.read_only(), &row).unwrap();
        assert_eq!(
            (plain.dims.to_vec(), plain.tail),
            (vec![b.clone(), a.clone()], RowTail::Closed)
        );
        let resolved = env.resolve_row(&row).unwrap();
        assert_eq!(&*resolved.dims, &[b, a]);
        assert!(matches!(
            env.row_entry(rs[0]).unwrap(),
            RowEntry::Vars { tail, .. } if tail.get() == RowTail::Open(rs[3])
        ));
        assert_eq!(
            env.extent(0, RowTail::Open(rs[1])).unwrap(),
            (1, RowTail::Closed)
        );
    }
}
