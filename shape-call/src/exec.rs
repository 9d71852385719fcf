//! Running a resolved call: where every argument's elements are for each
//! call index, and the reference executor that calls a Rust closure once
//! per call index.
//!
//! Every argument (a leaf: a parameter, or one field of a struct given
//! field by field) is a buffer of `f32` holding its full shape row-major,
//! as given (before any map). For call index `c` and element `t` of its
//! type, a leaf's element is at
//! `sum_k c[k] * call_strides[k] + sum_j t[j] * type_strides[j]`; a call
//! stride is 0 along call dims the argument broadcasts over. Integer and
//! boolean parameters are stored as `f32` and converted when loaded
//! (exact below 2^24).

use std::sync::Arc;

use super::bind::{AxisRole, BoundCall, Resolution, ResolvedArg};
use super::error::CallError;
use super::generator::{Generator, ValueLayout};
use super::signature::Direction;
use super::types::{Extent, Language, ParamType, Scalar};

/// One argument of a [`CallKernel`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelLeaf {
    /// `a`, `p.position` or `_result`.
    pub path: Arc<str>,
    /// Its type, every size resolved.
    pub ty: ParamType,
    /// How its parameter passes data.
    pub direction: Direction,
    /// Elements to step per unit of each call dim (0 where it broadcasts).
    pub call_strides: Vec<u64>,
    /// Elements to step per unit of each of its type's dims.
    pub type_strides: Vec<u64>,
    /// Its resolved type shape.
    pub type_shape: Vec<u64>,
    /// The number of elements of its buffer.
    pub len: u64,
    /// Whether the call allocates it.
    pub allocated: bool,
    /// The generator whose values it takes, for a generator argument
    /// (its buffer is one unused element, given by [`CallKernel::buffers`]).
    pub generator: Option<GeneratedLeaf>,
}

/// A leaf whose values a generator computes for each call.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct GeneratedLeaf {
    /// The generator.
    pub generator: Generator,
    /// How its values fill the parameter's type.
    pub layout: ValueLayout,
    /// For `call_id` and `grid`, per value, the call dim whose index it
    /// takes (`None`: a grid dim of size 1, index 0); empty for the others.
    pub dims: Vec<Option<usize>>,
    /// The parameter's scalar kind (integers wrap to its 32 bits).
    pub scalar: Scalar,
}

impl GeneratedLeaf {
    /// Its values at call index `index` (row-major position `flat`).
    pub fn values(&self, index: &[u64], flat: u64) -> Vec<f32> {
        let at: Vec<u64> = self
            .dims
            .iter()
            .map(|d| d.map_or(0, |c| index[c]))
            .collect();
        self.generator.values(self.layout, self.scalar, &at, flat)
    }
}

impl KernelLeaf {
    /// Whether the function writes this leaf's buffer: an `out` or
    /// `inout` parameter, the result, or a read-write tensor
    /// (`RWTensor<T,N>`, `RWNDBuffer<T,N>`), which the function writes
    /// through though its parameter is not `out`.
    pub fn writes(&self) -> bool {
        self.direction.writes() || self.ty.writes_through()
    }

    /// The elements one call index reads or writes: the product of the
    /// type shape.
    pub fn elements(&self) -> u64 {
        self.type_shape
            .iter()
            .fold(1u64, |a, &s| a.saturating_mul(s))
    }
}

/// How a parameter's value is made from leaves.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ParamValue {
    /// One leaf.
    Leaf(usize),
    /// A struct, field by field, in declaration order.
    Fields(Vec<(Arc<str>, ParamValue)>),
}

/// One parameter of a [`CallKernel`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KernelParam {
    /// Its name.
    pub name: Arc<str>,
    /// Its type, sizes resolved.
    pub ty: ParamType,
    /// How it passes data.
    pub direction: Direction,
    /// The leaves it is made of.
    pub value: ParamValue,
}

/// A resolved call ready to run: for backends that execute calls.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallKernel {
    /// The function's name.
    pub function: Arc<str>,
    /// Its WGSL source, when it was reflected from WGSL.
    pub source: Option<Arc<str>>,
    /// Its WGSL body, when a Slang-style declaration was given one
    /// ([`super::Signature::with_wgsl_body`]).
    pub body: Option<Arc<str>>,
    /// The signature's language.
    pub language: Language,
    /// The parameters, in order.
    pub params: Vec<KernelParam>,
    /// The leaf that receives the return value.
    pub result: Option<usize>,
    /// Every argument: the parameters' leaves in order, then the result.
    pub leaves: Vec<KernelLeaf>,
    /// The call shape.
    pub call_shape: Vec<u64>,
    /// Whether outputs written by several call indices were allowed.
    pub races_allowed: bool,
}

