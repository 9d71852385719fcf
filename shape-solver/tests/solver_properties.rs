//! Property tests of the solver: declarativeness, agreement with numpy's
//! broadcasting rule, termination, idempotence, and solutions that satisfy
//! every constraint.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use shape_core::{Dim, DimVar, KnownDim, Row, RowVar};
use shape_graph::Graph;
use shape_solver::{Constraint, ErrorClass, Origin, ShapeError, Solver, Why};

const DIM_VARS: usize = 6;
const ROW_VARS: usize = 3;

/// A dim in a generated constraint.
#[derive(Clone, Debug)]
enum GenDim {
    Var(usize),
    Known(u64),
}

/// A row in a generated constraint.
#[derive(Clone, Debug)]
struct GenRow {
    var: Option<usize>,
    dims: Vec<GenDim>,
}

#[derive(Clone, Debug)]
enum GenConstraint {
    DimEq(GenDim, GenDim),
    DimIneq(GenDim, GenDim),
    RowEq(GenRow, GenRow),
    RowIneq(GenRow, GenRow),
    Total(GenRow, u64),
    /// A batch slice (no first axis named) or a leading flank (the first
    /// axis named): the second row is the first without its first axis.
    Drop(GenRow, GenRow, Option<GenDim>),
    /// A concatenated axis: the first dim is the sum of the others.
    Sum(GenDim, Vec<GenDim>),
    /// An axis a fixed index addresses: at least this many elements.
    AtLeast(GenDim, u64),
    /// The product of a row is a size (`size n = ..r.. of x`).
    Count(GenRow, GenDim),
    /// A convolution's input, output and kernel sizes: stride, dilation,
    /// padded.
    Affine(GenDim, GenDim, GenDim, u64, u64, bool),
}

fn gen_dim() -> impl Strategy<Value = GenDim> {
    prop_oneof![
        3 => (0..DIM_VARS).prop_map(GenDim::Var),
        2 => prop::sample::select(vec![1u64, 1, 2, 3, 4, 6]).prop_map(GenDim::Known),
    ]
}

fn gen_row() -> impl Strategy<Value = GenRow> {
    (
        prop::option::weighted(0.6, 0..ROW_VARS),
        prop::collection::vec(gen_dim(), 0..3),
    )
        .prop_map(|(var, dims)| GenRow { var, dims })
}

fn gen_constraint() -> impl Strategy<Value = GenConstraint> {
    prop_oneof![
        2 => (gen_dim(), gen_dim()).prop_map(|(a, b)| GenConstraint::DimEq(a, b)),
        3 => (gen_dim(), gen_dim()).prop_map(|(a, b)| GenConstraint::DimIneq(a, b)),
        2 => (gen_row(), gen_row()).prop_map(|(a, b)| GenConstraint::RowEq(a, b)),
        4 => (gen_row(), gen_row()).prop_map(|(a, b)| GenConstraint::RowIneq(a, b)),
        1 => (gen_row(), prop::sample::select(vec![1u64, 4, 6, 12, 24])).prop_map(|(r, n)| GenConstraint::Total(r, n)),
        1 => (gen_row(), gen_row(), prop::option::of(gen_dim())).prop_map(|(a, b, f)| GenConstraint::Drop(a, b, f)),
        1 => (gen_dim(), prop::collection::vec(gen_dim(), 2..4)).prop_map(|(t, p)| GenConstraint::Sum(t, p)),
        1 => (gen_dim(), prop::sample::select(vec![1u64, 2, 3, 5])).prop_map(|(d, m)| GenConstraint::AtLeast(d, m)),
        1 => (gen_row(), gen_dim()).prop_map(|(r, d)| GenConstraint::Count(r, d)),
        1 => (gen_dim(), gen_dim(), gen_dim(), 1u64..3, 1u64..3, any::<bool>())
            .prop_map(|(i, o, k, s, d, p)| GenConstraint::Affine(i, o, k, s, d, p)),
    ]
}

/// A solver with the generated variables, and the constraints to add.
struct Instance {
    solver: Solver,
    constraints: Vec<Constraint>,
}

fn dim(d: &GenDim) -> Dim {
    match d {
        GenDim::Var(i) => Dim::Var(DimVar(*i as u32)),
        GenDim::Known(n) => Dim::known(*n).unwrap(),
    }
}

fn row(r: &GenRow) -> Row {
    let dims = r.dims.iter().map(dim).collect();
    match r.var {
        Some(v) => Row::open(RowVar(v as u32), dims),
        None => Row::closed(dims),
    }
}

