//! `shapec call`: the JSON form of docs/json.md on the slangpy
//! documents' examples, errors with their kinds and exit status, and the
//! text form.

use serde_json::{json, Value};

/// Runs `shapec call ARGS..`; returns the exit status and stdout.
fn call(args: &[&str]) -> (u8, String) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let argv = ["shapec", "call"].iter().chain(args);
    let status = shapec::cli::main_with(argv, &mut out, &mut err);
    let mut text = String::from_utf8(out).expect("utf-8");
    text.push_str(&String::from_utf8(err).expect("utf-8"));
    (status, text)
}

fn json_of(args: &[&str]) -> (u8, Value) {
    let mut all = args.to_vec();
    all.push("--json");
    let (status, text) = call(&all);
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}")),
    )
}

const DOT: &str = "float dot(float3 a, float3 b)";

#[test]
fn json_form_of_a_broadcast_call() {
    let (status, v) = json_of(&[DOT, "a=tensor(100,3)", "b=tensor(1000,100,3)"]);
    assert_eq!(status, 0);
    assert_eq!(
        v,
        json!({
            "call_shape": [1000, 100],
            "overload": "float dot(float3 a, float3 b)",
            "args": {
                "a": {"type": "float3", "type_shape": [3], "arg_shape": [100], "call_dims": 1, "mapping": [1]},
                "b": {"type": "float3", "type_shape": [3], "arg_shape": [1000, 100], "call_dims": 2, "mapping": [0, 1]}
            },
            "result": {"type": "float", "type_shape": [], "arg_shape": [1000, 100], "call_dims": 2, "mapping": [0, 1]}
        })
    );
}

