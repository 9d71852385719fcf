//! The WGSL interpreter against values worked out by hand from WGSL's
//! rules (the differential test against wgpu is `tests/tests/wgsl_interpreter.rs`).

use shape_call::{CallError, InterpretOptions, Interpreter, Value};

fn run(src: &str, f: &str, args: &mut [Value]) -> Result<Option<Value>, CallError> {
    Interpreter::new(src)?.call(f, args)
}

fn one(src: &str, args: &mut [Value]) -> Value {
    let it = Interpreter::new(src).unwrap();
    let name = it.functions().last().unwrap().to_string();
    it.call(&name, args).unwrap().unwrap()
}

#[test]
fn integer_rules_are_wgsl_s() {
    let f = "fn f(a: i32, b: i32) -> vec4<i32> { return vec4<i32>(a / b, a % b, a * b, a + b); }";
    assert_eq!(
        one(f, &mut [Value::I32(7), Value::I32(0)]),
        Value::Vector(vec![
            Value::I32(7),
            Value::I32(0),
            Value::I32(0),
            Value::I32(7)
        ])
    );
    assert_eq!(
        one(f, &mut [Value::I32(i32::MIN), Value::I32(-1)]),
        Value::Vector(vec![
            Value::I32(i32::MIN),
            Value::I32(0),
            Value::I32(i32::MIN),
            Value::I32(i32::MAX)
        ])
    );
    let s = "fn s(a: u32, b: u32) -> u32 { return (a << b) | (a >> b); }";
    assert_eq!(one(s, &mut [Value::U32(1), Value::U32(33)]), Value::U32(2));
    let c = "fn c(x: f32) -> vec2<i32> { return vec2<i32>(i32(x), i32(-x)); }";
    assert_eq!(
        one(c, &mut [Value::F32(3e10)]),
        Value::Vector(vec![Value::I32(i32::MAX), Value::I32(i32::MIN)])
    );
}

#[test]
fn control_flow_runs() {
    let src = "
fn collatz(n0: u32) -> u32 {
    var n = n0;
    var steps = 0u;
    while (n != 1u) {
        if (n % 2u == 0u) { n = n / 2u; } else { n = 3u * n + 1u; }
        steps += 1u;
    }
    return steps;
}
fn pick(x: i32) -> i32 {
    var r = 0;
    switch x {
        case 0, 1: { r = 10; }
        case 2: { r = 20; }
        default: { r = -1; }
    }
    for (var i = 0; i < 10; i++) {
        if (i == 3) { continue; }
        if (i == 6) { break; }
        r += i;
    }
    return r;
}
fn bump(p: ptr<function, f32>) { *p = *p * 2.0 + 1.0; }
fn twice(x: f32) -> f32 { var y = x; bump(&y); bump(&y); return y; }
";
    assert_eq!(
        run(src, "collatz", &mut [Value::U32(27)]).unwrap(),
        Some(Value::U32(111))
    );
    assert_eq!(
        run(src, "pick", &mut [Value::I32(1)]).unwrap(),
        Some(Value::I32(10 + 1 + 2 + 4 + 5))
    );
    assert_eq!(
        run(src, "pick", &mut [Value::I32(9)]).unwrap(),
        Some(Value::I32(-1 + 12))
    );
    assert_eq!(
        run(src, "twice", &mut [Value::F32(1.0)]).unwrap(),
        Some(Value::F32(7.0))
    );
    let mut p = [Value::F32(3.0)];
    assert_eq!(run(src, "bump", &mut p).unwrap(), None);
    assert_eq!(p[0], Value::F32(7.0));
}

#[test]
fn composites_and_builtins() {
    let src = "
struct Light { dir: vec3<f32>, m: mat2x2<f32>, w: array<f32, 3> }
const K: f32 = 2.0;
fn shade(l: Light, n: vec3<f32>) -> vec4<f32> {
    let d = max(dot(normalize(l.dir), n), 0.0);
    let v = l.m * vec2<f32>(1.0, 2.0);
    var w = l.w;
    w[1] = w[0] + w[2];
    return vec4<f32>(d * K, v.yx, w[1]);
}";
    let l = Value::Struct(vec![
        Value::Vector(vec![Value::F32(0.0), Value::F32(0.0), Value::F32(2.0)]),
        Value::Matrix(vec![
            Value::Vector(vec![Value::F32(1.0), Value::F32(2.0)]),
            Value::Vector(vec![Value::F32(3.0), Value::F32(4.0)]),
        ]),
        Value::Array(vec![Value::F32(1.0), Value::F32(5.0), Value::F32(2.0)]),
    ]);
    let n = Value::Vector(vec![Value::F32(0.0), Value::F32(0.0), Value::F32(1.0)]);
    assert_eq!(
        run(src, "shade", &mut [l, n]).unwrap(),
        // m * (1, 2) = col0 + 2 col1 = (7, 10); swizzled (10, 7).
        Some(Value::Vector(vec![
            Value::F32(2.0),
            Value::F32(10.0),
            Value::F32(7.0),
            Value::F32(3.0)
        ]))
    );
}

