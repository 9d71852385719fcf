//! Properties that need no oracle (metamorphic), over the programs of
//! [`shape_tests::grammar`]: a change to a program that must not change
//! what inference says, or what a run computes.
//!
//! `PROPTEST_CASES` raises the number of cases (default 500 each);
//! failures are saved in `proptest-regressions/metamorphic.txt`.

use std::collections::BTreeMap;

use backend_cpu::CpuBackend;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use shape_core::spec::{RowSpec, ShapeSpec};
use shape_core::RowKind;
use shape_tests::differential::{compare_backends, ProgramRunner, Tolerance};
use shape_tests::grammar::{infer, programs, runnable, text_of, GrammarProgram, Inferred, Stmt};

/// The number of cases: `PROPTEST_CASES`, or 500.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(500)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "../proptest-regressions/metamorphic.txt",
        ))),
        // The properties skip programs they do not apply to (ragged data,
        // run-time sizes, no row variable): up to about a third at large
        // case counts, which proptest's default of 1,024 rejects cuts off.
        max_global_rejects: 1024.max(cases()),
        ..ProptestConfig::default()
    }
}

/// The names of the program's tensors that statements define.
fn tensor_names(p: &GrammarProgram, shapes: &BTreeMap<String, String>) -> Vec<String> {
    p.statements
        .iter()
        .flat_map(|s| s.defines.iter())
        .filter(|n| shapes.contains_key(*n))
        .cloned()
        .collect()
}

/// Values of every assigned name on the CPU reference, by name.
fn values(text: &str) -> Option<BTreeMap<String, Vec<u32>>> {
    let prog = runnable(text, 3).ok()?;
    let solved = prog.graph.solve().ok()?;
    let out = CpuBackend::reference().run_solved(&solved, &prog).ok()?;
    Some(
        out.into_iter()
            .map(|(t, v)| {
                let name = prog.graph.name(t).unwrap_or("?").to_string();
                // NaN payloads may differ; compare NaN as one value.
                let bits = v
                    .iter()
                    .map(|x| if x.is_nan() { u32::MAX } else { x.to_bits() })
                    .collect();
                (name, bits)
            })
            .collect(),
    )
}

/// A topological order of `stmts` that follows `priorities`: of the
/// statements whose dependencies have gone first, the one of lowest
/// priority goes first. A statement depends on the last statement above
/// it that defines each name it uses; one that defines a name again
/// (`d[...] <- EXPR`, a new version of `d`) also goes after every earlier
/// definition of that name and every statement that read an earlier
/// version, so each statement reads the same version in every order.
fn reorder(stmts: &[Stmt], priorities: &[u32]) -> Vec<Stmt> {
    let mut after: Vec<Vec<usize>> = vec![Vec::new(); stmts.len()];
    for (i, s) in stmts.iter().enumerate() {
        for u in &s.uses {
            if let Some(j) = (0..i).rev().find(|&j| stmts[j].defines.contains(u)) {
                after[i].push(j);
            }
        }
        for d in &s.defines {
            for (k, earlier) in stmts[..i].iter().enumerate() {
                if earlier.defines.contains(d) || earlier.uses.contains(d) {
                    after[i].push(k);
                }
            }
        }
    }
    let mut placed = vec![false; stmts.len()];
    let mut out = Vec::new();
    while out.len() < stmts.len() {
        let pick = (0..stmts.len())
            .filter(|&i| !placed[i] && after[i].iter().all(|&j| placed[j]))
            .min_by_key(|&i| (priorities.get(i).copied().unwrap_or(0), i))
            .expect("the statements' dependencies have no cycle");
        placed[pick] = true;
        out.push(stmts[pick].clone());
    }
    out
}

/// Gives a row's new entries from its parsed row, its solved axes and
/// the spec's text.
type RowRewrite<'a> = dyn FnMut(&RowSpec, &[String], &str) -> Option<Vec<String>> + 'a;

