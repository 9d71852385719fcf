//! A call step: a user's function run once per call index, which a
//! backend runs instead of a kernel.
//!
//! The function itself lives in the crate that defines it (`shape-call`
//! for WGSL functions): this crate names only the interface, so that a
//! lowered operation can hold a call and every [`crate::Backend`] can run
//! one. The default, [`crate::Backend::run_call_step`], downloads the
//! operands, runs [`CallStep::run_on_host`] and uploads the result; a
//! backend that compiles calls itself (the wgpu backend inlines WGSL
//! functions into a generated shader) overrides it and finds its own type
//! through [`CallStep::as_any`].

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::data_error::DataError;

/// A function run over whole buffers: one `f32` buffer per operand, in
/// order, then the result's.
pub trait CallStep: fmt::Debug + Send + Sync + 'static {
    /// The function's name, for messages.
    fn name(&self) -> &str;

    /// Runs the call on the host: `buffers` holds every operand's values,
    /// in order, then the result's buffer (of the result's length), which
    /// the call overwrites. A failure of the function (a step limit, a
    /// construct the host cannot run) is a [`DataError::Call`].
    fn run_on_host(&self, buffers: &mut [Vec<f32>]) -> Result<(), DataError>;

    /// The step as [`Any`], so that a backend can find the type it knows.
    fn as_any(&self) -> &dyn Any;
}

/// A shared [`CallStep`], as a lowered operation holds it. Two are equal
/// when they are the same step.
#[derive(Clone)]
pub struct CallRef(pub Arc<dyn CallStep>);

impl CallRef {
    /// Shares `step`.
    pub fn new(step: impl CallStep) -> CallRef {
        CallRef(Arc::new(step))
    }

    /// The step.
    pub fn step(&self) -> &dyn CallStep {
        &*self.0
    }
}

impl fmt::Debug for CallRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl PartialEq for CallRef {
    fn eq(&self, other: &CallRef) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// Why a call step failed on a backend: the backend itself, or the call
/// (its function, on the data).
#[derive(Debug, thiserror::Error)]
pub enum CallFailure<E: std::error::Error + 'static> {
    /// The backend failed (moving data, compiling, dispatching).
    #[error(transparent)]
    Backend(E),
    /// The call failed: [`DataError::Call`].
    #[error(transparent)]
    Call(DataError),
}
