//! Ragged (`var`) dims, as DyND's document gives them: broadcasting row by
//! row, reductions along the ragged axis, one-way assignments, on the CPU
//! reference, the coalesced CPU path and wgpu.

use backend_cpu::CpuBackend;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use shape_core::Backend;
use shape_graph::{Graph, TensorId};
use shape_run::{HostTensor, Inputs, RunError, RunGraph, RunOptions};
use shape_tests::differential::Tolerance;
use shape_tests::gpu::wgpu_or_skip;

/// `[[1], [2, 3]]`.
fn a() -> HostTensor {
    HostTensor::ragged(vec![2], &[1, 2], vec![], vec![1.0, 2.0, 3.0]).unwrap()
}

fn dense(dims: &[u64], values: &[f32]) -> HostTensor {
    HostTensor::new(dims.to_vec(), values.to_vec()).unwrap()
}

/// Runs `out` of `g` with `data` on every backend; each must give the same
/// nested values, which are returned.
fn run_all(g: &Graph, data: &[(TensorId, HostTensor)], out: TensorId) -> Result<String, String> {
    let solved = g.solve().map_err(|e| e.to_string())?;
    let once = |backend: &mut dyn FnMut(Inputs) -> Result<String, String>| {
        let mut inputs = Inputs::new();
        for (t, v) in data {
            inputs.insert(*t, v.clone());
        }
        backend(inputs)
    };
    fn go<B: Backend>(
        solved: &shape_graph::SolvedGraph,
        b: &mut B,
        inputs: Inputs,
        out: TensorId,
    ) -> Result<String, String> {
        let mut r = solved
            .run(b, inputs, &[out], &RunOptions::default())
            .map_err(|e: RunError| format!("{}: {e}", e.kind()))?;
        Ok(r.remove(out).unwrap().to_string())
    }
    let reference = once(&mut |i| go(&solved, &mut CpuBackend::reference(), i, out));
    let fast = once(&mut |i| go(&solved, &mut CpuBackend::new(), i, out));
    assert_eq!(reference, fast, "coalesced CPU path");
    if let Some(mut gpu) = wgpu_or_skip("ragged") {
        let on_gpu = once(&mut |i| go(&solved, &mut gpu, i, out));
        assert_eq!(reference, on_gpu, "wgpu");
    }
    reference
}

#[test]
fn var_against_one_stays_ragged() {
    // (2, var) with (2, 1) gives (2, var): [[1], [2, 3]] + [[4], [5]].
    let mut g = Graph::new();
    let x = g.input("a", "2, var").unwrap();
    let y = g.input("b", "2, 1").unwrap();
    let s = g.add(x, y).unwrap();
    assert_eq!(
        g.clone().solve().unwrap().shape(s).unwrap().to_string(),
        "|->2, var"
    );
    let out = run_all(&g, &[(x, a()), (y, dense(&[2, 1], &[4.0, 5.0]))], s).unwrap();
    assert_eq!(out, "[[5], [7, 8]]");
}

