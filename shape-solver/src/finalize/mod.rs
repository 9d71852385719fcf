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
//! 3. a row variable with no upper bound at all becomes empty, where a
//!    bound that only passes it through to a free result (a use nobody
//!    reads, see `Solver::is_free_result`) does not count, and a free
//!    result waits for the operands it passes through;
//! 4. a dim variable with no upper bound at all becomes 1;
//! 5. what is left (variables that bound each other in a cycle, or wait
//!    under one) closes the same way, all rows at once, else all dims;
//!    first, though, free results that wait for an operand they add axes
//!    to, which waits on them in turn, close as in rule 3 (all at once);
//! 6. when all that is left waits for pending batch slices, the slices
//!    match what their rows spell out (see `Solver::drop_first`) and stop
//!    holding the rows back, and rules 1-5 go on.
//!
//! The smallest row a slice's operand can close to has the axis the slice
//! drops: rules 3 and 5 close a row variable at the front of a pending
//! slice's operand row to one axis (one more for each slice of the slice's
//! result, fewer by the axes the operand row spells out) rather than none.
//!
//! An element-count constraint still waiting on two or more unknown sizes
//! at the end is an error: the solution would be a guess.
//!
//! Results flow down from the results of a computation to its leaves, so a
//! parameter gets the largest shape its uses allow and an intermediate
//! result gets the smallest.
//!
//! Which variables to look at again is not tracked by the rules: the
//! environment's stores report every variable that changed (and those a
//! solved variable recorded relations with), and finalization queues them.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use imbl::Vector;
use shape_core::{Dim, DimVar, KnownDim, Row, RowTail, RowVar, Size, SymSize};

use crate::constraint::Constraint;
use crate::env::{resolve_dim, resolve_row, Cached, DimEntry, Env, FirstUpper, ResolvedDim};
use crate::error::{DimFact, ShapeError, SumReason};
use crate::guard::{RawGuard, Requirement, SizeGuard};
use crate::origin::{Origin, Why};
use crate::solver::Solver;
use crate::store::LinkCache;

mod pending;

use pending::Pending;

/// Variables whose closing rules may have become applicable: rules 1-2
/// (`dims`, `rows`) and rules 3-4 (`top_dims`, `top_rows`). Fed with what
/// changed, so that every round costs what changed, not the size of the
/// environment.
#[derive(Debug, Default)]
struct Queues {
    dims: VarQueue,
    rows: VarQueue,
    top_dims: VarQueue,
    top_rows: VarQueue,
}