impl BoundCall {
    /// The kernel of a call resolved by [`BoundCall::call`]: every leaf's
    /// strides, and how the parameters are made of leaves.
    ///
    /// ```
    /// use shape_call::{Arg, CallArgs, Function};
    /// let dot = Function::parse("float dot(float3 a, float3 b)").unwrap();
    /// let args = CallArgs::new().arg(Arg::tensor(&[4, 3])).arg(Arg::tensor(&[3]));
    /// let bound = dot.bind(&args).unwrap();
    /// let kernel = bound.kernel(&bound.call(&args).unwrap()).unwrap();
    /// let mut data = kernel.buffers(vec![vec![1.0; 12], vec![1.0, 2.0, 3.0]]).unwrap();
    /// kernel
    ///     .run_cpu(&mut data, &mut |v: &mut [Vec<f32>]| {
    ///         v[2][0] = (0..3).map(|i| v[0][i] * v[1][i]).sum();
    ///     })
    ///     .unwrap();
    /// assert_eq!(data[2], vec![6.0; 4]);
    /// ```
    pub fn kernel(&self, resolution: &Resolution) -> Result<CallKernel, CallError> {
        let k = resolution.call_shape.len();
        let resolved: Vec<&ResolvedArg> =
            resolution.args.iter().chain(&resolution.result).collect();
        if resolved.len() != self.leaves.len() {
            return Err(CallError::Rebind {
                arg: "_result".into(),
                message: "the resolution is of another bound call".into(),
            });
        }
        let mut leaves = Vec::with_capacity(resolved.len());
        for (l, r) in self.leaves.iter().zip(&resolved) {
            let ty = resolve_sizes(&l.ty, &r.type_shape);
            let mut strides = vec![0u64; r.shape.len()];
            let mut acc = 1u64;
            for i in (0..r.shape.len()).rev() {
                strides[i] = acc;
                acc = acc.saturating_mul(r.shape[i]);
            }
            let mut call_strides = vec![0u64; k];
            let mut type_strides = vec![0u64; r.type_shape.len()];
            for (i, role) in r.axes.iter().enumerate() {
                match *role {
                    AxisRole::Call(c) if r.shape[i] != 1 => call_strides[c] = strides[i],
                    AxisRole::Call(_) => {}
                    AxisRole::Type(t) => type_strides[t] = strides[i],
                }
            }
            let generator = match l.generator() {
                Some(g) => Some(generated(g, &ty, r, k)?),
                None => None,
            };
            let (len, call_strides, type_strides) = match generator {
                // No data: one unused element keeps every leaf bound.
                Some(_) => (1, vec![0; k], vec![0; r.type_shape.len()]),
                None => (acc, call_strides, type_strides),
            };
            leaves.push(KernelLeaf {
                path: l.path.clone(),
                ty,
                direction: l.direction,
                call_strides,
                type_strides,
                type_shape: r.type_shape.clone(),
                len,
                allocated: r.allocated,
                generator,
            });
        }
        let sig = &self.signature;
        let mut params = Vec::with_capacity(sig.params.len());
        for (p, param) in sig.params.iter().enumerate() {
            let mine: Vec<(usize, &[Arc<str>])> = self
                .leaves
                .iter()
                .enumerate()
                .filter(|(_, l)| l.param == p)
                .map(|(i, l)| (i, l.access.fields.as_slice()))
                .collect();
            let value = param_value(&mine);
            let ty = match &value {
                ParamValue::Leaf(i) => leaves[*i].ty.clone(),
                ParamValue::Fields(_) => param.ty.clone(),
            };
            params.push(KernelParam {
                name: param.name.clone(),
                ty,
                direction: param.direction,
                value,
            });
        }
        let result = sig.result.as_ref().map(|_| leaves.len() - 1);
        Ok(CallKernel {
            function: sig.name.clone(),
            source: sig.source.clone(),
            body: sig.body.clone(),
            language: sig.language,
            params,
            result,
            leaves,
            call_shape: resolution.call_shape.clone(),
            races_allowed: self.allow_races,
        })
    }
}

