//! Vectorized calls: host time of one call of a bound function with fresh
//! sizes (resolution and kernel strides; the goal is under 20 µs plus
//! device time), the time to bind a function of 10 overloads, and how
//! binding and calling scale with the number of parameters (1,000,
//! 10,000 and 20,000 keyword arguments in reverse order: linear).
//!
//! `cargo bench -p shape-call --bench call`

use criterion::{criterion_group, criterion_main, Criterion};
use shape_call::{Arg, CallArgs, Function, Signature};

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

criterion_group!(benches, bench);
criterion_main!(benches);
