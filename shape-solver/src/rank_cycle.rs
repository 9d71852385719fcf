//! The rank-cycle guard: broadcasting constraints among row variables that
//! would make a row grow forever.
//!
//! A row inequality between two rows that end in row variables, `cur =
//! [..c.., lc axes] >= subr = [..s.., ls axes]`, says that
//! `rank(c) + lc >= rank(s) + ls`. The solver stores it on both variables
//! when `lc >= ls` (the result side is long enough); when `lc < ls` it
//! expands `c` with a template of `ls - lc` fresh axes and a fresh row
//! variable. Every stored inequality is therefore a fact
//! `rank(x) >= rank(y) - cost` with a cost of at least 0 axes when it was
//! stored.
//!
//! If the stored facts already say `rank(s) >= rank(c) - cost` with
//! `cost < ls - lc`, then together with the new constraint they say
//! `rank(c) >= rank(c) + (ls - lc - cost)`, which no finite row satisfies.
//! Expanding would only rebuild the same cycle on the fresh variables, with
//! more constraints each round (OCANNL had this non-termination too, and
//! fixed it with a graph of rank facts). So before each expansion whose
//! operand ends in an open row variable, the solver looks for such a path
//! and reports [`crate::ShapeError::InfiniteAxes`] with the constraints on
//! it. The search is a shortest-path search (Dijkstra) over the stored
//! inequalities, from `c` backwards, cut off at paths that cost `ls - lc`
//! axes or more.
//!
//! A pending batch slice is a fact about lengths too: `whole = [..w.., W]`
//! without its first axis is `rest = [..r.., R]`, so `rank(w) + |W| =
//! rank(r) + |R| + 1`, two facts of the same kind (one each way). The
//! solver matches the spelled-out axes at once, leaving `|W| = 1` and
//! `|R| = 0` and both facts at cost 0; the search follows them, so that a
//! slice whose result must be longer than its operand is found here rather
//! than by expanding rows forever.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use shape_core::{RowTail, RowVar};

use crate::constraint::Constraint;
use crate::env::{Env, FirstUpper};
use crate::error::ShapeError;
use crate::origin::Why;

/// How many variables one search may take from its queue. Far more than
/// any chain of stored inequalities within a few axes of each other in a
/// real network; past it the search gives up (the template depth bound in
/// the solver still ends any growth that it misses).
const SEARCH_LIMIT: usize = 1 << 16;

/// For each variable the search reached: the lowest cost found from it to
/// the target, and its first step on that path (the next variable, and the
/// reason of the inequality between them).
type Reached = FxHashMap<RowVar, (i64, Option<(RowVar, Why)>)>;

/// A path of stored inequalities from the operand's row variable back to
/// the result's, which closes a cycle that adds axes.
#[derive(Debug)]
pub(crate) struct RankCycle {
    /// How many axes the cycle adds on every round (at least 1).
    pub surplus: i64,
    /// How many axes the stored facts allow the operand's row variable to
    /// fall short of the result's (the path's cost).
    pub cost: i64,
    /// The reasons of the stored inequalities on the path, in order.
    pub via: Vec<Why>,
}

/// Looks for stored facts `rank(from) >= rank(to) - cost` with
/// `cost < gain`, where the new constraint says `rank(to) >= rank(from) +
/// gain` (`gain >= 1`).
///
/// The search runs backwards, from `to` over the inequalities that bound
/// each variable from above: `to` is the row about to be expanded, usually a
/// result or a parameter that only the operation being added uses, with no
/// upper bound at all, which ends the search before it allocates. (Forwards
/// from `from`, it would walk every earlier layer of a network through its
/// chain of broadcasts, which made building a network quadratic.)
///
/// `slices` are the row variables that pending slices may wait on (a
/// superset will do): only their deferred constraints are read.
pub(crate) fn find_rank_cycle(
    env: &mut Env,
    slices: &std::collections::BTreeSet<RowVar>,
    from: RowVar,
    to: RowVar,
    gain: i64,
) -> Result<Option<RankCycle>, ShapeError> {
    if from == to || (!has_uppers(env, to) && !slices.contains(&to)) {
        return Ok(None);
    }
    // Lowest cost found so far from each variable to `to`, and the step
    // from it towards `to`.
    let mut best = Reached::default();
    let mut queue = BinaryHeap::new();
    best.insert(to, (0, None));
    queue.push(Reverse((0i64, to.0)));
    let mut taken = 0;
    while let Some(Reverse((cost, y))) = queue.pop() {
        let y = RowVar(y);
        if best.get(&y).is_some_and(|&(c, _)| c < cost) {
            continue; // A stale queue entry: a cheaper path was found since.
        }
        if y == from {
            return Ok(Some(RankCycle {
                surplus: gain - cost,
                cost,
                via: path_from(&best, from),
            }));
        }
        taken += 1;
        if taken > SEARCH_LIMIT {
            break;
        }
        // A handle of its own: the look-ups below may compress chains.
        let Some(bounds) = env.row_bounds_shared(y) else {
            continue;
        };
        let mut relax = |x: RowVar, step: i64, why: Why| {
            let next = cost + step;
            // Too expensive to close a growing cycle, or not a fact this
            // search can use (a negative cost breaks Dijkstra's order).
            if step < 0 || next >= gain || x == y {
                return;
            }
            if best.get(&x).is_none_or(|&(c, _)| next < c) {
                best.insert(x, (next, Some((y, why))));
                queue.push(Reverse((next, x.0)));
            }
        };
        for s in bounds.uppers() {
            // `[cur.dims ++ ..x..] >= [..y..]`, both read through what was
            // solved since the inequality was stored.
            let (ls, subr_tail) = env.extent(0, RowTail::Open(s.subr))?;
            let (lc, RowTail::Open(x)) = env.extent(s.cur.dims.len(), s.cur.tail)? else {
                continue;
            };
            if subr_tail == RowTail::Open(y) {
                relax(x, lc as i64 - ls as i64, s.why);
            }
        }
        if !slices.contains(&y) {
            continue;
        }
        for c in bounds.watchers.iter() {
            let Constraint::DropFirst {
                whole, rest, why, ..
            } = c
            else {
                continue;
            };
            let (n, whole_tail) = env.extent(whole.dims.len(), whole.tail)?;
            let (m, rest_tail) = env.extent(rest.dims.len(), rest.tail)?;
            let (RowTail::Open(w), RowTail::Open(r)) = (whole_tail, rest_tail) else {
                continue;
            };
            // rank(w) + n = rank(r) + m + 1, read in the direction away
            // from `y`.
            let (n, m) = (n as i64, m as i64);
            if r == y {
                relax(w, n - m - 1, *why);
            }
            if w == y {
                relax(r, m + 1 - n, *why);
            }
        }
    }
    Ok(None)
}

/// Whether an open row variable has an upper bound stored (read from its
/// entry, without following the pointer to its bounds).
fn has_uppers(env: &Env, v: RowVar) -> bool {
    env.first_upper(v) != FirstUpper::None
}

/// The reasons along the cheapest path found from `from` to the target,
/// first step first.
fn path_from(best: &Reached, from: RowVar) -> Vec<Why> {
    let mut via = Vec::new();
    let mut at = from;
    // A variable keeps the step that gave it its lowest cost, so the steps
    // lead to the target; the bound on the length only guards against a
    // loop through facts that went stale while the search ran.
    while let Some(&(_, Some((next, why)))) = best.get(&at) {
        via.push(why);
        at = next;
        if via.len() > best.len() {
            break;
        }
    }
    via
}
