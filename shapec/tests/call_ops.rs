//! A program-language example that calls a WGSL function inside a
//! network (`examples/brightness.shape`): run on the CPU through the
//! interpreter, and diffed on wgpu (the function inlined) against it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../examples")
}

fn shapec(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_shapec"))
        .args(args)
        .current_dir(examples())
        .env("NO_COLOR", "1")
        .output()
        .expect("the shapec binary runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8(out.stdout).expect("utf-8 stdout"),
        String::from_utf8(out.stderr).expect("utf-8 stderr"),
    )
}

#[test]
fn brightness_example_runs_on_the_cpu() {
    let (status, stdout, stderr) = shapec(&["run", "brightness.shape", "--backend", "cpu"]);
    assert_eq!(status, 0, "{stdout}{stderr}");
    assert!(stdout.contains("y : 6|->4 = ["), "{stdout}");
    assert!(stdout.contains("param gain : |->"), "{stdout}");
}

#[test]
fn brightness_example_diffs_on_wgpu() {
    let (status, stdout, stderr) =
        shapec(&["diff", "brightness.shape", "--backend", "wgpu", "--json"]);
    let required = std::env::var("SHAPE_REQUIRE_GPU").is_ok_and(|v| v == "1");
    if status != 0 && !required {
        assert!(
            stdout.contains("no GPU adapter") || stderr.contains("no GPU adapter"),
            "{stdout}{stderr}"
        );
        return;
    }
    assert_eq!(status, 0, "{stdout}{stderr}");
    assert!(stdout.contains("\"elements\":24"), "{stdout}");
}

#[test]
fn a_function_that_is_not_wgsl_is_placed_at_its_statement() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("call_ops_bad");
    let _ = std::fs::create_dir_all(&dir);
    let file = dir.join("bad.shape");
    std::fs::write(
        &file,
        "function f = \"fn f(a: f32) -> f32 { return a +; }\"\ninput x: 3\ny = f(x)\n",
    )
    .unwrap();
    let (status, stdout, stderr) = shapec(&["infer", file.to_str().unwrap(), "--json"]);
    assert_ne!(status, 0);
    let all = format!("{stdout}{stderr}");
    assert!(all.contains("\"kind\":\"wgsl\""), "{all}");
    assert!(all.contains("\"line\":1"), "{all}");
}
