//! Issue 26: notation that inferred alone but broke on its first use,
//! each as a program with the shapes beside it (OCANNL 0.6.3's answers).

use shape_tests::inference::infer;

/// Every line of `infer`'s output for `program`, and the same for the
/// programs whose statements are `orders` (permutations of the lines):
/// the shapes must not depend on the order of the statements.
fn infer_in_orders(lines: &[&str], orders: &[&[usize]]) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    for order in orders {
        let program: String = order.iter().map(|&i| format!("{}\n", lines[i])).collect();
        let mut rows: Vec<String> = infer(&program).lines().map(str::to_string).collect();
        rows.sort();
        all.push(rows.join("\n"));
    }
    for other in &all[1..] {
        assert_eq!(&all[0], other, "shapes differ between orders");
    }
    all[0].lines().map(str::to_string).collect()
}

/// Whether one of `rows` (`infer`'s lines, padded to align their colons,
/// shapes of one axis printed with a trailing comma) says `line`.
fn has(rows: &[String], line: &str) {
    let norm = |r: &str| {
        r.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .trim_end_matches(',')
            .to_string()
    };
    assert!(
        rows.iter().any(|r| norm(r) == norm(line)),
        "no `{line}` in\n{}",
        rows.join("\n")
    );
}

/// Item 1: axes before a row variable, then any use (it was
/// `axis_count_mismatch`: the left row [] has 0 axes).
#[test]
fn axes_before_a_row_variable_survive_every_use() {
    let cases: &[(&str, &[&str])] = &[
        ("input x: 2, ..r..\ny = exp(x)", &["x : |->2", "y : |->2"]),
        ("input x: 2, ..r..\ninput y: 2\nz = x + y", &["z : |->2"]),
        ("input x: 2, ..r..\nz = transpose(x)", &["z : |2->"]),
        (
            "input x: 2, ..r..\nz = einsum(\"...=>...\", x)",
            &["z : |->2"],
        ),
        (
            "input x: 2, ..r..\ninput y: 3\nz = concat(x, y)",
            &["z : |->5"],
        ),
        (
            "input x: 5, ..r..\nparam k: 2\nz = einsum(\"o<+a;a=>o\", x, k)",
            &["z : |->4"],
        ),
        ("input x: 2|3, ..r..\nz = batch_slice(x)", &["z : |->3"]),
        (
            "input x: 2, ..r.., 3\ny = exp(x)\nz = y + 1",
            &["z : |->2, 3"],
        ),
        (
            "input x: 2, ..r..\ny = exp(x)\nz = relu(y)\nw = z @ z",
            &["w : |2->2"],
        ),
        ("input x: 2, ..r.. -> 3\ny = exp(x)", &["y : |2->3"]),
    ];
    for (program, expected) in cases {
        let out = infer(program);
        let rows: Vec<String> = out.lines().map(str::to_string).collect();
        for line in *expected {
            has(&rows, line);
        }
    }
}

/// Item 2: an element count over a row variable is decided before rows
/// close (it was `total_elems`: the row [3] must hold 6 elements), in
/// every order of the statements.
#[test]
fn an_element_count_over_a_row_variable_decides_it() {
    let rows = infer_in_orders(
        &["const c: ..b..|3 = [1, 2, 3, 4, 5, 6]", "y = exp(c)"],
        &[&[0, 1]],
    );
    has(&rows, "c : 2|->3");
    has(&rows, "y : 2|->3");
    // Through a size statement, in either place.
    let lines = [
        "const c: ..b..|3 = [1, 2, 3, 4, 5, 6]",
        "size n = ..b.. of c",
        "size n == 2",
        "y = exp(c)",
    ];
    let rows = infer_in_orders(&lines, &[&[0, 1, 2, 3], &[0, 3, 1, 2], &[0, 1, 3, 2]]);
    has(&rows, "y : 2|->3");
    has(&rows, "size n : 2");
    // A count whose tensor is a convolution's kernel, with a bias after.
    let lines = [
        "const k: 3, ..c.. = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]",
        "input x: 8, 4",
        "param b",
        "y = einsum(\"o<+a, c; a, c=>o\", x, k)",
        "z = y + b",
    ];
    let rows = infer_in_orders(
        &lines,
        &[&[0, 1, 2, 3, 4], &[1, 0, 3, 2, 4], &[2, 1, 0, 3, 4]],
    );
    has(&rows, "k : |->3, 4");
    has(&rows, "b : |->6");
    has(&rows, "z : |->6");
    let rows = infer_in_orders(
        &[
            "const k: 2, ..r.. = [1, 2, 3, 4, 5, 6]",
            "input x: 5, 3",
            "y = einsum(\"o<+a, c; a, c=>o\", x, k)",
        ],
        &[&[0, 1, 2], &[1, 0, 2]],
    );
    has(&rows, "k : |->2, 3");
    // A slice that fixes the first batch axis: the count gives the rest.
    let values: Vec<String> = (1..=24).map(|v| v.to_string()).collect();
    let c = format!("const c: ..b..|4 = [{}]", values.join(", "));
    let rows = infer_in_orders(&[&c, "s = batch_slice_range(\"3\", c)"], &[&[0, 1]]);
    has(&rows, "c : 3, 2|->4");
    has(&rows, "s : 2|->4");
    // A slice whose first axis the count decides keeps one axis.
    let rows = infer_in_orders(&[&c, "s = batch_slice(c)"], &[&[0, 1]]);
    has(&rows, "c : 6|->4");
}

