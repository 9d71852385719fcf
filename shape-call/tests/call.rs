//! Every example call of the slangpy documents (read through the choices
//! recorded in docs/deviations.md), with its type shapes, argument shapes,
//! call shape, result shape or error; and property tests of call shapes.

mod common;

use common::{call, func};
use proptest::prelude::*;
use shape_call::{Arg, ArgMap, AxisRole, CallArgs, CallError, Resolution, Signature};

fn kind(r: Result<Resolution, CallError>) -> &'static str {
    r.expect_err("the call should fail").kind()
}

/// (call shape, each argument's arg shape, result's arg shape)
fn shapes(r: &Resolution) -> (Vec<u64>, Vec<Vec<u64>>, Option<Vec<u64>>) {
    (
        r.call_shape.clone(),
        r.args.iter().map(|a| a.arg_shape.clone()).collect(),
        r.result.as_ref().map(|a| a.arg_shape.clone()),
    )
}

const DOT: &str = "float dot(float3 a, float3 b)";

#[test]
fn simple_call_examples() {
    let dot = func(DOT);
    let r = call(&dot, &["float3", "float3"]).unwrap();
    assert_eq!(shapes(&r), (vec![], vec![vec![], vec![]], Some(vec![])));
    assert_eq!(r.args[0].type_shape, vec![3]);
    assert_eq!(r.result.as_ref().unwrap().type_shape, Vec::<u64>::new());

    // No implicit conversion of concrete types.
    assert_eq!(kind(call(&dot, &["10.0", "float3"])), "type_mismatch");

    let r = call(&dot, &["float3", "tensor(100,3)"]).unwrap();
    assert_eq!(
        shapes(&r),
        (vec![100], vec![vec![], vec![100]], Some(vec![100]))
    );
    let r = call(&dot, &["tensor(100,3)", "float3"]).unwrap();
    assert_eq!(
        shapes(&r),
        (vec![100], vec![vec![100], vec![]], Some(vec![100]))
    );

    // b's lowest dim cannot be consumed by float3.
    let e = call(&dot, &["tensor(100,3)", "tensor(100,1)"]).unwrap_err();
    assert_eq!(e.kind(), "type_shape");
    assert!(
        e.to_string()
            .contains("argument `b`: its axis 1 has size 1"),
        "{e}"
    );

    // NumPy broadcasting impossible.
    let e = call(&dot, &["tensor(100,3)", "tensor(1000,3)"]).unwrap_err();
    assert_eq!(e.kind(), "broadcast_mismatch");
    assert!(
        e.to_string()
            .contains("call axis 0: argument `b` has size 1000"),
        "{e}"
    );
    assert!(e.to_string().contains("`a` gave the call size 100"), "{e}");

    let r = call(&dot, &["tensor(100,3)", "tensor(1000,100,3)"]).unwrap();
    assert_eq!(
        shapes(&r),
        (
            vec![1000, 100],
            vec![vec![100], vec![1000, 100]],
            Some(vec![1000, 100])
        )
    );
    assert_eq!(r.args[0].mapping, vec![1]);
    assert_eq!(r.args[1].mapping, vec![0, 1]);
}

const DOT_OUT: &str = "void dot(float3 a, float3 b, out float r)";

#[test]
fn output_parameter_examples() {
    let dot = func(DOT_OUT);
    let r = call(&dot, &["float3", "float3", "ref"]).unwrap();
    assert_eq!(shapes(&r), (vec![], vec![vec![], vec![], vec![]], None));

    // A fixed-shape output written by 100 calls: a race, unless allowed.
    let e = call(&dot, &["tensor(100,3)", "float3", "ref"]).unwrap_err();
    assert_eq!(e.kind(), "race");
    assert!(
        e.to_string()
            .contains("output `r` would be written by 100 calls"),
        "{e}"
    );
    let r = call(
        &dot.clone().allowing_races(),
        &["tensor(100,3)", "float3", "ref"],
    )
    .unwrap();
    assert_eq!(
        shapes(&r),
        (vec![100], vec![vec![100], vec![], vec![]], None)
    );

    // An output to allocate takes the call shape.
    let r = call(&dot, &["tensor(100,3)", "float3", "output<float>"]).unwrap();
    assert_eq!(r.args[2].arg_shape, vec![100]);
    assert!(r.args[2].allocated);

    // A dimensionality constraint: 3 dims cannot be defined by 1 call dim.
    let e = call(&dot, &["tensor(100,3)", "float3", "output<float>(dims=3)"]).unwrap_err();
    assert_eq!(e.kind(), "undefinable_dimensions");
    assert!(
        e.to_string().contains("2 leading dims are undefinable"),
        "{e}"
    );
    let r = call(&dot, &["tensor(100,3)", "float3", "output<float>(dims=1)"]).unwrap();
    assert_eq!(r.args[2].arg_shape, vec![100]);

    // An output of another element type than the parameter's.
    assert_eq!(
        kind(call(&dot, &["float3", "float3", "output<int>"])),
        "type_mismatch"
    );
}

