//! The spec notation: parsing, printing, and their round trip.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use shape_core::spec::{AxisKind, RowVarName, ShapeSpec};
use shape_core::{EinsumSpec, RowKind};

fn axes(spec: &ShapeSpec, kind: RowKind) -> Vec<String> {
    spec.row(kind)
        .map(|r| {
            r.axes
                .iter()
                .map(|a| match &a.kind {
                    AxisKind::Label(l) => l.clone(),
                    AxisKind::Size(n) => n.to_string(),
                    AxisKind::LabeledSize(l, n) => format!("{l}:{n}"),
                    AxisKind::Anonymous => "_".into(),
                    AxisKind::Ragged => "var".into(),
                    AxisKind::Fixed(i) => format!("#{i}"),
                    AxisKind::Affine(a) => format!("affine {a}"),
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn the_three_forms() {
    let s = ShapeSpec::parse("b|i->o").unwrap();
    assert_eq!(
        (
            axes(&s, RowKind::Batch),
            axes(&s, RowKind::Input),
            axes(&s, RowKind::Output)
        ),
        (vec!["b".into()], vec!["i".into()], vec!["o".into()])
    );
    let s = ShapeSpec::parse("i->o").unwrap();
    assert!(s.batch.is_none());
    assert_eq!(axes(&s, RowKind::Input), vec!["i"]);
    let s = ShapeSpec::parse("o").unwrap();
    assert!(s.batch.is_none() && s.input.is_none());
    let s = ShapeSpec::parse("b|o").unwrap();
    assert!(s.input.is_none());
    assert_eq!(axes(&s, RowKind::Batch), vec!["b"]);
    let s = ShapeSpec::parse("").unwrap();
    assert!(s.output.axes.is_empty());
}

#[test]
fn single_character_mode_splits_letters_and_keeps_digit_runs() {
    let s = ShapeSpec::parse("ab12c").unwrap();
    assert_eq!(axes(&s, RowKind::Output), vec!["a", "b", "12", "c"]);
    let s = ShapeSpec::parse("_a_").unwrap();
    assert_eq!(axes(&s, RowKind::Output), vec!["_", "a", "_"]);
}

#[test]
fn multi_character_mode_is_chosen_by_separators_in_any_row() {
    let s = ShapeSpec::parse("batch|height width->rgb:3").unwrap();
    assert_eq!(axes(&s, RowKind::Batch), vec!["batch"]);
    assert_eq!(axes(&s, RowKind::Input), vec!["height", "width"]);
    assert_eq!(axes(&s, RowKind::Output), vec!["rgb:3"]);
    let s = ShapeSpec::parse("ab,").unwrap();
    assert_eq!(axes(&s, RowKind::Output), vec!["ab"]);
    // Spaces around the separators alone do not switch modes.
    let s = ShapeSpec::parse(" ab | c ").unwrap();
    assert_eq!(axes(&s, RowKind::Batch), vec!["a", "b"]);
}

#[test]
fn row_variables_stand_anywhere_in_a_row_once() {
    let s = ShapeSpec::parse("..batch..|..i..x->y").unwrap();
    let vars: Vec<_> = s.row_vars().map(|(k, n, _)| (k, n.clone())).collect();
    assert_eq!(
        vars,
        vec![
            (RowKind::Batch, RowVarName::Named("batch".into())),
            (RowKind::Input, RowVarName::Named("i".into()))
        ]
    );
    let s = ShapeSpec::parse("...|...->x").unwrap();
    let vars: Vec<_> = s.row_vars().map(|(k, n, _)| (k, n.clone())).collect();
    assert_eq!(vars[0].1, RowVarName::OfKind(RowKind::Batch));
    assert_eq!(vars[1].1, RowVarName::OfKind(RowKind::Input));
    // Axes may stand on both sides of a row variable (a leading flank).
    let s = ShapeSpec::parse("x..r..y").unwrap();
    let labels = |axes: &[shape_core::spec::AxisSpec]| -> Vec<String> {
        axes.iter().map(|a| format!("{:?}", a.kind)).collect()
    };
    assert_eq!(labels(&s.output.before), ["Label(\"x\")"]);
    assert_eq!(labels(&s.output.axes), ["Label(\"y\")"]);
    assert_eq!(s.to_string(), "x..r..y");
    let s = ShapeSpec::parse("5, 6, ..r.., 7").unwrap();
    assert_eq!(s.output.before.len(), 2);
    assert_eq!(s.output.axes.len(), 1);
    assert_eq!(s.to_string(), "5, 6, ..r.., 7");
    assert_eq!(s.axes().count(), 3);
    // Still one row variable per row.
    let e = ShapeSpec::parse("x..r..y..q..").unwrap_err();
    assert_eq!(e.span, 7..12);
    assert!(e.expected.contains("at most one"));
}

#[test]
fn errors_carry_the_byte_span() {
    let cases: [(&str, std::ops::Range<usize>); 7] = [
        ("2|3|4", 3..4),
        ("a->b->c", 4..6),
        ("a->b|c", 4..5),
        ("a, 99999999999999999999", 3..23),
        ("a-b", 1..2),
        ("x, ..r", 3..6),
        ("h w:", 2..4),
    ];
    for (text, span) in cases {
        let e = ShapeSpec::parse(text).unwrap_err();
        assert_eq!(e.span, span, "{text}: {e}");
        assert_eq!(e.spec, text);
    }
}

#[test]
fn einsum_specs() {
    let e = EinsumSpec::parse("b|ij;b|jk=>b|ik").unwrap();
    assert_eq!(e.operands.len(), 2);
    assert_eq!(e.reduced_labels(), vec!["j"]);
    assert_eq!(e.to_string(), "b|ij;b|jk=>b|ik");
    let p = EinsumSpec::parse("..r..ij=>..r..ji").unwrap();
    assert_eq!(p.operands.len(), 1);
    let multi = EinsumSpec::parse("batch, d; d, e => batch, e").unwrap();
    assert_eq!(multi.reduced_labels(), vec!["d"]);
    assert_eq!(multi.to_string(), "batch, d;d, e=>batch, e");
    assert_eq!(EinsumSpec::parse("ij;jk=>iz").unwrap_err().span, 8..9);
}

fn entry() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]".prop_map(|s| s),
        "[a-z][a-z0-9_]{1,4}".prop_map(|s| s),
        (1u64..5000).prop_map(|n| n.to_string()),
        ("[a-z]{1,3}", 1u64..64).prop_map(|(l, n)| format!("{l}:{n}")),
        Just("_".to_string()),
    ]
}

fn row() -> impl Strategy<Value = (Option<String>, Vec<String>)> {
    (
        prop::option::of("[a-z]{1,3}"),
        prop::collection::vec(entry(), 0..4),
    )
}

fn write_row((var, entries): &(Option<String>, Vec<String>)) -> String {
    let mut parts: Vec<String> = var.iter().map(|v| format!("..{v}..")).collect();
    parts.extend(entries.iter().cloned());
    parts.join(", ")
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../proptest-regressions/spec_syntax.txt"))),
        ..ProptestConfig::default()
    })]

    /// Printing a parsed spec and parsing it again gives the same spec.
    #[test]
    fn print_then_parse_is_the_identity(b in prop::option::of(row()), i in prop::option::of(row()), o in row()) {
        let mut text = String::new();
        if let Some(b) = &b { text.push_str(&write_row(b)); text.push('|'); }
        if let Some(i) = &i { text.push_str(&write_row(i)); text.push_str("->"); }
        text.push_str(&write_row(&o));
        text.push(',');
        let parsed = ShapeSpec::parse(&text).unwrap();
        let printed = parsed.to_string();
        let reparsed = ShapeSpec::parse(&printed).unwrap();
        prop_assert_eq!(reparsed.to_string(), printed.clone());
        for kind in RowKind::ALL {
            prop_assert_eq!(axes(&parsed, kind), axes(&reparsed, kind), "{} printed as {}", text, printed);
        }
        let vars = |s: &ShapeSpec| s.row_vars().map(|(k, n, _)| (k, n.clone())).collect::<Vec<_>>();
        prop_assert_eq!(vars(&parsed), vars(&reparsed));
    }

    /// No input makes the parsers panic.
    #[test]
    fn parsing_never_panics(text in "[a-z0-9_.,:;|> =\\-]{0,24}") {
        let _ = ShapeSpec::parse(&text);
        let _ = EinsumSpec::parse(&text);
    }
}