impl Queues {
    /// Queues, for every rule, what changed in `env` since the last call.
    fn absorb(&mut self, env: &mut Env) {
        env.dims.drain_changes(|v| {
            self.dims.insert(v);
            self.top_dims.insert(v);
        });
        env.rows.drain_changes(|r| {
            self.rows.insert(r);
            self.top_rows.insert(r);
        });
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

    /// Whether `id` is in the set.
    pub fn contains(&self, id: u32) -> bool {
        self.bits
            .get(id as usize / 64)
            .is_some_and(|w| w & (1u64 << (id % 64)) != 0)
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
    /// Whether no id is queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

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
        s.env.track_changes(true);
        let fin = Why::of(s.add_origin(Origin::Finalization));
        let mut q = Queues::default();
        let mut any_open = s.queue_all_open(&mut q);
        let mut rescanned = true;
        // Rule 6: once nothing but rows waiting for slices is left, the
        // slices hold nothing back any more.
        let mut slices_released = false;
        // Rounds of closing the sums' unknown sizes (see below).
        let mut sum_rounds = 0;
        // Recomputed with every round of rules 3-5; between rounds a row
        // that stays listed after its slice was decided only waits longer.
        let mut pending = s.pending()?;
        loop {
            s.run()?;
            if s.close_counted_rows(&pending.counted_rows)? {
                pending = s.pending()?;
                continue;
            }
            if s.close_queued(&mut q, fin, &pending.rows, &pending.sum_held)? {
                continue;
            }
            pending = s.pending()?;
            if slices_released {
                pending.rows.clear();
            }
            if s.close_top_rows(&mut q, fin, &pending)?
                || s.close_top_dims(&mut q, fin, &pending.dims)?
            {
                rescanned = false;
                continue;
            }
            if !rescanned {
                // Rules 3-4 only looked at touched variables; look at all
                // before falling back to rule 5.
                any_open = s.queue_all_open(&mut q);
                rescanned = true;
                continue;
            }
            if !any_open {
                // The last full scan found nothing open, and with nothing
                // open no rule can open anything.
                break;
            }
            if s.release_waiting_results(fin, &pending)? {
                any_open = s.queue_all_open(&mut q);
                continue;
            }
            if s.close_leftover(fin, &pending)? {
                continue;
            }
            if s.env.open_rows().any(|r| pending.rows.contains(&r)) {
                // Rule 6. Every row left waits for a slice that waits for
                // one of them. The slices match their spelled-out axes now,
                // after which whatever rules 1-5 choose leaves each slice a
                // first axis to drop.
                slices_released = true;
                pending.rows.clear();
                s.match_open_slices();
                any_open = s.queue_all_open(&mut q);
                continue;
            }
            if sum_rounds < 2 && !pending.totals.is_empty() {
                // Only sums (and the dims related to them) are left. As
                // elsewhere, results close before their operands: first
                // every whole that has a least upper bound closes to it,
                // all at once; then the parts still unknown close, all at
                // once, each to its least upper bound or else 1. A part
                // that is the whole of another sum waits for that sum
                // (the concatenation of a concatenation), unless only
                // such parts are left (sums in a cycle): a second round
                // closes them too. No order
                // of constraints can change either batch; the sums decide
                // what follows, and the rules the rest.
                sum_rounds += 1;
                s.close_sums(&pending.totals, sum_rounds == 1, fin)?;
                any_open = s.queue_all_open(&mut q);
                pending = s.pending()?;
                continue;
            }
            // Nothing can close any more: what is left is an error.
            s.stuck(pending)?;
            break;
        }
        s.env.track_changes(false);
        Ok(Solution {
            env: s.env,
            origins: s.origins,
            dim_links: LinkCache::default(),
            row_links: LinkCache::default(),
            defaulted_rows: std::mem::take(&mut s.defaulted_rows),
            default_origin: fin.origin,
            guards: s.guards,
        })
    }

    /// One round of closing the sums (see where [`Solver::into_solution`]
    /// calls it): every whole of `totals` that has a least upper bound
    /// closes to it, all at once; then the parts still unknown close, all
    /// at once, each to its least upper bound, or else its least size, or
    /// else to 1. In the first round a part that is the whole of another
    /// sum waits for it.
    fn close_sums(
        &mut self,
        totals: &[DimVar],
        first_round: bool,
        fin: Why,
    ) -> Result<(), ShapeError> {
        self.sums_released = true;
        let wholes: BTreeSet<DimVar> = totals.iter().copied().collect();
        let mut batch = Vec::new();
        for v in wholes {
            if let Some((lub, lw)) = self.env.dim_bounds(v).and_then(|b| b.lub.clone()) {
                batch.push((v, lub, lw));
            }
        }
        for (v, value, lw) in batch {
            self.bind_dim(v, Dim::Known(value), lw, lw);
        }
        self.run()?;
        let mut batch = Vec::new();
        for v in self.pending_sum_parts(first_round)? {
            let Some(b) = self.env.dim_bounds(v) else {
                continue;
            };
            let value = match &b.lub {
                Some((k, w)) => (k.clone(), *w, *w),
                None => match self.least_size(v) {
                    Some((k, why)) => {
                        let source = least_source(&k, why, fin);
                        (k, why, source)
                    }
                    None => (KnownDim::one(), fin, fin),
                },
            };
            batch.push((v, value));
        }
        for (v, (value, why, source)) in batch {
            if self.env.dim_bounds(v).is_some() {
                self.bind_dim(v, Dim::Known(value), why, source);
            }
        }
        Ok(())
    }

    /// The error for what is left when no rule can close anything: a
    /// convolution or a row count whose sizes only a guess would decide,
    /// an element count with two unknowns, or (which the rules leave no
    /// way to happen) anything still open. `Ok` when nothing is open.
    fn stuck(&self, pending: Pending) -> Result<(), ShapeError> {
        if let (Some(c), false) = (pending.affine_waiting, pending.counts_held) {
            // A convolution still has two unknown sizes, and nothing
            // else can close: any default would be a guess between
            // convolutions that fit (which size closed first), so it is
            // an error in every order, as in OCANNL.
            return Err(self.affine_error(&c));
        }
        if let Some(c) = pending.count_waiting {
            // What is left waits on the size of a row count (a size
            // above it, or one its row waits on): closing either by a
            // default would be a guess, so it is an error in every
            // order.
            return Err(self.count_underdetermined(&c));
        }
        if let Some(c) = pending.waiting {
            return Err(self.underdetermined(c));
        }
        // Every rule has run dry, which the rules above leave no way to
        // happen: anything still open is an error, not a silently
        // partial solution.
        if let Some(r) = self.env.open_rows().next() {
            return Err(ShapeError::Unsolved {
                what: "row",
                id: r.0,
            });
        }
        if let Some(v) = self.env.open_dims().next() {
            return Err(ShapeError::Unsolved {
                what: "dim",
                id: v.0,
            });
        }
        Ok(())
    }

    /// Queues every open variable for every rule; false when none is open.
    fn queue_all_open(&mut self, q: &mut Queues) -> bool {
        debug_assert!(self.env.open_sets_match_entries());
        q.absorb(&mut self.env);
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
        q.dims.insert_all(&dims);
        q.top_dims.insert_all(&dims);
        q.rows.insert_all(&rows);
        q.top_rows.insert_all(&rows);
        !(dims.is_empty() && rows.is_empty())
    }

    /// Rules 1 and 2 for one queued variable; false when none was queued.
    fn close_queued(
        &mut self,
        q: &mut Queues,
        fin: Why,
        blocked_rows: &BlockedRows,
        blocked_dims: &BTreeSet<DimVar>,
    ) -> Result<bool, ShapeError> {
        q.absorb(&mut self.env);
        if !q.dims.is_empty() {
            // Rule 1 closes every queued dim to its least upper bound at
            // once: one at a time, the first closed could force another
            // under a shared upper bound to 1 before its own bound was
            // read, and which went first depended on the order of the
            // constraints (through the variables union by size keeps).
            let mut batch = Vec::new();
            while let Some(v) = q.dims.pop().map(DimVar) {
                if blocked_dims.contains(&v) {
                    // Closed with its sum, all at once (see `sums_released`).
                    continue;
                }
                if let Some((lub, lw)) = self.env.dim_bounds(v).and_then(|b| b.lub.clone()) {
                    batch.push((v, lub, lw));
                }
            }
            for (v, lub, lw) in batch {
                if self.env.dim_bounds(v).is_some() {
                    self.bind_dim(v, Dim::Known(lub), lw, lw);
                }
            }
            return Ok(true);
        }
        if let Some(r) = q.rows.pop().map(RowVar) {
            if blocked_rows.contains(&r) {
                return Ok(true);
            }
            if let Some(len) = self.closed_upper_len(r, blocked_rows)? {
                // A row closed empty by bounds that are empty only by a
                // default is itself empty only by that default.
                if len == 0 && self.empty_only_by_default(r)? {
                    self.defaulted_rows.insert(r.0);
                }
                let fresh: Vec<Dim> = (0..len).map(|_| Dim::Var(self.mint_dim())).collect();
                self.bind_row(r, &fresh, RowTail::Closed, fin);
            }
            return Ok(true);
        }
        Ok(false)
    }

    /// Whether `v` is a free result: an open row variable that nothing
    /// decides or waits on, and whose upper bounds all pass it through to
    /// free results (they add no axis: `[..z..] ≥ [..v..]`): a result
    /// nobody uses (`zz = exp(w)`), or used only by such results. As an
    /// upper bound it says nothing yet.
    ///
    /// Read through chains of uses, so remembered in `blocked` while no row
    /// changes: a chain of 10,000 uses is walked once, not once a link.
    fn is_free_result(&mut self, v: RowVar, blocked: &BlockedRows) -> Result<bool, ShapeError> {
        self.refresh_free(blocked);
        let mut memo = blocked.free.borrow_mut();
        if let Some(free) = memo.free.get_bool(v) {
            return Ok(free);
        }
        // Depth first, without recursion (chains of uses are as long as
        // the program). A variable is looked at once its uppers are known;
        // one met again on its own path (bounds in a cycle) is not free.
        // The first variable outside the stack: most walks end at it, and
        // then nothing is allocated.
        let mut first = Some((v, false));
        let mut stack = Vec::new();
        let mut on_path = BTreeSet::new();
        while let Some((w, uppers_known)) = first.take().or_else(|| stack.pop()) {
            if memo.free.get(w).is_some() {
                continue;
            }
            let may_be_free = self.env.is_open_row(w)
                && !blocked.contains(&w)
                && self
                    .env
                    .row_bounds(w)
                    .is_some_and(|b| b.watchers.is_empty());
            if !may_be_free {
                memo.free.insert_bool(w, false);
                continue;
            }
            if self.env.first_upper(w) == FirstUpper::None {
                memo.free.insert_bool(w, true);
                continue;
            }
            let mut free = true;
            let mut unknown = Vec::new();
            for (_, carry, ct) in self.resolved_uppers(w)?.iter() {
                match ct {
                    RowTail::Open(u) if carry == 0 => match memo.free.get_bool(u) {
                        Some(true) => {}
                        Some(false) => free = false,
                        None if uppers_known || on_path.contains(&u) => free = false,
                        None => unknown.push(u),
                    },
                    _ => free = false,
                }
                if !free {
                    break;
                }
            }
            if !free || unknown.is_empty() {
                on_path.remove(&w);
                memo.free.insert_bool(w, free);
                continue;
            }
            on_path.insert(w);
            stack.push((w, true));
            stack.extend(unknown.into_iter().map(|u| (u, false)));
        }
        Ok(memo.free.get_bool(v).unwrap_or(false))
    }

    /// Forgets what `blocked` remembers about free results once a row
    /// changed.
    fn refresh_free(&self, blocked: &BlockedRows) {
        let writes = self.env.row_writes();
        let mut memo = blocked.free.borrow_mut();
        if memo.row_writes != writes {
            memo.row_writes = writes;
            let rows = self.env.num_rows();
            let memo = &mut *memo;
            for m in [&mut memo.free, &mut memo.waits, &mut memo.uppers] {
                m.clear(rows);
            }
        }
    }

    /// What the upper bounds of `r` that are not free results
    /// ([`Self::is_free_result`]) say: how many there are (`facts`),
    /// whether all are closed rows, and the fewest axes any of them leaves
    /// for `r`.
    fn bounding_uppers(&mut self, r: RowVar, blocked: &BlockedRows) -> Result<Uppers, ShapeError> {
        let mut u = Uppers {
            facts: 0,
            all_closed: true,
            min_len: usize::MAX,
        };
        for (_, carry, ct) in self.resolved_uppers(r)?.iter() {
            if let RowTail::Open(v) = ct {
                if self.is_free_result(v, blocked)? {
                    continue;
                }
            }
            u.facts += 1;
            u.all_closed &= ct == RowTail::Closed;
            u.min_len = u.min_len.min(carry);
        }
        Ok(u)
    }

    /// The upper bounds stored on `r` that still bound it, each as
    /// `(operand, axes it leaves for r, where it ends)`: a bound whose
    /// operand no longer ends in `r`, or that ends in `r` itself, says
    /// nothing about `r` and is left out.
    fn resolved_uppers(&mut self, r: RowVar) -> Result<UpperList, ShapeError> {
        // Copied out of the bounds (most rows store one to three), so that
        // the look-ups below may compress chains; a copy of the handle
        // would write its count, in a block of its own, for every row.
        let mut found = UpperList::default();
        let Some(b) = self.env.row_bounds(r) else {
            return Ok(found);
        };
        for c in b.uppers() {
            found.push((c.subr, c.cur.dims.len(), c.cur.tail));
        }
        let mut resolved = UpperList::default();
        for (subr, len, tail) in found.iter() {
            // Stored upper bounds name `r` itself as their operand, which
            // is open.
            let (ls, st) = if subr == r {
                (0, RowTail::Open(r))
            } else {
                self.env.extent(0, RowTail::Open(subr))?
            };
            if st != RowTail::Open(r) {
                continue;
            }
            let (lc, ct) = self.env.extent(len, tail)?;
            if ct == RowTail::Open(r) {
                continue;
            }
            resolved.push((subr, lc.saturating_sub(ls), ct));
        }
        Ok(resolved)
    }

    /// The open row variable the first upper bound of `r` ends in, if it
    /// ends in one other than `r`: then `r` has an upper bound that is not
    /// closed, and the entry tells it without `r`'s bounds being read.
    fn first_upper_open_var(
        &mut self,
        r: RowVar,
        first: FirstUpper,
    ) -> Result<Option<RowVar>, ShapeError> {
        let FirstUpper::EndsIn(v) = first else {
            return Ok(None);
        };
        // The same walk uppers() makes for the first upper bound's result row.
        let (_, tail) = self.env.extent(0, RowTail::Open(v))?;
        Ok(match tail {
            RowTail::Open(w) if w != r => Some(w),
            _ => None,
        })
    }

    /// Rule 2: when every upper bound of `r` is closed, the number of axes
    /// the shortest one leaves for `r`. Upper bounds that are free results
    /// (nothing bounds or decides them: `zz = exp(w)` of a parameter `w`
    /// that a product also uses) wait for `r` rather than bound it, so
    /// that a use nobody reads never shrinks what the other uses allow.
    fn closed_upper_len(
        &mut self,
        r: RowVar,
        blocked: &BlockedRows,
    ) -> Result<Option<usize>, ShapeError> {
        // Most open rows have no upper bound, or a first one that is not
        // closed: the entry says so without the bounds being read.
        let first = self.env.first_upper(r);
        if first == FirstUpper::None {
            return Ok(None);
        }
        if let Some(w) = self.first_upper_open_var(r, first)? {
            if !self.is_free_result(w, blocked)? {
                return Ok(None);
            }
        }
        let u = self.bounding_uppers(r, blocked)?;
        Ok((u.facts > 0 && u.all_closed).then_some(u.min_len))
    }

    /// Whether every upper bound of `r` that leaves it no axis is a row
    /// that a default closed (see [`Solver::defaulted_rows`]); false when
    /// one of them was closed by a fact.
    fn empty_only_by_default(&mut self, r: RowVar) -> Result<bool, ShapeError> {
        let mut found = UpperList::default();
        let Some(b) = self.env.row_bounds(r) else {
            return Ok(false);
        };
        for c in b.uppers() {
            found.push((c.subr, c.cur.dims.len(), c.cur.tail));
        }
        let mut any = false;
        for (subr, len, tail) in found.iter() {
            let ls = if subr == r {
                0
            } else {
                self.env.extent(0, RowTail::Open(subr))?.0
            };
            let (lc, ct) = self.env.extent(len, tail)?;
            if ct != RowTail::Closed || lc > ls {
                continue;
            }
            match closing_var(&self.env, tail)? {
                Some(v) if self.defaulted_rows.contains(v.0) => any = true,
                _ => return Ok(false),
            }
        }
        Ok(any)
    }

    /// Whether `r` has no upper bound left (rule 3).
    fn is_top(&mut self, r: RowVar) -> Result<bool, ShapeError> {
        let first = self.env.first_upper(r);
        if first == FirstUpper::None {
            return Ok(true);
        }
        if self.first_upper_open_var(r, first)?.is_some() {
            return Ok(false);
        }
        Ok(self.resolved_uppers(r)?.iter().next().is_none())
    }

    /// Whether the unknown count `c` of a row count is bound by anything
    /// but that one count: a size that is only read from a row (`size n =
    /// ..r.. of x` that nothing else uses) holds nothing back, so that
    /// reading a row never changes how it closes. Two counts of one size
    /// bind each other's rows.
    fn count_is_bound(&self, c: DimVar) -> Result<bool, ShapeError> {
        let Some(b) = self.env.dim_bounds(c) else {
            return Ok(true);
        };
        if !b.cur.is_empty() || !b.subr.is_empty() || b.lub.is_some() {
            return Ok(true);
        }
        // Every watcher must be that one count (a copy of it moves with its
        // size when two sizes are made equal), whatever variable of `c`'s
        // class it names.
        let env = &mut self.env.read_only();
        let mut only = None;
        for w in b.watchers.iter() {
            let Constraint::RowCount { count, why, .. } = w else {
                return Ok(true);
            };
            if !matches!(resolve_dim(env, count, *why)?, ResolvedDim::Var(v) if v == c) {
                return Ok(true);
            }
            match only {
                None => only = Some(w),
                Some(first) if first == w => {}
                Some(_) => return Ok(true),
            }
        }
        Ok(only.is_none())
    }

    /// Element counts first: each row variable that is the only unknown of
    /// its count takes the axes the count gives it (see
    /// [`Pending::counted_rows`]); false when none was still open.
    fn close_counted_rows(
        &mut self,
        counted: &[(RowVar, Vec<u64>, Why)],
    ) -> Result<bool, ShapeError> {
        let mut any = false;
        for (r, axes, why) in counted {
            if !self.env.is_open_row(*r) {
                continue;
            }
            // Each size through an equality with the count's reason, so
            // that its provenance is the count, not a default.
            let fresh: Vec<Dim> = axes.iter().map(|_| Dim::Var(self.mint_dim())).collect();
            self.bind_row(*r, &fresh, RowTail::Closed, *why);
            for (d, &n) in fresh.iter().zip(axes) {
                self.requeue(Constraint::DimEq {
                    a: d.clone(),
                    b: Dim::sized(n),
                    why: *why,
                });
            }
            any = true;
        }
        if any {
            self.run()?;
        }
        Ok(any)
    }

    /// Rule 3.
    fn close_top_rows(
        &mut self,
        q: &mut Queues,
        fin: Why,
        pending: &Pending,
    ) -> Result<bool, ShapeError> {
        q.absorb(&mut self.env);
        let candidates = q.top_rows.take_all().into_iter().map(RowVar);
        let mut tops = Vec::new();
        for r in candidates {
            if self.env.is_open_row(r)
                && !pending.rows.contains(&r)
                && self.is_top(r)?
                && !self.waits_for_operands(r, &pending.rows)?
            {
                tops.push(r);
            }
        }
        for &r in &tops {
            // Closing one may have given another an upper bound since.
            // (Whether a free result waits is decided once per round, above:
            // deciding it again after each close would make the outcome
            // depend on the order of the variables.)
            if self.is_top(r)? && self.close_row_smallest(r, fin, &pending.wholes) {
                self.run()?;
            }
        }
        Ok(!tops.is_empty())
    }

    /// Whether `r`, a free result ([`Self::is_free_result`]), waits for one
    /// of its operand rows to close rather than close first and bound it.
    /// It waits for an operand it adds axes to (`[..y.., d] ≥ [..v..]`)
    /// while the operand has an upper bound other than free results (rule
    /// 2 closes the operand once those close), and for one it passes
    /// through while the operand has an upper bound that does not pass it
    /// through to a free result, or is itself a free result that waits.
    /// So a use nobody reads (`zz = exp(t)`, or a chain of them) closes
    /// after whatever else decides `t`, and, where nothing else does,
    /// closes first, as every result nobody reads does. Rule 5 closes
    /// whatever is left if nothing else can.
    fn waits_for_operands(&mut self, r: RowVar, blocked: &BlockedRows) -> Result<bool, ShapeError> {
        if !self.is_free_result(r, blocked)? {
            return Ok(false);
        }
        self.refresh_free(blocked);
        if let Some(waits) = blocked.free.borrow().waits.get_bool(r) {
            return Ok(waits);
        }
        // Down through the free results that `r` passes through, without
        // recursion (chains of uses are as long as the program); each
        // variable once.
        let mut seen = BTreeSet::from([r]);
        let mut stack = vec![r];
        let mut waits = false;
        'walk: while let Some(w) = stack.pop() {
            for (v, carry, _) in self.resolved_lowers(w)?.iter() {
                let (not_free, not_passing) = self.upper_kinds(v, blocked)?;
                if carry > 0 && not_free || carry == 0 && not_passing {
                    waits = true;
                    break 'walk;
                }
                if carry == 0 && self.is_free_result(v, blocked)? && seen.insert(v) {
                    stack.push(v);
                }
            }
        }
        // Every variable the walk saw waits if `r` does not: none of them
        // reaches an operand that holds it back.
        let mut memo = blocked.free.borrow_mut();
        if waits {
            memo.waits.insert_bool(r, true);
        } else {
            for w in seen {
                memo.waits.insert_bool(w, false);
            }
        }
        Ok(waits)
    }

