//! Finalization: closing every variable that solving left open.
//!
//! This is the one step that is a policy rather than a consequence of the
//! constraints, so it is separate and explicit. Rounds, highest priority
//! first, each followed by full simplification:
//!
//! 1. a dim variable with a least upper bound takes it;
//! 2. a row variable all of whose upper bounds are closed rows takes as
//!    many fresh axes as the shortest of them allows (their sizes then
//!    follow from rule 1);
//! 3. a row variable with no upper bound at all becomes empty;
//! 4. a dim variable with no upper bound at all becomes 1;
//! 5. what is left (variables that bound each other in a cycle, or wait
//!    under one) closes the same way, all rows at once, else all dims;
//! 6. an element-count constraint still waiting on two or more unknown
//!    sizes is an error: the solution would be a guess.
//!
//! Results flow down from the results of a computation to its leaves, so a
//! parameter gets the largest shape its uses allow and an intermediate
//! result gets the smallest.

use std::collections::BTreeSet;
use std::sync::Arc;

use imbl::Vector;
use shape_core::{Dim, DimVar, KnownDim, Row, RowTail, RowVar};

use crate::constraint::Constraint;
use crate::env::{DimEntry, Env, ResolvedDim, RowEntry};
use crate::error::ShapeError;
use crate::origin::{Origin, Why};
use crate::solver::Solver;

/// Variables whose closing rules may have become applicable: rules 1-2
/// (`dims`, `rows`) and rules 3-4 (`top_dims`, `top_rows`). Touching a
/// variable when something about its bounds changes keeps every round
/// proportional to what changed, not to the size of the environment.
#[derive(Clone, Debug, Default)]
pub(crate) struct Dirty {
    pub dims: VarQueue,
    pub rows: VarQueue,
    pub top_dims: VarQueue,
    pub top_rows: VarQueue,
}

impl Dirty {
    pub fn touch_dim(&mut self, v: DimVar) {
        self.dims.insert(v.0);
        self.top_dims.insert(v.0);
    }

    pub fn touch_row(&mut self, v: RowVar) {
        self.rows.insert(v.0);
        self.top_rows.insert(v.0);
    }
}

/// A set of variable ids that hands them out lowest first: one bit per id
/// (a few kilobytes for tens of thousands of variables, so it stays in
/// cache), and a word index below which every word is empty.
#[derive(Clone, Debug, Default)]
pub(crate) struct VarQueue {
    bits: Vec<u64>,
    /// Every word before this one is zero.
    low: usize,
    len: usize,
}

impl VarQueue {
    pub fn insert(&mut self, id: u32) {
        let (w, b) = (id as usize / 64, id % 64);
        if w >= self.bits.len() {
            self.bits.resize(w + 1, 0);
        }
        let mask = 1u64 << b;
        if self.bits[w] & mask == 0 {
            self.bits[w] |= mask;
            self.len += 1;
            self.low = self.low.min(w);
        }
    }

    /// Inserts many ids at once.
    pub fn insert_all(&mut self, ids: &[u32]) {
        ids.iter().for_each(|&id| self.insert(id));
    }

    pub fn pop(&mut self) -> Option<u32> {
        if self.len == 0 {
            return None;
        }
        while self.bits[self.low] == 0 {
            self.low += 1;
        }
        let word = &mut self.bits[self.low];
        let b = word.trailing_zeros();
        *word &= *word - 1;
        self.len -= 1;
        Some(self.low as u32 * 64 + b)
    }

    /// Every member, lowest first, leaving the set empty.
    pub fn take_all(&mut self) -> Vec<u32> {
        let mut all = Vec::with_capacity(self.len);
        for (w, word) in self.bits.iter_mut().enumerate().skip(self.low) {
            while *word != 0 {
                all.push(w as u32 * 64 + word.trailing_zeros());
                *word &= *word - 1;
            }
        }
        self.len = 0;
        self.low = self.bits.len();
        all
    }
}

