//! The table of operations that can be called by name: what the graph
//! API's `call`, the text language's parser and the random program
//! generator all read.
//!
//! Each entry says how an operation is called (its name, whether a spec
//! string comes first, how many tensors follow, an operator that writes
//! it), how to build it from those arguments, and optionally how to draw
//! a random application of it for differential tests.
//! [`Registry::builtin`] holds the built-in operations of `ops/`; a crate
//! with operations of its own starts from a copy of it and
//! [`Registry::register`]s them.

use std::collections::HashMap;
use std::fmt;
use std::ops::RangeInclusive;
use std::sync::{Arc, LazyLock};

use crate::graph::{GraphError, TensorId};
use crate::operation::Operation;
use crate::sample::SampleCx;
pub use shape_core::scalar::Precedence;

/// The arguments an operation is built from.
#[derive(Clone, Copy, Debug)]
pub struct BuildArgs<'a> {
    /// The name it was called by.
    pub name: &'a str,
    /// The spec string, for operations that take one.
    pub spec: Option<&'a str>,
    /// The number of tensors given.
    pub operands: usize,
}

/// Builds an operation from its arguments.
pub type Builder =
    Arc<dyn Fn(&BuildArgs<'_>) -> Result<Arc<dyn Operation>, GraphError> + Send + Sync>;

/// Draws a random application of an operation in a random program: picks
/// operands (or makes new inputs) through the [`SampleCx`], applies the
/// operation and returns its result, or `None` when no operand fits.
pub type Sampler =
    Arc<dyn Fn(&mut dyn SampleCx) -> Result<Option<TensorId>, GraphError> + Send + Sync>;

/// How the text language writes an operation besides `name(args)`.
///
/// The program language's parser takes its infix operators and their
/// precedence from the registry, so an operation that declares one is
/// parsed without a change to the parser.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Operator {
    /// Between its two operands, binding as tightly as its precedence
    /// says: `a + b`. The symbol is punctuation (not a letter, digit,
    /// parenthesis, quote, `#`, `=`, `,` or space).
    Infix(&'static str, Precedence),
    /// Before its one operand: `-a`.
    Prefix(&'static str),
}

impl Operator {
    /// The symbol as programs write it.
    pub fn symbol(self) -> &'static str {
        match self {
            Operator::Infix(s, _) | Operator::Prefix(s) => s,
        }
    }
}

/// One operation that can be called by name.
#[derive(Clone)]
pub struct OpEntry {
    name: Arc<str>,
    summary: Arc<str>,
    takes_spec: bool,
    operands: RangeInclusive<usize>,
    operator: Option<Operator>,
    build: Builder,
    sample: Option<Sampler>,
}

impl fmt::Debug for OpEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpEntry")
            .field("name", &self.name)
            .field("takes_spec", &self.takes_spec)
            .field("operands", &self.operands)
            .field("operator", &self.operator)
            .finish_non_exhaustive()
    }
}

impl OpEntry {
    /// An operation called `name(t1, ..)` with a number of tensors in
    /// `operands`, built by `build`. `summary` is one line for listings.
    pub fn new(
        name: &str,
        summary: &str,
        operands: RangeInclusive<usize>,
        build: impl Fn(&BuildArgs<'_>) -> Result<Arc<dyn Operation>, GraphError> + Send + Sync + 'static,
    ) -> OpEntry {
        OpEntry {
            name: Arc::from(name),
            summary: Arc::from(summary),
            takes_spec: false,
            operands,
            operator: None,
            build: Arc::new(build),
            sample: None,
        }
    }

    /// An entry for one fixed operation (such as a pointwise function):
    /// every call builds (shares) the same instance.
    pub fn fixed(name: &str, summary: &str, op: Arc<dyn Operation>) -> OpEntry {
        let arity = op.arity();
        OpEntry::new(name, summary, arity..=arity, move |_| Ok(op.clone()))
    }

    /// This entry with a spec string as the first argument.
    pub fn with_spec(mut self) -> OpEntry {
        self.takes_spec = true;
        self
    }

    /// This entry also written with an operator.
    pub fn with_operator(mut self, operator: Operator) -> OpEntry {
        self.operator = Some(operator);
        self
    }

    /// This entry with a sampler for random programs.
    pub fn with_sampler(
        mut self,
        sample: impl Fn(&mut dyn SampleCx) -> Result<Option<TensorId>, GraphError>
            + Send
            + Sync
            + 'static,
    ) -> OpEntry {
        self.sample = Some(Arc::new(sample));
        self
    }

    /// The name it is called by.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// One line saying what it does.
    pub fn summary(&self) -> &str {
        &self.summary
    }

    /// Whether a spec string comes before the tensors.
    pub fn takes_spec(&self) -> bool {
        self.takes_spec
    }

    /// How many tensors it takes.
    pub fn operands(&self) -> RangeInclusive<usize> {
        self.operands.clone()
    }

    /// The operator that also writes it, if any.
    pub fn operator(&self) -> Option<Operator> {
        self.operator
    }

    /// Builds the operation.
    pub fn build(&self, args: &BuildArgs<'_>) -> Result<Arc<dyn Operation>, GraphError> {
        (self.build)(args)
    }

    /// Its sampler for random programs, if any.
    pub fn sampler(&self) -> Option<&Sampler> {
        self.sample.as_ref()
    }

    /// What a call takes, in words: `2 tensors`, `a spec string, then 1 or
    /// 2 tensors`.
    pub fn describe_arguments(&self) -> String {
        let (lo, hi) = (*self.operands.start(), *self.operands.end());
        let tensors = match (lo, hi) {
            (1, 1) => "1 tensor".to_string(),
            (a, b) if a == b => format!("{a} tensors"),
            (a, b) if b == a + 1 => format!("{a} or {b} tensors"),
            (a, b) => format!("{a} to {b} tensors"),
        };
        if self.takes_spec {
            format!("a spec string, like \"ij;jk=>ik\", then {tensors}")
        } else {
            tensors
        }
    }
}

/// The table of operations callable by name.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    entries: Vec<OpEntry>,
    by_name: HashMap<Arc<str>, usize>,
}

