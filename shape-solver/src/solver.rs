//! The solver: a worklist of unification and inequality simplification.
//!
//! All of the solving rules live in this module, one method per constraint
//! kind; finalization (closing what is left open) lives in `finalize`.
//!
//! Rules, in short (the tables in `docs/constraint-semantics.md` say the
//! same at length):
//! * `DimEq`: known = known must agree in size and label; a variable is
//!   bound and its recorded inequalities are re-emitted against its value.
//! * `DimIneq cur >= subr`: `n >= m` iff `n = m` or `m = 1`; `v >= m` with
//!   `m > 1` forces `v = m`; `1 >= v` forces `v = 1`; `n >= v` records `n`
//!   as the least upper bound of `v` (a second, different bound forces
//!   `v = 1`); `v >= w` is recorded on both and `v`'s bound passes to `w`.
//! * `RowEq`: aligned at the end, dims pairwise equal; a row variable takes
//!   the leading surplus of the other side; closed rows need equal lengths.
//! * `RowIneq cur >= subr`: aligned at the end, dims pairwise `>=`; an open
//!   `cur` shorter than `subr` is expanded with a template of fresh dim
//!   variables; what cannot be decided yet is stored on the row variables
//!   and retried when one of them is solved.
//! * `TotalElems`: solved when at most one unknown size remains and the row
//!   is closed; known sizes must divide the total.
//! * Symbolic sizes (run-time sizes, `KnownDim::symbolic`) are never bound
//!   or closed: where one meets a static size or another symbol and the
//!   e-graph cannot prove the equality or broadcast needed, a run-time
//!   guard is recorded (`crate::guard`) and solving goes on as if it held;
//!   `v >= b` for a symbol `b` waits on `v` (its value then meets `b`), and
//!   finalization closes `v` to `b` rather than to 1.
//! * `DropFirst`: `whole` without its first axis is `rest`. A closed
//!   `whole` decides `rest`; a closed `rest` decides an open `whole`
//!   (`[fresh, rest..]`); while both are open it waits (finalization can
//!   make it match what the two rows spell out, see `drop_first`).

use std::num::NonZeroU64;
use std::sync::Arc;

use imbl::Vector;
use shape_core::{Dim, DimVar, KnownDim, Row, RowTail, RowVar, Size, SymSize};

use crate::constraint::Constraint;
use crate::env::{
    resolve_dim, resolve_row, DimEntry, Env, EnvSnapshot, ResolvedDim, ResolvedRow, RowEntry,
    StoredIneq, StoredRow,
};
use crate::error::{
    AffineProblem, AxesCycle, CycleStep, DimFact, RowFact, ShapeError, SumReason, TotalElemsReason,
};
use crate::guard::RawGuard;
use crate::origin::{Origin, OriginId, Relation, Why};
use crate::origin_table::{OriginMark, OriginTable};
use crate::rank_cycle::{find_rank_cycle, RankCycle};

/// A declarative shape solver over persistent maps.
///
/// Cloning a solver copies almost no per-variable state: the environment
/// and the origin table are persistent structures; what is copied is one bit
/// per variable (which ones are unsolved) and the small set of variables
/// with deferred constraints. So a state can be forked to try alternatives.
///
/// Every call does at most [`Solver::step_limit`] steps in all, a number
/// proportional to the size of what was given; past it, the call fails with
/// [`ShapeError::StepLimit`] instead of running on.
///
/// ```
/// use shape_core::{Dim, Row, KnownDim};
/// use shape_solver::{Constraint, Origin, Solver, Why};
///
/// let mut s = Solver::new();
/// let why = Why::of(s.add_origin(Origin::Direct { what: "example".into() }));
/// let (v, r) = (s.fresh_dim(), s.fresh_row());
/// // [..r.., v] >= [4, 3]: the result row broadcasts from a (4, 3) operand.
/// let cur = Row::open(r, vec![Dim::Var(v)]);
/// let subr = Row::closed(vec![Dim::known(4).unwrap(), Dim::known(3).unwrap()]);
/// s.add(Constraint::RowIneq { cur: cur.clone(), subr, why }).unwrap();
/// let solution = s.finalize().unwrap();
/// let sizes: Vec<u64> = solution.row(&cur).unwrap().iter().map(KnownDim::size).collect();
/// assert_eq!(sizes, vec![4, 3]);
/// ```
#[derive(Clone, Debug, Default)]
pub struct Solver {
    pub(crate) env: Env,
    /// Stored compactly (see `origin_table`): recording an origin
    /// allocates nothing of its own; an [`Origin`] is rebuilt, and an `Arc`
    /// made, only when an error or a provenance query hands one out.
    pub(crate) origins: OriginTable,
    /// Row variables created through the API (not by templates).
    api_row_vars: u32,
    /// The size of what was given through the API: constraints and
    /// variables (not those the solver makes itself), which the step limit
    /// is proportional to.
    given: u64,
    /// Work still to do; empty between public calls.
    queue: WorkQueue,
    /// Variables that have (or had) deferred constraints waiting on them.
    pub(crate) watched_dims: std::collections::BTreeSet<DimVar>,
    pub(crate) watched_rows: std::collections::BTreeSet<RowVar>,
    steps: u64,
    budget: StepBudget,
    /// Whether slices whose rows are both open match what the rows spell
    /// out (set by finalization, see `drop_first`).
    match_open_slices: bool,
    /// Whether finalization lets its defaults close the wholes of sums
    /// that still wait for parts (set once nothing else is left).
    pub(crate) sums_released: bool,
    /// Row variables finalization closed by a default rather than by a
    /// fact: rules 3 and 5, and rule 2 when the bound it took leaves no
    /// axis and was itself closed by a default. Empty outside
    /// finalization; read by [`crate::Solution::closed_by_default`].
    pub(crate) defaulted_rows: crate::finalize::VarQueue,
    /// Whether any `DimAtLeast` ever waited on an unknown size: until one
    /// does, finalization's defaults need not look for them.
    has_minimums: bool,
    /// What inference left for binding to check (symbolic sizes), with the
    /// constraint that needed each.
    pub(crate) guards: Vector<(RawGuard, Why)>,
}

/// How many steps a [`Solver`] may take: `base + per_given × n`, where `n`
/// counts the constraints and variables given to it (not those it makes
/// itself).
///
/// Solving takes a few steps per constraint given (each variable is bound
/// once, and what was recorded on it is retried once): 9 per operation of
/// the benchmark network of 10,000 or 100,000 operations, where the default
/// allows some 80 times that. A set of constraints that keeps producing work
/// reaches the limit in time proportional to the problem instead of
/// running on.
///
/// ```
/// use shape_solver::{Solver, StepBudget};
/// let mut s = Solver::new();
/// assert_eq!(s.step_limit(), StepBudget::default().base);
/// s.fresh_dim();
/// let b = StepBudget::default();
/// assert_eq!(s.step_limit(), b.base + b.per_given);
/// // A service solving untrusted programs can spend less.
/// s.set_step_budget(StepBudget { base: 1_000, per_given: 8 });
/// assert_eq!(s.step_limit(), 1_008);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StepBudget {
    /// Steps any problem may take, however small.
    pub base: u64,
    /// Steps per constraint or variable given.
    pub per_given: u64,
}

impl Default for StepBudget {
    fn default() -> StepBudget {
        StepBudget {
            base: 100_000,
            per_given: 64,
        }
    }
}

impl Solver {
    /// An empty solver.
    pub fn new() -> Solver {
        Solver::default()
    }

    /// A new dim variable.
    pub fn fresh_dim(&mut self) -> DimVar {
        self.given += 1;
        self.env.push_dim()
    }

    /// A new row variable.
    pub fn fresh_row(&mut self) -> RowVar {
        self.api_row_vars += 1;
        self.given += 1;
        self.env.push_row(0)
    }

    /// A dim variable the solver makes itself (a template's axis).
    pub(crate) fn mint_dim(&mut self) -> DimVar {
        self.env.push_dim()
    }

    /// A row variable the solver makes itself, at a template depth.
    fn mint_row(&mut self, depth: u32) -> RowVar {
        self.env.push_row(depth)
    }

    /// The number of origins recorded so far: the id the next one gets.
    pub fn num_origins(&self) -> u32 {
        self.origins.len() as u32
    }

    /// Gives tensor `tensor` the name `name` in the origins with ids in
    /// `range` (those a graph recorded while it applied an operation), so
    /// that their messages use the name a user gave after the fact.
    pub fn rename_in_origins(
        &mut self,
        range: std::ops::Range<u32>,
        tensor: usize,
        name: &Arc<str>,
    ) {
        for i in range {
            if let Some(new) = self.origins.get(i).and_then(|o| o.renamed(tensor, name)) {
                self.origins.rename(i, new);
            }
        }
    }

    /// Registers where constraints come from; returns its id for [`Why`].
    pub fn add_origin(&mut self, origin: Origin) -> OriginId {
        OriginId(self.origins.push(origin))
    }

    /// The origin with the given id (rebuilt from the solver's compact
    /// record of it: its parts are shared, not copied).
    pub fn origin(&self, id: OriginId) -> Option<Origin> {
        self.origins.get(id.0)
    }

    pub(crate) fn origin_arc(&self, id: OriginId) -> Arc<Origin> {
        Arc::new(self.origins.get(id.0).unwrap_or(Origin::Finalization))
    }

    /// Queues again every slice that waits with both rows open, to be
    /// matched (see `drop_first`) from now on; false when there is none.
    pub(crate) fn match_open_slices(&mut self) -> bool {
        self.match_open_slices = true;
        let mut slices = Vec::new();
        for r in &self.watched_rows {
            let Some(b) = self.env.row_bounds(*r) else {
                continue;
            };
            for c in b.watchers.iter() {
                if matches!(c, Constraint::DropFirst { .. }) && !slices.contains(c) {
                    slices.push(c.clone());
                }
            }
        }
        let any = !slices.is_empty();
        for c in slices {
            self.requeue(c);
        }
        any
    }

    /// Counts of what the solver holds, for diagnostics and benchmarks.
    pub fn stats(&self) -> SolverStats {
        SolverStats {
            dim_vars: self.env.num_dims(),
            row_vars: self.env.num_rows(),
            origins: self.origins.len(),
            steps: self.steps,
        }
    }

