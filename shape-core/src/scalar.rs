//! The scalar functions, each defined once: its name in programs, what it
//! computes (the CPU reference's definition), its WGSL spelling, how far
//! backends may agree on it, and the operator that writes it in programs.
//! The kernel IR's [`UnaryOp`] and [`BinaryOp`], the pointwise operations
//! of `shape-graph` and their operators in the program language, both
//! backends, the random program and kernel generators and the docs'
//! function table all come from the two tables below ([`unary_table!`](crate::unary_table),
//! [`binary_table!`](crate::binary_table), exported so that other crates generate from them
//! too): a new function is one entry there (and its tests).

/// The items both tables give each function: the list of all, the name,
/// the summary, and the look-up by name.
macro_rules! table_basics {
    ($ty:ident, $($variant:ident => $name:ident, $summary:literal);*) => {
        /// Every function, in the table's order.
        pub const ALL: &'static [$ty] = &[$($ty::$variant),*];

        /// The name programs call it by.
        pub fn name(self) -> &'static str {
            match self { $($ty::$variant => stringify!($name),)* }
        }

        /// What it computes, in words, for listings.
        pub fn summary(self) -> &'static str {
            match self { $($ty::$variant => $summary,)* }
        }

        /// The function of that name, if there is one.
        pub fn named(name: &str) -> Option<$ty> {
            $ty::ALL.iter().copied().find(|op| op.name() == name)
        }
    };
}

/// Defines [`UnaryOp`] and its table from one entry per function:
///
/// ```text
/// /// doc
/// Variant => {
///     name: name,              // as programs call it (and tensor methods)
///     summary: "what it is",   // for listings
///     eval: |x: f32| ...,      // the CPU reference's definition
///     wgsl: "fn_name",         // a WGSL builtin, or a function of `wgsl_fn`
///     wgsl_fn: Some("fn ..."), // its WGSL definition, if not a builtin
///     exact: bool,             // whether backends agree to the last bit
///     finite: bool,            // whether it keeps random values finite
///     prefix: Some("-"),       // its prefix operator in programs, if any
/// }
/// ```
macro_rules! unary_functions {
    ($(
        $(#[$doc:meta])*
        $variant:ident => {
            name: $name:ident,
            summary: $summary:literal,
            eval: $eval:expr,
            wgsl: $wgsl:literal,
            wgsl_fn: $wgsl_fn:expr,
            exact: $exact:literal,
            finite: $finite:literal,
            prefix: $prefix:expr $(,)?
        }
    ),* $(,)?) => {
        /// A unary scalar function of the kernel IR (the table in
        /// [`crate::scalar`]).
        ///
        /// `#[non_exhaustive]`: new functions are additions.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum UnaryOp {
            $($(#[$doc])* $variant,)*
        }

        impl UnaryOp {
            table_basics!(UnaryOp, $($variant => $name, $summary);*);

            /// Its value at `x`: the CPU reference's definition, which
            /// every backend matches.
            pub fn eval(self, x: f32) -> f32 {
                match self { $(UnaryOp::$variant => ($eval)(x),)* }
            }

            /// Calls `f` with the function as a closure of its own type,
            /// so that a loop over many values is compiled once per
            /// function, with the function inlined.
            pub fn with<F: WithUnary>(self, f: F) -> F::Output {
                match self { $(UnaryOp::$variant => f.call($eval),)* }
            }

            /// How WGSL calls it: a builtin, or a function of
            /// [`UnaryOp::wgsl_definition`].
            pub fn wgsl(self) -> &'static str {
                match self { $(UnaryOp::$variant => $wgsl,)* }
            }

            /// The WGSL definition of [`UnaryOp::wgsl`] where it is not a
            /// builtin (it may call the prelude's `fmax`, `fmin` and
            /// `is_nan`).
            pub fn wgsl_definition(self) -> Option<&'static str> {
                match self { $(UnaryOp::$variant => $wgsl_fn,)* }
            }

            /// Whether every backend computes it to the last bit (false
            /// for transcendental functions, which GPUs round otherwise).
            pub fn exact(self) -> bool {
                match self { $(UnaryOp::$variant => $exact,)* }
            }

            /// Whether random values stay finite enough through it for
            /// backends to agree within their tolerance (what random
            /// programs may draw).
            pub fn keeps_values_finite(self) -> bool {
                match self { $(UnaryOp::$variant => $finite,)* }
            }

            /// Its prefix operator in programs (`-x`), if it has one.
            pub fn prefix_operator(self) -> Option<&'static str> {
                match self { $(UnaryOp::$variant => $prefix,)* }
            }
        }
    };
}

