//! `shapec call`: a vectorized call (slangpy's call-shape rules,
//! `shape_call`) from the command line: its shapes resolved, and, for a
//! function with a body, run on data.
//!
//! A signature without a body (a Slang-style declaration alone) is
//! resolved: [`resolve`] gives the call shape and every argument's
//! shapes. A function with a body (WGSL source, or a Slang-style
//! declaration with `--body`) runs ([`execute`]): arguments take `.npy`
//! data (`--input NAME=FILE`) or seeded random values, the CPU backend is
//! the WGSL interpreter (`shape_call::Interpreter`), wgpu runs the
//! generated kernel, and `--diff` compares the two.
//!
//! ```
//! use shapec::call::{resolve, Request};
//! let request = Request {
//!     signature: "float dot(float3 a, float3 b)",
//!     overloads: &[],
//!     args: &["a=tensor(100,3)".into(), "b=float3".into()],
//!     maps: &[],
//!     specializations: &[],
//!     vmap: None,
//!     allow_races: false,
//! };
//! let json = resolve(&request, true).unwrap();
//! assert!(json.starts_with(r#"{"args":{"a":{"arg_shape":[100],"#));
//! ```

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde_json::{json, Map, Value};
use shape_call::{
    Arg, ArgMap, CallArgs, CallError, CallKernel, Direction, Function, InterpretOptions, Language,
    Number, ParamType, Resolution, ResolvedArg, Scalar, Signature, DEFAULT_STEP_LIMIT,
};
use shape_run::HostTensor;

use crate::backends::{auto_note, wgpu_backend, BackendChoice};
use crate::cli::{f32_json, f64_json, preview, stdout_error, write_f32, EXIT_TOLERANCE_EXCEEDED};
use crate::error::CliError;
use crate::output::{OutDir, ResultFile};
use crate::run::{differences, random_values, tuple, Tolerance};

/// What `shapec call` was asked.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The first overload's signature.
    pub signature: &'a str,
    /// More overloads.
    pub overloads: &'a [String],
    /// `NAME=ARG` or positional `ARG`.
    pub args: &'a [String],
    /// `NAME=(..)` or `NAME=TYPE`.
    pub maps: &'a [String],
    /// `NAME=VALUE` or `f<VALUE, ..>`.
    pub specializations: &'a [String],
    /// `(N),(M)->(N,M)`.
    pub vmap: Option<&'a str>,
    /// Whether outputs written by several call indices are accepted.
    pub allow_races: bool,
}

/// How `shapec call` runs a function with a body.
#[derive(Clone, Copy, Debug, Default)]
pub struct Run<'a> {
    /// A WGSL body for the first signature, a Slang-style declaration
    /// (`--body '{ return a * b; }'`).
    pub body: Option<&'a str>,
    /// `--input NAME=PATH` pairs: an argument's data from a `.npy` (or
    /// `.json`) file.
    pub inputs: &'a [(String, PathBuf)],
    /// `--backend`; `None` runs on `auto`.
    pub backend: Option<BackendChoice>,
    /// `--out DIR`: every written argument as `DIR/NAME.npy`.
    pub out: Option<&'a Path>,
    /// Seed of the random values of arguments without a file.
    pub seed: u64,
    /// `--diff`: the CPU interpreter against wgpu.
    pub diff: bool,
    /// `--tolerance` of `--diff`.
    pub tolerance: Option<Tolerance>,
    /// `--step-limit`: statements and loop iterations per call index on
    /// the interpreter ([`DEFAULT_STEP_LIMIT`] when absent).
    pub step_limit: Option<u64>,
    /// `--check-domains`: leaving a built-in's domain is an error on the
    /// interpreter.
    pub check_domains: bool,
    /// `--memory-limit`: the memory the call may use, instead of what the
    /// machine has available.
    pub memory_limit: Option<u64>,
}

impl Run<'_> {
    /// Whether a run was asked explicitly: a backend, data, an output
    /// directory, a comparison or an interpreter option.
    pub fn asked(&self) -> bool {
        self.backend.is_some()
            || !self.inputs.is_empty()
            || self.out.is_some()
            || self.diff
            || self.tolerance.is_some()
            || self.step_limit.is_some()
            || self.check_domains
            || self.memory_limit.is_some()
    }

    /// The interpreter's options.
    pub fn options(&self) -> InterpretOptions {
        InterpretOptions {
            step_limit: self.step_limit.unwrap_or(DEFAULT_STEP_LIMIT),
            check_domains: self.check_domains,
        }
    }
}

