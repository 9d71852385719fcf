//! Vectorized calls: host time of one call of a bound function with fresh
//! sizes (resolution and kernel strides; the goal is under 20 µs plus
//! device time), the time to bind a function of 10 overloads, and how
//! binding and calling scale with the number of parameters (1,000,
//! 10,000 and 20,000 keyword arguments in reverse order: linear).
//!
//! The `interpreter` group runs a call over 65,536 call indices on the
//! CPU two ways: the WGSL interpreter (`CallKernel::run_interpreted`) and
//! a hand-written Rust closure of the same function (`CallKernel::run_cpu`),
//! for a dot product and a small loop (`powsum`, 16 iterations); the
//! ratio of the two is the interpreter's cost. backend-wgpu's `call`
//! bench runs the same calls on wgpu.
//!
//! `cargo bench -p shape-call --bench call`

use criterion::{criterion_group, criterion_main, Criterion};
use shape_call::{Arg, CallArgs, CallKernel, Function, Signature};

/// Call indices of the `interpreter` group.
const CALLS: u64 = 1 << 16;

/// The dot product of the `interpreter` group.
const DOT3: &str = "fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }";

/// The loop of the `interpreter` group: 1 + x + .. + x^(n-1).
const POWSUM: &str = "fn powsum(x: f32, n: u32) -> f32 { var s = 0.0; var p = 1.0; for (var i = 0u; i < n; i++) { s += p; p *= x; } return s; }";

/// A kernel of `source` over `args`, and its buffers filled with `data`.
fn kernel(source: &str, args: &CallArgs, data: Vec<Vec<f32>>) -> (CallKernel, Vec<Vec<f32>>) {
    let f = Function::parse(source).expect("parses");
    let bound = f.bind(args).expect("binds");
    let kernel = bound
        .kernel(&bound.call(args).expect("resolves"))
        .expect("a kernel");
    let buffers = kernel.buffers(data).expect("buffers");
    (kernel, buffers)
}