/// A declaration's spec rewritten row by row: `f` gives each row's
/// entries from its parsed row and its solved axes.
fn rewrite_spec(spec_text: &str, solved: &str, f: &mut RowRewrite<'_>) -> Option<String> {
    let spec = ShapeSpec::parse(spec_text).ok()?;
    let solved = ShapeSpec::parse(solved).ok()?;
    let mut rows: Vec<Vec<String>> = Vec::new();
    for kind in RowKind::ALL {
        let axes: Vec<String> = solved
            .row(kind)
            .map(|r| r.all_axes().map(|a| solved_entry(&a.kind)).collect())
            .unwrap_or_default();
        let row = spec.row(kind).cloned().unwrap_or_default();
        rows.push(f(&row, &axes, spec_text)?);
    }
    if rows.iter().all(|r| r.len() < 2) {
        rows[2].push(String::new());
    }
    Some(format!(
        "{}|{}->{}",
        rows[0].join(", "),
        rows[1].join(", "),
        rows[2].join(", ")
    ))
}

fn solved_entry(kind: &shape_core::spec::AxisKind) -> String {
    use shape_core::spec::AxisKind;
    match kind {
        AxisKind::Size(n) => n.to_string(),
        AxisKind::LabeledSize(l, n) => format!("{l}:{n}"),
        AxisKind::Label(l) => l.clone(),
        other => format!("{other:?}"),
    }
}

/// The entries of a row with its row variable replaced: `keep` of the
/// axes it closed to are written before it, the rest replace it when
/// `keep` is `None`.
fn explicit_row(
    row: &RowSpec,
    solved: &[String],
    text: &str,
    keep: Option<usize>,
) -> Option<Vec<String>> {
    let entry = |a: &shape_core::spec::AxisSpec| text[a.span.clone()].to_string();
    let mut out: Vec<String> = row.before.iter().map(entry).collect();
    if let Some((var, span)) = &row.row_var {
        let _ = var;
        let middle = solved
            .len()
            .checked_sub(row.before.len() + row.axes.len())?;
        let closed = &solved[row.before.len()..row.before.len() + middle];
        match keep {
            None => out.extend(closed.iter().cloned()),
            Some(k) => {
                out.extend(closed.iter().take(k).cloned());
                out.push(text[span.clone()].to_string());
            }
        }
    }
    out.extend(row.axes.iter().map(entry));
    Some(out)
}

/// A declaration statement's parts: keyword, name, spec, and the rest
/// (` = [values]`).
fn split_declaration(text: &str) -> Option<(&str, &str, &str, &str)> {
    let (word, rest) = text.split_once(' ')?;
    if !matches!(word, "input" | "param" | "const") {
        return None;
    }
    let (name, spec) = rest.split_once(": ")?;
    let (spec, tail) = match spec.find(" = [") {
        Some(i) => (&spec[..i], &spec[i..]),
        None => (spec, ""),
    };
    Some((word, name, spec, tail))
}

/// Shapes without their labels (`s2:2` is `2`): which label a size
/// carries depends on which fact reached it first (see
/// `labels_do_not_depend_on_order` below), its size does not.
fn unlabeled(shapes: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    shapes
        .iter()
        .map(|(k, v)| {
            let entries = v
                .split(',')
                .map(|e| {
                    // `|s2:2->s3:3` keeps its `|` and `->`.
                    let mut out = String::new();
                    let mut word = String::new();
                    for ch in e.chars() {
                        if ch == ':' {
                            word.clear();
                        } else if ch.is_ascii_alphanumeric() || ch == '_' {
                            word.push(ch);
                        } else {
                            out.push_str(&word);
                            word.clear();
                            out.push(ch);
                        }
                    }
                    out.push_str(&word);
                    out
                })
                .collect::<Vec<_>>()
                .join(",");
            (k.clone(), entries)
        })
        .collect()
}

fn program_shapes(p: &GrammarProgram) -> Option<BTreeMap<String, String>> {
    infer(&p.text()).shapes().cloned()
}