#[test]
fn runaway_loops_stop_and_unsupported_constructs_are_named() {
    let it =
        Interpreter::new("fn spin(x: f32) -> f32 { var y = x; loop { y = y + 1.0; } return y; }")
            .unwrap()
            .with_options(InterpretOptions {
                step_limit: 1000,
                check_domains: false,
            });
    let e = it.call("spin", &mut [Value::F32(0.0)]).unwrap_err();
    assert_eq!(e.kind(), "step_limit", "{e}");
    let e = run(
        "fn p(x: f32) -> u32 { return pack4x8snorm(vec4<f32>(x)); }",
        "p",
        &mut [Value::F32(0.5)],
    )
    .unwrap_err();
    assert_eq!(e.kind(), "unsupported_wgsl", "{e}");
    assert!(
        e.to_string().contains("pack4x8snorm") && e.to_string().contains("line 1"),
        "{e}"
    );
    let e = Interpreter::new("fn f(x: f32) -> f32 { return sin(x); }")
        .unwrap()
        .with_options(InterpretOptions {
            check_domains: true,
            ..InterpretOptions::default()
        })
        .call("f", &mut [Value::F32(4.0)])
        .unwrap_err();
    assert_eq!(e.kind(), "out_of_domain", "{e}");
    assert!(
        e.to_string().contains("`sin`") && e.to_string().contains("line 1"),
        "{e}"
    );
    let e = run(
        "fn f(x: f32) -> f32 { return x; }",
        "f",
        &mut [Value::I32(1)],
    )
    .unwrap_err();
    assert_eq!(e.kind(), "data", "{e}");
}

#[test]
fn hostile_modules_are_errors_not_crashes() {
    // Arrays that nest to 10^8 elements are refused, not allocated.
    let e = run(
        "fn big(x: f32) -> f32 { var a: array<array<array<f32, 100>, 1000>, 1000>; a[1][2][3] = x; return a[1][2][3]; }",
        "big",
        &mut [Value::F32(1.0)],
    )
    .unwrap_err();
    assert_eq!(e.kind(), "unsupported_wgsl", "{e}");
    // A long chain of operations runs; a hostile one is refused before
    // naga's recursion would overflow the stack.
    let sum = |n: usize| {
        format!(
            "fn long(x: f32) -> f32 {{ return {}; }}",
            vec!["x"; n].join(" + ")
        )
    };
    assert_eq!(
        run(&sum(1000), "long", &mut [Value::F32(1.0)]).unwrap(),
        Some(Value::F32(1000.0))
    );
    let e = run(&sum(20_000), "long", &mut [Value::F32(1.0)]).unwrap_err();
    assert!(e.to_string().contains("split it with `let`"), "{e}");
    let e = shape_call::Function::parse(&sum(20_000)).unwrap_err();
    assert_eq!(e.kind(), "wgsl", "{e}");
    let banner = format!(
        "/* {} */ // {}\nfn f(x: f32) -> f32 {{ return x; }}",
        "*".repeat(5000),
        "-".repeat(5000)
    );
    assert_eq!(
        run(&banner, "f", &mut [Value::F32(2.0)]).unwrap(),
        Some(Value::F32(2.0))
    );
    let nested = format!(
        "fn deep(x: f32) -> f32 {{ {} return x; {} }}",
        "{".repeat(5000),
        "}".repeat(5000)
    );
    assert_eq!(
        run(&nested, "deep", &mut [Value::F32(1.0)])
            .unwrap_err()
            .kind(),
        "wgsl"
    );
    // A 64k-character name is reported, shortened.
    let name = "n".repeat(65_536);
    let e = run(
        "fn f(x: f32) -> f32 { return x; }",
        &name,
        &mut [Value::F32(1.0)],
    )
    .unwrap_err();
    assert!(e.to_string().len() < 1_000, "{}", e.to_string().len());
}
