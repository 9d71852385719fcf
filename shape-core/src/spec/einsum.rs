//! Einsum specs: `ls1;ls2=>ls3` (binary) and `ls1=>ls2` (unary, a permute).

use std::collections::{HashMap, HashSet};
use std::fmt;

use super::parse::{self, Mode};
use super::{AxisKind, RowVarName, ShapeSpec, Span, SpecError};

/// A parsed einsum spec: operand specs on the left of `=>`, the result spec
/// on its right.
///
/// Labels line up axes across the operands and the result; a label missing
/// from the result is reduced over. Row variables work like labels for
/// whole groups of leading axes. A digit is a fixed index (OCANNL's
/// reading): in an operand it selects that position of the axis, in the
/// result it places the values at that position; either way the axis has
/// at least index + 1 elements. A size is written `label:size`, a label
/// tied across the spec like any other. A row the spec does not write is
/// empty, except the batch row when no part of the spec writes one: then
/// it is one row variable shared by every operand and the result (`...`).
///
/// ```
/// use shape_core::spec::EinsumSpec;
/// let mm = EinsumSpec::parse("ij;jk=>ik").unwrap();
/// assert_eq!(mm.operands.len(), 2);
/// assert_eq!(mm.reduced_labels(), vec!["j".to_string()]);
/// assert!(EinsumSpec::parse("ij;jk=>iz").is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EinsumSpec {
    /// The operands' specs, one or two.
    pub operands: Vec<ShapeSpec>,
    /// The result's spec.
    pub result: ShapeSpec,
}

impl EinsumSpec {
    /// Parses and checks an einsum spec.
    pub fn parse(text: &str) -> Result<EinsumSpec, SpecError> {
        let err = |span: Span, expected: &str, found: String| SpecError {
            spec: text.to_string(),
            span,
            expected: expected.to_string(),
            found,
        };
        let arrows: Vec<usize> = text.match_indices("=>").map(|(i, _)| i).collect();
        let arrow = match arrows.as_slice() {
            [a] => *a,
            [] => {
                return Err(err(
                    text.len()..text.len(),
                    "`=>` between operands and result",
                    "end of spec".into(),
                ))
            }
            [_, b, ..] => return Err(err(*b..*b + 2, "exactly one `=>`", "a second `=>`".into())),
        };
        let mut sections = Vec::new();
        let mut start = 0;
        for (i, _) in text[..arrow].match_indices(';') {
            sections.push(start..i);
            start = i + 1;
        }
        sections.push(start..arrow);
        if sections.len() > 2 {
            let s = sections[2].start - 1;
            return Err(err(
                s..s + 1,
                "one or two operands",
                "a third operand".into(),
            ));
        }
        let result_span = arrow + 2..text.len();
        let mut all = sections.clone();
        all.push(result_span.clone());
        let mode = Mode::of(text, &all);
        let operands = sections
            .into_iter()
            .map(|s| parse::shape_spec(text, s, mode, parse::Digits::Indices))
            .collect::<Result<Vec<_>, _>>()?;
        let result = parse::shape_spec(text, result_span, mode, parse::Digits::Indices)?;
        let spec = EinsumSpec { operands, result };
        spec.check(text)?;
        Ok(spec)
    }