proptest! {
    #![proptest_config(config())]

    /// Using a tensor (`z = id(t)`, `exp`, `relu`) changes no shape of the
    /// program (labels aside), which still infers.
    #[test]
    fn use_does_not_change_a_declaration(p in programs(), which in any::<prop::sample::Index>(), f in 0..3usize) {
        let Some(shapes) = program_shapes(&p) else { return Ok(()) };
        let names = tensor_names(&p, &shapes);
        prop_assume!(!names.is_empty());
        let t = which.get(&names);
        let func = ["id", "exp", "relu"][f];
        let text = format!("{}zz_use = {func}({t})\n", p.text());
        match infer(&text) {
            Inferred::Shapes(after) => {
                // Without labels: which label a size shows depends on
                // which fact reached it first (`labels_do_not_depend_on_order`).
                let (shapes, after) = (unlabeled(&shapes), unlabeled(&after));
                for (name, shape) in &shapes {
                    prop_assert_eq!(after.get(name), Some(shape), "`{}` changed after `zz_use = {}({})`:\n{}", name, func, t, text);
                }
            }
            Inferred::Error { kind, message, .. } => {
                prop_assert!(false, "error[{}] after `zz_use = {}({})`: {}\n{}", kind, func, t, message, text);
            }
        }
    }

    /// Any topological order of the statements gives the same shapes and
    /// values, or an error of the same class.
    #[test]
    fn order_does_not_matter(p in programs(), priorities in prop::collection::vec(any::<u32>(), 64)) {
        let first = infer(&p.text());
        let reordered = reorder(&p.statements, &priorities);
        let text = text_of(&reordered);
        let second = infer(&text);
        match (&first, &second) {
            (Inferred::Shapes(a), Inferred::Shapes(b)) => {
                prop_assert_eq!(unlabeled(a), unlabeled(b), "shapes differ in the order\n{}\nfrom\n{}", text, p.text());
                if !p.ragged {
                    prop_assert_eq!(values(&p.text()), values(&text), "values differ in the order\n{}\nfrom\n{}", text, p.text());
                }
            }
            (Inferred::Error { kind: k1, class: c1, .. }, Inferred::Error { kind: k2, class: c2, .. }) => {
                match (c1, c2) {
                    (Some(c1), Some(c2)) => prop_assert_eq!(c1, c2, "error classes differ ({} and {}) in the order\n{}\nfrom\n{}", k1, k2, text, p.text()),
                    _ => prop_assert_eq!(k1, k2, "errors differ in the order\n{}\nfrom\n{}", text, p.text()),
                }
            }
            _ => prop_assert!(false, "one order infers, the other fails:\n{:?}\n{}\n---\n{:?}\n{}", first, p.text(), second, text),
        }
    }

    /// Declaring every parameter with its inferred shape, and writing every
    /// captured size as its number, changes no shape.
    #[test]
    fn stating_what_was_inferred_changes_nothing(p in programs()) {
        prop_assume!(!p.run_time);
        let Some(shapes) = program_shapes(&p) else { return Ok(()) };
        let mut changed = 0;
        let stmts: Vec<Stmt> = p.statements.iter().map(|s| {
            let mut s = s.clone();
            if let Some(name) = s.text.strip_prefix("param ") {
                let name = name.split(':').next().unwrap_or(name).trim().to_string();
                if let Some(shape) = shapes.get(&name) {
                    if ShapeSpec::parse(shape).is_ok() {
                        s.text = format!("param {name}: {shape}");
                        changed += 1;
                    }
                }
            } else if let Some(rest) = s.text.strip_prefix("size ") {
                if let Some((name, source)) = rest.split_once(" = ") {
                    if source.contains(" of ") {
                        if let Some(v) = shapes.get(&format!("size {name}")) {
                            s.text = format!("size {name} = {v}");
                            s.uses.clear();
                            changed += 1;
                        }
                    }
                }
            }
            s
        }).collect();
        prop_assume!(changed > 0);
        let text = text_of(&stmts);
        match infer(&text) {
            Inferred::Shapes(after) => prop_assert_eq!(unlabeled(&after), unlabeled(&shapes), "shapes changed:\n{}\nfrom\n{}", text, p.text()),
            Inferred::Error { kind, message, .. } => prop_assert!(false, "error[{}]: {}\n{}\nfrom\n{}", kind, message, text, p.text()),
        }
    }

    /// A row variable written out as the axes it closed to, or with one of
    /// them moved into its leading flank, gives the same shapes.
    #[test]
    fn flank_position_does_not_matter(p in programs(), which in any::<prop::sample::Index>(), moved in any::<bool>()) {
        let Some(shapes) = program_shapes(&p) else { return Ok(()) };
        let text = p.text();
        let with_row_var: Vec<usize> = p.statements.iter().enumerate().filter(|(_, s)| {
            split_declaration(&s.text).is_some_and(|(_, name, spec, _)| {
                spec.contains("..") && !text.contains(&format!(" of {name}\n"))
            })
        }).map(|(i, _)| i).collect();
        prop_assume!(!with_row_var.is_empty());
        let i = *which.get(&with_row_var);
        let (word, name, spec, tail) = split_declaration(&p.statements[i].text).expect("a declaration");
        let solved = shapes.get(name).expect("a declared tensor").clone();
        // A constant's row variable takes one axis at least (its element
        // count), so only inputs and parameters move an axis out of it.
        let keep = if moved && word != "const" { Some(1) } else { None };
        let Some(new_spec) = rewrite_spec(spec, &solved, &mut |row, axes, t| explicit_row(row, axes, t, keep)) else {
            return Ok(());
        };
        let mut stmts = p.statements.clone();
        stmts[i].text = format!("{word} {name}: {new_spec}{tail}");
        let new_text = text_of(&stmts);
        match infer(&new_text) {
            Inferred::Shapes(after) => prop_assert_eq!(unlabeled(&after), unlabeled(&shapes), "shapes changed:\n{}\nfrom\n{}", new_text, text),
            Inferred::Error { kind, message, .. } => prop_assert!(false, "error[{}]: {}\n{}\nfrom\n{}", kind, message, new_text, text),
        }
    }

    /// Every program that runs gives the same values on the CPU
    /// reference and the coalesced CPU path (exactly), and on wgpu within
    /// the GPU tolerance.
    #[test]
    fn backends_agree_on_every_program(p in programs()) {
        prop_assume!(!p.ragged);
        let Ok(prog) = runnable(&p.text(), 3) else { return Ok(()) };
        let mut reference = CpuBackend::reference();
        let mut coalesced = CpuBackend::coalesced();
        if let Err(d) = compare_backends(&prog, &mut [&mut reference, &mut coalesced], Tolerance::EXACT) {
            prop_assert!(false, "CPU paths disagree: {}\n{}", d, p.text());
        }
        // WGSL leaves `log` and `sqrt` of a negative number indeterminate
        // (llvmpipe gives a number where the CPU gives NaN), and random
        // data reaches them: such programs are compared on the CPU paths
        // only, as the conformance suite's samplers avoid them.
        let text = p.text();
        if text.contains("log(") || text.contains("sqrt(") {
            return Ok(());
        }
        let gpu = shape_tests::gpu::with_shared_wgpu("backends_agree_on_every_program", |gpu| {
            let mut reference = CpuBackend::reference();
            compare_backends(&prog, &mut [&mut reference, gpu], Tolerance::GPU).map_err(|d| d.to_string())
        });
        if let Some(Err(d)) = gpu {
            prop_assert!(false, "wgpu disagrees: {}\n{}", d, p.text());
        }
    }
}

