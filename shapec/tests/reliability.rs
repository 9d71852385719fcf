//! Regression tests for issue 10's command-line findings: each runs the
//! `shapec` binary the way a hostile user would (huge names, sizes near
//! 2^64, /dev/zero as a file, tight memory limits, cut-short writes,
//! symbolic links) and checks for a clear error, never a panic or an
//! abort, and no partial or stale files.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

struct Output {
    status: i32,
    stdout: String,
    stderr: String,
}

fn shapec_in(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_shapec"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .output()
        .expect("the shapec binary runs");
    Output {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A scratch directory for one test, with `files` written in it.
fn scratch(name: &str, files: &[(&str, &str)]) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("reliability")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    for (file, text) in files {
        std::fs::write(dir.join(file), text).unwrap();
    }
    dir
}

fn json_of(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

// ---- 2. no panic on long descriptions ------------------------------------

#[test]
fn long_names_and_many_labels_print_without_panicking() {
    let name = "n".repeat(65_530);
    let labels: Vec<String> = (0..3_300).map(|i| format!("a{i}")).collect();
    let ones = vec!["1"; 3_300].join(",");
    let permute = format!(
        "input p: {ones}\nq = permute(\"{}=>{}\", p)\n",
        labels.join(","),
        labels.iter().rev().cloned().collect::<Vec<_>>().join(",")
    );
    let dir = scratch(
        "long_names",
        &[
            (
                "name.shape",
                &format!("input {name}: 2\ny = relu({name})\n"),
            ),
            ("permute.shape", &permute),
        ],
    );
    for file in ["name.shape", "permute.shape"] {
        let result = if file == "name.shape" { "y" } else { "q" };
        for extra in [&[][..], &["--projections"], &["--explain", result]] {
            let mut args = vec!["infer", file];
            args.extend_from_slice(extra);
            let out = shapec_in(&dir, &args);
            assert_eq!(out.status, 0, "{file} {extra:?}: {}", out.stderr);
            assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
        }
    }
    let out = shapec_in(&dir, &["infer", "name.shape"]);
    // Every ` : ` lines up after the longest description.
    let width = format!("y = relu({name})").len();
    assert!(out.stdout.lines().all(|l| l[width..].starts_with(" : ")));
}

// ---- 6. memory -------------------------------------------------------------

#[test]
fn a_run_larger_than_memory_is_refused_before_it_allocates() {
    let dir = scratch(
        "memory",
        &[
            ("huge.shape", "input x: 2147483648\ny = relu(x)\n"),
            ("enormous.shape", "input x: 1099511627776\ny = relu(x)\n"),
            ("small.shape", "input x: 1000\ny = relu(x)\n"),
        ],
    );
    // 8 GiB of x (moved into the CPU backend, not copied) and y: 16 GiB.
    let out = shapec_in(
        &dir,
        &[
            "run",
            "huge.shape",
            "--backend",
            "cpu",
            "--memory-limit",
            "1G",
        ],
    );
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert_eq!(
        out.stderr,
        "error[memory]: out of memory: this run needs 17179869184 bytes, 1073741824 available (--memory-limit)\n\n"
    );
    // diff also holds a copy of x for the second run (then the reference
    // results while it runs): 24 GiB.
    let out = shapec_in(
        &dir,
        &[
            "diff",
            "huge.shape",
            "--backend",
            "cpu",
            "--memory-limit",
            "1G",
        ],
    );
    assert!(
        out.stderr.contains("needs 25769803776 bytes"),
        "{}",
        out.stderr
    );
    // 4 TiB: more than any machine here has, whatever the limit found.
    let out = shapec_in(&dir, &["run", "enormous.shape", "--backend", "cpu"]);
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with("error[memory]: out of memory: this run needs 13194139533312 bytes, ")
            || out.stderr.contains("exceeds")
            || out.stderr.contains("per buffer"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("memory allocation of"));
    // Within the limit, it runs.
    let out = shapec_in(
        &dir,
        &[
            "run",
            "small.shape",
            "--backend",
            "cpu",
            "--memory-limit",
            "1M",
        ],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let out = shapec_in(
        &dir,
        &[
            "run",
            "small.shape",
            "--backend",
            "cpu",
            "--memory-limit",
            "7999",
        ],
    );
    assert!(
        out.stderr.contains("needs 8000 bytes, 7999 available"),
        "{}",
        out.stderr
    );
    let out = shapec_in(&dir, &["run", "small.shape", "--memory-limit", "lots"]);
    assert_eq!(out.status, 2);
    assert!(
        out.stderr.contains("expected a size like 2G"),
        "{}",
        out.stderr
    );
}

// ---- 7. unbounded reads ----------------------------------------------------

#[test]
fn endless_and_lying_files_are_refused_without_reading_them_whole() {
    let dir = scratch("reads", &[("p.shape", "input x: 4\ny = relu(x)\n")]);
    let out = shapec_in(&dir, &["infer", "/dev/zero"]);
    assert_eq!(out.status, 1);
    assert_eq!(
        out.stderr,
        "error[read]: /dev/zero is larger than the 16777216 bytes a program may have\n\n"
    );
    let out = shapec_in(
        &dir,
        &[
            "run",
            "p.shape",
            "--backend",
            "cpu",
            "--input",
            "x=/dev/zero",
        ],
    );
    assert_eq!(out.status, 1);
    assert_eq!(
        out.stderr,
        "error[npy]: /dev/zero: not a .npy file (it does not start with \\x93NUMPY)\n\n"
    );
    // A header that promises 2^40 floats, with 16 bytes after it: refused
    // from the file's length, before anything is allocated.
    let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }";
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    b.extend_from_slice(dict.as_bytes());
    b.extend_from_slice(&[0; 16]);
    std::fs::write(dir.join("liar.npy"), &b).unwrap();
    std::fs::write(
        dir.join("big.shape"),
        "input x: 1099511627776\ny = relu(x)\n",
    )
    .unwrap();
    let out = shapec_in(
        &dir,
        &[
            "run",
            "big.shape",
            "--backend",
            "cpu",
            "--input",
            "x=liar.npy",
            "--memory-limit",
            "1P",
        ],
    );
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert!(!out.stderr.contains("memory allocation"), "{}", out.stderr);
    // A directory is not data.
    let out = shapec_in(
        &dir,
        &["run", "p.shape", "--backend", "cpu", "--input", "x=."],
    );
    assert_eq!(out.status, 1);
    assert!(
        out.stderr.starts_with("error[read]: cannot read .: "),
        "{}",
        out.stderr
    );
}

// ---- 8. --out --------------------------------------------------------------

const TWO_RESULTS: &str = "input x: 1000\ny = relu(x)\nz = neg(x)\n";

#[test]
fn out_that_is_a_file_fails_before_the_run() {
    let dir = scratch(
        "out_file",
        &[
            ("blocker", "a file"),
            // A run that would fail: the --out error must come first.
            (
                "big.shape",
                "input a: 100000\ninput b: 100000\nouter = einsum(\"i;j=>ij\", a, b)\n",
            ),
            ("none.shape", "input x: 2\n"),
        ],
    );
    let out = shapec_in(
        &dir,
        &["run", "big.shape", "--backend", "cpu", "--out", "blocker"],
    );
    assert_eq!(out.status, 1);
    assert_eq!(
        out.stderr,
        "error[write]: cannot write blocker: it exists and is not a directory\n\n"
    );
    // No results: nothing claimed, nothing created.
    let out = shapec_in(
        &dir,
        &["run", "none.shape", "--backend", "cpu", "--out", "results"],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out
        .stdout
        .ends_with("no results to write to results: the program assigns no tensor\n"));
    assert!(!out.stdout.contains("wrote"));
    assert!(!dir.join("results").exists());
    // A result name too long for a file name: refused before the run.
    let long = "r".repeat(300);
    std::fs::write(
        dir.join("long.shape"),
        format!("input x: 2\n{long} = relu(x)\n"),
    )
    .unwrap();
    let out = shapec_in(
        &dir,
        &["run", "long.shape", "--backend", "cpu", "--out", "results"],
    );
    assert_eq!(out.status, 1);
    assert!(
        out.stderr
            .contains("more than the 255 a file system allows"),
        "{}",
        out.stderr
    );
}

#[test]
fn out_replaces_a_symlink_and_never_writes_through_it() {
    let dir = scratch(
        "out_symlink",
        &[("p.shape", TWO_RESULTS), ("target.txt", "precious")],
    );
    std::fs::create_dir(dir.join("results")).unwrap();
    std::os::unix::fs::symlink(dir.join("target.txt"), dir.join("results/y.npy")).unwrap();
    let out = shapec_in(
        &dir,
        &["run", "p.shape", "--backend", "cpu", "--out", "results"],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(
        std::fs::read_to_string(dir.join("target.txt")).unwrap(),
        "precious"
    );
    let meta = std::fs::symlink_metadata(dir.join("results/y.npy")).unwrap();
    assert!(meta.file_type().is_file());
    let y = shapec::npy::read(&std::fs::read(dir.join("results/y.npy")).unwrap()).unwrap();
    assert_eq!(y.shape, vec![1000]);
    assert_eq!(listing(&dir.join("results")), ["y.npy", "z.npy"]);
}

#[test]
fn a_write_cut_short_leaves_the_old_files_and_no_partial_one() {
    let dir = scratch("out_cut_short", &[("p.shape", TWO_RESULTS)]);
    std::fs::create_dir(dir.join("results")).unwrap();
    std::fs::write(dir.join("results/y.npy"), "stale y").unwrap();
    std::fs::write(dir.join("results/z.npy"), "stale z").unwrap();
    // Files of at most one block (512 bytes for sh's ulimit -f): each
    // result's 4 KB cannot be written.
    let shapec = env!("CARGO_BIN_EXE_shapec");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -f 1 && exec '{shapec}' run p.shape --backend cpu --out results"
        ))
        .current_dir(&dir)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with("error[write]: cannot write results/y.npy: "),
        "{stderr}"
    );
    assert!(stderr.contains("File too large"), "{stderr}");
    assert_eq!(
        std::fs::read_to_string(dir.join("results/y.npy")).unwrap(),
        "stale y"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("results/z.npy")).unwrap(),
        "stale z"
    );
    assert_eq!(listing(&dir.join("results")), ["y.npy", "z.npy"]);
    // Without the limit both are replaced together.
    let out = shapec_in(
        &dir,
        &["run", "p.shape", "--backend", "cpu", "--out", "results"],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    for name in ["y.npy", "z.npy"] {
        let a = shapec::npy::read(&std::fs::read(dir.join("results").join(name)).unwrap());
        assert_eq!(a.unwrap().data.len(), 1000, "{name}");
    }
    assert_eq!(listing(&dir.join("results")), ["y.npy", "z.npy"]);
}

