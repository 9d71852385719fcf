//! What can go wrong when a vectorized call is bound or resolved.

/// At most this many characters of user text are quoted in a message.
const QUOTE: usize = 120;

/// `text`, shortened to [`QUOTE`] characters with `...` when longer.
pub(crate) fn quoted(text: &str) -> String {
    let mut chars = text.chars();
    let head: String = chars.by_ref().take(QUOTE).collect();
    if chars.next().is_some() {
        format!("{head}...")
    } else {
        head
    }
}

/// The names among `known` that `name` is a small edit away from (at most
/// a third of its length, and at least one edit), closest first: what a
/// misspelt parameter probably meant.
pub(crate) fn close_matches<'a>(
    name: &str,
    known: impl IntoIterator<Item = &'a str>,
) -> Vec<String> {
    let limit = (name.chars().count() / 3).max(1);
    let mut close: Vec<(usize, &str)> = known
        .into_iter()
        .map(|k| (strsim::levenshtein(name, k), k))
        .filter(|&(d, _)| d <= limit)
        .collect();
    close.sort();
    close.dedup();
    close.into_iter().map(|(_, k)| k.to_owned()).collect()
}

/// `, at PLACE`, or nothing for no place.
fn place(at: &str) -> String {
    if at.is_empty() {
        String::new()
    } else {
        format!(", at {at}")
    }
}

/// `; did you mean `a` or `b`?`, or nothing for no names.
fn did_you_mean(close: &[String]) -> String {
    match close {
        [] => String::new(),
        [one] => format!("; did you mean `{one}`?"),
        [init @ .., last] => {
            let init: Vec<String> = init.iter().map(|n| format!("`{n}`")).collect();
            format!("; did you mean {} or `{last}`?", init.join(", "))
        }
    }
}

