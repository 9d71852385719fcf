//! Running solved tensor graphs on a backend: planning, fusion, buffers,
//! host data and ragged execution.
//!
//! `shape-graph` infers every shape and lowers each operation to kernels;
//! this crate decides how a run goes and follows it on any
//! [`shape_core::Backend`]. [`RunGraph::plan`] keeps only the operations
//! the requested outputs depend on, orders them topologically (over
//! `petgraph`), lowers each, fuses pointwise chains into their readers
//! and into the reductions they read, finds each tensor's last use and
//! assigns buffers so that a freed one is reused by a later result of the
//! same size: the plan knows its peak memory before anything runs.
//! [`RunGraph::run`] follows a plan with typed data ([`HostTensor`],
//! [`Inputs`]) that carries its dims, binds run-time sizes from the data
//! first, and lowers operations on ragged tensors row by row once the
//! data gives the rows.
//!
//! The methods come as a trait on [`SolvedGraph`], so a program reads as
//! before once the trait is in scope:
//!
//! ```
//! use backend_cpu::CpuBackend;
//! use shape_graph::Graph;
//! use shape_run::{HostTensor, Inputs, RunGraph, RunOptions};
//!
//! let mut g = Graph::new();
//! let w = g.input("w", "2->3")?;
//! let x = g.input("x", "2")?;
//! let y = g.compose(w, x)?;
//! let solved = g.solve()?;
//! let inputs = Inputs::new()
//!     .with(w, HostTensor::new(vec![3, 2], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?)
//!     .with(x, HostTensor::new(vec![2], vec![1.0, 1.0])?);
//! let out = solved.run(&mut CpuBackend::new(), inputs, &[y], &RunOptions::default())?;
//! assert_eq!(out.get(y).unwrap().values(), &[3.0, 7.0, 11.0]);
//! assert_eq!(out.get(y).unwrap().dims(), &[3]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]
#![cfg_attr(doctest, doc = include_str!("../../README.md"))]
#![warn(missing_docs)]

mod bind;
mod error;
mod execute;
mod fusion;
mod host;
#[cfg(feature = "ndarray")]
mod ndarray;
mod options;
mod plan;
mod pool;
pub mod prelude;
mod strided;

pub use error::{BackendFailure, RunError};
pub use host::{HostTensor, Inputs, RunInputs, RunOutputs};
pub use options::RunOptions;
pub use plan::{PlannedOp, RunPlan};
pub use shape_core::{DataError, RaggedAxis};
pub use strided::{read_in_place, strided_launch, view_layout, View};

use shape_core::Backend;
use shape_graph::{GraphError, SizeId, SolvedGraph, TensorId};

/// Planning and running a solved graph: the run stage's methods on
/// [`SolvedGraph`]. Sealed: implemented for `SolvedGraph` alone, so that
/// methods can be added.
pub trait RunGraph: sealed::Sealed {
    /// Plans a run that computes `outputs`.
    ///
    /// ```
    /// use shape_graph::Graph;
    /// use shape_run::{RunGraph, RunOptions};
    /// let mut g = Graph::new();
    /// let x = g.input("x", "1000")?;
    /// let a = g.unary("relu", x)?;
    /// let b = g.unary("exp", a)?;
    /// let c = g.unary("neg", b)?;
    /// let _unused = g.unary("log", x)?;
    /// let solved = g.solve()?;
    /// // `log` is not needed; relu, exp and neg fuse into one kernel, and
    /// // `a` and `b` are never written.
    /// let plan = solved.plan(&[c], &RunOptions::default())?;
    /// assert_eq!(plan.ops().len(), 1);
    /// assert_eq!(plan.ops()[0].lowered.steps[0].kernel.to_string(), "for [i0]: out = neg(exp(relu(in0)))");
    /// // Without fusion, two buffers of 4000 bytes: `b` reuses `x`'s once
    /// // `a` has read it, and `c` reuses `a`'s.
    /// let plan = solved.plan(&[c], &RunOptions::default().unfused())?;
    /// assert_eq!(plan.ops().len(), 3);
    /// assert_eq!(plan.peak_bytes(), 8_000);
    /// # Ok::<(), shape_graph::GraphError>(())
    /// ```
    fn plan(&self, outputs: &[TensorId], options: &RunOptions) -> Result<RunPlan, GraphError>;

    /// Runs the operations that `outputs` depend on, on `backend`, and
    /// returns their values.
    ///
    /// `inputs` gives the values of every input, parameter and constant
    /// the outputs depend on: [`Inputs`] by value, which the run takes (a
    /// backend may keep them instead of copying), or `&Inputs`, which it
    /// copies (to run the same data on two backends). Buffers are freed after their last use and
    /// reused by later results of the same size.
    ///
    /// A graph with run-time sizes still to bind is bound from the data
    /// first ([`RunGraph::bind_inputs`]): its guards are checked before
    /// anything runs. To run one solved graph at many sizes, call `run` on
    /// it each time, or [`SolvedGraph::bind`] it once per size.
    fn run<'a, B: Backend>(
        &self,
        backend: &mut B,
        inputs: impl Into<RunInputs<'a>>,
        outputs: &[TensorId],
        options: &RunOptions,
    ) -> Result<RunOutputs, RunError>;

    /// Runs a plan made by [`RunGraph::plan`] for this graph.
    fn run_plan<'a, B: Backend>(
        &self,
        backend: &mut B,
        plan: &RunPlan,
        inputs: impl Into<RunInputs<'a>>,
    ) -> Result<RunOutputs, RunError>;

    /// [`SolvedGraph::bind`] with the values the inputs' data give: an
    /// input axis whose solved size is a run-time size binds it to the
    /// data's length there (the same size in two inputs must get the same
    /// value), and `sizes` gives the rest (a value in `sizes` that the
    /// data contradicts is a conflict too). [`SolvedGraph::bind_dims`]
    /// does the same from the dims alone.
    fn bind_inputs(
        &self,
        inputs: &Inputs,
        sizes: &[(SizeId, u64)],
    ) -> Result<SolvedGraph, GraphError>;
}

mod sealed {
    /// Only this crate implements [`super::RunGraph`].
    pub trait Sealed {}
    impl Sealed for shape_graph::SolvedGraph {}
}

impl RunGraph for SolvedGraph {
    fn plan(&self, outputs: &[TensorId], options: &RunOptions) -> Result<RunPlan, GraphError> {
        plan::plan(self, outputs, options)
    }

    fn run<'a, B: Backend>(
        &self,
        backend: &mut B,
        inputs: impl Into<RunInputs<'a>>,
        outputs: &[TensorId],
        options: &RunOptions,
    ) -> Result<RunOutputs, RunError> {
        execute::run(self, backend, inputs.into(), outputs, options)
    }

    fn run_plan<'a, B: Backend>(
        &self,
        backend: &mut B,
        plan: &RunPlan,
        inputs: impl Into<RunInputs<'a>>,
    ) -> Result<RunOutputs, RunError> {
        execute::run_plan(self, backend, plan, inputs.into())
    }

    fn bind_inputs(
        &self,
        inputs: &Inputs,
        sizes: &[(SizeId, u64)],
    ) -> Result<SolvedGraph, GraphError> {
        bind::bind_inputs(self, inputs, sizes)
    }
}