impl Solver {
    /// Closes every open variable and returns the fully solved state.
    ///
    /// `self` is not changed, so more constraints can be added and
    /// finalization run again.
    pub fn finalize(&self) -> Result<Solution, ShapeError> {
        self.clone().into_solution()
    }

    /// [`Solver::finalize`] without keeping the unfinalized state: no
    /// copy-on-write of the environment.
    pub fn into_solution(self) -> Result<Solution, ShapeError> {
        let mut s = self;
        // The maps are usually shared with the unfinalized state (by
        // `finalize` and by the graph): written entries go to an overlay.
        s.env.start_overlay();
        let fin = Why::of(s.add_origin(Origin::Finalization));
        s.dirty = Some(Dirty::default());
        let mut any_open = s.touch_all();
        let mut rescanned = true;
        // Recomputed with every round of rules 3-5; between rounds a row
        // that stays listed after its slice was decided only waits longer.
        let mut blocked_rows = s.blocked()?.1;
        loop {
            s.run()?;
            if s.close_dirty(fin, &blocked_rows)? {
                continue;
            }
            let (blocked_dims, blocked, waiting) = s.blocked()?;
            blocked_rows = blocked;
            if s.close_top_rows(fin, &blocked_rows)? || s.close_top_dims(fin, &blocked_dims)? {
                rescanned = false;
                continue;
            }
            if !rescanned {
                // Rules 3-4 only looked at touched variables; look at all
                // before falling back to rule 5.
                any_open = s.touch_all();
                rescanned = true;
                continue;
            }
            if !any_open {
                // The last full scan found nothing open, and with nothing
                // open no rule can open anything.
                break;
            }
            if s.close_leftover(fin, &blocked_dims, &blocked_rows)? {
                continue;
            }
            if let Some(c) = waiting {
                return Err(s.underdetermined(c));
            }
            // Every rule has run dry: anything still open is an error, not a
            // silently partial solution.
            if let Some(r) = s.env.open_rows().next() {
                return Err(ShapeError::Unsolved {
                    what: "row",
                    id: r.0,
                });
            }
            if let Some(v) = s.env.open_dims().next() {
                return Err(ShapeError::Unsolved {
                    what: "dim",
                    id: v.0,
                });
            }
            break;
        }
        s.dirty = None;
        Ok(Solution {
            env: s.env,
            origins: s.origins,
        })
    }

    /// Queues every open variable for every rule; false when none is open.
    fn touch_all(&mut self) -> bool {
        debug_assert!(self.env.open_sets_match_entries());
        // Nothing open (the usual case by the last full scan): nothing to
        // queue, and no need to read every entry to find that out.
        if !self.env.any_open() {
            return false;
        }
        // Every open variable is queued for every rule, without reading its
        // entry: rules 1 and 2 read it when they take the variable (a
        // variable they cannot close yet is passed by, and queued again when
        // something about it changes), and at 10,000 operations a pass that
        // read each open entry here cost as much again in cache misses.
        let dims: Vec<u32> = self.env.open_dims().map(|v| v.0).collect();
        let rows: Vec<u32> = self.env.open_rows().map(|r| r.0).collect();
        if let Some(d) = self.dirty.as_mut() {
            d.dims.insert_all(&dims);
            d.top_dims.insert_all(&dims);
            d.rows.insert_all(&rows);
            d.top_rows.insert_all(&rows);
        }
        !(dims.is_empty() && rows.is_empty())
    }