const READ: &str = "float4 read(int2 index, Slice<2,float4> array)";

#[test]
fn slice_examples() {
    let read = func(READ);
    let r = call(&read, &["int2", "tensor(100,100,4)"]).unwrap();
    assert_eq!(shapes(&r), (vec![], vec![vec![], vec![]], Some(vec![])));
    assert_eq!(r.args[1].type_shape, vec![100, 100, 4]);
    assert_eq!(r.result.as_ref().unwrap().type_shape, vec![4]);

    let r = call(&read, &["buffer(50,int2)", "tensor(100,100,4)"]).unwrap();
    assert_eq!(
        shapes(&r),
        (vec![50], vec![vec![50], vec![]], Some(vec![50]))
    );
    let r = call(&read, &["buffer(50,int2)", "tensor(50,100,100,4)"]).unwrap();
    assert_eq!(
        shapes(&r),
        (vec![50], vec![vec![50], vec![50]], Some(vec![50]))
    );
    assert_eq!(r.args[1].type_shape, vec![100, 100, 4]);

    let e = call(&read, &["buffer(50,int2)", "tensor(50,100,100,5)"]).unwrap_err();
    assert_eq!(e.kind(), "type_shape");
    assert!(e.to_string().contains("axis 3 has size 5"), "{e}");
    assert_eq!(
        kind(call(&read, &["buffer(75,int2)", "tensor(50,100,100,4)"])),
        "broadcast_mismatch"
    );
    // The index is an int2: a float tensor does not convert.
    assert_eq!(
        kind(call(&read, &["tensor(50,2)", "tensor(100,100,4)"])),
        "type_mismatch"
    );
}

/// slangpy's tensor parameter types: `Tensor<T,N>`, `RWTensor<T,N>`,
/// `NDBuffer<T,N>` and `RWNDBuffer<T,N>` consume N dims of any size, then
/// T's shape, as `Slice<N,T>` does.
#[test]
fn tensor_parameter_types() {
    let as_tensor = func("float f(int i, Tensor<float,3> t)");
    let as_slice = func("float f(int i, Slice<3,float> t)");
    for args in [
        ["inttensor(5)", "tensor(5,2,3,4)"],
        ["inttensor(5)", "tensor(2,3,4)"],
        ["int2", "tensor(7,1,2,3,4)"],
    ] {
        let t = call(&as_tensor, &args).unwrap();
        let s = call(&as_slice, &args).unwrap();
        assert_eq!(shapes(&t), shapes(&s), "{args:?}");
        assert_eq!(t.args[1].type_shape, s.args[1].type_shape, "{args:?}");
        assert_eq!(t.args[1].mapping, s.args[1].mapping, "{args:?}");
        assert_eq!(t.args[1].ty, "Tensor<float,3>");
    }
    let r = call(&as_tensor, &["inttensor(5)", "tensor(5,2,3,4)"]).unwrap();
    assert_eq!(shapes(&r), (vec![5], vec![vec![5], vec![5]], Some(vec![5])));
    assert_eq!(r.args[1].type_shape, vec![2, 3, 4]);
    // The element's own dims follow the N dims.
    let v = func("float f(NDBuffer<float3,2> t)");
    let r = call(&v, &["tensor(6,4,5,3)"]).unwrap();
    assert_eq!(shapes(&r), (vec![6], vec![vec![6]], Some(vec![6])));
    assert_eq!(r.args[0].type_shape, vec![4, 5, 3]);
    assert_eq!(kind(call(&v, &["tensor(6,4,5,2)"])), "type_shape");
    // Element types match exactly; too few dims is `dimensionality`.
    assert_eq!(
        kind(call(&as_tensor, &["inttensor(5)", "inttensor(5,2,3,4)"])),
        "type_mismatch"
    );
    let e = call(&as_tensor, &["inttensor(5)", "tensor(3,4)"]).unwrap_err();
    assert_eq!(e.kind(), "dimensionality", "{e}");
    assert!(e.to_string().contains("Tensor<float,3>"), "{e}");

    // The number of dims is a whole number of at least 1, and a tensor
    // parameter is written through its type, not `out` or `inout`.
    for sig in [
        "float f(Tensor<float,0> t)",
        "float f<let N : int>(Tensor<float,N> t)",
        "float f(Tensor<float> t)",
        "float f(Tensor<3,float> t)",
        "void f(out RWTensor<float,1> t)",
        "void f(inout Tensor<float,1> t)",
    ] {
        let e = Signature::parse(sig).unwrap_err();
        assert_eq!(e.kind(), "syntax", "{sig}: {e}");
    }
}

