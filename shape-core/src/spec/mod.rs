//! The spec notation: `batch|input->output` shape specs and einsum specs.
//!
//! A shape spec has up to three rows: `batch|input->output`, `input->output`
//! or just `output`. A row lists its axes in one of two modes:
//!
//! * single-character mode, when no row contains a comma, a colon or inner
//!   whitespace: every letter is one axis label and every run of digits is
//!   one fixed size (`ij`, `b3`, `..b..hw`);
//! * multi-character mode otherwise: axes are separated by commas or
//!   whitespace (`batch, 784`, `h w`, `rgb:3`); a trailing comma is allowed.
//!
//! Axis entries: a label (a dimension variable local to the spec), `_` (an
//! anonymous variable), `var` (a ragged axis, in multi-character mode), digits (a fixed size; 0 is an empty axis), `label:digits` (a
//! fixed size with a label), and `..name..` (a row variable standing for any
//! number of leading axes; it must come first in its row). `...` is the row
//! variable named after the row it is in, shared by all operands of an einsum.

mod einsum;
mod parse;

use std::fmt;
use std::num::NonZeroU64;
use std::ops::Range;

pub use einsum::EinsumSpec;

use crate::row::RowKind;

/// A byte range in the spec text.
pub type Span = Range<usize>;

/// A malformed spec: where, what was expected, and what was found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid spec `{spec}` at bytes {}..{}: expected {expected}, found {found}", span.start, span.end)]
pub struct SpecError {
    /// The whole spec text.
    pub spec: String,
    /// The offending bytes.
    pub span: Span,
    /// What the parser expected there.
    pub expected: String,
    /// What it found instead.
    pub found: String,
}

/// What one axis entry of a spec says.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum AxisKind {
    /// A named dimension variable, local to the spec.
    Label(String),
    /// A fixed size (0 is an empty axis).
    Size(u64),
    /// A fixed size with a semantic label, written `label:size`.
    LabeledSize(String, u64),
    /// `_`: a fresh, anonymous dimension variable.
    Anonymous,
    /// A digit in an einsum spec: a fixed index into the axis (OCANNL's
    /// reading). Shape specs read digits as sizes.
    Fixed(u64),
    /// `var`: a ragged axis, whose length differs from one position of the
    /// axes before it (in memory order) to the next. Shape specs in
    /// multi-character mode only; an einsum refuses it.
    Ragged,
    /// An affine (convolution) index in an einsum operand:
    /// `stride*over=+dilation*kernel` (see [`AffineIndex`]).
    Affine(Box<AffineIndex>),
}

/// A convolution's input axis, as OCANNL writes it:
/// `[stride*]over(=|<)[+[dilation*]kernel[:size]]`, `=` for padding (the
/// input has `stride × over` elements) and `<` for none (the input has
/// `stride × (over − 1) + dilation × (kernel − 1) + 1`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AffineIndex {
    /// How far the window moves per output element.
    pub stride: NonZeroU64,
    /// The output label.
    pub over: String,
    /// Whether the input is padded (`=`) or not (`<`).
    pub padded: bool,
    /// The spacing of the kernel's taps.
    pub dilation: NonZeroU64,
    /// The kernel label (absent: a kernel of one tap), with its size when
    /// written (`k:3`).
    pub kernel: Option<(String, Option<NonZeroU64>)>,
}

impl fmt::Display for AffineIndex {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.stride.get() != 1 {
            write!(f, "{}*", self.stride)?;
        }
        write!(f, "{}{}", self.over, if self.padded { "=" } else { "<" })?;
        if let Some((k, size)) = &self.kernel {
            f.write_str("+")?;
            if self.dilation.get() != 1 {
                write!(f, "{}*", self.dilation)?;
            }
            f.write_str(k)?;
            if let Some(n) = size {
                write!(f, ":{n}")?;
            }
        }
        Ok(())
    }
}

/// Where a spec writes a name (see [`ShapeSpec::find`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpecPlace {
    /// A label, in row `kind`: entry `index` of the axes before the row
    /// variable (`leading`) or of those after it (all of a row without one).
    Axis {
        /// The row.
        kind: RowKind,
        /// Whether it is in the leading flank.
        leading: bool,
        /// Its index within that flank, from the left.
        index: usize,
    },
    /// The row variable of row `kind`.
    RowVar {
        /// The row.
        kind: RowKind,
    },
}

/// One axis entry with its place in the spec text.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AxisSpec {
    /// What the entry says.
    pub kind: AxisKind,
    /// Where it is in the spec text.
    pub span: Span,
}

/// The name of a row variable in a spec.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum RowVarName {
    /// `..name..`
    Named(String),
    /// `...`: the variable named after the row kind it appears in.
    OfKind(RowKind),
}

