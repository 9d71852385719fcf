//! Differential testing: one program, several backends, every output
//! compared element by element against the first backend (normally the
//! CPU reference, the oracle).
//!
//! Any [`Backend`] is a [`ProgramRunner`], so a crate with its own backend
//! or its own operations builds a [`Program`] (or draws random ones from
//! [`crate::programs::programs`]) and calls [`assert_backends_agree`]:
//!
//! ```
//! use backend_cpu::CpuBackend;
//! use shape_tests::differential::{assert_backends_agree, Tolerance};
//! use shape_tests::programs::program;
//!
//! let p = program(7, 5);
//! let mut reference = CpuBackend::reference();
//! let mut coalesced = CpuBackend::coalesced();
//! assert_backends_agree(&p, &mut [&mut reference, &mut coalesced], Tolerance::EXACT);
//! ```

use std::collections::HashMap;
use std::fmt;

use shape_core::Backend;
use shape_graph::{SolvedGraph, TensorId};
use shape_run::RunGraph;

use crate::programs::Program;

/// Something that runs a solved program: every [`Backend`] is one. This
/// trait is object safe, so backends of different types share a slice.
pub trait ProgramRunner {
    /// The name reports use.
    fn runner_name(&self) -> String;

    /// The values of `program.results`, in memory order, or the error as
    /// text.
    fn run_solved(
        &mut self,
        solved: &SolvedGraph,
        program: &Program,
    ) -> Result<HashMap<TensorId, Vec<f32>>, String>;
}

impl<B: Backend> ProgramRunner for B {
    fn runner_name(&self) -> String {
        self.name()
    }

    fn run_solved(
        &mut self,
        solved: &SolvedGraph,
        program: &Program,
    ) -> Result<HashMap<TensorId, Vec<f32>>, String> {
        let mut out = solved
            .run(
                self,
                program.inputs.clone(),
                &program.results,
                &program.options,
            )
            .map_err(|e| e.to_string())?;
        Ok(program
            .results
            .iter()
            .filter_map(|&t| out.remove(t).map(|v| (t, v.into_values())))
            .collect())
    }
}

/// How far two values may be apart: `|a - b| <= abs + rel * max(|a|, |b|)`.
/// NaNs agree with NaNs, and infinities with the same infinity.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// Absolute slack.
    pub abs: f32,
    /// Slack relative to the larger magnitude.
    pub rel: f32,
}

impl Tolerance {
    /// Bit-for-bit equality, except that any NaN matches any NaN.
    pub const EXACT: Tolerance = Tolerance { abs: 0.0, rel: 0.0 };

    /// What GPU results are held to against the CPU reference: GPUs may
    /// fuse multiply-adds and approximate `exp` and `log` to a few ulps.
    pub const GPU: Tolerance = Tolerance {
        abs: 1e-5,
        rel: 1e-4,
    };

    /// Whether `a` and `b` agree.
    pub fn agrees(&self, a: f32, b: f32) -> bool {
        if a.is_nan() || b.is_nan() {
            return a.is_nan() && b.is_nan();
        }
        if *self == Tolerance::EXACT {
            // -0.0 == 0.0, but not bit for bit.
            return a.to_bits() == b.to_bits();
        }
        if a == b {
            return true;
        }
        if a.is_infinite() || b.is_infinite() {
            return false;
        }
        (a - b).abs() <= self.abs + self.rel * a.abs().max(b.abs())
    }
}

/// Where and how two backends disagree.
#[derive(Clone, Debug, PartialEq)]
pub enum Disagreement {
    /// The program does not solve (a defect of the program, not a backend).
    Unsolvable {
        /// The solver's message.
        message: String,
    },
    /// A backend failed to run the program.
    RunFailed {
        /// The backend.
        backend: String,
        /// Its error.
        message: String,
    },
    /// A backend returned no values for a tensor it was asked for.
    Missing {
        /// The tensor.
        tensor: String,
        /// The backend.
        backend: String,
    },
    /// A backend returned a different number of values for a tensor.
    Length {
        /// The tensor.
        tensor: String,
        /// The reference backend and its count.
        reference: (String, usize),
        /// The other backend and its count.
        other: (String, usize),
    },
    /// The first element that differs by more than the tolerance.
    Value {
        /// The tensor.
        tensor: String,
        /// Its solved shape.
        shape: String,
        /// The element's position in memory order.
        flat: usize,
        /// Its index per axis: batch axes, then output, then input axes.
        index: Vec<u64>,
        /// The reference backend and its value.
        reference: (String, f32),
        /// The other backend and its value.
        other: (String, f32),
        /// The tolerance that was exceeded.
        tolerance: Tolerance,
    },
}

