//! A user's WGSL function as an operation of a graph (issue 30, item 3):
//! built through the Rust API, mixed with built-in operations, run on the
//! CPU (through the WGSL interpreter) and on wgpu (the function inlined),
//! each compared with a plain Rust closure of the same computation.

use std::sync::Arc;

use backend_cpu::CpuBackend;
use shape_call::CallOp;
use shape_graph::Graph;
use shape_run::{RunGraph, RunOptions};
use shape_tests::differential::{assert_backends_agree, Tolerance};
use shape_tests::gpu::wgpu_or_skip;
use shape_tests::programs::Program;

const BRIGHTNESS: &str =
    "fn brightness(c: vec3<f32>, gain: f32) -> vec3<f32> { return clamp(c * gain, vec3<f32>(0.0), vec3<f32>(1.0)); }";

fn values(n: usize, seed: u32) -> Vec<f32> {
    (0..n)
        .map(|i| {
            (((i as u32).wrapping_mul(2654435761).wrapping_add(seed) >> 8) % 1000) as f32 / 500.0
                - 0.5
        })
        .collect()
}

/// `y = relu(w @ brightness(img, gain))` over 6 pixels of 3 channels.
fn network() -> (Program, Vec<f32>) {
    let mut g = Graph::new();
    let img = g.input("img", "6|3").unwrap();
    let gain = g.parameter("gain").unwrap();
    let w = g.parameter_with_spec("w", "|3->2").unwrap();
    let op = CallOp::parse(BRIGHTNESS).unwrap();
    let b = g.apply_named("b", Arc::new(op), &[img, gain]).unwrap();
    let h = g.compose(w, b).unwrap();
    let y = g.unary("relu", h).unwrap();
    let (img_v, w_v) = (values(18, 1), values(6, 7));
    let gain_v = 1.7f32;
    // The closure: the same network on the host.
    let mut expected = Vec::new();
    for p in 0..6 {
        let c: Vec<f32> = (0..3)
            .map(|k| (img_v[p * 3 + k] * gain_v).clamp(0.0, 1.0))
            .collect();
        for o in 0..2 {
            let s: f32 = (0..3).map(|k| w_v[o * 3 + k] * c[k]).sum();
            expected.push(s.max(0.0));
        }
    }
    let program = Program::with_named_data(
        g,
        vec![b, y],
        [("img", img_v), ("gain", vec![gain_v]), ("w", w_v)],
    )
    .unwrap();
    (program, expected)
}

fn run_on(backend: &mut impl shape_core::Backend, program: &Program) -> Vec<f32> {
    let solved = program.graph.solve().unwrap();
    let y = program.results[1];
    let mut out = solved
        .run(
            backend,
            program.inputs.clone(),
            &[y],
            &RunOptions::default(),
        )
        .unwrap();
    assert_eq!(out.get(y).unwrap().dims(), &[6, 2]);
    out.remove(y).unwrap().into_values()
}

fn close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!(Tolerance::GPU.agrees(*x, *y), "{a:?} vs {b:?}");
    }
}

#[test]
fn shapes_follow_the_call_shape_rules() {
    let (program, _) = network();
    let solved = program.graph.solve().unwrap();
    let b = program.results[0];
    assert_eq!(solved.shape(b).unwrap().to_string(), "6|->3");
    let gain = program
        .inputs
        .tensors()
        .find(|&t| program.graph.tensor_ref(t).unwrap().name.as_ref() == "gain")
        .unwrap();
    assert_eq!(solved.shape(gain).unwrap().to_string(), "|->");
}

#[test]
fn a_call_in_a_network_runs_on_the_cpu_through_the_interpreter() {
    let (program, expected) = network();
    close(&run_on(&mut CpuBackend::new(), &program), &expected);
}

#[test]
fn a_call_in_a_network_runs_on_wgpu_inlined() {
    let Some(mut gpu) = wgpu_or_skip("a_call_in_a_network_runs_on_wgpu_inlined") else {
        return;
    };
    let (program, expected) = network();
    close(&run_on(&mut gpu, &program), &expected);
    let mut cpu = CpuBackend::new();
    assert_backends_agree(&program, &mut [&mut cpu, &mut gpu], Tolerance::GPU);
}

