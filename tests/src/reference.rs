//! Per-operation reference checks: an operation's lowering against a
//! plain Rust closure.
//!
//! The differential harness ([`crate::differential`]) runs the *same*
//! lowered kernels on every backend, so a wrong
//! [`Operation::lower`] passes it: the
//! backends agree on the wrong values. Here the expected values come from
//! a closure over plain nested data ([`RefTensor`]: the three rows' sizes
//! and the values in memory order), written without projections, kernels
//! or launches, for random shapes that the operation's own sampler draws
//! ([`OpEntry::sampler`]); the operation runs on the CPU reference
//! backend and each element must match.
//!
//! ```
//! use shape_graph::Registry;
//! use shape_tests::reference::{assert_op_matches, RefCase};
//!
//! // `neg`, against `-x` element by element.
//! let registry = Registry::builtin();
//! let neg = registry.get("neg").unwrap();
//! assert_op_matches(neg, |case: &RefCase<'_>| {
//!     case.result.fill(|b, o, i| -case.operands[0].get(b, o, i))
//! });
//! ```
//!
//! [`builtin_references`] holds one closure for every built-in operation
//! (a test fails for one without), and [`References::expected_values`]
//! composes them into the values of a whole program, which the
//! conformance suite's `random_programs` case compares backends with.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use backend_cpu::CpuBackend;
use shape_core::spec::{AxisKind, RowVarName, ShapeSpec};
use shape_core::{RowKind, SolvedShape};
use shape_graph::{
    BuildArgs, Graph, GraphError, OpEntry, Operation, Registry, SampleCx, Sampler, TensorId,
};
use shape_run::RunOptions;

use crate::differential::{ProgramRunner, Tolerance};
use crate::programs::{Builder, Program, Rng};

/// The documented `max`, written apart from the backends' own: a NaN
/// yields the other operand, and of two equal values (+0 and -0 are
/// equal) the bits both have (so +0 where either is +0).
pub fn max_of(a: f32, b: f32) -> f32 {
    match (a.is_nan(), b.is_nan()) {
        (true, _) => b,
        (_, true) => a,
        _ if a == b => f32::from_bits(a.to_bits() & b.to_bits()),
        _ => {
            if a > b {
                a
            } else {
                b
            }
        }
    }
}

/// The documented `min`, as [`max_of`] the other way (-0 where either is
/// -0).
pub fn min_of(a: f32, b: f32) -> f32 {
    match (a.is_nan(), b.is_nan()) {
        (true, _) => b,
        (_, true) => a,
        _ if a == b => f32::from_bits(a.to_bits() | b.to_bits()),
        _ => {
            if a < b {
                a
            } else {
                b
            }
        }
    }
}

/// The sizes of a tensor's three rows. Values are stored in memory order:
/// batch axes, then output axes, then input axes, row-major.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Rows {
    /// Batch axes.
    pub batch: Vec<usize>,
    /// Output axes.
    pub output: Vec<usize>,
    /// Input axes.
    pub input: Vec<usize>,
}

impl Rows {
    /// The rows of a solved shape.
    pub fn of(shape: &SolvedShape) -> Rows {
        let row = |k: RowKind| shape.sizes(k).into_iter().map(|n| n as usize).collect();
        Rows {
            batch: row(RowKind::Batch),
            output: row(RowKind::Output),
            input: row(RowKind::Input),
        }
    }

    /// The row of one kind.
    pub fn row(&self, kind: RowKind) -> &[usize] {
        match kind {
            RowKind::Batch => &self.batch,
            RowKind::Output => &self.output,
            RowKind::Input => &self.input,
        }
    }

    /// Every size, in memory order.
    pub fn dims(&self) -> Vec<usize> {
        self.batch
            .iter()
            .chain(&self.output)
            .chain(&self.input)
            .copied()
            .collect()
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.dims().iter().product()
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values of a tensor of these rows: `f(batch, output, input)` at
    /// every element (each argument the index along that row), in memory
    /// order.
    pub fn fill(&self, mut f: impl FnMut(&[usize], &[usize], &[usize]) -> f32) -> Vec<f32> {
        let (nb, no) = (self.batch.len(), self.output.len());
        each_index(&self.dims())
            .map(|ix| f(&ix[..nb], &ix[nb..nb + no], &ix[nb + no..]))
            .collect()
    }
}

/// Every index of a tensor of `dims`, row-major.
pub fn each_index(dims: &[usize]) -> impl Iterator<Item = Vec<usize>> + '_ {
    let total: usize = dims.iter().product();
    (0..total).map(move |mut flat| {
        let mut ix = vec![0; dims.len()];
        for j in (0..dims.len()).rev() {
            ix[j] = flat % dims[j];
            flat /= dims[j];
        }
        ix
    })
}