impl fmt::Display for Disagreement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Disagreement::Unsolvable { message } => {
                write!(f, "the program does not solve: {message}")
            }
            Disagreement::RunFailed { backend, message } => {
                write!(f, "backend {backend} failed: {message}")
            }
            Disagreement::Missing { tensor, backend } => {
                write!(f, "backend {backend} returned no values for `{tensor}`")
            }
            Disagreement::Length {
                tensor,
                reference,
                other,
            } => write!(
                f,
                "`{tensor}`: {} returned {} values but {} returned {}",
                reference.0, reference.1, other.0, other.1
            ),
            Disagreement::Value {
                tensor,
                shape,
                flat,
                index,
                reference,
                other,
                tolerance,
            } => write!(
                f,
                "`{tensor}` (shape {shape}) differs at element {flat}, index {index:?} \
                 (batch, output, input axes): {} gives {:?} ({:#010x}), {} gives {:?} ({:#010x}); \
                 difference {:e} exceeds abs {:e} + rel {:e}",
                reference.0,
                reference.1,
                reference.1.to_bits(),
                other.0,
                other.1,
                other.1.to_bits(),
                (reference.1 - other.1).abs(),
                tolerance.abs,
                tolerance.rel
            ),
        }
    }
}

/// Runs `program` on every backend and compares each result with the
/// first backend's, tensor by tensor in the program's order. Results of
/// operations that allow racing writes ([`shape_core::Races::Allowed`])
/// are not compared: any one of the racing values is right.
pub fn compare_backends(
    program: &Program,
    backends: &mut [&mut dyn ProgramRunner],
    tolerance: Tolerance,
) -> Result<(), Box<Disagreement>> {
    let solved = program.graph.solve().map_err(|e| {
        Box::new(Disagreement::Unsolvable {
            message: e.to_string(),
        })
    })?;
    let mut runs = Vec::with_capacity(backends.len());
    for backend in backends.iter_mut() {
        let name = backend.runner_name();
        let values =
            backend
                .run_solved(&solved, program)
                .map_err(|message| Disagreement::RunFailed {
                    backend: name.clone(),
                    message,
                })?;
        runs.push((name, values));
    }
    let Some(((reference_name, reference), others)) = runs.split_first() else {
        return Ok(());
    };
    for &t in &program.results {
        if racy(&solved, program, t) {
            continue;
        }
        let tensor = program
            .graph
            .name(t)
            .map(str::to_string)
            .unwrap_or_else(|_| format!("#{}", t.index()));
        let missing = |backend: &String| {
            Box::new(Disagreement::Missing {
                tensor: tensor.clone(),
                backend: backend.clone(),
            })
        };
        let expected = reference.get(&t).ok_or_else(|| missing(reference_name))?;
        for (name, values) in others {
            let found = values.get(&t).ok_or_else(|| missing(name))?;
            if found.len() != expected.len() {
                return Err(Box::new(Disagreement::Length {
                    tensor,
                    reference: (reference_name.clone(), expected.len()),
                    other: (name.clone(), found.len()),
                }));
            }
            if let Some(flat) =
                (0..expected.len()).find(|&i| !tolerance.agrees(expected[i], found[i]))
            {
                let shape = solved.shape(t).ok();
                return Err(Box::new(Disagreement::Value {
                    tensor,
                    shape: shape.map(|s| s.to_string()).unwrap_or_default(),
                    flat,
                    index: shape.map(|s| s.unravel(flat as u64)).unwrap_or_default(),
                    reference: (reference_name.clone(), expected[flat]),
                    other: (name.clone(), found[flat]),
                    tolerance,
                }));
            }
        }
    }
    Ok(())
}

/// Whether the operation computing `t` lets several points write one
/// element of it.
fn racy(solved: &SolvedGraph, program: &Program, t: TensorId) -> bool {
    solved
        .graph()
        .producer(t)
        .and_then(|op| solved.lower(op, &program.options.lowering()).ok())
        .is_some_and(|l| l.races())
}

/// Like [`compare_backends`], but panics with the disagreement's report;
/// under proptest the panic fails the case, which is then shrunk.
pub fn assert_backends_agree(
    program: &Program,
    backends: &mut [&mut dyn ProgramRunner],
    tolerance: Tolerance,
) {
    if let Err(d) = compare_backends(program, backends, tolerance) {
        let text = program
            .to_text()
            .unwrap_or_else(|e| format!("(not printable: {e})"));
        panic!("backends disagree: {d}\nthe program:\n{text}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tolerance_treats_special_values_strictly() {
        let t = Tolerance::GPU;
        assert!(t.agrees(f32::NAN, f32::NAN));
        assert!(!t.agrees(f32::NAN, 1.0));
        assert!(t.agrees(f32::INFINITY, f32::INFINITY));
        assert!(!t.agrees(f32::INFINITY, f32::MAX));
        assert!(t.agrees(1000.0, 1000.05));
        assert!(!t.agrees(1000.0, 1000.2));
        assert!(t.agrees(0.0, 5e-6));
        assert!(!Tolerance::EXACT.agrees(1.0, 1.0 + f32::EPSILON));
        assert!(!Tolerance::EXACT.agrees(0.0, -0.0));
        assert!(Tolerance::GPU.agrees(0.0, -0.0));
    }
}
