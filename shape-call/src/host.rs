//! Calls of host data by argument name: the data in by name, what the
//! function writes out by name with its dims, without positions, leaf
//! orders or buffers made by hand.

use std::sync::Arc;

use crate::arg::{Arg, CallArgs};
use crate::bind::{Function, Resolution};
use crate::error::CallError;
use crate::exec::CallKernel;
use crate::generator::Generator;
use crate::signature::Direction;
use crate::types::{ParamType, Scalar};

/// One argument's host data: its dims as given (the argument's dims, then
/// its type's) and its values, row-major.
#[derive(Clone, Debug, PartialEq)]
pub struct HostArg {
    dims: Vec<u64>,
    values: Vec<f32>,
}

impl HostArg {
    /// Values of the dims `dims` (the call checks that they fill them).
    pub fn new(dims: Vec<u64>, values: Vec<f32>) -> HostArg {
        HostArg { dims, values }
    }

    /// One value, for a scalar parameter.
    pub fn value(value: f32) -> HostArg {
        HostArg::new(Vec::new(), vec![value])
    }

    /// The dims.
    pub fn dims(&self) -> &[u64] {
        &self.dims
    }

    /// The values, row-major.
    pub fn values(&self) -> &[f32] {
        &self.values
    }

    /// The values, taken out.
    pub fn into_values(self) -> Vec<f32> {
        self.values
    }
}

/// A call's arguments by parameter name.
#[derive(Clone, Debug, Default)]
pub struct HostArgs {
    args: Vec<(Arc<str>, HostArg)>,
    generators: Vec<(Arc<str>, Generator)>,
}

impl HostArgs {
    /// No arguments yet.
    pub fn new() -> HostArgs {
        HostArgs::default()
    }

    /// These arguments with `name` given `arg` (replacing what it had).
    pub fn with(mut self, name: &str, arg: HostArg) -> HostArgs {
        self.args.retain(|(n, _)| &**n != name);
        self.generators.retain(|(n, _)| &**n != name);
        self.args.push((Arc::from(name), arg));
        self
    }

    /// These arguments with `name` given values the kernel generates
    /// (`call_id`, `grid(..)`, `rand_float(..)`, ...: no data).
    pub fn with_generator(mut self, name: &str, generator: Generator) -> HostArgs {
        self.args.retain(|(n, _)| &**n != name);
        self.generators.retain(|(n, _)| &**n != name);
        self.generators.push((Arc::from(name), generator));
        self
    }

    /// The data given for `name`.
    pub fn get(&self, name: &str) -> Option<&HostArg> {
        self.args.iter().find(|(n, _)| &**n == name).map(|(_, a)| a)
    }
}

/// What a call wrote, by argument name (`_result` for the return value,
/// and every `out` and `inout` argument and read-write tensor), each with
/// its dims.
#[derive(Clone, Debug, Default)]
pub struct HostOutputs {
    written: Vec<(Arc<str>, HostArg)>,
}

impl HostOutputs {
    /// What the call wrote to `name`.
    pub fn get(&self, name: &str) -> Option<&HostArg> {
        self.written
            .iter()
            .find(|(n, _)| &**n == name)
            .map(|(_, a)| a)
    }

    /// The return value, for a function that returns one.
    pub fn result(&self) -> Option<&HostArg> {
        self.get("_result")
    }

    /// Every written argument, in the order of the parameters, the return
    /// value last.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &HostArg)> {
        self.written.iter().map(|(n, a)| (&**n, a))
    }
}

/// A call of host data, resolved, with its buffers laid out in the order
/// of the kernel's leaves ([`Function::host_call`]): run it on the CPU
/// reference ([`HostCall::run_cpu`]) or hand it to a backend
/// ([`HostCall::run_with`]).
#[derive(Debug)]
pub struct HostCall {
    kernel: CallKernel,
    resolution: Resolution,
    buffers: Vec<Vec<f32>>,
}