#[test]
fn var_against_fixed_gives_fixed() {
    // (2, var) with (2, 2) gives (2, 2): the row of length 1 broadcasts.
    let mut g = Graph::new();
    let x = g.input("a", "2, var").unwrap();
    let y = g.input("b", "2, 2").unwrap();
    let s = g.add(x, y).unwrap();
    assert_eq!(
        g.clone().solve().unwrap().shape(s).unwrap().to_string(),
        "|->2, 2"
    );
    let out = run_all(
        &g,
        &[(x, a()), (y, dense(&[2, 2], &[4.0, 5.0, 6.0, 7.0]))],
        s,
    )
    .unwrap();
    assert_eq!(out, "[[5, 6], [8, 10]]");
    // A row of length 3 against 2 is an error naming the row.
    let bad = HostTensor::ragged(vec![2], &[1, 3], vec![], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    let e = run_all(
        &g,
        &[(x, bad), (y, dense(&[2, 2], &[4.0, 5.0, 6.0, 7.0]))],
        s,
    )
    .unwrap_err();
    assert!(e.starts_with("ragged_row"), "{e}");
    assert!(e.contains("row (1)") && e.contains("length 3"), "{e}");
}

#[test]
fn var_against_var_broadcasts_row_by_row() {
    let mut g = Graph::new();
    let x = g.input("a", "3, var").unwrap();
    let y = g.input("b", "3, var").unwrap();
    let s = g.mul(x, y).unwrap();
    let xa = HostTensor::ragged(vec![3], &[1, 2, 0], vec![], vec![2.0, 3.0, 4.0]).unwrap();
    let yb = HostTensor::ragged(vec![3], &[3, 1, 0], vec![], vec![1.0, 2.0, 3.0, 5.0]).unwrap();
    let out = run_all(&g, &[(x, xa), (y, yb)], s).unwrap();
    assert_eq!(out, "[[2, 4, 6], [15, 20], []]");
}

#[test]
fn reductions_along_the_ragged_axis() {
    let mut g = Graph::new();
    let x = g.input("a", "2, var").unwrap();
    let s = g.einsum("ij=>i", &[x]).unwrap();
    let out = run_all(&g, &[(x, a())], s).unwrap();
    assert_eq!(out, "[1, 5]");
}

#[test]
fn assignments_broadcast_one_way_only() {
    // DyND's var to strided: [[1, 2, 3], [4]] into (2, 3).
    let mut g = Graph::new();
    let b = g.input("b", "2, var").unwrap();
    let a = g.unary("id", b).unwrap();
    g.require(a, "2, 3").unwrap();
    let src = HostTensor::ragged(vec![2], &[3, 1], vec![], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    assert_eq!(
        run_all(&g, &[(b, src)], a).unwrap(),
        "[[1, 2, 3], [4, 4, 4]]"
    );
    // A row of 2 into 3 is refused, naming the row.
    let src = HostTensor::ragged(vec![2], &[3, 2], vec![], vec![1.0, 2.0, 3.0, 4.0, 5.0]).unwrap();
    let e = run_all(&g, &[(b, src)], a).unwrap_err();
    assert!(e.starts_with("ragged_row") && e.contains("row (1)"), "{e}");
    // Scalar to a ragged destination: each row takes the source's length.
    let mut g = Graph::new();
    let s = g.input("s", "2, 1").unwrap();
    let d = g.unary("id", s).unwrap();
    g.require(d, "2, var").unwrap();
    let out = run_all(&g, &[(s, dense(&[2, 1], &[7.0, 8.0]))], d).unwrap();
    assert_eq!(out, "[[7], [8]]");
    // The reverse of var to strided: a copy (`id`) whose result is
    // required to be ragged ties its axes to the source's by equality,
    // which a fixed size never meets.
    let mut g = Graph::new();
    let s = g.input("s", "2, 3").unwrap();
    let d = g.unary("id", s).unwrap();
    let e = g.require(d, "2, var").unwrap_err();
    assert_eq!(e.kind(), "dim_mismatch", "{e}");
    // The one-way assignment (`d: 2, var <- s`, `ops::Assign`) is DyND's
    // strided source into a new (uninitialized) var destination: each
    // row takes the source's length (issue 31, item 2).
    let mut g = Graph::new();
    let s = g.input("s", "2, 3").unwrap();
    let d = g
        .apply(std::sync::Arc::new(shape_graph::ops::Assign), &[s])
        .unwrap();
    g.require(d, "2, var").unwrap();
    let values = dense(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    assert_eq!(
        run_all(&g, &[(s, values)], d).unwrap(),
        "[[1, 2, 3], [4, 5, 6]]"
    );
}

#[test]
fn unsupported_ragged_uses_are_typed_errors() {
    // A concatenation along a ragged axis, and an element count over one.
    let mut g = Graph::new();
    let x = g.input("x", "2, var").unwrap();
    let e = g.concat(&[x, x]).unwrap_err();
    assert_eq!(e.kind(), "ragged_unsupported", "{e}");
    assert!(
        e.to_string()
            .contains("a concatenation over the ragged axis `var`"),
        "{e}"
    );
    let mut g = Graph::new();
    let x = g.input("x", "..r.., 3").unwrap();
    g.require(x, "2, var, 3").unwrap();
    let n = g.size("n");
    let e = g
        .capture_count(n, x, "r")
        .and_then(|_| g.clone().solve().map(|_| ()))
        .unwrap_err();
    assert_eq!(e.kind(), "ragged_unsupported", "{e}");

    // A reduction over an outer ragged axis (`ijk=>i` of `2, var, var`):
    // refused, where `ijk=>ij` then `ij=>i` runs (tests/tests/nested_ragged.rs).
    let mut g = Graph::new();
    let x = g.input("x", "2, var, var").unwrap();
    let t = g.einsum("ijk=>i", &[x]).unwrap();
    let words = shape_core::RaggedAxis::from_lengths(1, &[1, 1]).unwrap();
    let chars = shape_core::RaggedAxis::from_lengths(2, &[1, 2]).unwrap();
    let rows = shape_core::RaggedAxis::nested(vec![words], chars, &[2, 0, 0]).unwrap();
    let data = HostTensor::with_rows(vec![2, 0, 0], rows, vec![1.0, 2.0, 3.0]).unwrap();
    let e = run_all(&g, &[(x, data)], t).unwrap_err();
    assert!(e.starts_with("ragged_lowering"), "{e}");
    assert!(e.contains("reduce along the inner one first"), "{e}");

    // A ragged axis moved before the axis its rows depend on.
    let mut g = Graph::new();
    let x = g.input("x", "2, var").unwrap();
    let t = g.permute("ij=>ji", x).unwrap();
    let e = run_all(
        &g,
        &[(
            x,
            HostTensor::ragged(vec![2], &[1, 2], vec![], vec![1.0, 2.0, 3.0]).unwrap(),
        )],
        t,
    )
    .unwrap_err();
    assert!(e.starts_with("ragged_lowering"), "{e}");
    assert!(e.contains("would depend on an axis after"), "{e}");
    let mut g = Graph::new();
    let x = g.input("x", "2, var, 3").unwrap();
    // An axis after the ragged one moved before it: each row of `x` gives
    // three rows of the result, of the same length.
    let t = g.permute("ijk=>ikj", x).unwrap();
    let out = run_all(
        &g,
        &[(
            x,
            HostTensor::ragged(
                vec![2],
                &[1, 2],
                vec![3],
                (1..=9).map(|v| v as f32).collect(),
            )
            .unwrap(),
        )],
        t,
    )
    .unwrap();
    assert_eq!(out, "[[[1], [2], [3]], [[4, 7], [5, 8], [6, 9]]]");

    // A reduction over the rows' axis: alone, the result's ragged axis
    // would come first; after a batch axis, the rows' lengths differ
    // along the reduction.
    let mut g = Graph::new();
    let x = g.input("x", "2, var").unwrap();
    let t = g.einsum("ij=>j", &[x]).unwrap();
    let e = run_all(
        &g,
        &[(
            x,
            HostTensor::ragged(vec![2], &[1, 2], vec![], vec![1.0, 2.0, 3.0]).unwrap(),
        )],
        t,
    )
    .unwrap_err();
    assert!(e.starts_with("ragged_lowering"), "{e}");
    assert!(e.contains("reduces"), "{e}");
    let mut g = Graph::new();
    let x = g.input("x", "1|2, var").unwrap();
    let t = g.einsum("b|ij=>b|j", &[x]).unwrap();
    let e = run_all(
        &g,
        &[(
            x,
            HostTensor::ragged(vec![1, 2], &[1, 2], vec![], vec![1.0, 2.0, 3.0]).unwrap(),
        )],
        t,
    )
    .unwrap_err();
    assert!(e.starts_with("ragged_lowering"), "{e}");
}

#[test]
fn ragged_data_must_fit_the_shape() {
    let mut g = Graph::new();
    let x = g.input("x", "3, var").unwrap();
    let y = g.unary("exp", x).unwrap();
    // Two rows where the shape has three.
    let e = run_all(&g, &[(x, a())], y).unwrap_err();
    assert!(e.starts_with("data_shape"), "{e}");
    // Ragged data for a dense input.
    let mut g = Graph::new();
    let x = g.input("x", "2, 2").unwrap();
    let y = g.unary("exp", x).unwrap();
    let e = run_all(&g, &[(x, a())], y).unwrap_err();
    assert!(e.starts_with("data_shape"), "{e}");
    // Offsets that go backwards, lengths that do not match the values.
    assert!(shape_run::RaggedAxis::new(1, vec![0, 3, 2]).is_err());
    assert!(shape_run::RaggedAxis::new(1, vec![1, 3]).is_err());
    assert!(HostTensor::ragged(vec![2], &[1], vec![], vec![1.0]).is_err());
    assert!(HostTensor::ragged(vec![2], &[1, u64::MAX], vec![], vec![1.0]).is_err());
}

#[test]
fn many_rows_run_with_one_lowering_per_length() {
    // 20,000 rows of four lengths: linear in the rows.
    let rows = 20_000u64;
    let lengths: Vec<u64> = (0..rows).map(|r| r % 4).collect();
    let total: u64 = lengths.iter().sum();
    let values: Vec<f32> = (0..total).map(|i| (i % 7) as f32).collect();
    let mut g = Graph::new();
    let x = g.input("x", &format!("{rows}, var")).unwrap();
    let s = g.einsum("ij=>i", &[x]).unwrap();
    let solved = g.solve().unwrap();
    let data = HostTensor::ragged(vec![rows], &lengths, vec![], values.clone()).unwrap();
    let out = solved
        .run(
            &mut CpuBackend::reference(),
            Inputs::new().with(x, data),
            &[s],
            &RunOptions::default(),
        )
        .unwrap();
    let sums = out.get(s).unwrap().values();
    let mut at = 0usize;
    for (r, &l) in lengths.iter().enumerate() {
        let expected: f32 = values[at..at + l as usize].iter().sum();
        assert_eq!(sums[r], expected, "row {r}");
        at += l as usize;
    }
}

/// Deterministic values, exact in binary.
fn values(seed: u64, n: u64) -> Vec<f32> {
    (0..n)
        .map(|k| ((seed.wrapping_add(k * 7)) % 17) as f32 / 4.0 - 2.0)
        .collect()
}

/// A small program over a ragged `x` (`rows, var[, 2]`): `op` combines it
/// with a bias of `rows, 1[, 1]`, a second ragged input, or nothing (a
/// unary chain); then a sum along the ragged axis. Built for `x_spec`
/// either ragged or with one row's length written as a number.
fn ragged_program(
    x_spec: &str,
    y_spec: &str,
    b_spec: &str,
    inner: bool,
    op: usize,
) -> (Graph, [TensorId; 3], [TensorId; 2]) {
    let mut g = Graph::new();
    let x = g.input("x", x_spec).unwrap();
    let y = g.input("y", y_spec).unwrap();
    let b = g.input("b", b_spec).unwrap();
    let z = match op {
        0 => g.add(x, b).unwrap(),
        1 => g.mul(x, y).unwrap(),
        _ => {
            let n = g.unary("neg", x).unwrap();
            g.unary("exp", n).unwrap()
        }
    };
    let spec = if inner { "i,j,k=>i,k" } else { "i,j=>i" };
    let s = g.einsum(spec, &[z]).unwrap();
    (g, [x, y, b], [z, s])
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 64,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "../proptest-regressions/ragged.txt",
        ))),
        ..ProptestConfig::default()
    })]

    /// A ragged run gives, row by row, exactly what the strided program of
    /// that one row gives (on the CPU reference and the coalesced path;
    /// wgpu gives what the reference gives), whatever the rows' lengths (0 included), the second ragged
    /// input's rows (each the same length or 1), and the operation.
    #[test]
    fn ragged_runs_equal_per_row_strided_runs(
        lengths in prop::collection::vec(0u64..5, 1..5),
        ones in prop::collection::vec(any::<bool>(), 5),
        inner in any::<bool>(),
        op in 0usize..3,
        seed in 0u64..1000,
    ) {
        let rows = lengths.len() as u64;
        let tail = if inner { ", 2" } else { "" };
        let tail1 = if inner { ", 1" } else { "" };
        let per = if inner { 2 } else { 1 };
        let y_lengths: Vec<u64> = lengths.iter().zip(&ones).map(|(&l, &one)| if one { 1 } else { l }).collect();
        let total = |ls: &[u64]| ls.iter().sum::<u64>() * per;
        let (g, [x, y, b], [z, s]) = ragged_program(
            &format!("{rows}, var{tail}"),
            &format!("{rows}, var{tail}"),
            &format!("{rows}, 1{tail1}"),
            inner,
            op,
        );
        let inner_dims = if inner { vec![2] } else { vec![] };
        let xv = values(seed, total(&lengths));
        let yv = values(seed + 1, total(&y_lengths));
        let bv = values(seed + 2, rows);
        let inputs = Inputs::new()
            .with(x, HostTensor::ragged(vec![rows], &lengths, inner_dims.clone(), xv.clone()).unwrap())
            .with(y, HostTensor::ragged(vec![rows], &y_lengths, inner_dims.clone(), yv.clone()).unwrap())
            .with(b, HostTensor::new(vec![rows, 1].into_iter().chain(inner.then_some(1)).collect(), bv.clone()).unwrap());
        let solved = g.solve().unwrap();
        // wgpu has the reference's rows, and its values within the GPU
        // tolerance (its `exp` may differ in the last bit).
        let reference = solved
            .run(&mut CpuBackend::reference(), inputs.clone(), &[z, s], &RunOptions::default())
            .unwrap();
        let on_gpu = shape_tests::gpu::with_shared_wgpu("ragged", |gpu| {
            solved.run(gpu, inputs.clone(), &[z, s], &RunOptions::default()).unwrap()
        });
        if let Some(on_gpu) = on_gpu {
            for t in [z, s] {
                let (a, b) = (on_gpu.get(t).unwrap(), reference.get(t).unwrap());
                prop_assert_eq!(a.ragged_axis(), b.ragged_axis());
                prop_assert_eq!(a.values().len(), b.values().len());
                for (x, y) in a.values().iter().zip(b.values()) {
                    prop_assert!(Tolerance::GPU.agrees(*x, *y), "{} against {}", x, y);
                }
            }
        }
        for mut backend in [CpuBackend::reference(), CpuBackend::new()] {
            let out = solved.run(&mut backend, inputs.clone(), &[z, s], &RunOptions::default()).unwrap();
            let (zr, sr) = (out.get(z).unwrap(), out.get(s).unwrap());
            let (mut xa, mut ya) = (0usize, 0usize);
            for r in 0..rows as usize {
                let (l, yl) = (lengths[r], y_lengths[r]);
                let (g1, [x1, y1, b1], [z1, s1]) = ragged_program(
                    &format!("1, {l}{tail}"),
                    &format!("1, {yl}{tail}"),
                    &format!("1, 1{tail1}"),
                    inner,
                    op,
                );
                let dims = |n: u64| -> Vec<u64> { [1, n].into_iter().chain(inner.then_some(2)).collect() };
                let nx = (l * per) as usize;
                let ny = (yl * per) as usize;
                let one = Inputs::new()
                    .with(x1, HostTensor::new(dims(l), xv[xa..xa + nx].to_vec()).unwrap())
                    .with(y1, HostTensor::new(dims(yl), yv[ya..ya + ny].to_vec()).unwrap())
                    .with(b1, HostTensor::new([1, 1].into_iter().chain(inner.then_some(1)).collect(), vec![bv[r]]).unwrap());
                let solved1 = g1.solve().unwrap();
                let expected = solved1
                    .run(&mut CpuBackend::reference(), one, &[z1, s1], &RunOptions::default())
                    .unwrap();
                let zl = zr.ragged_axis().unwrap();
                let start = (zl.row_start(r) * per) as usize;
                let len = (zl.row_len(r) * per) as usize;
                prop_assert_eq!(&zr.values()[start..start + len], expected.get(z1).unwrap().values(), "row {}", r);
                prop_assert_eq!(&sr.values()[r * per as usize..(r + 1) * per as usize], expected.get(s1).unwrap().values(), "row {}", r);
                xa += nx;
                ya += ny;
            }
        }
    }

    /// Dense data given for a ragged input runs as rows of one length, and
    /// gives exactly what the strided program gives.
    #[test]
    fn dense_data_through_the_ragged_path_equals_the_strided_run(
        rows in 1u64..5,
        len in 0u64..5,
        inner in any::<bool>(),
        op in 0usize..3,
        seed in 0u64..1000,
    ) {
        let tail = if inner { ", 2" } else { "" };
        let tail1 = if inner { ", 1" } else { "" };
        let per = if inner { 2 } else { 1 };
        let dims: Vec<u64> = [rows, len].into_iter().chain(inner.then_some(2)).collect();
        let bdims: Vec<u64> = [rows, 1].into_iter().chain(inner.then_some(1)).collect();
        let xv = values(seed, rows * len * per);
        let yv = values(seed + 1, rows * len * per);
        let bv = values(seed + 2, rows);
        let mut outs = Vec::new();
        for x_spec in [format!("{rows}, var{tail}"), format!("{rows}, {len}{tail}")] {
            let (g, [x, y, b], [z, s]) =
                ragged_program(&x_spec, &x_spec, &format!("{rows}, 1{tail1}"), inner, op);
            let inputs = Inputs::new()
                .with(x, HostTensor::new(dims.clone(), xv.clone()).unwrap())
                .with(y, HostTensor::new(dims.clone(), yv.clone()).unwrap())
                .with(b, HostTensor::new(bdims.clone(), bv.clone()).unwrap());
            let out = g
                .solve()
                .unwrap()
                .run(&mut CpuBackend::reference(), inputs, &[z, s], &RunOptions::default())
                .unwrap();
            outs.push((out.get(z).unwrap().values().to_vec(), out.get(s).unwrap().values().to_vec()));
        }
        prop_assert_eq!(&outs[0], &outs[1]);
    }
}

