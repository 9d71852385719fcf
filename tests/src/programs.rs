//! Random well-shaped programs with random data, for differential tests
//! of backends: every generated program solves, and every operation in
//! it can be lowered to kernels.
//!
//! The operations come from a [`Registry`]: each step draws one of its
//! entries that has a sampler and lets the sampler apply it (to a tensor
//! of the program so far, with new inputs where it needs them). A crate
//! with operations of its own registers them with samplers and draws
//! programs with [`programs_with`].
//!
//! Besides the registry's operations, a step may call a user's WGSL
//! function ([`shape_call::CallOp`]): one of [`CALL_FUNCTIONS`] (pointwise
//! scalar functions, a function with a loop, one with a helper function,
//! a `vec3<f32>` dot product and a `vec3<f32>` result), its arguments
//! drawn by the row rule of calls ([`draw_call`]). [`Program::to_text`]
//! writes a `function` statement for each one a program calls.

use std::sync::Arc;

use proptest::prelude::*;
use shape_call::CallOp;
use shape_core::{RowKind, SolvedShape};
use shape_graph::{Graph, GraphError, Registry, SampleCx, Sampler, TensorId, TensorKind};
use shape_run::{HostTensor, Inputs, RunOptions};

/// A generated program: the graph, the data of its inputs, and every
/// tensor an operation computes.
#[derive(Clone, Debug)]
pub struct Program {
    /// The graph.
    pub graph: Graph,
    /// Values of every input.
    pub inputs: Inputs,
    /// Every operation's result.
    pub results: Vec<TensorId>,
    /// The run's options (the batch index batch slices take).
    pub options: RunOptions,
}

