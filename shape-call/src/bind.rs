//! Binding a call (dimensionalities and element types, no sizes) and
//! resolving it (sizes: the call shape, outputs, races).

use std::collections::HashMap;
use std::sync::Arc;

use shape_core::Dim;

use super::arg::{Arg, CallArgs, Number, OutputSpec};
use super::error::CallError;
use super::signature::{Direction, Signature};
use super::types::{Extent, Language, ParamType, Scalar};
use shape_solver::{Constraint, Solver};
use shape_solver::{Origin, Why};

/// A remapping of one argument's dims, applied before anything else.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArgMap {
    /// At index i, the position (call dim, or type dim past the call
    /// dims) that receives argument dim i: `(2,0,1)`.
    Dims(Vec<usize>),
    /// The argument's dims by name, in the order they should take:
    /// `(width,height,channels)`.
    Names(Vec<Arc<str>>),
}

impl ArgMap {
    /// Reads `(2,0,1)` or `(width,height,channels)`.
    ///
    /// ```
    /// use shape_call::ArgMap;
    /// assert_eq!(ArgMap::parse("(2,0,1)").unwrap(), ArgMap::Dims(vec![2, 0, 1]));
    /// assert!(ArgMap::parse("(2,x)").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<ArgMap, CallError> {
        let t = text.trim();
        let inner = t
            .strip_prefix('(')
            .and_then(|t| t.strip_suffix(')'))
            .ok_or_else(|| {
                CallError::syntax(text, 0, "write a map as `(2,0,1)` or `(w,h,c)`".into())
            })?;
        let items: Vec<&str> = inner
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect();
        if items.iter().all(|s| s.chars().all(|c| c.is_ascii_digit())) {
            let dims = items
                .iter()
                .map(|s| {
                    s.parse::<usize>().map_err(|_| {
                        CallError::syntax(text, 0, format!("`{s}` is too large a dim"))
                    })
                })
                .collect::<Result<_, _>>()?;
            Ok(ArgMap::Dims(dims))
        } else if items.iter().all(|s| {
            s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !s.starts_with(|c: char| c.is_ascii_digit())
        }) {
            Ok(ArgMap::Names(items.iter().map(|s| Arc::from(*s)).collect()))
        } else {
            Err(CallError::syntax(
                text,
                0,
                "a map lists dims (`(2,0,1)`) or dim names (`(w,h,c)`), not both".into(),
            ))
        }
    }
}

/// A `vmap` spec: the argument dims of each parameter, named, and the
/// call dims they go to: `(N),(M)->(N,M)`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Vmap {
    text: String,
    groups: Vec<Vec<Arc<str>>>,
    output: Vec<Arc<str>>,
    /// Each call dim's position, by name.
    index: HashMap<Arc<str>, usize>,
}

impl Vmap {
    fn parse(text: &str) -> Result<Vmap, CallError> {
        let bad = |m: &str| CallError::InvalidVmap {
            spec: super::error::quoted(text),
            message: m.to_owned(),
        };
        let (ins, out) = text.split_once("->").ok_or_else(|| {
            bad("write it as `(N),(M)->(N,M)`: one group per parameter, then the call dims")
        })?;
        let group = |g: &str| -> Result<Vec<Arc<str>>, CallError> {
            let g = g.trim();
            let inner = g
                .strip_prefix('(')
                .and_then(|g| g.strip_suffix(')'))
                .ok_or_else(|| bad("each group is written in parentheses"))?;
            inner
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    if s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                        Ok(Arc::from(s))
                    } else {
                        Err(bad(&format!("`{s}` is not a dim name")))
                    }
                })
                .collect()
        };
        let mut groups = Vec::new();
        let mut rest = ins.trim();
        while !rest.is_empty() {
            let end = rest
                .find(')')
                .ok_or_else(|| bad("a group is not closed by `)`"))?;
            groups.push(group(&rest[..=end])?);
            rest = rest[end + 1..].trim_start();
            rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
        }
        let output = group(out)?;
        let mut index = HashMap::with_capacity(output.len());
        for (i, n) in output.iter().enumerate() {
            if index.insert(n.clone(), i).is_some() {
                return Err(bad(&format!("call dim `{n}` is named twice")));
            }
        }
        Ok(Vmap {
            text: text.to_owned(),
            groups,
            output,
            index,
        })
    }
}

/// A function to call over tensors: one or more overloads, with the
/// call's `map`s, `vmap` and race policy.
///
/// ```
/// use shape_call::{Arg, CallArgs, Function};
/// let dot = Function::parse("float dot(float3 a, float3 b)").unwrap();
/// let args = CallArgs::new().arg(Arg::tensor(&[100, 3])).arg(Arg::tensor(&[1000, 100, 3]));
/// let bound = dot.bind(&args).unwrap(); // dims and element types only
/// let call = bound.call(&args).unwrap(); // sizes
/// assert_eq!(call.call_shape, vec![1000, 100]);
/// assert_eq!(call.result.unwrap().arg_shape, vec![1000, 100]);
/// ```
#[derive(Clone, Debug)]
pub struct Function {
    overloads: Vec<Signature>,
    maps: Vec<(Arc<str>, ArgMap)>,
    vmap: Option<Vmap>,
    allow_races: bool,
}

impl Function {
    /// A function with one overload.
    pub fn new(signature: Signature) -> Function {
        Function {
            overloads: vec![signature],
            maps: Vec::new(),
            vmap: None,
            allow_races: false,
        }
    }

