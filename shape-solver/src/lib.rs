//! The declarative shape solver.
//!
//! Front ends (the [`Graph`] API, spec strings) produce [`Constraint`]s over
//! the dims and rows of `shape-core`; the [`Solver`] simplifies them over
//! persistent maps, in any order, to the same result; [`Solver::finalize`]
//! closes what is left open and yields a [`Solution`], in which every
//! dimension has a size and a [`Provenance`].
//!
//! ```
//! use shape_solver::Graph;
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
mod constraint;
mod env;
mod error;
mod finalize;
mod flank;
mod graph;
pub mod guard;
mod lowering;
mod operation;
pub mod ops;
mod origin;
mod projections;
mod ragged;
mod rank_cycle;
mod registry;
mod run;
mod sample;
mod solver;
mod store;
pub mod symbolic;
mod widened;

pub use constraint::Constraint;
pub use error::{
    AffineProblem, AxesCycle, AxisFromEnd, CycleStep, DimFact, ErrorClass, RowFact, ShapeError,
    SumReason, TotalElemsReason,
};
pub use finalize::{Provenance, RowDefaults, Solution};
pub use graph::{
    ConflictingData, ConstantProblem, Graph, GraphError, NotGiven, OpId, SizeBound, SizeId,
    SolvedGraph, SpecContext, TensorId, TensorKind,
};
pub use lowering::{BufferRef, Lowered, LoweringCx, Step};
pub use operation::{ConstraintCx, Operation};
pub use origin::{OpRef, Origin, OriginId, Relation, RowSite, TensorRef, Why};
pub use projections::{AxisIndex, AxisSite, ProjectionBuilder, Projections};
pub use ragged::RaggedAxis;
pub use registry::{BuildArgs, Builder, OpEntry, Operator, Registry, Sampler};
pub use run::{
    DataError, HostTensor, Inputs, PlannedOp, RunError, RunOptions, RunOutputs, RunPlan,
};
pub use sample::SampleCx;
pub use solver::{Solver, SolverStats, StepBudget};
pub use widened::{WidenedAxis, WidenedUse};
