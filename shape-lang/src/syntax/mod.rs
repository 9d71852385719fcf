//! The text program language: its syntax tree and parser.
//!
//! A program is a sequence of statements, one per line; `#` starts a
//! comment. See `docs/program-language.md` for the reference.
//!
//! ```
//! use shape_lang::syntax::{parse, Statement};
//! let program = parse("input x: 4|8\nparam w\ny = relu(w @ x)  # a layer\n").unwrap();
//! assert_eq!(program.statements.len(), 3);
//! assert!(matches!(&program.statements[2], Statement::Assign { name, .. } if name.text == "y"));
//! ```

mod parse;

use std::fmt;
use std::ops::Range;

pub use parse::{parse, parse_with, SyntaxError};

/// A byte range in the program text.
pub type Span = Range<usize>;

/// A name with its place in the text.
#[derive(Clone, Debug, PartialEq)]
pub struct Ident {
    /// The name.
    pub text: String,
    /// Where it is.
    pub span: Span,
}

/// Spec text (a shape spec or an einsum spec) with its place in the text.
#[derive(Clone, Debug, PartialEq)]
pub struct SpecText {
    /// The spec, exactly as written (without quotes).
    pub text: String,
    /// Where the spec's first byte is, and its end.
    pub span: Span,
}

/// What a declaration declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeclKind {
    /// `input`: data given when the program runs.
    Input,
    /// `param`: a learned value; its shape may be left to inference.
    Param,
    /// `const`: values written in the program.
    Const,
}

impl DeclKind {
    /// The keyword.
    pub fn keyword(self) -> &'static str {
        match self {
            DeclKind::Input => "input",
            DeclKind::Param => "param",
            DeclKind::Const => "const",
        }
    }
}

/// A constant's values, as written in `[...]`.
#[derive(Clone, Debug, PartialEq)]
pub struct Values {
    /// The values.
    pub values: Vec<f32>,
    /// Where the list is, brackets included.
    pub span: Span,
}

/// One statement.
#[derive(Clone, Debug, PartialEq)]
pub enum Statement {
    /// `input NAME: SPEC`, `param NAME`, `param NAME: SPEC`,
    /// `const NAME: SPEC = [v, ...]`.
    Declare {
        /// What is declared.
        kind: DeclKind,
        /// The tensor's name.
        name: Ident,
        /// Its (partial) shape, if given.
        spec: Option<SpecText>,
        /// A constant's values.
        values: Option<Values>,
        /// The whole statement.
        span: Span,
    },
    /// `NAME = EXPR`.
    Assign {
        /// The name given to the result.
        name: Ident,
        /// The expression.
        expr: Expr,
        /// The whole statement.
        span: Span,
    },
    /// `NAME: SPEC <- EXPR`: a tensor of exactly the shape `SPEC` (its
    /// full shape: no row variable), holding `EXPR` broadcast into it one
    /// way only: `EXPR` may broadcast to `SPEC`, never the reverse.
    AssignInto {
        /// The name of the destination.
        name: Ident,
        /// Its full shape.
        spec: SpecText,
        /// The source.
        expr: Expr,
        /// The whole statement.
        span: Span,
    },
    /// `NAME[...] <- EXPR`: every element of the tensor `NAME`, which
    /// exists already (an input, a parameter, a constant or an earlier
    /// result), overwritten by `EXPR` broadcast into it one way only, as
    /// DyND's `a[...] = b`. The tensor keeps its shape (a ragged one its
    /// rows); the statement makes a new version of it, which later
    /// statements read under the same name.
    AssignExisting {
        /// The name of the tensor written.
        name: Ident,
        /// The source.
        expr: Expr,
        /// The whole statement.
        span: Span,
    },
    /// `size NAME` alone: a size known only at run time, kept as a symbol
    /// by inference and bound by `shapec run` (from the data, or
    /// `--size NAME=N`).
    RunTimeSize {
        /// The size's name.
        name: Ident,
        /// The whole statement.
        span: Span,
    },
    /// `size NAME >= n`, `<= n`, `== n` or `% m == r`: a bound on a
    /// named size.
    SizeBound {
        /// The size's name.
        name: Ident,
        /// The bound.
        bound: shape_graph::SizeBound,
        /// The whole statement.
        span: Span,
    },
    /// `size NAME = SOURCE` or `size NAME == OTHER`: a named size.
    Size {
        /// The size's name.
        name: Ident,
        /// What gives it.
        source: SizeSource,
        /// The whole statement.
        span: Span,
    },
    /// `function NAME = "fn NAME(a: T, ..) -> R { BODY }"`: a WGSL
    /// function, then called like a built-in (`y = NAME(a, b)`), its call
    /// shape by the call-shape rules (see `docs/program-language.md`).
    /// Compiled with shape-lang's `call` feature; without it, a
    /// `calls_unavailable` error.
    Function {
        /// The function's name, as calls write it.
        name: Ident,
        /// The WGSL source, inside the quotes.
        source: SpecText,
        /// The whole statement.
        span: Span,
    },
    /// `require NAME: SPEC`.
    Require {
        /// The tensor.
        name: Ident,
        /// The shape it must have.
        spec: SpecText,
        /// The whole statement.
        span: Span,
    },
}

/// What a size statement sets a size to.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeSource {
    /// `= 64`.
    Number(u64, Span),
    /// `= other` or `== other`: another size.
    Size(Ident),
    /// `= j of y`: an einsum label of the operation that made `y` (or a
    /// label of `y`'s declared spec).
    Label {
        /// The label.
        label: Ident,
        /// The tensor.
        of: Ident,
    },
    /// `= ..r.. of x`: the element count of a row variable of a spec.
    RowVar {
        /// The row variable's name (without the dots).
        name: Ident,
        /// The tensor.
        of: Ident,
    },
}

/// An infix operator, as written (`+`); the registry says which function
/// it writes (`add`) and how tightly it binds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct BinOp {
    symbol: &'static str,
}

impl BinOp {
    /// The operator written `symbol`.
    pub fn new(symbol: &'static str) -> BinOp {
        BinOp { symbol }
    }

    /// The operator as written.
    pub fn symbol(self) -> &'static str {
        self.symbol
    }
}

impl fmt::Display for BinOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.symbol())
    }
}

/// An expression with its place in the text.
#[derive(Clone, Debug, PartialEq)]
pub struct Expr {
    /// What it is.
    pub kind: ExprKind,
    /// Where it is.
    pub span: Span,
}

/// The kinds of expression.
#[derive(Clone, Debug, PartialEq)]
pub enum ExprKind {
    /// A tensor by name.
    Name(String),
    /// A number: a one-element constant that broadcasts.
    Number(f32),
    /// `-e`: pointwise `neg`.
    Neg(Box<Expr>),
    /// `a OP b`.
    Binary {
        /// The operator.
        op: BinOp,
        /// The left operand.
        lhs: Box<Expr>,
        /// The right operand.
        rhs: Box<Expr>,
    },
    /// `f(args)`.
    Call {
        /// The function.
        func: Ident,
        /// Its arguments.
        args: Vec<Arg>,
    },
}

/// A function argument.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// A tensor expression.
    Expr(Expr),
    /// A quoted spec string, such as `"ij;jk=>ik"`.
    Spec(SpecText),
}

impl Arg {
    /// Where the argument is.
    pub fn span(&self) -> Span {
        match self {
            Arg::Expr(e) => e.span.clone(),
            Arg::Spec(s) => s.span.clone(),
        }
    }
}

/// A parsed program.
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Program {
    /// The statements in order.
    pub statements: Vec<Statement>,
}
