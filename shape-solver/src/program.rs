//! Running a solved graph on a backend.

use std::collections::HashMap;

use petgraph::algo::toposort;
use petgraph::graph::{DiGraph, NodeIndex};
use shape_core::Backend;

use crate::graph::{GraphError, OpId, SolvedGraph, TensorId, TensorKind};

/// A failure while running a graph.
#[derive(Debug, thiserror::Error)]
pub enum RunError<E: std::error::Error + 'static> {
    /// The graph cannot be turned into kernels.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A tensor that no operation computes was given no data.
    #[error("no data for {kind} `{tensor}`: give {len} values (its solved shape is {shape})")]
    MissingData {
        /// The tensor.
        tensor: String,
        /// `input`, `parameter` or `constant`.
        kind: &'static str,
        /// How many values it needs.
        len: u64,
        /// Its shape, printed.
        shape: String,
    },
    /// Data of the wrong length.
    #[error(
        "`{tensor}` needs {expected} values (its solved shape is {shape}) but {found} were given"
    )]
    DataLength {
        /// The tensor.
        tensor: String,
        /// Values needed.
        expected: u64,
        /// Values given.
        found: usize,
        /// Its shape, printed.
        shape: String,
    },
    /// The backend failed.
    #[error("backend {backend} failed {}: {source}", match op { Some(op) => format!("in op #{op}"), None => "while moving data".to_string() })]
    Backend {
        /// The backend's name.
        backend: String,
        /// The operation being run, or `None` for an upload or download.
        op: Option<usize>,
        /// The backend's error.
        source: E,
    },
}

/// The operations of a solved graph in an order that respects their data
/// dependencies.
pub fn execution_order(solved: &SolvedGraph) -> Vec<OpId> {
    let graph = solved.graph();
    let mut deps: DiGraph<OpId, ()> = DiGraph::new();
    let nodes: Vec<NodeIndex> = graph.op_ids().map(|op| deps.add_node(op)).collect();
    for op in graph.op_ids() {
        if let Some((_, operands, _)) = graph.op(op) {
            for &t in operands {
                if let Some(producer) = graph.producer(t) {
                    deps.add_edge(nodes[producer.index()], nodes[op.index()], ());
                }
            }
        }
    }
    // Operations only ever read tensors that exist when they are created,
    // so the graph is acyclic; creation order is the fallback regardless.
    match toposort(&deps, None) {
        Ok(order) => order.into_iter().map(|n| deps[n]).collect(),
        Err(_) => graph.op_ids().collect(),
    }
}

impl SolvedGraph {
    /// Runs every operation on `backend` and returns the values of
    /// `outputs`, each in memory order (batch, output, input; row-major).
    ///
    /// `data` gives the values of every input, parameter and constant by
    /// name. Intermediate buffers are freed after their last use. A batch
    /// slice takes batch index `slice`.
    ///
    /// ```
    /// use backend_cpu::CpuBackend;
    /// use shape_solver::Graph;
    /// use std::collections::HashMap;
    ///
    /// let mut g = Graph::new();
    /// let w = g.input("w", "2->3").unwrap();
    /// let x = g.input("x", "2").unwrap();
    /// let y = g.compose(w, x).unwrap();
    /// let solved = g.solve().unwrap();
    /// let data = HashMap::from([
    ///     ("w".to_string(), vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
    ///     ("x".to_string(), vec![1.0, 1.0]),
    /// ]);
    /// let out = solved.run(&mut CpuBackend::new(), &data, &[y], 0).unwrap();
    /// assert_eq!(out[&y], vec![3.0, 7.0, 11.0]);
    /// ```
    pub fn run<B: Backend>(
        &self,
        backend: &mut B,
        data: &HashMap<String, Vec<f32>>,
        outputs: &[TensorId],
        slice: u64,
    ) -> Result<HashMap<TensorId, Vec<f32>>, RunError<B::Error>> {
        let graph = self.graph();
        let order = execution_order(self);
        // The last operation that reads each tensor.
        let mut last_use: HashMap<TensorId, usize> = HashMap::new();
        for (step, &op) in order.iter().enumerate() {
            if let Some((_, operands, _)) = graph.op(op) {
                for &t in operands {
                    last_use.insert(t, step);
                }
            }
        }
        let backend_error = |op: OpId, name: String| {
            move |source| RunError::Backend {
                backend: name,
                op: Some(op.index()),
                source,
            }
        };
        let mut buffers: HashMap<TensorId, B::Buffer> = HashMap::new();
        for t in graph.tensor_ids() {
            let kind = match graph.kind(t)? {
                TensorKind::Input => "input",
                TensorKind::Parameter => "parameter",
                TensorKind::Constant => "constant",
                TensorKind::Result(_) => continue,
            };
            let name = graph.name(t)?;
            let shape = self.shape(t)?;
            let len = shape.num_elems().unwrap_or(u128::MAX).min(u64::MAX as u128) as u64;
            let values = data.get(name).ok_or_else(|| RunError::MissingData {
                tensor: name.to_string(),
                kind,
                len,
                shape: shape.to_string(),
            })?;
            if values.len() as u64 != len {
                return Err(RunError::DataLength {
                    tensor: name.to_string(),
                    expected: len,
                    found: values.len(),
                    shape: shape.to_string(),
                });
            }
            let buf = backend.upload(values).map_err(|source| RunError::Backend {
                backend: backend.name(),
                op: None,
                source,
            })?;
            buffers.insert(t, buf);
        }
        for (step, &op) in order.iter().enumerate() {
            let Some((_, operands, result)) = graph.op(op) else {
                continue;
            };
            let (kernel, launch) = self.kernel(op, slice)?;
            let mut out = backend
                .alloc(launch.result.len as usize)
                .map_err(backend_error(op, backend.name()))?;
            {
                let inputs: Vec<&B::Buffer> =
                    operands.iter().filter_map(|t| buffers.get(t)).collect();
                backend
                    .execute(&kernel, &launch, &mut out, &inputs)
                    .map_err(backend_error(op, backend.name()))?;
            }
            buffers.insert(result, out);
            for t in operands {
                if last_use.get(t) == Some(&step) && !outputs.contains(t) {
                    buffers.remove(t);
                }
            }
        }
        let mut values = HashMap::new();
        for &t in outputs {
            let buf = buffers
                .get(&t)
                .ok_or(GraphError::UnknownTensor(t.index()))?;
            let v = backend.download(buf).map_err(|source| RunError::Backend {
                backend: backend.name(),
                op: None,
                source,
            })?;
            values.insert(t, v);
        }
        Ok(values)
    }
}
