//! `shapec broadcast`: NumPy's broadcasting of plain shapes, computed by
//! the shape solver itself.
//!
//! Each shape becomes an input whose output row holds its sizes; the
//! shapes are combined pairwise, left to right, by a broadcasting
//! pointwise operation, and the last result's output row is the answer.
//!
//! ```
//! use shapec::broadcast::{broadcast, parse_shape};
//! let shapes = [parse_shape("5,2,1").unwrap(), parse_shape("2,3").unwrap()];
//! assert_eq!(broadcast(&shapes).unwrap(), vec![5, 2, 3]);
//! assert_eq!(broadcast(&[parse_shape("()").unwrap()]).unwrap(), Vec::<u64>::new());
//! assert!(broadcast(&[vec![2, 3], vec![4]]).is_err());
//! ```

use std::sync::Arc;

use shape_core::dynamic::{self, DynDim, DynShape};
use shape_core::kernel::{Accumulate, BinaryOp, Expr};
use shape_core::RowKind;
use shape_graph::{
    ConstraintCx, Graph, GraphError, Lowered, LoweringCx, Operation, ProjectionBuilder,
};
use shape_solver::ShapeError;

use crate::error::CliError;
use crate::run::tuple;
use crate::text::escaped;

/// Reads a shape: sizes separated by commas or spaces, optionally in
/// parentheses; `""` and `()` are the shape with no axes.
pub fn parse_shape(text: &str) -> Result<Vec<u64>, CliError> {
    let shown = escaped(text);
    without_parentheses(text)?
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .map(|s| match s.parse::<u64>() {
            Ok(n) => Ok(n),
            Err(_) if s.starts_with('-') && s[1..].chars().all(|c| c.is_ascii_digit()) => {
                Err(CliError::Broadcast(format!(
                    "shape `{shown}`: the size `{s}` is negative (sizes are whole numbers, 0 or more)"
                )))
            }
            Err(_) if s.chars().all(|c| c.is_ascii_digit()) => Err(CliError::Broadcast(format!(
                "shape `{shown}`: the size `{s}` does not fit in 64 bits"
            ))),
            Err(_) => Err(CliError::Broadcast(format!(
                "shape `{shown}`: `{}` is not a size (write sizes like `5,2,1`, or `()` for no axes)",
                escaped(s)
            ))),
        })
        .collect()
}

/// The inside of `(...)`, or the trimmed text when it has none.
fn without_parentheses(text: &str) -> Result<&str, CliError> {
    let t = text.trim();
    match t.strip_prefix('(') {
        Some(rest) => rest.strip_suffix(')').ok_or_else(|| {
            CliError::Broadcast(format!(
                "shape `{}`: `(` is not closed by `)`",
                escaped(text)
            ))
        }),
        None => Ok(t),
    }
}

/// Numpy's broadcasting of two shapes, for `shapec broadcast`: the
/// pointwise rule with no computation of its own (run, it would give the
/// larger of the two values).
#[derive(Debug)]
struct Broadcast;

impl Operation for Broadcast {
    fn name(&self) -> &str {
        "broadcast"
    }

    fn arity(&self) -> usize {
        2
    }

    fn constrain(&self, cx: &mut ConstraintCx<'_>) {
        cx.broadcast_all();
    }

    fn project(&self, cx: &mut ProjectionBuilder<'_>) {
        cx.broadcast_all();
    }

    fn lower(&self, cx: &LoweringCx<'_>) -> Result<Lowered, GraphError> {
        let larger = Expr::Binary(
            BinaryOp::Max,
            Box::new(Expr::Load(0)),
            Box::new(Expr::Load(1)),
        );
        cx.single_kernel(larger, Accumulate::Assign)
    }

    fn spell(&self, operands: &[&str]) -> String {
        format!("max({})", operands.join(", "))
    }
}

