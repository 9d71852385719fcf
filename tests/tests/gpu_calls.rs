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

/// slangpy's tensor parameter types on wgpu, against the reference: a
/// read-only `Tensor` read through `t_load`/`t_size`, a `RWTensor` per
/// call index summed in place through `t_store`, and one `RWNDBuffer` of
/// `float2` that every call index shares, scattered into (not a race:
/// the writes are the function's own, here at distinct elements).
#[test]
fn tensor_parameters_read_and_write_on_both() {
    let Some(mut gpu) = wgpu_or_skip("tensor_parameters_read_and_write_on_both") else {
        return;
    };
    let parse = |f: &Function, text: &str| Arg::parse(text, &f.scope()).unwrap();

    let pick = Function::new(
        shape_call::Signature::parse("float pick(int i, Tensor<float,3> t)")
            .unwrap()
            .with_wgsl_body("{ return t_load(u32(i), 1u, 2u) * f32(t_size(2u)); }"),
    );
    for t in ["tensor(5,2,3,4)", "tensor(2,3,4)"] {
        let args = CallArgs::new()
            .arg(parse(&pick, "inttensor(5)"))
            .arg(parse(&pick, t));
        let k = kernel(&pick, &args);
        assert_eq!(k.call_shape, vec![5]);
        let mut data = call_data(&k, 11);
        data[0] = vec![0.0, 1.0, 1.0, 0.0, 1.0];
        assert_call_agrees(&mut gpu, &k, data, &mut |v: &mut [Vec<f32>]| {
            let i = v[0][0] as usize;
            v[2][0] = v[1][(i * 3 + 1) * 4 + 2] * 4.0;
        });
    }

    let running = Function::new(
        shape_call::Signature::parse("float running(RWTensor<float,1> t)")
            .unwrap()
            .with_wgsl_body(
                "{ var s = 0.0; for (var k = 0u; k < t_size(0u); k++) { s += t_load(k); t_store(k, s); } return s; }",
            ),
    );
    let args = CallArgs::new().arg(Arg::tensor(&[6, 5]));
    let k = kernel(&running, &args);
    assert_eq!(k.call_shape, vec![6]);
    assert!(k.leaves[0].writes());
    assert_call_agrees(&mut gpu, &k, call_data(&k, 12), &mut |v: &mut [Vec<
        f32,
    >]| {
        let mut s = 0.0;
        for x in v[0].iter_mut() {
            s += *x;
            *x = s;
        }
        v[1][0] = s;
    });

    let scatter = Function::new(
        shape_call::Signature::parse("void scatter(int i, float2 x, RWNDBuffer<float2,1> t)")
            .unwrap()
            .with_wgsl_body("{ t_store(u32(i), t_load(u32(i)) + x); }"),
    );
    let args = CallArgs::new()
        .arg(parse(&scatter, "inttensor(8)"))
        .arg(parse(&scatter, "tensor(8,2)"))
        .arg(parse(&scatter, "tensor(8,2)"));
    let k = kernel(&scatter, &args);
    assert_eq!(k.call_shape, vec![8]);
    assert_eq!(
        k.leaves[2].call_strides,
        vec![0],
        "one tensor for every call index"
    );
    let mut data = call_data(&k, 13);
    data[0] = vec![3.0, 7.0, 0.0, 5.0, 1.0, 6.0, 2.0, 4.0];
    let (x, t) = (data[1].clone(), data[2].clone());
    let on_gpu = gpu
        .run_call_on_host(&k, k.buffers(data.clone()).unwrap())
        .unwrap();
    for (c, &i) in data[0].iter().enumerate() {
        let i = i as usize;
        for j in 0..2 {
            assert_eq!(
                on_gpu[2][2 * i + j],
                t[2 * i + j] + x[2 * c + j],
                "t[{i}][{j}]"
            );
        }
    }
    assert_call_agrees(&mut gpu, &k, data, &mut |v: &mut [Vec<f32>]| {
        let i = v[0][0] as usize;
        v[2][2 * i] += v[1][0];
        v[2][2 * i + 1] += v[1][1];
    });
}

