//! What the examples share: deterministic data, and running on a GPU
//! through wgpu where an adapter exists, on the CPU otherwise (saying so).
//!
//! The examples themselves are `mlp.rs` and `attention.rs` beside this
//! crate's manifest: `cargo run --example mlp`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use backend_cpu::CpuBackend;
use backend_wgpu::WgpuBackend;
use shape_core::Backend;
use shape_graph::{GraphError, SolvedGraph, TensorId};
use shape_run::{HostTensor, Inputs, RunGraph, RunOptions, RunOutputs};

/// Small deterministic values for a tensor, from its name, id and size.
pub fn values(solved: &SolvedGraph, t: TensorId) -> Result<HostTensor, Box<dyn std::error::Error>> {
    let dims = solved.shape(t)?.memory_dims();
    let n: u64 = dims.iter().product();
    let seed = solved.graph().name(t)?.len() + t.index();
    let values = (0..n as usize)
        .map(|i| (((i * 7 + seed * 3) % 11) as f32 - 5.0) / 10.0)
        .collect();
    Ok(HostTensor::new(dims, values)?)
}

/// Deterministic values for each of `leaves`.
pub fn inputs(
    solved: &SolvedGraph,
    leaves: &[TensorId],
) -> Result<Inputs, Box<dyn std::error::Error>> {
    let mut inputs = Inputs::new();
    for &t in leaves {
        inputs.insert(t, values(solved, t)?);
    }
    Ok(inputs)
}

/// Runs on the best wgpu adapter, or, where there is none, on the CPU
/// backend with a line saying why; returns the backend's name and the
/// outputs.
pub fn run_on_gpu_or_cpu(
    solved: &SolvedGraph,
    inputs: Inputs,
    outputs: &[TensorId],
) -> Result<(String, RunOutputs), Box<dyn std::error::Error>> {
    let options = RunOptions::default();
    match WgpuBackend::new() {
        Ok(mut gpu) => {
            let out = solved.run(&mut gpu, inputs, outputs, &options)?;
            Ok((gpu.name(), out))
        }
        Err(e) => {
            println!("\nNo GPU adapter, so this runs on the CPU backend: {e}");
            let mut cpu = CpuBackend::coalesced();
            let out = solved.run(&mut cpu, inputs, outputs, &options)?;
            Ok((cpu.name(), out))
        }
    }
}

/// A backend kept across runs: wgpu where an adapter exists, the CPU
/// otherwise (so that a pipeline cache lives from one run to the next).
pub enum GpuOrCpu {
    /// The wgpu backend.
    Gpu(Box<WgpuBackend>),
    /// The CPU backend, with why no GPU could be used.
    Cpu(CpuBackend, String),
}

impl GpuOrCpu {
    /// The best wgpu adapter, or the CPU backend with the reason.
    pub fn new() -> GpuOrCpu {
        match WgpuBackend::new() {
            Ok(gpu) => GpuOrCpu::Gpu(Box::new(gpu)),
            Err(e) => GpuOrCpu::Cpu(CpuBackend::coalesced(), e.to_string()),
        }
    }

    /// The backend's name.
    pub fn name(&self) -> String {
        match self {
            GpuOrCpu::Gpu(g) => g.name(),
            GpuOrCpu::Cpu(c, _) => c.name(),
        }
    }

    /// Runs `outputs` of `solved` on this backend.
    pub fn run(
        &mut self,
        solved: &SolvedGraph,
        inputs: Inputs,
        outputs: &[TensorId],
    ) -> Result<RunOutputs, Box<dyn std::error::Error>> {
        let options = RunOptions::default();
        Ok(match self {
            GpuOrCpu::Gpu(g) => solved.run(g.as_mut(), inputs, outputs, &options)?,
            GpuOrCpu::Cpu(c, _) => solved.run(c, inputs, outputs, &options)?,
        })
    }

    /// The pipelines compiled so far (wgpu only: the CPU compiles none).
    pub fn pipelines_compiled(&self) -> Option<u64> {
        match self {
            GpuOrCpu::Gpu(g) => Some(g.cache_stats().misses),
            GpuOrCpu::Cpu(..) => None,
        }
    }
}

impl Default for GpuOrCpu {
    fn default() -> Self {
        GpuOrCpu::new()
    }
}

/// The values of output `t`.
pub fn output(out: &RunOutputs, t: TensorId) -> Result<&[f32], GraphError> {
    out.get(t)
        .map(HostTensor::values)
        .ok_or(GraphError::UnknownTensor(t.index()))
}
