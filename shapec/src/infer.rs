//! What `shapec infer` prints: every tensor's solved shape, as text or
//! JSON, each operation's projections, the provenance of a tensor's
//! dims, and the operation graph as Graphviz DOT.

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
pub fn kernels(compiled: &Compiled, solved: &SolvedGraph) -> Result<(String, Value), CliError> {
    let g = &compiled.graph;
    let (mut text, mut all) = (String::new(), Vec::new());
    let plan = solved
        .plan(&compiled.results, &shape_run::RunOptions::default())
        .map_err(located(compiled))?;
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
            steps.push(json!({
                "kernel": s.kernel.to_string(),
                "sizes": s.launch.sizes,
                "writes": name(&s.result),
                "reads": reads,
            }));
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