/// An error of a vectorized call: a signature or argument that cannot be
/// read, an argument that cannot bind to its parameter, no overload or
/// several, or sizes that break broadcasting at call time. Argument paths
/// are `a`, `p.position` (a struct field) or `_result`.
#[derive(
    Clone, Debug, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames,
)]
#[strum(serialize_all = "snake_case")]
#[non_exhaustive]
pub enum CallError {
    /// A signature, type or argument that cannot be read.
    #[error("`{text}`, at character {at}: {message}")]
    Syntax {
        /// The text (shortened when long).
        text: String,
        /// The byte offset of the problem.
        at: usize,
        /// What is wrong.
        message: String,
    },
    /// WGSL source that naga does not accept, or that has no function.
    #[error("WGSL signature: {0}")]
    Wgsl(String),
    /// A WGSL type that has no type shape here.
    #[error("WGSL signature: parameter `{param}` has type {ty}, which calls cannot take")]
    UnsupportedType {
        /// The parameter.
        param: String,
        /// Its type, as naga describes it.
        ty: String,
    },
    /// More positional arguments than parameters.
    #[error("{function}: too many arguments: expected at most {expected}, got {found}")]
    TooManyArguments {
        /// The overload.
        function: String,
        /// Its number of parameters.
        expected: usize,
        /// The arguments given.
        found: usize,
    },
    /// A keyword argument, map or struct field that no parameter has.
    #[error(
        "{function}: no parameter or field named `{name}`{}",
        did_you_mean(close)
    )]
    UnknownParameter {
        /// The overload.
        function: String,
        /// The name given.
        name: String,
        /// The names it could have meant (a small edit away), closest first.
        close: Vec<String>,
    },
    /// A parameter given twice.
    #[error("{function}: parameter `{name}` is given more than once")]
    DuplicateArgument {
        /// The overload.
        function: String,
        /// The parameter.
        name: String,
    },
    /// A parameter (or struct field) with no argument.
    #[error("{function}: parameter `{name}` is not given")]
    MissingArgument {
        /// The overload.
        function: String,
        /// The parameter.
        name: String,
    },
    /// Element types that differ: no implicit conversion between concrete
    /// types.
    #[error("argument `{arg}`: {found} cannot bind to parameter type {param_type}: {reason}")]
    TypeMismatch {
        /// The argument's path.
        arg: String,
        /// The parameter's type.
        param_type: String,
        /// What the argument is.
        found: String,
        /// Why not.
        reason: String,
    },
    /// An argument with fewer dims than its parameter's type consumes.
    #[error("argument `{arg}` has {found} dims, but parameter type {param_type} consumes {needed} (its type shape is {type_shape})")]
    Dimensionality {
        /// The argument's path.
        arg: String,
        /// The argument's dims (after any map).
        found: usize,
        /// The dims the type consumes.
        needed: usize,
        /// The parameter's type.
        param_type: String,
        /// Its type shape, as `(3)`.
        type_shape: String,
    },
    /// An argument's size that its parameter's type does not allow.
    #[error("argument `{arg}`: its axis {axis} has size {found}, but parameter type {param_type} needs {required} there")]
    TypeShape {
        /// The argument's path.
        arg: String,
        /// The axis of the argument (after any map).
        axis: usize,
        /// Its size.
        found: u64,
        /// The size the type needs, and why.
        required: String,
        /// The parameter's type.
        param_type: String,
    },
    /// A `map` that does not fit its argument.
    #[error("map for `{arg}`: {message}")]
    InvalidMap {
        /// The argument's path.
        arg: String,
        /// What is wrong.
        message: String,
    },
    /// A `vmap` that does not fit the call.
    #[error("vmap `{spec}`: {message}")]
    InvalidVmap {
        /// The vmap as written.
        spec: String,
        /// What is wrong.
        message: String,
    },
    /// No overload takes the arguments.
    #[error("no overload of `{function}` takes these arguments:{}", candidates.iter().map(|(s, why)| format!("\n  {s}: {why}")).collect::<String>())]
    NoMatchingOverload {
        /// The function's name.
        function: String,
        /// Each candidate with why it failed.
        candidates: Vec<(String, String)>,
    },
    /// More than one overload, or more than one binding of a generic
    /// type, takes the arguments.
    #[error("the call of `{function}` is ambiguous: {} candidates take these arguments:{}", candidates.len(), candidates.iter().map(|s| format!("\n  {s}")).collect::<String>())]
    AmbiguousOverload {
        /// The function's name.
        function: String,
        /// The overloads that match.
        candidates: Vec<String>,
    },
    /// A generic size that only a call's sizes would fix: a kernel's types
    /// are fixed when it is generated, before any size is known.
    #[error("{function}: the generic size `{generic}` is fixed by no value, element type or specialization; only the trailing size of `{arg}`, known when the call runs, would give it. Give `{arg}` an element type that fixes it (`tensor<float3>(..)`), pass a value, or specialize (`{name}<..>`, `--specialize {generic}=..`)")]
    Unspecialized {
        /// The overload.
        function: String,
        /// The function's name.
        name: String,
        /// The generic size.
        generic: String,
        /// The argument whose size would have given it.
        arg: String,
    },
    /// A specialization that names no generic parameter, or gives a type
    /// for a size or a size for a type.
    #[error("specialization `{text}`: {message}")]
    InvalidSpecialization {
        /// The specialization as written (shortened when long).
        text: String,
        /// What is wrong.
        message: String,
    },
    /// Sizes that break NumPy's broadcasting on a call axis.
    #[error("call axis {axis}: argument `{arg}` has size {size} (its axis {arg_axis}), but `{other}` gave the call size {other_size}; sizes must be equal or 1")]
    BroadcastMismatch {
        /// The call axis.
        axis: usize,
        /// The argument that does not fit.
        arg: String,
        /// Its axis.
        arg_axis: usize,
        /// Its size.
        size: u64,
        /// The argument that set the call size.
        other: String,
        /// The call size.
        other_size: u64,
    },
    /// An output that many call indices write (fixed shape, or smaller
    /// than the call shape); allowed only on request.
    #[error("output `{arg}` would be written by {size} calls along call axis {axis} (it does not vary along it): a race; allow races explicitly if any one value may remain")]
    Race {
        /// The output's path.
        arg: String,
        /// The call axis it does not vary along.
        axis: usize,
        /// The call size along it.
        size: u64,
    },
    /// An output asked to have more dims than the call can define.
    #[error("output `{arg}`: {dims} dims were asked for, but the call shape has {call_dims}: {} leading dims are undefinable", dims - call_dims)]
    UndefinableDimensions {
        /// The output's path.
        arg: String,
        /// The dims asked for.
        dims: usize,
        /// The call's dims.
        call_dims: usize,
    },
    /// An output to allocate that cannot be: bound to an `in` parameter,
    /// or of a type with `?` sizes.
    #[error("argument `{arg}`: {message}")]
    UnsizedOutput {
        /// The argument's path.
        arg: String,
        /// Why.
        message: String,
    },
    /// A number of buffers other than the call's leaves: one per
    /// argument leaf (parameters in order, struct fields in order), then
    /// the result's.
    #[error(
        "{given} buffer(s) were given, but the call reads {}: one per argument, in order ({}), the result last",
        leaves.len(),
        leaves.join(", ")
    )]
    BufferCount {
        /// How many were given.
        given: usize,
        /// The leaves' paths, in the order their buffers are taken.
        leaves: Vec<String>,
    },
    /// Data for a run that does not fit the call's arguments.
    #[error("argument `{arg}`: {message}")]
    Data {
        /// The argument's path.
        arg: String,
        /// What is wrong.
        message: String,
    },
    /// A WGSL construct the interpreter (the CPU reference for WGSL
    /// functions) does not run: named, with its place in the source.
    #[error(
        "{function}: the CPU interpreter does not run {construct}{}",
        place(at)
    )]
    UnsupportedWgsl {
        /// The function it is in.
        function: String,
        /// What it is (`the statement Atomic (atomics)`, `the built-in
        /// `pack4x8snorm``).
        construct: String,
        /// `line L, column C: `text`` in the user's source; empty when
        /// unknown.
        at: String,
    },
    /// A call index ran more statements and loop iterations than the
    /// interpreter's step limit allows: a runaway loop.
    #[error("{function}: stopped after {limit} steps for one call index{} (a loop that does not end?); if it is meant to run that long, raise the limit (`InterpretOptions::step_limit`, `shapec call --step-limit N`)", place(at))]
    StepLimit {
        /// The function that was running.
        function: String,
        /// The limit.
        limit: u64,
        /// Where it was stopped.
        at: String,
    },
    /// A built-in given an operand outside the domain WGSL specifies it
    /// on, or a float result that is not finite, when the interpreter
    /// checks domains (`InterpretOptions::check_domains`).
    #[error(
        "{function}: {what} was given {value}{}; a GPU may compute anything there",
        place(at)
    )]
    OutOfDomain {
        /// The function it is in.
        function: String,
        /// The built-in or operator and its domain.
        what: String,
        /// The operand or result.
        value: String,
        /// Where.
        at: String,
    },
    /// A function that cannot be an operation of a graph: only a function
    /// of value parameters (`in`, with fixed-size types: scalars,
    /// vectors, matrices, fixed arrays) that returns a value, written in
    /// WGSL (or with a WGSL body), is one.
    #[error("`{function}` cannot be a graph operation: {reason}")]
    NotAnOperation {
        /// The function.
        function: String,
        /// Why not.
        reason: String,
    },
    /// A call whose arguments differ in kind, element type or dims from
    /// those the call was bound with.
    #[error(
        "argument `{arg}` differs from the one the call was bound with: {message}; bind again"
    )]
    Rebind {
        /// The argument's path.
        arg: String,
        /// What differs.
        message: String,
    },
}

impl CallError {
    /// A stable, machine-readable name for the error's kind.
    pub fn kind(&self) -> &'static str {
        self.into()
    }

    pub(crate) fn syntax(text: &str, at: usize, message: String) -> CallError {
        CallError::Syntax {
            text: quoted(text),
            at,
            message,
        }
    }
}
