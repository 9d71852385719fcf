//! Vectorized calls of WGSL functions on wgpu, checked against Rust
//! closures run by the reference executor.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use shape_call::{Arg, CallArgs, CallKernel, Function};
use shape_tests::calls::{assert_call_agrees, broadcast_pairs, call_data, call_kernel};
use shape_tests::gpu::{wgpu_or_skip, with_shared_wgpu};

const DOT: &str = "fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }";

fn kernel(f: &Function, args: &CallArgs) -> CallKernel {
    call_kernel(f, args)
}

fn dot(v: &mut [Vec<f32>]) {
    v[2][0] = v[0][0] * v[1][0] + v[0][1] * v[1][1] + v[0][2] * v[1][2];
}

#[test]
fn other_sizes_reuse_the_pipeline() {
    let Some(mut gpu) = wgpu_or_skip("other_sizes_reuse_the_pipeline") else {
        return;
    };
    let f = Function::parse(DOT).unwrap();
    let args = |n: u64, m: u64| {
        CallArgs::new()
            .arg(Arg::tensor(&[n, 3]))
            .arg(Arg::tensor(&[m, n, 3]))
    };
    let bound = f.bind(&args(2, 2)).unwrap();
    let before = gpu.cache_stats();
    for (n, m) in [(2, 2), (64, 3), (5, 1000)] {
        let k = bound.kernel(&bound.call(&args(n, m)).unwrap()).unwrap();
        assert_call_agrees(&mut gpu, &k, call_data(&k, n), &mut dot);
    }
    let after = gpu.cache_stats();
    assert_eq!(
        after.call_compiles - before.call_compiles,
        1,
        "one compile for three sizes"
    );
    assert_eq!(after.call_hits - before.call_hits, 2);
}

#[test]
fn calls_wgpu_cannot_run_are_refused() {
    let Some(mut gpu) = wgpu_or_skip("calls_wgpu_cannot_run_are_refused") else {
        return;
    };
    // A Slang declaration has no WGSL body to inline.
    let f = Function::parse("float dot(float3 a, float3 b)").unwrap();
    let args = CallArgs::new()
        .arg(Arg::tensor(&[4, 3]))
        .arg(Arg::tensor(&[4, 3]));
    let k = kernel(&f, &args);
    let data = k.buffers(call_data(&k, 1)).unwrap();
    let e = gpu.run_call_on_host(&k, data).unwrap_err();
    assert!(
        e.to_string()
            .contains("has neither WGSL source nor a WGSL body"),
        "{e}"
    );
    // Accessors only read; textures are resolved, not run.
    for (sig, arg) in [
        ("void fill(out float[] data)", "tensor(4,8)"),
        ("float4 sample(Texture2D<float4> t)", "tensor(4,8,4)"),
    ] {
        let f = Function::new(
            shape_call::Signature::parse(sig)
                .unwrap()
                .with_wgsl_body("{ }"),
        );
        let args = CallArgs::new().arg(Arg::parse(arg, &f.scope()).unwrap());
        let k = kernel(&f, &args);
        let data = k.buffers(call_data(&k, 1)).unwrap();
        let e = gpu.run_call_on_host(&k, data).unwrap_err();
        assert_eq!(e.kind(), "unsupported_call", "{sig}: {e}");
    }
    // Buffers of the wrong length.
    let f = Function::parse(DOT).unwrap();
    let k = kernel(&f, &args);
    let e = gpu
        .run_call_on_host(&k, vec![vec![0.0; 12], vec![0.0; 11], vec![0.0; 4]])
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("its buffer holds 11 elements, but its shape needs 12"),
        "{e}"
    );
    // An empty call shape runs nothing.
    let args = CallArgs::new()
        .arg(Arg::tensor(&[0, 3]))
        .arg(Arg::tensor(&[3]));
    let k = kernel(&f, &args);
    let out = gpu
        .run_call_on_host(&k, k.buffers(call_data(&k, 1)).unwrap())
        .unwrap();
    assert!(out[2].is_empty());
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 24,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../proptest-regressions/gpu_calls.txt"))),
        ..ProptestConfig::default()
    })]

    /// Random call shapes: the wgpu backend agrees with the reference.
    #[test]
    fn random_call_shapes_agree((a, b) in broadcast_pairs(), seed in any::<u64>()) {
        let f = Function::parse("fn fma3(a: f32, b: vec2<f32>, c: ptr<function, f32>) -> vec2<f32> { *c = a * 2.0; return b * a + *c; }").unwrap();
        let mut b2 = b.clone();
        b2.push(2);
        let args = CallArgs::new().arg(Arg::tensor(&a)).arg(Arg::tensor(&b2)).arg(Arg::output());
        let k = kernel(&f, &args);
        with_shared_wgpu("random_call_shapes_agree", |gpu| {
            assert_call_agrees(gpu, &k, call_data(&k, seed), &mut |v: &mut [Vec<f32>]| {
                let a = v[0][0];
                v[2][0] = a * 2.0;
                let c = v[2][0];
                v[3][0] = v[1][0] * a + c;
                v[3][1] = v[1][1] * a + c;
            });
        });
    }
}

/// A call of host data by argument name runs on wgpu as on the CPU
/// reference, and gives back the result by name with its dims.
#[test]
fn a_call_by_argument_name_runs_on_both() {
    use shape_call::{HostArg, HostArgs};
    let f = Function::parse(DOT).unwrap();
    let a: Vec<f32> = (0..12).map(|v| v as f32 * 0.5 - 2.0).collect();
    let args = HostArgs::new()
        .with("a", HostArg::new(vec![4, 3], a.clone()))
        .with("b", HostArg::new(vec![3], vec![1.0, -2.0, 0.25]));
    let cpu = f.host_call(&args).unwrap().run_cpu(&mut dot).unwrap();
    let result = cpu.result().unwrap();
    assert_eq!(result.dims(), &[4]);
    let expected: Vec<f32> = (0..4)
        .map(|r| a[3 * r] - 2.0 * a[3 * r + 1] + 0.25 * a[3 * r + 2])
        .collect();
    assert_eq!(result.values(), expected.as_slice());
    let Some(mut gpu) = wgpu_or_skip("a_call_by_argument_name_runs_on_both") else {
        return;
    };
    let on_gpu = gpu.run_host_call(f.host_call(&args).unwrap()).unwrap();
    let r = on_gpu.result().unwrap();
    assert_eq!(r.dims(), &[4]);
    for (g, c) in r.values().iter().zip(result.values()) {
        assert!((g - c).abs() <= 1e-5, "{g} on the GPU, {c} on the CPU");
    }
}