fn instance(gen: &[GenConstraint]) -> Instance {
    let mut solver = Solver::new();
    for _ in 0..DIM_VARS {
        solver.fresh_dim();
    }
    for _ in 0..ROW_VARS {
        solver.fresh_row();
    }
    let constraints = gen
        .iter()
        .enumerate()
        .map(|(i, g)| {
            let why = Why::of(solver.add_origin(Origin::Direct {
                what: format!("#{i}").into(),
            }));
            match g {
                GenConstraint::DimEq(a, b) => Constraint::DimEq {
                    a: dim(a),
                    b: dim(b),
                    why,
                },
                GenConstraint::DimIneq(a, b) => Constraint::DimIneq {
                    cur: dim(a),
                    subr: dim(b),
                    why,
                },
                GenConstraint::RowEq(a, b) => Constraint::RowEq {
                    a: row(a),
                    b: row(b),
                    why,
                },
                GenConstraint::RowIneq(a, b) => Constraint::RowIneq {
                    cur: row(a),
                    subr: row(b),
                    why,
                },
                GenConstraint::Total(r, n) => Constraint::TotalElems {
                    row: row(r),
                    total: (*n).try_into().unwrap(),
                    why,
                },
                GenConstraint::Affine(i, o, k, s, d, p) => Constraint::DimAffine {
                    input: dim(i),
                    over: dim(o),
                    kernel: dim(k),
                    stride: (*s).try_into().unwrap(),
                    dilation: (*d).try_into().unwrap(),
                    padded: *p,
                    why,
                },
                GenConstraint::Count(r, d) => Constraint::RowCount {
                    row: row(r),
                    count: dim(d),
                    why,
                },
                GenConstraint::AtLeast(d, m) => Constraint::DimAtLeast {
                    dim: dim(d),
                    min: (*m).try_into().unwrap(),
                    why,
                },
                GenConstraint::Sum(t, p) => Constraint::DimSum {
                    total: dim(t),
                    parts: p.iter().map(dim).collect(),
                    why,
                },
                GenConstraint::Drop(a, b, f) => Constraint::DropFirst {
                    whole: row(a),
                    rest: row(b),
                    first: f.as_ref().map(dim),
                    why,
                },
            }
        })
        .collect();
    Instance {
        solver,
        constraints,
    }
}

/// The finalized values of every API variable, or the class of error.
///
/// Which constraint reports a contradiction depends on which of the
/// contradicting facts arrived last (`v = 1` then `v >= 2` is a size
/// mismatch; `v >= 2` then "the row holds 1 element" is an element-count
/// mismatch), so the order-independence property compares error classes.
type Outcome = Result<(Vec<u64>, Vec<Vec<u64>>), ErrorClass>;

fn outcome(
    mut solver: Solver,
    constraints: impl IntoIterator<Item = Constraint>,
) -> (Outcome, Solver) {
    for c in constraints {
        if let Err(e) = solver.add(c) {
            return (Err(e.class()), solver);
        }
    }
    let out = read(&solver);
    (out, solver)
}

fn read(solver: &Solver) -> Outcome {
    let sol = solver.finalize().map_err(|e: ShapeError| e.class())?;
    let dims = (0..DIM_VARS)
        .map(|i| sol.dim(&Dim::Var(DimVar(i as u32))).unwrap().size())
        .collect();
    let rows = (0..ROW_VARS)
        .map(|i| {
            sol.row(&Row::open(RowVar(i as u32), vec![]))
                .unwrap()
                .iter()
                .map(KnownDim::size)
                .collect()
        })
        .collect();
    Ok((dims, rows))
}

fn config() -> ProptestConfig {
    ProptestConfig {
        // PROPTEST_CASES raises the count for a longer local run.
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(256),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "../proptest-regressions/solver_properties.txt",
        ))),
        ..ProptestConfig::default()
    }
}