    /// Rules 1 and 2 for one dirty variable; false when nothing was dirty.
    fn close_dirty(
        &mut self,
        fin: Why,
        blocked_rows: &BTreeSet<RowVar>,
    ) -> Result<bool, ShapeError> {
        let Some(d) = self.dirty.as_mut() else {
            return Ok(false);
        };
        if let Some(v) = d.dims.pop().map(DimVar) {
            if let Some((lub, lw)) = self.env.dim_bounds(v).and_then(|b| b.lub.clone()) {
                self.bind_dim(v, Dim::Known(lub), lw, lw);
            }
            return Ok(true);
        }
        if let Some(r) = d.rows.pop().map(RowVar) {
            if blocked_rows.contains(&r) {
                return Ok(true);
            }
            if let Some(len) = self.closed_upper_len(r)? {
                let fresh: Vec<Dim> = (0..len).map(|_| Dim::Var(self.fresh_dim())).collect();
                if let Some(d) = self.dirty.as_mut() {
                    fresh
                        .iter()
                        .filter_map(as_var)
                        .for_each(|v| d.dims.insert(v.0));
                }
                self.bind_row(r, &fresh, RowTail::Closed, fin);
            }
            return Ok(true);
        }
        Ok(false)
    }

    /// What the stored inequalities bounding `r` from above say: how many
    /// there are, whether all are closed rows, and the fewest axes any of
    /// them leaves for `r`.
    fn uppers(&self, r: RowVar) -> Result<Uppers, ShapeError> {
        let mut u = Uppers {
            count: 0,
            all_closed: true,
            min_len: usize::MAX,
        };
        // Most open rows have no upper bound: the entry says so without
        // its bounds being read.
        let Some(RowEntry::Open {
            bounds: b,
            upper_hint: 1..,
        }) = self.env.row_at(r.index())
        else {
            return Ok(u);
        };
        for c in b.uppers() {
            // Lengths and tails only: nothing is copied. Stored upper
            // bounds name `r` itself as their operand, which is open.
            let (ls, st) = if c.subr == r {
                (0, RowTail::Open(r))
            } else {
                self.env.extent(0, RowTail::Open(c.subr))?
            };
            if st != RowTail::Open(r) {
                continue;
            }
            let (lc, ct) = self.env.extent(c.cur.dims.len(), c.cur.tail)?;
            if ct == RowTail::Open(r) {
                continue;
            }
            u.count += 1;
            u.all_closed &= ct == RowTail::Closed;
            u.min_len = u.min_len.min(lc.saturating_sub(ls));
        }
        Ok(u)
    }

    /// Whether the first upper bound stored on `r` is a row that ends in
    /// another open row variable: then `r` has an upper bound (it counts)
    /// that is not closed, which is all that rules 2 and 3 need to know to
    /// pass `r` by, and the entry tells it without `r`'s bounds being read.
    fn first_upper_open(&self, r: RowVar) -> Result<bool, ShapeError> {
        let hint = match self.env.row_at(r.index()) {
            Some(RowEntry::Open { upper_hint, .. }) => *upper_hint,
            _ => return Ok(false),
        };
        if hint < 2 {
            return Ok(false);
        }
        // The same walk uppers() makes for the first upper bound's result row.
        let (_, tail) = self.env.extent(0, RowTail::Open(RowVar(hint - 2)))?;
        Ok(matches!(tail, RowTail::Open(w) if w != r))
    }

    /// Rule 2: when every upper bound of `r` is closed, the number of axes
    /// the shortest one leaves for `r`.
    fn closed_upper_len(&self, r: RowVar) -> Result<Option<usize>, ShapeError> {
        if self.first_upper_open(r)? {
            return Ok(None);
        }
        let u = self.uppers(r)?;
        Ok((u.count > 0 && u.all_closed).then_some(u.min_len))
    }

