//! slangpy parity, part 2 (issue 29): one test per behaviour, written
//! from slangpy's documented and implemented behaviour (or the choice
//! docs/deviations.md records), with the expected call shape, each
//! argument's call dims and mapping, or the error kind.

mod common;

use common::{call, func};
use shape_call::{Arg, ArgMap, Function, GenericArg, Resolution};

fn map(f: Function, arg: &str, text: &str) -> Function {
    f.map(arg, ArgMap::parse(text).unwrap())
}

/// The argument `path`'s (type, arg shape, mapping).
fn arg_of(r: &Resolution, path: &str) -> (String, Vec<u64>, Vec<usize>) {
    let a = r
        .args
        .iter()
        .chain(&r.result)
        .find(|a| a.path == path)
        .unwrap_or_else(|| panic!("no argument {path}"));
    (a.ty.clone(), a.arg_shape.clone(), a.mapping.clone())
}

const G: &str = "T g<T>(T x)";

#[test]
fn a_value_given_to_a_bare_generic_is_ambiguous_between_its_type_and_its_scalar() {
    let g = func(G);
    let e = call(&g, &["float2"]).unwrap_err();
    assert_eq!(e.kind(), "ambiguous_overload");
    let text = e.to_string();
    assert!(text.contains("T = float2: call shape ()"), "{text}");
    assert!(text.contains("T = float: call shape (2)"), "{text}");
    // A scalar value, a number or a reference has one reading.
    for arg in ["float", "2.0", "int"] {
        assert_eq!(
            call(&g, &[arg]).unwrap().call_shape,
            Vec::<u64>::new(),
            "{arg}"
        );
    }
    assert_eq!(arg_of(&call(&g, &["2"]).unwrap(), "x").0, "int");
}

#[test]
fn a_tensor_binds_a_bare_generic_to_its_element_type_only() {
    let g = func(G);
    // Elements of float2: T = float2, one call per element.
    let r = call(&g, &["tensor<float2>(10)"]).unwrap();
    assert_eq!(r.call_shape, vec![10]);
    assert_eq!(arg_of(&r, "x"), ("float2".into(), vec![10], vec![0]));
    assert_eq!(arg_of(&r, "_result").0, "float2");
    // A float tensor: T = float, every float a call.
    let r = call(&g, &["tensor(10,2)"]).unwrap();
    assert_eq!(r.call_shape, vec![10, 2]);
    assert_eq!(
        arg_of(&r, "_result"),
        ("float".into(), vec![10, 2], vec![0, 1])
    );
}

#[test]
fn a_bound_generic_decides_how_a_later_value_reads() {
    let add = func("T add<T>(T a, T b)");
    // `a` binds T = float3: the value is one float3, no ambiguity.
    let r = call(&add, &["tensor<float3>(10)", "float3"]).unwrap();
    assert_eq!(r.call_shape, vec![10]);
    assert_eq!(arg_of(&r, "b"), ("float3".into(), vec![], vec![]));
    // `a` binds T = float: the value vectorizes over its 3.
    let r = call(&add, &["tensor(10,3)", "float3"]).unwrap();
    assert_eq!(r.call_shape, vec![10, 3]);
    assert_eq!(arg_of(&r, "b"), ("float".into(), vec![3], vec![1]));
    // An output named before the argument that binds T takes T's type.
    let set = func("void set<T>(out T r, T x)");
    let r = call(&set, &["r=output", "x=tensor<float2>(4)"]).unwrap();
    assert_eq!(arg_of(&r, "r"), ("float2".into(), vec![4], vec![0]));
}