/// numpy's rule for one row pair: align at the end, sizes equal or one is 1.
fn numpy_broadcast(a: &[u64], b: &[u64]) -> Option<Vec<u64>> {
    let n = a.len().max(b.len());
    let pad = |r: &[u64]| -> Vec<u64> {
        std::iter::repeat_n(1, n - r.len())
            .chain(r.iter().copied())
            .collect()
    };
    let (a, b) = (pad(a), pad(b));
    a.iter()
        .zip(&b)
        .map(|(&x, &y)| match (x, y) {
            _ if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

fn spec_of(rows: &[Vec<u64>; 3]) -> String {
    let row = |r: &Vec<u64>| r.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    // Multi-character mode throughout, so adjacent sizes stay apart.
    format!(
        "{}, |{}, ->{},",
        row(&rows[0]),
        row(&rows[1]),
        row(&rows[2])
    )
    .replace(", |", " |")
    .replace(", ->", " ->")
    .replace("|,", "|")
}

fn ground_rows() -> impl Strategy<Value = [Vec<u64>; 3]> {
    let r = || prop::collection::vec(prop::sample::select(vec![1u64, 1, 2, 3]), 0..4);
    (r(), r(), r()).prop_map(|(a, b, c)| [a, b, c])
}

proptest! {
    #![proptest_config(config())]

    /// (a) Adding the same constraints in another order gives the same
    /// finalized values, or fails too. When it fails, the constraints up to
    /// the first failure (all of whose contradictions involve the last one)
    /// fail with the same class of error in every order.
    #[test]
    fn solving_is_independent_of_constraint_order(
        gen in prop::collection::vec(gen_constraint(), 1..10),
        perm_seed in any::<u64>(),
    ) {
        let inst = instance(&gen);
        let mut order: Vec<usize> = (0..inst.constraints.len()).collect();
        // A deterministic shuffle from the seed.
        let mut x = perm_seed | 1;
        for i in (1..order.len()).rev() {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            order.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let pick = |idx: &[usize]| idx.iter().map(|&i| inst.constraints[i].clone()).collect::<Vec<_>>();
        let (forward, _) = outcome(inst.solver.clone(), inst.constraints.clone());
        let (permuted, _) = outcome(inst.solver.clone(), pick(&order));
        let (reversed, _) = outcome(inst.solver.clone(), inst.constraints.iter().rev().cloned());
        prop_assert_eq!(forward.is_ok(), permuted.is_ok(), "{:?} vs {:?}", forward, permuted);
        prop_assert_eq!(forward.is_ok(), reversed.is_ok(), "{:?} vs {:?}", forward, reversed);
        if forward.is_ok() {
            prop_assert_eq!(&forward, &permuted);
            prop_assert_eq!(&forward, &reversed);
        } else {
            // The shortest failing prefix of the original order.
            let mut solver = inst.solver.clone();
            let mut prefix = inst.constraints.len();
            for (i, c) in inst.constraints.iter().enumerate() {
                if solver.add(c.clone()).is_err() {
                    prefix = i + 1;
                    break;
                }
            }
            let idx: Vec<usize> = order.iter().copied().filter(|&i| i < prefix).collect();
            let all: Vec<usize> = (0..prefix).collect();
            let (a, _) = outcome(inst.solver.clone(), pick(&all));
            let (b, _) = outcome(inst.solver.clone(), pick(&idx));
            let rev: Vec<usize> = all.iter().rev().copied().collect();
            let (c, _) = outcome(inst.solver, pick(&rev));
            prop_assert_eq!(&a, &b);
            prop_assert_eq!(&a, &c);
        }
    }

    /// (b) On ground shapes, pointwise broadcasting agrees with numpy, row by row.
    #[test]
    fn pointwise_broadcasting_agrees_with_numpy(a in ground_rows(), b in ground_rows()) {
        let mut g = Graph::new();
        let ta = g.input("a", &spec_of(&a)).unwrap();
        let tb = g.input("b", &spec_of(&b)).unwrap();
        let expected: Option<Vec<Vec<u64>>> = (0..3).map(|k| numpy_broadcast(&a[k], &b[k])).collect();
        match (g.add(ta, tb), expected) {
            (Ok(c), Some(rows)) => {
                let solved = g.solve().unwrap();
                let s = solved.shape(c).unwrap();
                prop_assert_eq!(s.sizes(shape_core::RowKind::Batch), rows[0].clone());
                prop_assert_eq!(s.sizes(shape_core::RowKind::Input), rows[1].clone());
                prop_assert_eq!(s.sizes(shape_core::RowKind::Output), rows[2].clone());
            }
            (Err(_), None) => {}
            (got, want) => prop_assert!(false, "solver {:?} but numpy {:?}", got.map(|_| ()), want),
        }
    }

    /// (c) The solver stops within its step limit, row variables, slices
    /// and cyclic inequalities included. A run that would not stop reaches
    /// the limit and fails with `StepLimit` (so this property fails rather
    /// than hangs), and adding or finalizing never gets there; nor does
    /// finalization leave a variable it cannot close (`Unsolved`).
    #[test]
    fn solving_terminates_within_the_step_limit(gen in prop::collection::vec(gen_constraint(), 1..16)) {
        let inst = instance(&gen);
        let mut solver = inst.solver;
        let added = inst.constraints.into_iter().try_for_each(|c| solver.add(c));
        let result = added.and_then(|()| solver.finalize().map(drop));
        prop_assert!(
            !matches!(result, Err(ShapeError::StepLimit { .. } | ShapeError::Unsolved { .. })),
            "{:?}",
            result
        );
        // 16 constraints over 6 dims and 3 rows: far below the limit.
        prop_assert!(solver.steps() < 20_000, "{} steps, result {:?}", solver.steps(), result);
    }

    /// (e) A solution satisfies every constraint it was solved from.
    #[test]
    fn solutions_satisfy_every_constraint(gen in prop::collection::vec(gen_constraint(), 1..12)) {
        let inst = instance(&gen);
        let mut solver = inst.solver;
        if inst.constraints.iter().try_for_each(|c| solver.add(c.clone())).is_err() {
            return Ok(());
        }
        let Ok(sol) = solver.finalize() else { return Ok(()) };
        for c in &inst.constraints {
            prop_assert!(holds(&sol, c), "{:?} does not hold", c);
        }
    }

    /// (d) Re-adding constraints that were solved changes nothing, and
    /// neither does adding the solution itself (every dim and row).
    #[test]
    fn solving_is_idempotent(gen in prop::collection::vec(gen_constraint(), 1..10)) {
        let inst = instance(&gen);
        let (first, solver) = outcome(inst.solver, inst.constraints.clone());
        if let Ok((dims, rows)) = &first {
            let (again, solver) = outcome(solver, inst.constraints);
            prop_assert_eq!(&first, &again);
            let mut solver = solver;
            let why = Why::of(solver.add_origin(Origin::Direct { what: "solution".into() }));
            // The whole solution, rows included: a row's axes may be
            // variables of their own (a template's fresh dims), and with only
            // the dims given, finalization may close those to other values
            // that satisfy the constraints just as well.
            let dim_facts = dims.iter().enumerate().map(|(i, &n)| Constraint::DimEq {
                a: Dim::Var(DimVar(i as u32)),
                b: Dim::known(n).unwrap(),
                why,
            });
            let row_facts = rows.iter().enumerate().map(|(i, sizes)| Constraint::RowEq {
                a: Row::open(RowVar(i as u32), vec![]),
                b: Row::closed(sizes.iter().map(|&n| Dim::known(n).unwrap()).collect()),
                why,
            });
            let facts: Vec<Constraint> = dim_facts.chain(row_facts).collect();
            let (with_facts, _) = outcome(solver, facts);
            prop_assert_eq!(&first, &with_facts);
        }
    }
}

/// Whether a constraint holds in a solution (sizes only: the generated
/// constraints carry no labels).
fn holds(sol: &shape_solver::Solution, c: &Constraint) -> bool {
    let dim = |d: &Dim| sol.dim(d).unwrap().size();
    let row = |r: &Row| -> Vec<u64> { sol.row(r).unwrap().iter().map(KnownDim::size).collect() };
    let broadcasts = |n: u64, m: u64| n == m || m == 1;
    match c {
        Constraint::DimEq { a, b, .. } => dim(a) == dim(b),
        Constraint::DimIneq { cur, subr, .. } => broadcasts(dim(cur), dim(subr)),
        Constraint::RowEq { a, b, .. } => row(a) == row(b),
        Constraint::RowIneq { cur, subr, .. }
        | Constraint::Assign {
            dest: cur,
            source: subr,
            ..
        } => {
            let (c, s) = (row(cur), row(subr));
            c.len() >= s.len()
                && c.iter()
                    .rev()
                    .zip(s.iter().rev())
                    .all(|(&n, &m)| broadcasts(n, m))
        }
        Constraint::TotalElems { row: r, total, .. } => {
            row(r).iter().product::<u64>() == total.get()
        }
        Constraint::DimSum { total, parts, .. } => dim(total) == parts.iter().map(dim).sum::<u64>(),
        Constraint::DimAtLeast { dim: d, min, .. } => dim(d) >= min.get(),
        Constraint::RowCount { row: r, count, .. } => row(r).iter().product::<u64>() == dim(count),
        Constraint::DimAffine {
            input,
            over,
            kernel,
            stride,
            dilation,
            padded,
            ..
        } => {
            let (i, o, k) = (dim(input), dim(over), dim(kernel));
            let (s, d) = (stride.get(), dilation.get());
            if *padded {
                i == s * o
            } else {
                i == s * (o - 1) + d * (k - 1) + 1
            }
        }
        Constraint::DropFirst {
            whole, rest, first, ..
        } => {
            let (w, r) = (row(whole), row(rest));
            !w.is_empty() && w[1..] == r[..] && first.as_ref().is_none_or(|f| dim(f) == w[0])
        }
    }
}

#[test]
fn numpy_reference_is_itself_right() {
    assert_eq!(numpy_broadcast(&[5, 2, 1], &[2, 3]), Some(vec![5, 2, 3]));
    assert_eq!(numpy_broadcast(&[], &[2, 3]), Some(vec![2, 3]));
    assert_eq!(numpy_broadcast(&[2], &[3]), None);
    assert_eq!(spec_of(&[vec![], vec![2, 3], vec![1]]), " |2,3 ->1,");
}
