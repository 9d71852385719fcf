//! The command line: arguments, the subcommands, and what they print.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};
use serde_json::{json, Value};
use shape_core::SolvedShape;
use shape_graph::{SolvedGraph, TensorId, TensorKind};
use shape_run::{HostTensor, RunOptions, RunPlan};

use crate::backends::{dispatch, BackendChoice, BackendJob};
use crate::error::{CliError, ProgramError};
use crate::memory::{self, Runs};
use crate::output::{OutDir, ResultFile};
use crate::run::{gather, tuple, Diff, DiffJob, RunJob, Source, Tolerance, Worst};
use crate::text::escaped;
use crate::{broadcast, diagnostics, infer};
use shape_lang::compile::{compile, Compiled};
use shape_lang::{checks, syntax};

/// Shape inference for tensor programs written as text.
#[derive(Debug, Parser)]
#[command(name = "shapec", version, about, long_about = None)]
pub struct Cli {
    /// When to color diagnostics.
    #[arg(long, value_enum, default_value_t = ColorChoice::Auto, global = true)]
    pub color: ColorChoice,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The `--color` choice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ColorChoice {
    /// Color when standard error is a terminal and `NO_COLOR` is unset.
    Auto,
    /// Always color.
    Always,
    /// Never color.
    Never,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print every tensor's solved shape (batch|input->output).
    Infer {
        /// The program file.
        file: PathBuf,
        /// Also print each operation's projections (loop iterators).
        #[arg(long, conflicts_with = "dot")]
        projections: bool,
        /// Also print the kernels each operation becomes (steps, sizes,
        /// buffers), as a run with `--slice 0` lowers them.
        #[arg(long, conflicts_with = "dot")]
        kernels: bool,
        /// With --kernels: input NAME's values lie in C (row-major) or F
        /// (Fortran, column-major) order (repeatable; C when not given, as
        /// `--input` reads a `.npy` file in its own order). Each kernel
        /// then also shows the loops the CPU's coalesced path runs, chosen
        /// from those strides, and the strides it reads each input at.
        #[arg(long, value_name = "NAME=C|F", requires = "kernels")]
        order: Vec<String>,
        /// Print JSON (docs/json.md): {"tensors": {NAME: {"batch": [..],
        /// "input": [..], "output": [..]}}}, with "projections" and
        /// "explain" when those are asked for.
        #[arg(long, conflicts_with = "dot")]
        json: bool,
        /// Explain where each size of tensor NAME came from (repeatable);
        /// any name `infer` prints, such as `y.1`.
        #[arg(long, value_name = "NAME", conflicts_with = "dot")]
        explain: Vec<String>,
        /// Print the operation graph with solved shapes as Graphviz DOT.
        #[arg(long)]
        dot: bool,
    },
    /// Run a program and print (and optionally save) its results.
    Run {
        /// The program file.
        file: PathBuf,
        /// Backend, data and seed.
        #[command(flatten)]
        run: RunArgs,
        /// Write each result NAME to DIR/NAME.npy, all or nothing.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
    },
    /// Run a program on the reference CPU path and on another backend, and
    /// report the largest differences.
    Diff {
        /// The program file.
        file: PathBuf,
        /// Backend, data and seed.
        #[command(flatten)]
        run: RunArgs,
        /// Count the elements where |a - b| > A + R * max(|a|, |b|), and
        /// exit with status 3 when there are any: `abs=A,rel=R` (either
        /// part alone).
        #[arg(long, value_name = "abs=A,rel=R", value_parser = Tolerance::parse)]
        tolerance: Option<Tolerance>,
    },
    /// Broadcast shapes by NumPy's rules, e.g. `shapec broadcast 5,2,1 2,3`.
    Broadcast {
        /// Shapes: sizes separated by commas, `""` or `()` for no axes; `?`
        /// for a size known only at run time, `*` for a shape of unknown
        /// rank (MLIR's rules, with the guards they leave).
        #[arg(required = true, allow_hyphen_values = true)]
        shapes: Vec<String>,
        /// Verify a declared result shape against the operands.
        #[arg(long, value_name = "SHAPE", allow_hyphen_values = true)]
        result: Option<String>,
        /// Report whether broadcasting is known to succeed before run time.
        #[arg(long = "static")]
        statically: bool,
        /// Print {"shape": [..]} or {"error": {"message": ..}}.
        #[arg(long)]
        json: bool,
    },
    /// Resolve a vectorized call (slangpy's rules): type shapes, argument
    /// shapes, the call shape and the result's, e.g.
    /// `shapec call 'float dot(float3 a, float3 b)' a='tensor(100,3)' b=float3`;
    /// a function with a body (WGSL source, or `--body`) also runs on data.
    /// docs/call-shapes.md gives the argument syntax.
    Call {
        /// The function's signature: a Slang-style declaration, or WGSL
        /// source (reflected with naga).
        signature: String,
        /// Arguments, `NAME=ARG` or positional `ARG`: `tensor(100,3)`,
        /// `tensor<float3>(10)`, `buffer(50,int2)`, `float3`, `10.0`,
        /// `ref`, `output<float>(dims=1)`, `{field=ARG, ...}`.
        #[arg(allow_negative_numbers = true)]
        args: Vec<String>,
        /// Another overload (repeatable); exactly one must take the arguments.
        #[arg(long = "signature", value_name = "SIGNATURE")]
        overloads: Vec<String>,
        /// Remap an argument's dims, applied first (repeatable):
        /// `NAME=(2,0,1)` (entry i is where dim i goes; fewer entries
        /// cover the leading call dims), `NAME=(width,height,channels)`
        /// (named dims, in their new order), or `NAME=float` (the type the
        /// argument binds as); without `NAME=`, the next parameter by
        /// position (`--map float --map float2`, slangpy's `map(float, float2)`).
        #[arg(long, value_name = "NAME=(..)")]
        map: Vec<String>,
        /// Fix generic parameters (repeatable): `N=8`, `T=float`, or the
        /// function with all of them in order, `add<float,3>`.
        #[arg(long, value_name = "NAME=VALUE")]
        specialize: Vec<String>,
        /// Explicit call dims: one group per parameter naming its argument
        /// dims, then the call dims: `(N),(M)->(N,M)`.
        #[arg(long, value_name = "SPEC")]
        vmap: Option<String>,
        /// Accept outputs that several call indices write.
        #[arg(long)]
        allow_races: bool,
        /// Print JSON (docs/json.md): {"call_shape": [..], "overload": ..,
        /// "args": {NAME: {..}}, "result": {..}}, and for a run the
        /// backend, the data and the results with their values.
        #[arg(long)]
        json: bool,
        /// The body, in WGSL, of a Slang-style declaration, which then
        /// runs: `--body '{ return a * b; }'` (braces optional). Value
        /// parameters take WGSL types (`float3 a` is `a: vec3<f32>`);
        /// a slice or tensor parameter `p` is read with `p_load(i0, ..)`
        /// and `p_size(d)`. WGSL source has its body already.
        #[arg(long, value_name = "WGSL")]
        body: Option<String>,
        /// Data for an argument from a .npy file (repeatable, once per
        /// name): its dims must be the argument's as spelled, or, with
        /// no `NAME=ARG`, they are the argument's. Arguments without a
        /// file get seeded random values.
        #[arg(long = "input", value_name = "NAME=PATH", value_parser = parse_input)]
        inputs: Vec<(String, PathBuf)>,
        /// Where a function with a body runs: the CPU interpreter of WGSL
        /// (`cpu`), wgpu, or `auto` (the default: wgpu on a hardware
        /// adapter, otherwise the CPU, saying why).
        #[arg(long, value_enum)]
        backend: Option<BackendChoice>,
        /// Write each written argument NAME (`_result` for the return
        /// value) to DIR/NAME.npy, all or nothing.
        #[arg(long, value_name = "DIR", conflicts_with = "diff")]
        out: Option<PathBuf>,
        /// Seed of the random values given to arguments without a file.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Run on the CPU interpreter and on wgpu, and report the largest
        /// differences of what the function writes.
        #[arg(long)]
        diff: bool,
        /// With --diff: count the elements where |a - b| > A + R *
        /// max(|a|, |b|), and exit with status 3 when there are any.
        #[arg(long, value_name = "abs=A,rel=R", value_parser = Tolerance::parse, requires = "diff")]
        tolerance: Option<Tolerance>,
        /// The statements and loop iterations one call index may run on
        /// the CPU interpreter before it stops with `step_limit` (default
        /// 1048576).
        #[arg(long, value_name = "N")]
        step_limit: Option<u64>,
        /// On the CPU interpreter, stop with `out_of_domain` where a
        /// built-in leaves the domain WGSL specifies it on (`sin` past
        /// [-pi, pi], `log` of a negative, a result that is not finite).
        #[arg(long)]
        check_domains: bool,
        /// The memory a run may use (e.g. 2G, 512M, or bytes), instead of
        /// what the cgroup or the machine has available.
        #[arg(long, value_name = "SIZE", value_parser = memory::parse_size)]
        memory_limit: Option<u64>,
    },
}

impl RunArgs {
    /// The library's options of the run.
    fn options(&self) -> RunOptions {
        RunOptions::default().with_slice(self.slice)
    }
}

/// Options shared by `run` and `diff`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The backend to run on (for `diff`, the one compared with the
    /// reference CPU path).
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// Data for an input or parameter from a .npy file (repeatable, once
    /// per name).
    #[arg(long = "input", value_name = "NAME=PATH", value_parser = parse_input)]
    pub inputs: Vec<(String, PathBuf)>,
    /// Seed of the random values given to inputs and parameters without a
    /// file.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The batch index that `batch_slice` takes.
    #[arg(long, default_value_t = 0)]
    pub slice: u64,
    /// The memory the command may use (e.g. 2G, 512M, or bytes), instead
    /// of what the cgroup or the machine has available.
    #[arg(long, value_name = "SIZE", value_parser = memory::parse_size)]
    pub memory_limit: Option<u64>,
    /// Print JSON (docs/json.md) on standard output, errors included.
    #[arg(long)]
    pub json: bool,
    /// The value of a run-time size (`size b` alone in the program),
    /// repeatable; sizes the data of `--input` files give need none.
    #[arg(long = "size", value_name = "NAME=N", value_parser = parse_size_value)]
    pub sizes: Vec<(String, u64)>,
}