/// The NumPy broadcast of `shapes`, or why they do not broadcast.
pub fn broadcast(shapes: &[Vec<u64>]) -> Result<Vec<u64>, CliError> {
    let mut g = Graph::new();
    let fail = |e: GraphError, i: usize| -> CliError {
        let so_far = tuple_list(&shapes[..=i]);
        let detail = match &e {
            GraphError::Shape(ShapeError::DimMismatch {
                axis, left, right, ..
            }) => format!(
                "at axis {}, sizes {} and {} differ and neither is 1",
                axis.map(|a| a.python_index().to_string())
                    .unwrap_or("?".into()),
                left.value.size().min(right.value.size()),
                left.value.size().max(right.value.size())
            ),
            other => other.to_string(),
        };
        CliError::Broadcast(format!("shapes {so_far} do not broadcast: {detail}"))
    };
    let mut acc = None;
    for (i, dims) in shapes.iter().enumerate() {
        let spec = dims
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(",");
        let name = format!("s{}", i + 1);
        let t = g.input(&name, &spec).map_err(|e| fail(e, i))?;
        acc = Some(match acc {
            None => t,
            Some(a) => g
                .apply(Arc::new(Broadcast), &[a, t])
                .map_err(|e| fail(e, i))?,
        });
    }
    let Some(result) = acc else {
        return Err(CliError::Broadcast(
            "give at least one shape, like `shapec broadcast 5,2,1 2,3`".into(),
        ));
    };
    let last = shapes.len() - 1;
    let solved = g.solve().map_err(|e| fail(e, last))?;
    let shape = solved.shape(result).map_err(|e| fail(e, last))?;
    Ok(shape.sizes(RowKind::Output))
}

/// Whether a shape argument needs the rules of `shape_core::dynamic`: it
/// holds `?`, a named size or a size 0 (which the shape solver's sizes,
/// at least 1, cannot hold), or is `*`.
pub fn is_dynamic(text: &str) -> bool {
    text.contains('?')
        || text.trim() == "*"
        || text
            .split(|c: char| c == ',' || c.is_whitespace() || c == '(' || c == ')')
            .any(|part| is_symbol(part) || part.parse::<u64>() == Ok(0))
}