    /// A function with one overload, read by [`Signature::parse`].
    pub fn parse(signature: &str) -> Result<Function, CallError> {
        Ok(Function::new(Signature::parse(signature)?))
    }

    /// This function with another overload.
    pub fn overload(mut self, signature: Signature) -> Function {
        self.overloads.push(signature);
        self
    }

    /// This function with argument `arg` (a parameter name, or
    /// `param.field`) remapped by `map`.
    pub fn map(mut self, arg: &str, map: ArgMap) -> Function {
        self.maps.push((Arc::from(arg), map));
        self
    }

    /// This function with explicit call dims, `(N),(M)->(N,M)`: one group
    /// per parameter naming its argument dims, then the call dims.
    pub fn vmap(mut self, spec: &str) -> Result<Function, CallError> {
        self.vmap = Some(Vmap::parse(spec)?);
        Ok(self)
    }

    /// This function with outputs that several call indices write
    /// accepted (any one of their values may remain).
    pub fn allowing_races(mut self) -> Function {
        self.allow_races = true;
        self
    }

    /// The overloads.
    pub fn overloads(&self) -> &[Signature] {
        &self.overloads
    }

    /// The structs of every overload, for reading arguments.
    pub fn scope(&self) -> super::TypeScope {
        let mut scope = super::TypeScope::new();
        for s in &self.overloads {
            scope.merge(s.scope());
        }
        scope
    }

    /// Binds the call: matches element types, consumes type dims, applies
    /// maps and vmap and picks the one overload that takes `args`, from
    /// their kinds, element types and dims only. Each overload is tried
    /// on its own fork of the solver state that holds the generic sizes.
    pub fn bind(&self, args: &CallArgs) -> Result<BoundCall, CallError> {
        let base = Solver::new();
        let mut ok = Vec::new();
        let mut failed = Vec::new();
        for sig in &self.overloads {
            match self.bind_one(sig, args, base.clone()) {
                Ok(b) => ok.push(b),
                Err(e) => failed.push((sig.to_string(), e)),
            }
        }
        let function = self
            .overloads
            .first()
            .map_or_else(String::new, |s| s.name.to_string());
        match ok.len() {
            1 => Ok(ok.pop().expect("one bound overload")),
            0 if failed.len() == 1 => Err(failed.pop().expect("one failure").1),
            0 => Err(CallError::NoMatchingOverload {
                function,
                candidates: failed
                    .into_iter()
                    .map(|(s, e)| (s, e.to_string()))
                    .collect(),
            }),
            _ => Err(CallError::AmbiguousOverload {
                function,
                candidates: ok.iter().map(|b| b.signature.to_string()).collect(),
            }),
        }
    }

    /// [`Function::bind`], then [`BoundCall::call`] with the same
    /// arguments.
    pub fn resolve(&self, args: &CallArgs) -> Result<Resolution, CallError> {
        self.bind(args)?.call(args)
    }