/// The function `request` describes, `body` given to its first
/// signature.
fn function(request: &Request<'_>, body: Option<&str>) -> Result<Function, CliError> {
    let mut first = Signature::parse(request.signature)?;
    if let Some(body) = body {
        if first.language == Language::Wgsl {
            return Err(CliError::Data(format!(
                "--body: `{}` is WGSL source, which has its body already; --body gives the body of a Slang-style declaration (`float f(float a)`)",
                first.name
            )));
        }
        first = first.with_wgsl_body(body);
    }
    let mut f = Function::new(first);
    for s in request.overloads {
        f = f.overload(Signature::parse(s)?);
    }
    // `NAME=MAP` maps by name; a map without a name maps the next
    // parameter by position (slangpy's `map(float, float2)`).
    let mut position = 0;
    for m in request.maps {
        match m.split_once('=') {
            Some((name, map)) if !name.trim().starts_with('(') => {
                f = f.map(name.trim(), ArgMap::parse(map)?);
            }
            _ => {
                f = f.map_positional(position, ArgMap::parse(m)?);
                position += 1;
            }
        }
    }
    for sp in request.specializations {
        f = f.specialized(sp)?;
    }
    if let Some(v) = request.vmap {
        f = f.vmap(v)?;
    }
    if request.allow_races {
        f = f.allowing_races();
    }
    Ok(f)
}

/// The arguments as spelled: `(name, arg)` for `NAME=ARG`, `(None, arg)`
/// for a positional one, in order.
fn spelled_args(
    request: &Request<'_>,
    f: &Function,
) -> Result<Vec<(Option<String>, Arg)>, CliError> {
    let scope = f.scope();
    let mut args = Vec::with_capacity(request.args.len());
    for a in request.args {
        // `NAME=ARG` when what precedes `=` is a plain name.
        match a.split_once('=') {
            Some((name, arg))
                if !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                args.push((Some(name.to_string()), Arg::parse(arg, &scope)?));
            }
            _ => args.push((None, Arg::parse(a, &scope)?)),
        }
    }
    Ok(args)
}

fn call_args(spelled: &[(Option<String>, Arg)]) -> CallArgs {
    spelled
        .iter()
        .fold(CallArgs::new(), |args, (name, arg)| match name {
            Some(n) => args.named(n, arg.clone()),
            None => args.arg(arg.clone()),
        })
}

/// Resolves the call; returns the text (or JSON) to print.
pub fn resolve(request: &Request<'_>, as_json: bool) -> Result<String, CliError> {
    let f = function(request, None)?;
    let args = call_args(&spelled_args(request, &f)?);
    let r = f.resolve(&args)?;
    if as_json {
        Ok(resolution_json(&r).to_string())
    } else {
        Ok(resolution_text(&r).join("\n"))
    }
}

/// The resolution's JSON form (docs/json.md, `shapec call --json`).
fn resolution_json(r: &Resolution) -> Value {
    let mut named = Map::new();
    for a in &r.args {
        named.insert(a.path.clone(), arg_json(a));
    }
    json!({
        "call_shape": r.call_shape,
        "overload": r.overload,
        "args": named,
        "result": r.result.as_ref().map_or(Value::Null, arg_json),
    })
}

fn resolution_text(r: &Resolution) -> Vec<String> {
    let mut lines = vec![
        format!("overload: {}", r.overload),
        format!("call shape: {}", tuple(&r.call_shape)),
    ];
    lines.extend(r.args.iter().map(arg_text));
    lines.extend(r.result.iter().map(arg_text));
    lines
}

fn arg_json(a: &ResolvedArg) -> Value {
    json!({
        "type": a.ty,
        "type_shape": a.type_shape,
        "arg_shape": a.arg_shape,
        "call_dims": a.call_dims,
        "mapping": a.mapping,
    })
}

fn arg_text(a: &ResolvedArg) -> String {
    format!(
        "{}: {}, type shape {}, argument shape {} on call dims {}{}",
        a.path,
        a.ty,
        tuple(&a.type_shape),
        tuple(&a.arg_shape),
        tuple(&a.mapping.iter().map(|&m| m as u64).collect::<Vec<_>>()),
        if a.allocated { " (allocated)" } else { "" }
    )
}