static BUILTIN: LazyLock<Arc<Registry>> = LazyLock::new(|| {
    let mut r = Registry::default();
    for entry in crate::ops::builtin_entries() {
        r.insert(entry);
    }
    Arc::new(r)
});

impl Registry {
    /// A table without any operation.
    pub fn empty() -> Registry {
        Registry::default()
    }

    /// The built-in operations (shared; clone it to add more).
    ///
    /// ```
    /// use shape_graph::Registry;
    /// let r = Registry::builtin();
    /// assert!(r.get("relu").is_some());
    /// assert_eq!(r.by_infix("@").unwrap().name(), "compose");
    /// ```
    pub fn builtin() -> Arc<Registry> {
        BUILTIN.clone()
    }

    fn insert(&mut self, entry: OpEntry) {
        match self.by_name.get(&entry.name) {
            Some(&i) => self.entries[i] = entry,
            None => {
                self.by_name.insert(entry.name.clone(), self.entries.len());
                self.entries.push(entry);
            }
        }
    }

    /// Adds an operation; fails when the name is taken.
    /// An entry's operator must be punctuation the program language can
    /// read as one (not a letter, digit, space, parenthesis, quote, `#`,
    /// `=`, `,`, `_` or `.`), and no other entry may write the same one.
    pub fn register(&mut self, entry: OpEntry) -> Result<(), GraphError> {
        if self.by_name.contains_key(&entry.name) {
            return Err(GraphError::DuplicateFunction {
                name: entry.name.to_string(),
            });
        }
        if let Some(operator) = entry.operator {
            self.check_operator(operator)?;
        }
        self.insert(entry);
        Ok(())
    }

    /// Refuses an operator the language cannot read, or one an entry
    /// writes already.
    fn check_operator(&self, operator: Operator) -> Result<(), GraphError> {
        let symbol = operator.symbol();
        let invalid = |reason: String| GraphError::InvalidOperator {
            symbol: symbol.to_string(),
            reason,
        };
        let unreadable =
            |c: char| c.is_alphanumeric() || c.is_whitespace() || "()\"#=,_.".contains(c);
        if symbol.is_empty() {
            return Err(invalid("an operator has one character at least".into()));
        }
        if let Some(c) = symbol.chars().find(|&c| unreadable(c)) {
            return Err(invalid(format!(
                "`{c}` cannot be part of an operator (letters, digits, spaces, parentheses, quotes, `#`, `=`, `,`, `_` and `.` mean other things in programs)"
            )));
        }
        if let Some(other) = self.by_operator(operator) {
            return Err(invalid(format!(
                "`{}` is written with it already",
                other.name()
            )));
        }
        Ok(())
    }

    /// The entry called `name`.
    pub fn get(&self, name: &str) -> Option<&OpEntry> {
        self.by_name.get(name).map(|&i| &self.entries[i])
    }

    /// The entry written with `operator` (an infix operator whatever its
    /// precedence).
    pub fn by_operator(&self, operator: Operator) -> Option<&OpEntry> {
        match operator {
            Operator::Infix(symbol, _) => self.by_infix(symbol),
            Operator::Prefix(symbol) => self.by_prefix(symbol),
        }
    }

    /// The entry written with the infix operator `symbol`.
    pub fn by_infix(&self, symbol: &str) -> Option<&OpEntry> {
        self.entries
            .iter()
            .find(|e| matches!(e.operator, Some(Operator::Infix(s, _)) if s == symbol))
    }

    /// The entry written with the prefix operator `symbol`.
    pub fn by_prefix(&self, symbol: &str) -> Option<&OpEntry> {
        self.entries
            .iter()
            .find(|e| matches!(e.operator, Some(Operator::Prefix(s)) if s == symbol))
    }

    /// Every infix operator with its precedence, longest symbol first (the
    /// order a parser tries them in, so that `**` is not read as `*`).
    ///
    /// ```
    /// use shape_graph::{Precedence, Registry};
    /// let ops = Registry::builtin().infix_operators();
    /// assert!(ops.contains(&("+", Precedence::SUM)));
    /// assert!(ops.contains(&("@", Precedence::PRODUCT)));
    /// ```
    pub fn infix_operators(&self) -> Vec<(&'static str, Precedence)> {
        let mut ops: Vec<(&'static str, Precedence)> = (self.entries.iter())
            .filter_map(|e| match e.operator {
                Some(Operator::Infix(s, p)) => Some((s, p)),
                _ => None,
            })
            .collect();
        ops.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
        ops
    }

    /// Every entry, in the order they were added.
    pub fn entries(&self) -> impl Iterator<Item = &OpEntry> {
        self.entries.iter()
    }

    /// Every name, in the order they were added.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|e| e.name()).collect()
    }

    /// The entry called `name`, or an error listing the names there are.
    pub fn lookup(&self, name: &str) -> Result<&OpEntry, GraphError> {
        self.get(name).ok_or_else(|| GraphError::UnknownFunction {
            name: name.to_string(),
            known: self.names().into_iter().map(str::to_string).collect(),
        })
    }
}