/// Found by `use_does_not_change_a_declaration` (seed in
/// proptest-regressions/metamorphic.txt): adding `z = id(x1)` closed the
/// row variable of `x1` empty (`3|->1`), where without it `x1` was
/// `3, 1|->1`, as the rows around it closed in another order. An element
/// count is now resolved before rows close: the known sizes reach the
/// count, so the row variable is empty either way.
#[test]
fn use_changes_an_element_count_over_a_row_variable() {
    let base = "const x1: 3, ..n..|->1 = [1, 2, 3]\ny2 = x1 + x1\ny3 = einsum(\"0, ..., 0|->0=>...|->0,\", y2)\n";
    let before = infer(base);
    let after = infer(&format!("{base}z = id(x1)\n"));
    let (Some(before), Some(after)) = (before.shapes(), after.shapes()) else {
        panic!("both infer: {before:?} {after:?}");
    };
    assert_eq!(before.get("x1"), after.get("x1"));
    assert_eq!(before.get("y2"), after.get("y2"));
}

/// Found by `order_does_not_matter`: a size's label depends on which fact
/// reached it first (`b` is `s2:2` when `require b: 2` comes after the
/// sum, `2` when it comes before).
#[test]
#[ignore = "labels depend on statement order (issue 26, item 8); the order property compares shapes without labels"]
fn labels_do_not_depend_on_order() {
    let one = infer("input a: s2:2\ninput b: c\ny = a + b\nrequire b: 2\n");
    let two = infer("input a: s2:2\ninput b: c\nrequire b: 2\ny = a + b\n");
    assert_eq!(one, two);
}

