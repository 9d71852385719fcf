//! Symbolic size and index arithmetic with e-graphs (`egg`).
//!
//! Expressions over positive integer symbols (sizes, loop iterators) with
//! `+`, `*`, floor division `/` and remainder `%`. Structure decides most
//! questions; where it cannot (`h*w` against `w*h`, a product divided by one
//! of its factors, index terms that multiply a zero), an e-graph saturated
//! with the rules in [`RULES`] does. Every rule holds for all positive
//! integers under floor division; a property test evaluates both sides of
//! every rule on random small positive values.
//!
//! ```
//! use shape_solver::symbolic::{parse, Simplifier};
//! let mut s = Simplifier::new();
//! assert!(s.equivalent(&parse("(* h w)").unwrap(), &parse("(* w h)").unwrap()));
//! let e = s.simplify(&parse("(+ (* i0 (* 4 0)) (/ (* i1 n) n))").unwrap());
//! assert_eq!(e.to_string(), "i1");
//! ```

use egg::{
    Analysis, CostFunction, DidMerge, EGraph, Extractor, Id, Language, Pattern, Rewrite, Runner,
};

pub use shape_core::size::{Sym, SymExpr};

mod normal;
pub use normal::{normal_form, split_constant};
use shape_core::{Size, SymSize};

/// The symbol for a name.
pub fn var(name: &str) -> Sym {
    Sym::Var(egg::Symbol::from(name))
}

/// Parses an expression in prefix notation, such as `(+ (* i0 4) i1)`.
pub fn parse(text: &str) -> Result<SymExpr, String> {
    text.parse().map_err(|e| format!("{e}"))
}

/// Constant folding: an e-class that holds a constant gets its numeral.
#[derive(Default, Clone, Copy, Debug)]
pub struct ConstantFold;

impl Analysis<Sym> for ConstantFold {
    type Data = Option<i64>;

    fn make(egraph: &mut EGraph<Sym, Self>, enode: &Sym, _id: Id) -> Self::Data {
        let c = |i: &Id| egraph[*i].data;
        match enode {
            Sym::Num(n) => Some(*n),
            Sym::Add([a, b]) => c(a)?.checked_add(c(b)?),
            Sym::Sub([a, b]) => c(a)?.checked_sub(c(b)?),
            Sym::Mul([a, b]) => c(a)?.checked_mul(c(b)?),
            Sym::Div([a, b]) => {
                let (x, y) = (c(a)?, c(b)?);
                (y > 0).then(|| x.div_euclid(y))
            }
            Sym::Mod([a, b]) => {
                let (x, y) = (c(a)?, c(b)?);
                (y > 0).then(|| x.rem_euclid(y))
            }
            Sym::Max([a, b]) => Some(c(a)?.max(c(b)?)),
            Sym::Var(_) => None,
        }
    }

    fn merge(&mut self, to: &mut Self::Data, from: Self::Data) -> DidMerge {
        egg::merge_option(to, from, |a, b| {
            debug_assert_eq!(*a, b, "a class folded to two constants");
            DidMerge(false, false)
        })
    }

    fn modify(egraph: &mut EGraph<Sym, Self>, id: Id) {
        if let Some(n) = egraph[id].data {
            let num = egraph.add(Sym::Num(n));
            egraph.union(id, num);
        }
    }
}

/// The rewrite rules: `(name, left side, right side)`. Each holds for all
/// positive integer values of its variables, with `/` and `%` taken as
/// floor division and its remainder.
pub const RULES: &[(&str, &str, &str)] = &[
    ("add-comm", "(+ ?a ?b)", "(+ ?b ?a)"),
    ("mul-comm", "(* ?a ?b)", "(* ?b ?a)"),
    ("add-assoc", "(+ (+ ?a ?b) ?c)", "(+ ?a (+ ?b ?c))"),
    ("mul-assoc", "(* (* ?a ?b) ?c)", "(* ?a (* ?b ?c))"),
    ("add-zero", "(+ ?a 0)", "?a"),
    ("mul-one", "(* ?a 1)", "?a"),
    ("mul-zero", "(* ?a 0)", "0"),
    ("distribute", "(* ?a (+ ?b ?c))", "(+ (* ?a ?b) (* ?a ?c))"),
    ("factor", "(+ (* ?a ?b) (* ?a ?c))", "(* ?a (+ ?b ?c))"),
    ("div-one", "(/ ?a 1)", "?a"),
    ("mod-one", "(% ?a 1)", "0"),
    ("div-self", "(/ ?a ?a)", "1"),
    ("mul-div-cancel", "(/ (* ?a ?b) ?b)", "?a"),
    ("mul-mod-zero", "(% (* ?a ?b) ?b)", "0"),
    ("div-div", "(/ (/ ?a ?b) ?c)", "(/ ?a (* ?b ?c))"),
    ("add-mul-div", "(/ (+ ?a (* ?b ?c)) ?c)", "(+ (/ ?a ?c) ?b)"),
    ("add-mul-mod", "(% (+ ?a (* ?b ?c)) ?c)", "(% ?a ?c)"),
    ("sub-self", "(- ?a ?a)", "0"),
    ("sub-zero", "(- ?a 0)", "?a"),
    ("add-sub", "(- (+ ?a ?b) ?b)", "?a"),
    ("sub-add", "(+ (- ?a ?b) ?b)", "?a"),
    ("max-comm", "(max ?a ?b)", "(max ?b ?a)"),
    ("max-assoc", "(max (max ?a ?b) ?c)", "(max ?a (max ?b ?c))"),
    ("max-self", "(max ?a ?a)", "?a"),
    ("max-one", "(max ?a 1)", "?a"),
];

