//! Ragged (`var`) dims, as DyND's document gives them: broadcasting row by
//! row, reductions along the ragged axis, one-way assignments, on the CPU
//! reference, the coalesced CPU path and wgpu.

use backend_cpu::CpuBackend;
use shape_core::Backend;
use shape_solver::{Graph, GraphError, HostTensor, Inputs, RunError, RunOptions, TensorId};
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
        solved: &shape_solver::SolvedGraph,
        b: &mut B,
        inputs: Inputs,
        out: TensorId,
    ) -> Result<String, String> {
        let mut r = solved
            .run(b, inputs, &[out], &RunOptions::default())
            .map_err(|e: RunError<B::Error>| format!("{}: {e}", e.kind()))?;
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
    let _ = GraphError::UnknownOp(0);
}
