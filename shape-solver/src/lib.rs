//! The declarative shape solver: constraints over the dims and rows of
//! `shape-core`, solved in any order to the same result.
//!
//! Front ends (the `Graph` API of `shape-graph`, spec strings, the text
//! programs of `shape-lang`) produce [`Constraint`]s; the [`Solver`]
//! simplifies them over persistent maps; [`Solver::finalize`] closes what
//! is left open and yields a [`Solution`], in which every dimension has a
//! size and a [`Provenance`].
//!
//! ```
//! use shape_core::{Dim, KnownDim, Row};
//! use shape_solver::{Constraint, Origin, Solver, Why};
//!
//! let mut s = Solver::new();
//! let why = Why::of(s.add_origin(Origin::Direct { what: "example".into() }));
//! // An operand of (32, 784) and a result row that broadcasts from it.
//! let r = s.fresh_row();
//! let result = Row::open(r, vec![]);
//! let operand = Row::closed(vec![Dim::known(32).unwrap(), Dim::known(784).unwrap()]);
//! s.add(Constraint::RowIneq { cur: result.clone(), subr: operand, why }).unwrap();
//! let solution = s.finalize().unwrap();
//! let sizes: Vec<u64> = solution.row(&result).unwrap().iter().map(KnownDim::size).collect();
//! assert_eq!(sizes, vec![32, 784]);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod constraint;
mod env;
mod error;
mod finalize;
pub mod flank;
pub mod guard;
mod origin;
mod origin_table;
mod rank_cycle;
mod solver;
mod store;
pub mod symbolic;

pub use constraint::Constraint;
pub use error::{
    AffineProblem, AxesCycle, AxisFromEnd, CycleStep, DimFact, ErrorClass, RowFact, ShapeError,
    SumReason, TotalElemsReason,
};
pub use finalize::{Provenance, RowDefaults, Solution};
pub use origin::{Definition, OpRef, Origin, OriginId, Relation, RowSite, TensorRef, Why};
pub use solver::{Solver, SolverStats, StepBudget};
