//! The unary scalar functions, each defined once: its name in programs,
//! what it computes (the CPU reference's definition), its WGSL spelling,
//! and how far backends may agree on it. The kernel IR's [`UnaryOp`], the
//! pointwise operations of `shape-graph`, both backends, the random
//! program and kernel generators and the docs' function table all come
//! from `unary_functions!`'s one list below: a new function is one entry
//! there (and its tests).

/// Defines [`UnaryOp`] and its table from one entry per function:
///
/// ```text
/// /// doc
/// Variant => {
///     name: "name",            // as programs call it
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
            name: $name:literal,
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
            /// Every function, in the table's order.
            pub const ALL: &'static [UnaryOp] = &[$(UnaryOp::$variant),*];

            /// The name programs call it by.
            pub fn name(self) -> &'static str {
                match self { $(UnaryOp::$variant => $name,)* }
            }

            /// What it computes, in words, for listings.
            pub fn summary(self) -> &'static str {
                match self { $(UnaryOp::$variant => $summary,)* }
            }

            /// The function of that name, if there is one.
            pub fn named(name: &str) -> Option<UnaryOp> {
                UnaryOp::ALL.iter().copied().find(|op| op.name() == name)
            }

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

/// `max(x, 0)`, with NaN kept (as numpy's and torch's `relu` keep it; a
/// plain `f32::max` would give 0). Every backend computes `relu` as this.
pub fn relu(x: f32) -> f32 {
    if x.is_nan() {
        x
    } else {
        x.max(0.0)
    }
}

unary_functions! {
    /// `-x`
    Neg => {
        name: "neg",
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
        name: "exp",
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
        name: "log",
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
        name: "sqrt",
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
        name: "relu",
        summary: "max(x, 0)",
        eval: relu,
        wgsl: "relu",
        wgsl_fn: Some("fn relu(x: f32) -> f32 { return select(fmax(x, 0.0), x, is_nan(x)); }"),
        exact: true,
        finite: true,
        prefix: None,
    },
    /// `1 / (1 + e^-x)`, the logistic function
    Sigmoid => {
        name: "sigmoid",
        summary: "1 / (1 + e^-x)",
        eval: |x: f32| 1.0 / (1.0 + (-x).exp()),
        wgsl: "sigmoid",
        wgsl_fn: Some("fn sigmoid(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }"),
        exact: false,
        finite: true,
        prefix: None,
    },
}

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