fn parse_size_value(s: &str) -> Result<(String, u64), String> {
    match s.split_once('=') {
        Some((name, n)) if !name.is_empty() => match n.parse::<u64>() {
            Ok(n) => Ok((name.to_string(), n)),
            Err(_) => Err(format!(
                "expected NAME=N with N a whole number below 2^64, found `{}`",
                escaped(s)
            )),
        },
        _ => Err(format!("expected NAME=N, found `{}`", escaped(s))),
    }
}

/// The exit status of `diff` when elements exceed `--tolerance`.
pub const EXIT_TOLERANCE_EXCEEDED: u8 = 3;

/// The largest program text read, in bytes.
pub const MAX_PROGRAM_BYTES: u64 = 16 << 20;

fn parse_input(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((name, path)) if !name.is_empty() && !path.is_empty() => {
            Ok((name.to_string(), PathBuf::from(path)))
        }
        _ => Err(format!("expected NAME=PATH, found `{}`", escaped(s))),
    }
}

/// A loaded, compiled and solved program.
struct Loaded {
    compiled: Compiled,
    solved: SolvedGraph,
}

/// Reads a program's text, at most [`MAX_PROGRAM_BYTES`] of it: a longer
/// file (or an endless one such as `/dev/zero`) is refused after that many
/// bytes.
fn read_source(path: &Path) -> Result<String, CliError> {
    let read_error = |source| CliError::Read {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let mut bytes = Vec::new();
    file.take(MAX_PROGRAM_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(read_error)?;
    if bytes.len() as u64 > MAX_PROGRAM_BYTES {
        return Err(CliError::ProgramTooLarge {
            path: path.to_path_buf(),
            limit: MAX_PROGRAM_BYTES,
        });
    }
    String::from_utf8(bytes).map_err(|_| {
        read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "stream did not contain valid UTF-8",
        ))
    })
}