#[test]
fn var_against_a_run_time_size_gives_that_size() {
    let mut g = Graph::new();
    g.run_time_size("b").unwrap();
    let x = g.input("x", "2, var").unwrap();
    let y = g.input("y", "2, b").unwrap();
    let z = g.add(x, y).unwrap();
    let solved = g.clone().solve().unwrap();
    assert_eq!(solved.symbolic_shape(z).unwrap().to_string(), "|->2b");
    let rows = HostTensor::ragged(vec![2], &[1, 3], vec![], vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    let y_data = dense(&[2, 3], &[10.0, 20.0, 30.0, 40.0, 50.0, 60.0]);
    let out = run_all(&g, &[(x, rows), (y, y_data.clone())], z).unwrap();
    assert_eq!(out, "[[11, 21, 31], [42, 53, 64]]");
    let rows = HostTensor::ragged(vec![2], &[2, 3], vec![], vec![1.0; 5]).unwrap();
    let e = run_all(&g, &[(x, rows), (y, y_data)], z).unwrap_err();
    assert!(e.starts_with("ragged_row") && e.contains("row (0)"), "{e}");
}

#[test]
fn the_differential_harness_takes_ragged_programs() {
    use shape_tests::differential::{assert_backends_agree, ProgramRunner};
    use shape_tests::programs::Program;
    let mut g = Graph::new();
    let x = g.input("x", "3, var").unwrap();
    let b = g.input("b", "3, 1").unwrap();
    let y = g.binary("sub", x, b).unwrap();
    let e = g.unary("exp", y).unwrap();
    let s = g.einsum("ij=>i", &[e]).unwrap();
    let inputs = Inputs::new()
        .with(
            x,
            HostTensor::ragged(
                vec![3],
                &[2, 0, 3],
                vec![],
                vec![0.5, -1.0, 2.0, 0.25, -0.75],
            )
            .unwrap(),
        )
        .with(b, dense(&[3, 1], &[0.5, 1.0, -1.0]));
    let program = Program {
        graph: g,
        inputs,
        results: vec![y, e, s],
        options: RunOptions::default(),
    };
    let mut reference = CpuBackend::reference();
    let mut coalesced = CpuBackend::new();
    let mut runners: Vec<&mut dyn ProgramRunner> = vec![&mut reference, &mut coalesced];
    let mut gpu = wgpu_or_skip("the_differential_harness_takes_ragged_programs");
    if let Some(gpu) = gpu.as_mut() {
        runners.push(gpu);
    }
    assert_backends_agree(&program, &mut runners, Tolerance::GPU);
}

/// The CPU reference, counting the launches that read operands; it runs
/// launches over row tables only when `row_tables` says so.
struct Counting {
    cpu: CpuBackend,
    launches: usize,
    row_tables: bool,
}

impl Counting {
    fn reference(row_tables: bool) -> Counting {
        Counting {
            cpu: CpuBackend::reference(),
            launches: 0,
            row_tables,
        }
    }
}

impl Backend for Counting {
    type Buffer = Vec<f32>;
    type Error = backend_cpu::CpuError;
    fn name(&self) -> String {
        "counting".into()
    }
    fn runs_row_tables(&self) -> bool {
        self.row_tables
    }
    fn alloc(&mut self, len: usize) -> Result<Vec<f32>, Self::Error> {
        self.cpu.alloc(len)
    }
    fn upload(&mut self, data: &[f32]) -> Result<Vec<f32>, Self::Error> {
        self.cpu.upload(data)
    }
    fn download(&mut self, buffer: &Vec<f32>) -> Result<Vec<f32>, Self::Error> {
        self.cpu.download(buffer)
    }
    fn len(&self, buffer: &Vec<f32>) -> u64 {
        self.cpu.len(buffer)
    }
    fn execute(
        &mut self,
        kernel: &shape_core::kernel::Kernel,
        launch: &shape_core::kernel::Launch,
        result: &mut Vec<f32>,
        operands: &[&Vec<f32>],
    ) -> Result<(), Self::Error> {
        // A fill (a kernel of no operand) is not an operation's launch.
        if !operands.is_empty() {
            self.launches += 1;
        }
        self.cpu.execute(kernel, launch, result, operands)
    }
}

#[test]
fn consecutive_rows_of_one_length_share_a_launch() {
    let mut g = Graph::new();
    let x = g.input("x", "6, var").unwrap();
    let b = g.input("b", "6, 1").unwrap();
    let y = g.add(x, b).unwrap();
    let s = g.einsum("ij=>i", &[y]).unwrap();
    let solved = g.solve().unwrap();
    let run = |lengths: &[u64]| {
        let total: u64 = lengths.iter().sum();
        let inputs = Inputs::new()
            .with(
                x,
                HostTensor::ragged(vec![6], lengths, vec![], values(3, total)).unwrap(),
            )
            .with(b, dense(&[6, 1], &values(5, 6)));
        let mut counting = Counting::reference(false);
        let out = solved
            .run(
                &mut counting,
                inputs.clone(),
                &[y, s],
                &RunOptions::default(),
            )
            .unwrap();
        // One launch per row gives the same values.
        let rows = shape_tests::gpu::with_shared_wgpu("ragged", |gpu| {
            solved
                .run(gpu, inputs.clone(), &[y, s], &RunOptions::default())
                .unwrap()
        });
        if let Some(rows) = rows {
            assert_eq!(rows.get(s).unwrap().values().len(), 6);
        }
        (counting.launches, out.get(s).unwrap().values().to_vec())
    };
    // Two operations; rows of one length: one launch each.
    let (launches, sums) = run(&[3; 6]);
    assert_eq!(launches, 2);
    assert_eq!(sums.len(), 6);
    // Runs of equal lengths: [2, 2, 2], [3, 3], [0] -> three launches each.
    let (launches, sums) = run(&[2, 2, 2, 3, 3, 0]);
    assert_eq!(launches, 6);
    assert_eq!(sums[5], 0.0);
    // Every row its own length: a launch per row.
    let (launches, _) = run(&[1, 2, 3, 4, 5, 0]);
    assert_eq!(launches, 12);
}

#[test]
fn operations_that_do_not_vary_along_the_rows_are_one_launch() {
    // exp of a ragged tensor, a product of two of the same rows, and a
    // weight along the axis after the ragged one: the rows laid end to end
    // are one row, whatever their lengths.
    let mut g = Graph::new();
    let x = g.input("x", "4, var, 2").unwrap();
    let y = g.input("y", "4, var, 2").unwrap();
    let w = g.input("w", "2").unwrap();
    let e = g.unary("exp", x).unwrap();
    let p = g.mul(e, y).unwrap();
    let q = g.mul(p, w).unwrap();
    let solved = g.solve().unwrap();
    let lengths = [3, 0, 1, 2];
    let xs = values(1, 12);
    let ys = values(2, 12);
    let inputs = Inputs::new()
        .with(
            x,
            HostTensor::ragged(vec![4], &lengths, vec![2], xs.clone()).unwrap(),
        )
        .with(
            y,
            HostTensor::ragged(vec![4], &lengths, vec![2], ys.clone()).unwrap(),
        )
        .with(w, dense(&[2], &[2.0, -1.0]));
    let mut counting = Counting::reference(false);
    let out = solved
        .run(
            &mut counting,
            inputs.clone(),
            &[q],
            &RunOptions::default().unfused(),
        )
        .unwrap();
    assert_eq!(counting.launches, 3);
    let q_out = out.get(q).unwrap();
    assert_eq!(q_out.ragged_axis().unwrap().lengths(), lengths);
    for i in 0..12 {
        let expected = xs[i].exp() * ys[i] * [2.0, -1.0][i % 2];
        assert_eq!(q_out.values()[i], expected, "{i}");
    }
    // wgpu too (its `exp` within the GPU tolerance).
    let on_gpu = shape_tests::gpu::with_shared_wgpu("ragged", |gpu| {
        solved
            .run(gpu, inputs.clone(), &[q], &RunOptions::default())
            .unwrap()
    });
    if let Some(on_gpu) = on_gpu {
        let g = on_gpu.get(q).unwrap();
        assert_eq!(g.ragged_axis(), q_out.ragged_axis());
        for (a, b) in g.values().iter().zip(q_out.values()) {
            assert!(Tolerance::GPU.agrees(*a, *b), "{a} against {b}");
        }
    }
    // Rows that broadcast (a row of 1 against a longer one) go row by row.
    let inputs = Inputs::new()
        .with(
            x,
            HostTensor::ragged(vec![4], &lengths, vec![2], xs).unwrap(),
        )
        .with(
            y,
            HostTensor::ragged(vec![4], &[1, 0, 1, 1], vec![2], values(2, 6)).unwrap(),
        )
        .with(w, dense(&[2], &[2.0, -1.0]));
    let mut counting = Counting::reference(false);
    solved
        .run(
            &mut counting,
            inputs,
            &[q],
            &RunOptions::default().unfused(),
        )
        .unwrap();
    assert!(counting.launches > 3, "{}", counting.launches);
}

#[test]
fn a_row_iterator_inside_the_row_is_read_row_by_row() {
    // x[r, j, r]: the diagonal of the rows' axis and the axis after the
    // ragged one, which the rows laid end to end would lose.
    let mut g = Graph::new();
    let x = g.input("x", "2, var, 2").unwrap();
    let d = g.permute("iji=>ij", x).unwrap();
    let data = HostTensor::ragged(
        vec![2],
        &[1, 2],
        vec![2],
        vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
    )
    .unwrap();
    assert_eq!(run_all(&g, &[(x, data)], d).unwrap(), "[[1], [4, 6]]");
}

#[test]
fn a_destination_of_size_one_takes_rows_of_one_only() {
    let mut g = Graph::new();
    let a = g.input("a", "2, var").unwrap();
    let d = g.unary("id", a).unwrap();
    g.require(d, "2, 1").unwrap();
    let ones = HostTensor::ragged(vec![2], &[1, 1], vec![], vec![7.0, 8.0]).unwrap();
    assert_eq!(run_all(&g, &[(a, ones)], d).unwrap(), "[[7], [8]]");
    // A row of 2 does not fit one place, nor does an empty row.
    for lengths in [[1, 2], [1, 0]] {
        let total: u64 = lengths.iter().sum();
        let rows = HostTensor::ragged(vec![2], &lengths, vec![], values(1, total)).unwrap();
        let e = run_all(&g, &[(a, rows)], d).unwrap_err();
        assert!(e.starts_with("ragged_row") && e.contains("row (1)"), "{e}");
        assert!(e.contains("where 1 is needed"), "{e}");
    }
}

#[test]
fn a_contraction_over_ragged_rows_needs_equal_lengths() {
    let mut g = Graph::new();
    let x = g.input("x", "2, var").unwrap();
    let y = g.input("y", "2, var").unwrap();
    let dot = g.einsum("ij;ij=>i", &[x, y]).unwrap();
    let xs = HostTensor::ragged(vec![2], &[1, 2], vec![], vec![2.0, 3.0, 4.0]).unwrap();
    let ys = HostTensor::ragged(vec![2], &[1, 2], vec![], vec![5.0, 6.0, 7.0]).unwrap();
    assert_eq!(
        run_all(&g, &[(x, xs.clone()), (y, ys)], dot).unwrap(),
        "[10, 46]"
    );
    // A row of 1 against a row of 3 is no broadcast in a contraction.
    let ys = HostTensor::ragged(vec![2], &[3, 2], vec![], vec![5.0, 6.0, 7.0, 8.0, 9.0]).unwrap();
    let e = run_all(&g, &[(x, xs), (y, ys)], dot).unwrap_err();
    assert!(e.starts_with("ragged_row") && e.contains("row (0)"), "{e}");
}

/// Runs `outs` of `solved` on the counting reference, fused or not: the
/// launches and the values.
fn counted(
    solved: &shape_graph::SolvedGraph,
    inputs: &Inputs,
    outs: &[TensorId],
    options: &RunOptions,
) -> (usize, Vec<Vec<f32>>) {
    counted_with(false, solved, inputs, outs, options)
}

/// [`counted`] on a counting reference that runs row tables or not.
fn counted_with(
    row_tables: bool,
    solved: &shape_graph::SolvedGraph,
    inputs: &Inputs,
    outs: &[TensorId],
    options: &RunOptions,
) -> (usize, Vec<Vec<f32>>) {
    let mut counting = Counting::reference(row_tables);
    let out = solved.run(&mut counting, inputs, outs, options).unwrap();
    let values = outs
        .iter()
        .map(|&t| out.get(t).unwrap().values().to_vec())
        .collect();
    (counting.launches, values)
}

/// The values of `outs` on the coalesced CPU path and on wgpu (within
/// the GPU tolerance) equal `expected`, fused and unfused.
fn same_everywhere(
    solved: &shape_graph::SolvedGraph,
    inputs: &Inputs,
    outs: &[TensorId],
    expected: &[Vec<f32>],
) {
    for options in [RunOptions::default(), RunOptions::default().unfused()] {
        let out = solved
            .run(&mut CpuBackend::new(), inputs, outs, &options)
            .unwrap();
        for (t, e) in outs.iter().zip(expected) {
            assert_eq!(out.get(*t).unwrap().values(), e.as_slice(), "coalesced");
        }
        let on_gpu = shape_tests::gpu::with_shared_wgpu("ragged", |gpu| {
            solved.run(gpu, inputs, outs, &options).unwrap()
        });
        if let Some(on_gpu) = on_gpu {
            for (t, e) in outs.iter().zip(expected) {
                let g = on_gpu.get(*t).unwrap().values();
                assert_eq!(g.len(), e.len());
                for (a, b) in g.iter().zip(e) {
                    assert!(Tolerance::GPU.agrees(*a, *b), "wgpu: {a} against {b}");
                }
            }
        }
    }
}

#[test]
fn ragged_pointwise_chains_fuse_as_dense_ones_do() {
    // y = relu(x * w + b), x and b of the same rows: one launch over the
    // rows laid end to end, where each operation alone is one.
    let mut g = Graph::new();
    let x = g.input("x", "3, var").unwrap();
    let w = g.input("w", "3, var").unwrap();
    let b = g.input("b", "3, var").unwrap();
    let m = g.mul(x, w).unwrap();
    let a = g.add(m, b).unwrap();
    let y = g.unary("relu", a).unwrap();
    let solved = g.solve().unwrap();
    let plan = solved.plan(&[y], &RunOptions::default()).unwrap();
    assert_eq!(plan.ops().len(), 1);
    assert_eq!(plan.ops()[0].fused.len(), 2);
    let lengths = [2, 0, 3];
    let ragged = |seed| HostTensor::ragged(vec![3], &lengths, vec![], values(seed, 5)).unwrap();
    let inputs = Inputs::new()
        .with(x, ragged(1))
        .with(w, ragged(2))
        .with(b, ragged(3));
    let (fused, fused_values) = counted(&solved, &inputs, &[y], &RunOptions::default());
    let (unfused, unfused_values) =
        counted(&solved, &inputs, &[y], &RunOptions::default().unfused());
    assert_eq!((fused, unfused), (1, 3));
    assert_eq!(fused_values, unfused_values);
    let (xs, ws, bs) = (values(1, 5), values(2, 5), values(3, 5));
    let expected: Vec<f32> = (0..5).map(|i| (xs[i] * ws[i] + bs[i]).max(0.0)).collect();
    assert_eq!(fused_values[0], expected);
    same_everywhere(&solved, &inputs, &[y], &fused_values);
}

#[test]
fn ragged_chains_launched_row_by_row_fuse_step_by_step() {
    // A bias and a scale per row: each operation is a launch per run of
    // rows; the two fuse run by run, and the relu (one launch over the
    // rows laid end to end) stays its own.
    let mut g = Graph::new();
    let x = g.input("x", "4, var").unwrap();
    let b = g.input("b", "4, 1").unwrap();
    let c = g.input("c", "4, 1").unwrap();
    let t = g.add(x, b).unwrap();
    let u = g.mul(t, c).unwrap();
    let y = g.unary("relu", u).unwrap();
    let s = g.einsum("ij=>i", &[y]).unwrap();
    let solved = g.solve().unwrap();
    let lengths = [1, 3, 3, 2];
    let inputs = Inputs::new()
        .with(
            x,
            HostTensor::ragged(vec![4], &lengths, vec![], values(1, 9)).unwrap(),
        )
        .with(b, dense(&[4, 1], &values(2, 4)))
        .with(c, dense(&[4, 1], &values(3, 4)));
    let outs = [y, s];
    let (fused, fused_values) = counted(&solved, &inputs, &outs, &RunOptions::default());
    let (unfused, unfused_values) =
        counted(&solved, &inputs, &outs, &RunOptions::default().unfused());
    // Runs of rows [1], [3, 3], [2]: three launches for the add, three for
    // the mul, one relu, three for the sum unfused; the mul fused.
    assert_eq!(unfused, 10);
    assert_eq!(fused, 7);
    assert_eq!(fused_values, unfused_values);
    same_everywhere(&solved, &inputs, &outs, &fused_values);
}

#[test]
fn peak_bytes_count_ragged_values_and_offsets() {
    // Rows of 1 and 2: 3 values (12 bytes) and 3 offsets (24 bytes) for
    // each ragged tensor.
    let mut g = Graph::new();
    let x = g.input("x", "2, var").unwrap();
    let e = g.unary("exp", x).unwrap();
    let n = g.unary("neg", e).unwrap();
    let s = g.einsum("ij=>i", &[n]).unwrap();
    let solved = g.solve().unwrap();
    let inputs = Inputs::new().with(x, a());
    let ragged = 12 + 24;
    // Fused: exp and neg are one kernel; x, n and the sum's 2 values.
    let plan = solved.plan(&[n, s], &RunOptions::default()).unwrap();
    assert_eq!(plan.peak_bytes(), 8);
    assert_eq!(
        plan.peak_bytes_for(&solved, &inputs).unwrap(),
        2 * ragged + 8
    );
    // Unfused: x and e, then n takes x's freed buffer while e is live
    // (offsets stay to the end), then the sum.
    let plan = solved
        .plan(&[n, s], &RunOptions::default().unfused())
        .unwrap();
    assert_eq!(
        plan.peak_bytes_for(&solved, &inputs).unwrap(),
        (12 + 12 + 24 * 3) + 8
    );
    // Only the sum: n is freed after it.
    let plan = solved.plan(&[s], &RunOptions::default()).unwrap();
    assert_eq!(
        plan.peak_bytes_for(&solved, &inputs).unwrap(),
        ragged + 24 + 12 + 8
    );
    // Dense data for the ragged input: rows of its length (2 rows of 3).
    let inputs = Inputs::new().with(x, dense(&[2, 3], &[0.0; 6]));
    let plan = solved.plan(&[n], &RunOptions::default()).unwrap();
    assert_eq!(
        plan.peak_bytes_for(&solved, &inputs).unwrap(),
        2 * (24 + 24)
    );
    // Without ragged tensors the figure is the plan's.
    let mut g = Graph::new();
    let x = g.input("x", "2, 3").unwrap();
    let y = g.unary("exp", x).unwrap();
    let solved = g.solve().unwrap();
    let plan = solved.plan(&[y], &RunOptions::default()).unwrap();
    let inputs = Inputs::new().with(x, dense(&[2, 3], &[0.0; 6]));
    assert_eq!(plan.peak_bytes_for(&solved, &inputs).unwrap(), 48);
    assert_eq!(plan.peak_bytes(), 48);
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 32,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "../proptest-regressions/ragged.txt",
        ))),
        ..ProptestConfig::default()
    })]

    /// Fused ragged groups give exactly the unfused values, on both CPU
    /// paths, with no more launches, whatever the rows and the operation.
    #[test]
    fn fused_ragged_groups_equal_unfused_runs(
        lengths in prop::collection::vec(0u64..5, 1..5),
        inner in any::<bool>(),
        op in 0usize..3,
        seed in 0u64..1000,
    ) {
        let rows = lengths.len() as u64;
        let tail = if inner { ", 2" } else { "" };
        let tail1 = if inner { ", 1" } else { "" };
        let per = if inner { 2 } else { 1 };
        let total = lengths.iter().sum::<u64>() * per;
        let (g, [x, y, b], [_, s]) = ragged_program(
            &format!("{rows}, var{tail}"),
            &format!("{rows}, var{tail}"),
            &format!("{rows}, 1{tail1}"),
            inner,
            op,
        );
        let inner_dims = if inner { vec![2] } else { vec![] };
        let inputs = Inputs::new()
            .with(x, HostTensor::ragged(vec![rows], &lengths, inner_dims.clone(), values(seed, total)).unwrap())
            .with(y, HostTensor::ragged(vec![rows], &lengths, inner_dims, values(seed + 1, total)).unwrap())
            .with(b, HostTensor::new(vec![rows, 1].into_iter().chain(inner.then_some(1)).collect(), values(seed + 2, rows)).unwrap());
        let solved = g.solve().unwrap();
        let (fused, fv) = counted(&solved, &inputs, &[s], &RunOptions::default());
        let (unfused, uv) = counted(&solved, &inputs, &[s], &RunOptions::default().unfused());
        prop_assert!(fused <= unfused, "{} > {}", fused, unfused);
        prop_assert_eq!(&fv, &uv);
        let out = solved.run(&mut CpuBackend::new(), &inputs, &[s], &RunOptions::default()).unwrap();
        prop_assert_eq!(out.get(s).unwrap().values(), fv[0].as_slice());
    }
}

