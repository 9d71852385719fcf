//! Binding a call (dimensionalities and element types, no sizes) and
//! resolving it (sizes: the call shape, outputs, races).

use std::collections::HashMap;
use std::sync::Arc;

use shape_core::{Dim, DimVar};

use super::arg::{Arg, CallArgs, Number, OutputSpec};
use super::error::CallError;
use super::generator::Generator;
use super::signature::{Direction, Signature};
use super::specialize::GenericArg;
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
    /// The type the argument binds as, slangpy's `map(float)`: a generic
    /// parameter `T` becomes this type, a concrete parameter must be it,
    /// and the argument's dims past the type's are call dims. `float` on
    /// a `float2` value given to `T x` makes `T = float` and the call
    /// vectorize over the 2.
    Type(ParamType),
}

impl ArgMap {
    /// Reads `(2,0,1)`, `(width,height,channels)`, or a type, bare or
    /// quoted (`float2`, `'float'`).
    ///
    /// ```
    /// use shape_call::{ArgMap, ParamType, Scalar};
    /// assert_eq!(ArgMap::parse("(2,0,1)").unwrap(), ArgMap::Dims(vec![2, 0, 1]));
    /// assert_eq!(ArgMap::parse("'float'").unwrap(), ArgMap::Type(ParamType::Scalar(Scalar::Float)));
    /// assert!(ArgMap::parse("(2,x)").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<ArgMap, CallError> {
        let t = text.trim();
        if !t.starts_with('(') {
            let unquoted = t
                .strip_prefix('\'')
                .and_then(|t| t.strip_suffix('\''))
                .or_else(|| t.strip_prefix('"').and_then(|t| t.strip_suffix('"')))
                .unwrap_or(t);
            return super::syntax::parse_type(unquoted, &super::TypeScope::new()).map(ArgMap::Type);
        }
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
    pub(crate) overloads: Vec<Signature>,
    maps: Vec<(Arc<str>, ArgMap)>,
    /// Maps of the parameters by position (slangpy's `map(float, float2)`).
    positional_maps: Vec<(usize, ArgMap)>,
    vmap: Option<Vmap>,
    allow_races: bool,
    specializations: Vec<(Arc<str>, GenericArg)>,
}

