//! What `shapec infer` prints: every tensor's solved shape, as text or
//! JSON, each operation's projections, the provenance of a tensor's
//! dims, and the operation graph as Graphviz DOT.

use std::collections::HashMap;
use std::fmt::Write;

use serde_json::{json, Map, Value};
use shape_core::{RowKind, SolvedShape};
use shape_graph::{AxisIndex, OpId, SolvedGraph, TensorId, TensorKind};
use shape_run::RunGraph;
use shape_solver::Origin;

use crate::error::CliError;
use shape_lang::compile::Compiled;

/// How an operation reads in a program: `compose(w, x)`,
/// `einsum("ij;jk=>ik", a, b)`.
pub fn describe_op(compiled: &Compiled, op: OpId) -> String {
    let g = &compiled.graph;
    let Some((operation, operands, _)) = g.op(op) else {
        return format!("op #{}", op.index());
    };
    let args: Vec<&str> = operands.iter().map(|&t| g.name(t).unwrap_or("?")).collect();
    operation.spell(&args)
}

/// The left-hand side of a tensor's line: `input x`, `y = relu(y.1)`.
pub fn describe_tensor(compiled: &Compiled, t: TensorId) -> String {
    let g = &compiled.graph;
    let name = g.name(t).unwrap_or("?");
    match g.kind(t) {
        Ok(TensorKind::Input) => format!("input {name}"),
        Ok(TensorKind::Parameter) => format!("param {name}"),
        Ok(TensorKind::Constant) => format!("const {name}"),
        Ok(TensorKind::Result(op)) => format!("{name} = {}", describe_op(compiled, op)),
        Err(_) => name.to_string(),
    }
}

fn located(compiled: &Compiled) -> impl Fn(shape_graph::GraphError) -> CliError + '_ {
    move |e| CliError::Program(compiled.map.locate(e, None))
}

/// Every tensor, one per line, in program order, with its solved shape.
pub fn shapes_text(compiled: &Compiled, solved: &SolvedGraph) -> Result<String, CliError> {
    let mut lines = Vec::new();
    for t in compiled.graph.tensor_ids() {
        let shape = solved.symbolic_shape(t).map_err(located(compiled))?;
        lines.push((describe_tensor(compiled, t), shape.to_string()));
    }
    // The program's named sizes, after the tensors (none in most programs).
    for (s, name) in compiled.graph.sizes() {
        let value = solved.size_dim(s).map_err(located(compiled))?;
        lines.push((format!("size {name}"), value.extent().to_string()));
    }
    // What run-time sizes must satisfy, checked when they are bound.
    for guard in solved.guards() {
        lines.push(("guard".to_string(), guard.to_string()));
    }
    let width = lines
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for (l, s) in lines {
        // Padded by hand: `{:<width$}` panics for widths over 65,535.
        out.push_str(&l);
        out.extend(std::iter::repeat_n(' ', width - l.chars().count()));
        let _ = writeln!(out, " : {s}");
    }
    Ok(out)
}

/// The JSON form of a shape: `{"batch": [..], "input": [..], "output": [..]}`,
/// each size a number, or a run-time size as its text (`"b"`, `"b*s"`).
pub fn shape_json(shape: &SolvedShape) -> Value {
    let row = |kind| -> Vec<Value> {
        shape
            .row(kind)
            .iter()
            .map(|d| size_json(d.extent()))
            .collect()
    };
    json!({
        "batch": row(RowKind::Batch),
        "input": row(RowKind::Input),
        "output": row(RowKind::Output),
    })
}

/// A size in JSON: a number, or a run-time size's text.
pub fn size_json(size: &shape_core::Size) -> Value {
    match size {
        shape_core::Size::Static(n) => json!(n),
        shape_core::Size::Symbolic(s) => json!(s.to_string()),
        shape_core::Size::Ragged => json!("var"),
    }
}

/// The guards of a solved graph in JSON:
/// `[{"requires": "b in {1, 4}", "in": "..."}]`.
pub fn guards_json(solved: &SolvedGraph) -> Vec<Value> {
    solved
        .guards()
        .iter()
        .map(|g| json!({"requires": g.requires(), "in": g.context.to_string()}))
        .collect()
}