/// Found while building the grammar generator: a constant's element count
/// over a row variable, broadcast against a longer row. The row variable
/// takes one axis, which the count sizes (`c` is `|4->3`); finalization's
/// rule 2 gave it the two axes of `x`'s row first, and the count then
/// failed (`total_elems`).
#[test]
fn element_count_over_a_row_variable_under_broadcasting() {
    let text = "input x: |2, 4->3\nconst c: |..n..->3 = [1,2,3,4,5,6,7,8,9,10,11,12]\ny = c + x\n";
    let shapes = infer(text);
    let shapes = shapes.shapes().unwrap_or_else(|| panic!("{shapes:?}"));
    assert_eq!(shapes.get("c").map(String::as_str), Some("|4->3"));
}

#[test]
fn reorder_keeps_dependencies() {
    let s = |t: &str, d: &[&str], u: &[&str]| Stmt {
        text: t.into(),
        defines: d.iter().map(|x| x.to_string()).collect(),
        uses: u.iter().map(|x| x.to_string()).collect(),
    };
    let stmts = vec![
        s("input x: 2", &["x"], &[]),
        s("input y: 2", &["y"], &[]),
        s("z = x + y", &["z"], &["x", "y"]),
    ];
    let out = reorder(&stmts, &[9, 1, 0]);
    let order: Vec<&str> = out.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(order, ["input y: 2", "input x: 2", "z = x + y"]);
    // A new version of `x`: read before it stays before it, read after it
    // stays after it, whatever the priorities.
    let stmts = vec![
        s("input x: 2", &["x"], &[]),
        s("a = x + 1", &["a"], &["x"]),
        s("x[...] <- 3", &["x"], &["x"]),
        s("b = x + 1", &["b"], &["x"]),
        s("input y: 2", &["y"], &[]),
    ];
    let out = reorder(&stmts, &[5, 9, 0, 0, 1]);
    let order: Vec<&str> = out.iter().map(|s| s.text.as_str()).collect();
    assert_eq!(
        order,
        [
            "input y: 2",
            "input x: 2",
            "a = x + 1",
            "x[...] <- 3",
            "b = x + 1"
        ]
    );
}

/// Found by `use_does_not_change_a_declaration`: an unused result above a
/// flank's rest (`y10` above `y7`, whose rest `...` the result `d, ...`
/// shares) closed that rest empty first, and the einsum then failed with
/// `axis_count_mismatch`. Lengths now pass through slices both ways.
#[test]
fn an_unused_result_above_a_shared_flank_rest_changes_nothing() {
    let base = "input x4: 1, 1, 1\ny7 = x4 + 1\ny10 = 1 - y7\ny13 = einsum_min(\"_, ..., d=>d, ...\", y7)\n";
    let before = infer(base);
    let after = infer(&format!("{base}zz = exp(y10)\n"));
    let (Some(before), Some(after)) = (before.shapes(), after.shapes()) else {
        panic!("both infer: {before:?} {after:?}");
    };
    assert_eq!(before.get("y13"), after.get("y13"));
    assert_eq!(before.get("y13").map(String::as_str), Some("|->1, 1"));
}

