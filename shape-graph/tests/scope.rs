//! Graphs built through [`Scope`] handles, checked against the same
//! graphs built through [`Graph`]'s own methods: nesting changes nothing
//! but how the code reads.

use shape_core::kernel::{BinaryOp, UnaryOp};
use shape_graph::{Graph, GraphError, Scope};

#[test]
fn a_nested_mlp_infers_what_the_statement_per_operation_form_infers() {
    // Nested, through handles.
    let s = Scope::new();
    let x = s.input("x", "8|784").unwrap();
    let (w1, b1) = (
        s.parameter("w1").unwrap(),
        s.parameter_with_spec("b1", "64").unwrap(),
    );
    let (w2, b2) = (
        s.parameter("w2").unwrap(),
        s.parameter_with_spec("b2", "10").unwrap(),
    );
    let y = w2
        .compose(&w1.compose(&x).unwrap().add(&b1).unwrap().relu().unwrap())
        .unwrap()
        .add(&b2)
        .unwrap()
        .sigmoid()
        .unwrap();
    let nested = s.solve().unwrap();

    // One statement per operation, through `&mut Graph`.
    let mut g = Graph::new();
    let gx = g.input("x", "8|784").unwrap();
    let gw1 = g.parameter("w1").unwrap();
    let gb1 = g.parameter_with_spec("b1", "64").unwrap();
    let gw2 = g.parameter("w2").unwrap();
    let gb2 = g.parameter_with_spec("b2", "10").unwrap();
    let h = g.compose(gw1, gx).unwrap();
    let h = g.add(h, gb1).unwrap();
    let h = g.unary("relu", h).unwrap();
    let o = g.compose(gw2, h).unwrap();
    let o = g.add(o, gb2).unwrap();
    let gy = g.unary("sigmoid", o).unwrap();
    let flat = g.solve().unwrap();

    assert_eq!(y.id(), gy);
    for t in g.tensor_ids() {
        assert_eq!(
            nested.shape(t).unwrap().to_string(),
            flat.shape(t).unwrap().to_string(),
            "tensor {t:?}"
        );
    }
    assert_eq!(nested.shape(w1.id()).unwrap().to_string(), "|784->64");
}

#[test]
fn every_scalar_function_method_applies_the_registry_function_of_its_name() {
    let s = Scope::new();
    let a = s.input("a", "2, 3").unwrap();
    let b = s.input("b", "3").unwrap();
    for &op in UnaryOp::ALL {
        let t = a.unary(op).unwrap();
        let g = s.graph();
        let op_ref = g.op_ref(g.producer(t.id()).unwrap()).unwrap();
        assert_eq!(op_ref.name.as_ref(), op.name());
    }
    for &op in BinaryOp::ALL {
        let t = a.binary(op, &b).unwrap();
        let g = s.graph();
        let op_ref = g.op_ref(g.producer(t.id()).unwrap()).unwrap();
        assert_eq!(op_ref.name.as_ref(), op.name());
    }
    // The generated methods are the same calls.
    let (r, e) = (a.relu().unwrap(), a.max(&b).unwrap());
    let g = s.graph();
    assert_eq!(
        g.op_ref(g.producer(r.id()).unwrap()).unwrap().name.as_ref(),
        "relu"
    );
    assert_eq!(
        g.op_ref(g.producer(e.id()).unwrap()).unwrap().name.as_ref(),
        "max"
    );
    let solved = s.solve().unwrap();
    assert_eq!(solved.shape(e.id()).unwrap().to_string(), "|->2, 3");
}

#[test]
fn a_handle_of_another_scope_is_refused_not_misread() {
    let (s, other) = (Scope::new(), Scope::new());
    let a = s.input("a", "3").unwrap();
    let stranger = other.input("stranger", "4").unwrap();
    let e = a.add(&stranger).unwrap_err();
    assert_eq!(e.kind(), "foreign_tensor");
    assert!(e.to_string().contains("`stranger`"), "{e}");
    assert!(matches!(
        s.concat(&[a, stranger]),
        Err(GraphError::ForeignTensor { .. })
    ));
    // The scope is unchanged by the refusals.
    assert_eq!(s.graph().num_ops(), 0);
}