#[test]
fn notation_of_features_to_come_is_refused_and_says_what_it_is_for() {
    // Reserved, never read as labels: each error names the feature.
    let cases = [
        ("?, 3", 0..1, "run time"),
        ("3|?", 2..3, "run time"),
        // `*` and `+` make the spec multi-character: the entry is one.
        ("2*o+k", 0..5, "affine"),
        ("2*o + k, 3", 0..3, "affine"),
        ("a^b", 1..2, "concatenation"),
    ];
    for (text, span, what) in cases {
        let e = ShapeSpec::parse(text).unwrap_err();
        assert_eq!(e.span, span, "{text}");
        assert!(
            e.found.contains("reserved") && e.found.contains(what),
            "{text}: {e}"
        );
    }
    // In single-character mode `var` is three axes, as in OCANNL; in
    // multi-character mode it is one ragged axis, which einsums refuse.
    assert_eq!(ShapeSpec::parse("var").unwrap().output.axes.len(), 3);
    let ragged = ShapeSpec::parse("2, var").unwrap();
    assert_eq!(axes(&ragged, RowKind::Output), ["2", "var"]);
    assert_eq!(ragged.to_string(), "2, var");
    let e = EinsumSpec::parse("i, var => i").unwrap_err();
    assert_eq!(e.span, 3..6, "{e}");
    assert!(e.expected.contains("ragged"), "{e}");
    // In einsum specs an affine index needs its padding mark.
    let e = EinsumSpec::parse("i+j;j=>i").unwrap_err();
    assert!(e.expected.contains("affine index"), "{e}");
    assert!(e.found.contains("without `=` (padding)"), "{e}");
}

