//! Sizes known only at run time: named symbols (`b`) and expressions of
//! them (`b*s`, `b+3`), as the solver keeps them until sizes are bound.
//!
//! An expression is an [`egg`] `RecExpr` over [`Sym`], so the solver can
//! decide equalities with an e-graph (`shape_solver::symbolic`). Every
//! symbol stands for a size of at least 1.
//!
//! ```
//! use shape_core::size::SymSize;
//! let b = SymSize::symbol("b");
//! let bs = b.times(&SymSize::symbol("s"));
//! assert_eq!(bs.to_string(), "b*s");
//! assert_eq!(bs.eval(&|name: &str| Some(if name == "b" { 4 } else { 7 })), Ok(28));
//! assert_eq!(b.plus_static(3).to_string(), "b+3");
//! ```

use std::fmt;
use std::sync::Arc;

use egg::{Id, Language, RecExpr};

mod language {
    // The macro writes the variants; their meaning is documented on `Sym`.
    #![allow(missing_docs)]
    use egg::{define_language, Id, Symbol};

    define_language! {
        /// The language of symbolic sizes and indices: integer constants
        /// (`Num`), `+`, `-`, `*`, floor division `/`, its remainder `%`, the
        /// larger of two (`max`: two run-time sizes broadcast together), and
        /// symbols standing for positive integers (`Var`: sizes, loop
        /// iterators).
        pub enum Sym {
            Num(i64),
            "+" = Add([Id; 2]),
            "-" = Sub([Id; 2]),
            "*" = Mul([Id; 2]),
            "/" = Div([Id; 2]),
            "%" = Mod([Id; 2]),
            "max" = Max([Id; 2]),
            Var(Symbol),
        }
    }
}

pub use language::Sym;

/// A symbolic expression.
pub type SymExpr = RecExpr<Sym>;

/// A size known only at run time: a symbol or an expression of symbols.
///
/// Compared structurally (`b*s` and `s*b` differ here; the solver's
/// e-graph decides that they are equal).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SymSize(Arc<SymExpr>);

/// Why a symbolic size has no value for the sizes given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// A symbol the expression uses was not given a value.
    #[error("the run-time size `{0}` was not given")]
    Unbound(String),
    /// The value does not fit in 64 bits, or a division by 0.
    #[error("the size `{0}` overflows or divides by 0 for the sizes given")]
    Overflow(String),
}

impl SymSize {
    /// The run-time size called `name`.
    pub fn symbol(name: &str) -> SymSize {
        let mut e = SymExpr::default();
        e.add(Sym::Var(egg::Symbol::from(name)));
        SymSize(Arc::new(e))
    }

    /// A size from an expression (which should use at least one symbol:
    /// a constant is a static size).
    pub fn from_expr(e: SymExpr) -> SymSize {
        SymSize(Arc::new(e))
    }

    /// The expression.
    pub fn expr(&self) -> &SymExpr {
        &self.0
    }

    /// The symbol's name, when the size is one symbol.
    pub fn as_symbol(&self) -> Option<&str> {
        match self.0.as_ref().as_ref() {
            [Sym::Var(s)] => Some(s.as_str()),
            _ => None,
        }
    }

    /// The symbols the expression uses, each once, in order of first use.
    pub fn symbols(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for node in self.0.as_ref().as_ref() {
            if let Sym::Var(s) = node {
                if !out.contains(&s.as_str()) {
                    out.push(s.as_str());
                }
            }
        }
        out
    }

    fn combine(&self, other: &SymExpr, op: fn([Id; 2]) -> Sym) -> SymSize {
        let mut e = self.expr().clone();
        let a = Id::from(e.as_ref().len() - 1);
        let b = append(&mut e, other);
        e.add(op([a, b]));
        SymSize(Arc::new(e))
    }

    /// `self - n` (which must not go below 0 when evaluated: a guard
    /// makes sure of that where the solver builds one).
    pub fn minus_static(&self, n: u64) -> SymSize {
        self.combine(&constant(n), Sym::Sub)
    }

    /// `self * other`.
    pub fn times(&self, other: &SymSize) -> SymSize {
        self.combine(other.expr(), Sym::Mul)
    }

    /// `self * n`.
    pub fn times_static(&self, n: u64) -> SymSize {
        self.combine(&constant(n), Sym::Mul)
    }

    /// `self + other`.
    pub fn plus(&self, other: &SymSize) -> SymSize {
        self.combine(other.expr(), Sym::Add)
    }

    /// `self + n`.
    pub fn plus_static(&self, n: u64) -> SymSize {
        self.combine(&constant(n), Sym::Add)
    }

    /// The larger of `self` and `other`: the size two run-time sizes
    /// broadcast to (when one is 1 or both are equal).
    pub fn max(&self, other: &SymSize) -> SymSize {
        self.combine(other.expr(), Sym::Max)
    }

    /// `self / n`, floor division.
    pub fn divided_by_static(&self, n: u64) -> SymSize {
        self.combine(&constant(n), Sym::Div)
    }

