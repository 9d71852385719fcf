//! Broadcasting with sizes known only at run time, by MLIR's
//! `Broadcastable` rules: dynamic sizes (`?`), unranked shapes (`*`),
//! static inference of the result shape, verification of a declared
//! result, and the run-time guards that static inference leaves.
//!
//! A dimension is dynamic (`?`), static 1, or static above 1. Two
//! dimensions infer one (the table in `docs/dynamic-sizes.md`): `?` with
//! `?` or `1` is `?`; `?` with `n > 1` is `n` under the guard that the
//! run-time size is 1 or `n`; `1` with anything is the other; `n` with `m`
//! is an error unless equal. `?` with `?` also leaves a guard: the two
//! run-time sizes are equal or one of them is 1. Shapes are aligned at
//! their last axes (missing leading axes are 1), and unranked operands are
//! left out of inference.
//!
//! ```
//! use shape_core::dynamic::{infer, DynDim::*, DynShape};
//! let a = DynShape::Ranked(vec![Dynamic, Static(3)]);
//! let b = DynShape::Ranked(vec![Static(4), Static(1)]);
//! let r = infer(&[a, b]).unwrap();
//! assert_eq!(r.shape, DynShape::Ranked(vec![Static(4), Static(3)]));
//! assert_eq!(r.guards.len(), 1); // operand 0's `?` must be 1 or 4
//! ```

use std::fmt;
use std::sync::Arc;

/// One dimension: a static size (0 or more: a size 0 broadcasts with 1 to
/// 0, and with a size above 1 not at all, as in numpy), one known only at
/// run time, or a named run-time size.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DynDim {
    /// Known now.
    Static(u64),
    /// Known only at run time (`?`).
    Dynamic,
    /// A run-time size with a name (`b`): known only at run time, like
    /// `?`, but two axes of the same name are the same size, so they
    /// broadcast together with no guard and the result keeps the name.
    Symbol(Arc<str>),
}

impl DynDim {
    /// Whether the size is known only at run time (`?` or a symbol).
    #[deprecated(since = "0.1.0", note = "no user: match `DynDim::Static`")]
    pub fn is_run_time(&self) -> bool {
        !matches!(self, DynDim::Static(_))
    }
}

impl fmt::Display for DynDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DynDim::Static(n) => write!(f, "{n}"),
            DynDim::Dynamic => f.write_str("?"),
            DynDim::Symbol(name) => f.write_str(name),
        }
    }
}

/// A shape: ranked (its dimensions, outermost first) or unranked (`*`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DynShape {
    /// The dimensions, outermost first.
    Ranked(Vec<DynDim>),
    /// Rank unknown (`*`).
    Unranked,
}

impl fmt::Display for DynShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DynShape::Unranked => f.write_str("*"),
            DynShape::Ranked(d) if d.len() == 1 => write!(f, "({},)", d[0]),
            DynShape::Ranked(d) => {
                let parts: Vec<String> = d.iter().map(DynDim::to_string).collect();
                write!(f, "({})", parts.join(", "))
            }
        }
    }
}

/// What a run-time size must satisfy.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Requirement {
    /// 1, or exactly this size.
    OneOr(u64),
    /// 1, or equal to every one of these axes (operand, axis) whose size
    /// is not 1: dynamic sizes that meet on one result axis.
    OneOrSameAs(Vec<(usize, usize)>),
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Requirement::OneOr(n) => write!(f, "1 or {n}"),
            Requirement::OneOrSameAs(others) => {
                let axes: Vec<String> = others
                    .iter()
                    .map(|(o, a)| format!("operand {o} axis {a}"))
                    .collect();
                write!(
                    f,
                    "1 or the size of each of {} that is not 1",
                    axes.join(", ")
                )
            }
        }
    }
}

/// A check that only the run-time sizes can decide, made before anything
/// runs.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Guard {
    /// The operand whose axis is dynamic.
    pub operand: usize,
    /// Its axis, counted from its first.
    pub axis: usize,
    /// What its run-time size must be.
    pub requires: Requirement,
}