impl Program {
    /// A program of `graph` that computes `results`, with the values of
    /// its inputs, parameters and constants given by name (each in memory
    /// order: batch, output, input). Fails, saying why, on an unknown or
    /// ambiguous name, a graph that does not solve, or values of the wrong
    /// length.
    ///
    /// ```
    /// use shape_graph::Graph;
    /// use shape_tests::programs::Program;
    /// let mut g = Graph::new();
    /// let x = g.input("x", "3")?;
    /// let y = g.unary("neg", x)?;
    /// let p = Program::with_named_data(g, vec![y], [("x", vec![1.0, 2.0, 3.0])])?;
    /// assert_eq!(p.inputs.get(x).unwrap().dims(), &[3]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_named_data<N: AsRef<str>>(
        graph: Graph,
        results: Vec<TensorId>,
        data: impl IntoIterator<Item = (N, Vec<f32>)>,
    ) -> Result<Program, String> {
        Program::with_sized_data(graph, results, &[], data)
    }

    /// [`Program::with_named_data`] for a graph with run-time sizes: the
    /// data's dims are those of the shapes at `sizes` (each run-time size
    /// by name). The graph stays symbolic: every run binds the sizes from
    /// the data again.
    ///
    /// ```
    /// use shape_graph::Graph;
    /// use shape_tests::programs::Program;
    /// let mut g = Graph::new();
    /// g.run_time_size("b")?;
    /// let x = g.input("x", "b|2")?;
    /// let y = g.unary("neg", x)?;
    /// let p = Program::with_sized_data(g, vec![y], &[("b", 3)], [("x", vec![1.0; 6])])?;
    /// assert_eq!(p.inputs.get(x).unwrap().dims(), &[3, 2]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_sized_data<N: AsRef<str>>(
        graph: Graph,
        results: Vec<TensorId>,
        sizes: &[(&str, u64)],
        data: impl IntoIterator<Item = (N, Vec<f32>)>,
    ) -> Result<Program, String> {
        let mut solved = graph.solve().map_err(|e| e.to_string())?;
        if solved.needs_binding() {
            let mut bound = Vec::with_capacity(sizes.len());
            for (name, n) in sizes {
                let s = graph
                    .size_named(name)
                    .ok_or_else(|| format!("the graph has no size `{name}`"))?;
                bound.push((s, *n));
            }
            solved = solved.bind(&bound).map_err(|e| e.to_string())?;
        }
        let mut inputs = Inputs::new();
        for (name, values) in data {
            let name = name.as_ref();
            let mut found = graph
                .tensor_ids()
                .filter(|&t| graph.name(t).is_ok_and(|n| n == name));
            let t = match (found.next(), found.next()) {
                (Some(t), None) => t,
                (None, _) => return Err(format!("the graph has no tensor `{name}`")),
                (Some(_), Some(_)) => {
                    return Err(format!("the graph has several tensors `{name}`"))
                }
            };
            let dims = solved.shape(t).map_err(|e| e.to_string())?.memory_dims();
            let tensor = HostTensor::new(dims, values)
                .map_err(|e| format!("the values of `{name}`: {e}"))?;
            inputs.insert(t, tensor);
        }
        Ok(Program {
            graph,
            inputs,
            results,
            options: RunOptions::default(),
        })
    }

    /// The program in shapec's text language (without its data): a
    /// failing case can be saved as a `.shape` file and run again.
    pub fn to_text(&self) -> Result<String, GraphError> {
        let g = &self.graph;
        let solved = g.solve()?;
        let mut out = String::new();
        // The generator's WGSL functions, each declared once before use.
        let mut declared: Vec<&str> = Vec::new();
        for op in g.op_ids() {
            let Some((operation, _, _)) = g.op(op) else {
                continue;
            };
            if let Some(f) = CALL_FUNCTIONS.iter().find(|f| f.name == operation.name()) {
                if !declared.contains(&f.name) {
                    declared.push(f.name);
                    out.push_str(&format!("function {} = \"{}\"\n", f.name, f.source));
                }
            }
        }
        for t in g.tensor_ids() {
            let name = g.name(t)?;
            let line = match g.kind(t)? {
                TensorKind::Input => format!("input {name}: {}", spec_text(solved.shape(t)?)),
                TensorKind::Parameter => format!("param {name}: {}", spec_text(solved.shape(t)?)),
                TensorKind::Constant => {
                    let values = self
                        .inputs
                        .get(t)
                        .map(|v| {
                            v.values()
                                .iter()
                                .map(|x| format!("{x:?}"))
                                .collect::<Vec<_>>()
                                .join(", ")
                        })
                        .unwrap_or_default();
                    format!("const {name}: {} = [{values}]", spec_text(solved.shape(t)?))
                }
                TensorKind::Result(op) => {
                    let (operation, operands, _) =
                        g.op(op).ok_or(GraphError::UnknownOp(op.index()))?;
                    let args = operands
                        .iter()
                        .map(|&o| g.name(o))
                        .collect::<Result<Vec<_>, _>>()?;
                    format!("{name} = {}", operation.spell(&args))
                }
            };
            out.push_str(&line);
            out.push('\n');
        }
        Ok(out)
    }
}

/// A ground shape as a declared spec that reads back to it.
fn spec_text(s: &SolvedShape) -> String {
    let row = |r: &[shape_core::KnownDim]| {
        r.iter()
            .map(|d| d.size().to_string())
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        "{} |{} ->{} ,",
        row(&s.batch),
        row(&s.input),
        row(&s.output)
    )
}

/// A small deterministic generator, so a program is a pure function of
/// the seeds proptest shrinks.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn dims_text(dims: &[u64]) -> String {
    dims.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// A program under construction; what samplers draw operations with.
pub(crate) struct Builder {
    pub(crate) g: Graph,
    pub(crate) inputs: Inputs,
    results: Vec<TensorId>,
    pool: Vec<TensorId>,
    pub(crate) rng: Rng,
    /// The smallest leading batch size any batch slice drops.
    pub(crate) slice_bound: Option<u64>,
    /// Inputs made so far, for their names.
    made: usize,
}

impl Builder {
    /// An empty program over `g`, drawing from `rng`: what samplers see
    /// (the per-operation reference checks draw through it too).
    pub(crate) fn new(g: Graph, rng: Rng) -> Builder {
        Builder {
            g,
            inputs: Inputs::new(),
            results: Vec::new(),
            pool: Vec::new(),
            rng,
            slice_bound: None,
            made: 0,
        }
    }
}

