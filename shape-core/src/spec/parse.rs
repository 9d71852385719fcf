//! The hand-written parser behind [`ShapeSpec::parse`] and [`EinsumSpec::parse`].

use std::num::NonZeroU64;

use super::{AffineIndex, AxisKind, AxisSpec, RowSpec, RowVarName, ShapeSpec, Span, SpecError};
use crate::row::RowKind;

/// What a digit entry means: a size in shape specs, a position in einsum
/// specs (OCANNL's fixed index).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Digits {
    Sizes,
    Indices,
}

/// How axis entries are delimited.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    SingleChar,
    MultiChar,
}

impl Mode {
    /// Multi-character mode when any row in `sections` holds a comma,
    /// whitespace between entries, or a `label:size` entry.
    pub(crate) fn of(text: &str, sections: &[Span]) -> Mode {
        let multi = sections.iter().any(|s| {
            split_rows(&text[s.clone()]).into_iter().any(|r| {
                let row = text[s.clone()][r].trim();
                // `*`, `+`, `<` and `=` write affine indices (OCANNL's
                // triggers of multi-character mode too).
                row.contains(|c: char| {
                    matches!(c, ',' | ':' | '*' | '+' | '<' | '=') || c.is_whitespace()
                })
            })
        });
        if multi {
            Mode::MultiChar
        } else {
            Mode::SingleChar
        }
    }
}

fn err(text: &str, span: Span, expected: &str, found: &str) -> SpecError {
    SpecError {
        spec: text.to_string(),
        span,
        expected: expected.to_string(),
        found: found.to_string(),
    }
}

fn describe(text: &str, span: &Span) -> String {
    if span.start >= text.len() {
        "end of spec".to_string()
    } else {
        format!("`{}`", &text[span.clone()])
    }
}

/// Byte ranges of the row sections of one shape spec (relative to `s`),
/// without validation; used for mode detection.
fn split_rows(s: &str) -> Vec<Span> {
    let mut cuts = vec![0];
    let mut ends = Vec::new();
    if let Some(p) = s.find('|') {
        ends.push(p);
        cuts.push(p + 1);
    }
    if let Some(p) = s.find("->") {
        ends.push(p);
        cuts.push(p + 2);
    }
    ends.push(s.len());
    cuts.into_iter()
        .zip(ends)
        .filter(|(a, b)| a <= b)
        .map(|(a, b)| a..b)
        .collect()
}

/// Parses the shape spec in `text[span]`.
pub(crate) fn shape_spec(
    text: &str,
    span: Span,
    mode: Mode,
    digits: Digits,
) -> Result<ShapeSpec, SpecError> {
    let s = &text[span.clone()];
    let at = |i: usize| span.start + i;
    let bars: Vec<usize> = s.match_indices('|').map(|(i, _)| i).collect();
    let arrows: Vec<usize> = s.match_indices("->").map(|(i, _)| i).collect();
    if bars.len() > 1 {
        return Err(err(
            text,
            at(bars[1])..at(bars[1] + 1),
            "at most one `|`",
            "a second `|`",
        ));
    }
    if arrows.len() > 1 {
        return Err(err(
            text,
            at(arrows[1])..at(arrows[1] + 2),
            "at most one `->`",
            "a second `->`",
        ));
    }
    let bar = bars.first().copied();
    let arrow = arrows.first().copied();
    if let (Some(b), Some(a)) = (bar, arrow) {
        if a < b {
            return Err(err(
                text,
                at(b)..at(b + 1),
                "the batch row before the input row (`batch|input->output`)",
                "`|` after `->`",
            ));
        }
    }
    let out_start = arrow.map(|a| a + 2).or(bar.map(|b| b + 1)).unwrap_or(0);
    let batch = match bar {
        Some(b) => Some(row(text, at(0)..at(b), (mode, digits), RowKind::Batch)?),
        None => None,
    };
    let input = match arrow {
        Some(a) => {
            let start = bar.map(|b| b + 1).unwrap_or(0);
            Some(row(text, at(start)..at(a), (mode, digits), RowKind::Input)?)
        }
        None => None,
    };
    let output = row(
        text,
        at(out_start)..span.end,
        (mode, digits),
        RowKind::Output,
    )?;
    Ok(ShapeSpec {
        batch,
        input,
        output,
    })
}

