//! A normal form for size expressions, computed in one pass without an
//! e-graph: a polynomial with integer coefficients over *atoms* (symbols,
//! and floor divisions, remainders and maxima that do not fold).
//!
//! Two expressions with the same normal form are equal for every value of
//! their symbols, so most equalities are decided here and the e-graph is
//! left the few this cannot show. The form also keeps chains short: a
//! chain of N valid convolutions over `b` is `b-N`, not `b-1-1-…-1`, and
//! strided layers fold their divisions, `((b-3)/2+1-3)/2+1` being
//! `(b-7)/4+1`, so inference over a chain stays linear in its length.
//!
//! The rules, each exact for all integers (floor division by a positive
//! constant `c`):
//! - sums, differences and products expand and collect like terms;
//! - `(c*Q + r) / c` is `Q + r/c` and `(c*Q + r) % c` is `r % c` for a
//!   number `r`;
//! - `(A/c + e) / t` is `(A + e*c) / (c*t)` for numbers `e` and `t > 0`;
//! - `max` of two numbers is the larger, of two equal forms either one.
//!
//! Where a coefficient would overflow, or a product would expand past
//! [`MAX_TERMS`] terms, there is no normal form (`None`) and the caller
//! keeps the expression as it was.

use std::collections::BTreeMap;

use egg::{Id, Symbol};
use shape_core::size::{Sym, SymExpr};

/// The most terms a normal form may have (a product of long sums expands
/// fast; past this the expression is kept as it was).
pub const MAX_TERMS: usize = 64;

/// A factor that is not a number: a symbol, or an operation that does not
/// fold, over normal forms.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Atom {
    Var(String),
    Div(Box<Poly>, Box<Poly>),
    Mod(Box<Poly>, Box<Poly>),
    Max(Box<Poly>, Box<Poly>),
}

/// A product of atoms, sorted (the empty product is the constant term).
type Monomial = Vec<Atom>;

/// A polynomial: each monomial with its non-zero coefficient.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Poly(BTreeMap<Monomial, i64>);

impl Poly {
    fn constant(n: i64) -> Poly {
        let mut p = Poly::default();
        if n != 0 {
            p.0.insert(Vec::new(), n);
        }
        p
    }

    fn atom(a: Atom) -> Poly {
        let mut p = Poly::default();
        p.0.insert(vec![a], 1);
        p
    }

