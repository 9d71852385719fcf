//! Grammar-aware fuzzing (issue 26, item 9): valid programs, mutated the
//! way a user edits them (a size changed, a statement dropped, duplicated
//! or moved, a label renamed, two programs spliced), so that most cases
//! parse and reach inference, finalization, lowering and a run, where the
//! byte fuzzing of `fuzz.rs` almost never parses. Nothing may panic, no
//! error may be `unsolved` (a solver defect), and every run ends (the
//! solver's step limit is the guard against a hang).

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, FileFailurePersistence, RngAlgorithm, TestRng, TestRunner};

/// Valid programs to mutate: the examples, and programs over every part of
/// the notation.
fn corpus() -> Vec<String> {
    let mut programs: Vec<String> = vec![
        include_str!("../../examples/mlp.shape").into(),
        include_str!("../../examples/conv.shape").into(),
        include_str!("../../examples/attention.shape").into(),
        include_str!("programs/matmul.shape").into(),
    ];
    programs.extend(
        [
            "input x: 2, ..r..\ny = exp(x)\nz = y + 1\n",
            "const c: ..b..|3 = [1, 2, 3, 4, 5, 6]\ny = exp(c)\nsize n = ..b.. of c\n",
            "input x: 8, 4\nconst k: 3, ..c.. = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]\nparam b\ny = einsum(\"o<+a, c; a, c=>o\", x, k)\nz = y + b\n",
            "input x: 2|3, 4\np = permute(\"b|i,j=>b|j,i,1\", x)\nm = einsum_max(\"b|i,j=>b|i\", x)\ns = batch_slice(x)\n",
            "input a: 2\ninput b: 3\ninput c: 4\nx = concat(a, b)\ny = concat(a, b, c)\n",
            "size b\ninput x: b|8\nparam w\nh = relu(w @ x)\nrequire h: b|->16\n",
            "input x: 2, 3\nh = x + x\nd: 1, 2, 3 <- h\nt: 2, 3 <- 4\n",
            "input x: 6, 6\ny = einsum(\"2*o=+a, p<+b:2; a:3 => o, p\", x)\n",
            "input x: 3, 4\ny = einsum(\"i, j:4 => j, i, n:2\", x)\nz = einsum_prod(\"i,j=>i\", x)\nw = einsum_min(\"i,j=>j\", x)\n",
            "size d\nsize d % 2 == 0\ninput x: d, 3\nrequire x: 4, 3\nsize e = j of y\ny = einsum(\"i, j => j\", x)\n",
            "input x: 4\nconst c: 4 = [1, 2, 3, 4]\ny = -(x * c) / (c + 1) - sqrt(c)\nz = log(exp(y))\n",
            "input x: 3, 2|4\ny = batch_slice_range(\"3\", x)\nz = transpose(y)\n",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    programs
}

/// One edit.
#[derive(Clone, Debug)]
enum Mutation {
    /// Replace the `k`-th number with `n`.
    Number(usize, u64),
    /// Drop line `k`.
    Drop(usize),
    /// Repeat line `k` after itself, what it defines renamed.
    Duplicate(usize),
    /// Swap line `k` with the next (a reordering that most often keeps
    /// every name defined before its use).
    Swap(usize),
    /// Rename the `k`-th single-letter label inside a quoted spec to `c`.
    Label(usize, char),
    /// The first `k` lines of this program, then the lines of program `p`
    /// from line `l` on.
    Splice(usize, usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let number = prop_oneof![0u64..7, Just(64), Just(u64::MAX), Just(1 << 40)];
    prop_oneof![
        3 => (0usize..40, number).prop_map(|(k, n)| Mutation::Number(k, n)),
        2 => (0usize..20).prop_map(Mutation::Drop),
        1 => (0usize..20).prop_map(Mutation::Duplicate),
        2 => (0usize..20).prop_map(Mutation::Swap),
        2 => (0usize..20, prop::sample::select(vec!['a', 'b', 'i', 'j', 'o', 'z'])).prop_map(|(k, c)| Mutation::Label(k, c)),
        1 => (0usize..20, 0usize..16, 0usize..20).prop_map(|(k, p, l)| Mutation::Splice(k, p, l)),
    ]
}

fn apply(text: &str, m: &Mutation, corpus: &[String]) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let at = |k: usize| if lines.is_empty() { 0 } else { k % lines.len() };
    let join = |ls: Vec<&str>| ls.iter().map(|l| format!("{l}\n")).collect::<String>();
    match *m {
        Mutation::Number(k, n) => {
            // The k-th run of digits (modulo their count).
            let runs: Vec<(usize, usize)> = {
                let b = text.as_bytes();
                let mut out = Vec::new();
                let mut i = 0;
                while i < b.len() {
                    if b[i].is_ascii_digit() {
                        let s = i;
                        while i < b.len() && b[i].is_ascii_digit() {
                            i += 1;
                        }
                        out.push((s, i));
                    } else {
                        i += 1;
                    }
                }
                out
            };
            match runs.get(k % runs.len().max(1)) {
                Some(&(s, e)) => format!("{}{n}{}", &text[..s], &text[e..]),
                None => text.to_string(),
            }
        }
        Mutation::Drop(k) => {
            let mut ls = lines.clone();
            if !ls.is_empty() {
                ls.remove(at(k));
            }
            join(ls)
        }
        Mutation::Duplicate(k) => {
            let mut ls: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
            if !ls.is_empty() {
                let line = &ls[at(k)];
                // `name = ...`, `input name: ...`: the copy defines `name2`.
                let copy = match line.split_once(" = ") {
                    Some((name, rest)) if !name.contains(' ') => format!("{name}2 = {rest}"),
                    _ => match line.split_once(':') {
                        Some((head, rest)) if head.split_whitespace().count() == 2 => {
                            format!("{head}2:{rest}")
                        }
                        _ => line.clone(),
                    },
                };
                ls.insert(at(k) + 1, copy);
            }
            ls.iter().map(|l| format!("{l}\n")).collect()
        }
        Mutation::Swap(k) => {
            let mut ls = lines.clone();
            if ls.len() >= 2 {
                let a = k % (ls.len() - 1);
                ls.swap(a, a + 1);
            }
            join(ls)
        }
        Mutation::Label(k, c) => {
            // Single letters between quotes.
            let mut inside = false;
            let mut seen = 0;
            let chars: Vec<char> = text.chars().collect();
            let mut out = String::with_capacity(text.len());
            for (i, &ch) in chars.iter().enumerate() {
                if ch == '"' {
                    inside = !inside;
                }
                let alone = |j: Option<usize>| {
                    j.and_then(|j| chars.get(j))
                        .is_none_or(|n: &char| !n.is_ascii_alphanumeric())
                };
                if inside
                    && ch.is_ascii_lowercase()
                    && alone(i.checked_sub(1))
                    && alone(Some(i + 1))
                {
                    if seen == k {
                        out.push(c);
                        seen += 1;
                        continue;
                    }
                    seen += 1;
                }
                out.push(ch);
            }
            out
        }
        Mutation::Splice(k, p, l) => {
            let other: Vec<&str> = corpus[p % corpus.len()].lines().collect();
            let head = lines.iter().take(at(k) + 1).copied();
            let tail = other
                .iter()
                .skip(if other.is_empty() { 0 } else { l % other.len() })
                .copied();
            join(head.chain(tail).collect())
        }
    }
}

/// How far a program got.
#[derive(Debug, PartialEq, Eq, PartialOrd, Ord, Clone, Copy)]
enum Reached {
    /// Parsed; refused before inference (an unknown name, a bad call).
    Parse,
    /// Inference saw it: a shape error while building or solving.
    Infer,
    /// Solved; the run refused it (memory, data) or failed cleanly.
    Solve,
    /// Ran.
    Run,
}

fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("fuzz_programs");
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// Parses, compiles and solves `text`, and runs what solves (on the CPU,
/// with random data, within a small memory limit) through the command
/// line; fails on an `unsolved` error or a status other than 0 and 1.
fn exercise(text: &str) -> Result<Option<Reached>, TestCaseError> {
    let Ok(program) = shape_lang::syntax::parse(text) else {
        return Ok(None);
    };
    let compiled = match shape_lang::compile::compile(&program) {
        Ok(c) => c,
        Err(e) => {
            prop_assert_ne!(e.kind(), "unsolved", "{}\n{}", e, text);
            // Shape errors come from the solver, which runs as the graph
            // is built.
            let inferred = matches!(e, shapec::ProgramError::Graph { .. });
            return Ok(Some(if inferred {
                Reached::Infer
            } else {
                Reached::Parse
            }));
        }
    };
    if let Err(e) = compiled.solve() {
        prop_assert_ne!(e.kind(), "unsolved", "{}\n{}", e, text);
        return Ok(Some(Reached::Infer));
    }
    let path = scratch().join(format!("p{}.shape", std::process::id()));
    std::fs::write(&path, text).expect("the program is written");
    let file = path.to_str().expect("a UTF-8 path");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let mut args = vec![
        "shapec",
        "run",
        file,
        "--backend",
        "cpu",
        "--memory-limit",
        "64M",
    ];
    if text.lines().any(|l| l.trim() == "size b") {
        args.extend(["--size", "b=3"]);
    }
    let status = shapec::cli::main_with(args, &mut out, &mut err);
    let err = String::from_utf8_lossy(&err);
    prop_assert!(status <= 1, "status {}: {}\n{}", status, err, text);
    prop_assert!(!err.contains("error[unsolved]"), "{}\n{}", err, text);
    Ok(Some(if status == 0 {
        Reached::Run
    } else {
        Reached::Solve
    }))
}

fn case() -> impl Strategy<Value = (usize, Vec<Mutation>)> {
    (0usize..16, prop::collection::vec(mutation(), 1..3))
}

fn mutated(corpus: &[String], (p, ms): &(usize, Vec<Mutation>)) -> String {
    let mut text = corpus[p % corpus.len()].clone();
    for m in ms {
        text = apply(&text, m, corpus);
    }
    text
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(300),
        failure_persistence: Some(Box::new(FileFailurePersistence::SourceParallel("proptest-regressions"))),
        ..ProptestConfig::default()
    })]

    /// Mutated programs: no panic, no `unsolved`, every run ends.
    #[test]
    fn mutated_programs_fail_cleanly_or_run(c in case()) {
        let corpus = corpus();
        exercise(&mutated(&corpus, &c))?;
    }
}