// ---- 9. smaller ------------------------------------------------------------

#[test]
fn slice_out_of_range_is_located() {
    let dir = scratch(
        "slice",
        &[("p.shape", "input x: 3|4\ny = batch_slice(x)\n")],
    );
    let out = shapec_in(
        &dir,
        &["run", "p.shape", "--backend", "cpu", "--slice", "3"],
    );
    assert_eq!(out.status, 1);
    insta::assert_snapshot!("slice_out_of_range", out.stderr);
    let out = shapec_in(
        &dir,
        &[
            "run",
            "p.shape",
            "--backend",
            "cpu",
            "--slice",
            "3",
            "--json",
        ],
    );
    let e = &json_of(&out.stdout)["error"];
    assert_eq!(e["kind"], "slice_out_of_range");
    assert_eq!(e["op"], "batch_slice");
    assert_eq!(e["line"], 2);
    assert_eq!(
        e["span"],
        json!({"start": 17, "end": 31, "line": 2, "column": 5})
    );
    let out = shapec_in(
        &dir,
        &["run", "p.shape", "--backend", "cpu", "--slice", "2"],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
}

#[test]
fn an_overflowing_product_of_sizes_is_exact() {
    let dir = scratch(
        "overflow",
        &[("c.shape", "const k: 4294967296,4294967296,16 = [1]\n")],
    );
    let out = shapec_in(&dir, &["infer", "c.shape"]);
    assert_eq!(out.status, 1);
    assert!(
        !out.stderr.contains("18446744073709551615"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.starts_with("error[total_elems]: element count mismatch in the 1 elements of `k` declared as \"4294967296,4294967296,16\": its known sizes multiply to 295147905179352825856, more than the 1 values written"),
        "{}",
        out.stderr
    );
}

#[test]
fn repeated_inputs_are_an_error() {
    let dir = scratch("repeated", &[("p.shape", "input x: 2\ny = relu(x)\n")]);
    let out = shapec_in(
        &dir,
        &[
            "run",
            "p.shape",
            "--backend",
            "cpu",
            "--input",
            "x=a.npy",
            "--input",
            "x=b.npy",
        ],
    );
    assert_eq!(out.status, 1);
    assert_eq!(
        out.stderr,
        "error[data]: --input x=... is given twice (a.npy and b.npy); give each input once\n\n"
    );
}

#[test]
fn explain_takes_every_name_infer_prints() {
    let dir = scratch(
        "explain_names",
        &[(
            "p.shape",
            "input x: 2|3\nparam w: 3->1\ny = relu(w @ x) * 2\n",
        )],
    );
    let out = shapec_in(
        &dir,
        &["infer", "p.shape", "--explain", "y.1", "--explain", "2"],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.contains("\ny.1: 2|->1\n"), "{}", out.stdout);
    assert!(out.stdout.contains("\n2: |->1\n"), "{}", out.stdout);
    let out = shapec_in(&dir, &["infer", "p.shape", "--explain", "nope\x1b[2J"]);
    assert_eq!(out.status, 1);
    assert!(
        out.stderr.contains("no tensor `nope\\u{1b}[2J`"),
        "{}",
        out.stderr
    );
}

#[test]
fn broadcast_reads_hyphen_values_and_escapes_control_characters() {
    let dir = scratch("broadcast", &[]);
    let out = shapec_in(&dir, &["broadcast", "-1,2", "3"]);
    assert_eq!(out.status, 1);
    assert_eq!(
        out.stderr,
        "error[broadcast]: shape `-1,2`: the size `-1` is negative (sizes are whole numbers, 0 or more)\n\n"
    );
    let out = shapec_in(&dir, &["broadcast", "2\x1b]0;pwned\x07", "3"]);
    assert_eq!(out.status, 1);
    assert!(
        !out.stderr.contains('\x1b') && !out.stderr.contains('\x07'),
        "{:?}",
        out.stderr
    );
    assert!(
        out.stderr.contains("2\\u{1b}]0;pwned\\u{7}"),
        "{}",
        out.stderr
    );
    // Options after the shapes still work.
    let out = shapec_in(&dir, &["broadcast", "2,1", "3", "--json"]);
    assert_eq!(json_of(&out.stdout), json!({"shape": [2, 3]}));
}

#[test]
fn diff_on_wgpu_checks_the_gpu_buffer_limit_before_the_reference_run() {
    // 40,000 x 40,000 floats: 6.4 GB, within the CPU backend's 8 GiB but
    // past any GPU's largest storage buffer (at most 4 GiB).
    let dir = scratch(
        "diff_gpu_limit",
        &[(
            "p.shape",
            "input a: 40000\ninput b: 40000\nouter = einsum(\"i;j=>ij\", a, b)\n",
        )],
    );
    let started = std::time::Instant::now();
    let out = shapec_in(
        &dir,
        &[
            "diff",
            "p.shape",
            "--backend",
            "wgpu",
            "--memory-limit",
            "1P",
        ],
    );
    let required = std::env::var("SHAPE_REQUIRE_GPU").is_ok_and(|v| v == "1");
    if out.stderr.contains("no GPU adapter") && !required {
        return;
    }
    assert_eq!(out.status, 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("error[run]: `outer` (shape |->40000, 40000) needs a buffer of 6400000000 bytes, more than the "),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("that the wgpu adapter "),
        "{}",
        out.stderr
    );
    // Not a measurement: the reference run of 1.6e9 multiplications
    // would have taken far longer than any check.
    let _ = started;
}

// ---- scripts and CI: --json and --tolerance ---------------------------------

#[test]
fn run_json_gives_every_result_with_shape_dims_and_values() {
    let dir = scratch(
        "run_json",
        &[(
            "p.shape",
            "const c: 2|3 = [1, 2, 3, 4, 5, 6]\ny = c * 2\nz = transpose(c)\n",
        )],
    );
    let out = shapec_in(
        &dir,
        &["run", "p.shape", "--backend", "cpu", "--json", "--out", "o"],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    assert_eq!(v["backend"], "cpu (coalesced)");
    assert_eq!(
        v["data"][0],
        json!({"name": "c", "kind": "const", "shape": {"batch": [2], "input": [], "output": [3]}, "dims": [2, 3], "source": {"kind": "program"}})
    );
    assert_eq!(
        v["results"][0],
        json!({"name": "y", "shape": {"batch": [2], "input": [], "output": [3]}, "dims": [2, 3], "values": [[2.0, 4.0, 6.0], [8.0, 10.0, 12.0]]})
    );
    assert_eq!(v["results"][1]["name"], "z");
    assert_eq!(v["results"][1]["shape"]["input"], json!([3]));
    assert_eq!(
        v["written"],
        json!({"dir": "o", "files": ["y.npy", "z.npy"]})
    );
    let out = shapec_in(&dir, &["run", "p.shape", "--backend", "cpu", "--json"]);
    assert_eq!(json_of(&out.stdout)["written"], Value::Null);
    // Values that JSON has no number for.
    std::fs::write(
        dir.join("q.shape"),
        "const c: 3 = [0, 1, -1]\ny = log(c)\nz = c / 0\n",
    )
    .unwrap();
    let out = shapec_in(&dir, &["run", "q.shape", "--backend", "cpu", "--json"]);
    let v = json_of(&out.stdout);
    assert_eq!(v["results"][0]["values"], json!(["-inf", 0.0, "nan"]));
    assert_eq!(v["results"][1]["values"][1], "inf");
}

#[test]
fn json_values_in_and_out() {
    let dir = scratch(
        "json_values",
        &[
            ("p.shape", "input x: 2|3\nparam s: 1\ny = x * s\n"),
            ("x.json", "[[1, 2, 3], [4, \"inf\", -0.5]]"),
            ("s.json", "[2]"),
            ("short.json", "[[1, 2, 3], [4, 5]]"),
            ("word.json", "[[1, 2, 3], [4, \"five\", 6]]"),
            ("flat.json", "[1, 2, 3, 4, 5, 6]"),
            ("broken.json", "[[1, 2, 3], [4, 5,"),
        ],
    );
    let run = |x: &str| {
        shapec_in(
            &dir,
            &[
                "run",
                "p.shape",
                "--backend",
                "cpu",
                "--json",
                "--input",
                x,
                "--input",
                "s=s.json",
            ],
        )
    };
    let out = run("x=x.json");
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    assert_eq!(
        v["data"][0]["source"],
        json!({"kind": "file", "path": "x.json"})
    );
    assert_eq!(
        v["results"][0]["values"],
        json!([[2.0, 4.0, 6.0], [8.0, "inf", -1.0]])
    );
    // Every malformed file is a data error that says where.
    for (file, says) in [
        ("short.json", "entry [1] has 2 entries, where axis 1 has 3"),
        ("word.json", "entry [1][1] is a string, not a number"),
        (
            "flat.json",
            "the whole value has 6 entries, where axis 0 has 2",
        ),
        ("broken.json", "it is not JSON"),
    ] {
        let out = run(&format!("x={file}"));
        assert_eq!(out.status, 1, "{file}");
        let e = json_of(&out.stdout);
        assert_eq!(e["error"]["kind"], "data", "{}", out.stdout);
        let message = e["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{file}: {message}");
    }
}

#[test]
fn diff_json_and_tolerance() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples");
    let out = shapec_in(
        &examples,
        &[
            "diff",
            "attention.shape",
            "--backend",
            "cpu",
            "--tolerance",
            "abs=0,rel=0",
        ],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .ends_with("tolerance: abs=0, rel=0: every element is within it\n"),
        "{}",
        out.stdout
    );
    let out = shapec_in(
        &examples,
        &[
            "diff",
            "attention.shape",
            "--backend",
            "cpu",
            "--json",
            "--tolerance",
            "rel=1e-4",
        ],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    assert_eq!(v["reference"], "cpu (reference)");
    assert_eq!(v["compared"], "cpu (coalesced)");
    assert_eq!(v["elements"], 400);
    assert_eq!(v["results"].as_array().unwrap().len(), 9);
    assert_eq!(v["largest"]["absolute"]["difference"], 0.0);
    assert_eq!(
        v["tolerance"],
        json!({"abs": 0.0, "rel": 1e-4, "exceeding": 0, "first_exceeding": null, "passed": true})
    );
    let out = shapec_in(
        &examples,
        &["diff", "attention.shape", "--tolerance", "abs"],
    );
    assert_eq!(out.status, 2);
    assert!(
        out.stderr.contains("expected `abs=A,rel=R`"),
        "{}",
        out.stderr
    );
    // On the GPU, exp and fused multiply-adds differ in the last places:
    // a zero tolerance is exceeded, and the status says so.
    let gpu = shapec_in(
        &examples,
        &[
            "diff",
            "attention.shape",
            "--backend",
            "wgpu",
            "--json",
            "--tolerance",
            "abs=0,rel=0",
        ],
    );
    let no_adapter = gpu.stdout.is_empty() || gpu.stdout.contains("no GPU adapter");
    if no_adapter && std::env::var_os("SHAPE_REQUIRE_GPU").is_none() {
        return; // no adapter (the GPU tests require one in CI)
    }
    let v = json_of(&gpu.stdout);
    let exceeding = v["tolerance"]["exceeding"].as_u64().unwrap();
    assert_eq!(
        gpu.status,
        if exceeding > 0 { 3 } else { 0 },
        "{}",
        gpu.stdout
    );
}

#[test]
fn infer_json_gains_projections_and_explain_only_when_asked() {
    let programs = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
    let plain = json_of(&shapec_in(&programs, &["infer", "matmul.shape", "--json"]).stdout);
    assert_eq!(
        plain.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["tensors", "warnings"]
    );
    let out = shapec_in(
        &programs,
        &[
            "infer",
            "matmul.shape",
            "--json",
            "--projections",
            "--explain",
            "w",
        ],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    assert_eq!(v["tensors"], plain["tensors"]);
    let p = &v["projections"][0];
    assert_eq!(p["op"], "compose(w, x)");
    assert_eq!(
        p["iterators"],
        json!([{"name": "i0", "kind": "parallel", "size": 3}, {"name": "r1", "kind": "reduction", "size": 2}])
    );
    assert_eq!(
        p["operands"][0],
        json!({"name": "w", "index": ["i0", "r1"]})
    );
    let e = &v["explain"][0];
    assert_eq!(e["name"], "w");
    assert_eq!(
        e["shape"],
        json!({"batch": [], "input": [2], "output": [3]})
    );
    let axis = &e["axes"][0];
    assert_eq!(
        (
            axis["row"].as_str(),
            axis["axis"].as_u64(),
            axis["size"].as_u64()
        ),
        (Some("input"), Some(0), Some(2))
    );
    assert!(axis["source"]["span"]["line"].is_u64(), "{axis}");
}

// ---- issue 13: what changed meaning says so ---------------------------------

#[test]
fn a_digit_in_an_einsum_result_draws_a_warning_on_standard_error_only() {
    let dir = scratch(
        "fixed_index_warning",
        &[("p.shape", "input p: 2,5\nz = permute(\"t,u=>t,1\", p)\n")],
    );
    let out = shapec_in(&dir, &["infer", "p.shape"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.contains("|->2, 2"), "{}", out.stdout);
    assert!(
        out.stderr
            .starts_with("warning[fixed_index]: the digit `1` in the result"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("p.shape:2:21"), "{}", out.stderr);
    // The JSON on standard output is unchanged by it.
    let out = shapec_in(&dir, &["infer", "p.shape", "--json"]);
    assert_eq!(out.status, 0);
    let v = json_of(&out.stdout);
    assert_eq!(v["tensors"]["z"]["output"], serde_json::json!([2, 2]));
    assert!(
        out.stderr.contains("warning[fixed_index]"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_parameter_nothing_gives_is_located_at_its_declaration_in_json() {
    let dir = scratch(
        "not_given_json",
        &[("p.shape", "param w\nconst v: 3 = [1, 2, 3]\ny = w @ v\n")],
    );
    let out = shapec_in(&dir, &["infer", "p.shape", "--json"]);
    assert_eq!(out.status, 1);
    let v = json_of(&out.stdout);
    assert_eq!(v["error"]["kind"], "not_given");
    assert_eq!(v["error"]["line"], 1);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("the output size of `w` is never given"),
        "{v}"
    );
}

// ---- issue 15, item 4 (in part): a size as a number ----------------------

#[test]
fn a_named_size_used_as_a_number_is_its_solved_value() {
    let dir = scratch(
        "size_as_value",
        &[
            (
                "p.shape",
                "input x: 2|n\nsize d = n of x\nmean = einsum(\"...|i=>...|\", x) / d\nrequire x: 2|4\n",
            ),
            ("x.json", "[[1, 2, 3, 6], [0, 0, 4, 4]]"),
        ],
    );
    let out = shapec_in(&dir, &["run", "p.shape", "--input", "x=x.json", "--json"]);
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
    let v = json_of(&out.stdout);
    let mean = v["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["name"] == "mean")
        .unwrap();
    assert_eq!(mean["values"], serde_json::json!([[3.0], [2.0]]), "{v}");
}

#[test]
fn infer_kernels_lists_each_operations_steps() {
    let dir = scratch(
        "kernels_listing",
        &[(
            "p.shape",
            "input x: 2|8\ninput k: 3\ny = einsum(\"...|o=+a;a=>...|o\", x, k)\nm = einsum_max(\"...|o=+a:3=>...|o\", x)\n",
        )],
    );
    let out = shapec_in(&dir, &["infer", "p.shape", "--kernels"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let listing = out.stdout.split("kernels:\n").nth(1).unwrap_or_default();
    // The padded convolution: a copy into scratch, then the contraction.
    assert!(
        listing.contains("out = in0  sizes [2, 8]  writes scratch0  reads [x]"),
        "{listing}"
    );
    assert!(
        listing.contains("out += mul(in0, in1)  sizes [2, 8, 3]  writes y  reads [scratch0, k]"),
        "{listing}"
    );
    // The padded max-pool first fills its scratch with -inf.
    assert!(listing.contains("out = -inf"), "{listing}");
    let out = shapec_in(&dir, &["infer", "p.shape", "--kernels", "--json"]);
    let v = json_of(&out.stdout);
    assert_eq!(v["kernels"][0]["result"], "y");
    assert_eq!(
        v["kernels"][0]["steps"][1]["reads"],
        serde_json::json!(["scratch0", "k"])
    );
}

// ---- issue 25 (round 3) ---------------------------------------------------

/// Finding 6: a later use that widens an intermediate along an axis that
/// an earlier statement reduces draws `warning[widened]` on standard
/// error, and with `--json` a `warnings` array beside the existing keys.
#[test]
fn a_widened_axis_that_a_reduction_sees_draws_a_warning() {
    let program =
        "const x: 2, 1 = [1, 2]\ninput y: 2, 4\nh = x * 1\ns = einsum(\"a,b=>a\", h)\nm = y + h\n";
    let dir = scratch("widened", &[("w.shape", program)]);
    let out = shapec_in(&dir, &["infer", "w.shape"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stderr.contains("warning[widened]"), "{}", out.stderr);
    assert!(out.stderr.contains("`h`"), "{}", out.stderr);
    assert!(out.stderr.contains("`m = add(y, h)`"), "{}", out.stderr);
    assert!(out.stderr.contains("4 │ s = einsum"), "{}", out.stderr);
    let out = shapec_in(&dir, &["infer", "w.shape", "--json"]);
    let v = json_of(&out.stdout);
    let warnings = v["warnings"].as_array().unwrap();
    assert_eq!(warnings.len(), 1, "{v}");
    assert_eq!(warnings[0]["kind"], "widened");
    // Exactly the issue's form: `{kind, message, span}`.
    let mut keys: Vec<&String> = warnings[0].as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["kind", "message", "span"]);
    assert_eq!(warnings[0]["span"]["line"], 4);
    assert_eq!(v["tensors"]["h"]["output"], json!([2, 4]));
    // Without the reduction nothing changes a value: no warning.
    let quiet = scratch(
        "widened_quiet",
        &[(
            "q.shape",
            "const x: 2, 1 = [1, 2]\ninput y: 2, 4\nh = x * 1\nm = y + h\n",
        )],
    );
    let out = shapec_in(&quiet, &["infer", "q.shape", "--json"]);
    assert_eq!(json_of(&out.stdout)["warnings"], json!([]));
    assert!(!out.stderr.contains("warning"), "{}", out.stderr);
}

/// Finding 6: `fixed_index` warnings are in the JSON `warnings` too.
#[test]
fn fixed_index_warnings_are_in_json() {
    let dir = scratch(
        "fixed_index_json",
        &[("f.shape", "input x: 3\ny = permute(\"a=>a,1\", x)\n")],
    );
    let out = shapec_in(&dir, &["infer", "f.shape", "--json"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    assert_eq!(v["warnings"][0]["kind"], "fixed_index", "{v}");
    assert_eq!(v["warnings"][0]["span"]["line"], 2);
}

/// Finding 8: of two operations that reduce no values, the earlier one in
/// the program is reported, on every backend (the plan ran the later one
/// first).
#[test]
fn the_earliest_empty_reduction_is_reported_on_every_backend() {
    let program = "input x: 0\na = einsum_max(\"i=>\", x)\nb = einsum_max(\"i=>\", x)\n";
    let dir = scratch("empty_reduction_order", &[("e.shape", program)]);
    for backend in ["cpu", "wgpu"] {
        let out = shapec_in(&dir, &["run", "e.shape", "--backend", backend]);
        if backend == "wgpu" && out.stderr.contains("no GPU adapter") {
            continue;
        }
        assert_eq!(out.status, 1, "{backend}: {}", out.stderr);
        assert!(
            out.stderr.contains("(op #0) cannot run"),
            "{backend}: {}",
            out.stderr
        );
        assert!(
            out.stderr.contains("2 │ a = einsum_max"),
            "{backend}: {}",
            out.stderr
        );
    }
}

/// Finding 11: a one-tap "padded" window pads nothing, so a maximum over
/// it runs (it was refused as `padding_unsupported`).
#[test]
fn a_one_tap_padded_window_under_a_maximum_runs() {
    let program =
        "const x: 4 = [1, -2, 3, 4]\nconst k: 1 = [2]\ny = einsum_max(\"o=+a;a=>o\", x, k)\n";
    let dir = scratch("one_tap", &[("c.shape", program)]);
    let out = shapec_in(&dir, &["run", "c.shape", "--backend", "cpu", "--json"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    assert_eq!(
        v["results"][0]["values"],
        json!([2.0, -4.0, 6.0, 8.0]),
        "{v}"
    );
}

/// Finding 9: a bad divisor or remainder in a size bound names the number
/// and underlines it (it said "found ` `" with an empty span).
#[test]
fn a_bad_size_bound_names_and_underlines_the_number() {
    let dir = scratch(
        "size_bound_numbers",
        &[
            ("zero.shape", "size d\nsize d % 0 == 0\ninput x: d\n"),
            ("rem.shape", "size d\nsize d % 3 == 3\ninput x: d\n"),
        ],
    );
    let out = shapec_in(&dir, &["infer", "zero.shape", "--json"]);
    let e = &json_of(&out.stdout)["error"];
    assert!(e["message"].as_str().unwrap().ends_with("found `0`"), "{e}");
    assert_eq!(
        (e["span"]["start"].as_u64(), e["span"]["end"].as_u64()),
        (Some(16), Some(17))
    );
    let out = shapec_in(&dir, &["infer", "rem.shape", "--json"]);
    let e = &json_of(&out.stdout)["error"];
    assert!(e["message"].as_str().unwrap().ends_with("found `3`"), "{e}");
    assert_eq!(
        (e["span"]["start"].as_u64(), e["span"]["end"].as_u64()),
        (Some(21), Some(22))
    );
}

/// Finding 9: size errors are placed at the size's declaration and at the
/// tensors involved; none names a Rust function; JSON data binds sizes.
#[test]
fn size_errors_are_placed_and_json_data_binds_sizes() {
    let dir = scratch(
        "size_errors",
        &[
            ("one.shape", "size b\ninput x: b\ny = exp(x)\n"),
            ("two.shape", "size b\ninput x: b\ninput y: b\nz = x + y\n"),
            (
                "bound.shape",
                "size b\nsize b >= 3\ninput x: b\ny = exp(x)\n",
            ),
            ("x.json", "[1, 2, 3]"),
            ("y.json", "[1]"),
        ],
    );
    // JSON data binds `b` as a .npy file does.
    let out = shapec_in(&dir, &["run", "one.shape", "--input", "x=x.json", "--json"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(json_of(&out.stdout)["sizes"]["b"], 3);
    // Unbound: placed at `size b`, and the command line says `--size`.
    let out = shapec_in(
        &dir,
        &["run", "one.shape", "--input", "x=y.json", "--size", "b=2"],
    );
    assert_eq!(out.status, 1);
    let out = shapec_in(&dir, &["infer", "one.shape"]);
    assert_eq!(out.status, 0);
    let out = shapec_in(
        &dir,
        &[
            "run",
            "two.shape",
            "--input",
            "x=x.json",
            "--input",
            "y=y.json",
        ],
    );
    assert!(
        out.stderr.contains("error[size_conflict]"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("the data of `x` makes `b` 3"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.contains("the data of `y` makes `b` 1"),
        "{}",
        out.stderr
    );
    let out = shapec_in(
        &dir,
        &[
            "run",
            "two.shape",
            "--input",
            "x=x.json",
            "--input",
            "y=y.json",
            "--json",
        ],
    );
    assert_eq!(json_of(&out.stdout)["error"]["span"]["line"], 1);
    let out = shapec_in(&dir, &["run", "bound.shape", "--size", "b=2", "--json"]);
    let e = &json_of(&out.stdout)["error"];
    assert_eq!(e["kind"], "size_bound");
    assert_eq!(e["span"]["line"], 2);
    assert_eq!(e["notes"][0]["span"]["line"], 1, "{e}");
    for file in ["one.shape", "two.shape"] {
        let out = shapec_in(&dir, &["run", file]);
        assert!(!out.stderr.contains("SolvedGraph"), "{}", out.stderr);
    }
}

/// Finding 9: a run with no value for a run-time size is placed at its
/// declaration and says how to give one.
#[test]
fn an_unbound_size_is_placed_at_its_declaration() {
    let dir = scratch(
        "unbound",
        &[("u.shape", "size b\ninput x: b\ny = exp(x)\n")],
    );
    let out = shapec_in(&dir, &["run", "u.shape"]);
    assert_eq!(out.status, 1);
    assert!(out.stderr.contains("error[unbound_size]"), "{}", out.stderr);
    assert!(
        out.stderr.contains("give it with `--size b=N`"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("SolvedGraph"), "{}", out.stderr);
    let out = shapec_in(&dir, &["run", "u.shape", "--json"]);
    assert_eq!(json_of(&out.stdout)["error"]["span"]["line"], 1);
}

/// Finding 10: guards that no value passes together are an inference
/// error placed at both (every run used to fail at binding).
#[test]
fn contradictory_guards_are_an_inference_error() {
    let dir = scratch(
        "guard_conflict",
        &[(
            "g.shape",
            "size b\nsize b >= 3\ninput x: b|4\nrequire x: 2|4\n",
        )],
    );
    let out = shapec_in(&dir, &["infer", "g.shape"]);
    assert_eq!(out.status, 1);
    assert!(
        out.stderr.contains("error[guard_conflict]"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("requires `b >= 3`"), "{}", out.stderr);
    assert!(out.stderr.contains("requires `b == 2`"), "{}", out.stderr);
    // Guards that some value passes stay guards.
    let ok = scratch(
        "guard_no_conflict",
        &[(
            "g.shape",
            "size b\nsize b >= 2\ninput x: b|4\nrequire x: 2|4\n",
        )],
    );
    assert_eq!(shapec_in(&ok, &["infer", "g.shape"]).status, 0);
}

/// Finding 10: a generic size bound to 0 is refused (it made `float0`).
/// Since issue 29 a plain tensor's trailing size no longer binds it (the
/// call is `unspecialized`), and a specialization to 0 is refused.
#[test]
fn a_generic_size_of_zero_is_refused() {
    let dir = scratch("float0", &[]);
    let sum = "float sum<let N : int>(vector<float,N> a)";
    let out = shapec_in(&dir, &["call", sum, "a=tensor(5,0)"]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert!(
        out.stderr.contains("error[unspecialized]"),
        "{}",
        out.stderr
    );
    let out = shapec_in(&dir, &["call", sum, "a=tensor(5,0)", "--specialize", "N=0"]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert!(
        out.stderr.contains("error[invalid_specialization]"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("at least 1"), "{}", out.stderr);
    // A tensor whose 0 meets a specialized size is a type_shape error.
    let out = shapec_in(&dir, &["call", sum, "a=tensor(5,0)", "--specialize", "N=2"]);
    assert_eq!(out.status, 1, "{}", out.stdout);
    assert!(out.stderr.contains("error[type_shape]"), "{}", out.stderr);
}

/// Finding 9: messages that say what fixes them.
#[test]
fn messages_say_what_fixes_them() {
    let dir = scratch(
        "fixes",
        &[
            ("closed.shape", "input x: 8|3\nparam w: ->4\ny = w @ x\n"),
            ("q.shape", "input x: j:3\nsize k = j of x\nsize k == 15\n"),
            ("conv.shape", "input x: 1\nconst c: 1 = [0]\nh = x + c\nparam k: 3\ny = einsum(\"o<+a;a=>o\", h, k)\n"),
            ("run_time.shape", "input t: ?|3\n"),
        ],
    );
    let out = shapec_in(&dir, &["infer", "closed.shape"]);
    assert!(
        out.stderr
            .contains("`->4` declares an empty input row; `_->4`"),
        "{}",
        out.stderr
    );
    let out = shapec_in(&dir, &["infer", "q.shape"]);
    assert!(out.stderr.contains("`size k == 15`"), "{}", out.stderr);
    assert!(!out.stderr.contains("`size k = 15`"), "{}", out.stderr);
    let out = shapec_in(&dir, &["infer", "conv.shape"]);
    assert!(
        out.stderr.contains("the input and the output unknown"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("since 1 broadcasts"), "{}", out.stderr);
    let out = shapec_in(&dir, &["infer", "run_time.shape"]);
    assert!(
        out.stderr
            .contains("declare the name a run-time size (`size b` alone"),
        "{}",
        out.stderr
    );
}