/// A generator leaf: its layout in `ty` and the call dim of each value
/// (`call_id`: every call dim in order; `grid`: each grid dim's, unless
/// its size is a fixed 1).
fn generated(
    g: &Generator,
    ty: &ParamType,
    r: &ResolvedArg,
    k: usize,
) -> Result<GeneratedLeaf, CallError> {
    let layout = g.layout(ty).map_err(|reason| CallError::TypeMismatch {
        arg: r.path.clone(),
        param_type: ty.spelled(Language::Slang),
        found: g.describe(),
        reason,
    })?;
    let dims = match g {
        Generator::CallId => (0..k).map(Some).collect(),
        Generator::Grid { shape, .. } => shape
            .iter()
            .zip(&r.axes)
            .map(|(size, role)| match (size, role) {
                (Some(1), _) | (_, AxisRole::Type(_)) => None,
                (_, AxisRole::Call(c)) => Some(*c),
            })
            .collect(),
        _ => Vec::new(),
    };
    let scalar = match ty.leaf() {
        ParamType::Scalar(s) => *s,
        _ => Scalar::Float,
    };
    Ok(GeneratedLeaf {
        generator: g.clone(),
        layout,
        dims,
        scalar,
    })
}

/// `ty` with its generic sizes taken from its resolved type shape.
fn resolve_sizes(ty: &ParamType, type_shape: &[u64]) -> ParamType {
    let extents = ty.type_shape();
    let size = |g: &str| {
        extents
            .iter()
            .position(|e| matches!(e, Extent::Generic(n) if **n == *g))
            .and_then(|t| type_shape.get(t).copied())
    };
    ty.substituted(&|_| None, &size)
}

fn param_value(leaves: &[(usize, &[Arc<str>])]) -> ParamValue {
    match leaves {
        [(i, [])] => ParamValue::Leaf(*i),
        _ => {
            let mut fields: Vec<(Arc<str>, ParamValue)> = Vec::new();
            let mut names: Vec<&Arc<str>> = Vec::new();
            for (_, f) in leaves {
                if let Some(n) = f.first() {
                    if !names.contains(&n) {
                        names.push(n);
                    }
                }
            }
            for n in names {
                let sub: Vec<(usize, &[Arc<str>])> = leaves
                    .iter()
                    .filter(|(_, f)| f.first() == Some(n))
                    .map(|(i, f)| (*i, &f[1..]))
                    .collect();
                fields.push((n.clone(), param_value(&sub)));
            }
            ParamValue::Fields(fields)
        }
    }
}

impl CallKernel {
    /// The buffers of a run: `inputs` for the leaves that are not
    /// allocated, in order, and zero-filled buffers for those that are.
    /// Each input must hold exactly its leaf's elements; memory is
    /// allocated fallibly.
    pub fn buffers(&self, inputs: Vec<Vec<f32>>) -> Result<Vec<Vec<f32>>, CallError> {
        let mut given = inputs.into_iter();
        let mut out = Vec::with_capacity(self.leaves.len());
        for l in &self.leaves {
            if l.generator.is_some() {
                out.push(vec![0.0]);
            } else if l.allocated {
                let len = usize::try_from(l.len).map_err(|_| too_large(l))?;
                let mut v = Vec::new();
                v.try_reserve_exact(len).map_err(|_| too_large(l))?;
                v.resize(len, 0.0);
                out.push(v);
            } else {
                let v = given.next().ok_or_else(|| CallError::Data {
                    arg: l.path.to_string(),
                    message: "no data was given for it".into(),
                })?;
                out.push(v);
            }
        }
        if given.next().is_some() {
            let read: Vec<String> = (self.leaves.iter())
                .filter(|l| !l.allocated && l.generator.is_none())
                .map(|l| l.path.to_string())
                .collect();
            return Err(CallError::Data {
                arg: read.last().cloned().unwrap_or_default(),
                message: format!(
                    "{} inputs were given, but the call reads {}, one per argument it does not allocate, in order ({})",
                    read.len() + 1 + given.count(),
                    read.len(),
                    read.join(", ")
                ),
            });
        }
        self.check_buffers(out.iter().map(|v| v.len() as u64))?;
        Ok(out)
    }

    /// Refuses buffers whose lengths are not the leaves', and a number of
    /// buffers other than the number of leaves.
    pub fn check_buffers(&self, lens: impl Iterator<Item = u64>) -> Result<(), CallError> {
        let mut given = 0;
        for len in lens {
            if let Some(l) = self.leaves.get(given) {
                if len != l.len {
                    return Err(CallError::Data {
                        arg: l.path.to_string(),
                        message: format!(
                            "its buffer holds {len} elements, but its shape needs {}",
                            l.len
                        ),
                    });
                }
            }
            given += 1;
        }
        if given != self.leaves.len() {
            return Err(self.buffer_count(given));
        }
        Ok(())
    }

