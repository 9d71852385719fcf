//! Opening the wgpu backend in tests.
//!
//! Without an adapter a GPU test is skipped (it says so on stderr and
//! passes), unless `SHAPE_REQUIRE_GPU=1`: then it fails, which is what CI
//! sets, so that a CI machine whose GPU set-up broke cannot pass silently.

use std::sync::{Mutex, OnceLock};

use backend_wgpu::{WgpuBackend, WgpuOptions};

/// Whether GPU tests must fail, rather than skip, without an adapter.
pub fn gpu_required() -> bool {
    std::env::var("SHAPE_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

/// Handles a failure to open an adapter: panics when GPUs are required,
/// else reports the skip.
fn skip_or_fail(test: &str, error: &dyn std::fmt::Display) {
    if gpu_required() {
        panic!("{test}: SHAPE_REQUIRE_GPU=1 but the wgpu backend could not start: {error}");
    }
    eprintln!("{test}: skipped, no GPU adapter ({error}); set SHAPE_REQUIRE_GPU=1 to fail instead");
}

/// A fresh wgpu backend with `options`, or `None` when the test should be
/// skipped.
pub fn wgpu_with(test: &str, options: WgpuOptions) -> Option<WgpuBackend> {
    match WgpuBackend::with_options(options) {
        Ok(gpu) => Some(gpu),
        Err(e) => {
            skip_or_fail(test, &e);
            None
        }
    }
}

/// A fresh wgpu backend on the default adapter, or `None` when the test
/// should be skipped.
pub fn wgpu_or_skip(test: &str) -> Option<WgpuBackend> {
    wgpu_with(test, WgpuOptions::default())
}

/// A wgpu backend opened on first use with the options a function gives,
/// then shared by every caller in the process (opening a device per
/// proptest case would dominate the run time). Declare one as a `static`
/// per set of options:
///
/// ```
/// use backend_wgpu::{LoopBudget, WgpuOptions};
/// use shape_tests::gpu::SharedWgpu;
///
/// fn split_everything() -> WgpuOptions {
///     WgpuOptions {
///         loop_budget: LoopBudget::new(1).unwrap(),
///         workgroup_reduction_threshold: 1,
///         ..WgpuOptions::default()
///     }
/// }
/// static SPLIT: SharedWgpu = SharedWgpu::new(split_everything);
///
/// let name = SPLIT.with("doc example", |gpu| gpu.adapter_info().name.clone());
/// // `None` when the test is skipped: no adapter, and SHAPE_REQUIRE_GPU unset.
/// # let _ = name;
/// ```
pub struct SharedWgpu {
    options: fn() -> WgpuOptions,
    backend: OnceLock<Result<Mutex<WgpuBackend>, String>>,
}

impl SharedWgpu {
    /// A backend to be opened with `options()` on first use.
    pub const fn new(options: fn() -> WgpuOptions) -> SharedWgpu {
        SharedWgpu {
            options,
            backend: OnceLock::new(),
        }
    }

    /// Runs `f` on the shared backend, or returns `None` when the test
    /// should be skipped.
    pub fn with<R>(&self, test: &str, f: impl FnOnce(&mut WgpuBackend) -> R) -> Option<R> {
        let shared = self.backend.get_or_init(|| {
            WgpuBackend::with_options((self.options)())
                .map(Mutex::new)
                .map_err(|e| e.to_string())
        });
        match shared {
            Ok(gpu) => {
                let mut gpu = gpu.lock().unwrap_or_else(|p| p.into_inner());
                Some(f(&mut gpu))
            }
            Err(e) => {
                skip_or_fail(test, e);
                None
            }
        }
    }
}

/// Runs `f` on one wgpu backend with the default options, shared by every
/// caller in the process, or returns `None` when the test should be
/// skipped.
pub fn with_shared_wgpu<R>(test: &str, f: impl FnOnce(&mut WgpuBackend) -> R) -> Option<R> {
    static SHARED: SharedWgpu = SharedWgpu::new(WgpuOptions::default);
    SHARED.with(test, f)
}
