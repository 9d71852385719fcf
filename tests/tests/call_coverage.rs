//! Coverage of the grammar of vectorized calls by the random call
//! generator ([`shape_tests::calls::random_calls`]), and properties of
//! every resolution that need no oracle: no panics, errors that say what
//! they are, call shapes that are NumPy's broadcasting of the arguments'
//! placed shapes, inferred types and sizes that change nothing when
//! stated, a bound call that resolves as `Function::resolve` does, and
//! named arguments in any order.

use std::collections::BTreeMap;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestCaseError;
use proptest::test_runner::{Config, FileFailurePersistence, RngAlgorithm, TestRng, TestRunner};
use shape_call::{
    parse_type, Arg, ArgMap, CallArgs, CallError, Extent, Function, GenericArg, ParamType,
    Resolution, ResolvedArg,
};
use shape_tests::calls::{random_calls, RandomCall, CALL_ILL_FITS, CALL_PRODUCTIONS};

const DRAWS: usize = 2000;
const AT_LEAST: usize = 20;
/// Each ill-fit is drawn at least this often, always failing as meant.
const ILL_AT_LEAST: usize = 5;

#[test]
fn every_production_resolves_in_many_calls() {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::deterministic_rng(RngAlgorithm::ChaCha),
    );
    let strategy = random_calls();
    let mut counts: BTreeMap<&str, usize> = CALL_PRODUCTIONS.iter().map(|p| (*p, 0)).collect();
    let mut ill: BTreeMap<&str, usize> = CALL_ILL_FITS.iter().map(|(l, _)| (*l, 0)).collect();
    let (mut resolved, mut failed_as_meant) = (0, 0);
    let mut problems = Vec::new();
    for _ in 0..DRAWS {
        let call = strategy.new_tree(&mut runner).expect("a call").current();
        for used in &call.productions {
            assert!(
                CALL_PRODUCTIONS.contains(used),
                "production {used} is not in CALL_PRODUCTIONS"
            );
        }
        match (call.expected_error(), call.resolve()) {
            (None, Ok(r)) => {
                resolved += 1;
                if r.call_shape != call.call_shape {
                    problems.push(format!(
                        "call shape {:?}, where the generator drew {:?}\n  {call}",
                        r.call_shape, call.call_shape
                    ));
                    continue;
                }
                for used in &call.productions {
                    *counts.entry(used).or_default() += 1;
                }
            }
            (None, Err(e)) => problems.push(format!("error[{}]: {e}\n  {call}", e.kind())),
            (Some(kind), Ok(_)) => problems.push(format!(
                "{} should fail with {kind}, but resolves\n  {call}",
                call.ill_fit.unwrap_or_default()
            )),
            (Some(kind), Err(e)) => {
                if e.kind() == kind {
                    failed_as_meant += 1;
                    *ill.entry(call.ill_fit.unwrap_or_default()).or_default() += 1;
                } else {
                    problems.push(format!(
                        "{} should fail with {kind}, but gives error[{}]: {e}\n  {call}",
                        call.ill_fit.unwrap_or_default(),
                        e.kind()
                    ));
                }
            }
        }
    }
    println!(
        "{DRAWS} calls: {resolved} resolved, {failed_as_meant} failed as meant, {} otherwise",
        problems.len()
    );
    for (label, n) in counts.iter().chain(&ill) {
        println!("{n:6}  {label}");
    }
    for p in problems.iter().take(12) {
        println!("---\n{p}");
    }
    let short: Vec<String> = counts
        .iter()
        .filter(|(_, &n)| n < AT_LEAST)
        .map(|(p, n)| format!("{p} ({n})"))
        .chain(
            ill.iter()
                .filter(|(_, &n)| n < ILL_AT_LEAST)
                .map(|(p, n)| format!("{p} ({n})")),
        )
        .collect();
    assert!(
        problems.is_empty(),
        "{} calls did not resolve as drawn (the first are printed above)",
        problems.len()
    );
    assert!(
        short.is_empty(),
        "drawn by too few calls that resolve (or fail as meant): {short:?}"
    );
}