    /// Whether `r`, a free result that waits, waits for an operand that it
    /// (or a free result it passes through) adds axes to: the whole walk
    /// of [`Self::waits_for_operands`], so that the answer does not depend
    /// on which operand the walk met first.
    fn waits_adding_axes(&mut self, r: RowVar, blocked: &BlockedRows) -> Result<bool, ShapeError> {
        let mut seen = BTreeSet::from([r]);
        let mut stack = vec![r];
        while let Some(w) = stack.pop() {
            for (v, carry, _) in self.resolved_lowers(w)?.iter() {
                if carry > 0 {
                    if self.upper_kinds(v, blocked)?.0 {
                        return Ok(true);
                    }
                } else if self.is_free_result(v, blocked)? && seen.insert(v) {
                    stack.push(v);
                }
            }
        }
        Ok(false)
    }

    /// The open operand rows of `r` other than `r` itself, each with the
    /// axes `r`'s row adds to it (`[..r.., d] ≥ [..v..]` adds one).
    ///
    /// Each as `(v, axes, tail)` where the tail is always `r`: in an
    /// [`UpperList`], so that the usual one or two need no allocation.
    fn resolved_lowers(&mut self, r: RowVar) -> Result<UpperList, ShapeError> {
        let mut stored = UpperList::default();
        let mut found = UpperList::default();
        let Some(b) = self.env.row_bounds(r) else {
            return Ok(found);
        };
        for c in b.lowers() {
            stored.push((c.subr, c.cur.dims.len(), c.cur.tail));
        }
        for (subr, len, tail) in stored.iter() {
            let (ls, st) = self.env.extent(0, RowTail::Open(subr))?;
            let RowTail::Open(v) = st else {
                continue;
            };
            let (lc, ct) = self.env.extent(len, tail)?;
            if v != r && ct == RowTail::Open(r) {
                found.push((v, lc.saturating_sub(ls), ct));
            }
        }
        Ok(found)
    }

