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
//! `cost < ls - lc`, then together with the new constraint
//! `rank(c) >= rank(c) + (ls - lc - cost)`: no finite row satisfies both.
//! Expanding would only rebuild the same cycle on the fresh variables, with
//! more constraints each round (OCANNL had this non-termination too, and
//! fixed it with a graph of rank facts). So before each expansion whose
//! operand ends in an open row variable, the solver looks for such a path
//! and reports [`crate::ShapeError::InfiniteAxes`] with the constraints on
//! it. The search is a shortest-path search (Dijkstra) over the stored
//! inequalities, cut off at paths that cost `ls - lc` axes or more, so it
//! visits only variables within a few axes of the operand.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use shape_core::{RowTail, RowVar};

use crate::env::Env;
use crate::error::ShapeError;
use crate::origin::Why;

/// How many variables one search may take from its queue. Far more than
/// any chain of stored inequalities within a few axes of each other in a
/// real network; past it the search gives up (the template depth bound in
/// the solver still ends any growth that it misses).
const SEARCH_LIMIT: usize = 1 << 16;

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
pub(crate) fn find_rank_cycle(
    env: &Env,
    from: RowVar,
    to: RowVar,
    gain: i64,
) -> Result<Option<RankCycle>, ShapeError> {
    // The common case, without allocating: the operand bounds nothing from
    // below (a parameter's row, an input's row).
    let has_lowers = env
        .row_bounds(from)
        .is_some_and(|b| b.lowers().next().is_some());
    if !has_lowers || from == to {
        return Ok(None);
    }
    // Lowest cost found so far to each variable, and the step that got there.
    let mut best: HashMap<RowVar, (i64, Option<(RowVar, Why)>)> = HashMap::new();
    let mut queue = BinaryHeap::new();
    best.insert(from, (0, None));
    queue.push(Reverse((0i64, from.0)));
    let mut taken = 0;
    while let Some(Reverse((cost, x))) = queue.pop() {
        let x = RowVar(x);
        if best.get(&x).is_some_and(|&(c, _)| c < cost) {
            continue; // A stale queue entry: a cheaper path was found since.
        }
        if x == to {
            return Ok(Some(RankCycle {
                surplus: gain - cost,
                cost,
                via: path_to(&best, to),
            }));
        }
        taken += 1;
        if taken > SEARCH_LIMIT {
            break;
        }
        let Some(bounds) = env.row_bounds(x) else {
            continue;
        };
        for s in bounds.lowers() {
            // `[cur.dims ++ x] >= [..subr..]`, both read through what was
            // solved since the inequality was stored.
            let (lc, cur_tail) = env.extent(s.cur.dims.len(), s.cur.tail)?;
            let (ls, RowTail::Open(y)) = env.extent(0, RowTail::Open(s.subr))? else {
                continue;
            };
            if cur_tail != RowTail::Open(x) || y == x {
                continue;
            }
            let next = cost + lc as i64 - ls as i64;
            if next >= gain {
                continue; // Too expensive to close a growing cycle.
            }
            if best.get(&y).is_none_or(|&(c, _)| next < c) {
                best.insert(y, (next, Some((x, s.why))));
                queue.push(Reverse((next, y.0)));
            }
        }
    }
    Ok(None)
}

/// The reasons along the cheapest path found to `to`, first step first.
fn path_to(best: &HashMap<RowVar, (i64, Option<(RowVar, Why)>)>, to: RowVar) -> Vec<Why> {
    let mut via = Vec::new();
    let mut at = to;
    // Each step lowers the cost or keeps it, and a variable keeps the step
    // that first gave it its cost, so the predecessors form a tree; the
    // bound on the length is a guard, not a limit that is ever reached.
    while let Some(&(_, Some((prev, why)))) = best.get(&at) {
        via.push(why);
        at = prev;
        if via.len() > best.len() {
            break;
        }
    }
    via.reverse();
    via
}