#[test]
fn a_map_by_type_chooses_the_binding() {
    // slangpy's `map(float)` / `map('float2')`.
    let as_scalar = map(func(G), "x", "float");
    let r = call(&as_scalar, &["float2"]).unwrap();
    assert_eq!(r.call_shape, vec![2]);
    assert_eq!(arg_of(&r, "x"), ("float".into(), vec![2], vec![0]));
    let as_whole = map(func(G), "x", "'float2'");
    let r = call(&as_whole, &["float2"]).unwrap();
    assert_eq!(r.call_shape, Vec::<u64>::new());
    assert_eq!(arg_of(&r, "_result").0, "float2");
    // A float tensor read as float3: its last dim is the type's.
    let r = call(&map(func(G), "x", "float3"), &["tensor(10,3)"]).unwrap();
    assert_eq!(arg_of(&r, "x"), ("float3".into(), vec![10], vec![0]));
    // A concrete parameter must be the map's type; an overload it rules
    // out is not a candidate.
    let e = call(&map(func("float f(float3 a)"), "a", "float2"), &["float3"]).unwrap_err();
    assert_eq!(e.kind(), "type_mismatch");
    let two = func("float h(float a)")
        .overload(shape_call::Signature::parse("float h(float2 a)").unwrap());
    assert_eq!(
        call(&two, &["float2"]).unwrap_err().kind(),
        "ambiguous_overload"
    );
    let r = call(&map(two, "a", "float2"), &["float2"]).unwrap();
    assert_eq!(r.overload, "float h(float2 a)");
}

#[test]
fn maps_by_position_as_slangpy_writes_them() {
    // `map(float)`: the first parameter, whatever its name.
    let g = func(G).map_positional(0, ArgMap::parse("float").unwrap());
    assert_eq!(call(&g, &["float2"]).unwrap().call_shape, vec![2]);
    let add = func("T add<T>(T a, T b)")
        .map_positional(0, ArgMap::parse("float2").unwrap())
        .map_positional(1, ArgMap::parse("float2").unwrap());
    assert_eq!(
        call(&add, &["float2", "float2"]).unwrap().call_shape,
        Vec::<u64>::new()
    );
    // One parameter mapped by position and by name, or past the last.
    let both = func(G)
        .map_positional(0, ArgMap::parse("float").unwrap())
        .map("x", ArgMap::parse("float2").unwrap());
    assert_eq!(
        call(&both, &["float2"]).unwrap_err().kind(),
        "duplicate_argument"
    );
    let past = func(G).map_positional(1, ArgMap::parse("float").unwrap());
    assert_eq!(call(&past, &["float2"]).unwrap_err().kind(), "invalid_map");
}

#[test]
fn maps_must_name_an_argument_once() {
    let m = func("float m(float a, float b)");
    // A map for a name no parameter has is not ignored.
    let e = call(&map(m.clone(), "c", "(1,)"), &["tensor(4)", "tensor(4)"]).unwrap_err();
    assert_eq!(e.kind(), "unknown_parameter");
    assert!(e.to_string().contains("did you mean `a` or `b`?"), "{e}");
    let e = call(&map(m.clone(), "bb", "(0,)"), &["tensor(4)", "tensor(4)"]).unwrap_err();
    assert!(e.to_string().ends_with("did you mean `b`?"), "{e}");
    // A field of a struct parameter, or the result, can be mapped.
    let p = func("struct P { float3 position; float mass; }; float f(P p)");
    let e = call(
        &map(p, "p.mas", "(0,)"),
        &["{position=float3, mass=tensor(4)}"],
    )
    .unwrap_err();
    assert!(e.to_string().contains("did you mean `p.mass`?"), "{e}");
    // The same argument mapped twice keeps neither silently.
    let twice = map(map(m, "a", "(1,)"), "a", "(0,)");
    let e = call(&twice, &["tensor(4)", "tensor(4)"]).unwrap_err();
    assert_eq!(e.kind(), "duplicate_argument");
}

#[test]
fn a_short_map_covers_the_leading_call_dims() {
    // slangpy: `float f(float2 a)` with a (4,5,2) tensor and map(a=(1,0)).
    let f = func("float f(float2 a)");
    for m in ["(1,0)", "(1,0,2)"] {
        let r = call(&map(f.clone(), "a", m), &["tensor(4,5,2)"]).unwrap();
        assert_eq!(r.call_shape, vec![5, 4], "{m}");
        assert_eq!(
            arg_of(&r, "a"),
            ("float2".into(), vec![5, 4], vec![0, 1]),
            "{m}"
        );
    }
    // The overloads document's outer product, each map one entry long.
    let mul = map(
        map(func("float multiply(float a, float b)"), "a", "(0,)"),
        "b",
        "(1,)",
    );
    let r = call(&mul, &["tensor(10)", "tensor(20)"]).unwrap();
    assert_eq!(r.call_shape, vec![10, 20]);
    // More entries than dims stays an error.
    let e = call(&map(f, "a", "(1,0,2,3)"), &["tensor(4,5,2)"]).unwrap_err();
    assert_eq!(e.kind(), "invalid_map");
}

