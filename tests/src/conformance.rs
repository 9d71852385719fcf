//! The backend conformance suite: what every [`Backend`] must compute,
//! each case checked against hand-computed values where there are some and
//! against the CPU reference everywhere.
//!
//! A backend runs the whole suite with one macro call in a test file of
//! its crate, as [`crate::backend_conformance!`] shows; each case becomes
//! one `#[test]`. The factory returns `None` to skip (a GPU backend
//! without an adapter; [`crate::gpu::wgpu_or_skip`] fails instead when
//! `SHAPE_REQUIRE_GPU=1`). Cases for later features are added here and to
//! the macro's list.

use std::sync::Arc;

use backend_cpu::CpuBackend;
use shape_core::kernel::{Accumulate, Expr, IterKind, Kernel, Launch, Layout};
use shape_core::Backend;
use shape_graph::{
    BufferRef, ConstraintCx, Graph, GraphError, Lowered, LoweringCx, Operation, ProjectionBuilder,
    Registry, Step, TensorId,
};
use shape_run::{HostTensor, RunGraph};
use shape_solver::RowSite;

use crate::differential::{compare_backends, ProgramRunner, Tolerance};
use crate::programs::Program;

/// Runs `case` on a backend from `make`, or skips it when `make` gives
/// none.
pub fn with<B: Backend>(make: impl FnOnce() -> Option<B>, case: impl FnOnce(&mut B)) {
    if let Some(mut backend) = make() {
        case(&mut backend);
    }
}

/// Runs `program` on `backend` and on the CPU reference and fails on the
/// first element that differs by more than `tolerance`; returns the
/// backend's values. On the CPU reference itself this checks only that
/// the program runs: each case also compares the values with ones computed
/// by hand, or composed from the operations' references
/// ([`random_programs`]).
fn agree<B: Backend>(
    backend: &mut B,
    program: &Program,
    tolerance: Tolerance,
) -> std::collections::HashMap<TensorId, Vec<f32>> {
    let runners: &mut [&mut dyn ProgramRunner] = &mut [&mut CpuBackend::reference(), backend];
    if let Err(d) = compare_backends(program, runners, tolerance) {
        let text = program.to_text().unwrap_or_default();
        panic!("{}: {d}\nthe program:\n{text}", backend.name());
    }
    let solved = program.graph.solve().expect("a solved program");
    backend
        .run_solved(&solved, program)
        .unwrap_or_else(|e| panic!("{}: {e}", backend.name()))
}

/// A program of `g` with `results` and the data given per tensor
/// (ragged data among it).
fn program_with(g: Graph, results: Vec<TensorId>, data: Vec<(TensorId, HostTensor)>) -> Program {
    let mut inputs = shape_run::Inputs::new();
    for (t, v) in data {
        inputs.insert(t, v);
    }
    Program {
        graph: g,
        inputs,
        results,
        options: Default::default(),
    }
}

/// Values `(i % 13 - 6) / 4` (exact in binary).
fn ramp(n: usize) -> Vec<f32> {
    (0..n).map(|i| ((i % 13) as f32 - 6.0) / 4.0).collect()
}

/// Every pointwise function of the registry, on values that include
/// zeros, negatives and non-integers.
pub fn pointwise_functions<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    let registry = shape_graph::Registry::builtin();
    for entry in registry.entries() {
        if entry.takes_spec()
            || !matches!(
                entry.name(),
                "id" | "neg"
                    | "exp"
                    | "log"
                    | "sqrt"
                    | "relu"
                    | "add"
                    | "sub"
                    | "mul"
                    | "div"
                    | "max"
                    | "min"
            )
        {
            continue;
        }
        let mut g = Graph::new();
        let a = g.input("a", "3|4").expect("a spec");
        let b = g.input("b", "3|4").expect("a spec");
        let operands: Vec<TensorId> = [a, b].into_iter().take(*entry.operands().start()).collect();
        let y = g
            .call(entry.name(), None, &operands)
            .expect("a pointwise call");
        let mut rev = ramp(12);
        rev.reverse();
        let p = Program::with_named_data(g, vec![y], [("a", ramp(12)), ("b", rev.clone())])
            .expect("data for every input");
        let out = agree(backend, &p, tolerance);
        // The same function of each element, in plain Rust.
        let f: fn(f32, f32) -> f32 = match entry.name() {
            "id" => |a, _| a,
            "neg" => |a, _| -a,
            "exp" => |a, _| a.exp(),
            "log" => |a, _| a.ln(),
            "sqrt" => |a, _| a.sqrt(),
            "relu" => |a, _| a.max(0.0),
            "add" => |a, b| a + b,
            "sub" => |a, b| a - b,
            "mul" => |a, b| a * b,
            "div" => |a, b| a / b,
            "max" => f32::max,
            _ => f32::min,
        };
        let want: Vec<f32> = ramp(12)
            .into_iter()
            .zip(rev)
            .map(|(a, b)| f(a, b))
            .collect();
        for (k, (&have, &want)) in out[&y].iter().zip(&want).enumerate() {
            assert!(
                have == want || tolerance.agrees(have, want),
                "{}: {} at element {k} is {have}, not {want}",
                backend.name(),
                entry.name()
            );
        }
    }
}

/// Numpy-style broadcasting: a column, missing leading axes, a scalar.
pub fn broadcasting<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    let mut g = Graph::new();
    let a = g.input("a", "2,3").expect("a spec");
    let col = g.input("col", "2,1").expect("a spec");
    let row = g.input("row", "3").expect("a spec");
    let s = g.input("s", "1").expect("a spec");
    let x = g.add(a, col).expect("a column broadcasts");
    let y = g.mul(x, row).expect("a row broadcasts");
    let z = g.binary("sub", y, s).expect("a scalar broadcasts");
    let p = Program::with_named_data(
        g,
        vec![x, y, z],
        [
            ("a", vec![1., 2., 3., 4., 5., 6.]),
            ("col", vec![10., 20.]),
            ("row", vec![1., 10., 100.]),
            ("s", vec![1.]),
        ],
    )
    .expect("data for every input");
    let out = agree(backend, &p, tolerance);
    assert_eq!(
        out[&x],
        [11., 12., 13., 24., 25., 26.],
        "{}",
        backend.name()
    );
    assert_eq!(
        out[&z],
        [10., 119., 1299., 23., 249., 2599.],
        "{}",
        backend.name()
    );
}

/// Assignments into a declared shape (`NAME: SHAPE <- EXPR`: a copy
/// required to have the full shape): a scalar and a row broadcast one way
/// into a matrix, as DyND's assignment kernels do.
pub fn assignments_into_declared_shapes<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    let mut g = Graph::new();
    let s = g.input("s", "1").expect("a spec");
    let row = g.input("row", "3").expect("a spec");
    let filled = g.unary("id", s).expect("a copy");
    g.require(filled, "3")
        .expect("a scalar broadcasts into an array");
    let rows = g.unary("id", row).expect("a copy");
    g.require(rows, "2,3")
        .expect("a row broadcasts into a matrix");
    let p = Program::with_named_data(
        g,
        vec![filled, rows],
        [("s", vec![4.]), ("row", vec![1., 2., 3.])],
    )
    .expect("data for every input");
    let out = agree(backend, &p, tolerance);
    assert_eq!(out[&filled], [4., 4., 4.], "{}", backend.name());
    assert_eq!(out[&rows], [1., 2., 3., 1., 2., 3.], "{}", backend.name());
}