fn load(text: &str) -> Result<Loaded, ProgramError> {
    let program = syntax::parse(text)?;
    let mut compiled = compile(&program)?;
    let solved = compiled.solve()?;
    let widened = shape_lang::compile::widened_warnings(&compiled, &solved);
    compiled.warnings.extend(widened);
    Ok(Loaded { compiled, solved })
}

/// Runs `shapec` with `args` (the program name first), writing to `out`
/// and `err`; returns the exit status: 0 on success, 1 on an error, 2 on
/// bad arguments.
pub fn main_with(
    args: impl IntoIterator<Item = impl Into<OsString> + Clone>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    let mut cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(e) => {
            let code = e.exit_code();
            let text = e.render().to_string();
            let _ = if code == 0 {
                write!(out, "{text}")
            } else {
                write!(err, "{text}")
            };
            return code.clamp(0, 255) as u8;
        }
    };
    if let Command::Broadcast {
        shapes,
        json,
        statically,
        result,
    } = &mut cli.command
    {
        // Shapes may start with `-` (`-1,2` is refused as a negative size,
        // not read as an option), so options after them arrive as shapes.
        if let Some(i) = shapes.iter().position(|s| s == "--result") {
            if i + 1 < shapes.len() && result.is_none() {
                *result = Some(shapes.remove(i + 1));
            }
            shapes.remove(i);
        }
        let before = shapes.len();
        shapes.retain(|s| s != "--json");
        *json |= shapes.len() < before;
        let before = shapes.len();
        shapes.retain(|s| s != "--static");
        *statically |= shapes.len() < before;
    }
    let color = match cli.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
        }
    };
    let json_errors = match &cli.command {
        Command::Infer { json, .. }
        | Command::Broadcast { json, .. }
        | Command::Call { json, .. } => *json,
        Command::Run { run, .. } | Command::Diff { run, .. } => run.json,
    };
    let file = match &cli.command {
        Command::Infer { file, .. } | Command::Run { file, .. } | Command::Diff { file, .. } => {
            Some(file.clone())
        }
        Command::Broadcast { .. } | Command::Call { .. } => None,
    };
    // The source is read first, so that errors can show it.
    let source = match file.as_deref().map(read_source).transpose() {
        Ok(s) => s,
        Err(e) => return report(&e, None, None, json_errors, color, out, err),
    };
    let name = file.as_ref().map(|p| p.display().to_string());
    let shown = name.as_deref().zip(source.as_deref());
    let result = execute(&cli.command, source.as_deref(), out, err, &|ws, err| {
        if let Some((name, text)) = shown {
            let source = diagnostics::Source { name, text };
            let _ = diagnostics::render_warnings(ws, source, color, err);
        }
    });
    match result {
        Ok(status) => status,
        Err(e) => {
            let name = file.as_ref().map(|p| p.display().to_string());
            report(
                &e,
                name.as_deref().zip(source.as_deref()),
                source.as_deref(),
                json_errors,
                color,
                out,
                err,
            )
        }
    }
}