#[test]
fn errors_have_kinds_and_a_nonzero_status() {
    for (args, kind) in [
        (vec![DOT, "10.0", "float3"], "type_mismatch"),
        (vec![DOT, "tensor(100,3)", "tensor(100,1)"], "type_shape"),
        (
            vec![DOT, "tensor(100,3)", "tensor(1000,3)"],
            "broadcast_mismatch",
        ),
        (
            vec![
                "void dot(float3 a, float3 b, out float r)",
                "tensor(100,3)",
                "float3",
                "ref",
            ],
            "race",
        ),
        (
            vec![
                "void dot(float3 a, float3 b, out float r)",
                "tensor(100,3)",
                "float3",
                "output(dims=3)",
            ],
            "undefinable_dimensions",
        ),
        (vec![DOT, "float3"], "missing_argument"),
        (
            vec![DOT, "float3", "float3", "float3"],
            "too_many_arguments",
        ),
        (vec![DOT, "float3", "c=float3"], "unknown_parameter"),
        (vec!["float dot(float3 a", "float3"], "syntax"),
        (vec!["fn f(", "float3"], "wgsl"),
        (vec![DOT, "tensor(3,", "float3"], "syntax"),
        (
            vec![DOT, "float3", "tensor(3,100,100)", "--map", "b=(1,2,0,3)"],
            "invalid_map",
        ),
        (
            vec![DOT, "float3", "float3", "--vmap", "(N)(M)"],
            "invalid_vmap",
        ),
    ] {
        let (status, v) = json_of(&args);
        assert_eq!(status, 1, "{args:?}");
        assert_eq!(v["error"]["kind"], kind, "{args:?}: {v}");
        assert!(v["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
}

#[test]
fn maps_vmaps_overloads_and_wgsl() {
    let (_, v) = json_of(&[DOT, "float3", "tensor(3,100,100)", "--map", "b=(2,0,1)"]);
    assert_eq!(v["call_shape"], json!([100, 100]));
    assert_eq!(v["args"]["b"]["arg_shape"], json!([100, 100]));
    let (_, v) = json_of(&[
        DOT,
        "float3",
        "tensor(channels=3, width=100, height=100)",
        "--map",
        "b=(width,height,channels)",
    ]);
    assert_eq!(v["call_shape"], json!([100, 100]));
    let (_, v) = json_of(&[
        "float4 read(int2 index, Slice<2,float4> array)",
        "inttensor(1000,2)",
        "tensor(50,100,100,4)",
        "--vmap",
        "(N),(M)->(N,M)",
    ]);
    assert_eq!(v["call_shape"], json!([1000, 50]));
    assert_eq!(v["args"]["array"]["type_shape"], json!([100, 100, 4]));
    assert_eq!(v["result"]["type_shape"], json!([4]));
    let (_, v) = json_of(&[
        "int g(int a)",
        "inttensor(4)",
        "--signature",
        "float g(float a)",
    ]);
    assert_eq!(v["overload"], "int g(int a)");
    let (status, v) = json_of(&[
        "float f(float3 a)",
        "tensor(10,3)",
        "--signature",
        "float f(float a)",
    ]);
    assert_eq!(
        (status, v["error"]["kind"].as_str()),
        (1, Some("ambiguous_overload"))
    );
    let (_, v) = json_of(&[
        "fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }",
        "tensor(5,3)",
        "vec3<f32>",
        // WGSL source has a body, so the call runs (tests/call_run.rs):
        // on the CPU interpreter, which writes no note on standard error.
        "--backend",
        "cpu",
    ]);
    assert_eq!(v["args"]["a"]["type"], "vec3<f32>");
    assert_eq!(v["result"]["type"], "f32");
    assert_eq!(v["overload"], "fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32");
    // A void function has no result.
    let (_, v) = json_of(&[
        "void dot(float3 a, float3 b, out float r)",
        "float3",
        "float3",
        "ref",
    ]);
    assert_eq!(v["result"], Value::Null);
    assert_eq!(v["args"]["r"]["arg_shape"], json!([]));
    // A negative number is an argument, not an option.
    let (status, _) = json_of(&["float f(float a)", "-2.5"]);
    assert_eq!(status, 0);
}

#[test]
fn text_form() {
    let (status, text) = call(&[DOT, "a=tensor(100,3)", "b=float3"]);
    assert_eq!(status, 0);
    assert_eq!(
        text,
        "overload: float dot(float3 a, float3 b)\n\
         call shape: (100,)\n\
         a: float3, type shape (3,), argument shape (100,) on call dims (0,)\n\
         b: float3, type shape (3,), argument shape () on call dims ()\n\
         _result: float, type shape (), argument shape (100,) on call dims (0,) (allocated)\n"
    );
    let (status, text) = call(&[DOT, "tensor(100,3)", "tensor(1000,3)"]);
    assert_eq!(status, 1);
    assert!(
        text.contains("call axis 0: argument `b` has size 1000"),
        "{text}"
    );
}

/// slangpy's tensor parameter types through `shapec call --json`: the
/// type dims and call shape of the same call with `Slice<3,float>`, the
/// type spelled as written, and their errors with their kinds.
#[test]
fn tensor_parameter_types() {
    let (status, t) = json_of(&[
        "float f(int i, Tensor<float,3> t)",
        "i=inttensor(5)",
        "t=tensor(5,2,3,4)",
    ]);
    assert_eq!(status, 0);
    let (_, s) = json_of(&[
        "float f(int i, Slice<3,float> t)",
        "i=inttensor(5)",
        "t=tensor(5,2,3,4)",
    ]);
    assert_eq!(t["call_shape"], json!([5]));
    assert_eq!(t["args"]["t"]["type"], "Tensor<float,3>");
    for key in ["type_shape", "arg_shape", "call_dims", "mapping"] {
        assert_eq!(t["args"]["t"][key], s["args"]["t"][key], "{key}");
    }
    assert_eq!(t["result"], s["result"]);
    // A read-write tensor that every call index shares is not a race.
    let (status, v) = json_of(&[
        "void scatter(int i, float x, RWTensor<float,1> t)",
        "inttensor(4)",
        "tensor(4)",
        "tensor(4)",
    ]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["args"]["t"]["arg_shape"], json!([]));
    for (args, kind) in [
        (
            vec!["float f(Tensor<float,3> t)", "inttensor(2,3,4)"],
            "type_mismatch",
        ),
        (
            vec!["float f(Tensor<float,3> t)", "tensor(3,4)"],
            "dimensionality",
        ),
        (vec!["float f(Tensor<float,0> t)", "tensor(3)"], "syntax"),
        (
            vec!["void f(out RWNDBuffer<float,1> t)", "tensor(3)"],
            "syntax",
        ),
    ] {
        let (status, v) = json_of(&args);
        assert_eq!(status, 1, "{args:?}");
        assert_eq!(v["error"]["kind"], kind, "{args:?}: {v}");
    }
}