    /// Whether `v` has an upper bound that ends in something other than a
    /// free result, and whether it has one that does not pass it through
    /// to a free result (one that adds no axis to it).
    fn upper_kinds(
        &mut self,
        v: RowVar,
        blocked: &BlockedRows,
    ) -> Result<(bool, bool), ShapeError> {
        self.refresh_free(blocked);
        if let Some(kinds) = blocked.free.borrow().uppers.get(v) {
            return Ok((kinds & 1 != 0, kinds & 2 != 0));
        }
        let (mut not_free, mut not_passing) = (false, false);
        for (_, carry, ct) in self.resolved_uppers(v)?.iter() {
            let free = match ct {
                RowTail::Open(w) => self.is_free_result(w, blocked)?,
                _ => false,
            };
            not_free |= !free;
            not_passing |= !(free && carry == 0);
        }
        blocked
            .free
            .borrow_mut()
            .uppers
            .insert(v, u8::from(not_free) | (u8::from(not_passing) << 1));
        Ok((not_free, not_passing))
    }

    /// Rule 5's first step: rule 3 for the free results that wait for an
    /// operand that they, or a free result they pass through, add axes to
    /// ([`Self::waits_adding_axes`]), when nothing else is left to close
    /// them: what they waited for waits on them in turn (`y2 =
    /// id(x1) + x1` under a fixed index: `x1`'s row waits for `id(x1)`,
    /// which only the sum bounds). All of them at once, so that no order
    /// among them decides; false when there is none. Free results that
    /// only pass their operands through wait on (rule 5 closes them with
    /// everything else), so that a use nobody reads never closes first.
    fn release_waiting_results(&mut self, fin: Why, pending: &Pending) -> Result<bool, ShapeError> {
        let open: Vec<RowVar> = self
            .env
            .open_rows()
            .filter(|r| !pending.rows.contains(r))
            .collect();
        let mut released = Vec::new();
        for r in open {
            if self.is_top(r)?
                && self.waits_for_operands(r, &pending.rows)?
                && self.waits_adding_axes(r, &pending.rows)?
            {
                released.push(r);
            }
        }
        for &r in &released {
            if self.is_top(r)? && self.close_row_smallest(r, fin, &pending.wholes) {
                self.run()?;
            }
        }
        Ok(!released.is_empty())
    }

