//! No input makes shapec panic: random programs built from the language's
//! tokens go through parsing, compiling, solving, every `infer` output,
//! error rendering, and (when they solve) a run on the CPU.

use proptest::prelude::*;
use shape_lang::compile::compile;
use shape_lang::syntax;
use shapec::backends::{cpu, BackendJob};
use shapec::diagnostics::{self, Source};
use shapec::error::CliError;
use shapec::infer;
use shapec::run::{gather, RunJob};

const TOKENS: &[&str] = &[
    "input ",
    "param ",
    "const ",
    "require ",
    "x",
    "y",
    "w",
    "b",
    ": ",
    " = ",
    " @ ",
    " + ",
    " - ",
    " * ",
    " / ",
    "(",
    ")",
    ", ",
    "\"",
    "ij;jk=>ik",
    "...|tu=>...|t1",
    "ij=>ji",
    "|",
    "->",
    "..r..",
    "_",
    "2",
    "3",
    "0",
    "1.5",
    "[",
    "]",
    "[1, 2, 3]",
    "\n",
    " ",
    "# c",
    "relu",
    "exp",
    "max",
    "einsum",
    "permute",
    "transpose",
    "batch_slice",
    "compose",
    "é",
    "rgb:3",
    "...",
    "=>",
    ";",
    "2|3",
    "3->2",
    "1e40",
];

/// Everything shapec does with a program's text, errors included.
fn exercise(text: &str) {
    let shown = |e: CliError| {
        let _ = diagnostics::render(
            &e,
            Some(Source {
                name: "p.shape",
                text,
            }),
            false,
        );
        let _ = diagnostics::render(
            &e,
            Some(Source {
                name: "p.shape",
                text,
            }),
            true,
        );
        let _ = diagnostics::json(&e, Some(text));
    };
    let program = match syntax::parse(text) {
        Ok(p) => p,
        Err(e) => return shown(CliError::Program(e.into())),
    };
    let compiled = match compile(&program) {
        Ok(c) => c,
        Err(e) => return shown(CliError::Program(e)),
    };
    let solved = match compiled.solve() {
        Ok(s) => s,
        Err(e) => return shown(CliError::Program(e)),
    };
    let outputs = [
        infer::shapes_text(&compiled, &solved),
        infer::shapes_json(&compiled, &solved).map(|v| v.to_string()),
        infer::projections_text(&compiled, &solved),
        infer::dot(&compiled, &solved),
    ];
    for o in outputs {
        if let Err(e) = o {
            shown(e);
        }
    }
    for t in compiled.graph.tensor_ids() {
        let name = compiled.graph.name(t).unwrap().to_string();
        if let Err(e) = infer::explain(&compiled, &solved, text, &name) {
            shown(e);
        }
    }
    let data = match gather(&compiled, &solved, &[], 1) {
        Ok(d) => d,
        Err(e) => return shown(e),
    };
    let plan = match shape_lang::checks::plan(&compiled, &solved, &Default::default()) {
        Ok(p) => p,
        Err(e) => return shown(CliError::Program(e)),
    };
    let mut job = RunJob {
        compiled: &compiled,
        solved: &solved,
        plan: &plan,
        data: Some(data.values),
    };
    if let Err(e) = job.run(&mut cpu()) {
        shown(CliError::Program(e));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(600))]

    #[test]
    fn token_soup_never_panics(tokens in prop::collection::vec(0..TOKENS.len(), 0..40)) {
        let text: String = tokens.iter().map(|&i| TOKENS[i]).collect();
        exercise(&text);
    }

    #[test]
    fn well_formed_lines_never_panic(lines in prop::collection::vec(
        prop_oneof![
            Just("input x: 2|3"), Just("input y: 3"), Just("param w"), Just("param b: 2"),
            Just("const k: 3->n = [1, 2, 3, 4, 5, 6]"), Just("a = w @ x + b"),
            Just("c = relu(a) * 0.5"), Just("d = einsum(\"...|i;...|i=>...|i\", x, y)"),
            Just("e = transpose(w)"), Just("f = batch_slice(x)"), Just("g = permute(\"ij=>ji\", k)"),
            Just("require a: 2|->2"), Just("h = max(a, c) / -a"), Just("i = k @ y"),
            Just("j = einsum(\"...|tu=>...|t1\", k)"), Just("l = exp(j) - log(j)"),
        ],
        0..12,
    )) {
        exercise(&lines.join("\n"));
    }
}

#[test]
fn arbitrary_bytes_never_panic() {
    for text in [
        "",
        "\n\n",
        "é = 3",
        "y = f(\"",
        "const c: 1 = []",
        "input x: ..r..\ny = batch_slice(x)\n",
        "input x: 99999999999999999999",
        "input x: 4000000000,4000000000\ny = relu(x)",
        "param w\ny = w @ w",
        "param w\ny = transpose(w)\nz = w + y",
    ] {
        exercise(text);
    }
}