/// Each of the four spellings is read back from how either language
/// writes it, in a signature and as a type on its own.
#[test]
fn tensor_parameter_types_round_trip() {
    use shape_call::{parse_type, Language, ParamType, TensorKind, TypeScope};
    let scope = TypeScope::new();
    for name in ["Tensor", "RWTensor", "NDBuffer", "RWNDBuffer"] {
        for element in ["float", "int3", "float2x3"] {
            let text = format!("{name}<{element},2>");
            let ty = parse_type(&text, &scope).unwrap();
            let ParamType::Tensor(k, 2, _) = &ty else {
                panic!("{text} is {ty:?}")
            };
            assert_eq!(k.name(), name);
            assert_eq!(k.writable(), name.starts_with("RW"));
            assert_eq!(TensorKind::named(name), Some(*k));
            assert_eq!(ty.writes_through(), name.starts_with("RW"), "{text}");
            assert_eq!(ty.spelled(Language::Slang), text);
            for lang in [Language::Slang, Language::Wgsl] {
                let spelled = ty.spelled(lang);
                assert_eq!(parse_type(&spelled, &scope).unwrap(), ty, "{spelled}");
            }
            let sig = format!("void f({text} t)");
            assert_eq!(Signature::parse(&sig).unwrap().to_string(), sig);
        }
    }
    let wgsl = parse_type("RWNDBuffer<float3,1>", &scope).unwrap();
    assert_eq!(wgsl.spelled(Language::Wgsl), "RWNDBuffer<vec3<f32>,1>");
}

/// A read-write tensor's writes are the function's own: one tensor that
/// every call index shares is not a race (an `inout` array would be), and
/// what the function writes lands in the argument's storage.
#[test]
fn read_write_tensor_writes_land_and_are_not_races() {
    let scatter = func("void scatter(int i, float x, RWTensor<float,1> t)");
    let parse = |text: &str| Arg::parse(text, &scatter.scope()).unwrap();
    let args = CallArgs::new()
        .arg(parse("inttensor(4)"))
        .arg(parse("tensor(4)"))
        .arg(parse("tensor(4)"));
    let bound = scatter.bind(&args).unwrap();
    let r = bound.call(&args).unwrap();
    assert_eq!(shapes(&r), (vec![4], vec![vec![4], vec![4], vec![]], None));
    let kernel = bound.kernel(&r).unwrap();
    assert!(kernel.leaves[2].writes());
    assert!(!kernel.leaves[0].writes());
    let mut data = kernel
        .buffers(vec![
            vec![2.0, 0.0, 3.0, 1.0],
            vec![10.0, 20.0, 30.0, 40.0],
            vec![1.0, 1.0, 1.0, 1.0],
        ])
        .unwrap();
    kernel
        .run_cpu(&mut data, &mut |v: &mut [Vec<f32>]| {
            let i = v[0][0] as usize;
            v[2][i] += v[1][0];
        })
        .unwrap();
    assert_eq!(data[2], vec![21.0, 41.0, 11.0, 31.0]);
    // The same writes through an `inout` array are refused as a race.
    let inout = func("void scatter(int i, float x, inout float[] t)");
    assert_eq!(
        kind(call(&inout, &["inttensor(4)", "tensor(4)", "tensor(4)"])),
        "race"
    );
    // A read-only tensor is not written back.
    let read = func("void scatter(int i, float x, Tensor<float,1> t)");
    let bound = read.bind(&args).unwrap();
    let kernel = bound.kernel(&bound.call(&args).unwrap()).unwrap();
    assert!(!kernel.leaves[2].writes());
    let mut data = kernel
        .buffers(vec![vec![0.0; 4], vec![1.0; 4], vec![5.0; 4]])
        .unwrap();
    kernel
        .run_cpu(&mut data, &mut |v: &mut [Vec<f32>]| v[2][0] = -1.0)
        .unwrap();
    assert_eq!(data[2], vec![5.0; 4]);
    // By name, the written tensor comes back with its dims.
    use shape_call::{HostArg, HostArgs};
    let host = HostArgs::new()
        .with("i", HostArg::new(vec![2], vec![1.0, 0.0]))
        .with("x", HostArg::new(vec![2], vec![3.0, 4.0]))
        .with("t", HostArg::new(vec![2], vec![0.0, 0.0]));
    let out = scatter
        .host_call(&host)
        .unwrap()
        .run_cpu(&mut |v: &mut [Vec<f32>]| {
            let i = v[0][0] as usize;
            v[2][i] = v[1][0];
        })
        .unwrap();
    let t = out.get("t").expect("t is written");
    assert_eq!(t.dims(), &[2]);
    assert_eq!(t.values(), &[4.0, 3.0]);
}