    fn bind_one(
        &self,
        sig: &Signature,
        args: &CallArgs,
        mut solver: Solver,
    ) -> Result<BoundCall, CallError> {
        let function = sig.to_string();
        let lang = sig.language;
        // Which argument each parameter takes.
        if args.positional.len() > sig.params.len() {
            return Err(CallError::TooManyArguments {
                function,
                expected: sig.params.len(),
                found: args.positional.len(),
            });
        }
        let mut tops: Vec<Option<Top>> = (0..sig.params.len())
            .map(|i| (i < args.positional.len()).then_some(Top::Positional(i)))
            .collect();
        let mut result_top = None;
        let by_name: HashMap<&str, usize> = sig
            .params
            .iter()
            .enumerate()
            .map(|(k, p)| (&*p.name, k))
            .collect();
        for (name, _) in &args.named {
            if &**name == "_result" && sig.result.is_some() {
                if result_top.is_some() {
                    return Err(CallError::DuplicateArgument {
                        function,
                        name: name.to_string(),
                    });
                }
                result_top = Some(Top::Named(name.clone()));
                continue;
            }
            let k = *by_name
                .get(&**name)
                .ok_or_else(|| CallError::UnknownParameter {
                    function: function.clone(),
                    name: super::error::quoted(name),
                })?;
            if tops[k].is_some() {
                return Err(CallError::DuplicateArgument {
                    function,
                    name: name.to_string(),
                });
            }
            tops[k] = Some(Top::Named(name.clone()));
        }
        let given = Given::new(args);
        let mut leaves = Vec::new();
        for (k, p) in sig.params.iter().enumerate() {
            let top = tops[k].clone().ok_or_else(|| CallError::MissingArgument {
                function: function.clone(),
                name: p.name.to_string(),
            })?;
            let access = Access {
                top,
                fields: Vec::new(),
                hints: Vec::new(),
            };
            let arg = access.find(&given).expect("an assigned argument");
            expand(
                &function,
                p.name.clone(),
                &p.ty,
                p.direction,
                k,
                arg,
                access,
                &mut leaves,
            )?;
        }
        if let Some(ret) = &sig.result {
            let top = result_top.unwrap_or(Top::Default);
            let access = Access {
                top,
                fields: Vec::new(),
                hints: Vec::new(),
            };
            let arg = access.find(&given).unwrap_or(&DEFAULT_OUTPUT);
            expand(
                &function,
                Arc::from("_result"),
                ret,
                Direction::Return,
                usize::MAX,
                arg,
                access,
                &mut leaves,
            )?;
        }

        // Element types, generic types, dims and maps.
        let mut types: Vec<(Arc<str>, Scalar)> = Vec::new();
        let maps: HashMap<&str, &ArgMap> = self.maps.iter().map(|(n, m)| (&**n, m)).collect();
        let mut pending = Vec::with_capacity(leaves.len());
        for leaf in leaves {
            let arg = leaf.access.find(&given).unwrap_or(&DEFAULT_OUTPUT);
            let map = maps.get(&*leaf.path).map(|&m| m.clone());
            pending.push(self.prepare(sig, leaf, arg, map, &mut types)?);
        }

        // Call dims.
        let call_dims = match &self.vmap {
            Some(v) => v.output.len(),
            None => pending.iter().filter_map(|l| l.as_len()).max().unwrap_or(0),
        };
        for l in &mut pending {
            l.assign_call_dims(self.vmap.as_ref(), sig, call_dims)?;
        }

        // Type dims, with generic sizes shared through the solver.
        let why = Why::of(solver.add_origin(Origin::Direct {
            what: Arc::from(format!("the call of {function}")),
        }));
        let mut generic: HashMap<Arc<str>, shape_core::DimVar> = HashMap::new();
        let mut dims_of = Vec::with_capacity(pending.len());
        for l in &pending {
            let mut ds = Vec::with_capacity(l.ts.len());
            for e in &l.ts {
                ds.push(match e {
                    Extent::Fixed(n) => Dim::sized(*n),
                    Extent::Generic(g) => Dim::Var(
                        *generic
                            .entry(g.clone())
                            .or_insert_with(|| solver.fresh_dim()),
                    ),
                    Extent::Any => Dim::Var(solver.fresh_dim()),
                });
            }
            if l.allocate.is_none() {
                let mapped = match &l.map {
                    None => l.known.clone(),
                    Some(m) => {
                        let mut out = vec![Some(1); l.mapped_ndims];
                        for (i, &p) in m.iter().enumerate() {
                            out[p] = l.known[i];
                        }
                        out
                    }
                };
                for (k, d) in ds.iter().enumerate() {
                    let axis = l.as_len().unwrap_or(0) + k;
                    let Some(found) = mapped[axis] else { continue };
                    let required = |what: String| CallError::TypeShape {
                        arg: l.leaf.path.to_string(),
                        axis,
                        found,
                        required: what,
                        param_type: l.leaf.ty.spelled(lang),
                    };
                    let Some(size) = Dim::known(found) else {
                        return Err(required("a size of at least 1".into()));
                    };
                    if let Err(e) = solver.add(Constraint::DimEq {
                        a: d.clone(),
                        b: size,
                        why,
                    }) {
                        let what = match &l.ts[k] {
                            Extent::Fixed(n) => format!("{n}"),
                            Extent::Generic(g) => format!("the generic size `{g}` to agree ({e})"),
                            Extent::Any => format!("a size that fits ({e})"),
                        };
                        return Err(required(what));
                    }
                }
            }
            dims_of.push(ds);
        }
        // What the solver knows becomes the call-time checks: a size, or
        // a slot that the first argument with that dim fills.
        let mut slot_of: HashMap<Dim, usize> = HashMap::new();
        let mut bound = Vec::with_capacity(pending.len());
        for (l, ds) in pending.into_iter().zip(dims_of) {
            let mut checks = Vec::with_capacity(ds.len());
            for d in &ds {
                let d = solver.resolve_dim(d).expect("a dim of this solver");
                checks.push(match &d {
                    Dim::Known(n) => TypeCheck::Fixed(n.size()),
                    Dim::Var(_) => {
                        let next = slot_of.len();
                        TypeCheck::Slot(*slot_of.entry(d.clone()).or_insert(next))
                    }
                });
            }
            bound.push(l.finish(checks));
        }
        let mut generic_sizes = Vec::with_capacity(generic.len());
        for (name, v) in generic {
            let check = match solver
                .resolve_dim(&Dim::Var(v))
                .expect("a dim of this solver")
            {
                Dim::Known(n) => TypeCheck::Fixed(n.size()),
                d => TypeCheck::Slot(slot_of[&d]),
            };
            generic_sizes.push((name, check));
        }
        // Generic types must be bound by some argument.
        for l in &bound {
            if let ParamType::Generic(t) = l.ty.leaf() {
                if !types.iter().any(|(n, _)| n == t) {
                    return Err(CallError::TypeMismatch {
                        arg: l.path.to_string(),
                        param_type: l.ty.spelled(lang),
                        found: "an output".into(),
                        reason: format!("no argument binds the generic type `{t}`"),
                    });
                }
            }
        }
        Ok(BoundCall {
            signature: sig.clone(),
            leaves: bound,
            call_dims,
            slots: slot_of.len(),
            generic_sizes,
            types,
            allow_races: self.allow_races,
        })
    }