/// Found by the grammar generator (`grammar_coverage`'s programs that
/// failed otherwise): an element count over a row variable with two
/// known axes before it took only the first into account (`4, 4, ..n..`
/// with 48 values was `dim_mismatch`, 12 against 4).
#[test]
fn an_element_count_counts_every_axis_before_its_row_variable() {
    let values = |n: usize| {
        (1..=n)
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let c = format!("const c: 4, 4, ..n.. = [{}]", values(48));
    let rows = infer_in_orders(&[&c, "y = exp(c)"], &[&[0, 1]]);
    has(&rows, "c : |->4, 4, 3");
    has(&rows, "y : |->4, 4, 3");
    let c = format!("const c: 2, 3, 2, ..n..|4 = [{}]", values(96));
    let rows = infer_in_orders(&[&c, "y = exp(c)"], &[&[0, 1]]);
    has(&rows, "c : 2, 3, 2, 2|->4");
    let c = format!("const c: 4, 4, ..n.. = [{}]", values(16));
    let rows = infer_in_orders(&[&c], &[&[0]]);
    has(&rows, "c : |->4, 4");
}

/// Item 3: a parameter row closed empty only by a default is `not_given`
/// whatever the position of its row variable (a leading axis hid it).
#[test]
fn a_parameter_row_closed_by_a_default_is_not_given_wherever_its_variable_is() {
    for result in ["|o, ..f..", "|..f.., o"] {
        let program = format!("input x: 3\nparam k\nc = einsum(\"|o;|..f..=>{result}\", x, k)\n");
        let out = infer(&program);
        assert!(out.starts_with("error[not_given]"), "{result}: {out}");
    }
    let out = infer("input x: 3\nparam k: 2\nc = einsum(\"|o;|..f..=>|o, ..f..\", x, k)\n");
    let rows: Vec<String> = out.lines().map(str::to_string).collect();
    has(&rows, "c : |->3, 2");
}

/// `shapec run --backend cpu --json` of a program: the first result's values.
fn run_values(program: &str) -> serde_json_free::Values {
    let dir = std::env::temp_dir().join(format!("notation-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("p{}.shape", program.len()));
    std::fs::write(&path, program).unwrap();
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let status = shapec::cli::main_with(
        [
            "shapec",
            "run",
            path.to_str().unwrap(),
            "--backend",
            "cpu",
            "--json",
        ],
        &mut out,
        &mut err,
    );
    assert_eq!(status, 0, "{}", String::from_utf8_lossy(&err));
    serde_json_free::Values(String::from_utf8(out).unwrap())
}

/// The JSON of a run, searched as text (shape-tests has no JSON parser).
mod serde_json_free {
    pub struct Values(pub String);
    impl Values {
        /// Whether the result's `"values"` are written `text`.
        pub fn are(&self, text: &str) -> bool {
            self.0.contains(&format!("\"values\":{text}"))
        }
    }
}

/// Item 6: every example the notation's documents give (spec-grammar.md,
/// deviations.md), run.
#[test]
fn the_documented_examples_of_the_notation_hold() {
    // A label repeated in the result: a diagonal.
    let v = run_values("const x: 2 = [1, 2]\ny = einsum(\"i=>i,i\", x)\n");
    assert!(v.are("[[1.0, 0.0], [0.0, 2.0]]"), "{}", v.0);
    // A result-only label repeated: a square block with the value on its
    // diagonal.
    let v = run_values("const x: 2 = [1, 2]\ny = einsum(\"i=>i,n:2,n:2\", x)\n");
    assert!(
        v.are("[[[1.0, 0.0], [0.0, 1.0]], [[2.0, 0.0], [0.0, 2.0]]]"),
        "{}",
        v.0
    );
    // The seed's reading of an omitted batch row (OCANNL 0.6.3 refuses it).
    let out = infer("input a: 2|3\ninput b: 2|3\nc = einsum(\"i;i=>i\", a, b)\n");
    has(
        &out.lines().map(str::to_string).collect::<Vec<_>>(),
        "c : 2|->3",
    );
    // `_` in a result, and `..r..` that only the result has, are refused;
    // `...` only in a result is that row's own and closes empty.
    assert!(infer("input x: 2\ny = einsum(\"i=>i,_\", x)\n").starts_with("error[spec]"));
    assert!(infer("input x: 2\ny = einsum(\"i=>i, ..r..\", x)\n").starts_with("error[spec]"));
    let out = infer("input x: 2\ny = einsum(\"i=>...|i\", x)\n");
    has(
        &out.lines().map(str::to_string).collect::<Vec<_>>(),
        "y : |->2",
    );
    // deviations.md: an element count over a row variable.
    let out = infer("const c: ..b..|3 = [1, 2, 3, 4, 5, 6]\n");
    has(
        &out.lines().map(str::to_string).collect::<Vec<_>>(),
        "c : 2|->3",
    );
}