    /// The number this is, when it has no atoms.
    fn as_constant(&self) -> Option<i64> {
        match self.0.len() {
            0 => Some(0),
            1 => self.0.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// The constant term.
    fn constant_term(&self) -> i64 {
        self.0.get(&Vec::new()).copied().unwrap_or(0)
    }

    /// This without its constant term.
    fn without_constant(&self) -> Poly {
        let mut p = self.clone();
        p.0.remove(&Vec::new());
        p
    }

    fn add_term(&mut self, m: Monomial, c: i64) -> Option<()> {
        let entry = self.0.entry(m).or_insert(0);
        *entry = entry.checked_add(c)?;
        if *entry == 0 {
            self.0.retain(|_, c| *c != 0);
        }
        (self.0.len() <= MAX_TERMS).then_some(())
    }

    fn plus(&self, other: &Poly, sign: i64) -> Option<Poly> {
        let mut p = self.clone();
        for (m, c) in &other.0 {
            p.add_term(m.clone(), c.checked_mul(sign)?)?;
        }
        Some(p)
    }

    fn times(&self, other: &Poly) -> Option<Poly> {
        let mut p = Poly::default();
        for (ma, ca) in &self.0 {
            for (mb, cb) in &other.0 {
                let mut m = ma.clone();
                m.extend(mb.iter().cloned());
                m.sort();
                p.add_term(m, ca.checked_mul(*cb)?)?;
            }
        }
        Some(p)
    }

    /// Whether every coefficient but the constant term's is a multiple of
    /// `c`.
    fn atoms_divisible_by(&self, c: i64) -> bool {
        self.0
            .iter()
            .all(|(m, k)| m.is_empty() || k.checked_rem(c) == Some(0))
    }

    /// Each coefficient but the constant term's divided by `c` (which
    /// divides them), without the constant term.
    fn atoms_over(&self, c: i64) -> Poly {
        Poly(
            self.0
                .iter()
                .filter(|(m, _)| !m.is_empty())
                .map(|(m, k)| (m.clone(), k / c))
                .collect(),
        )
    }

    /// `self / d`, floor division.
    fn divided(&self, d: &Poly) -> Option<Poly> {
        let Some(c) = d.as_constant().filter(|c| *c > 0) else {
            return Some(Poly::atom(Atom::Div(
                Box::new(self.clone()),
                Box::new(d.clone()),
            )));
        };
        if c == 1 {
            return Some(self.clone());
        }
        let r = self.constant_term();
        if self.atoms_divisible_by(c) {
            // (c*Q + r) / c = Q + floor(r / c).
            return self.atoms_over(c).plus(&Poly::constant(r.div_euclid(c)), 1);
        }
        // (A/c1 + e) / c = (A + e*c1) / (c1*c).
        let rest = self.without_constant();
        if let Some((m, 1)) = rest.0.iter().next().filter(|_| rest.0.len() == 1) {
            if let [Atom::Div(a, c1)] = m.as_slice() {
                if let Some(c1) = c1.as_constant().filter(|c1| *c1 > 0) {
                    if let (Some(shift), Some(cc)) = (r.checked_mul(c1), c1.checked_mul(c)) {
                        let inner = a.plus(&Poly::constant(shift), 1)?;
                        return inner.divided(&Poly::constant(cc));
                    }
                }
            }
        }
        Some(Poly::atom(Atom::Div(
            Box::new(self.clone()),
            Box::new(d.clone()),
        )))
    }

    /// `self % d`.
    fn remainder(&self, d: &Poly) -> Option<Poly> {
        if let Some(c) = d.as_constant().filter(|c| *c > 0) {
            if c == 1 {
                return Some(Poly::default());
            }
            if self.atoms_divisible_by(c) {
                return Some(Poly::constant(self.constant_term().rem_euclid(c)));
            }
        }
        Some(Poly::atom(Atom::Mod(
            Box::new(self.clone()),
            Box::new(d.clone()),
        )))
    }

    fn max(&self, other: &Poly) -> Option<Poly> {
        if let (Some(a), Some(b)) = (self.as_constant(), other.as_constant()) {
            return Some(Poly::constant(a.max(b)));
        }
        if self == other {
            return Some(self.clone());
        }
        let (a, b) = if self <= other {
            (self, other)
        } else {
            (other, self)
        };
        Some(Poly::atom(Atom::Max(
            Box::new(a.clone()),
            Box::new(b.clone()),
        )))
    }
}

/// `e` as a polynomial, or `None` where a coefficient overflows or a
/// product expands too far.
fn poly_of(e: &SymExpr) -> Option<Poly> {
    let nodes = e.as_ref();
    let mut polys: Vec<Poly> = Vec::with_capacity(nodes.len());
    for node in nodes {
        let p = |id: &Id| &polys[usize::from(*id)];
        let next = match node {
            Sym::Num(n) => Poly::constant(*n),
            Sym::Var(s) => Poly::atom(Atom::Var(s.as_str().to_string())),
            Sym::Add([a, b]) => p(a).plus(p(b), 1)?,
            Sym::Sub([a, b]) => p(a).plus(p(b), -1)?,
            Sym::Mul([a, b]) => p(a).times(p(b))?,
            Sym::Div([a, b]) => p(a).divided(p(b))?,
            Sym::Mod([a, b]) => p(a).remainder(p(b))?,
            Sym::Max([a, b]) => p(a).max(p(b))?,
        };
        polys.push(next);
    }
    polys.pop()
}

/// The normal form of `e`, or `None` where a coefficient overflows or a
/// product expands too far.
pub fn normal_form(e: &SymExpr) -> Option<SymExpr> {
    let mut out = SymExpr::default();
    write_poly(&mut out, &poly_of(e)?);
    Some(out)
}

/// Writes `p` into `out` and returns its root: the terms of highest
/// degree first, those with positive coefficients before those subtracted,
/// the number last (`2*b*s + b - 3`).
fn write_poly(out: &mut SymExpr, p: &Poly) -> Id {
    let mut terms: Vec<(&Monomial, i64)> = p.0.iter().map(|(m, c)| (m, *c)).collect();
    // Constant last; higher degree first; then the monomials' order.
    terms.sort_by(|(a, _), (b, _)| {
        (a.is_empty(), std::cmp::Reverse(a.len()), *a).cmp(&(
            b.is_empty(),
            std::cmp::Reverse(b.len()),
            *b,
        ))
    });
    let (plus, minus): (Vec<_>, Vec<_>) = terms.into_iter().partition(|(_, c)| *c > 0);
    let mut root: Option<Id> = None;
    for (m, c) in plus {
        let t = write_term(out, m, c);
        root = Some(match root {
            None => t,
            Some(r) => out.add(Sym::Add([r, t])),
        });
    }
    let mut root = match root {
        Some(r) => r,
        None => out.add(Sym::Num(0)),
    };
    for (m, c) in minus {
        // A coefficient of i64::MIN has no positive twin: keep it added.
        match c.checked_neg() {
            Some(pos) => {
                let t = write_term(out, m, pos);
                root = out.add(Sym::Sub([root, t]));
            }
            None => {
                let t = write_term(out, m, c);
                root = out.add(Sym::Add([root, t]));
            }
        }
    }
    root
}

/// `c * m`, written `m` when `c` is 1 and `c` alone for the constant term.
fn write_term(out: &mut SymExpr, m: &Monomial, c: i64) -> Id {
    let mut root: Option<Id> = (c != 1 || m.is_empty()).then(|| out.add(Sym::Num(c)));
    for atom in m {
        let a = write_atom(out, atom);
        root = Some(match root {
            None => a,
            Some(r) => out.add(Sym::Mul([r, a])),
        });
    }
    root.unwrap_or_else(|| out.add(Sym::Num(c)))
}

fn write_atom(out: &mut SymExpr, atom: &Atom) -> Id {
    match atom {
        Atom::Var(name) => out.add(Sym::Var(Symbol::from(name.as_str()))),
        Atom::Div(a, b) | Atom::Mod(a, b) | Atom::Max(a, b) => {
            let (x, y) = (write_poly(out, a), write_poly(out, b));
            out.add(match atom {
                Atom::Div(..) => Sym::Div([x, y]),
                Atom::Mod(..) => Sym::Mod([x, y]),
                _ => Sym::Max([x, y]),
            })
        }
    }
}

/// The form `X + c` of `e`: its normal form without the constant term,
/// and that term (`b-7` is `(b, -7)`); `None` without a normal form or
/// when `e` is a number.
pub fn split_constant(e: &SymExpr) -> Option<(SymExpr, i64)> {
    let p = poly_of(e)?;
    let rest = p.without_constant();
    if rest.0.is_empty() {
        return None;
    }
    let mut out = SymExpr::default();
    write_poly(&mut out, &rest);
    Some((out, p.constant_term()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::symbolic::{eval, parse};

    fn nf(text: &str) -> String {
        let e = parse(text).unwrap();
        shape_core::SymSize::from_expr(normal_form(&e).unwrap()).to_string()
    }

    #[test]
    fn chains_of_constants_fold() {
        assert_eq!(nf("(- (- (- b 1) 1) 1)"), "b-3");
        assert_eq!(nf("(+ (- b 3) 5)"), "b+2");
        assert_eq!(nf("(- (+ b 3) 3)"), "b");
        assert_eq!(nf("(* s b)"), "b*s");
        assert_eq!(nf("(- 3 b)"), "3-b");
        assert_eq!(nf("(+ (* 2 b) (* b 2))"), "4*b");
    }

    #[test]
    fn strided_divisions_fold() {
        // ((b-3)/2+1-3)/2+1 = (b-7)/4+1.
        assert_eq!(nf("(+ (/ (- (+ (/ (- b 3) 2) 1) 3) 2) 1)"), "(b-7)/4+1");
        assert_eq!(nf("(/ (+ (* 4 b) 6) 2)"), "2*b+3");
        assert_eq!(nf("(% (+ (* 4 b) 7) 2)"), "1");
        assert_eq!(nf("(max b b)"), "b");
        assert_eq!(nf("(max 3 (+ 1 1))"), "3");
    }

    /// Normal forms evaluate as the expressions they come from, on random
    /// expressions and values (floor division, as sizes use it).
    #[test]
    fn normal_forms_keep_their_values() {
        use proptest::prelude::*;
        use proptest::test_runner::TestRunner;
        let leaf = prop_oneof![
            (0i64..9).prop_map(|n| n.to_string()),
            prop_oneof![Just("a"), Just("b"), Just("c")].prop_map(str::to_string),
        ];
        let expr = leaf.prop_recursive(5, 40, 2, |inner| {
            (
                prop_oneof![
                    Just("+"),
                    Just("-"),
                    Just("*"),
                    Just("/"),
                    Just("%"),
                    Just("max")
                ],
                inner.clone(),
                inner,
            )
                .prop_map(|(op, a, b)| format!("({op} {a} {b})"))
        });
        let mut runner = TestRunner::default();
        runner
            .run(&(expr, 1i64..20, 1i64..20, 1i64..20), |(text, a, b, c)| {
                let e = parse(&text).unwrap();
                let value = |s: &str| match s {
                    "a" => a,
                    "b" => b,
                    _ => c,
                };
                // Division by a value that is 0 or less has no value: such
                // expressions say nothing about the rules.
                if let (Some(before), Some(n)) = (eval(&e, &value), normal_form(&e)) {
                    if let Some(after) = eval(&n, &value) {
                        prop_assert_eq!(before, after, "{} became {}", text, n);
                    }
                }
                Ok(())
            })
            .unwrap();
    }
}