/// Found by `use_does_not_change_a_declaration`: `param w2` sized by
/// `compose(w2, x1)` and `require y3: 1|->1` is `|2, 2->1`; a further
/// `zz = exp(w2)` was an upper bound that finalization closed empty first
/// (an unused result), which left `w2`'s output row empty, `not_given`.
/// A free result now waits for its operands rather than bound them.
#[test]
fn a_pointwise_use_of_a_parameter_leaves_it_as_its_other_uses_size_it() {
    let base = "input x1: 1|->2, 2\nparam w2\ny3 = compose(w2, x1)\nrequire y3: 1|->1\n";
    let before = infer(base);
    let after = infer(&format!("{base}zz = exp(w2)\n"));
    let (Some(before), Some(after)) = (before.shapes(), after.shapes()) else {
        panic!("both infer: {before:?} {after:?}");
    };
    assert_eq!(before.get("w2"), after.get("w2"));
}

/// Found by `use_does_not_change_a_declaration`: a constant of one value
/// whose batch row is `..n.., 1` may have any number of axes of 1 there;
/// `zz = exp(x3)`, closed first as a result nothing bounds, then bounded
/// `x3` and gave `n` no axis where without it `n` has one (the largest
/// its other use allows). A free result now waits for its operands.
#[test]
fn a_use_changes_how_many_axes_of_one_a_constant_has() {
    let base =
        "const x3: ..n.., 1|1->1, 1 = [-3]\ny10 = -x3\nparam x12: 1, 1|1->1, 1\ny13 = x12 / y10\n";
    let before = infer(base);
    let after = infer(&format!("{base}zz = exp(x3)\n"));
    let (Some(before), Some(after)) = (before.shapes(), after.shapes()) else {
        panic!("both infer: {before:?} {after:?}");
    };
    assert_eq!(before.get("x3"), after.get("x3"));
}

/// Found by `use_does_not_change_a_declaration` at 20,000 cases (seed in
/// proptest-regressions/metamorphic.txt), left open: `y3 = x2 + x1` and
/// `zz = id(x1)` are both free results closed in one round of rule 3, and
/// `zz`, closed empty, leaves `x1`'s row variable none of the axis `y3`
/// allows. Re-deciding after each close which free results wait fixed it
/// but made the outcome depend on the order of the statements (the order
/// property found that), so it needs a rule that closes a round's free
/// results by what they carry, not one at a time.
#[test]
fn two_free_results_of_one_operand_close_one_after_the_other() {
    let base = "const x1: 1|..n..->1, 1, 1 = [-3]\ninput x2: 1|1->1, 1, 1\ny3 = x2 + x1\n";
    let before = infer(base);
    let after = infer(&format!("{base}zz = id(x1)\n"));
    let (Some(before), Some(after)) = (before.shapes(), after.shapes()) else {
        panic!("both infer: {before:?} {after:?}");
    };
    assert_eq!(before.get("x1"), after.get("x1"));
    assert_eq!(before.get("x1").map(String::as_str), Some("1|1->1, 1, 1"));
}