    /// Closes `r` to the smallest row it can be: empty, or as long as the
    /// slices of the row it ends need (see [`Pending::wholes`]). False when
    /// it was solved already.
    fn close_row_smallest(
        &mut self,
        r: RowVar,
        fin: Why,
        wholes: &BTreeMap<RowVar, usize>,
    ) -> bool {
        if self.env.row_bounds(r).is_none() {
            return false;
        }
        let len = wholes.get(&r).copied().unwrap_or(0);
        let dims: Vec<Dim> = (0..len).map(|_| Dim::Var(self.mint_dim())).collect();
        self.defaulted_rows.insert(r.0);
        self.bind_row(r, &dims, RowTail::Closed, fin);
        true
    }

    fn close_dim_one(&mut self, v: DimVar, fin: Why) -> Result<(), ShapeError> {
        if self.env.dim_bounds(v).is_some() {
            self.close_dim_least(v, fin);
            self.run()?;
        }
        Ok(())
    }

    /// Closes an open dim to the least size it may have: 1 by the default,
    /// or what a fixed index into it (or into a dim below it) needs, for
    /// that fixed index's reason.
    fn close_dim_least(&mut self, v: DimVar, fin: Why) {
        let (value, why) = self.least_size(v).unwrap_or_else(|| (KnownDim::one(), fin));
        let source = least_source(&value, why, fin);
        self.bind_dim(v, Dim::Known(value), why, source);
    }