/// Assignments into tensors that exist (`NAME[...] <- EXPR`, DyND's
/// `a[...] = b`), with the seed document's two examples: the scalar `4`
/// into `[1, 2, 3]` gives `[4, 4, 4]`, and the ragged `[[1, 2, 3], [4]]`
/// into the strided `[[5, 6, 7], [8, 9, 10]]` gives `[[1, 2, 3], [4, 4,
/// 4]]`. A ragged destination keeps its rows (DyND's initialized var
/// destination): `[[7], [8], [9]]` into `[[1, 2], [3], [4, 5, 6]]` gives
/// `[[7, 7], [8], [9, 9, 9]]`, a ragged source of the same lengths is
/// copied row by row, and a later operation reads the new version. A
/// source row that is neither 1 nor the destination's length is the same
/// error on every backend.
pub fn assignments_into_existing_tensors<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    use shape_graph::ops::AssignExisting;
    use std::sync::Arc;
    let ragged = |outer: Vec<u64>, lengths: &[u64], values: Vec<f32>| {
        HostTensor::ragged(outer, lengths, vec![], values).expect("ragged data")
    };
    let dense = |dims: Vec<u64>, values: Vec<f32>| HostTensor::new(dims, values).expect("data");
    let program = program_with;
    let name = backend.name().to_string();

    // The seed document's examples, with dense destinations.
    let mut g = Graph::new();
    let a = g.input("a", "3").expect("a spec");
    let b = g.input("b", "1").expect("a spec");
    let m = g.input("m", "2, 3").expect("a spec");
    let r = g.input("r", "2, var").expect("a ragged spec");
    let a2 = g
        .apply_named("a", Arc::new(AssignExisting), &[a, b])
        .expect("a scalar into an array");
    let m2 = g
        .apply_named("m", Arc::new(AssignExisting), &[m, r])
        .expect("var into strided");
    let after = g.add(m2, a2).expect("a later read of the new versions");
    let p = program(
        g,
        vec![a2, m2, after],
        vec![
            (a, dense(vec![3], vec![1., 2., 3.])),
            (b, dense(vec![1], vec![4.])),
            (m, dense(vec![2, 3], vec![5., 6., 7., 8., 9., 10.])),
            (r, ragged(vec![2], &[3, 1], vec![1., 2., 3., 4.])),
        ],
    );
    let out = agree(backend, &p, tolerance);
    assert_eq!(out[&a2], [4., 4., 4.], "{name}");
    assert_eq!(out[&m2], [1., 2., 3., 4., 4., 4.], "{name}");
    assert_eq!(out[&after], [5., 6., 7., 8., 8., 8.], "{name}");

    // Ragged destinations keep their rows.
    let mut g = Graph::new();
    let v = g.input("v", "3, var").expect("a ragged spec");
    let col = g.input("col", "3, 1").expect("a spec");
    let same = g.input("same", "3, var").expect("a ragged spec");
    let scalar = g.input("scalar", "1").expect("a spec");
    let by_row = g
        .apply_named("v", Arc::new(AssignExisting), &[v, col])
        .expect("1 into var");
    let copied = g
        .apply_named("v", Arc::new(AssignExisting), &[by_row, same])
        .expect("var into var");
    let filled = g
        .apply_named("v", Arc::new(AssignExisting), &[v, scalar])
        .expect("a scalar into var");
    let doubled = g.add(copied, copied).expect("a later read");
    let solved = g.solve().expect("solves");
    assert_eq!(
        solved.shape(by_row).expect("a shape").to_string(),
        "|->3, var"
    );
    let p = program(
        g,
        vec![by_row, copied, filled, doubled],
        vec![
            (v, ragged(vec![3], &[2, 1, 3], vec![1., 2., 3., 4., 5., 6.])),
            (col, dense(vec![3, 1], vec![7., 8., 9.])),
            (
                same,
                ragged(vec![3], &[2, 1, 3], vec![-1., -2., -3., -4., -5., -6.]),
            ),
            (scalar, dense(vec![1], vec![0.5])),
        ],
    );
    let out = agree(backend, &p, tolerance);
    assert_eq!(out[&by_row], [7., 7., 8., 9., 9., 9.], "{name}");
    assert_eq!(out[&copied], [-1., -2., -3., -4., -5., -6.], "{name}");
    assert_eq!(out[&filled], [0.5; 6], "{name}");
    assert_eq!(out[&doubled], [-2., -4., -6., -8., -10., -12.], "{name}");
    let mut nested = solved
        .run(backend, p.inputs.clone(), &[by_row], &p.options)
        .expect("runs");
    let rows = nested.remove(by_row).expect("the new version");
    assert_eq!(rows.to_string(), "[[7, 7], [8], [9, 9, 9]]", "{name}");

    // A source row of 2 against a destination row of 3: refused alike.
    let mut g = Graph::new();
    let v = g.input("v", "2, var").expect("a ragged spec");
    let s = g.input("s", "2, var").expect("a ragged spec");
    let into = g
        .apply_named("v", Arc::new(AssignExisting), &[v, s])
        .expect("var into var");
    let bad = program(
        g,
        vec![into],
        vec![
            (v, ragged(vec![2], &[1, 3], vec![1., 2., 3., 4.])),
            (s, ragged(vec![2], &[1, 2], vec![1., 2., 3.])),
        ],
    );
    let solved = bad.graph.solve().expect("solves");
    let here = refused_alike(backend, &solved, &bad);
    assert!(
        here.contains("row (1)") && here.contains("must be 1 or 3"),
        "{here}"
    );
}

/// Composition, einsum contractions, reductions, diagonals, outer
/// products.
pub fn contractions<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    let mut g = Graph::new();
    let w = g.input("w", "2->3").expect("a spec");
    let x = g.input("x", "2|2").expect("a spec");
    let m = g.input("m", "3,3").expect("a spec");
    let y = g.compose(w, x).expect("a matrix product");
    let mm = g.einsum("ij;jk=>ik", &[m, m]).expect("a contraction");
    let rows = g.permute("ij=>i", m).expect("row sums");
    let total = g.permute("ij=>", m).expect("a total");
    let trace = g.permute("ii=>", m).expect("a trace");
    let diag = g.permute("ii=>i", m).expect("a diagonal");
    let outer = g
        .einsum("i;j=>ij", &[rows, rows])
        .expect("an outer product");
    let p = Program::with_named_data(
        g,
        vec![y, mm, rows, total, trace, diag, outer],
        [
            ("w", vec![1., 2., 3., 4., 5., 6.]),
            ("x", vec![1., 0., 0., 1.]),
            ("m", (1..=9).map(|v| v as f32).collect()),
        ],
    )
    .expect("data for every input");
    let out = agree(backend, &p, tolerance);
    assert_eq!(out[&y], [1., 3., 5., 2., 4., 6.], "{}", backend.name());
    assert_eq!(out[&rows], [6., 15., 24.], "{}", backend.name());
    assert_eq!(out[&total], [45.], "{}", backend.name());
    assert_eq!(out[&trace], [15.], "{}", backend.name());
    assert_eq!(out[&diag], [1., 5., 9.], "{}", backend.name());
    assert_eq!(
        out[&mm],
        [30., 36., 42., 66., 81., 96., 102., 126., 150.],
        "{}",
        backend.name()
    );
}

/// Strided inputs, DyND's examples of strided data read where it lies:
/// the scalar `4` seen as `[4, 4, 4]` at stride 0 (DyND's scalar to
/// strided assignment, with `src_stride` 0), a row repeated down a matrix
/// at stride 0, the transpose of `[[1, 2, 3], [4, 5, 6]]` at strides
/// `[1, 3]`, every other element of a buffer (a slice from offset 1 at
/// stride 2), and a Fortran-ordered matrix in a contraction. Each is read
/// in place (no copy) and gives the values of its C-ordered copy.
pub fn strided_views<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    let mut g = Graph::new();
    let s = g.input("s", "3").expect("a spec");
    let row = g.input("row", "2,3").expect("a spec");
    let t = g.input("t", "3,2").expect("a spec");
    let odd = g.input("odd", "5").expect("a spec");
    let f = g.input("f", "2,3").expect("a spec");
    let filled = g.unary("id", s).expect("a copy");
    let transposed = g.permute("ij=>ji", t).expect("a transpose");
    let rows = g.add(row, transposed).expect("a sum");
    let negated = g.unary("neg", t).expect("a negation");
    let halves = g.mul(odd, odd).expect("a product");
    let product = g.einsum("ij;jk=>ik", &[f, t]).expect("a contraction");
    let sums = g.permute("ij=>j", f).expect("a reduction");
    let results = vec![filled, rows, negated, halves, product, sums];
    let mut p = Program::with_named_data(
        g,
        results.clone(),
        [
            ("s", vec![0.0; 3]),
            ("row", vec![0.0; 6]),
            ("t", vec![0.0; 6]),
            ("odd", vec![0.0; 5]),
            ("f", vec![0.0; 6]),
        ],
    )
    .expect("data for every input");
    let view = |dims: Vec<u64>, strides: Vec<u64>, offset: u64, values: Vec<f32>| {
        HostTensor::strided(dims, strides, offset, values).expect("a view inside its buffer")
    };
    let views = [
        (s, view(vec![3], vec![0], 0, vec![4.0])),
        (row, view(vec![2, 3], vec![0, 1], 0, vec![1.0, 2.0, 3.0])),
        (
            t,
            view(vec![3, 2], vec![1, 3], 0, vec![1., 2., 3., 4., 5., 6.]),
        ),
        (
            odd,
            view(vec![5], vec![2], 1, (0..10).map(|v| v as f32).collect()),
        ),
        (
            f,
            HostTensor::fortran(vec![2, 3], vec![1., 4., 2., 5., 3., 6.]).expect("Fortran data"),
        ),
    ];
    let solved = p.graph.solve().expect("a solved program");
    let plan = solved.plan(&results, &p.options).expect("a plan");
    let mut copies = p.clone();
    for (tensor, v) in views {
        assert!(
            shape_run::read_in_place(&solved, &plan, tensor, &shape_run::View::of(&v))
                .expect("a plan of this graph"),
            "read in place"
        );
        copies
            .inputs
            .insert(tensor, v.to_contiguous().expect("a copy"));
        p.inputs.insert(tensor, v);
    }
    let out = agree(backend, &p, tolerance);
    let name = backend.name();
    assert_eq!(out[&filled], [4., 4., 4.], "{name}");
    // row [[1, 2, 3], [1, 2, 3]] plus t's transpose [[1, 2, 3], [4, 5, 6]].
    assert_eq!(out[&rows], [2., 4., 6., 5., 7., 9.], "{name}");
    assert_eq!(out[&negated], [-1., -4., -2., -5., -3., -6.], "{name}");
    assert_eq!(out[&halves], [1., 9., 25., 49., 81.], "{name}");
    // [[1, 2, 3], [4, 5, 6]] @ [[1, 4], [2, 5], [3, 6]].
    assert_eq!(out[&product], [14., 32., 32., 77.], "{name}");
    assert_eq!(out[&sums], [5., 7., 9.], "{name}");
    // The same values as the C-ordered copies give.
    let from_copies = agree(backend, &copies, tolerance);
    for r in &results {
        assert_eq!(out[r], from_copies[r], "{name}");
    }
}

