//! What deferred constraints hold back from finalization's defaults
//! (rules 3-5): the sizes and rows they will decide, the smallest rows
//! slices allow, and the axes element counts give open rows.
//!
//! [`Solver::pending`] reads it in phases, each a function below: gather
//! what every watched constraint says, hold the dims above waiting dims,
//! hold the sums and what relates to them, hold the rows above pending
//! slices, then count the axes each row variable needs (from element
//! counts and slices), passed along every relation that carries a length.

use std::collections::{BTreeMap, BTreeSet};

use std::num::NonZeroU64;

use shape_core::{Dim, DimVar, Row, RowTail, RowVar};

use super::BlockedRows;
use crate::constraint::Constraint;
use crate::env::{extent, resolve_dim, resolve_row, ReadOnly, ResolvedDim};
use crate::error::ShapeError;
use crate::origin::Why;
use crate::solver::Solver;

/// A pending slice whose operand ends in a row variable: that variable,
/// the operand's spelled-out axes, the rest's spelled-out axes, and how
/// the rest ends.
type Slice = (RowVar, usize, usize, RowTail);

/// What deferred constraints hold back from rules 3-5: sizes and rows that
/// they will decide, and the smallest rows slices allow.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// Wholes of sums still waiting for their parts (held back in `dims`
    /// until released).
    pub(super) totals: Vec<DimVar>,
    /// The sums' unknown sizes and every dim related to them: no rule
    /// closes them, not even to a least upper bound, until the sums are
    /// released.
    pub(super) sum_held: BTreeSet<DimVar>,
    /// Dims of element-count rows with two or more unknowns, and the dims
    /// above them.
    pub(super) dims: BTreeSet<DimVar>,
    /// Rows that are the rest of a pending slice, and the rows above them.
    pub(super) rows: BlockedRows,
    /// Row variables at the front of a pending slice's operand row, with
    /// the fewest axes they can close to: one for the axis the slice drops,
    /// more when the slice's result is itself sliced, fewer by what the
    /// operand row spells out.
    pub(super) wholes: BTreeMap<RowVar, usize>,
    /// Row variables that are the only unknown of an element count, with
    /// the axes the count gives them: one axis of what the known sizes
    /// leave (after a slice's known first axis, where one fixes it).
    /// Closed before rules 2-5, as OCANNL resolves such a count before it
    /// closes rows, so that neither the row's uses nor the order of the
    /// facts decides how the elements are split.
    pub(super) counted_rows: Vec<(RowVar, Vec<u64>, Why)>,
    /// One element-count constraint still waiting on two or more unknowns.
    pub(super) waiting: Option<Constraint>,
    /// Whether the size of a row count is held back (in `dims`).
    pub(super) counts_held: bool,
    /// A row count whose size is held back.
    pub(super) count_waiting: Option<Constraint>,
    /// A convolution with two unknown sizes, which are held back (in
    /// `dims`) and never closed by a default.
    pub(super) affine_waiting: Option<Constraint>,
}

/// What the watched constraints say, gathered in one pass over them.
#[derive(Default)]
struct Gathered {
    /// Dims held back (see [`Pending::dims`]).
    dims: BTreeSet<DimVar>,
    /// Rows held back (see [`Pending::rows`]).
    rows: BTreeSet<RowVar>,
    /// Pending slices whose operand ends in a row variable.
    slices: Vec<Slice>,
    /// One element count still waiting on two or more unknowns.
    waiting: Option<Constraint>,
    /// Wholes of sums whose parts are not all known yet.
    totals: Vec<DimVar>,
    /// The unknown parts of those sums.
    parts_of_sums: BTreeSet<DimVar>,
    /// Open rows of element counts that need one axis at least: the row
    /// variable, the product of the known sizes, the count, and why.
    counted: Vec<(RowVar, u128, u64, Why)>,
    /// The known first axis a slice (or a leading flank) gives a row
    /// variable at the front of its row: part of what a count over that
    /// row already has.
    first_sizes: BTreeMap<RowVar, u128>,
    /// The row variable a slice's rest is, where the rest is nothing else
    /// (`w = [first, ..r..]`): with `first_sizes`, the known sizes at the
    /// front of a row written `4, 4, ..n..`, one slice after another.
    rests: BTreeMap<RowVar, RowVar>,
    /// Whether a row count's size is held back.
    counts_held: bool,
    /// A row count whose size is held back.
    count_waiting: Option<Constraint>,
    /// A convolution with two unknown sizes.
    affine_waiting: Option<Constraint>,
}