/// `{"tensors": {NAME: {"batch": [..], "input": [..], "output": [..]}}}`.
pub fn shapes_json(compiled: &Compiled, solved: &SolvedGraph) -> Result<Value, CliError> {
    let mut tensors = Map::new();
    for t in compiled.graph.tensor_ids() {
        let shape = solved.symbolic_shape(t).map_err(located(compiled))?;
        let name = compiled.graph.name(t).map_err(located(compiled))?;
        tensors.insert(name.to_string(), shape_json(&shape));
    }
    let mut out = json!({ "tensors": tensors });
    // The program's named sizes, only when it has some (the form without
    // them is unchanged).
    let mut sizes = Map::new();
    for (s, name) in compiled.graph.sizes() {
        let value = solved.size_dim(s).map_err(located(compiled))?;
        sizes.insert(name.to_string(), size_json(value.extent()));
    }
    if !sizes.is_empty() {
        out["sizes"] = Value::Object(sizes);
    }
    let guards = guards_json(solved);
    if !guards.is_empty() {
        out["guards"] = Value::Array(guards);
    }
    Ok(out)
}

/// The kernels a run of the program executes (`shapec run`, with the
/// default options: pointwise chains fused), by the operation that runs
/// them: as text (one block per operation, one line per step) and as JSON
/// (`[{"op", "result", "steps": [{"kernel", "sizes", "writes", "reads"}]}]`).
///
/// `orders` (`NAME=C` or `NAME=F`, from `--order`) says in which order
/// inputs' values lie; when it names any, each step also gives the loops
/// the CPU's coalesced path runs ([`shape_core::coalesce::loops`]),
/// chosen from the strides it reads with, and those strides: text
/// `loops i1, i0+i2; reads x at [1, 3]`, JSON `"loops": [[1], [0, 2]]`
/// and `"read_strides"` (one list per read, one stride per iterator). An
/// input some step cannot read in place is copied into C order first:
/// each step reading it says so (text `x copied into C order first`,
/// JSON `"copied": ["x"]`).
pub fn kernels(
    compiled: &Compiled,
    solved: &SolvedGraph,
    orders: &[String],
) -> Result<(String, Value), CliError> {
    let g = &compiled.graph;
    let (mut text, mut all) = (String::new(), Vec::new());
    let plan = solved
        .plan(&compiled.results, &shape_run::RunOptions::default())
        .map_err(located(compiled))?;
    let (views, copied) = order_views(compiled, solved, &plan, orders)?;
    let show_loops = !orders.is_empty();
    // In program order (the plan's is one topological order of many).
    let mut planned_ops: Vec<_> = plan.ops().iter().collect();
    planned_ops.sort_by_key(|p| p.op.index());
    for planned in planned_ops {
        let op = planned.op;
        let Some((_, operands, result)) = g.op(op) else {
            continue;
        };
        let lowered = &planned.lowered;
        let name = |b: &shape_graph::BufferRef| match b {
            shape_graph::BufferRef::Result => g.name(result).unwrap_or("?").to_string(),
            shape_graph::BufferRef::Operand(i) => operands
                .get(*i)
                .and_then(|&t| g.name(t).ok())
                .unwrap_or("?")
                .to_string(),
            shape_graph::BufferRef::Scratch(i) => format!("scratch{i}"),
            shape_graph::BufferRef::Tensor(t) => g.name(*t).unwrap_or("?").to_string(),
        };
        let _ = writeln!(
            text,
            "{} = {}",
            g.name(result).unwrap_or("?"),
            describe_op(compiled, op)
        );
        if planned.ragged {
            let _ = writeln!(
                text,
                "  (ragged: lowered row by row once the data gives the rows' lengths)"
            );
        }
        let mut steps = Vec::new();
        for s in &lowered.steps {
            let reads: Vec<String> = s.operands.iter().map(name).collect();
            let _ = writeln!(
                text,
                "  {}  sizes {:?}  writes {}  reads [{}]",
                s.kernel,
                s.launch.sizes,
                name(&s.result),
                reads.join(", ")
            );
            let mut step = json!({
                "kernel": s.kernel.to_string(),
                "sizes": s.launch.sizes,
                "writes": name(&s.result),
                "reads": reads,
            });
            if show_loops {
                let strided = shape_run::strided_launch(s, operands, &views)
                    .ok()
                    .flatten();
                let launch = strided.as_ref().unwrap_or(&s.launch);
                let loops = shape_core::coalesce::loops(&s.kernel, launch);
                let iterator = |k: usize| match s.kernel.iterators[k] {
                    shape_core::IterKind::Parallel => format!("i{k}"),
                    shape_core::IterKind::Reduction => format!("r{k}"),
                };
                let loops_text: Vec<String> = loops
                    .iter()
                    .map(|l| l.iter().map(|&k| iterator(k)).collect::<Vec<_>>().join("+"))
                    .collect();
                let mut line = format!("    loops {}", loops_text.join(", "));
                if loops.is_empty() {
                    line.push_str("(none: one point)");
                }
                let (mut at, mut copies) = (Vec::new(), Vec::new());
                for (r, l) in s.operands.iter().zip(&launch.operands) {
                    let t = match *r {
                        shape_graph::BufferRef::Operand(i) => operands.get(i).copied(),
                        shape_graph::BufferRef::Tensor(t) => Some(t),
                        _ => None,
                    };
                    if t.is_some_and(|t| views.contains_key(&t)) {
                        at.push(format!("{} at {:?}", name(r), l.strides));
                    }
                    if t.is_some_and(|t| copied.contains(&t)) {
                        copies.push(name(r));
                    }
                }
                if !at.is_empty() {
                    line.push_str(&format!("; reads {}", at.join(", ")));
                }
                if !copies.is_empty() {
                    line.push_str(&format!(
                        "; {} copied into C order first",
                        copies.join(", ")
                    ));
                    step["copied"] = json!(copies);
                }
                let _ = writeln!(text, "{line}");
                step["loops"] = json!(loops);
                step["read_strides"] = json!(launch
                    .operands
                    .iter()
                    .map(|l| l.strides.clone())
                    .collect::<Vec<_>>());
            }
            steps.push(step);
        }
        let mut entry = json!({
            "op": describe_op(compiled, op),
            "result": g.name(result).unwrap_or("?"),
            "steps": steps,
        });
        if planned.ragged {
            entry["ragged"] = json!(true);
        }
        all.push(entry);
    }
    Ok((text, Value::Array(all)))
}

