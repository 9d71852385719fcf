//! Running a compiled program: its data (from `.npy` files, the program's
//! constants, or seeded random values), the run itself on any backend, and
//! the comparison of two backends' results.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use backend_cpu::CpuBackend;
use shape_core::{Backend, SolvedShape};
use shape_graph::{SolvedGraph, TensorId, TensorKind};
use shape_run::{HostTensor, Inputs, RunError, RunGraph, RunPlan};

use crate::backends::BackendJob;
use crate::error::{CliError, ProgramError};
use crate::npy;
use shape_lang::checks;
use shape_lang::compile::Compiled;

pub use shape_lang::data::random_values;
use shape_lang::data::{written_values, Written};

/// Reads `--input NAME=PATH`: the header first, whose shape must be
/// `dims`, then exactly the data it promises. A regular file's length is
/// checked against the header before anything is allocated; other files
/// (pipes) must end right after the data.
///
/// A path ending in `.json` is read as nested lists instead
/// ([`crate::json_values::read_json_input`]).
///
/// For a tensor with ragged axes at `ragged` (memory order), a `.json`
/// file gives each row its own length there; a `.npy` file (which has no
/// ragged arrays) gives every row the same length.
pub fn read_input(
    path: &Path,
    name: &str,
    shape: &SolvedShape,
    ragged: &[usize],
) -> Result<HostTensor, CliError> {
    if is_json(path) {
        return crate::json_values::read_json_input(
            path,
            name,
            &shape.to_string(),
            &shape.memory_dims(),
            ragged,
        );
    }
    let dims = shape.memory_dims();
    read_npy(path, &mut |found| {
        let mut dims = dims.clone();
        if found.len() == dims.len() {
            for &axis in ragged {
                if let Some(d) = dims.get_mut(axis) {
                    *d = found[axis];
                }
            }
        }
        if found != dims {
            let expected = if ragged.is_empty() {
                tuple(&dims)
            } else {
                // Any length at the ragged axes.
                let mut text: Vec<String> = dims.iter().map(u64::to_string).collect();
                for &axis in ragged {
                    if let Some(t) = text.get_mut(axis) {
                        *t = "any".into();
                    }
                }
                format!("({})", text.join(", "))
            };
            return Err(CliError::Data(format!(
                "{}: `{name}` has the solved shape {shape}, so its array must have the shape {expected} (batch, then output, then input axes), but the file holds {}",
                path.display(),
                tuple(found)
            )));
        }
        Ok(dims)
    })
}

/// What [`read_npy`] asks of a file's dims: the dims its values take, or
/// the error to report.
pub type DimsCheck<'a> = dyn FnMut(&[u64]) -> Result<Vec<u64>, CliError> + 'a;

/// Reads a `.npy` file: the header first, whose shape `check` accepts (it
/// returns the dims the values take, or the error to report), then exactly
/// the data it promises, in the file's order (a Fortran-ordered file gives
/// a Fortran-strided tensor, with no copy). A regular file's length is checked against the
/// header before anything is allocated; other files (pipes) must end
/// right after the data.
pub fn read_npy(path: &Path, check: &mut DimsCheck<'_>) -> Result<HostTensor, CliError> {
    let read_error = |source: std::io::Error| CliError::Read {
        path: path.to_path_buf(),
        source,
    };
    let npy_error = |source: npy::NpyError| CliError::Npy {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let meta = file.metadata().map_err(read_error)?;
    if meta.is_dir() {
        return Err(read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it is a directory",
        )));
    }
    let mut reader = std::io::BufReader::new(file);
    let header = npy::read_header(&mut reader).map_err(npy_error)?;
    let dims = check(&header.shape)?;
    let fortran = header.fortran_order;
    let data_len = meta
        .is_file()
        .then(|| meta.len().saturating_sub(header.len));
    let values = npy::read_data(header, reader, data_len).map_err(|e| match e {
        // A value, not the file's form: a data error.
        npy::NpyError::OutOfRange { .. } => CliError::Data(format!("{}: {e}", path.display())),
        e => npy_error(e),
    })?;
    // A Fortran-ordered file is read in place: a view at Fortran strides.
    let tensor = if fortran {
        HostTensor::fortran(dims, values)
    } else {
        HostTensor::new(dims, values)
    };
    tensor.map_err(|e| CliError::Data(format!("{}: {e}", path.display())))
}

