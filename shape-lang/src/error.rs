//! What can go wrong in a program, located in its text.

use shape_graph::GraphError;

use crate::syntax::{Span, SyntaxError};

/// A labelled place in the program text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Note {
    /// Where.
    pub span: Span,
    /// What it says there.
    pub text: String,
}

/// An error located in a program's text.
///
/// [`ProgramError::kind`] is the variant's name in snake case (or the
/// library error's own kind), written beside the variant where it differs.
#[derive(Debug, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
#[strum(serialize_all = "snake_case")]
pub enum ProgramError {
    /// The text does not parse.
    #[error(transparent)]
    Syntax(#[from] SyntaxError),
    /// A name that no statement above defines.
    #[error("unknown tensor `{name}`: no statement above defines it")]
    UnknownName {
        /// The name.
        name: String,
        /// Where it is used.
        span: Span,
    },
    /// A name defined twice.
    #[error("`{name}` is already defined; every tensor is defined once (pick a new name)")]
    Redefined {
        /// The name.
        name: String,
        /// The second definition.
        span: Span,
        /// The first.
        previous: Span,
    },
    /// A call of a function the language does not have.
    #[error("unknown function `{name}`; the functions are {}", crate::compile::function_names().join(", "))]
    UnknownFunction {
        /// The name.
        name: String,
        /// Where.
        span: Span,
    },
    /// A `function` statement whose WGSL is not a function that can be
    /// an operation: not valid WGSL (`wgsl`), a function that writes its
    /// parameters or returns nothing (`not_an_operation`), a name other
    /// The kind is the function's own error's.
    #[error("function `{name}`: {message}")]
    InvalidFunction {
        /// The function's name in the statement.
        name: String,
        /// The error's kind.
        kind: &'static str,
        /// What is wrong.
        message: String,
        /// The statement's source (or name).
        span: Span,
    },
    /// A `function` statement whose name is not its WGSL function's (the
    /// last function of the source).
    #[error("`function {name}` gives WGSL whose function is `{found}`; give the statement the function's own name")]
    FunctionName {
        /// The statement's name.
        name: String,
        /// The WGSL function's name.
        found: String,
        /// The statement's name.
        span: Span,
    },
    /// A `function` statement naming a built-in operation or a function
    /// defined above.
    #[error("`{name}` is already a function; a `function` statement gives a new name")]
    FunctionRedefined {
        /// The name.
        name: String,
        /// The statement's name.
        span: Span,
    },
    /// A `function` statement in a build without shape-lang's `call`
    /// feature.
    #[error("`function` statements need shape-lang's `call` feature, which this build leaves out")]
    CallsUnavailable {
        /// The statement.
        span: Span,
    },
    /// A call with the wrong kind or number of arguments.
    #[error("`{func}` takes {expected}, but was given {given}")]
    Arguments {
        /// The function.
        func: String,
        /// What it takes.
        expected: String,
        /// What it was given.
        given: String,
        /// The call.
        span: Span,
    },
    /// A malformed shape spec or einsum spec.
    #[error("invalid spec in {context}: expected {}, found {}", error.expected, error.found)]
    Spec {
        /// What the spec is for.
        context: String,
        /// The spec parser's error (its span is relative to the spec).
        error: Box<shape_core::SpecError>,
        /// The offending bytes in the program text.
        span: Span,
    },
    /// A failure of the shape solver or the graph: conflicting shapes,
    /// wrong operand counts, constants that do not fit their shapes.
    #[error("{error}")]
    Graph {
        /// The solver's error, which names the operation, tensors, rows
        /// and axes, and where each conflicting fact came from.
        error: Box<GraphError>,
        /// The operation the error showed up in, by name.
        op: Option<String>,
        /// Where the error showed up, when it can be placed.
        primary: Option<Note>,
        /// Where the facts it involves came from.
        notes: Vec<Note>,
    },
    /// `--slice N` is outside the batch axis that a `batch_slice` takes.
    #[error("--slice {slice} is outside the batch axis of size {size} that `{result}` slices: {}", slice_range(*size))]
    SliceOutOfRange {
        /// The index given.
        slice: u64,
        /// The size of the axis sliced (0 when it is empty).
        size: u64,
        /// The slice's result, by name.
        result: String,
        /// The `batch_slice` expression.
        span: Option<Span>,
    },
    /// A constant whose written sizes multiply to more elements than its
    /// values hold.
    #[error("element count mismatch in the {values} elements of `{name}` declared as \"{spec}\": its known sizes multiply to {product}, more than the {values} values written")]
    #[strum(serialize = "total_elems")]
    ConstantTooLarge {
        /// The constant.
        name: String,
        /// Its spec.
        spec: String,
        /// The number of values written.
        values: usize,
        /// The product of the known sizes, exact, or a bound where it
        /// exceeds 128 bits.
        product: String,
        /// The values.
        span: Span,
    },
    /// Running the program failed.
    #[error("{message}")]
    Run {
        /// What went wrong.
        message: String,
        /// The operation that failed, by name.
        op: Option<String>,
        /// Its place.
        span: Option<Span>,
    },
}

impl ProgramError {
    /// A stable machine-readable name for the error's kind.
    pub fn kind(&self) -> &'static str {
        match self {
            ProgramError::Graph { error, .. } => error.kind(),
            ProgramError::InvalidFunction { kind, .. } => kind,
            _ => self.into(),
        }
    }

    /// The operation the error is about, if any.
    pub fn op(&self) -> Option<&str> {
        match self {
            ProgramError::Graph { op, .. } | ProgramError::Run { op, .. } => op.as_deref(),
            ProgramError::Arguments { func, .. } => Some(func),
            ProgramError::InvalidFunction { name, .. } => Some(name),
            ProgramError::SliceOutOfRange { .. } => Some("batch_slice"),
            _ => None,
        }
    }

    /// The main place of the error in the text.
    pub fn span(&self) -> Option<Span> {
        match self {
            ProgramError::Syntax(e) => Some(e.span.clone()),
            ProgramError::UnknownName { span, .. }
            | ProgramError::Redefined { span, .. }
            | ProgramError::UnknownFunction { span, .. }
            | ProgramError::Arguments { span, .. }
            | ProgramError::InvalidFunction { span, .. }
            | ProgramError::FunctionRedefined { span, .. }
            | ProgramError::FunctionName { span, .. }
            | ProgramError::CallsUnavailable { span }
            | ProgramError::Spec { span, .. }
            | ProgramError::ConstantTooLarge { span, .. } => Some(span.clone()),
            ProgramError::Graph { primary, .. } => primary.as_ref().map(|n| n.span.clone()),
            ProgramError::Run { span, .. } | ProgramError::SliceOutOfRange { span, .. } => {
                span.clone()
            }
        }
    }
}

/// The indices a batch slice takes along an axis of `size`, in words.
pub(crate) fn slice_range(size: u64) -> String {
    match size.checked_sub(1) {
        Some(last) => format!("the index runs from 0 to {last}"),
        None => "the axis is empty, so there is nothing to slice".to_string(),
    }
}