#[test]
fn remapping_examples() {
    let dot = func(DOT);
    let r = call(&dot, &["float3", "tensor(100,100,3)"]).unwrap();
    assert_eq!(r.call_shape, vec![100, 100]);
    assert_eq!(
        kind(call(&dot, &["float3", "tensor(3,100,100)"])),
        "type_shape"
    );
    // The document writes map(b=(1,2,0)) for this intent; under the rule
    // that entry i is where argument dim i goes, it is (2,0,1).
    let mapped = dot.clone().map("b", ArgMap::Dims(vec![2, 0, 1]));
    let r = call(&mapped, &["float3", "tensor(3,100,100)"]).unwrap();
    assert_eq!(
        shapes(&r),
        (
            vec![100, 100],
            vec![vec![], vec![100, 100]],
            Some(vec![100, 100])
        )
    );
    assert_eq!(
        r.args[1].axes,
        vec![AxisRole::Type(0), AxisRole::Call(0), AxisRole::Call(1)]
    );
    // The document's own tuple reads the other way and fails.
    let theirs = dot.clone().map("b", ArgMap::Dims(vec![1, 2, 0]));
    assert_eq!(
        kind(call(&theirs, &["float3", "tensor(3,100,100)"])),
        "type_shape"
    );

    // Named dims: the names in the order the dims should take.
    let named = dot.map("b", ArgMap::parse("(width,height,channels)").unwrap());
    let r = call(
        &named,
        &["float3", "tensor(channels=3, width=100, height=100)"],
    )
    .unwrap();
    assert_eq!(r.call_shape, vec![100, 100]);
    assert_eq!(r.args[1].type_shape, vec![3]);
}

#[test]
fn explicit_vectorizing_examples() {
    let read = func(READ);
    let e = call(&read, &["inttensor(1000,2)", "tensor(50,100,100,4)"]).unwrap_err();
    assert_eq!(e.kind(), "broadcast_mismatch");
    let v = read.vmap("(N),(M)->(N,M)").unwrap();
    let r = call(&v, &["inttensor(1000,2)", "tensor(50,100,100,4)"]).unwrap();
    assert_eq!(
        shapes(&r),
        (
            vec![1000, 50],
            vec![vec![1000], vec![50]],
            Some(vec![1000, 50])
        )
    );
    assert_eq!(r.args[1].mapping, vec![1]);
    let bad = func(READ).vmap("(N)->(N)").unwrap();
    assert_eq!(
        kind(call(&bad, &["inttensor(1000,2)", "tensor(50,100,100,4)"])),
        "invalid_vmap"
    );
    let bad = func(READ).vmap("(N),(K)->(N,M)").unwrap();
    assert_eq!(
        kind(call(&bad, &["inttensor(1000,2)", "tensor(50,100,100,4)"])),
        "invalid_vmap"
    );
}