/// Where a tensor's values came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Source {
    /// A `.npy` file given with `--input`.
    File(PathBuf),
    /// The values written in the program.
    Program,
    /// Seeded random values.
    Random,
}

/// The values of every input, parameter and constant, and where each came
/// from (in tensor order).
pub struct Data {
    /// Values by tensor.
    pub values: Inputs,
    /// Each leaf tensor with the source of its values.
    pub sources: Vec<(TensorId, Source)>,
}

/// Gathers the data a run needs. `files` are `--input NAME=PATH` pairs;
/// tensors without one get their written values (constants) or seeded
/// random values.
pub fn gather(
    compiled: &Compiled,
    solved: &SolvedGraph,
    files: &[(String, PathBuf)],
    seed: u64,
) -> Result<Data, CliError> {
    let g = &compiled.graph;
    let mut given: HashMap<&str, &PathBuf> = HashMap::new();
    for (name, path) in files {
        if let Some(first) = given.insert(name, path) {
            return Err(CliError::Data(format!(
                "--input {name}=... is given twice ({} and {}); give each input once",
                first.display(),
                path.display()
            )));
        }
        match compiled.first_version(name).map(|t| g.kind(t)) {
            Some(Ok(TensorKind::Input | TensorKind::Parameter)) => {}
            Some(Ok(TensorKind::Constant)) => {
                return Err(CliError::Data(format!(
                    "--input {name}=...: `{name}` is a constant; its values are written in the program"
                )))
            }
            Some(_) => {
                return Err(CliError::Data(format!(
                    "--input {name}=...: `{name}` is computed by the program; only inputs and parameters take data"
                )))
            }
            None => {
                return Err(CliError::Data(format!(
                    "--input {name}=...: the program has no input or parameter `{name}`"
                )))
            }
        }
    }
    let mut values = Inputs::new();
    let mut sources = Vec::new();
    for t in g.tensor_ids() {
        let kind = g.kind(t).map_err(|e| compiled.map.locate(e, None))?;
        if let TensorKind::Result(_) = kind {
            continue;
        }
        let name = g.name(t).map_err(|e| compiled.map.locate(e, None))?;
        let shape = solved.shape(t).map_err(|e| compiled.map.locate(e, None))?;
        let ragged = solved
            .ragged_axes(t)
            .map_err(|e| compiled.map.locate(e, None))?;
        if let Some(path) = given.get(name) {
            values.insert(t, read_input(path, name, shape, &ragged)?);
            sources.push((t, Source::File((*path).clone())));
            continue;
        }
        if !ragged.is_empty() {
            return Err(CliError::Data(format!(
                "`{name}` has the ragged shape {shape}: give its rows with --input {name}=FILE.json (nested lists, each row its own length)"
            )));
        }
        let elements = shape.num_elems();
        let out_of_memory = || CliError::OutOfMemory {
            what: format!("the data of `{name}` (shape {shape})"),
            needed: elements.map_or(u128::MAX, |n| n.saturating_mul(4)),
            budget: None,
        };
        let len = elements
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(out_of_memory)?;
        let written =
            written_values(compiled, solved, t).map_err(|e| compiled.map.locate(e, None))?;
        let (v, source) = match written {
            Some(Written::Size(size)) => (vec![size], Source::Program),
            Some(Written::Constant(v)) => {
                let mut copy = npy::try_vec(v.len()).ok_or_else(out_of_memory)?;
                copy.extend_from_slice(v);
                (copy, Source::Program)
            }
            None => {
                let v = random_values(seed, name, len).ok_or_else(out_of_memory)?;
                (v, Source::Random)
            }
        };
        let tensor = HostTensor::new(shape.memory_dims(), v)
            .map_err(|e| CliError::Data(format!("`{name}` has the solved shape {shape}: {e}")))?;
        values.insert(t, tensor);
        sources.push((t, source));
    }
    Ok(Data { values, sources })
}

