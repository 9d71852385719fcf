//! Issue 25 (reliability, round 3): each finding of the hostile runs as a
//! program with what it must infer, or the error it must give. The
//! command-line findings (files, `--out`) are in `shapec/tests/`.

use shape_tests::inference::infer;

fn shape_of(shapes: &str, name: &str) -> String {
    let prefix = format!("{name} ");
    shapes
        .lines()
        .find(|l| l.starts_with(&prefix))
        .and_then(|l| l.split_once(" : "))
        .map(|(_, s)| s.to_string())
        .unwrap_or_else(|| panic!("no `{name}` in\n{shapes}"))
}

fn guards(shapes: &str) -> Vec<String> {
    shapes
        .lines()
        .filter(|l| l.starts_with("guard "))
        .filter_map(|l| l.split_once(" : ").map(|(_, g)| g.to_string()))
        .collect()
}

fn convolution_chain(layers: usize, spec: &str, taps: usize) -> String {
    let mut text = String::from("size b\ninput x: b\n");
    let mut prev = "x".to_string();
    for i in 0..layers {
        text.push_str(&format!(
            "param w{i}: {taps}\nh{i} = einsum(\"{spec}\", {prev}, w{i})\n"
        ));
        prev = format!("h{i}");
    }
    text
}

/// Finding 1: the sizes of a chain of valid convolutions over a run-time
/// size fold to one affine form, with one guard that implies the others
/// (they printed as `b-1-1-…-1`, with a guard per layer).
#[test]
fn a_chain_of_convolutions_folds_its_sizes_and_keeps_one_guard() {
    let shapes = infer(&convolution_chain(40, "o<+k;k=>o", 2));
    assert_eq!(shape_of(&shapes, "h39"), "|->b-40,");
    assert_eq!(shape_of(&shapes, "h0"), "|->b-1,");
    assert_eq!(guards(&shapes), ["b >= 41"]);
}

/// Finding 1, strided: each layer's floor division folds into the last
/// (`((b-3)/2+1-3)/2+1` is `(b-7)/4+1`).
#[test]
fn a_strided_chain_folds_its_divisions() {
    let shapes = infer(&convolution_chain(3, "2*o<+t;t=>o", 3));
    assert_eq!(shape_of(&shapes, "h0"), "|->(b-3)/2+1,");
    assert_eq!(shape_of(&shapes, "h1"), "|->(b-7)/4+1,");
    assert_eq!(shape_of(&shapes, "h2"), "|->(b-15)/8+1,");
}

/// Finding 7: each `concat` may have 2 to 64 operands, whatever an earlier
/// one had (the first call's count was kept for every later one).
#[test]
fn concat_takes_a_different_operand_count_at_each_call() {
    let shapes = infer(
        "
        input a: 2
        input b: 3
        input c: 4
        x = concat(a, b)
        y = concat(a, b, c)
        z = concat(c, b)
        ",
    );
    assert_eq!(shape_of(&shapes, "x"), "|->5");
    assert_eq!(shape_of(&shapes, "y"), "|->9");
    assert_eq!(shape_of(&shapes, "z"), "|->7");
}

/// Finding 6: `<-` is one-way: the destination never sizes its source
/// (with `id` and a requirement, `h` became `1, 2, 3`).
#[test]
fn an_assignment_never_widens_its_source() {
    let shapes = infer(
        "
        input x: 2, 3
        h = x + x
        d: 1, 2, 3 <- h
        ",
    );
    assert_eq!(shape_of(&shapes, "h"), "|->2, 3");
    assert_eq!(shape_of(&shapes, "d"), "|->1, 2, 3");
    // A source nothing else sizes closes as an unused intermediate would,
    // then broadcasts into the destination.
    let shapes = infer(
        "
        const b: 3 = [1, 2, 3]
        t: 2, 3 <- b * 2
        ",
    );
    assert_eq!(shape_of(&shapes, "t.1"), "|->3");
    // The reverse is still refused.
    assert!(infer("input x: 3\na: 1 <- x\n").starts_with("error[dim_mismatch]"));
    assert!(infer("input x: 2, 3\na: 3 <- x\n").starts_with("error[axis_count_mismatch]"));
}

