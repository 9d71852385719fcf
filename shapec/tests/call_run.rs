//! `shapec call` running a function with a body: a dot product (WGSL
//! source) and an image brightness (a Slang-style declaration with
//! `--body`) on `.npy` files and on seeded random data, the results
//! printed, written with `--out` and read back, and checked against values
//! computed here in plain Rust; `--json`; `--diff` against wgpu; and the
//! typed errors.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const DOT: &str = "fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }";
const BRIGHTEN: &str = "float3 brighten(float3 color, float gain)";
const BRIGHTEN_BODY: &str = "{ return clamp(color * gain, vec3<f32>(0.0), vec3<f32>(1.0)); }";

/// Runs `shapec call ARGS..` in-process: the exit status, stdout, stderr.
fn call(args: &[&str]) -> (u8, String, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let argv = ["shapec", "call"].iter().chain(args);
    let status = shapec::cli::main_with(argv, &mut out, &mut err);
    (
        status,
        String::from_utf8(out).expect("utf-8"),
        String::from_utf8(err).expect("utf-8"),
    )
}

/// `shapec call ARGS.. --json`: the exit status and the JSON printed.
fn json_of(args: &[&str]) -> (u8, Value) {
    let mut all = args.to_vec();
    all.push("--json");
    let (status, out, err) = call(&all);
    let v = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    (status, v)
}

/// The kind of the error `shapec call ARGS.. --json` reports.
fn kind_of(args: &[&str]) -> (String, String) {
    let (status, v) = json_of(args);
    assert_eq!(status, 1, "{v}");
    (
        v["error"]["kind"].as_str().expect("a kind").to_string(),
        v["error"]["message"]
            .as_str()
            .expect("a message")
            .to_string(),
    )
}

/// The `shapec` binary, with extra environment variables.
fn shapec_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shapec"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .output()
        .expect("the shapec binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("utf-8"),
        String::from_utf8(out.stderr).expect("utf-8"),
    )
}

