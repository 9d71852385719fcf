//! The wgpu compute backend.
//!
//! Kernels of the kernel IR become WGSL compute shaders ([`wgsl`]), one per
//! kernel structure, launch classes (zero or unit strides, zero
//! offsets, row-major tensors: see [`wgsl::StrideClasses`]) and schedule,
//! compiled once and kept in a pipeline cache: running the same program at
//! other sizes compiles nothing new, because sizes, strides and offsets
//! travel in a uniform parameter block.
//!
//! No invocation runs more than [`LoopBudget`] loop iterations (Mesa's
//! software adapters silently stop a loop after 65,535): a reduction
//! longer than that, or long compared with its number of outputs, runs
//! as workgroup reductions in one or more passes ([`reduction`]), in an
//! order fixed by the kernel and the sizes.
//!
//! Dispatches are recorded into one compute pass and submitted in batches
//! (at the latest when a buffer is read back); the parameter block is
//! bound at a dynamic offset, so launches over the same buffers reuse one
//! bind group.
//!
//! Everything the device could reject about a launch (buffer lengths and
//! limits, bindings, parameter block size, 32-bit addressing, writes that
//! would race) is checked on the host first and returned as a typed
//! [`WgpuError`]. What wgpu still reports (out of memory, device loss, an
//! internal error) is captured and returned by the call that caused it,
//! or at the latest by the next submission (a `flush`, `wait` or
//! `download`); nothing is printed and nothing panics.
//!
//! ```no_run
//! use backend_wgpu::WgpuBackend;
//! use shape_core::kernel::{Accumulate, Expr, IterKind, Kernel, Launch, Layout};
//! use shape_core::Backend;
//!
//! let mut gpu = WgpuBackend::new()?;          // fails cleanly without an adapter
//! println!("running on {}", gpu.name());
//! let kernel = Kernel::new(
//!     vec![IterKind::Parallel, IterKind::Reduction],
//!     1,
//!     Expr::Load(0),
//!     Accumulate::Add,
//! );
//! let launch = Launch::new(
//!     vec![2, 3],
//!     Layout::new(0, vec![1, 0], 2),
//!     vec![Layout::new(0, vec![3, 1], 6)],
//! );
//! let a = gpu.upload(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0])?;
//! let mut out = gpu.alloc(2)?;
//! gpu.execute(&kernel, &launch, &mut out, &[&a])?;
//! assert_eq!(gpu.download(&out)?, vec![6.0, 15.0]);
//! # Ok::<(), backend_wgpu::WgpuError>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod adapter;
#[cfg(feature = "call")]
mod call;
#[cfg(feature = "call")]
mod division;
mod error;
mod key;
pub mod reduction;
pub mod tiled;
pub mod wgsl;

use std::collections::HashMap;
use std::num::NonZeroU64;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use shape_core::kernel::{Kernel, Launch};
use shape_core::Backend;

pub use adapter::AdapterRequest;
pub use error::WgpuError;
use key::KernelKey;
pub use reduction::LoopBudget;
use reduction::Plan;
/// The wgpu version this backend is built on, for [`WgpuBackend::device`]
/// and [`WgpuBackend::adapter_info`].
pub use wgpu;
use wgsl::{ParamLayout, Schedule, WORKGROUP_SIZE};

/// Options of a [`WgpuBackend`]; the defaults suit normal use.
#[derive(Clone, Debug)]
pub struct WgpuOptions {
    /// Which adapter to open.
    pub adapter: AdapterRequest,
    /// Caps the workgroups per grid dimension below the device's limit;
    /// tests use it to exercise split dispatches on small launches.
    pub max_workgroups_per_dimension: Option<u32>,
    /// Dispatches recorded before they are submitted to the device.
    /// Recorded work keeps the buffers it uses alive until it is
    /// submitted, so this also bounds how long freed buffers linger.
    pub max_pending_dispatches: usize,
    /// The most loop iterations an invocation of a generated kernel runs,
    /// all loops counted: reductions longer than this are split across
    /// invocations and passes (see [`reduction`]). Tests lower it to run
    /// the multi-pass path on small sizes.
    pub loop_budget: LoopBudget,
    /// Reductions of at least this many points per result element, with
    /// fewer result elements than that, run as workgroup reductions even
    /// when they fit the loop budget (one invocation per element would
    /// leave most of a GPU idle). `u64::MAX` keeps every reduction within
    /// the budget on one invocation per element, as before workgroup
    /// reductions existed (for comparisons); reductions past the budget
    /// are split whatever this says.
    pub workgroup_reduction_threshold: u64,
    /// Runs contractions as tiled kernels where the adapter allows it
    /// (not on wgpu's GL backend, whose software compiler takes many
    /// seconds on them) and the sizes make it worthwhile (see [`tiled`]);
    /// `false` runs them one invocation per result element, as before
    /// tiling existed (for comparisons).
    pub tiled_contractions: bool,
    /// Runs tiled contractions with fewer than half a tile of rows or
    /// columns (many small batched products) as batched tiles, several
    /// batch points per workgroup ([`tiled::TileConfig::batched`]);
    /// `false` runs them one invocation per result element, as before.
    pub batched_tiles: bool,
    /// Runs tiled contractions whose reduction is past the loop budget
    /// (or long next to their results) as split-K tiles: partials over
    /// fixed chunks of the points, added in order by a second pass
    /// ([`tiled::TiledPlan::SplitK`]); `false` runs them as workgroup
    /// reductions, as before.
    pub split_k_contractions: bool,
    /// How long [`WgpuBackend::wait`] (and so every read-back) waits for
    /// the device before it fails with [`WgpuError::Timeout`] and the
    /// backend refuses further work; `None` waits for ever. The default
    /// reads `SHAPE_WGPU_WAIT_TIMEOUT` (seconds, `0` for no limit) and
    /// falls back to [`DEFAULT_WAIT_TIMEOUT`]: a hung driver or a kernel
    /// that never ends becomes an error naming the adapter, not a process
    /// that never returns.
    pub wait_timeout: Option<std::time::Duration>,
}

