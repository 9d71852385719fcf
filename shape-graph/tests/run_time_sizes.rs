//! Run-time sizes: symbols kept through inference, guards, binding.

use shape_graph::{Graph, GraphError};

fn solved_shape(g: &Graph, t: shape_graph::TensorId) -> String {
    g.solve().unwrap().symbolic_shape(t).unwrap().to_string()
}

#[test]
fn a_symbol_stays_through_every_shape() {
    let mut g = Graph::new();
    g.run_time_size("b").unwrap();
    let x = g.input("x", "b|8").unwrap();
    let w = g.parameter_with_spec("w", "8->10").unwrap();
    let y = g.compose(w, x).unwrap();
    let z = g.unary("relu", y).unwrap();
    assert_eq!(solved_shape(&g, x), "b|->8");
    assert_eq!(solved_shape(&g, z), "b|->10");
    assert!(g.solve().unwrap().guards().is_empty());
}

#[test]
fn symbol_against_a_number_is_a_guard() {
    let mut g = Graph::new();
    let b = g.run_time_size("b").unwrap();
    let x = g.input("x", "b|8").unwrap();
    let y = g.input("y", "4|8").unwrap();
    let z = g.add(x, y).unwrap();
    let s = g.solve().unwrap();
    assert_eq!(s.symbolic_shape(z).unwrap().to_string(), "4|->8");
    let guards = s.guards();
    assert_eq!(guards.len(), 1, "{guards:?}");
    assert_eq!(guards[0].requires(), "b in {1, 4}");
    assert!(s.bind(&[(b, 1)]).is_ok());
    assert!(s.bind(&[(b, 4)]).is_ok());
    let e = s.bind(&[(b, 3)]).unwrap_err();
    assert_eq!(e.kind(), "guard");
    assert!(
        e.to_string().contains("`b` = 3 cannot broadcast to 4"),
        "{e}"
    );
}

#[test]
fn guards_do_not_depend_on_the_order_of_facts() {
    // x: b, y: 4 meet in a result whose size nothing else gives.
    for flip in [false, true] {
        let mut g = Graph::new();
        g.run_time_size("b").unwrap();
        let x = g.input("x", "b|8").unwrap();
        let y = g.input("y", "4|8").unwrap();
        let z = if flip {
            g.add(y, x).unwrap()
        } else {
            g.add(x, y).unwrap()
        };
        let s = g.solve().unwrap();
        assert_eq!(s.symbolic_shape(z).unwrap().to_string(), "4|->8");
        assert_eq!(s.guards()[0].requires(), "b in {1, 4}");
    }
}

#[test]
fn two_symbols_meeting_leave_a_guard() {
    let mut g = Graph::new();
    let b = g.run_time_size("b").unwrap();
    let c = g.run_time_size("c").unwrap();
    let x = g.input("x", "b|8").unwrap();
    let y = g.input("y", "c|8").unwrap();
    let z = g.add(x, y).unwrap();
    let s = g.solve().unwrap();
    // numpy's rule exactly: the larger of the two, each 1 or that.
    assert_eq!(s.symbolic_shape(z).unwrap().to_string(), "max(b,c),|->8");
    let guards: Vec<String> = s.guards().iter().map(|g| g.requires()).collect();
    assert_eq!(guards, ["b in {1, max(b,c)}", "c in {1, max(b,c)}"]);
    assert!(s.bind(&[(b, 5), (c, 5)]).is_ok());
    assert!(s.bind(&[(b, 5), (c, 1)]).is_ok());
    let at = s.bind(&[(b, 1), (c, 5)]).unwrap();
    assert_eq!(at.shape(z).unwrap().to_string(), "5|->8");
    assert_eq!(s.bind(&[(b, 5), (c, 2)]).unwrap_err().kind(), "guard");
}

#[test]
fn equal_symbols_need_no_guard_and_bind_many_times() {
    let mut g = Graph::new();
    let b = g.run_time_size("b").unwrap();
    let x = g.input("x", "b|8").unwrap();
    let y = g.input("y", "b|8").unwrap();
    let z = g.mul(x, y).unwrap();
    let s = g.solve().unwrap();
    assert!(s.guards().is_empty());
    for n in [2, 3, 7] {
        assert_eq!(
            s.bind(&[(b, n)]).unwrap().shape(z).unwrap().to_string(),
            format!("{n}|->8")
        );
    }
    assert_eq!(g.solves(), 1);
    assert_eq!(s.shape(z).unwrap_err().kind(), "unbound_size");
    assert_eq!(s.bind(&[]).unwrap_err().kind(), "unbound_size");
}