fn report(
    e: &CliError,
    shown: Option<(&str, &str)>,
    text: Option<&str>,
    json: bool,
    color: bool,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> u8 {
    if json {
        let value = match e {
            CliError::Broadcast(message) => {
                serde_json::json!({ "error": { "message": message } })
            }
            CliError::DynamicBroadcast(d) => {
                serde_json::json!({ "error": { "kind": d.kind(), "message": d.to_string() } })
            }
            CliError::Call(c) => {
                serde_json::json!({ "error": { "kind": c.kind(), "message": c.to_string() } })
            }
            _ => diagnostics::json(e, text),
        };
        let _ = writeln!(out, "{value}");
    } else {
        let source = shown.map(|(name, text)| diagnostics::Source { name, text });
        let _ = write!(err, "{}", diagnostics::render(e, source, color));
    }
    1
}

/// Runs a command; returns its exit status.
fn execute(
    command: &Command,
    source: Option<&str>,
    out: &mut dyn Write,
    err: &mut dyn Write,
    warn: &dyn Fn(&[shape_lang::compile::Warning], &mut dyn Write),
) -> Result<u8, CliError> {
    let text = source.unwrap_or("");
    match command {
        Command::Call {
            signature,
            args,
            overloads,
            map,
            specialize,
            vmap,
            allow_races,
            json,
            body,
            inputs,
            backend,
            out: dir,
            seed,
            diff,
            tolerance,
            step_limit,
            check_domains,
            memory_limit,
        } => {
            let request = crate::call::Request {
                signature,
                overloads,
                args,
                maps: map,
                specializations: specialize,
                vmap: vmap.as_deref(),
                allow_races: *allow_races,
            };
            let run = crate::call::Run {
                body: body.as_deref(),
                inputs,
                backend: *backend,
                out: dir.as_deref(),
                seed: *seed,
                diff: *diff,
                tolerance: *tolerance,
                step_limit: *step_limit,
                check_domains: *check_domains,
                memory_limit: *memory_limit,
            };
            return crate::call::execute(&request, &run, *json, out, err);
        }
        Command::Broadcast {
            shapes,
            json,
            statically,
            result,
        } if *statically || result.is_some() || shapes.iter().any(|s| broadcast::is_dynamic(s)) => {
            let line = broadcast::dynamic(shapes, result.as_deref(), *statically, *json)?;
            writeln!(out, "{line}").map_err(stdout_error)?;
        }
        Command::Broadcast { shapes, json, .. } => {
            let parsed = shapes
                .iter()
                .map(|s| broadcast::parse_shape(s))
                .collect::<Result<Vec<_>, _>>()?;
            let result = broadcast::broadcast(&parsed)?;
            let line = if *json {
                serde_json::json!({ "shape": result }).to_string()
            } else {
                tuple(&result)
            };
            writeln!(out, "{line}").map_err(stdout_error)?;
        }
        Command::Infer {
            projections,
            kernels,
            order,
            json,
            explain,
            dot,
            ..
        } => {
            let show = Shown {
                projections: *projections,
                kernels: *kernels,
                order,
                json: *json,
                explain,
                dot: *dot,
            };
            infer_command(text, &show, out, err, warn)?;
        }
        Command::Run { run, out: dir, .. } => {
            run_command(text, run, dir.as_deref(), out, err, warn)?
        }
        Command::Diff { run, tolerance, .. } => {
            return diff_command(text, run, *tolerance, out, err, warn)
        }
    }
    Ok(0)
}

/// What `shapec infer` shows besides the shapes.
struct Shown<'a> {
    projections: bool,
    kernels: bool,
    /// `--order NAME=C|F`.
    order: &'a [String],
    json: bool,
    explain: &'a [String],
    dot: bool,
}