impl Solver {
    /// What deferred constraints hold back (see [`Pending`]).
    pub(super) fn pending(&self) -> Result<Pending, ShapeError> {
        let env = &mut self.env.read_only();
        let mut g = Gathered::default();
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
                g.gather(self, env, c)?;
            }
        }
        self.hold_dims_above(env, &mut g.dims)?;
        // A sum with unknown sizes, and every dim related to them by
        // inequalities, waits until nothing else is left: closing one of
        // them first would decide the others, one way or another by the
        // order of the rules. Then finalization releases them all at once
        // (`sums_released`), and the rules close them together.
        let sum_held = if self.sums_released {
            BTreeSet::new()
        } else {
            let held = self.hold_sums(env, &g)?;
            g.dims.extend(held.iter().copied());
            held
        };
        self.hold_rows_above(env, &mut g.rows)?;
        let mut wholes = smallest_operands(&g.slices);
        let counted_rows = g.counted_rows(&wholes);
        g.count_needs(&mut wholes);
        self.propagate_needs(env, &g.slices, &mut wholes)?;
        Ok(Pending {
            totals: g.totals,
            sum_held,
            dims: g.dims,
            rows: BlockedRows {
                rows: g.rows,
                free: Default::default(),
            },
            wholes,
            counted_rows,
            waiting: g.waiting,
            counts_held: g.counts_held,
            count_waiting: g.count_waiting,
            affine_waiting: g.affine_waiting,
        })
    }

    /// A dim above a waiting dim must wait too: closing it to 1 (rules 4
    /// and 5) would force the waiting dim to 1 and so decide the element
    /// count by a guess, one that depended on which of several such
    /// dims had the lowest id, and so on the order of the constraints.
    fn hold_dims_above(
        &self,
        env: &mut ReadOnly<'_>,
        dims: &mut BTreeSet<DimVar>,
    ) -> Result<(), ShapeError> {
        let mut below: Vec<DimVar> = dims.iter().copied().collect();
        while let Some(v) = below.pop() {
            let Some(b) = self.env.dim_bounds(v) else {
                continue;
            };
            for (u, why) in &b.cur {
                if let ResolvedDim::Var(u) = resolve_dim(env, &Dim::Var(*u), *why)? {
                    if dims.insert(u) {
                        below.push(u);
                    }
                }
            }
        }
        Ok(())
    }

    /// The sums' unknown sizes and every dim related to them by
    /// inequalities (see where [`Solver::pending`] calls it).
    fn hold_sums(
        &self,
        env: &mut ReadOnly<'_>,
        g: &Gathered,
    ) -> Result<BTreeSet<DimVar>, ShapeError> {
        let mut held: BTreeSet<DimVar> = g.totals.iter().copied().collect();
        held.extend(g.parts_of_sums.iter().copied());
        let mut todo: Vec<DimVar> = held.iter().copied().collect();
        while let Some(v) = todo.pop() {
            let Some(b) = self.env.dim_bounds(v) else {
                continue;
            };
            for (u, why) in b.cur.iter().chain(&b.subr) {
                if let ResolvedDim::Var(u) = resolve_dim(env, &Dim::Var(*u), *why)? {
                    if held.insert(u) {
                        todo.push(u);
                    }
                }
            }
        }
        Ok(held)
    }

    /// A row above a pending slice's result must wait for it too: closing
    /// it first would bound the slice's result before the slice decides.
    fn hold_rows_above(
        &self,
        env: &mut ReadOnly<'_>,
        rows: &mut BTreeSet<RowVar>,
    ) -> Result<(), ShapeError> {
        let mut frontier: Vec<RowVar> = rows.iter().copied().collect();
        while let Some(r) = frontier.pop() {
            let Some(b) = self.env.row_bounds(r) else {
                continue;
            };
            for c in b.uppers() {
                if let (_, RowTail::Open(u)) = extent(env, c.cur.dims.len(), c.cur.tail)? {
                    if u != r && rows.insert(u) {
                        frontier.push(u);
                    }
                }
            }
        }
        Ok(())
    }

    /// What each row variable needs, passed along every relation that
    /// carries a length, to a fixed point:
    /// - a row above one that needs axes (`u` in `[p.., ..u..] >= r`)
    ///   needs them too, less those it spells out: closed empty as an
    ///   unused result, it would leave the row below none (`input x: 2,
    ///   ..r..`, `y = exp(x)`);
    /// - a slice's rest has the axes of its whole but one, less those
    ///   it spells out (`[_, ..s.., d]` of a row of three axes: `s`
    ///   has one), and the whole has the rest's and one more
    ///   (`smallest_operands`), so that closing a result whose rest
    ///   another slice shares (`d, ...` beside `_, ..., d`) never
    ///   leaves that rest too short.
    ///
    /// Needs only grow; a contradictory cycle is cut off at `cap` (the
    /// solver reports the contradiction on its own).
    fn propagate_needs(
        &self,
        env: &mut ReadOnly<'_>,
        slices: &[Slice],
        wholes: &mut BTreeMap<RowVar, usize>,
    ) -> Result<(), ShapeError> {
        let cap = slices
            .iter()
            .map(|&(_, n, m, _)| n + m + 1)
            .sum::<usize>()
            .saturating_add(64);
        let mut by_whole: BTreeMap<RowVar, Vec<usize>> = BTreeMap::new();
        let mut by_rest: BTreeMap<RowVar, Vec<usize>> = BTreeMap::new();
        for (i, &(w, n, m, rest)) in slices.iter().enumerate() {
            by_whole.entry(w).or_default().push(i);
            if let RowTail::Open(r) = rest {
                by_rest.entry(r).or_default().push(i);
                // The whole spells `n` axes: the rest has `n - 1` at least.
                let need = (n + wholes.get(&w).copied().unwrap_or(0)).saturating_sub(1 + m);
                if r != w && need > wholes.get(&r).copied().unwrap_or(0) {
                    wholes.insert(r, need.min(cap));
                }
            }
        }
        let mut frontier: Vec<RowVar> = wholes.keys().copied().collect();
        while let Some(r) = frontier.pop() {
            let need = wholes.get(&r).copied().unwrap_or(0);
            let mut raise = |u: RowVar, above: usize, frontier: &mut Vec<RowVar>| {
                let above = above.min(cap);
                if u != r && above > 0 && wholes.get(&u).is_none_or(|m| *m < above) {
                    wholes.insert(u, above);
                    frontier.push(u);
                }
            };
            if let Some(b) = self.env.row_bounds(r) {
                for c in b.uppers() {
                    if let (n, RowTail::Open(u)) = extent(env, c.cur.dims.len(), c.cur.tail)? {
                        raise(u, need.saturating_sub(n), &mut frontier);
                    }
                }
            }
            for &i in by_whole.get(&r).map_or(&[][..], Vec::as_slice) {
                if let (_, n, m, RowTail::Open(rest)) = slices[i] {
                    raise(rest, (n + need).saturating_sub(1 + m), &mut frontier);
                }
            }
            for &i in by_rest.get(&r).map_or(&[][..], Vec::as_slice) {
                let (w, n, m, _) = slices[i];
                raise(w, (1 + m + need).saturating_sub(n), &mut frontier);
            }
        }
        Ok(())
    }
}

