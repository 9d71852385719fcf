//! What a first program that infers shapes and runs them needs, in one
//! import: `shape_graph`'s prelude and the run stage's types.
//!
//! ```
//! use backend_cpu::CpuBackend;
//! use shape_run::prelude::*;
//!
//! let g = Scope::new();
//! let x = g.input("x", "2")?;
//! let y = x.exp()?.add(&x)?;
//! let solved = g.solve()?;
//! let mut cpu = CpuBackend::new();
//! println!("running on {}", cpu.name()); // `Backend` is in scope
//! let inputs = Inputs::new().with(x.id(), HostTensor::new(vec![2], vec![0.0, 1.0])?);
//! let out = solved.run(&mut cpu, inputs, &[y.id()], &RunOptions::default())?;
//! assert_eq!(out.get(y.id()).unwrap().values(), &[1.0, 1.0 + 1f32.exp()]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use crate::{
    BackendFailure, HostTensor, Inputs, RunError, RunGraph, RunInputs, RunOptions, RunOutputs,
};
pub use shape_graph::prelude::*;