    /// Variables that deferred constraints will decide: dims of element-count
    /// rows with two or more unknowns and the dims above them, rows that are
    /// the rest of a pending slice and the rows above them. Also returns one
    /// such element-count constraint.
    #[allow(clippy::type_complexity)]
    fn blocked(
        &self,
    ) -> Result<(BTreeSet<DimVar>, BTreeSet<RowVar>, Option<Constraint>), ShapeError> {
        let mut dims = BTreeSet::new();
        let mut rows = BTreeSet::new();
        let mut waiting = None;
        let watchers = self
            .watched_dims
            .iter()
            .filter_map(|v| self.env.dim_bounds(*v).map(|b| &b.watchers))
            .chain(
                self.watched_rows
                    .iter()
                    .filter_map(|v| self.env.row_bounds(*v).map(|b| &b.watchers)),
            );
        for ws in watchers {
            for c in ws.iter() {
                match c {
                    Constraint::TotalElems { row, why, .. } => {
                        let rr = self.env.resolve_row(row)?;
                        let mut unknown = Vec::new();
                        for d in rr.dims.iter() {
                            if let ResolvedDim::Var(v) = self.env.resolve_dim(d, *why)? {
                                unknown.push(v);
                            }
                        }
                        unknown.sort();
                        unknown.dedup();
                        if rr.tail == RowTail::Closed && unknown.len() >= 2 {
                            dims.extend(unknown);
                            waiting.get_or_insert_with(|| c.clone());
                        }
                    }
                    Constraint::DropFirst { rest, .. } => {
                        if let RowTail::Open(r) = self.env.resolve_row(rest)?.tail {
                            rows.insert(r);
                        }
                    }
                    _ => {}
                }
            }
        }
        // A dim above a waiting dim must wait too: closing it to 1 (rules 4
        // and 5) would force the waiting dim to 1 and so decide the element
        // count by a guess, one that depended on which of several such
        // dims had the lowest id, and so on the order of the constraints.
        let mut below: Vec<DimVar> = dims.iter().copied().collect();
        while let Some(v) = below.pop() {
            let Some(b) = self.env.dim_bounds(v) else {
                continue;
            };
            for (u, why) in &b.cur {
                if let ResolvedDim::Var(u) = self.env.resolve_dim(&Dim::Var(*u), *why)? {
                    if dims.insert(u) {
                        below.push(u);
                    }
                }
            }
        }
        // A row above a pending slice's result must wait for it too: closing
        // it first would bound the slice's result before the slice decides.
        let mut frontier: Vec<RowVar> = rows.iter().copied().collect();
        while let Some(r) = frontier.pop() {
            let Some(b) = self.env.row_bounds(r) else {
                continue;
            };
            for c in b.uppers() {
                if let (_, RowTail::Open(u)) = self.env.extent(c.cur.dims.len(), c.cur.tail)? {
                    if u != r && rows.insert(u) {
                        frontier.push(u);
                    }
                }
            }
        }
        Ok((dims, rows, waiting))
    }

    /// Rule 3.
    fn close_top_rows(&mut self, fin: Why, blocked: &BTreeSet<RowVar>) -> Result<bool, ShapeError> {
        let candidates = self
            .dirty
            .as_mut()
            .map(|d| d.top_rows.take_all())
            .unwrap_or_default()
            .into_iter()
            .map(RowVar);
        let mut tops = Vec::new();
        for r in candidates.filter(|&r| self.env.is_open_row(r)) {
            // One look-up of the entry for the common cases: solved, or
            // open without upper bounds.
            let top = match self.env.row_at(r.index()) {
                Some(RowEntry::Open { upper_hint, .. }) => {
                    !blocked.contains(&r)
                        && (*upper_hint == 0
                            || (!self.first_upper_open(r)? && self.uppers(r)?.count == 0))
                }
                _ => false,
            };
            if top {
                tops.push(r);
            }
        }
        for &r in &tops {
            // Closing one may have given another an upper bound since.
            if self.uppers(r)?.count == 0 {
                self.close_row_empty(r, fin)?;
            }
        }
        Ok(!tops.is_empty())
    }

    fn close_row_empty(&mut self, r: RowVar, fin: Why) -> Result<(), ShapeError> {
        if self.env.row_bounds(r).is_some() {
            self.bind_row(r, &[], RowTail::Closed, fin);
            self.run()?;
        }
        Ok(())
    }