/// A tensor as plain data: its rows and its values in memory order.
#[derive(Clone, Debug, PartialEq)]
pub struct RefTensor {
    /// The sizes of its rows.
    pub rows: Rows,
    /// The values, in memory order (batch, output, input).
    pub values: Vec<f32>,
}

impl RefTensor {
    /// The value at an index of each row, numpy's broadcasting applied row
    /// by row: each index is aligned with this tensor's row from the right
    /// (extra leading indices are dropped), and an axis of size 1 is read
    /// at 0.
    pub fn get(&self, batch: &[usize], output: &[usize], input: &[usize]) -> f32 {
        let mut flat = 0usize;
        for (dims, ix) in [
            (&self.rows.batch, batch),
            (&self.rows.output, output),
            (&self.rows.input, input),
        ] {
            assert!(
                ix.len() >= dims.len(),
                "an index of {} axes into a row of {} (rows {:?})",
                ix.len(),
                dims.len(),
                self.rows
            );
            let ix = &ix[ix.len() - dims.len()..];
            for (&d, &i) in dims.iter().zip(ix) {
                let i = if d == 1 { 0 } else { i };
                assert!(
                    i < d,
                    "index {i} past an axis of {d} (rows {:?})",
                    self.rows
                );
                flat = flat * d + i;
            }
        }
        self.values[flat]
    }

    /// The value at an index in memory order, without broadcasting.
    pub fn at(&self, index: &[usize]) -> f32 {
        let dims = self.rows.dims();
        assert_eq!(index.len(), dims.len(), "an index of every axis");
        let flat = index.iter().zip(&dims).fold(0, |f, (&i, &d)| {
            assert!(i < d, "index {i} past an axis of {d}");
            f * d + i
        });
        self.values[flat]
    }
}

/// What a reference closure is given: the operation (for its spec or its
/// parameters), its operands as plain data, the rows of its result as
/// inference solved them, and the run's batch index (for batch slices).
pub struct RefCase<'a> {
    /// The operation.
    pub op: &'a dyn Operation,
    /// The operands, in order.
    pub operands: &'a [RefTensor],
    /// The rows of the result.
    pub result: &'a Rows,
    /// The batch index batch slices take.
    pub slice: u64,
}

/// A reference: the values of the result, in memory order.
pub type Reference = Arc<dyn Fn(&RefCase<'_>) -> Vec<f32> + Send + Sync>;

/// Draws a random application of the operation under test; `None` when
/// nothing in the program so far fits it (another draw is made).
pub type Draw = Sampler;

/// A check of one operation against a reference closure: random
/// applications drawn by a sampler, run on the CPU reference backend,
/// compared element by element.
#[derive(Clone)]
pub struct OpCheck {
    name: String,
    draw: Draw,
    cases: usize,
    seed: u64,
    tolerance: Tolerance,
    registry: Arc<Registry>,
}

impl fmt::Debug for OpCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpCheck")
            .field("name", &self.name)
            .field("cases", &self.cases)
            .field("seed", &self.seed)
            .field("tolerance", &self.tolerance)
            .finish_non_exhaustive()
    }
}

impl OpCheck {
    /// A check of the operation `draw` applies (named `name` in reports).
    pub fn new(
        name: &str,
        draw: impl Fn(&mut dyn SampleCx) -> Result<Option<TensorId>, GraphError> + Send + Sync + 'static,
    ) -> OpCheck {
        OpCheck {
            name: name.to_string(),
            draw: Arc::new(draw),
            cases: 32,
            seed: 0x5eed,
            tolerance: Tolerance::EXACT,
            registry: Registry::builtin(),
        }
    }

