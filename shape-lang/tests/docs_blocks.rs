//! Every ` ```shape ` block of docs/ and the README is a program that
//! infers (and runs on the CPU reference where it needs no data from
//! outside), so that the documentation cannot drift from the language.
//! A block that is not a whole program says so: ` ```shape,fragment `
//! (not run), or ` ```shape,error=KIND ` (must fail with that kind).

use std::path::{Path, PathBuf};

use backend_cpu::CpuBackend;
use shape_lang::compile::compile;
use shape_lang::data::program_inputs;
use shape_lang::inference::infer;
use shape_lang::syntax::parse;
use shape_run::RunGraph;

/// A fenced block: the file, its line, its info string and its text.
struct Block {
    file: PathBuf,
    line: usize,
    info: String,
    text: String,
}

fn blocks(path: &Path) -> Vec<Block> {
    let doc = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    let mut open: Option<(usize, String, String)> = None;
    for (i, line) in doc.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) => open = Some((i + 1, info.trim().to_string(), String::new())),
            (Some(_), Some("")) => {
                let (line, info, text) = open.take().unwrap();
                out.push(Block {
                    file: path.to_path_buf(),
                    line,
                    info,
                    text,
                });
            }
            (Some((_, _, text)), _) => {
                text.push_str(line);
                text.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

fn documents() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    docs.push(root.join("README.md"));
    docs
}

/// Runs `text` on the CPU reference with the program's own values; `None`
/// when it needs values from outside (ragged data, run-time sizes).
fn run(text: &str) -> Option<Result<(), String>> {
    let program = parse(text).ok()?;
    let compiled = compile(&program).ok()?;
    let solved = compiled.solve().ok()?;
    if !solved.guards().is_empty() {
        return None;
    }
    let inputs = program_inputs(&compiled, &solved, 1).ok()?;
    Some(
        solved
            .run(
                &mut CpuBackend::reference(),
                inputs,
                &compiled.results,
                &shape_run::RunOptions::default(),
            )
            .map(|_| ())
            .map_err(|e| e.to_string()),
    )
}

#[test]
fn every_shape_block_of_the_docs_infers_and_runs() {
    let (mut inferred, mut ran, mut fragments, mut errors) = (0, 0, 0, 0);
    let mut failures = Vec::new();
    for doc in documents() {
        for b in blocks(&doc)
            .into_iter()
            .filter(|b| b.info.starts_with("shape"))
        {
            let at = format!("{}:{}", b.file.display(), b.line);
            let mut parts = b.info.split(',').map(str::trim);
            assert_eq!(
                parts.next(),
                Some("shape"),
                "{at}: info string `{}`",
                b.info
            );
            let mark = parts.next();
            let out = infer(&b.text);
            match mark {
                Some("fragment") => fragments += 1,
                Some(m) if m.starts_with("error=") => {
                    errors += 1;
                    let kind = &m["error=".len()..];
                    if !out.starts_with(&format!("error[{kind}]")) {
                        failures.push(format!("{at}: expected error[{kind}], got\n{out}"));
                    }
                }
                Some(other) => failures.push(format!("{at}: unknown mark `{other}`")),
                None if out.starts_with("error[") => {
                    failures.push(format!("{at}: does not infer:\n{out}{}", b.text));
                }
                None => {
                    inferred += 1;
                    match run(&b.text) {
                        Some(Ok(())) => ran += 1,
                        Some(Err(e)) => failures.push(format!("{at}: does not run: {e}")),
                        None => {}
                    }
                }
            }
        }
    }
    println!(
        "shape blocks: {inferred} infer ({ran} of them run), {fragments} fragments, {errors} errors as marked"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    assert!(
        inferred >= 8,
        "only {inferred} blocks infer: are the program blocks still marked `shape`?"
    );
}

/// docs/program-language.md's table of functions lists the pointwise unary
/// functions as the scalar table has them (`shape_core::scalar`), with
/// `id` first: a function added to the table is a failing test until the
/// docs name it.
#[test]
fn the_function_table_lists_every_unary_function() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("docs/program-language.md")).unwrap();
    let row = doc
        .lines()
        .find(|l| l.starts_with("| `f(a)` for `f` in `"))
        .expect("the table has the unary functions' row");
    let listed: Vec<&str> = row
        .split('`')
        .nth(5)
        .expect("the row names the functions in backquotes")
        .split_whitespace()
        .collect();
    let table: Vec<&str> = std::iter::once("id")
        .chain(shape_core::kernel::UnaryOp::ALL.iter().map(|op| op.name()))
        .collect();
    assert_eq!(listed, table);
}

/// The cells of a markdown table row or line, split at backquotes: the
/// backquoted parts.
fn quoted(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

#[test]
fn the_function_table_lists_every_binary_function_and_operator() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let doc = std::fs::read_to_string(root.join("docs/program-language.md")).unwrap();
    let line = |start: &str| {
        doc.lines()
            .find(|l| l.starts_with(start))
            .unwrap_or_else(|| panic!("docs/program-language.md has a line `{start}...`"))
    };
    let ops = shape_core::kernel::BinaryOp::ALL;
    // `f(a, b)` for `f` in `add sub ...`
    let row = quoted(line("| `f(a, b)` for `f` in `"));
    let listed: Vec<&str> = row[2].split_whitespace().collect();
    let names: Vec<&str> = ops.iter().map(|op| op.name()).collect();
    assert_eq!(listed, names);
    // `a + b`, `a - b`, ... | pointwise `add`, `sub`, ...
    let row = quoted(line("| `a + b`"));
    let written: Vec<(&str, &str)> = (row.iter())
        .filter_map(|cell| cell.strip_prefix("a ")?.strip_suffix(" b"))
        .zip(row.iter().filter(|cell| !cell.contains(' ')).copied())
        .collect();
    let table: Vec<(&str, &str)> = (ops.iter())
        .filter_map(|op| op.infix_operator().map(|(symbol, _)| (symbol, op.name())))
        .collect();
    assert_eq!(written, table);
    // Precedence, loosest first: `+ -`, then `* / @`, then unary `-`
    let levels: Vec<&str> = quoted(line("Precedence, loosest first:"));
    let registry = shape_graph::Registry::builtin();
    let mut infix = registry.infix_operators();
    infix.sort_by_key(|&(_, p)| p);
    let mut grouped: Vec<String> = Vec::new();
    let mut last = None;
    for (symbol, p) in infix {
        match grouped.last_mut() {
            Some(g) if last == Some(p) => {
                g.push(' ');
                g.push_str(symbol);
            }
            _ => grouped.push(symbol.to_string()),
        }
        last = Some(p);
    }
    grouped.push("-".to_string()); // unary minus binds tightest
    assert_eq!(levels, grouped);
}