#[test]
fn batch_remapping_examples() {
    let multiply = func("float multiply(float a, float b)");
    assert_eq!(
        kind(call(&multiply, &["tensor(100)", "tensor(50)"])),
        "broadcast_mismatch"
    );
    // Mapping a alone: b still aligns to the right, onto the same call dim.
    let a_only = multiply.clone().map("a", ArgMap::Dims(vec![1]));
    assert_eq!(
        kind(call(&a_only, &["tensor(100)", "tensor(50)"])),
        "broadcast_mismatch"
    );
    let outer = multiply
        .map("a", ArgMap::Dims(vec![1]))
        .map("b", ArgMap::Dims(vec![0]));
    let r = call(&outer, &["tensor(100)", "tensor(50)"]).unwrap();
    assert_eq!(
        shapes(&r),
        (
            vec![50, 100],
            vec![vec![1, 100], vec![50]],
            Some(vec![50, 100])
        )
    );

    let multiply3 = func("float multiply(float3 a, float3 b)")
        .map("a", ArgMap::Dims(vec![1, 2]))
        .map("b", ArgMap::Dims(vec![0, 2]));
    let r = call(&multiply3, &["tensor<float3>(100)", "tensor<float3>(50)"]).unwrap();
    assert_eq!(
        shapes(&r),
        (
            vec![50, 100],
            vec![vec![1, 100], vec![50, 1]],
            Some(vec![50, 100])
        )
    );

    // Sub-kernel indexing: a's type dim is its first dim, outside the call.
    let image = func("float3 multiply(float3 a, float3 b)").map("a", ArgMap::Dims(vec![2, 0, 1]));
    let r = call(&image, &["tensor(3,10,20)", "tensor<float3>(10,20)"]).unwrap();
    assert_eq!(
        shapes(&r),
        (
            vec![10, 20],
            vec![vec![10, 20], vec![10, 20]],
            Some(vec![10, 20])
        )
    );
    assert_eq!(
        r.args[0].axes,
        vec![AxisRole::Type(0), AxisRole::Call(0), AxisRole::Call(1)]
    );
    assert_eq!(r.result.unwrap().type_shape, vec![3]);
}

#[test]
fn overload_document_example() {
    let myfunc = func(
        "struct Particle { float3 position; float3 velocity; }; \
         float myfunc(float3 vec, int2[10] array, Texture2D<float> texture, Particle myparticle)",
    );
    let r = call(
        &myfunc,
        &[
            "tensor(10,10,3)",
            "buffer(10, int2[10])",
            "tensor(256,128)",
            "{position=tensor<float3>(10), velocity=float3}",
        ],
    )
    .unwrap();
    let paths: Vec<&str> = r.args.iter().map(|a| a.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "vec",
            "array",
            "texture",
            "myparticle.position",
            "myparticle.velocity"
        ]
    );
    assert_eq!(r.call_shape, vec![10, 10]);
    let arg_shapes: Vec<Vec<u64>> = r.args.iter().map(|a| a.arg_shape.clone()).collect();
    assert_eq!(
        arg_shapes,
        vec![vec![10, 10], vec![10], vec![], vec![10], vec![]]
    );
    assert_eq!(r.args[1].type_shape, vec![10, 2]);
    assert_eq!(r.args[1].mapping, vec![1]);
    assert_eq!(r.args[2].type_shape, vec![256, 128]);
    assert_eq!(r.result.unwrap().arg_shape, vec![10, 10]);
    // A missing field, an unknown one.
    assert_eq!(
        kind(call(
            &myfunc,
            &[
                "float3",
                "buffer(1, int2[10])",
                "tensor(2,2)",
                "{position=float3}"
            ]
        )),
        "missing_argument"
    );
    assert_eq!(
        kind(call(
            &myfunc,
            &[
                "float3",
                "buffer(1, int2[10])",
                "tensor(2,2)",
                "{position=float3, velocity=float3, mass=1.0}"
            ]
        )),
        "unknown_parameter"
    );
}