/// Whether any overload has a body to run: WGSL source, or a WGSL body
/// given to a Slang-style declaration.
fn has_body(f: &Function) -> bool {
    f.overloads()
        .iter()
        .any(|s| s.language == Language::Wgsl || s.wgsl_body().is_some())
}

/// `shapec call`: runs the function when it has a body (or refuses, with
/// `unsupported_wgsl`, when a run was asked of one without); otherwise
/// resolves its shapes as [`resolve`] does. Writes the report to `out`
/// and notes (`--backend auto` running on the CPU) to `notes`; returns
/// the exit status (3 when `--diff --tolerance` is exceeded).
pub fn execute(
    request: &Request<'_>,
    run: &Run<'_>,
    as_json: bool,
    out: &mut dyn Write,
    notes: &mut dyn Write,
) -> Result<u8, CliError> {
    let f = function(request, run.body)?;
    if !has_body(&f) {
        if run.asked() {
            let name = f.overloads().first().map_or("", |s| &*s.name).to_string();
            return Err(CliError::Call(CallError::UnsupportedWgsl {
                construct: format!(
                    "a declaration without a body: running `{name}` needs one, given in WGSL with --body '{{ return ...; }}', or the function given as WGSL source (`fn {name}(..) -> T {{ .. }}`); without the options that run a call, `shapec call` resolves its shapes only"
                ),
                function: name,
                at: String::new(),
            }));
        }
        let text = resolve(request, as_json)?;
        writeln!(out, "{text}").map_err(stdout_error)?;
        return Ok(0);
    }
    if run.diff && run.backend == Some(BackendChoice::Cpu) {
        return Err(CliError::Backend(
            "--diff compares the CPU interpreter with wgpu; leave out --backend cpu".into(),
        ));
    }
    let prepared = Prepared::new(request, run, &f)?;
    if run.diff {
        let d = prepared.diff(run)?;
        if as_json {
            d.json(&prepared, out)?;
        } else {
            d.text(&prepared, out)?;
        }
        return Ok(if run.tolerance.is_some() && d.exceeding > 0 {
            EXIT_TOLERANCE_EXCEEDED
        } else {
            0
        });
    }
    let out_dir = match run.out {
        Some(dir) => {
            let files: Vec<(&str, Vec<u64>)> = prepared
                .written_leaves()
                .map(|(name, dims)| (name, dims.to_vec()))
                .collect();
            Some(OutDir::prepare(dir, &files)?)
        }
        None => None,
    };
    let (backend, buffers) =
        prepared.run_on(run.backend.unwrap_or(BackendChoice::Auto), run, notes)?;
    let results = prepared.written(buffers);
    let written = match &out_dir {
        Some(d) => {
            let files: Vec<ResultFile<'_>> = results
                .iter()
                .map(|r| ResultFile {
                    name: &r.name,
                    shape: r.dims.clone(),
                    data: &r.values,
                    offsets: Vec::new(),
                })
                .collect();
            d.write(&files)?;
            Some(d.path())
        }
        None => None,
    };
    if as_json {
        prepared.run_json(&backend, run.seed, &results, written, out)?;
    } else {
        prepared.run_text(&backend, run.seed, &results, run.out, out)?;
    }
    Ok(0)
}

/// Where an argument's values came from.
#[derive(Clone, Debug, PartialEq)]
enum Source {
    /// `--input NAME=PATH`.
    File(PathBuf),
    /// A number spelled on the command line.
    Argument,
    /// Zeros: an `out` parameter or reference given as an argument.
    Zeros,
    /// Seeded random values.
    Random,
    /// Computed by the kernel (`call_id`, `grid(..)`, ...).
    Generator,
}

/// One argument the call reads (or generates): its name, dims and source.
struct DataLeaf {
    name: String,
    dims: Vec<u64>,
    source: Source,
}

/// A call ready to run: resolved, its kernel and its buffers laid out.
struct Prepared {
    resolution: Resolution,
    kernel: CallKernel,
    data: Vec<DataLeaf>,
    buffers: Vec<Vec<f32>>,
}

/// One argument the call wrote, with its dims as given and its values.
struct WrittenArg {
    name: String,
    dims: Vec<u64>,
    values: Vec<f32>,
}