#[test]
fn batch_rows_broadcast_and_scalars_have_empty_output_rows() {
    let mut g = Graph::new();
    let a = g.input("a", "4, 1|").unwrap();
    let b = g.input("b", "5|").unwrap();
    let op = CallOp::parse("fn mul(a: f32, b: f32) -> f32 { return a * b; }").unwrap();
    let y = g.apply(Arc::new(op), &[a, b]).unwrap();
    let solved = g.solve().unwrap();
    assert_eq!(solved.shape(y).unwrap().to_string(), "4, 5|->");
    let (av, bv) = (values(4, 3), values(5, 9));
    let p = Program::with_named_data(g, vec![y], [("a", av.clone()), ("b", bv.clone())]).unwrap();
    let got = run_on_one(&mut CpuBackend::new(), &p);
    let expected: Vec<f32> = (0..20).map(|i| av[i / 5] * bv[i % 5]).collect();
    close(&got, &expected);
    if let Some(mut gpu) = wgpu_or_skip("batch_rows_broadcast_and_scalars_have_empty_output_rows") {
        close(&run_on_one(&mut gpu, &p), &expected);
    }
}

fn run_on_one(backend: &mut impl shape_core::Backend, program: &Program) -> Vec<f32> {
    let solved = program.graph.solve().unwrap();
    let y = program.results[0];
    let mut out = solved
        .run(
            backend,
            program.inputs.clone(),
            &[y],
            &RunOptions::default(),
        )
        .unwrap();
    out.remove(y).unwrap().into_values()
}

#[test]
fn arguments_that_do_not_broadcast_are_shape_errors() {
    let mut g = Graph::new();
    let a = g.input("a", "4|").unwrap();
    let b = g.input("b", "5|").unwrap();
    let op = CallOp::parse("fn mul(a: f32, b: f32) -> f32 { return a * b; }").unwrap();
    let e = g.apply(Arc::new(op), &[a, b]).unwrap_err();
    assert_eq!(e.kind(), "dim_mismatch", "{e}");
    // A vector parameter given a scalar tensor.
    let mut g = Graph::new();
    let a = g.input("a", "4|2").unwrap();
    let op = CallOp::parse(BRIGHTNESS).unwrap();
    let one = g.input("one", "|").unwrap();
    assert!(g.apply(Arc::new(op), &[a, one]).is_err());
}

#[test]
fn functions_that_are_not_operations_are_refused() {
    for src in [
        "fn f(a: f32, p: ptr<function, f32>) -> f32 { *p = a; return a; }",
        "fn f(a: f32) { }",
        "float f(float a)",
    ] {
        let e = CallOp::parse(src).unwrap_err();
        assert_eq!(e.kind(), "not_an_operation", "{src}: {e}");
    }
    assert_eq!(
        CallOp::parse("fn f(a: f32) -> f32 { return a +; }")
            .unwrap_err()
            .kind(),
        "wgsl"
    );
}

mod program_language {
    use super::*;
    use shape_lang::compile::compile;
    use shape_lang::syntax::parse;

    const PROGRAM: &str = "function brightness = \"fn brightness(c: vec3<f32>, gain: f32) -> vec3<f32> { return clamp(c * gain, vec3<f32>(0.0), vec3<f32>(1.0)); }\"\ninput img: 6|3\nparam gain\nparam w: |3->2\ny = relu(w @ brightness(img, gain))\n";

    fn error_of(src: &str) -> (String, String, Option<std::ops::Range<usize>>) {
        let e = parse(src)
            .map_err(shape_lang::ProgramError::from)
            .and_then(|p| compile(&p).and_then(|c| c.solve().map(|_| ())))
            .unwrap_err();
        (e.kind().to_string(), e.to_string(), e.span())
    }

    #[test]
    fn a_program_calls_a_function_among_built_ins() {
        let compiled = compile(&parse(PROGRAM).unwrap()).unwrap();
        let solved = compiled.solve().unwrap();
        let y = compiled.tensor("y").unwrap();
        assert_eq!(solved.shape(y).unwrap().to_string(), "6|->2");
        // The same values as the Rust-API network.
        let (program, expected) = network();
        let names = |t| compiled.graph.tensor_ref(t).unwrap().name.to_string();
        let data: Vec<(String, Vec<f32>)> = program
            .inputs
            .tensors()
            .map(|t| {
                let n = program.graph.tensor_ref(t).unwrap().name.to_string();
                (n, program.inputs.get(t).unwrap().values().to_vec())
            })
            .collect();
        let _ = names;
        let p = Program::with_named_data(compiled.graph.clone(), vec![y], data).unwrap();
        close(&run_on_one(&mut CpuBackend::new(), &p), &expected);
        if let Some(mut gpu) = wgpu_or_skip("a_program_calls_a_function_among_built_ins") {
            close(&run_on_one(&mut gpu, &p), &expected);
        }
    }