#[test]
fn a_name_given_after_the_operation_is_the_name_errors_use() {
    let s = Scope::new();
    let x = s.input("x", "3").unwrap();
    let hidden = x.exp().unwrap().named("hidden").unwrap();
    let wrong = s.input("wrong", "4").unwrap();
    let e = hidden.add(&wrong).unwrap_err();
    assert!(e.to_string().contains("hidden"), "{e}");
    assert_eq!(hidden.name(), "hidden");
    assert_eq!(s.graph().name(hidden.id()).unwrap(), "hidden");
}

#[test]
fn an_unnamed_result_is_named_in_errors_by_its_operation_and_operands() {
    let s = Scope::new();
    let x = s.input("x", "3").unwrap();
    let b = s.input("b", "3").unwrap();
    let t = x.add(&b).unwrap().exp().unwrap();
    let e = t.require("4").unwrap_err().to_string();
    assert!(e.contains("`t3` (exp(t2))"), "{e}");
    let w = s.input("w", "5->4").unwrap();
    let e = w.compose(&x.add(&b).unwrap()).unwrap_err().to_string();
    assert!(e.contains("(add(x, b))"), "{e}");
    // A name given replaces the definition.
    let named = t.named("activation").unwrap();
    let e = named.require("4").unwrap_err().to_string();
    assert!(e.contains("`activation`") && !e.contains("exp("), "{e}");
}

#[test]
fn a_name_given_after_the_operation_reaches_that_operations_messages() {
    let explain_w = |name: Option<&str>| {
        let s = Scope::new();
        let x = s.input("x", "8|784").unwrap();
        let w = s.parameter("w").unwrap();
        let mut projection = w.compose(&x).unwrap();
        if let Some(name) = name {
            projection = projection.named(name).unwrap();
        }
        projection.require("...|->10").unwrap();
        let text = s
            .solve()
            .unwrap()
            .explain_tensor(w.id())
            .unwrap()
            .to_string();
        // A later operation's own message names the operand as it is now.
        let e = projection
            .add(&s.input("z", "9").unwrap())
            .unwrap_err()
            .to_string();
        (text, e)
    };
    let (before, _) = explain_w(None);
    assert!(before.contains("t2 = compose(w, x)"), "{before}");
    let (after, e) = explain_w(Some("projection"));
    assert!(after.contains("projection = compose(w, x)"), "{after}");
    assert!(!after.contains("t2"), "{after}");
    assert!(e.contains("projection") && !e.contains("t2"), "{e}");
}

#[test]
fn a_size_is_explained_by_every_operation_it_went_through() {
    // w2's input size comes from b1's declared 128, through the add, the
    // relu and the product with w2: each is a step of the explanation.
    let s = Scope::new();
    let x = s.input("x", "8|784").unwrap();
    let (w1, b1) = (
        s.parameter("w1").unwrap(),
        s.parameter_with_spec("b1", "128").unwrap(),
    );
    let w2 = s.parameter("w2").unwrap();
    let h = w1.compose(&x).unwrap().add(&b1).unwrap().relu().unwrap();
    w2.compose(&h).unwrap().require("...|->10").unwrap();
    let solved = s.solve().unwrap();
    let why = solved.explain_tensor(w2.id()).unwrap();
    let input = why
        .axes
        .iter()
        .find(|a| a.kind == shape_core::RowKind::Input)
        .unwrap();
    assert_eq!(input.provenance.value.to_string(), "128");
    let steps: Vec<String> = input.provenance.via.iter().map(|o| o.to_string()).collect();
    for op in ["compose(w2, t", "relu(", "add("] {
        assert!(
            steps.iter().any(|s| s.contains(op)),
            "no step through {op}: {steps:#?}"
        );
    }
}
