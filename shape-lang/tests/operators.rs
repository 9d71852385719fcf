//! The program language's infix operators come from the registry: an
//! operation that declares one is parsed, at the precedence it gives,
//! without a change to the parser; and the built-in operators group as
//! their precedence says (checked against a printer written from the
//! rules alone, not against the parser).

use std::sync::Arc;

use proptest::prelude::*;
use shape_core::kernel::BinaryOp;
use shape_graph::ops::Binary;
use shape_graph::{OpEntry, Operator, Precedence, Registry};
use shape_lang::compile::compile_with;
use shape_lang::syntax::{parse, parse_with, Expr, ExprKind, Statement};
use shape_run::{HostTensor, Inputs, RunGraph, RunOptions};

/// The expression of the program's last statement.
fn last_expr(program: &shape_lang::syntax::Program) -> &Expr {
    match program.statements.last() {
        Some(Statement::Assign { expr, .. }) => expr,
        other => panic!("not an assignment: {other:?}"),
    }
}

/// The expression with every operation in parentheses.
fn grouped(e: &Expr) -> String {
    match &e.kind {
        ExprKind::Name(n) => n.clone(),
        ExprKind::Number(v) => v.to_string(),
        ExprKind::Neg(x) => format!("(-{})", grouped(x)),
        ExprKind::Binary { op, lhs, rhs } => {
            format!("({} {} {})", grouped(lhs), op.symbol(), grouped(rhs))
        }
        ExprKind::Call { func, .. } => format!("{}(..)", func.text),
    }
}

/// The built-in registry with `maximum` written `^^`, binding tighter
/// than `*`, and `minimum` written `**` at the level of `+` (a symbol
/// that starts with the built-in `*`).
fn extended() -> Arc<Registry> {
    let mut r = (*Registry::builtin()).clone();
    let tight = Precedence(Precedence::PRODUCT.0 + 5);
    r.register(
        OpEntry::fixed("maximum", "max(a, b)", Arc::new(Binary(BinaryOp::Max)))
            .with_operator(Operator::Infix("^^", tight)),
    )
    .unwrap();
    r.register(
        OpEntry::fixed("minimum", "min(a, b)", Arc::new(Binary(BinaryOp::Min)))
            .with_operator(Operator::Infix("**", Precedence::SUM)),
    )
    .unwrap();
    Arc::new(r)
}

#[test]
fn an_operator_a_registry_declares_is_parsed_at_its_precedence() {
    let registry = extended();
    let text = "input a: 3\ninput b: 3\ninput c: 3\ny = a * b ^^ c ** a - c\n";
    let program = parse_with(text, &registry).unwrap();
    assert_eq!(grouped(last_expr(&program)), "(((a * (b ^^ c)) ** a) - c)");
    // Without the registry's operators the text is a syntax error that
    // lists the operators there are.
    let e = parse(text).unwrap_err();
    assert!(e.expected.contains("`+ - * / @`"), "{e}");

    // Compiled with the same registry, it runs: checked against a plain
    // closure of the intended grouping.
    let compiled = compile_with(&program, registry).unwrap();
    let solved = compiled.solve().unwrap();
    let (a, b, c) = (
        [1.0f32, -2.0, 3.0],
        [0.5f32, 4.0, -1.0],
        [2.0f32, -3.0, 0.25],
    );
    let mut inputs = Inputs::new();
    for (name, values) in [("a", a), ("b", b), ("c", c)] {
        let t = compiled.tensor(name).unwrap();
        inputs.insert(t, HostTensor::new(vec![3], values.to_vec()).unwrap());
    }
    let y = compiled.tensor("y").unwrap();
    let out = solved
        .run(
            &mut backend_cpu::CpuBackend::new(),
            inputs,
            &[y],
            &RunOptions::default(),
        )
        .unwrap();
    let expected: Vec<f32> = (0..3)
        .map(|i| (a[i] * b[i].max(c[i])).min(a[i]) - c[i])
        .collect();
    assert_eq!(out.get(y).unwrap().values(), expected.as_slice());
}

/// A random expression over names and the built-in infix operators.
#[derive(Clone, Debug)]
enum Tree {
    Leaf(&'static str),
    Op(&'static str, Box<Tree>, Box<Tree>),
}

fn tree() -> impl Strategy<Value = Tree> {
    let symbols: Vec<&'static str> = Registry::builtin()
        .infix_operators()
        .iter()
        .map(|(s, _)| *s)
        .collect();
    let leaf = prop::sample::select(vec!["a", "b", "c", "d"]).prop_map(Tree::Leaf);
    leaf.prop_recursive(5, 32, 2, move |inner| {
        (prop::sample::select(symbols.clone()), inner.clone(), inner)
            .prop_map(|(s, l, r)| Tree::Op(s, Box::new(l), Box::new(r)))
    })
}

/// The tree with every operation in parentheses (what `grouped` prints).
fn full(t: &Tree) -> String {
    match t {
        Tree::Leaf(n) => n.to_string(),
        Tree::Op(s, l, r) => format!("({} {s} {})", full(l), full(r)),
    }
}

/// The tree with only the parentheses the rules need: a left operand in
/// parentheses when it binds looser than its operator, a right operand
/// when it binds no tighter (operators of one level group to the left).
fn minimal(t: &Tree, level: &dyn Fn(&str) -> Precedence) -> String {
    match t {
        Tree::Leaf(n) => n.to_string(),
        Tree::Op(s, l, r) => {
            let p = level(s);
            let side = |child: &Tree, needs: &dyn Fn(Precedence) -> bool| match child {
                Tree::Op(cs, ..) if needs(level(cs)) => format!("({})", minimal(child, level)),
                _ => minimal(child, level),
            };
            format!("{} {s} {}", side(l, &|c| c < p), side(r, &|c| c <= p))
        }
    }
}

proptest! {
    #[test]
    fn operators_group_as_their_precedence_says(t in tree()) {
        let registry = Registry::builtin();
        let levels = registry.infix_operators();
        let level = |s: &str| levels.iter().find(|(x, _)| *x == s).map(|&(_, p)| p).unwrap();
        let text = format!("y = {}\n", minimal(&t, &level));
        let program = parse(&text).unwrap();
        prop_assert_eq!(grouped(last_expr(&program)), full(&t), "{}", text);
    }
}

#[test]
fn operators_the_language_cannot_read_are_refused_when_registered() {
    let entry = |symbol| {
        OpEntry::fixed("m", "max", Arc::new(Binary(BinaryOp::Max)))
            .with_operator(Operator::Infix(symbol, Precedence::SUM))
    };
    for bad in ["", "+", "a+", "=>", "(", "<>x", ".."] {
        let mut r = (*Registry::builtin()).clone();
        let e = r.register(entry(bad)).unwrap_err();
        assert_eq!(e.kind(), "invalid_operator", "{bad:?}: {e}");
    }
    // `+` is `add`'s already, whatever the precedence asked.
    let mut r = (*Registry::builtin()).clone();
    let e = r.register(entry("+")).unwrap_err();
    assert!(e.to_string().contains("`add`"), "{e}");
    assert_eq!(
        r.by_operator(Operator::Infix("+", Precedence(3)))
            .map(|e| e.name()),
        Some("add")
    );
    r.register(entry("<>")).unwrap();
}
