//! Tensor graphs over the shape solver: declare tensors and operations,
//! infer every shape, derive each operation's projections and lower them to
//! kernels for the crate `shape-run` to run on a backend.
//!
//! [`Graph`] records tensors and operations as constraints of
//! `shape-solver`; [`Graph::solve`] finalizes them into a [`SolvedGraph`],
//! whose shapes, projections and kernels ([`SolvedGraph::lower`]) the
//! crate `shape-run` plans and runs on a backend of `shape-core`'s
//! [`shape_core::Backend`].
//!
//! ```
//! use shape_graph::Graph;
//! let mut g = Graph::new();
//! let x = g.input("x", "32|784").unwrap();
//! let w = g.parameter("w").unwrap();
//! let b = g.parameter_with_spec("b", "10").unwrap();
//! let y = g.compose(w, x).unwrap();
//! let y = g.add(y, b).unwrap();
//! let solved = g.solve().unwrap();
//! assert_eq!(solved.shape(w).unwrap().to_string(), "|784->10");
//! assert_eq!(solved.shape(y).unwrap().to_string(), "32|->10");
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod binding;
mod explain;
mod graph;
mod lowering;
mod operation;
pub mod ops;
pub mod prelude;
mod projections;
mod ragged;
mod registry;
mod sample;
mod scope;
mod widened;

pub use explain::{AxisExplanation, Explanation};
pub use graph::{
    ConflictingData, ConstantProblem, Graph, GraphError, NotGiven, OpId, SizeBound, SizeId,
    SolvedGraph, SpecContext, TensorId, TensorKind,
};
pub use lowering::{BufferRef, LowerOptions, Lowered, LoweringCx, Step};
pub use operation::{ConstraintCx, Operation};
pub use projections::{AxisIndex, AxisSite, ProjectionBuilder, Projections};
pub use ragged::RaggedLowered;
pub use registry::{BuildArgs, Builder, OpEntry, Operator, Precedence, Registry, Sampler};

/// Moved to `shape-core`: the rows of ragged data are shared by lowering,
/// execution and the backends.
#[deprecated(since = "0.1.0", note = "moved to `shape_core::RaggedAxis`")]
pub type RaggedAxis = shape_core::RaggedAxis;

/// Moved to `shape-core`, with [`shape_core::RaggedAxis`] whose error it
/// is.
#[deprecated(since = "0.1.0", note = "moved to `shape_core::DataError`")]
pub type DataError = shape_core::DataError;
pub use sample::SampleCx;
pub use scope::{Scope, Tensor};
// The solver's types that this crate's API shows (in errors, provenance
// and explanations), so that a user needs no dependency on the solver.
pub use shape_solver::{AxisFromEnd, Definition, OpRef, Origin, Provenance, TensorRef};
pub use widened::{WidenedAxis, WidenedUse};

// The Rust blocks of the docs are doc-tests (the README's through
// `shape-run`, whose doc-tests can run a graph).
#[cfg(doctest)]
#[doc = include_str!("../../docs/constraint-semantics.md")]
struct ConstraintSemanticsDoc;