#[test]
fn a_strict_equality_with_a_number_is_a_guard() {
    let mut g = Graph::new();
    let d = g.run_time_size("d").unwrap();
    let x = g.input("x", "2|d").unwrap();
    let w = g.parameter_with_spec("w", "16->4").unwrap();
    let y = g.compose(w, x).unwrap();
    let s = g.solve().unwrap();
    assert_eq!(s.symbolic_shape(y).unwrap().to_string(), "2|->4");
    assert!(s.bind(&[(d, 16)]).is_ok());
    let e = s.bind(&[(d, 8)]).unwrap_err();
    assert_eq!(e.kind(), "guard", "{e}");
}

#[test]
fn bounds_on_a_run_time_size_are_checked_when_bound() {
    let mut g = Graph::new();
    let d = g.run_time_size("d").unwrap();
    g.bound_size(
        d,
        shape_graph::SizeBound::Remainder {
            modulus: std::num::NonZeroU64::new(8).unwrap(),
            remainder: 0,
        },
    )
    .unwrap();
    g.bound_size(d, shape_graph::SizeBound::AtLeast(16))
        .unwrap();
    let x = g.input("x", "d").unwrap();
    let s = g.solve().unwrap();
    assert_eq!(s.symbolic_shape(x).unwrap().to_string(), "|->d");
    assert!(s.bind(&[(d, 24)]).is_ok());
    assert_eq!(s.bind(&[(d, 12)]).unwrap_err().kind(), "size_bound");
    assert_eq!(s.bind(&[(d, 8)]).unwrap_err().kind(), "size_bound");
    assert!(matches!(
        s.bind(&[(d, 0)]).unwrap_err(),
        GraphError::SizeBound { .. }
    ));
}

#[test]
fn a_concatenation_of_run_time_sizes_is_their_sum() {
    let mut g = Graph::new();
    let s = g.run_time_size("s").unwrap();
    let a = g.input("a", "2|s").unwrap();
    let b = g.input("b", "2|3").unwrap();
    let c = g.concat(&[a, b]).unwrap();
    let solved = g.solve().unwrap();
    assert_eq!(solved.symbolic_shape(c).unwrap().to_string(), "2,|->s+3");
    assert_eq!(
        solved
            .bind(&[(s, 4)])
            .unwrap()
            .shape(c)
            .unwrap()
            .to_string(),
        "2|->7"
    );
}

#[test]
fn a_concatenation_into_a_run_time_size_is_checked_when_bound() {
    let mut g = Graph::new();
    let s = g.run_time_size("s").unwrap();
    let a = g.input("a", "2|4").unwrap();
    let b = g.input("b", "2|3").unwrap();
    let c = g.concat(&[a, b]).unwrap();
    g.require(c, "2|s").unwrap();
    let solved = g.solve().unwrap();
    assert_eq!(solved.guards().len(), 1);
    assert!(solved.bind(&[(s, 7)]).is_ok());
    assert_eq!(solved.bind(&[(s, 8)]).unwrap_err().kind(), "guard");
}

#[test]
fn an_element_count_of_run_time_sizes_is_their_product() {
    let mut g = Graph::new();
    let b = g.run_time_size("b").unwrap();
    let t = g.run_time_size("t").unwrap();
    let x = g.input("x", "..r..|4").unwrap();
    g.require(x, "b, t|4").unwrap();
    let n = g.size("n");
    g.capture_count(n, x, "r").unwrap();
    let solved = g.solve().unwrap();
    assert_eq!(solved.size_dim(n).unwrap().to_string(), "b*t");
    assert_eq!(solved.bind(&[(b, 3), (t, 5)]).unwrap().size(n).unwrap(), 15);
}

#[test]
fn e_graph_equalities_need_no_guard() {
    // The count of `t, b` is `t*b`, which the e-graph shows equal to the
    // declared `b*t`: no guard.
    let mut g = Graph::new();
    g.run_time_size("b").unwrap();
    g.run_time_size("t").unwrap();
    let x = g.input("x", "..r..|4").unwrap();
    g.require(x, "t, b|4").unwrap();
    let n = g.size("n");
    g.capture_count(n, x, "r").unwrap();
    let y = g.input("y", "..q..|4").unwrap();
    g.require(y, "b, t|4").unwrap();
    g.capture_count(n, y, "q").unwrap();
    let solved = g.solve().unwrap();
    assert!(solved.guards().is_empty(), "{:?}", solved.guards());
}