impl Gathered {
    /// Gathers what the watched constraint `c` holds back.
    fn gather(
        &mut self,
        solver: &Solver,
        env: &mut ReadOnly<'_>,
        c: &Constraint,
    ) -> Result<(), ShapeError> {
        match c {
            Constraint::TotalElems { row, why, total } => {
                self.gather_total_elems(env, c, row, *total, *why)
            }
            Constraint::DimSum { total, parts, why } => {
                self.gather_dim_sum(env, c, total, parts, *why)
            }
            Constraint::RowCount { row, count, why } => {
                self.gather_row_count(solver, env, c, row, count, *why)
            }
            Constraint::DimAffine { .. } => self.gather_affine(env, c),
            Constraint::Assign { dest, source, why } => self.gather_assign(env, dest, source, *why),
            Constraint::DropFirst {
                whole,
                rest,
                first,
                why,
            } => self.gather_slice(env, whole, rest, first, *why),
            _ => Ok(()),
        }
    }

    /// An element count: with two unknown sizes or more in a closed row, they
    /// wait for it; with none in an open row it does not reach, the row
    /// variable needs an axis (see [`Pending::counted_rows`]).
    fn gather_total_elems(
        &mut self,
        env: &mut ReadOnly<'_>,
        c: &Constraint,
        row: &Row,
        total: NonZeroU64,
        why: Why,
    ) -> Result<(), ShapeError> {
        let rr = resolve_row(env, row)?;
        let mut unknown = Vec::new();
        for d in rr.dims.iter() {
            if let ResolvedDim::Var(v) = resolve_dim(env, d, why)? {
                unknown.push(v);
            }
        }
        unknown.sort();
        unknown.dedup();
        if rr.tail == RowTail::Closed && unknown.len() >= 2 {
            self.dims.extend(unknown);
            self.waiting.get_or_insert_with(|| c.clone());
        } else if let (RowTail::Open(r), true) = (rr.tail, unknown.is_empty()) {
            // A count the known axes do not reach (a
            // constant's open batch row): the row variable
            // needs one axis at least, which the count then
            // decides, rather than none.
            let known: u128 = (rr.dims.iter())
                .filter_map(|d| match resolve_dim(env, d, why) {
                    Ok(ResolvedDim::Known { value, .. }) => Some(value.size() as u128),
                    _ => None,
                })
                .product();
            if known < u128::from(total.get()) {
                self.counted.push((r, known, total.get(), why));
            }
        }
        Ok(())
    }

