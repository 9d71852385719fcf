//! A hostile-input harness for `shapec run`'s files (issue 25): property
//! tests that run the binary on generated data and check what it does.
//!
//! - JSON inputs (`--input NAME=FILE.json`), dense and ragged, of random
//!   shapes, row lengths, nesting faults and magnitudes (values past the
//!   range of `f32` included): a run either exits 0 with the right values
//!   or exits 1 with `error[data]` (or `error[memory]`), never a signal,
//!   an abort or a panic. A large dense input runs under an address-space
//!   limit (`prlimit --as`, or `ulimit -v`).
//! - Sequences of `--out DIR` runs into one directory, each result ragged
//!   or dense at random, with obstacles planted at the result paths (a
//!   directory, a read-only file, a symbolic link): after a successful run
//!   the directory holds exactly the files the results imply (no stale
//!   `NAME.offsets.npy`), readable back; after a failed one it is byte for
//!   byte what it was.
//!
//! Case counts are small by default; `PROPTEST_CASES=N` raises them. The
//! minimal cases the harness found in the code before the fixes are also
//! written out as tests of their own (at the end).

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use proptest::prelude::*;
use serde_json::Value;
use shapec::npy;

// ---- running the binary ---------------------------------------------------

struct Output {
    /// The exit code; `None` when a signal ended the process.
    code: Option<i32>,
    signal: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Output {
    fn describe(&self) -> String {
        format!(
            "exit {:?} signal {:?}\nstdout: {}\nstderr: {}",
            self.code,
            self.signal,
            truncated(&self.stdout),
            truncated(&self.stderr)
        )
    }
}

fn truncated(s: &str) -> &str {
    let mut end = s.len().min(2000);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Whether `prlimit` (util-linux) runs here.
fn has_prlimit() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        Command::new("prlimit")
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Runs `shapec ARGS` in `dir`; under an address-space limit of
/// `address_space` bytes when given.
fn shapec_in(dir: &Path, args: &[&str], address_space: Option<u64>) -> Output {
    let bin = env!("CARGO_BIN_EXE_shapec");
    let mut cmd = match address_space {
        None => Command::new(bin),
        Some(bytes) if has_prlimit() => {
            let mut c = Command::new("prlimit");
            c.arg(format!("--as={bytes}")).arg(bin);
            c
        }
        Some(bytes) => {
            // `ulimit -v` counts KiB; `exec` keeps the signal visible.
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg(format!("ulimit -v {}; exec \"$0\" \"$@\"", bytes / 1024))
                .arg(bin);
            c
        }
    };
    let out = cmd
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("RUST_BACKTRACE")
        .output()
        .expect("the shapec binary runs");
    Output {
        code: out.status.code(),
        signal: out.status.signal(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A fresh scratch directory.
fn scratch(name: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("hostile_io")
        .join(format!("{name}-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// Removes a directory tree whose files may be read-only.
fn remove_tree(dir: &Path) {
    let _ = std::fs::remove_dir_all(dir);
}

/// The configuration: `default` cases unless `PROPTEST_CASES` says more.
fn cases(default: u32) -> ProptestConfig {
    let n = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases: n,
        max_shrink_iters: 512,
        ..ProptestConfig::default()
    }
}

/// The process ended by itself, with 0 or 1, and did not panic.
fn assert_clean_exit(out: &Output, what: &str) {
    assert!(
        matches!(out.code, Some(0 | 1)),
        "{what}: not a clean exit (an abort or a signal): {}",
        out.describe()
    );
    assert!(
        !out.stderr.contains("panicked") && !out.stderr.contains("memory allocation of"),
        "{what}: {}",
        out.describe()
    );
}

// ---- JSON inputs ----------------------------------------------------------

/// A JSON value as the harness builds it.
#[derive(Clone, Debug, PartialEq)]
enum Node {
    List(Vec<Node>),
    /// JSON text of a value that is not a list.
    Leaf(String),
}

impl Node {
    fn write(&self, out: &mut String) {
        match self {
            Node::Leaf(t) => out.push_str(t),
            Node::List(items) => {
                out.push('[');
                for (k, item) in items.iter().enumerate() {
                    if k > 0 {
                        out.push_str(", ");
                    }
                    item.write(out);
                }
                out.push(']');
            }
        }
    }

    fn text(&self) -> String {
        let mut s = String::new();
        self.write(&mut s);
        s
    }

    /// Every node in pre-order, as paths of indices.
    fn paths(&self, at: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
        out.push(at.clone());
        if let Node::List(items) = self {
            for (k, item) in items.iter().enumerate() {
                at.push(k);
                item.paths(at, out);
                at.pop();
            }
        }
    }

    fn at(&self, path: &[usize]) -> &Node {
        match (self, path.split_first()) {
            (node, None) => node,
            (Node::List(items), Some((&k, rest))) => items[k].at(rest),
            (Node::Leaf(_), Some(_)) => unreachable!("a path into a leaf"),
        }
    }

    fn at_mut(&mut self, path: &[usize]) -> &mut Node {
        match (self, path.split_first()) {
            (node, None) => node,
            (Node::List(items), Some((&k, rest))) => items[k].at_mut(rest),
            (Node::Leaf(_), Some(_)) => unreachable!("a path into a leaf"),
        }
    }
}

/// A value written in a file.
#[derive(Clone, Debug)]
enum Leaf {
    /// An integer.
    Int(i32),
    /// A number with a short exact decimal form: `k / 64`.
    Exact(i32),
    /// A large magnitude, some past `f32`'s range.
    Huge(&'static str),
    /// `"inf"`, `"-inf"` or `"nan"`.
    Word(&'static str),
}

impl Leaf {
    fn text(&self) -> String {
        match self {
            Leaf::Int(i) => i.to_string(),
            Leaf::Exact(k) => format!("{}", *k as f64 / 64.0),
            Leaf::Huge(t) => t.to_string(),
            Leaf::Word(w) => format!("\"{w}\""),
        }
    }
}

/// Magnitudes around `f32::MAX` (3.4028235e38): the first five fit (round
/// to a finite `f32`), the rest do not.
const HUGE: [&str; 11] = [
    "1e30",
    "-3e38",
    "3.4028235e38",
    "-3.4028235e38",
    "1e-50",
    "3.4028236e38",
    "3.5e38",
    "-3.5e38",
    "1e39",
    "-1e300",
    "1.7976931348623157e308",
];

fn leaf() -> impl Strategy<Value = Leaf> {
    prop_oneof![
        4 => any::<i32>().prop_map(|i| Leaf::Int(i % 1000)),
        4 => (-4096i32..4096).prop_map(Leaf::Exact),
        2 => prop::sample::select(HUGE.to_vec()).prop_map(Leaf::Huge),
        1 => prop::sample::select(vec!["inf", "-inf", "nan"]).prop_map(Leaf::Word),
    ]
}

/// Text that is not a number where a number or a list belongs.
const JUNK: [&str; 8] = [
    "null",
    "true",
    "\"five\"",
    "{}",
    "{\"a\": [1]}",
    "[]",
    "[1, [2]]",
    "7",
];

/// What is done to a well-formed file.
#[derive(Clone, Debug)]
enum Fault {
    None,
    /// The list at this pre-order index (of all nodes) gets an extra entry.
    Longer(usize),
    /// The list at this index loses its last entry.
    Shorter(usize),
    /// The node at this index (not the whole value) becomes junk.
    Junk(usize, &'static str),
    /// The text is cut to this fraction (in 1/64ths) of its length.
    Truncate(u8),
    /// Trailing text after the value.
    Trailing(&'static str),
}

fn fault() -> impl Strategy<Value = Fault> {
    prop_oneof![
        6 => Just(Fault::None),
        2 => any::<usize>().prop_map(Fault::Longer),
        2 => any::<usize>().prop_map(Fault::Shorter),
        3 => (any::<usize>(), prop::sample::select(JUNK.to_vec()))
            .prop_map(|(k, j)| Fault::Junk(k, j)),
        1 => (0u8..64).prop_map(Fault::Truncate),
        1 => prop::sample::select(vec![" ", "\n\t ", "]", ", 1", "x"]).prop_map(Fault::Trailing),
    ]
}

#[derive(Clone, Debug)]
struct JsonCase {
    /// Sizes of the axes (the ragged axis' entry is unused).
    dims: Vec<u64>,
    /// The ragged axis, if any (never the first).
    ragged: Option<usize>,
    /// Row lengths at the ragged axis, cycled.
    rows: Vec<u64>,
    /// Values, cycled.
    leaves: Vec<Leaf>,
    fault: Fault,
}

fn json_case() -> impl Strategy<Value = JsonCase> {
    (
        prop::collection::vec(0u64..4, 1..=3),
        any::<prop::sample::Index>(),
    )
        .prop_flat_map(|(dims, pick)| {
            let ragged = prop_oneof![
                Just(None),
                Just((dims.len() > 1).then(|| 1 + pick.index(dims.len() - 1))),
            ];
            (
                Just(dims),
                ragged,
                prop::collection::vec(0u64..5, 1..6),
                prop::collection::vec(leaf(), 1..10),
                fault(),
            )
        })
        .prop_map(|(dims, ragged, rows, leaves, fault)| JsonCase {
            dims,
            ragged,
            rows,
            leaves,
            fault,
        })
}

impl JsonCase {
    fn spec(&self) -> String {
        let parts: Vec<String> = (self.dims.iter().enumerate())
            .map(|(j, d)| {
                if Some(j) == self.ragged {
                    "var".into()
                } else {
                    d.to_string()
                }
            })
            .collect();
        parts.join(", ")
    }

    /// The file's text: the well-formed value, then the fault applied.
    fn build(&self) -> String {
        let mut leaves = self.leaves.iter().cycle();
        let mut rows = self.rows.iter().cycle();
        let mut node = self.level(0, &mut leaves, &mut rows);
        let mut paths = Vec::new();
        node.paths(&mut Vec::new(), &mut paths);
        let lists: Vec<&Vec<usize>> = paths
            .iter()
            .filter(|p| matches!(node.at(p), Node::List(_)))
            .collect();
        match &self.fault {
            Fault::None | Fault::Truncate(_) | Fault::Trailing(_) => {}
            Fault::Longer(k) | Fault::Shorter(k) => {
                let p = lists[k % lists.len()].clone();
                if let Node::List(items) = node.at_mut(&p) {
                    match (&self.fault, items.last().cloned()) {
                        (Fault::Shorter(_), Some(_)) => {
                            items.pop();
                        }
                        (_, Some(last)) => items.push(last),
                        (_, None) => items.push(Node::Leaf("1".into())),
                    }
                }
            }
            Fault::Junk(k, junk) => {
                if paths.len() > 1 {
                    let p = paths[1 + k % (paths.len() - 1)].clone();
                    *node.at_mut(&p) = Node::Leaf(junk.to_string());
                }
            }
        }
        let mut text = node.text();
        match &self.fault {
            Fault::Truncate(f) => {
                let cut = text.len() * *f as usize / 64;
                text.truncate(cut);
            }
            Fault::Trailing(t) => text.push_str(t),
            _ => {}
        }
        text
    }

    fn level<'a>(
        &self,
        level: usize,
        leaves: &mut impl Iterator<Item = &'a Leaf>,
        rows: &mut impl Iterator<Item = &'a u64>,
    ) -> Node {
        if level == self.dims.len() {
            return Node::Leaf(leaves.next().unwrap().text());
        }
        let n = if Some(level) == self.ragged {
            *rows.next().unwrap()
        } else {
            self.dims[level]
        };
        Node::List(
            (0..n)
                .map(|_| self.level(level + 1, leaves, rows))
                .collect(),
        )
    }
}

/// What a run on a JSON input must do.
#[derive(Debug, PartialEq)]
enum Expected {
    /// Exit 0; the values in order, and the lengths of every list in
    /// pre-order (the nesting).
    Values(Vec<f32>, Vec<usize>),
    /// Exit 1 with `error[data]`, whose message names this place when
    /// there is one (`entry [1][0]`, `the whole value`).
    Data(Option<String>),
}

fn place(at: &[usize]) -> String {
    if at.is_empty() {
        "the whole value".into()
    } else {
        let idx: Vec<String> = at.iter().map(usize::to_string).collect();
        format!("entry [{}]", idx.join("]["))
    }
}

/// A JSON value as the `f32` it stands for; `None` when it is not a
/// number (or a word for one) or does not fit `f32`.
fn leaf_value(v: &Value) -> Option<f32> {
    match v {
        Value::String(s) if s == "inf" => Some(f32::INFINITY),
        Value::String(s) if s == "-inf" => Some(f32::NEG_INFINITY),
        Value::String(s) if s == "nan" => Some(f32::NAN),
        Value::Number(n) => {
            let v = n.as_f64()? as f32;
            v.is_finite().then_some(v)
        }
        _ => None,
    }
}

/// The model: the first fault in pre-order, as the reader reports it (a
/// list's length before what it holds), or the values.
fn expected(case: &JsonCase, text: &str) -> Expected {
    let Ok(value) = serde_json::from_str::<Value>(text) else {
        return Expected::Data(None);
    };
    fn walk(
        case: &JsonCase,
        v: &Value,
        level: usize,
        at: &mut Vec<usize>,
        values: &mut Vec<f32>,
        lengths: &mut Vec<usize>,
    ) -> Result<(), String> {
        if level == case.dims.len() {
            return leaf_value(v).map(|x| values.push(x)).ok_or(place(at));
        }
        let Value::Array(items) = v else {
            return Err(place(at));
        };
        if Some(level) != case.ragged && items.len() as u64 != case.dims[level] {
            return Err(place(at));
        }
        lengths.push(items.len());
        for (k, item) in items.iter().enumerate() {
            at.push(k);
            walk(case, item, level + 1, at, values, lengths)?;
            at.pop();
        }
        Ok(())
    }
    let (mut values, mut lengths) = (Vec::new(), Vec::new());
    match walk(case, &value, 0, &mut Vec::new(), &mut values, &mut lengths) {
        Ok(()) => Expected::Values(values, lengths),
        Err(at) => Expected::Data(Some(at)),
    }
}

/// The values and list lengths of a result printed by `run --json`.
fn flatten(v: &Value, values: &mut Vec<f32>, lengths: &mut Vec<usize>) {
    match v {
        Value::Array(items) => {
            lengths.push(items.len());
            items.iter().for_each(|i| flatten(i, values, lengths));
        }
        Value::Number(n) => values.push(n.as_f64().unwrap() as f32),
        Value::String(s) => values.push(match s.as_str() {
            "inf" => f32::INFINITY,
            "-inf" => f32::NEG_INFINITY,
            "nan" => f32::NAN,
            other => panic!("a value `{other}`"),
        }),
        other => panic!("a value {other}"),
    }
}

fn same_bits(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|(x, y)| x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()))
}

/// Runs `y = x + x` on `case`'s file and checks the outcome.
fn check_json_case(case: &JsonCase) -> Result<(), TestCaseError> {
    let text = case.build();
    let want = expected(case, &text);
    let dir = scratch("json");
    std::fs::write(
        dir.join("p.shape"),
        format!("input x: {}\ny = x + x\n", case.spec()),
    )
    .unwrap();
    std::fs::write(dir.join("x.json"), &text).unwrap();
    let out = shapec_in(
        &dir,
        &[
            "run",
            "p.shape",
            "--backend",
            "cpu",
            "--json",
            "--input",
            "x=x.json",
        ],
        None,
    );
    let what = format!("spec {} file {}", case.spec(), truncated(&text));
    assert_clean_exit(&out, &what);
    match want {
        Expected::Values(values, lengths) => {
            prop_assert_eq!(out.code, Some(0), "{}: {}", what, out.describe());
            let v: Value = serde_json::from_str(&out.stdout).expect("JSON on stdout");
            let (mut got, mut got_lengths) = (Vec::new(), Vec::new());
            flatten(&v["results"][0]["values"], &mut got, &mut got_lengths);
            let doubled: Vec<f32> = values.iter().map(|x| x + x).collect();
            prop_assert!(
                same_bits(&got, &doubled),
                "{}: {:?} != {:?}",
                what,
                got,
                doubled
            );
            prop_assert_eq!(got_lengths, lengths, "{}", what);
        }
        Expected::Data(at) => {
            prop_assert_eq!(out.code, Some(1), "{}: {}", what, out.describe());
            let v: Value = serde_json::from_str(&out.stdout).expect("JSON on stdout");
            prop_assert_eq!(&v["error"]["kind"], "data", "{}: {}", what, out.describe());
            let message = v["error"]["message"].as_str().unwrap_or_default();
            prop_assert!(message.contains("x.json"), "{}: {}", what, message);
            if let Some(at) = at {
                prop_assert!(
                    message.contains(&format!("{at} ")),
                    "{}: `{}` not in {}",
                    what,
                    at,
                    message
                );
            }
        }
    }
    remove_tree(&dir);
    Ok(())
}

/// A large dense input: `n` values, one past `f32`'s range at `poison`.
#[derive(Clone, Debug)]
struct LargeCase {
    n: usize,
    seed: u64,
    poison: Option<usize>,
}

fn large_case() -> impl Strategy<Value = LargeCase> {
    (
        1usize << 20..=3 << 19,
        any::<u64>(),
        any::<Option<prop::sample::Index>>(),
    )
        .prop_map(|(n, seed, poison)| LargeCase {
            n,
            seed,
            poison: poison.map(|i| i.index(n)),
        })
}

/// The address-space limit a large case runs under: about what `shapec`
/// needs to start and run on the values, and far less than a parsed
/// `serde_json::Value` tree of them takes (32 bytes a value, doubled as
/// its list grows).
fn large_limit(n: usize) -> u64 {
    (88 << 20) + 24 * n as u64
}

fn large_value(seed: u64, i: usize) -> f32 {
    let z =
        (seed ^ (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    ((z >> 40) % 8192) as f32 / 8.0 - 512.0
}

fn check_large_case(case: &LargeCase) -> Result<(), TestCaseError> {
    let dir = scratch("large");
    std::fs::write(
        dir.join("p.shape"),
        format!("input x: {}\ny = x + x\n", case.n),
    )
    .unwrap();
    let mut text = String::with_capacity(case.n * 8);
    text.push('[');
    for i in 0..case.n {
        if i > 0 {
            text.push_str(", ");
        }
        if Some(i) == case.poison {
            text.push_str("1e39");
        } else {
            text.push_str(&large_value(case.seed, i).to_string());
        }
    }
    text.push(']');
    std::fs::write(dir.join("x.json"), &text).unwrap();
    drop(text);
    let limit = large_limit(case.n);
    let out = shapec_in(
        &dir,
        &[
            "run",
            "p.shape",
            "--backend",
            "cpu",
            "--input",
            "x=x.json",
            "--out",
            "out",
        ],
        Some(limit),
    );
    let what = format!("{} values under --as={limit}", case.n);
    assert_clean_exit(&out, &what);
    if out.code == Some(0) {
        prop_assert!(case.poison.is_none(), "{}: {}", what, out.describe());
        let a = npy::read(&std::fs::read(dir.join("out/y.npy")).unwrap()).unwrap();
        prop_assert_eq!(&a.shape, &vec![case.n as u64]);
        for (i, &y) in a.data.iter().enumerate() {
            let x = large_value(case.seed, i);
            prop_assert_eq!(y, x + x, "{}: y[{}]", what, i);
        }
    } else if out.stderr.starts_with("error[data]") {
        let at = case.poison.map(|i| format!("entry [{i}] "));
        prop_assert!(
            at.is_some_and(|at| out.stderr.contains(&at)),
            "{}: {}",
            what,
            out.describe()
        );
    } else {
        prop_assert!(
            out.stderr.starts_with("error[memory]"),
            "{}: {}",
            what,
            out.describe()
        );
    }
    remove_tree(&dir);
    Ok(())
}

proptest! {
    #![proptest_config(cases(96))]

    #[test]
    fn json_inputs_are_values_or_data_errors(case in json_case()) {
        check_json_case(&case)?;
    }
}

proptest! {
    #![proptest_config(cases(2))]

    #[test]
    fn large_dense_json_under_an_address_space_limit(case in large_case()) {
        check_large_case(&case)?;
    }
}

// ---- --out DIR ------------------------------------------------------------

/// Result names; each may be in a run, ragged or dense.
const NAMES: [&str; 3] = ["b", "c", "d"];

#[derive(Clone, Copy, Debug, PartialEq)]
enum Obstacle {
    /// A directory (holding a file).
    Dir,
    /// A read-only file.
    ReadOnly,
    /// A symbolic link to a file outside the directory.
    Link,
}

#[derive(Clone, Debug)]
struct Step {
    /// For each of [`NAMES`]: absent, or ragged (`true`) or dense.
    results: [Option<bool>; 3],
    /// Planted before the run: at `NAMES[i]`'s values (`false`) or
    /// offsets (`true`) file.
    obstacle: Option<(usize, bool, Obstacle)>,
}

fn step() -> impl Strategy<Value = Step> {
    let results = prop::array::uniform3(prop::option::of(any::<bool>()))
        .prop_filter("a result", |r| r.iter().any(Option::is_some));
    let obstacle = prop::option::weighted(
        0.5,
        (
            0usize..3,
            any::<bool>(),
            prop_oneof![
                2 => Just(Obstacle::Dir),
                1 => Just(Obstacle::ReadOnly),
                1 => Just(Obstacle::Link),
            ],
        ),
    );
    (results, obstacle).prop_map(|(results, obstacle)| Step { results, obstacle })
}

fn file_name(i: usize, offsets: bool) -> String {
    if offsets {
        format!("{}.offsets.npy", NAMES[i])
    } else {
        format!("{}.npy", NAMES[i])
    }
}

/// What is at a path, for comparing a directory before and after.
#[derive(Clone, Debug, PartialEq)]
enum Entry {
    File(Vec<u8>, u32),
    Dir(u32),
    Link(PathBuf),
}

fn snapshot(dir: &Path) -> BTreeMap<String, Entry> {
    fn walk(root: &Path, dir: &Path, out: &mut BTreeMap<String, Entry>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries {
            let path = e.unwrap().path();
            let name = path
                .strip_prefix(root)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode();
            let entry = if meta.file_type().is_symlink() {
                Entry::Link(std::fs::read_link(&path).unwrap())
            } else if meta.is_dir() {
                walk(root, &path, out);
                Entry::Dir(mode)
            } else {
                Entry::File(std::fs::read(&path).unwrap(), mode)
            };
            out.insert(name, entry);
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn remove_any(path: &Path) {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.is_dir() => std::fs::remove_dir_all(path).unwrap(),
        Ok(_) => std::fs::remove_file(path).unwrap(),
        Err(_) => {}
    }
}

fn plant(out: &Path, at: &str, obstacle: Obstacle) {
    let path = out.join(at);
    remove_any(&path);
    match obstacle {
        Obstacle::Dir => {
            std::fs::create_dir(&path).unwrap();
            std::fs::write(path.join("keep"), "kept").unwrap();
        }
        Obstacle::ReadOnly => {
            std::fs::write(&path, "read-only").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o444)).unwrap();
        }
        Obstacle::Link => std::os::unix::fs::symlink("../outside.txt", &path).unwrap(),
    }
}

/// The `.npy` header's shape and where its data starts (version 1.0).
fn npy_shape_and_data(bytes: &[u8]) -> (String, &[u8]) {
    assert_eq!(&bytes[..8], b"\x93NUMPY\x01\x00");
    let len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
    let header = String::from_utf8_lossy(&bytes[10..10 + len]).into_owned();
    (header, &bytes[10 + len..])
}

const RAGGED_ROWS: &str = "[[1, 2, 3], [4]]";
const DENSE: &str = "[[1, 2, 3], [4, 5, 6]]";

/// A scratch directory with the two inputs and a file outside `out`.
fn out_setup(name: &str) -> PathBuf {
    let dir = scratch(name);
    std::fs::write(dir.join("a.json"), RAGGED_ROWS).unwrap();
    std::fs::write(dir.join("e.json"), DENSE).unwrap();
    std::fs::write(dir.join("outside.txt"), "outside").unwrap();
    std::fs::create_dir(dir.join("out")).unwrap();
    dir
}

/// Runs one step in `dir` and checks it.
fn check_step(dir: &Path, step: &Step) -> Result<(), TestCaseError> {
    let out_dir = dir.join("out");
    if let Some((i, offsets, obstacle)) = step.obstacle {
        plant(&out_dir, &file_name(i, offsets), obstacle);
    }
    let before = snapshot(&out_dir);
    let mut program = String::from("input a: 2, var\ninput e: 2, 3\n");
    for (i, r) in step.results.iter().enumerate() {
        if let Some(ragged) = r {
            let from = if *ragged { "a" } else { "e" };
            program.push_str(&format!("{} = {from} + {from}\n", NAMES[i]));
        }
    }
    std::fs::write(dir.join("p.shape"), &program).unwrap();
    let out = shapec_in(
        dir,
        &[
            "run",
            "p.shape",
            "--backend",
            "cpu",
            "--input",
            "a=a.json",
            "--input",
            "e=e.json",
            "--out",
            "out",
        ],
        None,
    );
    let what = format!("{step:?}");
    assert_clean_exit(&out, &what);
    let after = snapshot(&out_dir);
    prop_assert_eq!(
        std::fs::read_to_string(dir.join("outside.txt")).unwrap(),
        "outside",
        "{}: written through a link",
        &what
    );
    // A directory at any of a result's paths: the run cannot replace the
    // result's set of files.
    let blocked: Vec<String> = (0..3)
        .filter(|&i| step.results[i].is_some())
        .flat_map(|i| [file_name(i, false), file_name(i, true)])
        .filter(|f| matches!(before.get(f), Some(Entry::Dir(_))))
        .collect();
    if let Some(first) = blocked.first() {
        prop_assert_eq!(out.code, Some(1), "{}: {}", &what, out.describe());
        prop_assert!(
            out.stderr.starts_with("error[write]") && out.stderr.contains(first.as_str()),
            "{}: {}",
            &what,
            out.describe()
        );
        prop_assert!(
            before == after,
            "{}: the directory changed on failure\nbefore: {:?}\nafter: {:?}",
            &what,
            before.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>()
        );
    } else {
        prop_assert_eq!(out.code, Some(0), "{}: {}", &what, out.describe());
        let mut want: BTreeMap<String, Option<Entry>> = before
            .iter()
            .map(|(k, v)| (k.clone(), Some(v.clone())))
            .collect();
        for i in 0..3 {
            if let Some(ragged) = step.results[i] {
                want.remove(&file_name(i, false));
                want.remove(&file_name(i, true));
                want.insert(file_name(i, false), None);
                if ragged {
                    want.insert(file_name(i, true), None);
                }
            }
        }
        prop_assert_eq!(
            after.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{}: the files after the run",
            &what
        );
        for (name, entry) in &want {
            match entry {
                Some(e) => prop_assert_eq!(after.get(name), Some(e), "{}: {} changed", &what, name),
                None => {
                    let Some(Entry::File(bytes, _)) = after.get(name) else {
                        return Err(TestCaseError::fail(format!("{what}: {name} is not a file")));
                    };
                    let ragged = step.results[NAMES
                        .iter()
                        .position(|n| name.starts_with(&format!("{n}.")))
                        .unwrap()]
                    .unwrap();
                    if name.ends_with(".offsets.npy") {
                        let (header, data) = npy_shape_and_data(bytes);
                        prop_assert!(
                            header.contains("'<i8'") && header.contains("(3,"),
                            "{}",
                            header
                        );
                        let ints: Vec<i64> = data
                            .chunks(8)
                            .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
                            .collect();
                        prop_assert_eq!(ints, vec![0, 3, 4]);
                    } else {
                        let a = npy::read(bytes).unwrap();
                        if ragged {
                            prop_assert_eq!(a.shape, vec![4]);
                            prop_assert_eq!(a.data, vec![2.0, 4.0, 6.0, 8.0]);
                        } else {
                            prop_assert_eq!(a.shape, vec![2, 3]);
                            prop_assert_eq!(a.data, vec![2.0, 4.0, 6.0, 8.0, 10.0, 12.0]);
                        }
                    }
                }
            }
        }
    }
    // Obstacles that are directories go, so that later steps can succeed.
    if let Some((i, offsets, Obstacle::Dir)) = step.obstacle {
        remove_any(&out_dir.join(file_name(i, offsets)));
    }
    Ok(())
}

fn check_steps(steps: &[Step]) -> Result<(), TestCaseError> {
    let dir = out_setup("out");
    for step in steps {
        check_step(&dir, step)?;
    }
    remove_tree(&dir);
    Ok(())
}

proptest! {
    #![proptest_config(cases(24))]

    #[test]
    fn out_replaces_each_result_set_whole_or_not_at_all(
        steps in prop::collection::vec(step(), 1..5)
    ) {
        check_steps(&steps)?;
    }
}

// ---- the minimal cases found before the fixes -----------------------------

/// Finding 3: a dense JSON input of 2^20 values aborted under an
/// address-space limit ("memory allocation of 20971520 bytes failed",
/// SIGABRT): the whole text and a `serde_json::Value` tree of it were held.
#[test]
fn finding_3_large_dense_json_under_an_address_space_limit() {
    check_large_case(&LargeCase {
        n: 1 << 20,
        seed: 0,
        poison: None,
    })
    .unwrap();
    // A value past f32's range deep in it: a data error naming the entry.
    check_large_case(&LargeCase {
        n: 1 << 20,
        seed: 1,
        poison: Some(1_000_000),
    })
    .unwrap();
}

/// Finding 4: `d` ragged, then dense, into the same directory left
/// `d.offsets.npy` beside the new `d.npy`.
#[test]
fn finding_4_a_dense_result_leaves_no_offsets_from_a_ragged_run() {
    let ragged = |r: bool| Step {
        results: [None, None, Some(r)],
        obstacle: None,
    };
    check_steps(&[ragged(true), ragged(false)]).unwrap();
    // And back, twice, with another result beside it.
    let both = |r: bool| Step {
        results: [Some(!r), None, Some(r)],
        obstacle: None,
    };
    check_steps(&[both(true), both(false), both(true), both(false)]).unwrap();
}

/// Finding 5: with a directory at `d.npy`, `c.npy` was renamed into place
/// before the run failed on `d.npy`; likewise `b.npy`, `b.offsets.npy`
/// and `c.npy` before a directory at `c.offsets.npy`.
#[test]
fn finding_5_a_target_that_cannot_be_replaced_changes_nothing() {
    check_steps(&[Step {
        results: [None, Some(false), Some(false)],
        obstacle: Some((2, false, Obstacle::Dir)),
    }])
    .unwrap();
    check_steps(&[Step {
        results: [Some(true), Some(true), None],
        obstacle: Some((1, true, Obstacle::Dir)),
    }])
    .unwrap();
    // Over files of an earlier run, and at a dense result's stale offsets.
    let earlier = Step {
        results: [Some(true), Some(true), Some(true)],
        obstacle: None,
    };
    check_steps(&[
        earlier.clone(),
        Step {
            results: [Some(false), Some(true), Some(true)],
            obstacle: Some((2, true, Obstacle::Dir)),
        },
        Step {
            results: [Some(false), Some(false), None],
            obstacle: Some((1, true, Obstacle::Dir)),
        },
        Step {
            results: [Some(false), Some(false), Some(false)],
            obstacle: Some((0, false, Obstacle::ReadOnly)),
        },
    ])
    .unwrap();
    // The error names the path.
    let dir = out_setup("finding_5_message");
    check_step(&dir, &earlier).unwrap();
    std::fs::remove_file(dir.join("out/c.offsets.npy")).unwrap();
    std::fs::create_dir(dir.join("out/c.offsets.npy")).unwrap();
    let before = snapshot(&dir.join("out"));
    let out = shapec_in(
        &dir,
        &[
            "run",
            "p.shape",
            "--backend",
            "cpu",
            "--input",
            "a=a.json",
            "--input",
            "e=e.json",
            "--out",
            "out",
        ],
        None,
    );
    assert_eq!(out.code, Some(1), "{}", out.describe());
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "error[write]: cannot write out/c.offsets.npy: it is a directory, which a result file cannot replace; no file was written"
    );
    assert_eq!(snapshot(&dir.join("out")), before);
    remove_tree(&dir);
}

/// Finding 10: finite JSON numbers past f32's range became infinities.
#[test]
fn finding_10_json_numbers_past_f32_range_are_data_errors() {
    for huge in ["3.4028236e38", "3.5e38", "-1e39", "1.7976931348623157e308"] {
        check_json_case(&JsonCase {
            dims: vec![1],
            ragged: None,
            rows: vec![0],
            leaves: vec![Leaf::Huge(huge)],
            fault: Fault::None,
        })
        .unwrap();
    }
    let dir = scratch("finding_10");
    std::fs::write(dir.join("p.shape"), "input x: 2, 2\ny = x + x\n").unwrap();
    std::fs::write(dir.join("r.shape"), "input x: 2, var\ny = x + x\n").unwrap();
    std::fs::write(dir.join("x.json"), "[[1, 2], [1e39, 4]]").unwrap();
    std::fs::write(
        dir.join("ok.json"),
        "[[3.4028235e38, \"inf\"], [\"-inf\", \"nan\"]]",
    )
    .unwrap();
    let run = |program: &str, file: &str| {
        shapec_in(
            &dir,
            &[
                "run",
                program,
                "--backend",
                "cpu",
                "--input",
                &format!("x={file}"),
            ],
            None,
        )
    };
    for program in ["p.shape", "r.shape"] {
        let out = run(program, "x.json");
        assert_eq!(out.code, Some(1), "{}", out.describe());
        assert!(
            out.stderr.starts_with("error[data]: x.json: ")
                && out.stderr.contains(
                    "entry [1][0] is 1e39, past the range of f32 (whose largest magnitude is 3.4028235e38); write \"inf\" or \"-inf\" for an infinity"
                ),
            "{}",
            out.stderr
        );
        // What rounds to f32::MAX fits, and the words stay.
        let out = run(program, "ok.json");
        assert_eq!(out.code, Some(0), "{}", out.describe());
        assert!(
            out.stdout.contains("= [inf, inf, -inf, NaN]"),
            "{}",
            out.stdout
        );
    }
    // A .npy of float64 the same way: named by its index.
    let mut npy = b"\x93NUMPY\x01\x00".to_vec();
    let header = "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }\n";
    npy.extend_from_slice(&(header.len() as u16).to_le_bytes());
    npy.extend_from_slice(header.as_bytes());
    for v in [1.0f64, 2.0, -1e39, f64::INFINITY] {
        npy.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(dir.join("x.npy"), &npy).unwrap();
    let out = run("p.shape", "x.npy");
    assert_eq!(out.code, Some(1), "{}", out.describe());
    assert_eq!(
        out.stderr.lines().next().unwrap(),
        "error[data]: x.npy: element (1, 0) (flat index 2) is -1e39, past the range of float32 (whose largest magnitude is 3.4028235e38); an infinity is saved as inf"
    );
    remove_tree(&dir);
}

/// The reader's other refusals keep their words, and the first fault in
/// the file is the one named (a list's length before what it holds).
#[test]
fn json_faults_are_named_in_document_order() {
    let dir = scratch("json_faults");
    std::fs::write(dir.join("p.shape"), "input x: 2, 3\ny = x + x\n").unwrap();
    std::fs::write(dir.join("r.shape"), "input x: 2, var\ny = x + x\n").unwrap();
    for (program, text, says) in [
        (
            "p.shape",
            "[1, 2, 3, 4, 5, 6]",
            "the whole value has 6 entries, where axis 0 has 2",
        ),
        (
            "p.shape",
            "[[1, 2, 3], [4, 5]]",
            "entry [1] has 2 entries, where axis 1 has 3",
        ),
        (
            "p.shape",
            "[[1, \"x\", 3, 4], [4, 5, 6]]",
            "entry [0] has 4 entries, where axis 1 has 3",
        ),
        (
            "p.shape",
            "[[1, \"x\", 3], [4, 5]]",
            "entry [0][1] is a string, not a number",
        ),
        (
            "p.shape",
            "[[1, 2, 3], [4, 5, {}]]",
            "entry [1][2] is an object, not a number",
        ),
        (
            "p.shape",
            "[[1, 2, [3]], [4, 5, 6]]",
            "entry [0][2] is a list, not a number",
        ),
        (
            "p.shape",
            "[[1, 2, 3], null]",
            "entry [1] is null, where a list of 3 is expected",
        ),
        (
            "p.shape",
            "[[1, 2, 3], [4, 5, 6]] x",
            "it is not JSON (trailing characters",
        ),
        (
            "p.shape",
            "[[1, 2, 3], [4, 5, true], [1e39]",
            "it is not JSON (EOF while parsing",
        ),
        (
            "r.shape",
            "[[1], 2]",
            "entry [1] is a number, where a list (a row of any length) is expected",
        ),
        (
            "r.shape",
            "[[1], [2], [3]]",
            "the whole value has 3 entries, where axis 0 has 2",
        ),
        ("r.shape", "[[1], [2, 1e39]", "it ends early"),
    ] {
        std::fs::write(dir.join("x.json"), text).unwrap();
        let out = shapec_in(
            &dir,
            &["run", program, "--backend", "cpu", "--input", "x=x.json"],
            None,
        );
        assert_eq!(out.code, Some(1), "{text}: {}", out.describe());
        assert!(
            out.stderr.starts_with("error[data]: x.json: ") && out.stderr.contains(says),
            "{text}: {}",
            out.stderr
        );
    }
    // Longer than a dense shape's values can take: refused before it is
    // read.
    let long = format!("[[1, 2, 3], [4, 5, 6]]{}", " ".repeat(10_000));
    std::fs::write(dir.join("x.json"), &long).unwrap();
    let out = shapec_in(
        &dir,
        &["run", "p.shape", "--backend", "cpu", "--input", "x=x.json"],
        None,
    );
    assert!(
        out.stderr
            .contains("the file is longer than 4480 bytes, more than 6 values can take"),
        "{}",
        out.stderr
    );
    remove_tree(&dir);
}