/// Issue 31, item 5: an operation that reads per row (a bias per row, a
/// sum along the ragged axis) over rows whose lengths change at every
/// row is one launch over a row table on a backend that runs them (each
/// row's length and offsets read when it runs), where it was a launch per
/// row; the values are bit for bit those of the launches per row on both
/// CPU paths, and within the GPU tolerance on wgpu, whose passes over a
/// row table are counted. With a batch axis before the ragged one and an
/// inner axis after it too.
#[test]
fn rows_of_changing_lengths_are_one_launch_over_a_row_table() {
    // The spec of `x`, of the bias and of the sum; the rows' axes, the
    // axes after the ragged one, and the bias's dims.
    type Case = (
        &'static str,
        &'static str,
        &'static str,
        Vec<u64>,
        Vec<u64>,
        Vec<u64>,
    );
    let cases: [Case; 2] = [
        ("6, var", "6, 1", "ij=>i", vec![6], vec![], vec![6, 1]),
        (
            "2|3, var, 2",
            "2|3, 1, 1",
            "b|i,j,k=>b|i,k",
            vec![2, 3],
            vec![2],
            vec![2, 3, 1, 1],
        ),
    ];
    for (spec, bias, sum, outer, inner, bias_dims) in cases {
        let mut g = Graph::new();
        let x = g.input("x", spec).unwrap();
        let b = g.input("b", bias).unwrap();
        let y = g.add(x, b).unwrap();
        let s = g.einsum(sum, &[y]).unwrap();
        let solved = g.solve().unwrap();
        let rows: u64 = outer.iter().product();
        let lengths: Vec<u64> = (0..rows).map(|r| (r * 5 + 2) % 7).collect();
        let per: u64 = inner.iter().product();
        let total: u64 = lengths.iter().sum::<u64>() * per;
        let inputs = Inputs::new()
            .with(
                x,
                HostTensor::ragged(outer.clone(), &lengths, inner.clone(), values(3, total))
                    .unwrap(),
            )
            .with(b, dense(&bias_dims, &values(5, rows)));
        let run = |row_tables: bool| {
            let mut counting = Counting::reference(row_tables);
            let out = solved
                .run(
                    &mut counting,
                    inputs.clone(),
                    &[y, s],
                    &RunOptions::default(),
                )
                .unwrap();
            let bits = |t: TensorId| -> Vec<u32> {
                out.get(t)
                    .unwrap()
                    .values()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect()
            };
            (counting.launches, bits(y), bits(s))
        };
        let (tabled, y_tabled, s_tabled) = run(true);
        let (per_row, y_rows, s_rows) = run(false);
        assert_eq!(tabled, 2, "{spec}: one launch per operation");
        assert!(per_row > 2 * 4, "{spec}: {per_row} launches row by row");
        assert_eq!((&y_tabled, &s_tabled), (&y_rows, &s_rows), "{spec}");
        let coalesced = solved
            .run(
                &mut CpuBackend::coalesced(),
                inputs.clone(),
                &[y, s],
                &RunOptions::default(),
            )
            .unwrap();
        let bits: Vec<u32> = coalesced
            .get(s)
            .unwrap()
            .values()
            .iter()
            .map(|v| v.to_bits())
            .collect();
        assert_eq!(bits, s_rows, "{spec}: the coalesced path");
        let on_gpu = shape_tests::gpu::with_shared_wgpu("row_tables", |gpu| {
            let before = gpu.cache_stats().row_table_passes;
            let out = solved
                .run(gpu, inputs.clone(), &[y, s], &RunOptions::default())
                .unwrap();
            (out, gpu.cache_stats().row_table_passes - before)
        });
        if let Some((out, passes)) = on_gpu {
            assert_eq!(passes, 2, "{spec}: one pass per operation on wgpu");
            for (t, expected) in [(y, &y_rows), (s, &s_rows)] {
                for (a, e) in out.get(t).unwrap().values().iter().zip(expected) {
                    let e = f32::from_bits(*e);
                    assert!(Tolerance::GPU.agrees(*a, e), "{spec}: {a} against {e}");
                }
            }
        }
    }
}