/// Permutes, transposes and batch slices at every index.
pub fn rearrangements<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    for slice in 0..3 {
        let mut g = Graph::new();
        let a = g.input("a", "3|2->4").expect("a spec");
        let t = g.transpose(a).expect("a transpose");
        let p = g.permute("b|i->o=>o|b->i", a).expect("a permute");
        let s = g.batch_slice(a).expect("a slice");
        let mut program = Program::with_named_data(g, vec![t, p, s], [("a", ramp(24))])
            .expect("data for every input");
        program.options = program.options.with_slice(slice);
        let out = agree(backend, &program, tolerance);
        let values = ramp(24);
        assert_eq!(
            out[&s],
            values[slice as usize * 8..][..8],
            "{}",
            backend.name()
        );
        // `a` is stored [b][o][i] at (b * 4 + o) * 2 + i; its transpose
        // [b][i][o], and the permute `o|b->i`, stored [o][i][b].
        let a_at = |b: usize, o: usize, i: usize| values[(b * 4 + o) * 2 + i];
        let transposed: Vec<f32> = (0..3)
            .flat_map(|b| (0..2).flat_map(move |i| (0..4).map(move |o| (b, i, o))))
            .map(|(b, i, o)| a_at(b, o, i))
            .collect();
        assert_eq!(out[&t], transposed, "{}", backend.name());
        let permuted: Vec<f32> = (0..4)
            .flat_map(|o| (0..2).flat_map(move |i| (0..3).map(move |b| (o, i, b))))
            .map(|(o, i, b)| a_at(b, o, i))
            .collect();
        assert_eq!(out[&p], permuted, "{}", backend.name());
    }
}

/// Reductions other than sums: a numerically stable softmax over the
/// first axis (subtracting each column's maximum), a minimum and a
/// product, and a reduction of nothing, which keeps NaN.
pub fn reductions<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    use shape_graph::ops::Reduction;
    let mut g = Graph::new();
    let x = g.input("x", "5, 3").expect("a spec");
    let big = g.input("big", "5, 3").expect("a spec");
    let scaled = g.binary("mul", x, big).expect("a product");
    let max = g
        .einsum_reduced("u,t=>t", &[scaled], Reduction::Max)
        .expect("a max");
    let shifted = g.binary("sub", scaled, max).expect("a difference");
    let e = g.unary("exp", shifted).expect("exp");
    let total = g.einsum("u,t=>t", &[e]).expect("a sum");
    let softmax = g.binary("div", e, total).expect("a quotient");
    let min = g
        .einsum_reduced("u,t=>t", &[x], Reduction::Min)
        .expect("a min");
    let prod = g
        .einsum_reduced("u,t=>t", &[x], Reduction::Product)
        .expect("a product");
    let same = g
        .einsum_reduced("u,t=>t,u", &[x], Reduction::Max)
        .expect("no reduction");
    let mut xs = ramp(15);
    xs[4] = f32::NAN;
    let program = Program::with_named_data(
        g,
        vec![max, softmax, min, prod, same],
        [("x", xs.clone()), ("big", vec![1000.0; 15])],
    )
    .expect("data for every input");
    let out = agree(backend, &program, tolerance);
    let column = |t: usize| -> Vec<f32> { (0..5).map(|u| xs[u * 3 + t]).collect() };
    for t in 0..3 {
        // `f32::max` and `f32::min` pass over NaN (column 1 holds one).
        let hi = column(t).into_iter().fold(f32::NEG_INFINITY, f32::max);
        assert_eq!(out[&max][t], hi * 1000.0, "{}", backend.name());
        assert_eq!(
            out[&min][t],
            column(t).into_iter().fold(f32::INFINITY, f32::min),
            "{}",
            backend.name()
        );
        let p = column(t).into_iter().fold(1.0f32, |a, v| a * v);
        assert_eq!(out[&prod][t].is_nan(), p.is_nan(), "{}", backend.name());
        if !p.is_nan() {
            assert!(
                (out[&prod][t] - p).abs() <= 1e-6 * p.abs(),
                "{}",
                backend.name()
            );
        }
        if t != 1 {
            // Scaled by 1000, a plain softmax would overflow to NaN.
            let s: f32 = (0..5).map(|u| out[&softmax][u * 3 + t]).sum();
            assert!((s - 1.0).abs() < 1e-5, "{}: {s}", backend.name());
        }
    }
    // Reducing nothing keeps every value, NaN included.
    // `same` is `x` transposed: element [t = 1, u = 1] is x[1, 1].
    assert!(out[&same][5 + 1].is_nan(), "{}", backend.name());
    assert_eq!(out[&same][2 * 5 + 4], xs[4 * 3 + 2], "{}", backend.name());
}

/// Concatenation along the last output axis: parts of different lengths,
/// one that broadcasts over the leading axes, a part of length 1.
pub fn concatenation<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    let mut g = Graph::new();
    let a = g.input("a", "2|3, 4").expect("a spec");
    let b = g.input("b", "1, 2").expect("a spec");
    let c = g.input("c", "2|3, 1").expect("a spec");
    let cat = g.concat(&[a, b, c]).expect("a concatenation");
    let program = Program::with_named_data(
        g,
        vec![cat],
        [("a", ramp(24)), ("b", vec![10.0, 20.0]), ("c", ramp(6))],
    )
    .expect("data for every input");
    let out = agree(backend, &program, tolerance);
    // Row (batch 1, 2) of the result: a's row, then b's only row, then c's.
    let row = &out[&cat][(3 + 2) * 7..][..7];
    let a_row = &ramp(24)[(3 + 2) * 4..][..4];
    assert_eq!(&row[..4], a_row, "{}", backend.name());
    assert_eq!(&row[4..6], &[10.0, 20.0], "{}", backend.name());
    assert_eq!(row[6], ramp(6)[3 + 2], "{}", backend.name());
}

/// Axes before a row variable (a leading flank): rotations of a row and
/// a leading axis broadcast over the middle.
pub fn leading_flanks<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    let mut g = Graph::new();
    let t = g.input("t", "2|3, ..m.., 4").expect("a spec");
    let b = g.input("b", "3, ..m.., 1").expect("a spec");
    let last_first = g.permute("..m.., n=>n, ..m..", t).expect("a rotation");
    let first_last = g.permute("a, ..m..=>..m.., a", t).expect("a rotation");
    let sum = g.binary("add", t, b).expect("a sum");
    g.require(t, "2|3, 5, 4").expect("a spec");
    let program = Program::with_named_data(
        g,
        vec![last_first, first_last, sum],
        [("t", ramp(120)), ("b", ramp(15))],
    )
    .expect("data for every input");
    let out = agree(backend, &program, tolerance);
    let t_at =
        |batch: usize, i: usize, j: usize, k: usize| ramp(120)[((batch * 3 + i) * 5 + j) * 4 + k];
    // `n, ..m..`: element [batch][k][i][j] is t[batch][i][j][k].
    assert_eq!(
        out[&last_first][(3 * 3 + 2) * 5 + 1],
        t_at(0, 2, 1, 3),
        "{}",
        backend.name()
    );
    // `..m.., a`: element [batch][j][k][i] is t[batch][i][j][k].
    assert_eq!(
        out[&first_last][((5 + 2) * 4 + 3) * 3 + 2],
        t_at(1, 2, 2, 3),
        "{}",
        backend.name()
    );
    // `b` is 3 x 5 x 1 and broadcasts over the batch and the last axis.
    assert_eq!(
        out[&sum][((3 + 1) * 5 + 4) * 4 + 2],
        t_at(1, 1, 4, 2) + ramp(15)[5 + 4],
        "{}",
        backend.name()
    );
}

/// A result a kernel does not write entirely (a diagonal placed in a
/// matrix) must read 0 elsewhere, even in a buffer that an earlier result
/// of the same size freed.
pub fn unwritten_elements_are_zero<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    let mut g = Graph::new();
    let x = g.input("x", "3").expect("a spec");
    let outer = g.einsum("i;j=>ij", &[x, x]).expect("an outer product");
    let dense = g.unary("exp", outer).expect("a pointwise result");
    let diagonal = g.permute("i=>ii", x).expect("a diagonal embedding");
    let p = Program::with_named_data(g, vec![dense, diagonal], [("x", vec![1., 2., 3.])])
        .expect("data for every input");
    let out = agree(backend, &p, tolerance);
    assert_eq!(
        out[&diagonal],
        [1., 0., 0., 0., 2., 0., 0., 0., 3.],
        "{}",
        backend.name()
    );
}

