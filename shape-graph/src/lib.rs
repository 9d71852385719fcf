//! Tensor graphs over the shape solver: declare tensors and operations,
//! infer every shape, derive each operation's projections, lower them to
//! kernels and run them on a backend.
//!
//! [`Graph`] records tensors and operations as constraints of
//! `shape-solver`; [`Graph::solve`] finalizes them into a [`SolvedGraph`],
//! whose shapes, projections and kernels ([`SolvedGraph::lower`]) a
//! backend of `shape-core`'s [`shape_core::Backend`] runs
//! ([`SolvedGraph::run`]).
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
#![cfg_attr(doctest, doc = include_str!("../../README.md"))]
#![warn(missing_docs)]

mod binding;
mod graph;
mod lowering;
mod operation;
pub mod ops;
mod projections;
mod ragged;
mod registry;
mod run;
mod sample;
mod widened;

pub use graph::{
    ConflictingData, ConstantProblem, Graph, GraphError, NotGiven, OpId, SizeBound, SizeId,
    SolvedGraph, SpecContext, TensorId, TensorKind,
};
pub use lowering::{BufferRef, Lowered, LoweringCx, Step};
pub use operation::{ConstraintCx, Operation};
pub use projections::{AxisIndex, AxisSite, ProjectionBuilder, Projections};
pub use ragged::RaggedAxis;
pub use registry::{BuildArgs, Builder, OpEntry, Operator, Registry, Sampler};
pub use run::{
    DataError, HostTensor, Inputs, PlannedOp, RunError, RunOptions, RunOutputs, RunPlan,
};
pub use sample::SampleCx;
pub use widened::{WidenedAxis, WidenedUse};

// The Rust blocks of the docs are doc-tests (the README's through the
// crate's own doc above).
#[cfg(doctest)]
#[doc = include_str!("../../docs/constraint-semantics.md")]
struct ConstraintSemanticsDoc;