/// Found by `a_map_by_its_resolved_type_changes_nothing_even_for_generic_vectors`
/// (its seed is in `call_coverage.proptest-regressions`), which shrank to
/// `void f<T, let N : int>(vector<T,N> a)` called with
/// `a=inttensor(2,2)` and `--specialize 'f<int, 2>'`: adding `--map
/// a=int2`, the type `a` resolved to, was `type_mismatch`, because a map
/// by type was compared with the parameter's type as written, generics
/// and all. A map by type now binds the generics inside the parameter's
/// type (`T = int`) and fixes its sizes (`N = 2`), as slangpy's
/// `map(int2)` does.
#[test]
fn a_map_by_type_binds_the_generics_of_a_generic_vector() {
    let resolve = |sig: &str, arg: &str, map: Option<&str>, spec: Option<&str>| {
        let mut f = Function::parse(sig).unwrap();
        if let Some(m) = map {
            f = f.map("a", ArgMap::parse(m).unwrap());
        }
        if let Some(s) = spec {
            f = f.specialized(s).unwrap();
        }
        let args = CallArgs::new().named("a", Arg::parse(arg, &f.scope()).unwrap());
        outcome(&f.resolve(&args))
    };
    let v = "void f<T, let N : int>(vector<T,N> a)";
    // The shrunk case: the map states what the call resolved.
    let plain = resolve(v, "inttensor(2,2)", None, Some("f<int, 2>"));
    let r = plain.clone().unwrap();
    assert_eq!(
        (r.call_shape.clone(), r.args[0].ty.clone()),
        (vec![2], "int2".to_owned())
    );
    assert_eq!(
        resolve(v, "inttensor(2,2)", Some("int2"), Some("f<int, 2>")),
        plain
    );
    // Without a specialization, the map fixes `T` and `N` as a value does.
    assert_eq!(
        resolve(v, "float2", Some("float2"), None),
        resolve(v, "float2", None, None)
    );
    let r = resolve(v, "tensor(5,2)", Some("float2"), None).unwrap();
    assert_eq!(
        (r.call_shape, r.args[0].ty.clone()),
        (vec![5], "float2".to_owned())
    );
    // A generic size alone, and a generic element type with a fixed size.
    for sig in [
        "float f<let N : int>(vector<float,N> a)",
        "float f<T>(vector<T,2> a)",
    ] {
        assert_eq!(
            resolve(sig, "float2", Some("float2"), None),
            resolve(sig, "float2", None, None),
            "{sig}"
        );
    }
}

// ---------------------------------------------------------------------
// Properties that need no oracle.
// ---------------------------------------------------------------------

/// NumPy's broadcasting rule, as its documentation states it: the shapes
/// are aligned on the right (the shorter ones padded with 1 on the left);
/// along each dim the sizes must be equal or 1, and the result takes the
/// size that is not 1. `None` where they do not broadcast.
fn numpy_broadcast(shapes: &[Vec<u64>]) -> Option<Vec<u64>> {
    let rank = shapes.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = vec![1; rank];
    for s in shapes {
        for (i, &d) in s.iter().enumerate() {
            let o = rank - s.len() + i;
            if out[o] == 1 {
                out[o] = d;
            } else if d != 1 && d != out[o] {
                return None;
            }
        }
    }
    Some(out)
}

/// An argument's shape over `rank` call dims: its arg shape's dim j at
/// call dim `mapping[j]`, 1 elsewhere.
fn placed(a: &ResolvedArg, rank: usize) -> Vec<u64> {
    let mut s = vec![1; rank];
    for (&d, &m) in a.arg_shape.iter().zip(&a.mapping) {
        s[m] = d;
    }
    s
}

/// The call of `call`: the function and its arguments, or why they do
/// not read.
fn read(call: &RandomCall) -> Result<(Function, CallArgs), CallError> {
    let f = call.function()?;
    let args = call.call_args(&f)?;
    Ok((f, args))
}