/// Inputs' views by tensor, and the inputs copied into C order.
type OrderViews = (HashMap<TensorId, shape_run::View>, Vec<TensorId>);

/// The views `--order NAME=C|F` gives the inputs that a run reads in place
/// (a Fortran order only where it differs from C's), and the names of
/// those a run copies into C order instead.
fn order_views(
    compiled: &Compiled,
    solved: &SolvedGraph,
    plan: &shape_run::RunPlan,
    orders: &[String],
) -> Result<OrderViews, CliError> {
    let g = &compiled.graph;
    let (mut views, mut copied) = (HashMap::new(), Vec::new());
    for o in orders {
        let bad =
            |why: String| CliError::Data(format!("--order {}: {why}", crate::text::escaped(o)));
        let Some((name, order)) = o.split_once('=') else {
            return Err(bad("give NAME=C or NAME=F".into()));
        };
        let fortran = match order.trim() {
            "C" | "c" => false,
            "F" | "f" => true,
            other => {
                return Err(bad(format!(
                    "the order `{}` is neither C nor F",
                    crate::text::escaped(other)
                )))
            }
        };
        let found: Vec<TensorId> = tensors_named(compiled, name)
            .into_iter()
            .filter(|&t| !matches!(g.kind(t), Ok(shape_graph::TensorKind::Result(_)) | Err(_)))
            .collect();
        let [t] = found[..] else {
            return Err(bad(format!(
                "the program has no input, parameter or constant `{}`",
                crate::text::escaped(name)
            )));
        };
        let dims = solved.shape(t).map_err(located(compiled))?.memory_dims();
        let view = if fortran {
            shape_run::View::fortran(&dims)
        } else {
            shape_run::View::c_order(&dims)
        };
        views.remove(&t);
        copied.retain(|&c| c != t);
        if view == shape_run::View::c_order(&dims) {
            continue;
        }
        if shape_run::read_in_place(solved, plan, t, &view).map_err(located(compiled))? {
            views.insert(t, view);
        } else {
            copied.push(t);
        }
    }
    Ok((views, copied))
}