fn rewrites() -> Vec<Rewrite<Sym, ConstantFold>> {
    RULES
        .iter()
        .map(|(name, l, r)| {
            let l: Pattern<Sym> = l.parse().expect("rule patterns parse");
            let r: Pattern<Sym> = r.parse().expect("rule patterns parse");
            Rewrite::new(*name, l, r).expect("rules are well-formed")
        })
        .collect()
}

/// Expression size, with division and remainder made expensive so the
/// simplest form avoids them.
struct IndexCost;

impl CostFunction<Sym> for IndexCost {
    type Cost = usize;
    fn cost<C: FnMut(Id) -> usize>(&mut self, enode: &Sym, mut costs: C) -> usize {
        let own = match enode {
            Sym::Num(_) | Sym::Var(_) | Sym::Add(_) | Sym::Sub(_) | Sym::Max(_) => 1,
            Sym::Mul(_) => 2,
            Sym::Div(_) | Sym::Mod(_) => 16,
        };
        enode.fold(own, |sum, id| sum + costs(id))
    }
}

/// One e-graph reused across queries (one per solve or per lowering), so
/// that facts learned for one expression serve the next.
pub struct Simplifier {
    egraph: EGraph<Sym, ConstantFold>,
    rules: Vec<Rewrite<Sym, ConstantFold>>,
}

impl Default for Simplifier {
    fn default() -> Self {
        Simplifier::new()
    }
}

impl Simplifier {
    /// An empty e-graph with the rules of [`RULES`].
    pub fn new() -> Simplifier {
        Simplifier {
            egraph: EGraph::default(),
            rules: rewrites(),
        }
    }

    fn saturate(&mut self) {
        let egraph = std::mem::take(&mut self.egraph);
        // Commutativity, associativity and distribution grow e-graphs fast:
        // sizes and index expressions are small, so tight limits cost no
        // answers in practice and keep every query quick.
        let runner = Runner::default()
            .with_egraph(egraph)
            .with_iter_limit(8)
            .with_node_limit(2_000)
            .with_time_limit(std::time::Duration::from_millis(100))
            .run(&self.rules);
        self.egraph = runner.egraph;
    }

    /// The cheapest expression equal to `e`.
    pub fn simplify(&mut self, e: &SymExpr) -> SymExpr {
        let id = self.egraph.add_expr(e);
        self.saturate();
        let id = self.egraph.find(id);
        Extractor::new(&self.egraph, IndexCost).find_best(id).1
    }

    /// Whether `a` and `b` are equal for all positive values of their
    /// symbols, as far as the rules can show. Structural equality is
    /// checked first; the e-graph only when that fails.
    pub fn equivalent(&mut self, a: &SymExpr, b: &SymExpr) -> bool {
        if a == b {
            return true;
        }
        let (x, y) = (self.egraph.add_expr(a), self.egraph.add_expr(b));
        if self.egraph.find(x) == self.egraph.find(y) {
            return true;
        }
        self.saturate();
        self.egraph.find(x) == self.egraph.find(y)
    }
}

/// The value of an expression for the given symbol values, or `None` on
/// overflow or division by a non-positive number.
pub fn eval(e: &SymExpr, value: &impl Fn(&str) -> i64) -> Option<i64> {
    let nodes = e.as_ref();
    let mut vals: Vec<i64> = Vec::with_capacity(nodes.len());
    for node in nodes {
        let v = |id: &Id| vals[usize::from(*id)];
        let x = match node {
            Sym::Num(n) => *n,
            Sym::Var(s) => value(s.as_str()),
            Sym::Add([a, b]) => v(a).checked_add(v(b))?,
            Sym::Sub([a, b]) => v(a).checked_sub(v(b))?,
            Sym::Mul([a, b]) => v(a).checked_mul(v(b))?,
            Sym::Div([a, b]) => {
                let d = v(b);
                if d <= 0 {
                    return None;
                }
                v(a).div_euclid(d)
            }
            Sym::Mod([a, b]) => {
                let d = v(b);
                if d <= 0 {
                    return None;
                }
                v(a).rem_euclid(d)
            }
            Sym::Max([a, b]) => v(a).max(v(b)),
        };
        vals.push(x);
    }
    vals.last().copied()
}