    /// Element type, dims and map of one leaf.
    fn prepare(
        &self,
        sig: &Signature,
        leaf: Leaf,
        arg: &Arg,
        map: Option<ArgMap>,
        types: &mut Vec<(Arc<str>, Scalar)>,
    ) -> Result<Pending, CallError> {
        let lang = sig.language;
        let mismatch = |reason: String| CallError::TypeMismatch {
            arg: leaf.path.to_string(),
            param_type: leaf.ty.spelled(lang),
            found: arg.describe(lang),
            reason,
        };
        let ts = leaf.ty.type_shape();
        let (arg_leaf, shape) = match arg {
            Arg::Tensor { elem, .. } => (
                Some(elem.leaf().clone()),
                Shape::Full(arg.full_shape().map_or(0, |s| s.len())),
            ),
            Arg::Value(t) => (
                Some(t.leaf().clone()),
                Shape::Known(arg.full_shape().unwrap_or_default()),
            ),
            Arg::Ref(s) => (Some(ParamType::Scalar(*s)), Shape::Known(Vec::new())),
            Arg::Number(n) => {
                if !ts.is_empty() {
                    return Err(mismatch("a number binds only to a scalar parameter: there is no implicit conversion between concrete types".into()));
                }
                let s = match (n, leaf.ty.leaf()) {
                    (Number::Float(_), ParamType::Scalar(s @ (Scalar::Float | Scalar::Half))) => *s,
                    (Number::Int(_), ParamType::Scalar(s)) if *s != Scalar::Bool => *s,
                    (Number::Float(_), ParamType::Generic(_)) => Scalar::Float,
                    (Number::Int(_), ParamType::Generic(_)) => Scalar::Int,
                    _ => {
                        return Err(mismatch(
                            "no implicit conversion between concrete types".into(),
                        ))
                    }
                };
                (Some(ParamType::Scalar(s)), Shape::Known(Vec::new()))
            }
            Arg::Output(spec) => {
                if leaf.direction == Direction::In {
                    return Err(CallError::UnsizedOutput {
                        arg: leaf.path.to_string(),
                        message: "an output to allocate cannot be passed to an `in` parameter"
                            .into(),
                    });
                }
                if let Some(e) = &spec.elem {
                    let resolved = leaf.ty.substituted(&|_| None, &|_| None);
                    if *e != resolved && !matches!(leaf.ty.leaf(), ParamType::Generic(_)) {
                        return Err(mismatch(format!(
                            "an output's element type must be the parameter's type, {}",
                            leaf.ty.spelled(lang)
                        )));
                    }
                }
                let shape = match &spec.shape {
                    Some(s) => {
                        let mut full = s.clone();
                        full.extend(ts.iter().map(|e| match e {
                            Extent::Fixed(n) => *n,
                            _ => 1,
                        }));
                        if ts.iter().any(|e| !matches!(e, Extent::Fixed(_))) {
                            return Err(CallError::UnsizedOutput {
                                arg: leaf.path.to_string(),
                                message: format!("{} has sizes no argument gives, so an output of it cannot be allocated", leaf.ty.spelled(lang)),
                            });
                        }
                        Shape::Known(full)
                    }
                    None => Shape::Allocate(spec.dims),
                };
                (spec.elem.as_ref().map(|e| e.leaf().clone()), shape)
            }
            // Fields are expanded into leaves before this; a struct's
            // fields given to anything else were refused there.
            Arg::Fields(_) => return Err(mismatch("only a struct parameter takes fields".into())),
        };
        // Element types: equal, or a generic type bound once.
        if let Some(a) = &arg_leaf {
            match (leaf.ty.leaf(), a) {
                (ParamType::Scalar(p), ParamType::Scalar(s)) if p == s => {}
                (ParamType::Struct(p), ParamType::Struct(s)) if p.name == s.name => {}
                (ParamType::Generic(t), ParamType::Scalar(s)) => match types.iter().find(|(n, _)| n == t) {
                    Some((_, bound)) if bound != s => {
                        return Err(mismatch(format!(
                            "generic type `{t}` is already {} from another argument",
                            bound.spelled(lang)
                        )))
                    }
                    Some(_) => {}
                    None => types.push((t.clone(), *s)),
                },
                (p, a) => {
                    return Err(mismatch(format!(
                        "its elements are {} where the parameter's are {}: no implicit conversion between concrete types",
                        a.spelled(lang),
                        p.spelled(lang)
                    )))
                }
            }
        }
        // Maps.
        let ndims = match &shape {
            Shape::Full(n) => Some(*n),
            Shape::Known(s) => Some(s.len()),
            Shape::Allocate(_) => None,
        };
        let map = match (map, ndims) {
            (None, _) => None,
            (Some(_), None) => {
                return Err(CallError::InvalidMap {
                    arg: leaf.path.to_string(),
                    message: "an output to allocate has no dims to map".into(),
                })
            }
            (Some(m), Some(n)) => Some(check_map(&leaf.path, m, n, arg)?),
        };
        let mapped_ndims = match (&map, ndims) {
            (Some(m), _) => m.iter().max().map_or(0, |&x| x + 1),
            (None, Some(n)) => n,
            (None, None) => 0,
        };
        if ndims.is_some() && mapped_ndims < ts.len() {
            return Err(CallError::Dimensionality {
                arg: leaf.path.to_string(),
                found: mapped_ndims,
                needed: ts.len(),
                param_type: leaf.ty.spelled(lang),
                type_shape: shape_text(&ts),
            });
        }
        // The sizes known at bind: all of a value's, and the element dims
        // of a tensor (its element type fixes them).
        let (known, allocate) = match (shape, arg) {
            (Shape::Known(s), _) => (s.into_iter().map(Some).collect(), None),
            (Shape::Full(n), Arg::Tensor { elem, .. }) => {
                let fixed: Vec<Option<u64>> = elem
                    .type_shape()
                    .iter()
                    .map(|e| match e {
                        Extent::Fixed(n) => Some(*n),
                        _ => None,
                    })
                    .collect();
                let mut known = vec![None; n.saturating_sub(fixed.len())];
                known.extend(fixed);
                (known, None)
            }
            (Shape::Full(n), _) => (vec![None; n], None),
            (Shape::Allocate(d), _) => (Vec::new(), Some(d)),
        };
        Ok(Pending {
            ndims: ndims.unwrap_or(0),
            map,
            mapped_ndims,
            ts,
            known,
            allocate,
            as_calls: Vec::new(),
            arg_kind: ArgKind::of(arg),
            leaf,
        })
    }
}

