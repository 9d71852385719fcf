//! The CPU interpreter of WGSL (`shape_call::Interpreter`) checked
//! against wgpu: random functions from [`shape_tests::wgsl`], batched into
//! shared pipelines, and the seed documents' and slangpy's example
//! functions as conformance cases (interpreter, wgpu and a hand-written
//! Rust closure agree).
//!
//! Without a GPU adapter the random functions still run on the
//! interpreter (none may be unsupported or fail), and the conformance
//! cases hold the interpreter to the closures; `SHAPE_REQUIRE_GPU=1`
//! makes a missing adapter a failure.

use std::cell::RefCell;
use std::time::Instant;

use backend_wgpu::WgpuBackend;
use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, TestCaseError, TestRunner};
use shape_call::{
    Arg, CallArgs, CallKernel, Function, InterpretOptions, Interpreter, Signature, Value,
    DEFAULT_STEP_LIMIT,
};
use shape_tests::calls::CallRunner;
use shape_tests::calls::{assert_call_agrees, call_data, call_kernel, Interpreted};
use shape_tests::gpu::wgpu_or_skip;
use shape_tests::wgsl::{Batch, Component, Sample, DISPATCHER};

/// Generated functions per pipeline (one module, one compile).
const BATCH: usize = 32;
/// Argument samples per generated function.
const SAMPLES: usize = 8;
/// Generated functions the property runs by default (CI); the variable
/// `SHAPE_WGSL_FUNCTIONS` raises it.
const DEFAULT_FUNCTIONS: usize = 1024;

/// The tolerance for floats that rounding may change (results marked
/// [`Component::Float`]): `|gpu - cpu| <= TOLERANCE * max(1, |gpu|,
/// |cpu|)`.
///
/// Why this size: WGSL specifies `+ - *` correctly rounded but `/` to 2.5
/// ULP, `exp`/`exp2` to 3 + 2|x| ULP, `log`/`log2` to 2^-21 absolute near
/// 1 and 3 ULP elsewhere, `sqrt`, `pow`, `length`, `normalize` and
/// `smoothstep` as inherited from their formulas, `sin`/`cos` only to
/// 2^-11 absolute on [-π, π], and lets a compiler contract `a * b + c`
/// into a fused `fma`. The interpreter computes each operation correctly
/// rounded (Rust's `f32`). Each generated function composes a few of these
/// over values the generator keeps within 16 in magnitude (64 for
/// variables), with built-ins whose slope on their guarded domains is at
/// most about 20 (`exp` on [-4, 3], `tan` on [-1.2, 1.2], `log` from
/// 0.25), so a few ULP per operation of values up to 64 amplified through
/// a few such steps stays well below 2^-10 of the result or of 1. The GPU
/// may also ignore the sign of zero, which equality already ignores.
/// Integers, bools and exact floats (see [`shape_tests::wgsl`]) get no
/// tolerance at all.
const TOLERANCE: f32 = 1.0 / 1024.0;

