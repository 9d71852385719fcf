//! The command line: arguments, the subcommands, and what they print.

use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};
use shape_solver::SolvedGraph;

use crate::backends::{dispatch, BackendChoice, BackendJob};
use crate::compile::{compile, Compiled};
use crate::diagnostics;
use crate::error::{CliError, ProgramError};
use crate::run::{gather, tuple, DiffJob, RunJob, Source, Worst};
use crate::{broadcast, infer, npy, syntax};

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
        #[arg(long, conflicts_with_all = ["json", "dot"])]
        projections: bool,
        /// Print {"tensors": {NAME: {"batch": [..], "input": [..], "output": [..]}}}.
        #[arg(long, conflicts_with = "dot")]
        json: bool,
        /// Explain where each size of tensor NAME came from (repeatable).
        #[arg(long, value_name = "NAME", conflicts_with_all = ["json", "dot"])]
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
        /// Write each result NAME to DIR/NAME.npy.
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
    },
    /// Broadcast shapes by NumPy's rules, e.g. `shapec broadcast 5,2,1 2,3`.
    Broadcast {
        /// Shapes: sizes separated by commas, `""` or `()` for no axes.
        #[arg(required = true)]
        shapes: Vec<String>,
        /// Print {"shape": [..]} or {"error": {"message": ..}}.
        #[arg(long)]
        json: bool,
    },
}

/// Options shared by `run` and `diff`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The backend to run on (for `diff`, the one compared with the
    /// reference CPU path).
    #[arg(long, value_enum, default_value_t = BackendChoice::Auto)]
    pub backend: BackendChoice,
    /// Data for an input or parameter from a .npy file (repeatable).
    #[arg(long = "input", value_name = "NAME=PATH", value_parser = parse_input)]
    pub inputs: Vec<(String, PathBuf)>,
    /// Seed of the random values given to inputs and parameters without a
    /// file.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// The batch index that `batch_slice` takes.
    #[arg(long, default_value_t = 0)]
    pub slice: u64,
}

fn parse_input(s: &str) -> Result<(String, PathBuf), String> {
    match s.split_once('=') {
        Some((name, path)) if !name.is_empty() && !path.is_empty() => {
            Ok((name.to_string(), PathBuf::from(path)))
        }
        _ => Err(format!("expected NAME=PATH, found `{s}`")),
    }
}

/// A loaded, compiled and solved program.
struct Loaded {
    compiled: Compiled,
    solved: SolvedGraph,
}

fn read_source(path: &Path) -> Result<String, CliError> {
    std::fs::read_to_string(path).map_err(|source| CliError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn load(text: &str) -> Result<Loaded, ProgramError> {
    let program = syntax::parse(text)?;
    let compiled = compile(&program)?;
    let solved = compiled.solve()?;
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
    let cli = match Cli::try_parse_from(args) {
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
    let color = match cli.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none()
        }
    };
    let json_errors = matches!(
        cli.command,
        Command::Infer { json: true, .. } | Command::Broadcast { json: true, .. }
    );
    let file = match &cli.command {
        Command::Infer { file, .. } | Command::Run { file, .. } | Command::Diff { file, .. } => {
            Some(file.clone())
        }
        Command::Broadcast { .. } => None,
    };
    // The source is read first, so that errors can show it.
    let source = match file.as_deref().map(read_source).transpose() {
        Ok(s) => s,
        Err(e) => return report(&e, None, None, json_errors, color, out, err),
    };
    let result = execute(&cli.command, source.as_deref(), out, err);
    match result {
        Ok(()) => 0,
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
            _ => diagnostics::json(e, text),
        };
        let _ = writeln!(out, "{value}");
    } else {
        let source = shown.map(|(name, text)| diagnostics::Source { name, text });
        let _ = write!(err, "{}", diagnostics::render(e, source, color));
    }
    1
}

