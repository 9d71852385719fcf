//! What can go wrong around a program: files, data, backends (a program's
//! own errors are `shape_lang::ProgramError`).

use std::path::PathBuf;

use crate::memory::Budget;
use crate::npy::NpyError;
pub use shape_lang::{Note, ProgramError};

/// Any failure of a `shapec` command.
///
/// [`CliError::kind`] is the variant's name in snake case (or the program
/// error's own kind), written beside the variant where it differs.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum CliError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// An error in the program, to be shown with its text.
    #[error(transparent)]
    Program(#[from] ProgramError),
    /// A malformed or unsupported `.npy` file.
    #[error("{}: {source}", path.display())]
    Npy {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        source: NpyError,
    },
    /// Data given on the command line that does not fit the program.
    #[error("{0}")]
    Data(String),
    /// The chosen backend cannot run here.
    #[error("{0}")]
    Backend(String),
    /// A command needs more memory than there is.
    #[error("out of memory: {what} needs {needed} bytes, {}", match budget {
        Some(b) if b.source == "--memory-limit" => format!("{} available ({})", b.bytes, b.source),
        Some(b) => format!("{} available ({}; --memory-limit SIZE sets another limit)", b.bytes, b.source),
        None => "which could not be allocated".to_string(),
    })]
    #[strum(serialize = "memory")]
    OutOfMemory {
        /// What needs the memory.
        what: String,
        /// Bytes needed.
        needed: u128,
        /// The memory there is, when known.
        budget: Option<Budget>,
    },
    /// A program text larger than [`crate::cli::MAX_PROGRAM_BYTES`].
    #[error("{} is larger than the {limit} bytes a program may have", path.display())]
    #[strum(serialize = "read")]
    ProgramTooLarge {
        /// The file.
        path: PathBuf,
        /// The limit.
        limit: u64,
    },
    /// `shapec broadcast` was given shapes that do not broadcast, or that
    /// it cannot read.
    #[error("{0}")]
    Broadcast(String),
    /// `shapec broadcast` with sizes known only at run time (`?`, `*`) or
    /// a declared result: MLIR's rules refuse them.
    #[error("{0}")]
    DynamicBroadcast(#[from] shape_core::dynamic::DynError),
    /// `shapec call`: a signature or argument that cannot be read, or a
    /// call that cannot be bound or resolved.
    #[error("{0}")]
    Call(#[from] shape_call::CallError),
}

impl CliError {
    /// A stable machine-readable name for the error's kind.
    pub fn kind(&self) -> &'static str {
        match self {
            CliError::Program(e) => e.kind(),
            CliError::DynamicBroadcast(e) => e.kind(),
            CliError::Call(e) => e.kind(),
            _ => self.into(),
        }
    }
}