#[test]
fn overloads_pick_exactly_one() {
    let g = func("int g(int a)").overload(Signature::parse("float g(float a)").unwrap());
    let r = call(&g, &["inttensor(4)"]).unwrap();
    assert_eq!(r.overload, "int g(int a)");
    let r = call(&g, &["tensor(4)"]).unwrap();
    assert_eq!(r.overload, "float g(float a)");
    // Both take a float tensor of 2 dims: ambiguous.
    let f = func("float f(float3 a)").overload(Signature::parse("float f(float a)").unwrap());
    let e = call(&f, &["tensor(10,3)"]).unwrap_err();
    assert_eq!(e.kind(), "ambiguous_overload");
    assert!(e.to_string().contains("2 candidates"), "{e}");
    // Neither takes a number: every candidate is listed with its reason.
    let h = func("float h(float3 a)").overload(Signature::parse("float h(float2 a)").unwrap());
    let e = call(&h, &["1.0"]).unwrap_err();
    assert_eq!(e.kind(), "no_matching_overload");
    let text = e.to_string();
    assert!(text.contains("float h(float3 a): argument `a`"), "{text}");
    assert!(text.contains("float h(float2 a): argument `a`"), "{text}");
}

#[test]
fn element_sizes_are_checked_at_bind() {
    // A tensor's element type fixes its last dims before any call: an
    // overload whose type does not fit is out at bind, as slangpy rejects
    // `vector<float3>` against `float[10]` up front.
    let f = func("float f(float4 a)").overload(Signature::parse("float f(float3 a)").unwrap());
    let args = CallArgs::new().arg(Arg::parse("tensor<float3>(7)", &f.scope()).unwrap());
    let bound = f.bind(&args).unwrap();
    assert_eq!(bound.signature().to_string(), "float f(float3 a)");
    let only4 = func("float f(float4 a)");
    let e = only4.bind(&args).unwrap_err();
    assert_eq!(e.kind(), "type_shape");
    assert!(
        e.to_string()
            .contains("its axis 1 has size 3, but parameter type float4 needs 4"),
        "{e}"
    );
}

#[test]
fn generic_sizes_are_shared() {
    let sum = func("T add<T, let N : int>(vector<T,N> a, vector<T,N> b)");
    let r = call(&sum, &["tensor(10,4)", "float4"]).unwrap();
    assert_eq!(r.call_shape, vec![10]);
    assert_eq!(r.args[0].ty, "float4");
    assert_eq!(r.result.unwrap().ty, "float");
    // Only the plain tensors' trailing sizes, known when the call runs,
    // would give `N`: a kernel's types are fixed before that.
    let e = call(&sum, &["tensor(10,4)", "tensor(10,3)"]).unwrap_err();
    assert_eq!(e.kind(), "unspecialized");
    assert!(e.to_string().contains("generic size `N`"), "{e}");
    // An element type fixes it; the other tensor's 3 then disagrees.
    let e = call(&sum, &["tensor<float4>(10)", "tensor(10,3)"]).unwrap_err();
    assert_eq!(e.kind(), "type_shape");
    assert!(e.to_string().contains("4"), "{e}");
    // Two values that disagree are caught at bind, by the solver.
    let e = call(&sum, &["float4", "float3"]).unwrap_err();
    assert_eq!(e.kind(), "type_shape");
    // T is bound once.
    assert_eq!(kind(call(&sum, &["tensor(10,4)", "int4"])), "type_mismatch");
}

#[test]
fn wgsl_signatures_reflected_with_naga() {
    let dot = func("fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }");
    let r = call(&dot, &["tensor(100,3)", "vec3<f32>"]).unwrap();
    assert_eq!(r.call_shape, vec![100]);
    assert_eq!(r.args[0].ty, "vec3<f32>");
    assert_eq!(r.result.as_ref().unwrap().ty, "f32");
    assert_eq!(r.overload, "fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32");
    let m = func("struct P { pos: vec3<f32>, w: array<f32, 4> } fn f(p: P, m: mat2x3<f32>, r: ptr<function, f32>) { *r = p.pos.x; }");
    let r = call(
        &m,
        &[
            "{pos=tensor<vec3f>(7), w=array<f32,4>}",
            "mat2x3f",
            "output",
        ],
    )
    .unwrap();
    assert_eq!(r.call_shape, vec![7]);
    assert_eq!(r.args[1].path, "p.w");
    assert_eq!(r.args[1].type_shape, vec![4]);
    assert_eq!(r.args[2].type_shape, vec![2, 3]);
    assert_eq!(r.args[3].arg_shape, vec![7]);
    assert_eq!(Signature::parse("fn broken(").unwrap_err().kind(), "wgsl");
    // A Slang parameter may be called `fn`.
    let s = Signature::parse("float f(float fn)").unwrap();
    assert_eq!(s.to_string(), "float f(float fn)");
}