    /// A sum of sizes: an unknown whole waits with its unknown parts; a
    /// known whole holds two unknown parts or more.
    fn gather_dim_sum(
        &mut self,
        env: &mut ReadOnly<'_>,
        c: &Constraint,
        total: &Dim,
        parts: &[Dim],
        why: Why,
    ) -> Result<(), ShapeError> {
        // Parts close by the defaults, then decide the whole;
        // the whole may not be closed by a default first. With
        // the whole known, two unknown parts are a guess.
        let mut unknown = Vec::new();
        for d in parts {
            if let ResolvedDim::Var(v) = resolve_dim(env, d, why)? {
                unknown.push(v);
            }
        }
        unknown.sort();
        unknown.dedup();
        match resolve_dim(env, total, why)? {
            ResolvedDim::Var(t) => {
                self.totals.push(t);
                self.parts_of_sums.extend(unknown);
            }
            ResolvedDim::Known { .. } if unknown.len() >= 2 => {
                self.dims.extend(unknown);
                self.waiting.get_or_insert_with(|| c.clone());
            }
            ResolvedDim::Known { .. } => {}
        }
        Ok(())
    }

    /// A row count whose size is unknown.
    fn gather_row_count(
        &mut self,
        solver: &Solver,
        env: &mut ReadOnly<'_>,
        c: &Constraint,
        row: &Row,
        count: &Dim,
        why: Why,
    ) -> Result<(), ShapeError> {
        // The count follows from its row once the row is
        // closed and known, which the rules see to: no
        // default may decide it first. Unless it is one of
        // the row's own sizes, which would then wait for
        // itself. If nothing else can close, it is an error
        // (see the loop): a count is never guessed.
        let c_constraint = c;
        if let ResolvedDim::Var(c) = resolve_dim(env, count, why)? {
            let rr = resolve_row(env, row)?;
            let mut in_row = false;
            for d in rr.dims.iter() {
                in_row |= matches!(resolve_dim(env, d, why)?, ResolvedDim::Var(v) if v == c);
            }
            if !in_row && !solver.count_is_bound(c)? {
                // Only read: the count waits for its row,
                // which closes as if it were not read.
                self.dims.insert(c);
            } else if !in_row {
                // Its row's unknown sizes and row variable
                // wait with it: closing one by a default
                // decides the count, and which closed first
                // would depend on the order of constraints.
                self.dims.insert(c);
                for d in rr.dims.iter() {
                    if let ResolvedDim::Var(v) = resolve_dim(env, d, why)? {
                        self.dims.insert(v);
                    }
                }
                if let RowTail::Open(r) = rr.tail {
                    self.rows.insert(r);
                }
                self.counts_held = true;
                self.count_waiting
                    .get_or_insert_with(|| c_constraint.clone());
            }
        }
        Ok(())
    }

