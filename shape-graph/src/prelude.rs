//! What a first program that infers shapes needs, in one import.
//!
//! ```
//! use shape_graph::prelude::*;
//! let g = Scope::new();
//! let x = g.input("x", "4|3")?;
//! let w = g.parameter("w")?;
//! let y = w.compose(&x)?.relu()?.require("4|->2")?;
//! let solved: SolvedGraph = g.solve()?;
//! assert_eq!(solved.shape(w.id())?.to_string(), "|3->2");
//! assert_eq!(solved.shape(y.id())?.to_string(), "4|->2");
//! # Ok::<(), GraphError>(())
//! ```

pub use crate::{Graph, GraphError, OpId, Registry, Scope, SolvedGraph, Tensor, TensorId};
pub use shape_core::kernel::{BinaryOp, UnaryOp};
pub use shape_core::{Backend, RowKind, SolvedShape};