/// Fixed indices (issue 13): an operand digit selects a position, a result
/// digit places values at one (the rest 0, also in a reused buffer), with
/// a batch row and a max reduction around them; `label:size` ties axes.
pub fn fixed_indices<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    let mut g = Graph::new();
    let h = g.input("h", "2|3->4").expect("a spec");
    let a = g.input("a", "2,3").expect("a spec");
    // Element 1 of each input row: h[b][o][1].
    let picked = g.permute("...|1->...=>...|...", h).expect("a fixed index");
    // A filler of the same size as `placed`, freed before it runs.
    let filler = g.unary("exp", a).expect("a pointwise result");
    let filler = g.unary("neg", filler).expect("a pointwise result");
    // Row maxima of `a`, written to column 2 of a 2x3 result.
    let placed = g
        .einsum_reduced("i,j=>i,2", &[a], shape_graph::ops::Reduction::Max)
        .expect("a fixed index in the result");
    let tied = g.permute("i,n:3=>n:3,i", a).expect("a sized label");
    let p = Program::with_named_data(
        g,
        vec![filler, picked, placed, tied],
        [("h", ramp(24)), ("a", ramp(6))],
    )
    .expect("data for every input");
    let out = agree(backend, &p, tolerance);
    let (hv, av) = (ramp(24), ramp(6));
    // h is stored batch, output, input: [b][o][i] at (b * 4 + o) * 3 + i.
    let want: Vec<f32> = (0..2)
        .flat_map(|b| (0..4).map(move |o| (b, o)))
        .map(|(b, o)| hv[(b * 4 + o) * 3 + 1])
        .collect();
    assert_eq!(out[&picked], want, "{}", backend.name());
    let max = |r: usize| {
        av[r * 3..r * 3 + 3]
            .iter()
            .copied()
            .fold(f32::MIN, f32::max)
    };
    assert_eq!(
        out[&placed],
        [0., 0., max(0), 0., 0., max(1)],
        "{}",
        backend.name()
    );
    assert_eq!(
        out[&tied],
        [av[0], av[3], av[1], av[4], av[2], av[5]],
        "{}",
        backend.name()
    );
}

/// Convolutions (issue 14): 2-D, stride 1 and 2, with and without
/// padding, and max-pooling with and without padding, on several sizes,
/// each checked against a direct computation as well as the reference.
pub fn convolutions<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    // Sizes drawn from a fixed seed: odd (without padding, stride 2 must
    // divide the input less the kernel) and even (with padding, stride 2
    // must divide the input).
    let mut seed = 0x9e37_79b9_u64;
    let mut draw = |lo: u64, n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        (lo + seed % n) as usize
    };
    for _ in 0..4 {
        let (h, w) = (2 * draw(2, 4) + 1, 2 * draw(2, 4) + 1);
        let mut g = Graph::new();
        let img = g.input("img", &format!("2|{h},{w}")).expect("a spec");
        let k = g.input("k", "3,3").expect("a spec");
        let valid = g
            .einsum("...|o<+a,p<+b;a,b=>...|o,p", &[img, k])
            .expect("a convolution");
        let same = g
            .einsum("...|o=+a,p=+b;a,b=>...|o,p", &[img, k])
            .expect("a padded convolution");
        let strided = g
            .einsum("...|2*o<+a,2*p<+b;a,b=>...|o,p", &[img, k])
            .expect("a strided convolution");
        let pool = g
            .einsum_reduced(
                "...|o=+a:3,p=+b:3=>...|o,p",
                &[img],
                shape_graph::ops::Reduction::Max,
            )
            .expect("a padded max-pool");
        let pool2 = g
            .einsum_reduced(
                "...|2*o<+a:3,2*p<+b:3=>...|o,p",
                &[img],
                shape_graph::ops::Reduction::Max,
            )
            .expect("a strided max-pool");
        // Padded with stride 2 needs an even input: the image less its last
        // row and column, through a fixed-size slice of each axis.
        let (eh, ew) = (h - 1, w - 1);
        let even = g.input("even", &format!("2|{eh},{ew}")).expect("a spec");
        let same2 = g
            .einsum("...|2*o=+a,2*p=+b;a,b=>...|o,p", &[even, k])
            .expect("a padded strided convolution");
        let n = 2 * h * w;
        let (iv, kv, ev) = (ramp(n), ramp(9), ramp(2 * eh * ew));
        let p = Program::with_named_data(
            g,
            vec![valid, same, strided, pool, pool2, same2],
            [("img", iv.clone()), ("k", kv.clone()), ("even", ev.clone())],
        )
        .expect("data for every input");
        let out = agree(backend, &p, tolerance);
        let at_in = |v: &[f32], h: usize, w: usize, b: usize, i: i64, j: i64| -> Option<f32> {
            (0..h as i64).contains(&i).then_some(())?;
            (0..w as i64).contains(&j).then_some(())?;
            Some(v[(b * h + i as usize) * w + j as usize])
        };
        let at = |b: usize, i: i64, j: i64| at_in(&iv, h, w, b, i, j);
        // out[b][o][p] = sum over a, c of img[b][s*o + a - left][s*p + c - left] * k[a][c].
        let conv_of = |at: &dyn Fn(usize, i64, i64) -> Option<f32>,
                       s: i64,
                       left: i64,
                       oh: usize,
                       ow: usize|
         -> Vec<f32> {
            let mut v = Vec::new();
            for b in 0..2 {
                for o in 0..oh as i64 {
                    for q in 0..ow as i64 {
                        let mut acc = 0.0f32;
                        for a in 0..3i64 {
                            for c in 0..3i64 {
                                let x = at(b, s * o + a - left, s * q + c - left).unwrap_or(0.0);
                                acc += x * kv[(a * 3 + c) as usize];
                            }
                        }
                        v.push(acc);
                    }
                }
            }
            v
        };
        let conv = |s: i64, left: i64, oh: usize, ow: usize| conv_of(&at, s, left, oh, ow);
        let close = |a: &[f32], b: &[f32]| {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(x, y)| (x - y).abs() <= 1e-4 * (1.0 + y.abs()))
        };
        let name = backend.name();
        assert!(
            close(&out[&valid], &conv(1, 0, h - 2, w - 2)),
            "{name}: valid"
        );
        assert!(close(&out[&same], &conv(1, 1, h, w)), "{name}: same");
        assert!(
            close(
                &out[&strided],
                &conv(2, 0, (h - 3) / 2 + 1, (w - 3) / 2 + 1)
            ),
            "{name}: strided"
        );
        let mut want = Vec::new();
        for b in 0..2 {
            for o in 0..h as i64 {
                for q in 0..w as i64 {
                    let m = (0..3i64)
                        .flat_map(|a| (0..3i64).map(move |c| (a, c)))
                        .filter_map(|(a, c)| at(b, o + a - 1, q + c - 1))
                        .fold(f32::NEG_INFINITY, f32::max);
                    want.push(m);
                }
            }
        }
        assert_eq!(out[&pool], want, "{name}: padded max-pool");
        let mut want = Vec::new();
        let (ph, pw) = ((h - 3) / 2 + 1, (w - 3) / 2 + 1);
        for b in 0..2 {
            for o in 0..ph as i64 {
                for q in 0..pw as i64 {
                    let m = (0..3i64)
                        .flat_map(|a| (0..3i64).map(move |c| (a, c)))
                        .filter_map(|(a, c)| at(b, 2 * o + a, 2 * q + c))
                        .fold(f32::NEG_INFINITY, f32::max);
                    want.push(m);
                }
            }
        }
        assert_eq!(out[&pool2], want, "{name}: strided max-pool");
        let at_even = |b: usize, i: i64, j: i64| at_in(&ev, eh, ew, b, i, j);
        let want = conv_of(&at_even, 2, 1, eh / 2, ew / 2);
        assert!(close(&out[&same2], &want), "{name}: padded strided");
    }
}

/// A sum over every element of its operand, lowered to two kernels
/// through a scratch buffer: doubled first, then summed and halved. An
/// operation defined outside the solver, to check multi-step lowering.
#[derive(Debug)]
pub struct TwoStepSum;

impl Operation for TwoStepSum {
    fn name(&self) -> &str {
        "two_step_sum"
    }

    fn arity(&self) -> usize {
        1
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        // The result has no axes.
        for kind in shape_core::RowKind::ALL {
            cx.row_is(
                RowSite::result(kind),
                shape_core::Row::empty(),
                "to have no axes, as a total".into(),
            );
        }
    }

    fn project(&self, _cx: &mut ProjectionBuilder<'_>) {}

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        let n: u64 = cx.shape(1).memory_dims().iter().product();
        let double = Kernel::new(
            vec![IterKind::Parallel],
            1,
            Expr::Binary(
                shape_core::kernel::BinaryOp::Mul,
                Box::new(Expr::Load(0)),
                Box::new(Expr::Const(2.0)),
            ),
            Accumulate::Assign,
        );
        let flat = Layout::new(0, vec![1], n);
        let halve = Kernel::new(
            vec![IterKind::Reduction],
            1,
            Expr::Binary(
                shape_core::kernel::BinaryOp::Mul,
                Box::new(Expr::Load(0)),
                Box::new(Expr::Const(0.5)),
            ),
            Accumulate::Add,
        );
        Ok(Lowered {
            scratch: vec![n],
            steps: vec![
                Step {
                    kernel: double,
                    launch: Launch::new(vec![n], flat.clone(), vec![flat.clone()]),
                    result: BufferRef::Scratch(0),
                    operands: vec![BufferRef::Operand(0)],
                    call: None,
                },
                Step {
                    kernel: halve,
                    launch: Launch::new(vec![n], Layout::new(0, vec![0], 1), vec![flat]),
                    result: BufferRef::Result,
                    operands: vec![BufferRef::Scratch(0)],
                    call: None,
                },
            ],
        })
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("two_step_sum({})", operands.join(", "))
    }
}