impl Guard {
    /// Checks run-time sizes (one shape per operand, unranked ones
    /// included, as bound); an error names the operand, axis and sizes.
    pub fn check(&self, sizes: &[Vec<u64>]) -> Result<(), DynError> {
        let size = |op: usize, axis: usize| sizes.get(op).and_then(|s| s.get(axis)).copied();
        // A size that was not bound fails the guard (sizes may be 0, so no
        // number can stand for it).
        let ok = |found: u64| match &self.requires {
            Requirement::OneOr(n) => found == 1 || found == *n,
            Requirement::OneOrSameAs(others) => {
                found == 1
                    || others
                        .iter()
                        .all(|&(o, a)| size(o, a).is_some_and(|other| other == 1 || other == found))
            }
        };
        match size(self.operand, self.axis) {
            Some(found) if ok(found) => Ok(()),
            found => Err(DynError::GuardFailed {
                guard: self.clone(),
                found: found.unwrap_or(0),
            }),
        }
    }
}

/// The result of static inference.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Inferred {
    /// The result shape (`*` when every operand is unranked).
    pub shape: DynShape,
    /// What the run-time sizes must satisfy.
    pub guards: Vec<Guard>,
}

impl Inferred {
    /// Whether broadcasting is known to succeed before run time: no guard.
    pub fn known_statically(&self) -> bool {
        self.guards.is_empty()
    }
}

/// Why dynamic shapes do not broadcast, or a declared result does not fit.
#[derive(
    Clone, Debug, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames,
)]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum DynError {
    /// No operand at all.
    #[error("give at least one operand")]
    NoOperands,
    /// Two static sizes above 1 differ (inference).
    #[error("operands {left} and {right} do not broadcast: at result axis {axis}, static sizes {left_size} and {right_size} differ and neither is 1")]
    StaticMismatch {
        /// The earlier operand.
        left: usize,
        /// The later one.
        right: usize,
        /// The result axis, counted from its first.
        axis: usize,
        /// The earlier operand's size.
        left_size: u64,
        /// The later operand's size.
        right_size: u64,
    },
    /// The declared result's rank differs from the inferred one.
    #[error("the result {declared} has rank {found}, but the operands broadcast to {inferred}, of rank {expected}")]
    RankMismatch {
        /// The inferred shape.
        inferred: DynShape,
        /// The declared result.
        declared: DynShape,
        /// The inferred rank.
        expected: usize,
        /// The declared rank.
        found: usize,
    },
    /// The declared result is static where inference only knows `?`.
    #[error("the result {declared} has the static size {size} at axis {axis}, where the operands only give a size known at run time ({inferred})")]
    StaticWhereDynamic {
        /// The inferred shape.
        inferred: DynShape,
        /// The declared result.
        declared: DynShape,
        /// The axis.
        axis: usize,
        /// The declared size.
        size: u64,
    },
    /// The declared result's static size differs from the inferred one.
    #[error("the result {declared} has size {found} at axis {axis}, but the operands broadcast to {inferred}, with {expected} there (a result does not broadcast)")]
    ResultMismatch {
        /// The inferred shape.
        inferred: DynShape,
        /// The declared result.
        declared: DynShape,
        /// The axis.
        axis: usize,
        /// The inferred size.
        expected: u64,
        /// The declared size.
        found: u64,
    },
    /// The declared result names a symbol where the operands give another
    /// size (a static one, `?`, or another symbol): equality with a
    /// named size is never assumed.
    #[error("the result {declared} has the symbol `{symbol}` at axis {axis}, but the operands broadcast to {inferred}, which does not give `{symbol}` there")]
    SymbolMismatch {
        /// The inferred shape.
        inferred: DynShape,
        /// The declared result.
        declared: DynShape,
        /// The axis.
        axis: usize,
        /// The declared symbol.
        symbol: Arc<str>,
    },
    /// A run-time size breaks a guard.
    #[error("operand {} axis {} has the run-time size {found}, but it must be {}", guard.operand, guard.axis, guard.requires)]
    GuardFailed {
        /// The guard.
        guard: Guard,
        /// The size found.
        found: u64,
    },
}