impl SampleCx for Builder {
    fn below(&mut self, n: u64) -> u64 {
        self.rng.below(n)
    }

    fn pick(&mut self) -> TensorId {
        self.pool[self.rng.below(self.pool.len() as u64) as usize]
    }

    fn shape(&mut self, t: TensorId) -> Result<SolvedShape, GraphError> {
        Ok(self.g.solve()?.shape(t)?.clone())
    }

    fn input(
        &mut self,
        batch: &[u64],
        input: &[u64],
        output: &[u64],
    ) -> Result<TensorId, GraphError> {
        let name = format!("in{}", self.made);
        self.made += 1;
        let spec = format!(
            "{} |{} ->{} ,",
            dims_text(batch),
            dims_text(input),
            dims_text(output)
        );
        let t = self.g.input(&name, &spec)?;
        // Memory order: batch, output, input.
        let dims: Vec<u64> = batch.iter().chain(output).chain(input).copied().collect();
        let n: u64 = dims.iter().product();
        let values = (0..n)
            .map(|_| (self.rng.below(17) as f32 - 8.0) / 4.0)
            .collect();
        let tensor = HostTensor::new(dims, values).expect("values for every element");
        self.inputs.insert(t, tensor);
        self.pool.push(t);
        Ok(t)
    }

    fn graph(&mut self) -> &mut Graph {
        &mut self.g
    }

    fn slices_batch(&mut self, size: u64) {
        self.slice_bound = Some(self.slice_bound.map_or(size, |m| m.min(size)));
    }
}

impl Builder {
    fn step(&mut self, samplers: &[Sampler]) -> Result<(), GraphError> {
        // One step in 8 calls a WGSL function of the pool; the `permute`
        // that may move its first argument's axes into its batch row is a
        // result too, so that every backend's value of it is compared.
        let drawn = if self.rng.below(8) == 0 {
            let ops = call_ops();
            let op = ops[self.rng.below(ops.len() as u64) as usize].clone();
            let before = self.g.op_ids().count();
            let drawn = draw_call(self, &op)?;
            let made: Vec<TensorId> = (self.g.op_ids().skip(before))
                .filter_map(|o| self.g.op(o).map(|(_, _, r)| r))
                .filter(|&r| Some(r) != drawn)
                .collect();
            self.results.extend(made);
            drawn
        } else {
            let sampler = &samplers[self.rng.below(samplers.len() as u64) as usize];
            sampler(self)?
        };
        let result = match drawn {
            Some(t) => t,
            // Nothing fits this operation here: a relu of any tensor.
            None => {
                let t = self.pick();
                self.g.unary("relu", t)?
            }
        };
        self.results.push(result);
        self.pool.push(result);
        Ok(())
    }
}

/// A random program of `steps` operations drawn from `registry`'s
/// entries that have a sampler.
pub fn program_with(registry: &Arc<Registry>, seed: u64, steps: usize) -> Program {
    build(registry, seed, steps, false)
}

/// A random program of `steps` built-in operations whose first input may
/// have empty axes (size 0). Some of them fail to run, as numpy would (a
/// maximum over an empty axis, a batch slice of an empty batch): every
/// backend must then fail alike.
pub fn program_with_empty_axes(seed: u64, steps: usize) -> Program {
    build(&Registry::builtin(), seed, steps, true)
}

/// Random programs of 1 to `max_steps` built-in operations whose first
/// input may have empty axes.
pub fn programs_with_empty_axes(max_steps: usize) -> impl Strategy<Value = Program> {
    (any::<u64>(), 1..=max_steps).prop_map(|(seed, steps)| program_with_empty_axes(seed, steps))
}

