//! Inference tests written as programs: a `.shape` program as a string,
//! and every shape inferred for it beside it in an inline snapshot, in the
//! style of rust-analyzer's type-inference tests.
//!
//! ```
//! use shape_lang::inference::infer;
//! let shapes = infer(
//!     r"
//!     input x: 4|8
//!     param w
//!     y = w @ x
//!     require y: 4|->3
//!     ",
//! );
//! assert_eq!(shapes, "x : 4|->8\nw : |8->3\ny : 4|->3\n");
//! ```
//!
//! In a test, the expected text goes in an inline snapshot:
//! `insta::assert_snapshot!(infer(PROGRAM), @"...")`. A program that fails
//! renders its error instead, placed on its line, with the lines its facts
//! came from.

use crate::compile::{compile, Compiled};
use crate::syntax::parse;
use crate::ProgramError;

/// Every tensor of `program` (the text language of `shapec`, see
/// `docs/program-language.md`) with its inferred shape, one per line in
/// creation order (intermediate results included, named `y.1`, `y.2`, ...),
/// run-time sizes as symbols, then the named sizes and the guards on
/// run-time sizes; or, when the program does not parse, compile or solve,
/// its error.
///
/// The program may be indented as a whole (a raw string inside a test):
/// the common indentation is removed first, and line numbers in errors
/// count from the first line of the string.
pub fn infer(program: &str) -> String {
    let text = dedent(program);
    let compiled = match parse(&text)
        .map_err(ProgramError::from)
        .and_then(|p| compile(&p))
    {
        Ok(c) => c,
        Err(e) => return render_error(&text, &e),
    };
    match compiled.solve() {
        Ok(solved) => {
            let graph = &compiled.graph;
            let mut rows: Vec<(String, String)> = graph
                .tensor_ids()
                .map(|t| {
                    let name = graph.name(t).unwrap_or("?").to_string();
                    let shape = match solved.symbolic_shape(t) {
                        Ok(s) => s.to_string(),
                        Err(e) => format!("error: {e}"),
                    };
                    (name, shape)
                })
                .collect();
            // The program's named sizes, after its tensors.
            rows.extend(graph.sizes().map(|(s, name)| {
                let value = match solved.size_dim(s) {
                    Ok(v) => v.extent().to_string(),
                    Err(e) => format!("error: {e}"),
                };
                (format!("size {name}"), value)
            }));
            // What run-time sizes must satisfy, after the sizes.
            rows.extend(
                solved
                    .guards()
                    .iter()
                    .map(|g| ("guard".to_string(), g.requires())),
            );
            let width = rows.iter().map(|(n, _)| n.len()).max().unwrap_or(0);
            rows.iter()
                .map(|(n, s)| format!("{n:<width$} : {s}\n"))
                .collect()
        }
        Err(e) => render_error(&text, &e),
    }
}

/// `error[kind] line N: message`, then a line for each place a fact in it
/// came from.
fn render_error(text: &str, e: &ProgramError) -> String {
    let line = |offset: usize| Compiled::line_of(text, offset);
    let at = e
        .span()
        .map(|s| format!(" line {}", line(s.start)))
        .unwrap_or_default();
    let mut out = format!("error[{}]{at}: {e}\n", e.kind());
    if let ProgramError::Graph { notes, .. } = e {
        for n in notes {
            out += &format!("  line {}: {}\n", line(n.span.start), n.text);
        }
    }
    out
}

/// `text` without its first line when that is blank, and without the
/// indentation all its other non-blank lines share.
fn dedent(text: &str) -> String {
    let text = match text.split_once('\n') {
        Some((first, rest)) if first.trim().is_empty() => rest,
        _ => text,
    };
    let indent = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    text.lines()
        .map(|l| l.get(indent..).unwrap_or(l.trim_start()))
        .map(|l| format!("{l}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dedent_keeps_lines_and_relative_indentation() {
        assert_eq!(dedent("\n    a\n      b\n\n    c\n  "), "a\n  b\n\nc\n\n");
        assert_eq!(dedent("a\nb"), "a\nb\n");
    }

    #[test]
    fn errors_are_placed_on_their_line() {
        let out = infer(
            "
            input x: 8|784
            param w
            input z: 8|100
            y = w @ x
            v = w @ z
            ",
        );
        assert!(out.starts_with("error[dim_mismatch] line 5: "), "{out}");
        assert!(out.contains("  line 1: "), "{out}");
        assert!(out.contains("  line 3: "), "{out}");
        assert!(infer("y = ").starts_with("error[syntax] line 1: "));
    }
}