/// A maximum along rows that include an empty one is the same error with
/// or without row tables (an empty maximum has no value): such a launch
/// stays row by row.
#[test]
fn an_empty_row_of_a_maximum_is_refused_with_or_without_row_tables() {
    let mut g = Graph::new();
    let x = g.input("x", "4, var").unwrap();
    let m = g
        .einsum_reduced("ij=>i", &[x], shape_graph::ops::Reduction::Max)
        .unwrap();
    let solved = g.solve().unwrap();
    let inputs = Inputs::new().with(
        x,
        HostTensor::ragged(vec![4], &[2, 0, 3, 1], vec![], values(1, 6)).unwrap(),
    );
    let error = |row_tables: bool| {
        solved
            .run(
                &mut Counting::reference(row_tables),
                inputs.clone(),
                &[m],
                &RunOptions::default(),
            )
            .unwrap_err()
            .to_string()
    };
    assert_eq!(error(true), error(false));
    // Without the empty row, one launch over the table.
    let inputs = Inputs::new().with(
        x,
        HostTensor::ragged(vec![4], &[2, 1, 3, 1], vec![], values(1, 7)).unwrap(),
    );
    let mut counting = Counting::reference(true);
    solved
        .run(&mut counting, inputs, &[m], &RunOptions::default())
        .unwrap();
    assert_eq!(counting.launches, 1);
}

