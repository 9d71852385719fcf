//! What the wgpu benchmarks share: opening an adapter and timing two
//! sides in alternation.

use std::time::{Duration, Instant};

use backend_wgpu::{wgpu, WgpuBackend, WgpuOptions};

#[allow(dead_code)] // each benchmark uses what it needs
/// A backend with `options`, or `None` (the benchmark is skipped, and
/// says so) without an adapter.
pub fn open(options: WgpuOptions) -> Option<WgpuBackend> {
    match WgpuBackend::with_options(options) {
        Ok(gpu) => Some(gpu),
        Err(e) => {
            eprintln!("no adapter, wgpu benchmarks skipped: {e}");
            None
        }
    }
}

#[allow(dead_code)] // each benchmark uses what it needs
/// Times `a` and `b` in alternation for `rounds` rounds and prints the
/// medians and the ratio of `a`'s to `b`'s.
pub fn paired(name: &str, rounds: usize, mut a: impl FnMut(), mut b: impl FnMut()) {
    let mut times = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let start = Instant::now();
        a();
        times.0.push(start.elapsed());
        let start = Instant::now();
        b();
        times.1.push(start.elapsed());
    }
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        v[v.len() / 2]
    };
    let (a, b) = (median(&mut times.0), median(&mut times.1));
    eprintln!(
        "{name}: medians of {rounds} alternating rounds {:.2} ms / {:.2} ms = {:.2}",
        a.as_secs_f64() * 1e3,
        b.as_secs_f64() * 1e3,
        a.as_secs_f64() / b.as_secs_f64()
    );
}

/// A hand-written WGSL kernel `source` (entry point `main`), compiled on
/// `gpu`'s device and bound to `uniform` (binding 0, 16 bytes of `u32`)
/// and `buffers` (bindings 1, 2, ...).
#[allow(dead_code)] // each benchmark uses what it needs
pub fn hand_written(
    gpu: &WgpuBackend,
    label: &str,
    source: &str,
    uniform: [u32; 4],
    buffers: &[&wgpu::Buffer],
) -> (wgpu::ComputePipeline, wgpu::BindGroup) {
    let device = gpu.device();
    let module = device.create_shader_module(wgpu::ShaderModuleDescriptor {
        label: Some(label),
        source: wgpu::ShaderSource::Wgsl(source.into()),
    });
    let pipeline = device.create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
        label: None,
        layout: None,
        module: &module,
        entry_point: Some("main"),
        compilation_options: Default::default(),
        cache: None,
    });
    let params = device.create_buffer(&wgpu::BufferDescriptor {
        label: None,
        size: 16,
        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    gpu.queue()
        .write_buffer(&params, 0, bytemuck::cast_slice(&uniform));
    let entries: Vec<wgpu::BindGroupEntry> = std::iter::once(&params)
        .chain(buffers.iter().copied())
        .enumerate()
        .map(|(i, buffer)| wgpu::BindGroupEntry {
            binding: i as u32,
            resource: buffer.as_entire_binding(),
        })
        .collect();
    let bind_group = device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: None,
        layout: &pipeline.get_bind_group_layout(0),
        entries: &entries,
    });
    (pipeline, bind_group)
}