impl Prepared {
    fn new(request: &Request<'_>, run: &Run<'_>, f: &Function) -> Result<Prepared, CliError> {
        let mut spelled = spelled_args(request, f)?;
        let mut files: HashMap<&str, &PathBuf> = HashMap::new();
        for (name, path) in run.inputs {
            if let Some(first) = files.insert(name, path) {
                return Err(CliError::Data(format!(
                    "--input {name}=... is given twice ({} and {}); give each argument's file once",
                    first.display(),
                    path.display()
                )));
            }
        }
        // An `--input` for a parameter spelled nowhere: the file's dims
        // are the argument's (a tensor of the parameter's scalar type).
        let first = &f.overloads()[0];
        let positional = spelled.iter().filter(|(n, _)| n.is_none()).count();
        for (name, path) in run.inputs {
            let by_position = (first.params.iter().take(positional)).any(|p| &*p.name == name);
            if by_position || spelled.iter().any(|(n, _)| n.as_deref() == Some(name)) {
                continue;
            }
            if name.contains('.') {
                // A struct's field: its struct is spelled field by field.
                continue;
            }
            let Some(param) = first.params.iter().find(|p| &*p.name == name) else {
                let names: Vec<&str> = first.params.iter().map(|p| &*p.name).collect();
                return Err(CliError::Data(format!(
                    "--input {name}=...: `{}` has no parameter `{name}` (its parameters: {})",
                    first.name,
                    names.join(", ")
                )));
            };
            if crate::run::is_json(path) {
                return Err(CliError::Data(format!(
                    "--input {name}={}: a .json file does not give `{name}`'s dims; spell them ({name}=tensor(..)) or give a .npy file",
                    path.display()
                )));
            }
            let dims = npy_dims(path, name)?;
            let elem = match param.ty.leaf() {
                ParamType::Scalar(s) => ParamType::Scalar(*s),
                _ => ParamType::Scalar(Scalar::Float),
            };
            spelled.push((Some(name.clone()), Arg::tensor_of(elem, &dims)));
        }
        let args = call_args(&spelled);
        let bound = f.bind(&args)?;
        let resolution = bound.call(&args)?;
        let kernel = bound.kernel(&resolution)?;
        // Each spelled argument by the path of its leaves.
        let params = &bound.signature().params;
        let mut by_path: HashMap<String, &Arg> = HashMap::new();
        let mut position = 0;
        for (name, arg) in &spelled {
            let name = match name {
                Some(n) => n.clone(),
                None => {
                    position += 1;
                    match params.get(position - 1) {
                        Some(p) => p.name.to_string(),
                        None => continue,
                    }
                }
            };
            add_paths(&mut by_path, name, arg);
        }
        let resolved: Vec<&ResolvedArg> =
            resolution.args.iter().chain(&resolution.result).collect();
        // Every file names an argument that takes data.
        for (name, path) in run.inputs {
            let leaf = kernel.leaves.iter().find(|l| &*l.path == name);
            let why = match leaf {
                None => Some("the call has no such argument".to_string()),
                Some(l) if l.generator.is_some() => {
                    Some("its values are generated by the kernel".into())
                }
                Some(l) if l.allocated || l.direction == Direction::Out => Some(
                    "it is an output: the function writes it, and reads nothing from it".into(),
                ),
                Some(_) => None,
            };
            if let Some(why) = why {
                let takes: Vec<&str> = (kernel.leaves.iter())
                    .filter(|l| {
                        !l.allocated && l.generator.is_none() && l.direction != Direction::Out
                    })
                    .map(|l| &*l.path)
                    .collect();
                return Err(CliError::Data(format!(
                    "--input {name}={}: {why}; the arguments that take data are {}",
                    path.display(),
                    if takes.is_empty() {
                        "none".to_string()
                    } else {
                        takes.join(", ")
                    }
                )));
            }
        }
        enough_memory(&kernel, run.diff, run.memory_limit)?;
        let mut data = Vec::new();
        let mut inputs = Vec::new();
        for (leaf, r) in kernel.leaves.iter().zip(&resolved) {
            if leaf.allocated {
                continue;
            }
            let name = leaf.path.to_string();
            if leaf.generator.is_some() {
                data.push(DataLeaf {
                    name,
                    dims: r.shape.clone(),
                    source: Source::Generator,
                });
                continue;
            }
            let len = usize::try_from(leaf.len).map_err(|_| too_large(&name, leaf.len))?;
            let (values, source) = if let Some(path) = files.get(name.as_str()) {
                (
                    read_arg(path, &name, &r.shape)?,
                    Source::File((*path).clone()),
                )
            } else {
                match by_path.get(&name) {
                    Some(Arg::Number(n)) => (
                        vec![
                            match n {
                                Number::Float(x) => *x as f32,
                                Number::Int(i) => *i as f32,
                            };
                            len
                        ],
                        Source::Argument,
                    ),
                    _ if matches!(leaf.direction, Direction::Out)
                        || matches!(by_path.get(&name), Some(Arg::Ref(_))) =>
                    {
                        let mut v =
                            crate::npy::try_vec(len).ok_or_else(|| too_large(&name, leaf.len))?;
                        v.resize(len, 0.0);
                        (v, Source::Zeros)
                    }
                    _ => {
                        let mut v = random_values(run.seed, &name, len)
                            .ok_or_else(|| too_large(&name, leaf.len))?;
                        if let ParamType::Scalar(s) = leaf.ty.leaf() {
                            integral(*s, &mut v);
                        }
                        (v, Source::Random)
                    }
                }
            };
            data.push(DataLeaf {
                name,
                dims: r.shape.clone(),
                source,
            });
            inputs.push(values);
        }
        let buffers = kernel.buffers(inputs)?;
        Ok(Prepared {
            resolution,
            kernel,
            data,
            buffers,
        })
    }

