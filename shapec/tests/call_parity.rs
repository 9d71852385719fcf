//! slangpy parity, part 2 (issue 29) through `shapec call --json`: the
//! same behaviours as shape-call's tests/slangpy_parity.rs, as a user of
//! the command line sees them.

use serde_json::{json, Value};

/// `shapec call ARGS.. --json`: the exit status and the JSON printed.
fn json_of(args: &[&str]) -> (u8, Value) {
    let mut out = Vec::new();
    let mut err = Vec::new();
    let argv = ["shapec", "call"].iter().chain(args).chain(&["--json"]);
    let status = shapec::cli::main_with(argv, &mut out, &mut err);
    let text = String::from_utf8(out).expect("utf-8");
    let v = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{e}: {text}{}", String::from_utf8_lossy(&err)));
    (status, v)
}

fn kind_of(args: &[&str]) -> String {
    let (status, v) = json_of(args);
    assert_eq!(status, 1, "{v}");
    v["error"]["kind"].as_str().expect("a kind").to_owned()
}

#[test]
fn a_generic_parameter_that_could_bind_at_two_levels() {
    let (_, v) = json_of(&["T g<T>(T x)", "x=float2"]);
    assert_eq!(v["error"]["kind"], "ambiguous_overload");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(message.contains("T = float2: call shape ()"), "{message}");
    assert!(message.contains("T = float: call shape (2)"), "{message}");
    let (status, v) = json_of(&["T g<T>(T x)", "x=float2", "--map", "x=float"]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["call_shape"], json!([2]));
    assert_eq!(v["args"]["x"]["type"], "float");
    let (status, v) = json_of(&["T g<T>(T x)", "float2", "--map", "float"]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["call_shape"], json!([2]));
    let (_, v) = json_of(&["T g<T>(T x)", "x=tensor<float2>(10)"]);
    assert_eq!(v["call_shape"], json!([10]));
    assert_eq!(v["result"]["type"], "float2");
}

#[test]
fn maps_are_checked_and_may_be_short() {
    let m = "float m(float a, float b)";
    assert_eq!(
        kind_of(&[m, "a=tensor(4)", "b=tensor(4)", "--map", "c=(1,)"]),
        "unknown_parameter"
    );
    assert_eq!(
        kind_of(&[
            m,
            "a=tensor(4)",
            "b=tensor(4)",
            "--map",
            "a=(1,)",
            "--map",
            "a=(0,)"
        ]),
        "duplicate_argument"
    );
    let (status, v) = json_of(&["float f(float2 a)", "a=tensor(4,5,2)", "--map", "a=(1,0)"]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["call_shape"], json!([5, 4]));
    assert_eq!(
        v["args"]["a"],
        json!({"type": "float2", "type_shape": [2], "arg_shape": [5, 4], "call_dims": 2, "mapping": [0, 1]})
    );
}

#[test]
fn specializations_fix_generic_sizes() {
    let add = "T add<T, let N : int>(vector<T,N> a, vector<T,N> b)";
    assert_eq!(
        kind_of(&[add, "a=tensor(10,4)", "b=tensor(10,4)"]),
        "unspecialized"
    );
    for spec in ["N=4", "add<float,4>"] {
        let (status, v) = json_of(&[
            add,
            "a=tensor(10,4)",
            "b=tensor(10,4)",
            "--specialize",
            spec,
        ]);
        assert_eq!(status, 0, "{spec}: {v}");
        assert_eq!(v["call_shape"], json!([10]));
        assert_eq!(v["args"]["a"]["type"], "float4");
    }
    assert_eq!(
        kind_of(&[add, "a=float4", "b=float4", "--specialize", "M=4"]),
        "invalid_specialization"
    );
}

#[test]
fn conversions_and_races() {
    let (_, v) = json_of(&["int f(int x)", "x=1.5"]);
    assert_eq!(v["error"]["kind"], "type_mismatch");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("an integer literal"),
        "{v}"
    );
    let f = "void f(float x, out float r)";
    assert_eq!(kind_of(&[f, "x=tensor(10)", "r=ref"]), "race");
    let (status, _) = json_of(&[f, "x=tensor(10)", "r=ref", "--allow-races"]);
    assert_eq!(status, 0);
}

#[test]
fn generators_as_arguments() {
    let f = "float f(int2 p, float x)";
    let (status, v) = json_of(&[f, "p=grid(shape=(4,-1), stride=(2,2))", "x=tensor(4,5)"]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["call_shape"], json!([4, 5]));
    assert_eq!(
        v["args"]["p"],
        json!({"type": "int2", "type_shape": [2], "arg_shape": [4, 1], "call_dims": 2, "mapping": [0, 1]})
    );
    let (status, v) = json_of(&[f, "p=call_id", "x=tensor(4,5)"]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["args"]["p"]["arg_shape"], json!([]));
    assert_eq!(
        kind_of(&[f, "p=call_id", "x=tensor(4,5,6)"]),
        "type_mismatch"
    );
    let (status, v) = json_of(&[
        "float g(float2 u, uint h, uint3 t, float x)",
        "u=rand_float(min=-1.0, max=1.0, seed=3)",
        "h=wang_hash(warmup=2)",
        "t=thread_id",
        "x=tensor(7)",
    ]);
    assert_eq!(status, 0, "{v}");
    assert_eq!(v["call_shape"], json!([7]));
    assert_eq!(
        kind_of(&[f, "p=grid(shape=(4,4), stride=(1))", "x=tensor(4,4)"]),
        "syntax"
    );
}
