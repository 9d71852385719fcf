//! A call kernel run by the interpreter: the CPU reference for a call of
//! a WGSL function, with no Rust closure.

use std::collections::HashMap;
use std::fmt::Write as _;

use super::builtin::Fault;
use super::eval::Accessors;
use super::value::Value;
use super::{Accessor, AccessorKind, InterpretOptions, Interpreter};
use crate::error::CallError;
use crate::exec::{CallKernel, ParamValue};
use crate::host::{HostCall, HostOutputs};
use crate::signature::Direction;
use crate::types::{Language, ParamType};

/// A slice, tensor or buffer parameter: the leaf it reads and how its
/// elements lie in the leaf's per-call values.
struct SliceView {
    leaf: usize,
    element: ParamType,
    sizes: Vec<u64>,
    element_len: usize,
}

struct KernelSlices<'v> {
    views: &'v [SliceView],
    values: &'v mut [Vec<f32>],
}

impl KernelSlices<'_> {
    /// Where element `index` starts in its leaf's values; an index past a
    /// dim's size takes its last element, as for arrays.
    fn offset(&self, slot: usize, index: &[u32]) -> Result<(&SliceView, usize), Fault> {
        let view = self
            .views
            .get(slot)
            .ok_or_else(|| Fault::Kind("an accessor of no slice".into()))?;
        if index.len() != view.sizes.len() {
            return Err(Fault::Kind(format!(
                "{} indices into a slice of {} dims",
                index.len(),
                view.sizes.len()
            )));
        }
        let mut flat = 0u64;
        for (&i, &size) in index.iter().zip(&view.sizes) {
            flat = flat * size + u64::from(i).min(size.saturating_sub(1));
        }
        Ok((view, flat as usize * view.element_len))
    }
}

impl Accessors for KernelSlices<'_> {
    fn load(&mut self, slot: usize, index: &[u32]) -> Result<Value, Fault> {
        let (view, at) = self.offset(slot, index)?;
        let data = self.values[view.leaf].get(at..).unwrap_or(&[]);
        Value::read(&view.element, data)
            .ok_or_else(|| Fault::Unsupported("a load from an empty slice".into()))
    }

    fn size(&self, slot: usize, dim: u32) -> u32 {
        self.views.get(slot).map_or(0, |v| {
            let d = (dim as usize).min(v.sizes.len().saturating_sub(1));
            v.sizes.get(d).map_or(0, |&s| s as u32)
        })
    }

    fn store(&mut self, slot: usize, index: &[u32], value: &Value) -> Result<(), Fault> {
        let (view, at) = self.offset(slot, index)?;
        let leaf = view.leaf;
        let out = self.values[leaf].get_mut(at..).unwrap_or(&mut []);
        value
            .write(out)
            .map(|_| ())
            .ok_or_else(|| Fault::Unsupported("a store into an empty slice".into()))
    }
}

impl CallKernel {
    /// The WGSL module the interpreter runs for this call: the user's
    /// source, or a Slang-style declaration with its WGSL body, with its
    /// slice parameters as accessors (`p_load`, `p_size`, `p_store`).
    pub fn interpreter(&self) -> Result<Interpreter, CallError> {
        self.module().map(|(it, _)| it)
    }

    fn module(&self) -> Result<(Interpreter, Vec<SliceView>), CallError> {
        let body = match (&self.source, &self.body) {
            (Some(source), _) => return Ok((Interpreter::new(source)?, Vec::new())),
            (None, Some(body)) => body,
            (None, None) => {
                return Err(CallError::UnsupportedWgsl {
                    function: self.function.to_string(),
                    construct: "a function with neither WGSL source nor a WGSL body (`Signature::with_wgsl_body`); give the CPU a closure for it".into(),
                    at: String::new(),
                })
            }
        };
        let wgsl = |t: &ParamType| t.spelled(Language::Wgsl);
        let mut params = Vec::new();
        let mut stubs = String::new();
        let mut views = Vec::new();
        let mut accessors = HashMap::new();
        for param in &self.params {
            let Some((n, element)) = param.ty.accessed() else {
                params.push(match param.direction {
                    Direction::In => format!("{}: {}", param.name, wgsl(&param.ty)),
                    _ => format!("{}: ptr<function, {}>", param.name, wgsl(&param.ty)),
                });
                continue;
            };
            let ParamValue::Leaf(leaf) = param.value else {
                return Err(CallError::UnsupportedWgsl {
                    function: self.function.to_string(),
                    construct: format!("slice parameter `{}` given field by field", param.name),
                    at: String::new(),
                });
            };
            let l = &self.leaves[leaf];
            let slot = views.len();
            views.push(SliceView {
                leaf,
                element: element.clone(),
                sizes: l.type_shape.iter().take(n).copied().collect(),
                element_len: l.type_shape.iter().skip(n).product::<u64>() as usize,
            });
            let idx: Vec<String> = (0..n).map(|d| format!("i{d}: u32")).collect();
            let (name, ty, idx) = (&param.name, wgsl(element), idx.join(", "));
            let _ = writeln!(
                stubs,
                "fn {name}_load({idx}) -> {ty} {{ return {ty}(); }}\nfn {name}_size(d: u32) -> u32 {{ return 0u; }}"
            );
            accessors.insert(
                format!("{name}_load"),
                Accessor {
                    slot,
                    kind: AccessorKind::Load,
                },
            );
            accessors.insert(
                format!("{name}_size"),
                Accessor {
                    slot,
                    kind: AccessorKind::Size,
                },
            );
            if param.ty.writes_through() {
                let _ = writeln!(stubs, "fn {name}_store({idx}, value: {ty}) {{ }}");
                accessors.insert(
                    format!("{name}_store"),
                    Accessor {
                        slot,
                        kind: AccessorKind::Store,
                    },
                );
            }
        }
        let ret = self.result.map_or(String::new(), |r| {
            format!(" -> {}", wgsl(&self.leaves[r].ty))
        });
        let trimmed = body.trim();
        let (open, close) = if trimmed.starts_with('{') {
            ("", "")
        } else {
            ("{ ", " }")
        };
        let head = format!("fn {}({}){ret} {open}", self.function, params.join(", "));
        // The body comes first, so places in it are the user's lines.
        let text = format!("{head}{trimmed}{close}\n{stubs}");
        let it = Interpreter::build(&text, accessors, (0, head.len()))?;
        Ok((it, views))
    }