const ADD: &str = "T add<T, let N : int>(vector<T,N> a, vector<T,N> b)";

#[test]
fn a_generic_size_only_a_plain_tensor_would_fix_needs_a_specialization() {
    let add = func(ADD);
    let e = call(&add, &["tensor(10,4)", "tensor(10,4)"]).unwrap_err();
    assert_eq!(e.kind(), "unspecialized");
    let text = e.to_string();
    assert!(
        text.contains("`N`") && text.contains("`a`") && text.contains("add<..>"),
        "{text}"
    );
    // A value, an element type or a specialization fixes it.
    assert_eq!(
        call(&add, &["tensor(10,4)", "float4"]).unwrap().call_shape,
        vec![10]
    );
    assert_eq!(
        call(&add, &["tensor<float4>(10)", "tensor(10,4)"])
            .unwrap()
            .call_shape,
        vec![10]
    );
    for spec in [
        add.clone().specialize("N", GenericArg::Size(4)),
        add.clone().specialized("N=4").unwrap(),
        add.clone().specialized("add<float, 4>").unwrap(),
    ] {
        let r = call(&spec, &["tensor(10,4)", "tensor(10,4)"]).unwrap();
        assert_eq!(r.call_shape, vec![10]);
        assert_eq!(arg_of(&r, "a").0, "float4");
        // A tensor whose size disagrees with the specialization.
        assert_eq!(
            call(&spec, &["tensor(10,3)", "tensor(10,4)"])
                .unwrap_err()
                .kind(),
            "type_shape"
        );
    }
    // A generic type specialized: an int tensor no longer fits.
    let floats = add.clone().specialized("add<float, 4>").unwrap();
    assert_eq!(
        call(&floats, &["inttensor(10,4)", "int4"])
            .unwrap_err()
            .kind(),
        "type_mismatch"
    );
}

#[test]
fn specializations_name_generic_parameters_of_their_kind() {
    let add = func(ADD);
    for (text, needle) in [
        (
            "M=4",
            "no overload has a generic parameter of that name (it has: T, N)",
        ),
        ("N=float", "it is a generic size: give a number"),
        ("T=4", "it is a generic type: give a type"),
        ("add<float>", "2 generic parameters, 1 given"),
        ("sub<float, 4>", "the function is `add`"),
    ] {
        let e = add
            .clone()
            .specialized(text)
            .and_then(|f| call(&f, &["float4", "float4"]))
            .unwrap_err();
        assert_eq!(e.kind(), "invalid_specialization", "{text}");
        assert!(e.to_string().contains(needle), "{text}: {e}");
    }
}

#[test]
fn numbers_do_not_convert_and_the_message_says_what_would_match() {
    // The seed's "no implicit conversion of concrete types", also for a
    // float literal given to an `int` (slangpy's code would cast it).
    let f = func("int f(int x)");
    let e = call(&f, &["1.5"]).unwrap_err();
    assert_eq!(e.kind(), "type_mismatch");
    assert!(
        e.to_string()
            .contains("an integer literal (`2`) or `inttensor(..)` would match"),
        "{e}"
    );
    let e = call(&f, &["tensor(4)"]).unwrap_err();
    assert!(e.to_string().contains("`inttensor(..)` would match"), "{e}");
    let e = call(&func("float d(float3 a)"), &["10.0"]).unwrap_err();
    assert!(
        e.to_string()
            .contains("a value `float3` or `tensor<float3>(..)` would match"),
        "{e}"
    );
    // An integer literal still takes any numeric scalar.
    assert!(call(&func("float h(float x)"), &["2"]).is_ok());
}

#[test]
fn races_stay_errors_unless_allowed() {
    let f = func("void f(float x, out float r)");
    let e = call(&f, &["tensor(10)", "ref"]).unwrap_err();
    assert_eq!(e.kind(), "race");
    let r = call(&f.allowing_races(), &["tensor(10)", "ref"]).unwrap();
    assert_eq!(r.call_shape, vec![10]);
}

