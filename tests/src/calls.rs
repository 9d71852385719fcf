//! Differential tests of vectorized calls: a WGSL function run by the
//! wgpu backend against the same function written as a Rust closure and
//! run by the reference executor ([`CallKernel::run_cpu`]).
//!
//! ```
//! use shape_call::{Arg, CallArgs, Function};
//! use shape_tests::calls::{call_data, compare_call};
//!
//! let f = Function::parse("fn twice(x: f32) -> f32 { return 2.0 * x; }").unwrap();
//! let args = CallArgs::new().arg(Arg::tensor(&[5]));
//! let bound = f.bind(&args).unwrap();
//! let kernel = bound.kernel(&bound.call(&args).unwrap()).unwrap();
//! let data = call_data(&kernel, 1);
//! // Without a GPU, compare the reference with itself.
//! let mut twice = |v: &mut [Vec<f32>]| v[1][0] = 2.0 * v[0][0];
//! let reference = {
//!     let mut d = kernel.buffers(data.clone()).unwrap();
//!     kernel.run_cpu(&mut d, &mut twice).unwrap();
//!     d
//! };
//! compare_call(&kernel, &reference, &reference).unwrap();
//! ```

use backend_wgpu::WgpuBackend;
use proptest::prelude::*;
use shape_call::CallKernel;

/// Quarter-integer data for the leaves a call reads (not those it
/// allocates, nor generators), in leaf order: sums and products of a few of them are
/// exact in `f32`, so backends agree bit for bit.
pub fn call_data(kernel: &CallKernel, seed: u64) -> Vec<Vec<f32>> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    kernel
        .leaves
        .iter()
        .filter(|l| !l.allocated && l.generator.is_none())
        .map(|l| {
            (0..l.len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    ((state % 17) as f32 - 8.0) * 0.25
                })
                .collect()
        })
        .collect()
}

/// The first element where two runs' outputs differ: `Err` names the
/// argument, the flat index and both values. Outputs that several call
/// indices write (when the call allowed races) are not compared.
pub fn compare_call(
    kernel: &CallKernel,
    reference: &[Vec<f32>],
    other: &[Vec<f32>],
) -> Result<(), String> {
    let racy = |l: &shape_call::KernelLeaf| {
        kernel.races_allowed
            && kernel
                .call_shape
                .iter()
                .zip(&l.call_strides)
                .any(|(&size, &stride)| size > 1 && stride == 0)
    };
    for (i, l) in kernel.leaves.iter().enumerate() {
        if !l.writes() || racy(l) {
            continue;
        }
        let (a, b) = (&reference[i], &other[i]);
        if a.len() != b.len() {
            return Err(format!(
                "`{}`: {} elements against {}",
                l.path,
                a.len(),
                b.len()
            ));
        }
        // Equal values, or both NaN; WGSL lets a device ignore the sign of
        // zero, so 0 and -0 agree.
        if let Some(k) = (0..a.len()).find(|&k| a[k] != b[k] && !(a[k].is_nan() && b[k].is_nan())) {
            return Err(format!(
                "`{}` (call shape {:?}) differs at element {k}: reference {} against {}",
                l.path, kernel.call_shape, a[k], b[k]
            ));
        }
    }
    Ok(())
}

/// A backend that runs vectorized calls of WGSL functions; the
/// conformance suite's [`crate::conformance::vectorized_calls`] checks
/// one against the reference executor.
pub trait CallRunner {
    /// The backend's name, for messages.
    fn call_runner_name(&self) -> String;
    /// Runs `kernel` on `buffers` (made by [`CallKernel::buffers`]) and
    /// returns them with the outputs written.
    fn run_call(
        &mut self,
        kernel: &CallKernel,
        buffers: Vec<Vec<f32>>,
    ) -> Result<Vec<Vec<f32>>, String>;
}

impl CallRunner for WgpuBackend {
    fn call_runner_name(&self) -> String {
        shape_core::Backend::name(self)
    }

    fn run_call(
        &mut self,
        kernel: &CallKernel,
        buffers: Vec<Vec<f32>>,
    ) -> Result<Vec<Vec<f32>>, String> {
        self.run_call_on_host(kernel, buffers)
            .map_err(|e| e.to_string())
    }
}

/// Runs `kernel` on the reference executor with `f` and on `runner`, on
/// the same data, and panics with the first difference.
pub fn assert_call_agrees(
    runner: &mut dyn CallRunner,
    kernel: &CallKernel,
    data: Vec<Vec<f32>>,
    f: &mut dyn FnMut(&mut [Vec<f32>]),
) {
    let mut reference = kernel.buffers(data).expect("data fits the call");
    let given = reference.clone();
    kernel
        .run_cpu(&mut reference, f)
        .expect("the reference run");
    let name = runner.call_runner_name();
    let found = runner
        .run_call(kernel, given)
        .unwrap_or_else(|e| panic!("{name} could not run a call of `{}`: {e}", kernel.function));
    if let Err(e) = compare_call(kernel, &reference, &found) {
        panic!(
            "{name} disagrees with the reference on a call of `{}`: {e}",
            kernel.function
        );
    }
}

/// The kernel of `f` called with `args`, bound and resolved.
pub fn call_kernel(f: &shape_call::Function, args: &shape_call::CallArgs) -> CallKernel {
    let bound = f.bind(args).unwrap_or_else(|e| panic!("binding: {e}"));
    let resolved = bound.call(args).unwrap_or_else(|e| panic!("calling: {e}"));
    bound
        .kernel(&resolved)
        .unwrap_or_else(|e| panic!("the kernel: {e}"))
}

/// Random shapes that broadcast: a call shape of up to 3 dims with
/// sizes up to 5, and two argument shapes taken from its trailing dims
/// with some sizes replaced by 1.
pub fn broadcast_pairs() -> impl Strategy<Value = (Vec<u64>, Vec<u64>)> {
    prop::collection::vec(1u64..=5, 0..=3).prop_flat_map(|call| {
        let n = call.len();
        (Just(call), 0..=n, 0..=n, any::<u8>(), any::<u8>()).prop_map(|(call, da, db, ma, mb)| {
            let take = |d: usize, mask: u8| -> Vec<u64> {
                call[call.len() - d..]
                    .iter()
                    .enumerate()
                    .map(|(i, &s)| if mask >> i & 1 == 1 { 1 } else { s })
                    .collect()
            };
            (take(da, ma), take(db, mb))
        })
    })
}