/// An operation lowered to two kernels and a scratch buffer.
pub fn multi_step_lowering<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    let mut g = Graph::new();
    let x = g.input("x", "4,5").expect("a spec");
    let s = g.apply(Arc::new(TwoStepSum), &[x]).expect("a total");
    let again = g.apply(Arc::new(TwoStepSum), &[x]).expect("a second total");
    let p = Program::with_named_data(
        g,
        vec![s, again],
        [("x", (1..=20).map(|v| v as f32).collect())],
    )
    .expect("data for every input");
    let out = agree(backend, &p, tolerance);
    assert_eq!(out[&s], [210.], "{}", backend.name());
    assert_eq!(out[&again], [210.], "{}", backend.name());
}

/// Reductions far longer than the number of results: sums past 65,536
/// and 1,000,000 elements, and a nested reduction of 256 by 256.
pub fn long_reductions<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    let mut g = Graph::new();
    let ones = g.input("ones", "1000003").expect("a spec");
    let square = g.input("square", "256,256").expect("a spec");
    let total = g.permute("i=>", ones).expect("a total");
    let nested = g.permute("ij=>", square).expect("a nested total");
    let p = Program::with_named_data(
        g,
        vec![total, nested],
        [
            ("ones", vec![1.0; 1_000_003]),
            ("square", vec![1.0; 65_536]),
        ],
    )
    .expect("data for every input");
    let out = agree(backend, &p, tolerance);
    assert_eq!(out[&total], [1_000_003.], "{}", backend.name());
    assert_eq!(out[&nested], [65_536.], "{}", backend.name());
}

/// A launch whose result layout lets two points write one element is
/// refused, unless it allows the race.
pub fn write_conflicts<B: Backend>(backend: &mut B, _tolerance: Tolerance) {
    let kernel = Kernel::new(
        vec![IterKind::Parallel],
        0,
        Expr::Const(7.0),
        Accumulate::Assign,
    );
    let racy = Launch::new(vec![4], Layout::new(0, vec![0], 1), vec![]);
    let mut out = backend.alloc(1).expect("a buffer");
    assert!(
        backend.execute(&kernel, &racy, &mut out, &[]).is_err(),
        "{} ran a racing launch",
        backend.name()
    );
    let allowed = racy.allowing_races();
    backend
        .execute(&kernel, &allowed, &mut out, &[])
        .unwrap_or_else(|e| panic!("{}: {e}", backend.name()));
    // Every point writes the same value, so the race is harmless here.
    assert_eq!(backend.download(&out).expect("a download"), vec![7.0]);
}

/// Axes of size 0, as numpy has them: 1 broadcasts to 0, an empty
/// result needs no kernel, a sum over an empty axis is 0 and a product
/// 1, a concatenation may have an empty part, and a maximum over an empty
/// axis is an error on every backend.
pub fn empty_axes<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    use shape_graph::ops::Reduction;
    let mut g = Graph::new();
    let x = g.input("x", "0, 3").expect("a spec");
    let row = g.input("row", "1, 3").expect("a spec");
    let wide = g.input("wide", "2, 3").expect("a spec");
    let none = g.input("none", "2, 0").expect("a spec");
    let y = g.add(x, row).expect("1 broadcasts to 0");
    let sum = g.einsum("u,t=>t", &[x]).expect("a sum over nothing");
    let prod = g
        .einsum_reduced("u,t=>t", &[x], Reduction::Product)
        .expect("a product over nothing");
    // Concatenation joins along the last axis.
    let joined = g.concat(&[none, wide]).expect("an empty part");
    let p = Program::with_named_data(
        g,
        vec![y, sum, prod, joined],
        [
            ("x", vec![]),
            ("row", vec![1., 2., 3.]),
            ("wide", vec![4., 5., 6., 7., 8., 9.]),
            ("none", vec![]),
        ],
    )
    .expect("data for every input");
    let solved = p.graph.solve().expect("solves");
    assert_eq!(solved.shape(y).expect("y").to_string(), "|->0, 3");
    assert_eq!(solved.shape(joined).expect("joined").to_string(), "|->2, 3");
    let out = agree(backend, &p, tolerance);
    assert!(out[&y].is_empty(), "{}", backend.name());
    assert_eq!(out[&sum], [0.; 3], "{}", backend.name());
    assert_eq!(out[&prod], [1.; 3], "{}", backend.name());
    assert_eq!(out[&joined], [4., 5., 6., 7., 8., 9.], "{}", backend.name());

    // A maximum of no values has no answer: refused, not made up.
    let mut g = Graph::new();
    let x = g.input("x", "0, 3").expect("a spec");
    let max = g
        .einsum_reduced("u,t=>t", &[x], Reduction::Max)
        .expect("a max");
    let p = Program::with_named_data(g, vec![max], [("x", vec![])]).expect("data");
    let solved = p.graph.solve().expect("solves");
    let e = backend
        .run_solved(&solved, &p)
        .expect_err("a maximum over an empty axis");
    assert!(
        e.contains("a maximum of no values"),
        "{}: {e}",
        backend.name()
    );
}

/// Users' WGSL functions as operations of a graph
/// ([`shape_call::CallOp`]: the CPU runs them through the WGSL
/// interpreter, wgpu inlines them), each result checked against the CPU
/// reference and against the same function written as a Rust closure, so
/// that a wrong lowering every backend shares still fails: a scalar
/// function of two arguments whose batch rows broadcast (`4, 1` with `5`);
/// a function with a loop and a helper function, of a scalar and a
/// `vec4<f32>` whose batch rows broadcast (`3, 1` with `2`); a `vec3<f32>`
/// dot product; and a call between built-in operations,
/// `relu(w @ brightness(img + bias, gain))`, whose `vec3<f32>` result is
/// the output row `compose` contracts. The data are multiples of 1/4 and
/// small, so every value is exact in `f32` in any order of evaluation.
pub fn call_operations<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    use shape_call::CallOp;
    let name = backend.name().to_string();
    let check = |what: &str, have: &[f32], want: &[f32]| {
        assert_eq!(have.len(), want.len(), "{name}: {what}: lengths");
        for (k, (&h, &w)) in have.iter().zip(want).enumerate() {
            assert!(
                h == w || tolerance.agrees(h, w),
                "{name}: {what} at element {k} is {h}, not {w}"
            );
        }
    };
    let quarters = |n: usize, seed: usize| -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7 + seed * 3) % 13) as f32 / 4.0 - 1.5)
            .collect()
    };

    // A scalar function, its arguments' batch rows broadcast.
    let mut g = Graph::new();
    let a = g.input("a", "4, 1|").expect("a spec");
    let b = g.input("b", "5|").expect("a spec");
    let op = CallOp::parse("fn axpb(a: f32, b: f32) -> f32 { return a * b + 0.25; }")
        .expect("an operation");
    let y = g.apply(Arc::new(op), &[a, b]).expect("the rows fit");
    let (av, bv) = (quarters(4, 1), quarters(5, 2));
    let p = Program::with_named_data(g, vec![y], [("a", av.clone()), ("b", bv.clone())])
        .expect("data for every input");
    assert_eq!(
        p.graph
            .solve()
            .expect("solves")
            .shape(y)
            .expect("y")
            .to_string(),
        "4, 5|->"
    );
    let out = agree(backend, &p, tolerance);
    let want: Vec<f32> = (0..20).map(|k| av[k / 5] * bv[k % 5] + 0.25).collect();
    check("axpb(a, b)", &out[&y], &want);

    // A loop and a helper function; a vector argument.
    let mut g = Graph::new();
    let x = g.input("x", "3, 1|").expect("a spec");
    let c = g.input("c", "2|4").expect("a spec");
    let op = CallOp::parse(
        "fn sq(x: f32) -> f32 { return x * x; }
         fn poly(x: f32, c: vec4<f32>) -> f32 {
             var acc = 0.0;
             for (var i = 0u; i < 4u; i++) { acc = acc * x + c[i]; }
             return acc + sq(x);
         }",
    )
    .expect("an operation");
    let y = g.apply(Arc::new(op), &[x, c]).expect("the rows fit");
    let (xv, cv) = (quarters(3, 3), quarters(8, 4));
    let p = Program::with_named_data(g, vec![y], [("x", xv.clone()), ("c", cv.clone())])
        .expect("data for every input");
    let out = agree(backend, &p, tolerance);
    let want: Vec<f32> = (0..6)
        .map(|k| {
            let (x, c) = (xv[k / 2], &cv[(k % 2) * 4..][..4]);
            let horner = c.iter().fold(0.0f32, |acc, &ci| acc * x + ci);
            horner + x * x
        })
        .collect();
    check("poly(x, c)", &out[&y], &want);

    // A dot product of vectors: a scalar result.
    let mut g = Graph::new();
    let u = g.input("u", "2, 3|3").expect("a spec");
    let v = g.input("v", "3|3").expect("a spec");
    let op = CallOp::parse("fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }")
        .expect("an operation");
    let y = g.apply(Arc::new(op), &[u, v]).expect("the rows fit");
    let (uv, vv) = (quarters(18, 5), quarters(9, 6));
    let p = Program::with_named_data(g, vec![y], [("u", uv.clone()), ("v", vv.clone())])
        .expect("data for every input");
    let out = agree(backend, &p, tolerance);
    let want: Vec<f32> = (0..6)
        .map(|k| (0..3).map(|j| uv[k * 3 + j] * vv[(k % 3) * 3 + j]).sum())
        .collect();
    check("dot3(u, v)", &out[&y], &want);

    // Built-in operations before and after a call with a vector result.
    let mut g = Graph::new();
    let img = g.input("img", "6|3").expect("a spec");
    let bias = g.input("bias", "3").expect("a spec");
    let gain = g.input("gain", "|").expect("a spec");
    let w = g.input("w", "3->2").expect("a spec");
    let shifted = g.add(img, bias).expect("a bias");
    let op = CallOp::parse(
        "fn brightness(c: vec3<f32>, gain: f32) -> vec3<f32> { return clamp(c * gain, vec3<f32>(0.0), vec3<f32>(1.0)); }",
    )
    .expect("an operation");
    let bright = g
        .apply(Arc::new(op), &[shifted, gain])
        .expect("the rows fit");
    let h = g.compose(w, bright).expect("a matrix product");
    let y = g.unary("relu", h).expect("relu");
    let (imgv, biasv, wv) = (quarters(18, 7), vec![0.25, -0.5, 0.75], quarters(6, 8));
    let p = Program::with_named_data(
        g,
        vec![shifted, bright, h, y],
        [
            ("img", imgv.clone()),
            ("bias", biasv.clone()),
            ("gain", vec![1.5]),
            ("w", wv.clone()),
        ],
    )
    .expect("data for every input");
    let solved = p.graph.solve().expect("solves");
    assert_eq!(solved.shape(bright).expect("bright").to_string(), "6|->3");
    assert_eq!(solved.shape(y).expect("y").to_string(), "6|->2");
    let out = agree(backend, &p, tolerance);
    let pixel = |q: usize| -> Vec<f32> {
        (0..3)
            .map(|k| ((imgv[q * 3 + k] + biasv[k]) * 1.5).clamp(0.0, 1.0))
            .collect()
    };
    let want_bright: Vec<f32> = (0..6).flat_map(pixel).collect();
    check("brightness(img + bias, gain)", &out[&bright], &want_bright);
    let want_y: Vec<f32> = (0..6)
        .flat_map(|q| {
            let c = pixel(q);
            let wv = &wv;
            (0..2).map(move |o| (0..3).map(|k| wv[o * 3 + k] * c[k]).sum::<f32>().max(0.0))
        })
        .collect();
    check("relu(w @ brightness(img + bias, gain))", &out[&y], &want_y);
}