#[test]
fn generators_bind_with_slangpys_call_shape_rules() {
    // grid contributes its dims; -1 takes the size the others give.
    let f = func("float f(int2 p, float x)");
    let r = call(&f, &["grid(shape=(4,-1), stride=(2,2))", "tensor(4,5)"]).unwrap();
    assert_eq!(r.call_shape, vec![4, 5]);
    assert_eq!(arg_of(&r, "p"), ("int2".into(), vec![4, 1], vec![0, 1]));
    assert_eq!(
        call(&f, &["grid(shape=(4,4))", "tensor(4,5)"])
            .unwrap_err()
            .kind(),
        "broadcast_mismatch"
    );
    // A grid of 2 dims is an int2 or int[2], not an int3.
    let e = call(&func("float g(int3 p)"), &["grid(shape=(4,4))"]).unwrap_err();
    assert_eq!(e.kind(), "type_mismatch");
    assert!(e.to_string().contains("gives 2 values per call"), "{e}");
    assert_eq!(
        call(&func("float g(int[2] p)"), &["grid(shape=(4,4))"])
            .unwrap()
            .call_shape,
        vec![4, 4]
    );
    // Python's one-element tuple.
    let r = call(&func("float g(int p)"), &["grid(shape=(4,), stride=(3,))"]).unwrap();
    assert_eq!(r.call_shape, vec![4]);
    // call_id adds no call dims; its vector has one entry per call dim.
    let id = func("float h(int2 i, float x)");
    let r = call(&id, &["call_id", "tensor(3,4)"]).unwrap();
    assert_eq!(r.call_shape, vec![3, 4]);
    assert_eq!(arg_of(&r, "i").1, Vec::<u64>::new());
    let e = call(&id, &["call_id", "tensor(3,4,5)"]).unwrap_err();
    assert!(
        e.to_string()
            .contains("gives 3 values per call here (one per dim), the parameter takes 2"),
        "{e}"
    );
    // thread_id, wang_hash and rand_float add none and take 1 to 3 values.
    let r = call(
        &func("float k(uint3 t, uint h, float2 u, float x)"),
        &[
            "thread_id",
            "wang_hash(seed=7)",
            "rand_float(min=-1.0, max=1.0)",
            "tensor(6)",
        ],
    )
    .unwrap();
    assert_eq!(r.call_shape, vec![6]);
    assert_eq!(
        call(&func("float k(float t)"), &["thread_id"])
            .unwrap_err()
            .kind(),
        "type_mismatch"
    );
    assert_eq!(
        call(&func("float k(int t)"), &["rand_float"])
            .unwrap_err()
            .kind(),
        "type_mismatch"
    );
    assert_eq!(
        call(&func("float k(uint4 t)"), &["wang_hash"])
            .unwrap_err()
            .kind(),
        "type_mismatch"
    );
    // Bad options are syntax errors, not panics.
    let scope = shape_call::TypeScope::new();
    for bad in [
        "grid",
        "grid(shape=(0,2))",
        "grid(shape=(2,2), stride=(1))",
        "rand_float(min=1.0, max=1.0)",
        "wang_hash(seed=-1)",
        "wang_hash(colour=2)",
        "call_id(seed=1)",
    ] {
        assert_eq!(
            Arg::parse(bad, &scope).unwrap_err().kind(),
            "syntax",
            "{bad}"
        );
    }
}

#[test]
fn generator_values_follow_slangpy() {
    use shape_call::{hash_to_float, wang_hash, HashSeed};
    // The hash chain of slangpy's wanghasharg.slang, written out: a
    // vector of 3 at call 5 starts from 5 * 3.
    let s = HashSeed {
        seed: 7,
        warmup: 2,
        hash_seed: true,
    };
    let start = wang_hash(wang_hash(15)) ^ wang_hash(7);
    let h0 = wang_hash(start);
    assert_eq!(
        s.hashes(5, 3),
        vec![h0, wang_hash(h0), wang_hash(wang_hash(h0))]
    );
    // A scalar starts from the index itself.
    let plain = HashSeed {
        seed: 7,
        warmup: 0,
        hash_seed: false,
    };
    assert_eq!(plain.hashes(5, 0), vec![wang_hash(5 ^ 7)]);
    // rand_float: [min, max), 1 never reached.
    assert_eq!(hash_to_float(0, -1.0, 1.0), -1.0);
    assert!(hash_to_float(u32::MAX, 0.0, 1.0) < 1.0);
}