/// The wait limit of [`WgpuOptions::default`] when
/// `SHAPE_WGPU_WAIT_TIMEOUT` is unset: ten minutes, far beyond any launch
/// the backend's loop budget lets one submission hold.
pub const DEFAULT_WAIT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// `SHAPE_WGPU_WAIT_TIMEOUT` read as seconds (`0`: no limit); an unset or
/// unreadable value gives the default.
fn wait_timeout_from_env() -> Option<std::time::Duration> {
    match std::env::var("SHAPE_WGPU_WAIT_TIMEOUT")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
    {
        Some(0) => None,
        Some(secs) => Some(std::time::Duration::from_secs(secs)),
        None => Some(DEFAULT_WAIT_TIMEOUT),
    }
}

impl Default for WgpuOptions {
    fn default() -> Self {
        WgpuOptions {
            adapter: AdapterRequest::default(),
            max_workgroups_per_dimension: None,
            max_pending_dispatches: 256,
            loop_budget: LoopBudget::DEFAULT,
            workgroup_reduction_threshold: reduction::DEFAULT_WORKGROUP_REDUCTION_THRESHOLD,
            tiled_contractions: true,
            batched_tiles: true,
            split_k_contractions: true,
            wait_timeout: wait_timeout_from_env(),
        }
    }
}

/// Pipeline cache counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Passes whose kernel structure, classes and schedule had been
    /// compiled before (a launch is one pass, or several when its
    /// reduction is split).
    pub hits: u64,
    /// Passes that compiled a new pipeline.
    pub misses: u64,
    /// Passes run as workgroup reductions (see [`reduction`]).
    pub workgroup_passes: u64,
    /// Launches run as tiled contractions (see [`tiled`]).
    pub tiled_passes: u64,
    /// Of the tiled launches, those run as batched tiles (several batch
    /// points per workgroup).
    pub batched_passes: u64,
    /// Of the tiled launches, those run split-K (a tiled pass writing
    /// partials, then a pass adding them).
    pub split_k_passes: u64,
    /// Dispatches recorded (a launch larger than one grid takes several).
    pub dispatches: u64,
    /// Dispatches that reused the bind group of an earlier launch over
    /// the same buffers since the last submission.
    pub bind_group_reuses: u64,
    /// Dispatches on a grid of more than one row of workgroups.
    pub two_dimensional_dispatches: u64,
    /// Submissions to the device.
    pub submissions: u64,
    /// Vectorized calls that compiled a new pipeline
    /// ([`WgpuBackend::run_call`]).
    pub call_compiles: u64,
    /// Vectorized calls that reused a compiled pipeline.
    pub call_hits: u64,
    /// Launches over the rows of ragged data run as one pass over their
    /// row table ([`shape_core::kernel::RowTable`]).
    pub row_table_passes: u64,
}

/// A buffer bound to a dispatch: the wgpu handle and the id that bind
/// groups are cached by.
#[derive(Clone)]
struct Bound {
    buffer: wgpu::Buffer,
    id: u64,
}

/// A scratch buffer for partial results, kept between launches.
struct Scratch {
    bound: Bound,
    len: u64,
}

/// A buffer of `f32` on the device.
#[derive(Debug)]
pub struct WgpuBuffer {
    buffer: wgpu::Buffer,
    len: u64,
    owner: u64,
    id: u64,
}

impl WgpuBuffer {
    /// The number of elements.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the buffer has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The wgpu buffer, for work outside the kernel IR (its size is at
    /// least 4 bytes, even when it holds no element).
    pub fn raw(&self) -> &wgpu::Buffer {
        &self.buffer
    }

    fn bound(&self) -> Bound {
        Bound {
            buffer: self.buffer.clone(),
            id: self.id,
        }
    }
}

struct Pipeline {
    pipeline: wgpu::ComputePipeline,
    bind_layout: wgpu::BindGroupLayout,
    params: ParamLayout,
    /// Distinguishes pipelines in bind group keys.
    index: u64,
}

/// Work recorded since the last submission: one encoder with one open
/// compute pass (passes are costly to open and close; wgpu still orders
/// the dispatches inside one by their buffer uses), and the bind groups
/// made for it, by pipeline and buffers.
#[derive(Default)]
struct Recording {
    encoder: Option<wgpu::CommandEncoder>,
    pass: Option<wgpu::ComputePass<'static>>,
    dispatches: usize,
    bind_groups: HashMap<Vec<u64>, wgpu::BindGroup>,
}

impl Recording {
    fn encoder(&mut self, device: &wgpu::Device) -> &mut wgpu::CommandEncoder {
        // A copy cannot be recorded while the pass is open.
        self.pass = None;
        self.encoder.get_or_insert_with(|| {
            device.create_command_encoder(&wgpu::CommandEncoderDescriptor::default())
        })
    }