/// Issue 31, item 1 (a first step): a ragged axis first in memory order
/// (DyND's top-level `var * 3 * T`, whose one length each value has) is
/// one row: stored as values and offsets `[0, n]`, broadcast as DyND
/// broadcasts (var with 1 stays var, with n gives n, with var must have
/// the same length), reduced along and across, on both CPU paths and
/// wgpu.
#[test]
fn a_ragged_axis_first_is_one_row() {
    let mut g = Graph::new();
    let a = g.input("a", "var, 3").unwrap();
    let b = g.input("b", "3").unwrap();
    let x = g.input("x", "2, 3").unwrap();
    let v = g.input("v", "var, 3").unwrap();
    let with_b = g.add(a, b).unwrap();
    let with_x = g.add(a, x).unwrap();
    let with_v = g.mul(a, v).unwrap();
    let down = g.einsum("ij=>j", &[a]).unwrap();
    let across = g.einsum("ij=>i", &[a]).unwrap();
    let solved = g.solve().unwrap();
    assert_eq!(solved.ragged_axis(a).unwrap(), Some(0));
    assert_eq!(solved.shape(with_b).unwrap().to_string(), "|->var, 3");
    assert_eq!(solved.shape(with_x).unwrap().to_string(), "|->2, 3");
    assert_eq!(solved.shape(across).unwrap().to_string(), "|->var,");
    let values: Vec<f32> = (1..=6).map(|v| v as f32).collect();
    let inputs = |v_rows: u64| {
        Inputs::new()
            .with(
                a,
                HostTensor::ragged(vec![], &[2], vec![3], values.clone()).unwrap(),
            )
            .with(b, dense(&[3], &[10.0, 20.0, 30.0]))
            .with(x, dense(&[2, 3], &[0.5; 6]))
            .with(
                v,
                HostTensor::ragged(vec![], &[v_rows], vec![3], vec![2.0; 3 * v_rows as usize])
                    .unwrap(),
            )
    };
    let results = [with_b, with_x, with_v, down, across];
    let mut outs = Vec::new();
    for mut backend in [CpuBackend::reference(), CpuBackend::coalesced()] {
        let out = solved
            .run(&mut backend, inputs(2), &results, &RunOptions::default())
            .unwrap();
        outs.push(out);
    }
    let get = |i: usize, t: TensorId| outs[i].get(t).unwrap().values().to_vec();
    assert_eq!(get(0, with_b), [11., 22., 33., 14., 25., 36.]);
    assert_eq!(get(0, with_x), [1.5, 2.5, 3.5, 4.5, 5.5, 6.5]);
    assert_eq!(get(0, with_v), [2., 4., 6., 8., 10., 12.]);
    assert_eq!(get(0, down), [5., 7., 9.]);
    assert_eq!(get(0, across), [6., 15.]);
    assert_eq!(outs[0].get(across).unwrap().to_string(), "[6, 15]");
    for t in results {
        assert_eq!(get(0, t), get(1, t));
    }
    let on_gpu = shape_tests::gpu::with_shared_wgpu("ragged", |gpu| {
        solved
            .run(gpu, inputs(2), &results, &RunOptions::default())
            .unwrap()
    });
    if let Some(on_gpu) = on_gpu {
        for t in results {
            assert_eq!(on_gpu.get(t).unwrap().values(), get(0, t).as_slice());
        }
    }
    // var against var of another length: refused as DyND refuses it.
    let e = solved
        .run(
            &mut CpuBackend::reference(),
            inputs(3),
            &[with_v],
            &RunOptions::default(),
        )
        .unwrap_err();
    assert_eq!(e.kind(), "ragged_row", "{e}");
    assert!(
        e.to_string().contains("has length 3 at its only row"),
        "{e}"
    );
}