    /// The arguments the call writes, with their dims.
    fn written_leaves(&self) -> impl Iterator<Item = (&str, &[u64])> {
        let resolved = self.resolution.args.iter().chain(&self.resolution.result);
        (self.kernel.leaves.iter().zip(resolved))
            .filter(|(l, _)| l.writes())
            .map(|(l, r)| (&*l.path, r.shape.as_slice()))
    }

    /// The written arguments of `buffers`.
    fn written(&self, buffers: Vec<Vec<f32>>) -> Vec<WrittenArg> {
        let resolved = self.resolution.args.iter().chain(&self.resolution.result);
        (self.kernel.leaves.iter().zip(resolved).zip(buffers))
            .filter(|((l, _), _)| l.writes())
            .map(|((l, r), values)| WrittenArg {
                name: l.path.to_string(),
                dims: r.shape.clone(),
                values,
            })
            .collect()
    }

    /// Runs on the CPU interpreter; returns the buffers written.
    fn run_cpu(
        &self,
        run: &Run<'_>,
        mut buffers: Vec<Vec<f32>>,
    ) -> Result<Vec<Vec<f32>>, CliError> {
        self.kernel
            .run_interpreted_with(&mut buffers, run.options())?;
        Ok(buffers)
    }

    /// Runs on the chosen backend; returns its name and the buffers
    /// written.
    fn run_on(
        &self,
        choice: BackendChoice,
        run: &Run<'_>,
        notes: &mut dyn Write,
    ) -> Result<(String, Vec<Vec<f32>>), CliError> {
        let buffers = self.buffers.clone();
        let gpu = match choice {
            BackendChoice::Cpu => None,
            BackendChoice::Wgpu => Some(
                wgpu_backend(false)
                    .map_err(|e| CliError::Backend(format!("--backend wgpu: {e}")))?,
            ),
            BackendChoice::Auto => match wgpu_backend(true) {
                Ok(gpu) => Some(gpu),
                Err(why) => {
                    auto_note(notes, &why);
                    None
                }
            },
        };
        match gpu {
            None => Ok((CPU_NAME.to_string(), self.run_cpu(run, buffers)?)),
            Some(mut gpu) => {
                let name = shape_core::Backend::name(&gpu);
                let written = gpu
                    .run_call_on_host(&self.kernel, buffers)
                    .map_err(|e| CliError::Backend(format!("{name}: {e}")))?;
                Ok((name, written))
            }
        }
    }