static DEFAULT_OUTPUT: Arg = Arg::Output(OutputSpec {
    elem: None,
    dims: None,
    shape: None,
});

/// `(3)`, `(?, ?, 4)`.
fn shape_text(ts: &[Extent]) -> String {
    let items: Vec<String> = ts.iter().map(ToString::to_string).collect();
    format!("({})", items.join(", "))
}

/// The map as dims, checked against the argument's `n` dims.
fn check_map(path: &str, map: ArgMap, n: usize, arg: &Arg) -> Result<Vec<usize>, CallError> {
    let bad = |message: String| CallError::InvalidMap {
        arg: path.to_owned(),
        message,
    };
    let dims = match map {
        ArgMap::Dims(d) => d,
        ArgMap::Names(names) => {
            let Arg::Tensor {
                names: Some(arg_names),
                ..
            } = arg
            else {
                return Err(bad("a map by name needs a tensor with named dims".into()));
            };
            if names.len() != arg_names.len() {
                return Err(bad(format!(
                    "it names {} dims, but the tensor has {}",
                    names.len(),
                    arg_names.len()
                )));
            }
            // Position p takes the dim named names[p]: invert that.
            let position: HashMap<&str, usize> = arg_names
                .iter()
                .enumerate()
                .map(|(i, a)| (&**a, i))
                .collect();
            let mut dims = vec![usize::MAX; arg_names.len()];
            for (p, name) in names.iter().enumerate() {
                let i = *position
                    .get(&**name)
                    .ok_or_else(|| bad(format!("the tensor has no dim named `{name}`")))?;
                if dims[i] != usize::MAX {
                    return Err(bad(format!("dim `{name}` is named twice")));
                }
                dims[i] = p;
            }
            dims
        }
    };
    if dims.len() != n {
        return Err(bad(format!(
            "it has {} entries, but the argument has {n} dims (one entry per dim)",
            dims.len()
        )));
    }
    let mut seen = [false; 65];
    for &d in &dims {
        if d > 64 {
            return Err(bad(format!("position {d} is beyond 64 dims")));
        }
        if std::mem::replace(&mut seen[d], true) {
            return Err(bad(format!("position {d} receives two dims")));
        }
    }
    Ok(dims)
}

/// Where a leaf's argument is in [`CallArgs`].
#[derive(Clone, Debug, PartialEq, Eq)]
enum Top {
    Positional(usize),
    Named(Arc<str>),
    /// The return value with no `_result` given: allocated.
    Default,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Access {
    top: Top,
    pub(crate) fields: Vec<Arc<str>>,
    /// Where each field was in its struct argument at bind time.
    hints: Vec<usize>,
}

/// The arguments of one bind or call, with their names indexed, so that
/// finding every leaf's argument costs what the arguments are.
struct Given<'a> {
    args: &'a CallArgs,
    named: HashMap<&'a str, &'a Arg>,
}

impl<'a> Given<'a> {
    fn new(args: &'a CallArgs) -> Given<'a> {
        Given {
            args,
            named: args.named.iter().map(|(n, a)| (&**n, a)).collect(),
        }
    }
}

impl Access {
    fn find<'a>(&self, given: &Given<'a>) -> Option<&'a Arg> {
        let mut a = match &self.top {
            Top::Positional(i) => given.args.positional.get(*i)?,
            Top::Named(n) => *given.named.get(&**n)?,
            Top::Default => return None,
        };
        for (f, hint) in self.fields.iter().zip(&self.hints) {
            let Arg::Fields(fs) = a else { return None };
            // Fields come in the same order call after call: the index
            // they had at bind time is tried first.
            a = match fs.get(*hint) {
                Some((m, x)) if m == f => x,
                _ => &fs.iter().find(|(m, _)| m == f)?.1,
            };
        }
        Some(a)
    }
}

/// One parameter (or struct field) with one argument.
#[derive(Clone, Debug)]
struct Leaf {
    path: Arc<str>,
    ty: ParamType,
    direction: Direction,
    /// The parameter's position (for vmap groups); `usize::MAX` for the
    /// return value.
    param: usize,
    access: Access,
}