/// Whether parameter `path` of `f`'s first overload (or its result) is a
/// bare generic type.
fn is_bare_generic(f: &Function, path: &str) -> bool {
    let sig = &f.overloads()[0];
    let ty = if path == "_result" {
        sig.result.as_ref()
    } else {
        sig.params.iter().find(|p| &*p.name == path).map(|p| &p.ty)
    };
    matches!(ty, Some(ParamType::Generic(_)))
}

/// Whether `ty` has a generic inside without being one (`vector<T,N>`,
/// `T[2]`, `vector<float,N>`).
fn generic_compound(ty: &ParamType) -> bool {
    !matches!(ty, ParamType::Generic(_))
        && (matches!(ty.leaf(), ParamType::Generic(_))
            || ty
                .type_shape()
                .iter()
                .any(|e| matches!(e, Extent::Generic(_))))
}

/// Every argument that has no map yet (the result included) mapped by
/// the type it resolved to resolves the same: a map by type states what
/// binding inferred. `generic_compounds` includes the parameters whose
/// type has a generic inside (`vector<T,N>`), which
/// [`a_map_by_type_binds_the_generics_of_a_generic_vector`] shows refused.
fn maps_by_resolved_type_change_nothing(
    call: &RandomCall,
    generic_compounds: bool,
) -> Result<(), TestCaseError> {
    let Ok((f, args)) = read(call) else {
        return Ok(());
    };
    let Ok(r) = f.resolve(&args) else {
        return Ok(());
    };
    let scope = f.scope();
    let sig = &f.overloads()[0];
    let mut typed = f.clone();
    let mut any = false;
    for a in r.args.iter().chain(&r.result) {
        let ty = if a.path == "_result" {
            sig.result.as_ref()
        } else {
            sig.params.iter().find(|p| *p.name == a.path).map(|p| &p.ty)
        };
        if call.maps.iter().any(|(n, _)| *n == a.path)
            || (!generic_compounds && ty.is_some_and(generic_compound))
        {
            continue;
        }
        let t = parse_type(&a.ty, &scope);
        prop_assert!(t.is_ok(), "`{}` resolved to {}: {}", a.path, a.ty, call);
        typed = typed.map(&a.path, ArgMap::Type(t.expect("read")));
        any = true;
    }
    if any {
        prop_assert_eq!(
            outcome(&typed.resolve(&args)),
            Ok(r),
            "every argument mapped by its resolved type: {}",
            call
        );
    }
    Ok(())
}

/// `r` and `other` as text, for comparison (errors compare by message).
fn outcome(r: &Result<Resolution, CallError>) -> Result<Resolution, String> {
    r.clone().map_err(|e| format!("error[{}]: {e}", e.kind()))
}

