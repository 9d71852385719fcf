//! docs/program-language.md's error table lists every kind an error of
//! the command line can have, and nothing else. The kinds come from the
//! error enums themselves (strum's `VariantNames`, the same names
//! `kind()` gives), never from a list written here; only the variants
//! that wrap another enum's error (and so take its kind) are left out.

use std::collections::BTreeSet;

use strum::VariantNames;

/// The variants whose `kind()` is the wrapped error's kind.
const WRAPPERS: [&str; 6] = [
    "program",
    "dynamic_broadcast",
    "call",
    "graph",
    "lowering",
    "invalid_function",
];

fn cli_kinds() -> BTreeSet<&'static str> {
    let shape = shape_solver::ShapeError::VARIANTS.iter();
    let graph = shape_graph::GraphError::VARIANTS
        .iter()
        .filter(|k| **k != "shape");
    let program = shapec::ProgramError::VARIANTS.iter();
    let cli = shapec::CliError::VARIANTS.iter();
    let dynamic = shape_core::dynamic::DynError::VARIANTS.iter();
    let call = shape_call::CallError::VARIANTS.iter();
    shape
        .chain(graph)
        .chain(program)
        .chain(cli)
        .chain(dynamic)
        .chain(call)
        .copied()
        .filter(|k| !WRAPPERS.contains(k))
        .collect()
}

/// Every `kind` written in backquotes in the first column of the table
/// under "## Errors".
fn documented_kinds() -> BTreeSet<String> {
    let doc = include_str!("../../docs/program-language.md");
    let errors = doc
        .split("\n## Errors")
        .nth(1)
        .expect("docs/program-language.md has an Errors section");
    let section = errors.split("\n## ").next().unwrap_or(errors);
    section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .flat_map(|l| {
            let first = l.split('|').nth(1).unwrap_or("");
            first
                .split('`')
                .skip(1)
                .step_by(2)
                .map(str::to_string)
                .collect::<Vec<_>>()
        })
        .collect()
}

#[test]
fn the_error_table_lists_every_kind() {
    let documented = documented_kinds();
    let missing: Vec<&str> = cli_kinds()
        .into_iter()
        .filter(|k| !documented.contains(*k))
        .collect();
    assert!(
        missing.is_empty(),
        "kinds missing from docs/program-language.md's error table: {missing:?}"
    );
}

#[test]
fn the_error_table_lists_no_kind_that_does_not_exist() {
    let kinds = cli_kinds();
    let unknown: Vec<String> = documented_kinds()
        .into_iter()
        .filter(|k| !kinds.contains(k.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "docs/program-language.md's error table lists kinds no error has: {unknown:?}"
    );
}