/// `shapec infer`: the program's shapes, as text, JSON or a graph, with
/// what `show` asks for.
fn infer_command(
    text: &str,
    show: &Shown<'_>,
    out: &mut dyn Write,
    err: &mut dyn Write,
    warn: &dyn Fn(&[shape_lang::compile::Warning], &mut dyn Write),
) -> Result<(), CliError> {
    let Loaded { compiled, solved } = load(text)?;
    warn(&compiled.warnings, err);
    let s = if show.json {
        let mut v = infer::shapes_json(&compiled, &solved)?;
        v["warnings"] = diagnostics::warnings_json(text, &compiled.warnings);
        if show.projections {
            v["projections"] = infer::projections_json(&compiled, &solved)?;
        }
        if show.kernels {
            v["kernels"] = infer::kernels(&compiled, &solved, show.order)?.1;
        }
        if !show.explain.is_empty() {
            let mut all = Vec::new();
            for name in show.explain {
                all.extend(infer::explain_json(&compiled, &solved, text, name)?);
            }
            v["explain"] = Value::Array(all);
        }
        format!("{v}\n")
    } else {
        let mut s = if show.dot {
            infer::dot(&compiled, &solved)?
        } else {
            infer::shapes_text(&compiled, &solved)?
        };
        if show.projections {
            s.push_str("\nprojections:\n");
            s.push_str(&infer::projections_text(&compiled, &solved)?);
        }
        if show.kernels {
            s.push_str("\nkernels:\n");
            s.push_str(&infer::kernels(&compiled, &solved, show.order)?.0);
        }
        for name in show.explain {
            s.push('\n');
            s.push_str(&infer::explain(&compiled, &solved, text, name)?);
        }
        s
    };
    write!(out, "{s}").map_err(stdout_error)?;
    Ok(())
}

/// `shapec run`: checks that the run fits, gathers its data, runs it on
/// the chosen backend and reports (and writes) the results.
fn run_command(
    text: &str,
    run: &RunArgs,
    dir: Option<&std::path::Path>,
    out: &mut dyn Write,
    err: &mut dyn Write,
    warn: &dyn Fn(&[shape_lang::compile::Warning], &mut dyn Write),
) -> Result<(), CliError> {
    let Loaded { compiled, solved } = load(text)?;
    let solved = crate::run::bind_sizes(&compiled, solved, &run.inputs, &run.sizes)?;
    warn(&compiled.warnings, err);
    let outputs = &compiled.results;
    let out_dir = match dir {
        Some(d) if !outputs.is_empty() => {
            let mut shapes = Vec::with_capacity(outputs.len());
            for &t in outputs {
                let shape = solved.shape(t).map_err(|e| compiled.map.locate(e, None))?;
                shapes.push((compiled.graph.name(t).unwrap_or("?"), shape.memory_dims()));
            }
            Some(OutDir::prepare(d, &shapes)?)
        }
        _ => None,
    };
    let plan = checks::plan(&compiled, &solved, &run.options())?;
    if run.backend == BackendChoice::Cpu {
        checks::buffers_fit(
            &compiled,
            &solved,
            backend_cpu::DEFAULT_MAX_BUFFER_BYTES,
            "the CPU backend",
        )?;
    }
    enough_memory(&compiled, &solved, &plan, Runs::Once, run.memory_limit)?;
    let data = gather(&compiled, &solved, &run.inputs, run.seed)?;
    enough_memory_for(&solved, &plan, Runs::Once, run.memory_limit, &data.values)?;
    // The run takes the data: its memory goes with the run's
    // buffers, before the results are written.
    let mut job = RunJob {
        compiled: &compiled,
        solved: &solved,
        plan: &plan,
        data: Some(data.values),
    };
    let (backend, values) = on_backend(run.backend, &mut job, err)?;
    let report = RunReport {
        compiled: &compiled,
        solved: &solved,
        backend: &backend,
        sources: &data.sources,
        seed: run.seed,
        values: &values,
        warnings: diagnostics::warnings_json(text, &compiled.warnings),
    };
    let written = match &out_dir {
        Some(d) => {
            let files = report.files()?;
            d.write(&files)?;
            Some(d.path())
        }
        None => None,
    };
    if run.json {
        report.json(written, out)?;
    } else {
        report.text(dir, written.is_some(), out)?;
    }
    Ok(())
}

/// `shapec diff`: runs the program on the chosen backend and on the CPU
/// reference and compares; the exit status says whether a tolerance was
/// exceeded.
fn diff_command(
    text: &str,
    run: &RunArgs,
    tolerance: Option<Tolerance>,
    out: &mut dyn Write,
    err: &mut dyn Write,
    warn: &dyn Fn(&[shape_lang::compile::Warning], &mut dyn Write),
) -> Result<u8, CliError> {
    let Loaded { compiled, solved } = load(text)?;
    let solved = crate::run::bind_sizes(&compiled, solved, &run.inputs, &run.sizes)?;
    warn(&compiled.warnings, err);
    let plan = checks::plan(&compiled, &solved, &run.options())?;
    // The reference always runs on the CPU.
    checks::buffers_fit(
        &compiled,
        &solved,
        backend_cpu::DEFAULT_MAX_BUFFER_BYTES,
        "the CPU backend",
    )?;
    enough_memory(&compiled, &solved, &plan, Runs::Compared, run.memory_limit)?;
    let data = gather(&compiled, &solved, &run.inputs, run.seed)?;
    enough_memory_for(
        &solved,
        &plan,
        Runs::Compared,
        run.memory_limit,
        &data.values,
    )?;
    let mut job = DiffJob {
        job: RunJob {
            compiled: &compiled,
            solved: &solved,
            plan: &plan,
            data: Some(data.values),
        },
        tolerance,
    };
    let d = on_backend(run.backend, &mut job, err)?;
    if run.json {
        let warnings = diagnostics::warnings_json(text, &compiled.warnings);
        diff_json(&compiled, &solved, &d, tolerance, warnings, out)?;
    } else {
        diff_text(&compiled, &d, tolerance, out)?;
    }
    if tolerance.is_some() && d.exceeding > 0 {
        return Ok(EXIT_TOLERANCE_EXCEEDED);
    }
    Ok(0)
}