impl fmt::Display for RowVarName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RowVarName::Named(n) => write!(f, "..{n}.."),
            RowVarName::OfKind(_) => f.write_str("..."),
        }
    }
}

/// One row of a spec: axis entries around an optional row variable.
///
/// `a, ..r.., b` has `before = [a]`, `row_var = r` and `axes = [b]`: the
/// row variable stands for the axes between its two flanks. A row without
/// a row variable has all its entries in `axes` and none `before`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct RowSpec {
    /// The entries before the row variable, left to right (its leading
    /// flank); empty when the row has no row variable.
    pub before: Vec<AxisSpec>,
    /// The row variable, with its span.
    pub row_var: Option<(RowVarName, Span)>,
    /// The entries after the row variable (all of them in a row without
    /// one), left to right.
    pub axes: Vec<AxisSpec>,
}

impl RowSpec {
    /// Every axis entry, left to right, both flanks.
    pub fn all_axes(&self) -> impl Iterator<Item = &AxisSpec> {
        self.before.iter().chain(&self.axes)
    }

    fn entries(&self) -> Vec<String> {
        let show = |a: &AxisSpec| match &a.kind {
            AxisKind::Label(l) => l.clone(),
            AxisKind::Size(n) => n.to_string(),
            AxisKind::LabeledSize(l, n) => format!("{l}:{n}"),
            AxisKind::Anonymous => "_".to_string(),
            AxisKind::Ragged => "var".to_string(),
            AxisKind::Fixed(i) => i.to_string(),
            AxisKind::Affine(a) => a.to_string(),
        };
        let mut out = Vec::with_capacity(self.before.len() + self.axes.len() + 1);
        out.extend(self.before.iter().map(show));
        if let Some((name, _)) = &self.row_var {
            out.push(name.to_string());
        }
        out.extend(self.axes.iter().map(show));
        out
    }
}

/// A parsed shape spec: `batch|input->output`, `input->output` or `output`.
///
/// ```
/// use shape_core::spec::{AxisKind, ShapeSpec};
/// let spec = ShapeSpec::parse("b|784->10").unwrap();
/// assert_eq!(spec.output.axes.len(), 1);
/// assert!(matches!(spec.batch.as_ref().unwrap().axes[0].kind, AxisKind::Label(ref l) if l == "b"));
/// assert_eq!(spec.to_string(), "b|784->10");
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ShapeSpec {
    /// The batch row, when the spec has a `|`.
    pub batch: Option<RowSpec>,
    /// The input row, when the spec has a `->`.
    pub input: Option<RowSpec>,
    /// The output row.
    pub output: RowSpec,
}

impl ShapeSpec {
    /// Parses a shape spec.
    pub fn parse(text: &str) -> Result<ShapeSpec, SpecError> {
        let whole: Span = 0..text.len();
        let mode = parse::Mode::of(text, std::slice::from_ref(&whole));
        parse::shape_spec(text, 0..text.len(), mode, parse::Digits::Sizes)
    }

    /// The row of the given kind, if the spec wrote it.
    pub fn row(&self, kind: RowKind) -> Option<&RowSpec> {
        match kind {
            RowKind::Batch => self.batch.as_ref(),
            RowKind::Input => self.input.as_ref(),
            RowKind::Output => Some(&self.output),
        }
    }

    /// Every axis entry with the row it is in.
    pub fn axes(&self) -> impl Iterator<Item = (RowKind, &AxisSpec)> {
        RowKind::ALL.into_iter().flat_map(move |k| {
            self.row(k)
                .into_iter()
                .flat_map(move |r| r.all_axes().map(move |a| (k, a)))
        })
    }

    /// Where the spec writes `name`, as a label (`j`, `n:3`) or as a named
    /// row variable (`..name..`): the first place, rows in the order
    /// batch, input, output.
    ///
    /// ```
    /// use shape_core::spec::{ShapeSpec, SpecPlace};
    /// use shape_core::RowKind;
    /// let s = ShapeSpec::parse("b|a, ..r.., i, j").unwrap();
    /// assert_eq!(s.find("j"), Some(SpecPlace::Axis { kind: RowKind::Output, leading: false, index: 1 }));
    /// assert_eq!(s.find("r"), Some(SpecPlace::RowVar { kind: RowKind::Output }));
    /// assert_eq!(s.find("z"), None);
    /// ```
    pub fn find(&self, name: &str) -> Option<SpecPlace> {
        let is = |a: &AxisSpec| matches!(&a.kind, AxisKind::Label(l) | AxisKind::LabeledSize(l, _) if l == name);
        RowKind::ALL.into_iter().find_map(|kind| {
            let r = self.row(kind)?;
            if let Some(index) = r.before.iter().position(is) {
                return Some(SpecPlace::Axis {
                    kind,
                    leading: true,
                    index,
                });
            }
            if let Some(index) = r.axes.iter().position(is) {
                return Some(SpecPlace::Axis {
                    kind,
                    leading: false,
                    index,
                });
            }
            match &r.row_var {
                Some((RowVarName::Named(n), _)) if n == name => Some(SpecPlace::RowVar { kind }),
                _ => None,
            }
        })
    }

