//! Showing errors: as source excerpts with underlines (codespan-reporting),
//! or as the stable JSON form `{"error": {"kind", "message", "op", "line"}}`.

use codespan_reporting::diagnostic::{Diagnostic, Label};
use codespan_reporting::files::SimpleFile;
use codespan_reporting::term::{self, termcolor::Ansi, Config};
use serde_json::{json, Value};

use crate::compile::Compiled;
use crate::error::{CliError, ProgramError};

/// A program's text and the name to show for it.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    /// The file name as given.
    pub name: &'a str,
    /// The text.
    pub text: &'a str,
}

fn labels(e: &ProgramError) -> Vec<Label<()>> {
    let primary = |span: &crate::syntax::Span, text: String| {
        Label::primary((), span.clone()).with_message(text)
    };
    let secondary = |span: &crate::syntax::Span, text: String| {
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

/// Renders an error for a terminal: the message, and for errors in a
/// program the source lines with underlines and notes.
pub fn render(e: &CliError, source: Option<Source<'_>>, color: bool) -> String {
    let config = Config::default();
    let file = SimpleFile::new(
        source.map(|s| s.name).unwrap_or("<none>"),
        source.map(|s| s.text).unwrap_or(""),
    );
    let d = diagnostic(e, source.is_some());
    let rendered = if color {
        let mut out = Ansi::new(Vec::new());
        term::emit_to_write_style(&mut out, &config, &file, &d)
            .map(|()| String::from_utf8_lossy(&out.into_inner()).into_owned())
    } else {
        term::emit_into_string(&config, &file, &d)
    };
    // A span outside the text (never expected) still shows the message.
    rendered.unwrap_or_else(|_| format!("error[{}]: {e}\n", e.kind()))
}

/// The JSON form of an error: `{"error": {"kind", "message", "op", "line"}}`
/// with `op` and `line` (from 1) `null` when they do not apply.
pub fn json(e: &CliError, source: Option<&str>) -> Value {
    let (op, line) = match e {
        CliError::Program(p) => (
            p.op().map(str::to_string),
            match (p.span(), source) {
                (Some(span), Some(text)) => Some(Compiled::line_of(text, span.start)),
                _ => None,
            },
        ),
        _ => (None, None),
    };
    json!({
        "error": {
            "kind": e.kind(),
            "message": e.to_string(),
            "op": op,
            "line": line,
        }
    })
}
