//! Running a compiled program: its data (from `.npy` files, the program's
//! constants, or seeded random values), the run itself on any backend, and
//! the comparison of two backends' results.

use std::collections::HashMap;
use std::path::PathBuf;

use backend_cpu::CpuBackend;
use shape_core::Backend;
use shape_solver::{HostTensor, Inputs, RunError, RunOptions, SolvedGraph, TensorId, TensorKind};

use crate::backends::BackendJob;
use crate::compile::Compiled;
use crate::error::{CliError, ProgramError};
use crate::npy;

/// The most elements one tensor's data may have: the CPU backend's
/// buffer limit, in `f32`s.
pub const MAX_ELEMENTS: u128 = (backend_cpu::DEFAULT_MAX_BUFFER_BYTES / 4) as u128;

/// Seeded values in `[-1, 1)`: the same seed and name give the same values,
/// whatever else the program holds.
pub fn random_values(seed: u64, name: &str, len: usize) -> Vec<f32> {
    // FNV-1a of the name, mixed with the seed, drives a splitmix64 stream.
    let mut state = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    }) ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    (0..len)
        .map(|_| {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            // 24 random bits: exact in an f32.
            (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Where a tensor's values came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A `.npy` file given with `--input`.
    File(PathBuf),
    /// The values written in the program.
    Program,
    /// Seeded random values.
    Random,
}

/// The values of every input, parameter and constant, and where each came
/// from (in tensor order).
pub struct Data {
    /// Values by tensor.
    pub values: Inputs,
    /// Each leaf tensor with the source of its values.
    pub sources: Vec<(TensorId, Source)>,
}

/// Gathers the data a run needs. `files` are `--input NAME=PATH` pairs;
/// tensors without one get their written values (constants) or seeded
/// random values.
pub fn gather(
    compiled: &Compiled,
    solved: &SolvedGraph,
    files: &[(String, PathBuf)],
    seed: u64,
) -> Result<Data, CliError> {
    let g = &compiled.graph;
    for (name, _) in files {
        match compiled.tensor(name).map(|t| g.kind(t)) {
            Some(Ok(TensorKind::Input | TensorKind::Parameter)) => {}
            Some(Ok(TensorKind::Constant)) => {
                return Err(CliError::Data(format!(
                    "--input {name}=...: `{name}` is a constant; its values are written in the program"
                )))
            }
            Some(_) => {
                return Err(CliError::Data(format!(
                    "--input {name}=...: `{name}` is computed by the program; only inputs and parameters take data"
                )))
            }
            None => {
                return Err(CliError::Data(format!(
                    "--input {name}=...: the program has no input or parameter `{name}`"
                )))
            }
        }
    }
    let mut values = Inputs::new();
    let mut sources = Vec::new();
    for t in g.tensor_ids() {
        let kind = g.kind(t).map_err(|e| compiled.map.locate(e, None))?;
        if let TensorKind::Result(_) = kind {
            continue;
        }
        let name = g.name(t).map_err(|e| compiled.map.locate(e, None))?;
        let shape = solved.shape(t).map_err(|e| compiled.map.locate(e, None))?;
        let dims = shape.memory_dims();
        let len = shape
            .num_elems()
            .filter(|&n| n <= MAX_ELEMENTS)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| {
                CliError::Data(format!(
                    "`{name}` has the solved shape {shape}: more than the {MAX_ELEMENTS} elements a buffer may hold"
                ))
            })?;
        let (v, source) = if let Some((_, path)) = files.iter().find(|(n, _)| n == name) {
            let bytes = std::fs::read(path).map_err(|source| CliError::Read {
                path: path.clone(),
                source,
            })?;
            let array = npy::read(&bytes).map_err(|source| CliError::Npy {
                path: path.clone(),
                source,
            })?;
            if array.shape != dims {
                return Err(CliError::Data(format!(
                    "{}: `{name}` has the solved shape {shape}, so its array must have the shape {} (batch, then output, then input axes), but the file holds {}",
                    path.display(),
                    tuple(&dims),
                    tuple(&array.shape)
                )));
            }
            (array.data, Source::File(path.clone()))
        } else if let Some(v) = compiled.constants.get(&t) {
            (v.clone(), Source::Program)
        } else {
            (random_values(seed, name, len), Source::Random)
        };
        let tensor = HostTensor::new(dims, v)
            .map_err(|e| CliError::Data(format!("`{name}` has the solved shape {shape}: {e}")))?;
        values.insert(t, tensor);
        sources.push((t, source));
    }
    Ok(Data { values, sources })
}

/// A shape written as a Python tuple: `()`, `(3,)`, `(2, 3)`.
pub fn tuple(dims: &[u64]) -> String {
    match dims {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            dims.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// One run of a program on a backend.
pub struct RunJob<'a> {
    /// The program.
    pub compiled: &'a Compiled,
    /// Its solved shapes.
    pub solved: &'a SolvedGraph,
    /// Its data.
    pub data: &'a Inputs,
    /// The tensors whose values to return.
    pub outputs: &'a [TensorId],
    /// The batch index that batch slices take.
    pub slice: u64,
}

/// Results of a run: the backend's name and each output's values.
pub type Outputs = (String, HashMap<TensorId, Vec<f32>>);

impl RunJob<'_> {
    fn run_on<B: Backend>(&self, backend: &mut B) -> Result<Outputs, ProgramError> {
        let options = RunOptions::default().with_slice(self.slice);
        let mut out = self
            .solved
            .run(backend, self.data.clone(), self.outputs, &options)
            .map_err(|e| self.locate(e))?;
        let values = self
            .outputs
            .iter()
            .filter_map(|&t| out.remove(t).map(|v| (t, v.into_values())))
            .collect();
        Ok((backend.name(), values))
    }

    fn locate<E: std::error::Error>(&self, e: RunError<E>) -> ProgramError {
        match e {
            RunError::Graph(g) => self.compiled.map.locate(g, None),
            RunError::Backend {
                op: Some(ref op), ..
            } => ProgramError::Run {
                message: e.to_string(),
                op: Some(op.name.to_string()),
                span: self.compiled.map.op_span(op.id),
            },
            other => ProgramError::Run {
                message: other.to_string(),
                op: None,
                span: None,
            },
        }
    }
}

impl BackendJob for RunJob<'_> {
    type Output = Result<Outputs, ProgramError>;
    fn run<B: Backend>(&mut self, backend: &mut B) -> Self::Output {
        self.run_on(backend)
    }
}