/// `PROPTEST_CASES` cases, or 256; failures persist beside this file
/// (`call_coverage.proptest-regressions`) and are replayed first.
fn config() -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(256),
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    /// Reading and resolving never panics, and every error has a kind and
    /// a message.
    #[test]
    fn errors_have_a_kind_and_a_message(call in random_calls()) {
        if let Err(e) = call.resolve() {
            prop_assert!(!e.kind().is_empty(), "{call}");
            prop_assert!(!e.to_string().trim().is_empty(), "error[{}] {call}", e.kind());
        }
    }

    /// The call shape is NumPy's broadcasting of every argument's arg
    /// shape placed at the call dims its mapping names (a generator
    /// without dims contributes nothing), and each argument's shapes are
    /// consistent: one mapping entry per argument dim, distinct, inside
    /// the call shape.
    #[test]
    fn the_call_shape_is_numpy_broadcasting_of_the_placed_arg_shapes(call in random_calls()) {
        let Ok(r) = call.resolve() else { return Ok(()) };
        let all: Vec<&ResolvedArg> = r.args.iter().chain(&r.result).collect();
        for a in &all {
            prop_assert_eq!(a.arg_shape.len(), a.mapping.len(), "`{}` of {}", a.path, call);
            prop_assert_eq!(a.call_dims, a.mapping.len(), "`{}` of {}", a.path, call);
            let mut seen = a.mapping.clone();
            seen.sort_unstable();
            seen.dedup();
            prop_assert_eq!(seen.len(), a.mapping.len(), "`{}` maps two dims to one: {}", a.path, call);
            prop_assert!(
                a.mapping.iter().all(|&m| m < r.call_shape.len()),
                "`{}` maps past the call shape {:?}: {}", a.path, r.call_shape, call
            );
        }
        let rank = all
            .iter()
            .flat_map(|a| a.mapping.iter().map(|&m| m + 1))
            .max()
            .unwrap_or(0);
        let shapes: Vec<Vec<u64>> = all.iter().map(|a| placed(a, rank)).collect();
        prop_assert_eq!(
            numpy_broadcast(&shapes),
            Some(r.call_shape.clone()),
            "placed shapes {:?}: {}", shapes, call
        );
    }

    /// Stating what was inferred changes nothing: a map by type equal to
    /// the type each bare `T` argument resolved to gives the same
    /// resolution, and so does specializing each generic size (and `T`)
    /// to what it resolved to.
    #[test]
    fn stating_what_was_inferred_changes_nothing(call in random_calls()) {
        let Ok((f, args)) = read(&call) else { return Ok(()) };
        let Ok(r) = f.resolve(&args) else { return Ok(()) };
        let scope = f.scope();
        // Maps by type.
        let mut typed = f.clone();
        let mut any = false;
        for a in r.args.iter().chain(&r.result) {
            if is_bare_generic(&f, &a.path) && !call.maps.iter().any(|(n, _)| *n == a.path) {
                let t = parse_type(&a.ty, &scope);
                prop_assert!(t.is_ok(), "`{}` resolved to {}, which does not read: {}", a.path, a.ty, call);
                typed = typed.map(&a.path, ArgMap::Type(t.expect("read")));
                any = true;
            }
        }
        if any {
            prop_assert_eq!(
                outcome(&typed.resolve(&args)),
                Ok(r.clone()),
                "maps by type of the bare generics: {}", call
            );
        }
        // Specializations of the generic size and type, where the call
        // does not already name them.
        let named = |g: &str| {
            call.specializations
                .iter()
                .any(|s| s.contains('<') || s.starts_with(&format!("{g}=")))
        };
        let sig = &f.overloads()[0];
        let mut sizes: Vec<(String, u64)> = Vec::new();
        let mut t_type: Option<ParamType> = None;
        for (p, a) in sig.params.iter().zip(&r.args) {
            let resolved = parse_type(&a.ty, &scope);
            prop_assert!(resolved.is_ok(), "`{}` resolved to {}: {}", a.path, a.ty, call);
            let resolved = resolved.expect("read");
            match (&p.ty, &resolved) {
                (ParamType::Vector(e, Extent::Generic(n)), ParamType::Vector(re, Extent::Fixed(k))) => {
                    sizes.push((n.to_string(), *k));
                    if matches!(**e, ParamType::Generic(_)) {
                        t_type.get_or_insert((**re).clone());
                    }
                }
                (ParamType::Generic(_), _) => {
                    t_type = Some(resolved.clone());
                }
                _ => {}
            }
        }
        let mut specialized = f.clone();
        let mut any = false;
        sizes.sort();
        sizes.dedup();
        for (n, k) in &sizes {
            if !named(n) {
                specialized = specialized.specialize(n, GenericArg::Size(*k));
                any = true;
            }
        }
        if let Some(t) = t_type {
            if !named("T") {
                specialized = specialized.specialize("T", GenericArg::Type(t));
                any = true;
            }
        }
        if any {
            let s = specialized.resolve(&args);
            prop_assert_eq!(
                s.as_ref().map(|s| s.call_shape.clone()).map_err(|e| e.to_string()),
                Ok(r.call_shape.clone()),
                "specialized as resolved: {}", call
            );
            prop_assert_eq!(outcome(&s), Ok(r.clone()), "specialized as resolved: {}", call);
        }
    }

    /// A call bound once and called (twice) resolves as
    /// `Function::resolve` does, errors included.
    #[test]
    fn binding_once_and_calling_gives_the_resolution(call in random_calls()) {
        let Ok((f, args)) = read(&call) else { return Ok(()) };
        let resolved = outcome(&f.resolve(&args));
        match f.bind(&args) {
            Ok(bound) => {
                prop_assert_eq!(&outcome(&bound.call(&args)), &resolved, "first call: {}", call);
                prop_assert_eq!(&outcome(&bound.call(&args)), &resolved, "second call: {}", call);
            }
            Err(e) => prop_assert_eq!(
                Err(format!("error[{}]: {e}", e.kind())),
                resolved,
                "{}", call
            ),
        }
    }

    /// Named arguments in another order, or positional ones given by
    /// name, resolve the same (an error of the same kind).
    #[test]
    fn reordering_named_arguments_changes_nothing(call in random_calls(), seed in any::<u64>()) {
        let Ok((f, args)) = read(&call) else { return Ok(()) };
        let n = call.args.len() - call.positional;
        let mut order: Vec<usize> = (0..n).collect();
        let mut s = seed | 1;
        for i in (1..n).rev() {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            order.swap(i, (s % (i as u64 + 1)) as usize);
        }
        let reordered = call.call_args_ordered(&f, Some(&order));
        prop_assert!(reordered.is_ok(), "{}", call);
        // And with the positional arguments given by name.
        let mut all_named = call.clone();
        all_named.positional = 0;
        let named = all_named.call_args(&f);
        prop_assert!(named.is_ok(), "{}", call);
        let a = f.resolve(&args);
        for (what, b) in [
            ("reordered", f.resolve(&reordered.expect("read"))),
            ("all named", f.resolve(&named.expect("read"))),
        ] {
            match (&a, &b) {
                (Ok(a), Ok(b)) => prop_assert_eq!(a, b, "{} {:?}: {}", what, order, call),
                (Err(a), Err(b)) => prop_assert_eq!(a.kind(), b.kind(), "{} {:?}: {} / {}: {}", what, order, a, b, call),
                _ => prop_assert!(false, "{} {:?}: {:?} against {:?}: {}", what, order, outcome(&a), outcome(&b), call),
            }
        }
    }

    /// A map by type equal to each argument's resolved type changes
    /// nothing, for every argument but those whose parameter type has a
    /// generic inside (below).
    #[test]
    fn a_map_by_its_resolved_type_changes_nothing(call in random_calls()) {
        maps_by_resolved_type_change_nothing(&call, false)?;
    }

    /// The same, with the parameters whose type has a generic inside:
    /// fails, see [`a_map_by_type_binds_the_generics_of_a_generic_vector`].
    #[test]
    fn a_map_by_its_resolved_type_changes_nothing_even_for_generic_vectors(call in random_calls()) {
        maps_by_resolved_type_change_nothing(&call, true)?;
    }

    /// A short map (slangpy's, the call dims only) resolves as the full
    /// map it stands for: the type dims follow, in order, after the
    /// highest position it names.
    #[test]
    fn a_short_map_is_its_full_map(call in random_calls()) {
        let Ok((f, args)) = read(&call) else { return Ok(()) };
        let resolved = outcome(&f.resolve(&args));
        let scope = f.scope();
        for (k, (name, text)) in call.maps.iter().enumerate() {
            let Ok(ArgMap::Dims(entries)) = ArgMap::parse(text) else { continue };
            let Some(full) = call
                .args
                .iter()
                .find(|(n, _)| n == name)
                .and_then(|(_, a)| Arg::parse(a, &scope).ok())
                .and_then(|a| a.full_shape())
                .map(|s| s.len())
            else {
                continue;
            };
            if entries.is_empty() || entries.len() >= full {
                continue;
            }
            let next = entries.iter().max().map_or(0, |m| m + 1);
            let mut long = entries.clone();
            long.extend(next..next + full - entries.len());
            let mut other = call.clone();
            other.maps[k].1 = format!(
                "({})",
                long.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
            );
            prop_assert_eq!(
                outcome(&other.resolve()),
                resolved.clone(),
                "{} against {}", call, other
            );
        }
    }
}