fn execute(
    command: &Command,
    source: Option<&str>,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> Result<(), CliError> {
    let text = source.unwrap_or("");
    match command {
        Command::Broadcast { shapes, json } => {
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
            writeln!(out, "{line}").map_err(stdout_error)
        }
        Command::Infer {
            projections,
            json,
            explain,
            dot,
            ..
        } => {
            let Loaded { compiled, solved } = load(text)?;
            let mut s = if *dot {
                infer::dot(&compiled, &solved)?
            } else if *json {
                format!("{}\n", infer::shapes_json(&compiled, &solved)?)
            } else {
                infer::shapes_text(&compiled, &solved)?
            };
            if *projections {
                s.push_str("\nprojections:\n");
                s.push_str(&infer::projections_text(&compiled, &solved)?);
            }
            for name in explain {
                s.push('\n');
                s.push_str(&infer::explain(&compiled, &solved, text, name)?);
            }
            write!(out, "{s}").map_err(stdout_error)
        }
        Command::Run { run, out: dir, .. } => {
            let Loaded { compiled, solved } = load(text)?;
            let data = gather(&compiled, &solved, &run.inputs, run.seed)?;
            let outputs = &compiled.results;
            let mut job = RunJob {
                compiled: &compiled,
                solved: &solved,
                data: &data.values,
                outputs,
                slice: run.slice,
            };
            let (backend, values) = on_backend(run.backend, &mut job, err)?;
            let mut s = format!("backend: {backend}\n");
            for (t, source) in &data.sources {
                let shape = solved.shape(*t).map_err(|e| compiled.map.locate(e, None))?;
                let from = match source {
                    Source::File(path) => path.display().to_string(),
                    Source::Program => "the program".to_string(),
                    Source::Random => format!("random values (seed {})", run.seed),
                };
                let lhs = infer::describe_tensor(&compiled, *t);
                s.push_str(&format!("{lhs} : {shape} <- {from}\n"));
            }
            for &t in outputs {
                let name = compiled.graph.name(t).unwrap_or("?");
                let shape = solved.shape(t).map_err(|e| compiled.map.locate(e, None))?;
                let v = values.get(&t).map(Vec::as_slice).unwrap_or(&[]);
                s.push_str(&format!("{name} : {shape} = {}\n", preview(v)));
                if let Some(dir) = dir {
                    let path = dir.join(format!("{name}.npy"));
                    let bytes = npy::write(&npy::Array {
                        shape: shape.memory_dims(),
                        data: v.to_vec(),
                    });
                    std::fs::create_dir_all(dir).map_err(|source| CliError::Write {
                        path: dir.clone(),
                        source,
                    })?;
                    std::fs::write(&path, bytes)
                        .map_err(|source| CliError::Write { path, source })?;
                }
            }
            if let Some(dir) = dir {
                let n = outputs.len();
                s.push_str(&format!("wrote {n} result(s) to {}\n", dir.display()));
            }
            write!(out, "{s}").map_err(stdout_error)
        }
        Command::Diff { run, .. } => {
            let Loaded { compiled, solved } = load(text)?;
            let data = gather(&compiled, &solved, &run.inputs, run.seed)?;
            let outputs = &compiled.results;
            let mut job = DiffJob(RunJob {
                compiled: &compiled,
                solved: &solved,
                data: &data.values,
                outputs,
                slice: run.slice,
            });
            let d = on_backend(run.backend, &mut job, err)?;
            let place = |w: &Worst| {
                let name = compiled.graph.name(w.tensor).unwrap_or("?");
                let ix: Vec<String> = w.index.iter().map(u64::to_string).collect();
                format!("{name}[{}]: {} vs {}", ix.join(", "), w.expected, w.found)
            };
            let mut s = format!(
                "reference: {}\ncompared:  {}\nelements:  {} in {} result(s)\n",
                d.reference,
                d.other,
                d.elements,
                outputs.len()
            );
            for (what, w) in [("absolute", &d.abs), ("relative", &d.rel)] {
                let at = match w {
                    Some(w) => format!("{} at {}", w.diff, place(w)),
                    None => "none (no elements)".to_string(),
                };
                s.push_str(&format!("largest {what} difference: {at}\n"));
            }
            write!(out, "{s}").map_err(stdout_error)
        }
    }
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

fn stdout_error(e: std::io::Error) -> CliError {
    CliError::Write {
        path: PathBuf::from("<stdout>"),
        source: e,
    }
}

/// Up to eight values, then how many more.
fn preview(v: &[f32]) -> String {
    let shown: Vec<String> = v.iter().take(8).map(|x| format!("{x}")).collect();
    let more = v.len().saturating_sub(8);
    if more > 0 {
        format!("[{}, ... {more} more]", shown.join(", "))
    } else {
        format!("[{}]", shown.join(", "))
    }
}