    fn close_dim_one(&mut self, v: DimVar, fin: Why) -> Result<(), ShapeError> {
        if self.env.dim_bounds(v).is_some() {
            self.bind_dim(v, Dim::Known(KnownDim::one()), fin, fin);
            self.run()?;
        }
        Ok(())
    }

    /// Rule 4.
    fn close_top_dims(&mut self, fin: Why, blocked: &BTreeSet<DimVar>) -> Result<bool, ShapeError> {
        let candidates = self
            .dirty
            .as_mut()
            .map(|d| d.top_dims.take_all())
            .unwrap_or_default()
            .into_iter()
            .map(DimVar);
        let tops: Vec<DimVar> = candidates
            .into_iter()
            .filter(|v| {
                !blocked.contains(v)
                    && self.env.is_open_dim(*v)
                    && self
                        .env
                        .dim_bounds(*v)
                        .is_some_and(|b| b.cur.is_empty() && b.lub.is_none())
            })
            .collect();
        for &v in &tops {
            if self
                .env
                .dim_bounds(v)
                .is_some_and(|b| b.cur.is_empty() && b.lub.is_none())
            {
                self.close_dim_one(v, fin)?;
            }
        }
        Ok(!tops.is_empty())
    }

    /// Rule 5: every row variable left closes empty, all at once; if there
    /// is none, every dim variable left becomes 1.
    ///
    /// What is left bounds itself in cycles (or waits under one). Closing
    /// one variable at a time made the choice of the first one decide the
    /// others' lengths, and any order among them (ids included, which for
    /// templates follow the order of the constraints) named one variable
    /// of a cycle in one order of the constraints and another in the next.
    /// All at once is always consistent: what is left has no known lower
    /// bound (rules 1-2 would have taken it), and a row inequality or a
    /// dim inequality holds when both sides are empty or 1.
    fn close_leftover(
        &mut self,
        fin: Why,
        blocked_dims: &BTreeSet<DimVar>,
        blocked_rows: &BTreeSet<RowVar>,
    ) -> Result<bool, ShapeError> {
        let rows: Vec<RowVar> = self
            .env
            .open_rows()
            .filter(|r| !blocked_rows.contains(r))
            .collect();
        if !rows.is_empty() {
            for r in rows {
                if self.env.row_bounds(r).is_some() {
                    self.bind_row(r, &[], RowTail::Closed, fin);
                }
            }
            self.run()?;
            return Ok(true);
        }
        let dims: Vec<DimVar> = self
            .env
            .open_dims()
            .filter(|v| !blocked_dims.contains(v))
            .collect();
        if !dims.is_empty() {
            for v in dims {
                if self.env.dim_bounds(v).is_some() {
                    self.bind_dim(v, Dim::Known(KnownDim::one()), fin, fin);
                }
            }
            self.run()?;
            return Ok(true);
        }
        Ok(false)
    }

    fn underdetermined(&self, c: Constraint) -> ShapeError {
        let Constraint::TotalElems { row, total, why } = c else {
            unreachable!("only element-count constraints wait on several dims")
        };
        match self.env.resolve_row(&row) {
            Ok(rr) => {
                let unknowns = rr
                    .dims
                    .iter()
                    .filter(|d| matches!(self.env.resolve_dim(d, why), Ok(ResolvedDim::Var(_))))
                    .count();
                ShapeError::Underdetermined {
                    context: self.origin_arc(why.origin),
                    row: self.show_row(&rr),
                    total: total.get(),
                    unknowns,
                }
            }
            Err(e) => e,
        }
    }
}

fn as_var(d: &Dim) -> Option<DimVar> {
    match d {
        Dim::Var(v) => Some(*v),
        _ => None,
    }
}

/// A summary of a row variable's upper bounds.
struct Uppers {
    count: usize,
    all_closed: bool,
    min_len: usize,
}