    /// Runs the call on the CPU through the WGSL interpreter: for each
    /// call index, loads the arguments (as [`CallKernel::run_cpu`] does),
    /// runs the function and stores what it writes. The same buffers as
    /// [`CallKernel::run_cpu`]; no closure.
    ///
    /// ```
    /// use shape_call::{Arg, CallArgs, Function};
    /// let dot = Function::parse("fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }").unwrap();
    /// let args = CallArgs::new().arg(Arg::tensor(&[4, 3])).arg(Arg::tensor(&[3]));
    /// let bound = dot.bind(&args).unwrap();
    /// let kernel = bound.kernel(&bound.call(&args).unwrap()).unwrap();
    /// let mut data = kernel.buffers(vec![vec![1.0; 12], vec![1.0, 2.0, 3.0]]).unwrap();
    /// kernel.run_interpreted(&mut data).unwrap();
    /// assert_eq!(data[2], vec![6.0; 4]);
    /// ```
    pub fn run_interpreted(&self, buffers: &mut [Vec<f32>]) -> Result<(), CallError> {
        self.run_interpreted_with(buffers, InterpretOptions::default())
    }

    /// [`CallKernel::run_interpreted`] with options: a step limit per
    /// call index, and whether leaving a built-in's domain is an error.
    pub fn run_interpreted_with(
        &self,
        buffers: &mut [Vec<f32>],
        options: InterpretOptions,
    ) -> Result<(), CallError> {
        let (it, views) = self.module()?;
        let it = it.with_options(options);
        // The function's arguments: the parameters that are values.
        let args: Vec<usize> = (self.params.iter().enumerate())
            .filter(|(_, p)| self.source.is_some() || p.ty.accessed().is_none())
            .map(|(i, _)| i)
            .collect();
        self.run_each(buffers, &mut |values| {
            let mut given = Vec::with_capacity(args.len());
            for &p in &args {
                let param = &self.params[p];
                given.push(self.value_of(&param.value, values).ok_or_else(|| {
                    CallError::UnsupportedWgsl {
                        function: self.function.to_string(),
                        construct: format!(
                            "parameter `{}` of type {}: the interpreter passes scalars, vectors, matrices, fixed arrays and structs",
                            param.name,
                            param.ty.spelled(Language::Wgsl)
                        ),
                        at: String::new(),
                    }
                })?);
            }
            let mut slices = KernelSlices {
                views: &views,
                values,
            };
            let ret = it.call_with(&self.function, &mut given, &mut slices)?;
            if let (Some(r), Some(v)) = (self.result, ret) {
                v.write(&mut values[r]);
            }
            for (&p, v) in args.iter().zip(&given) {
                if self.params[p].direction.writes() {
                    self.write_value(&self.params[p].value, v, values);
                }
            }
            Ok(())
        })
    }

    fn value_of(&self, v: &ParamValue, values: &[Vec<f32>]) -> Option<Value> {
        match v {
            ParamValue::Leaf(i) => Value::read(&self.leaves[*i].ty, &values[*i]),
            ParamValue::Fields(fields) => Some(Value::Struct(
                fields
                    .iter()
                    .map(|(_, f)| self.value_of(f, values))
                    .collect::<Option<_>>()?,
            )),
        }
    }

    fn write_value(&self, at: &ParamValue, v: &Value, values: &mut [Vec<f32>]) {
        match at {
            ParamValue::Leaf(i) => {
                v.write(&mut values[*i]);
            }
            ParamValue::Fields(fields) => {
                for ((_, f), x) in fields.iter().zip(v.components()) {
                    self.write_value(f, x, values);
                }
            }
        }
    }
}

impl HostCall {
    /// Runs the call on the CPU through the WGSL interpreter
    /// ([`CallKernel::run_interpreted`]) and returns what it wrote by
    /// name.
    pub fn run_interpreted(self) -> Result<HostOutputs, CallError> {
        self.run_with(|kernel, mut buffers| {
            kernel.run_interpreted(&mut buffers)?;
            Ok(buffers)
        })
    }
}