#[test]
fn generators_run_on_both() {
    let Some(mut gpu) = wgpu_or_skip("generators_run_on_both") else {
        return;
    };
    let parse = |f: &Function, text: &str| Arg::parse(text, &f.scope()).unwrap();
    // call_id (a vector: x is the last call dim), a strided grid read as
    // an array, thread_id and two random floats, against the reference.
    let f = Function::new(
        shape_call::Signature::parse(
            "float f(int2 id, int[2] g, uint3 t, float2 u, float x)",
        )
        .unwrap()
        .with_wgsl_body(
            "{ return f32(id.x) + 10.0 * f32(id.y) + 100.0 * f32(g[0]) + 1000.0 * f32(g[1]) + 0.5 * f32(t.x + t.y + t.z) + u.x + u.y + x; }",
        ),
    );
    let args = CallArgs::new()
        .arg(parse(&f, "call_id"))
        .arg(parse(&f, "grid(shape=(3,-1), stride=(2,-1), offset=(1,7))"))
        .arg(parse(&f, "thread_id"))
        .arg(parse(&f, "rand_float(min=-2.0, max=2.0, seed=9, warmup=2)"))
        .arg(parse(&f, "tensor(3,5)"));
    let k = kernel(&f, &args);
    assert_eq!(k.call_shape, vec![3, 5]);
    let reference = |v: &mut [Vec<f32>]| {
        let (id, g, t, u, x) = (&v[0], &v[1], &v[2], &v[3], v[4][0]);
        v[5][0] = id[0]
            + 10.0 * id[1]
            + 100.0 * g[0]
            + 1000.0 * g[1]
            + 0.5 * (t[0] + t[1] + t[2])
            + u[0]
            + u[1]
            + x;
    };
    let data = call_data(&k, 21);
    assert_call_agrees(&mut gpu, &k, data.clone(), &mut reference.clone());
    // The values themselves, from the rules written out: call (2, 4) is
    // row-major index 14.
    let mut cpu = k.buffers(data).unwrap();
    let mut seen = Vec::new();
    k.run_cpu(&mut cpu, &mut |v: &mut [Vec<f32>]| {
        seen.push((v[0].clone(), v[1].clone(), v[2].clone(), v[3].clone()));
        reference(v);
    })
    .unwrap();
    let (id, g, t, u) = &seen[14];
    assert_eq!(id, &vec![4.0, 2.0]);
    assert_eq!(g, &vec![1.0 + 2.0 * 2.0, 7.0 - 4.0]);
    assert_eq!(t, &vec![14.0, 0.0, 0.0]);
    let seed = shape_call::HashSeed {
        seed: 9,
        warmup: 2,
        hash_seed: true,
    };
    let h = seed.hashes(14, 2);
    assert_eq!(
        u,
        &vec![
            shape_call::hash_to_float(h[0], -2.0, 2.0),
            shape_call::hash_to_float(h[1], -2.0, 2.0)
        ]
    );

    // wang_hash's 32 bits, checked inside the kernel against the hashes
    // computed in Rust (a float holds only their low 16 bits exactly).
    let hash = Function::new(
        shape_call::Signature::parse("uint low(uint3 h, float x)")
            .unwrap()
            .with_wgsl_body("{ return (h.x ^ h.y ^ h.z) & 0xFFFFu; }"),
    );
    let args = CallArgs::new()
        .arg(parse(&hash, "wang_hash(seed=5, hash_seed=false)"))
        .arg(parse(&hash, "tensor(40)"));
    let k = kernel(&hash, &args);
    let out = gpu
        .run_call_on_host(&k, k.buffers(call_data(&k, 3)).unwrap())
        .unwrap();
    let seed = shape_call::HashSeed {
        seed: 5,
        warmup: 0,
        hash_seed: false,
    };
    let expected: Vec<f32> = (0..40)
        .map(|i| {
            let h = seed.hashes(i, 3);
            ((h[0] ^ h[1] ^ h[2]) & 0xFFFF) as f32
        })
        .collect();
    assert_eq!(out[2], expected);
}

