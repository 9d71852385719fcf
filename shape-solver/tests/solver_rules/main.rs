//! Every rule of the constraint semantics (`docs/constraint-semantics.md`),
//! checked on small cases, one module per family of rules.
//!
//! Where a program can say it, a case is a program in the text language
//! with every inferred shape beside it ([`shape_lang::inference::infer`]
//! and an inline snapshot). Where the rule is about what holds before
//! finalization, about the order of constraints, or about the solver's API,
//! constraints go to a [`Solver`] directly.

mod api;
mod dims;
mod finalization;
mod operations;
mod rows;
mod sizes;
mod slices_and_counts;

use shape_core::{Dim, DimVar, KnownDim, Label, Row, RowVar};
use shape_solver::{Constraint, Origin, ShapeError, Solution, Solver, Why};

/// A known size.
pub fn k(n: u64) -> Dim {
    Dim::known(n).expect("a size")
}

/// A known size with a label.
pub fn kl(n: u64, label: &str) -> Dim {
    Dim::Known(
        KnownDim::of(n)
            .expect("a size")
            .with_label(Some(Label::new(label))),
    )
}

/// A dim variable as a dim.
pub fn v(d: DimVar) -> Dim {
    Dim::Var(d)
}

/// `[..r.., dims]`.
pub fn open<const N: usize>(r: RowVar, dims: [Dim; N]) -> Row {
    Row::open(r, dims.to_vec())
}

/// `[dims]`.
pub fn closed<const N: usize>(dims: [Dim; N]) -> Row {
    Row::closed(dims.to_vec())
}

/// A solver and one reason for the constraints a test gives it.
pub struct Fixture {
    pub s: Solver,
    pub why: Why,
}

impl Default for Fixture {
    fn default() -> Fixture {
        Fixture::new()
    }
}

impl Fixture {
    pub fn new() -> Fixture {
        let mut s = Solver::new();
        let why = Why::of(s.add_origin(Origin::Direct {
            what: "test".into(),
        }));
        Fixture { s, why }
    }

    pub fn dim(&mut self) -> DimVar {
        self.s.fresh_dim()
    }

    pub fn row(&mut self) -> RowVar {
        self.s.fresh_row()
    }

    /// A reason of its own, for messages that name constraints.
    pub fn named(&mut self, what: &str) -> Why {
        Why::of(self.s.add_origin(Origin::Direct {
            what: what.to_owned().into(),
        }))
    }

    pub fn eq(&self, a: Dim, b: Dim) -> Constraint {
        Constraint::DimEq {
            a,
            b,
            why: self.why,
        }
    }

    pub fn ge(&self, cur: Dim, subr: Dim) -> Constraint {
        Constraint::DimIneq {
            cur,
            subr,
            why: self.why,
        }
    }

    pub fn row_eq(&self, a: Row, b: Row) -> Constraint {
        Constraint::RowEq {
            a,
            b,
            why: self.why,
        }
    }

    pub fn row_ge(&self, cur: Row, subr: Row) -> Constraint {
        Constraint::RowIneq {
            cur,
            subr,
            why: self.why,
        }
    }

    pub fn total(&self, row: Row, n: u64) -> Constraint {
        Constraint::TotalElems {
            row,
            total: n.try_into().expect("a count above 0"),
            why: self.why,
        }
    }

    pub fn drop_first(&self, whole: Row, rest: Row) -> Constraint {
        Constraint::DropFirst {
            whole,
            rest,
            first: None,
            why: self.why,
        }
    }

    pub fn add(&mut self, c: Constraint) -> Result<(), ShapeError> {
        self.s.add(c)
    }

    /// What `d` is before finalization.
    pub fn now(&self, d: DimVar) -> Dim {
        self.s
            .resolve_dim(&Dim::Var(d))
            .expect("a variable of this solver")
    }

    pub fn finalize(&self) -> Solution {
        self.s.finalize().expect("finalization succeeds")
    }
}

/// The sizes of a finalized row.
pub fn sizes(sol: &Solution, r: &Row) -> Vec<u64> {
    sol.row(r)
        .expect("a solved row")
        .iter()
        .map(KnownDim::size)
        .collect()
}

/// The size of a finalized dim.
pub fn size(sol: &Solution, d: DimVar) -> u64 {
    sol.dim(&Dim::Var(d)).expect("a solved dim").size()
}

/// Every ordering of `0..n`.
pub fn permutations(n: usize) -> Vec<Vec<usize>> {
    if n == 0 {
        return vec![vec![]];
    }
    let mut out = Vec::new();
    for p in permutations(n - 1) {
        for at in 0..=p.len() {
            let mut q = p.clone();
            q.insert(at, n - 1);
            out.push(q);
        }
    }
    out
}

/// `s` with `cs` added in every order: each order with the state it gave,
/// or the first error.
pub fn in_every_order(
    s: &Solver,
    cs: &[Constraint],
) -> Vec<(Vec<usize>, Result<Solver, ShapeError>)> {
    permutations(cs.len())
        .into_iter()
        .map(|order| {
            let mut t = s.clone();
            let added = order.iter().try_for_each(|&i| t.add(cs[i].clone()));
            (order, added.map(|()| t))
        })
        .collect()
}

/// `s` with all of `cs` added, in every order; every constraint must be
/// accepted.
pub fn accepted_in_every_order(s: &Solver, cs: &[Constraint]) -> Vec<(Vec<usize>, Solver)> {
    in_every_order(s, cs)
        .into_iter()
        .map(|(order, t)| {
            let t = t.unwrap_or_else(|e| panic!("order {order:?}: {e}"));
            (order, t)
        })
        .collect()
}