impl DynError {
    /// A stable, machine-readable name: the variant's name in snake case.
    pub fn kind(&self) -> &'static str {
        self.into()
    }
}

/// Static inference of the result shape of operands broadcast together
/// (MLIR's `InferResultShape`), with the guards it leaves.
pub fn infer(operands: &[DynShape]) -> Result<Inferred, DynError> {
    if operands.is_empty() {
        return Err(DynError::NoOperands);
    }
    let ranked: Vec<(usize, &Vec<DynDim>)> = operands
        .iter()
        .enumerate()
        .filter_map(|(i, s)| match s {
            DynShape::Ranked(d) => Some((i, d)),
            DynShape::Unranked => None,
        })
        .collect();
    let Some(rank) = ranked.iter().map(|(_, d)| d.len()).max() else {
        return Ok(Inferred {
            shape: DynShape::Unranked,
            guards: Vec::new(),
        });
    };
    // Result axes, each with the operand (and axis) that made it, and for
    // a dynamic axis the operands whose dynamic sizes met on it.
    let mut dims: Vec<DynDim> = vec![DynDim::Static(1); rank];
    let mut made_by: Vec<Option<(usize, u64)>> = vec![None; rank];
    // The dynamic (operand, axis) pairs met on each result axis while it
    // is still dynamic.
    let mut dynamic_from: Vec<Vec<(usize, usize)>> = vec![Vec::new(); rank];
    let mut guards = Vec::new();
    for (op, shape) in ranked {
        let pad = rank - shape.len();
        for (k, d) in shape.iter().enumerate() {
            let axis = pad + k;
            let here = (op, k);
            match (&dims[axis], d) {
                (_, DynDim::Static(1)) => {}
                (DynDim::Static(1), DynDim::Static(n)) => {
                    dims[axis] = DynDim::Static(*n);
                    made_by[axis] = Some((op, *n));
                }
                (DynDim::Static(m), DynDim::Static(n)) => {
                    if m != n {
                        let (left, left_size) = made_by[axis].unwrap_or((0, *m));
                        return Err(DynError::StaticMismatch {
                            left,
                            right: op,
                            axis,
                            left_size,
                            right_size: *n,
                        });
                    }
                }
                (DynDim::Static(1), _) => {
                    dims[axis] = d.clone();
                    dynamic_from[axis].push(here);
                }
                (DynDim::Static(n), _) => guards.push(Guard {
                    operand: op,
                    axis: k,
                    requires: Requirement::OneOr(*n),
                }),
                (_, DynDim::Static(n)) => {
                    // Every run-time size met so far must be 1 or n (which
                    // also makes them agree with each other).
                    let n = *n;
                    dims[axis] = DynDim::Static(n);
                    made_by[axis] = Some((op, n));
                    for (o, a) in std::mem::take(&mut dynamic_from[axis]) {
                        guards.push(Guard {
                            operand: o,
                            axis: a,
                            requires: Requirement::OneOr(n),
                        });
                    }
                }
                // The same symbol: the same size, whatever it is.
                (DynDim::Symbol(a), DynDim::Symbol(b)) if a == b => {
                    dynamic_from[axis].push(here);
                }
                _ => {
                    // Run-time sizes that may differ: `?` with anything,
                    // or two different symbols (their equality is never
                    // assumed).
                    guards.push(Guard {
                        operand: op,
                        axis: k,
                        requires: Requirement::OneOrSameAs(dynamic_from[axis].clone()),
                    });
                    dynamic_from[axis].push(here);
                    dims[axis] = DynDim::Dynamic;
                }
            }
        }
    }
    Ok(Inferred {
        shape: DynShape::Ranked(dims),
        guards,
    })
}