/// A computation over values that takes the unary function as a closure of
/// its own type ([`UnaryOp::with`]).
pub trait WithUnary {
    /// What the computation gives.
    type Output;
    /// Runs the computation with `f`.
    fn call(self, f: impl Fn(f32) -> f32 + Copy) -> Self::Output;
}

/// The larger of `a` and `b`, defined for every input so that the result
/// does not depend on the machine or the operands' order: a NaN operand
/// yields the other (as `f32::max`, IEEE 754's `maximumNumber`), and of
/// two zeros +0 is the larger (`f32::max` leaves that unspecified, and
/// GPUs differ). Every backend computes `max` and maximum reductions as
/// this (the WGSL prelude's `fmax`).
pub fn max_number(a: f32, b: f32) -> f32 {
    if a.is_nan() || b > a {
        b
    } else if b.is_nan() || a > b {
        a
    } else if a.is_sign_negative() {
        // Equal: the same value, or two zeros of which `b` is the larger.
        b
    } else {
        a
    }
}

/// The smaller of `a` and `b`, as [`max_number`] the other way: a NaN
/// operand yields the other, and of two zeros -0 is the smaller.
pub fn min_number(a: f32, b: f32) -> f32 {
    if a.is_nan() || b < a || (a == b && b.is_sign_negative()) {
        // Equal: the same value, or two zeros of which `b` is the smaller.
        b
    } else {
        a
    }
}

/// `max(x, 0)`, with NaN kept (as numpy's and torch's `relu` keep it; a
/// plain `f32::max` would give 0). Every backend computes `relu` as this.
pub fn relu(x: f32) -> f32 {
    if x.is_nan() {
        x
    } else {
        max_number(x, 0.0)
    }
}

/// The unary functions' table: passes its entries (in the form
/// `unary_functions!` documents) to the macro `$m`. This crate defines
/// [`UnaryOp`] from it; other crates generate from it too (`shape-graph`'s
/// tensor methods), so that a function added here reaches them all.
#[macro_export]
macro_rules! unary_table {
    ($m:ident) => {
        $m! {
            /// `-x`
            Neg => {
                name: neg,
                summary: "-x",
                eval: |x: f32| -x,
                wgsl: "-",
                wgsl_fn: None,
                exact: true,
                finite: true,
                prefix: Some("-"),
            },
            /// `e^x`
            Exp => {
                name: exp,
                summary: "e to the power x",
                eval: f32::exp,
                wgsl: "exp",
                wgsl_fn: None,
                exact: false,
                finite: true,
                prefix: None,
            },
            /// natural logarithm
            Log => {
                name: log,
                summary: "the natural logarithm",
                eval: f32::ln,
                wgsl: "log",
                wgsl_fn: None,
                exact: false,
                finite: false,
                prefix: None,
            },
            /// square root
            Sqrt => {
                name: sqrt,
                summary: "the square root",
                eval: f32::sqrt,
                wgsl: "sqrt",
                wgsl_fn: None,
                exact: false,
                finite: false,
                prefix: None,
            },
            /// `max(x, 0)`, NaN kept
            Relu => {
                name: relu,
                summary: "max(x, 0)",
                eval: $crate::scalar::relu,
                wgsl: "relu",
                wgsl_fn: Some("fn relu(x: f32) -> f32 { return select(fmax(x, 0.0), x, is_nan(x)); }"),
                exact: true,
                finite: true,
                prefix: None,
            },
            /// `1 / (1 + e^-x)`, the logistic function
            Sigmoid => {
                name: sigmoid,
                summary: "1 / (1 + e^-x)",
                eval: |x: f32| 1.0 / (1.0 + (-x).exp()),
                wgsl: "sigmoid",
                wgsl_fn: Some("fn sigmoid(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }"),
                exact: false,
                finite: true,
                prefix: None,
            },
        }
    };
}

