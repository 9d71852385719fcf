//! Run-time guards: what inference could not decide about sizes known only
//! at run time, checked when the sizes are bound and before anything runs.
//!
//! Inference never guesses about a symbolic size. Where it meets a static
//! size or another symbol and the e-graph cannot prove the equality (or
//! the broadcast) it needs, it records a [`SizeGuard`] with both facts and
//! the constraint that needed it, and goes on as if it held. Binding
//! (`SolvedGraph::bind`) evaluates every guard; one that fails is
//! [`GuardFailure`], which names the operation, the axis, both sizes with
//! their values, and where each came from.

use std::fmt;
use std::sync::Arc;

use shape_core::{KnownDim, Size};

use crate::error::{AxisFromEnd, DimFact};
use crate::origin::{Origin, Why};

/// What a guard requires of the bound sizes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Requirement {
    /// The two sizes are equal.
    Equal {
        /// One size.
        left: DimFact,
        /// The other.
        right: DimFact,
    },
    /// `from` broadcasts to `to`: it is 1 or equal to `to`.
    Broadcasts {
        /// The size broadcast to.
        to: DimFact,
        /// The size that broadcasts.
        from: DimFact,
    },
    /// The size is at least `min` (an index into it, a size statement).
    AtLeast {
        /// The size.
        dim: DimFact,
        /// Its least allowed value.
        min: u64,
    },
}

/// A check on run-time sizes that inference left for binding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeGuard {
    /// The constraint that needed it.
    pub context: Arc<Origin>,
    /// The axis of the constraint's row, counted from the end.
    pub axis: Option<AxisFromEnd>,
    /// What must hold.
    pub requirement: Requirement,
}

/// A guard that the bound sizes break.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", describe(.guard, .values))]
pub struct GuardFailure {
    /// The guard.
    pub guard: Box<SizeGuard>,
    /// The bound value of each size the requirement names, in the order
    /// the requirement names them.
    pub values: Vec<u64>,
}

fn describe(g: &SizeGuard, values: &[u64]) -> String {
    let at = g.axis.map_or(String::new(), |a| format!(", at {a}"));
    let named = |f: &DimFact, v: u64| match f.value.extent() {
        Size::Static(_) | Size::Ragged => format!("{v}"),
        Size::Symbolic(s) => format!("`{s}` = {v}"),
    };
    let v = |i: usize| values.get(i).copied().unwrap_or(0);
    match &g.requirement {
        Requirement::Equal { left, right } => format!(
            "the run-time sizes break {}{at}: {} must equal {}; {} comes from {}, {} from {}",
            g.context,
            named(left, v(0)),
            named(right, v(1)),
            left.value,
            left.place(),
            right.value,
            right.place()
        ),
        Requirement::Broadcasts { to, from } => format!(
            "the run-time sizes break {}{at}: {} cannot broadcast to {} (it must be 1 or equal); {} comes from {}, {} from {}",
            g.context,
            named(from, v(1)),
            named(to, v(0)),
            from.value,
            from.place(),
            to.value,
            to.place()
        ),
        Requirement::AtLeast { dim, min } => format!(
            "the run-time sizes break {}{at}: {} must be at least {min}; it comes from {}",
            g.context,
            named(dim, v(0)),
            dim.place()
        ),
    }
}

impl SizeGuard {
    /// Checks the guard for the run-time sizes `value` gives (a symbol
    /// without a value is an error of the caller, reported as `Err(None)`).
    pub fn check(&self, value: &dyn Fn(&str) -> Option<u64>) -> Result<(), GuardCheck> {
        let eval = |d: &KnownDim| -> Result<u64, GuardCheck> {
            match d.extent() {
                Size::Static(n) => Ok(*n),
                Size::Symbolic(s) => s.eval(value).map_err(GuardCheck::Unevaluable),
                // The solver leaves no guard on a ragged size (rows are
                // checked when the data is known).
                Size::Ragged => Err(GuardCheck::Unevaluable(
                    shape_core::size::EvalError::Unbound("var".into()),
                )),
            }
        };
        let (ok, values) = match &self.requirement {
            Requirement::Equal { left, right } => {
                let (a, b) = (eval(&left.value)?, eval(&right.value)?);
                (a == b, vec![a, b])
            }
            Requirement::Broadcasts { to, from } => {
                let (t, f) = (eval(&to.value)?, eval(&from.value)?);
                (f == 1 || f == t, vec![t, f])
            }
            Requirement::AtLeast { dim, min } => {
                let d = eval(&dim.value)?;
                (d >= *min, vec![d])
            }
        };
        if ok {
            Ok(())
        } else {
            Err(GuardCheck::Failed(GuardFailure {
                guard: Box::new(self.clone()),
                values,
            }))
        }
    }
}

/// Why a guard did not pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GuardCheck {
    /// The sizes break it.
    Failed(GuardFailure),
    /// A size it names has no value (a symbol not bound, an overflow).
    Unevaluable(shape_core::size::EvalError),
}