    /// Every row variable with the row it is in.
    pub fn row_vars(&self) -> impl Iterator<Item = (RowKind, &RowVarName, &Span)> {
        RowKind::ALL.into_iter().filter_map(move |k| {
            self.row(k)
                .and_then(|r| r.row_var.as_ref())
                .map(|(n, s)| (k, n, s))
        })
    }
}

impl ShapeSpec {
    /// The printable entries of each row: batch, input, output.
    pub(crate) fn entries(&self) -> [Option<Vec<String>>; 3] {
        [
            self.batch.as_ref().map(RowSpec::entries),
            self.input.as_ref().map(RowSpec::entries),
            Some(self.output.entries()),
        ]
    }
}

/// Formats several specs in one mode.
pub(crate) fn format_shape_specs(specs: &[&ShapeSpec]) -> Vec<String> {
    let entries: Vec<[Option<Vec<String>>; 3]> = specs.iter().map(|s| s.entries()).collect();
    let views: Vec<SpecEntries<'_>> = entries
        .iter()
        .map(|[b, i, o]| SpecEntries {
            batch: b.as_deref(),
            input: i.as_deref(),
            output: o.as_deref().unwrap_or_default(),
        })
        .collect();
    format_specs(&views)
}

impl fmt::Display for ShapeSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_shape_specs(&[self]).remove(0))
    }
}

/// Whether an entry can be written in single-character mode.
fn is_single_char_entry(e: &str) -> bool {
    e.starts_with("..")
        || e.chars().all(|c| c.is_ascii_digit())
        || (e.len() == 1 && e.chars().all(|c| c.is_ascii_alphabetic() || c == '_'))
}

fn is_digits(e: &str) -> bool {
    !e.is_empty() && e.chars().all(|c| c.is_ascii_digit())
}

/// The entries of one spec's rows, ready to print.
pub(crate) struct SpecEntries<'a> {
    pub batch: Option<&'a [String]>,
    pub input: Option<&'a [String]>,
    pub output: &'a [String],
}

impl SpecEntries<'_> {
    fn rows(&self) -> impl Iterator<Item = &[String]> {
        [self.batch, self.input, Some(self.output)]
            .into_iter()
            .flatten()
    }
}

/// Formats specs that are read back together (an einsum's operands and
/// result) in one mode: single-character when that reads back
/// unambiguously, multi-character otherwise.
pub(crate) fn format_specs(specs: &[SpecEntries<'_>]) -> Vec<String> {
    let single = specs.iter().flat_map(|s| s.rows()).all(|r| {
        r.iter().all(|e| is_single_char_entry(e))
            && r.windows(2)
                .all(|w| !(is_digits(&w[0]) && is_digits(&w[1])))
    });
    let sep = if single { "" } else { ", " };
    let marked = specs
        .iter()
        .flat_map(|s| s.rows())
        .any(|r| r.len() > 1 || r.iter().any(|e| e.contains(':')));
    let mut comma_placed = single || marked;
    specs
        .iter()
        .map(|spec| {
            let mut joined: Vec<String> = spec.rows().map(|r| r.join(sep)).collect();
            if !comma_placed {
                // Nothing else would mark multi-character mode: a trailing comma does.
                if let Some(j) = spec.rows().position(|r| r.len() == 1) {
                    joined[j].push(',');
                    comma_placed = true;
                }
            }
            let mut it = joined.into_iter();
            let mut out = String::new();
            if spec.batch.is_some() {
                out.push_str(&it.next().unwrap_or_default());
                out.push('|');
            }
            if spec.input.is_some() {
                out.push_str(&it.next().unwrap_or_default());
                out.push_str("->");
            }
            out.push_str(&it.next().unwrap_or_default());
            out
        })
        .collect()
}

/// Formats up to three rows in the spec notation.
pub(crate) fn format_rows(
    batch: Option<&[String]>,
    input: Option<&[String]>,
    output: &[String],
) -> String {
    format_specs(&[SpecEntries {
        batch,
        input,
        output,
    }])
    .remove(0)
}

/// Writes a full `batch|input->output` shape.
pub(crate) fn write_rows(f: &mut fmt::Formatter<'_>, rows: &[Vec<String>; 3]) -> fmt::Result {
    f.write_str(&format_rows(Some(&rows[0]), Some(&rows[1]), &rows[2]))
}
