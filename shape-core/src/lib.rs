//! Core data types for declarative tensor shape inference.
//!
//! A tensor's [`Shape`] has three [`Row`]s of axes: batch, input and output,
//! written `batch|input->output`. Each axis is a [`Dim`]: a known size, or
//! a [`DimVar`] the solver (in `shape-solver`) will find. A row may be open:
//! it then starts with a [`RowVar`] that stands for any number of leading
//! axes, which is how broadcasting to more axes is inferred.
//!
//! The [`spec`] module parses and prints the spec notation.
//!
//! ```
//! use shape_core::spec::ShapeSpec;
//! let spec = ShapeSpec::parse("..b..|h w -> rgb:3").unwrap();
//! assert_eq!(spec.to_string(), "..b..|h, w->rgb:3");
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod backend;
pub mod call;
pub mod chunks;
pub mod coalesce;
pub mod data_error;
pub mod dim;
pub mod dynamic;
pub mod elements;
pub mod kernel;
pub mod ragged;
pub mod row;
pub mod scalar;
pub mod shape;
pub mod size;
pub mod spec;

pub use backend::Backend;
pub use call::{CallFailure, CallRef, CallStep};
pub use data_error::DataError;
pub use dim::{Dim, DimVar, KnownDim, Label};
pub use elements::{buffer_len, element_count};
pub use kernel::{Accumulate, Expr, IterKind, Kernel, Launch, LaunchTensor, Layout, Races};
pub use ragged::RaggedAxis;
pub use row::{Row, RowConstraint, RowKind, RowTail, RowVar};
pub use shape::{Shape, SolvedShape};
pub use size::{Size, SymSize};
pub use spec::{EinsumSpec, ShapeSpec, SpecError};