/// Binds the program's run-time sizes (`size b` alone): from `--size
/// NAME=N`, and from the dims of the `.npy` files given with `--input`
/// (read from their headers). A program without run-time sizes is
/// returned as it is, and refuses `--size`.
pub fn bind_sizes(
    compiled: &Compiled,
    solved: SolvedGraph,
    files: &[(String, PathBuf)],
    sizes: &[(String, u64)],
) -> Result<SolvedGraph, CliError> {
    if !solved.needs_binding() && sizes.is_empty() {
        return Ok(solved);
    }
    let g = &compiled.graph;
    let mut given = Vec::with_capacity(sizes.len());
    for (name, n) in sizes {
        let Some(s) = g.size_named(name) else {
            return Err(CliError::Data(format!(
                "--size {name}={n}: the program has no size `{name}` (a run-time size is declared with `size {name}` alone)"
            )));
        };
        given.push((s, *n));
    }
    // Dims of the files given; a file that cannot be read is reported
    // when its data is read.
    let mut dims: Vec<(TensorId, Vec<u64>)> = Vec::new();
    for (name, path) in files {
        let Some(t) = compiled.first_version(name) else {
            continue;
        };
        if is_json(path) {
            // Nested lists bind sizes as a `.npy` shape does; rows of a
            // ragged input have no one length to bind.
            if solved.ragged_axis(t).ok().flatten().is_none() {
                let rank = solved
                    .symbolic_shape(t)
                    .map_or(0, |s| s.batch.len() + s.output.len() + s.input.len());
                if let Some(d) = crate::json_values::json_dims(path, rank) {
                    dims.push((t, d));
                }
            }
            continue;
        }
        let Ok(file) = std::fs::File::open(path) else {
            continue;
        };
        let mut reader = std::io::BufReader::new(std::io::Read::take(file, 1 << 20));
        if let Ok(header) = npy::read_header(&mut reader) {
            dims.push((t, header.shape.clone()));
        }
    }
    let dims: Vec<(TensorId, &[u64])> = dims.iter().map(|(t, d)| (*t, d.as_slice())).collect();
    solved
        .bind_dims(&dims, &given)
        .map_err(|e| CliError::Program(compiled.map.locate(e, None)))
}

/// Whether a path names a `.json` file (read as nested lists).
pub(crate) fn is_json(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("json"))
}

/// A shape written as a Python tuple: `()`, `(3,)`, `(2, 3)`.
pub fn tuple(dims: &[u64]) -> String {
    match dims {
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            dims.iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

/// One run of a program on a backend.
pub struct RunJob<'a> {
    /// The program.
    pub compiled: &'a Compiled,
    /// Its solved shapes.
    pub solved: &'a SolvedGraph,
    /// How it runs ([`shape_lang::checks::plan`]).
    pub plan: &'a RunPlan,
    /// Its data, which the run takes.
    pub data: Option<Inputs>,
}

/// Results of a run: the backend's name and each output's values.
pub type Outputs = (String, HashMap<TensorId, HostTensor>);

impl RunJob<'_> {
    /// The tensors whose values the run returns.
    pub fn outputs(&self) -> &[TensorId] {
        self.plan.outputs()
    }

    /// Runs on `backend` with `data` (the job's own when `None`, which
    /// the run then takes).
    fn run_on<B: Backend>(
        &mut self,
        backend: &mut B,
        data: Option<Inputs>,
    ) -> Result<Outputs, ProgramError> {
        let data = data.or_else(|| self.data.take()).unwrap_or_default();
        let mut out = self
            .solved
            .run_plan(backend, self.plan, data)
            .map_err(|e| self.locate(e))?;
        let values = self
            .plan
            .outputs()
            .iter()
            .filter_map(|&t| out.remove(t).map(|v| (t, v)))
            .collect();
        Ok((backend.name(), values))
    }

    fn locate(&self, e: RunError) -> ProgramError {
        match e {
            RunError::Graph(g) => self.compiled.map.locate(g, None),
            RunError::Backend {
                op: Some(ref op), ..
            }
            | RunError::EmptyReduction { ref op, .. }
            | RunError::InvalidLowering { ref op, .. } => ProgramError::Run {
                message: e.to_string(),
                op: Some(op.name.to_string()),
                span: self.compiled.map.op_span(op.id),
            },
            other => ProgramError::Run {
                message: other.to_string(),
                op: None,
                span: None,
            },
        }
    }
}