impl Function {
    /// A function with one overload.
    pub fn new(signature: Signature) -> Function {
        Function {
            overloads: vec![signature],
            maps: Vec::new(),
            positional_maps: Vec::new(),
            vmap: None,
            allow_races: false,
            specializations: Vec::new(),
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

    /// This function with the parameter at `index` (from 0, in each
    /// overload) remapped by `map`: slangpy's positional maps,
    /// `map(float, float2)`.
    pub fn map_positional(mut self, index: usize, map: ArgMap) -> Function {
        self.positional_maps.push((index, map));
        self
    }

    /// This function with explicit call dims, `(N),(M)->(N,M)`: one group
    /// per parameter naming its argument dims, then the call dims.
    pub fn vmap(mut self, spec: &str) -> Result<Function, CallError> {
        self.vmap = Some(Vmap::parse(spec)?);
        Ok(self)
    }

    /// This function with generic parameter `name` fixed to `value`
    /// (`N`, `GenericArg::Size(8)`), in every overload that has it.
    pub fn specialize(mut self, name: &str, value: GenericArg) -> Function {
        self.specializations.push((Arc::from(name), value));
        self
    }

    /// This function specialized as `text` says: `N=8`, `T=float`, or the
    /// function's name with its generic arguments in declaration order,
    /// `add<float, 3>` (read against the first overload).
    ///
    /// ```
    /// use shape_call::{Arg, CallArgs, Function};
    /// let add = Function::parse("T add<T, let N : int>(vector<T,N> a, vector<T,N> b)")?;
    /// let args = CallArgs::new().arg(Arg::tensor(&[10, 4])).arg(Arg::tensor(&[10, 4]));
    /// // A plain tensor's trailing 4 comes too late to fix `N`.
    /// assert_eq!(add.resolve(&args).unwrap_err().kind(), "unspecialized");
    /// let r = add.specialized("add<float, 4>")?.resolve(&args)?;
    /// assert_eq!(r.call_shape, vec![10]);
    /// # Ok::<(), shape_call::CallError>(())
    /// ```
    pub fn specialized(mut self, text: &str) -> Result<Function, CallError> {
        let first = self
            .overloads
            .first()
            .ok_or_else(|| CallError::InvalidSpecialization {
                text: super::error::quoted(text),
                message: "the function has no overload".into(),
            })?;
        let parsed = super::specialize::parse_specialization(text, first)?;
        self.specializations.extend(parsed);
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
        self.check_map_names()?;
        super::specialize::check_specializations(&self.specializations, &self.overloads)?;
        let base = Solver::new();
        let mut ok = Vec::new();
        let mut failed = Vec::new();
        let mut readings = 0;
        for sig in &self.overloads {
            // Each value given to a bare generic `T` reads as its type or
            // as its scalar: every combination is tried (up to 2^6; past
            // that, all values one way or all the other), and bindings of
            // other types are separate candidates.
            let values = vector_values(sig, args);
            let masks: Vec<u64> = if values.len() <= 6 {
                (0..1u64 << values.len()).collect()
            } else {
                vec![0, u64::MAX]
            };
            let mut found: Vec<BoundCall> = Vec::new();
            let mut first_error = None;
            for mask in masks {
                let scalar: Vec<Top> = (values.iter().enumerate())
                    .filter(|(k, _)| mask >> k & 1 == 1)
                    .map(|(_, t)| t.clone())
                    .collect();
                match self.bind_one(sig, args, base.clone(), &ValueAs { scalar }) {
                    Ok(b) if found.iter().all(|f| f.types != b.types) => found.push(b),
                    Ok(_) => {}
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            match (found.len(), first_error) {
                (0, Some(e)) => failed.push((sig.to_string(), e)),
                (n, _) => {
                    if n > 1 {
                        readings += 1;
                    }
                    ok.extend(found);
                }
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
                candidates: ok
                    .iter()
                    .map(|b| {
                        if readings == 0 {
                            return b.signature.to_string();
                        }
                        let shape = b.call(args).map_or_else(
                            |_| format!("of {} dims", b.call_dims),
                            |r| {
                                shape_text(
                                    &r.call_shape
                                        .iter()
                                        .map(|&n| Extent::Fixed(n))
                                        .collect::<Vec<_>>(),
                                )
                            },
                        );
                        format!(
                            "{} with {}: call shape {shape}",
                            b.signature,
                            b.generic_types_text()
                        )
                    })
                    .collect(),
            }),
        }
    }

    /// Every map names an argument some overload has (a parameter,
    /// `param.field` of a struct parameter, or `_result`), once: a map for
    /// nothing would be ignored, and of two maps one would.
    fn check_map_names(&self) -> Result<(), CallError> {
        let function = self
            .overloads
            .first()
            .map_or_else(String::new, |s| s.name.to_string());
        let most = self
            .overloads
            .iter()
            .map(|s| s.params.len())
            .max()
            .unwrap_or(0);
        for (k, (index, _)) in self.positional_maps.iter().enumerate() {
            if self.positional_maps[..k].iter().any(|(i, _)| i == index) {
                return Err(CallError::DuplicateArgument {
                    function: function.clone(),
                    name: format!("map of parameter {index}"),
                });
            }
            if *index >= most {
                return Err(CallError::InvalidMap {
                    arg: format!("parameter {index}"),
                    message: format!("no overload has more than {most} parameters"),
                });
            }
        }
        let mut seen = std::collections::HashSet::new();
        for (path, _) in &self.maps {
            if !seen.insert(&**path) {
                return Err(CallError::DuplicateArgument {
                    function,
                    name: format!("map of {}", super::error::quoted(path)),
                });
            }
            let mut candidates: Vec<String> = Vec::new();
            let found = self.overloads.iter().any(|sig| {
                let (found, known) = map_path_in(sig, path);
                candidates.extend(known);
                found
            });
            if !found {
                return Err(CallError::UnknownParameter {
                    function,
                    name: super::error::quoted(path),
                    close: super::error::close_matches(path, candidates.iter().map(String::as_str)),
                });
            }
        }
        Ok(())
    }

    /// [`Function::bind`], then [`BoundCall::call`] with the same
    /// arguments.
    pub fn resolve(&self, args: &CallArgs) -> Result<Resolution, CallError> {
        self.bind(args)?.call(args)
    }

    /// Binds `args` to the one overload `sig`, on `solver`: the steps run
    /// in this order, and the first that fails decides the error.
    fn bind_one(
        &self,
        sig: &Signature,
        args: &CallArgs,
        solver: Solver,
        value_as: &ValueAs,
    ) -> Result<BoundCall, CallError> {
        let function = sig.to_string();
        let lang = sig.language;
        let assignment = assign_arguments(sig, args, &function)?;
        let given = Given::new(args);
        let leaves = expand_leaves(sig, &function, assignment, &given)?;
        let mut types: Vec<(Arc<str>, ParamType)> = self
            .specializations
            .iter()
            .filter_map(|(n, a)| match a {
                GenericArg::Type(t) => Some((n.clone(), t.clone())),
                GenericArg::Size(_) => None,
            })
            .collect();
        let mut pending = self.prepare_leaves(sig, leaves, &given, &mut types, value_as)?;
        let call_dims = self.assign_all_call_dims(sig, &mut pending)?;
        check_call_ids(&pending, &given, call_dims, lang)?;
        let mut dims = TypeDims::new(solver, &function, lang);
        let dims_of = dims.of_leaves(&pending)?;
        let bound = dims.bound_leaves(pending, dims_of);
        let slots = dims.slot_of.len();
        let generic_sizes = dims.generic_sizes();
        require_generic_types_bound(&bound, &types, lang)?;
        require_generic_sizes_fixed(sig, &function, &bound, &generic_sizes)?;
        Ok(BoundCall {
            signature: sig.clone(),
            leaves: bound,
            call_dims,
            slots,
            generic_sizes,
            types,
            allow_races: self.allow_races,
        })
    }

    /// Element types, generic types, dims and maps: every leaf prepared
    /// with its argument and its map, in order; the generic types that
    /// the arguments bind are added to `types`.
    fn prepare_leaves(
        &self,
        sig: &Signature,
        leaves: Vec<Leaf>,
        given: &Given<'_>,
        types: &mut Vec<(Arc<str>, ParamType)>,
        value_as: &ValueAs,
    ) -> Result<Vec<Pending>, CallError> {
        let mut maps: HashMap<&str, &ArgMap> = self.maps.iter().map(|(n, m)| (&**n, m)).collect();
        for (index, map) in &self.positional_maps {
            let Some(param) = sig.params.get(*index) else {
                continue;
            };
            if maps.insert(&param.name, map).is_some() {
                return Err(CallError::DuplicateArgument {
                    function: sig.to_string(),
                    name: format!("{} (mapped by name and by position)", param.name),
                });
            }
        }
        let mut with_args: Vec<(usize, Leaf, &Arg)> = leaves
            .into_iter()
            .enumerate()
            .map(|(i, leaf)| {
                let arg = leaf.access.find(given).unwrap_or(&DEFAULT_OUTPUT);
                (i, leaf, arg)
            })
            .collect();
        // Outputs to allocate last: their type may be a generic type that
        // a later parameter's argument binds.
        with_args.sort_by_key(|(i, _, arg)| (matches!(arg, Arg::Output(_)), *i));
        let mut pending = Vec::with_capacity(with_args.len());
        for (i, leaf, arg) in with_args {
            let map = maps.get(&*leaf.path).map(|&m| m.clone());
            pending.push((i, self.prepare(sig, leaf, arg, map, types, value_as)?));
        }
        pending.sort_by_key(|(i, _)| *i);
        Ok(pending.into_iter().map(|(_, p)| p).collect())
    }

    /// Call dims: the vmap's, or else as many as the leaf with the most
    /// argument dims has; each leaf is then given the call dims its
    /// argument dims go to. Returns the number of call dims.
    fn assign_all_call_dims(
        &self,
        sig: &Signature,
        pending: &mut [Pending],
    ) -> Result<usize, CallError> {
        let call_dims = match &self.vmap {
            Some(v) => v.output.len(),
            None => pending.iter().filter_map(|l| l.as_len()).max().unwrap_or(0),
        };
        for l in pending {
            l.assign_call_dims(self.vmap.as_ref(), sig, call_dims)?;
        }
        Ok(call_dims)
    }

    /// Element type, dims and map of one leaf: the argument's element
    /// type and shape are read, its element type matched (a generic type
    /// is bound by the first argument that has it, in `types`), its map
    /// checked, its dims counted against its type's, and the sizes it
    /// gives at bind kept.
    #[allow(clippy::too_many_arguments)]
    fn prepare(
        &self,
        sig: &Signature,
        mut leaf: Leaf,
        arg: &Arg,
        map: Option<ArgMap>,
        types: &mut Vec<(Arc<str>, ParamType)>,
        value_as: &ValueAs,
    ) -> Result<Pending, CallError> {
        if !self.specializations.is_empty() {
            let size = |g: &str| {
                self.specializations.iter().find_map(|(n, a)| match a {
                    GenericArg::Size(v) if **n == *g => Some(*v),
                    _ => None,
                })
            };
            let ty = |g: &str| {
                self.specializations.iter().find_map(|(n, a)| match a {
                    GenericArg::Type(t) if **n == *g => Some(t.clone()),
                    _ => None,
                })
            };
            leaf.ty = leaf.ty.substituted(&ty, &size);
        }
        let mut map_sizes = None;
        let map = match map {
            Some(ArgMap::Type(t)) => {
                let (ty, sizes) = LeafArg::new(&leaf, arg, sig.language).typed_by_map(t, types)?;
                leaf.ty = ty;
                map_sizes = Some(sizes);
                None
            }
            other => other,
        };
        if let ParamType::Generic(g) = &leaf.ty {
            let g = g.clone();
            if let Some(t) =
                LeafArg::new(&leaf, arg, sig.language).bare_generic_type(&g, value_as, types)?
            {
                leaf.ty = t;
            }
        }
        let ts = leaf.ty.type_shape();
        let leaf_arg = LeafArg {
            leaf: &leaf,
            arg,
            lang: sig.language,
        };
        let (arg_leaf, shape) = leaf_arg.element_and_shape(&ts)?;
        if let Some(a) = &arg_leaf {
            leaf_arg.match_element_type(a, types)?;
        }
        let ndims = shape.ndims();
        let map = leaf_arg.checked_map(map, ndims, ts.len())?;
        let mapped_ndims = mapped_ndims(map.as_deref(), ndims);
        leaf_arg.require_type_dims(ndims, mapped_ndims, &ts)?;
        let (mut known, allocate) = known_sizes(shape, arg);
        // A map by type fixes its type's sizes, as an element type does.
        if let Some(sizes) = map_sizes {
            let from = known.len().saturating_sub(sizes.len());
            for (axis, (k, size)) in known[from..].iter_mut().zip(sizes).enumerate() {
                match (*k, size) {
                    (Some(found), Some(wanted)) if found != wanted => {
                        return Err(CallError::TypeShape {
                            arg: leaf.path.to_string(),
                            axis: from + axis,
                            found,
                            required: format!("{wanted} (the map's type)"),
                            param_type: leaf.ty.spelled(sig.language),
                        })
                    }
                    _ => *k = k.or(size),
                }
            }
        }
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

/// Whether `sig` has the argument `path` names (`a`, `p.field`,
/// `_result`), and the paths it has at the level where the search
/// stopped (for suggestions).
fn map_path_in(sig: &Signature, path: &str) -> (bool, Vec<String>) {
    let mut parts = path.split('.');
    let top = parts.next().unwrap_or_default();
    let mut known: Vec<String> = sig.params.iter().map(|p| p.name.to_string()).collect();
    if sig.result.is_some() {
        known.push("_result".to_owned());
    }
    let ty = match sig.params.iter().find(|p| &*p.name == top) {
        Some(p) => &p.ty,
        None if top == "_result" => match &sig.result {
            Some(t) => t,
            None => return (false, known),
        },
        None => return (false, known),
    };
    let mut ty = ty;
    let mut prefix = top.to_owned();
    for field in parts {
        let ParamType::Struct(st) = ty else {
            return (false, vec![prefix]);
        };
        let known = st
            .fields
            .iter()
            .map(|(f, _)| format!("{prefix}.{f}"))
            .collect();
        match st.fields.iter().find(|(f, _)| &**f == field) {
            Some((_, t)) => ty = t,
            None => return (false, known),
        }
        prefix = format!("{prefix}.{field}");
    }
    (true, Vec::new())
}

/// `(3)`, `(?, ?, 4)`.
fn shape_text(ts: &[Extent]) -> String {
    let items: Vec<String> = ts.iter().map(ToString::to_string).collect();
    format!("({})", items.join(", "))
}

/// The map as dims, checked against the argument's `n` dims.
/// `type_dims` is how many of the argument's `n` dims its parameter's type
/// consumes (a short map covers the others).
fn check_map(
    path: &str,
    map: ArgMap,
    n: usize,
    type_dims: usize,
    arg: &Arg,
) -> Result<Vec<usize>, CallError> {
    let bad = |message: String| CallError::InvalidMap {
        arg: path.to_owned(),
        message,
    };
    let mut dims = match map {
        ArgMap::Dims(d) => d,
        ArgMap::Type(_) => return Err(bad("a map by type has no dims".into())),
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
    let call_dims = n.saturating_sub(type_dims);
    if dims.len() != n && dims.len() != call_dims {
        return Err(bad(format!(
            "it has {} entries, but the argument has {n} dims: give one entry per dim, or one per call dim ({call_dims}, the dims before its type's {type_dims})",
            dims.len()
        )));
    }
    if let Some(d) = dims.iter().find(|&&d| d > 64) {
        return Err(bad(format!("position {d} is beyond 64 dims")));
    }
    // slangpy's short map: it covers the leading (call) dims; the rest,
    // the type's, follow in order after the last position it fills.
    let next = dims.iter().max().map_or(0, |&m| m + 1);
    let rest = n - dims.len();
    dims.extend(next..next + rest);
    let mut seen = [false; 130];
    for &d in &dims {
        if d > 128 {
            return Err(bad(format!("position {d} is beyond 128 dims")));
        }
        if std::mem::replace(&mut seen[d], true) {
            return Err(bad(format!("position {d} receives two dims")));
        }
    }
    Ok(dims)
}

/// Which argument each parameter takes, before any is looked at.
struct Assignment {
    /// Per parameter, where its argument is; `None` where none was given.
    tops: Vec<Option<Top>>,
    /// Where `_result` is, when it was given.
    result: Option<Top>,
}

/// Which argument each parameter of `sig` takes: the positional ones in
/// order, then the named ones (`_result` names the return value's
/// argument). Too many arguments, an unknown name or a parameter given
/// twice is an error.
fn assign_arguments(
    sig: &Signature,
    args: &CallArgs,
    function: &str,
) -> Result<Assignment, CallError> {
    if args.positional.len() > sig.params.len() {
        return Err(CallError::TooManyArguments {
            function: function.to_owned(),
            expected: sig.params.len(),
            found: args.positional.len(),
        });
    }
    let mut tops: Vec<Option<Top>> = (0..sig.params.len())
        .map(|i| (i < args.positional.len()).then_some(Top::Positional(i)))
        .collect();
    let mut result = None;
    let by_name: HashMap<&str, usize> = sig
        .params
        .iter()
        .enumerate()
        .map(|(k, p)| (&*p.name, k))
        .collect();
    let duplicate = |name: &Arc<str>| CallError::DuplicateArgument {
        function: function.to_owned(),
        name: name.to_string(),
    };
    for (name, _) in &args.named {
        if &**name == "_result" && sig.result.is_some() {
            if result.is_some() {
                return Err(duplicate(name));
            }
            result = Some(Top::Named(name.clone()));
            continue;
        }
        let k = *by_name
            .get(&**name)
            .ok_or_else(|| CallError::UnknownParameter {
                function: function.to_owned(),
                name: super::error::quoted(name),
                close: super::error::close_matches(name, by_name.keys().copied()),
            })?;
        if tops[k].is_some() {
            return Err(duplicate(name));
        }
        tops[k] = Some(Top::Named(name.clone()));
    }
    Ok(Assignment { tops, result })
}

/// The leaves of every parameter, in order, then of the return value
/// (allocated when no `_result` was given): struct arguments given field
/// by field are expanded into one leaf per field. A parameter with no
/// argument is an error.
fn expand_leaves(
    sig: &Signature,
    function: &str,
    assignment: Assignment,
    given: &Given<'_>,
) -> Result<Vec<Leaf>, CallError> {
    let mut leaves = Vec::new();
    for (k, (p, top)) in sig.params.iter().zip(assignment.tops).enumerate() {
        let top = top.ok_or_else(|| CallError::MissingArgument {
            function: function.to_owned(),
            name: p.name.to_string(),
        })?;
        let access = Access::at(top);
        let arg = access.find(given).expect("an assigned argument");
        expand(
            function,
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
        let access = Access::at(assignment.result.unwrap_or(Top::Default));
        let arg = access.find(given).unwrap_or(&DEFAULT_OUTPUT);
        expand(
            function,
            Arc::from("_result"),
            ret,
            Direction::Return,
            usize::MAX,
            arg,
            access,
            &mut leaves,
        )?;
    }
    Ok(leaves)
}

/// Type dims, with generic sizes shared through the solver: each leaf's
/// type dims become solver dims (a generic size one dim wherever it
/// appears, each `?` a dim of its own), the sizes that arguments give at
/// bind are required of them, and what the solver then knows becomes the
/// call-time checks.
struct TypeDims {
    solver: Solver,
    /// Why each constraint holds: the call being bound.
    why: Why,
    lang: Language,
    /// Each generic size's dim, by name.
    generic: HashMap<Arc<str>, DimVar>,
    /// The slot of each dim the solver leaves open, numbered as the
    /// first leaf with that dim reaches it.
    slot_of: HashMap<Dim, usize>,
}

impl TypeDims {
    /// Starts on `solver`, with the call of `function` as the origin of
    /// every constraint.
    fn new(mut solver: Solver, function: &str, lang: Language) -> TypeDims {
        let why = Why::of(solver.add_origin(Origin::Direct {
            what: Arc::from(format!("the call of {function}")),
        }));
        TypeDims {
            solver,
            why,
            lang,
            generic: HashMap::new(),
            slot_of: HashMap::new(),
        }
    }

    /// Each leaf's type dims, in order, with the sizes its argument gives
    /// at bind required of them (an output to allocate gives none).
    fn of_leaves(&mut self, pending: &[Pending]) -> Result<Vec<Vec<Dim>>, CallError> {
        let mut dims_of = Vec::with_capacity(pending.len());
        for l in pending {
            let ds = self.declare(&l.ts);
            if l.allocate.is_none() {
                self.require_known_sizes(l, &ds)?;
            }
            dims_of.push(ds);
        }
        Ok(dims_of)
    }

    /// The solver dims of one type shape: a fixed size, the generic
    /// size's shared dim, or a fresh dim for `?`.
    fn declare(&mut self, ts: &[Extent]) -> Vec<Dim> {
        let mut ds = Vec::with_capacity(ts.len());
        for e in ts {
            ds.push(match e {
                Extent::Fixed(n) => Dim::sized(*n),
                Extent::Generic(g) => Dim::Var(
                    *self
                        .generic
                        .entry(g.clone())
                        .or_insert_with(|| self.solver.fresh_dim()),
                ),
                Extent::Any => Dim::Var(self.solver.fresh_dim()),
            });
        }
        ds
    }

    /// Requires of each type dim `ds[k]` of `l` the size its argument
    /// gives at bind, where it gives one.
    fn require_known_sizes(&mut self, l: &Pending, ds: &[Dim]) -> Result<(), CallError> {
        let mapped = l.mapped_known();
        for (k, d) in ds.iter().enumerate() {
            let axis = l.as_len().unwrap_or(0) + k;
            let Some(found) = mapped[axis] else { continue };
            self.require_size(l, k, axis, found, d)?;
        }
        Ok(())
    }

    /// Requires type dim `k` of `l` (its argument's dim `axis`, after
    /// any map), solver dim `d`, to be `found`.
    fn require_size(
        &mut self,
        l: &Pending,
        k: usize,
        axis: usize,
        found: u64,
        d: &Dim,
    ) -> Result<(), CallError> {
        let required = |what: String| CallError::TypeShape {
            arg: l.leaf.path.to_string(),
            axis,
            found,
            required: what,
            param_type: l.leaf.ty.spelled(self.lang),
        };
        let Some(size) = Dim::known(found) else {
            return Err(required("a size of at least 1".into()));
        };
        if let Err(e) = self.solver.add(Constraint::DimEq {
            a: d.clone(),
            b: size,
            why: self.why,
        }) {
            let what = match &l.ts[k] {
                Extent::Fixed(n) => format!("{n}"),
                Extent::Generic(g) => format!("the generic size `{g}` to agree ({e})"),
                Extent::Any => format!("a size that fits ({e})"),
            };
            return Err(required(what));
        }
        Ok(())
    }

    /// What the solver knows becomes the call-time checks: a size, or
    /// a slot that the first argument with that dim fills.
    fn bound_leaves(&mut self, pending: Vec<Pending>, dims_of: Vec<Vec<Dim>>) -> Vec<BoundLeaf> {
        let mut bound = Vec::with_capacity(pending.len());
        for (l, ds) in pending.into_iter().zip(dims_of) {
            let mut checks = Vec::with_capacity(ds.len());
            for d in &ds {
                checks.push(self.check_of(d));
            }
            bound.push(l.finish(checks));
        }
        bound
    }

    /// The call-time check of solver dim `d`: its size, when the solver
    /// knows it, or else its slot (a new one for a dim not seen before).
    fn check_of(&mut self, d: &Dim) -> TypeCheck {
        let d = self.solver.resolve_dim(d).expect("a dim of this solver");
        match &d {
            Dim::Known(n) => TypeCheck::Fixed(n.size()),
            Dim::Var(_) => {
                let next = self.slot_of.len();
                TypeCheck::Slot(*self.slot_of.entry(d.clone()).or_insert(next))
            }
        }
    }

    /// The call-time check of each generic size, after
    /// [`TypeDims::bound_leaves`] has numbered the slots.
    fn generic_sizes(self) -> Vec<(Arc<str>, TypeCheck)> {
        let mut generic_sizes = Vec::with_capacity(self.generic.len());
        for (name, v) in self.generic {
            let check = match self
                .solver
                .resolve_dim(&Dim::Var(v))
                .expect("a dim of this solver")
            {
                Dim::Known(n) => TypeCheck::Fixed(n.size()),
                d => TypeCheck::Slot(self.slot_of[&d]),
            };
            generic_sizes.push((name, check));
        }
        generic_sizes
    }
}

/// A `call_id` gives one value per call dim: its parameter's vector or
/// array must have as many entries as the call has dims.
fn check_call_ids(
    pending: &[Pending],
    given: &Given<'_>,
    call_dims: usize,
    lang: Language,
) -> Result<(), CallError> {
    for l in pending {
        let Some(Arg::Generator(g @ Generator::CallId)) = l.leaf.access.find(given) else {
            continue;
        };
        let fail = |message: String| CallError::TypeMismatch {
            arg: l.leaf.path.to_string(),
            param_type: l.leaf.ty.spelled(lang),
            found: g.describe(),
            reason: message,
        };
        let layout = g.layout(&l.leaf.ty).map_err(fail)?;
        g.check_count(layout, Some(call_dims)).map_err(fail)?;
    }
    Ok(())
}

/// How the values given to bare generic parameters `T` bind them: those
/// listed as their scalar (vectorizing over the value's dims), the others
/// as their own type.
struct ValueAs {
    scalar: Vec<Top>,
}

/// The value arguments with dims that `sig`'s bare generic parameters
/// could read two ways (none when it has no bare generic parameter).
fn vector_values(sig: &Signature, args: &CallArgs) -> Vec<Top> {
    if !sig
        .params
        .iter()
        .any(|p| matches!(p.ty, ParamType::Generic(_)))
    {
        return Vec::new();
    }
    let vector = |a: &Arg| matches!(a, Arg::Value(v) if !v.type_shape().is_empty());
    let positional = (args.positional.iter().enumerate())
        .filter(|(_, a)| vector(a))
        .map(|(i, _)| Top::Positional(i));
    let named = (args.named.iter())
        .filter(|(_, a)| vector(a))
        .map(|(n, _)| Top::Named(n.clone()));
    positional.chain(named).collect()
}

/// Binds generic type `g` to `t`, or checks that it is `t` already;
/// `Err` gives the type it is bound to.
fn bind_generic(
    g: &Arc<str>,
    t: &ParamType,
    types: &mut Vec<(Arc<str>, ParamType)>,
) -> Result<(), ParamType> {
    match types.iter().find(|(n, _)| n == g) {
        Some((_, bound)) if bound != t => Err(bound.clone()),
        Some(_) => Ok(()),
        None => {
            types.push((g.clone(), t.clone()));
            Ok(())
        }
    }
}

/// Whether `t` has the form of `pattern`, binding `pattern`'s generic
/// types (in `types`) to the parts of `t` they stand for; a generic or
/// `?` size takes any fixed size (the map's size is then required of the
/// argument).
fn unify(pattern: &ParamType, t: &ParamType, types: &mut Vec<(Arc<str>, ParamType)>) -> bool {
    let size = |p: &Extent, e: &Extent| match (p, e) {
        (Extent::Fixed(a), Extent::Fixed(b)) => a == b,
        (Extent::Generic(_) | Extent::Any, _) => true,
        (Extent::Fixed(_), _) => false,
    };
    match (pattern, t) {
        (ParamType::Generic(g), t) => bind_generic(g, t, types).is_ok(),
        (ParamType::Vector(p, n), ParamType::Vector(e, m))
        | (ParamType::Array(p, n), ParamType::Array(e, m)) => size(n, m) && unify(p, e, types),
        (ParamType::Matrix(p, r, c), ParamType::Matrix(e, r2, c2)) => {
            size(r, r2) && size(c, c2) && unify(p, e, types)
        }
        (ParamType::StructuredBuffer(p), ParamType::StructuredBuffer(e))
        | (ParamType::Texture2D(p), ParamType::Texture2D(e)) => unify(p, e, types),
        (ParamType::Slice(n, p), ParamType::Slice(m, e)) => n == m && unify(p, e, types),
        (ParamType::Tensor(k, n, p), ParamType::Tensor(k2, m, e)) => {
            k == k2 && n == m && unify(p, e, types)
        }
        (p, t) => p == t,
    }
}

/// Whether a number literal can be a `s`: a float as a floating type, an
/// integer as any numeric type.
fn number_fits(n: &Number, s: Scalar) -> bool {
    match n {
        Number::Float(_) => matches!(s, Scalar::Float | Scalar::Half),
        Number::Int(_) => s != Scalar::Bool,
    }
}

/// Every generic size must be fixed at bind, by a value, an element type
/// or a specialization: one that only a call's sizes would fix is
/// refused, naming the first argument whose size that would be.
fn require_generic_sizes_fixed(
    sig: &Signature,
    function: &str,
    bound: &[BoundLeaf],
    generic_sizes: &[(Arc<str>, TypeCheck)],
) -> Result<(), CallError> {
    // The first one an argument reaches, whatever the map's order.
    let open = generic_sizes
        .iter()
        .filter_map(|(name, check)| match check {
            TypeCheck::Slot(slot) => Some((slot, name)),
            TypeCheck::Fixed(_) => None,
        })
        .min();
    if let Some((slot, name)) = open {
        let arg = bound
            .iter()
            .find(|l| l.checks.contains(&TypeCheck::Slot(*slot)))
            .map_or_else(String::new, |l| l.path.to_string());
        return Err(CallError::Unspecialized {
            function: function.to_owned(),
            name: sig.name.to_string(),
            generic: name.to_string(),
            arg,
        });
    }
    Ok(())
}

/// Generic types must be bound by some argument: a generic type that
/// only outputs to allocate have is an error.
fn require_generic_types_bound(
    bound: &[BoundLeaf],
    types: &[(Arc<str>, ParamType)],
    lang: Language,
) -> Result<(), CallError> {
    for l in bound {
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
    Ok(())
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
    /// The access to a whole argument, at `top`.
    fn at(top: Top) -> Access {
        Access {
            top,
            fields: Vec::new(),
            hints: Vec::new(),
        }
    }

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
                        close: super::error::close_matches(name, declared.iter().copied()),
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

impl Shape {
    /// The argument's number of dims; `None` for an output to allocate.
    fn ndims(&self) -> Option<usize> {
        match self {
            Shape::Full(n) => Some(*n),
            Shape::Known(s) => Some(s.len()),
            Shape::Allocate(_) => None,
        }
    }
}

/// One leaf with the argument given for it, as [`Function::prepare`]
/// reads it.
struct LeafArg<'a> {
    leaf: &'a Leaf,
    arg: &'a Arg,
    lang: Language,
}

impl<'a> LeafArg<'a> {
    fn new(leaf: &'a Leaf, arg: &'a Arg, lang: Language) -> LeafArg<'a> {
        LeafArg { leaf, arg, lang }
    }

    /// The type a map by type gives the leaf, and the sizes the map fixes
    /// (one per dim of `t`'s type shape): a bare generic parameter becomes
    /// `t`; any other parameter must have `t`'s form, its generic types
    /// bound from `t` (`vector<T,N>` read as `int2` binds `T = int`, and
    /// the map fixes `N`'s dim to 2).
    fn typed_by_map(
        &self,
        t: ParamType,
        types: &mut Vec<(Arc<str>, ParamType)>,
    ) -> Result<(ParamType, Vec<Option<u64>>), CallError> {
        let lang = self.lang;
        let sizes = t.fixed_sizes();
        if let ParamType::Generic(g) = &self.leaf.ty {
            bind_generic(g, &t, types).map_err(|bound| {
                self.mismatch(format!(
                    "the map reads it as {}, but generic type `{g}` is already {} (from another argument or a specialization)",
                    t.spelled(lang),
                    bound.spelled(lang)
                ))
            })?;
            return Ok((t, sizes));
        }
        let mut trial = types.clone();
        if !unify(&self.leaf.ty, &t, &mut trial) {
            return Err(self.mismatch(format!(
                "the map reads it as {}, which is not of the parameter's type {}",
                t.spelled(lang),
                self.leaf.ty.spelled(lang)
            )));
        }
        *types = trial;
        let ty = self.leaf.ty.substituted(
            &|g| {
                types
                    .iter()
                    .find(|(n, _)| **n == *g)
                    .map(|(_, t)| t.clone())
            },
            &|_| None,
        );
        Ok((ty, sizes))
    }

    /// The type a bare generic parameter `g` (a parameter of type `T`)
    /// takes from its argument, binding `g`: a tensor's element type, a
    /// value's own type or its scalar (`value_as` says which; where both
    /// fit, [`Function::bind`] reports the call ambiguous), a reference's
    /// scalar, an output's named element type. Once `g` is bound, an
    /// argument must fit that type (a number any numeric scalar of its
    /// kind). `None` leaves the number and output rules to bind it.
    fn bare_generic_type(
        &self,
        g: &Arc<str>,
        value_as: &ValueAs,
        types: &mut Vec<(Arc<str>, ParamType)>,
    ) -> Result<Option<ParamType>, CallError> {
        let bound = types.iter().find(|(n, _)| n == g).map(|(_, t)| t.clone());
        let candidate = match (self.arg, &bound) {
            (Arg::Tensor { elem, .. }, _) => Some(elem.clone()),
            (Arg::Value(v), Some(b)) if *b == *v || *b == *v.leaf() => Some(b.clone()),
            (Arg::Value(v), _) if value_as.scalar.contains(&self.leaf.access.top) => {
                Some(v.leaf().clone())
            }
            (Arg::Value(v), _) => Some(v.clone()),
            (Arg::Ref(s), _) => Some(ParamType::Scalar(*s)),
            (Arg::Output(OutputSpec { elem: Some(e), .. }), _) => Some(e.clone()),
            (Arg::Output(_), Some(b)) => Some(b.clone()),
            (Arg::Number(n), Some(b @ ParamType::Scalar(s))) if number_fits(n, *s) => {
                Some(b.clone())
            }
            _ => None,
        };
        let Some(t) = candidate else {
            return Ok(None);
        };
        bind_generic(g, &t, types).map_err(|bound| {
            self.mismatch(format!(
                "generic type `{g}` is already {} (from another argument or a specialization)",
                bound.spelled(self.lang)
            ))
        })?;
        Ok(Some(t))
    }

    /// What argument would match the leaf's type, in the argument text
    /// forms: `an integer literal (2) or inttensor(..) would match`.
    fn matching_spelling(&self) -> String {
        let ty = &self.leaf.ty;
        let scalar_form = |s: Scalar| match s {
            Scalar::Int => "an integer literal (`2`) or `inttensor(..)`".to_owned(),
            Scalar::Uint => "an integer literal (`2`) or `uinttensor(..)`".to_owned(),
            Scalar::Float => "a float literal (`2.0`) or `tensor(..)`".to_owned(),
            Scalar::Half => "a float literal (`2.0`) or `tensor<half>(..)`".to_owned(),
            Scalar::Bool => "`true`, `false` or `tensor<bool>(..)`".to_owned(),
        };
        let form = match ty {
            ParamType::Scalar(s) => scalar_form(*s),
            _ if ty.is_concrete() => {
                let t = ty.spelled(self.lang);
                format!("a value `{t}` or `tensor<{t}>(..)`")
            }
            _ => format!("an argument of {}", ty.spelled(self.lang)),
        };
        format!("{form} would match")
    }

    /// The error of an argument that does not fit the leaf's type, for
    /// `reason`.
    fn mismatch(&self, reason: String) -> CallError {
        CallError::TypeMismatch {
            arg: self.leaf.path.to_string(),
            param_type: self.leaf.ty.spelled(self.lang),
            found: self.arg.describe(self.lang),
            reason,
        }
    }

    /// The argument's element type (`None` for an output that does not
    /// name one) and its shape, by its kind; `ts` is the type shape.
    fn element_and_shape(&self, ts: &[Extent]) -> Result<(Option<ParamType>, Shape), CallError> {
        let arg = self.arg;
        Ok(match arg {
            Arg::Tensor { elem, .. } => (
                Some(elem.leaf().clone()),
                Shape::Full(arg.full_shape().map_or(0, |s| s.len())),
            ),
            Arg::Value(t) => (
                Some(t.leaf().clone()),
                Shape::Known(arg.full_shape().unwrap_or_default()),
            ),
            Arg::Ref(s) => (Some(ParamType::Scalar(*s)), Shape::Known(Vec::new())),
            Arg::Number(n) => (
                Some(ParamType::Scalar(self.number_type(n, ts)?)),
                Shape::Known(Vec::new()),
            ),
            Arg::Output(spec) => self.output_element_and_shape(spec, ts)?,
            // The parameter's type fixes the generated value's dims; a
            // grid's own dims come first.
            Arg::Generator(g) => {
                if self.leaf.direction != Direction::In {
                    return Err(self.mismatch(
                        "a generator gives values to read; an `out` or `inout` parameter or the result needs a tensor, `ref` or `output`".into(),
                    ));
                }
                let layout = g.layout(&self.leaf.ty).map_err(|m| self.mismatch(m))?;
                if !matches!(g, Generator::CallId) {
                    g.check_count(layout, g.grid_dims())
                        .map_err(|m| self.mismatch(m))?;
                }
                let mut full = arg.full_shape().unwrap_or_default();
                full.extend(ts.iter().map(|e| match e {
                    Extent::Fixed(n) => *n,
                    _ => 1,
                }));
                (None, Shape::Known(full))
            }
            // Fields are expanded into leaves before this; a struct's
            // fields given to anything else were refused there.
            Arg::Fields(_) => {
                return Err(self.mismatch("only a struct parameter takes fields".into()))
            }
        })
    }

    /// The scalar type a number takes: the parameter's own (a float only
    /// as a floating type, an int as any but `bool`), or `float` or `int`
    /// for a generic type.
    fn number_type(&self, n: &Number, ts: &[Extent]) -> Result<Scalar, CallError> {
        if !ts.is_empty() {
            return Err(self.mismatch(format!(
                "a number binds only to a scalar parameter: there is no implicit conversion between concrete types; {}",
                self.matching_spelling()
            )));
        }
        Ok(match (n, self.leaf.ty.leaf()) {
            (n, ParamType::Scalar(s)) if number_fits(n, *s) => *s,
            (Number::Float(_), ParamType::Generic(_)) => Scalar::Float,
            (Number::Int(_), ParamType::Generic(_)) => Scalar::Int,
            _ => {
                return Err(self.mismatch(format!(
                    "no implicit conversion between concrete types; {}",
                    self.matching_spelling()
                )))
            }
        })
    }

    /// An output's element type, when it names one, and its shape: the
    /// one given, or one to allocate. Only an `out` or `inout` parameter
    /// takes an output, and a named element type must be the
    /// parameter's.
    fn output_element_and_shape(
        &self,
        spec: &OutputSpec,
        ts: &[Extent],
    ) -> Result<(Option<ParamType>, Shape), CallError> {
        let leaf = self.leaf;
        if leaf.direction == Direction::In {
            return Err(CallError::UnsizedOutput {
                arg: leaf.path.to_string(),
                message: if leaf.ty.writes_through() {
                    "a read-write tensor parameter writes into the tensor it is given; give it a tensor, not an output to allocate".into()
                } else {
                    "an output to allocate cannot be passed to an `in` parameter".into()
                },
            });
        }
        if let Some(e) = &spec.elem {
            let resolved = leaf.ty.substituted(&|_| None, &|_| None);
            if *e != resolved && !matches!(leaf.ty.leaf(), ParamType::Generic(_)) {
                return Err(self.mismatch(format!(
                    "an output's element type must be the parameter's type, {}",
                    leaf.ty.spelled(self.lang)
                )));
            }
        }
        let shape = match &spec.shape {
            Some(s) => self.given_output_shape(s, ts)?,
            None => Shape::Allocate(spec.dims),
        };
        Ok((spec.elem.as_ref().map(|e| e.leaf().clone()), shape))
    }

    /// The full shape of an output given with argument shape `s`: `s`,
    /// then the type shape `ts`, whose sizes must all be fixed (no
    /// argument gives the others).
    fn given_output_shape(&self, s: &[u64], ts: &[Extent]) -> Result<Shape, CallError> {
        let mut full = s.to_vec();
        full.extend(ts.iter().map(|e| match e {
            Extent::Fixed(n) => *n,
            _ => 1,
        }));
        if ts.iter().any(|e| !matches!(e, Extent::Fixed(_))) {
            return Err(CallError::UnsizedOutput {
                arg: self.leaf.path.to_string(),
                message: format!(
                    "{} has sizes no argument gives, so an output of it cannot be allocated",
                    self.leaf.ty.spelled(self.lang)
                ),
            });
        }
        Ok(Shape::Known(full))
    }

    /// Element types: equal, or a generic type bound once. The argument's
    /// element type `a` must be the parameter's; a generic type is bound
    /// (in `types`) by the first argument that has it.
    fn match_element_type(
        &self,
        a: &ParamType,
        types: &mut Vec<(Arc<str>, ParamType)>,
    ) -> Result<(), CallError> {
        let lang = self.lang;
        match (self.leaf.ty.leaf(), a) {
            (ParamType::Scalar(p), ParamType::Scalar(s)) if p == s => {}
            (ParamType::Struct(p), ParamType::Struct(s)) if p.name == s.name => {}
            (ParamType::Generic(t), ParamType::Scalar(_)) => bind_generic(t, a, types)
                .map_err(|bound| {
                    self.mismatch(format!(
                        "generic type `{t}` is already {} (from another argument or a specialization)",
                        bound.spelled(lang)
                    ))
                })?,
            (p, a) => {
                return Err(self.mismatch(format!(
                    "its elements are {} where the parameter's are {}: no implicit conversion between concrete types; {}",
                    a.spelled(lang),
                    p.spelled(lang),
                    self.matching_spelling()
                )))
            }
        }
        Ok(())
    }

    /// Maps: the leaf's map as dims, checked against the argument's
    /// `ndims` dims; an output to allocate (no `ndims`) has none to map.
    fn checked_map(
        &self,
        map: Option<ArgMap>,
        ndims: Option<usize>,
        type_dims: usize,
    ) -> Result<Option<Vec<usize>>, CallError> {
        let refuse = |message: &str| CallError::InvalidMap {
            arg: self.leaf.path.to_string(),
            message: message.into(),
        };
        Ok(match (map, ndims) {
            (None, _) => None,
            (Some(_), None) => return Err(refuse("an output to allocate has no dims to map")),
            // A generator's values fill its type's dims in place.
            (Some(_), _) if matches!(self.arg, Arg::Generator(_)) => {
                return Err(refuse("a generator's dims are not remapped"))
            }
            (Some(m), Some(n)) => Some(check_map(&self.leaf.path, m, n, type_dims, self.arg)?),
        })
    }

    /// An argument with dims (`ndims`) must have, after any map, at least
    /// as many as its type shape `ts` consumes.
    fn require_type_dims(
        &self,
        ndims: Option<usize>,
        mapped_ndims: usize,
        ts: &[Extent],
    ) -> Result<(), CallError> {
        if ndims.is_some() && mapped_ndims < ts.len() {
            return Err(CallError::Dimensionality {
                arg: self.leaf.path.to_string(),
                found: mapped_ndims,
                needed: ts.len(),
                param_type: self.leaf.ty.spelled(self.lang),
                type_shape: shape_text(ts),
            });
        }
        Ok(())
    }
}

/// The number of dims after `map`: one past the last position it fills,
/// or else the argument's `ndims` (0 for an output to allocate).
fn mapped_ndims(map: Option<&[usize]>, ndims: Option<usize>) -> usize {
    match (map, ndims) {
        (Some(m), _) => m.iter().max().map_or(0, |&x| x + 1),
        (None, Some(n)) => n,
        (None, None) => 0,
    }
}

/// The sizes known at bind: all of a value's, and the element dims
/// of a tensor (its element type fixes them), per dim as given; for an
/// output to allocate none, and its dims if constrained.
fn known_sizes(shape: Shape, arg: &Arg) -> (Vec<Option<u64>>, Option<Option<usize>>) {
    match (shape, arg) {
        (Shape::Known(s), _) => (s.into_iter().map(Some).collect(), None),
        (Shape::Full(n), Arg::Tensor { elem, .. }) => {
            let fixed = elem.fixed_sizes();
            let mut known = vec![None; n.saturating_sub(fixed.len())];
            known.extend(fixed);
            (known, None)
        }
        (Shape::Full(n), _) => (vec![None; n], None),
        (Shape::Allocate(d), _) => (Vec::new(), Some(d)),
    }
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
    Generator(Generator),
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
            (ArgKind::Generator(g), Arg::Generator(h)) => g == h,
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
            Arg::Generator(g) => ArgKind::Generator(g.clone()),
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
            // The last `n` call dims, when the call has that many (a result
            // given with more argument dims than a vmap's call has not).
            _ => match k.checked_sub(n) {
                Some(first) => (first..k).collect(),
                None => {
                    return Err(match vmap {
                        Some(v) => CallError::InvalidVmap {
                            spec: super::error::quoted(&v.text),
                            message: format!(
                                "argument `{path}` has {n} argument dims, but the call has {k} call dims"
                            ),
                        },
                        None => CallError::UndefinableDimensions {
                            arg: path,
                            dims: n,
                            call_dims: k,
                        },
                    })
                }
            },
        };
        Ok(())
    }

    /// The sizes known at bind moved to their mapped positions (missing
    /// ones are size 1).
    fn mapped_known(&self) -> Vec<Option<u64>> {
        match &self.map {
            None => self.known.clone(),
            Some(m) => {
                let mut out = vec![Some(1); self.mapped_ndims];
                for (i, &p) in m.iter().enumerate() {
                    out[p] = self.known[i];
                }
                out
            }
        }
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

impl BoundLeaf {
    /// The generator it was bound with, if any.
    pub(crate) fn generator(&self) -> Option<&Generator> {
        match &self.kind {
            ArgKind::Generator(g) => Some(g),
            _ => None,
        }
    }

    /// The sizes its type consumes: fixed at bind, or filled by a slot;
    /// a slot that no argument filled leaves an output that cannot be
    /// allocated.
    fn type_shape(&self, slots: &[Option<(u64, usize)>]) -> Result<Vec<u64>, CallError> {
        let mut type_shape = Vec::with_capacity(self.checks.len());
        for (t, check) in self.checks.iter().enumerate() {
            type_shape.push(match *check {
                TypeCheck::Fixed(size) => size,
                TypeCheck::Slot(s) => match slots[s] {
                    Some((size, _)) => size,
                    None => {
                        return Err(CallError::UnsizedOutput {
                            arg: self.path.to_string(),
                            message: format!(
                                "no argument gives the size of its type's axis {t}, so it cannot be allocated"
                            ),
                        })
                    }
                },
            });
        }
        Ok(type_shape)
    }

    /// A leaf that is written must span every call dim of the call shape
    /// `cs` larger than 1 with that size (its argument shape being
    /// `arg_shape`); otherwise several call indices write one element.
    fn refuse_races(&self, cs: &[u64], arg_shape: &[u64]) -> Result<(), CallError> {
        for (c, &size) in cs.iter().enumerate() {
            if size > 1
                && !self
                    .as_calls
                    .iter()
                    .zip(arg_shape)
                    .any(|(&lc, &s)| lc == c && s == size)
            {
                return Err(CallError::Race {
                    arg: self.path.to_string(),
                    axis: c,
                    size: cs[c],
                });
            }
        }
        Ok(())
    }

    /// Where each dim of its argument as given goes: a call dim, or a
    /// type dim; an allocated output lists its argument dims then its
    /// type's.
    fn axes(&self) -> Vec<AxisRole> {
        let n = self.as_calls.len();
        match &self.map {
            Some(map) => map
                .iter()
                .map(|&p| {
                    if p < n {
                        AxisRole::Call(self.as_calls[p])
                    } else {
                        AxisRole::Type(p - n)
                    }
                })
                .collect(),
            None => (0..n)
                .map(|p| AxisRole::Call(self.as_calls[p]))
                .chain((0..self.checks.len()).map(AxisRole::Type))
                .collect(),
        }
    }
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
    types: Vec<(Arc<str>, ParamType)>,
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
    ///
    /// Every leaf is measured first (its argument checked against the
    /// bind, its type sizes checked, its dims broadcast), and only then
    /// resolved, since outputs take their sizes from the whole call.
    pub fn call(&self, args: &CallArgs) -> Result<Resolution, CallError> {
        let supplied = Given::new(args);
        let mut sizes = CallSizes::new(self.call_dims, self.slots);
        let mut measured = Vec::with_capacity(self.leaves.len());
        for (li, l) in self.leaves.iter().enumerate() {
            let arg = l.access.find(&supplied).unwrap_or(&DEFAULT_OUTPUT);
            measured.push(self.measure(li, l, arg, &mut sizes)?);
        }
        let mut resolved = Vec::with_capacity(self.leaves.len());
        for (l, m) in self.leaves.iter().zip(measured) {
            resolved.push(self.resolve_leaf(l, m, &sizes)?);
        }
        let result = match resolved.last() {
            Some((Direction::Return, _)) => resolved.pop().map(|(_, r)| r),
            _ => None,
        };
        Ok(Resolution {
            call_shape: sizes.call_shape,
            overload: self.signature.to_string(),
            args: resolved.into_iter().map(|(_, r)| r).collect(),
            result,
        })
    }

    /// Measures leaf `li` with its argument `arg`: the argument is checked
    /// against the bind, its type sizes are checked (filling slots) and
    /// its argument dims broadcast into the call shape. `None` for an
    /// output to allocate, which has no sizes yet.
    fn measure(
        &self,
        li: usize,
        l: &BoundLeaf,
        arg: &Arg,
        sizes: &mut CallSizes,
    ) -> Result<Option<Measured>, CallError> {
        let Some(full) = self.rebound_shape(l, arg)? else {
            return Ok(None);
        };
        let m = mapped(l.map.as_deref(), l.mapped_ndims, &full);
        self.check_type_sizes(li, l, &m, &mut sizes.slots)?;
        sizes.broadcast(li, l, &m, &self.leaves)?;
        Ok(Some(Measured { mapped: m, full }))
    }

    /// The full shape of `arg`, which must be of the kind, element type
    /// and dims that leaf `l` was bound with; `None` for an output to
    /// allocate, which must still be one.
    fn rebound_shape(&self, l: &BoundLeaf, arg: &Arg) -> Result<Option<Vec<u64>>, CallError> {
        let rebind = |message: String| CallError::Rebind {
            arg: l.path.to_string(),
            message,
        };
        if !l.kind.fits(arg) {
            return Err(rebind(format!(
                "it is now {}",
                arg.describe(self.signature.language)
            )));
        }
        if l.allocate {
            if !matches!(arg, Arg::Output(OutputSpec { shape: None, .. })) {
                return Err(rebind("it was an output to allocate".into()));
            }
            return Ok(None);
        }
        let mut full = arg
            .full_shape()
            .ok_or_else(|| rebind("it has no shape".into()))?;
        if let Arg::Generator(_) = arg {
            // The generated value's own dims, which its type fixes.
            full.extend(l.checks.iter().map(|c| match c {
                TypeCheck::Fixed(n) => *n,
                TypeCheck::Slot(_) => 1,
            }));
        }
        if full.len() != l.ndims {
            return Err(rebind(format!(
                "it had {} dims, now {}",
                l.ndims,
                full.len()
            )));
        }
        Ok(Some(full))
    }

    /// Checks the type sizes of leaf `li` (its mapped shape `m`) against
    /// its type checks, filling the slots it is the first to reach.
    fn check_type_sizes(
        &self,
        li: usize,
        l: &BoundLeaf,
        m: &[u64],
        slots: &mut [Option<(u64, usize)>],
    ) -> Result<(), CallError> {
        let n = l.as_calls.len();
        for (t, check) in l.checks.iter().enumerate() {
            let found = m[n + t];
            if let Some(required) = self.type_size_required(*check, found, li, slots) {
                return Err(CallError::TypeShape {
                    arg: l.path.to_string(),
                    axis: n + t,
                    found,
                    required,
                    param_type: l.ty.spelled(self.signature.language),
                });
            }
        }
        Ok(())
    }

    /// What `check` requires where leaf `li` has size `found`, when that
    /// is not `found`: `None` where it fits. An empty slot is filled with
    /// `found`.
    fn type_size_required(
        &self,
        check: TypeCheck,
        found: u64,
        li: usize,
        slots: &mut [Option<(u64, usize)>],
    ) -> Option<String> {
        match check {
            TypeCheck::Fixed(size) if size != found => Some(format!("{size}")),
            TypeCheck::Fixed(_) => None,
            TypeCheck::Slot(s) => match slots[s] {
                // A generic size of 0 would spell a type of no
                // components (`float0`), which no language has.
                None if found == 0 => self
                    .generic_size_of_slot(s)
                    .map(|g| format!("at least 1 (the generic size `{g}`)")),
                None => {
                    slots[s] = Some((found, li));
                    None
                }
                Some((size, _)) if size == found => None,
                Some((size, other)) => Some(format!(
                    "{size}{}, the size argument `{}` gives it",
                    self.generic_size_of_slot(s)
                        .map_or(String::new(), |g| format!(" (generic size `{g}`)")),
                    self.leaves[other].path
                )),
            },
        }
    }

    /// The generic size that slot `s` holds, if it holds one (and not a
    /// `?` of some type).
    fn generic_size_of_slot(&self, s: usize) -> Option<&Arc<str>> {
        self.generic_sizes
            .iter()
            .find(|(_, c)| *c == TypeCheck::Slot(s))
            .map(|(g, _)| g)
    }

    /// Leaf `l` resolved once every leaf is measured (`m` is its
    /// measure, `None` for an output to allocate): its type and argument
    /// shapes, with races refused unless allowed.
    fn resolve_leaf(
        &self,
        l: &BoundLeaf,
        m: Option<Measured>,
        sizes: &CallSizes,
    ) -> Result<(Direction, ResolvedArg), CallError> {
        let n = l.as_calls.len();
        let type_shape = l.type_shape(&sizes.slots)?;
        let arg_shape: Vec<u64> = match &m {
            Some(m) => m.mapped[..n].to_vec(),
            None => l.as_calls.iter().map(|&c| sizes.call_shape[c]).collect(),
        };
        if l.direction.writes() && !self.allow_races {
            l.refuse_races(&sizes.call_shape, &arg_shape)?;
        }
        let ty = self.resolved_type(l, &sizes.slots);
        // An output to allocate has its argument shape, then its type's.
        let shape = match m {
            Some(m) => m.full,
            None => arg_shape.iter().chain(&type_shape).copied().collect(),
        };
        Ok((
            l.direction,
            ResolvedArg {
                shape,
                path: l.path.to_string(),
                ty: ty.spelled(self.signature.language),
                type_shape,
                call_dims: n,
                mapping: l.as_calls.clone(),
                arg_shape,
                axes: l.axes(),
                allocated: l.allocate,
            },
        ))
    }

    /// The type of leaf `l` with its generic types and the generic sizes
    /// that this call knows (fixed at bind, or filled by `slots`)
    /// substituted.
    /// The generic types bound, as `T = float2, U = int`.
    fn generic_types_text(&self) -> String {
        let lang = self.signature.language;
        let items: Vec<String> = self
            .types
            .iter()
            .map(|(n, t)| format!("{n} = {}", t.spelled(lang)))
            .collect();
        items.join(", ")
    }

    fn resolved_type(&self, l: &BoundLeaf, slots: &[Option<(u64, usize)>]) -> ParamType {
        l.ty.substituted(
            &|g| {
                self.types
                    .iter()
                    .find(|(n, _)| **n == *g)
                    .map(|(_, t)| t.clone())
            },
            &|g| match self.generic_sizes.iter().find(|(n, _)| **n == *g)?.1 {
                TypeCheck::Fixed(size) => Some(size),
                TypeCheck::Slot(s) => slots[s].map(|(size, _)| size),
            },
        )
    }
}

/// A leaf's argument as one call gives it.
struct Measured {
    /// Its full shape moved to its mapped positions.
    mapped: Vec<u64>,
    /// Its full shape as given.
    full: Vec<u64>,
}

/// The sizes that one call's arguments give, as they are measured.
struct CallSizes {
    /// The call shape so far: 1 where no argument has set a size.
    call_shape: Vec<u64>,
    /// The leaf that set each call dim's size.
    owner: Vec<Option<usize>>,
    /// Each slot's size, with the leaf that filled it.
    slots: Vec<Option<(u64, usize)>>,
}

impl CallSizes {
    /// No sizes yet, for `call_dims` call dims and `slots` slots.
    fn new(call_dims: usize, slots: usize) -> CallSizes {
        CallSizes {
            call_shape: vec![1u64; call_dims],
            owner: vec![None; call_dims],
            slots: vec![None; slots],
        }
    }

    /// Broadcasts the argument dims of leaf `li` (the first of its mapped
    /// shape `m`) into the call shape, as NumPy does: a size of 1 fits
    /// any, and the first other size a call dim meets is its size.
    /// `leaves` name the leaf that set a size that does not agree.
    fn broadcast(
        &mut self,
        li: usize,
        l: &BoundLeaf,
        m: &[u64],
        leaves: &[BoundLeaf],
    ) -> Result<(), CallError> {
        let cs = &mut self.call_shape;
        for (p, &c) in l.as_calls.iter().enumerate() {
            let s = m[p];
            if s == 1 || cs[c] == s {
                continue;
            }
            if cs[c] == 1 {
                cs[c] = s;
                self.owner[c] = Some(li);
                continue;
            }
            let other = self.owner[c].map_or("?", |o| &leaves[o].path);
            return Err(CallError::BroadcastMismatch {
                axis: c,
                arg: l.path.to_string(),
                arg_axis: p,
                size: s,
                other: other.to_owned(),
                other_size: cs[c],
            });
        }
        Ok(())
    }
}