    /// Rule 4.
    fn close_top_dims(
        &mut self,
        q: &mut Queues,
        fin: Why,
        blocked: &BTreeSet<DimVar>,
    ) -> Result<bool, ShapeError> {
        q.absorb(&mut self.env);
        let candidates = q.top_dims.take_all().into_iter().map(DimVar);
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
    fn close_leftover(&mut self, fin: Why, pending: &Pending) -> Result<bool, ShapeError> {
        let rows: Vec<RowVar> = self
            .env
            .open_rows()
            .filter(|r| !pending.rows.contains(r))
            .collect();
        if !rows.is_empty() {
            for r in rows {
                self.close_row_smallest(r, fin, &pending.wholes);
            }
            self.run()?;
            return Ok(true);
        }
        let dims: Vec<DimVar> = self
            .env
            .open_dims()
            .filter(|v| !pending.dims.contains(v))
            .collect();
        if !dims.is_empty() {
            // Every least size first, then the bindings: binding one first
            // would hide its fixed index from the dims above it (which
            // `least_size` reaches through open dims only).
            // Those a fixed index raises above 1 close first, alone: the
            // dims below them then take them as least upper bounds (rule
            // 1), as they do when the raised dims close by rule 4 in
            // another order of the constraints.
            let raised: Vec<(DimVar, (KnownDim, Why))> = dims
                .iter()
                .filter_map(|&v| self.least_size(v).map(|l| (v, l)))
                .filter(|(_, (k, _))| !k.is_one())
                .collect();
            let least: Vec<(DimVar, (KnownDim, Why))> = if raised.is_empty() {
                dims.iter().map(|&v| (v, (KnownDim::one(), fin))).collect()
            } else {
                raised
            };
            for (v, (value, why)) in least {
                if self.env.dim_bounds(v).is_some() {
                    let source = least_source(&value, why, fin);
                    self.bind_dim(v, Dim::Known(value), why, source);
                }
            }
            self.run()?;
            return Ok(true);
        }
        Ok(false)
    }

    /// The unknown parts of sums whose wholes are unknown too, resolved
    /// and without repeats, in id order.
    /// With `leaves_only`, parts that are the unknown whole of another sum,
    /// or above one (a size that broadcasts from it, which only 1 below it
    /// would let be 1), are left out, unless that leaves none: they follow
    /// from that sum once its own parts are known.
    fn pending_sum_parts(&self, leaves_only: bool) -> Result<Vec<DimVar>, ShapeError> {
        let env = &mut self.env.read_only();
        let mut parts = BTreeSet::new();
        let mut wholes = BTreeSet::new();
        for v in &self.watched_dims {
            let Some(b) = self.env.dim_bounds(*v) else {
                continue;
            };
            for c in b.watchers.iter() {
                let Constraint::DimSum {
                    total,
                    parts: ps,
                    why,
                } = c
                else {
                    continue;
                };
                let ResolvedDim::Var(whole) = resolve_dim(env, total, *why)? else {
                    continue;
                };
                wholes.insert(whole);
                for d in ps {
                    if let ResolvedDim::Var(p) = resolve_dim(env, d, *why)? {
                        parts.insert(p);
                    }
                }
            }
        }
        if leaves_only {
            let above = self.at_or_above(&wholes);
            let leaves: Vec<DimVar> = parts.difference(&above).copied().collect();
            if !leaves.is_empty() {
                return Ok(leaves);
            }
        }
        Ok(parts.into_iter().collect())
    }

    /// `targets` and every open dim above one of them (through the dims
    /// recorded above each), in one search: linear in what it reaches.
    fn at_or_above(&self, targets: &BTreeSet<DimVar>) -> BTreeSet<DimVar> {
        let mut seen = targets.clone();
        let mut todo: Vec<DimVar> = targets.iter().copied().collect();
        while let Some(u) = todo.pop() {
            let Some(b) = self.env.dim_bounds(u) else {
                continue;
            };
            for &(c, _) in &b.cur {
                if seen.insert(c) {
                    todo.push(c);
                }
            }
        }
        seen
    }

    /// The error for a row count whose size and row nothing decides.
    fn count_underdetermined(&self, c: &Constraint) -> ShapeError {
        let env = &mut self.env.read_only();
        let Constraint::RowCount { row, why, .. } = c else {
            return ShapeError::Unsolved { what: "dim", id: 0 };
        };
        let fact = match resolve_row(env, row) {
            Ok(rr) => self.row_fact(&rr),
            Err(e) => return e,
        };
        ShapeError::CountUnderdetermined {
            context: self.origin_arc(why.origin),
            row: Box::new(fact),
        }
    }

    fn underdetermined(&self, c: Constraint) -> ShapeError {
        let env = &mut self.env.read_only();
        let known = |env: &mut _, d: &Dim, why| match resolve_dim(env, d, why) {
            Ok(ResolvedDim::Known { value, .. }) => Some(value),
            _ => None,
        };
        match c {
            Constraint::TotalElems { row, total, why } => match resolve_row(env, &row) {
                Ok(rr) => {
                    let unknowns = rr
                        .dims
                        .iter()
                        .filter(|d| matches!(resolve_dim(env, d, why), Ok(ResolvedDim::Var(_))))
                        .count();
                    ShapeError::Underdetermined {
                        context: self.origin_arc(why.origin),
                        row: Box::new(self.row_fact(&rr)),
                        total: total.get(),
                        unknowns,
                    }
                }
                Err(e) => e,
            },
            Constraint::DimSum { total, parts, why } => ShapeError::SumMismatch {
                context: self.origin_arc(why.origin),
                total: known(env, &total, why),
                parts: parts.iter().map(|d| known(env, d, why)).collect(),
                reason: SumReason::Underdetermined,
            },
            // Only element counts and sums wait on several dims; anything
            // else is still an error, never a panic.
            _ => ShapeError::Unsolved { what: "dim", id: 0 },
        }
    }
}

/// Where a size closed by `least_size` comes from: a number is a policy
/// (the fewest a fixed index allows), so its source is the default, and a
/// parameter closed this way is not given; a run-time size passed on is
/// given where it was declared.
fn least_source(value: &KnownDim, why: Why, fin: Why) -> Why {
    if value.symbolic_size().is_some() {
        why
    } else {
        fin
    }
}

/// Rows held back from rules 2-5 (see [`Pending::rows`]), with what
/// finalization found out about free results while they were held back.
#[derive(Debug, Default)]
struct BlockedRows {
    rows: BTreeSet<RowVar>,
    free: std::cell::RefCell<FreeResults>,
}

impl BlockedRows {
    fn contains(&self, r: &RowVar) -> bool {
        self.rows.contains(r)
    }

    /// Holds nothing back any more (rule 6).
    fn clear(&mut self) {
        self.rows.clear();
        *self.free.get_mut() = FreeResults::default();
    }
}

/// Which row variables are free results ([`Solver::is_free_result`]),
/// valid while the environment's rows are as they were after `row_writes`
/// writes.
///
/// Dense in the row variables, four bits each: they are only looked up,
/// never walked in order (at a million operations a search tree's lookups
/// were a cache miss a level), and hash maps of the same entries took 9
/// bytes a bucket, 3.5 MB for the three at 100,000 operations and 57 MB
/// at a million (where they doubled past a power of two).
#[derive(Debug, Default)]
struct FreeResults {
    row_writes: u64,
    free: RowMemo,
    /// See [`Solver::waits_for_operands`].
    waits: RowMemo,
    /// See [`Solver::upper_kinds`] (`not_free | not_passing << 1`).
    uppers: RowMemo,
}

/// Values below 15 by row variable, four bits each (0 for none).
#[derive(Debug, Default)]
struct RowMemo {
    nibbles: Vec<u8>,
    /// Which blocks of [`MEMO_BLOCK`] bytes of `nibbles` were written
    /// since the last [`RowMemo::clear`]: what it zeroes, so that a clear
    /// costs what was written, as a hash map's did.
    dirty: Vec<u64>,
}

const MEMO_BLOCK: usize = 64;

impl RowMemo {
    fn get(&self, v: RowVar) -> Option<u8> {
        let b = *self.nibbles.get(v.0 as usize / 2)?;
        let n = if v.0.is_multiple_of(2) {
            b & 15
        } else {
            b >> 4
        };
        n.checked_sub(1)
    }

