//! Every error kind's message, as users see it.

use shape_core::{Dim, DimVar, Row};
use shape_graph::{Graph, GraphError};
use shape_solver::{Constraint, Origin, Solver, Why};

fn err(f: impl FnOnce(&mut Graph) -> Result<(), GraphError>) -> String {
    let mut g = Graph::new();
    match f(&mut g) {
        Ok(()) => match g.solve() {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.to_string(),
        },
        Err(e) => e.to_string(),
    }
}

#[test]
fn dim_mismatch_in_pointwise_broadcasting() {
    insta::assert_snapshot!(err(|g| {
        let a = g.input("a", "2|3")?;
        let b = g.input("b", "2|4")?;
        g.add(a, b).map(drop)
    }));
}

#[test]
fn dim_mismatch_in_compose() {
    insta::assert_snapshot!(err(|g| {
        let w = g.input("w", "3->4")?;
        let x = g.input("x", "8|5")?;
        g.compose(w, x).map(drop)
    }));
}

#[test]
fn dim_mismatch_through_a_parameter() {
    insta::assert_snapshot!(err(|g| {
        let x = g.input("x", "8|784")?;
        let w = g.parameter("w")?;
        let _ = g.compose(w, x)?;
        let z = g.input("z", "8|100")?;
        g.compose(w, z).map(drop)
    }));
}

#[test]
fn dim_mismatch_with_a_required_shape() {
    insta::assert_snapshot!(err(|g| {
        let x = g.input("x", "8|784")?;
        g.require(x, "8|785")
    }));
}

#[test]
fn label_mismatch() {
    insta::assert_snapshot!(err(|g| {
        let a = g.input("a", "rgb:3")?;
        let b = g.input("b", "hsv:3")?;
        g.add(a, b).map(drop)
    }));
}

#[test]
fn axis_count_mismatch_in_einsum() {
    insta::assert_snapshot!(err(|g| {
        let a = g.input("a", "2,3,4")?;
        g.permute("ij=>ji", a).map(drop)
    }));
}

#[test]
fn axis_count_mismatch_operand_larger_than_result() {
    insta::assert_snapshot!(err(|g| {
        let a = g.input("a", "2,3,4")?;
        let r = g.unary("relu", a)?;
        g.require(r, "|->3,4")
    }));
}

#[test]
fn infinite_axes() {
    insta::assert_snapshot!(err(|g| {
        let a = g.parameter_with_spec("a", "..r..")?;
        g.einsum("..x..;..x.., 2=>..x..", &[a, a]).map(drop)
    }));
}

#[test]
fn total_elems_not_divisible() {
    insta::assert_snapshot!(err(|g| g.constant("c", "5->k", 12).map(drop)));
}

#[test]
fn total_elems_not_divisible_by_known_output() {
    insta::assert_snapshot!(err(|g| g.constant("c", "2->5,k", 12).map(drop)));
}

#[test]
fn total_elems_exact_mismatch() {
    insta::assert_snapshot!(err(|g| g.constant("c", "2->5", 12).map(drop)));
}

#[test]
fn underdetermined() {
    insta::assert_snapshot!(err(|g| g.constant("c", "2->h,w", 12).map(drop)));
}

#[test]
fn nothing_to_slice() {
    insta::assert_snapshot!(err(|g| {
        let a = g.input("a", "3->4")?;
        g.batch_slice(a).map(drop)
    }));
}

#[test]
fn unknown_variable() {
    let mut s = Solver::new();
    let why = Why::of(s.add_origin(Origin::Direct {
        what: "x = 1".into(),
    }));
    let e = s
        .add(Constraint::DimEq {
            a: Dim::Var(DimVar(7)),
            b: Dim::known(1).unwrap(),
            why,
        })
        .unwrap_err();
    insta::assert_snapshot!(e.to_string());
    let e = s
        .resolve_row(&Row::open(shape_core::RowVar(3), vec![]))
        .unwrap_err();
    insta::assert_snapshot!("unknown_row_variable", e.to_string());
}

#[test]
fn unknown_tensor() {
    let mut other = Graph::new();
    let _ = other.input("a", "1").unwrap();
    let t = other.input("b", "1").unwrap();
    insta::assert_snapshot!(err(|g| g.unary("relu", t).map(drop)));
}

#[test]
fn arity() {
    insta::assert_snapshot!(err(|g| {
        let a = g.input("a", "2")?;
        g.einsum("i;i=>i", &[a]).map(drop)
    }));
}

#[test]
fn constant_errors() {
    insta::assert_snapshot!(
        "constant_two_row_variables",
        err(|g| g.constant("c", "..i..->..o..", 12).map(drop))
    );
    insta::assert_snapshot!("constant_zero", err(|g| g.constant("c", "3", 0).map(drop)));
}

#[test]
fn spec_errors() {
    let cases = [
        "2|3|4",
        "2->3->4",
        "3->4|5",
        "a b..r..",
        "99999999999999999999",
        "a-b",
        "..r",
        "..r.. ..s..",
        "x:",
        "ab:x",
    ];
    let mut out = String::new();
    for c in cases {
        out.push_str(&format!(
            "{c:>24} -> {}\n",
            err(|g| g.input("t", c).map(drop))
        ));
    }
    insta::assert_snapshot!(out);
}

#[test]
fn einsum_spec_errors() {
    let cases = [
        "ij;jk",
        "ij;jk=>ik=>i",
        "i;j;k=>i",
        "ij;jk=>iz",
        "ij=>i_",
        "..r..i=>..s..i",
        "..i..i=>i",
    ];
    let mut out = String::new();
    for c in cases {
        out.push_str(&format!(
            "{c:>18} -> {}\n",
            err(|g| {
                let a = g.input("a", "2")?;
                g.einsum(c, &[a, a]).map(drop)
            })
        ));
    }
    insta::assert_snapshot!(out);
}

#[test]
fn total_elems_without_an_integer_root() {
    insta::assert_snapshot!(err(|g| g.constant("c", "k, k", 12).map(drop)));
}

#[test]
fn batch_slice_sharing_its_row_variable() {
    insta::assert_snapshot!(err(|g| {
        let t0 = g.input("t0", "..b..|3")?;
        let t1 = g.batch_slice(t0)?;
        g.einsum("i;i=>i", &[t0, t1]).map(drop)
    }));
}

#[test]
fn no_such_axis() {
    let mut g = Graph::new();
    let x = g.input("x", "2|3").unwrap();
    let e = g
        .solve()
        .unwrap()
        .explain(x, shape_core::RowKind::Batch, 4)
        .unwrap_err();
    insta::assert_snapshot!(e.to_string());
}
