//! The backend conformance suite on every backend of the workspace, through
//! the macro a third-party backend would call.

use backend_cpu::CpuBackend;
use shape_tests::differential::Tolerance;

shape_tests::backend_conformance!(
    cpu_reference,
    || Some(CpuBackend::reference()),
    Tolerance::EXACT
);
shape_tests::backend_conformance!(
    cpu_coalesced,
    || Some(CpuBackend::coalesced()),
    Tolerance::EXACT
);
shape_tests::backend_conformance!(
    wgpu,
    || shape_tests::gpu::wgpu_or_skip("conformance"),
    Tolerance::GPU
);

/// Vectorized calls of WGSL functions on wgpu, against Rust closures.
#[test]
fn wgpu_vectorized_calls() {
    if let Some(mut gpu) = shape_tests::gpu::wgpu_or_skip("wgpu_vectorized_calls") {
        shape_tests::conformance::vectorized_calls(&mut gpu);
    }
}

/// The same calls on the CPU interpreter of WGSL, against the same
/// closures: it needs no adapter, so this runs everywhere.
#[test]
fn interpreter_vectorized_calls() {
    shape_tests::conformance::vectorized_calls(&mut shape_tests::calls::Interpreted);
}