/// Whether `part` names a run-time size: an identifier.
fn is_symbol(part: &str) -> bool {
    let mut chars = part.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Reads a shape that may hold `?` (a size known only at run time) and
/// named run-time sizes (`b`, any identifier), or be `*` (unknown rank).
pub fn parse_dynamic_shape(text: &str) -> Result<DynShape, CliError> {
    if text.trim() == "*" {
        return Ok(DynShape::Unranked);
    }
    let shown = escaped(text);
    let mut dims = Vec::new();
    for part in without_parentheses(text)?.split(|c: char| c == ',' || c.is_whitespace()) {
        match part {
            "" => {}
            "?" => dims.push(DynDim::Dynamic),
            name if is_symbol(name) => dims.push(DynDim::Symbol(name.into())),
            "*" => {
                return Err(CliError::Broadcast(format!(
                    "shape `{shown}`: `*` stands for a whole shape of unknown rank, not for one size (write `?` for that)"
                )))
            }
            // Size 0 broadcasts as numpy has it: with 1 it gives 0, with
            // a size above 1 it is an error.
            zero if zero.parse::<u64>() == Ok(0) => dims.push(DynDim::Static(0)),
            size => {
                let n = parse_shape(size)?;
                dims.push(DynDim::Static(n[0]));
            }
        }
    }
    Ok(DynShape::Ranked(dims))
}

fn dyn_json(shape: &DynShape) -> serde_json::Value {
    match shape {
        DynShape::Unranked => serde_json::json!("*"),
        DynShape::Ranked(dims) => dims
            .iter()
            .map(|d| match d {
                DynDim::Static(n) => serde_json::json!(n),
                DynDim::Dynamic => serde_json::json!("?"),
                DynDim::Symbol(name) => serde_json::json!(name.as_ref()),
            })
            .collect(),
    }
}

/// `shapec broadcast` with MLIR's rules: the inferred shape (or, with
/// `result`, whether it verifies; with `statically`, whether broadcasting
/// is known to succeed before run time), and the guards left for run
/// time; the line to print, as text or JSON.
pub fn dynamic(
    shapes: &[String],
    result: Option<&str>,
    statically: bool,
    json: bool,
) -> Result<String, CliError> {
    let operands = shapes
        .iter()
        .map(|s| parse_dynamic_shape(s))
        .collect::<Result<Vec<_>, _>>()?;
    let declared = result.map(parse_dynamic_shape).transpose()?;
    let inferred = match &declared {
        Some(r) => dynamic::verify(&operands, r)?,
        None => dynamic::infer(&operands)?,
    };
    let guards: Vec<serde_json::Value> = inferred
        .guards
        .iter()
        .map(|g| {
            serde_json::json!({"operand": g.operand, "axis": g.axis, "requires": g.requires.to_string()})
        })
        .collect();
    let mut value = if statically {
        serde_json::json!({"known": inferred.known_statically()})
    } else if declared.is_some() {
        serde_json::json!({"valid": true})
    } else {
        serde_json::json!({"shape": dyn_json(&inferred.shape)})
    };
    if json {
        if !guards.is_empty() {
            value["guards"] = serde_json::Value::Array(guards);
        }
        return Ok(value.to_string());
    }
    let mut text = if statically {
        if inferred.known_statically() {
            format!("known to broadcast to {}", inferred.shape)
        } else {
            format!(
                "broadcasts to {} only if the run-time sizes allow it",
                inferred.shape
            )
        }
    } else if let Some(r) = &declared {
        format!("valid: {r} is a result of {}", inferred.shape)
    } else {
        inferred.shape.to_string()
    };
    for g in &inferred.guards {
        text.push_str(&format!(
            "\nguard: operand {} axis {} must be {} at run time",
            g.operand, g.axis, g.requires
        ));
    }
    Ok(text)
}

fn tuple_list(shapes: &[Vec<u64>]) -> String {
    let all: Vec<String> = shapes.iter().map(|s| tuple(s)).collect();
    match all.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => all.join(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(shapes: &[&str]) -> Result<Vec<u64>, String> {
        let parsed: Vec<Vec<u64>> = shapes
            .iter()
            .map(|s| parse_shape(s))
            .collect::<Result<_, _>>()
            .map_err(|e| e.to_string())?;
        broadcast(&parsed).map_err(|e| e.to_string())
    }

    #[test]
    fn numpy_examples() {
        assert_eq!(b(&["5,2,1", "2,3"]), Ok(vec![5, 2, 3]));
        assert_eq!(b(&["8,1,6,1", "7,1,5"]), Ok(vec![8, 7, 6, 5]));
        assert_eq!(b(&["256 256 3", "(3)"]), Ok(vec![256, 256, 3]));
        assert_eq!(b(&["", "2,3"]), Ok(vec![2, 3]));
        assert_eq!(b(&["()", "()"]), Ok(vec![]));
        assert_eq!(b(&["1", "1,1"]), Ok(vec![1, 1]));
        assert_eq!(b(&["15,3,5", "15,1,5", "3,1"]), Ok(vec![15, 3, 5]));
    }

    #[test]
    fn mismatches_and_bad_shapes() {
        assert_eq!(
            b(&["2,3", "4"]),
            Err("shapes (2, 3) and (4,) do not broadcast: at axis -1, sizes 3 and 4 differ and neither is 1".into())
        );
        assert!(b(&["2,1", "8,4,3"])
            .unwrap_err()
            .contains("at axis -2, sizes"));
        // The solver broadcasts empty axes as numpy does.
        assert_eq!(b(&["2,0", "1,0"]), Ok(vec![2, 0]));
        assert!(b(&["2,0", "2,3"])
            .unwrap_err()
            .contains("sizes 0 and 3 differ"));
        assert!(b(&["2,x"]).unwrap_err().contains("`x` is not a size"));
        assert!(b(&["(2,3"]).unwrap_err().contains("not closed"));
        assert_eq!(
            b(&["-1,2"]).unwrap_err(),
            "shape `-1,2`: the size `-1` is negative (sizes are whole numbers, 0 or more)"
        );
        assert!(b(&["99999999999999999999"])
            .unwrap_err()
            .contains("does not fit in 64 bits"));
        let e = b(&["2\x1b[2J,\x07"]).unwrap_err();
        assert!(!e.chars().any(char::is_control), "{e:?}");
        assert!(e.contains("\\u{1b}[2J"), "{e}");
        assert!(b(&[]).unwrap_err().contains("at least one shape"));
    }
}