    /// The error for `given` buffers where the call has one per leaf.
    fn buffer_count(&self, given: usize) -> CallError {
        CallError::BufferCount {
            given,
            leaves: self.leaves.iter().map(|l| l.path.to_string()).collect(),
        }
    }

    /// The number of call indices.
    pub fn points(&self) -> u128 {
        self.call_shape.iter().map(|&s| u128::from(s)).product()
    }

    /// The position in its buffer of element `t` (row-major over the
    /// type shape) of `leaf` at call index `call` (row-major over the call
    /// shape). Panics if `leaf` is not a leaf of this kernel.
    pub fn element(&self, leaf: usize, call: u64, t: u64) -> u64 {
        let l = &self.leaves[leaf];
        let mut offset = 0u64;
        let mut rest = call;
        // A size of 0 has no element; `checked_*` keeps this total anyway.
        for (c, &size) in self.call_shape.iter().enumerate().rev() {
            let i = rest.checked_rem(size).unwrap_or(0);
            offset = offset.wrapping_add(i.wrapping_mul(l.call_strides[c]));
            rest = rest.checked_div(size).unwrap_or(0);
        }
        let mut rest = t;
        for (j, &size) in l.type_shape.iter().enumerate().rev() {
            let i = rest.checked_rem(size).unwrap_or(0);
            offset = offset.wrapping_add(i.wrapping_mul(l.type_strides[j]));
            rest = rest.checked_div(size).unwrap_or(0);
        }
        offset
    }

    /// The reference executor: for each call index in row-major order,
    /// loads every leaf's elements, calls `f` with them (one `Vec` per
    /// leaf, in leaf order; outputs hold what their buffers hold) and
    /// stores back the leaves the function writes ([`KernelLeaf::writes`]).
    /// A slice or tensor parameter's `Vec` is the call's whole slice; a
    /// read-write tensor's is stored back whole, so a tensor that several
    /// call indices share sees the earlier ones' writes.
    pub fn run_cpu(
        &self,
        buffers: &mut [Vec<f32>],
        f: &mut dyn FnMut(&mut [Vec<f32>]),
    ) -> Result<(), CallError> {
        self.run_each(buffers, &mut |v| {
            f(v);
            Ok(())
        })
    }

    /// [`CallKernel::run_cpu`] with a function that may fail: the first
    /// error stops the run.
    pub(crate) fn run_each(
        &self,
        buffers: &mut [Vec<f32>],
        f: &mut PerCall<'_>,
    ) -> Result<(), CallError> {
        self.check_buffers(buffers.iter().map(|b| b.len() as u64))?;
        let points = u64::try_from(self.points()).map_err(|_| CallError::Data {
            arg: "_result".into(),
            message: "the call has more than 2^64 call indices".into(),
        })?;
        // One call's elements of every leaf (a slice's may be large):
        // allocated fallibly.
        let mut values: Vec<Vec<f32>> = Vec::with_capacity(self.leaves.len());
        for l in &self.leaves {
            let n = usize::try_from(l.elements()).map_err(|_| too_large(l))?;
            let mut v = Vec::new();
            v.try_reserve_exact(n).map_err(|_| too_large(l))?;
            v.resize(n, 0.0);
            values.push(v);
        }
        let generates = self.leaves.iter().any(|l| l.generator.is_some());
        let mut index = vec![0u64; self.call_shape.len()];
        for call in 0..points {
            if generates {
                let mut rest = call;
                for (c, &size) in self.call_shape.iter().enumerate().rev() {
                    index[c] = rest % size;
                    rest /= size;
                }
            }
            for (i, l) in self.leaves.iter().enumerate() {
                if let Some(g) = &l.generator {
                    values[i] = g.values(&index, call);
                    continue;
                }
                for t in 0..l.elements() {
                    values[i][t as usize] = buffers[i][self.element(i, call, t) as usize];
                }
            }
            f(&mut values)?;
            for (i, l) in self.leaves.iter().enumerate() {
                if l.writes() {
                    for t in 0..l.elements() {
                        let at = self.element(i, call, t) as usize;
                        buffers[i][at] = values[i][t as usize];
                    }
                }
            }
        }
        Ok(())
    }
}

/// What [`CallKernel::run_each`] calls once per call index.
pub(crate) type PerCall<'a> = dyn FnMut(&mut [Vec<f32>]) -> Result<(), CallError> + 'a;

fn too_large(l: &KernelLeaf) -> CallError {
    CallError::Data {
        arg: l.path.to_string(),
        message: format!("{} elements cannot be allocated", l.len),
    }
}