/// Random programs of built-in operations against values composed from
/// each operation's reference closure ([`crate::reference`]), which
/// depend on no lowering, kernel or backend (the CPU reference backend
/// compared with itself would check only that programs run), and against
/// the CPU reference backend.
///
/// The composed values go through `exp` and chains of sums whose order the
/// references do not share with the kernels, so they are held to a
/// tolerance of a few ulps ([`COMPOSED`]) on top of the backend's own.
pub fn random_programs<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    random_programs_with(
        backend,
        tolerance,
        &Registry::builtin(),
        &crate::reference::builtin_references(),
    );
}

/// [`random_programs`] drawn from the operations of `registry` (a
/// dependent crate's own included, through their samplers), checked
/// against `references` (the built-in ones and one closure per added
/// operation: [`crate::reference::References::insert`]).
pub fn random_programs_with<B: Backend>(
    backend: &mut B,
    tolerance: Tolerance,
    registry: &Arc<Registry>,
    references: &crate::reference::References,
) {
    let slack = Tolerance {
        abs: tolerance.abs.max(COMPOSED.abs),
        rel: tolerance.rel.max(COMPOSED.rel),
    };
    for seed in 0..48 {
        let p = crate::programs::program_with(registry, seed * 7919 + 1, 1 + (seed as usize % 8));
        let out = agree(backend, &p, tolerance);
        let want = references
            .expected_values(&p)
            .unwrap_or_else(|e| panic!("the references: {e}"));
        for &t in &p.results {
            let (have, want) = (&out[&t], &want[&t]);
            let name = p.graph.name(t).unwrap_or_default();
            let at = (0..want.len().max(have.len()))
                .find(|&k| !matches!((have.get(k), want.get(k)), (Some(&a), Some(&b)) if slack.agrees(a, b)));
            if let Some(k) = at {
                panic!(
                    "{}: `{name}` element {k} is {:?} but its operations' references give {:?} \
                     ({} values against {})\nthe program (slice {}):\n{}",
                    backend.name(),
                    have.get(k),
                    want.get(k),
                    have.len(),
                    want.len(),
                    p.options.slice,
                    p.to_text().unwrap_or_default()
                );
            }
        }
    }
}

/// How far a program's values may be from those composed from its
/// operations' references (see [`random_programs`]).
pub const COMPOSED: Tolerance = Tolerance {
    abs: 1e-6,
    rel: 1e-6,
};

/// Runs every case of the suite on backends made by a factory, one
/// `#[test]` per case. The factory is an expression that gives an
/// `Option` of the backend (`None` skips); the tolerance is how far its
/// results may be from the CPU reference's.
///
/// ```ignore
/// shape_tests::backend_conformance!(
///     cpu_coalesced,
///     || Some(backend_cpu::CpuBackend::coalesced()),
///     shape_tests::differential::Tolerance::EXACT
/// );
/// ```
///
/// With `registry:` and `references:`, it runs the random programs of a
/// registry that holds operations of the caller's own, against the
/// references given for them (one `#[test]`, beside the suite's):
///
/// ```ignore
/// shape_tests::backend_conformance!(
///     cpu_with_clamp,
///     || Some(backend_cpu::CpuBackend::coalesced()),
///     shape_tests::differential::Tolerance::EXACT,
///     registry: registry_with_clamp(),
///     references: references_with_clamp(),
/// );
/// ```
#[macro_export]
macro_rules! backend_conformance {
    ($name:ident, $make:expr, $tolerance:expr, registry: $registry:expr, references: $references:expr $(,)?) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            #[test]
            fn random_programs_of_the_registry() {
                $crate::conformance::with($make, |backend| {
                    $crate::conformance::random_programs_with(
                        backend,
                        $tolerance,
                        &$registry,
                        &$references,
                    )
                });
            }
        }
    };
    ($name:ident, $make:expr, $tolerance:expr) => {
        mod $name {
            #[allow(unused_imports)]
            use super::*;

            $crate::backend_conformance!(@cases $make, $tolerance;
                pointwise_functions,
                broadcasting,
                assignments_into_declared_shapes,
                assignments_into_existing_tensors,
                strided_views,
                contractions,
                rearrangements,
                leading_flanks,
                reductions,
                concatenation,
                unwritten_elements_are_zero,
                fixed_indices,
                convolutions,
                multi_step_lowering,
                long_reductions,
                write_conflicts,
                empty_axes,
                run_time_sizes,
                ragged_dims,
                random_programs,
                call_operations,
            );
        }
    };
    (@cases $make:expr, $tolerance:expr; $($case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::conformance::with($make, |backend| {
                    $crate::conformance::$case(backend, $tolerance)
                });
            }
        )*
    };
}

/// Run-time sizes: one graph whose batch size `b` is known only at run
/// time, run at `b` = 1, 2 and 5 from the data alone, gives what the graph
/// solved with `b` written as a number gives; data that breaks a guard
/// (`b` against a batch of 4) is refused before anything runs, with the
/// same error on every backend.
pub fn run_time_sizes<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    let build = |n: Option<u64>| {
        let mut g = Graph::new();
        match n {
            None => {
                g.run_time_size("b").expect("a run-time size");
            }
            Some(n) => {
                let s = g.size("b");
                g.set_size(s, n).expect("a size");
            }
        }
        let x = g.input("x", "b|3").expect("a spec");
        let w = g.input("w", "3->2").expect("a spec");
        let bias = g.input("bias", "2").expect("a spec");
        let h = g.compose(w, x).expect("compose");
        let y = g.add(h, bias).expect("add");
        let total = g.einsum("u|t=>t", &[y]).expect("a sum over the batch");
        (g, vec![h, y, total])
    };
    for n in [1u64, 2, 5] {
        let data = |_: ()| {
            [
                ("x", ramp(3 * n as usize)),
                ("w", ramp(6)),
                ("bias", vec![0.5, -1.0]),
            ]
        };
        let (g, results) = build(None);
        let symbolic =
            Program::with_sized_data(g, results.clone(), &[("b", n)], data(())).expect("data");
        let (g, _) = build(Some(n));
        let fixed = Program::with_named_data(g, results.clone(), data(())).expect("data");
        let a = agree(backend, &symbolic, tolerance);
        let b = agree(backend, &fixed, tolerance);
        for t in &results {
            assert_eq!(a[t], b[t], "{}: b = {n}", backend.name());
        }
    }

    // `b` meets a batch of 4: it must be 1 or 4.
    let mut g = Graph::new();
    g.run_time_size("b").expect("a run-time size");
    let x = g.input("x", "b|3").expect("a spec");
    let y = g.input("y", "4|3").expect("a spec");
    let z = g.add(x, y).expect("add");
    let solved = g.solve().expect("solves");
    assert_eq!(solved.guards().len(), 1);
    let p = Program::with_sized_data(g, vec![z], &[("b", 4)], [("x", ramp(12)), ("y", ramp(12))])
        .expect("data");
    agree(backend, &p, tolerance);
    let mut bad = p.clone();
    bad.inputs
        .insert(x, HostTensor::new(vec![3, 3], ramp(9)).expect("data"));
    let here = refused_alike(backend, &solved, &bad);
    assert!(here.contains("cannot broadcast to 4"), "{here}");
}

