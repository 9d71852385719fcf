//! A tensor's shape as the graph keeps it (results and parameters without
//! a spec keep only their row variables): read back whole and by row.

use shape_core::{Row, RowTail};
use shape_graph::{Graph, TensorKind};

fn open(r: &Row) -> bool {
    matches!(r.tail, RowTail::Open(_))
}

#[test]
#[allow(deprecated)]
fn shapes_read_back_from_the_compact_record() {
    let mut g = Graph::new();
    let x = g.input("x", "2|3->4").unwrap();
    let w = g.parameter("w").unwrap();
    let v = g.parameter_with_spec("v", "4").unwrap();
    let y = g.compose(w, x).unwrap();
    let z = g.add(y, v).unwrap();

    assert_eq!(g.kind(x).unwrap(), TensorKind::Input);
    assert_eq!(g.kind(w).unwrap(), TensorKind::Parameter);
    assert_eq!(g.kind(v).unwrap(), TensorKind::Parameter);
    assert!(matches!(g.kind(y).unwrap(), TensorKind::Result(_)));
    assert_eq!(g.producer(z), g.op_ids().last());
    assert_eq!(g.producer(w), None);

    // A parameter's batch row is empty and closed; a result's rows are
    // open with no dims of their own.
    let ws = g.shape_vars(w).unwrap().clone();
    assert!(ws.batch.dims.is_empty() && !open(&ws.batch));
    assert!(open(&ws.input) && open(&ws.output));
    let zs = g.shape_vars(z).unwrap().clone();
    assert!(zs.batch.dims.is_empty() && open(&zs.batch));
    assert_eq!(g.shape_vars(x).unwrap().input.dims.len(), 1);

    // Spelled out again once a tensor is added.
    let r = g.unary("relu", z).unwrap();
    assert!(open(&g.shape_vars(r).unwrap().output));
    assert_eq!(g.shape_vars(z).unwrap(), &zs);

    let s = g.solve().unwrap();
    assert_eq!(
        s.shape(z).unwrap().to_string(),
        s.shape(r).unwrap().to_string()
    );
    assert!(s.shape(w).unwrap().to_string().starts_with('|'));
}
