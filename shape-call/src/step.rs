//! A resolved call as a step that any backend runs
//! ([`shape_core::CallStep`]): on the host through the WGSL interpreter,
//! or inlined into a shader by a backend that knows [`KernelStep`].

use std::any::Any;

use shape_core::{CallStep, DataError};

use crate::exec::CallKernel;
use crate::CallError;

/// A [`CallKernel`] whose leaves are a graph operation's operands, in
/// order, then its result: one buffer each. On the host it runs through
/// the WGSL interpreter ([`CallKernel::run_interpreted`]); the wgpu
/// backend finds it through [`CallStep::as_any`] and inlines the
/// function instead.
#[derive(Clone, Debug)]
pub struct KernelStep {
    kernel: CallKernel,
}

impl KernelStep {
    /// The step running `kernel`, whose leaves must be its operands then
    /// its result (the leaves' lengths are checked when it runs).
    pub fn new(kernel: CallKernel) -> KernelStep {
        KernelStep { kernel }
    }

    /// The call kernel.
    pub fn kernel(&self) -> &CallKernel {
        &self.kernel
    }
}

/// A call's failure as host data's ([`DataError::Call`]), with its kind.
pub fn data_error(function: &str, e: &CallError) -> DataError {
    DataError::Call {
        function: function.to_string(),
        kind: e.kind(),
        message: e.to_string(),
    }
}

impl CallStep for KernelStep {
    fn name(&self) -> &str {
        &self.kernel.function
    }

    fn run_on_host(&self, buffers: &mut [Vec<f32>]) -> Result<(), DataError> {
        (self.kernel)
            .run_interpreted(buffers)
            .map_err(|e| data_error(&self.kernel.function, &e))
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
