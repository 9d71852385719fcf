//! Showing errors: as source excerpts with underlines (codespan-reporting),
//! or as the stable JSON form `{"error": {"kind", "message", "op", "line"}}`.

use codespan_reporting::diagnostic::{Diagnostic, Label, LabelStyle};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor::Ansi, Config};
use serde_json::{json, Value};

use crate::error::{CliError, ProgramError};
use shape_lang::compile::Compiled;

/// A program's text and the name to show for it.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    /// The file name as given.
    pub name: &'a str,
    /// The text.
    pub text: &'a str,
}

fn labels(e: &ProgramError) -> Vec<Label<()>> {
    let primary = |span: &shape_lang::syntax::Span, text: String| {
        Label::primary((), span.clone()).with_message(text)
    };
    let secondary = |span: &shape_lang::syntax::Span, text: String| {
        Label::secondary((), span.clone()).with_message(text)
    };
    match e {
        ProgramError::Syntax(s) => vec![primary(&s.span, format!("expected {}", s.expected))],
        ProgramError::UnknownName { span, .. } => {
            vec![primary(span, "not defined by any statement above".into())]
        }
        ProgramError::Redefined { span, previous, .. } => vec![
            primary(span, "defined again here".into()),
            secondary(previous, "first defined here".into()),
        ],
        ProgramError::UnknownFunction { span, .. } => {
            vec![primary(span, "no such function".into())]
        }
        ProgramError::Arguments { span, given, .. } => {
            vec![primary(span, format!("given {given}"))]
        }
        ProgramError::InvalidFunction { span, .. } => {
            vec![primary(
                span,
                "not a function that can be an operation".into(),
            )]
        }
        ProgramError::FunctionName { span, found, .. } => {
            vec![primary(span, format!("the WGSL's function is `{found}`"))]
        }
        ProgramError::FunctionRedefined { span, .. } => {
            vec![primary(span, "already a function".into())]
        }
        ProgramError::CallsUnavailable { span } => {
            vec![primary(span, "needs the `call` feature".into())]
        }
        ProgramError::Spec { span, error, .. } => {
            vec![primary(span, format!("expected {}", error.expected))]
        }
        ProgramError::Graph {
            primary: p, notes, ..
        } => p
            .iter()
            .map(|n| primary(&n.span, n.text.clone()))
            .chain(notes.iter().map(|n| secondary(&n.span, n.text.clone())))
            .collect(),
        ProgramError::Run { span, .. } => span
            .iter()
            .map(|s| primary(s, "failed here".into()))
            .collect(),
        ProgramError::SliceOutOfRange { span, size, .. } => span
            .iter()
            .map(|s| {
                let label = match size.checked_sub(1) {
                    Some(last) => format!("takes an index from 0 to {last}"),
                    None => "slices an empty batch axis".to_string(),
                };
                primary(s, label)
            })
            .collect(),
        ProgramError::ConstantTooLarge { span, values, .. } => {
            vec![primary(span, format!("{values} values"))]
        }
    }
}

/// The diagnostic for an error; labels only when the program's text is
/// given.
pub fn diagnostic(e: &CliError, with_source: bool) -> Diagnostic<()> {
    let d = Diagnostic::error()
        .with_code(e.kind())
        .with_message(e.to_string());
    match e {
        CliError::Program(p) if with_source => d.with_labels(labels(p)),
        _ => d,
    }
}

/// Writes warnings about a program for a terminal, like errors. The
/// text's lines are indexed once for all of them (a program may draw one
/// warning per statement).
pub fn render_warnings(
    warnings: &[shape_lang::compile::Warning],
    source: Source<'_>,
    color: bool,
    out: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    if warnings.is_empty() {
        return Ok(());
    }
    let file = SimpleFile::new(source.name, source.text);
    for w in warnings {
        let d = Diagnostic::warning()
            .with_code(w.code)
            .with_message(w.message.clone())
            .with_labels(vec![Label::primary((), w.span.clone())])
            .with_notes(vec![w.note.clone()]);
        let text = emit(&file, &d, color)
            .unwrap_or_else(|| format!("warning[{}]: {}\n", w.code, w.message));
        out.write_all(text.as_bytes())?;
    }
    Ok(())
}