    /// `self % n`.
    pub fn remainder_static(&self, n: u64) -> SymSize {
        self.combine(&constant(n), Sym::Mod)
    }

    /// `self / other`, floor division.
    #[deprecated(
        since = "0.1.0",
        note = "no user: sizes divide by numbers (`divided_by_static`)"
    )]
    pub fn divided_by(&self, other: &SymExpr) -> SymSize {
        self.combine(other, Sym::Div)
    }

    /// The value for the symbols' values given by `value`.
    pub fn eval(&self, value: &dyn Fn(&str) -> Option<u64>) -> Result<u64, EvalError> {
        let nodes = self.0.as_ref().as_ref();
        let mut vals: Vec<u64> = Vec::with_capacity(nodes.len());
        let overflow = || EvalError::Overflow(self.to_string());
        for node in nodes {
            let v = |id: &Id| vals[usize::from(*id)];
            let x = match node {
                Sym::Num(n) => u64::try_from(*n).map_err(|_| overflow())?,
                Sym::Var(s) => {
                    value(s.as_str()).ok_or_else(|| EvalError::Unbound(s.to_string()))?
                }
                Sym::Add([a, b]) => v(a).checked_add(v(b)).ok_or_else(overflow)?,
                Sym::Sub([a, b]) => v(a).checked_sub(v(b)).ok_or_else(overflow)?,
                Sym::Mul([a, b]) => v(a).checked_mul(v(b)).ok_or_else(overflow)?,
                Sym::Div([a, b]) => v(a).checked_div(v(b)).ok_or_else(overflow)?,
                Sym::Mod([a, b]) => v(a).checked_rem(v(b)).ok_or_else(overflow)?,
                Sym::Max([a, b]) => v(a).max(v(b)),
            };
            vals.push(x);
        }
        vals.last().copied().ok_or_else(overflow)
    }
}

fn constant(n: u64) -> SymExpr {
    let mut e = SymExpr::default();
    e.add(Sym::Num(i64::try_from(n).unwrap_or(i64::MAX)));
    e
}

/// Appends `other`'s nodes to `e`, returning the id of its root.
fn append(e: &mut SymExpr, other: &SymExpr) -> Id {
    let offset = e.as_ref().len();
    let mut last = Id::from(0);
    for node in other.as_ref() {
        let node = node
            .clone()
            .map_children(|c| Id::from(usize::from(c) + offset));
        last = e.add(node);
    }
    last
}

/// Binding strength, for printing with the fewest parentheses.
fn precedence(node: &Sym) -> u8 {
    match node {
        Sym::Add(_) | Sym::Sub(_) => 1,
        Sym::Mul(_) | Sym::Div(_) | Sym::Mod(_) => 2,
        Sym::Num(_) | Sym::Var(_) | Sym::Max(_) => 3,
    }
}

fn write_node(f: &mut fmt::Formatter<'_>, nodes: &[Sym], id: Id, outer: u8) -> fmt::Result {
    let node = &nodes[usize::from(id)];
    let own = precedence(node);
    if own < outer {
        f.write_str("(")?;
    }
    match node {
        Sym::Num(n) => write!(f, "{n}")?,
        Sym::Max([a, b]) => {
            f.write_str("max(")?;
            write_node(f, nodes, *a, 0)?;
            f.write_str(",")?;
            write_node(f, nodes, *b, 0)?;
            f.write_str(")")?;
        }
        Sym::Var(s) => f.write_str(s.as_str())?,
        Sym::Add([a, b]) | Sym::Sub([a, b]) => {
            write_node(f, nodes, *a, 1)?;
            f.write_str(if matches!(node, Sym::Add(_)) {
                "+"
            } else {
                "-"
            })?;
            write_node(f, nodes, *b, 2)?;
        }
        Sym::Mul([a, b]) | Sym::Div([a, b]) | Sym::Mod([a, b]) => {
            let op = match node {
                Sym::Mul(_) => "*",
                Sym::Div(_) => "/",
                _ => "%",
            };
            write_node(f, nodes, *a, 2)?;
            f.write_str(op)?;
            write_node(f, nodes, *b, 3)?;
        }
    }
    if own < outer {
        f.write_str(")")?;
    }
    Ok(())
}

impl fmt::Display for SymSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nodes = self.0.as_ref().as_ref();
        match nodes.len() {
            0 => f.write_str("0"),
            n => write_node(f, nodes, Id::from(n - 1), 0),
        }
    }
}

/// A dimension's size: static, or known only at run time.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Size {
    /// Known now (0 is an empty axis).
    Static(u64),
    /// Known once run-time sizes are bound.
    Symbolic(SymSize),
    /// A ragged (`var`) axis: its length differs from one position of
    /// the axes before it (in memory order) to the next, as DyND's var
    /// dims do. Known only from the data, row by row; never a number the
    /// solver computes with.
    Ragged,
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Size::Static(n) => write!(f, "{n}"),
            Size::Symbolic(s) => s.fmt(f),
            Size::Ragged => f.write_str("var"),
        }
    }
}