#[test]
fn a_convolution_over_a_run_time_size_has_an_affine_output() {
    for (spec, shape, good, bad) in [
        // No padding, stride 1: w - 3 + 1 outputs, and w must reach 3.
        ("o<+k;k=>o", "|->w-2,", 5, 2),
        // Stride 2: what the window leaves must be even.
        ("2*o<+k;k=>o", "|->(w-3)/2+1,", 9, 8),
        // Padded, stride 2: w/2 outputs, w even.
        ("2*o=+k;k=>o", "|->w/2,", 8, 9),
    ] {
        let mut g = Graph::new();
        let w = g.run_time_size("w").unwrap();
        let x = g.input("x", "w").unwrap();
        let k = g.input("k", "3").unwrap();
        let y = g.einsum(spec, &[x, k]).unwrap();
        let solved = g.solve().unwrap();
        assert_eq!(
            solved.symbolic_shape(y).unwrap().to_string(),
            shape,
            "{spec}"
        );
        // The bound shape is the one the static graph infers.
        let bound = solved.bind(&[(w, good)]).unwrap();
        let mut fixed = Graph::new();
        let fx = fixed.input("x", &good.to_string()).unwrap();
        let fk = fixed.input("k", "3").unwrap();
        let fy = fixed.einsum(spec, &[fx, fk]).unwrap();
        let fixed = fixed.solve().unwrap();
        assert_eq!(bound.shape(y).unwrap(), fixed.shape(fy).unwrap(), "{spec}");
        assert_eq!(
            solved.bind(&[(w, bad)]).unwrap_err().kind(),
            "guard",
            "{spec} at {bad}"
        );
    }
}

#[test]
fn a_kernel_size_from_run_time_sizes_is_refused_clearly() {
    let mut g = Graph::new();
    g.run_time_size("w").unwrap();
    let x = g.input("x", "w").unwrap();
    let k = g.input("k", "q").unwrap();
    let y = g.einsum("o<+k;k=>o", &[x, k]).unwrap();
    // Refused where the fact arrives (here the requirement).
    let e = g.require(y, "4").unwrap_err();
    assert_eq!(e.kind(), "symbolic_unsupported", "{e}");
}

#[test]
fn hostile_run_time_sizes_fail_cleanly() {
    // A 64k-character name.
    let long = "b".repeat(65_536);
    let mut g = Graph::new();
    let b = g.run_time_size(&long).unwrap();
    let x = g.input("x", &format!("{long}, |8")).unwrap();
    let y = g.unary("exp", x).unwrap();
    let s = g.solve().unwrap();
    assert_eq!(
        s.bind(&[(b, 3)]).unwrap().shape(y).unwrap().to_string(),
        "3|->8"
    );

    // Sizes near 2^64: products overflow as errors, never wrap.
    let mut g = Graph::new();
    let b = g.run_time_size("b").unwrap();
    let t = g.run_time_size("t").unwrap();
    let x = g.input("x", "..r..|4").unwrap();
    g.require(x, "b, t|4").unwrap();
    let n = g.size("n");
    g.capture_count(n, x, "r").unwrap();
    let s = g.solve().unwrap();
    let big = s.bind(&[(b, u64::MAX), (t, 2)]).unwrap();
    assert_eq!(big.size(n).unwrap_err().kind(), "unbound_size");
    assert_eq!(big.shape(x).unwrap().batch[0].size(), u64::MAX);

    // A sum that overflows when bound.
    let mut g = Graph::new();
    let sz = g.run_time_size("s").unwrap();
    let a = g.input("a", "2|s").unwrap();
    let c = g.input("c", "2|3").unwrap();
    let joined = g.concat(&[a, c]).unwrap();
    let solved = g.solve().unwrap();
    let e = solved
        .bind(&[(sz, u64::MAX)])
        .unwrap()
        .shape(joined)
        .unwrap_err();
    assert_eq!(e.kind(), "unbound_size", "{e}");
    assert!(e.to_string().contains("s+3"), "{e}");
}