    /// The CPU interpreter against wgpu, on the same data.
    fn diff(&self, run: &Run<'_>) -> Result<CallDiff, CliError> {
        let mut gpu = wgpu_backend(false).map_err(|e| {
            CliError::Backend(format!(
                "--diff: {e}; the CPU interpreter has nothing to be compared with"
            ))
        })?;
        let expected = self.written(self.run_cpu(run, self.buffers.clone())?);
        let other = shape_core::Backend::name(&gpu);
        let found = gpu
            .run_call_on_host(&self.kernel, self.buffers.clone())
            .map_err(|e| CliError::Backend(format!("{other}: {e}")))?;
        let found = self.written(found);
        let mut d = CallDiff {
            seed: run.seed,
            reference: CPU_NAME.to_string(),
            other,
            tolerance: run.tolerance,
            elements: 0,
            exceeding: 0,
            abs: None,
            rel: None,
            first_exceeding: None,
            results: Vec::new(),
        };
        for (a, b) in expected.iter().zip(&found) {
            d.results.push((a.name.clone(), a.dims.clone()));
            for (i, (&x, &y)) in a.values.iter().zip(&b.values).enumerate() {
                d.elements += 1;
                let (abs, rel) = differences(x, y);
                let place = |diff: f64| Place {
                    diff,
                    name: a.name.clone(),
                    index: unravel(&a.dims, i as u64),
                    expected: x,
                    found: y,
                };
                if d.abs.as_ref().is_none_or(|w| abs > w.diff) {
                    d.abs = Some(place(abs));
                }
                if d.rel.as_ref().is_none_or(|w| rel > w.diff) {
                    d.rel = Some(place(rel));
                }
                if run.tolerance.is_some_and(|t| !t.allows(x, y)) {
                    d.exceeding += 1;
                    if d.first_exceeding.is_none() {
                        d.first_exceeding = Some(place(abs));
                    }
                }
            }
        }
        Ok(d)
    }

    fn data_json(&self, seed: u64) -> Value {
        Value::Array(
            self.data
                .iter()
                .map(|d| {
                    let source = match &d.source {
                        Source::File(p) => json!({"kind": "file", "path": p.display().to_string()}),
                        Source::Argument => json!({"kind": "argument"}),
                        Source::Zeros => json!({"kind": "zeros"}),
                        Source::Random => json!({"kind": "random", "seed": seed}),
                        Source::Generator => json!({"kind": "generator"}),
                    };
                    json!({"name": d.name, "dims": d.dims, "source": source})
                })
                .collect(),
        )
    }

    fn data_text(&self, seed: u64) -> String {
        let mut s = String::new();
        for d in &self.data {
            let from = match &d.source {
                Source::File(p) => p.display().to_string(),
                Source::Argument => "the argument".to_string(),
                Source::Zeros => "zeros".to_string(),
                Source::Random => format!("random values (seed {seed})"),
                Source::Generator => "generated by the kernel".to_string(),
            };
            s.push_str(&format!("{} : {} <- {from}\n", d.name, tuple(&d.dims)));
        }
        s
    }

    /// The run's JSON (docs/json.md): the resolution's keys, then the
    /// backend, the data, the results with their values and the files
    /// written.
    fn run_json(
        &self,
        backend: &str,
        seed: u64,
        results: &[WrittenArg],
        written: Option<&Path>,
        out: &mut dyn Write,
    ) -> Result<(), CliError> {
        let mut head = resolution_json(&self.resolution);
        head["backend"] = json!(backend);
        head["data"] = self.data_json(seed);
        let head = head.to_string();
        let mut w = std::io::BufWriter::new(out);
        let io = (|| -> std::io::Result<()> {
            write!(w, "{},\"results\":[", &head[..head.len() - 1])?;
            for (i, r) in results.iter().enumerate() {
                let meta = json!({"name": r.name, "dims": r.dims}).to_string();
                let sep = if i == 0 { "" } else { "," };
                write!(w, "{sep}{},\"values\":", &meta[..meta.len() - 1])?;
                match HostTensor::new(r.dims.clone(), r.values.clone()) {
                    Ok(t) => t.write_nested(&mut w, &|w, v| write_f32(w, v))?,
                    Err(_) => {
                        let flat: Vec<Value> = r.values.iter().map(|&v| f32_json(v)).collect();
                        write!(w, "{}", Value::Array(flat))?;
                    }
                }
                w.write_all(b"}")?;
            }
            let written = match written {
                Some(dir) => json!({
                    "dir": dir.display().to_string(),
                    "files": results.iter().map(|r| format!("{}.npy", r.name)).collect::<Vec<_>>(),
                }),
                None => Value::Null,
            };
            writeln!(w, "],\"written\":{written}}}")?;
            w.flush()
        })();
        io.map_err(stdout_error)
    }