#[allow(clippy::too_many_arguments)]
fn expand(
    function: &str,
    path: Arc<str>,
    ty: &ParamType,
    direction: Direction,
    param: usize,
    arg: &Arg,
    access: Access,
    out: &mut Vec<Leaf>,
) -> Result<(), CallError> {
    match (arg, ty) {
        (Arg::Fields(given), ParamType::Struct(s)) => {
            let declared: std::collections::HashSet<&str> =
                s.fields.iter().map(|(f, _)| &**f).collect();
            let by_name: HashMap<&str, (usize, &Arg)> = given
                .iter()
                .enumerate()
                .map(|(i, (f, a))| (&**f, (i, a)))
                .collect();
            for (name, _) in given {
                if !declared.contains(&**name) {
                    return Err(CallError::UnknownParameter {
                        function: function.to_owned(),
                        name: format!("{path}.{}", super::error::quoted(name)),
                    });
                }
            }
            for (name, fty) in &s.fields {
                let sub = format!("{path}.{name}");
                let Some(&(hint, a)) = by_name.get(&**name) else {
                    return Err(CallError::MissingArgument {
                        function: function.to_owned(),
                        name: sub,
                    });
                };
                let mut acc = access.clone();
                acc.fields.push(name.clone());
                acc.hints.push(hint);
                expand(
                    function,
                    Arc::from(sub.as_str()),
                    fty,
                    direction,
                    param,
                    a,
                    acc,
                    out,
                )?;
            }
            Ok(())
        }
        (Arg::Fields(_), _) => Err(CallError::TypeMismatch {
            arg: path.to_string(),
            param_type: ty.spelled(Language::Slang),
            found: "a struct given field by field".into(),
            reason: "only a struct parameter takes fields".into(),
        }),
        _ => {
            out.push(Leaf {
                path,
                ty: ty.clone(),
                direction,
                param,
                access,
            });
            Ok(())
        }
    }
}

enum Shape {
    /// A tensor: its number of dims is known at bind, its sizes only at
    /// call.
    Full(usize),
    /// Sizes fixed by the argument's kind (a value, a reference, a
    /// number, an output of given shape): checked at bind.
    Known(Vec<u64>),
    /// An output to allocate, with its dims if constrained.
    Allocate(Option<usize>),
}

/// What kind of argument a leaf was bound with, so that a call with
/// another kind is refused.
#[derive(Clone, Debug, PartialEq)]
enum ArgKind {
    Tensor(ParamType),
    Value(ParamType),
    Number,
    Ref(Scalar),
    Output,
}

impl ArgKind {
    /// Whether `arg` is of this kind, with the same element type; no
    /// copy is made (this runs for every argument of every call).
    fn fits(&self, arg: &Arg) -> bool {
        match (self, arg) {
            (ArgKind::Tensor(e), Arg::Tensor { elem, .. }) => e == elem,
            (ArgKind::Value(t), Arg::Value(u)) => t == u,
            (ArgKind::Number, Arg::Number(_)) => true,
            (ArgKind::Ref(s), Arg::Ref(r)) => s == r,
            (ArgKind::Output, Arg::Output(_) | Arg::Fields(_)) => true,
            _ => false,
        }
    }

    fn of(arg: &Arg) -> ArgKind {
        match arg {
            Arg::Tensor { elem, .. } => ArgKind::Tensor(elem.clone()),
            Arg::Value(t) => ArgKind::Value(t.clone()),
            Arg::Number(_) => ArgKind::Number,
            Arg::Ref(s) => ArgKind::Ref(*s),
            Arg::Output(_) | Arg::Fields(_) => ArgKind::Output,
        }
    }
}

/// A leaf between element-type matching and call-dim assignment.
struct Pending {
    leaf: Leaf,
    arg_kind: ArgKind,
    ndims: usize,
    map: Option<Vec<usize>>,
    mapped_ndims: usize,
    ts: Vec<Extent>,
    /// The argument's sizes that are known at bind, per dim as given.
    known: Vec<Option<u64>>,
    /// `Some(dims)` for an output to allocate.
    allocate: Option<Option<usize>>,
    as_calls: Vec<usize>,
}

impl Pending {
    /// The number of argument dims, when the argument has a shape.
    fn as_len(&self) -> Option<usize> {
        match self.allocate {
            Some(_) => None,
            None => Some(self.mapped_ndims - self.ts.len()),
        }
    }

    fn assign_call_dims(
        &mut self,
        vmap: Option<&Vmap>,
        sig: &Signature,
        k: usize,
    ) -> Result<(), CallError> {
        let path = self.leaf.path.to_string();
        let Some(n) = self.as_len() else {
            // An output to allocate: the last `dims` call dims.
            let dims = self.allocate.flatten().unwrap_or(k);
            if dims > k {
                return Err(CallError::UndefinableDimensions {
                    arg: path,
                    dims,
                    call_dims: k,
                });
            }
            self.as_calls = (k - dims..k).collect();
            return Ok(());
        };
        self.as_calls = match vmap {
            Some(v) if self.leaf.param != usize::MAX => {
                if v.groups.len() != sig.params.len() {
                    return Err(CallError::InvalidVmap {
                        spec: super::error::quoted(&v.text),
                        message: format!(
                            "it has {} groups, but {} has {} parameters",
                            v.groups.len(),
                            sig.name,
                            sig.params.len()
                        ),
                    });
                }
                let group = &v.groups[self.leaf.param];
                if group.len() != n {
                    return Err(CallError::InvalidVmap {
                        spec: super::error::quoted(&v.text),
                        message: format!(
                            "argument `{path}` has {n} argument dims, but its group names {}",
                            group.len()
                        ),
                    });
                }
                group
                    .iter()
                    .map(|g| {
                        v.index
                            .get(g)
                            .copied()
                            .ok_or_else(|| CallError::InvalidVmap {
                                spec: super::error::quoted(&v.text),
                                message: format!("`{g}` is not one of the call dims"),
                            })
                    })
                    .collect::<Result<_, _>>()?
            }
            _ if self.map.is_some() => (0..n).collect(),
            _ => (k - n..k).collect(),
        };
        Ok(())
    }

