//! What can go wrong while running a graph.

use std::sync::Arc;

use shape_core::SolvedShape;
use shape_graph::{GraphError, TensorKind};
use shape_solver::{OpRef, TensorRef};

/// A failure while running a graph.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum RunError {
    /// The graph cannot be turned into kernels.
    #[error(transparent)]
    Graph(#[from] GraphError),
    /// A tensor that no operation computes was given no data.
    #[error("no data for {} `{}`: give {} values (its solved shape is {shape})", kind_name(*kind), tensor.name, crate::host::elements(&shape.memory_dims()))]
    MissingData {
        /// The tensor.
        tensor: TensorRef,
        /// Input, parameter or constant.
        kind: TensorKind,
        /// Its solved shape.
        shape: Box<SolvedShape>,
    },
    /// Data whose dims differ from the tensor's solved shape.
    #[error("`{}` needs dims {} (its solved shape is {shape}, in memory order: batch, output, input) but was given dims {found:?}", tensor.name, dims_text(shape))]
    DataShape {
        /// The tensor.
        tensor: TensorRef,
        /// Its solved shape.
        shape: Box<SolvedShape>,
        /// The dims given.
        found: Vec<u64>,
    },
    /// Data given for a tensor that an operation computes.
    #[error("`{}` is computed by the graph; only inputs, parameters and constants take data", tensor.name)]
    NotALeaf {
        /// The tensor.
        tensor: TensorRef,
    },
    /// The backend failed: its own error, whatever the backend, is the
    /// `source` ([`BackendFailure::downcast_ref`] gives it back typed).
    #[error("backend {backend} failed {}: {source}", match op { Some(op) => format!("in op #{}", op.id), None => "while moving data".to_string() })]
    Backend {
        /// The backend's name.
        backend: String,
        /// The operation being run, or `None` for an upload or download.
        op: Option<Arc<OpRef>>,
        /// The backend's error.
        source: BackendFailure,
    },
    /// A maximum, minimum or assignment over a reduction of no values
    /// (an empty axis), which has no value. Checked for every operation
    /// before any runs, so the earliest such operation in the graph's
    /// order is the one reported, whatever the backend and the plan's
    /// order.
    #[error("{op} cannot run: {source}")]
    EmptyReduction {
        /// The operation.
        op: Arc<OpRef>,
        /// What is empty.
        source: shape_core::kernel::LaunchError,
    },
    /// The backend gave back a result that is not the tensor's values: a
    /// number of values other than its shape holds, or none at all. A
    /// defect of the backend (or of the runner), never of the graph.
    #[error("backend {backend} gave back {found} values for `{}`, whose solved shape {shape} holds {expected}", tensor.name)]
    LostResult {
        /// The backend's name.
        backend: String,
        /// The result.
        tensor: TensorRef,
        /// Its solved shape.
        shape: Box<SolvedShape>,
        /// The values it holds.
        expected: u64,
        /// The values given back (0 when no buffer held it).
        found: u64,
    },
    /// A call operation's function failed on the data (a runaway loop
    /// stopped by the step limit, a construct the CPU interpreter does not
    /// run): [`shape_core::DataError::Call`], whose kind is the function's
    /// own (`step_limit`, `unsupported_wgsl`, ...).
    #[error("{op} failed: {source}")]
    Call {
        /// The operation.
        op: Arc<OpRef>,
        /// The function's failure.
        source: shape_core::DataError,
    },
    /// A strided input that the run must copy into C order (a ragged
    /// operation or a call reads it, or a kernel reads it as one flat
    /// buffer) and cannot: memory for the copy could not be had.
    #[error("the data of `{}` cannot be copied into C order: {source}", tensor.name)]
    Data {
        /// The input.
        tensor: TensorRef,
        /// What failed.
        source: shape_core::DataError,
    },
    /// An operation's lowering asks for something the runner cannot do
    /// (a step that reads the buffer it writes, or a buffer it does not
    /// have): a defect of that operation.
    #[error("{op} lowers to step {step}, which {problem}")]
    InvalidLowering {
        /// The operation.
        op: Arc<OpRef>,
        /// The step.
        step: usize,
        /// What is wrong.
        problem: &'static str,
    },
}

/// A shape's dims in memory order, `var` for a ragged axis: `[2, var]`.
fn dims_text(shape: &SolvedShape) -> String {
    let dims: Vec<String> = (shape_core::RowKind::MEMORY_ORDER.iter())
        .flat_map(|&k| shape.row(k).iter().map(|d| d.extent().to_string()))
        .collect();
    format!("[{}]", dims.join(", "))
}

fn kind_name(kind: TensorKind) -> &'static str {
    match kind {
        TensorKind::Input => "input",
        TensorKind::Parameter => "parameter",
        TensorKind::Constant => "constant",
        TensorKind::Result(_) => "result",
    }
}

impl RunError {
    /// A stable, machine-readable name for the error's kind.
    pub fn kind(&self) -> &'static str {
        match self {
            RunError::Graph(e) => e.kind(),
            RunError::Call { source, .. } => source.kind(),
            _ => self.into(),
        }
    }
}

/// A backend's own error, whatever the backend: it displays as the
/// backend's error, and [`BackendFailure::downcast_ref`] gives it back with
/// its type. One [`RunError`] serves every backend, so code shared between
/// the CPU and the GPU has one error type.
///
/// ```
/// use shape_run::BackendFailure;
/// let e = BackendFailure::new(std::fmt::Error);
/// assert_eq!(e.to_string(), std::fmt::Error.to_string());
/// assert!(e.downcast_ref::<std::fmt::Error>().is_some());
/// assert!(e.downcast_ref::<std::io::Error>().is_none());
/// ```
#[derive(Debug)]
pub struct BackendFailure(Box<dyn std::error::Error + Send + Sync + 'static>);

impl BackendFailure {
    /// The failure `error` of a backend.
    pub fn new(error: impl std::error::Error + Send + Sync + 'static) -> BackendFailure {
        BackendFailure(Box::new(error))
    }

    /// The backend's error, if it is a `T`.
    pub fn downcast_ref<T: std::error::Error + 'static>(&self) -> Option<&T> {
        self.0.downcast_ref::<T>()
    }

    /// The backend's error.
    pub fn into_inner(self) -> Box<dyn std::error::Error + Send + Sync + 'static> {
        self.0
    }
}

impl std::fmt::Display for BackendFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for BackendFailure {
    // Transparent: the backend's error stands here, so the chain goes on
    // with its own source.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}