/// A diagnostic as text for a terminal, in colour or not; `None` when a
/// span falls outside the text.
fn emit(file: &SimpleFile<&str, &str>, d: &Diagnostic<()>, color: bool) -> Option<String> {
    let config = Config::default();
    if color {
        let mut out = Ansi::new(Vec::new());
        term::emit_to_write_style(&mut out, &config, file, d)
            .map(|()| String::from_utf8_lossy(&out.into_inner()).into_owned())
            .ok()
    } else {
        term::emit_into_string(&config, file, d).ok()
    }
}

/// Renders an error for a terminal: the message, and for errors in a
/// program the source lines with underlines and notes.
pub fn render(e: &CliError, source: Option<Source<'_>>, color: bool) -> String {
    let file = SimpleFile::new(
        source.map(|s| s.name).unwrap_or("<none>"),
        source.map(|s| s.text).unwrap_or(""),
    );
    let d = diagnostic(e, source.is_some());
    // A span outside the text (never expected) still shows the message.
    emit(&file, &d, color).unwrap_or_else(|| format!("error[{}]: {e}\n", e.kind()))
}

/// The program's warnings in JSON, in order: `[{"kind", "message",
/// "span"}]`, each span as [`span_json`] writes it (the text's lines
/// indexed once for all of them).
pub fn warnings_json(text: &str, warnings: &[shape_lang::compile::Warning]) -> Value {
    let lines = LineIndex::new(text);
    Value::Array(
        warnings
            .iter()
            .map(|w| {
                json!({
                    "kind": w.code,
                    "message": w.message,
                    "span": lines.span_json(text, &w.span),
                })
            })
            .collect(),
    )
}

/// Where each line of a text starts, to find the line of an offset in
/// logarithmic time (a program may have one warning per statement).
pub struct LineIndex {
    starts: Vec<usize>,
}

impl LineIndex {
    /// The index of `text`'s lines.
    pub fn new(text: &str) -> LineIndex {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        LineIndex { starts }
    }

    /// The line (from 1) of a byte offset.
    pub fn line_of(&self, offset: usize) -> usize {
        self.starts.partition_point(|&s| s <= offset).max(1)
    }

    /// [`span_json`], with the line found in this index.
    pub fn span_json(&self, text: &str, span: &shape_lang::syntax::Span) -> Value {
        let start = span.start.min(text.len());
        let line = self.line_of(start);
        let line_start = self.starts[line - 1];
        let column = text
            .get(line_start..start)
            .map_or(1, |s| s.chars().count() + 1);
        json!({
            "start": span.start,
            "end": span.end,
            "line": line,
            "column": column,
        })
    }
}

/// A span of the program text in JSON: `{"start", "end", "line",
/// "column"}`: byte offsets (end exclusive), and the line and column of
/// its start, both from 1, the column counted in characters.
pub fn span_json(text: &str, span: &shape_lang::syntax::Span) -> Value {
    LineIndex::new(text).span_json(text, span)
}

/// The JSON form of an error: `{"error": {"kind", "message", "op", "line",
/// "span", "notes"}}`. `op`, `line` (from 1) and `span` (see [`span_json`])
/// are `null` when they do not apply; `notes` lists the other places the
/// error involves (for a conflict, where each conflicting fact came from),
/// each `{"message", "span"}`.
pub fn json(e: &CliError, source: Option<&str>) -> Value {
    let (op, line, span, notes) = match (e, source) {
        (CliError::Program(p), Some(text)) => {
            let mut primary = Value::Null;
            let mut notes = Vec::new();
            for label in labels(p) {
                let span = span_json(text, &label.range);
                match label.style {
                    LabelStyle::Primary if primary.is_null() => primary = span,
                    _ => notes.push(json!({"message": label.message, "span": span})),
                }
            }
            (
                p.op().map(str::to_string),
                p.span().map(|s| Compiled::line_of(text, s.start)),
                primary,
                notes,
            )
        }
        (CliError::Program(p), None) => (p.op().map(str::to_string), None, Value::Null, vec![]),
        _ => (None, None, Value::Null, vec![]),
    };
    json!({
        "error": {
            "kind": e.kind(),
            "message": e.to_string(),
            "op": op,
            "line": line,
            "span": span,
            "notes": notes,
        }
    })
}