    fn finish(self, checks: Vec<TypeCheck>) -> BoundLeaf {
        BoundLeaf {
            path: self.leaf.path,
            ty: self.leaf.ty,
            direction: self.leaf.direction,
            param: self.leaf.param,
            access: self.leaf.access,
            kind: self.arg_kind,
            ndims: self.ndims,
            allocate: self.allocate.is_some(),
            map: self.map,
            mapped_ndims: self.mapped_ndims,
            checks,
            as_calls: self.as_calls,
        }
    }
}

/// The argument's full shape moved to its mapped positions (missing ones
/// are size 1).
fn mapped(map: Option<&[usize]>, mapped_ndims: usize, full: &[u64]) -> Vec<u64> {
    match map {
        None => full.to_vec(),
        Some(m) => {
            let mut out = vec![1; mapped_ndims];
            for (i, &p) in m.iter().enumerate() {
                out[p] = full[i];
            }
            out
        }
    }
}

/// What one type dim requires of its argument at call time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TypeCheck {
    /// This size.
    Fixed(u64),
    /// The size of slot k: the first argument to reach it sets it.
    Slot(usize),
}

#[derive(Clone, Debug)]
pub(crate) struct BoundLeaf {
    pub(crate) path: Arc<str>,
    pub(crate) ty: ParamType,
    pub(crate) direction: Direction,
    pub(crate) param: usize,
    pub(crate) access: Access,
    kind: ArgKind,
    ndims: usize,
    allocate: bool,
    map: Option<Vec<usize>>,
    mapped_ndims: usize,
    checks: Vec<TypeCheck>,
    as_calls: Vec<usize>,
}

/// Where one dim of an argument goes: a call dim, or a dim of its type
/// that the kernel indexes itself (a type dim that a `map` moved outside
/// the call shape is invented when the kernel loads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AxisRole {
    /// Call dim k.
    Call(usize),
    /// Type dim k.
    Type(usize),
}

/// One argument (or the result) of a resolved call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedArg {
    /// `a`, `p.position` or `_result`.
    pub path: String,
    /// Its parameter's type, generics resolved, spelled as the
    /// signature's language spells it.
    pub ty: String,
    /// The sizes its type consumes.
    pub type_shape: Vec<u64>,
    /// Its argument shape: the dims left after the type's, in mapped
    /// order.
    pub arg_shape: Vec<u64>,
    /// How many call dims it spans (the length of `arg_shape`).
    pub call_dims: usize,
    /// For each dim of `arg_shape`, the call dim it goes to.
    pub mapping: Vec<usize>,
    /// For each dim of the argument as given (before any map), where it
    /// goes; an allocated output lists its argument dims then its type's.
    pub axes: Vec<AxisRole>,
    /// The argument's full shape as given (before any map); for an
    /// allocated output, its argument shape then its type shape.
    pub shape: Vec<u64>,
    /// Whether the call allocates it.
    pub allocated: bool,
}

/// A resolved call: the call shape and every argument's shapes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution {
    /// The call shape.
    pub call_shape: Vec<u64>,
    /// The overload chosen, as a declaration.
    pub overload: String,
    /// The arguments, in parameter order (struct fields one by one).
    pub args: Vec<ResolvedArg>,
    /// The return value; `None` for a `void` function.
    pub result: Option<ResolvedArg>,
}

/// A call bound to one overload: reusable for any arguments of the same
/// kinds, element types and dims ([`BoundCall::call`] solves nothing).
#[derive(Clone, Debug)]
pub struct BoundCall {
    pub(crate) signature: Signature,
    pub(crate) leaves: Vec<BoundLeaf>,
    call_dims: usize,
    /// How many sizes the call fills in (`?` and open generic sizes).
    slots: usize,
    generic_sizes: Vec<(Arc<str>, TypeCheck)>,
    types: Vec<(Arc<str>, Scalar)>,
    pub(crate) allow_races: bool,
}

impl BoundCall {
    /// The overload bound.
    pub fn signature(&self) -> &Signature {
        &self.signature
    }

    /// The number of call dims.
    pub fn call_dims(&self) -> usize {
        self.call_dims
    }