    fn pass(&mut self, device: &wgpu::Device) -> &mut wgpu::ComputePass<'static> {
        if self.pass.is_none() {
            let encoder = self.encoder(device);
            self.pass = Some(
                encoder
                    .begin_compute_pass(&wgpu::ComputePassDescriptor::default())
                    .forget_lifetime(),
            );
        }
        self.pass.as_mut().expect("opened above")
    }

    /// The finished commands, if anything was recorded.
    fn finish(&mut self) -> Option<wgpu::CommandBuffer> {
        self.pass = None;
        self.dispatches = 0;
        self.bind_groups.clear();
        self.encoder.take().map(wgpu::CommandEncoder::finish)
    }
}

/// Launch parameter blocks of the dispatches recorded since the last
/// submission, staged on the host and written to one uniform buffer just
/// before the submission that reads them.
struct ParamArena {
    buffer: wgpu::Buffer,
    staged: Vec<u8>,
    align: usize,
}

/// Size of the parameter arena: enough for hundreds of dispatches.
const ARENA_BYTES: usize = 1 << 20;

/// Errors wgpu reported through its callbacks, for the next call to return.
#[derive(Default)]
struct Reported {
    errors: Vec<String>,
    lost: Option<String>,
}

static NEXT_BACKEND_ID: AtomicU64 = AtomicU64::new(1);
static NEXT_BUFFER_ID: AtomicU64 = AtomicU64::new(1);

/// The wgpu backend: a device, its queue and the pipeline cache.
pub struct WgpuBackend {
    device: wgpu::Device,
    queue: wgpu::Queue,
    info: wgpu::AdapterInfo,
    limits: wgpu::Limits,
    id: u64,
    options: WgpuOptions,
    pipelines: HashMap<KernelKey, Pipeline>,
    /// Call kernels, by the hash of their structure (see `call.rs`).
    #[cfg(feature = "call")]
    call_pipelines: HashMap<u64, Vec<call::CallPipeline>>,
    stats: CacheStats,
    recording: Recording,
    arena: ParamArena,
    /// Two buffers of partials, which successive passes of a split
    /// reduction write and read in turn.
    scratch: [Option<Scratch>; 2],
    /// The tiled contractions' workgroup shape, from the limits.
    tile_config: Option<tiled::TileConfig>,
    reported: Arc<Mutex<Reported>>,
}

impl std::fmt::Debug for WgpuBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WgpuBackend")
            .field("adapter", &adapter::describe(&self.info))
            .field("stats", &self.stats)
            .finish()
    }
}

impl WgpuBackend {
    /// Opens the best adapter the environment allows (see
    /// [`AdapterRequest`]), or fails with [`WgpuError::NoAdapter`].
    pub fn new() -> Result<WgpuBackend, WgpuError> {
        WgpuBackend::with_options(WgpuOptions::default())
    }