/// Fails when the memory a run needs ([`memory::run_bytes`]) is more than
/// `--memory-limit`, or else more than the memory available.
fn enough_memory(
    compiled: &Compiled,
    solved: &SolvedGraph,
    plan: &RunPlan,
    runs: Runs,
    limit: Option<u64>,
) -> Result<(), CliError> {
    let needed = memory::run_bytes(solved, plan, runs).map_err(|e| compiled.map.locate(e, None))?;
    memory::check_budget(|| "this run".into(), needed, limit)
}

/// [`enough_memory`] again once the data is read, for a plan with ragged
/// tensors, whose bytes come with the data ([`memory::run_bytes_for`]):
/// before the run allocates anything.
fn enough_memory_for(
    solved: &SolvedGraph,
    plan: &RunPlan,
    runs: Runs,
    limit: Option<u64>,
    data: &shape_run::Inputs,
) -> Result<(), CliError> {
    let needed = match memory::run_bytes_for(solved, plan, runs, data) {
        Ok(n) => n,
        // The run reports what is wrong with the data.
        Err(_) => return Ok(()),
    };
    memory::check_budget(|| "this run".into(), needed, limit)
}

/// What `run` prints and writes.
struct RunReport<'a> {
    compiled: &'a Compiled,
    solved: &'a SolvedGraph,
    backend: &'a str,
    sources: &'a [(TensorId, Source)],
    seed: u64,
    values: &'a HashMap<TensorId, HostTensor>,
    /// The program's warnings, as JSON (`--json`'s `warnings`).
    warnings: Value,
}

