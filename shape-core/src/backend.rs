//! The interface every compute backend implements.

use crate::call::{CallFailure, CallStep};
use crate::kernel::{Accumulate, Expr, IterKind, Kernel, Launch, Layout};

/// A compute backend: buffers of `f32` and kernel execution.
///
/// Implementations: `backend-cpu` (the reference executor, and the oracle
/// every other backend is checked against) and `backend-wgpu` (GPUs through
/// wgpu). A third-party backend checks itself against the reference with
/// `shape-tests`' conformance suite (one macro call).
pub trait Backend {
    /// A buffer on the backend's device.
    type Buffer;
    /// What can go wrong on this backend.
    type Error: std::error::Error + Send + Sync + 'static;

    /// A human-readable name: the device or adapter that runs kernels.
    fn name(&self) -> String;

    /// A zero-filled buffer of `len` elements.
    fn alloc(&mut self, len: usize) -> Result<Self::Buffer, Self::Error>;

    /// A buffer holding a copy of `data`.
    fn upload(&mut self, data: &[f32]) -> Result<Self::Buffer, Self::Error>;

    /// The contents of a buffer.
    fn download(&mut self, buffer: &Self::Buffer) -> Result<Vec<f32>, Self::Error>;

    /// The number of elements of a buffer.
    fn len(&self, buffer: &Self::Buffer) -> u64;

    /// Whether the backend runs launches over the rows of ragged data
    /// ([`crate::kernel::Launch::rows`]: a row table read at run time).
    /// The default is `false`, and then ragged operations are lowered to
    /// ordinary launches, one per run of rows of the same lengths; a
    /// backend that says `true` must run each row of such a launch as
    /// [`crate::kernel::Launch::row_launch`] gives it.
    fn runs_row_tables(&self) -> bool {
        false
    }

    /// A buffer holding `data`, which the backend may keep instead of
    /// copying (the CPU backend does, so a run holds one copy of its
    /// inputs, not two).
    fn upload_owned(&mut self, data: Vec<f32>) -> Result<Self::Buffer, Self::Error> {
        self.upload(&data)
    }

    /// The contents of a buffer that is no longer needed; the backend may
    /// hand over its storage instead of copying it.
    fn take(&mut self, buffer: Self::Buffer) -> Result<Vec<f32>, Self::Error> {
        self.download(&buffer)
    }

    /// Sets every element of `buffer` to `value` (a reused buffer that a
    /// kernel will not overwrite entirely is cleared first). The default
    /// runs a one-iterator kernel through [`Backend::execute`].
    fn fill(&mut self, buffer: &mut Self::Buffer, value: f32) -> Result<(), Self::Error> {
        let len = self.len(buffer);
        let kernel = Kernel::new(
            vec![IterKind::Parallel],
            0,
            Expr::Const(value),
            Accumulate::Assign,
        );
        let launch = Launch::new(vec![len], Layout::new(0, vec![1], len), vec![]);
        self.execute(&kernel, &launch, buffer, &[])
    }

    /// Runs `kernel` with the sizes and layouts of `launch`, reading
    /// `operands` and writing `result`. A kernel with reduction iterators
    /// overwrites the result elements it addresses (it does not add to what
    /// was there before). Every implementation first runs
    /// [`Launch::check_buffers`], so that all backends refuse the same
    /// launches.
    fn execute(
        &mut self,
        kernel: &Kernel,
        launch: &Launch,
        result: &mut Self::Buffer,
        operands: &[&Self::Buffer],
    ) -> Result<(), Self::Error>;

    /// Runs a call step ([`CallStep`]: a user's function, once per call
    /// index), reading `operands` and overwriting `result`.
    ///
    /// The default runs it on the host: it downloads the operands and the
    /// result, runs [`CallStep::run_on_host`] and puts the result back
    /// (through [`Backend::upload_owned`], so the CPU backend keeps the
    /// values without a copy). A backend that compiles calls itself
    /// overrides this and finds the step's type with [`CallStep::as_any`]
    /// (the wgpu backend inlines WGSL functions), falling back to the
    /// default for steps it does not know.
    fn run_call_step(
        &mut self,
        call: &dyn CallStep,
        result: &mut Self::Buffer,
        operands: &[&Self::Buffer],
    ) -> Result<(), CallFailure<Self::Error>> {
        run_call_on_host(self, call, result, operands)
    }
}

/// [`Backend::run_call_step`]'s default: the call run on the host, its
/// operands downloaded and its result uploaded. For backends that
/// override the method and fall back to it.
pub fn run_call_on_host<B: Backend + ?Sized>(
    backend: &mut B,
    call: &dyn CallStep,
    result: &mut B::Buffer,
    operands: &[&B::Buffer],
) -> Result<(), CallFailure<B::Error>> {
    let mut buffers = Vec::with_capacity(operands.len() + 1);
    for b in operands {
        buffers.push(backend.download(b).map_err(CallFailure::Backend)?);
    }
    let len = usize::try_from(backend.len(result)).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    out.try_reserve_exact(len).map_err(|_| {
        CallFailure::Call(crate::DataError::OutOfMemory {
            elements: len as u128,
            bytes: (len as u128).saturating_mul(4),
        })
    })?;
    out.resize(len, 0.0);
    buffers.push(out);
    call.run_on_host(&mut buffers).map_err(CallFailure::Call)?;
    let out = buffers.pop().unwrap_or_default();
    *result = backend.upload_owned(out).map_err(CallFailure::Backend)?;
    Ok(())
}