/// A size as an expression: a number, or the run-time size's own.
pub(crate) fn size_expr(size: &Size) -> SymExpr {
    match size {
        Size::Symbolic(s) => s.expr().clone(),
        Size::Static(n) => {
            let mut e = SymExpr::default();
            e.add(Sym::Num(i64::try_from(*n).unwrap_or(i64::MAX)));
            e
        }
        // The solver refuses arithmetic on ragged sizes before any reaches
        // an expression; one built by hand is no number (`var`, a symbol
        // no binding names, so it never evaluates).
        Size::Ragged => {
            let mut e = SymExpr::default();
            e.add(Sym::Var(egg::Symbol::from("var")));
            e
        }
    }
}

/// The size an expression stands for: a number is a static size.
fn expr_size(e: SymExpr) -> Option<Size> {
    match e.as_ref() {
        [Sym::Num(n)] => u64::try_from(*n).ok().map(Size::Static),
        _ => Some(Size::Symbolic(SymSize::from_expr(e))),
    }
}

/// `op` over `sizes` (at least one), simplified by the e-graph: `b*s` for
/// a product of two run-time sizes, `b + 3` for a sum; `None` on
/// overflow of the numbers.
fn fold_sizes(sizes: &[&Size], op: fn([Id; 2]) -> Sym) -> Option<Size> {
    let mut e = SymExpr::default();
    let mut acc: Option<Id> = None;
    for size in sizes {
        let offset = e.as_ref().len();
        let mut last = Id::from(0);
        for node in size_expr(size).as_ref() {
            let node = node
                .clone()
                .map_children(|c| Id::from(usize::from(c) + offset));
            last = e.add(node);
        }
        acc = Some(match acc {
            None => last,
            Some(a) => e.add(op([a, last])),
        });
    }
    acc?;
    expr_size(simplest(&e))
}

/// The product of `sizes`, simplified (`b*s`).
pub(crate) fn product(sizes: &[&Size]) -> Option<Size> {
    if sizes.is_empty() {
        return Some(Size::Static(1));
    }
    fold_sizes(sizes, Sym::Mul)
}

/// The sum of `sizes`, simplified (`b+3`).
pub(crate) fn sum(sizes: &[&Size]) -> Option<Size> {
    if sizes.is_empty() {
        return Some(Size::Static(0));
    }
    fold_sizes(sizes, Sym::Add)
}

/// `total / by` when the e-graph shows that it divides exactly: its
/// simplest form has no division or remainder left (`b*s / s` is `b`;
/// `12 / b` is not a size inference can name).
pub(crate) fn exact_quotient(total: &Size, by: &Size) -> Option<Size> {
    let q = fold_sizes(&[total, by], Sym::Div)?;
    match &q {
        Size::Static(_) => Some(q),
        Size::Ragged => None,
        Size::Symbolic(s) => s
            .expr()
            .as_ref()
            .iter()
            .all(|n| !matches!(n, Sym::Div(_) | Sym::Mod(_)))
            .then_some(q),
    }
}

/// `size` in its simplest form (a number when it folds to one): its
/// normal form ([`normal_form`]), which the e-graph only sees when a
/// maximum is left in it (the one operation whose rules need sizes to be
/// positive).
pub(crate) fn simplified(size: &SymSize) -> Size {
    expr_size(simplest(size.expr())).unwrap_or(Size::Symbolic(size.clone()))
}

/// The simplest form of `e`: its normal form, given to the e-graph only
/// where a maximum or a division by a symbol is left in it (whose rules
/// need sizes to be positive, which the normal form does not assume).
fn simplest(e: &SymExpr) -> SymExpr {
    let Some(n) = normal_form(e) else {
        return Simplifier::new().simplify(e);
    };
    let nodes = n.as_ref();
    let by_symbol = |id: &Id| !matches!(nodes[usize::from(*id)], Sym::Num(_));
    let needs_rules = nodes.iter().any(|x| match x {
        Sym::Max(_) => true,
        Sym::Div([_, d]) | Sym::Mod([_, d]) => by_symbol(d),
        _ => false,
    });
    if needs_rules {
        Simplifier::new().simplify(&n)
    } else {
        n
    }
}

/// Whether two sizes are equal for every value of their symbols: their
/// normal forms are, or else the e-graph's rules show it.
pub(crate) fn sizes_equal(a: &Size, b: &Size) -> bool {
    if a == b {
        return true;
    }
    let (x, y) = (size_expr(a), size_expr(b));
    let (nx, ny) = (normal_form(&x), normal_form(&y));
    if nx.is_some() && nx == ny {
        return true;
    }
    Simplifier::new().equivalent(&nx.unwrap_or(x), &ny.unwrap_or(y))
}
