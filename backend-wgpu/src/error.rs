//! What can go wrong on the wgpu backend.

use shape_core::kernel::LaunchError;

/// A failure of the wgpu backend.
///
/// [`WgpuError::kind`] names each kind for programs: the variant's name in
/// snake case, or the launch error's own kind.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum WgpuError {
    /// No adapter could be found or opened.
    #[error("no GPU adapter: {reason}. Install a driver (on Debian/Ubuntu, `apt-get install mesa-vulkan-drivers` gives the software adapter llvmpipe), or use the CPU backend")]
    NoAdapter {
        /// What was tried and what was found.
        reason: String,
    },
    /// The adapter was found but no device could be opened on it.
    #[error("could not open a device on adapter {adapter}: {reason}")]
    Device {
        /// The adapter's name.
        adapter: String,
        /// wgpu's message.
        reason: String,
    },
    /// The launch does not fit the kernel or its buffers, or addresses
    /// outside a buffer.
    #[error(transparent)]
    Launch(#[from] LaunchError),
    /// A buffer larger than the device can allocate or bind.
    #[error("a buffer of {elements} f32 elements ({bytes} bytes) exceeds the {limit_name} of adapter {adapter}, {limit} bytes; split the tensor or run it on the CPU backend")]
    BufferTooLarge {
        /// Elements asked for.
        elements: u64,
        /// Their size in bytes.
        bytes: u128,
        /// Which device limit: the storage binding size or the buffer size.
        limit_name: &'static str,
        /// The limit, in bytes.
        limit: u64,
        /// The adapter's name.
        adapter: String,
    },
    /// A launch value past what the generated shaders address (they index
    /// with 32-bit integers).
    #[error("the launch's {what} is {value}, past the wgpu backend's limit of {limit} (its shaders index with 32-bit integers); split the tensor or run it on the CPU backend")]
    IndexRange {
        /// Which value.
        what: &'static str,
        /// The value.
        value: u64,
        /// The largest value allowed.
        limit: u64,
    },
    /// The kernel binds more buffers than the device allows in one shader.
    #[error("the kernel reads {operands} operands, but adapter {adapter} can bind at most {limit} beside the result and the parameter block")]
    TooManyOperands {
        /// Operands the kernel reads.
        operands: usize,
        /// The most operands the device can bind.
        limit: u64,
        /// The adapter's name.
        adapter: String,
    },
    /// The launch parameter block of a kernel is larger than a uniform
    /// binding may be.
    #[error("a kernel with {iterators} iterators and {operands} operands needs a {bytes}-byte parameter block, past the limit of {limit} bytes; run it on the CPU backend")]
    ParamsTooLarge {
        /// The block's size.
        bytes: u64,
        /// The limit.
        limit: u64,
        /// The kernel's iterators.
        iterators: usize,
        /// The kernel's operands.
        operands: usize,
    },
    /// A kernel body with an expression this backend does not know how to
    /// compile (a kind added to the kernel IR after it was written).
    #[error("the wgpu backend cannot compile the kernel body `{body}`")]
    UnsupportedBody {
        /// The body, printed.
        body: String,
    },
    /// wgpu reported an error (validation, out of memory, internal).
    #[error("wgpu reported an error on adapter {adapter} {during}: {message}")]
    Gpu {
        /// The adapter's name.
        adapter: String,
        /// What the backend was doing.
        during: String,
        /// wgpu's message.
        message: String,
    },
    /// The device did not finish its work within
    /// [`WgpuOptions::wait_timeout`](crate::WgpuOptions::wait_timeout);
    /// the backend refuses further work.
    #[error("adapter {adapter} did not finish its work within {waited_s:.3} s: the driver or a kernel may be hung, or the work may need longer (raise `WgpuOptions::wait_timeout` or SHAPE_WGPU_WAIT_TIMEOUT, in seconds, 0 for no limit); create a new backend to go on")]
    Timeout {
        /// The adapter's name.
        adapter: String,
        /// How long the backend waited, in seconds.
        waited_s: f64,
    },
    /// The device was lost; no further work can run on this backend.
    #[error("the GPU device of adapter {adapter} was lost ({reason}); create a new backend")]
    DeviceLost {
        /// The adapter's name.
        adapter: String,
        /// Why, as wgpu reported it.
        reason: String,
    },
    /// Reading a buffer back from the device failed.
    #[error("reading a buffer back from adapter {adapter} failed: {reason}")]
    Readback {
        /// The adapter's name.
        adapter: String,
        /// What failed.
        reason: String,
    },
    /// A vectorized call that cannot run on wgpu.
    #[error("the wgpu backend cannot run this call: {reason}")]
    UnsupportedCall {
        /// Why.
        reason: String,
    },
    /// A vectorized call whose buffers do not fit it.
    #[cfg(feature = "call")]
    #[error(transparent)]
    Call(#[from] shape_call::CallError),
    /// The buffer belongs to another backend instance.
    #[error("the buffer was made by another wgpu backend (device) than the one asked to use it")]
    ForeignBuffer,
}

impl WgpuError {
    /// A stable, machine-readable name for the error's kind.
    pub fn kind(&self) -> &'static str {
        if let WgpuError::Launch(e) = self {
            return e.kind();
        }
        self.into()
    }
}