    fn check(&self, text: &str) -> Result<(), SpecError> {
        let err = |span: Span, expected: &str, found: String| SpecError {
            spec: text.to_string(),
            span,
            expected: expected.to_string(),
            found,
        };
        // Every name is either a dim label or a row variable, never both.
        let mut dim_names: HashMap<&str, Span> = HashMap::new();
        let mut row_names: HashMap<&str, Span> = HashMap::new();
        for spec in self.operands.iter().chain([&self.result]) {
            for (_, axis) in spec.axes() {
                if axis.kind == AxisKind::Ragged {
                    return Err(err(
                        axis.span.clone(),
                        "an axis label (an einsum names axes; `var`, a ragged axis, belongs in a shape spec)",
                        "`var`".into(),
                    ));
                }
                for l in axis_labels(&axis.kind) {
                    dim_names.entry(l).or_insert(axis.span.clone());
                }
            }
            for (_, name, span) in spec.row_vars() {
                if let RowVarName::Named(n) = name {
                    row_names.entry(n).or_insert(span.clone());
                }
            }
        }
        for (name, span) in &row_names {
            if dim_names.contains_key(name) {
                return Err(err(
                    span.clone(),
                    "a row variable name that is not also an axis label",
                    format!("`{name}` used as both"),
                ));
            }
        }
        // The result may only use what some operand has. The operands'
        // labels and row variables are gathered once, so that the check is
        // linear in the number of labels.
        let operand_labels: HashSet<&str> = self
            .operands
            .iter()
            .flat_map(|o| o.axes())
            .flat_map(|(_, a)| axis_labels(&a.kind))
            .collect();
        let operand_row_vars: HashSet<&RowVarName> = self
            .operands
            .iter()
            .flat_map(|o| o.row_vars().map(|(_, n, _)| n))
            .collect();
        for (_, axis) in self.result.axes() {
            match &axis.kind {
                AxisKind::Label(l) => {
                    if !operand_labels.contains(l.as_str()) {
                        return Err(err(
                            axis.span.clone(),
                            "a result label that appears in an operand",
                            format!("`{l}`, which no operand has"),
                        ));
                    }
                }
                AxisKind::Anonymous => {
                    return Err(err(
                        axis.span.clone(),
                        "a named axis in the result",
                        "`_`".into(),
                    ));
                }
                // A labeled size the operands do not have is a new axis of
                // that size, which the result broadcasts along.
                AxisKind::Size(_)
                | AxisKind::LabeledSize(..)
                | AxisKind::Fixed(_)
                | AxisKind::Ragged => {}
                AxisKind::Affine(_) => {
                    return Err(err(
                        axis.span.clone(),
                        "an affine index in an operand (the input it slides over)",
                        "one in the result".into(),
                    ));
                }
            }
        }
        // An affine index's output label is a result axis; its kernel is an
        // axis of another operand, or has its size written (`k:3`).
        let result_labels: HashSet<&str> = self
            .result
            .axes()
            .flat_map(|(_, a)| axis_labels(&a.kind))
            .collect();
        // A kernel that only affine indices name is a loop of its own per
        // index: one label for two of them would read a full window where
        // a tied label means one diagonal.
        let mut taps_labels: HashSet<&str> = HashSet::new();
        for (i, o) in self.operands.iter().enumerate() {
            for (_, axis) in o.axes() {
                let AxisKind::Affine(a) = &axis.kind else {
                    continue;
                };
                if let Some((k, Some(_))) = &a.kernel {
                    if !taps_labels.insert(k.as_str()) {
                        return Err(err(
                            axis.span.clone(),
                            "a kernel size label (`k:3`) used by one affine index only",
                            format!("`{k}` again: give each window's kernel its own label"),
                        ));
                    }
                }
                if !result_labels.contains(a.over.as_str()) {
                    return Err(err(
                        axis.span.clone(),
                        "an affine index whose output label the result has",
                        format!("`{}`, which the result does not have", a.over),
                    ));
                }
                if let Some((k, None)) = &a.kernel {
                    let elsewhere = self.operands.iter().enumerate().any(|(j, p)| {
                        j != i
                            && p.axes().any(|(_, b)| {
                                matches!(&b.kind, AxisKind::Label(l) | AxisKind::LabeledSize(l, _) if l == k)
                            })
                    });
                    if !elsewhere {
                        return Err(err(
                            axis.span.clone(),
                            "a kernel label that another operand has, or its size (`k:3`)",
                            format!("`{k}`, which no other operand has"),
                        ));
                    }
                }
            }
        }
        for (_, name, span) in self.result.row_vars() {
            let found = operand_row_vars.contains(name);
            let implicit = matches!(name, RowVarName::OfKind(_));
            if !found && !implicit {
                return Err(err(
                    span.clone(),
                    "a result row variable that appears in an operand",
                    format!("`{name}`, which no operand has"),
                ));
            }
        }
        Ok(())
    }

    /// Labels that appear in an operand but not in the result: the
    /// contraction (reduction) axes, sorted.
    pub fn reduced_labels(&self) -> Vec<String> {
        let in_result: HashSet<&AxisKind> = self.result.axes().map(|(_, a)| &a.kind).collect();
        let mut out: Vec<String> = self
            .operands
            .iter()
            .flat_map(|o| o.axes())
            .filter_map(|(_, a)| match &a.kind {
                AxisKind::Label(l) if !in_result.contains(&a.kind) => Some(l.clone()),
                _ => None,
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// The labels an axis entry names: its own, or an affine index's output
/// and kernel labels.
fn axis_labels(kind: &AxisKind) -> Vec<&str> {
    match kind {
        AxisKind::Label(l) | AxisKind::LabeledSize(l, _) => vec![l.as_str()],
        AxisKind::Affine(a) => {
            let mut out = vec![a.over.as_str()];
            out.extend(a.kernel.as_ref().map(|(k, _)| k.as_str()));
            out
        }
        AxisKind::Size(_) | AxisKind::Fixed(_) | AxisKind::Anonymous | AxisKind::Ragged => {
            Vec::new()
        }
    }
}

impl fmt::Display for EinsumSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let all: Vec<&ShapeSpec> = self.operands.iter().chain([&self.result]).collect();
        let mut printed = super::format_shape_specs(&all);
        let result = printed.pop().unwrap_or_default();
        write!(f, "{}=>{result}", printed.join(";"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A spec with many labels is checked in one pass (the bench
    /// `einsum_parse` measures the growth): every result label found, every
    /// missing one reduced, and a label no operand has still refused.
    #[test]
    fn many_labels_are_checked() {
        let n = 50_000;
        let labels: Vec<String> = (0..n).map(|i| format!("a{i}")).collect();
        let kept = labels[..n / 2].join(", ");
        let spec = EinsumSpec::parse(&format!("{}=>{kept}", labels.join(", "))).unwrap();
        assert_eq!(spec.result.output.axes.len(), n / 2);
        let reduced = spec.reduced_labels();
        assert_eq!(reduced.len(), n / 2);
        assert!(reduced.contains(&labels[n - 1]));
        assert!(!reduced.contains(&labels[0]));
        let e = EinsumSpec::parse(&format!("{}=>{kept}, zz", labels.join(", "))).unwrap_err();
        assert_eq!(e.found, "`zz`, which no operand has");
        let e = EinsumSpec::parse("..r..i;..s..j=>..t..i").unwrap_err();
        assert_eq!(e.found, "`..t..`, which no operand has");
    }
}