#[test]
fn launches_over_row_tables_fuse_row_for_row() {
    // s = sum_j relu(x[i, j] + b[i]) over rows of changing lengths: three
    // launches over row tables unfused, one fused (the producer's row
    // offsets in the consumer's table), with the bits of launches per row.
    let mut g = Graph::new();
    let x = g.input("x", "12, var").unwrap();
    let b = g.input("b", "12, 1").unwrap();
    let y = g.add(x, b).unwrap();
    let r = g.unary("relu", y).unwrap();
    let s = g.einsum("ij=>i", &[r]).unwrap();
    let solved = g.solve().unwrap();
    let lengths: Vec<u64> = (0..12).map(|i| (i * 5 + 2) % 7).collect();
    let total: u64 = lengths.iter().sum();
    let values: Vec<f32> = (0..total).map(|v| (v % 9) as f32 / 4.0 - 1.0).collect();
    let inputs = Inputs::new()
        .with(
            x,
            HostTensor::ragged(vec![12], &lengths, vec![], values).unwrap(),
        )
        .with(b, dense(&[12, 1], &[-0.5; 12]));
    let run = |row_tables: bool, options: &RunOptions| {
        counted_with(row_tables, &solved, &inputs, &[s], options)
    };
    let (fused, fused_values) = run(true, &RunOptions::default());
    let (unfused, unfused_values) = run(true, &RunOptions::default().unfused());
    let (_, per_row) = run(false, &RunOptions::default().unfused());
    assert_eq!((fused, unfused), (1, 3));
    assert_eq!(fused_values, per_row);
    assert_eq!(unfused_values, per_row);
    same_everywhere(&solved, &inputs, &[s], &per_row);
}