/// The largest difference found, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct Worst {
    /// The difference.
    pub diff: f64,
    /// The tensor.
    pub tensor: TensorId,
    /// The element's index, in the order of the `.npy` axes.
    pub index: Vec<u64>,
    /// The reference value.
    pub expected: f32,
    /// The other backend's value.
    pub found: f32,
}

/// How two backends' results differ.
#[derive(Clone, Debug, PartialEq)]
pub struct Diff {
    /// The reference backend's name.
    pub reference: String,
    /// The other backend's name.
    pub other: String,
    /// The largest absolute difference.
    pub abs: Option<Worst>,
    /// The largest relative difference, `|a - b| / max(|a|, |b|)`.
    pub rel: Option<Worst>,
    /// Elements compared.
    pub elements: usize,
}

/// Runs a program on the reference CPU backend and on another backend, and
/// compares the results.
pub struct DiffJob<'a>(pub RunJob<'a>);

impl BackendJob for DiffJob<'_> {
    type Output = Result<Diff, ProgramError>;
    fn run<B: Backend>(&mut self, other: &mut B) -> Self::Output {
        let (ref_name, expected) = self.0.run_on(&mut CpuBackend::reference())?;
        let (other_name, found) = self.0.run_on(other)?;
        let mut diff = Diff {
            reference: ref_name,
            other: other_name,
            abs: None,
            rel: None,
            elements: 0,
        };
        for &t in self.0.outputs {
            let name = || self.0.solved.graph().name(t).unwrap_or("?").to_string();
            let (Some(a), Some(b)) = (expected.get(&t), found.get(&t)) else {
                return Err(ProgramError::Run {
                    message: format!("a backend returned no values for `{}`", name()),
                    op: None,
                    span: None,
                });
            };
            if a.len() != b.len() {
                return Err(ProgramError::Run {
                    message: format!(
                        "`{}`: {} returned {} values but {} returned {}",
                        name(),
                        diff.reference,
                        a.len(),
                        diff.other,
                        b.len()
                    ),
                    op: None,
                    span: None,
                });
            }
            let shape = self.0.solved.shape(t).ok();
            for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
                diff.elements += 1;
                let (abs, rel) = differences(x, y);
                let worst = |d: f64| Worst {
                    diff: d,
                    tensor: t,
                    index: shape.map(|s| s.unravel(i as u64)).unwrap_or_default(),
                    expected: x,
                    found: y,
                };
                if diff.abs.as_ref().is_none_or(|w| abs > w.diff) {
                    diff.abs = Some(worst(abs));
                }
                if diff.rel.as_ref().is_none_or(|w| rel > w.diff) {
                    diff.rel = Some(worst(rel));
                }
            }
        }
        Ok(diff)
    }
}

/// Absolute and relative difference; NaN against a number is infinitely
/// different, NaN against NaN (and equal infinities) not at all.
pub fn differences(a: f32, b: f32) -> (f64, f64) {
    let (a, b) = (a as f64, b as f64);
    if a == b || (a.is_nan() && b.is_nan()) {
        return (0.0, 0.0);
    }
    let abs = (a - b).abs();
    // NaN against a number, or an infinity against anything else: a NaN
    // relative difference would make every later comparison false.
    if !abs.is_finite() {
        return (f64::INFINITY, f64::INFINITY);
    }
    let scale = a.abs().max(b.abs());
    (abs, if scale == 0.0 { 0.0 } else { abs / scale })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_values_depend_on_seed_and_name_only() {
        let a = random_values(7, "x", 5);
        assert_eq!(a, random_values(7, "x", 5));
        assert_ne!(a, random_values(8, "x", 5));
        assert_ne!(a, random_values(7, "y", 5));
        assert_eq!(random_values(7, "x", 3), a[..3]);
        assert!(random_values(1, "w", 1000)
            .iter()
            .all(|v| (-1.0..1.0).contains(v)));
    }

    #[test]
    fn differences_and_indices() {
        assert_eq!(differences(1.0, 1.5), (0.5, 0.5 / 1.5));
        assert_eq!(differences(0.0, 0.0), (0.0, 0.0));
        assert_eq!(differences(f32::NAN, f32::NAN), (0.0, 0.0));
        assert_eq!(differences(f32::NAN, 1.0), (f64::INFINITY, f64::INFINITY));
        assert_eq!(
            differences(f32::INFINITY, 1.0),
            (f64::INFINITY, f64::INFINITY)
        );
        assert_eq!(differences(f32::INFINITY, f32::INFINITY), (0.0, 0.0));
        assert_eq!(tuple(&[]), "()");
        assert_eq!(tuple(&[3]), "(3,)");
        assert_eq!(tuple(&[2, 3]), "(2, 3)");
    }
}