impl BackendJob for RunJob<'_> {
    type Output = Result<Outputs, ProgramError>;
    fn check(&mut self, max_buffer_bytes: u64, backend: &str) -> Option<Self::Output> {
        checks::buffers_fit(self.compiled, self.solved, max_buffer_bytes, backend)
            .err()
            .map(Err)
    }
    fn run<B: Backend>(&mut self, backend: &mut B) -> Self::Output {
        self.run_on(backend, None)
    }
}

/// The largest difference found, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct Worst {
    /// The difference.
    pub diff: f64,
    /// The tensor.
    pub tensor: TensorId,
    /// The element's index, in the order of the `.npy` axes.
    pub index: Vec<u64>,
    /// The reference value.
    pub expected: f32,
    /// The other backend's value.
    pub found: f32,
}

/// How two backends' results differ.
#[derive(Clone, Debug, PartialEq)]
pub struct Diff {
    /// The reference backend's name.
    pub reference: String,
    /// The other backend's name.
    pub other: String,
    /// The largest absolute difference.
    pub abs: Option<Worst>,
    /// The largest relative difference, `|a - b| / max(|a|, |b|)`.
    pub rel: Option<Worst>,
    /// Elements compared.
    pub elements: usize,
    /// Elements outside the tolerance (0 without one).
    pub exceeding: usize,
    /// The first element outside the tolerance, in result and memory
    /// order, with its absolute difference.
    pub first_exceeding: Option<Worst>,
}

/// How far apart two backends' values may be: `|a - b| <= abs + rel *
/// max(|a|, |b|)`, NaN matching only NaN and an infinity only itself.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Tolerance {
    /// The absolute part.
    pub abs: f64,
    /// The relative part.
    pub rel: f64,
}

impl Tolerance {
    /// Reads `abs=A,rel=R`, either part alone (the other is then 0).
    ///
    /// ```
    /// use shapec::run::Tolerance;
    /// let t = Tolerance::parse("abs=1e-5,rel=1e-4").unwrap();
    /// assert_eq!((t.abs, t.rel), (1e-5, 1e-4));
    /// assert_eq!(Tolerance::parse("rel=0.01").unwrap().abs, 0.0);
    /// assert!(Tolerance::parse("1e-5").is_err());
    /// ```
    pub fn parse(text: &str) -> Result<Tolerance, String> {
        let mut t = Tolerance { abs: 0.0, rel: 0.0 };
        let mut seen = (false, false);
        for part in text.split(',').map(str::trim) {
            let (key, value) = part.split_once('=').ok_or_else(|| {
                format!("expected `abs=A,rel=R` (either part alone), found `{text}`")
            })?;
            let v: f64 = value
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite() && *v >= 0.0)
                .ok_or_else(|| format!("`{part}`: a tolerance is a finite number of at least 0"))?;
            let slot = match key.trim() {
                "abs" => (&mut t.abs, &mut seen.0),
                "rel" => (&mut t.rel, &mut seen.1),
                other => {
                    return Err(format!(
                        "`{other}` is not a tolerance; write `abs=A`, `rel=R` or both"
                    ))
                }
            };
            if std::mem::replace(slot.1, true) {
                return Err(format!("`{}` is given twice in `{text}`", key.trim()));
            }
            *slot.0 = v;
        }
        Ok(t)
    }

    /// Whether `found` is close enough to `expected`.
    pub fn allows(&self, expected: f32, found: f32) -> bool {
        let (abs, _) = differences(expected, found);
        let scale = (expected as f64).abs().max((found as f64).abs());
        abs == 0.0 || (abs.is_finite() && abs <= self.abs + self.rel * scale)
    }
}

/// Runs a program on the reference CPU backend and on another backend, and
/// compares the results.
pub struct DiffJob<'a> {
    /// The run.
    pub job: RunJob<'a>,
    /// The tolerance to count elements against, if any.
    pub tolerance: Option<Tolerance>,
}