fn build(registry: &Arc<Registry>, seed: u64, steps: usize, empty: bool) -> Program {
    let samplers: Vec<Sampler> = registry
        .entries()
        .filter_map(|e| e.sampler().cloned())
        .collect();
    assert!(
        !samplers.is_empty(),
        "the registry has no operation with a sampler"
    );
    let mut b = Builder {
        g: Graph::with_registry(registry.clone()),
        inputs: Inputs::new(),
        results: Vec::new(),
        pool: Vec::new(),
        rng: Rng(seed | 1),
        slice_bound: None,
        made: 0,
    };
    let least = u64::from(!empty);
    let dims = |rng: &mut Rng, max: u64| -> Vec<u64> {
        (0..rng.below(max + 1))
            .map(|_| least + rng.below(5 - least))
            .collect()
    };
    let (bb, bi, bo) = (
        dims(&mut b.rng, 2),
        dims(&mut b.rng, 1),
        dims(&mut b.rng, 2),
    );
    b.input(&bb, &bi, &bo).expect("a ground shape");
    for _ in 0..steps {
        b.step(&samplers)
            .expect("sampled operations are well-shaped");
    }
    // A batch slice of an empty batch takes index 0, which fails to run.
    let slice = b.slice_bound.map_or(0, |n| b.rng.below(n.max(1)));
    Program {
        graph: b.g,
        inputs: b.inputs,
        results: b.results,
        options: RunOptions::default().with_slice(slice),
    }
}

/// A random program of `steps` built-in operations.
pub fn program(seed: u64, steps: usize) -> Program {
    program_with(&Registry::builtin(), seed, steps)
}

/// Random programs of 1 to `max_steps` built-in operations.
pub fn programs(max_steps: usize) -> impl Strategy<Value = Program> {
    programs_with(Registry::builtin(), max_steps)
}

/// Random programs of 1 to `max_steps` operations of `registry`.
pub fn programs_with(registry: Arc<Registry>, max_steps: usize) -> impl Strategy<Value = Program> {
    (any::<u64>(), 1..=max_steps)
        .prop_map(move |(seed, steps)| program_with(&registry, seed, steps))
}

/// A WGSL function the random programs call, with the same function in
/// plain Rust (written from its definition, not from the WGSL's text).
#[derive(Clone, Copy, Debug)]
pub struct CallFunction {
    /// The function's name (the last function of `source`).
    pub name: &'static str,
    /// The WGSL source: helper functions first, then the function.
    pub source: &'static str,
    /// The function at one call index: each argument's scalars (a vector's
    /// components in order), the result's scalars.
    pub rust: fn(&[&[f32]]) -> Vec<f32>,
}

/// The WGSL functions the random programs call: pointwise scalar
/// functions of one and two arguments, one with a loop, one with a helper
/// function, a `vec3<f32>` dot product and a `vec3<f32>` result. They use
/// only arithmetic, `abs` and `clamp`, so that the CPU interpreter, wgpu
/// and the Rust closures agree within the GPU tolerance on any finite
/// data.
pub const CALL_FUNCTIONS: &[CallFunction] = &[
    CallFunction {
        name: "f_scale",
        source: "fn f_scale(x: f32, g: f32) -> f32 { return x * g - 0.5; }",
        rust: |a| vec![a[0][0] * a[1][0] - 0.5],
    },
    CallFunction {
        name: "f_clamp",
        source: "fn f_clamp(x: f32) -> f32 { return clamp(2.0 * x, -1.0, 1.5) + abs(x); }",
        rust: |a| vec![wgsl_clamp(2.0 * a[0][0], -1.0, 1.5) + a[0][0].abs()],
    },
    CallFunction {
        name: "f_poly",
        source: "fn f_poly(x: f32) -> f32 { var acc = 0.0; for (var i = 0; i < 4; i++) { acc = acc * x + 0.25 * f32(i + 1); } return acc; }",
        // 0.25 x^3 + 0.5 x^2 + 0.75 x + 1, by Horner's rule.
        rust: |a| {
            let x = a[0][0];
            vec![((0.25 * x + 0.5) * x + 0.75) * x + 1.0]
        },
    },
    CallFunction {
        name: "f_hyp",
        source: "fn f_sq(x: f32) -> f32 { return x * x; } fn f_hyp(a: f32, b: f32) -> f32 { return f_sq(a) + f_sq(b) * 0.5; }",
        rust: |a| vec![a[0][0] * a[0][0] + a[1][0] * a[1][0] * 0.5],
    },
    CallFunction {
        name: "f_dot3",
        source: "fn f_dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }",
        rust: |a| vec![a[0][0] * a[1][0] + a[0][1] * a[1][1] + a[0][2] * a[1][2]],
    },
    CallFunction {
        name: "f_bright",
        source: "fn f_bright(c: vec3<f32>, g: f32) -> vec3<f32> { return clamp(c * g, vec3<f32>(-1.0), vec3<f32>(1.0)); }",
        rust: |a| a[0].iter().map(|c| wgsl_clamp(c * a[1][0], -1.0, 1.0)).collect(),
    },
];