    #[test]
    fn a_number_argument_is_a_scalar() {
        let src = "function times = \"fn times(a: f32, b: f32) -> f32 { return a * b; }\"\ninput a: 4|\ny = times(a, 2.5)\n";
        let compiled = compile(&parse(src).unwrap()).unwrap();
        let y = compiled.tensor("y").unwrap();
        assert_eq!(
            compiled.solve().unwrap().shape(y).unwrap().to_string(),
            "4|->"
        );
    }

    #[test]
    fn errors_are_typed_and_placed_at_the_statement() {
        let base = "function times = \"fn times(a: f32, b: f32) -> f32 { return a * b; }\"\ninput a: 4|\ninput b: 5|\n";
        // An unknown function.
        let src = format!("{base}y = timess(a, b)\n");
        let (kind, _, span) = error_of(&src);
        assert_eq!(kind, "unknown_function");
        assert_eq!(&src[span.unwrap()], "timess");
        // Arity.
        let src = format!("{base}y = times(a)\n");
        let (kind, msg, span) = error_of(&src);
        assert_eq!(kind, "arguments", "{msg}");
        assert_eq!(&src[span.unwrap()], "times(a)");
        // Shapes that do not broadcast: at the call.
        let src = format!("{base}y = times(a, b)\n");
        let (kind, msg, span) = error_of(&src);
        assert_eq!(kind, "dim_mismatch", "{msg}");
        assert!(
            span.is_some_and(|s| src[s].contains("times(a, b)")),
            "{msg}"
        );
        // Not WGSL: at the source.
        let src = "function f = \"fn f(a: f32) -> f32 { return a +; }\"\n";
        let (kind, _, span) = error_of(src);
        assert_eq!(kind, "wgsl");
        assert_eq!(&src[span.unwrap()], "fn f(a: f32) -> f32 { return a +; }");
        // Not an operation, a wrong name, a built-in's name.
        let (kind, _, _) = error_of("function f = \"fn f(a: f32) { }\"\n");
        assert_eq!(kind, "not_an_operation");
        let (kind, _, _) = error_of("function g = \"fn f(a: f32) -> f32 { return a; }\"\n");
        assert_eq!(kind, "function_name");
        let (kind, _, _) = error_of("function relu = \"fn relu(a: f32) -> f32 { return a; }\"\n");
        assert_eq!(kind, "function_redefined");
    }
}

/// The random program generator draws calls of every function of its pool
/// (the notation issue's coverage of the function statement), and a
/// program with calls printed as text (`function` statements first) reads
/// back through the program language to the same shapes.
#[test]
fn random_programs_draw_calls_that_print_back_as_text() {
    use shape_tests::programs::{program, CALL_FUNCTIONS};
    let mut drawn = vec![0usize; CALL_FUNCTIONS.len()];
    let mut with_calls = 0;
    let seeds = 400;
    for seed in 0..seeds {
        let p = program(seed * 7919 + 1, 1 + (seed as usize % 8));
        let g = &p.graph;
        let mut any = false;
        for op in g.op_ids() {
            let name = g.op(op).unwrap().0.name().to_string();
            if let Some(k) = CALL_FUNCTIONS.iter().position(|f| f.name == name) {
                drawn[k] += 1;
                any = true;
            }
        }
        if !any {
            continue;
        }
        with_calls += 1;
        let text = p.to_text().unwrap();
        let compiled = shape_lang::compile::compile(&shape_lang::syntax::parse(&text).unwrap())
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        let (a, b) = (g.solve().unwrap(), compiled.solve().unwrap());
        for t in g.tensor_ids() {
            let name = g.name(t).unwrap();
            let u = compiled.tensor(name).unwrap();
            assert_eq!(
                a.shape(t).unwrap().memory_dims(),
                b.shape(u).unwrap().memory_dims(),
                "`{name}` in\n{text}"
            );
            assert_eq!(
                a.shape(t).unwrap().sizes(shape_core::RowKind::Batch),
                b.shape(u).unwrap().sizes(shape_core::RowKind::Batch),
                "`{name}` in\n{text}"
            );
        }
    }
    // About a third of the programs call a function (one step in 8 does).
    assert!(
        with_calls > seeds / 5,
        "{with_calls} of {seeds} programs call a function"
    );
    for (f, n) in CALL_FUNCTIONS.iter().zip(&drawn) {
        assert!(*n > 0, "`{}` was never drawn in {seeds} programs", f.name);
    }
    eprintln!("{with_calls} of {seeds} programs call a function; calls drawn: {drawn:?}");
}