    /// A convolution's sizes.
    fn gather_affine(&mut self, env: &mut ReadOnly<'_>, c: &Constraint) -> Result<(), ShapeError> {
        let Constraint::DimAffine {
            input,
            over,
            kernel,
            padded,
            why,
            ..
        } = c
        else {
            return Ok(());
        };
        let (padded, why) = (*padded, *why);
        // A waiting convolution has two unknown sizes (with
        // one, it decides it): no default closes either, so
        // that other facts may decide one; if none does, it
        // is an error (see the loop).
        let var = |d: &Dim, env: &mut _| match resolve_dim(env, d, why) {
            Ok(ResolvedDim::Var(v)) => Ok(Some(v)),
            Ok(ResolvedDim::Known { .. }) => Ok(None),
            Err(e) => Err(e),
        };
        // With padding the kernel does not enter the sizes.
        let k = if padded { None } else { var(kernel, env)? };
        let unknown = [var(input, env)?, var(over, env)?, k];
        if unknown.iter().flatten().count() >= 2 {
            self.dims.extend(unknown.into_iter().flatten());
            self.affine_waiting.get_or_insert_with(|| c.clone());
        }
        Ok(())
    }

    /// An assignment into a declared shape.
    fn gather_assign(
        &mut self,
        env: &mut ReadOnly<'_>,
        dest: &Row,
        source: &Row,
        why: Why,
    ) -> Result<(), ShapeError> {
        // A destination size waits for its source's: a
        // default closing it first would size the source
        // from the destination, which an assignment never
        // does.
        let (rd, rs) = (resolve_row(env, dest)?, resolve_row(env, source)?);
        if rd.tail == RowTail::Closed && rs.tail == RowTail::Closed {
            for (d, s) in rd.dims.iter().rev().zip(rs.dims.iter().rev()) {
                if let (ResolvedDim::Var(d), ResolvedDim::Var(_)) =
                    (resolve_dim(env, d, why)?, resolve_dim(env, s, why)?)
                {
                    self.dims.insert(d);
                }
            }
        }
        Ok(())
    }

    /// A slice (or a leading flank): its operand's row variable, the known
    /// first axis it gives, and its rest.
    fn gather_slice(
        &mut self,
        env: &mut ReadOnly<'_>,
        whole: &Row,
        rest: &Row,
        first: &Option<Dim>,
        why: Why,
    ) -> Result<(), ShapeError> {
        if let (Some(first), (0, RowTail::Open(w))) =
            (first, extent(env, whole.dims.len(), whole.tail)?)
        {
            if let ResolvedDim::Known { value, .. } = resolve_dim(env, first, why)? {
                if let Some(n) = value.static_size() {
                    self.first_sizes.insert(w, u128::from(n));
                }
            }
        }
        let (m, rest_tail) = extent(env, rest.dims.len(), rest.tail)?;
        if let RowTail::Open(r) = rest_tail {
            self.rows.insert(r);
            if let (0, (0, RowTail::Open(w))) = (m, extent(env, whole.dims.len(), whole.tail)?) {
                self.rests.insert(w, r);
            }
        }
        if let (n, RowTail::Open(w)) = extent(env, whole.dims.len(), whole.tail)? {
            self.slices.push((w, n, m, rest_tail));
        }
        Ok(())
    }

    /// The known sizes at the front of the counted row variable `r`.
    fn leading(&self, r: RowVar) -> Vec<u128> {
        let mut sizes = Vec::new();
        let mut at = Some(r);
        while let Some(w) = at {
            let Some(&first) = self.first_sizes.get(&w) else {
                break;
            };
            sizes.push(first);
            at = self.rests.get(&w).copied().filter(|&next| next != r);
            if sizes.len() > self.first_sizes.len() {
                break;
            }
        }
        sizes
    }