fn interpreter(c: &mut Criterion) {
    let mut group = c.benchmark_group("interpreter");
    group.sample_size(10);
    let n = CALLS as usize;
    // dot3: a (65536, 3) tensor against one vec3.
    let a: Vec<f32> = (0..3 * n).map(|i| (i % 17) as f32 * 0.25 - 2.0).collect();
    let args = CallArgs::new()
        .arg(Arg::tensor(&[CALLS, 3]))
        .arg(Arg::tensor(&[3]));
    let (dot, dot_buffers) = kernel(DOT3, &args, vec![a, vec![0.5, -1.0, 2.0]]);
    let mut interpreted = dot_buffers.clone();
    dot.run_interpreted(&mut interpreted).expect("runs");
    let mut closure = dot_buffers.clone();
    let mut dot_closure = |v: &mut [Vec<f32>]| {
        v[2][0] = v[0][0] * v[1][0] + v[0][1] * v[1][1] + v[0][2] * v[1][2];
    };
    dot.run_cpu(&mut closure, &mut dot_closure).expect("runs");
    assert_eq!(
        interpreted[2], closure[2],
        "the closure is the same function"
    );
    group.bench_function("dot3_65536_interpreted", |b| {
        let mut buffers = dot_buffers.clone();
        b.iter(|| dot.run_interpreted(&mut buffers).expect("runs"))
    });
    group.bench_function("dot3_65536_closure", |b| {
        let mut buffers = dot_buffers.clone();
        b.iter(|| dot.run_cpu(&mut buffers, &mut dot_closure).expect("runs"))
    });

    // powsum: a loop of 16 iterations at each call index.
    let x: Vec<f32> = (0..n).map(|i| (i % 13) as f32 * 0.05 - 0.3).collect();
    let args = CallArgs::new()
        .arg(Arg::tensor(&[CALLS]))
        .arg(Arg::Number(shape_call::Number::Int(16)));
    let (powsum, pow_buffers) = kernel(POWSUM, &args, vec![x, vec![16.0]]);
    let mut pow_closure = |v: &mut [Vec<f32>]| {
        let (x, n) = (v[0][0], v[1][0] as u32);
        let (mut s, mut p) = (0.0f32, 1.0f32);
        for _ in 0..n {
            s += p;
            p *= x;
        }
        v[2][0] = s;
    };
    let mut interpreted = pow_buffers.clone();
    powsum.run_interpreted(&mut interpreted).expect("runs");
    let mut closure = pow_buffers.clone();
    powsum
        .run_cpu(&mut closure, &mut pow_closure)
        .expect("runs");
    assert_eq!(
        interpreted[2], closure[2],
        "the closure is the same function"
    );
    group.bench_function("powsum16_65536_interpreted", |b| {
        let mut buffers = pow_buffers.clone();
        b.iter(|| powsum.run_interpreted(&mut buffers).expect("runs"))
    });
    group.bench_function("powsum16_65536_closure", |b| {
        let mut buffers = pow_buffers.clone();
        b.iter(|| {
            powsum
                .run_cpu(&mut buffers, &mut pow_closure)
                .expect("runs")
        })
    });
    group.finish();
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("call");
    let dot = Function::parse("void dot(float3 a, float3 b, out float r)").expect("dot");
    let args = |n: u64, m: u64| {
        CallArgs::new()
            .arg(Arg::tensor(&[n, 3]))
            .arg(Arg::tensor(&[m, n, 3]))
            .arg(Arg::output())
    };
    let bound = dot.bind(&args(2, 2)).expect("binds");
    let sizes: Vec<CallArgs> = (1..=64).map(|i| args(i * 3, 65 - i)).collect();
    let mut next = 0;
    // Each iteration resolves a call with other sizes and computes its
    // kernel's strides: all the host work of a call before dispatch.
    group.bench_function("call_with_fresh_sizes", |b| {
        b.iter(|| {
            let a = &sizes[next % sizes.len()];
            next += 1;
            let resolved = bound.call(a).expect("resolves");
            bound.kernel(&resolved).expect("a kernel")
        })
    });

    // Ten overloads that differ in element types; one takes the arguments.
    let kinds = ["float3", "int3", "uint3"];
    let mut sigs: Vec<String> = kinds
        .iter()
        .flat_map(|a| kinds.iter().map(move |b| format!("float f({a} a, {b} b)")))
        .collect();
    sigs.push("float f(bool3 a, bool3 b)".into());
    let mut ten = Function::parse(&sigs[0]).expect("f");
    for sig in &sigs[1..] {
        ten = ten.overload(Signature::parse(sig).expect("an overload"));
    }
    let scope = Default::default();
    let one_fits = CallArgs::new()
        .arg(Arg::parse("tensor<int3>(100)", &scope).expect("a tensor"))
        .arg(Arg::parse("uint3", &scope).expect("a value"));
    assert_eq!(
        ten.bind(&one_fits)
            .expect("one overload")
            .signature()
            .to_string(),
        "float f(int3 a, uint3 b)"
    );
    group.bench_function("bind_10_overloads", |b| {
        b.iter(|| ten.bind(&one_fits).expect("one overload"))
    });
    group.finish();

    // Binding and calling scale with the number of parameters: n keyword
    // arguments, given in reverse order.
    let mut group = c.benchmark_group("call_scaling");
    group.sample_size(20);
    for n in [1_000usize, 10_000, 20_000] {
        let params: Vec<String> = (0..n).map(|i| format!("float p{i}")).collect();
        let f = Function::parse(&format!("float f({})", params.join(", "))).expect("f");
        let args = (0..n).rev().fold(CallArgs::new(), |a, i| {
            a.named(&format!("p{i}"), Arg::tensor(&[4]))
        });
        group.bench_function(format!("bind_and_call_{n}"), |b| {
            b.iter(|| {
                let bound = f.bind(&args).expect("binds");
                bound.call(&args).expect("resolves")
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench, interpreter);
criterion_main!(benches);