    fn run_text(
        &self,
        backend: &str,
        seed: u64,
        results: &[WrittenArg],
        dir: Option<&Path>,
        out: &mut dyn Write,
    ) -> Result<(), CliError> {
        let mut s = format!("backend: {backend}\n");
        s.push_str(&format!("overload: {}\n", self.resolution.overload));
        s.push_str(&format!(
            "call shape: {}\n",
            tuple(&self.resolution.call_shape)
        ));
        s.push_str(&self.data_text(seed));
        for r in results {
            s.push_str(&format!(
                "{} : {} = {}\n",
                r.name,
                tuple(&r.dims),
                preview(&r.values)
            ));
        }
        if let Some(dir) = dir {
            s.push_str(&format!(
                "wrote {} result(s) to {}\n",
                results.len(),
                dir.display()
            ));
        }
        write!(out, "{s}").map_err(stdout_error)
    }
}

/// The name the CPU interpreter runs under.
const CPU_NAME: &str = "cpu (interpreter)";

/// Records the paths of `arg`'s leaves under `path`: a struct given field
/// by field has one per field, `p.field`.
fn add_paths<'a>(by_path: &mut HashMap<String, &'a Arg>, path: String, arg: &'a Arg) {
    if let Arg::Fields(fields) = arg {
        for (field, a) in fields {
            add_paths(by_path, format!("{path}.{field}"), a);
        }
    }
    by_path.insert(path, arg);
}

/// Random values in [-1, 1) made whole for an integer or boolean leaf:
/// -8..=7 for `int`, 0..=7 for `uint`, 0 or 1 for `bool`.
fn integral(scalar: Scalar, values: &mut [f32]) {
    let f: fn(f32) -> f32 = match scalar {
        Scalar::Int => |v| (v * 8.0).floor(),
        Scalar::Uint => |v| ((v + 1.0) * 4.0).floor(),
        Scalar::Bool => |v| if v >= 0.0 { 1.0 } else { 0.0 },
        Scalar::Float | Scalar::Half => return,
    };
    for v in values {
        *v = f(*v);
    }
}

fn too_large(name: &str, len: u64) -> CliError {
    CliError::OutOfMemory {
        what: format!("the data of argument `{name}` ({len} values)"),
        needed: u128::from(len) * 4,
        budget: None,
    }
}

/// Refuses a call whose buffers need more memory than there is: the
/// data, the copy a run takes, and for `--diff` a second copy.
fn enough_memory(kernel: &CallKernel, diff: bool, limit: Option<u64>) -> Result<(), CliError> {
    let copies: u128 = if diff { 3 } else { 2 };
    let needed = (kernel.leaves.iter())
        .map(|l| u128::from(l.len) * 4)
        .sum::<u128>()
        * copies;
    crate::memory::check_budget(
        || format!("this call of `{}`", kernel.function),
        needed,
        limit,
    )
}

/// Adds to a file error which argument the file was for.
fn for_argument(e: CliError, name: &str) -> CliError {
    match e {
        CliError::Read { path, source } => CliError::Read {
            source: std::io::Error::new(
                source.kind(),
                format!("{source} (the data of argument `{name}`, --input {name}=...)"),
            ),
            path,
        },
        e => e,
    }
}