/// A fully solved environment: every variable has a value.
#[derive(Clone, Debug)]
pub struct Solution {
    env: Env,
    origins: Vector<Origin>,
}

/// Why a dimension has its size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance {
    /// The size.
    pub value: KnownDim,
    /// Where the size came from: a declaration, an operation, or
    /// finalization's default.
    pub source: Arc<Origin>,
    /// The axis within the source's row, counted from the end.
    pub source_axis: Option<u32>,
    /// The constraints that carried the size to this dimension, nearest
    /// first.
    pub via: Vec<Arc<Origin>>,
}

impl Solution {
    fn origin(&self, why: Why) -> Arc<Origin> {
        Arc::new(
            self.origins
                .get(why.origin.0 as usize)
                .cloned()
                .unwrap_or(Origin::Finalization),
        )
    }

    /// The solved size of a dim.
    pub fn dim(&self, d: &Dim) -> Result<KnownDim, ShapeError> {
        let mut cur = d;
        loop {
            match cur {
                Dim::Known(k) => return Ok(k.clone()),
                Dim::Var(v) => match self.env.dim_entry(*v)? {
                    DimEntry::Solved { value, .. } => cur = value,
                    DimEntry::Open(_) => {
                        return Err(ShapeError::Unsolved {
                            what: "dim",
                            id: v.0,
                        })
                    }
                },
            }
        }
    }

    /// The solved sizes of a row.
    pub fn row(&self, r: &Row) -> Result<Vec<KnownDim>, ShapeError> {
        let rr = self.env.resolve_row(r)?;
        if let RowTail::Open(v) = rr.tail {
            return Err(ShapeError::Unsolved {
                what: "row",
                id: v.0,
            });
        }
        rr.dims.iter().map(|d| self.dim(d)).collect()
    }

    /// The solved size of a dim and the chain of constraints that fixed it.
    pub fn provenance(&self, d: &Dim) -> Result<Provenance, ShapeError> {
        let mut via = Vec::new();
        let mut cur = d.clone();
        loop {
            match cur {
                // Only a size written directly in the row gets here: a solved
                // variable returns below with the source of its value.
                Dim::Known(value) => {
                    return Ok(Provenance {
                        value,
                        source: Arc::new(Origin::Direct {
                            what: "a size written directly in the row".into(),
                        }),
                        source_axis: None,
                        via,
                    })
                }
                Dim::Var(v) => match self.env.dim_entry(v)? {
                    DimEntry::Solved { value, why, source } => {
                        via.push(self.origin(*why));
                        if let Dim::Known(k) = value {
                            return Ok(Provenance {
                                value: k.clone(),
                                source: self.origin(*source),
                                source_axis: source.axis_from_end(),
                                via,
                            });
                        }
                        cur = value.clone();
                    }
                    DimEntry::Open(_) => {
                        return Err(ShapeError::Unsolved {
                            what: "dim",
                            id: v.0,
                        })
                    }
                },
            }
        }
    }
}

impl Solution {
    /// The dims of a row with its row variables substituted, variables
    /// included (each resolves with [`Solution::dim`]).
    pub fn row_dims(&self, r: &Row) -> Result<Vec<Dim>, ShapeError> {
        let rr = self.env.resolve_row(r)?;
        match rr.tail {
            RowTail::Closed => Ok(rr.dims.to_vec()),
            RowTail::Open(v) => Err(ShapeError::Unsolved {
                what: "row",
                id: v.0,
            }),
        }
    }

    /// The value of a solved row variable.
    pub fn row_var(&self, v: RowVar) -> Result<Row, ShapeError> {
        match self.env.row_entry(v)? {
            RowEntry::Solved { dims, tail } => Ok(Row {
                dims: dims.to_vec(),
                tail: *tail,
                constraint: shape_core::RowConstraint::Unconstrained,
            }),
            RowEntry::Open { .. } => Err(ShapeError::Unsolved {
                what: "row",
                id: v.0,
            }),
        }
    }
}
