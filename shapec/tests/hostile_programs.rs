//! A hostile-input harness over the program language: generated programs
//! of repeated statements (chains of convolutions over run-time sizes,
//! strided ones, fixed indices, elementwise chains, concatenations, size
//! statements), each at N and 4N statements, through the whole command
//! line in-process. Properties that need no oracle:
//!
//! - no panic, and the exit status is 0 or 1 (an error, never a crash);
//! - what `infer` prints grows linearly: at 4N it is at most about four
//!   times as long as at N, and no line grows with N (a size printed as
//!   `b-1-1-…-1`, one term per layer, breaks both; issue 25 found it
//!   taking 21 s at 1,600 layers);
//! - the guards grow at most linearly with the statements.
//!
//! Sizes, not times, are compared: the checks are exact on any machine.
//! `PROPTEST_CASES` raises the number of programs.

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;

/// One family of repeated statements.
#[derive(Clone, Copy, Debug)]
enum Family {
    /// `h{i} = einsum("o<+k;k=>o", h{i-1}, w{i})` over a run-time size.
    ValidConvolutions { taps: u64 },
    /// The same with a stride: `s*o<+k`.
    StridedConvolutions { stride: u64, taps: u64 },
    /// Independent statements that end in a fixed index.
    FixedIndices,
    /// `h{i} = relu(h{i-1}) + b{i}` over a run-time size.
    Elementwise,
    /// `h{i} = concat(h{i-1}, c)`: the axis grows by a number each time.
    Concatenations { part: u64 },
    /// `size s{i} = j of t{i}` captures, each used by an input.
    Captures,
}

fn family() -> impl Strategy<Value = Family> {
    prop_oneof![
        (2u64..5).prop_map(|taps| Family::ValidConvolutions { taps }),
        (2u64..4, 1u64..4).prop_map(|(stride, taps)| Family::StridedConvolutions { stride, taps }),
        Just(Family::FixedIndices),
        Just(Family::Elementwise),
        (1u64..5).prop_map(|part| Family::Concatenations { part }),
        Just(Family::Captures),
    ]
}

fn program(f: Family, n: usize) -> String {
    let mut text = String::new();
    match f {
        Family::ValidConvolutions { taps } => {
            text.push_str("size b\ninput x: b\n");
            for i in 0..n {
                let prev = if i == 0 {
                    "x".into()
                } else {
                    format!("h{}", i - 1)
                };
                text.push_str(&format!(
                    "param w{i}: {taps}\nh{i} = einsum(\"o<+k;k=>o\", {prev}, w{i})\n"
                ));
            }
        }
        Family::StridedConvolutions { stride, taps } => {
            // A strided chain needs sizes that grow as stride^N: a few
            // layers, then elementwise statements on the last.
            text.push_str("size b\ninput x: b\n");
            let layers = n.min(8);
            for i in 0..layers {
                let prev = if i == 0 {
                    "x".into()
                } else {
                    format!("h{}", i - 1)
                };
                text.push_str(&format!(
                    "param w{i}: {taps}\nh{i} = einsum(\"{stride}*o<+k;k=>o\", {prev}, w{i})\n"
                ));
            }
            for i in layers..n {
                text.push_str(&format!("h{i} = relu(h{})\n", i - 1));
            }
        }
        Family::FixedIndices => {
            text.push_str("input x: 3, 4\n");
            for i in 0..n {
                text.push_str(&format!("y{i} = permute(\"a,b=>a,b,1\", x)\n"));
            }
        }
        Family::Elementwise => {
            text.push_str("size b\ninput x: b, 3\n");
            for i in 0..n {
                let prev = if i == 0 {
                    "x".into()
                } else {
                    format!("h{}", i - 1)
                };
                text.push_str(&format!("param b{i}: 3\nh{i} = relu({prev}) + b{i}\n"));
            }
        }
        Family::Concatenations { part } => {
            text.push_str(&format!("size b\ninput x: b\ninput c: {part}\n"));
            for i in 0..n {
                let prev = if i == 0 {
                    "x".into()
                } else {
                    format!("h{}", i - 1)
                };
                text.push_str(&format!("h{i} = concat({prev}, c)\n"));
            }
        }
        Family::Captures => {
            text.push_str("size b\ninput x: b, 2\n");
            for i in 0..n {
                text.push_str(&format!(
                    "t{i} = einsum(\"i,j=>j,i\", x)\nsize s{i} = j of t{i}\ninput z{i}: s{i}\n"
                ));
            }
        }
    }
    text
}

fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("hostile_programs");
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// `shapec infer` in-process: the exit status and what it printed.
fn infer(text: &str, name: &str) -> (u8, String, String) {
    let path = scratch().join(format!("{name}-{}.shape", std::process::id()));
    std::fs::write(&path, text).expect("the program is written");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let file = path.to_str().expect("a UTF-8 path");
    let status = shapec::cli::main_with(["shapec", "infer", file], &mut out, &mut err);
    let _ = std::fs::remove_file(&path);
    (
        status,
        String::from_utf8_lossy(&out).into_owned(),
        String::from_utf8_lossy(&err).into_owned(),
    )
}

fn longest_line(s: &str) -> usize {
    s.lines().map(str::len).max().unwrap_or(0)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(24),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../proptest-regressions/hostile_programs.txt"))),
        ..ProptestConfig::default()
    })]

    /// Repeated statements: no crash, and output, lines and guards that
    /// grow linearly.
    #[test]
    fn repeated_statements_scale_linearly(f in family(), n in 40usize..120) {
        let (s1, out1, err1) = infer(&program(f, n), "n");
        let (s4, out4, err4) = infer(&program(f, 4 * n), "4n");
        prop_assert!(s1 <= 1 && s4 <= 1, "{:?}: status {} / {}\n{}\n{}", f, s1, s4, err1, err4);
        prop_assert_eq!(s1, s4, "{:?}: N and 4N end differently\n{}\n{}", f, err1, err4);
        if s1 == 0 {
            // Four times the statements; a little slack for the width of
            // longer names and numbers.
            prop_assert!(
                out4.len() <= 5 * out1.len(),
                "{:?}: {} bytes at N = {}, {} at 4N", f, out1.len(), n, out4.len()
            );
            prop_assert!(
                longest_line(&out4) <= longest_line(&out1) + 16,
                "{:?}: the longest line grows from {} to {} bytes", f, longest_line(&out1), longest_line(&out4)
            );
            let guards = |s: &str| s.lines().filter(|l| l.starts_with("guard")).count();
            prop_assert!(
                guards(&out4) <= 4 * guards(&out1) + 4,
                "{:?}: {} guards at N, {} at 4N", f, guards(&out1), guards(&out4)
            );
        }
    }
}

/// The case the property found on the code before issue 25's fixes
/// (`proptest-regressions/hostile_programs.txt`): sizes of a chain of
/// valid convolutions printed one term per layer.
#[test]
fn a_convolution_chain_prints_lines_that_do_not_grow() {
    let f = Family::ValidConvolutions { taps: 2 };
    let (s1, out1, _) = infer(&program(f, 40), "conv-n");
    let (s4, out4, _) = infer(&program(f, 160), "conv-4n");
    assert_eq!((s1, s4), (0, 0));
    assert!(out4.contains("b-160"), "{out4}");
    assert!(longest_line(&out4) <= longest_line(&out1) + 16);
}