impl RunReport<'_> {
    fn shape(&self, t: TensorId) -> Result<&SolvedShape, CliError> {
        self.solved
            .shape(t)
            .map_err(|e| CliError::Program(self.compiled.map.locate(e, None)))
    }

    fn name(&self, t: TensorId) -> &str {
        self.compiled.graph.name(t).unwrap_or("?")
    }

    fn values(&self, t: TensorId) -> &[f32] {
        self.values.get(&t).map(HostTensor::values).unwrap_or(&[])
    }

    fn ragged(&self, t: TensorId) -> Option<&shape_run::RaggedAxis> {
        self.values.get(&t).and_then(HostTensor::ragged_axis)
    }

    /// The dims of the values as returned: a ragged result's longest row
    /// stands for its ragged axis.
    fn dims(&self, t: TensorId) -> Result<Vec<u64>, CliError> {
        Ok(match self.values.get(&t) {
            Some(v) => v.dims().to_vec(),
            None => self.shape(t)?.memory_dims(),
        })
    }

    fn dims_json(&self, t: TensorId) -> Result<Value, CliError> {
        dims_json(self.compiled, self.solved, t)
    }

    fn files(&self) -> Result<Vec<ResultFile<'_>>, CliError> {
        self.compiled
            .results
            .iter()
            .map(|&t| {
                let shape = match self.ragged(t) {
                    // The rows one after another, and where each starts.
                    Some(r) => {
                        let dims = self.dims(t)?;
                        let mut shape = vec![r.total()];
                        shape.extend_from_slice(&dims[r.axis() + 1..]);
                        shape
                    }
                    None => self.shape(t)?.memory_dims(),
                };
                Ok(ResultFile {
                    name: self.name(t),
                    shape,
                    data: self.values(t),
                    offsets: self
                        .ragged(t)
                        .map(|r| r.levels().map(|l| l.offsets()).collect())
                        .unwrap_or_default(),
                })
            })
            .collect()
    }

    fn text(&self, dir: Option<&Path>, written: bool, out: &mut dyn Write) -> Result<(), CliError> {
        let mut s = format!("backend: {}\n", self.backend);
        let bound = self.solved.bound_sizes();
        if !bound.is_empty() {
            let sizes: Vec<String> = bound.iter().map(|(n, v)| format!("{n}={v}")).collect();
            s.push_str(&format!("sizes: {}\n", sizes.join(" ")));
        }
        for (t, source) in self.sources {
            let from = match source {
                Source::File(path) => path.display().to_string(),
                Source::Program => "the program".to_string(),
                Source::Random => format!("random values (seed {})", self.seed),
            };
            let lhs = infer::describe_tensor(self.compiled, *t);
            s.push_str(&format!("{lhs} : {} <- {from}\n", self.shape(*t)?));
        }
        for &t in &self.compiled.results {
            let (name, shape) = (self.name(t), self.shape(t)?);
            let rows = match self.ragged(t) {
                Some(r) => format!(
                    " (rows of lengths {})",
                    r.levels()
                        .map(|l| preview(&l.lengths()))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                None => String::new(),
            };
            s.push_str(&format!(
                "{name} : {shape}{rows} = {}\n",
                preview(self.values(t))
            ));
        }
        match dir {
            Some(dir) if written => {
                let n = self.compiled.results.len();
                s.push_str(&format!("wrote {n} result(s) to {}\n", dir.display()));
            }
            Some(dir) => s.push_str(&format!(
                "no results to write to {}: the program assigns no tensor\n",
                dir.display()
            )),
            None => {}
        }
        write!(out, "{s}").map_err(stdout_error)
    }

    /// Streams the JSON form: values are written as they are read, never
    /// gathered into one string.
    fn json(&self, written: Option<&Path>, out: &mut dyn Write) -> Result<(), CliError> {
        let mut w = std::io::BufWriter::new(out);
        let mut data = Vec::new();
        for (t, source) in self.sources {
            let source = match source {
                Source::File(path) => json!({"kind": "file", "path": path.display().to_string()}),
                Source::Program => json!({"kind": "program"}),
                Source::Random => json!({"kind": "random", "seed": self.seed}),
            };
            let kind = match self.compiled.graph.kind(*t) {
                Ok(TensorKind::Input) => "input",
                Ok(TensorKind::Parameter) => "param",
                _ => "const",
            };
            let shape = self.shape(*t)?;
            data.push(json!({
                "name": self.name(*t),
                "kind": kind,
                "shape": infer::shape_json(shape),
                "dims": self.dims_json(*t)?,
                "source": source,
            }));
        }
        let mut head = json!({"backend": self.backend, "data": data, "warnings": self.warnings});
        let bound = self.solved.bound_sizes();
        if !bound.is_empty() {
            let sizes: serde_json::Map<String, serde_json::Value> = bound
                .iter()
                .map(|(n, v)| (n.to_string(), json!(v)))
                .collect();
            head["sizes"] = serde_json::Value::Object(sizes);
        }
        let head = head.to_string();
        // Everything but the closing brace; the results follow.
        let io = (|| -> std::io::Result<()> {
            write!(w, "{},\"results\":[", &head[..head.len() - 1])?;
            for (i, &t) in self.compiled.results.iter().enumerate() {
                let shape = self.shape(t).map_err(std::io::Error::other)?;
                let meta = json!({
                    "name": self.name(t),
                    "shape": infer::shape_json(shape),
                    "dims": self.dims_json(t).map_err(std::io::Error::other)?,
                })
                .to_string();
                let sep = if i == 0 { "" } else { "," };
                write!(w, "{sep}{},\"values\":", &meta[..meta.len() - 1])?;
                match self.values.get(&t) {
                    Some(v) => v.write_nested(&mut w, &|w, v| write_f32(w, v))?,
                    None => w.write_all(b"[]")?,
                }
                w.write_all(b"}")?;
            }
            let written = match written {
                Some(dir) => json!({
                    "dir": dir.display().to_string(),
                    "files": self.compiled.results.iter().flat_map(|&t| {
                        let name = self.name(t);
                        let mut files = vec![format!("{name}.npy")];
                        let levels = self.ragged(t).map_or(0, |r| r.levels().count());
                        files.extend((0..levels).map(|l| crate::output::offsets_file(name, l)));
                        files
                    }).collect::<Vec<_>>(),
                }),
                None => Value::Null,
            };
            writeln!(w, "],\"written\":{written}}}")?;
            w.flush()
        })();
        io.map_err(stdout_error)
    }
}

/// A value in JSON: finite values as numbers, in their shortest form that
/// reads back as the same `f32`; NaN and the infinities as the strings
/// `"nan"`, `"inf"` and `"-inf"`.
pub(crate) fn write_f32(w: &mut dyn Write, v: f32) -> std::io::Result<()> {
    if v.is_finite() {
        write!(w, "{v:?}")
    } else {
        write!(w, "{}", f32_json(v))
    }
}

/// [`write_f32`] as a [`Value`].
pub(crate) fn f32_json(v: f32) -> Value {
    if v.is_nan() {
        json!("nan")
    } else if v.is_infinite() {
        json!(if v > 0.0 { "inf" } else { "-inf" })
    } else {
        format!("{v:?}")
            .parse::<f64>()
            .map_or(Value::Null, |x| json!(x))
    }
}