    /// Opens an adapter as `options` say.
    pub fn with_options(options: WgpuOptions) -> Result<WgpuBackend, WgpuError> {
        let instance = adapter::instance_for(options.adapter.backends());
        let adapter = adapter::select(&instance, &options.adapter)?;
        let info = adapter.get_info();
        // Ask for everything the adapter offers: storage bindings of real
        // GPUs are far larger than WebGPU's defaults.
        let limits = adapter.limits();
        let (device, queue) = pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            label: Some("shape-infer"),
            required_features: wgpu::Features::empty(),
            required_limits: limits.clone(),
            experimental_features: wgpu::ExperimentalFeatures::disabled(),
            memory_hints: wgpu::MemoryHints::Performance,
            trace: wgpu::Trace::Off,
        }))
        .map_err(|e| WgpuError::Device {
            adapter: adapter::describe(&info),
            reason: e.to_string(),
        })?;
        let reported = Arc::new(Mutex::new(Reported::default()));
        {
            let reported = reported.clone();
            device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
                if let Ok(mut r) = reported.lock() {
                    r.errors.push(e.to_string());
                }
            }));
        }
        {
            let reported = reported.clone();
            device.set_device_lost_callback(move |reason, message| {
                if let Ok(mut r) = reported.lock() {
                    r.lost = Some(format!("{reason:?}: {message}"));
                }
            });
        }
        let arena = ParamArena {
            buffer: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("launch parameters"),
                size: ARENA_BYTES as u64,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            staged: Vec::new(),
            align: limits.min_uniform_buffer_offset_alignment.max(16) as usize,
        };
        // llvmpipe's GL compiler took 15 to 42 s on many tiled shaders
        // (measured; Vulkan compiles the same shaders in milliseconds):
        // on GL, contractions keep the other schedules.
        let tile_config = match info.backend {
            wgpu::Backend::Gl => None,
            _ => tiled::TileConfig::for_limits(&limits),
        };
        let backend = WgpuBackend {
            device,
            queue,
            info,
            limits,
            id: NEXT_BACKEND_ID.fetch_add(1, Ordering::Relaxed),
            options,
            pipelines: HashMap::new(),
            #[cfg(feature = "call")]
            call_pipelines: HashMap::new(),
            stats: CacheStats::default(),
            recording: Recording::default(),
            arena,
            scratch: [None, None],
            tile_config,
            reported,
        };
        backend.check(|| "opening the device".to_string())?;
        Ok(backend)
    }

    /// The adapter's description from wgpu.
    pub fn adapter_info(&self) -> &wgpu::AdapterInfo {
        &self.info
    }

    /// The device, for work outside the kernel IR. Work submitted on it
    /// directly is not ordered with this backend's recorded dispatches
    /// until [`WgpuBackend::flush`] is called.
    pub fn device(&self) -> &wgpu::Device {
        &self.device
    }

    /// The device's queue (see [`WgpuBackend::device`]).
    pub fn queue(&self) -> &wgpu::Queue {
        &self.queue
    }

    /// The device's limits.
    pub fn limits(&self) -> &wgpu::Limits {
        &self.limits
    }

    /// Pipeline cache hits and misses, dispatches and submissions, so far.
    pub fn cache_stats(&self) -> CacheStats {
        self.stats
    }

    /// Kernel structures compiled so far.
    pub fn cached_pipelines(&self) -> usize {
        self.pipelines.len()
    }

    /// The workgroup shape of tiled contractions on this adapter, or
    /// `None` when contractions run on the other schedules (see
    /// [`WgpuOptions::tiled_contractions`]).
    pub fn tile_config(&self) -> Option<tiled::TileConfig> {
        self.tile_config.filter(|_| self.options.tiled_contractions)
    }

    /// The largest buffer this device can allocate and bind, in bytes.
    pub fn max_buffer_bytes(&self) -> u64 {
        self.limits
            .max_storage_buffer_binding_size
            .min(self.limits.max_buffer_size)
    }

    fn adapter_name(&self) -> String {
        adapter::describe(&self.info)
    }

    /// Returns the first error wgpu reported since the last check.
    fn check(&self, during: impl Fn() -> String) -> Result<(), WgpuError> {
        let mut r = self.reported.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(reason) = &r.lost {
            return Err(WgpuError::DeviceLost {
                adapter: self.adapter_name(),
                reason: reason.clone(),
            });
        }
        if r.errors.is_empty() {
            return Ok(());
        }
        let message = r.errors.drain(..).collect::<Vec<_>>().join("; ");
        Err(WgpuError::Gpu {
            adapter: self.adapter_name(),
            during: during(),
            message,
        })
    }

    fn new_buffer(&self, len: usize, mapped: bool) -> Result<wgpu::Buffer, WgpuError> {
        let bytes = len as u128 * 4;
        let (limit_name, limit) =
            if self.limits.max_storage_buffer_binding_size <= self.limits.max_buffer_size {
                (
                    "storage binding limit",
                    self.limits.max_storage_buffer_binding_size,
                )
            } else {
                ("buffer size limit", self.limits.max_buffer_size)
            };
        if bytes > limit as u128 {
            return Err(WgpuError::BufferTooLarge {
                elements: len as u64,
                bytes,
                limit_name,
                limit,
                adapter: self.adapter_name(),
            });
        }
        // wgpu cannot bind an empty buffer: keep one element's room.
        let size = (bytes as u64).max(4);
        Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
            label: None,
            size,
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: mapped,
        }))
    }

    /// Submits every recorded dispatch.
    pub fn flush(&mut self) -> Result<(), WgpuError> {
        if let Some(commands) = self.recording.finish() {
            if !self.arena.staged.is_empty() {
                self.queue
                    .write_buffer(&self.arena.buffer, 0, &self.arena.staged);
                self.arena.staged.clear();
            }
            self.queue.submit([commands]);
            self.stats.submissions += 1;
        }
        self.check(|| "submitting work".to_string())
    }

    /// Blocks until the device has finished all submitted work.
    pub fn wait(&mut self) -> Result<(), WgpuError> {
        self.flush()?;
        let timeout = self.options.wait_timeout;
        let started = std::time::Instant::now();
        match self.device.poll(wgpu::PollType::Wait {
            submission_index: None,
            timeout,
        }) {
            Ok(_) => {}
            Err(wgpu::PollError::Timeout) => {
                // Measured: wgpu's GL backend gives up after 4.3 s
                // whatever the limit asked for.
                let waited = started.elapsed();
                // What the device still runs is unknown: later work on
                // this backend would race it, so none is accepted.
                let mut r = self.reported.lock().unwrap_or_else(|p| p.into_inner());
                r.lost = Some(format!(
                    "an earlier wait timed out after {} s",
                    waited.as_secs_f64()
                ));
                return Err(WgpuError::Timeout {
                    adapter: self.adapter_name(),
                    waited_s: waited.as_secs_f64(),
                });
            }
            Err(e) => {
                return Err(WgpuError::Gpu {
                    adapter: self.adapter_name(),
                    during: "waiting for the device".to_string(),
                    message: e.to_string(),
                })
            }
        }
        self.check(|| "waiting for the device".to_string())
    }

    /// The cache key of `kernel` run with `schedule`, compiling its
    /// pipeline on a miss.
    fn cached_pipeline(
        &mut self,
        kernel: &Kernel,
        launch: &Launch,
        schedule: Schedule,
    ) -> Result<KernelKey, WgpuError> {
        let classes = wgsl::StrideClasses::of(kernel, launch);
        let key = KernelKey::of(kernel, &classes, schedule);
        if self.pipelines.contains_key(&key) {
            self.stats.hits += 1;
        } else {
            self.stats.misses += 1;
            let pipeline = self.compile(kernel, &classes, schedule)?;
            self.pipelines.insert(key.clone(), pipeline);
        }
        Ok(key)
    }

    fn compile(
        &self,
        kernel: &Kernel,
        classes: &wgsl::StrideClasses,
        schedule: Schedule,
    ) -> Result<Pipeline, WgpuError> {
        let source = wgsl::generate_scheduled(kernel, classes, schedule);
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: None,
                source: wgpu::ShaderSource::Wgsl(source.into()),
            });
        let params = ParamLayout::scheduled(kernel, schedule);
        let buffer =
            |binding: u32, ty: wgpu::BufferBindingType, min: u64| wgpu::BindGroupLayoutEntry {
                binding,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty,
                    has_dynamic_offset: false,
                    min_binding_size: NonZeroU64::new(min),
                },
                count: None,
            };
        let mut entries = vec![
            wgpu::BindGroupLayoutEntry {
                binding: 0,
                visibility: wgpu::ShaderStages::COMPUTE,
                ty: wgpu::BindingType::Buffer {
                    ty: wgpu::BufferBindingType::Uniform,
                    has_dynamic_offset: true,
                    min_binding_size: NonZeroU64::new(params.bytes() as u64),
                },
                count: None,
            },
            buffer(1, wgpu::BufferBindingType::Storage { read_only: false }, 4),
        ];
        for o in 0..kernel.operands {
            entries.push(buffer(
                2 + o as u32,
                wgpu::BufferBindingType::Storage { read_only: true },
                4,
            ));
        }
        let bind_layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: None,
                entries: &entries,
            });
        let layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: None,
                bind_group_layouts: &[Some(&bind_layout)],
                immediate_size: 0,
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: None,
                layout: Some(&layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: wgpu::PipelineCompilationOptions::default(),
                cache: None,
            });
        self.check(|| format!("compiling the kernel `{kernel}`"))?;
        Ok(Pipeline {
            pipeline,
            bind_layout,
            params,
            index: self.pipelines.len() as u64,
        })
    }

    /// Checks everything about a launch that the device cannot check (or
    /// would only report as a validation error).
    fn validate(
        &self,
        kernel: &Kernel,
        launch: &Launch,
        result: &WgpuBuffer,
        operands: &[&WgpuBuffer],
    ) -> Result<(), WgpuError> {
        launch.check_buffers(kernel, result.len, operands.iter().map(|b| b.len))?;
        let storage = self.limits.max_storage_buffers_per_shader_stage as u64;
        let bindings = self.limits.max_bindings_per_bind_group as u64;
        // The result and the parameter block take a binding each.
        let limit = storage.saturating_sub(1).min(bindings.saturating_sub(2));
        if kernel.operands as u64 > limit {
            return Err(WgpuError::TooManyOperands {
                operands: kernel.operands,
                limit,
                adapter: self.adapter_name(),
            });
        }
        self.check_params_size(kernel, &ParamLayout::of(kernel))?;
        // Shaders address elements with 32-bit indices.
        for layout in std::iter::once(&launch.result).chain(&launch.operands) {
            if layout.len > 1 << 32 {
                return Err(WgpuError::IndexRange {
                    what: "buffer length",
                    value: layout.len,
                    limit: 1 << 32,
                });
            }
        }
        if std::iter::once(result)
            .chain(operands.iter().copied())
            .any(|b| b.owner != self.id)
        {
            return Err(WgpuError::ForeignBuffer);
        }
        let epilogue_supported = kernel.epilogue.as_ref().is_none_or(wgsl::supports);
        if !wgsl::supports(&kernel.body) || !epilogue_supported {
            return Err(WgpuError::UnsupportedBody {
                body: kernel.to_string(),
            });
        }
        Ok(())
    }

    /// Runs a launch over rows ([`shape_core::kernel::RowTable`]) as one
    /// dispatch (more where the grid is too small): the table uploaded as
    /// `u32` words and bound after the operands, each invocation reading
    /// its row's length and offsets from it. What that shader does not
    /// take (another empty iterator, a reduction too long for one
    /// invocation's loop, a binding too many, a table entry past 32 bits)
    /// runs row by row instead, each row the ordinary launch it is.
    fn execute_rows(
        &mut self,
        kernel: &Kernel,
        launch: &Launch,
        rows: &shape_core::kernel::RowTable,
        result: &mut WgpuBuffer,
        operands: &[&WgpuBuffer],
    ) -> Result<(), WgpuError> {
        let mut padded = launch.clone();
        padded.rows = None;
        let storage = self.limits.max_storage_buffers_per_shader_stage as u64;
        let bindings = self.limits.max_bindings_per_bind_group as u64;
        let binding_fits = (kernel.operands as u64 + 1) < storage.min(bindings.saturating_sub(1));
        let per_element = matches!(
            reduction::plan(
                kernel,
                &padded,
                self.options.loop_budget,
                self.options.workgroup_reduction_threshold
            )?,
            Plan::PerElement
        );
        let (per_row, _) = reduction::point_counts(kernel, &padded);
        // The table goes up as 32-bit words, written straight into the
        // mapped buffer (a copy converted first cost a fresh allocation
        // of its size per run).
        let words_fit = rows.entries.iter().all(|&w| u32::try_from(w).is_ok());
        let one_dispatch = per_element
            && binding_fits
            && words_fit
            && !padded.sizes.contains(&0)
            && per_row.saturating_mul(rows.len() as u128) <= MAX_POINTS;
        if !one_dispatch {
            for r in 0..rows.len() {
                if let Some(row) = launch.row_launch(r) {
                    self.execute(kernel, &row, result, operands)?;
                }
            }
            return Ok(());
        }
        if rows.is_empty() {
            return Ok(());
        }
        let words = rows.entries.len();
        let table = self.upload_with(words, |bytes| {
            // Every word fits: checked above.
            let (words, _) = bytes.into_chunks::<4>();
            words.write_iter(rows.entries.iter().map(|&w| (w as u32).to_le_bytes()));
        })?;
        // The table as the kernel's last operand, read by no expression.
        let mut with_table = kernel.clone();
        with_table.operands += 1;
        let iterators = padded.sizes.len();
        padded.operands.push(shape_core::kernel::Layout::new(
            0,
            vec![0; iterators],
            words as u64,
        ));
        let inputs: Vec<Bound> = operands
            .iter()
            .map(|b| b.bound())
            .chain(std::iter::once(table.bound()))
            .collect();
        self.stats.row_table_passes += 1;
        self.dispatch(
            &with_table,
            &padded,
            &result.bound(),
            &inputs,
            Schedule::Rows { along: rows.along },
            (per_row * rows.len() as u128) as u64,
            Some((per_row as u32, 0)),
        )?;
        self.check(|| format!("running the kernel `{kernel}` over {} rows", rows.len()))
    }

    /// A new buffer of `len` 32-bit words, its bytes written by `fill`
    /// while it is mapped.
    fn upload_with(
        &mut self,
        len: usize,
        fill: impl FnOnce(wgpu::WriteOnly<'_, [u8]>),
    ) -> Result<WgpuBuffer, WgpuError> {
        let buffer = self.new_buffer(len, true)?;
        if len > 0 {
            let mut view = buffer
                .slice(..len as u64 * 4)
                .get_mapped_range_mut()
                .map_err(|e| WgpuError::Gpu {
                    adapter: self.adapter_name(),
                    during: "uploading a buffer".to_string(),
                    message: e.to_string(),
                })?;
            fill(view.slice(..));
        }
        buffer.unmap();
        self.check(|| "uploading a buffer".to_string())?;
        Ok(WgpuBuffer {
            buffer,
            len: len as u64,
            owner: self.id,
            id: NEXT_BUFFER_ID.fetch_add(1, Ordering::Relaxed),
        })
    }

    /// Refuses a parameter block larger than a uniform binding may be.
    fn check_params_size(&self, kernel: &Kernel, layout: &ParamLayout) -> Result<(), WgpuError> {
        let block = layout.bytes() as u64;
        let block_limit = self
            .limits
            .max_uniform_buffer_binding_size
            .min(ARENA_BYTES as u64);
        if block > block_limit {
            return Err(WgpuError::ParamsTooLarge {
                bytes: block,
                limit: block_limit,
                iterators: kernel.iterators.len(),
                operands: kernel.operands,
            });
        }
        Ok(())
    }

    /// Scratch buffer `slot` with room for `len` partials, grown (to a
    /// power of two, within the device's limit) when it is too small.
    fn scratch(&mut self, slot: usize, len: u64) -> Result<Bound, WgpuError> {
        if let Some(s) = &self.scratch[slot] {
            if s.len >= len {
                return Ok(s.bound.clone());
            }
        }
        let most = self.max_buffer_bytes() / 4;
        let len = len
            .checked_next_power_of_two()
            .unwrap_or(len)
            .min(most)
            .max(len);
        let elements = usize::try_from(len).map_err(|_| WgpuError::IndexRange {
            what: "partials of a split reduction",
            value: len,
            limit: usize::MAX as u64,
        })?;
        let buffer = self.new_buffer(elements, false)?;
        self.check(|| "allocating a buffer for the partials of a reduction".to_string())?;
        let bound = Bound {
            buffer,
            id: NEXT_BUFFER_ID.fetch_add(1, Ordering::Relaxed),
        };
        self.scratch[slot] = Some(Scratch {
            bound: bound.clone(),
            len,
        });
        Ok(bound)
    }

    /// Runs `kernel` over `launch` as its reduction plans say: one pass,
    /// or a workgroup reduction into partials and further passes over
    /// them, the last one writing `result`.
    fn run_passes(
        &mut self,
        kernel: &Kernel,
        launch: &Launch,
        result: Bound,
        operands: Vec<Bound>,
        outputs: u64,
    ) -> Result<(), WgpuError> {
        let tile = self
            .tile_config()
            .filter(|_| tiled::TileAxes::candidate(kernel));
        let mut start = (kernel.clone(), launch.clone(), operands, 0);
        if let Some(config) = tile {
            let classes = wgsl::StrideClasses::of(kernel, launch);
            let plan = tiled::TileAxes::of(kernel, &classes)
                .and_then(|axes| axes.plan(kernel, launch, config, &self.limits, &self.options));
            match plan {
                Some(tiled::TiledPlan::Tiled {
                    config: tile,
                    workgroups,
                }) => {
                    self.stats.tiled_passes += 1;
                    self.stats.batched_passes += u64::from(tile != config);
                    return self.dispatch(
                        kernel,
                        launch,
                        &result,
                        &start.2,
                        Schedule::Tiled(tile),
                        workgroups,
                        None,
                    );
                }
                Some(tiled::TiledPlan::SplitK {
                    config,
                    workgroups,
                    splits,
                    chunk,
                }) => {
                    self.stats.tiled_passes += 1;
                    self.stats.split_k_passes += 1;
                    let target = self.scratch(0, outputs * u64::from(splits))?;
                    self.dispatch(
                        kernel,
                        launch,
                        &target,
                        &start.2,
                        Schedule::SplitK(config),
                        workgroups,
                        Some((splits, chunk)),
                    )?;
                    // The partials, added per result in order of the
                    // splits (planned like a workgroup reduction's).
                    let epilogue: Vec<Bound> = kernel
                        .epilogue_operands()
                        .into_iter()
                        .map(|o| start.2[o].clone())
                        .collect();
                    start = (
                        reduction::partials_kernel(kernel),
                        reduction::partials_launch(kernel, launch, splits),
                        std::iter::once(target).chain(epilogue).collect(),
                        1,
                    );
                }
                None => {}
            }
        }
        let (mut kernel, mut launch, mut inputs, first) = start;
        for pass in first.. {
            let plan = reduction::plan(
                &kernel,
                &launch,
                self.options.loop_budget,
                self.options.workgroup_reduction_threshold,
            )?;
            let Plan::Workgroup { groups, chunk } = plan else {
                return self.dispatch(
                    &kernel,
                    &launch,
                    &result,
                    &inputs,
                    Schedule::PerElement,
                    outputs,
                    None,
                );
            };
            self.stats.workgroup_passes += 1;
            let workgroups = outputs * groups as u64;
            let target = if groups == 1 {
                result.clone()
            } else {
                self.scratch(pass % 2, workgroups)?
            };
            self.dispatch(
                &kernel,
                &launch,
                &target,
                &inputs,
                Schedule::WorkgroupReduction,
                workgroups,
                Some((groups, chunk)),
            )?;
            if groups == 1 {
                break;
            }
            launch = reduction::partials_launch(&kernel, &launch, groups);
            let epilogue: Vec<Bound> = kernel
                .epilogue_operands()
                .into_iter()
                .map(|o| inputs[o].clone())
                .collect();
            kernel = reduction::partials_kernel(&kernel);
            inputs = std::iter::once(target).chain(epilogue).collect();
        }
        Ok(())
    }

    /// Records one pass: `units` parallel points (per element) or
    /// workgroups (a workgroup reduction, split as `split` says: workgroups
    /// per output and points per invocation), on as many dispatches as the
    /// device's grid needs.
    #[allow(clippy::too_many_arguments)]
    fn dispatch(
        &mut self,
        kernel: &Kernel,
        launch: &Launch,
        out: &Bound,
        inputs: &[Bound],
        schedule: Schedule,
        units: u64,
        split: Option<(u32, u32)>,
    ) -> Result<(), WgpuError> {
        self.check_params_size(kernel, &ParamLayout::scheduled(kernel, schedule))?;
        let key = self.cached_pipeline(kernel, launch, schedule)?;
        let params = self.pipelines[&key].params;
        let mut words =
            params
                .pack(launch, units)
                .map_err(|(what, value)| WgpuError::IndexRange {
                    what,
                    value,
                    limit: u32::MAX as u64,
                })?;
        if let (Some(word), Some((per_row, _))) = (params.rows_word(), split) {
            words[word] = per_row;
        }
        let units_per_group = match (params.reduction_words(), split) {
            (Some((groups_word, chunk_word)), Some((groups, chunk))) => {
                words[groups_word] = groups;
                words[chunk_word] = chunk;
                1
            }
            _ if matches!(params.schedule, Schedule::Tiled(_)) => 1,
            _ => WORKGROUP_SIZE as u64,
        };
        let max_groups = self
            .options
            .max_workgroups_per_dimension
            .unwrap_or(u32::MAX)
            .min(self.limits.max_compute_workgroups_per_dimension)
            .max(1) as u64;
        let groups_needed = units.div_ceil(units_per_group);
        // One dispatch covers at most max_groups^2 workgroups on a 2-D
        // grid; larger launches are split, each part told its first point
        // (workgroup).
        let mut done_groups = 0u64;
        while done_groups < groups_needed {
            let groups = (groups_needed - done_groups).min(max_groups.saturating_mul(max_groups));
            let (x, y) = if groups <= max_groups {
                (groups, 1)
            } else {
                (max_groups, groups.div_ceil(max_groups))
            };
            words[params.base()] = (done_groups * units_per_group) as u32;
            let offset = self.stage_params(&words)?;
            let pipeline = &self.pipelines[&key];
            let bind_key: Vec<u64> = [pipeline.index, out.id]
                .into_iter()
                .chain(inputs.iter().map(|b| b.id))
                .collect();
            let recording = &mut self.recording;
            if recording.bind_groups.contains_key(&bind_key) {
                self.stats.bind_group_reuses += 1;
            } else {
                let mut entries = vec![
                    wgpu::BindGroupEntry {
                        binding: 0,
                        resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                            buffer: &self.arena.buffer,
                            offset: 0,
                            size: NonZeroU64::new(params.bytes() as u64),
                        }),
                    },
                    wgpu::BindGroupEntry {
                        binding: 1,
                        resource: out.buffer.as_entire_binding(),
                    },
                ];
                for (o, b) in inputs.iter().enumerate() {
                    entries.push(wgpu::BindGroupEntry {
                        binding: 2 + o as u32,
                        resource: b.buffer.as_entire_binding(),
                    });
                }
                let bind_group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: None,
                    layout: &pipeline.bind_layout,
                    entries: &entries,
                });
                recording.bind_groups.insert(bind_key.clone(), bind_group);
            }
            let bind_group = recording.bind_groups[&bind_key].clone();
            let pass = recording.pass(&self.device);
            pass.set_pipeline(&pipeline.pipeline);
            pass.set_bind_group(0, &bind_group, &[offset as u32]);
            pass.dispatch_workgroups(x as u32, y as u32, 1);
            self.stats.dispatches += 1;
            self.stats.two_dimensional_dispatches += u64::from(y > 1);
            recording.dispatches += 1;
            done_groups += x * y;
            if recording.dispatches >= self.options.max_pending_dispatches {
                self.flush()?;
            }
        }
        Ok(())
    }

    /// Reserves room for one parameter block; submits first if the arena
    /// is full. Returns its byte offset.
    fn stage_params(&mut self, words: &[u32]) -> Result<u64, WgpuError> {
        let bytes: &[u8] = bytemuck::cast_slice(words);
        let start = self.arena.staged.len().next_multiple_of(self.arena.align);
        if start + bytes.len() > ARENA_BYTES {
            self.flush()?;
            return self.stage_params(words);
        }
        self.arena.staged.resize(start, 0);
        self.arena.staged.extend_from_slice(bytes);
        Ok(start as u64)
    }
}