    /// Resolves a call with concrete sizes: type sizes checked, the call
    /// shape by NumPy's broadcasting of the argument shapes, outputs
    /// sized, races refused unless allowed.
    pub fn call(&self, args: &CallArgs) -> Result<Resolution, CallError> {
        let lang = self.signature.language;
        let supplied = Given::new(args);
        let k = self.call_dims;
        let mut cs = vec![1u64; k];
        let mut owner: Vec<Option<usize>> = vec![None; k];
        let mut slots: Vec<Option<(u64, usize)>> = vec![None; self.slots];
        let mut shapes: Vec<Option<Vec<u64>>> = Vec::with_capacity(self.leaves.len());
        let mut given: Vec<Vec<u64>> = Vec::with_capacity(self.leaves.len());
        for (li, l) in self.leaves.iter().enumerate() {
            let arg = l.access.find(&supplied).unwrap_or(&DEFAULT_OUTPUT);
            let rebind = |message: String| CallError::Rebind {
                arg: l.path.to_string(),
                message,
            };
            if !l.kind.fits(arg) {
                return Err(rebind(format!("it is now {}", arg.describe(lang))));
            }
            if l.allocate {
                if !matches!(arg, Arg::Output(OutputSpec { shape: None, .. })) {
                    return Err(rebind("it was an output to allocate".into()));
                }
                shapes.push(None);
                given.push(Vec::new());
                continue;
            }
            let full = arg
                .full_shape()
                .ok_or_else(|| rebind("it has no shape".into()))?;
            if full.len() != l.ndims {
                return Err(rebind(format!(
                    "it had {} dims, now {}",
                    l.ndims,
                    full.len()
                )));
            }
            let m = mapped(l.map.as_deref(), l.mapped_ndims, &full);
            let n = l.as_calls.len();
            for (t, check) in l.checks.iter().enumerate() {
                let found = m[n + t];
                let required = match *check {
                    TypeCheck::Fixed(size) if size != found => Some(format!("{size}")),
                    TypeCheck::Fixed(_) => None,
                    TypeCheck::Slot(s) => match slots[s] {
                        // A generic size of 0 would spell a type of no
                        // components (`float0`), which no language has.
                        None if found == 0 => self
                            .generic_sizes
                            .iter()
                            .find(|(_, c)| *c == TypeCheck::Slot(s))
                            .map(|(g, _)| format!("at least 1 (the generic size `{g}`)")),
                        None => {
                            slots[s] = Some((found, li));
                            None
                        }
                        Some((size, _)) if size == found => None,
                        Some((size, other)) => Some(format!(
                            "{size}{}, the size argument `{}` gives it",
                            self.generic_sizes
                                .iter()
                                .find(|(_, c)| *c == TypeCheck::Slot(s))
                                .map_or(String::new(), |(g, _)| format!(" (generic size `{g}`)")),
                            self.leaves[other].path
                        )),
                    },
                };
                if let Some(required) = required {
                    return Err(CallError::TypeShape {
                        arg: l.path.to_string(),
                        axis: n + t,
                        found,
                        required,
                        param_type: l.ty.spelled(lang),
                    });
                }
            }
            for (p, &c) in l.as_calls.iter().enumerate() {
                let s = m[p];
                if s == 1 || cs[c] == s {
                    continue;
                }
                if cs[c] == 1 {
                    cs[c] = s;
                    owner[c] = Some(li);
                    continue;
                }
                let other = owner[c].map_or("?", |o| &self.leaves[o].path);
                return Err(CallError::BroadcastMismatch {
                    axis: c,
                    arg: l.path.to_string(),
                    arg_axis: p,
                    size: s,
                    other: other.to_owned(),
                    other_size: cs[c],
                });
            }
            shapes.push(Some(m));
            given.push(full);
        }
        let mut resolved = Vec::with_capacity(self.leaves.len());
        for ((l, m), full) in self.leaves.iter().zip(shapes).zip(given) {
            let n = l.as_calls.len();
            let mut type_shape = Vec::with_capacity(l.checks.len());
            for (t, check) in l.checks.iter().enumerate() {
                type_shape.push(match *check {
                    TypeCheck::Fixed(size) => size,
                    TypeCheck::Slot(s) => match slots[s] {
                        Some((size, _)) => size,
                        None => {
                            return Err(CallError::UnsizedOutput {
                                arg: l.path.to_string(),
                                message: format!(
                                    "no argument gives the size of its type's axis {t}, so it cannot be allocated"
                                ),
                            })
                        }
                    },
                });
            }
            let arg_shape: Vec<u64> = match &m {
                Some(m) => m[..n].to_vec(),
                None => l.as_calls.iter().map(|&c| cs[c]).collect(),
            };
            if l.direction.writes() && !self.allow_races {
                for (c, &size) in cs.iter().enumerate() {
                    if size > 1
                        && !l
                            .as_calls
                            .iter()
                            .zip(&arg_shape)
                            .any(|(&lc, &s)| lc == c && s == size)
                    {
                        return Err(CallError::Race {
                            arg: l.path.to_string(),
                            axis: c,
                            size: cs[c],
                        });
                    }
                }
            }
            let axes = match &l.map {
                Some(map) => map
                    .iter()
                    .map(|&p| {
                        if p < n {
                            AxisRole::Call(l.as_calls[p])
                        } else {
                            AxisRole::Type(p - n)
                        }
                    })
                    .collect(),
                None => (0..n)
                    .map(|p| AxisRole::Call(l.as_calls[p]))
                    .chain((0..l.checks.len()).map(AxisRole::Type))
                    .collect(),
            };
            let ty = l.ty.substituted(
                &|g| self.types.iter().find(|(n, _)| **n == *g).map(|(_, s)| *s),
                &|g| match self.generic_sizes.iter().find(|(n, _)| **n == *g)?.1 {
                    TypeCheck::Fixed(size) => Some(size),
                    TypeCheck::Slot(s) => slots[s].map(|(size, _)| size),
                },
            );
            let shape = if l.allocate {
                arg_shape.iter().chain(&type_shape).copied().collect()
            } else {
                full
            };
            resolved.push((
                l.direction,
                ResolvedArg {
                    shape,
                    path: l.path.to_string(),
                    ty: ty.spelled(lang),
                    type_shape,
                    call_dims: n,
                    mapping: l.as_calls.clone(),
                    arg_shape,
                    axes,
                    allocated: l.allocate,
                },
            ));
        }
        let result = match resolved.last() {
            Some((Direction::Return, _)) => resolved.pop().map(|(_, r)| r),
            _ => None,
        };
        Ok(Resolution {
            call_shape: cs,
            overload: self.signature.to_string(),
            args: resolved.into_iter().map(|(_, r)| r).collect(),
            result,
        })
    }
}