/// A difference in JSON: a number, or `"inf"`.
pub(crate) fn f64_json(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        json!("inf")
    }
}

fn place_json(compiled: &Compiled, w: &Worst) -> Value {
    json!({
        "tensor": compiled.graph.name(w.tensor).unwrap_or("?"),
        "index": w.index,
        "difference": f64_json(w.diff),
        "expected": f32_json(w.expected),
        "found": f32_json(w.found),
    })
}

fn place_text(compiled: &Compiled, w: &Worst) -> String {
    let name = compiled.graph.name(w.tensor).unwrap_or("?");
    let ix: Vec<String> = w.index.iter().map(u64::to_string).collect();
    format!("{name}[{}]: {} vs {}", ix.join(", "), w.expected, w.found)
}

fn diff_text(
    compiled: &Compiled,
    d: &Diff,
    tolerance: Option<Tolerance>,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut s = format!(
        "reference: {}\ncompared:  {}\nelements:  {} in {} result(s)\n",
        d.reference,
        d.other,
        d.elements,
        compiled.results.len()
    );
    for (what, w) in [("absolute", &d.abs), ("relative", &d.rel)] {
        let at = match w {
            Some(w) => format!("{} at {}", w.diff, place_text(compiled, w)),
            None => "none (no elements)".to_string(),
        };
        s.push_str(&format!("largest {what} difference: {at}\n"));
    }
    if let Some(t) = tolerance {
        let verdict = match &d.first_exceeding {
            Some(w) => format!(
                "{} of {} elements exceed it, the first {}",
                d.exceeding,
                d.elements,
                place_text(compiled, w)
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

/// A tensor's dims in memory order as JSON: numbers, and `"var"` for a
/// ragged axis.
fn dims_json(compiled: &Compiled, solved: &SolvedGraph, t: TensorId) -> Result<Value, CliError> {
    let located = |e| CliError::Program(compiled.map.locate(e, None));
    let dims = solved.shape(t).map_err(located)?.memory_dims();
    let ragged = solved.ragged_axes(t).map_err(located)?;
    Ok(Value::Array(
        (dims.iter().enumerate())
            .map(|(j, &d)| {
                if ragged.contains(&j) {
                    json!("var")
                } else {
                    json!(d)
                }
            })
            .collect(),
    ))
}

fn diff_json(
    compiled: &Compiled,
    solved: &SolvedGraph,
    d: &Diff,
    tolerance: Option<Tolerance>,
    warnings: Value,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let mut results = Vec::new();
    for &t in &compiled.results {
        let shape = solved.shape(t).map_err(|e| compiled.map.locate(e, None))?;
        results.push(json!({
            "name": compiled.graph.name(t).unwrap_or("?"),
            "shape": infer::shape_json(shape),
            "dims": dims_json(compiled, solved, t)?,
        }));
    }
    let place = |w: &Option<Worst>| w.as_ref().map_or(Value::Null, |w| place_json(compiled, w));
    let tolerance = tolerance.map_or(Value::Null, |t| {
        json!({
            "abs": t.abs,
            "rel": t.rel,
            "exceeding": d.exceeding,
            "first_exceeding": place(&d.first_exceeding),
            "passed": d.exceeding == 0,
        })
    });
    let v = json!({
        "reference": d.reference,
        "compared": d.other,
        "elements": d.elements,
        "results": results,
        "largest": {"absolute": place(&d.abs), "relative": place(&d.rel)},
        "tolerance": tolerance,
        "warnings": warnings,
    });
    writeln!(out, "{v}").map_err(stdout_error)
}

/// Runs a job on the chosen backend; a backend that cannot run and an
/// error of the job itself both become [`CliError`]s.
fn on_backend<J, T>(
    choice: BackendChoice,
    job: &mut J,
    notes: &mut dyn Write,
) -> Result<T, CliError>
where
    J: BackendJob<Output = Result<T, ProgramError>>,
{
    let name = choice
        .to_possible_value()
        .map(|v| v.get_name().to_string())
        .unwrap_or_default();
    let result = dispatch(choice, job, notes)
        .map_err(|e| CliError::Backend(format!("--backend {name}: {e}")))?;
    Ok(result?)
}

pub(crate) fn stdout_error(e: std::io::Error) -> CliError {
    CliError::Write {
        path: PathBuf::from("<stdout>"),
        source: e,
    }
}

/// Up to eight values, then how many more.
pub(crate) fn preview<T: std::fmt::Display>(v: &[T]) -> String {
    let shown: Vec<String> = v.iter().take(8).map(|x| format!("{x}")).collect();
    let more = v.len().saturating_sub(8);
    if more > 0 {
        format!("[{}, ... {more} more]", shown.join(", "))
    } else {
        format!("[{}]", shown.join(", "))
    }
}