/// A size: any whole number below 2^64, 0 (an empty axis) included.
fn parse_size(text: &str, span: Span) -> Result<u64, SpecError> {
    let digits = &text[span.clone()];
    digits.parse().map_err(|_| {
        err(
            text,
            span,
            "a size that fits in 64 bits",
            &format!("`{digits}`"),
        )
    })
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident(s: &str) -> bool {
    let mut cs = s.chars();
    matches!(cs.next(), Some(c) if is_ident_start(c))
        && cs.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses a row variable starting at `start` (which begins with `..`);
/// returns it and the index just past it.
fn row_var(
    text: &str,
    start: usize,
    end: usize,
    kind: RowKind,
) -> Result<(RowVarName, Span), SpecError> {
    let rest = &text[start..end];
    if rest.starts_with("...") && !rest[3..].starts_with('.') {
        // `...` unless it is `...name..` (which is malformed anyway).
        let after = &rest[3..];
        if after.is_empty()
            || !after.starts_with(|c: char| c.is_ascii_alphanumeric())
            || !after.contains("..")
        {
            return Ok((RowVarName::OfKind(kind), start..start + 3));
        }
    }
    let body = &rest[2..];
    let close = body.find("..").ok_or_else(|| {
        err(
            text,
            start..end,
            "a row variable `..name..` closed by `..`",
            &describe(text, &(start..end)),
        )
    })?;
    let name = &body[..close];
    let span = start..start + 2 + close + 2;
    if !is_ident(name) || name == "_" {
        return Err(err(
            text,
            span,
            "a row variable name made of letters, digits and `_`",
            &format!("`{name}`"),
        ));
    }
    Ok((RowVarName::Named(name.to_string()), span))
}

fn push_row_var(text: &str, out: &mut RowSpec, var: (RowVarName, Span)) -> Result<(), SpecError> {
    if out.row_var.is_some() {
        return Err(err(
            text,
            var.1,
            "at most one row variable per row",
            "a second row variable",
        ));
    }
    // Axes written so far lead the row variable (its leading flank).
    out.before = std::mem::take(&mut out.axes);
    out.row_var = Some(var);
    Ok(())
}

/// What a reserved entry is reserved for, described for an error: the
/// notation of features still to come is refused, never read as
/// something else.
fn reserved(entry: &str) -> Option<String> {
    let what = if entry.starts_with('?') {
        "an unnamed size known only at run time: name it instead (`b` for `?`) and declare \
         the name a run-time size (`size b` alone in a program)"
    } else if entry.contains(['*', '+', '<', '=']) {
        "an affine (convolution) index, which only einsum operands take"
    } else if entry.contains('^') {
        "concatenation inside a spec, which is not supported: concatenate with the \
         operation `concat(a, b)`"
    } else if entry.contains('&') {
        "OCANNL's notation, which is not supported yet"
    } else {
        return None;
    };
    Some(format!("`{entry}`, reserved for {what}"))
}

/// Parses one row section `text[span]`.
fn row(
    text: &str,
    span: Span,
    (mode, digits): (Mode, Digits),
    kind: RowKind,
) -> Result<RowSpec, SpecError> {
    match mode {
        Mode::SingleChar => single_char_row(text, span, digits, kind),
        Mode::MultiChar => multi_char_row(text, span, digits, kind),
    }
}

/// An affine index `[stride*]over(=|<)[+[dilation*]kernel[:size]]` at
/// `text[span]`.
fn affine(text: &str, span: Span) -> Result<AffineIndex, SpecError> {
    let tok = &text[span.clone()];
    let fail = |found: String| {
        err(
            text,
            span.clone(),
            "an affine index `stride*over=+dilation*kernel` (`=` pads the input, `<` does not)",
            &found,
        )
    };
    // `[n*]name`: a factor (1 when absent) and a label.
    let term = |s: &str| -> Option<(NonZeroU64, String)> {
        let (n, name) = match s.split_once('*') {
            Some((n, name)) => (n.parse::<u64>().ok().and_then(NonZeroU64::new)?, name),
            None => (NonZeroU64::MIN, s),
        };
        (is_ident(name) && name != "_").then(|| (n, name.to_string()))
    };
    let Some(cut) = tok.find(['=', '<']) else {
        return Err(fail(format!(
            "`{tok}` without `=` (padding) or `<` (no padding) after its output label"
        )));
    };
    let padded = tok.as_bytes()[cut] == b'=';
    let (stride, over) = term(&tok[..cut])
        .ok_or_else(|| fail(format!("`{}` before `{}`", &tok[..cut], &tok[cut..cut + 1])))?;
    let rest = &tok[cut + 1..];
    let (dilation, kernel) = if rest.is_empty() {
        (NonZeroU64::MIN, None)
    } else {
        let k = rest.strip_prefix('+').ok_or_else(|| {
            fail(format!(
                "`{rest}` after the padding mark, where `+kernel` goes"
            ))
        })?;
        let (k, size) = match k.split_once(':') {
            Some((k, n)) => {
                let n = n.parse::<u64>().ok().and_then(NonZeroU64::new);
                (
                    k,
                    Some(n.ok_or_else(|| {
                        fail(format!("`{tok}`: a kernel size of at least 1 after `:`"))
                    })?),
                )
            }
            None => (k, None),
        };
        let (dilation, label) = term(k).ok_or_else(|| {
            fail(format!(
                "`{k}` as the kernel (an offset such as `+1` is not supported)"
            ))
        })?;
        (dilation, Some((label, size)))
    };
    Ok(AffineIndex {
        stride,
        over,
        padded,
        dilation,
        kernel,
    })
}

/// A digit entry: a size, or in an einsum spec a fixed index (which may
/// be 0).
fn digit_axis(text: &str, span: Span, digits: Digits) -> Result<AxisKind, SpecError> {
    match digits {
        Digits::Sizes => parse_size(text, span).map(AxisKind::Size),
        Digits::Indices => {
            let entry = &text[span.clone()];
            entry.parse().map(AxisKind::Fixed).map_err(|_| {
                err(
                    text,
                    span,
                    "a fixed index that fits in 64 bits",
                    &format!("`{entry}`"),
                )
            })
        }
    }
}

fn single_char_row(
    text: &str,
    span: Span,
    digits: Digits,
    kind: RowKind,
) -> Result<RowSpec, SpecError> {
    let mut out = RowSpec::default();
    let bytes = text.as_bytes();
    let mut i = span.start;
    while i < span.end {
        let c = text[i..].chars().next().unwrap_or(' ');
        if c.is_whitespace() {
            i += c.len_utf8();
        } else if text[i..span.end].starts_with("..") {
            let var = row_var(text, i, span.end, kind)?;
            i = var.1.end;
            push_row_var(text, &mut out, var)?;
        } else if c.is_ascii_digit() {
            let start = i;
            while i < span.end && bytes[i].is_ascii_digit() {
                i += 1;
            }
            out.axes.push(AxisSpec {
                kind: digit_axis(text, start..i, digits)?,
                span: start..i,
            });
        } else if is_ident_start(c) {
            let start = i;
            i += 1;
            let kind = if c == '_' {
                AxisKind::Anonymous
            } else {
                AxisKind::Label(c.to_string())
            };
            out.axes.push(AxisSpec {
                kind,
                span: start..i,
            });
        } else {
            let end = i + c.len_utf8();
            return Err(err(
                text,
                i..end,
                "an axis label, a size, or a row variable `..name..`",
                &reserved(&text[i..end]).unwrap_or_else(|| format!("`{c}`")),
            ));
        }
    }
    Ok(out)
}

fn multi_char_row(
    text: &str,
    span: Span,
    digits: Digits,
    kind: RowKind,
) -> Result<RowSpec, SpecError> {
    let mut out = RowSpec::default();
    let mut i = span.start;
    while i < span.end {
        let c = text[i..].chars().next().unwrap_or(' ');
        if c == ',' || c.is_whitespace() {
            i += c.len_utf8();
            continue;
        }
        let start = i;
        while i < span.end {
            let c = text[i..].chars().next().unwrap_or(' ');
            if c == ',' || c.is_whitespace() {
                break;
            }
            i += c.len_utf8();
        }
        let tok = &text[start..i];
        if tok.starts_with("..") {
            let var = row_var(text, start, i, kind)?;
            if var.1.end != i {
                return Err(err(
                    text,
                    var.1.end..i,
                    "a separator after the row variable",
                    &describe(text, &(var.1.end..i)),
                ));
            }
            push_row_var(text, &mut out, var)?;
        } else if tok.chars().all(|c| c.is_ascii_digit()) {
            out.axes.push(AxisSpec {
                kind: digit_axis(text, start..i, digits)?,
                span: start..i,
            });
        } else if digits == Digits::Indices && tok.contains(['*', '+', '<', '=']) {
            out.axes.push(AxisSpec {
                kind: AxisKind::Affine(Box::new(affine(text, start..i)?)),
                span: start..i,
            });
        } else if let Some((label, size)) = tok.split_once(':') {
            if !is_ident(label) || label == "_" {
                return Err(err(
                    text,
                    start..start + label.len(),
                    "a label before `:`",
                    &format!("`{label}`"),
                ));
            }
            let ds = start + label.len() + 1;
            if size.is_empty() || !size.chars().all(|c| c.is_ascii_digit()) {
                return Err(err(
                    text,
                    start..i,
                    "`label:size` with digits after `:`",
                    &format!("`{tok}`"),
                ));
            }
            let n = parse_size(text, ds..i)?;
            out.axes.push(AxisSpec {
                kind: AxisKind::LabeledSize(label.to_string(), n),
                span: start..i,
            });
        } else if tok == "_" {
            out.axes.push(AxisSpec {
                kind: AxisKind::Anonymous,
                span: start..i,
            });
        } else if tok == "var" {
            out.axes.push(AxisSpec {
                kind: AxisKind::Ragged,
                span: start..i,
            });
        } else if is_ident(tok) {
            out.axes.push(AxisSpec {
                kind: AxisKind::Label(tok.to_string()),
                span: start..i,
            });
        } else {
            return Err(err(
                text,
                start..i,
                "an axis label, a size, `label:size`, or a row variable `..name..`",
                &reserved(tok).unwrap_or_else(|| format!("`{tok}`")),
            ));
        }
    }
    Ok(out)
}