/// WGSL's `clamp(e, lo, hi)` as the specification defines it,
/// `min(max(e, lo), hi)` (not `f32::clamp`, which keeps NaN).
#[allow(clippy::manual_clamp)]
fn wgsl_clamp(e: f32, lo: f32, hi: f32) -> f32 {
    e.max(lo).min(hi)
}

/// The operations of [`CALL_FUNCTIONS`], parsed once.
pub fn call_ops() -> &'static [Arc<CallOp>] {
    static OPS: std::sync::OnceLock<Vec<Arc<CallOp>>> = std::sync::OnceLock::new();
    OPS.get_or_init(|| {
        CALL_FUNCTIONS
            .iter()
            .map(|f| {
                let op = CallOp::parse(f.source)
                    .unwrap_or_else(|e| panic!("`{}` is not an operation: {e}", f.name));
                assert_eq!(op.signature().name.as_ref(), f.name);
                Arc::new(op)
            })
            .collect()
    })
}

/// Draws a call of `op` by the row rule of calls: each argument's output
/// row is its parameter's type dims and its input row is empty, and the
/// batch rows broadcast. A tensor of the program is the first argument
/// whose type it fits as it is, or else the first scalar argument, its
/// axes moved into its batch row (a `permute`, which keeps memory order);
/// every other argument is a new input whose batch row broadcasts against
/// that one's. `None` for a function without parameters.
pub fn draw_call(cx: &mut dyn SampleCx, op: &Arc<CallOp>) -> Result<Option<TensorId>, GraphError> {
    let params = op.param_dims();
    if params.is_empty() {
        return Ok(None);
    }
    let t = cx.pick();
    let s = cx.shape(t)?;
    let sizes = |k: RowKind| s.sizes(k);
    let fits = |dims: &[u64]| sizes(RowKind::Input).is_empty() && sizes(RowKind::Output) == dims;
    let mut args: Vec<Option<TensorId>> = vec![None; params.len()];
    let batch = if let Some(k) = params.iter().position(|p| fits(p)) {
        args[k] = Some(t);
        sizes(RowKind::Batch)
    } else if let Some(k) = params.iter().position(|p| p.is_empty()) {
        let (b, i, o) = (s.batch.len(), s.input.len(), s.output.len());
        let labels = |n: usize, from: u8| -> Vec<String> {
            (0..n)
                .map(|j| ((from + j as u8) as char).to_string())
                .collect()
        };
        let (bl, il, ol) = (labels(b, b'm'), labels(i, b'u'), labels(o, b'a'));
        let all: Vec<String> = bl.iter().chain(&ol).chain(&il).cloned().collect();
        let spec = format!(
            "{}|{}->{},=>{}|->,",
            bl.join(","),
            il.join(","),
            ol.join(","),
            all.join(",")
        );
        let flat = cx.graph().permute(&spec, t)?;
        args[k] = Some(flat);
        s.memory_dims()
    } else {
        sizes(RowKind::Batch)
    };
    let mut operands = Vec::with_capacity(params.len());
    for (arg, dims) in args.into_iter().zip(params) {
        let a = match arg {
            Some(a) => a,
            None => {
                let b = cx.broadcastable(&batch);
                cx.input(&b, &[], dims)?
            }
        };
        operands.push(a);
    }
    cx.graph()
        .apply(op.clone() as Arc<dyn shape_graph::Operation>, &operands)
        .map(Some)
}
