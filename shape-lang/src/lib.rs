//! The text program language: a program's statements parsed
//! ([`syntax::parse`]), compiled to a `shape-graph` [`shape_graph::Graph`]
//! with where every part came from ([`compile::compile`]), its errors
//! placed at their statements ([`ProgramError`]), and the values the
//! program gives its own tensors ([`data`]).
//!
//! ```
//! let program = shape_lang::syntax::parse("input x: 2, 3\ny = exp(x)\n").unwrap();
//! let compiled = shape_lang::compile::compile(&program).unwrap();
//! let solved = compiled.solve().unwrap();
//! let y = compiled.tensor("y").unwrap();
//! assert_eq!(solved.shape(y).unwrap().to_string(), "|->2, 3");
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod checks;
pub mod compile;
pub mod data;
pub mod error;
pub mod inference;
pub mod syntax;

pub use error::{Note, ProgramError};