/// Found by `use_does_not_change_a_declaration` once the case above was
/// fixed by comparing what two free results leave their operand: a use of
/// a use (`zz_use = exp(y7)` over `y7 = y4 * y4`) is a chain of
/// pass-through results, which as a whole bounds nothing, however long.
#[test]
fn a_chain_of_pass_through_uses_bounds_nothing() {
    let base = "input x1: a|->1, 1, 1\nrequire x1: 1|->1, 1, 1\ninput x2: a|->b, 1, 1\nrequire x2: 1|->1, 1, 1\ny3 = x2 + x1\ny4 = transpose(y3)\ninput x5: a|1, 1, b->1\nrequire x5: 1|1, 1, 1->1\ny6 = x5 + y4\ny7 = y4 * (y4)\n";
    let before = infer(base);
    let after = infer(&format!("{base}zz_use = exp(y7)\nzz2 = relu(zz_use)\n"));
    let (Some(before), Some(after)) = (before.shapes(), after.shapes()) else {
        panic!("both infer: {before:?} {after:?}");
    };
    for name in ["y3", "y4", "y7"] {
        assert_eq!(before.get(name), after.get(name), "{name}");
    }
    assert_eq!(before.get("y3").map(String::as_str), Some("1|1->1, 1, 1"));
}

/// Found by `use_does_not_change_a_declaration` at 20,000 cases: an extra
/// use changes which label a size shows (`s2:2` or `2`), as the order of
/// the statements does; the sizes are the same. Kept ignored with
/// `labels_do_not_depend_on_order`.
#[test]
#[ignore = "labels depend on which fact reaches a size first (issue 26, item 8)"]
fn labels_do_not_depend_on_a_use() {
    let base = "const x1: 1, 1|->..n.. = [-3, -2]\ninput x2: a|...->1\nrequire x2: 1|->1\ny3 = x2 + x1\ninput x4: a1...|->_\nrequire x4: 1, 1|->2\ny5 = x4 + x1\nd6: 1, 1|->s2:2 <- y3\n";
    let before = infer(base);
    let after = infer(&format!("{base}zz_use = id(y3)\n"));
    assert_eq!(
        before.shapes().and_then(|s| s.get("y5").cloned()),
        after.shapes().and_then(|s| s.get("y5").cloned())
    );
}

/// Found by `stating_what_was_inferred_changes_nothing` at 20,000 cases: a
/// size read from a row (`size n5 = ..p.. of y2`) that nothing else uses
/// held the row back from the defaults, so that the program closed it
/// otherwise than with the number in its place. A row count holds its row
/// back only when its count is bound by something else.
#[test]
fn reading_a_row_count_changes_nothing() {
    let program = |size: &str| {
        format!("const x1: 1|->2..n.. = [-3, -2]\ny2 = einsum(\"a|->..p..b=>ab|->..p..0\", x1)\ninput x3: s2:2, a|->b, 1, ..p..\nrequire x3: 2, 1|->1, 1\ny4 = batch_slice_range(\"2\", x3)\nsize n5 = {size}\ny6 = 2.5 + y4\n")
    };
    let read = infer(&program("..p.. of y2"));
    let Some(shapes) = read.shapes() else {
        panic!("infers: {read:?}");
    };
    let n5 = shapes.get("size n5").expect("n5 is inferred").clone();
    let stated = infer(&program(&n5));
    assert_eq!(Some(shapes), stated.shapes());
}

/// Found by `stating_what_was_inferred_changes_nothing` at 20,000 cases:
/// the sum's result waited for `x1`'s row, which waited for `id(x1)`,
/// which only the sum bounds; rule 5 then closed all three empty, where
/// with `x1` stated closed the sum closed first and `id(x1)` took its
/// axis. The waiting results that add axes are now released before rule 5.
#[test]
fn results_waiting_on_each_other_are_released_before_the_leftovers() {
    let program = |x1: &str| {
        format!("const x1: {x1}|1->1, 1 = [-3]\ny2 = id(x1) + x1\ny3 = einsum(\"..., 0|0->0, 0=>...|->0,\", y2)\n")
    };
    let open = infer(&program("..n.."));
    let Some(shapes) = open.shapes() else {
        panic!("infers: {open:?}");
    };
    assert_eq!(shapes.get("x1").map(String::as_str), Some("1|1->1, 1"));
    assert_eq!(shapes.get("y2.1").map(String::as_str), Some("1|1->1, 1"));
    let stated = infer(&program("1"));
    assert_eq!(Some(shapes), stated.shapes());
}