impl BackendJob for DiffJob<'_> {
    type Output = Result<Diff, ProgramError>;
    fn check(&mut self, max_buffer_bytes: u64, backend: &str) -> Option<Self::Output> {
        // Before the reference run, which may take long.
        checks::buffers_fit(
            self.job.compiled,
            self.job.solved,
            max_buffer_bytes,
            backend,
        )
        .err()
        .map(Err)
    }
    fn run<B: Backend>(&mut self, other: &mut B) -> Self::Output {
        // The reference runs on a copy of the data; the second run takes it.
        let copy = self.job.data.clone();
        let (ref_name, expected) = self.job.run_on(&mut CpuBackend::reference(), copy)?;
        let (other_name, found) = self.job.run_on(other, None)?;
        let mut diff = Diff {
            reference: ref_name,
            other: other_name,
            abs: None,
            rel: None,
            elements: 0,
            exceeding: 0,
            first_exceeding: None,
        };
        for &t in self.job.plan.outputs() {
            let name = || self.job.solved.graph().name(t).unwrap_or("?").to_string();
            let (Some(a), Some(b)) = (expected.get(&t), found.get(&t)) else {
                return Err(ProgramError::Run {
                    message: format!("a backend returned no values for `{}`", name()),
                    op: None,
                    span: None,
                });
            };
            if a.ragged_axis() != b.ragged_axis() {
                return Err(ProgramError::Run {
                    message: format!(
                        "`{}`: {} and {} returned ragged rows of different lengths",
                        name(),
                        diff.reference,
                        diff.other,
                    ),
                    op: None,
                    span: None,
                });
            }
            let ragged = a.ragged_axis().is_some();
            let (a, b) = (a.values(), b.values());
            if a.len() != b.len() {
                return Err(ProgramError::Run {
                    message: format!(
                        "`{}`: {} returned {} values but {} returned {}",
                        name(),
                        diff.reference,
                        a.len(),
                        diff.other,
                        b.len()
                    ),
                    op: None,
                    span: None,
                });
            }
            let shape = self.job.solved.shape(t).ok();
            for (i, (&x, &y)) in a.iter().zip(b).enumerate() {
                diff.elements += 1;
                let (abs, rel) = differences(x, y);
                let worst = |d: f64| Worst {
                    diff: d,
                    tensor: t,
                    // A ragged tensor's elements by their place in its values.
                    index: match shape {
                        Some(s) if !ragged => s.unravel(i as u64),
                        _ => vec![i as u64],
                    },
                    expected: x,
                    found: y,
                };
                if diff.abs.as_ref().is_none_or(|w| abs > w.diff) {
                    diff.abs = Some(worst(abs));
                }
                if diff.rel.as_ref().is_none_or(|w| rel > w.diff) {
                    diff.rel = Some(worst(rel));
                }
                if self.tolerance.is_some_and(|tol| !tol.allows(x, y)) {
                    diff.exceeding += 1;
                    if diff.first_exceeding.is_none() {
                        diff.first_exceeding = Some(worst(abs));
                    }
                }
            }
        }
        Ok(diff)
    }
}