/// Where an origin is in the program, as ` (line N)`, or nothing.
fn at_line(
    compiled: &Compiled,
    source: &str,
    origin: &Origin,
    axis: Option<shape_solver::AxisFromEnd>,
) -> String {
    compiled
        .map
        .origin_span(origin, axis)
        .map(|s| format!(" (line {})", Compiled::line_of(source, s.start)))
        .unwrap_or_default()
}

/// Every tensor named `name` as `infer` prints it (statement names, inner
/// results like `y.1`, constants like `2`), in program order.
pub fn tensors_named(compiled: &Compiled, name: &str) -> Vec<TensorId> {
    compiled
        .graph
        .tensor_ids()
        .filter(|&t| compiled.graph.name(t).is_ok_and(|n| n == name))
        .collect()
}

fn explained(compiled: &Compiled, name: &str) -> Result<Vec<TensorId>, CliError> {
    let found = tensors_named(compiled, name);
    if found.is_empty() {
        return Err(CliError::Data(format!(
            "--explain {}: the program names no tensor `{}`",
            crate::text::escaped(name),
            crate::text::escaped(name)
        )));
    }
    Ok(found)
}

/// Why each of a tensor's dims has its size: the declaration, operation or
/// default that fixed it, and the constraints that carried it there. A name
/// that several tensors share (number literals) explains each.
pub fn explain(
    compiled: &Compiled,
    solved: &SolvedGraph,
    source: &str,
    name: &str,
) -> Result<String, CliError> {
    let mut out = String::new();
    for t in explained(compiled, name)? {
        let mut e = solved.explain_tensor(t).map_err(located(compiled))?;
        // As the program writes it (an inner result's own name is `y.1`).
        e.name = name.to_string();
        let _ = e.write_with(&mut out, &|origin, axis| {
            at_line(compiled, source, origin, axis)
        });
    }
    Ok(out)
}

/// The JSON form of [`explain`]: one entry per tensor named `name`, with
/// the source of every axis's size and where it is written.
pub fn explain_json(
    compiled: &Compiled,
    solved: &SolvedGraph,
    source: &str,
    name: &str,
) -> Result<Vec<Value>, CliError> {
    let span = |origin: &Origin, axis: Option<shape_solver::AxisFromEnd>| {
        compiled
            .map
            .origin_span(origin, axis)
            .map_or(Value::Null, |s| crate::diagnostics::span_json(source, &s))
    };
    let mut out = Vec::new();
    for t in explained(compiled, name)? {
        let shape = solved.symbolic_shape(t).map_err(located(compiled))?;
        let mut axes = Vec::new();
        for kind in RowKind::ALL {
            for axis in 0..shape.row(kind).len() {
                let p = solved.explain(t, kind, axis).map_err(located(compiled))?;
                let via: Vec<Value> = p
                    .via
                    .iter()
                    .filter(|via| ***via != *p.source)
                    .map(|via| json!({"what": via.to_string(), "span": span(via, None)}))
                    .collect();
                axes.push(json!({
                    "row": kind.to_string(),
                    "axis": axis,
                    "size": size_json(p.value.extent()),
                    "source": {
                        "what": p.source.to_string(),
                        "axis_from_end": p.source_axis.map(shape_solver::AxisFromEnd::after),
                        "span": span(&p.source, p.source_axis),
                    },
                    "via": via,
                }));
            }
        }
        out.push(json!({
            "name": name,
            "shape": shape_json(&shape),
            "axes": axes,
        }));
    }
    Ok(out)
}

/// Each operation's loop iterators and how they index the result and the
/// operands (axes in memory order: batch, output, input). `iN` is a
/// parallel iterator, `rN` a reduction, a number a fixed index, `s` the
/// batch-slice index.
pub fn projections_text(compiled: &Compiled, solved: &SolvedGraph) -> Result<String, CliError> {
    let g = &compiled.graph;
    let mut out = String::new();
    for op in g.op_ids() {
        let Some((_, operands, result)) = g.op(op) else {
            continue;
        };
        let p = solved.projections(op).map_err(located(compiled))?;
        let name = |t: TensorId| g.name(t).unwrap_or("?").to_string();
        let indexed = |t: TensorId, axes: &[AxisIndex]| {
            let ix: Vec<String> = axes.iter().map(|a| p.index_text(a)).collect();
            format!("{}[{}]", name(t), ix.join(", "))
        };
        let sizes: Vec<String> = p
            .sizes
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{}={s}", p.index_text(&AxisIndex::Iterator(i))))
            .collect();
        let reads: Vec<String> = operands
            .iter()
            .zip(&p.operands)
            .map(|(&t, axes)| indexed(t, axes))
            .collect();
        let _ = writeln!(
            out,
            "{} = {}\n  iterators: {}\n  {} <- {}",
            name(result),
            describe_op(compiled, op),
            if sizes.is_empty() {
                "none".to_string()
            } else {
                sizes.join(" ")
            },
            indexed(result, &p.result),
            reads.join(", ")
        );
    }
    Ok(out)
}