/// Found by review: integer generators given to `int` (the hash's 32 bits
/// as i32), a grid whose values wrap 32 bits, and a `rand_float` range
/// whose width rounds in f32, agree with the reference bit for bit.
#[test]
fn generators_agree_on_their_edges() {
    let Some(mut gpu) = wgpu_or_skip("generators_agree_on_their_edges") else {
        return;
    };
    let parse = |f: &Function, text: &str| Arg::parse(text, &f.scope()).unwrap();
    let f = Function::new(
        shape_call::Signature::parse("float f(int h, uint2 g, int2 s, float u, float x)")
            .unwrap()
            .with_wgsl_body(
                "{ return f32(h & 0xFFFF) + f32(h >> 16u) * 65536.0 + f32(g.x) + f32(g.y) + f32(s.x) - f32(s.y) + u + x; }",
            ),
    );
    let args = CallArgs::new()
        .arg(parse(&f, "wang_hash(seed=5, hash_seed=false)"))
        .arg(parse(
            &f,
            "grid(shape=(4,-1), stride=(1073741823,-1073741823), offset=(-5,3))",
        ))
        .arg(parse(
            &f,
            "grid(shape=(4,-1), stride=(1073741823,-1073741823), offset=(-5,3))",
        ))
        .arg(parse(&f, "rand_float(min=0.1, max=0.3, seed=11)"))
        .arg(parse(&f, "tensor(4,6)"));
    let k = kernel(&f, &args);
    assert_eq!(k.call_shape, vec![4, 6]);
    assert_call_agrees(&mut gpu, &k, call_data(&k, 31), &mut |v: &mut [Vec<
        f32,
    >]| {
        // The hash arrives as the i32 value of its bits, as an f32.
        let h = v[0][0] as i32;
        v[5][0] =
            ((h & 0xFFFF) as f32 + ((h >> 16) as f32) * 65536.0) + v[1][0] + v[1][1] + v[2][0]
                - v[2][1]
                + v[3][0]
                + v[4][0];
    });
}

/// WGSL's integer division by zero and `i32::MIN / -1`, and bit fields
/// past 32 bits, on the device: naga's GLSL writer leaves them undefined
/// and llvmpipe through GL trapped (`SIGFPE` killed the process); the
/// backend guards them on GL. Held to the interpreter and to WGSL's rules
/// written out here.
#[test]
fn integer_edge_cases_follow_wgsl_on_every_backend() {
    let Some(mut gpu) = wgpu_or_skip("integer_edge_cases_follow_wgsl_on_every_backend") else {
        return;
    };
    let f = Function::parse(
        "fn d(a: i32, b: i32, o: u32) -> vec4<i32> { return vec4<i32>(a / b, a % b, extractBits(a, o, 8u), insertBits(a, 1, o, 30u)); }",
    )
    .unwrap();
    let args = CallArgs::new()
        .arg(Arg::parse("inttensor(5)", &f.scope()).unwrap())
        .arg(Arg::parse("inttensor(5)", &f.scope()).unwrap())
        .arg(Arg::parse("uinttensor(5)", &f.scope()).unwrap());
    let k = kernel(&f, &args);
    let min = i32::MIN as f32;
    let data = vec![
        vec![7.0, -7.0, min, min, 100.0],
        vec![0.0, 0.0, -1.0, 0.0, 7.0],
        vec![0.0, 30.0, 40.0, 28.0, 4.0],
    ];
    assert_call_agrees(&mut gpu, &k, data, &mut |v: &mut [Vec<f32>]| {
        let (a, b, o) = (v[0][0] as i32, v[1][0] as i32, v[2][0] as u32);
        let trapped = b == 0 || (a == i32::MIN && b == -1);
        let (q, r) = if trapped { (a, 0) } else { (a / b, a % b) };
        // WGSL clamps: offset to 32, count to what is left.
        let o = o.min(32);
        let c = 8u32.min(32 - o);
        let extract = if c == 0 {
            0
        } else {
            ((a as u32) << (32 - o - c)) as i32 >> (32 - c)
        };
        let c = 30u32.min(32 - o);
        let mask = if c == 0 {
            0
        } else {
            (u32::MAX >> (32 - c)) << o
        };
        let insert = (((a as u32) & !mask) | ((1u32 << o.min(31)) & mask)) as i32;
        v[3].copy_from_slice(&[q as f32, r as f32, extract as f32, insert as f32]);
    });
}