    fn get_bool(&self, v: RowVar) -> Option<bool> {
        self.get(v).map(|n| n != 0)
    }

    fn insert(&mut self, v: RowVar, value: u8) {
        debug_assert!(value < 15);
        let i = v.0 as usize / 2;
        if i >= self.nibbles.len() {
            self.nibbles.resize(i + 1, 0);
        }
        let block = i / MEMO_BLOCK;
        if block / 64 >= self.dirty.len() {
            self.dirty.resize(block / 64 + 1, 0);
        }
        self.dirty[block / 64] |= 1 << (block % 64);
        let n = value + 1;
        let b = &mut self.nibbles[i];
        *b = if v.0.is_multiple_of(2) {
            (*b & 0xF0) | n
        } else {
            (*b & 0x0F) | (n << 4)
        };
    }

    fn insert_bool(&mut self, v: RowVar, value: bool) {
        self.insert(v, value.into());
    }

    /// Forgets every value, keeping room for `rows` variables.
    fn clear(&mut self, rows: usize) {
        for (w, bits) in self.dirty.iter_mut().enumerate() {
            while *bits != 0 {
                let block = w * 64 + bits.trailing_zeros() as usize;
                *bits &= *bits - 1;
                let start = block * MEMO_BLOCK;
                let end = (start + MEMO_BLOCK).min(self.nibbles.len());
                self.nibbles[start..end].fill(0);
            }
        }
        let len = rows.div_ceil(2);
        if self.nibbles.len() < len {
            self.nibbles.resize(len, 0);
        }
    }
}

/// Bounds copied out of a row's bounds: `(operand, result dims,
/// result tail)`, the first few without an allocation.
#[derive(Default)]
struct UpperList {
    head: [Option<(RowVar, usize, RowTail)>; 4],
    rest: Vec<(RowVar, usize, RowTail)>,
}

impl UpperList {
    fn push(&mut self, u: (RowVar, usize, RowTail)) {
        match self.head.iter_mut().find(|slot| slot.is_none()) {
            Some(slot) => *slot = Some(u),
            None => self.rest.push(u),
        }
    }

    fn iter(&self) -> impl Iterator<Item = (RowVar, usize, RowTail)> + '_ {
        self.head
            .iter()
            .map_while(|u| *u)
            .chain(self.rest.iter().copied())
    }
}

/// A summary of a row variable's upper bounds.
struct Uppers {
    /// Those that bound `r`.
    facts: usize,
    all_closed: bool,
    min_len: usize,
}

/// A fully solved environment: every variable has a value.
#[derive(Clone, Debug)]
pub struct Solution {
    env: Env,
    origins: crate::origin_table::OriginTable,
    /// Where chains of variables bound to each other end, filled as they
    /// are read: reading every shape of a long chain costs each step once.
    dim_links: LinkCache,
    row_links: LinkCache,
    /// Row variables closed by a default (see `Solver::defaulted_rows`).
    defaulted_rows: VarQueue,
    /// The origin of finalization's defaults.
    default_origin: crate::OriginId,
    /// What run-time sizes must satisfy (see [`Solution::guards`]).
    guards: Vector<(RawGuard, Why)>,
}

/// What finalization's defaults decided in a row (see
/// [`Solution::defaults_in`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RowDefaults {
    /// Nothing: the row's length and sizes follow from facts.
    None,
    /// The row is empty only by a default.
    EmptyRow,
    /// The size of this axis (from the left) came from a default.
    Axis(usize),
}

/// The row variable whose value closed the row ending in `tail`: the last
/// of the chain of solved row variables from it. `None` for a row that was
/// closed as written.
pub(crate) fn closing_var(env: &Env, tail: RowTail) -> Result<Option<RowVar>, ShapeError> {
    let RowTail::Open(mut v) = tail else {
        return Ok(None);
    };
    loop {
        match env.row_entry(v)?.solved() {
            Some((_, RowTail::Open(w))) => v = w,
            Some((_, RowTail::Closed)) => return Ok(Some(v)),
            None => return Ok(None),
        }
    }
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
    pub source_axis: Option<crate::AxisFromEnd>,
    /// The constraints that carried the size to this dimension, nearest
    /// first.
    pub via: Vec<Arc<Origin>>,
}

impl Solution {
    fn origin(&self, why: Why) -> Arc<Origin> {
        Arc::new(
            self.origins
                .get(why.origin.0)
                .unwrap_or(Origin::Finalization),
        )
    }