/// Most mutated programs get past the parser and reach inference (byte
/// fuzzing almost never does): over a fixed seed, at least half compile,
/// and some reach a run.
#[test]
fn most_mutated_programs_reach_inference() {
    let corpus = corpus();
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]),
    );
    let strategy = case();
    let mut counts = [0usize; 5];
    let cases = 300;
    for _ in 0..cases {
        let c = strategy.new_tree(&mut runner).expect("a case").current();
        let reached = exercise(&mutated(&corpus, &c)).expect("no defect");
        let slot = match reached {
            None => 0,
            Some(Reached::Parse) => 1,
            Some(Reached::Infer) => 2,
            Some(Reached::Solve) => 3,
            Some(Reached::Run) => 4,
        };
        counts[slot] += 1;
    }
    println!(
        "of {cases}: no parse {}, refused before inference {}, inference error {}, solved {}, ran {}",
        counts[0], counts[1], counts[2], counts[3], counts[4]
    );
    let inferred = counts[2] + counts[3] + counts[4];
    assert!(
        inferred * 2 >= cases,
        "only {inferred} of {cases} reached inference: {counts:?}"
    );
    assert!(
        counts[4] * 5 >= cases,
        "only {} of {cases} ran: {counts:?}",
        counts[4]
    );
}

/// Found by `mutated_programs_fail_cleanly_or_run` (seed in
/// `fuzz_programs.proptest-regressions`): a batch slice of an empty batch
/// axis (`input x: 0|3, 4`) made the `slice_out_of_range` message compute
/// `0 - 1` and panic.
#[test]
fn a_slice_of_an_empty_batch_axis_is_refused_cleanly() {
    let program = "input x: 0|3, 4\ns = batch_slice(x)\n";
    let path = scratch().join("empty_slice.shape");
    std::fs::write(&path, program).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let status = shapec::cli::main_with(
        ["shapec", "run", path.to_str().unwrap(), "--backend", "cpu"],
        &mut out,
        &mut err,
    );
    let err = String::from_utf8_lossy(&err);
    assert_eq!(status, 1, "{err}");
    assert!(err.contains("error[slice_out_of_range]"), "{err}");
    assert!(err.contains("the axis is empty"), "{err}");
}