#[test]
fn bind_once_call_with_other_sizes() {
    let dot = func(DOT);
    let args = |n: u64, m: u64| {
        CallArgs::new()
            .arg(Arg::tensor(&[n, 3]))
            .arg(Arg::tensor(&[m, n, 3]))
    };
    let bound = dot.bind(&args(4, 2)).unwrap();
    for (n, m) in [(4, 2), (100, 7), (1, 1)] {
        let r = bound.call(&args(n, m)).unwrap();
        assert_eq!(r.call_shape, vec![m, n]);
    }
    // Another dimensionality needs another bind.
    let e = bound
        .call(
            &CallArgs::new()
                .arg(Arg::tensor(&[4, 3]))
                .arg(Arg::tensor(&[4, 3])),
        )
        .unwrap_err();
    assert_eq!(e.kind(), "rebind");
}

#[test]
fn bad_text_is_an_error_not_a_panic() {
    for sig in [
        "",
        "float",
        "float dot(",
        "float dot(float3)",
        "float dot(float3 a, float3 a)",
        "float dot(vector<float,> a)",
        "float f(float[0] a)",
    ] {
        assert!(Signature::parse(sig).is_err(), "{sig}");
    }
    let long = "a".repeat(65536);
    let e =
        Signature::parse(&format!("float {long}(float3 {long}, float3 b) garbage")).unwrap_err();
    assert!(e.to_string().len() < 1000);
    let deep = format!("{}float{}", "array<".repeat(10_000), ">".repeat(10_000));
    assert!(Arg::parse(&deep, &Default::default()).is_err());
    let nested = format!("{}{}", "{a=".repeat(10_000), "}".repeat(10_000));
    assert!(Arg::parse(&nested, &Default::default()).is_err());
    for arg in [
        "tensor(18446744073709551616)",
        "tensor(1,",
        "buffer(3)",
        "output(size=2)",
        "ref<float3>",
        "vector<float,N>",
        "-",
    ] {
        assert!(Arg::parse(arg, &Default::default()).is_err(), "{arg}");
    }
    let big = call(&func(DOT), &["tensor(18446744073709551615,3)", "float3"]).unwrap();
    assert_eq!(big.call_shape, vec![u64::MAX]);
}

/// NumPy's broadcasting, the reference.
fn numpy(shapes: &[Vec<u64>]) -> Option<Vec<u64>> {
    let rank = shapes.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = vec![1u64; rank];
    for s in shapes {
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[rank - s.len() + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return None;
            }
        }
    }
    Some(out)
}

fn shape() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(prop_oneof![Just(1u64), Just(2), Just(3), Just(5)], 0..4)
}

proptest! {
    /// On ground shapes the call shape is NumPy's broadcasting of the
    /// argument shapes.
    #[test]
    fn call_shape_is_numpy_broadcasting(a in shape(), b in shape(), c in shape()) {
        let f = func("float f(float a, float3 b, float c)");
        let mut b3 = b.clone();
        b3.push(3);
        let args = CallArgs::new().arg(Arg::tensor(&a)).arg(Arg::tensor(&b3)).arg(Arg::tensor(&c));
        let expected = numpy(&[a, b, c]);
        match f.resolve(&args) {
            Ok(r) => {
                prop_assert_eq!(Some(r.call_shape.clone()), expected);
                prop_assert_eq!(r.result.unwrap().arg_shape, r.call_shape);
            }
            Err(e) => {
                prop_assert_eq!(expected, None);
                prop_assert_eq!(e.kind(), "broadcast_mismatch");
            }
        }
    }

    /// Binding does not depend on the order keyword arguments come in.
    #[test]
    fn binding_is_independent_of_argument_order(a in shape(), b in shape(), c in shape(), order in Just([0usize, 1, 2]).prop_shuffle()) {
        let f = func("void f(float a, float b, float c, out float r)");
        let given = [("a", a), ("b", b), ("c", c)];
        let forward = given.iter().fold(CallArgs::new(), |acc, (n, s)| acc.named(n, Arg::tensor(s))).named("r", Arg::output());
        let shuffled = order.iter().fold(CallArgs::new().named("r", Arg::output()), |acc, &k| acc.named(given[k].0, Arg::tensor(&given[k].1)));
        prop_assert_eq!(f.resolve(&forward), f.resolve(&shuffled));
    }
}