    fn lookup(&self) -> Cached<'_> {
        Cached {
            env: &self.env,
            dims: &self.dim_links,
            rows: &self.row_links,
        }
    }

    /// The run-time guards inference left: checks on symbolic sizes that
    /// binding them must pass (none without symbolic sizes). Two guards
    /// that say the same are given once, and of the lower bounds on one
    /// expression (`b-1 >= 2`, `b-5 >= 2`, each `b >= n`) only the
    /// strongest is kept, in the place of the first: it implies the others.
    pub fn guards(&self) -> Vec<SizeGuard> {
        let fact = |value: &KnownDim, why: Why| DimFact {
            value: value.clone(),
            origin: self.origin(why),
            axis_from_end: why.axis_from_end(),
        };
        let mut out: Vec<SizeGuard> = Vec::with_capacity(self.guards.len());
        let mut seen = std::collections::HashSet::new();
        // Lower bounds by the expression they bound: (index in `out`, bound).
        let mut strongest: std::collections::HashMap<String, (usize, u64)> =
            std::collections::HashMap::new();
        for (raw, why) in &self.guards {
            if let RawGuard::AtLeast(a, wa, min) = raw {
                let Some((dim, min)) = at_least_on_symbols(a, *min) else {
                    continue;
                };
                let key = dim.extent().to_string();
                let guard = SizeGuard {
                    context: self.origin(*why),
                    axis: why.axis_from_end(),
                    requirement: Requirement::AtLeast {
                        dim: fact(&dim, *wa),
                        min,
                    },
                };
                match strongest.get_mut(&key) {
                    Some((_, m)) if *m >= min => {}
                    Some((at, m)) => {
                        *m = min;
                        out[*at] = guard;
                    }
                    None => {
                        strongest.insert(key, (out.len(), min));
                        out.push(guard);
                    }
                }
                continue;
            }
            let requirement = match raw {
                RawGuard::Equal(a, wa, b, wb) => Requirement::Equal {
                    left: fact(a, *wa),
                    right: fact(b, *wb),
                },
                RawGuard::Broadcasts(a, wa, b, wb) => Requirement::Broadcasts {
                    to: fact(a, *wa),
                    from: fact(b, *wb),
                },
                RawGuard::AtLeast(..) => continue,
            };
            let guard = SizeGuard {
                context: self.origin(*why),
                axis: why.axis_from_end(),
                requirement,
            };
            if seen.insert((guard.requires(), why.origin.0, guard.axis)) {
                out.push(guard);
            }
        }
        out
    }

    /// The solved size of a dim.
    pub fn dim(&self, d: &Dim) -> Result<KnownDim, ShapeError> {
        match resolve_dim(&mut self.lookup(), d, Why::of(crate::OriginId(0)))? {
            ResolvedDim::Known { value, .. } => Ok(value),
            ResolvedDim::Var(v) => Err(ShapeError::Unsolved {
                what: "dim",
                id: v.0,
            }),
        }
    }

    /// The solved sizes of a row.
    pub fn row(&self, r: &Row) -> Result<Vec<KnownDim>, ShapeError> {
        let rr = resolve_row(&mut self.lookup(), r)?;
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
        let mut own: Option<KnownDim> = None;
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
                    entry @ (DimEntry::Sized(_) | DimEntry::Known(_)) => {
                        let Some(k) = entry.as_known() else {
                            return Err(ShapeError::Unsolved {
                                what: "dim",
                                id: v.0,
                            });
                        };
                        via.push(self.origin(k.why));
                        match k.from {
                            // The size came through another solved
                            // variable: the steps go on from it. (At most
                            // one step per variable: a size only comes
                            // from a variable solved before.)
                            Some(from) if from != v && via.len() <= self.env.num_dims() + 1 => {
                                own.get_or_insert(k.value);
                                cur = Dim::Var(from);
                            }
                            _ => {
                                return Ok(Provenance {
                                    // The dim's own size (its label
                                    // included).
                                    value: own.unwrap_or(k.value),
                                    source: self.origin(k.source),
                                    source_axis: k.source.axis_from_end(),
                                    via,
                                });
                            }
                        }
                    }
                    DimEntry::Alias { to, why, .. } => {
                        via.push(self.origin(*why));
                        cur = Dim::Var(*to);
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
    /// Whether a solved dim's size came from finalization's default (rule
    /// 4 or 5, or a sum's part closed to 1), through any chain of
    /// relations; the same answer as [`Solution::provenance`]'s source,
    /// without building the chain.
    pub fn sized_by_default(&self, d: &Dim) -> Result<bool, ShapeError> {
        self.dim_by_default(&mut self.lookup(), d)
    }

    fn dim_by_default(&self, l: &mut Cached<'_>, d: &Dim) -> Result<bool, ShapeError> {
        match resolve_dim(l, d, Why::of(crate::OriginId(0)))? {
            ResolvedDim::Known { source, .. } => Ok(source.origin == self.default_origin),
            ResolvedDim::Var(v) => Err(ShapeError::Unsolved {
                what: "dim",
                id: v.0,
            }),
        }
    }

    /// Whether the row ending in `tail` is as long as it is only by
    /// finalization's defaults: its row variable (through the chain of
    /// variables it was solved to) was closed by rule 3 or 5, or by rule 2
    /// against rows that were. False for a row closed by a fact (a
    /// declaration, a required shape, a spec) and for a row written closed.
    pub fn closed_by_default(&self, tail: RowTail) -> Result<bool, ShapeError> {
        Ok(closing_var(&self.env, tail)?.is_some_and(|v| self.defaulted_rows.contains(v.0)))
    }

    /// What finalization's defaults decided in a row: nothing, its being
    /// empty, or the size of one of its axes (the first found).
    pub fn defaults_in(&self, row: &Row) -> Result<RowDefaults, ShapeError> {
        let mut l = self.lookup();
        let rr = resolve_row(&mut l, row)?;
        if let RowTail::Open(v) = rr.tail {
            return Err(ShapeError::Unsolved {
                what: "row",
                id: v.0,
            });
        }
        if rr.dims.is_empty() {
            return Ok(if self.closed_by_default(row.tail)? {
                RowDefaults::EmptyRow
            } else {
                RowDefaults::None
            });
        }
        for (axis, d) in rr.dims.iter().enumerate() {
            if self.dim_by_default(&mut l, d)? {
                return Ok(RowDefaults::Axis(axis));
            }
        }
        Ok(RowDefaults::None)
    }

    /// The dims of a row with its row variables substituted, variables
    /// included (each resolves with [`Solution::dim`]).
    pub fn row_dims(&self, r: &Row) -> Result<Vec<Dim>, ShapeError> {
        let rr = resolve_row(&mut self.lookup(), r)?;
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
        match self.env.row_entry(v)?.solved() {
            Some((dims, tail)) => Ok(Row {
                dims: dims.to_vec(),
                tail,
                constraint: shape_core::RowConstraint::Unconstrained,
            }),
            None => Err(ShapeError::Unsolved {
                what: "row",
                id: v.0,
            }),
        }
    }
}

/// `size >= min` as a bound on the symbols' part of `size`: `b-3 >= 2` is
/// `b >= 5` (so that bounds on one expression compare); `None` when it
/// always holds (sizes are at least 1).
fn at_least_on_symbols(size: &KnownDim, min: u64) -> Option<(KnownDim, u64)> {
    let Size::Symbolic(s) = size.extent() else {
        return Some((size.clone(), min));
    };
    let Some((rest, c)) = crate::symbolic::split_constant(s.expr()) else {
        return Some((size.clone(), min));
    };
    let bound = i128::from(min) - i128::from(c);
    match u64::try_from(bound) {
        Ok(b)
            if b <= 1
                && rest
                    .as_ref()
                    .iter()
                    .all(|n| matches!(n, shape_core::size::Sym::Var(_))) =>
        {
            None
        }
        Ok(b) => Some((
            KnownDim::of_size(Size::Symbolic(SymSize::from_expr(rest))),
            b,
        )),
        Err(_) => Some((size.clone(), min)),
    }
}