    /// The number of constraint-processing steps taken so far.
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// How many steps this solver may take in all before a call fails
    /// with [`ShapeError::StepLimit`] (see [`StepBudget`]).
    pub fn step_limit(&self) -> u64 {
        let b = self.budget;
        b.base
            .saturating_add(b.per_given.saturating_mul(self.given))
    }

    /// Sets the budget [`Solver::step_limit`] follows (kept by clones).
    pub fn set_step_budget(&mut self, budget: StepBudget) {
        self.budget = budget;
    }

    /// Adds a constraint and simplifies until nothing more follows.
    ///
    /// On error the solver is left exactly as it was before the call.
    pub fn add(&mut self, c: Constraint) -> Result<(), ShapeError> {
        self.add_all(std::iter::once(c))
    }

    /// Adds several constraints at once; on error none of them is kept.
    pub fn add_all(&mut self, cs: impl IntoIterator<Item = Constraint>) -> Result<(), ShapeError> {
        self.transaction(|s| {
            s.push_all(cs);
            s.run()
        })
    }

    /// Runs `f` as one transaction: if it fails, every variable, origin and
    /// constraint it added is undone, and the solver is as it was before.
    ///
    /// The undo log records only what changes, so a transaction costs no
    /// copy of the solver state. Transactions nest: one that fails inside
    /// another is undone alone, and the outer one goes on from the state
    /// it was in before the inner one began (and can still fail and undo
    /// everything). So a caller can try a constraint inside its own
    /// transaction and carry on when it is refused.
    ///
    /// ```
    /// use shape_core::Dim;
    /// use shape_solver::{Constraint, Origin, Solver, Why};
    ///
    /// let mut s = Solver::new();
    /// let why = Why::of(s.add_origin(Origin::Direct { what: "example".into() }));
    /// let v = s.fresh_dim();
    /// let eq = |n| Constraint::DimEq { a: Dim::Var(v), b: Dim::known(n).unwrap(), why };
    /// s.transaction(|s| {
    ///     s.add(eq(3))?;
    ///     assert!(s.add(eq(4)).is_err()); // refused and undone, alone
    ///     s.add(eq(3))
    /// })
    /// .unwrap();
    /// assert_eq!(s.resolve_dim(&Dim::Var(v)).unwrap(), Dim::known(3).unwrap());
    /// ```
    pub fn transaction<T, E>(
        &mut self,
        f: impl FnOnce(&mut Solver) -> Result<T, E>,
    ) -> Result<T, E> {
        let snapshot = self.begin();
        let result = f(self);
        match &result {
            Ok(_) => self.end(snapshot, true),
            Err(_) => self.end(snapshot, false),
        }
        result
    }

    fn begin(&mut self) -> Checkpoint {
        Checkpoint {
            env: self.env.snapshot(),
            origins: self.origins.mark(),
            api_row_vars: self.api_row_vars,
            given: self.given,
            steps: self.steps,
            guards: self.guards.len(),
            // Work an enclosing call queued waits until this one is done.
            outer_queue: (!self.queue.is_empty()).then(|| std::mem::take(&mut self.queue)),
        }
    }

    fn end(&mut self, c: Checkpoint, keep: bool) {
        if keep {
            self.env.commit(c.env);
        } else {
            self.env.rollback_to(c.env);
            self.origins.truncate(c.origins);
            self.api_row_vars = c.api_row_vars;
            self.given = c.given;
            self.steps = c.steps;
            self.guards.truncate(c.guards);
            self.queue.clear();
        }
        if let Some(q) = c.outer_queue {
            debug_assert!(self.queue.is_empty() || !keep);
            self.queue = q;
        }
    }

    /// A dim with solved variables substituted.
    pub fn resolve_dim(&self, d: &Dim) -> Result<Dim, ShapeError> {
        let why = Why::of(OriginId(0));
        Ok(match resolve_dim(&mut self.env.read_only(), d, why)? {
            ResolvedDim::Known { value, .. } => Dim::Known(value),
            ResolvedDim::Var(v) => Dim::Var(v),
        })
    }