/// Finding 6: the widening itself is OCANNL's rule and stays; the
/// command line warns where it changes a value (see shapec's tests).
#[test]
fn a_later_use_still_widens_an_intermediate() {
    let shapes = infer(
        "
        const x: 2, 1 = [1, 2]
        input y: 2, 4
        h = x * 1
        s = einsum(\"a,b=>a\", h)
        m = y + h
        ",
    );
    assert_eq!(shape_of(&shapes, "h"), "|->2, 4");
}

/// Finding 9, from the Rust API: a matrix product's mismatch says the
/// inner sizes differ, and the error's axis field and its message use one
/// convention (`axis -1` and `AxisFromEnd(-1)`; the field read 0 while
/// the message said -1).
#[test]
fn a_product_mismatch_names_the_inner_sizes_with_one_axis_convention() {
    use shape_graph::{Graph, GraphError};
    use shape_solver::ShapeError;
    let mut g = Graph::new();
    let x = g.input("x", "8|784").unwrap();
    let w = g.parameter("w").unwrap();
    let z = g.input("z", "8|100").unwrap();
    g.compose(w, x).unwrap();
    let e = g.compose(w, z).unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("the inner sizes 784 and 100 differ"),
        "{text}"
    );
    let GraphError::Shape(ShapeError::DimMismatch {
        axis: Some(axis), ..
    }) = &e
    else {
        panic!("{e:?}");
    };
    assert_eq!(axis.python_index(), -1);
    assert!(text.contains(&axis.to_string()), "{text}");
    assert!(format!("{e:?}").contains("AxisFromEnd(-1)"), "{e:?}");
}

/// Finding 9, from the Rust API: `?` in a spec says how to declare a
/// run-time size (it said run-time sizes were "not supported yet").
#[test]
fn a_question_mark_in_a_spec_says_how_to_declare_a_run_time_size() {
    let mut g = shape_graph::Graph::new();
    let e = g.input("t", "?|3").unwrap_err().to_string();
    assert!(!e.contains("not supported yet"), "{e}");
    assert!(e.contains("declare the name a run-time size"), "{e}");
}

/// Finding 10: `relu(NaN)` is NaN, as in numpy and torch, on the CPU
/// reference, the coalesced path and wgpu (it was 0 everywhere).
#[test]
fn relu_keeps_nan_on_every_backend() {
    use backend_cpu::CpuBackend;
    use shape_core::Backend;
    use shape_graph::Graph;
    use shape_run::{HostTensor, Inputs, RunGraph, RunOptions};
    let mut g = Graph::new();
    let x = g.input("x", "4").unwrap();
    let y = g.unary("relu", x).unwrap();
    let solved = g.solve().unwrap();
    let run = |backend: &mut dyn FnMut(Inputs) -> Vec<f32>| {
        let data = HostTensor::new(vec![4], vec![f32::NAN, -1.0, 0.5, f32::NEG_INFINITY]).unwrap();
        backend(Inputs::new().with(x, data))
    };
    fn on<B: Backend>(
        solved: &shape_graph::SolvedGraph,
        b: &mut B,
        inputs: Inputs,
        y: shape_graph::TensorId,
    ) -> Vec<f32> {
        solved
            .run(b, inputs, &[y], &RunOptions::default())
            .unwrap()
            .remove(y)
            .unwrap()
            .into_values()
    }
    let mut results = vec![
        (
            "reference",
            run(&mut |i| on(&solved, &mut CpuBackend::reference(), i, y)),
        ),
        (
            "coalesced",
            run(&mut |i| on(&solved, &mut CpuBackend::new(), i, y)),
        ),
    ];
    if let Some(mut gpu) = shape_tests::gpu::wgpu_or_skip("relu_keeps_nan_on_every_backend") {
        results.push(("wgpu", run(&mut |i| on(&solved, &mut gpu, i, y))));
    }
    for (name, v) in results {
        assert!(v[0].is_nan(), "{name}: relu(NaN) = {}", v[0]);
        assert_eq!(&v[1..], &[0.0, 0.5, 0.0], "{name}");
    }
}

/// Hostile sizes: a number past 2^63 - 1 in arithmetic with a run-time
/// size is refused, where it was clamped into a wrong expression (a window
/// of 2^64 - 1 taps over `b` gave `b-9223372036854775807`).
#[test]
fn a_number_past_the_symbolic_range_beside_a_run_time_size_is_refused() {
    let out = infer(
        "size b\ninput x: b\nparam w: 18446744073709551615\ny = einsum(\"o<+k;k=>o\", x, w)\n",
    );
    assert!(out.starts_with("error[symbolic_unsupported]"), "{out}");
    assert!(out.contains("past 2^63 - 1"), "{out}");
    // Within the range, the same program infers.
    let out = infer("size b\ninput x: b\nparam w: 5\ny = einsum(\"o<+k;k=>o\", x, w)\n");
    assert_eq!(shape_of(&out, "y"), "|->b-4,");
}
