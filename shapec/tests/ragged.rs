//! Ragged (`var`) dims through `shapec`: inference prints them, `run`
//! reads rows of their own lengths from JSON, prints them as nested lists
//! and writes them as values plus offsets; rows that do not broadcast are
//! errors placed in the program.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

struct Output {
    status: i32,
    stdout: String,
    stderr: String,
}

fn shapec(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_shapec"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("the shapec binary runs");
    Output {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// A scratch directory holding DyND's examples as a program and data.
fn setup(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    let files = [
        (
            "p.shape",
            "# DyND's ragged examples\ninput a: 2, var\ninput b: 2, 1\nc = a + b\ns = einsum(\"i, j => i\", a)\nd: 2, 3 <- a\n",
        ),
        ("a.json", "[[1, 2, 3], [4]]"),
        ("short.json", "[[1, 2], [4]]"),
        ("b.json", "[[4], [5]]"),
    ];
    for (file, text) in files {
        std::fs::write(dir.join(file), text).expect("a scratch file");
    }
    dir
}

/// The entry of `results` named `name` in `shapec run --json`'s output.
fn result_named(v: &Value, name: &str) -> Value {
    v["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == name)
        .cloned()
        .unwrap()
}

fn json_of(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

#[test]
fn inference_prints_var() {
    let dir = setup("ragged_infer");
    let out = shapec(&dir, &["infer", "p.shape"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("c = add(a, b)           : |->2, var\n"),
        "{}",
        out.stdout
    );
    assert!(out.stdout.contains(": |->2, 3\n"), "{}", out.stdout);
    let out = shapec(&dir, &["infer", "p.shape", "--json"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    assert_eq!(
        v["tensors"]["c"],
        json!({"batch": [], "input": [], "output": [2, "var"]})
    );
}

#[test]
fn runs_read_and_print_rows_of_their_own_lengths() {
    let dir = setup("ragged_run");
    let args = [
        "run", "p.shape", "--input", "a=a.json", "--input", "b=b.json", "--json",
    ];
    let out = shapec(&dir, &args);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    let result = |name: &str| result_named(&v, name);
    assert_eq!(v["data"][0]["dims"], json!([2, "var"]));
    assert_eq!(result("c")["dims"], json!([2, "var"]));
    assert_eq!(result("c")["values"], json!([[5.0, 6.0, 7.0], [9.0]]));
    assert_eq!(result("s")["values"], json!([6.0, 4.0]));
    // DyND's var to strided: [[1, 2, 3], [4]] into (2, 3).
    assert_eq!(
        result("d")["values"],
        json!([[1.0, 2.0, 3.0], [4.0, 4.0, 4.0]])
    );
    let text = shapec(&dir, &args[..6]);
    assert_eq!(text.status, 0, "{}", text.stderr);
    assert!(
        text.stdout
            .contains("c : |->2, var (rows of lengths [3, 1]) = [5, 6, 7, 9]"),
        "{}",
        text.stdout
    );
}

#[test]
fn out_writes_values_and_offsets() {
    let dir = setup("ragged_out");
    let out = shapec(
        &dir,
        &[
            "run", "p.shape", "--input", "a=a.json", "--input", "b=b.json", "--out", "res",
        ],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    // c: the rows' values one after another, `<f4` of shape (4,).
    let values = std::fs::read(dir.join("res/c.npy")).unwrap();
    let header = String::from_utf8_lossy(&values[10..74]);
    assert!(
        header.contains("'descr': '<f4'") && header.contains("(4, )"),
        "{header}"
    );
    let floats: Vec<f32> = values[values.len() - 16..]
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(floats, [5.0, 6.0, 7.0, 9.0]);
    // Where each row starts, then the total: `<i8` of shape (3,).
    let offsets = std::fs::read(dir.join("res/c.offsets.npy")).unwrap();
    let header = String::from_utf8_lossy(&offsets[10..74]);
    assert!(
        header.contains("'descr': '<i8'") && header.contains("(3, )"),
        "{header}"
    );
    let ints: Vec<i64> = offsets[offsets.len() - 24..]
        .chunks(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(ints, [0, 3, 4]);
    // Dense results keep their one file.
    assert!(dir.join("res/d.npy").exists());
    assert!(!dir.join("res/d.offsets.npy").exists());
}

#[test]
fn rows_that_do_not_broadcast_are_placed_errors() {
    let dir = setup("ragged_errors");
    let out = shapec(
        &dir,
        &[
            "run",
            "p.shape",
            "--input",
            "a=short.json",
            "--input",
            "b=b.json",
            "--json",
        ],
    );
    assert_eq!(out.status, 1, "{}", out.stdout);
    let v = json_of(&out.stdout);
    assert_eq!(v["error"]["kind"], "ragged_row");
    let message = v["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("row (0)") && message.contains("must be 1 or 3"),
        "{message}"
    );
    assert_eq!(v["error"]["line"], 6);

    // A ragged input needs its rows.
    let out = shapec(&dir, &["run", "p.shape", "--input", "b=b.json"]);
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("--input a=FILE.json"), "{}", out.stderr);

    // Rows that are not lists, and a list where a number belongs.
    std::fs::write(dir.join("bad.json"), "[[1], 2]").unwrap();
    let out = shapec(
        &dir,
        &[
            "run",
            "p.shape",
            "--input",
            "a=bad.json",
            "--input",
            "b=b.json",
        ],
    );
    assert_eq!(out.status, 1);
    assert!(
        out.stderr.contains("entry [1] is a number"),
        "{}",
        out.stderr
    );
    // Not JSON at all: refused at the first byte, not read to the end.
    let out = shapec(
        &dir,
        &[
            "run",
            "p.shape",
            "--input",
            "a=/dev/zero",
            "--input",
            "b=b.json",
        ],
    );
    assert_eq!(out.status, 1);
    let out = shapec(
        &dir,
        &[
            "run",
            "p.shape",
            "--input",
            "a=/dev/zero.json",
            "--input",
            "b=b.json",
        ],
    );
    assert_eq!(out.status, 1);
    std::fs::write(dir.join("zeros.json"), vec![0u8; 1 << 20]).unwrap();
    let out = shapec(
        &dir,
        &[
            "run",
            "p.shape",
            "--input",
            "a=zeros.json",
            "--input",
            "b=b.json",
        ],
    );
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("it is not JSON"), "{}", out.stderr);
    // Three rows where the shape has two.
    std::fs::write(dir.join("three.json"), "[[1], [2], [3]]").unwrap();
    let out = shapec(
        &dir,
        &[
            "run",
            "p.shape",
            "--input",
            "a=three.json",
            "--input",
            "b=b.json",
        ],
    );
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("has 3 entries"), "{}", out.stderr);
}

#[test]
fn var_is_refused_where_it_has_no_meaning() {
    let dir = setup("ragged_refused");
    std::fs::write(
        dir.join("concat.shape"),
        "input a: 2, var\ninput b: 2, 3\nc = concat(a, b)\n",
    )
    .unwrap();
    let out = shapec(&dir, &["infer", "concat.shape", "--json"]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    let v = json_of(&out.stdout);
    assert_eq!(v["error"]["kind"], "ragged_unsupported", "{v}");
}

#[test]
fn the_ragged_example_runs_on_both_backends() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let args = [
        "run",
        "ragged.shape",
        "--input",
        "words=data/words.json",
        "--json",
    ];
    let out = shapec(&examples, &args);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    let padded = &v["results"][2];
    assert_eq!(padded["name"], "padded");
    // The middle sentence's one vector fills both places.
    assert_eq!(
        padded["values"][1],
        json!([[0.5, 0.5, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5]])
    );
    assert_eq!(v["results"][0]["dims"], json!([3, "var", 4]));
    let diff = shapec(
        &examples,
        &[
            "diff",
            "ragged.shape",
            "--input",
            "words=data/words.json",
            "--backend",
            "wgpu",
            "--json",
        ],
    );
    let required = std::env::var("SHAPE_REQUIRE_GPU").is_ok_and(|v| v == "1");
    if diff.status != 0 && !required {
        assert!(diff.stdout.contains("no GPU adapter") || diff.stderr.contains("no GPU adapter"));
        return;
    }
    assert_eq!(diff.status, 0, "{}{}", diff.stdout, diff.stderr);
    // 20 ragged values, 12 sums, 24 padded.
    assert!(diff.stdout.contains("\"elements\":56"), "{}", diff.stdout);
    assert!(
        diff.stdout.contains("\"dims\":[3,\"var\",4]"),
        "{}",
        diff.stdout
    );
}

#[test]
fn a_memory_limit_covers_ragged_data() {
    // Rows of 1000 and 500 values: 6000 bytes of a, 6000 of y and 24 of
    // offsets each, which the plan alone (ragged tensors empty) does not
    // count.
    let dir = setup("ragged_memory");
    std::fs::write(dir.join("big.shape"), "input a: 2, var\ny = exp(a)\n").unwrap();
    let rows = |n: usize| format!("[{}]", vec!["0"; n].join(", "));
    std::fs::write(
        dir.join("big.json"),
        format!("[{}, {}]", rows(1000), rows(500)),
    )
    .unwrap();
    let run = |limit: &str| {
        shapec(
            &dir,
            &[
                "run",
                "big.shape",
                "--input",
                "a=big.json",
                "--memory-limit",
                limit,
            ],
        )
    };
    let out = run("12047");
    assert_ne!(out.status, 0, "{}", out.stdout);
    assert!(out.stderr.contains("12048"), "{}", out.stderr);
    let out = run("12048");
    assert_eq!(out.status, 0, "{}", out.stderr);
}

/// `NAME[...] <- EXPR` into a ragged input given as data: `--input a=`
/// gives the declaration its rows, the new version keeps them, and `run`
/// prints and writes the name once, with its last version's values.
#[test]
fn an_assignment_into_an_input_keeps_its_rows_and_writes_the_last_version() {
    let dir = setup("ragged_assign_existing");
    std::fs::write(
        dir.join("q.shape"),
        "input a: 2, var\ninput b: 2, 1\nbefore = a * 2\na[...] <- b\nafter = a + before\n",
    )
    .unwrap();
    let args = [
        "run", "q.shape", "--input", "a=a.json", "--input", "b=b.json", "--json", "--out", "res",
    ];
    let out = shapec(&dir, &args);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    let names: Vec<&str> = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["before", "a", "after"]);
    let result = |i: usize| v["results"][i]["values"].clone();
    assert_eq!(result(0), json!([[2.0, 4.0, 6.0], [8.0]]));
    assert_eq!(result(1), json!([[4.0, 4.0, 4.0], [5.0]]));
    assert_eq!(result(2), json!([[6.0, 8.0, 10.0], [13.0]]));
    let values = std::fs::read(dir.join("res/a.npy")).unwrap();
    let floats: Vec<f32> = values[values.len() - 16..]
        .chunks(4)
        .map(|b| f32::from_le_bytes(b.try_into().unwrap()))
        .collect();
    assert_eq!(floats, [4.0, 4.0, 4.0, 5.0]);
    assert!(dir.join("res/a.offsets.npy").is_file());
    // A source row of 2 where the destination's has 3: placed at the
    // assignment.
    std::fs::write(dir.join("two.json"), "[[1, 2], [3, 4]]").unwrap();
    std::fs::write(
        dir.join("r.shape"),
        "input a: 2, var\ninput t: 2, var\na[...] <- t\n",
    )
    .unwrap();
    let out = shapec(
        &dir,
        &[
            "run",
            "r.shape",
            "--input",
            "a=a.json",
            "--input",
            "t=two.json",
        ],
    );
    assert_ne!(out.status, 0);
    assert!(
        out.stderr.contains("ragged_row") && out.stderr.contains("a[...] <- t"),
        "{}",
        out.stderr
    );
}

/// The int64 values at the end of a `.npy` file of `n` of them.
fn int64s(path: &Path, n: usize) -> Vec<i64> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    bytes[bytes.len() - 8 * n..]
        .chunks(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

#[test]
fn nested_rows_read_print_and_write_one_offsets_file_per_level() {
    // DyND's `3 * var * var`: sentences of words of characters.
    let dir = setup("ragged_nested");
    std::fs::write(
        dir.join("n.shape"),
        "input t: 3, var, var\ninput w: 3, var, 1\ny = t * w\ns = einsum(\"ijk=>ij\", y)\n",
    )
    .unwrap();
    std::fs::write(dir.join("t.json"), "[[[1, 2], [3], []], [[4, 5, 6]], []]").unwrap();
    std::fs::write(dir.join("w.json"), "[[[10], [20], [30]], [[2]], []]").unwrap();
    let args = [
        "run", "n.shape", "--input", "t=t.json", "--input", "w=w.json", "--json",
    ];
    let out = shapec(&dir, &args);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    let result = |name: &str| result_named(&v, name);
    assert_eq!(result("y")["dims"], json!([3, "var", "var"]));
    assert_eq!(
        result("y")["values"],
        json!([[[10.0, 20.0], [60.0], []], [[8.0, 10.0, 12.0]], []])
    );
    assert_eq!(
        result("s")["values"],
        json!([[30.0, 60.0, 0.0], [30.0], []])
    );
    // A list of the wrong depth is placed in the file.
    std::fs::write(dir.join("flat.json"), "[[1, 2], [3], []]").unwrap();
    let out = shapec(
        &dir,
        &[
            "run",
            "n.shape",
            "--input",
            "t=flat.json",
            "--input",
            "w=w.json",
        ],
    );
    assert_ne!(out.status, 0);
    assert!(out.stderr.contains("(3, var, var)"), "{}", out.stderr);
    // --out: the values, then one offsets file per level; a stale
    // deeper level from an earlier run is removed with the set.
    std::fs::create_dir_all(dir.join("res")).unwrap();
    std::fs::write(dir.join("res/y.offsets.2.npy"), "stale").unwrap();
    std::fs::write(dir.join("res/s.offsets.1.npy"), "stale").unwrap();
    let out = shapec(
        &dir,
        &[
            "run", "n.shape", "--input", "t=t.json", "--input", "w=w.json", "--out", "res",
            "--json",
        ],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    assert_eq!(
        v["written"]["files"],
        json!([
            "y.npy",
            "y.offsets.npy",
            "y.offsets.1.npy",
            "s.npy",
            "s.offsets.npy"
        ])
    );
    assert_eq!(int64s(&dir.join("res/y.offsets.npy"), 4), [0, 3, 4, 4]);
    assert_eq!(int64s(&dir.join("res/y.offsets.1.npy"), 5), [0, 2, 3, 3, 6]);
    assert_eq!(int64s(&dir.join("res/s.offsets.npy"), 4), [0, 3, 4, 4]);
    assert!(!dir.join("res/y.offsets.2.npy").exists());
    assert!(!dir.join("res/s.offsets.1.npy").exists());
}