/// The JSON form of [`projections_text`]: for each operation, its
/// iterators (name, kind, size) and how they index the result and each
/// operand.
pub fn projections_json(compiled: &Compiled, solved: &SolvedGraph) -> Result<Value, CliError> {
    let g = &compiled.graph;
    let mut out = Vec::new();
    for op in g.op_ids() {
        let Some((_, operands, result)) = g.op(op) else {
            continue;
        };
        let p = solved.projections(op).map_err(located(compiled))?;
        let name = |t: TensorId| g.name(t).unwrap_or("?").to_string();
        let index =
            |axes: &[AxisIndex]| -> Vec<String> { axes.iter().map(|a| p.index_text(a)).collect() };
        let iterators: Vec<Value> = p
            .sizes
            .iter()
            .enumerate()
            .map(|(i, size)| {
                let kind = match p.kinds.get(i) {
                    Some(shape_core::IterKind::Reduction) => "reduction",
                    _ => "parallel",
                };
                json!({
                    "name": p.index_text(&AxisIndex::Iterator(i)),
                    "kind": kind,
                    "size": size,
                })
            })
            .collect();
        let reads: Vec<Value> = operands
            .iter()
            .zip(&p.operands)
            .map(|(&t, axes)| json!({"name": name(t), "index": index(axes)}))
            .collect();
        out.push(json!({
            "result": {"name": name(result), "index": index(&p.result)},
            "op": describe_op(compiled, op),
            "iterators": iterators,
            "operands": reads,
        }));
    }
    Ok(Value::Array(out))
}

fn dot_escape(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The operation graph in Graphviz DOT: inputs, parameters and constants
/// are boxes, operations ellipses, and every edge carries the tensor that
/// flows along it with its solved shape; results no operation reads end
/// in a double box.
pub fn dot(compiled: &Compiled, solved: &SolvedGraph) -> Result<String, CliError> {
    let g = &compiled.graph;
    let mut out = String::from("digraph program {\n  rankdir=LR;\n  node [fontname=\"monospace\"];\n  edge [fontname=\"monospace\"];\n");
    let mut readers: Vec<Vec<OpId>> = vec![Vec::new(); g.num_tensors()];
    for op in g.op_ids() {
        if let Some((_, operands, _)) = g.op(op) {
            for t in operands {
                readers[t.index()].push(op);
            }
        }
    }
    for t in g.tensor_ids() {
        let name = g.name(t).map_err(located(compiled))?;
        let shape = solved.symbolic_shape(t).map_err(located(compiled))?;
        let edge_label = dot_escape(&format!("{name}: {shape}"));
        let from = match g.kind(t).map_err(located(compiled))? {
            TensorKind::Result(op) => {
                let _ = writeln!(
                    out,
                    "  op{} [label=\"{}\", shape=ellipse];",
                    op.index(),
                    dot_escape(&describe_op(compiled, op))
                );
                format!("op{}", op.index())
            }
            _ => {
                let _ = writeln!(
                    out,
                    "  t{} [label=\"{}\", shape=box];",
                    t.index(),
                    dot_escape(&describe_tensor(compiled, t))
                );
                format!("t{}", t.index())
            }
        };
        for op in &readers[t.index()] {
            let _ = writeln!(
                out,
                "  {from} -> op{} [label=\"{edge_label}\"];",
                op.index()
            );
        }
        if readers[t.index()].is_empty() && g.producer(t).is_some() {
            let _ = writeln!(
                out,
                "  out{i} [label=\"{}\", shape=box, peripheries=2];\n  {from} -> out{i} [label=\"{edge_label}\"];",
                dot_escape(name),
                i = t.index()
            );
        }
    }
    out.push_str("}\n");
    Ok(out)
}