    /// A check of a registry entry, drawn by its own sampler. An entry
    /// without one that takes no spec and a fixed number of tensors is
    /// drawn as [`OpCheck::operation`] draws; any other needs
    /// [`OpCheck::with_draw`].
    pub fn entry(entry: &OpEntry) -> OpCheck {
        if let Some(sampler) = entry.sampler() {
            let sampler = sampler.clone();
            return OpCheck::new(entry.name(), move |cx| sampler(cx));
        }
        let (lo, hi) = (*entry.operands().start(), *entry.operands().end());
        if entry.takes_spec() || lo != hi {
            let name = entry.name().to_string();
            return OpCheck::new(entry.name(), move |_| {
                panic!("`{name}` has no sampler: give its check one with `OpCheck::with_draw`")
            });
        }
        let op = entry.build(&BuildArgs {
            name: entry.name(),
            spec: None,
            operands: lo,
        });
        match op {
            Ok(op) => OpCheck::operation(op).named(entry.name()),
            Err(e) => {
                let message = format!("`{}` does not build: {e}", entry.name());
                OpCheck::new(entry.name(), move |_| panic!("{message}"))
            }
        }
    }

    /// A check of `op` drawn as a pointwise operation is: its first
    /// operand a random tensor, the others new inputs that broadcast
    /// against it. An operation with other shape rules needs
    /// [`OpCheck::new`] with a sampler of its own.
    pub fn operation(op: Arc<dyn Operation>) -> OpCheck {
        let name = op.name().to_string();
        OpCheck::new(&name, move |cx| {
            let t = cx.pick();
            let s = cx.shape(t)?;
            let mut operands = vec![t];
            for _ in 1..op.arity() {
                let (b, i, o) = (
                    cx.broadcastable(&s.sizes(RowKind::Batch)),
                    cx.broadcastable(&s.sizes(RowKind::Input)),
                    cx.broadcastable(&s.sizes(RowKind::Output)),
                );
                operands.push(cx.input(&b, &i, &o)?);
            }
            cx.graph().apply(op.clone(), &operands).map(Some)
        })
    }

    /// A check of a call operation ([`shape_call::CallOp`]), its
    /// arguments drawn by the row rule of calls
    /// ([`crate::programs::draw_call`]): a tensor of the program (its axes
    /// moved into its batch row for a scalar parameter) and new inputs
    /// whose batch rows broadcast against it. [`per_call`] makes its
    /// reference from a closure of one call index.
    pub fn call(op: shape_call::CallOp) -> OpCheck {
        let (name, op) = (op.name().to_string(), Arc::new(op));
        OpCheck::new(&name, move |cx| crate::programs::draw_call(cx, &op))
    }

    /// This check with another name in its reports.
    pub fn named(mut self, name: &str) -> OpCheck {
        self.name = name.to_string();
        self
    }

    /// This check drawn by another sampler.
    pub fn with_draw(
        mut self,
        draw: impl Fn(&mut dyn SampleCx) -> Result<Option<TensorId>, GraphError> + Send + Sync + 'static,
    ) -> OpCheck {
        self.draw = Arc::new(draw);
        self
    }

    /// This check with `cases` random applications (32 unless told).
    pub fn cases(mut self, cases: usize) -> OpCheck {
        self.cases = cases;
        self
    }

    /// This check drawn from another seed.
    pub fn seed(mut self, seed: u64) -> OpCheck {
        self.seed = seed;
        self
    }

    /// This check with a tolerance. The default is exact
    /// ([`Tolerance::EXACT`], except that 0 and -0 agree): the sampled
    /// inputs are multiples of 1/4 in [-2, 2], so the sums and products of
    /// one operation are exact in any order; a reference that adds in an
    /// order of its own on other data may need a little slack.
    pub fn tolerance(mut self, tolerance: Tolerance) -> OpCheck {
        self.tolerance = tolerance;
        self
    }

    /// This check with graphs of `registry` (for samplers that call their
    /// operation by name).
    pub fn registry(mut self, registry: Arc<Registry>) -> OpCheck {
        self.registry = registry;
        self
    }