/// The largest launch the shaders index: at most 2^31 points, so that
/// `base + invocation` never wraps in 32 bits.
const MAX_POINTS: u128 = 1 << 31;

impl Backend for WgpuBackend {
    type Buffer = WgpuBuffer;
    type Error = WgpuError;

    fn name(&self) -> String {
        format!("wgpu: {}", self.adapter_name())
    }

    fn len(&self, buffer: &WgpuBuffer) -> u64 {
        buffer.len
    }

    /// A call step of `shape-call` ([`shape_call::KernelStep`], a graph's
    /// call operation) runs with its WGSL function inlined into a
    /// generated kernel ([`WgpuBackend::run_call`]); any other call step
    /// runs on the host, as the trait's default does.
    #[cfg(feature = "call")]
    fn run_call_step(
        &mut self,
        call: &dyn shape_core::CallStep,
        result: &mut WgpuBuffer,
        operands: &[&WgpuBuffer],
    ) -> Result<(), shape_core::CallFailure<WgpuError>> {
        if let Some(step) = call.as_any().downcast_ref::<shape_call::KernelStep>() {
            let mut buffers: Vec<&WgpuBuffer> = operands.to_vec();
            buffers.push(&*result);
            return self
                .run_call(step.kernel(), &buffers)
                .map_err(shape_core::CallFailure::Backend);
        }
        shape_core::backend::run_call_on_host(self, call, result, operands)
    }

