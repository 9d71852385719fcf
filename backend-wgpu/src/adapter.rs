//! Choosing a GPU adapter.
//!
//! Every adapter wgpu can see on the allowed backends is listed, those
//! whose name does not contain the requested name are dropped, and the
//! rest are ranked: discrete GPUs first, then integrated, virtual, and
//! software (CPU) adapters such as Mesa's llvmpipe, which are accepted so
//! that machines without a GPU still run real compute pipelines.

use std::sync::Mutex;

use crate::error::WgpuError;

/// The wgpu instance for a set of backends. Without GL, every backend
/// opened in the process shares one, created on first use: with an
/// instance per device, test binaries opening devices from 16 threads
/// stalled on an H200 (NVIDIA's Vulkan driver) in 4 of 4 runs, with a
/// shared one in 1 of 3 (docs/wgpu-backend.md, "On NVIDIA hardware").
/// With GL each backend gets its own: wgpu's GL backend makes one EGL
/// context current per instance, and devices of one instance used from
/// several threads at once failed with `BadAccess` (measured with
/// llvmpipe's EGL, `WGPU_BACKEND=gl`).
pub fn instance_for(backends: wgpu::Backends) -> wgpu::Instance {
    let fresh = || {
        wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends,
            ..wgpu::InstanceDescriptor::new_without_display_handle_from_env()
        })
    };
    if backends.contains(wgpu::Backends::GL) {
        return fresh();
    }
    static INSTANCES: Mutex<Vec<(wgpu::Backends, wgpu::Instance)>> = Mutex::new(Vec::new());
    let mut instances = INSTANCES.lock().unwrap_or_else(|p| p.into_inner());
    if let Some((_, instance)) = instances.iter().find(|(b, _)| *b == backends) {
        return instance.clone();
    }
    let instance = fresh();
    instances.push((backends, instance.clone()));
    instance
}

/// How to pick an adapter. The defaults read the environment.
#[derive(Clone, Debug, Default)]
pub struct AdapterRequest {
    /// The backends to look at; `None` reads `WGPU_BACKEND` (for example
    /// `vulkan`, `gl`, `vulkan,gl`) and falls back to every backend.
    pub backends: Option<wgpu::Backends>,
    /// A case-insensitive part of the adapter's name; `None` reads
    /// `SHAPE_ADAPTER`, then `WGPU_ADAPTER_NAME`, and accepts any adapter
    /// when neither is set.
    pub name: Option<String>,
}

impl AdapterRequest {
    /// The backends this request allows.
    pub fn backends(&self) -> wgpu::Backends {
        self.backends
            .or_else(wgpu::Backends::from_env)
            .unwrap_or(wgpu::Backends::all())
    }

    /// The adapter name this request asks for, lowercased.
    pub fn name(&self) -> Option<String> {
        self.name
            .clone()
            .or_else(|| std::env::var("SHAPE_ADAPTER").ok())
            .or_else(|| std::env::var("WGPU_ADAPTER_NAME").ok())
            .filter(|n| !n.is_empty())
            .map(|n| n.to_lowercase())
    }
}

/// A short description of an adapter: its name, backend and kind.
pub fn describe(info: &wgpu::AdapterInfo) -> String {
    format!("{} ({:?}, {:?})", info.name, info.backend, info.device_type)
}

fn rank(kind: wgpu::DeviceType) -> u8 {
    match kind {
        wgpu::DeviceType::DiscreteGpu => 0,
        wgpu::DeviceType::IntegratedGpu => 1,
        wgpu::DeviceType::VirtualGpu => 2,
        wgpu::DeviceType::Cpu => 3,
        wgpu::DeviceType::Other => 4,
    }
}

/// Picks the best adapter that `request` allows.
pub fn select(
    instance: &wgpu::Instance,
    request: &AdapterRequest,
) -> Result<wgpu::Adapter, WgpuError> {
    let backends = request.backends();
    if backends.is_empty() {
        let reason = match (&request.backends, std::env::var("WGPU_BACKEND")) {
            (None, Ok(text)) => format!(
                "WGPU_BACKEND={text:?} names no backend (use vulkan, gl, metal or dx12, comma-separated)"
            ),
            _ => "the adapter request allows no backend".to_string(),
        };
        return Err(WgpuError::NoAdapter { reason });
    }
    let wanted = request.name();
    let adapters = pollster::block_on(instance.enumerate_adapters(backends));
    let seen: Vec<String> = adapters.iter().map(|a| describe(&a.get_info())).collect();
    let best = adapters
        .into_iter()
        .filter(|a| {
            wanted
                .as_ref()
                .is_none_or(|w| a.get_info().name.to_lowercase().contains(w))
        })
        // Some GL adapters have no compute shaders at all.
        .filter(|a| {
            a.get_downlevel_capabilities()
                .flags
                .contains(wgpu::DownlevelFlags::COMPUTE_SHADERS)
        })
        // Vulkan before GL for the same device: it has compute without
        // the GL backend's downlevel restrictions.
        .min_by_key(|a| {
            let info = a.get_info();
            (
                rank(info.device_type),
                info.backend != wgpu::Backend::Vulkan,
            )
        });
    best.ok_or_else(|| {
        let reason = match (&wanted, seen.is_empty()) {
            (_, true) => format!("wgpu found no adapter on backends {backends:?}"),
            (Some(w), false) => format!(
                "no adapter's name contains \"{w}\" (set by SHAPE_ADAPTER or WGPU_ADAPTER_NAME); found: {}",
                seen.join("; ")
            ),
            (None, false) => format!("none usable among: {}", seen.join("; ")),
        };
        WgpuError::NoAdapter { reason }
    })
}