/// A scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("call_run_{name}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// A `.npy` file as NumPy writes it for a little-endian f32 C-order
/// array, built byte by byte (independently of shapec's writer).
fn numpy_f32(dims: &[u64], values: &[f32]) -> Vec<u8> {
    let shape = match dims {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            dims.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    let header_len = 128 - 10;
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(header_len as u16).to_le_bytes());
    b.extend_from_slice(dict.as_bytes());
    b.extend(std::iter::repeat_n(b' ', header_len - dict.len() - 1));
    b.push(b'\n');
    for v in values {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// Reads a version-1 little-endian f32 `.npy` file: its shape and values.
fn read_npy(path: &Path) -> (Vec<u64>, Vec<f32>) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00", "{}", path.display());
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = std::str::from_utf8(&bytes[10..10 + len]).expect("an ASCII header");
    assert!(header.contains("'descr': '<f4'"), "{header}");
    let shape = header
        .split("'shape': ")
        .nth(1)
        .and_then(|s| s.strip_prefix('('))
        .and_then(|s| s.split(')').next())
        .expect("a shape")
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| d.parse().expect("a dim"))
        .collect();
    let values = bytes[10 + len..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    (shape, values)
}

/// The values of a JSON result, flattened.
fn flat(v: &Value) -> Vec<f32> {
    match v {
        Value::Array(a) => a.iter().flat_map(flat).collect(),
        Value::Number(n) => vec![n.as_f64().expect("a number") as f32],
        other => panic!("not a value: {other}"),
    }
}

/// The dot product of each row of `a` (rows of 3) with `b`, in the order
/// WGSL's `dot` sums.
fn dots(a: &[f32], b: &[f32]) -> Vec<f32> {
    a.chunks(3)
        .map(|r| r[0] * b[0] + r[1] * b[1] + r[2] * b[2])
        .collect()
}

fn close(found: &[f32], expected: &[f32]) {
    assert_eq!(found.len(), expected.len(), "{found:?} vs {expected:?}");
    for (i, (f, e)) in found.iter().zip(expected).enumerate() {
        assert!(
            (f - e).abs() <= 1e-6 * e.abs().max(1.0),
            "element {i}: {f} vs {e} ({found:?} vs {expected:?})"
        );
    }
}

/// Whether a test that needs a GPU adapter must fail without one.
fn gpu_required() -> bool {
    std::env::var("SHAPE_REQUIRE_GPU").is_ok_and(|v| v == "1")
}

#[test]
fn a_dot_product_runs_on_npy_files_and_writes_its_result() {
    let dir = scratch("dot_files");
    let a: Vec<f32> = (0..12).map(|i| i as f32 * 0.5 - 2.0).collect();
    let b = [1.0f32, -2.0, 0.25];
    std::fs::write(dir.join("a.npy"), numpy_f32(&[4, 3], &a)).unwrap();
    std::fs::write(dir.join("b.npy"), numpy_f32(&[3], &b)).unwrap();
    let out_dir = dir.join("out");
    let (a_path, b_path) = (dir.join("a.npy"), dir.join("b.npy"));
    let a_input = format!("a={}", a_path.display());
    let b_input = format!("b={}", b_path.display());
    // No `NAME=ARG`: the files' dims are the arguments'.
    let (status, out, err) = call(&[
        DOT,
        "--input",
        &a_input,
        "--input",
        &b_input,
        "--backend",
        "cpu",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(status, 0, "{out}{err}");
    assert_eq!(err, "");
    let expected = dots(&a, &b);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "backend: cpu (interpreter)");
    assert_eq!(
        lines[1],
        "overload: fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32"
    );
    assert_eq!(lines[2], "call shape: (4,)");
    assert_eq!(lines[3], format!("a : (4, 3) <- {}", a_path.display()));
    assert_eq!(lines[4], format!("b : (3,) <- {}", b_path.display()));
    assert!(lines[5].starts_with("_result : (4,) = ["), "{out}");
    assert_eq!(
        lines[6],
        format!("wrote 1 result(s) to {}", out_dir.display())
    );
    let (shape, values) = read_npy(&out_dir.join("_result.npy"));
    assert_eq!(shape, [4]);
    close(&values, &expected);
    // Nothing but the result is left in the directory.
    let left: Vec<String> = std::fs::read_dir(&out_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(left, ["_result.npy"]);

    // Spelled arguments whose dims agree with the file; `b` broadcasts
    // against a (2, 4, 3) `a`, whose file is read as spelled.
    let a2: Vec<f32> = (0..24).map(|i| (i % 7) as f32 - 3.0).collect();
    std::fs::write(dir.join("a2.npy"), numpy_f32(&[2, 4, 3], &a2)).unwrap();
    let a2_input = format!("a={}", dir.join("a2.npy").display());
    let (status, v) = json_of(&[
        DOT,
        "a=tensor(2,4,3)",
        "b=vec3<f32>",
        "--input",
        &a2_input,
        "--input",
        &b_input,
        "--backend",
        "cpu",
    ]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["call_shape"], serde_json::json!([2, 4]));
    assert_eq!(v["results"][0]["name"], "_result");
    assert_eq!(v["results"][0]["dims"], serde_json::json!([2, 4]));
    close(&flat(&v["results"][0]["values"]), &dots(&a2, &b));
}

#[test]
fn a_dot_product_runs_on_seeded_random_data() {
    let run = |seed: &str| {
        json_of(&[
            DOT,
            "a=tensor(6,3)",
            "b=vec3<f32>",
            "--backend",
            "cpu",
            "--seed",
            seed,
        ])
    };
    let (status, v) = run("5");
    assert_eq!(status, 0, "{v}");
    // The documented random values: `shapec run`'s, by seed and name.
    let a = shapec::run::random_values(5, "a", 18).unwrap();
    let b = shapec::run::random_values(5, "b", 3).unwrap();
    assert_eq!(v["backend"], "cpu (interpreter)");
    assert_eq!(
        v["data"],
        serde_json::json!([
            {"name": "a", "dims": [6, 3], "source": {"kind": "random", "seed": 5}},
            {"name": "b", "dims": [3], "source": {"kind": "random", "seed": 5}},
        ])
    );
    assert_eq!(v["written"], Value::Null);
    assert_eq!(v["result"]["arg_shape"], serde_json::json!([6]));
    close(&flat(&v["results"][0]["values"]), &dots(&a, &b));
    // Reproducible, and another seed gives other values.
    assert_eq!(run("5").1, v);
    assert_ne!(run("6").1["results"], v["results"]);
}

/// slangpy's image brightness: a Slang-style declaration with its WGSL
/// body, over a (2, 3) image of RGB pixels and a gain given as a number.
#[test]
fn a_brightness_function_runs_with_a_body() {
    let dir = scratch("brightness");
    let image: Vec<f32> = (0..18).map(|i| i as f32 / 20.0).collect();
    std::fs::write(dir.join("img.npy"), numpy_f32(&[2, 3, 3], &image)).unwrap();
    let input = format!("color={}", dir.join("img.npy").display());
    let out_dir = dir.join("out");
    let (status, out, err) = call(&[
        BRIGHTEN,
        "gain=1.5",
        "--body",
        BRIGHTEN_BODY,
        "--input",
        &input,
        "--backend",
        "cpu",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(status, 0, "{out}{err}");
    assert!(out.contains("\ngain : () <- the argument\n"), "{out}");
    assert!(out.contains("\ncall shape: (2, 3)\n"), "{out}");
    let expected: Vec<f32> = image.iter().map(|v| (v * 1.5).clamp(0.0, 1.0)).collect();
    let (shape, values) = read_npy(&out_dir.join("_result.npy"));
    assert_eq!(shape, [2, 3, 3]);
    assert_eq!(values, expected);

    // Random pixels, the gain random too (a float parameter without a
    // file or a number).
    let (status, v) = json_of(&[
        BRIGHTEN,
        "color=tensor(4,3)",
        "gain=float",
        "--body",
        BRIGHTEN_BODY,
        "--backend",
        "cpu",
        "--seed",
        "9",
    ]);
    assert_eq!(status, 0, "{v}");
    let color = shapec::run::random_values(9, "color", 12).unwrap();
    let gain = shapec::run::random_values(9, "gain", 1).unwrap()[0];
    let expected: Vec<f32> = color.iter().map(|c| (c * gain).clamp(0.0, 1.0)).collect();
    assert_eq!(v["results"][0]["dims"], serde_json::json!([4, 3]));
    assert_eq!(flat(&v["results"][0]["values"]), expected);
}

/// `out` parameters are written by name, `_result` beside them; an
/// integer parameter gets whole random values.
#[test]
fn out_parameters_and_integer_arguments() {
    let dir = scratch("outs");
    let (status, v) = json_of(&[
        "fn split(x: f32, k: i32, lo: ptr<function, f32>) -> f32 { *lo = x - f32(k); return x * f32(k); }",
        "x=tensor(5)",
        "k=int",
        "lo=output",
        "--backend",
        "cpu",
        "--seed",
        "2",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(status, 0, "{v}");
    let x = shapec::run::random_values(2, "x", 5).unwrap();
    let k = (shapec::run::random_values(2, "k", 1).unwrap()[0] * 8.0).floor();
    let names: Vec<&str> = (v["results"].as_array().unwrap().iter())
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["lo", "_result"]);
    let lo: Vec<f32> = x.iter().map(|x| x - k).collect();
    let product: Vec<f32> = x.iter().map(|x| x * k).collect();
    assert_eq!(flat(&v["results"][0]["values"]), lo);
    assert_eq!(flat(&v["results"][1]["values"]), product);
    assert_eq!(read_npy(&dir.join("lo.npy")).1, lo);
    assert_eq!(read_npy(&dir.join("_result.npy")).1, product);
    assert_eq!(
        v["written"]["files"],
        serde_json::json!(["lo.npy", "_result.npy"])
    );
}

#[test]
fn diff_compares_the_interpreter_with_wgpu() {
    let dir = scratch("diff");
    let (status, out, err) = shapec_env(
        &dir,
        &[
            "call",
            BRIGHTEN,
            "color=tensor(64,3)",
            "gain=1.25",
            "--body",
            BRIGHTEN_BODY,
            "--diff",
            "--tolerance",
            "abs=1e-6",
            "--json",
        ],
        &[],
    );
    if status != 0 && !gpu_required() {
        assert!(
            err.contains("no GPU adapter") || out.contains("no GPU adapter"),
            "{out}{err}"
        );
        return;
    }
    assert_eq!(status, 0, "{out}{err}");
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["reference"], "cpu (interpreter)");
    assert!(v["compared"].as_str().unwrap().starts_with("wgpu: "), "{v}");
    assert_eq!(v["elements"], 192);
    assert_eq!(
        v["results"],
        serde_json::json!([{"name": "_result", "dims": [64, 3]}])
    );
    assert_eq!(v["tolerance"]["passed"], true, "{v}");
    assert!(v["largest"]["absolute"]["difference"].as_f64().unwrap() <= 1e-6);
    assert_eq!(v["largest"]["absolute"]["tensor"], "_result");

    // The text form, on a dot product with a loop.
    let (status, out, err) = shapec_env(
        &dir,
        &[
            "call",
            "fn powsum(x: f32, n: u32) -> f32 { var s = 0.0; var p = 1.0; for (var i = 0u; i < n; i++) { s += p; p *= x; } return s; }",
            "x=tensor(100)",
            "n=12",
            "--diff",
            "--backend",
            "wgpu",
        ],
        &[],
    );
    assert_eq!(status, 0, "{out}{err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "reference: cpu (interpreter)");
    assert!(lines[1].starts_with("compared:  wgpu: "), "{out}");
    assert_eq!(lines[4], "elements:  100 in 1 result(s)");
    assert!(
        lines[5].starts_with("largest absolute difference: "),
        "{out}"
    );

    // A tolerance of 0 on `exp` and `sin`, which WGSL computes within its
    // tolerances: the exit status is 3 exactly when elements exceed it.
    let (status, out, err) = shapec_env(
        &dir,
        &[
            "call",
            "fn e(x: f32) -> f32 { return exp(x * 3.0) * sin(x); }",
            "x=tensor(1000)",
            "--diff",
            "--tolerance",
            "abs=0,rel=0",
            "--json",
        ],
        &[],
    );
    let v: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}{err}"));
    let exceeding = v["tolerance"]["exceeding"].as_u64().unwrap();
    assert_eq!(v["tolerance"]["passed"], exceeding == 0);
    assert_eq!(status, if exceeding > 0 { 3 } else { 0 }, "{v}");
}

#[test]
fn without_an_adapter_diff_says_so_and_auto_runs_on_the_cpu() {
    let dir = scratch("no_adapter");
    let none = [("WGPU_BACKEND", "none")];
    let (status, out, err) = shapec_env(
        &dir,
        &["call", DOT, "a=tensor(4,3)", "b=vec3<f32>", "--diff"],
        &none,
    );
    assert_eq!(status, 1, "{out}");
    assert!(
        err.contains("error[backend]: --diff: no GPU adapter"),
        "{err}"
    );
    let (status, out, err) =
        shapec_env(&dir, &["call", DOT, "a=tensor(4,3)", "b=vec3<f32>"], &none);
    assert_eq!(status, 0, "{err}");
    assert!(
        err.starts_with("note: --backend auto: no GPU adapter")
            && err.ends_with("; running on the CPU\n"),
        "{err}"
    );
    assert!(out.starts_with("backend: cpu (interpreter)\n"), "{out}");
    let (status, _, err) = shapec_env(
        &dir,
        &[
            "call",
            DOT,
            "a=tensor(4,3)",
            "b=vec3<f32>",
            "--backend",
            "wgpu",
        ],
        &none,
    );
    assert_eq!(status, 1);
    assert!(err.contains("--backend wgpu: no GPU adapter"), "{err}");
}

#[test]
fn a_declaration_without_a_body_resolves_and_refuses_to_run() {
    // Nothing asks for a run: the shapes, as before.
    let (status, out, _) = call(&[BRIGHTEN, "color=tensor(4,3)", "gain=1.5"]);
    assert_eq!(status, 0);
    assert!(
        out.starts_with("overload: float3 brighten(float3 color, float gain)\ncall shape: (4,)\n"),
        "{out}"
    );
    for asked in [
        &["--backend", "cpu"][..],
        &["--out", "never"],
        &["--diff"],
        &["--step-limit", "10"],
    ] {
        let mut args = vec![BRIGHTEN, "color=tensor(4,3)", "gain=1.5"];
        args.extend_from_slice(asked);
        let (kind, message) = kind_of(&args);
        assert_eq!(kind, "unsupported_wgsl", "{asked:?}");
        assert!(
            message.contains("without a body") && message.contains("--body"),
            "{message}"
        );
    }
    assert!(!Path::new("never").exists());
}

#[test]
fn data_errors_name_the_argument() {
    let dir = scratch("data_errors");
    std::fs::write(dir.join("a53.npy"), numpy_f32(&[5, 3], &[0.0; 15])).unwrap();
    let missing = format!("a={}", dir.join("missing.npy").display());
    let (kind, message) = kind_of(&[
        DOT,
        "a=tensor(4,3)",
        "b=vec3<f32>",
        "--input",
        &missing,
        "--backend",
        "cpu",
    ]);
    assert_eq!(kind, "read");
    assert!(
        message.contains("missing.npy") && message.contains("argument `a`"),
        "{message}"
    );
    // Without a spelled argument too (the header is read for its dims).
    let (kind, message) = kind_of(&[DOT, "b=vec3<f32>", "--input", &missing, "--backend", "cpu"]);
    assert_eq!(kind, "read");
    assert!(message.contains("argument `a`"), "{message}");

    let wrong = format!("a={}", dir.join("a53.npy").display());
    let (kind, message) = kind_of(&[
        DOT,
        "a=tensor(4,3)",
        "b=vec3<f32>",
        "--input",
        &wrong,
        "--backend",
        "cpu",
    ]);
    assert_eq!(kind, "data");
    assert!(
        message.contains("argument `a` has the dims (4, 3)") && message.contains("(5, 3)"),
        "{message}"
    );
    // A file whose inner dims are not the type's: a call error naming it.
    let b_wrong = format!("b={}", dir.join("a53.npy").display());
    std::fs::write(dir.join("a4.npy"), numpy_f32(&[4], &[0.0; 4])).unwrap();
    let a4 = format!("a={}", dir.join("a4.npy").display());
    let (kind, message) = kind_of(&[DOT, "--input", &a4, "--input", &b_wrong, "--backend", "cpu"]);
    assert_eq!(kind, "type_shape", "{message}");

    let (kind, message) = kind_of(&[DOT, "a=tensor(4,3)", "b=vec3<f32>", "--input", "c=x.npy"]);
    assert_eq!(kind, "data");
    assert!(message.contains("no parameter `c`"), "{message}");
    let (kind, message) = kind_of(&[
        DOT,
        "a=tensor(4,3)",
        "b=vec3<f32>",
        "--body",
        "{ return 1.0; }",
    ]);
    assert_eq!(kind, "data");
    assert!(message.contains("--body"), "{message}");
    let (kind, _) = kind_of(&[
        DOT,
        "a=tensor(4,3)",
        "b=vec3<f32>",
        "--diff",
        "--backend",
        "cpu",
    ]);
    assert_eq!(kind, "backend");
}

#[test]
fn interpreter_errors_are_typed() {
    let (kind, message) = kind_of(&[
        "fn p(x: f32) -> u32 { return pack4x8snorm(vec4<f32>(x)); }",
        "x=tensor(3)",
        "--backend",
        "cpu",
    ]);
    assert_eq!(kind, "unsupported_wgsl");
    assert!(
        message.contains("pack4x8snorm") && message.contains("line 1"),
        "{message}"
    );

    let spin = "fn spin(x: f32) -> f32 { var y = x; loop { y = y + 1.0; } return y; }";
    let (kind, message) = kind_of(&[
        spin,
        "x=tensor(2)",
        "--backend",
        "cpu",
        "--step-limit",
        "1000",
    ]);
    assert_eq!(kind, "step_limit");
    assert!(message.contains("1000 steps"), "{message}");

    // A loop that ends needs its steps: a low limit stops it, the default
    // does not.
    let count = "fn count(n: u32) -> f32 { var s = 0.0; for (var i = 0u; i < n; i++) { s += 1.0; } return s; }";
    let (kind, _) = kind_of(&[count, "n=500", "--backend", "cpu", "--step-limit", "100"]);
    assert_eq!(kind, "step_limit");
    let (status, v) = json_of(&[count, "n=500", "--backend", "cpu"]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(flat(&v["results"][0]["values"]), [500.0]);

    let (kind, message) = kind_of(&[
        "fn s(x: f32) -> f32 { return sin(x * 10.0); }",
        "x=tensor(8)",
        "--backend",
        "cpu",
        "--check-domains",
    ]);
    assert_eq!(kind, "out_of_domain");
    assert!(message.contains("`sin`"), "{message}");
}

/// Generators and structs given field by field take no file: the data
/// says where each leaf's values came from.
#[test]
fn generators_and_struct_fields() {
    let (status, v) = json_of(&[
        "fn f(i: vec2<i32>, x: f32) -> f32 { return f32(i.x * 10 + i.y) + x; }",
        "i=grid(shape=(2,3))",
        "x=0.5",
        "--backend",
        "cpu",
    ]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["data"][0]["source"]["kind"], "generator");
    assert_eq!(v["data"][1]["source"]["kind"], "argument");
    assert_eq!(v["results"][0]["dims"], serde_json::json!([2, 3]));
    let (status, v) = json_of(&[
        "struct P { x: f32, y: f32 } fn f(p: P) -> f32 { return p.x * p.y; }",
        "p={x=tensor(3), y=2.0}",
        "--backend",
        "cpu",
    ]);
    assert_eq!(status, 0, "{v}");
    let x = shapec::run::random_values(0, "p.x", 3).unwrap();
    assert_eq!(
        flat(&v["results"][0]["values"]),
        x.iter().map(|x| x * 2.0).collect::<Vec<_>>()
    );
    let (kind, message) = kind_of(&[
        "fn f(x: f32) -> f32 { return x; }",
        "x=tensor(1000000)",
        "--backend",
        "cpu",
        "--memory-limit",
        "1M",
    ]);
    assert_eq!(kind, "memory");
    assert!(message.contains("(--memory-limit)"), "{message}");
}
