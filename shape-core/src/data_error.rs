//! Host data that does not fit its dims: the errors of building
//! tensors' values and ragged rows.

/// Host data that does not fit its dims, or memory that cannot be had.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum DataError {
    /// The number of values differs from the product of the dims.
    #[error("dims {dims:?} hold {expected} values but {found} were given")]
    Length {
        /// The dims.
        dims: Vec<u64>,
        /// Their product.
        expected: u128,
        /// The values given.
        found: usize,
    },
    /// Row offsets of ragged data that do not describe rows.
    #[error("the row offsets of ragged data are invalid: {reason}")]
    RaggedOffsets {
        /// What is wrong.
        reason: String,
    },
    /// Ragged values asked for as a rectangular array.
    #[error("ragged values have no rectangular array: {reason}")]
    Ragged {
        /// What was asked.
        reason: String,
    },
    /// The values do not fit in memory.
    #[error("out of memory: {elements} values need {bytes} bytes, which could not be allocated")]
    OutOfMemory {
        /// The values asked for.
        elements: u128,
        /// Their size.
        bytes: u128,
    },
    /// Strides that do not describe a view of the values given: another
    /// number of strides than dims, or an element addressed past the end
    /// of the buffer (or past 2^64).
    #[error("strided values are invalid: {reason}")]
    Strides {
        /// What is wrong.
        reason: String,
    },
    /// A user's function failed while a call step ran it
    /// ([`crate::call::CallStep`]): its own error, by kind and message.
    #[error("call of `{function}` failed: {message}")]
    Call {
        /// The function.
        function: String,
        /// The function's error kind (`step_limit`, `unsupported_wgsl`, ...).
        kind: &'static str,
        /// Its message.
        message: String,
    },
}

impl DataError {
    /// A stable, machine-readable name for the error's kind.
    /// A call's failure has its function's own kind.
    pub fn kind(&self) -> &'static str {
        if let DataError::Call { kind, .. } = self {
            return kind;
        }
        self.into()
    }
}