/// Verification of a declared result against the operands (MLIR's
/// `Verify`): inference must succeed; then, when both the result and some
/// operand are ranked, the ranks must match, a static result size needs a
/// static inferred one, and two static sizes must be equal (a dynamic
/// result size accepts anything).
pub fn verify(operands: &[DynShape], result: &DynShape) -> Result<Inferred, DynError> {
    let inferred = infer(operands)?;
    let (DynShape::Ranked(inf), DynShape::Ranked(actual)) = (&inferred.shape, result) else {
        return Ok(inferred);
    };
    if inf.len() != actual.len() {
        return Err(DynError::RankMismatch {
            inferred: inferred.shape.clone(),
            declared: result.clone(),
            expected: inf.len(),
            found: actual.len(),
        });
    }
    for (axis, (i, a)) in inf.iter().zip(actual).enumerate() {
        match (i, a) {
            (_, DynDim::Dynamic) => {}
            (DynDim::Symbol(x), DynDim::Symbol(y)) if x == y => {}
            (_, DynDim::Symbol(symbol)) => {
                return Err(DynError::SymbolMismatch {
                    inferred: inferred.shape.clone(),
                    declared: result.clone(),
                    axis,
                    symbol: symbol.clone(),
                })
            }
            (DynDim::Dynamic | DynDim::Symbol(_), DynDim::Static(size)) => {
                return Err(DynError::StaticWhereDynamic {
                    inferred: inferred.shape.clone(),
                    declared: result.clone(),
                    axis,
                    size: *size,
                })
            }
            (DynDim::Static(e), DynDim::Static(f)) if e != f => {
                return Err(DynError::ResultMismatch {
                    inferred: inferred.shape.clone(),
                    declared: result.clone(),
                    axis,
                    expected: *e,
                    found: *f,
                })
            }
            _ => {}
        }
    }
    Ok(inferred)
}

#[cfg(test)]
mod tests {
    use super::DynDim::{Dynamic as Q, Static as S};
    use super::*;

    fn r(d: &[DynDim]) -> DynShape {
        DynShape::Ranked(d.to_vec())
    }

    /// The dimension inference table, row by row, both orders.
    #[test]
    fn dimension_inference_table() {
        let rows: [(DynDim, DynDim, DynDim, usize); 6] = [
            (Q, Q, Q, 1),
            (Q, S(1), Q, 0),
            (Q, S(4), S(4), 1),
            (S(1), S(1), S(1), 0),
            (S(1), S(4), S(4), 0),
            (S(4), S(4), S(4), 0),
        ];
        for (a, b, expected, guards) in rows {
            for (x, y) in [(a.clone(), b.clone()), (b, a)] {
                let got =
                    infer(&[r(std::slice::from_ref(&x)), r(std::slice::from_ref(&y))]).unwrap();
                assert_eq!(
                    got.shape,
                    r(std::slice::from_ref(&expected)),
                    "{x} with {y}"
                );
                assert_eq!(got.guards.len(), guards, "{x} with {y}");
            }
        }
        assert!(matches!(
            infer(&[r(&[S(3)]), r(&[S(2)])]),
            Err(DynError::StaticMismatch {
                left: 0,
                right: 1,
                axis: 0,
                ..
            })
        ));
    }

    /// Size 0 as numpy has it: with 1 it gives 0, with a size above 1 it
    /// is an error, against `?` the run-time size must be 1 or 0.
    #[test]
    fn size_zero_broadcasts_as_in_numpy() {
        assert_eq!(
            infer(&[r(&[S(0), S(3)]), r(&[S(1), S(3)])]).unwrap().shape,
            r(&[S(0), S(3)])
        );
        assert_eq!(infer(&[r(&[S(0)]), r(&[S(0)])]).unwrap().shape, r(&[S(0)]));
        assert!(matches!(
            infer(&[r(&[S(0)]), r(&[S(5)])]),
            Err(DynError::StaticMismatch {
                left_size: 0,
                right_size: 5,
                ..
            })
        ));
        let guarded = infer(&[r(&[Q]), r(&[S(0)])]).unwrap();
        assert_eq!(guarded.shape, r(&[S(0)]));
        assert_eq!(guarded.guards[0].requires, Requirement::OneOr(0));
        assert!(guarded.guards[0].check(&[vec![0], vec![0]]).is_ok());
        assert!(guarded.guards[0].check(&[vec![2], vec![0]]).is_err());
        // A size that was not bound fails, even where 0 would pass.
        assert!(guarded.guards[0].check(&[vec![], vec![0]]).is_err());
    }