/// The error `backend` gives for `bad`, which must be the CPU
/// reference's, word for word.
fn refused_alike<B: Backend>(
    backend: &mut B,
    solved: &shape_graph::SolvedGraph,
    bad: &Program,
) -> String {
    let reference = CpuBackend::reference().run_solved(solved, bad).unwrap_err();
    let here = backend.run_solved(solved, bad).unwrap_err();
    assert_eq!(here, reference, "{}", backend.name());
    here
}

/// Ragged (`var`) dims, with DyND's document's examples: `[[1], [2, 3]]`
/// broadcast with `[[4], [5]]` (var against 1 stays ragged) and with
/// `[[4, 5], [6, 7]]` (var against 2 gives 2), two ragged tensors row by
/// row, sums and maxima along the ragged axis (an empty row's sum is 0),
/// a ragged axis with an inner axis and a batch axis before it, a chain
/// of operations on ragged results, and a ragged source assigned one way
/// into a declared strided shape (`[[1, 2, 3], [4]]` into `2, 3` gives
/// `[[1, 2, 3], [4, 4, 4]]`), a ragged axis first (one row), and nested
/// ragged axes (`3 * var * var`: broadcasting at both levels, a weight
/// per word, sums along the characters then the words). A row that does
/// not broadcast is the same error on every backend.
pub fn ragged_dims<B: Backend>(backend: &mut B, tolerance: Tolerance) {
    use shape_graph::ops::Reduction;
    let ragged = |outer: Vec<u64>, lengths: &[u64], inner: Vec<u64>, values: Vec<f32>| {
        HostTensor::ragged(outer, lengths, inner, values).expect("ragged data")
    };
    let dense = |dims: Vec<u64>, values: Vec<f32>| HostTensor::new(dims, values).expect("data");
    let program = program_with;

    let mut g = Graph::new();
    let a = g.input("a", "2, var").expect("a ragged spec");
    let b1 = g.input("b1", "2, 1").expect("a spec");
    let b2 = g.input("b2", "2, 2").expect("a spec");
    let c = g.input("c", "2, var").expect("a ragged spec");
    let with_one = g.add(a, b1).expect("var with 1");
    let with_two = g.add(a, b2).expect("var with 2");
    let rows = g.mul(a, c).expect("var with var");
    let relu = g.unary("relu", rows).expect("relu");
    let sum = g.einsum("ij=>i", &[relu]).expect("a sum along var");
    let max = g
        .einsum_reduced("ij=>i", &[with_one], Reduction::Max)
        .expect("a max along var");
    let into = g.unary("id", c).expect("a copy");
    g.require(into, "2, 3").expect("var assigned into 3");
    // DyND's strided source into a new var destination: rows of the
    // source's length (a one-way assignment, `<-`).
    let to_var = g
        .apply(std::sync::Arc::new(shape_graph::ops::Assign), &[b2])
        .expect("an assignment");
    g.require(to_var, "2, var").expect("2 assigned into var");
    let results = vec![with_one, with_two, rows, relu, sum, max, into, to_var];
    let p = program(
        g,
        results.clone(),
        vec![
            (a, ragged(vec![2], &[1, 2], vec![], vec![1., 2., 3.])),
            (b1, dense(vec![2, 1], vec![4., 5.])),
            (b2, dense(vec![2, 2], vec![4., 5., 6., 7.])),
            (c, ragged(vec![2], &[3, 1], vec![], vec![1., 2., 3., 4.])),
        ],
    );
    let solved = p.graph.solve().expect("solves");
    let shape = |t: TensorId| solved.shape(t).expect("a shape").to_string();
    assert_eq!(shape(with_one), "|->2, var");
    assert_eq!(shape(with_two), "|->2, 2");
    assert_eq!(shape(rows), "|->2, var");
    let out = agree(backend, &p, tolerance);
    let name = backend.name();
    assert_eq!(out[&with_one], [5., 7., 8.], "{name}");
    assert_eq!(out[&with_two], [5., 6., 8., 10.], "{name}");
    // Row 0: 1 against [1, 2, 3]; row 1: [2, 3] against 4.
    assert_eq!(out[&rows], [1., 2., 3., 8., 12.], "{name}");
    assert_eq!(out[&sum], [6., 20.], "{name}");
    assert_eq!(out[&max], [5., 8.], "{name}");
    assert_eq!(out[&into], [1., 2., 3., 4., 4., 4.], "{name}");
    assert_eq!(out[&to_var], [4., 5., 6., 7.], "{name}");
    let mut nested = solved
        .run(backend, p.inputs.clone(), &[rows], &p.options)
        .expect("runs");
    let rows_out = nested.remove(rows).expect("rows");
    assert_eq!(rows_out.to_string(), "[[1, 2, 3], [8, 12]]", "{name}");

    // A batch axis and an inner axis around the ragged one, an empty row,
    // and a bias broadcast along the rows.
    let mut g = Graph::new();
    let x = g.input("x", "2|var, 2").expect("a ragged spec");
    let bias = g.input("bias", "2").expect("a spec");
    let y = g.add(x, bias).expect("add");
    let total = g.einsum("b|r,k=>b|k", &[y]).expect("a sum along var");
    let p = program(
        g,
        vec![y, total],
        vec![
            (x, ragged(vec![2], &[2, 0], vec![2], vec![1., 2., 3., 4.])),
            (bias, dense(vec![2], vec![10., 20.])),
        ],
    );
    let out = agree(backend, &p, tolerance);
    assert_eq!(out[&y], [11., 22., 13., 24.], "{name}");
    assert_eq!(out[&total], [24., 46., 0., 0.], "{name}");

    // A ragged axis first (DyND's top-level `var * 3`): one row of its
    // own length, broadcast against a strided row and summed across.
    let mut g = Graph::new();
    let top = g.input("top", "var, 3").expect("a ragged spec");
    let row = g.input("row", "3").expect("a spec");
    let shifted = g.add(top, row).expect("var, 3 with 3");
    let across = g.einsum("ij=>i", &[shifted]).expect("a sum across");
    let p = program(
        g,
        vec![shifted, across],
        vec![
            (
                top,
                HostTensor::ragged(vec![], &[2], vec![3], (1..=6).map(|v| v as f32).collect())
                    .expect("ragged data"),
            ),
            (row, dense(vec![3], vec![10., 20., 30.])),
        ],
    );
    let out = agree(backend, &p, tolerance);
    assert_eq!(out[&shifted], [11., 22., 33., 14., 25., 36.], "{name}");
    assert_eq!(out[&across], [66., 75.], "{name}");

    // Nested ragged axes (DyND's `3 * var * var`: sentences of words of
    // characters), one level of offsets each: a function of every
    // character, a weight per word, a sentence of one word broadcast over
    // another's words (var with 1 gives var, at the outer level), and sums
    // along the characters then the words.
    let nested = |words: &[u64], chars: &[u64], values: Vec<f32>| {
        let dims = vec![words.len() as u64, 0, 0];
        let words = shape_core::RaggedAxis::from_lengths(1, words).expect("words");
        let chars = shape_core::RaggedAxis::from_lengths(2, chars).expect("characters");
        let rows = shape_core::RaggedAxis::nested(vec![words], chars, &dims).expect("levels");
        HostTensor::with_rows(dims, rows, values).expect("nested data")
    };
    let mut g = Graph::new();
    let text = g
        .input("text", "3, var, var")
        .expect("a nested ragged spec");
    let weight = g.input("weight", "3, var, 1").expect("a ragged spec");
    let other = g
        .input("other", "3, var, var")
        .expect("a nested ragged spec");
    let relu = g.unary("relu", text).expect("relu");
    let weighted = g.mul(relu, weight).expect("var, var with var, 1");
    let both = g.add(text, other).expect("var, var with var, var");
    let words = g
        .einsum("ijk=>ij", &[weighted])
        .expect("a sum along characters");
    let sentences = g.einsum("ij=>i", &[words]).expect("a sum along words");
    let p = program(
        g,
        vec![weighted, both, words, sentences],
        vec![
            // [[[1, -2], [3], []], [[4, 5, 6]], []]
            (
                text,
                nested(&[3, 1, 0], &[2, 1, 0, 3], vec![1., -2., 3., 4., 5., 6.]),
            ),
            (
                weight,
                ragged(vec![3], &[3, 1, 0], vec![1], vec![10., 20., 30., 2.]),
            ),
            // [[[1, 1], [1], []], [[100]], []]: sentence 1 has one word of
            // one character, read for every character of every word.
            (
                other,
                nested(&[3, 1, 0], &[2, 1, 0, 1], vec![1., 1., 1., 100.]),
            ),
        ],
    );
    let solved = p.graph.solve().expect("solves");
    assert_eq!(
        solved.shape(words).expect("a shape").to_string(),
        "|->3, var",
        "{name}"
    );
    let out = agree(backend, &p, tolerance);
    assert_eq!(out[&weighted], [10., 0., 60., 8., 10., 12.], "{name}");
    assert_eq!(out[&both], [2., -1., 4., 104., 105., 106.], "{name}");
    assert_eq!(out[&words], [10., 60., 0., 30.], "{name}");
    assert_eq!(out[&sentences], [70., 30., 0.], "{name}");
    let mut run = solved
        .run(backend, p.inputs.clone(), &[weighted], &p.options)
        .expect("runs");
    assert_eq!(
        run.remove(weighted).expect("a result").to_string(),
        "[[[10, 0], [60], []], [[8, 10, 12]], []]",
        "{name}"
    );
    // Two words against three: refused alike everywhere, naming the row.
    let mut bad = p.clone();
    bad.inputs.insert(
        other,
        nested(&[2, 1, 0], &[2, 1, 3], vec![1., 1., 1., 1., 1., 1.]),
    );
    let here = refused_alike(backend, &solved, &bad);
    assert!(
        here.contains("row (0)") && here.contains("must be 1 or 3"),
        "{here}"
    );

    // Row 1 has 2 values where 3 are needed: refused alike everywhere.
    let mut g = Graph::new();
    let c = g.input("c", "2, var").expect("a ragged spec");
    let into = g.unary("id", c).expect("a copy");
    g.require(into, "2, 3").expect("var assigned into 3");
    let bad = program(
        g,
        vec![into],
        vec![(
            c,
            ragged(vec![2], &[3, 2], vec![], vec![1., 2., 3., 4., 5.]),
        )],
    );
    let solved = bad.graph.solve().expect("solves");
    let here = refused_alike(backend, &solved, &bad);
    assert!(
        here.contains("row (1)") && here.contains("must be 1 or 3"),
        "{here}"
    );
}

