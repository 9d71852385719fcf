//! Runs the `shapec` binary on the programs under `tests/programs/` and
//! the shipped examples, and checks its output: snapshots of what a person
//! reads (insta), exact JSON schemas, exact `.npy` bytes, and values.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{json, Value};

fn programs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs")
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

struct Output {
    status: i32,
    stdout: String,
    stderr: String,
}

/// Runs `shapec` in `dir` (so diagnostics show short file names).
fn shapec_in(dir: &Path, args: &[&str]) -> Output {
    shapec_env(dir, args, &[])
}

/// Runs `shapec` in `dir` with extra environment variables.
fn shapec_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_shapec"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .envs(env.iter().copied())
        .output()
        .expect("the shapec binary runs");
    Output {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

fn shapec(args: &[&str]) -> Output {
    shapec_in(&programs(), args)
}

fn json_of(s: &str) -> Value {
    serde_json::from_str(s).unwrap_or_else(|e| panic!("not JSON ({e}): {s}"))
}

/// A scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

/// A `.npy` file as NumPy writes it for a little-endian f32 C-order array,
/// built here byte by byte (independently of shapec's writer).
fn numpy_f32(shape: &str, values: &[f32]) -> Vec<u8> {
    let dict = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    let header_len = 128 - 10; // every header here fits in 128 bytes
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(header_len as u16).to_le_bytes());
    b.extend_from_slice(dict.as_bytes());
    b.extend(std::iter::repeat_n(b' ', header_len - dict.len() - 1));
    b.push(b'\n');
    for v in values {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

// ---- infer -------------------------------------------------------------

#[test]
fn infer_mlp_example() {
    let out = shapec_in(&examples(), &["infer", "mlp.shape"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.contains("param w1               : |8->16\n"));
    assert!(out.stdout.contains("param w3               : |12->3\n"));
    insta::assert_snapshot!("infer_mlp", out.stdout);
}

#[test]
fn conv_example_infers_and_runs_on_both_backends() {
    let out = shapec_in(&examples(), &["infer", "conv.shape"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.contains(": |->3, 3, 3, 4\n"), "{}", out.stdout);
    assert!(out.stdout.contains(": 2|->4, 4, 4\n"), "{}", out.stdout);
    insta::assert_snapshot!("infer_conv", out.stdout);
    // How each operation indexes its tensors: `pad(i1+r5)` reads a padded
    // copy, `2*i1+r4` is the pooling window.
    let out = shapec_in(&examples(), &["infer", "conv.shape", "--projections"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let projections = out.stdout.split("projections:").nth(1).unwrap_or_default();
    insta::assert_snapshot!("projections_conv", projections);
    // The GPU against the CPU reference, where an adapter exists (CI
    // requires one).
    let diff = shapec_in(
        &examples(),
        &["diff", "conv.shape", "--backend", "wgpu", "--json"],
    );
    let required = std::env::var("SHAPE_REQUIRE_GPU").is_ok_and(|v| v == "1");
    if diff.status != 0 && !required {
        assert!(diff.stdout.contains("no GPU adapter") || diff.stderr.contains("no GPU adapter"));
        return;
    }
    assert_eq!(diff.status, 0, "{}{}", diff.stdout, diff.stderr);
    assert!(diff.stdout.contains("\"elements\":1172"), "{}", diff.stdout);
}

#[test]
fn infer_attention_example() {
    let out = shapec_in(&examples(), &["infer", "attention.shape"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.contains("param wo  "));
    assert!(out.stdout.contains(": |->4, 8\n"));
    insta::assert_snapshot!("infer_attention", out.stdout);
}

#[test]
fn infer_projections_and_explain() {
    let out = shapec(&[
        "infer",
        "matmul.shape",
        "--projections",
        "--explain",
        "y",
        "--explain",
        "wt",
    ]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stdout.contains("y.1[i0] <- w[i0, r1], x[r1]")
            || out.stdout.contains("y[i0] <- w[i0, r1], x[r1]")
    );
    insta::assert_snapshot!("infer_projections_explain", out.stdout);
}

#[test]
fn infer_dot() {
    let out = shapec(&["infer", "matmul.shape", "--dot"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.starts_with("digraph program {\n"));
    assert!(out.stdout.contains("t1 -> op0 [label=\"x: |->2\"];"));
    insta::assert_snapshot!("infer_dot", out.stdout);
}

#[test]
fn infer_json_schema() {
    let out = shapec(&["infer", "matmul.shape", "--json"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    let obj = v.as_object().unwrap();
    assert_eq!(obj.keys().collect::<Vec<_>>(), ["tensors", "warnings"]);
    assert_eq!(v["warnings"], serde_json::json!([]));
    let tensors = v["tensors"].as_object().unwrap();
    let mut names: Vec<&str> = tensors.keys().map(String::as_str).collect();
    names.sort();
    assert_eq!(names, ["2", "w", "wt", "x", "y", "z", "z.1"]);
    for (name, t) in tensors {
        let mut keys: Vec<&str> = t.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort();
        assert_eq!(keys, ["batch", "input", "output"], "{name}");
        for k in keys {
            assert!(
                t[k].as_array().unwrap().iter().all(Value::is_u64),
                "{name}.{k}"
            );
        }
    }
    assert_eq!(
        tensors["w"],
        json!({"batch": [], "input": [2], "output": [3]})
    );
    assert_eq!(
        tensors["y"],
        json!({"batch": [], "input": [], "output": [3]})
    );
    assert_eq!(
        tensors["wt"],
        json!({"batch": [], "input": [3], "output": [2]})
    );
    assert_eq!(
        tensors["2"],
        json!({"batch": [], "input": [], "output": [1]})
    );
}

#[test]
fn infer_json_lists_named_sizes_when_there_are_some() {
    let dir = std::env::temp_dir().join(format!("shapec-sizes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("s.shape"),
        "size d % 8 == 0\ninput x: 2|d\nrequire x: 2|16\nsize e = 0\n",
    )
    .unwrap();
    let out = shapec_in(&dir, &["infer", "s.shape", "--json"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    assert_eq!(v["sizes"], json!({"d": 16, "e": 0}));
    assert_eq!(
        v["tensors"]["x"],
        json!({"batch": [2], "input": [], "output": [16]})
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn infer_json_error_schema() {
    let out = shapec(&["infer", "errors/dim_mismatch.shape", "--json"]);
    assert_eq!(out.status, 1);
    assert_eq!(out.stderr, "");
    let v = json_of(&out.stdout);
    assert_eq!(v.as_object().unwrap().keys().collect::<Vec<_>>(), ["error"]);
    let e = v["error"].as_object().unwrap();
    let mut keys: Vec<&str> = e.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["kind", "line", "message", "notes", "op", "span"]);
    assert_eq!(e["kind"], "dim_mismatch");
    assert_eq!(e["op"], "compose");
    assert_eq!(e["line"], 6);
    // Where it showed up, and where each conflicting size was written,
    // as byte offsets with line and column.
    let text = std::fs::read_to_string(programs().join("errors/dim_mismatch.shape")).unwrap();
    let at = |span: &Value| {
        let (start, end) = (
            span["start"].as_u64().unwrap(),
            span["end"].as_u64().unwrap(),
        );
        let (line, column) = (
            span["line"].as_u64().unwrap(),
            span["column"].as_u64().unwrap(),
        );
        let line_text = text.lines().nth(line as usize - 1).unwrap();
        let line_start = text
            .lines()
            .take(line as usize - 1)
            .map(|l| l.len() + 1)
            .sum::<usize>();
        assert_eq!(line_start + column as usize - 1, start as usize);
        assert!(line_text.len() >= column as usize);
        &text[start as usize..end as usize]
    };
    assert_eq!(at(&e["span"]), "w @ z");
    assert_eq!(e["span"]["line"], 6);
    let notes = e["notes"].as_array().unwrap();
    let placed: Vec<(&str, &str)> = notes
        .iter()
        .map(|n| (at(&n["span"]), n["message"].as_str().unwrap()))
        .collect();
    assert_eq!(placed.len(), 2, "{placed:?}");
    assert_eq!(placed[0].0, "784");
    assert!(placed[0].1.starts_with("784 comes from the declared shape"));
    assert_eq!(placed[1].0, "100");
    assert!(placed[1].1.starts_with("100 comes from the declared shape"));
    assert!(e["message"]
        .as_str()
        .unwrap()
        .starts_with("size mismatch in `y = compose(w, z)` (op #1)"));

    // Errors without an operation or a place have nulls.
    let out = shapec(&["infer", "no-such-file.shape", "--json"]);
    assert_eq!(out.status, 1);
    let v = json_of(&out.stdout);
    assert_eq!(v["error"]["kind"], "read");
    assert_eq!(v["error"]["op"], Value::Null);
    assert_eq!(v["error"]["line"], Value::Null);
    assert_eq!(v["error"]["span"], Value::Null);
    assert_eq!(v["error"]["notes"], json!([]));
    let out = shapec(&["infer", "errors/syntax.shape", "--json"]);
    let v = json_of(&out.stdout);
    assert_eq!(
        (v["error"]["kind"].as_str(), v["error"]["line"].as_u64()),
        (Some("syntax"), Some(2))
    );
}

// ---- every error kind's diagnostic ---------------------------------------

#[test]
fn error_diagnostics() {
    let kinds = [
        "syntax",
        "unknown_name",
        "redefined",
        "unknown_function",
        "arguments",
        "spec",
        "dim_mismatch",
        "label_mismatch",
        "axis_count_mismatch",
        "total_elems",
        "underdetermined",
        "nothing_to_slice",
        "infinite_axes",
        "constant",
    ];
    for kind in kinds {
        let file = format!("errors/{kind}.shape");
        let out = shapec(&["infer", &file]);
        assert_eq!(out.status, 1, "{kind}");
        assert_eq!(out.stdout, "", "{kind}");
        assert!(
            out.stderr.starts_with(&format!("error[{kind}]: ")),
            "{}",
            out.stderr
        );
        insta::assert_snapshot!(format!("error_{kind}"), out.stderr);
    }
}

#[test]
fn error_run() {
    let out = shapec(&["run", "errors/run.shape", "--backend", "cpu"]);
    assert_eq!(out.status, 1);
    insta::assert_snapshot!("error_run", out.stderr);
}

#[test]
fn errors_outside_programs() {
    let missing = shapec(&["infer", "no-such-file.shape"]);
    assert_eq!(missing.status, 1);
    insta::assert_snapshot!("error_read", missing.stderr);

    let dir = scratch("errors_outside_programs");
    std::fs::write(dir.join("bad.npy"), b"not numpy").unwrap();
    std::fs::write(dir.join("wrong.npy"), numpy_f32("(3,)", &[1.0, 2.0, 3.0])).unwrap();
    let prog = programs().join("matmul.shape");
    let prog = prog.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", prog, "--backend", "cpu"];
        args.extend_from_slice(extra);
        shapec_in(&dir, &args)
    };
    let bad = run(&["--input", "x=bad.npy"]);
    assert_eq!(bad.status, 1);
    insta::assert_snapshot!("error_npy", bad.stderr);
    let wrong = run(&["--input", "x=wrong.npy"]);
    insta::assert_snapshot!("error_data_shape", wrong.stderr);
    let unknown = run(&["--input", "q=wrong.npy"]);
    assert_eq!(
        unknown.stderr,
        "error[data]: --input q=...: the program has no input or parameter `q`\n\n"
    );
    let computed = run(&["--input", "y=wrong.npy"]);
    assert!(computed.stderr.contains("`y` is computed by the program"));
    // A machine with no adapter: WGPU_BACKEND that names no backend.
    let wgpu = shapec_env(
        &programs(),
        &["run", "matmul.shape", "--backend", "wgpu"],
        &[("WGPU_BACKEND", "none")],
    );
    assert_eq!(wgpu.status, 1);
    insta::assert_snapshot!("error_backend", wgpu.stderr);
    std::fs::write(dir.join("blocker"), b"a file, not a directory").unwrap();
    let write = run(&["--out", "blocker"]);
    assert_eq!(write.status, 1);
    insta::assert_snapshot!("error_write", write.stderr);
    let usage = shapec(&["run", "matmul.shape", "--input", "x"]);
    assert_eq!(usage.status, 2);
    assert!(usage.stderr.contains("expected NAME=PATH"));
}

// ---- run and diff ----------------------------------------------------------

#[test]
fn run_reads_and_writes_npy() {
    let dir = scratch("run_reads_and_writes_npy");
    // w is 3x2 in memory order (its output axis, then its input axis).
    std::fs::write(
        dir.join("w.npy"),
        numpy_f32("(3, 2)", &[1., 2., 3., 4., 5., 6.]),
    )
    .unwrap();
    std::fs::write(dir.join("x.npy"), numpy_f32("(2,)", &[1., 1.])).unwrap();
    let prog = programs().join("matmul.shape");
    let out = shapec_in(
        &dir,
        &[
            "run",
            prog.to_str().unwrap(),
            "--backend",
            "cpu",
            "--input",
            "w=w.npy",
            "--input",
            "x=x.npy",
            "--out",
            "results",
        ],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert_eq!(out.stderr, "");
    assert_eq!(
        out.stdout,
        "backend: cpu (coalesced)\n\
         input w : |2->3 <- w.npy\n\
         input x : |->2 <- x.npy\n\
         const 2 : |->1 <- the program\n\
         y : |->3 = [3, 7, 11]\n\
         z : |->3 = [-6, -14, -22]\n\
         wt : |3->2 = [1, 3, 5, 2, 4, 6]\n\
         wrote 3 result(s) to results\n"
    );
    let read = |name: &str| std::fs::read(dir.join("results").join(name)).unwrap();
    // NumPy's layout (a 128-byte header, little-endian f32 data); npyz
    // writes the shape as `(3, )` where NumPy writes `(3,)`.
    for (name, shape, values) in [
        ("y.npy", "(3, )", &[3., 7., 11.][..]),
        ("z.npy", "(3, )", &[-6., -14., -22.]),
        ("wt.npy", "(2, 3, )", &[1., 3., 5., 2., 4., 6.]),
    ] {
        assert_eq!(read(name), numpy_f32(shape, values), "{name}");
    }
    // Nothing else is left in the directory.
    let mut left: Vec<String> = std::fs::read_dir(dir.join("results"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(left, ["wt.npy", "y.npy", "z.npy"]);
}

#[test]
fn run_with_seeded_data_is_reproducible() {
    let a = shapec_in(
        &examples(),
        &["run", "mlp.shape", "--backend", "cpu", "--seed", "3"],
    );
    let b = shapec_in(
        &examples(),
        &["run", "mlp.shape", "--backend", "cpu", "--seed", "3"],
    );
    let c = shapec_in(
        &examples(),
        &["run", "mlp.shape", "--backend", "cpu", "--seed", "4"],
    );
    assert_eq!(a.status, 0, "{}", a.stderr);
    assert_eq!(a.stdout, b.stdout);
    assert_ne!(a.stdout, c.stdout);
    assert!(a
        .stdout
        .contains("param w3 : |12->3 <- random values (seed 3)\n"));
    assert!(a.stdout.contains("y : 4|->3 = ["));
}

#[test]
fn run_auto_says_which_backend_ran() {
    // Without an adapter, `auto` (the default) runs on the CPU and says why.
    let out = shapec_env(
        &programs(),
        &["run", "matmul.shape"],
        &[("WGPU_BACKEND", "none")],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(
        out.stderr.starts_with(
            "note: --backend auto: no GPU adapter: WGPU_BACKEND=\"none\" names no backend"
        ),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr.ends_with("; running on the CPU\n"),
        "{}",
        out.stderr
    );
    assert!(out.stdout.starts_with("backend: cpu (coalesced)\n"));
}

#[test]
fn run_on_wgpu_gives_the_cpu_values_where_an_adapter_exists() {
    let gpu = shapec(&["run", "matmul.shape", "--backend", "wgpu"]);
    let required = std::env::var("SHAPE_REQUIRE_GPU").is_ok_and(|v| v == "1");
    if gpu.status != 0 && !required {
        assert!(gpu.stderr.contains("no GPU adapter"), "{}", gpu.stderr);
        return;
    }
    assert_eq!(gpu.status, 0, "{}", gpu.stderr);
    assert!(gpu.stdout.starts_with("backend: wgpu: "), "{}", gpu.stdout);
    let cpu = shapec(&["run", "matmul.shape", "--backend", "cpu"]);
    // Same shapes and values (small integers: exact on every device).
    let body = |s: &str| s.lines().skip(1).collect::<Vec<_>>().join("\n");
    assert_eq!(body(&gpu.stdout), body(&cpu.stdout));
}

#[test]
fn diff_compares_against_the_reference() {
    let out = shapec_in(
        &examples(),
        &["diff", "attention.shape", "--backend", "cpu"],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[0], "reference: cpu (reference)");
    assert_eq!(lines[1], "compared:  cpu (coalesced)");
    // q, k, v, o: 2x5x4 each; scores, p, attn: 2x5x5; z: 2x5x1; y: 2x5x8.
    assert_eq!(lines[2], "elements:  400 in 9 result(s)");
    // The two CPU paths are bit-identical.
    assert!(
        lines[3].starts_with("largest absolute difference: 0 at "),
        "{}",
        lines[3]
    );
    assert!(
        lines[4].starts_with("largest relative difference: 0 at "),
        "{}",
        lines[4]
    );
}

#[test]
fn attention_softmax_rows_sum_to_one() {
    let dir = scratch("attention_softmax_rows_sum_to_one");
    let prog = examples().join("attention.shape");
    let out = shapec_in(
        &dir,
        &[
            "run",
            prog.to_str().unwrap(),
            "--backend",
            "cpu",
            "--out",
            ".",
        ],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let read = |name: &str| shapec::npy::read(&std::fs::read(dir.join(name)).unwrap()).unwrap();
    let (p, z, attn) = (read("p.npy"), read("z.npy"), read("attn.npy"));
    assert_eq!(attn.shape, vec![2, 5, 5]);
    assert_eq!(z.shape, vec![2, 5, 1]);
    for (row, (prow, zrow)) in attn.data.chunks(5).zip(p.data.chunks(5).zip(&z.data)) {
        let sum: f32 = row.iter().sum();
        assert!((sum - 1.0).abs() < 1e-5, "{row:?} sums to {sum}");
        assert!((prow.iter().sum::<f32>() - zrow).abs() < 1e-4 * zrow);
        assert!(row.iter().all(|&a| a > 0.0));
    }
}

#[test]
fn reductions_other_than_sums_in_the_text_language() {
    let dir = scratch("reductions_other_than_sums");
    std::fs::write(
        dir.join("r.shape"),
        "const x: 3, 2 = [1, -4, 5, 2, -3, 6]\n\
         hi = einsum_max(\"u, t => t\", x)\n\
         lo = einsum_min(\"u, t => t\", x)\n\
         pr = einsum_prod(\"u, t => t\", x)\n\
         # a stable softmax over the first axis: each column's maximum first\n\
         e = exp(x - hi)\n\
         s = e / einsum(\"u, t => t\", e)\n",
    )
    .unwrap();
    let out = shapec_in(&dir, &["run", "r.shape", "--backend", "cpu"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert_eq!(lines[2], "hi : |->2 = [5, 6]", "{}", out.stdout);
    assert_eq!(lines[3], "lo : |->2 = [-3, -4]", "{}", out.stdout);
    assert_eq!(lines[4], "pr : |->2 = [-15, -48]", "{}", out.stdout);
    assert!(lines[6].starts_with("s : |->3, 2 = "), "{}", out.stdout);
}

/// `NAME: SHAPE <- EXPR` (DyND's assignment kernels, issue 17 item 3): the
/// source broadcasts into the declared destination, never the reverse.
#[test]
fn assignments_broadcast_one_way_into_a_declared_shape() {
    let dir = scratch("assign_into");
    std::fs::write(
        dir.join("a.shape"),
        "const b: 3 = [1, 2, 3]
         s: 3 <- 4            # a scalar into an array
         t: 2,3 <- b          # strided into strided: b repeats along the rows
         u: 2|3 <- b * 2      # any expression, here into a batch row
         v: 3 <- b            # the same shape: a copy
",
    )
    .unwrap();
    let out = shapec_in(&dir, &["run", "a.shape", "--backend", "cpu"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let results: Vec<&str> = out.stdout.lines().filter(|l| l.contains(" = [")).collect();
    assert_eq!(
        results,
        [
            "s : |->3 = [4, 4, 4]",
            "t : |->2, 3 = [1, 2, 3, 1, 2, 3]",
            "u : 2|->3 = [2, 4, 6, 2, 4, 6]",
            "v : |->3 = [1, 2, 3]",
        ],
        "{}",
        out.stdout
    );
    // The same values on wgpu, where an adapter exists (CI requires one).
    let gpu = shapec_in(&dir, &["run", "a.shape", "--backend", "wgpu"]);
    let required = std::env::var("SHAPE_REQUIRE_GPU").is_ok_and(|v| v == "1");
    if gpu.status == 0 || required {
        assert_eq!(gpu.status, 0, "{}", gpu.stderr);
        let body = |s: &str| s.lines().skip(1).collect::<Vec<_>>().join("\n");
        assert_eq!(body(&gpu.stdout), body(&out.stdout));
    }
    // The destination never broadcasts to the source, it is declared in
    // full, and it is a new name.
    for (program, kind, line) in [
        ("input x: 2,3\na: 3 <- x\n", "axis_count_mismatch", 2),
        ("input x: 3\na: 1 <- x\n", "dim_mismatch", 2),
        ("input x: 3\na: 2,2 <- x\n", "dim_mismatch", 2),
        ("input x: 3\na: ...|3 <- x\n", "spec", 2),
        ("input x: 3\na: ..r..,3 <- x\n", "spec", 2),
        ("input x: 3\nx: 3 <- x\n", "redefined", 2),
        ("input x: 3\na: 3 x\n", "syntax", 2),
    ] {
        std::fs::write(dir.join("bad.shape"), program).unwrap();
        let out = shapec_in(&dir, &["infer", "bad.shape", "--json"]);
        assert_eq!(out.status, 1, "{program}: {}", out.stdout);
        let v = json_of(&out.stdout);
        assert_eq!(v["error"]["kind"], kind, "{program}: {}", out.stdout);
        assert_eq!(v["error"]["line"], line, "{program}: {}", out.stdout);
    }
}

// ---- broadcast -------------------------------------------------------------

/// MLIR's `Broadcastable` rules through `shapec broadcast`: the dimension
/// inference table, the verification table and the document's examples
/// (docs/dynamic-sizes.md links each row here).
#[test]
fn broadcast_dynamic_sizes_by_mlirs_tables() {
    let run = |args: &[&str]| {
        let mut all = vec!["broadcast"];
        all.extend_from_slice(args);
        all.push("--json");
        let out = shapec(&all);
        (out.status, json_of(&out.stdout))
    };
    // Dimension inference, every row in both orders.
    let rows: [(&str, &str, Value); 6] = [
        ("?", "?", json!(["?"])),
        ("?", "1", json!(["?"])),
        ("?", "4", json!([4])),
        ("1", "1", json!([1])),
        ("1", "4", json!([4])),
        ("4", "4", json!([4])),
    ];
    for (a, b, shape) in rows {
        for (x, y) in [(a, b), (b, a)] {
            let (status, v) = run(&[x, y, "--result", "?"]);
            assert_eq!((status, &v["valid"]), (0, &json!(true)), "{x} {y}: {v}");
            let (status, v) = run(&[x, y]);
            assert_eq!((status, &v["shape"]), (0, &shape), "{x} {y}: {v}");
        }
    }
    // Two unequal static sizes: with only static sizes, the numpy path
    // answers (its stable error form); with `?` anywhere, MLIR's does.
    let (status, v) = run(&["3", "2", "?"]);
    assert_eq!(
        (status, v["error"]["kind"].as_str()),
        (1, Some("static_mismatch"))
    );
    // Guards: what static inference leaves to run time.
    let (_, v) = run(&["?,3", "4,1"]);
    assert_eq!(
        v,
        json!({"shape": [4, 3], "guards": [{"operand": 0, "axis": 0, "requires": "1 or 4"}]})
    );
    assert_eq!(run(&["?,3", "4,3", "--static"]).1["known"], json!(false));
    assert_eq!(run(&["1,3", "4,3", "--static"]).1, json!({"known": true}));
    // Verification: every row, and the document's correct and incorrect uses.
    for (ops, result) in [
        (vec!["1,2", "1,2"], "1,2"),
        (vec!["?", "?"], "?"),
        (vec!["1", "4"], "4"),
        (vec!["4"], "?"),
        (vec!["4", "2,3,4"], "2,3,4"),
        (vec!["2", "2"], "2"),
        (vec!["2"], "*"),
        (vec!["*", "*"], "2"),
    ] {
        let mut args = ops.clone();
        args.extend(["--result", result]);
        let (status, v) = run(&args);
        assert_eq!(
            (status, &v["valid"]),
            (0, &json!(true)),
            "{ops:?} -> {result}: {v}"
        );
    }
    for (ops, result, kind) in [
        (vec!["3", "2"], "?", "static_mismatch"),
        (vec!["3", "3"], "1,3", "rank_mismatch"),
        (vec!["?", "?"], "4", "static_where_dynamic"),
        (vec!["2", "2"], "4", "result_mismatch"),
        (vec!["1", "1"], "4", "result_mismatch"),
    ] {
        let mut args = ops.clone();
        args.extend(["--result", result]);
        let (status, v) = run(&args);
        assert_eq!(status, 1, "{ops:?} -> {result}");
        assert_eq!(v["error"]["kind"], kind, "{ops:?} -> {result}: {v}");
    }
    // All operands unranked: the result is unranked too.
    assert_eq!(run(&["*", "*"]).1, json!({"shape": "*"}));
    // Size 0, as numpy has it: with 1 it gives 0, with a size above 1 it
    // is an error; against `?`, the run-time size must be 1 or 0.
    assert_eq!(run(&["0,3", "1,3"]).1, json!({"shape": [0, 3]}));
    assert_eq!(run(&["2,00", "1"]).1, json!({"shape": [2, 0]}));
    let (status, v) = run(&["0", "5"]);
    assert_eq!(
        (status, v["error"]["kind"].as_str()),
        (1, Some("static_mismatch"))
    );
    assert_eq!(
        run(&["0", "?"]).1,
        json!({"shape": [0], "guards": [{"operand": 1, "axis": 0, "requires": "1 or 0"}]})
    );
    // Named run-time sizes: the same name needs no guard and stays in the
    // result; against a number or another name, a guard as for `?`.
    assert_eq!(run(&["b,3", "b,1", "1,3"]).1, json!({"shape": ["b", 3]}));
    assert_eq!(run(&["b,3", "b,1", "--static"]).1, json!({"known": true}));
    assert_eq!(
        run(&["b,3", "4,3"]).1,
        json!({"shape": [4, 3], "guards": [{"operand": 0, "axis": 0, "requires": "1 or 4"}]})
    );
    assert_eq!(run(&["b", "c"]).1["shape"], json!(["?"]));
    assert_eq!(run(&["b", "c", "--static"]).1["known"], json!(false));
    assert_eq!(run(&["b,3", "--result", "b,3"]).1, json!({"valid": true}));
    for (result, kind) in [("c,3", "symbol_mismatch"), ("4,3", "static_where_dynamic")] {
        let (status, v) = run(&["b,3", "--result", result]);
        assert_eq!(
            (status, v["error"]["kind"].as_str()),
            (1, Some(kind)),
            "{v}"
        );
    }
    // Text form.
    let out = shapec(&["broadcast", "?,3", "4,1"]);
    assert_eq!(
        out.stdout,
        "(4, 3)\nguard: operand 0 axis 0 must be 1 or 4 at run time\n"
    );
}

#[test]
fn broadcast_text_and_json() {
    let ok = shapec(&["broadcast", "5,2,1", "2,3"]);
    assert_eq!((ok.status, ok.stdout.as_str()), (0, "(5, 2, 3)\n"));
    let empty = shapec(&["broadcast", "", "()"]);
    assert_eq!((empty.status, empty.stdout.as_str()), (0, "()\n"));
    let one = shapec(&["broadcast", "()", "7"]);
    assert_eq!(one.stdout, "(7,)\n");

    let v = json_of(&shapec(&["broadcast", "8,1,6,1", "7,1,5", "--json"]).stdout);
    assert_eq!(v, json!({"shape": [8, 7, 6, 5]}));
    let v = json_of(&shapec(&["broadcast", "()", "--json"]).stdout);
    assert_eq!(v, json!({"shape": []}));

    let bad = shapec(&["broadcast", "2,3", "4", "--json"]);
    assert_eq!(bad.status, 1);
    assert_eq!(
        json_of(&bad.stdout),
        json!({"error": {"message": "shapes (2, 3) and (4,) do not broadcast: at axis -1, sizes 3 and 4 differ and neither is 1"}})
    );
    // (`x` alone would be a named run-time size.)
    let bad = shapec(&["broadcast", "2,1x", "--json"]);
    assert_eq!(bad.status, 1);
    assert_eq!(
        json_of(&bad.stdout)["error"]
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["message"]
    );
    let text = shapec(&["broadcast", "2,3", "4"]);
    assert_eq!(text.status, 1);
    insta::assert_snapshot!("broadcast_error", text.stderr);
}

#[test]
fn run_time_sizes_infer_bind_and_run() {
    let dir = scratch("run_time_sizes");
    std::fs::write(
        dir.join("b.shape"),
        "size b\ninput x: b|4\nparam w: 4->2\ninput z: 3|2\ny = w @ x\nt = y + z\n",
    )
    .unwrap();
    // infer: symbols as strings, the guard listed.
    let out = shapec_in(&dir, &["infer", "b.shape", "--json"]);
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    assert_eq!(v["tensors"]["x"]["batch"], json!(["b"]));
    // `y` is below `t`, whose batch is 3: the least upper bound decides
    // it, as it would for any number in place of `b`.
    assert_eq!(v["tensors"]["y"]["batch"], json!([3]));
    assert_eq!(v["tensors"]["t"]["batch"], json!([3]));
    assert_eq!(v["sizes"], json!({"b": "b"}));
    assert_eq!(v["guards"][0]["requires"], "b in {1, 3}");
    let text = shapec_in(&dir, &["infer", "b.shape"]).stdout;
    assert!(
        text.contains("input x") && text.contains(": b|->4"),
        "{text}"
    );
    assert!(
        text.contains("guard") && text.contains("b in {1, 3}"),
        "{text}"
    );

    // run: --size, reported; data binds b; a guard failure is refused.
    let out = shapec_in(
        &dir,
        &[
            "run",
            "b.shape",
            "--size",
            "b=3",
            "--backend",
            "cpu",
            "--json",
        ],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    let v = json_of(&out.stdout);
    assert_eq!(v["sizes"], json!({"b": 3}));
    assert_eq!(v["results"][0]["dims"], json!([3, 2]));
    std::fs::write(dir.join("x1.npy"), numpy_f32("(1, 4)", &[1.0; 4])).unwrap();
    let out = shapec_in(
        &dir,
        &["run", "b.shape", "--input", "x=x1.npy", "--backend", "cpu"],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.contains("sizes: b=1"), "{}", out.stdout);
    assert!(out.stdout.contains("t : 3|->2"), "{}", out.stdout);
    for (args, kind) in [
        (vec!["--size", "b=2"], "guard"),
        (vec![], "unbound_size"),
        (vec!["--size", "c=2"], "data"),
        (
            vec!["--size", "b=3", "--input", "x=x1.npy"],
            "size_conflict",
        ),
    ] {
        let mut all = vec!["run", "b.shape", "--backend", "cpu", "--json"];
        all.extend(args);
        let out = shapec_in(&dir, &all);
        assert_eq!(out.status, 1, "{all:?}: {}", out.stdout);
        assert_eq!(json_of(&out.stdout)["error"]["kind"], kind, "{all:?}");
    }
    // A size that is not a run-time size cannot be bound.
    std::fs::write(
        dir.join("d.shape"),
        "size d = 4\ninput x: 2|d\ny = exp(x)\n",
    )
    .unwrap();
    let out = shapec_in(&dir, &["run", "d.shape", "--size", "d=4", "--json"]);
    assert_eq!(json_of(&out.stdout)["error"]["kind"], "not_run_time");
}

// ---- strided inputs (issue 31, item 4) ----------------------------------

/// [`numpy_f32`] with `'fortran_order': True`: `values` are the array's
/// elements with the first axis fastest, as NumPy writes a Fortran array.
fn numpy_f32_fortran(shape: &str, values: &[f32]) -> Vec<u8> {
    let c = numpy_f32(shape, values);
    let text = String::from_utf8_lossy(&c[10..128])
        .replace("'fortran_order': False", "'fortran_order': True ");
    let mut b = c[..10].to_vec();
    b.extend_from_slice(text.as_bytes());
    b.extend_from_slice(&c[128..]);
    b
}

#[test]
fn run_reads_fortran_npy_as_its_c_ordered_twin() {
    let dir = scratch("run_reads_fortran_npy_as_its_c_ordered_twin");
    let prog = programs().join("matmul.shape");
    // w = [[1, 2], [3, 4], [5, 6]]: C order by rows, Fortran by columns.
    std::fs::create_dir_all(dir.join("c")).unwrap();
    std::fs::create_dir_all(dir.join("f")).unwrap();
    std::fs::write(
        dir.join("c/w.npy"),
        numpy_f32("(3, 2)", &[1., 2., 3., 4., 5., 6.]),
    )
    .unwrap();
    std::fs::write(
        dir.join("f/w.npy"),
        numpy_f32_fortran("(3, 2)", &[1., 3., 5., 2., 4., 6.]),
    )
    .unwrap();
    for sub in ["c", "f"] {
        std::fs::write(dir.join(sub).join("x.npy"), numpy_f32("(2,)", &[1., 1.])).unwrap();
    }
    let run = |sub: &str, backend: &str| {
        let out = shapec_in(
            &dir.join(sub),
            &[
                "run",
                prog.to_str().unwrap(),
                "--backend",
                backend,
                "--input",
                "w=w.npy",
                "--input",
                "x=x.npy",
                "--json",
            ],
        );
        assert_eq!(out.status, 0, "{}", out.stderr);
        json_of(&out.stdout)["results"].clone()
    };
    let c = run("c", "cpu");
    assert_eq!(c, run("f", "cpu"));
    assert_eq!(c[0]["values"], json!([3.0, 7.0, 11.0]));
    assert_eq!(c[2]["values"], json!([[1.0, 3.0, 5.0], [2.0, 4.0, 6.0]]));
    // And through `diff`, the reference against the coalesced path.
    let out = shapec_in(
        &dir.join("f"),
        &[
            "diff",
            prog.to_str().unwrap(),
            "--backend",
            "cpu",
            "--input",
            "w=w.npy",
            "--input",
            "x=x.npy",
            "--tolerance",
            "abs=0",
        ],
    );
    assert_eq!(out.status, 0, "{}{}", out.stdout, out.stderr);
}

#[test]
fn a_fortran_npy_for_a_ragged_input_is_a_typed_error() {
    let dir = scratch("a_fortran_npy_for_a_ragged_input_is_a_typed_error");
    std::fs::write(
        dir.join("p.shape"),
        "input a: 2, var\ns = einsum(\"i, j => i\", a)\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("a.npy"),
        numpy_f32_fortran("(2, 3)", &[1., 4., 2., 5., 3., 6.]),
    )
    .unwrap();
    let out = shapec_in(
        &dir,
        &["run", "p.shape", "--backend", "cpu", "--input", "a=a.npy"],
    );
    assert_ne!(out.status, 0, "{}", out.stdout);
    assert!(!out.stderr.contains("panicked"), "{}", out.stderr);
    assert!(
        out.stderr.starts_with("error[ragged_layout]"),
        "{}",
        out.stderr
    );
    assert!(out.stderr.contains("C order"), "{}", out.stderr);
    // The same array in C order runs.
    std::fs::write(
        dir.join("c.npy"),
        numpy_f32("(2, 3)", &[1., 2., 3., 4., 5., 6.]),
    )
    .unwrap();
    let out = shapec_in(
        &dir,
        &["run", "p.shape", "--backend", "cpu", "--input", "a=c.npy"],
    );
    assert_eq!(out.status, 0, "{}", out.stderr);
    assert!(out.stdout.contains("[6, 15]"), "{}", out.stdout);
}

#[test]
fn infer_kernels_shows_the_loops_for_given_input_orders() {
    let c = shapec(&["infer", "matmul.shape", "--kernels", "--order", "w=C"]);
    assert_eq!(c.status, 0, "{}", c.stderr);
    let f = shapec(&["infer", "matmul.shape", "--kernels", "--order", "w=F"]);
    assert_eq!(f.status, 0, "{}", f.stderr);
    assert!(c.stdout.contains("    loops "), "{}", c.stdout);
    // In Fortran order w (3 x 2) is read at strides [1, 3] where the
    // transpose's copy walks it.
    assert!(f.stdout.contains("reads w at "), "{}", f.stdout);
    assert_ne!(c.stdout, f.stdout);
    // Without --order, the form is unchanged: no loops.
    let plain = shapec(&["infer", "matmul.shape", "--kernels"]);
    assert!(!plain.stdout.contains("loops"), "{}", plain.stdout);
    let json = shapec(&[
        "infer",
        "matmul.shape",
        "--kernels",
        "--order",
        "w=F",
        "--json",
    ]);
    assert_eq!(json.status, 0, "{}", json.stderr);
    let v = json_of(&json.stdout);
    for entry in v["kernels"].as_array().unwrap() {
        for step in entry["steps"].as_array().unwrap() {
            assert!(step["loops"].is_array(), "{step}");
            assert_eq!(
                step["read_strides"].as_array().unwrap().len(),
                step["reads"].as_array().unwrap().len()
            );
        }
    }
    let bad = shapec(&["infer", "matmul.shape", "--kernels", "--order", "w=Q"]);
    assert_ne!(bad.status, 0);
    assert!(bad.stderr.contains("neither C nor F"), "{}", bad.stderr);
    let unknown = shapec(&["infer", "matmul.shape", "--kernels", "--order", "y=F"]);
    assert_ne!(unknown.status, 0);
}
