//! Binding a graph's run-time sizes from the data of a run.

use shape_graph::{GraphError, SizeId, SolvedGraph, TensorId};

use crate::host::Inputs;

/// `solved` bound with the sizes the inputs' dims give, and `sizes`
/// (see [`SolvedGraph::bind_dims`]).
pub(crate) fn bind_inputs(
    solved: &SolvedGraph,
    inputs: &Inputs,
    sizes: &[(SizeId, u64)],
) -> Result<SolvedGraph, GraphError> {
    // In id order, so that a conflict names the same first tensor
    // whatever the map's order.
    let mut ids: Vec<TensorId> = inputs.tensors().collect();
    ids.sort();
    let dims: Vec<(TensorId, &[u64])> = ids
        .into_iter()
        .filter_map(|t| inputs.get(t).map(|d| (t, d.dims())))
        .collect();
    solved.bind_dims(&dims, sizes)
}