/// Vectorized calls of WGSL functions (slangpy's call shapes), each
/// checked against the same function as a Rust closure on the reference
/// executor: broadcasting, values, `map` (an outer product, and the
/// documents' image example whose type dim lies outside the call shape),
/// `out` parameters, structs given field by field, matrices, integer
/// arguments, an empty call shape, and slices and buffers read through
/// generated accessors. A backend that runs calls
/// implements [`crate::calls::CallRunner`] and calls this.
pub fn vectorized_calls(runner: &mut dyn crate::calls::CallRunner) {
    use crate::calls::{assert_call_agrees, call_data, call_kernel};
    use shape_call::{Arg, ArgMap, CallArgs, Function};

    let parse = |f: &Function, text: &str| Arg::parse(text, &f.scope()).expect("an argument");
    let dot = |v: &mut [Vec<f32>]| {
        v[2][0] = v[0][0] * v[1][0] + v[0][1] * v[1][1] + v[0][2] * v[1][2];
    };
    let f = Function::parse("fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }")
        .expect("dot3");
    for (a, b, call_shape) in [
        ("tensor(100,3)", "tensor(7,100,3)", vec![7, 100]),
        ("tensor(9,3)", "vec3f", vec![9]),
        ("vec3f", "vec3f", vec![]),
        ("tensor(0,3)", "tensor(3)", vec![0]),
    ] {
        let args = CallArgs::new().arg(parse(&f, a)).arg(parse(&f, b));
        let k = call_kernel(&f, &args);
        assert_eq!(k.call_shape, call_shape, "dot3({a}, {b})");
        assert_call_agrees(runner, &k, call_data(&k, 1), &mut { dot });
    }

    // The image example: a's channels are its first dim, invented per load.
    let f = Function::parse("fn mul(a: vec3<f32>, b: vec3<f32>) -> vec3<f32> { return a * b; }")
        .expect("mul")
        .map("a", ArgMap::Dims(vec![2, 0, 1]));
    let args = CallArgs::new()
        .arg(parse(&f, "tensor(3,10,20)"))
        .arg(parse(&f, "tensor<vec3f>(10,20)"));
    let k = call_kernel(&f, &args);
    assert_eq!(k.call_shape, vec![10, 20]);
    assert_call_agrees(runner, &k, call_data(&k, 3), &mut |v: &mut [Vec<f32>]| {
        let product: Vec<f32> = v[0].iter().zip(&v[1]).map(|(a, b)| a * b).collect();
        v[2].copy_from_slice(&product);
    });

    // An outer product: each argument mapped to its own call dim.
    let f = Function::parse("fn mul(a: f32, b: f32) -> f32 { return a * b; }")
        .expect("mul")
        .map("a", ArgMap::Dims(vec![1]))
        .map("b", ArgMap::Dims(vec![0]));
    let args = CallArgs::new()
        .arg(Arg::tensor(&[100]))
        .arg(Arg::tensor(&[50]));
    let k = call_kernel(&f, &args);
    assert_eq!(k.call_shape, vec![50, 100]);
    assert_call_agrees(runner, &k, call_data(&k, 4), &mut |v: &mut [Vec<f32>]| {
        v[2][0] = v[0][0] * v[1][0]
    });

    // A struct field by field, a matrix, an integer and an out parameter.
    let f = Function::parse(
        "struct P { pos: vec3<f32>, scale: f32 }
         fn apply(p: P, m: mat2x3<f32>, k: i32, out: ptr<function, vec2<f32>>) -> f32 {
             *out = vec2<f32>(dot(p.pos, m[0]), dot(p.pos, m[1])) * p.scale;
             return f32(k) + p.scale;
         }",
    )
    .expect("apply");
    let args = CallArgs::new()
        .arg(parse(&f, "{pos=tensor<vec3f>(4,6), scale=tensor(6)}"))
        .arg(parse(&f, "mat2x3f"))
        .arg(parse(&f, "inttensor(4,1)"))
        .arg(parse(&f, "output"));
    let k = call_kernel(&f, &args);
    assert_eq!(k.call_shape, vec![4, 6]);
    // Leaves: p.pos, p.scale, m, k, out, _result.
    assert_call_agrees(runner, &k, call_data(&k, 5), &mut |v: &mut [Vec<f32>]| {
        let (pos, scale, m, n) = (&v[0], v[1][0], &v[2], v[3][0]);
        let col = |c: usize| pos[0] * m[3 * c] + pos[1] * m[3 * c + 1] + pos[2] * m[3 * c + 2];
        let out = [col(0) * scale, col(1) * scale];
        let ret = n.trunc() + scale;
        v[4].copy_from_slice(&out);
        v[5][0] = ret;
    });

    // Slices and buffers, read through generated accessors: a Slang-style
    // declaration with a WGSL body.
    let read = Function::new(
        shape_call::Signature::parse("float4 read(int2 index, Slice<2,float4> array)")
            .expect("read")
            .with_wgsl_body("{ return array_load(u32(index.x), u32(index.y)); }"),
    );
    for slices in ["tensor(50,10,10,4)", "tensor(10,10,4)"] {
        let args = CallArgs::new()
            .arg(parse(&read, "buffer(50, int2)"))
            .arg(parse(&read, slices));
        let k = call_kernel(&read, &args);
        assert_eq!(k.call_shape, vec![50]);
        let mut data = call_data(&k, 6);
        data[0] = (0..100).map(|i| ((i * 7) % 10) as f32).collect();
        assert_call_agrees(runner, &k, data, &mut |v: &mut [Vec<f32>]| {
            let (x, y) = (v[0][0] as usize, v[0][1] as usize);
            let texel: Vec<f32> = v[1][(x * 10 + y) * 4..][..4].to_vec();
            v[2].copy_from_slice(&texel);
        });
    }
    let total = Function::new(
        shape_call::Signature::parse("float total(StructuredBuffer<float> data)")
            .expect("total")
            .with_wgsl_body(
                "var s = 0.0; for (var i = 0u; i < data_size(0u); i++) { s += data_load(i); } return s;",
            ),
    );
    let args = CallArgs::new().arg(Arg::tensor(&[6, 20]));
    let k = call_kernel(&total, &args);
    assert_eq!(k.call_shape, vec![6]);
    assert_call_agrees(runner, &k, call_data(&k, 7), &mut |v: &mut [Vec<f32>]| {
        v[1][0] = v[0].iter().fold(0.0, |s, x| s + x)
    });

    // A race the caller allows: any one value may remain, so it is not
    // compared, but the call runs.
    let f = Function::parse("fn keep(a: f32, r: ptr<function, f32>) { *r = a; }")
        .expect("keep")
        .allowing_races();
    let args = CallArgs::new().arg(Arg::tensor(&[8])).arg(parse(&f, "ref"));
    let k = call_kernel(&f, &args);
    assert_call_agrees(
        runner,
        &k,
        vec![vec![1.0; 8], vec![0.0]],
        &mut |v: &mut [Vec<f32>]| v[1][0] = v[0][0],
    );
}