/// Issue 25, finding 9: a run given the wrong number of buffers names the
/// count and the leaves in order (it said "argument `_result`: 1 buffers
/// were given for 3 arguments").
#[test]
fn a_wrong_number_of_buffers_names_the_count_and_the_leaves() {
    use shape_call::{Arg, CallArgs, Function};
    let dot = Function::parse("float dot(float3 a, float3 b)").unwrap();
    let args = CallArgs::new()
        .arg(Arg::tensor(&[4, 3]))
        .arg(Arg::tensor(&[3]));
    let bound = dot.bind(&args).unwrap();
    let kernel = bound.kernel(&bound.call(&args).unwrap()).unwrap();
    let e = kernel.check_buffers([12u64].into_iter()).unwrap_err();
    assert_eq!(e.kind(), "buffer_count");
    assert_eq!(
        e.to_string(),
        "1 buffer(s) were given, but the call reads 3: one per argument, in order (a, b, _result), the result last"
    );
    let e = kernel
        .buffers(vec![vec![1.0; 12], vec![1.0; 3], vec![0.0; 4]])
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("3 inputs were given, but the call reads 2"),
        "{e}"
    );
}

/// A result given with more argument dims than a vmap's call has was an
/// unchecked subtraction (a panic in debug builds, a result with no call
/// dims in release); found by comparing the binder with its earlier
/// version over random calls. Now a typed error naming the result.
#[test]
fn a_result_with_more_dims_than_the_vmapped_call_is_an_error() {
    let f = func("float f(float3 a)").vmap("(N)->(N)").unwrap();
    let r = call(&f, &["tensor(100,3)"]).unwrap();
    assert_eq!(r.call_shape, vec![100]);
    let e = call(&f, &["tensor(100,3)", "_result=tensor(100,1,3)"]).unwrap_err();
    assert_eq!(e.kind(), "invalid_vmap");
    assert!(e.to_string().contains("_result"), "{e}");
}

/// Calls of host data by argument name: data in by name, what the
/// function writes out by name with its dims; mistakes are typed errors
/// naming the argument.
#[test]
fn host_calls_take_and_give_data_by_name() {
    use shape_call::{HostArg, HostArgs};
    // Arguments in any order, broadcast to the call shape.
    let scale = func("float scale(int k, float x)");
    let args = HostArgs::new()
        .with(
            "x",
            HostArg::new(vec![2, 3], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
        )
        .with("k", HostArg::value(2.0));
    let out = scale
        .host_call(&args)
        .unwrap()
        .run_cpu(&mut |v: &mut [Vec<f32>]| v[2][0] = v[0][0] * v[1][0])
        .unwrap();
    let r = out.result().unwrap();
    assert_eq!(r.dims(), &[2, 3]);
    assert_eq!(r.values(), &[2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
    assert_eq!(
        out.iter().map(|(n, _)| n).collect::<Vec<_>>(),
        vec!["_result"]
    );

    // Data that does not fill its dims, a name the function lacks, an
    // argument not given.
    let short = HostArgs::new()
        .with("x", HostArg::new(vec![2, 3], vec![1.0; 5]))
        .with("k", HostArg::value(2.0));
    let e = scale.host_call(&short).unwrap_err();
    assert_eq!(e.kind(), "data");
    assert!(
        e.to_string().contains("`x`") || e.to_string().contains("x"),
        "{e}"
    );
    let stranger = args.clone().with("y", HostArg::value(1.0));
    assert!(scale
        .host_call(&stranger)
        .unwrap_err()
        .to_string()
        .contains("y"));
    let missing = HostArgs::new().with("x", HostArg::value(1.0));
    assert!(scale.host_call(&missing).is_err());
}