/// Found by `use_does_not_change_a_declaration` once a size only read held
/// its row no more: the size itself must still wait for its row (a default
/// closed it to 1 first, and the count then failed).
#[test]
fn a_size_only_read_waits_for_its_row() {
    let base = "const x1: m, 1|->1, 1 = [-3, -2]\ny2 = transpose(x1)\nparam w3: |1, 1->1\ny4 = w3 @ x1\ny5 = einsum(\"..r..|->0=>..r..|->0\", y4)\nsize n6 = ..r.. of y5\ny7 = id(y2)\n";
    for text in [base.to_string(), format!("{base}zz_use = id(y4)\n")] {
        let out = infer(&text);
        let Some(shapes) = out.shapes() else {
            panic!("infers: {out:?}\n{text}");
        };
        assert_eq!(
            shapes.get("size n6").map(String::as_str),
            Some("2"),
            "{text}"
        );
    }
}

/// Found by `order_does_not_matter`: `0.5` in an expression (`|->1`) and
/// as a call's scalar argument (`|->`) are two tensors named `0.5`, and a
/// listing by name showed whichever came first.
#[test]
fn a_number_in_an_expression_and_as_a_call_argument_list_alike_in_any_order() {
    let head = "function f9 = \"fn f9(a: f32, s: f32) -> f32 { return a * s; }\"\ninput x8: 3|\ny2 = x8 * 2\n";
    let (a, b) = ("y11 = sigmoid(-y2 * (0.5))\n", "y10 = f9(x8, 0.5)\n");
    let first = infer(&format!("{head}{a}{b}"));
    let second = infer(&format!("{head}{b}{a}"));
    match (&first, &second) {
        (Inferred::Shapes(x), Inferred::Shapes(y)) => {
            assert_eq!(x, y);
            assert_eq!(x.get("literal 0.5: |->1").map(String::as_str), Some("1"));
            assert_eq!(x.get("literal 0.5: |->").map(String::as_str), Some("1"));
        }
        other => panic!("{other:?}"),
    }
}

/// Found by `backends_agree_on_every_program` at 4,000 cases (seed in
/// proptest-regressions/metamorphic.txt): `max(x1 + x1, -x1)` at `x1 = 0`
/// is `max(+0, -0)`, which llvmpipe gave as -0 and the CPU as +0, so
/// dividing -0.5 by it gave +inf on one and -inf on the other. `max` now
/// gives +0 of two zeros (and `min` -0) in either order, on every backend.
#[test]
fn max_and_min_of_two_zeros_agree_on_every_backend() {
    let text = "const x1: 1, 1|->2, 2 = [-3, -2, -1, 0]\n\
                y2 = div(min(x1 - 0.5, x1 + x1), max(x1 + x1, -x1))\n\
                y3 = div(1, min(-x1, x1 + x1))\n";
    let prog = runnable(text, 3).expect("runs");
    let solved = prog.graph.solve().expect("solves");
    let out = CpuBackend::reference()
        .run_solved(&solved, &prog)
        .expect("runs");
    let y2 = prog
        .graph
        .tensor_ids()
        .find(|&t| prog.graph.name(t).ok() == Some("y2"))
        .expect("y2");
    let y3 = prog
        .graph
        .tensor_ids()
        .find(|&t| prog.graph.name(t).ok() == Some("y3"))
        .expect("y3");
    assert_eq!(out[&y2][3], f32::NEG_INFINITY);
    assert_eq!(out[&y3][3], f32::NEG_INFINITY);
    let gpu = shape_tests::gpu::with_shared_wgpu("max_and_min_of_two_zeros", |gpu| {
        let mut reference = CpuBackend::reference();
        compare_backends(&prog, &mut [&mut reference, gpu], Tolerance::EXACT)
            .map_err(|d| d.to_string())
    });
    if let Some(Err(d)) = gpu {
        panic!("wgpu disagrees: {d}");
    }
}
