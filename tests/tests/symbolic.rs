//! Symbolic arithmetic: every rewrite rule is sound for positive integers
//! under floor division, and index expressions come out simplified.

use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use shape_graph::Graph;
use shape_solver::symbolic::{eval, parse, Simplifier, SymExpr, RULES};

/// A rule side as an expression: pattern variables `?a` become symbols.
fn side(pattern: &str) -> shape_solver::symbolic::SymExpr {
    parse(&pattern.replace('?', "")).expect("rule sides parse")
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: std::env::var("PROPTEST_CASES").ok().and_then(|c| c.parse().ok()).unwrap_or(256),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct("../proptest-regressions/symbolic.txt"))),
        ..ProptestConfig::default()
    })]

    /// Both sides of every rule agree on random small positive values.
    #[test]
    fn every_rule_is_sound(a in 1i64..50, b in 1i64..50, c in 1i64..50) {
        let value = |name: &str| match name { "a" => a, "b" => b, "c" => c, other => panic!("unexpected symbol {other}") };
        for (name, lhs, rhs) in RULES {
            let (l, r) = (eval(&side(lhs), &value), eval(&side(rhs), &value));
            prop_assert!(l.is_some(), "{name}: left side undefined");
            prop_assert_eq!(l, r, "rule {} with a={}, b={}, c={}", name, a, b, c);
        }
    }

    /// Simplification never changes an expression's value.
    #[test]
    fn simplification_keeps_values(x in 1i64..20, y in 1i64..20, n in 1i64..9) {
        let value = |name: &str| match name { "x" => x, "y" => y, "n" => n, _ => 1 };
        for (e, simple) in simplified() {
            prop_assert_eq!(eval(e, &value), eval(simple, &value), "{} became {}", e, simple);
        }
    }
}

/// A few expressions and their simplified forms, computed once: the forms
/// do not depend on the values the property test tries.
fn simplified() -> &'static [(SymExpr, SymExpr)] {
    static PAIRS: std::sync::OnceLock<Vec<(SymExpr, SymExpr)>> = std::sync::OnceLock::new();
    PAIRS.get_or_init(|| {
        let mut s = Simplifier::new();
        [
            "(+ (* x (* n 0)) (/ (* y n) n))",
            "(% (+ x (* y n)) n)",
            "(/ (/ (* x y) n) 1)",
            "(+ (* x n) (* x y))",
        ]
        .iter()
        .map(|t| {
            let e = parse(t).unwrap();
            let simple = s.simplify(&e);
            (e, simple)
        })
        .collect()
    })
}

#[test]
fn structure_first_then_the_e_graph() {
    let mut s = Simplifier::new();
    let hw = parse("(* h w)").unwrap();
    assert!(s.equivalent(&hw, &hw));
    assert!(s.equivalent(&hw, &parse("(* w h)").unwrap()));
    assert!(s.equivalent(
        &parse("(/ (* (* h w) c) c)").unwrap(),
        &parse("(* w h)").unwrap()
    ));
    assert!(!s.equivalent(&hw, &parse("(+ h w)").unwrap()));
    // Division is expensive, so the simplest form avoids it.
    let show = |e: shape_solver::symbolic::SymExpr| e.to_string();
    assert_eq!(
        show(s.simplify(&parse("(/ (* h w) w)").unwrap())),
        show(parse("h").unwrap())
    );
    assert_eq!(
        show(s.simplify(&parse("(% (+ i (* j 8)) 8)").unwrap())),
        show(parse("(% i 8)").unwrap())
    );
}

#[test]
fn index_expressions_of_representative_operations() {
    let mut g = Graph::new();
    let a = g.input("a", "4|2,3").unwrap();
    let b = g.input("b", "4|2,1").unwrap();
    let m = g.input("m", "3,3").unwrap();
    let w = g.input("w", "3->5").unwrap();
    let x = g.input("x", "4|3").unwrap();
    let ops = [
        ("add (broadcast)", g.add(a, b).unwrap()),
        ("compose", g.compose(w, x).unwrap()),
        ("diagonal", g.permute("ii=>i", m).unwrap()),
        ("batch slice", g.batch_slice(a).unwrap()),
    ];
    let s = g.solve().unwrap();
    let mut out = String::new();
    for (name, t) in ops {
        let exprs = s.index_expressions(g.producer(t).unwrap()).unwrap();
        let shown: Vec<String> = exprs.iter().map(|e| e.to_string()).collect();
        out.push_str(&format!("{name}:\n  out {}\n", shown[0]));
        for (i, e) in shown[1..].iter().enumerate() {
            out.push_str(&format!("  in{i} {e}\n"));
        }
    }
    insta::assert_snapshot!(out);
}