#[test]
fn affine_indices_parse_and_print_back() {
    use shape_core::spec::AffineIndex;
    let spec = EinsumSpec::parse("...|2*o<+3*a,p=+b:2;a=>...|o,p").unwrap();
    let axes: Vec<&AxisKind> = spec.operands[0]
        .output
        .axes
        .iter()
        .map(|a| &a.kind)
        .collect();
    let AxisKind::Affine(first) = axes[0] else {
        panic!("{axes:?}")
    };
    assert_eq!(
        **first,
        AffineIndex {
            stride: 2.try_into().unwrap(),
            over: "o".into(),
            padded: false,
            dilation: 3.try_into().unwrap(),
            kernel: Some(("a".into(), None)),
        }
    );
    let AxisKind::Affine(second) = axes[1] else {
        panic!("{axes:?}")
    };
    assert!(second.padded && second.stride.get() == 1);
    assert_eq!(
        second.kernel,
        Some(("b".into(), Some(2.try_into().unwrap())))
    );
    // Printing gives a spec that parses to the same (spans aside).
    let printed = spec.to_string();
    assert_eq!(printed, "...|2*o<+3*a, p=+b:2;a=>...|o, p");
    assert_eq!(EinsumSpec::parse(&printed).unwrap().to_string(), printed);
    // An offset, a zero stride and a result affine index are refused.
    assert!(EinsumSpec::parse("o<+1+a;a=>o").is_err());
    assert!(EinsumSpec::parse("0*o<+a;a=>o").is_err());
    assert!(EinsumSpec::parse("o,a;a=>o<+a").is_err());
}
