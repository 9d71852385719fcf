//! Vectorizes a WGSL `dot` over whole tensors, as slangpy does for Slang:
//! the function is written for one pair of `vec3<f32>`, and called over a
//! (4, 3) tensor against a (2, 4, 3) one (broadcasting), then as an outer
//! product of two lists of vectors (`map`). Each call runs on the GPU
//! (wgpu) and on the CPU reference, the WGSL interpreter running the same
//! source (no hand-written closure), and the results are compared; where
//! no GPU adapter exists it says so and runs on the CPU only.
//!
//! `cargo run --example vectorized_dot`

use backend_wgpu::WgpuBackend;
use shape_call::{Arg, ArgMap, CallArgs, CallKernel, Function, ParamType};

const DOT: &str = "fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }";

fn run(
    title: &str,
    f: &Function,
    args: &CallArgs,
    data: Vec<Vec<f32>>,
    gpu: &mut Option<WgpuBackend>,
) -> Result<(), Box<dyn std::error::Error>> {
    let bound = f.bind(args)?;
    let resolved = bound.call(args)?;
    println!("\n{title}\n  call shape {:?}", resolved.call_shape);
    for a in resolved.args.iter().chain(&resolved.result) {
        println!(
            "  {:>7}: {:<9} type shape {:?}, argument shape {:?} on call dims {:?}",
            a.path, a.ty, a.type_shape, a.arg_shape, a.mapping
        );
    }
    let kernel: CallKernel = bound.kernel(&resolved)?;
    let mut cpu = kernel.buffers(data)?;
    let given = cpu.clone();
    // The CPU reference: the interpreter runs dot3's WGSL itself.
    kernel.run_interpreted(&mut cpu)?;
    let result = kernel.result.expect("dot3 returns a value");
    println!("  CPU (interpreter): {:?}", cpu[result]);
    if let Some(gpu) = gpu {
        let out = gpu.run_call_on_host(&kernel, given)?;
        println!("  wgpu:              {:?}", out[result]);
        assert_eq!(out[result], cpu[result], "wgpu and the CPU reference agree");
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut gpu = match WgpuBackend::new() {
        Ok(g) => {
            println!(
                "Running on wgpu ({}) and on the CPU reference.",
                shape_core::Backend::name(&g)
            );
            Some(g)
        }
        Err(e) => {
            println!("No GPU adapter ({e}); running on the CPU reference only.");
            None
        }
    };
    let f = Function::parse(DOT)?;
    let vec3 = ParamType::Vector(
        Box::new(ParamType::Scalar(shape_call::Scalar::Float)),
        shape_call::Extent::Fixed(3),
    );
    println!("Signature: {}", f.overloads()[0]);

    // Broadcasting: a (4, 3) against b (2, 4, 3) gives a (2, 4) call.
    let a: Vec<f32> = (0..12).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..24).map(|i| (i % 5) as f32 - 2.0).collect();
    let args = CallArgs::new()
        .arg(Arg::tensor(&[4, 3]))
        .arg(Arg::tensor(&[2, 4, 3]));
    run(
        "dot3 over (4, 3) and (2, 4, 3):",
        &f,
        &args,
        vec![a.clone(), b],
        &mut gpu,
    )?;

    // map: a's list on call dim 1, b's on call dim 0: every pair.
    let outer = f
        .clone()
        .map("a", ArgMap::Dims(vec![1, 2]))
        .map("b", ArgMap::Dims(vec![0, 2]));
    let args = CallArgs::new()
        .arg(Arg::tensor_of(vec3.clone(), &[4]))
        .arg(Arg::tensor_of(vec3, &[2]));
    let b = vec![1.0, 0.0, 0.0, 0.0, 0.0, 1.0];
    run(
        "dot3 of every pair, map(a=(1,2), b=(0,2)):",
        &outer,
        &args,
        vec![a, b],
        &mut gpu,
    )?;

    // A broadcast that cannot be: the error names both arguments.
    let args = CallArgs::new()
        .arg(Arg::tensor(&[4, 3]))
        .arg(Arg::tensor(&[5, 3]));
    match f.resolve(&args) {
        Ok(_) => println!("\nunexpectedly accepted"),
        Err(e) => println!("\nA (4, 3) against a (5, 3) tensor is refused:\n  {e}"),
    }
    Ok(())
}