/// The dims in a `.npy` file's header.
fn npy_dims(path: &Path, name: &str) -> Result<Vec<u64>, CliError> {
    let read_error = |source: std::io::Error| {
        for_argument(
            CliError::Read {
                path: path.to_path_buf(),
                source,
            },
            name,
        )
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    if file.metadata().map_err(read_error)?.is_dir() {
        return Err(read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it is a directory",
        )));
    }
    let mut reader = std::io::BufReader::new(std::io::Read::take(file, 1 << 20));
    let header = crate::npy::read_header(&mut reader).map_err(|source| CliError::Npy {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(header.shape)
}

/// Reads argument `name`'s data, whose dims must be `dims` (the argument
/// as spelled).
fn read_arg(path: &Path, name: &str, dims: &[u64]) -> Result<Vec<f32>, CliError> {
    let t = if crate::run::is_json(path) {
        crate::json_values::read_json_input(path, name, &tuple(dims), dims, &[])
    } else {
        crate::run::read_npy(path, &mut |found| {
            if found == dims {
                return Ok(dims.to_vec());
            }
            Err(CliError::Data(format!(
                "{}: argument `{name}` has the dims {} as spelled, but the file holds {}; give a file of those dims, or leave `{name}=...` out so that the file's dims are the argument's",
                path.display(),
                tuple(dims),
                tuple(found)
            )))
        })
    };
    // A call reads its arguments in C order: a Fortran file is copied.
    let t = t.map_err(|e| for_argument(e, name))?;
    Ok(t.into_contiguous()
        .map_err(|e| for_argument(CliError::Data(format!("{}: {e}", path.display())), name))?
        .into_values())
}

/// The row-major index of element `flat` of `dims`.
fn unravel(dims: &[u64], mut flat: u64) -> Vec<u64> {
    let mut index = vec![0; dims.len()];
    for (i, &d) in dims.iter().enumerate().rev() {
        if d > 0 {
            index[i] = flat % d;
            flat /= d;
        }
    }
    index
}

/// An element of a written argument where the two runs differ.
struct Place {
    diff: f64,
    name: String,
    index: Vec<u64>,
    expected: f32,
    found: f32,
}

impl Place {
    fn json(&self) -> Value {
        json!({
            "tensor": self.name,
            "index": self.index,
            "difference": f64_json(self.diff),
            "expected": f32_json(self.expected),
            "found": f32_json(self.found),
        })
    }

    fn text(&self) -> String {
        let ix: Vec<String> = self.index.iter().map(u64::to_string).collect();
        format!(
            "{}[{}]: {} vs {}",
            self.name,
            ix.join(", "),
            self.expected,
            self.found
        )
    }
}

/// How the CPU interpreter's results and wgpu's differ.
struct CallDiff {
    seed: u64,
    reference: String,
    other: String,
    tolerance: Option<Tolerance>,
    elements: usize,
    exceeding: usize,
    abs: Option<Place>,
    rel: Option<Place>,
    first_exceeding: Option<Place>,
    /// Each written argument's name and dims.
    results: Vec<(String, Vec<u64>)>,
}

impl CallDiff {
    fn text(&self, prepared: &Prepared, out: &mut dyn Write) -> Result<(), CliError> {
        let mut s = format!(
            "reference: {}\ncompared:  {}\noverload:  {}\ncall shape: {}\nelements:  {} in {} result(s)\n",
            self.reference,
            self.other,
            prepared.resolution.overload,
            tuple(&prepared.resolution.call_shape),
            self.elements,
            self.results.len()
        );
        for (what, w) in [("absolute", &self.abs), ("relative", &self.rel)] {
            let at = match w {
                Some(w) => format!("{} at {}", w.diff, w.text()),
                None => "none (no elements)".to_string(),
            };
            s.push_str(&format!("largest {what} difference: {at}\n"));
        }
        if let Some(t) = self.tolerance {
            let verdict = match &self.first_exceeding {
                Some(w) => format!(
                    "{} of {} elements exceed it, the first {}",
                    self.exceeding,
                    self.elements,
                    w.text()
                ),
                None => "every element is within it".to_string(),
            };
            s.push_str(&format!(
                "tolerance: abs={}, rel={}: {verdict}\n",
                t.abs, t.rel
            ));
        }
        write!(out, "{s}").map_err(stdout_error)
    }

    fn json(&self, prepared: &Prepared, out: &mut dyn Write) -> Result<(), CliError> {
        let place = |p: &Option<Place>| p.as_ref().map_or(Value::Null, Place::json);
        let tolerance = self.tolerance.map_or(Value::Null, |t| {
            json!({
                "abs": t.abs,
                "rel": t.rel,
                "exceeding": self.exceeding,
                "first_exceeding": place(&self.first_exceeding),
                "passed": self.exceeding == 0,
            })
        });
        let mut v = resolution_json(&prepared.resolution);
        v["reference"] = json!(self.reference);
        v["compared"] = json!(self.other);
        v["elements"] = json!(self.elements);
        v["data"] = prepared.data_json(self.seed);
        v["results"] = Value::Array(
            (self.results.iter())
                .map(|(name, dims)| json!({"name": name, "dims": dims}))
                .collect(),
        );
        v["largest"] = json!({"absolute": place(&self.abs), "relative": place(&self.rel)});
        v["tolerance"] = tolerance;
        writeln!(out, "{v}").map_err(stdout_error)
    }
}