unary_table!(unary_functions);

/// How tightly an infix operator binds in programs: a higher level binds
/// tighter, and operators of one level associate to the left (`a - b - c`
/// is `(a - b) - c`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Precedence(pub u8);

impl Precedence {
    /// The level of `+` and `-`.
    pub const SUM: Precedence = Precedence(10);
    /// The level of `*`, `/` and `@`.
    pub const PRODUCT: Precedence = Precedence(20);
}

/// How WGSL writes a binary function.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum WgslBinary {
    /// An infix operator: `(a + b)`.
    Infix(&'static str),
    /// A function: `fmax(a, b)`, a builtin or one of the prelude's.
    Call(&'static str),
}

/// Defines [`BinaryOp`] and its table from one entry per function:
///
/// ```text
/// /// doc
/// Variant => {
///     name: name,                   // as programs call it (and tensor methods)
///     summary: "what it is",        // for listings
///     eval: |x: f32, y: f32| ...,   // the CPU reference's definition
///     wgsl: WgslBinary::Infix("+"), // how WGSL writes it
///     sampled: bool,                // whether random programs draw it
///     infix: Some(("+", Precedence::SUM)), // its infix operator in programs
/// }
/// ```
macro_rules! binary_functions {
    ($(
        $(#[$doc:meta])*
        $variant:ident => {
            name: $name:ident,
            summary: $summary:literal,
            eval: $eval:expr,
            wgsl: $wgsl:expr,
            sampled: $sampled:literal,
            infix: $infix:expr $(,)?
        }
    ),* $(,)?) => {
        /// A binary scalar function of the kernel IR (the table in
        /// [`crate::scalar`]).
        ///
        /// `#[non_exhaustive]`: new functions are additions.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum BinaryOp {
            $($(#[$doc])* $variant,)*
        }

        impl BinaryOp {
            table_basics!(BinaryOp, $($variant => $name, $summary);*);

            /// Its value at `(x, y)`: the CPU reference's definition, which
            /// every backend matches.
            pub fn eval(self, x: f32, y: f32) -> f32 {
                match self { $(BinaryOp::$variant => ($eval)(x, y),)* }
            }

            /// Calls `f` with the function as a closure of its own type,
            /// so that a loop over many values is compiled once per
            /// function, with the function inlined.
            pub fn with<F: WithBinary>(self, f: F) -> F::Output {
                match self { $(BinaryOp::$variant => f.call($eval),)* }
            }

            /// How WGSL writes it.
            pub fn wgsl(self) -> WgslBinary {
                match self { $(BinaryOp::$variant => $wgsl,)* }
            }

            /// Whether random programs draw it (division is left out:
            /// dividing by values near zero makes backends disagree
            /// beyond any tolerance).
            pub fn sampled(self) -> bool {
                match self { $(BinaryOp::$variant => $sampled,)* }
            }

            /// Its infix operator in programs and how tightly it binds,
            /// if it has one.
            pub fn infix_operator(self) -> Option<(&'static str, Precedence)> {
                match self { $(BinaryOp::$variant => $infix,)* }
            }
        }
    };
}

/// A computation over values that takes the binary function as a closure
/// of its own type ([`BinaryOp::with`]).
pub trait WithBinary {
    /// What the computation gives.
    type Output;
    /// Runs the computation with `f`.
    fn call(self, f: impl Fn(f32, f32) -> f32 + Copy) -> Self::Output;
}

/// The binary functions' table: passes its entries (in the form
/// `binary_functions!` documents) to the macro `$m` (see
/// [`unary_table!`](crate::unary_table)).
#[macro_export]
macro_rules! binary_table {
    ($m:ident) => {
        $m! {
            /// `a + b`
            Add => {
                name: add,
                summary: "a + b",
                eval: |x: f32, y: f32| x + y,
                wgsl: $crate::scalar::WgslBinary::Infix("+"),
                sampled: true,
                infix: Some(("+", $crate::scalar::Precedence::SUM)),
            },
            /// `a - b`
            Sub => {
                name: sub,
                summary: "a - b",
                eval: |x: f32, y: f32| x - y,
                wgsl: $crate::scalar::WgslBinary::Infix("-"),
                sampled: true,
                infix: Some(("-", $crate::scalar::Precedence::SUM)),
            },
            /// `a * b`
            Mul => {
                name: mul,
                summary: "a * b",
                eval: |x: f32, y: f32| x * y,
                wgsl: $crate::scalar::WgslBinary::Infix("*"),
                sampled: true,
                infix: Some(("*", $crate::scalar::Precedence::PRODUCT)),
            },
            /// `a / b`
            Div => {
                name: div,
                summary: "a / b",
                eval: |x: f32, y: f32| x / y,
                wgsl: $crate::scalar::WgslBinary::Infix("/"),
                sampled: false,
                infix: Some(("/", $crate::scalar::Precedence::PRODUCT)),
            },
            /// `max(a, b)`; a NaN operand yields the other, +0 is above -0 ([`max_number`])
            Max => {
                name: max,
                summary: "the larger of a and b",
                eval: $crate::scalar::max_number,
                // The prelude's `fmax`, which is `max_number`.
                wgsl: $crate::scalar::WgslBinary::Call("fmax"),
                sampled: true,
                infix: None,
            },
            /// `min(a, b)`; a NaN operand yields the other, -0 is below +0 ([`min_number`])
            Min => {
                name: min,
                summary: "the smaller of a and b",
                eval: $crate::scalar::min_number,
                wgsl: $crate::scalar::WgslBinary::Call("fmin"),
                sampled: false,
                infix: None,
            },
        }
    };
}

binary_table!(binary_functions);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found_again() {
        for &op in UnaryOp::ALL {
            assert_eq!(UnaryOp::named(op.name()), Some(op));
        }
        let mut names: Vec<&str> = UnaryOp::ALL.iter().map(|op| op.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), UnaryOp::ALL.len());
    }

    #[test]
    fn with_gives_the_same_function_as_eval() {
        struct At(f32);
        impl WithUnary for At {
            type Output = f32;
            fn call(self, f: impl Fn(f32) -> f32 + Copy) -> f32 {
                f(self.0)
            }
        }
        for &op in UnaryOp::ALL {
            for x in [-2.5f32, -0.0, 0.0, 0.5, 3.0, f32::INFINITY] {
                assert_eq!(
                    op.with(At(x)).to_bits(),
                    op.eval(x).to_bits(),
                    "{op:?}({x})"
                );
            }
            assert!(op.with(At(f32::NAN)).is_nan() == op.eval(f32::NAN).is_nan());
        }
    }

    #[test]
    fn binary_names_are_unique_and_with_gives_eval() {
        struct At(f32, f32);
        impl WithBinary for At {
            type Output = f32;
            fn call(self, f: impl Fn(f32, f32) -> f32 + Copy) -> f32 {
                f(self.0, self.1)
            }
        }
        let mut names: Vec<&str> = BinaryOp::ALL.iter().map(|op| op.name()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), BinaryOp::ALL.len());
        let values = [-2.5f32, -0.0, 0.0, 0.5, 3.0, f32::INFINITY, f32::NAN];
        for &op in BinaryOp::ALL {
            assert_eq!(BinaryOp::named(op.name()), Some(op));
            for x in values {
                for y in values {
                    let (a, b) = (op.with(At(x, y)), op.eval(x, y));
                    assert!(
                        a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                        "{op:?}({x}, {y})"
                    );
                }
            }
        }
        // Operators are unique too, and every one has a precedence.
        let mut symbols: Vec<&str> = (BinaryOp::ALL.iter())
            .filter_map(|op| op.infix_operator().map(|(s, _)| s))
            .collect();
        let n = symbols.len();
        symbols.sort();
        symbols.dedup();
        assert_eq!(symbols.len(), n);
    }

    #[test]
    fn binary_values_by_their_textbook_rules() {
        // Against the rules as written, not against `eval`'s table entry.
        assert_eq!(BinaryOp::Add.eval(2.0, 3.0), 5.0);
        assert_eq!(BinaryOp::Sub.eval(2.0, 3.0), -1.0);
        assert_eq!(BinaryOp::Mul.eval(2.0, 3.0), 6.0);
        assert_eq!(BinaryOp::Div.eval(3.0, 2.0), 1.5);
        // max and min pass over a NaN operand, as f32::max and numpy's fmax.
        assert_eq!(BinaryOp::Max.eval(f32::NAN, 1.0), 1.0);
        assert_eq!(BinaryOp::Min.eval(1.0, f32::NAN), 1.0);
        assert_eq!(BinaryOp::Max.eval(-1.0, 2.0), 2.0);
        assert_eq!(BinaryOp::Min.eval(-1.0, 2.0), -1.0);
        use crate::kernel::Accumulate;
        // Of two zeros, max gives +0 and min -0, in either order (found by
        // `backends_agree_on_every_program`: llvmpipe's `max(+0, -0)` gave
        // -0 where the CPU gave +0, and a division turned that into -inf
        // against +inf).
        for (a, b) in [(0.0f32, -0.0f32), (-0.0, 0.0)] {
            assert_eq!(BinaryOp::Max.eval(a, b).to_bits(), 0.0f32.to_bits());
            assert_eq!(BinaryOp::Min.eval(a, b).to_bits(), (-0.0f32).to_bits());
            assert_eq!(Accumulate::Max.combine(a, b).to_bits(), 0.0f32.to_bits());
            assert_eq!(Accumulate::Min.combine(a, b).to_bits(), (-0.0f32).to_bits());
        }
        assert_eq!(relu(-0.0).to_bits(), 0.0f32.to_bits());
        assert!(Precedence::SUM < Precedence::PRODUCT);
        assert_eq!(BinaryOp::Add.infix_operator(), Some(("+", Precedence::SUM)));
        assert_eq!(BinaryOp::Max.infix_operator(), None);
    }

    #[test]
    fn independent_values() {
        // Checked against the textbook values, not against `eval` itself.
        let close = |a: f32, b: f32| (a - b).abs() <= 1e-6 * b.abs().max(1.0);
        assert!(close(UnaryOp::Sigmoid.eval(0.0), 0.5));
        assert!(close(UnaryOp::Sigmoid.eval(2.0), 0.880_797_1));
        assert!(close(UnaryOp::Sigmoid.eval(-2.0), 0.119_202_92));
        assert_eq!(UnaryOp::Sigmoid.eval(f32::INFINITY), 1.0);
        assert_eq!(UnaryOp::Sigmoid.eval(f32::NEG_INFINITY), 0.0);
        assert!(UnaryOp::Relu.eval(f32::NAN).is_nan());
        assert_eq!(UnaryOp::Relu.eval(-3.0), 0.0);
        assert!(close(UnaryOp::Exp.eval(1.0), std::f32::consts::E));
    }
}