fn functions_wanted() -> usize {
    std::env::var("SHAPE_WGSL_FUNCTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_FUNCTIONS)
}

/// What a run of the property counted.
#[derive(Debug, Default)]
struct Tally {
    functions: usize,
    samples: usize,
    discarded_samples: usize,
    functions_with_discards: usize,
    functions_discarded: usize,
    unsupported: usize,
    gpu_samples: usize,
    float_compared: usize,
    worst_float_error: f32,
}

/// The kernel that calls the dispatcher of `batch` once per sample.
fn batch_kernel(batch: &Batch) -> (CallKernel, Vec<Vec<f32>>) {
    let f = Function::parse(&batch.source).unwrap_or_else(|e| panic!("{e}\n{}", batch.source));
    let n = batch.samples.len() as u64;
    let args = CallArgs::new()
        .arg(Arg::tensor(&[n]))
        .arg(Arg::tensor(&[n, 4]))
        .arg(Arg::tensor(&[n, 4]))
        .arg(Arg::tensor(&[n, 4]))
        .arg(Arg::tensor(&[n, 4]));
    let kernel = call_kernel(&f, &args);
    let flat = |g: fn(&Sample) -> [f32; 4]| batch.samples.iter().flat_map(g).collect::<Vec<f32>>();
    let data = vec![
        batch.samples.iter().map(|s| s.sel as f32).collect(),
        flat(|s| s.x),
        flat(|s| s.y),
        flat(|s| s.nh),
        flat(|s| s.nl),
    ];
    let buffers = kernel.buffers(data).expect("the batch's data fits");
    (kernel, buffers)
}

fn vector(v: [f32; 4]) -> Value {
    Value::Vector(v.iter().map(|&x| Value::F32(x)).collect())
}

/// The interpreter's result for each sample: `None` where the sample
/// left a built-in's domain.
fn interpret(batch: &Batch, tally: &mut Tally) -> Result<Vec<Option<[f32; 4]>>, String> {
    let it = Interpreter::new(&batch.source)
        .map_err(|e| {
            format!(
                "the generated module does not validate: {e}\n{}",
                batch.source
            )
        })?
        .with_options(InterpretOptions {
            step_limit: DEFAULT_STEP_LIMIT,
            check_domains: true,
        });
    let mut out = Vec::with_capacity(batch.samples.len());
    let mut discards = vec![0usize; batch.functions.len()];
    for s in &batch.samples {
        let mut args = [
            Value::F32(s.sel as f32),
            vector(s.x),
            vector(s.y),
            vector(s.nh),
            vector(s.nl),
        ];
        match it.call(DISPATCHER, &mut args) {
            Ok(Some(Value::Vector(v))) => {
                let r: Vec<f32> = v.iter().map(|c| c.as_f32().unwrap_or(f32::NAN)).collect();
                out.push(Some([r[0], r[1], r[2], r[3]]));
            }
            Ok(other) => return Err(format!("the dispatcher returned {other:?}")),
            Err(e) if e.kind() == "out_of_domain" => {
                discards[s.sel as usize] += 1;
                out.push(None);
            }
            Err(e) if e.kind() == "unsupported_wgsl" => {
                tally.unsupported += 1;
                return Err(format!(
                    "the interpreter does not support `{}`: {e}\n{}",
                    batch.functions[s.sel as usize].name, batch.functions[s.sel as usize].source
                ));
            }
            Err(e) => {
                return Err(format!(
                    "the interpreter failed on `{}` with {s:?}: {e}\n{}",
                    batch.functions[s.sel as usize].name, batch.functions[s.sel as usize].source
                ))
            }
        }
    }
    tally.functions += batch.functions.len();
    tally.samples += batch.samples.len();
    tally.discarded_samples += discards.iter().sum::<usize>();
    tally.functions_with_discards += discards.iter().filter(|&&d| d > 0).count();
    tally.functions_discarded += discards
        .iter()
        .filter(|&&d| d * batch.functions.len() >= batch.samples.len())
        .count();
    Ok(out)
}

/// Runs `batch` on the interpreter and, when there is one, on `gpu`, and
/// compares them.
fn check_batch(
    batch: &Batch,
    gpu: Option<&mut WgpuBackend>,
    tally: &mut Tally,
) -> Result<(), String> {
    let expected = interpret(batch, tally)?;
    let (kernel, buffers) = batch_kernel(batch);
    // The kernel path of the interpreter computes the same values.
    let mut whole = buffers.clone();
    kernel
        .run_interpreted(&mut whole)
        .map_err(|e| format!("run_interpreted: {e}"))?;
    let result = kernel.leaves.len() - 1;
    for (i, e) in expected.iter().enumerate() {
        if let Some(e) = e {
            let got = &whole[result][4 * i..4 * i + 4];
            if got.iter().zip(e).any(|(a, b)| a.to_bits() != b.to_bits()) {
                return Err(format!(
                    "run_interpreted gives {got:?} where the interpreter's call gives {e:?}"
                ));
            }
        }
    }
    let Some(gpu) = gpu else {
        return Ok(());
    };
    let found = gpu
        .run_call_on_host(&kernel, buffers)
        .map_err(|e| format!("wgpu could not run the batch: {e}\n{}", batch.source))?;
    let found = &found[result];
    for (i, (s, e)) in batch.samples.iter().zip(&expected).enumerate() {
        let Some(e) = e else { continue };
        tally.gpu_samples += 1;
        let f = &batch.functions[s.sel as usize];
        let g = &found[4 * i..4 * i + 4];
        for c in 0..4 {
            let (a, b) = (e[c], g[c]);
            let ok = match f.components[c] {
                Component::Pad | Component::Exact => a == b,
                Component::Float => {
                    tally.float_compared += 1;
                    let scale = 1f32.max(a.abs()).max(b.abs());
                    let err = (a - b).abs() / scale;
                    if err.is_finite() {
                        tally.worst_float_error = tally.worst_float_error.max(err);
                    }
                    b.is_finite() && err <= TOLERANCE
                }
            };
            if !ok {
                return Err(format!(
                    "`{}` disagrees: component {c} is {a:?} on the interpreter and {b:?} on {} ({:?})\n\
                     sample: {s:?} (integers {:?})\ninterpreter {e:?}\nwgpu        {g:?}\n{}",
                    f.name,
                    shape_core::Backend::name(gpu),
                    f.components[c],
                    s.ints(),
                    f.source
                ));
            }
        }
    }
    Ok(())
}

/// Random WGSL functions run on the interpreter and on wgpu agree:
/// integers, bools and exact floats exactly, other floats within
/// [`TOLERANCE`]. Samples the interpreter finds out of a built-in's
/// domain are discarded and counted; no generated function may be
/// unsupported.
#[test]
fn random_functions_agree_with_wgpu() {
    let wanted = functions_wanted();
    let cases = wanted.div_ceil(BATCH) as u32;
    let gpu = RefCell::new(wgpu_or_skip("random_functions_agree_with_wgpu"));
    let tally = RefCell::new(Tally::default());
    let start = Instant::now();
    let mut runner = TestRunner::new(Config {
        cases,
        // Relative to the package (cargo runs tests there).
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/wgsl_interpreter.proptest-regressions",
        ))),
        // A seed fails or passes as a whole: shrinking it means nothing.
        max_shrink_iters: 0,
        ..Config::default()
    });
    let result = runner.run(&any::<u64>(), |seed| {
        let batch = Batch::generate(seed, BATCH, SAMPLES);
        let mut gpu = gpu.borrow_mut();
        check_batch(&batch, gpu.as_mut(), &mut tally.borrow_mut())
            .map_err(|e| TestCaseError::fail(format!("seed {seed}: {e}")))
    });
    let t = tally.into_inner();
    let share = |a: usize, b: usize| 100.0 * a as f64 / b.max(1) as f64;
    eprintln!(
        "wgsl_interpreter: {} functions ({} samples) in {:.1}s on {}; discarded by the domain filter: {:.2}% of samples, \
         {:.2}% of functions with any sample discarded, {:.2}% with all discarded; unsupported: {:.2}%; \
         {} samples compared on the GPU, {} float components, worst relative float error {:e}",
        t.functions,
        t.samples,
        start.elapsed().as_secs_f64(),
        gpu.borrow().as_ref().map_or("no GPU (interpreter only)".into(), shape_core::Backend::name),
        share(t.discarded_samples, t.samples),
        share(t.functions_with_discards, t.functions),
        share(t.functions_discarded, t.functions),
        share(t.unsupported, t.functions),
        t.gpu_samples,
        t.float_compared,
        t.worst_float_error,
    );
    if let Err(e) = result {
        panic!("{e}");
    }
    assert_eq!(t.unsupported, 0);
    assert!(t.functions >= wanted, "{} functions run", t.functions);
    // The domain filter must leave most of the work to compare.
    assert!(
        t.discarded_samples * 4 < t.samples,
        "{} of {} samples discarded",
        t.discarded_samples,
        t.samples
    );
    if gpu.borrow().is_some() {
        assert!(t.gpu_samples * 4 >= t.samples * 3);
    }
}