    /// The row variables that are the only unknown of an element count,
    /// with the axes the count gives them (see [`Pending::counted_rows`]).
    fn counted_rows(&self, wholes: &BTreeMap<RowVar, usize>) -> Vec<(RowVar, Vec<u64>, Why)> {
        let mut counted_rows = Vec::new();
        for &(r, known, total, why) in &self.counted {
            let total = u128::from(total);
            if known == 0 || total % known != 0 {
                continue;
            }
            let left = total / known;
            let front = self.leading(r);
            let front_product = front.iter().try_fold(1u128, |p, &f| p.checked_mul(f));
            let axes = match (front.is_empty(), front_product) {
                // A slice's axis the count does not decide: left to it.
                (true, _) if wholes.contains_key(&r) => continue,
                (true, _) => vec![left],
                (false, Some(p)) if p > 0 && left % p == 0 => {
                    let mut axes = front;
                    if left / p != 1 {
                        axes.push(left / p);
                    }
                    axes
                }
                (false, _) => continue,
            };
            let Ok(axes) = axes
                .into_iter()
                .map(u64::try_from)
                .collect::<Result<Vec<u64>, _>>()
            else {
                continue;
            };
            counted_rows.push((r, axes, why));
        }
        counted_rows
    }

    /// Raises `wholes` by the axes element counts need.
    fn count_needs(&self, wholes: &mut BTreeMap<RowVar, usize>) {
        for &(r, known, total, _) in &self.counted {
            // A count the known axes do not reach needs one axis of the row
            // variable beyond those its slices give (the count then decides
            // it): `..b..|4` with 24 values and a slice fixing b's first
            // axis at 3 is `3, 2|4`. Where the slice's axis reaches the
            // count, the slice's axes are enough.
            let sliced = wholes.get(&r).copied().unwrap_or(0);
            let front = self.leading(r);
            let front_product = front.iter().fold(1u128, |p, &f| p.saturating_mul(f));
            let need = match front.is_empty() {
                _ if sliced == 0 => 1,
                // The slice's first axis is unknown: the count decides it.
                true => sliced,
                false if known.saturating_mul(front_product) < u128::from(total) => {
                    sliced.max(front.len()) + 1
                }
                false => sliced.max(front.len()),
            };
            wholes.insert(r, need);
        }
    }
}

/// The fewest axes each operand row variable of `slices` (`(w, n, m,
/// rest)`: the operand is `[..w.., n axes]` and the rest `[rest, m
/// axes]`) can have: `1 + m - n` plus what the rest's own row variable
/// needs as the operand of further slices. Entries of 0 are left out.
fn smallest_operands(slices: &[Slice]) -> BTreeMap<RowVar, usize> {
    // The slices of each operand variable, found once (a scan per variable
    // made long chains of slices or leading flanks quadratic).
    let mut by_operand: BTreeMap<RowVar, Vec<usize>> = BTreeMap::new();
    for (i, s) in slices.iter().enumerate() {
        by_operand.entry(s.0).or_default().push(i);
    }
    let below = |i: usize| match slices[i] {
        (x, _, _, RowTail::Open(r)) if r != x => Some(r),
        _ => None,
    };
    // Depth first without recursion (a chain may be 100,000 slices long):
    // a variable is finished once every variable below it is.
    let mut memo: BTreeMap<RowVar, usize> = BTreeMap::new();
    let mut visiting: BTreeSet<RowVar> = BTreeSet::new();
    for &(root, ..) in slices {
        let mut stack = vec![root];
        while let Some(&w) = stack.last() {
            if memo.contains_key(&w) {
                stack.pop();
                continue;
            }
            let mine = by_operand.get(&w).map_or(&[][..], Vec::as_slice);
            if visiting.insert(w) {
                // First visit: finish the variables below first. A cycle of
                // slices is a contradiction the solver reports on its own;
                // here it only must not loop, so a variable on the stack
                // counts as needing nothing.
                for &i in mine {
                    if let Some(r) = below(i) {
                        if !memo.contains_key(&r) && !visiting.contains(&r) {
                            stack.push(r);
                        }
                    }
                }
                continue;
            }
            let most = mine
                .iter()
                .map(|&i| {
                    let (_, n, m, _) = slices[i];
                    let under = below(i).and_then(|r| memo.get(&r).copied()).unwrap_or(0);
                    (1 + m + under).saturating_sub(n)
                })
                .max()
                .unwrap_or(0);
            visiting.remove(&w);
            memo.insert(w, most);
            stack.pop();
        }
    }
    memo.retain(|_, n| *n > 0);
    memo
}
