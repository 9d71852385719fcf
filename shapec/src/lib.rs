//! `shapec`: tensor programs written as text, their shapes inferred by
//! `shape-solver`, errors shown in the program's text, and runs on a
//! compute backend.
//!
//! The pipeline: [`syntax::parse`] reads a program, [`compile::compile`]
//! builds the shape graph and remembers where every part came from,
//! [`compile::Compiled::solve`] infers every shape, and [`run`] runs the
//! program on a backend chosen in [`backends`]. [`cli::main_with`] is the
//! whole command line, callable in-process.
//!
//! ```
//! let mut out = Vec::new();
//! let mut err = Vec::new();
//! let status = shapec::cli::main_with(["shapec", "broadcast", "5,2,1", "2,3"], &mut out, &mut err);
//! assert_eq!(status, 0);
//! assert_eq!(String::from_utf8(out).unwrap(), "(5, 2, 3)\n");
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod backends;
pub mod broadcast;
pub mod call;
pub mod cli;
pub mod diagnostics;
pub mod error;
pub mod infer;
pub mod json_values;
pub mod memory;
pub mod npy;
pub mod output;
pub mod run;
pub mod text;

/// Moved to `shape-lang`.
#[deprecated(since = "0.1.0", note = "moved to `shape_lang::checks`")]
pub mod checks {
    pub use shape_lang::checks::*;
}
/// Moved to `shape-lang`.
#[deprecated(since = "0.1.0", note = "moved to `shape_lang::compile`")]
pub mod compile {
    pub use shape_lang::compile::*;
}
/// Moved to `shape-lang`.
#[deprecated(since = "0.1.0", note = "moved to `shape_lang::syntax`")]
pub mod syntax {
    pub use shape_lang::syntax::*;
}

pub use error::{CliError, ProgramError};