/// Narrows the failing seed in `SHAPE_WGSL_SEED` down to its functions
/// that fail alone (`cargo test --test wgsl_interpreter -- --ignored`).
#[test]
#[ignore = "a tool: set SHAPE_WGSL_SEED"]
fn narrow_a_failing_seed() {
    let Some(seed) = std::env::var("SHAPE_WGSL_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
    else {
        return;
    };
    narrow(seed);
}

/// Found by `random_functions_agree_with_wgpu` on 2026-11-27 (lavapipe,
/// Vulkan), not yet explained, so kept out of the regression file that CI
/// replays: function `wf11` of this seed returns `true` on the
/// interpreter and `false` on llvmpipe in the batch, while the same
/// function with the same arguments through `shapec call` gives `true` on
/// both. Run with `--ignored` to see it.
#[test]
#[ignore = "a known disagreement under investigation (seed 9481323675975442477)"]
fn seed_9481323675975442477_agrees() {
    narrow(9_481_323_675_975_442_477);
}

/// Checks each function of the batch of `seed` alone, and fails naming
/// those that disagree.
fn narrow(seed: u64) {
    let batch = Batch::generate(seed, BATCH, SAMPLES);
    let mut gpu = wgpu_or_skip("narrow_a_failing_seed");
    let mut failing = Vec::new();
    for k in 0..batch.functions.len() {
        let one = batch.subset(&[k]);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            check_batch(&one, gpu.as_mut(), &mut Tally::default())
        }));
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failing.push(format!("{}: {e}", batch.functions[k].name)),
            Err(_) => {
                failing.push(format!(
                    "{} panicked:\n{}",
                    batch.functions[k].name, batch.functions[k].source
                ));
                gpu = wgpu_or_skip("narrow_a_failing_seed");
            }
        }
    }
    assert!(failing.is_empty(), "{}", failing.join("\n\n"));
}