impl Function {
    /// A call of `args`, given by parameter name: each a tensor of its
    /// parameter's element type, of the dims given; an `out` parameter
    /// given nothing is allocated, as the return value is. Binds,
    /// resolves the call's shapes and lays out the buffers; the data must
    /// fill the dims given. A struct parameter takes its fields through
    /// [`CallArgs`] instead.
    ///
    /// ```
    /// use shape_call::{Function, HostArg, HostArgs};
    /// let dot = Function::parse("float dot(float3 a, float3 b)")?;
    /// let args = HostArgs::new()
    ///     .with("a", HostArg::new(vec![2, 3], vec![1.0, 0.0, 0.0, 1.0, 1.0, 1.0]))
    ///     .with("b", HostArg::new(vec![3], vec![1.0, 2.0, 3.0]));
    /// let out = dot.host_call(&args)?.run_cpu(&mut |v: &mut [Vec<f32>]| {
    ///     v[2][0] = (0..3).map(|i| v[0][i] * v[1][i]).sum();
    /// })?;
    /// let result = out.result().unwrap();
    /// assert_eq!((result.dims(), result.values()), (&[2u64][..], &[1.0, 6.0][..]));
    /// # Ok::<(), shape_call::CallError>(())
    /// ```
    pub fn host_call(&self, args: &HostArgs) -> Result<HostCall, CallError> {
        let mut call_args = CallArgs::new();
        for (name, arg) in &args.args {
            let element = self.element_of(name)?;
            call_args = call_args.named(name, Arg::tensor_of(element, &arg.dims));
        }
        for (name, g) in &args.generators {
            call_args = call_args.named(name, Arg::Generator(g.clone()));
        }
        for name in self.outputs_to_allocate(args) {
            call_args = call_args.named(&name, Arg::output());
        }
        let bound = self.bind(&call_args)?;
        let resolution = bound.call(&call_args)?;
        let kernel = bound.kernel(&resolution)?;
        let mut inputs = Vec::with_capacity(kernel.leaves.len());
        for leaf in (kernel.leaves.iter()).filter(|l| !l.allocated && l.generator.is_none()) {
            let given = args.get(&leaf.path).ok_or_else(|| CallError::Data {
                arg: leaf.path.to_string(),
                message: "no data was given for it".into(),
            })?;
            if given.values.len() as u64 != leaf.len {
                return Err(CallError::Data {
                    arg: leaf.path.to_string(),
                    message: format!(
                        "its dims {:?} hold {} values, but {} were given",
                        given.dims,
                        leaf.len,
                        given.values.len()
                    ),
                });
            }
            inputs.push(given.values.clone());
        }
        let buffers = kernel.buffers(inputs)?;
        Ok(HostCall {
            kernel,
            resolution,
            buffers,
        })
    }

    /// The element type of the tensors parameter `name` takes (its type's
    /// innermost scalar; `float` for a generic one), from the first
    /// overload that has it.
    fn element_of(&self, name: &str) -> Result<ParamType, CallError> {
        let param = (self.overloads.iter())
            .flat_map(|s| s.params.iter())
            .find(|p| &*p.name == name)
            .ok_or_else(|| CallError::Data {
                arg: name.to_string(),
                message: "the function has no parameter of that name".into(),
            })?;
        match param.ty.leaf() {
            ParamType::Scalar(s) => Ok(ParamType::Scalar(*s)),
            ParamType::Struct(_) => Err(CallError::Data {
                arg: name.to_string(),
                message: "a struct's fields are given through `CallArgs` (`Arg::parse`), not as one tensor".into(),
            }),
            // A generic type (`leaf` stops at nothing else).
            _ => Ok(ParamType::Scalar(Scalar::Float)),
        }
    }

    /// The `out` parameters of the first overload that `args` gives
    /// nothing: the call allocates them.
    fn outputs_to_allocate(&self, args: &HostArgs) -> Vec<String> {
        let given = |name: &str| {
            args.get(name).is_some() || args.generators.iter().any(|(n, _)| &**n == name)
        };
        (self.overloads.first().into_iter())
            .flat_map(|s| s.params.iter())
            .filter(|p| p.direction == Direction::Out && !given(&p.name))
            .map(|p| p.name.to_string())
            .collect()
    }
}

impl HostCall {
    /// The call's kernel.
    pub fn kernel(&self) -> &CallKernel {
        &self.kernel
    }

    /// The call's shapes.
    pub fn resolution(&self) -> &Resolution {
        &self.resolution
    }

    /// Runs the call on the CPU reference, `f` once per call index (as
    /// [`CallKernel::run_cpu`]), and returns what it wrote by name.
    pub fn run_cpu(mut self, f: &mut dyn FnMut(&mut [Vec<f32>])) -> Result<HostOutputs, CallError> {
        self.kernel.run_cpu(&mut self.buffers, f)?;
        let buffers = std::mem::take(&mut self.buffers);
        Ok(self.outputs(buffers))
    }

    /// Runs the call with `run`, which takes the kernel and the buffers in
    /// leaf order and gives them back written (a backend's
    /// `run_call_on_host`), and returns what it wrote by name.
    pub fn run_with<E>(
        self,
        run: impl FnOnce(&CallKernel, Vec<Vec<f32>>) -> Result<Vec<Vec<f32>>, E>,
    ) -> Result<HostOutputs, E> {
        let HostCall {
            kernel,
            resolution,
            buffers,
        } = self;
        let written = run(&kernel, buffers)?;
        let call = HostCall {
            kernel,
            resolution,
            buffers: Vec::new(),
        };
        Ok(call.outputs(written))
    }

    /// The written leaves of `buffers`, by name, with their dims.
    fn outputs(&self, buffers: Vec<Vec<f32>>) -> HostOutputs {
        let resolved = self.resolution.args.iter().chain(&self.resolution.result);
        let written = (self.kernel.leaves.iter().zip(resolved).zip(buffers))
            .filter(|((leaf, _), _)| leaf.writes())
            .map(|((leaf, r), values)| (leaf.path.clone(), HostArg::new(r.shape.clone(), values)))
            .collect();
        HostOutputs { written }
    }
}