    /// Named run-time sizes: the same name meets itself with no guard and
    /// keeps its name; against a static size or another name it behaves
    /// as `?` does (a guard, never an assumed equality).
    #[test]
    fn symbols_are_run_time_sizes_equal_only_to_themselves() {
        let b = || DynDim::Symbol("b".into());
        let c = || DynDim::Symbol("c".into());
        let same = infer(&[r(&[b(), S(3)]), r(&[b(), S(1)]), r(&[S(1), S(3)])]).unwrap();
        assert_eq!(same.shape, r(&[b(), S(3)]));
        assert!(same.known_statically());
        let against_static = infer(&[r(&[b(), S(3)]), r(&[S(4), S(3)])]).unwrap();
        assert_eq!(against_static.shape, r(&[S(4), S(3)]));
        assert_eq!(
            against_static.guards,
            [Guard {
                operand: 0,
                axis: 0,
                requires: Requirement::OneOr(4)
            }]
        );
        // Both orders, and a later static size guards every symbol met.
        let later = infer(&[r(&[b()]), r(&[b()]), r(&[S(4)])]).unwrap();
        assert_eq!(later.shape, r(&[S(4)]));
        assert_eq!(later.guards.len(), 2);
        let different = infer(&[r(&[b()]), r(&[c()])]).unwrap();
        assert_eq!(different.shape, r(&[Q]));
        assert_eq!(
            different.guards,
            [Guard {
                operand: 1,
                axis: 0,
                requires: Requirement::OneOrSameAs(vec![(0, 0)])
            }]
        );
        let with_q = infer(&[r(&[b()]), r(&[Q])]).unwrap();
        assert_eq!((with_q.shape, with_q.guards.len()), (r(&[Q]), 1));
        // The guards check bound sizes: b = 4 with 4 passes, b = 2 fails.
        assert!(against_static.guards[0]
            .check(&[vec![4, 3], vec![4, 3]])
            .is_ok());
        assert!(against_static.guards[0]
            .check(&[vec![1, 3], vec![4, 3]])
            .is_ok());
        let failed = against_static.guards[0].check(&[vec![2, 3], vec![4, 3]]);
        assert_eq!(failed.unwrap_err().kind(), "guard_failed");
        // Verification: a declared symbol must be inferred as itself; a
        // static size where a symbol is inferred is not verified.
        assert!(verify(&[r(&[b(), S(3)])], &r(&[b(), S(3)])).is_ok());
        assert!(verify(&[r(&[b(), S(3)])], &r(&[Q, S(3)])).is_ok());
        for (declared, kind) in [
            (r(&[c(), S(3)]), "symbol_mismatch"),
            (r(&[S(4), S(3)]), "static_where_dynamic"),
        ] {
            assert_eq!(
                verify(&[r(&[b(), S(3)])], &declared).unwrap_err().kind(),
                kind
            );
        }
        assert_eq!(
            verify(&[r(&[S(4)])], &r(&[b()])).unwrap_err().kind(),
            "symbol_mismatch"
        );
    }

    /// The verification table, row by row.
    #[test]
    fn verification_table() {
        let two_q = [r(&[Q]), r(&[Q])];
        assert!(verify(&two_q, &r(&[Q])).is_ok());
        assert!(matches!(
            verify(&two_q, &r(&[S(4)])),
            Err(DynError::StaticWhereDynamic { .. })
        ));
        assert!(verify(&[r(&[S(4)])], &r(&[Q])).is_ok());
        assert!(verify(&[r(&[S(4)])], &r(&[S(4)])).is_ok());
        assert!(matches!(
            verify(&[r(&[S(2)]), r(&[S(2)])], &r(&[S(4)])),
            Err(DynError::ResultMismatch { .. })
        ));
    }