    /// Runs the check: the number of cases compared, or the first
    /// mismatch, described with the program that shows it.
    pub fn check(&self, reference: impl Fn(&RefCase<'_>) -> Vec<f32>) -> Result<usize, String> {
        let mut compared = 0;
        let mut draws = 0u64;
        while compared < self.cases {
            draws += 1;
            if draws > 64 * self.cases as u64 + 64 {
                return Err(format!(
                    "{}: the sampler fitted only {compared} of {draws} draws",
                    self.name
                ));
            }
            let seed = self.seed.wrapping_mul(6_364_136_223_846_793_005) ^ draws;
            let Some((program, result)) = self.draw_case(seed)? else {
                continue;
            };
            self.compare(&program, result, &reference)?;
            compared += 1;
        }
        Ok(compared)
    }

    /// [`OpCheck::check`], panicking on a mismatch.
    pub fn assert_matches(&self, reference: impl Fn(&RefCase<'_>) -> Vec<f32>) {
        if let Err(e) = self.check(reference) {
            panic!("{e}");
        }
    }

    /// A program of one random input and one drawn application.
    fn draw_case(&self, seed: u64) -> Result<Option<(Program, TensorId)>, String> {
        let mut cx = Builder::new(Graph::with_registry(self.registry.clone()), Rng(seed | 1));
        let dims = |rng: &mut Rng, max: u64| -> Vec<u64> {
            (0..rng.below(max + 1)).map(|_| 1 + rng.below(4)).collect()
        };
        let (b, i, o) = (
            dims(&mut cx.rng, 2),
            dims(&mut cx.rng, 1),
            dims(&mut cx.rng, 2),
        );
        cx.input(&b, &i, &o)
            .map_err(|e| format!("{}: a random input: {e}", self.name))?;
        let Some(result) =
            (self.draw)(&mut cx).map_err(|e| format!("{}: the sampler failed: {e}", self.name))?
        else {
            return Ok(None);
        };
        let op =
            cx.g.producer(result)
                .ok_or_else(|| format!("{}: the sampler returned an input", self.name))?;
        let operands = cx.g.op(op).map(|(_, o, _)| o.to_vec()).unwrap_or_default();
        let mut results: Vec<TensorId> = operands
            .into_iter()
            .filter(|t| cx.inputs.get(*t).is_none())
            .collect();
        results.push(result);
        let slice = cx.slice_bound.map_or(0, |n| cx.rng.below(n));
        Ok(Some((
            Program {
                graph: cx.g,
                inputs: cx.inputs,
                results,
                options: RunOptions::default().with_slice(slice),
            },
            result,
        )))
    }

    fn compare(
        &self,
        program: &Program,
        result: TensorId,
        reference: &dyn Fn(&RefCase<'_>) -> Vec<f32>,
    ) -> Result<(), String> {
        let text = || program.to_text().unwrap_or_default();
        let solved = program
            .graph
            .solve()
            .map_err(|e| format!("{}: the drawn program does not solve: {e}", self.name))?;
        let got = CpuBackend::reference()
            .run_solved(&solved, program)
            .map_err(|e| format!("{}: the CPU reference failed: {e}\n{}", self.name, text()))?;
        let g = &program.graph;
        let op = g.producer(result).expect("an operation's result");
        let (operation, operands, _) = g.op(op).expect("an operation of the graph");
        let mut data = Vec::with_capacity(operands.len());
        for &t in operands {
            let rows = Rows::of(solved.shape(t).map_err(|e| e.to_string())?);
            let values = match program.inputs.get(t) {
                Some(v) => v.values().to_vec(),
                None => got[&t].clone(),
            };
            data.push(RefTensor { rows, values });
        }
        let rows = Rows::of(solved.shape(result).map_err(|e| e.to_string())?);
        let case = RefCase {
            op: operation,
            operands: &data,
            result: &rows,
            slice: program.options.slice,
        };
        let want = reference(&case);
        let have = &got[&result];
        let operands_text = || {
            data.iter()
                .map(|t| format!("  {:?}: {:?}", t.rows, t.values))
                .collect::<Vec<_>>()
                .join("\n")
        };
        if want.len() != have.len() {
            return Err(format!(
                "{}: the reference gives {} values, the lowering {} (result rows {rows:?})\n{}operands:\n{}",
                self.name,
                want.len(),
                have.len(),
                text(),
                operands_text()
            ));
        }
        // `==` too: 0 and -0 are not told apart (whether a sum of one
        // value starts from 0, turning -0 into 0, depends on whether the
        // loop nest reduces an axis of one element, a detail of the
        // projections that references do not follow).
        let agree = |a: f32, b: f32| a == b || self.tolerance.agrees(a, b);
        if let Some(k) = (0..want.len()).find(|&k| !agree(want[k], have[k])) {
            let index = each_index(&rows.dims()).nth(k).unwrap_or_default();
            return Err(format!(
                "{}: element {index:?} (memory order) is {} but the reference says {} \
                 (slice {}, result rows {rows:?})\nthe lowering: {have:?}\nthe reference: {want:?}\n{}operands:\n{}",
                self.name,
                have[k],
                want[k],
                program.options.slice,
                text(),
                operands_text()
            ));
        }
        Ok(())
    }
}

impl From<&OpEntry> for OpCheck {
    fn from(entry: &OpEntry) -> OpCheck {
        OpCheck::entry(entry)
    }
}

impl From<Arc<dyn Operation>> for OpCheck {
    fn from(op: Arc<dyn Operation>) -> OpCheck {
        OpCheck::operation(op)
    }
}

/// Checks an operation (a registry entry, drawn by its sampler, or an
/// `Arc<dyn Operation>`, drawn as a pointwise one; see [`OpCheck`] for
/// other draws) against `reference` on random shapes, on the CPU reference
/// backend, and panics at the first element that differs.
pub fn assert_op_matches(op: impl Into<OpCheck>, reference: impl Fn(&RefCase<'_>) -> Vec<f32>) {
    op.into().assert_matches(reference)
}

/// One operation's reference, with a sampler for an entry that has none.
#[derive(Clone)]
pub struct RefEntry {
    /// The expected values.
    pub compute: Reference,
    /// How to draw the operation when its entry has no sampler.
    pub draw: Option<Draw>,
}

/// References by operation name (the name an operation's
/// [`Operation::name`] starts with: `einsum_max "ij=>i"` is `einsum_max`).
#[derive(Clone, Default)]
pub struct References {
    by_name: HashMap<String, RefEntry>,
}

impl fmt::Debug for References {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut names: Vec<&String> = self.by_name.keys().collect();
        names.sort();
        f.debug_struct("References").field("names", &names).finish()
    }
}

impl References {
    /// Adds (or replaces) the reference of the operations called `name`.
    pub fn insert(
        &mut self,
        name: &str,
        compute: impl Fn(&RefCase<'_>) -> Vec<f32> + Send + Sync + 'static,
    ) -> &mut References {
        self.by_name.insert(
            name.to_string(),
            RefEntry {
                compute: Arc::new(compute),
                draw: None,
            },
        );
        self
    }

    /// Gives the reference of `name` a sampler, for an entry without one.
    pub fn draw_with(
        &mut self,
        name: &str,
        draw: impl Fn(&mut dyn SampleCx) -> Result<Option<TensorId>, GraphError> + Send + Sync + 'static,
    ) -> &mut References {
        if let Some(e) = self.by_name.get_mut(name) {
            e.draw = Some(Arc::new(draw));
        }
        self
    }

    /// The reference of operations called `name`.
    pub fn get(&self, name: &str) -> Option<&RefEntry> {
        self.by_name.get(name)
    }

    /// The reference of one operation, by the first word of its name.
    pub fn of(&self, op: &dyn Operation) -> Option<&RefEntry> {
        self.get(base_name(op.name()))
    }

    /// The check of a registry entry against its reference: drawn by the
    /// entry's sampler, or by the reference's own where it has one.
    pub fn check_entry(&self, entry: &OpEntry) -> Result<usize, String> {
        let r = self
            .get(entry.name())
            .ok_or_else(|| format!("`{}` has no reference", entry.name()))?;
        let mut check = OpCheck::entry(entry);
        if let Some(draw) = &r.draw {
            let draw = draw.clone();
            check = check.with_draw(move |cx| draw(cx));
        }
        let compute = r.compute.clone();
        check.check(move |case| compute(case))
    }

    /// The values of `program.results` composed from the references of
    /// its operations, each applied to the values the ones before it gave
    /// (never to a backend's): the expected values of a whole program.
    pub fn expected_values(
        &self,
        program: &Program,
    ) -> Result<HashMap<TensorId, Vec<f32>>, String> {
        let g = &program.graph;
        let solved = g.solve().map_err(|e| e.to_string())?;
        let mut values: HashMap<TensorId, Vec<f32>> = HashMap::new();
        for t in program.inputs.tensors() {
            let v = program.inputs.get(t).expect("a given tensor");
            if v.ragged_axis().is_some() {
                return Err("ragged inputs have no reference".into());
            }
            values.insert(t, v.values().to_vec());
        }
        let rows_of = |t: TensorId| -> Result<Rows, String> {
            Ok(Rows::of(solved.shape(t).map_err(|e| e.to_string())?))
        };
        for op in g.op_ids() {
            let (operation, operands, result) = g.op(op).expect("an operation of the graph");
            let r = self
                .of(operation)
                .ok_or_else(|| format!("`{}` has no reference", operation.name()))?;
            let mut data = Vec::with_capacity(operands.len());
            for &t in operands {
                let v = values.get(&t).ok_or_else(|| {
                    format!("no values for operand {t:?} of {}", operation.name())
                })?;
                data.push(RefTensor {
                    rows: rows_of(t)?,
                    values: v.clone(),
                });
            }
            let rows = rows_of(result)?;
            let out = (r.compute)(&RefCase {
                op: operation,
                operands: &data,
                result: &rows,
                slice: program.options.slice,
            });
            values.insert(result, out);
        }
        program
            .results
            .iter()
            .map(|&t| {
                values
                    .remove(&t)
                    .map(|v| (t, v))
                    .ok_or_else(|| format!("no values for {t:?}"))
            })
            .collect()
    }
}

/// The first word of an operation's name.
fn base_name(name: &str) -> &str {
    name.split_whitespace().next().unwrap_or(name)
}

/// A pointwise function of one tensor, broadcast into the result.
fn unary(f: fn(f32) -> f32) -> impl Fn(&RefCase<'_>) -> Vec<f32> + Send + Sync {
    move |c| c.result.fill(|b, o, i| f(c.operands[0].get(b, o, i)))
}

/// A pointwise function of two tensors, each broadcast into the result.
fn binary(f: fn(f32, f32) -> f32) -> impl Fn(&RefCase<'_>) -> Vec<f32> + Send + Sync {
    move |c| {
        c.result
            .fill(|b, o, i| f(c.operands[0].get(b, o, i), c.operands[1].get(b, o, i)))
    }
}

/// `a @ b`: `result[b][o][i] = sum over k of a[b][o][k] * b[b][k][i]`, `k`
/// over `a`'s input row (`b`'s output row broadcasts to it); a sum starts
/// from 0, as a reduction does.
fn compose(c: &RefCase<'_>) -> Vec<f32> {
    let (a, x) = (&c.operands[0], &c.operands[1]);
    let inner = a.rows.input.clone();
    c.result.fill(|b, o, i| {
        let mut acc = 0.0f32;
        for k in each_index(&inner) {
            acc += a.get(b, o, &k) * x.get(b, &k, i);
        }
        acc
    })
}

/// Input and output rows swapped.
fn transpose(c: &RefCase<'_>) -> Vec<f32> {
    c.result.fill(|b, o, i| c.operands[0].get(b, i, o))
}

/// The operand at the run's batch index along its first batch axis.
fn batch_slice(c: &RefCase<'_>) -> Vec<f32> {
    let x = &c.operands[0];
    assert!(
        (c.slice as usize) < x.rows.batch[0],
        "slice {} of a batch axis of {}",
        c.slice,
        x.rows.batch[0]
    );
    c.result.fill(|b, o, i| {
        let mut full = vec![c.slice as usize];
        full.extend_from_slice(b);
        x.get(&full, o, i)
    })
}

/// The parts one after another along the last output axis; every other
/// axis broadcast.
fn concat(c: &RefCase<'_>) -> Vec<f32> {
    c.result.fill(|b, o, i| {
        let (last, lead) = o.split_last().expect("a concatenated axis");
        let mut at = *last;
        for part in c.operands {
            let n = *part.rows.output.last().expect("a part's last axis");
            if at < n {
                let mut own = lead.to_vec();
                own.push(at);
                return part.get(b, &own, i);
            }
            at -= n;
        }
        panic!("index {last} past the parts of a concatenation")
    })
}

/// What an einsum spec names at one axis.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    /// A label (its own iterator, shared wherever it is written).
    Label(String),
    /// Axis `j` of a row variable's axes.
    Var(String, usize),
    /// A fixed index.
    Fixed(u64),
    /// An axis of its own (a size, `_`): tensor, memory axis.
    Own(usize, usize),
}

/// The keys of a tensor's axes in memory order, read from its spec part.
fn keys_of(spec: &ShapeSpec, rows: &Rows, shared_batch: bool, tensor: usize) -> Vec<Key> {
    let mut out = Vec::new();
    for kind in [RowKind::Batch, RowKind::Output, RowKind::Input] {
        let len = rows.row(kind).len();
        let fallback;
        let row = match (spec.row(kind), kind) {
            (Some(r), _) => Some(r),
            (None, RowKind::Batch) if shared_batch => {
                fallback = shape_core::spec::RowSpec {
                    row_var: Some((RowVarName::OfKind(RowKind::Batch), 0..0)),
                    ..Default::default()
                };
                Some(&fallback)
            }
            (None, _) => None,
        };
        let Some(row) = row else {
            assert_eq!(len, 0, "a row the spec does not write is empty");
            continue;
        };
        let spread = len - row.axes.len() - row.before.len();
        let var = row.row_var.as_ref().map(|(n, _)| match n {
            RowVarName::Named(n) => format!("..{n}.."),
            RowVarName::OfKind(k) => format!("...{}", k.name()),
        });
        let key = |a: &shape_core::spec::AxisSpec, at: usize| match &a.kind {
            AxisKind::Label(l) | AxisKind::LabeledSize(l, _) => Key::Label(l.clone()),
            AxisKind::Fixed(i) => Key::Fixed(*i),
            AxisKind::Size(_) | AxisKind::Anonymous => Key::Own(tensor, at),
            AxisKind::Ragged | AxisKind::Affine(_) => {
                panic!("the reference einsum reads no ragged or convolution axes")
            }
        };
        for a in &row.before {
            out.push(key(a, out.len()));
        }
        for j in 0..spread {
            out.push(Key::Var(var.clone().expect("a row variable"), j));
        }
        for a in &row.axes {
            out.push(key(a, out.len()));
        }
    }
    out
}

/// An einsum read from its spec: every label one index, the result's
/// labels fixed at each element, the others iterated and their products
/// combined by `reduction` (a sum, [`max_of`], [`min_of`] or a product,
/// from its identity); with nothing to combine, the value itself.
fn einsum(c: &RefCase<'_>, reduction: &str) -> Vec<f32> {
    let op = c.op;
    let spec_of = |p: usize| {
        op.spec_part(p)
            .unwrap_or_else(|| panic!("{} has no spec for position {p}", op.name()))
    };
    let specs: Vec<&ShapeSpec> = (0..=c.operands.len()).map(spec_of).collect();
    let shared_batch = specs.iter().all(|s| s.batch.is_none());
    let rows: Vec<&Rows> = std::iter::once(c.result)
        .chain(c.operands.iter().map(|t| &t.rows))
        .collect();
    let keys: Vec<Vec<Key>> = specs
        .iter()
        .zip(&rows)
        .enumerate()
        .map(|(t, (s, r))| keys_of(s, r, shared_batch, t))
        .collect();
    let mut sizes: Vec<(Key, usize)> = Vec::new();
    for (ks, r) in keys.iter().zip(&rows) {
        for (k, n) in ks.iter().zip(r.dims()) {
            if matches!(k, Key::Fixed(_)) {
                continue;
            }
            match sizes.iter().find(|(s, _)| s == k) {
                Some((_, m)) => assert_eq!(*m, n, "{k:?} has two sizes"),
                None => sizes.push((k.clone(), n)),
            }
        }
    }
    let reduced: Vec<(Key, usize)> = sizes
        .iter()
        .filter(|(k, _)| !keys[0].contains(k))
        .cloned()
        .collect();
    let reduced_dims: Vec<usize> = reduced.iter().map(|(_, n)| *n).collect();
    let (identity, combine): (f32, fn(f32, f32) -> f32) = match reduction {
        "einsum" | "permute" => (0.0, |a, x| a + x),
        "einsum_max" => (f32::NEG_INFINITY, max_of),
        "einsum_min" => (f32::INFINITY, min_of),
        "einsum_prod" => (1.0, |a, x| a * x),
        other => panic!("no einsum reduces as `{other}`"),
    };
    let result_dims = c.result.dims();
    each_index(&result_dims)
        .map(|ix| {
            let mut at: Vec<(&Key, usize)> = Vec::new();
            for (k, &i) in keys[0].iter().zip(&ix) {
                match k {
                    // An element off a fixed index or a diagonal is never
                    // written: 0.
                    Key::Fixed(f) if *f as usize != i => return 0.0,
                    Key::Fixed(_) => {}
                    _ => match at.iter().find(|(s, _)| *s == k) {
                        Some(&(_, j)) if j != i => return 0.0,
                        Some(_) => {}
                        None => at.push((k, i)),
                    },
                }
            }
            let value_at = |at: &[(&Key, usize)]| -> f32 {
                let mut product = 1.0f32;
                for (t, x) in c.operands.iter().enumerate() {
                    let index: Vec<usize> = keys[t + 1]
                        .iter()
                        .map(|k| match k {
                            Key::Fixed(f) => *f as usize,
                            _ => at.iter().find(|(s, _)| *s == k).expect("an index").1,
                        })
                        .collect();
                    let v = x.at(&index);
                    product = if t == 0 { v } else { product * v };
                }
                product
            };
            if reduced.is_empty() {
                return value_at(&at);
            }
            let mut acc = identity;
            for r in each_index(&reduced_dims) {
                let mut here = at.clone();
                here.extend(reduced.iter().map(|(k, _)| k).zip(r));
                acc = combine(acc, value_at(&here));
            }
            acc
        })
        .collect()
}

/// The reference of a call operation ([`shape_call::CallOp`]) from its
/// function at one call index: `f` is given each argument's scalars at
/// that index (its output row, which is its parameter's type dims; batch
/// rows broadcast as numpy's do) and gives the result's, which fill its
/// output row at that index of its batch row.
///
/// ```
/// use shape_tests::reference::{per_call, OpCheck};
///
/// let op = shape_call::CallOp::parse("fn mul(a: f32, b: f32) -> f32 { return a * b; }").unwrap();
/// OpCheck::call(op).assert_matches(per_call(|a: &[&[f32]]| vec![a[0][0] * a[1][0]]));
/// ```
pub fn per_call<F>(f: F) -> impl Fn(&RefCase<'_>) -> Vec<f32> + Send + Sync + Clone
where
    F: Fn(&[&[f32]]) -> Vec<f32> + Send + Sync + Clone,
{
    move |c| {
        let mut out = Vec::with_capacity(c.result.len());
        let each: usize = c.result.output.iter().product();
        assert!(
            c.result.input.is_empty(),
            "a call's result has no input row"
        );
        for b in each_index(&c.result.batch) {
            let args: Vec<Vec<f32>> = (c.operands.iter())
                .map(|x| {
                    assert!(x.rows.input.is_empty(), "an argument has no input row");
                    each_index(&x.rows.output)
                        .map(|o| x.get(&b, &o, &[]))
                        .collect()
                })
                .collect();
            let refs: Vec<&[f32]> = args.iter().map(Vec::as_slice).collect();
            let r = f(&refs);
            assert_eq!(r.len(), each, "the function's values at one call index");
            out.extend(r);
        }
        out
    }
}

/// A reference for every built-in operation of [`Registry::builtin`],
/// each written from the operation's definition over plain data (see the
/// module's documentation), samplers for the entries without one, and
/// the references of the WGSL functions the random programs call
/// ([`crate::programs::CALL_FUNCTIONS`], by name, from their Rust
/// closures through [`per_call`]).
pub fn builtin_references() -> References {
    let mut r = References::default();
    for f in crate::programs::CALL_FUNCTIONS {
        r.insert(f.name, per_call(f.rust));
    }
    r.insert("id", unary(|x| x))
        .insert("neg", unary(|x| -x))
        .insert("exp", unary(f32::exp))
        .insert("log", unary(f32::ln))
        .insert("sqrt", unary(f32::sqrt))
        // max(x, 0), NaN kept (as `max_of` would not).
        .insert(
            "relu",
            unary(|x| if x.is_nan() { x } else { max_of(x, 0.0) }),
        )
        // The logistic function, written out here rather than taken from
        // the scalar table it checks.
        .insert("sigmoid", unary(|x| 1.0 / (1.0 + (-x).exp())))
        .insert("add", binary(|a, b| a + b))
        .insert("sub", binary(|a, b| a - b))
        .insert("mul", binary(|a, b| a * b))
        .insert("div", binary(|a, b| a / b))
        .insert("max", binary(max_of))
        .insert("min", binary(min_of))
        .insert("compose", compose)
        .insert("transpose", transpose)
        .insert("batch_slice", batch_slice)
        .insert("batch_slice_range", batch_slice)
        .insert("concat", concat);
    for name in [
        "einsum",
        "permute",
        "einsum_max",
        "einsum_min",
        "einsum_prod",
    ] {
        r.insert(name, move |c| einsum(c, name));
    }
    r.draw_with("batch_slice_range", |cx| {
        let t = cx.pick();
        let Some(&size) = cx.shape(t)?.sizes(RowKind::Batch).first() else {
            return Ok(None);
        };
        cx.slices_batch(size);
        cx.graph()
            .call("batch_slice_range", Some(&size.to_string()), &[t])
            .map(Some)
    });
    r
}