impl fmt::Display for SizeGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.requires())?;
        write!(f, " (in {})", self.context)
    }
}

impl SizeGuard {
    /// The requirement in a few words: `b == 4`, `b in {1, 4}`, `b >= 2`.
    pub fn requires(&self) -> String {
        let e = |d: &DimFact| d.value.extent().to_string();
        match &self.requirement {
            Requirement::Equal { left, right } => format!("{} == {}", e(left), e(right)),
            Requirement::Broadcasts { to, from } => format!("{} in {{1, {}}}", e(from), e(to)),
            Requirement::AtLeast { dim, min } => format!("{} >= {min}", e(dim)),
        }
    }
}

/// A guard as the solver records it: sizes with the `Why` of each, turned
/// into a [`SizeGuard`] with origins once solved.
#[derive(Clone, Debug)]
pub(crate) enum RawGuard {
    Equal(KnownDim, Why, KnownDim, Why),
    Broadcasts(KnownDim, Why, KnownDim, Why),
    AtLeast(KnownDim, Why, u64),
}

/// What a guard on one run-time size alone allows of its value, when it
/// allows a finite set or a lower bound: `b == 4`, `b in {1, 4}`, `b >= 3`.
enum Allowed {
    OneOf(Vec<u64>),
    AtLeast(u64),
}

impl Allowed {
    fn admits(&self, v: u64) -> bool {
        match self {
            Allowed::OneOf(vs) => vs.contains(&v),
            Allowed::AtLeast(m) => v >= *m,
        }
    }
}

/// The run-time size a guard is about and what it allows, for guards
/// between one symbol and a number (others are left to binding).
fn allowed(g: &SizeGuard) -> Option<(&str, Allowed)> {
    fn symbol(f: &DimFact) -> Option<&str> {
        match f.value.extent() {
            Size::Symbolic(s) => s.as_symbol(),
            _ => None,
        }
    }
    let number = |f: &DimFact| f.value.static_size();
    match &g.requirement {
        Requirement::Equal { left, right } => match (symbol(left), number(right)) {
            (Some(b), Some(n)) => Some((b, Allowed::OneOf(vec![n]))),
            _ => match (symbol(right), number(left)) {
                (Some(b), Some(n)) => Some((b, Allowed::OneOf(vec![n]))),
                _ => None,
            },
        },
        Requirement::Broadcasts { to, from } => {
            let (b, n) = (symbol(from)?, number(to)?);
            Some((b, Allowed::OneOf(vec![1, n])))
        }
        Requirement::AtLeast { dim, min } => Some((symbol(dim)?, Allowed::AtLeast(*min))),
    }
}

/// Two guards that no value of their run-time size passes together
/// (`b == 2` and `b >= 3`): inference reports them rather than leave a
/// program that every binding refuses. Only guards between one symbol
/// and a number are compared; the pair returned is the first, in the
/// guards' order, whose second member makes the set unsatisfiable.
pub fn contradiction(guards: &[SizeGuard]) -> Option<(&SizeGuard, &SizeGuard)> {
    let mut by_symbol: std::collections::HashMap<&str, Vec<(usize, Allowed)>> =
        std::collections::HashMap::new();
    for (i, g) in guards.iter().enumerate() {
        if let Some((b, a)) = allowed(g) {
            by_symbol.entry(b).or_default().push((i, a));
        }
    }
    let mut found: Option<(usize, usize)> = None;
    for list in by_symbol.values() {
        // Candidates: the values some guard names (run-time sizes are at
        // least 1); a set of lower bounds alone always has a value.
        let candidates: Vec<u64> = list
            .iter()
            .flat_map(|(_, a)| match a {
                Allowed::OneOf(vs) => vs.clone(),
                Allowed::AtLeast(_) => Vec::new(),
            })
            .filter(|v| *v >= 1)
            .collect();
        if candidates.is_empty() && list.iter().all(|(_, a)| matches!(a, Allowed::AtLeast(_))) {
            continue;
        }
        // The shortest prefix that nothing passes, and in it the earlier
        // guard that the last one contradicts.
        for end in 1..=list.len() {
            let prefix = &list[..end];
            let passes = |v: &u64| *v >= 1 && prefix.iter().all(|(_, a)| a.admits(*v));
            let some_value = candidates.iter().any(passes)
                || (prefix.iter().all(|(_, a)| matches!(a, Allowed::AtLeast(_))));
            if !some_value {
                let (last, a_last) = &prefix[end - 1];
                let first = prefix[..end - 1]
                    .iter()
                    .find(|(_, a)| {
                        !candidates
                            .iter()
                            .any(|v| *v >= 1 && a.admits(*v) && a_last.admits(*v))
                    })
                    .map_or(prefix[0].0, |(i, _)| *i);
                let pair = (first.min(*last), first.max(*last));
                if found.is_none_or(|f| pair.1 < f.1) {
                    found = Some(pair);
                }
                break;
            }
        }
    }
    found.map(|(a, b)| (&guards[a], &guards[b]))
}
