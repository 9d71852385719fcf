//! The interface every compute backend implements.

use crate::kernel::{Kernel, Launch};

/// A compute backend: buffers of `f32` and kernel execution.
///
/// Implementations: `backend-cpu` (the reference executor, and the oracle
/// every other backend is checked against) and `backend-wgpu` (GPUs through
/// wgpu).
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

    /// Runs `kernel` with the sizes and layouts of `launch`, reading
    /// `operands` and writing `result`. A kernel with reduction iterators
    /// overwrites the result elements it addresses (it does not add to what
    /// was there before).
    fn execute(
        &mut self,
        kernel: &Kernel,
        launch: &Launch,
        result: &mut Self::Buffer,
        operands: &[&Self::Buffer],
    ) -> Result<(), Self::Error>;
}