#[test]
fn generators_run_by_argument_name_on_the_reference() {
    use shape_call::{Generator, HostArgs};
    // A vector's x is the last dim's index, as slangpy loads it.
    let f = func("float f(int2 p)");
    let grid = Generator::Grid {
        shape: vec![Some(2), Some(3)],
        stride: vec![1, 1],
        offset: vec![0, 0],
    };
    let out = f
        .host_call(&HostArgs::new().with_generator("p", grid))
        .unwrap()
        .run_cpu(&mut |v: &mut [Vec<f32>]| v[1][0] = v[0][0] * 10.0 + v[0][1])
        .unwrap();
    let r = out.result().unwrap();
    assert_eq!(r.dims(), &[2, 3]);
    assert_eq!(r.values(), &[0.0, 10.0, 20.0, 1.0, 11.0, 21.0]);
}

/// Found by review: each of these either panicked, ran something other
/// than what the documents say, or could hang.
#[test]
fn review_findings_are_typed_errors_or_documented_results() {
    // Each value reads one way or the other: here `y` alone fits both.
    let g = func("void g<T, U>(T x, U y, T z)");
    let e = call(&g, &["float2", "float3", "tensor<float2>(3)"]).unwrap_err();
    assert_eq!(e.kind(), "ambiguous_overload");
    assert!(
        e.to_string().contains("U = float3") && e.to_string().contains("U = float:"),
        "{e}"
    );
    // A type specialization is applied to the parameter.
    let f = func("float f<T>(T a)").specialized("T=float2").unwrap();
    assert_eq!(call(&f, &["tensor(3,2)"]).unwrap().call_shape, vec![3]);
    // Generators are read-only and keep their dims in place.
    let out = func("void f(out uint x, float y)");
    assert_eq!(
        call(&out, &["thread_id", "tensor(3)"]).unwrap_err().kind(),
        "type_mismatch"
    );
    let grid = map(func("float f(int2 g)"), "g", "(1,0)");
    assert_eq!(
        call(&grid, &["grid(shape=(2,3))"]).unwrap_err().kind(),
        "invalid_map"
    );
    // A short map covers the call dims exactly; huge positions are refused.
    let f2 = func("float f(float2 a)");
    assert_eq!(
        call(&map(f2.clone(), "a", "(1,)"), &["tensor(4,5,2)"])
            .unwrap_err()
            .kind(),
        "invalid_map"
    );
    let huge = map(f2, "a", "(18446744073709551615,0)");
    assert_eq!(
        call(&huge, &["tensor(4,5,2)"]).unwrap_err().kind(),
        "invalid_map"
    );
    // A read-write tensor is given a tensor, and the message says so.
    let rw = func("void f(RWTensor<float,1> t, float x)");
    let e = call(&rw, &["output", "tensor(3)"]).unwrap_err();
    assert_eq!(e.kind(), "unsized_output");
    assert!(e.to_string().contains("give it a tensor"), "{e}");
    // A specialization past Slang's short spellings is spelled in full.
    let huge = func("float f<let N : int>(vector<float,N> a)")
        .specialized("N=18446744073709551615")
        .unwrap();
    let e = call(&huge, &["tensor(2,3)"]).unwrap_err();
    assert_eq!(e.kind(), "type_shape");
    assert!(
        e.to_string().contains("vector<float,18446744073709551615>"),
        "{e}"
    );
    // Exponents with a sign are numbers.
    let small = Arg::parse(
        "rand_float(min=1e-5, max=2.5E+1)",
        &shape_call::TypeScope::new(),
    )
    .unwrap();
    assert_eq!(
        small,
        Arg::Generator(shape_call::Generator::RandFloat {
            min: 1e-5,
            max: 25.0,
            seed: shape_call::HashSeed::default()
        })
    );
    // A warm-up past the limit, or a range wider than f32 holds.
    let scope = shape_call::TypeScope::new();
    for bad in [
        "wang_hash(warmup=1025)",
        "rand_float(min=-3.4e38, max=3.4e38)",
    ] {
        assert_eq!(
            Arg::parse(bad, &scope).unwrap_err().kind(),
            "syntax",
            "{bad}"
        );
    }
}
