//! Vectorized function calls: a function written for single elements,
//! called over whole tensors with broadcasting, as slangpy does for Slang.
//!
//! Each parameter's type has a *type shape* (`float3` is `(3)`); the
//! argument's dims beyond it, counted from the right, are its *argument
//! shape*; the *call shape* is NumPy's broadcasting of the argument
//! shapes, and outputs are allocated with it. A call is resolved in two
//! phases:
//!
//! - [`Function::bind`] knows kinds, element types and dims, not sizes: it
//!   matches element types (no implicit conversion), consumes type dims,
//!   applies `map` and `vmap`, and picks the one overload that fits.
//!   Generic sizes (`vector<T,N>`) are shared through the shape solver,
//!   each overload on its own fork of its state.
//! - [`BoundCall::call`] takes sizes: type sizes are checked, the call
//!   shape is computed, outputs are sized and races refused. It solves
//!   nothing, so one bound call serves every size.
//!
//! ```
//! use shape_call::{Arg, ArgMap, CallArgs, Function};
//! // The documents' image example: a float tensor (3, 10, 20) read as
//! // 10x20 float3, its first dim moved behind the others.
//! let f = Function::parse("float3 multiply(float3 a, float3 b)")
//!     .unwrap()
//!     .map("a", ArgMap::Dims(vec![2, 0, 1]));
//! let args = CallArgs::new().arg(Arg::tensor(&[3, 10, 20])).arg(Arg::tensor(&[10, 20, 3]));
//! let r = f.resolve(&args).unwrap();
//! assert_eq!(r.call_shape, vec![10, 20]);
//! assert_eq!(r.args[0].arg_shape, vec![10, 20]);
//! ```
//!
//! `docs/call-shapes.md` describes the rules and where they depart from
//! the slangpy documents.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod arg;
mod bind;
mod error;
mod exec;
mod generator;
mod host;
mod interpret;
#[cfg(feature = "graph")]
mod op;
mod signature;
mod specialize;
mod step;
mod syntax;
mod types;
mod wgsl_source;

pub use arg::{Arg, CallArgs, Number, OutputSpec};
pub use bind::{ArgMap, AxisRole, BoundCall, Function, Resolution, ResolvedArg};
pub use error::CallError;
pub use exec::{CallKernel, GeneratedLeaf, KernelLeaf, KernelParam, ParamValue};
pub use generator::{
    hash_to_float, wang_hash, Generator, HashSeed, ValueLayout, DEFAULT_SEED, MAX_WARMUP,
};
pub use host::{HostArg, HostArgs, HostCall, HostOutputs};
pub use interpret::{InterpretOptions, Interpreter, Value, DEFAULT_STEP_LIMIT};
#[cfg(feature = "graph")]
pub use op::CallOp;
pub use signature::{Direction, Param, Signature};
pub use specialize::GenericArg;
pub use step::{data_error, KernelStep};
pub use syntax::{parse_type, TypeScope};
pub use types::{Extent, Language, ParamType, Scalar, StructType, TensorKind};
