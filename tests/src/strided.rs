//! Strided views of a program's inputs: the same values, lying in their
//! buffers in Fortran order, with their axes permuted, as a slice of a
//! larger buffer, or repeated along an axis at stride 0 (a broadcast).
//! A run must give the values of the same program on C-contiguous copies:
//! bit for bit on the CPU, within tolerance elsewhere.
//!
//! ```
//! use backend_cpu::CpuBackend;
//! use shape_tests::differential::{ProgramRunner, Tolerance};
//! use shape_tests::programs::program;
//! use shape_tests::strided::strided_views;
//!
//! let (contiguous, strided) = strided_views(&program(7, 5), 3);
//! let solved = contiguous.graph.solve().unwrap();
//! let mut cpu = CpuBackend::coalesced();
//! let a = cpu.run_solved(&solved, &contiguous).unwrap();
//! let b = cpu.run_solved(&solved, &strided).unwrap();
//! for (t, values) in &a {
//!     assert!(values.iter().zip(&b[t]).all(|(x, y)| Tolerance::EXACT.agrees(*x, *y)));
//! }
//! ```

use shape_run::HostTensor;

use crate::programs::Program;

/// The kinds of views [`strided_view`] makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewKind {
    /// Fortran (column-major) order.
    Fortran,
    /// The axes stored in another order (a transposed view).
    Permuted,
    /// Every axis a slice `[1 : d + 1]` of a buffer one longer at both
    /// ends, the padding NaN (a read of it shows).
    Sliced,
    /// One axis repeated at stride 0 (the values are made constant along
    /// it first).
    Broadcast,
}

impl ViewKind {
    /// Every kind.
    pub const ALL: [ViewKind; 4] = [
        ViewKind::Fortran,
        ViewKind::Permuted,
        ViewKind::Sliced,
        ViewKind::Broadcast,
    ];
}

/// A small deterministic generator (SplitMix64).
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The C-order strides of `dims`.
fn c_strides(dims: &[u64]) -> Vec<u64> {
    let mut s = vec![1u64; dims.len()];
    for j in (0..dims.len().saturating_sub(1)).rev() {
        s[j] = s[j + 1] * dims[j + 1];
    }
    s
}

/// The index of C position `p` in `dims`.
fn index_of(mut p: u64, dims: &[u64]) -> Vec<u64> {
    let mut index = vec![0; dims.len()];
    for j in (0..dims.len()).rev() {
        index[j] = p % dims[j];
        p /= dims[j];
    }
    index
}

/// Where C position `p` of `dims` lies in a buffer of `strides` from
/// `offset`.
fn at(p: u64, dims: &[u64], strides: &[u64], offset: u64) -> usize {
    let sum: u64 = index_of(p, dims)
        .iter()
        .zip(strides)
        .map(|(i, s)| i * s)
        .sum();
    (offset + sum) as usize
}

/// Writes C-ordered `values` of `dims` into `buffer` at `strides` from
/// `offset`.
fn scatter(values: &[f32], dims: &[u64], strides: &[u64], offset: u64, buffer: &mut [f32]) {
    for (p, &v) in values.iter().enumerate() {
        buffer[at(p as u64, dims, strides, offset)] = v;
    }
}

/// A view of the C-contiguous dense tensor `t` of `kind` (with choices
/// drawn from `seed`), and the C-contiguous tensor of the values it
/// holds (`t` itself except for a broadcast, which makes the values
/// constant along its axis). `None` for ragged values, which stay in C
/// order, and for a broadcast of a tensor with no axis longer than 1.
pub fn strided_view(t: &HostTensor, kind: ViewKind, seed: u64) -> Option<(HostTensor, HostTensor)> {
    if t.ragged_axis().is_some() || !t.is_c_contiguous() {
        return None;
    }
    let dims = t.dims().to_vec();
    let values = t.values();
    let mut state = seed;
    let view = match kind {
        ViewKind::Fortran => {
            let mut strides = vec![1u64; dims.len()];
            for j in 1..dims.len() {
                strides[j] = strides[j - 1] * dims[j - 1];
            }
            let mut f = vec![0.0; values.len()];
            scatter(values, &dims, &strides, 0, &mut f);
            HostTensor::fortran(dims.clone(), f).ok()?
        }
        ViewKind::Permuted => {
            // Axis `order[k]` is the k-th of the buffer's C order.
            let mut order: Vec<usize> = (0..dims.len()).collect();
            for k in (1..order.len()).rev() {
                let j = (next(&mut state) % (k as u64 + 1)) as usize;
                order.swap(k, j);
            }
            let stored: Vec<u64> = order.iter().map(|&j| dims[j]).collect();
            let stored_strides = c_strides(&stored);
            let mut strides = vec![0u64; dims.len()];
            for (k, &j) in order.iter().enumerate() {
                strides[j] = stored_strides[k];
            }
            let mut buffer = vec![0.0; values.len()];
            scatter(values, &dims, &strides, 0, &mut buffer);
            HostTensor::strided(dims.clone(), strides, 0, buffer).ok()?
        }
        ViewKind::Sliced => {
            let padded: Vec<u64> = dims.iter().map(|d| d + 2).collect();
            let strides = c_strides(&padded);
            let offset: u64 = strides.iter().sum();
            let len: u64 = padded.iter().product();
            let mut buffer = vec![f32::NAN; len as usize];
            scatter(values, &dims, &strides, offset, &mut buffer);
            HostTensor::strided(dims.clone(), strides, offset, buffer).ok()?
        }
        ViewKind::Broadcast => {
            let long: Vec<usize> = (0..dims.len()).filter(|&j| dims[j] > 1).collect();
            if long.is_empty() {
                return None;
            }
            let axis = long[(next(&mut state) % long.len() as u64) as usize];
            let mut collapsed = dims.clone();
            collapsed[axis] = 1;
            let c = c_strides(&dims);
            let stored: Vec<f32> = (0..collapsed.iter().product::<u64>())
                .map(|q| values[at(q, &collapsed, &c, 0)])
                .collect();
            let mut strides = c_strides(&collapsed);
            strides[axis] = 0;
            let view = HostTensor::strided(dims.clone(), strides, 0, stored).ok()?;
            let copy = view.to_contiguous().ok()?;
            return Some((view, copy));
        }
    };
    Some((view, t.clone()))
}

/// Two versions of `program` with the same values: every dense input
/// C-contiguous, and every dense input a strided view (kinds and choices
/// drawn from `seed`, one kind after another across the inputs).
pub fn strided_views(program: &Program, seed: u64) -> (Program, Program) {
    let (mut contiguous, mut strided) = (program.clone(), program.clone());
    let mut inputs: Vec<_> = program.inputs.tensors().collect();
    inputs.sort_by_key(|t| t.index());
    let mut state = seed;
    for t in inputs {
        let Some(given) = program.inputs.get(t) else {
            continue;
        };
        let kind = ViewKind::ALL[(next(&mut state) % 4) as usize];
        let made = strided_view(given, kind, next(&mut state))
            .or_else(|| strided_view(given, ViewKind::Fortran, 0));
        if let Some((view, copy)) = made {
            strided.inputs.insert(t, view);
            contiguous.inputs.insert(t, copy);
        }
    }
    (contiguous, strided)
}
