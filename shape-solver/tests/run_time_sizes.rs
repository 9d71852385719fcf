//! Run-time sizes: symbols kept through inference, guards, binding.

use shape_solver::{Graph, GraphError};

fn solved_shape(g: &Graph, t: shape_solver::TensorId) -> String {
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
    assert!(e.to_string().contains("`b` = 3 cannot broadcast to 4"), "{e}");
}

#[test]
fn guards_do_not_depend_on_the_order_of_facts() {
    // x: b, y: 4 meet in a result whose size nothing else gives.
    for flip in [false, true] {
        let mut g = Graph::new();
        g.run_time_size("b").unwrap();
        let x = g.input("x", "b|8").unwrap();
        let y = g.input("y", "4|8").unwrap();
        let z = if flip { g.add(y, x).unwrap() } else { g.add(x, y).unwrap() };
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
    assert_eq!(s.symbolic_shape(z).unwrap().to_string(), "b|->8");
    assert_eq!(s.guards()[0].requires(), "c in {1, b}");
    assert!(s.bind(&[(b, 5), (c, 5)]).is_ok());
    assert!(s.bind(&[(b, 5), (c, 1)]).is_ok());
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
        assert_eq!(s.bind(&[(b, n)]).unwrap().shape(z).unwrap().to_string(), format!("{n}|->8"));
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
    g.bound_size(d, shape_solver::SizeBound::Remainder { modulus: std::num::NonZeroU64::new(8).unwrap(), remainder: 0 }).unwrap();
    g.bound_size(d, shape_solver::SizeBound::AtLeast(16)).unwrap();
    let x = g.input("x", "d").unwrap();
    let s = g.solve().unwrap();
    assert_eq!(s.symbolic_shape(x).unwrap().to_string(), "|->d");
    assert!(s.bind(&[(d, 24)]).is_ok());
    assert_eq!(s.bind(&[(d, 12)]).unwrap_err().kind(), "size_bound");
    assert_eq!(s.bind(&[(d, 8)]).unwrap_err().kind(), "size_bound");
    assert!(matches!(s.bind(&[(d, 0)]).unwrap_err(), GraphError::SizeBound { .. }));
}