/// Absolute and relative difference; NaN against a number is infinitely
/// different, NaN against NaN (and equal infinities) not at all.
pub fn differences(a: f32, b: f32) -> (f64, f64) {
    let (a, b) = (a as f64, b as f64);
    if a == b || (a.is_nan() && b.is_nan()) {
        return (0.0, 0.0);
    }
    let abs = (a - b).abs();
    // NaN against a number, or an infinity against anything else: a NaN
    // relative difference would make every later comparison false.
    if !abs.is_finite() {
        return (f64::INFINITY, f64::INFINITY);
    }
    let scale = a.abs().max(b.abs());
    (abs, if scale == 0.0 { 0.0 } else { abs / scale })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_values_depend_on_seed_and_name_only() {
        let r = |seed, name, len| random_values(seed, name, len).unwrap();
        let a = r(7, "x", 5);
        assert_eq!(a, r(7, "x", 5));
        assert_ne!(a, r(8, "x", 5));
        assert_ne!(a, r(7, "y", 5));
        assert_eq!(r(7, "x", 3), a[..3]);
        assert!(r(1, "w", 1000).iter().all(|v| (-1.0..1.0).contains(v)));
        // More than memory can hold: refused, not aborted.
        assert!(random_values(1, "w", usize::MAX / 2).is_none());
    }

    /// The CPU backend, its downloads off by `by`.
    struct Off {
        cpu: CpuBackend,
        by: f32,
    }

    impl Backend for Off {
        type Buffer = Vec<f32>;
        type Error = backend_cpu::CpuError;
        fn name(&self) -> String {
            "off".into()
        }
        fn alloc(&mut self, len: usize) -> Result<Vec<f32>, Self::Error> {
            self.cpu.alloc(len)
        }
        fn upload(&mut self, data: &[f32]) -> Result<Vec<f32>, Self::Error> {
            self.cpu.upload(data)
        }
        fn download(&mut self, buffer: &Vec<f32>) -> Result<Vec<f32>, Self::Error> {
            Ok(buffer.iter().map(|v| v + self.by).collect())
        }
        fn len(&self, buffer: &Vec<f32>) -> u64 {
            buffer.len() as u64
        }
        fn execute(
            &mut self,
            kernel: &shape_core::kernel::Kernel,
            launch: &shape_core::kernel::Launch,
            result: &mut Vec<f32>,
            operands: &[&Vec<f32>],
        ) -> Result<(), Self::Error> {
            self.cpu.execute(kernel, launch, result, operands)
        }
    }

    #[test]
    fn diff_counts_the_elements_outside_the_tolerance() {
        let program = shape_lang::syntax::parse("const c: 3 = [1, 10, 100]\ny = c * 1\n").unwrap();
        let compiled = shape_lang::compile::compile(&program).unwrap();
        let solved = compiled.solve().unwrap();
        let plan = shape_lang::checks::plan(&compiled, &solved, &Default::default()).unwrap();
        let diff = |by: f32, tolerance: Option<Tolerance>| {
            let data = gather(&compiled, &solved, &[], 0).unwrap();
            let mut job = DiffJob {
                job: RunJob {
                    compiled: &compiled,
                    solved: &solved,
                    plan: &plan,
                    data: Some(data.values),
                },
                tolerance,
            };
            job.run(&mut Off {
                cpu: CpuBackend::reference(),
                by,
            })
            .unwrap()
        };
        // Off by 0.5: relative differences 1/3, 0.05/1.05, 0.005/1.005.
        let d = diff(0.5, Tolerance::parse("rel=0.1").ok());
        assert_eq!((d.elements, d.exceeding), (3, 1));
        assert_eq!(d.first_exceeding.as_ref().unwrap().index, vec![0]);
        let d = diff(0.5, Tolerance::parse("abs=0.4,rel=0.01").ok());
        assert_eq!(d.exceeding, 1);
        assert_eq!(d.first_exceeding.unwrap().expected, 1.0);
        let d = diff(0.5, Tolerance::parse("abs=0.5").ok());
        assert_eq!(d.exceeding, 0);
        assert_eq!(diff(0.5, None).exceeding, 0);
        let d = diff(f32::NAN, Tolerance::parse("abs=1e9").ok());
        assert_eq!(d.exceeding, 3);
    }

    #[test]
    fn tolerances_read_and_refused() {
        let t = Tolerance::parse(" abs = 1e-5 , rel=0 ").unwrap();
        assert_eq!((t.abs, t.rel), (1e-5, 0.0));
        assert!(Tolerance::parse("abs=-1").is_err());
        assert!(Tolerance::parse("abs=nan").is_err());
        assert!(Tolerance::parse("abs=1,abs=2")
            .unwrap_err()
            .contains("twice"));
        assert!(Tolerance::parse("ulp=2").unwrap_err().contains("`ulp`"));
        assert!(Tolerance { abs: 0.0, rel: 0.0 }.allows(f32::NAN, f32::NAN));
        assert!(!Tolerance { abs: 1.0, rel: 1.0 }.allows(f32::INFINITY, 1.0));
    }

    #[test]
    fn differences_and_indices() {
        assert_eq!(differences(1.0, 1.5), (0.5, 0.5 / 1.5));
        assert_eq!(differences(0.0, 0.0), (0.0, 0.0));
        assert_eq!(differences(f32::NAN, f32::NAN), (0.0, 0.0));
        assert_eq!(differences(f32::NAN, 1.0), (f64::INFINITY, f64::INFINITY));
        assert_eq!(
            differences(f32::INFINITY, 1.0),
            (f64::INFINITY, f64::INFINITY)
        );
        assert_eq!(differences(f32::INFINITY, f32::INFINITY), (0.0, 0.0));
        assert_eq!(tuple(&[]), "()");
        assert_eq!(tuple(&[3]), "(3,)");
        assert_eq!(tuple(&[2, 3]), "(2, 3)");
    }
}