    /// The document's correct and incorrect examples.
    #[test]
    fn the_documents_examples() {
        let ok: [(Vec<DynShape>, DynShape); 8] = [
            (vec![r(&[S(1), S(2)]), r(&[S(1), S(2)])], r(&[S(1), S(2)])),
            (vec![r(&[Q]), r(&[Q])], r(&[Q])),
            (vec![r(&[S(1)]), r(&[S(4)])], r(&[S(4)])),
            (vec![r(&[S(4)])], r(&[Q])),
            (
                vec![r(&[S(4)]), r(&[S(2), S(3), S(4)])],
                r(&[S(2), S(3), S(4)]),
            ),
            (vec![r(&[S(2)]), r(&[S(2)])], r(&[S(2)])),
            (vec![r(&[S(2)])], DynShape::Unranked),
            (vec![DynShape::Unranked, DynShape::Unranked], r(&[S(2)])),
        ];
        for (ops, result) in ok {
            assert!(verify(&ops, &result).is_ok(), "{ops:?} -> {result}");
        }
        let bad: [(Vec<DynShape>, DynShape, &str); 5] = [
            (vec![r(&[S(3)]), r(&[S(2)])], r(&[Q]), "static_mismatch"),
            (
                vec![r(&[S(3)]), r(&[S(3)])],
                r(&[S(1), S(3)]),
                "rank_mismatch",
            ),
            (vec![r(&[Q]), r(&[Q])], r(&[S(4)]), "static_where_dynamic"),
            (vec![r(&[S(2)]), r(&[S(2)])], r(&[S(4)]), "result_mismatch"),
            (vec![r(&[S(1)]), r(&[S(1)])], r(&[S(4)]), "result_mismatch"),
        ];
        for (ops, result, kind) in bad {
            let e = verify(&ops, &result).unwrap_err();
            assert_eq!(e.kind(), kind, "{ops:?} -> {result}: {e}");
        }
    }

    #[test]
    fn dynamic_sizes_that_meet_must_agree_with_each_other() {
        let got = infer(&[r(&[Q]), r(&[Q]), r(&[Q])]).unwrap();
        assert_eq!(got.shape, r(&[Q]));
        let ok = |sizes: [u64; 3]| {
            let s: Vec<Vec<u64>> = sizes.iter().map(|&n| vec![n]).collect();
            got.guards.iter().all(|g| g.check(&s).is_ok())
        };
        assert!(ok([1, 5, 5]) && ok([5, 1, 5]) && ok([1, 1, 3]) && ok([2, 2, 2]));
        assert!(!ok([1, 5, 3]) && !ok([5, 1, 3]) && !ok([5, 3, 1]));
    }

    #[test]
    fn guards_name_the_operand_and_axis_and_check_run_time_sizes() {
        let got = infer(&[r(&[Q, S(3)]), r(&[S(4), S(1)]), r(&[Q, Q])]).unwrap();
        assert_eq!(got.shape, r(&[S(4), S(3)]));
        assert_eq!(
            got.guards,
            vec![
                Guard {
                    operand: 0,
                    axis: 0,
                    requires: Requirement::OneOr(4)
                },
                Guard {
                    operand: 2,
                    axis: 0,
                    requires: Requirement::OneOr(4)
                },
                Guard {
                    operand: 2,
                    axis: 1,
                    requires: Requirement::OneOr(3)
                },
            ]
        );
        let sizes = [vec![1, 3], vec![4, 1], vec![4, 3]];
        assert!(got.guards.iter().all(|g| g.check(&sizes).is_ok()));
        let e = got.guards[0]
            .check(&[vec![2, 3], vec![4, 1], vec![4, 3]])
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "operand 0 axis 0 has the run-time size 2, but it must be 1 or 4"
        );
    }
}
