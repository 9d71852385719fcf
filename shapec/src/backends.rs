//! Choosing the backend a command runs on.
//!
//! Everything that runs kernels is written once, generically over
//! [`shape_core::Backend`], as a [`BackendJob`]; [`dispatch`] picks the
//! backend and hands it to the job. The only place that knows about the
//! wgpu backend is [`run_on_wgpu`].

use std::io::Write;

use backend_cpu::CpuBackend;
use clap::ValueEnum;
use shape_core::Backend;

/// The `--backend` choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendChoice {
    /// The CPU backend (its coalesced path).
    Cpu,
    /// The wgpu (GPU) backend; fails when no adapter exists.
    Wgpu,
    /// wgpu on a hardware GPU adapter when one exists, otherwise the CPU
    /// (also where the only adapter is a software one such as llvmpipe,
    /// which is slower than the CPU backend); says which ran and why.
    Auto,
}

/// Work to do on one backend, written once for every backend.
pub trait BackendJob {
    /// What the job returns.
    type Output;
    /// Checks the job, before it runs, against the largest buffer the
    /// backend allocates (`backend` names it for messages); an output
    /// returned here is the job's result, and the job does not run.
    fn check(&mut self, max_buffer_bytes: u64, backend: &str) -> Option<Self::Output> {
        let _ = (max_buffer_bytes, backend);
        None
    }
    /// Runs the job on `backend`.
    fn run<B: Backend>(&mut self, backend: &mut B) -> Self::Output;
}

/// The CPU backend that `--backend cpu` runs: the coalesced path, whose
/// results are bit-identical to the reference path's.
pub fn cpu() -> CpuBackend {
    CpuBackend::coalesced()
}

/// Why the wgpu backend cannot run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WgpuUnavailable {
    /// No adapter (GPU or software driver) was found, or it failed to
    /// open.
    #[error("{0}")]
    NoAdapter(String),
    /// Only a software adapter exists, and a GPU was asked for.
    #[error("the only adapter is the software adapter {0}, slower than the CPU backend (--backend wgpu runs on it)")]
    SoftwareOnly(String),
}

/// Runs `job` on the wgpu backend, on the adapter that the environment
/// selects (`WGPU_BACKEND`, `SHAPE_ADAPTER`; see
/// [`backend_wgpu::AdapterRequest`]). With `hardware_only`, a software
/// adapter is refused.
pub fn run_on_wgpu<J: BackendJob>(
    job: &mut J,
    hardware_only: bool,
) -> Result<J::Output, WgpuUnavailable> {
    let mut gpu = wgpu_backend(hardware_only)?;
    let info = gpu.adapter_info();
    let adapter = format!("the wgpu adapter {}", info.name);
    if let Some(refused) = job.check(gpu.max_buffer_bytes(), &adapter) {
        return Ok(refused);
    }
    Ok(job.run(&mut gpu))
}

/// Opens the wgpu backend on the adapter that the environment selects
/// (as [`run_on_wgpu`] does); with `hardware_only`, a software adapter is
/// refused.
pub fn wgpu_backend(hardware_only: bool) -> Result<backend_wgpu::WgpuBackend, WgpuUnavailable> {
    let gpu =
        backend_wgpu::WgpuBackend::new().map_err(|e| WgpuUnavailable::NoAdapter(e.to_string()))?;
    let info = gpu.adapter_info();
    if hardware_only && info.device_type == backend_wgpu::wgpu::DeviceType::Cpu {
        return Err(WgpuUnavailable::SoftwareOnly(info.name.clone()));
    }
    Ok(gpu)
}

/// The note `--backend auto` writes when it runs on the CPU instead of
/// wgpu.
pub fn auto_note(notes: &mut dyn Write, why: &WgpuUnavailable) {
    let _ = writeln!(notes, "note: --backend auto: {why}; running on the CPU");
}

/// Runs `job` on the CPU backend, after checking it against the CPU
/// backend's buffer limit.
fn run_on_cpu<J: BackendJob>(job: &mut J) -> J::Output {
    match job.check(backend_cpu::DEFAULT_MAX_BUFFER_BYTES, "the CPU backend") {
        Some(refused) => refused,
        None => job.run(&mut cpu()),
    }
}

/// Runs `job` on the chosen backend. With `auto`, a missing wgpu backend
/// is not an error: the job runs on the CPU and `notes` (standard error)
/// says so.
pub fn dispatch<J: BackendJob>(
    choice: BackendChoice,
    job: &mut J,
    notes: &mut dyn Write,
) -> Result<J::Output, WgpuUnavailable> {
    match choice {
        BackendChoice::Cpu => Ok(run_on_cpu(job)),
        BackendChoice::Wgpu => run_on_wgpu(job, false),
        BackendChoice::Auto => match run_on_wgpu(job, true) {
            Ok(out) => Ok(out),
            Err(why) => {
                auto_note(notes, &why);
                Ok(run_on_cpu(job))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Name;
    impl BackendJob for Name {
        type Output = String;
        fn run<B: Backend>(&mut self, backend: &mut B) -> String {
            backend.name()
        }
    }

    #[test]
    fn cpu_runs_and_auto_runs_where_an_adapter_exists_or_says_why_not() {
        let mut notes = Vec::new();
        assert_eq!(
            dispatch(BackendChoice::Cpu, &mut Name, &mut notes).unwrap(),
            "cpu (coalesced)"
        );
        assert!(notes.is_empty());
        let auto = dispatch(BackendChoice::Auto, &mut Name, &mut notes).unwrap();
        let notes = String::from_utf8(notes).unwrap();
        let wgpu = dispatch(BackendChoice::Wgpu, &mut Name, &mut Vec::new());
        let hardware = run_on_wgpu(&mut Name, true);
        match (wgpu, hardware) {
            (Ok(name), Ok(_)) => {
                assert!(name.starts_with("wgpu: "), "{name}");
                assert_eq!(auto, name);
                assert!(notes.is_empty(), "{notes}");
            }
            (Ok(name), Err(why)) => {
                // A software adapter: wgpu runs on it when asked, auto does not.
                assert!(name.starts_with("wgpu: "), "{name}");
                assert!(matches!(why, WgpuUnavailable::SoftwareOnly(_)), "{why}");
                assert_eq!(auto, "cpu (coalesced)");
                assert_eq!(
                    notes,
                    format!("note: --backend auto: {why}; running on the CPU\n")
                );
            }
            (Err(WgpuUnavailable::NoAdapter(why)), _) => {
                assert_eq!(auto, "cpu (coalesced)");
                assert_eq!(
                    notes,
                    format!("note: --backend auto: {why}; running on the CPU\n")
                );
            }
            (Err(other), _) => panic!("--backend wgpu refused a software adapter: {other}"),
        }
    }
}