    /// A row with solved variables substituted, dims included.
    pub fn resolve_row(&self, r: &Row) -> Result<Row, ShapeError> {
        let rr = resolve_row(&mut self.env.read_only(), r)?;
        let dims = rr
            .dims
            .iter()
            .map(|d| self.resolve_dim(d))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Row {
            dims,
            tail: rr.tail,
            constraint: r.constraint,
        })
    }

    /// Queues a constraint given from outside the solver (an operation's,
    /// a declaration's) without solving it yet: it counts towards the step
    /// limit, and [`Solver::run`] (or the next [`Solver::add`]) solves it.
    /// Many constraints queued and run at once need no list in between.
    pub fn push(&mut self, c: Constraint) {
        self.given += 1;
        self.queue.push(c);
    }

    fn push_all(&mut self, cs: impl IntoIterator<Item = Constraint>) {
        for c in cs {
            self.push(c);
        }
    }

    /// Queues a constraint that solving produced.
    pub(crate) fn requeue(&mut self, c: Constraint) {
        self.queue.push(c);
    }

    /// Solves every queued constraint ([`Solver::push`]); on an error the
    /// rest of the queue is dropped (undo it with [`Solver::transaction`]).
    pub fn run(&mut self) -> Result<(), ShapeError> {
        let limit = self.step_limit();
        while let Some(c) = self.queue.pop() {
            self.steps += 1;
            if self.steps > limit {
                return Err(self.step_limit_reached(c.why(), limit));
            }
            if let Err(e) = self.step(c) {
                self.queue.clear();
                return Err(e);
            }
        }
        Ok(())
    }

    #[cold]
    fn step_limit_reached(&mut self, why: Why, limit: u64) -> ShapeError {
        self.queue.clear();
        ShapeError::StepLimit {
            context: self.origin_arc(why.origin),
            steps: self.steps,
            limit,
        }
    }

    fn step(&mut self, c: Constraint) -> Result<(), ShapeError> {
        self.refuse_ragged_arithmetic(&c)?;
        match c {
            Constraint::DimEq { a, b, why } => self.unify_dim(&a, &b, why),
            Constraint::DimIneq { cur, subr, why } => self.dim_ineq(&cur, &subr, why),
            Constraint::RowEq { a, b, why } => {
                self.row_constraints_of(&a, why);
                self.row_constraints_of(&b, why);
                self.unify_row(&a, &b, why)
            }
            Constraint::RowIneq { cur, subr, why } => {
                self.row_constraints_of(&cur, why);
                self.row_constraints_of(&subr, why);
                self.row_ineq(cur, subr, why)
            }
            Constraint::Assign { dest, source, why } => self.assign(dest, source, why),
            Constraint::TotalElems { row, total, why } => self.total_elems(row, total, why),
            Constraint::DimSum { total, parts, why } => self.dim_sum(total, parts, why),
            Constraint::DimAtLeast { dim, min, why } => self.dim_at_least(dim, min, why),
            Constraint::RowCount { row, count, why } => self.row_count(row, count, why),
            c @ Constraint::DimAffine { .. } => self.dim_affine(c),
            Constraint::DropFirst {
                whole,
                rest,
                first,
                why,
            } => self.drop_first(whole, rest, first, why),
        }
    }

    /// A constraint that computes with sizes (an element count, a sum, a
    /// window, a fixed index) over a ragged axis, whose rows' lengths are
    /// no number: refused, naming it.
    fn refuse_ragged_arithmetic(&mut self, c: &Constraint) -> Result<(), ShapeError> {
        let (dims, what): (Vec<&Dim>, &'static str) = match c {
            Constraint::DimEq { .. }
            | Constraint::DimIneq { .. }
            | Constraint::RowEq { .. }
            | Constraint::RowIneq { .. }
            | Constraint::Assign { .. }
            | Constraint::DropFirst { .. } => return Ok(()),
            Constraint::TotalElems { row, .. } => (row.dims.iter().collect(), "an element count"),
            Constraint::RowCount { row, count, .. } => (
                row.dims.iter().chain(std::iter::once(count)).collect(),
                "an element count",
            ),
            Constraint::DimSum { total, parts, .. } => (
                std::iter::once(total).chain(parts).collect(),
                "a concatenation",
            ),
            Constraint::DimAtLeast { dim, .. } => (vec![dim], "a fixed index"),
            Constraint::DimAffine {
                input,
                over,
                kernel,
                ..
            } => (vec![input, over, kernel], "a convolution's window"),
        };
        let why = c.why();
        // Symbolic arithmetic is over i64: a number past it beside a
        // run-time size would be clamped into a wrong expression (a window
        // of 2^64 - 1 taps over `b` made `b-9223372036854775807`).
        let limit = i64::MAX as u64;
        let mut huge = match c {
            Constraint::DimAffine {
                stride, dilation, ..
            } => [stride.get(), dilation.get()]
                .into_iter()
                .find(|&n| n > limit),
            _ => None,
        };
        let mut symbol = None;
        for d in dims {
            if let Ok(ResolvedDim::Known { value, source, .. }) =
                resolve_dim(&mut self.env.read_only(), d, why)
            {
                if value.is_ragged() {
                    return Err(self.ragged_error(value, source, why, what));
                }
                match value.extent() {
                    Size::Symbolic(s) => symbol = symbol.or_else(|| Some(s.to_string())),
                    Size::Static(n) if *n > limit => huge = huge.or(Some(*n)),
                    _ => {}
                }
            }
        }
        if let (Some(n), Some(symbol)) = (huge, symbol) {
            return Err(ShapeError::SymbolicUnsupported {
                context: self.origin_arc(why.origin),
                what: huge_arithmetic(n),
                size: symbol,
            });
        }
        Ok(())
    }

    #[cold]
    fn ragged_error(
        &self,
        value: KnownDim,
        source: Why,
        why: Why,
        what: &'static str,
    ) -> ShapeError {
        ShapeError::RaggedUnsupported {
            context: self.origin_arc(why.origin),
            what,
            ragged: Box::new(self.fact(value, source)),
        }
    }

    /// `dim` has at least `min` elements: checked once its size is known,
    /// deferred on it until then (finalization reads the deferred copies,
    /// see `Solver::least_size`).
    fn dim_at_least(&mut self, dim: Dim, min: NonZeroU64, why: Why) -> Result<(), ShapeError> {
        match self.env.resolve_dim(&dim, why)? {
            ResolvedDim::Known { value, source, .. } if value.symbolic_size().is_some() => {
                // A symbol is at least 1.
                if min.get() > 1 {
                    self.guards
                        .push_back((RawGuard::AtLeast(value, source, min.get()), why));
                }
                Ok(())
            }
            ResolvedDim::Known { value, source, .. } if value.size() < min.get() => {
                Err(ShapeError::AxisTooShort {
                    context: self.origin_arc(why.origin),
                    axis: why.axis_from_end(),
                    min: min.get(),
                    found: Box::new(self.fact(value, source)),
                })
            }
            ResolvedDim::Known { .. } => Ok(()),
            ResolvedDim::Var(v) => {
                self.has_minimums = true;
                self.defer(Constraint::DimAtLeast { dim, min, why }, &[v], None);
                Ok(())
            }
        }
    }

    /// The product of `row`'s sizes is `count`: an element count once the
    /// count is known (a row of no element once one of its sizes is known
    /// to be 0: inference never decides that an unknown size is 0), the
    /// product once a closed row's sizes are; until then it waits on
    /// every unknown.
    fn row_count(&mut self, row: Row, count: Dim, why: Why) -> Result<(), ShapeError> {
        let count_var = match self.env.resolve_dim(&count, why)? {
            ResolvedDim::Known { value, source, .. } if value.symbolic_size().is_some() => {
                return self.symbolic_count(row, count, (value, source), why);
            }
            ResolvedDim::Known { value, .. } => match value.non_zero_size() {
                Some(total) => {
                    self.requeue(Constraint::TotalElems { row, total, why });
                    return Ok(());
                }
                None => None,
            },
            ResolvedDim::Var(c) => Some(c),
        };
        let rr = self.env.resolve_row(&row)?;
        let tail = rr.tail;
        let mut unknown: Vec<DimVar> = count_var.into_iter().collect();
        let mut product: Option<u64> = Some(1);
        let mut empty = false;
        let mut symbols: Vec<Size> = Vec::new();
        for d in rr.dims.iter() {
            match self.env.resolve_dim(d, why)? {
                ResolvedDim::Known { value, source, .. } => {
                    empty |= value.is_empty();
                    match value.extent() {
                        Size::Static(n) => product = product.and_then(|p| p.checked_mul(*n)),
                        Size::Symbolic(_) => symbols.push(value.extent().clone()),
                        Size::Ragged => {
                            return Err(self.ragged_error(value, source, why, "an element count"))
                        }
                    }
                }
                ResolvedDim::Var(v) => unknown.push(v),
            }
        }
        let closed = tail == RowTail::Closed;
        match count_var {
            // No element: met by an empty axis, refused once every size
            // is known and none is 0.
            None if empty => return Ok(()),
            None if closed && unknown.is_empty() => {
                let fact = self.row_fact(&rr);
                return Err(ShapeError::TotalElems {
                    context: self.origin_arc(why.origin),
                    row: Box::new(fact),
                    total: 0,
                    known_product: product.unwrap_or(u64::MAX),
                    reason: TotalElemsReason::NotEqual,
                });
            }
            Some(c) if closed && unknown.len() == 1 && !symbols.is_empty() => {
                // A count over run-time sizes is their product (`b*s`).
                let mut factors: Vec<&Size> = symbols.iter().collect();
                let known = product.map(Size::Static);
                factors.extend(known.as_ref());
                let value = if known.is_some() {
                    crate::symbolic::product(&factors)
                } else {
                    None
                };
                let Some(value) = value else {
                    let fact = self.row_fact(&rr);
                    return Err(ShapeError::TotalElems {
                        context: self.origin_arc(why.origin),
                        row: Box::new(fact),
                        total: u64::MAX,
                        known_product: u64::MAX,
                        reason: TotalElemsReason::Overflow,
                    });
                };
                return self.unify_dim(&Dim::Var(c), &Dim::Known(KnownDim::of_size(value)), why);
            }
            Some(c) if closed && unknown.len() == 1 => {
                let Some(value) = product.map(KnownDim::sized) else {
                    let fact = self.row_fact(&rr);
                    return Err(ShapeError::TotalElems {
                        context: self.origin_arc(why.origin),
                        row: Box::new(fact),
                        total: u64::MAX,
                        known_product: u64::MAX,
                        reason: TotalElemsReason::Overflow,
                    });
                };
                return self.unify_dim(&Dim::Var(c), &Dim::Known(value), why);
            }
            _ => {}
        }
        let open = match tail {
            RowTail::Open(r) => Some(r),
            RowTail::Closed => None,
        };
        self.defer(Constraint::RowCount { row, count, why }, &unknown, open);
        Ok(())
    }

    /// A row count whose count is a run-time size (or an expression of
    /// them): checked against a row all known (a guard when the e-graph
    /// cannot show it), or the one unknown size of a closed row is the
    /// count divided by the others, where that divides exactly.
    fn symbolic_count(
        &mut self,
        row: Row,
        count: Dim,
        (total, total_source): (KnownDim, Why),
        why: Why,
    ) -> Result<(), ShapeError> {
        let rr = self.env.resolve_row(&row)?;
        let mut known: Vec<(KnownDim, Why)> = Vec::new();
        let mut unknown: Vec<DimVar> = Vec::new();
        for d in rr.dims.iter() {
            match self.env.resolve_dim(d, why)? {
                ResolvedDim::Known { value, source, .. } if value.is_ragged() => {
                    return Err(self.ragged_error(value, source, why, "an element count"))
                }
                ResolvedDim::Known { value, source, .. } => known.push((value, source)),
                ResolvedDim::Var(v) => unknown.push(v),
            }
        }
        let closed = rr.tail == RowTail::Closed;
        let sizes: Vec<&Size> = known.iter().map(|(k, _)| k.extent()).collect();
        let product = crate::symbolic::product(&sizes);
        match (closed, unknown.as_slice(), product) {
            (true, [], Some(p)) => {
                let p = KnownDim::of_size(p);
                if !symbolic_equal(&p, &total) {
                    let guard = RawGuard::Equal(total, total_source, p, why);
                    self.guards.push_back((guard, why));
                }
                Ok(())
            }
            (true, [v], Some(p)) => match crate::symbolic::exact_quotient(total.extent(), &p) {
                Some(q) => self.unify_dim(&Dim::Var(*v), &Dim::Known(KnownDim::of_size(q)), why),
                None => Err(ShapeError::SymbolicUnsupported {
                    context: self.origin_arc(why.origin),
                    what: "an unknown size of a row whose element count is given",
                    size: total.to_string(),
                }),
            },
            _ => {
                let open = match rr.tail {
                    RowTail::Open(r) => Some(r),
                    RowTail::Closed => None,
                };
                self.defer(Constraint::RowCount { row, count, why }, &unknown, open);
                Ok(())
            }
        }
    }

    /// A convolution's sizes (see [`Constraint::DimAffine`]): the unknown
    /// one from the others, the known ones checked, or deferred.
    fn dim_affine(&mut self, c: Constraint) -> Result<(), ShapeError> {
        let Constraint::DimAffine {
            input,
            over,
            kernel,
            stride,
            dilation,
            padded,
            why,
        } = &c
        else {
            return Ok(());
        };
        let known_symbolic = |solver: &Self, dim: &Dim| {
            matches!(
                resolve_dim(&mut solver.env.read_only(), dim, *why),
                Ok(ResolvedDim::Known { value, .. }) if value.symbolic_size().is_some()
            )
        };
        if [input, over, kernel]
            .iter()
            .any(|d| known_symbolic(self, d))
        {
            return self.symbolic_affine(c.clone());
        }
        let (s, d) = (u128::from(stride.get()), u128::from(dilation.get()));
        let mut unknown = Vec::new();
        let mut value = |solver: &mut Self, dim: &Dim| -> Result<Option<u128>, ShapeError> {
            Ok(match solver.env.resolve_dim(dim, *why)? {
                ResolvedDim::Known { value, .. } => Some(u128::from(value.size())),
                ResolvedDim::Var(v) => {
                    unknown.push(v);
                    None
                }
            })
        };
        let (i, o, k) = (
            value(self, input)?,
            value(self, over)?,
            value(self, kernel)?,
        );
        let fail = |solver: &Self| solver.affine_error(&c);
        // A window over an empty axis (or an empty window) has no
        // position: refused rather than computed with sizes - 1.
        if [i, o, k].contains(&Some(0)) {
            return Err(fail(self));
        }
        // The value a size must take, or a conflict.
        let set = |solver: &mut Self, dim: &Dim, n: Option<u128>| -> Result<(), ShapeError> {
            let known = n
                .and_then(|n| u64::try_from(n).ok())
                .and_then(KnownDim::of)
                .ok_or_else(|| fail(solver))?;
            solver.unify_dim(dim, &Dim::Known(known), *why)
        };
        // Sizes and factors are below 2^64, so these products fit in u128;
        // their sums are checked.
        let span = |k: u128| (d * (k - 1)).checked_add(1);
        let reach = |o: u128, k: u128| span(k).and_then(|e| (s * (o - 1)).checked_add(e));
        if *padded {
            return match (i, o) {
                (Some(i), Some(o)) if i != s * o => Err(fail(self)),
                (Some(_), Some(_)) => Ok(()),
                (None, Some(o)) => set(self, input, Some(s * o)),
                (Some(i), None) => set(self, over, (i % s == 0).then(|| i / s)),
                (None, None) => {
                    self.defer(c.clone(), &unknown, None);
                    Ok(())
                }
            };
        }
        // Without padding: input = s (o - 1) + d (k - 1) + 1.
        match (i, o, k) {
            (Some(i), Some(o), Some(k)) if reach(o, k) != Some(i) => Err(fail(self)),
            (Some(_), Some(_), Some(_)) => Ok(()),
            (None, Some(o), Some(k)) => set(self, input, reach(o, k)),
            (Some(i), None, Some(k)) => {
                let o = span(k)
                    .filter(|&e| i >= e && (i - e) % s == 0)
                    .map(|e| (i - e) / s + 1);
                set(self, over, o)
            }
            (Some(i), Some(o), None) => {
                let rest = i.checked_sub(s * (o - 1) + 1);
                let k = rest.filter(|r| r % d == 0).map(|r| r / d + 1);
                set(self, kernel, k)
            }
            _ => {
                self.defer(c.clone(), &unknown, None);
                Ok(())
            }
        }
    }

    /// A convolution's sizes where a run-time size is among them: the
    /// output from the input (`w/2` padded, with the guard that the stride
    /// divides; `(w-3)/2+1` without padding, with the guards that the
    /// window fits and the stride divides what is left), the input from
    /// the output, all three checked when known (a guard unless the
    /// e-graph shows it). A kernel size from the other two is refused.
    fn symbolic_affine(&mut self, c: Constraint) -> Result<(), ShapeError> {
        let Constraint::DimAffine {
            input,
            over,
            kernel,
            stride,
            dilation,
            padded,
            why,
        } = &c
        else {
            return Ok(());
        };
        let (s, d) = (stride.get(), dilation.get());
        let mut unknown = Vec::new();
        let mut value = |solver: &mut Self, dim: &Dim| -> Result<Option<KnownDim>, ShapeError> {
            Ok(match solver.env.resolve_dim(dim, *why)? {
                ResolvedDim::Known { value, .. } => Some(value),
                ResolvedDim::Var(v) => {
                    unknown.push(v);
                    None
                }
            })
        };
        let (i, o, k) = (
            value(self, input)?,
            value(self, over)?,
            value(self, kernel)?,
        );
        let unsupported = |solver: &Self, size: &KnownDim| ShapeError::SymbolicUnsupported {
            context: solver.origin_arc(why.origin),
            what: "a convolution's kernel size",
            size: size.to_string(),
        };
        // Ragged sizes were refused before this constraint got here.
        let sym = |k: &KnownDim| match k.extent() {
            Size::Symbolic(x) => x.clone(),
            Size::Static(_) | Size::Ragged => {
                SymSize::from_expr(crate::symbolic::size_expr(k.extent()))
            }
        };
        let known = |size: SymSize| KnownDim::of_size(crate::symbolic::simplified(&size));
        let divides = |solver: &mut Self, what: SymSize| {
            // `what % s == 0`, unless the stride is 1.
            if s > 1 {
                let rest = known(what.remainder_static(s));
                let zero = KnownDim::sized(0);
                if !symbolic_equal(&rest, &zero) {
                    solver
                        .guards
                        .push_back((RawGuard::Equal(rest, *why, zero, *why), *why));
                }
            }
        };
        // The input a window of `k` taps over `o` outputs reads:
        // s o - s + d (k - 1) + 1, the constants folded where `k` is.
        let reach = |o: &KnownDim, k: &KnownDim| -> SymSize {
            let so = sym(o).times_static(s);
            match (padded, k.static_size()) {
                (true, _) => so,
                (false, Some(taps)) => {
                    let span = d.saturating_mul(taps.saturating_sub(1)).saturating_add(1);
                    if span >= s {
                        so.plus_static(span - s)
                    } else {
                        so.minus_static(s - span)
                    }
                }
                (false, None) => so
                    .plus(&sym(k).minus_static(1).times_static(d))
                    .plus_static(1)
                    .minus_static(s),
            }
        };
        match (i, o, k) {
            (Some(i), Some(o), Some(k)) => {
                let r = known(reach(&o, &k));
                if !symbolic_equal(&i, &r) {
                    self.guards
                        .push_back((RawGuard::Equal(i, *why, r, *why), *why));
                }
                Ok(())
            }
            (None, Some(o), Some(k)) => {
                let r = known(reach(&o, &k));
                self.unify_dim(input, &Dim::Known(r), *why)
            }
            (Some(i), None, _) if *padded => {
                divides(self, sym(&i));
                let o = known(sym(&i).divided_by_static(s));
                self.unify_dim(over, &Dim::Known(o), *why)
            }
            (Some(i), None, Some(k)) => {
                let Some(taps) = k.static_size() else {
                    return Err(unsupported(self, &k));
                };
                // The window spans d (k - 1) + 1 input elements.
                let span = d.saturating_mul(taps.saturating_sub(1)).saturating_add(1);
                if span > 1 {
                    self.guards
                        .push_back((RawGuard::AtLeast(i.clone(), *why, span), *why));
                }
                let o = if s == 1 {
                    known(sym(&i).minus_static(span - 1))
                } else {
                    let rest = sym(&i).minus_static(span);
                    divides(self, rest.clone());
                    known(rest.divided_by_static(s).plus_static(1))
                };
                self.unify_dim(over, &Dim::Known(o), *why)
            }
            (Some(i), Some(_), None) if !*padded => Err(unsupported(self, &i)),
            _ => {
                self.defer(c.clone(), &unknown, None);
                Ok(())
            }
        }
    }

    /// The `affine` error for a convolution, with the sizes known now.
    pub(crate) fn affine_error(&self, c: &Constraint) -> ShapeError {
        let Constraint::DimAffine {
            input,
            over,
            kernel,
            stride,
            dilation,
            padded,
            why,
        } = c
        else {
            return ShapeError::Unsolved { what: "dim", id: 0 };
        };
        let known = |d: &Dim| match crate::env::resolve_dim(&mut self.env.read_only(), d, *why) {
            Ok(ResolvedDim::Known { value, .. }) => Some(value.size()),
            _ => None,
        };
        ShapeError::Affine {
            context: self.origin_arc(why.origin),
            axis: why.axis_from_end(),
            problem: AffineProblem {
                input: known(input),
                over: known(over),
                kernel: known(kernel),
                stride: stride.get(),
                dilation: dilation.get(),
                padded: *padded,
            },
        }
    }

    /// The size finalization's defaults give an unknown dim: 1, unless a
    /// fixed index needs more of it or of a dim below it (which it must
    /// then equal, since only 1 broadcasts), with the reason for that; or
    /// a run-time size it or a dim below it must broadcast from, with
    /// where that size came from.
    pub(crate) fn least_size(&self, v: DimVar) -> Option<(KnownDim, Why)> {
        if !self.has_minimums {
            return None;
        }
        let mut best: Option<(NonZeroU64, Why)> = None;
        // A run-time size below wins over a number (which it then must
        // reach: a guard); several broadcast to the largest of them, in
        // an order by name, whatever the order of the facts (each then
        // meets it in a guard: 1 or that largest, numpy's rule exactly).
        let mut symbols: Vec<(KnownDim, String, Why)> = Vec::new();
        // A ragged size below, when no run-time size is: var meeting a
        // fixed size gives the fixed size, so it only wins over nothing.
        let mut ragged: Option<(KnownDim, Why)> = None;
        let mut seen = std::collections::BTreeSet::from([v]);
        let mut todo = vec![v];
        while let Some(u) = todo.pop() {
            let Some(b) = self.env.dim_bounds(u) else {
                continue;
            };
            for c in b.watchers.iter() {
                match c {
                    Constraint::DimAtLeast { min, why, .. }
                        if best.is_none_or(|(m, _)| *min > m) =>
                    {
                        best = Some((*min, *why));
                    }
                    Constraint::DimIneq { subr, why, .. } => {
                        let resolved = resolve_dim(&mut self.env.read_only(), subr, *why);
                        if let Ok(ResolvedDim::Known { value, source, .. }) = resolved {
                            if value.symbolic_size().is_some() {
                                let text = value.to_string();
                                symbols.push((value, text, source));
                            } else if value.is_ragged() {
                                ragged.get_or_insert((value, source));
                            }
                        }
                    }
                    _ => {}
                }
            }
            for &(s, _) in &b.subr {
                if seen.insert(s) {
                    todo.push(s);
                }
            }
        }
        symbols.sort_by(|a, b| a.1.cmp(&b.1));
        symbols.dedup_by(|a, b| a.1 == b.1);
        let mut it = symbols.into_iter();
        if let Some((first, _, why)) = it.next() {
            let mut size = first.symbolic_size().cloned()?;
            for (k, _, _) in it {
                size = size.max(k.symbolic_size()?);
            }
            return Some((KnownDim::symbolic(size), why));
        }
        if best.is_none() {
            return ragged;
        }
        best.map(|(m, why)| (KnownDim::new(m), why))
    }

    /// A row that carries its own constraint contributes it once it is used.
    fn row_constraints_of(&mut self, r: &Row, why: Why) {
        match r.constraint {
            shape_core::RowConstraint::TotalElems(total) => {
                let row = Row {
                    constraint: shape_core::RowConstraint::Unconstrained,
                    ..r.clone()
                };
                self.requeue(Constraint::TotalElems { row, total, why });
            }
            shape_core::RowConstraint::Unconstrained => {}
        }
    }

    fn fact(&self, value: KnownDim, source: Why) -> DimFact {
        DimFact {
            value,
            origin: self.origin_arc(source.origin),
            axis_from_end: source.axis_from_end(),
        }
    }

    // ----- dims -----------------------------------------------------------

    fn unify_dim(&mut self, a: &Dim, b: &Dim, why: Why) -> Result<(), ShapeError> {
        let ra = self.env.resolve_dim(a, why)?;
        let rb = self.env.resolve_dim(b, why)?;
        match (ra, rb) {
            (ResolvedDim::Var(v), ResolvedDim::Var(w)) => {
                if v != w {
                    // What is recorded on the variable bound moves to the
                    // other: the one with less recorded goes, so that a
                    // chain of equalities through a variable with many
                    // relations does not move them at every step (union
                    // by size: each relation moves O(log n) times).
                    let (v, w) = if self.env.dim_load(v) > self.env.dim_load(w) {
                        (w, v)
                    } else {
                        (v, w)
                    };
                    self.bind_dim(v, Dim::Var(w), why, why);
                }
                Ok(())
            }
            (
                ResolvedDim::Var(v),
                ResolvedDim::Known {
                    value,
                    source,
                    holder,
                },
            )
            | (
                ResolvedDim::Known {
                    value,
                    source,
                    holder,
                },
                ResolvedDim::Var(v),
            ) => {
                self.bind_dim_from(v, Dim::Known(value), why, source, holder);
                Ok(())
            }
            (ra @ ResolvedDim::Known { .. }, rb @ ResolvedDim::Known { .. }) => {
                self.agree(ra, rb, why, Relation::Equal)
            }
        }
    }

    /// Two known sizes that must be equal: check sizes, then merge labels.
    fn agree(
        &mut self,
        a: ResolvedDim,
        b: ResolvedDim,
        why: Why,
        relation: Relation,
    ) -> Result<(), ShapeError> {
        let (
            ResolvedDim::Known {
                value: x,
                source: sx,
                holder: hx,
            },
            ResolvedDim::Known {
                value: y,
                source: sy,
                holder: hy,
            },
        ) = (a, b)
        else {
            return Ok(());
        };
        let ragged = x.is_ragged() || y.is_ragged();
        let symbolic = x.symbolic_size().is_some() || y.symbolic_size().is_some();
        if x.same_size(&y) || (ragged && relation == Relation::Broadcasts) {
            // Equal; or DyND's rule for a ragged axis, which broadcasts
            // with var, 1 or n, each row's length checked (1 or the length
            // it meets) when the data is known, where the run lowers the
            // operation row by row (`crate::ragged`).
        } else if symbolic && !ragged {
            if !symbolic_equal(&x, &y) {
                let guard = match relation {
                    Relation::Equal => RawGuard::Equal(x.clone(), sx, y.clone(), sy),
                    Relation::Broadcasts => RawGuard::Broadcasts(x.clone(), sx, y.clone(), sy),
                };
                self.guards.push_back((guard, why));
            }
        } else {
            // Different numbers; or a ragged axis that must equal a size
            // other than ragged, which its rows' lengths are not.
            return Err(ShapeError::DimMismatch {
                context: self.origin_arc(why.origin),
                axis: why.axis_from_end(),
                relation,
                left: Box::new(self.fact(x, sx)),
                right: Box::new(self.fact(y, sy)),
            });
        }
        if !x.labels_agree(&y) {
            return Err(ShapeError::LabelMismatch {
                context: self.origin_arc(why.origin),
                axis: why.axis_from_end(),
                left: Box::new(self.fact(x, sx)),
                right: Box::new(self.fact(y, sy)),
            });
        }
        // An unlabeled size takes the label of the other side.
        match (x.label(), y.label(), hx, hy) {
            (None, Some(l), Some(h), _) => self.relabel(h, l.clone()),
            (Some(l), None, _, Some(h)) => self.relabel(h, l.clone()),
            _ => {}
        }
        Ok(())
    }

    fn relabel(&mut self, v: DimVar, label: shape_core::Label) {
        self.env.relabel(v, label);
    }

    /// Binds an unsolved variable and re-emits what was recorded about it.
    pub(crate) fn bind_dim(&mut self, v: DimVar, value: Dim, why: Why, source: Why) {
        self.bind_dim_from(v, value, why, source, None)
    }

    /// [`Solver::bind_dim`] to a size that `from`, a solved variable,
    /// holds: provenance goes on through `from`.
    pub(crate) fn bind_dim_from(
        &mut self,
        v: DimVar,
        value: Dim,
        why: Why,
        source: Why,
        from: Option<DimVar>,
    ) {
        let entry = match &value {
            Dim::Known(k) => DimEntry::known(k.clone(), why, source, from),
            &Dim::Var(to) => DimEntry::Alias { to, next: to, why },
        };
        // Read through the shared pointer: the undo log may hold it too.
        let Some(DimEntry::Open(bounds)) = self.env.set_dim(v, entry) else {
            return;
        };
        // What was recorded against `v` is retried against `v` itself, not
        // against a copy of its value: resolving `v` gives the value with
        // its source, so a size passed on keeps the fact it came from (a
        // declaration, or finalization's default) rather than taking the
        // relation that passed it on as its source.
        let value = Dim::Var(v);
        for &(c, cw) in &bounds.cur {
            self.requeue(Constraint::DimIneq {
                cur: Dim::Var(c),
                subr: value.clone(),
                why: cw,
            });
        }
        for &(s, sw) in &bounds.subr {
            self.requeue(Constraint::DimIneq {
                cur: value.clone(),
                subr: Dim::Var(s),
                why: sw,
            });
        }
        if let Some((lub, lw)) = &bounds.lub {
            self.requeue(Constraint::DimIneq {
                cur: Dim::Known(lub.clone()),
                subr: value,
                why: *lw,
            });
        }
        for c in bounds.watchers.iter() {
            self.requeue(c.clone());
        }
    }

    fn dim_ineq(&mut self, cur: &Dim, subr: &Dim, why: Why) -> Result<(), ShapeError> {
        let rc = self.env.resolve_dim(cur, why)?;
        let rs = self.env.resolve_dim(subr, why)?;
        match (rc, rs) {
            // n >= m holds when m = 1 (broadcast) or n = m (labels included).
            (ResolvedDim::Known { .. }, ResolvedDim::Known { value: m, .. }) if m.is_one() => {
                Ok(())
            }
            (rc @ ResolvedDim::Known { .. }, rs @ ResolvedDim::Known { .. }) => {
                self.agree(rc, rs, why, Relation::Broadcasts)
            }
            (ResolvedDim::Var(v), ResolvedDim::Known { value, .. })
                if value.symbolic_size().is_some() || value.is_ragged() =>
            {
                // v >= b for a run-time b: v is b, or anything when b is 1.
                // Waits on v, whose value then meets b (a guard if it is
                // not b); finalization closes v to b (`least_size`). The
                // same for a ragged `var`, whose rows may be 1.
                self.has_minimums = true;
                // `subr` as given: resolved later, it still names where
                // the run-time size came from.
                let c = Constraint::DimIneq {
                    cur: Dim::Var(v),
                    subr: subr.clone(),
                    why,
                };
                self.defer(c, &[v], None);
                Ok(())
            }
            (
                ResolvedDim::Var(v),
                ResolvedDim::Known {
                    value,
                    source,
                    holder,
                },
            ) => {
                // v >= m with m > 1 leaves only v = m.
                if !value.is_one() {
                    self.bind_dim_from(v, Dim::Known(value), why, source, holder);
                }
                Ok(())
            }
            (ResolvedDim::Known { value, source, .. }, ResolvedDim::Var(w)) => {
                if value.is_one() {
                    self.bind_dim(w, Dim::Known(value), why, source);
                } else {
                    self.add_lub(w, value, source);
                }
                Ok(())
            }
            (ResolvedDim::Var(v), ResolvedDim::Var(w)) => {
                if v != w {
                    self.record_dim_ineq(v, w, why);
                }
                Ok(())
            }
        }
    }

    /// `n >= w` for an unsolved `w` and `n > 1`.
    fn add_lub(&mut self, w: DimVar, n: KnownDim, source: Why) {
        let Some(bounds) = self.env.dim_bounds(w) else {
            return;
        };
        match &bounds.lub {
            None => {
                let subs: Vec<(DimVar, Why)> = bounds.subr.clone();
                self.env
                    .update_dim_bounds(w, |b| b.lub = Some((n.clone(), source)));
                for (s, _) in subs {
                    self.requeue(Constraint::DimIneq {
                        cur: Dim::Known(n.clone()),
                        subr: Dim::Var(s),
                        why: source,
                    });
                }
            }
            Some((l, _)) if l.same_size(&n) && l.labels_agree(&n) => {
                if l.label().is_none() && n.label().is_some() {
                    self.env.update_dim_bounds(w, |b| b.lub = Some((n, source)));
                }
            }
            Some(_) => {
                // Two different upper bounds above 1: only 1 is below both.
                self.bind_dim(w, Dim::Known(KnownDim::one()), source, source);
            }
        }
    }

    fn record_dim_ineq(&mut self, v: DimVar, w: DimVar, why: Why) {
        let mut lub = None;
        let mut fresh = false;
        self.env.update_dim_bounds(v, |b| {
            if !b.subr.iter().any(|(s, _)| *s == w) {
                b.subr.push((w, why));
                fresh = true;
            }
            lub = b.lub.clone();
        });
        if !fresh {
            return;
        }
        self.env.update_dim_bounds(w, |b| b.cur.push((v, why)));
        if let Some((l, lw)) = lub {
            self.requeue(Constraint::DimIneq {
                cur: Dim::Known(l),
                subr: Dim::Var(w),
                why: lw,
            });
        }
    }

    // ----- rows -----------------------------------------------------------

    /// A row for messages: known sizes as numbers, unknown ones as `?`,
    /// and `...` for leading axes still unknown. Variable ids mean nothing
    /// to a user, so they are not shown.
    pub(crate) fn row_fact(&self, r: &ResolvedRow<'_>) -> RowFact {
        let dims = r
            .dims
            .iter()
            .map(|d| match self.resolve_dim(d) {
                Ok(Dim::Known(k)) => Some(k),
                _ => None,
            })
            .collect();
        RowFact::new(matches!(r.tail, RowTail::Open(_)), dims)
    }

    fn unify_row(&mut self, a: &Row, b: &Row, why: Why) -> Result<(), ShapeError> {
        let ra = self.env.resolve_row(a)?;
        let rb = self.env.resolve_row(b)?;
        let (la, lb) = (ra.dims.len(), rb.dims.len());
        let mismatch = |s: &Self| ShapeError::AxisCountMismatch {
            context: s.origin_arc(why.origin),
            relation: Relation::Equal,
            left_row: Box::new(s.row_fact(&ra)),
            left_len: la,
            right_row: Box::new(s.row_fact(&rb)),
            right_len: lb,
        };
        match (ra.tail, rb.tail) {
            (RowTail::Closed, RowTail::Closed) if la != lb => return Err(mismatch(self)),
            (RowTail::Open(_), RowTail::Closed) if la > lb => return Err(mismatch(self)),
            (RowTail::Closed, RowTail::Open(_)) if la < lb => return Err(mismatch(self)),
            (RowTail::Open(v), RowTail::Open(w)) if v == w && la != lb => {
                return Err(ShapeError::InfiniteAxes {
                    context: self.origin_arc(why.origin),
                    row_var: v,
                    cycle: Box::new(AxesCycle::SelfEqual {
                        left: self.row_fact(&ra),
                        right: self.row_fact(&rb),
                    }),
                })
            }
            _ => {}
        }
        for i in 0..la.min(lb) {
            // Axis pairs are simplified right away rather than queued: the
            // same rule, without a round trip through the work queue.
            self.unify_dim(&ra.dims[la - 1 - i], &rb.dims[lb - 1 - i], why.at_axis(i))?;
        }
        match (ra.tail, rb.tail) {
            (RowTail::Open(v), RowTail::Closed) => {
                if la == lb {
                    self.inherit_default(b.tail, v)?;
                }
                self.bind_row(v, &rb.dims[..lb - la], RowTail::Closed, why)
            }
            (RowTail::Closed, RowTail::Open(w)) => {
                if la == lb {
                    self.inherit_default(a.tail, w)?;
                }
                self.bind_row(w, &ra.dims[..la - lb], RowTail::Closed, why)
            }
            (RowTail::Open(v), RowTail::Open(w)) if v != w => {
                // Two aliases: the one with less stored is bound, as for
                // dims (see `unify_dim`).
                if la == lb && self.env.row_load(v) > self.env.row_load(w) {
                    self.bind_row(w, &[], RowTail::Open(v), why)
                } else if la <= lb {
                    self.bind_row(v, &rb.dims[..lb - la], RowTail::Open(w), why)
                } else {
                    self.bind_row(w, &ra.dims[..la - lb], RowTail::Open(v), why)
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// `to` is about to be closed empty by the row ending in `from`: if a
    /// default closed that row, `to` is empty only by that default too
    /// (see `defaulted_rows`). Free before finalization's first default.
    fn inherit_default(&mut self, from: RowTail, to: RowVar) -> Result<(), ShapeError> {
        if !self.defaulted_rows.is_empty()
            && crate::finalize::closing_var(&self.env, from)?
                .is_some_and(|v| self.defaulted_rows.contains(v.0))
        {
            self.defaulted_rows.insert(to.0);
        }
        Ok(())
    }

    /// Binds an unsolved row variable to `dims` followed by `tail`, and
    /// retries what was stored on it.
    pub(crate) fn bind_row(&mut self, v: RowVar, dims: &[Dim], tail: RowTail, _why: Why) {
        let to_empty = tail == RowTail::Closed && dims.is_empty();
        let entry = self.env.solved_row(dims, tail);
        // Read through the shared pointer: the undo log may hold it too.
        let Some(RowEntry::Open { bounds, .. }) = self.env.set_row(v, entry) else {
            return;
        };
        for s in bounds.uppers() {
            if to_empty {
                // `cur >= [..v..]` holds for any `cur` once `v` is the empty
                // closed row: retrying it would resolve both rows and find
                // nothing to do. It is counted as the step it would have
                // taken (a failed transaction resets the count either way).
                self.steps += 1;
            } else {
                self.queue.push(s.to_constraint());
            }
        }
        for s in bounds.lowers() {
            self.queue.push(s.to_constraint());
        }
        for c in bounds.watchers.iter() {
            self.requeue(c.clone());
        }
    }

    fn row_ineq(&mut self, cur: Row, subr: Row, why: Why) -> Result<(), ShapeError> {
        let mut rc = self.env.resolve_row(&cur)?;
        let rs = self.env.resolve_row(&subr)?;
        let (mut lc, ls) = (rc.dims.len(), rs.dims.len());
        if lc < ls {
            match rc.tail {
                RowTail::Closed => {
                    return Err(ShapeError::AxisCountMismatch {
                        context: self.origin_arc(why.origin),
                        relation: Relation::Broadcasts,
                        left_row: Box::new(self.row_fact(&rc)),
                        left_len: lc,
                        right_row: Box::new(self.row_fact(&rs)),
                        right_len: ls,
                    })
                }
                RowTail::Open(cv) => {
                    // The result must have at least the operand's axes: expand
                    // it with a template of fresh dim variables, then go on.
                    if rs.tail == RowTail::Open(cv) {
                        return Err(ShapeError::InfiniteAxes {
                            context: self.origin_arc(why.origin),
                            row_var: cv,
                            cycle: Box::new(AxesCycle::SelfEqual {
                                left: self.row_fact(&rc),
                                right: self.row_fact(&rs),
                            }),
                        });
                    }
                    if let RowTail::Open(sv) = rs.tail {
                        let gain = (ls - lc) as i64;
                        if let Some(cycle) =
                            find_rank_cycle(&mut self.env, &self.watched_rows, sv, cv, gain)?
                        {
                            let step = CycleStep::Broadcast {
                                result: self.row_fact(&rc),
                                operand: self.row_fact(&rs),
                            };
                            return Err(self.rank_cycle_error(cv, step, why, &cycle));
                        }
                    }
                    let sub_depth = match rs.tail {
                        RowTail::Open(sv) => self.env.row_depth(sv),
                        RowTail::Closed => 0,
                    };
                    let depth = 1 + self.env.row_depth(cv).max(sub_depth);
                    if self.too_deep(depth) {
                        return Err(ShapeError::InfiniteAxes {
                            context: self.origin_arc(why.origin),
                            row_var: cv,
                            cycle: Box::new(AxesCycle::TooDeep {
                                step: CycleStep::Broadcast {
                                    result: self.row_fact(&rc),
                                    operand: self.row_fact(&rs),
                                },
                            }),
                        });
                    }
                    let nv = self.mint_row(depth);
                    // Usually one to three axes: on the stack (a list for
                    // each broadcast that grows a row was a tenth of the
                    // allocations of building the benchmark network).
                    let n = ls - lc;
                    if n <= FRESH_INLINE {
                        let fresh: [Dim; FRESH_INLINE] = std::array::from_fn(|i| {
                            Dim::Var(if i < n { self.mint_dim() } else { DimVar(0) })
                        });
                        self.bind_row(cv, &fresh[..n], RowTail::Open(nv), why);
                    } else {
                        let fresh: Vec<Dim> = (0..n).map(|_| Dim::Var(self.mint_dim())).collect();
                        self.bind_row(cv, &fresh, RowTail::Open(nv), why);
                    }
                    // Now long enough. Only `cv` changed, and `subr` does not
                    // pass through it (its resolution stops at its own open
                    // variable, which is not `cv`), so only `cur` is resolved
                    // again.
                    rc = self.env.resolve_row(&cur)?;
                    lc = rc.dims.len();
                }
            }
        }
        for i in 0..ls {
            self.dim_ineq(&rc.dims[lc - 1 - i], &rs.dims[ls - 1 - i], why.at_axis(i))?;
        }
        let RowTail::Open(sv) = rs.tail else {
            // A closed operand: the result's extra leading axes are free.
            return Ok(());
        };
        let prefix = &rc.dims[..lc - ls];
        // What is stored has its last `ls` axes matched already: messages
        // about it count axes from there.
        let stored_why = why.at_axis(ls);
        match rc.tail {
            RowTail::Closed if prefix.is_empty() => {
                self.inherit_default(cur.tail, sv)?;
                self.bind_row(sv, &[], RowTail::Closed, why);
            }
            RowTail::Closed => {
                let stored = StoredIneq {
                    cur: StoredRow::new(prefix, RowTail::Closed),
                    subr: sv,
                    why: stored_why,
                    upper: true,
                };
                self.env.update_row_bounds(sv, |b| b.ineqs.push(stored));
            }
            RowTail::Open(cv) => {
                if cv == sv && prefix.is_empty() {
                    return Ok(());
                }
                let stored = StoredIneq {
                    cur: StoredRow::new(prefix, RowTail::Open(cv)),
                    subr: sv,
                    why: stored_why,
                    upper: false,
                };
                if cv == sv {
                    self.env.update_row_bounds(sv, |b| b.ineqs.push(stored));
                } else {
                    let copy = stored.clone();
                    self.env.update_row_bounds(cv, |b| b.ineqs.push(copy));
                    let stored = StoredIneq {
                        upper: true,
                        ..stored
                    };
                    self.env.update_row_bounds(sv, |b| b.ineqs.push(stored));
                }
            }
        }
        Ok(())
    }

    /// `dest >= source` one way ([`Constraint::Assign`]): once both rows
    /// are closed, aligned at the end, each known source size meets its
    /// destination axis as in `dim_ineq` (which only ever decides the
    /// destination from it); an unknown source size waits, and so does the
    /// whole while a row is open, so the destination never bounds the
    /// source.
    fn assign(&mut self, dest: Row, source: Row, why: Why) -> Result<(), ShapeError> {
        let rd = self.env.resolve_row(&dest)?;
        let rs = self.env.resolve_row(&source)?;
        let open: Vec<RowVar> = [rd.tail, rs.tail]
            .into_iter()
            .filter_map(|t| match t {
                RowTail::Open(v) => Some(v),
                RowTail::Closed => None,
            })
            .collect();
        let c = Constraint::Assign {
            dest: dest.clone(),
            source: source.clone(),
            why,
        };
        if !open.is_empty() {
            for r in open {
                self.defer(c.clone(), &[], Some(r));
            }
            return Ok(());
        }
        let (ld, ls) = (rd.dims.len(), rs.dims.len());
        if ld < ls {
            return Err(ShapeError::AxisCountMismatch {
                context: self.origin_arc(why.origin),
                relation: Relation::Broadcasts,
                left_row: Box::new(self.row_fact(&rd)),
                left_len: ld,
                right_row: Box::new(self.row_fact(&rs)),
                right_len: ls,
            });
        }
        let mut waiting = Vec::new();
        for i in 0..ls {
            let (d, s) = (&rd.dims[ld - 1 - i], &rs.dims[ls - 1 - i]);
            match self.env.resolve_dim(s, why)? {
                ResolvedDim::Var(v) => waiting.push(v),
                ResolvedDim::Known { .. } => self.dim_ineq(d, s, why.at_axis(i))?,
            }
        }
        if !waiting.is_empty() {
            self.defer(c, &waiting, None);
        }
        Ok(())
    }

    /// Whether a row made at this template depth is a sign of a cycle that
    /// adds axes on every round (a backstop: the rank-cycle guard finds
    /// such cycles first).
    fn too_deep(&self, depth: u32) -> bool {
        depth > 2 * self.api_row_vars + 64
    }

    /// The error for a cycle of broadcasting constraints that adds axes on
    /// every round: the constraint that closed it, and those on the way.
    ///
    /// `step` is the constraint that would make `grows` longer.
    fn rank_cycle_error(
        &self,
        grows: RowVar,
        step: CycleStep,
        why: Why,
        cycle: &RankCycle,
    ) -> ShapeError {
        ShapeError::InfiniteAxes {
            context: self.origin_arc(why.origin),
            row_var: grows,
            cycle: Box::new(AxesCycle::Ranks {
                step,
                via: cycle
                    .via
                    .iter()
                    .map(|w| self.origin_arc(w.origin))
                    .collect(),
                surplus: cycle.surplus.unsigned_abs(),
                cost: cycle.cost.unsigned_abs(),
            }),
        }
    }

    // ----- row constraints ------------------------------------------------

    /// Stores `c` on each unsolved variable it waits for.
    /// A variable keeps one copy of each waiting constraint: retrying a
    /// constraint re-defers it on the unknowns that remain, and without the
    /// check the copies would multiply with every retry.
    fn defer(&mut self, c: Constraint, dims: &[DimVar], row: Option<RowVar>) {
        self.watched_dims.extend(dims.iter().copied());
        self.watched_rows.extend(row);
        for &v in dims {
            if self
                .env
                .dim_bounds(v)
                .is_some_and(|b| !b.watchers.contains(&c))
            {
                let copy = c.clone();
                self.env.update_dim_bounds(v, |b| b.watchers.push(copy));
            }
        }
        if let Some(r) = row {
            if self
                .env
                .row_bounds(r)
                .is_some_and(|b| !b.watchers.contains(&c))
            {
                self.env.update_row_bounds(r, |b| b.watchers.push(c));
            }
        }
    }

    fn total_elems(
        &mut self,
        row: Row,
        total: std::num::NonZeroU64,
        why: Why,
    ) -> Result<(), ShapeError> {
        let rr = self.env.resolve_row(&row)?;
        let mut known: u128 = 1;
        let mut vars: Vec<DimVar> = Vec::new();
        let mut symbols: Vec<Size> = Vec::new();
        for d in rr.dims.iter() {
            match self.env.resolve_dim(d, why)? {
                ResolvedDim::Known { value, source, .. } => match value.extent() {
                    Size::Static(n) => known = known.saturating_mul(*n as u128),
                    Size::Symbolic(_) => symbols.push(value.extent().clone()),
                    Size::Ragged => {
                        return Err(self.ragged_error(value, source, why, "an element count"))
                    }
                },
                ResolvedDim::Var(v) => vars.push(v),
            }
        }
        if !symbols.is_empty() {
            let tail = rr.tail;
            return self.symbolic_total(row, tail, total, known, &symbols, &vars, why);
        }
        let t = total.get() as u128;
        let fail = |s: &Self, reason: TotalElemsReason| ShapeError::TotalElems {
            context: s.origin_arc(why.origin),
            row: Box::new(s.row_fact(&rr)),
            total: total.get(),
            known_product: u64::try_from(known).unwrap_or(u64::MAX),
            reason,
        };
        if !t.is_multiple_of(known) {
            return Err(fail(self, TotalElemsReason::NotDivisible));
        }
        let quotient = t / known;
        let mut distinct = vars.clone();
        distinct.sort();
        distinct.dedup();
        // Element-count constraints are rare: a copy of the row is cheap here.
        let c = Constraint::TotalElems {
            row: row.clone(),
            total,
            why,
        };
        match (rr.tail, distinct.as_slice()) {
            (RowTail::Closed, []) => {
                if quotient != 1 {
                    return Err(fail(self, TotalElemsReason::NotEqual));
                }
            }
            (RowTail::Closed, [v]) => {
                // v appears `k` times: its size is the k-th root.
                let k = vars.len() as u32;
                match integer_root(quotient, k).and_then(|r| KnownDim::of(r as u64)) {
                    Some(size) => self.bind_dim(*v, Dim::Known(size), why, why),
                    None => return Err(fail(self, TotalElemsReason::NoIntegerRoot { power: k })),
                }
            }
            (RowTail::Closed, _) if quotient == 1 => {
                // Sizes are at least 1: a product of 1 leaves only 1s.
                for &v in &distinct {
                    self.bind_dim(v, Dim::Known(KnownDim::one()), why, why);
                }
            }
            (RowTail::Closed, _) => self.defer(c, &distinct, None),
            (RowTail::Open(r), _) => self.defer(c, &distinct, Some(r)),
        }
        Ok(())
    }

    /// An element count over a row with run-time sizes: with every size
    /// known, the product must equal the count (a guard unless the e-graph
    /// shows it); with unknowns it waits, and is checked once they are
    /// known (the count divided by a run-time size is not a size inference
    /// can name).
    #[allow(clippy::too_many_arguments)]
    fn symbolic_total(
        &mut self,
        row: Row,
        tail: RowTail,
        total: std::num::NonZeroU64,
        known: u128,
        symbols: &[Size],
        vars: &[DimVar],
        why: Why,
    ) -> Result<(), ShapeError> {
        let mut factors: Vec<&Size> = symbols.iter().collect();
        let known = u64::try_from(known).ok().map(Size::Static);
        factors.extend(known.as_ref());
        let product = crate::symbolic::product(&factors);
        match (tail, vars, product) {
            (RowTail::Closed, [], Some(p)) => {
                let p = KnownDim::of_size(p);
                let t = KnownDim::new(total);
                if !symbolic_equal(&p, &t) {
                    self.guards
                        .push_back((RawGuard::Equal(p, why, t, why), why));
                }
                Ok(())
            }
            (RowTail::Closed, [], None) => Err(ShapeError::SymbolicUnsupported {
                context: self.origin_arc(why.origin),
                what: "an element count over a run-time size that overflows",
                size: symbols
                    .iter()
                    .map(Size::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
            // Waits for the unknowns: the check is made once they are known.
            (tail, _, _) => {
                let mut distinct = vars.to_vec();
                distinct.sort();
                distinct.dedup();
                let open = match tail {
                    RowTail::Open(r) => Some(r),
                    RowTail::Closed => None,
                };
                let c = Constraint::TotalElems { row, total, why };
                self.defer(c, &distinct, open);
                Ok(())
            }
        }
    }

    /// `total` is the sum of `parts`: decided once all but one of the
    /// sizes are known (one unknown part repeated `k` times takes a `k`-th
    /// of what is left); waits on the unknowns otherwise.
    fn dim_sum(&mut self, total: Dim, parts: Vec<Dim>, why: Why) -> Result<(), ShapeError> {
        let mut known: u128 = 0;
        let mut facts = Vec::with_capacity(parts.len());
        let mut unknown: Vec<DimVar> = Vec::new();
        let mut symbolic = false;
        for d in &parts {
            match self.env.resolve_dim(d, why)? {
                ResolvedDim::Known { value, .. } => {
                    symbolic |= value.symbolic_size().is_some();
                    known += u128::from(value.static_size().unwrap_or(0));
                    facts.push(Some(value));
                }
                ResolvedDim::Var(v) => {
                    unknown.push(v);
                    facts.push(None);
                }
            }
        }
        let whole = match self.env.resolve_dim(&total, why)? {
            ResolvedDim::Known { value, .. } => Ok(value),
            ResolvedDim::Var(v) => Err(v),
        };
        let fail = |s: &Self, reason: SumReason| ShapeError::SumMismatch {
            context: s.origin_arc(why.origin),
            total: whole.clone().ok(),
            parts: facts.clone(),
            reason,
        };
        let mut distinct = unknown.clone();
        distinct.sort();
        distinct.dedup();
        if symbolic || whole.as_ref().is_ok_and(|t| t.symbolic_size().is_some()) {
            return self.symbolic_sum(total, parts, whole, facts, distinct, why);
        }
        if let (Err(t), true) = (&whole, parts.len() >= 2) {
            if distinct.contains(t) {
                // The whole is one of its own parts, and the others are at
                // least 1 each.
                return Err(fail(self, SumReason::PartsExceedTotal));
            }
        }
        match (&whole, distinct.as_slice()) {
            (Ok(t), []) => {
                if known != t.size() as u128 {
                    return Err(fail(self, SumReason::NotEqual));
                }
            }
            (Err(_), []) => {
                let size = u64::try_from(known).ok().map(KnownDim::sized);
                let Some(size) = size else {
                    return Err(fail(self, SumReason::Overflow));
                };
                self.requeue(Constraint::DimEq {
                    a: total,
                    b: Dim::Known(size),
                    why,
                });
            }
            (Ok(t), vars) => {
                // Each unknown part is at least 1.
                let left = (t.size() as u128).checked_sub(known + unknown.len() as u128);
                let Some(left) = left else {
                    return Err(fail(self, SumReason::PartsExceedTotal));
                };
                if let [v] = vars {
                    let k = unknown.len() as u128;
                    let rest = left + k;
                    if !rest.is_multiple_of(k) {
                        return Err(fail(self, SumReason::NotDivisible));
                    }
                    let size = KnownDim::of((rest / k) as u64).expect("at least 1");
                    self.bind_dim(*v, Dim::Known(size), why, why);
                } else if left == 0 {
                    // The total leaves exactly 1 for each unknown part:
                    // every one is 1, whatever the others are.
                    for &v in vars {
                        self.bind_dim(v, Dim::Known(KnownDim::one()), why, why);
                    }
                } else {
                    let c = Constraint::DimSum { total, parts, why };
                    self.defer(c, &distinct, None);
                }
            }
            (Err(t), _) => {
                let mut waits = distinct.clone();
                waits.push(*t);
                let c = Constraint::DimSum { total, parts, why };
                self.defer(c, &waits, None);
            }
        }
        Ok(())
    }

    /// A sum with run-time sizes among its parts or as its whole: the
    /// whole of known parts is their sum (`b+3`); a known whole is
    /// checked against them (a guard when the e-graph cannot show it); an
    /// unknown part would be a difference, which inference cannot name.
    fn symbolic_sum(
        &mut self,
        total: Dim,
        parts: Vec<Dim>,
        whole: Result<KnownDim, DimVar>,
        facts: Vec<Option<KnownDim>>,
        unknown: Vec<DimVar>,
        why: Why,
    ) -> Result<(), ShapeError> {
        if !unknown.is_empty() {
            if whole.is_err() {
                let mut waits = unknown;
                waits.extend(whole.err());
                let c = Constraint::DimSum { total, parts, why };
                self.defer(c, &waits, None);
                return Ok(());
            }
            return Err(ShapeError::SymbolicUnsupported {
                context: self.origin_arc(why.origin),
                what: "an unknown part of a concatenation",
                size: whole.map(|w| w.to_string()).unwrap_or_default(),
            });
        }
        let sizes: Vec<&Size> = facts.iter().flatten().map(KnownDim::extent).collect();
        let Some(sum) = crate::symbolic::sum(&sizes) else {
            return Err(ShapeError::SumMismatch {
                context: self.origin_arc(why.origin),
                total: whole.ok(),
                parts: facts,
                reason: SumReason::Overflow,
            });
        };
        let sum = KnownDim::of_size(sum);
        match whole {
            Err(_) => {
                self.requeue(Constraint::DimEq {
                    a: total,
                    b: Dim::Known(sum),
                    why,
                });
            }
            Ok(t) => {
                if !symbolic_equal(&t, &sum) {
                    self.guards
                        .push_back((RawGuard::Equal(t, why, sum, why), why));
                }
            }
        }
        Ok(())
    }

    /// `rest` is `whole` without its first axis.
    ///
    /// A closed `whole` decides `rest`, and a closed `rest` decides `whole`
    /// (a new first axis in front of it). While both are open the slice
    /// waits for either, so that finalization closes `whole` first, as an
    /// operand, and the slice decides `rest` from it.
    ///
    /// Once finalization has nothing else left to do (see
    /// [`Solver::match_open_slices`]), what the spelled-out axes say is
    /// settled: the end of the longer row is the end of the other, with the
    /// first axis of `whole` in front, which leaves `[..w.., y]` and
    /// `[..r..]` with `w` and `r` of equal length. Every lower bound on the
    /// lengths is then in axes spelled out, so that closing `w` or `r`
    /// empty cannot contradict the slice.
    fn drop_first(
        &mut self,
        whole: Row,
        rest: Row,
        first: Option<Dim>,
        why: Why,
    ) -> Result<(), ShapeError> {
        let rw = self.env.resolve_row(&whole)?;
        let rr = self.env.resolve_row(&rest)?;
        let (n, m) = (rw.dims.len(), rr.dims.len());
        let (w, r) = match (rw.tail, rr.tail) {
            (RowTail::Closed, rest_tail) => {
                return self.slice_closed_row(whole.tail, rest, &rw, rest_tail, first, why)
            }
            (RowTail::Open(_), RowTail::Closed) => {
                let first = first.unwrap_or_else(|| Dim::Var(self.mint_dim()));
                let dims = std::iter::once(first).chain(rr.dims.iter().cloned());
                self.requeue(Constraint::RowEq {
                    a: whole,
                    b: Row::closed(dims.collect()),
                    why,
                });
                return Ok(());
            }
            (RowTail::Open(w), RowTail::Open(r)) => (w, r),
        };
        if w == r && n != m + 1 {
            // The rest would be one axis shorter than a row that starts
            // with the very same variable, and ends the same way.
            return Err(ShapeError::InfiniteAxes {
                context: self.origin_arc(why.origin),
                row_var: w,
                cycle: Box::new(AxesCycle::SharedSliceRow),
            });
        }
        if n == 1 && m == 0 || !self.match_open_slices {
            // Nothing more to match, or not yet: wait for either side.
            let c = Constraint::DropFirst {
                whole,
                rest,
                first,
                why,
            };
            if w != r {
                self.defer(c.clone(), &[], Some(r));
            }
            self.defer(c, &[], Some(w));
            return Ok(());
        }
        self.match_slice_axes(&rw, &rr, (w, r), first, why)
    }

    /// A slice of a closed row: its first axis is the slice's (`first`,
    /// where a leading flank gives one), and the rest is the row's other
    /// axes; a row without axes has nothing to slice.
    fn slice_closed_row(
        &mut self,
        whole_tail: RowTail,
        rest: Row,
        rw: &ResolvedRow<'_>,
        rest_tail: RowTail,
        first: Option<Dim>,
        why: Why,
    ) -> Result<(), ShapeError> {
        let n = rw.dims.len();
        if n == 0 {
            let context = self.origin_arc(why.origin);
            let row = self.row_fact(rw);
            return Err(match first {
                // A leading flank longer than the row.
                Some(first) => ShapeError::AxisCountMismatch {
                    context,
                    relation: Relation::Equal,
                    left_row: Box::new(row),
                    left_len: 0,
                    right_row: Box::new(
                        RowFact::new(true, Vec::new())
                            .with_before(vec![self.resolve_dim(&first)?.as_known().cloned()]),
                    ),
                    right_len: 1,
                },
                None => ShapeError::NothingToSlice {
                    context,
                    row: Box::new(row),
                },
            });
        }
        if let Some(first) = first {
            self.requeue(Constraint::DimEq {
                a: rw.dims[0].clone(),
                b: first,
                why,
            });
        }
        // A whole closed by a default to its first axis alone
        // leaves the rest empty only by that default (a
        // parameter whose row is the rest is then not given).
        if let (1, RowTail::Open(r)) = (n, rest_tail) {
            self.inherit_default(whole_tail, r)?;
        }
        self.requeue(Constraint::RowEq {
            a: rest,
            b: Row::closed(rw.dims[1..].to_vec()),
            why,
        });
        Ok(())
    }

    /// A slice between two open rows: matches their spelled-out axes, so
    /// that one side's row variable gets the other's extra axes (after
    /// checking that no facts say the opposite, which would make it grow
    /// forever), and requeues what is left to match.
    fn match_slice_axes(
        &mut self,
        rw: &ResolvedRow<'_>,
        rr: &ResolvedRow<'_>,
        (w, r): (RowVar, RowVar),
        first: Option<Dim>,
        why: Why,
    ) -> Result<(), ShapeError> {
        let (n, m) = (rw.dims.len(), rr.dims.len());
        // Matching the spelled-out axes makes one side's row variable
        // longer than the other's: first make sure that no facts already
        // say the opposite (which would make it grow forever).
        let (grows, than, gain) = if n > m {
            (r, w, n - 1 - m)
        } else {
            (w, r, m + 1 - n)
        };
        if gain > 0 {
            let found =
                find_rank_cycle(&mut self.env, &self.watched_rows, than, grows, gain as i64)?;
            if let Some(cycle) = found {
                // `grows` must get more leading axes than `than` has.
                let step = CycleStep::Slice {
                    whole: self.row_fact(rw),
                    rest: self.row_fact(rr),
                    operand_grows: grows == w,
                };
                return Err(self.rank_cycle_error(grows, step, why, &cycle));
            }
        }
        // Fresh rows are one level deeper, as templates are (see `row_ineq`).
        let depth = 1 + self.env.row_depth(w).max(self.env.row_depth(r));
        if gain > 0 && self.too_deep(depth) {
            return Err(ShapeError::InfiniteAxes {
                context: self.origin_arc(why.origin),
                row_var: grows,
                cycle: Box::new(AxesCycle::TooDeep {
                    step: CycleStep::Slice {
                        whole: self.row_fact(rw),
                        rest: self.row_fact(rr),
                        operand_grows: grows == w,
                    },
                }),
            });
        }
        let (whole_left, rest_left) = if n > m {
            // `rest` ends with the axes of `whole` after its first.
            let r2 = if gain > 0 { self.mint_row(depth) } else { r };
            self.requeue(Constraint::RowEq {
                a: Row::open(r, rr.dims.to_vec()),
                b: Row::open(r2, rw.dims[1..].to_vec()),
                why,
            });
            (
                Row::open(w, vec![rw.dims[0].clone()]),
                Row::open(r2, vec![]),
            )
        } else {
            // `whole` ends with a first axis and then all of `rest`'s.
            // The new axis is the last of `first ++ r`, not `first` itself
            // (unless `r` turns out empty, which the requeued constraint
            // finds).
            let w2 = self.mint_row(depth);
            let last = Dim::Var(self.mint_dim());
            let dims = std::iter::once(last.clone()).chain(rr.dims.iter().cloned());
            self.requeue(Constraint::RowEq {
                a: Row::open(w, rw.dims.to_vec()),
                b: Row::open(w2, dims.collect()),
                why,
            });
            (Row::open(w2, vec![last]), Row::open(r, vec![]))
        };
        self.requeue(Constraint::DropFirst {
            whole: whole_left,
            rest: rest_left,
            first,
            why,
        });
        Ok(())
    }
}

/// Counts of what a [`Solver`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SolverStats {
    /// Dim variables created (by the API and by templates).
    pub dim_vars: usize,
    /// Row variables created.
    pub row_vars: usize,
    /// Constraint origins recorded.
    pub origins: usize,
    /// Constraint-processing steps taken.
    pub steps: u64,
}

/// What a transaction restores when it fails.
#[derive(Debug)]
struct Checkpoint {
    env: EnvSnapshot,
    origins: OriginMark,
    api_row_vars: u32,
    given: u64,
    steps: u64,
    guards: usize,
    /// The work an enclosing call had queued, set aside until this
    /// transaction ends.
    outer_queue: Option<WorkQueue>,
}

/// How many fresh axes a row grown by a broadcast takes without an
/// allocation (see `row_ineq`).
const FRESH_INLINE: usize = 4;

/// Pending constraints, by class: dim constraints first, then row
/// constraints, then the row-level ones that wait for whole rows. Taking the
/// cheapest, most local facts first makes the error a conflict reports less
/// dependent on the order constraints were added in.
#[derive(Clone, Debug, Default)]
struct WorkQueue {
    dims: Vec<Constraint>,
    rows: Vec<Constraint>,
    whole_rows: Vec<Constraint>,
}

impl WorkQueue {
    fn push(&mut self, c: Constraint) {
        match c {
            Constraint::DimEq { .. } | Constraint::DimIneq { .. } => self.dims.push(c),
            Constraint::RowEq { .. } | Constraint::RowIneq { .. } | Constraint::Assign { .. } => {
                self.rows.push(c)
            }
            Constraint::TotalElems { .. }
            | Constraint::DimSum { .. }
            | Constraint::DimAtLeast { .. }
            | Constraint::RowCount { .. }
            | Constraint::DimAffine { .. }
            | Constraint::DropFirst { .. } => self.whole_rows.push(c),
        }
    }

    fn pop(&mut self) -> Option<Constraint> {
        self.dims
            .pop()
            .or_else(|| self.rows.pop())
            .or_else(|| self.whole_rows.pop())
    }

    fn clear(&mut self) {
        self.dims.clear();
        self.rows.clear();
        self.whole_rows.clear();
    }

    fn is_empty(&self) -> bool {
        self.dims.is_empty() && self.rows.is_empty() && self.whole_rows.is_empty()
    }
}

/// The integer `r` with `r^k = n`, if there is one.
fn integer_root(n: u128, k: u32) -> Option<u128> {
    if k == 1 {
        return Some(n);
    }
    let guess = (n as f64).powf(1.0 / k as f64).round() as u128;
    (guess.saturating_sub(1)..=guess + 1).find(|r| r.checked_pow(k) == Some(n))
}

/// Whether two sizes, at least one of them symbolic, are equal for every
/// value of their symbols, as far as the e-graph's rules can show.
fn symbolic_equal(x: &KnownDim, y: &KnownDim) -> bool {
    crate::symbolic::sizes_equal(x.extent(), y.extent())
}

/// What [`ShapeError::SymbolicUnsupported`] says of a number `n` past
/// `i64::MAX` met by a run-time size.
fn huge_arithmetic(n: u64) -> &'static str {
    debug_assert!(n > i64::MAX as u64);
    "arithmetic with a number past 2^63 - 1 (symbolic sizes compute in 64-bit signed integers)"
}