// ----- conformance cases: the seed documents' and slangpy's examples -----

/// Runs `kernel` through the closure `f` (the reference executor), the
/// interpreter and wgpu (the interpreter alone without an adapter): all
/// agree exactly (the data are quarter-integers, so every case here
/// computes exactly).
fn three_way(
    test: &str,
    kernel: &CallKernel,
    data: Vec<Vec<f32>>,
    f: &mut dyn FnMut(&mut [Vec<f32>]),
) {
    assert!(
        kernel.source.is_some() || kernel.body.is_some(),
        "a case with WGSL"
    );
    let mut gpu = wgpu_or_skip(test);
    let runner: &mut dyn CallRunner = match gpu.as_mut() {
        Some(gpu) => gpu,
        None => &mut Interpreted,
    };
    assert_call_agrees(runner, kernel, data, f);
}

fn parsed(f: &Function, text: &str) -> Arg {
    Arg::parse(text, &f.scope()).unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// slangpy's first example: a dot product of a tensor of vectors with
/// one vector.
#[test]
fn conformance_dot_product() {
    let f = Function::parse("fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }")
        .unwrap();
    let args = CallArgs::new()
        .arg(Arg::tensor(&[8, 3]))
        .arg(Arg::tensor(&[3]));
    let k = call_kernel(&f, &args);
    three_way(
        "conformance_dot_product",
        &k,
        call_data(&k, 1),
        &mut |v: &mut [Vec<f32>]| {
            v[2][0] = v[0][0] * v[1][0] + v[0][1] * v[1][1] + v[0][2] * v[1][2];
        },
    );
}

/// A polynomial by Horner's rule, its coefficients a vector indexed in a
/// loop that counts down.
#[test]
fn conformance_polynomial() {
    let f = Function::parse(
        "fn poly(x: f32, c: vec4<f32>) -> f32 {\n  var s = 0.0;\n  for (var i = 3; i >= 0; i--) { s = s * x + c[i]; }\n  return s;\n}",
    )
    .unwrap();
    let args = CallArgs::new()
        .arg(Arg::tensor(&[3, 5]))
        .arg(Arg::tensor(&[5, 4]));
    let k = call_kernel(&f, &args);
    three_way(
        "conformance_polynomial",
        &k,
        call_data(&k, 2),
        &mut |v: &mut [Vec<f32>]| {
            let (x, c) = (v[0][0], &v[1]);
            v[2][0] = ((c[3] * x + c[2]) * x + c[1]) * x + c[0];
        },
    );
}

/// The seed documents' image brightness: every pixel of an image times
/// one gain, clamped to [0, 1].
#[test]
fn conformance_brightness() {
    let f = Function::parse(
        "fn brightness(c: vec3<f32>, gain: f32) -> vec3<f32> { return clamp(c * gain, vec3<f32>(0.0), vec3<f32>(1.0)); }",
    )
    .unwrap();
    let args = CallArgs::new()
        .arg(Arg::tensor(&[4, 5, 3]))
        .arg(Arg::tensor(&[]));
    let k = call_kernel(&f, &args);
    assert_eq!(k.call_shape, vec![4, 5]);
    three_way(
        "conformance_brightness",
        &k,
        call_data(&k, 3),
        &mut |v: &mut [Vec<f32>]| {
            let gain = v[1][0];
            let c: Vec<f32> = v[0].iter().map(|x| (x * gain).clamp(0.0, 1.0)).collect();
            v[2].copy_from_slice(&c);
        },
    );
}

/// A struct with a matrix: an affine transform, `m * p + t`, given field
/// by field (a tensor of matrices, one shared offset).
#[test]
fn conformance_struct_with_a_matrix() {
    let f = Function::parse(
        "struct Affine { m: mat3x3<f32>, t: vec3<f32> }\nfn apply(x: Affine, p: vec3<f32>) -> vec3<f32> { return x.m * p + x.t; }",
    )
    .unwrap();
    let args = CallArgs::new()
        .arg(parsed(&f, "{m=tensor(6,3,3), t=tensor(3)}"))
        .arg(Arg::tensor(&[6, 3]));
    let k = call_kernel(&f, &args);
    three_way(
        "conformance_struct_with_a_matrix",
        &k,
        call_data(&k, 4),
        &mut |v: &mut [Vec<f32>]| {
            // Leaves: m (column-major), t, p, the result.
            for r in 0..3 {
                v[3][r] = (0..3).map(|c| v[0][3 * c + r] * v[2][c]).sum::<f32>() + v[1][r];
            }
        },
    );
}

/// slangpy's `Slice` accessor: a declaration with a WGSL body that reads
/// an element of a shared image through `image_load` and scales it by a
/// size from `image_size`.
#[test]
fn conformance_slice_accessor() {
    let f = Function::new(
        Signature::parse("float read(int2 index, Slice<2,float> image)")
            .unwrap()
            .with_wgsl_body(
                "{ return image_load(u32(index.x), u32(index.y)) * f32(image_size(1u)) + f32(image_size(0u)); }",
            ),
    );
    let args = CallArgs::new()
        .arg(parsed(&f, "inttensor(5,2)"))
        .arg(Arg::tensor(&[4, 6]));
    let k = call_kernel(&f, &args);
    assert_eq!(k.call_shape, vec![5]);
    let mut data = call_data(&k, 5);
    data[0] = vec![0.0, 0.0, 3.0, 5.0, 1.0, 2.0, 2.0, 4.0, 3.0, 0.0];
    three_way(
        "conformance_slice_accessor",
        &k,
        data,
        &mut |v: &mut [Vec<f32>]| {
            let (i, j) = (v[0][0] as usize, v[0][1] as usize);
            v[2][0] = v[1][i * 6 + j] * 6.0 + 4.0;
        },
    );
}