    fn alloc(&mut self, len: usize) -> Result<WgpuBuffer, WgpuError> {
        // wgpu zero-fills new buffers.
        let buffer = self.new_buffer(len, false)?;
        self.check(|| "allocating a buffer".to_string())?;
        Ok(WgpuBuffer {
            buffer,
            len: len as u64,
            owner: self.id,
            id: NEXT_BUFFER_ID.fetch_add(1, Ordering::Relaxed),
        })
    }

    fn runs_row_tables(&self) -> bool {
        true
    }

    fn upload(&mut self, data: &[f32]) -> Result<WgpuBuffer, WgpuError> {
        self.upload_with(data.len(), |mut bytes| {
            bytes.copy_from_slice(bytemuck::cast_slice(data))
        })
    }

    fn download(&mut self, buffer: &WgpuBuffer) -> Result<Vec<f32>, WgpuError> {
        if buffer.owner != self.id {
            return Err(WgpuError::ForeignBuffer);
        }
        if buffer.len == 0 {
            return Ok(Vec::new());
        }
        let bytes = buffer.len * 4;
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: bytes,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.recording.encoder(&self.device).copy_buffer_to_buffer(
            &buffer.buffer,
            0,
            &staging,
            0,
            bytes,
        );
        self.flush()?;
        let (sender, receiver) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = sender.send(r);
        });
        self.wait()?;
        let readback = |reason: String| WgpuError::Readback {
            adapter: self.adapter_name(),
            reason,
        };
        match receiver.try_recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(readback(e.to_string())),
            Err(_) => return Err(readback("the mapping never completed".to_string())),
        }
        let values = {
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| readback(e.to_string()))?;
            bytemuck::pod_collect_to_vec::<u8, f32>(&view)
        };
        staging.unmap();
        Ok(values)
    }

    fn execute(
        &mut self,
        kernel: &Kernel,
        launch: &Launch,
        result: &mut WgpuBuffer,
        operands: &[&WgpuBuffer],
    ) -> Result<(), WgpuError> {
        self.validate(kernel, launch, result, operands)?;
        if let Some(rows) = &launch.rows {
            return self.execute_rows(kernel, launch, rows, result, operands);
        }
        if launch.sizes.contains(&0) {
            // Nothing to write, or each element's reduction of no values.
            return match launch.empty_reduction(kernel)? {
                Some(fill) => {
                    let inputs: Vec<&WgpuBuffer> =
                        fill.operands.iter().map(|&o| operands[o]).collect();
                    self.execute(&fill.kernel, &fill.launch, result, &inputs)
                }
                None => Ok(()),
            };
        }
        let (points, _) = reduction::point_counts(kernel, launch);
        if points > MAX_POINTS {
            return Err(WgpuError::IndexRange {
                what: "parallel point count",
                value: points.min(u64::MAX as u128) as u64,
                limit: MAX_POINTS as u64,
            });
        }
        let inputs = operands.iter().map(|b| b.bound()).collect();
        self.run_passes(kernel, launch, result.bound(), inputs, points as u64)?;
        self.check(|| format!("running the kernel `{kernel}`"))
    }
}
