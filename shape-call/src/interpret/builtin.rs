//! WGSL's operators, conversions and built-in functions on [`Value`]s,
//! with WGSL's rules: integers wrap, an integer divided by zero is its
//! left operand and its remainder 0, shifts take their amount modulo the
//! bit width, float-to-integer conversions saturate.

use naga::{BinaryOperator as B, MathFunction as M, RelationalFunction, ScalarKind, UnaryOperator};

use super::value::Value;

/// Why an operation has no value: a construct the interpreter does not
/// run, an operand outside a built-in's specified domain (only when
/// domains are checked), or operands of the wrong kinds (which naga's
/// validator rules out for valid modules).
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Fault {
    Unsupported(String),
    Domain { what: String, value: String },
    Kind(String),
}

pub(crate) type Res = Result<Value, Fault>;

fn kind(what: &str, v: &Value) -> Fault {
    Fault::Kind(format!("{what} of a {}", v.type_name()))
}

/// Applies `f` to each component of a scalar or vector.
fn map1(v: &Value, f: &mut dyn FnMut(&Value) -> Res) -> Res {
    match v {
        Value::Vector(c) => Ok(Value::Vector(
            c.iter().map(&mut *f).collect::<Result<_, _>>()?,
        )),
        s => f(s),
    }
}

/// Applies `f` component-wise to scalars or vectors, a scalar operand
/// broadcast over a vector one.
fn map2(a: &Value, b: &Value, f: &mut dyn FnMut(&Value, &Value) -> Res) -> Res {
    match (a, b) {
        (Value::Vector(x), Value::Vector(y)) if x.len() == y.len() => Ok(Value::Vector(
            x.iter()
                .zip(y)
                .map(|(p, q)| f(p, q))
                .collect::<Result<_, _>>()?,
        )),
        (Value::Vector(x), s) if !matches!(s, Value::Vector(_)) => Ok(Value::Vector(
            x.iter().map(|p| f(p, s)).collect::<Result<_, _>>()?,
        )),
        (s, Value::Vector(y)) if !matches!(s, Value::Vector(_)) => Ok(Value::Vector(
            y.iter().map(|q| f(s, q)).collect::<Result<_, _>>()?,
        )),
        (Value::Vector(_), _) | (_, Value::Vector(_)) => {
            Err(Fault::Kind("vectors of different sizes".into()))
        }
        (x, y) => f(x, y),
    }
}

fn map3(a: &Value, b: &Value, c: &Value, f: &mut dyn FnMut(&Value, &Value, &Value) -> Res) -> Res {
    let n = [a, b, c].iter().find_map(|v| match v {
        Value::Vector(x) => Some(x.len()),
        _ => None,
    });
    match n {
        None => f(a, b, c),
        Some(n) => {
            let at = |v: &Value, i: usize| match v {
                Value::Vector(x) => x
                    .get(i)
                    .cloned()
                    .ok_or_else(|| Fault::Kind("vectors of different sizes".into())),
                s => Ok(s.clone()),
            };
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                out.push(f(&at(a, i)?, &at(b, i)?, &at(c, i)?)?);
            }
            Ok(Value::Vector(out))
        }
    }
}

fn f32_of(v: &Value) -> Result<f32, Fault> {
    match v {
        Value::F32(x) => Ok(*x),
        other => Err(kind("a float operation", other)),
    }
}

fn bool_of(v: &Value) -> Result<bool, Fault> {
    match v {
        Value::Bool(b) => Ok(*b),
        other => Err(kind("a boolean operation", other)),
    }
}

/// Checks a float operand against a built-in's specified domain.
pub(crate) struct Domains {
    pub(crate) check: bool,
}

impl Domains {
    /// `what` is only called when the check fails: messages cost nothing
    /// on the way.
    fn require(
        &self,
        ok: bool,
        what: impl FnOnce() -> String,
        value: impl std::fmt::Display,
    ) -> Result<(), Fault> {
        if self.check && !ok {
            return Err(Fault::Domain {
                what: what(),
                value: value.to_string(),
            });
        }
        Ok(())
    }

    /// A float result must be finite where domains are checked: WGSL lets
    /// implementations assume no infinity or NaN.
    pub(crate) fn finite(&self, v: &Value, what: &dyn Fn() -> String) -> Result<(), Fault> {
        if !self.check {
            return Ok(());
        }
        match v {
            Value::F32(x) => self.require(x.is_finite(), what, format!("{x} (not finite)")),
            composite => composite
                .components()
                .iter()
                .try_for_each(|c| self.finite(c, what)),
        }
    }
}

/// `-v`, `!v`, `~v`.
pub(crate) fn unary(op: UnaryOperator, v: &Value) -> Res {
    if let Value::Matrix(cols) = v {
        return Ok(Value::Matrix(
            cols.iter()
                .map(|c| unary(op, c))
                .collect::<Result<_, _>>()?,
        ));
    }
    map1(v, &mut |s| {
        Ok(match (op, s) {
            (UnaryOperator::Negate, Value::F32(x)) => Value::F32(-x),
            (UnaryOperator::Negate, Value::I32(x)) => Value::I32(x.wrapping_neg()),
            (UnaryOperator::LogicalNot, Value::Bool(b)) => Value::Bool(!b),
            (UnaryOperator::BitwiseNot, Value::I32(x)) => Value::I32(!x),
            (UnaryOperator::BitwiseNot, Value::U32(x)) => Value::U32(!x),
            (op, s) => return Err(kind(&format!("{op:?}"), s)),
        })
    })
}

/// `a op b`.
pub(crate) fn binary(op: B, a: &Value, b: &Value, d: &Domains) -> Res {
    if let Some(v) = matrix_binary(op, a, b)? {
        return Ok(v);
    }
    map2(a, b, &mut |x, y| scalar_binary(op, x, y, d))
}

fn dot_f32(a: &[Value], b: &[Value]) -> Result<f32, Fault> {
    let mut s = 0.0f32;
    for (x, y) in a.iter().zip(b) {
        s += f32_of(x)? * f32_of(y)?;
    }
    Ok(s)
}

/// Matrix arithmetic: `m * m`, `m * v`, `v * m`, `m * s`, `s * m`,
/// `m + m`, `m - m`; `None` when neither operand is a matrix.
fn matrix_binary(op: B, a: &Value, b: &Value) -> Result<Option<Value>, Fault> {
    let cols = |m: &[Value]| -> Result<Vec<Vec<Value>>, Fault> {
        Ok(m.iter().map(|c| c.components().to_vec()).collect())
    };
    let v = match (op, a, b) {
        (B::Add | B::Subtract, Value::Matrix(x), Value::Matrix(y)) => Value::Matrix(
            x.iter()
                .zip(y)
                .map(|(p, q)| {
                    map2(p, q, &mut |s, t| {
                        scalar_binary(op, s, t, &Domains { check: false })
                    })
                })
                .collect::<Result<_, _>>()?,
        ),
        (B::Multiply, Value::Matrix(m), s @ Value::F32(_))
        | (B::Multiply, s @ Value::F32(_), Value::Matrix(m)) => Value::Matrix(
            m.iter()
                .map(|c| map2(c, s, &mut |p, q| Ok(Value::F32(f32_of(p)? * f32_of(q)?))))
                .collect::<Result<_, _>>()?,
        ),
        (B::Multiply, Value::Matrix(m), Value::Vector(v)) => {
            // Columns weighted by the vector's components.
            let columns = cols(m)?;
            let rows = columns.first().map_or(0, Vec::len);
            let mut out = vec![0.0f32; rows];
            for (c, col) in columns.iter().enumerate() {
                let w = f32_of(
                    v.get(c)
                        .ok_or_else(|| Fault::Kind("matrix times a short vector".into()))?,
                )?;
                for (r, x) in col.iter().enumerate() {
                    out[r] += f32_of(x)? * w;
                }
            }
            Value::Vector(out.into_iter().map(Value::F32).collect())
        }
        (B::Multiply, Value::Vector(v), Value::Matrix(m)) => Value::Vector(
            m.iter()
                .map(|c| Ok(Value::F32(dot_f32(v, c.components())?)))
                .collect::<Result<_, Fault>>()?,
        ),
        (B::Multiply, Value::Matrix(x), Value::Matrix(y)) => {
            let mut out = Vec::with_capacity(y.len());
            for col in y {
                out.push(
                    matrix_binary(B::Multiply, a, col)?
                        .ok_or_else(|| Fault::Kind("matrix product".into()))?,
                );
            }
            let _ = x;
            Value::Matrix(out)
        }
        (_, Value::Matrix(_), _) | (_, _, Value::Matrix(_)) => {
            return Err(Fault::Kind(format!(
                "{op:?} of {} and {}",
                a.type_name(),
                b.type_name()
            )))
        }
        _ => return Ok(None),
    };
    Ok(Some(v))
}

fn scalar_binary(op: B, x: &Value, y: &Value, d: &Domains) -> Res {
    use Value::{Bool, F32, I32, U32};
    Ok(match (x, y) {
        (F32(a), F32(b)) => {
            let (a, b) = (*a, *b);
            match op {
                B::Add => F32(a + b),
                B::Subtract => F32(a - b),
                B::Multiply => F32(a * b),
                B::Divide => {
                    d.require(
                        b.abs() >= f32::MIN_POSITIVE && b.abs() <= 2f32.powi(126),
                        || "`/` (WGSL specifies division for divisors of magnitude 2^-126 to 2^126)".into(),
                        b,
                    )?;
                    F32(a / b)
                }
                // WGSL: `e1 - e2 * trunc(e1 / e2)`.
                B::Modulo => {
                    d.require(
                        b.abs() >= f32::MIN_POSITIVE && b.abs() <= 2f32.powi(126),
                        || "`%` (WGSL specifies it through division, for divisors of magnitude 2^-126 to 2^126)".into(),
                        b,
                    )?;
                    F32(a - b * (a / b).trunc())
                }
                B::Equal => Bool(a == b),
                B::NotEqual => Bool(a != b),
                B::Less => Bool(a < b),
                B::LessEqual => Bool(a <= b),
                B::Greater => Bool(a > b),
                B::GreaterEqual => Bool(a >= b),
                _ => return Err(kind(&format!("{op:?}"), x)),
            }
        }
        (I32(a), I32(b)) => {
            let (a, b) = (*a, *b);
            // WGSL: division by zero, and i32::MIN / -1, give the left
            // operand; the remainder is then 0.
            let trapped = b == 0 || (a == i32::MIN && b == -1);
            match op {
                B::Add => I32(a.wrapping_add(b)),
                B::Subtract => I32(a.wrapping_sub(b)),
                B::Multiply => I32(a.wrapping_mul(b)),
                B::Divide => I32(if trapped { a } else { a / b }),
                B::Modulo => I32(if trapped { 0 } else { a % b }),
                B::And => I32(a & b),
                B::InclusiveOr => I32(a | b),
                B::ExclusiveOr => I32(a ^ b),
                B::Equal => Bool(a == b),
                B::NotEqual => Bool(a != b),
                B::Less => Bool(a < b),
                B::LessEqual => Bool(a <= b),
                B::Greater => Bool(a > b),
                B::GreaterEqual => Bool(a >= b),
                _ => return Err(kind(&format!("{op:?}"), x)),
            }
        }
        (I32(a), U32(s)) => match op {
            B::ShiftLeft => I32(a.wrapping_shl(*s)),
            B::ShiftRight => I32(a.wrapping_shr(*s)),
            _ => return Err(kind(&format!("{op:?}"), x)),
        },
        (U32(a), U32(b)) => {
            let (a, b) = (*a, *b);
            match op {
                B::Add => U32(a.wrapping_add(b)),
                B::Subtract => U32(a.wrapping_sub(b)),
                B::Multiply => U32(a.wrapping_mul(b)),
                B::Divide => U32(a.checked_div(b).unwrap_or(a)),
                B::Modulo => U32(if b == 0 { 0 } else { a % b }),
                B::And => U32(a & b),
                B::InclusiveOr => U32(a | b),
                B::ExclusiveOr => U32(a ^ b),
                // WGSL takes the shift amount modulo the bit width.
                B::ShiftLeft => U32(a.wrapping_shl(b)),
                B::ShiftRight => U32(a.wrapping_shr(b)),
                B::Equal => Bool(a == b),
                B::NotEqual => Bool(a != b),
                B::Less => Bool(a < b),
                B::LessEqual => Bool(a <= b),
                B::Greater => Bool(a > b),
                B::GreaterEqual => Bool(a >= b),
                B::LogicalAnd | B::LogicalOr => return Err(kind(&format!("{op:?}"), x)),
            }
        }
        (Bool(a), Bool(b)) => {
            let (a, b) = (*a, *b);
            match op {
                B::And | B::LogicalAnd => Bool(a && b),
                B::InclusiveOr | B::LogicalOr => Bool(a || b),
                B::Equal => Bool(a == b),
                B::NotEqual | B::ExclusiveOr => Bool(a != b),
                _ => return Err(kind(&format!("{op:?}"), x)),
            }
        }
        _ => {
            return Err(Fault::Kind(format!(
                "{op:?} of {} and {}",
                x.type_name(),
                y.type_name()
            )))
        }
    })
}

/// `select(reject, accept, condition)`, component-wise for a vector
/// condition.
pub(crate) fn select(condition: &Value, accept: &Value, reject: &Value) -> Res {
    match condition {
        Value::Bool(b) => Ok(if *b { accept } else { reject }.clone()),
        Value::Vector(c) => {
            let mut out = Vec::with_capacity(c.len());
            for (i, b) in c.iter().enumerate() {
                let pick = if bool_of(b)? { accept } else { reject };
                out.push(
                    pick.components().get(i).cloned().ok_or_else(|| {
                        Fault::Kind("select of vectors of different sizes".into())
                    })?,
                );
            }
            Ok(Value::Vector(out))
        }
        other => Err(kind("select's condition", other)),
    }
}

/// `all`, `any`, `isnan`, `isinf`.
pub(crate) fn relational(fun: RelationalFunction, v: &Value) -> Res {
    let bools = |v: &Value| -> Result<Vec<bool>, Fault> {
        match v {
            Value::Vector(c) => c.iter().map(bool_of).collect(),
            s => Ok(vec![bool_of(s)?]),
        }
    };
    Ok(match fun {
        RelationalFunction::All => Value::Bool(bools(v)?.into_iter().all(|b| b)),
        RelationalFunction::Any => Value::Bool(bools(v)?.into_iter().any(|b| b)),
        RelationalFunction::IsNan => map1(v, &mut |s| Ok(Value::Bool(f32_of(s)?.is_nan())))?,
        RelationalFunction::IsInf => map1(v, &mut |s| Ok(Value::Bool(f32_of(s)?.is_infinite())))?,
    })
}

/// A conversion (`convert` is `Some`) or a bitcast (`None`) to `kind`.
pub(crate) fn cast(v: &Value, to: ScalarKind, convert: Option<u8>) -> Res {
    if let Value::Matrix(cols) = v {
        return Ok(Value::Matrix(
            cols.iter()
                .map(|c| cast(c, to, convert))
                .collect::<Result<_, _>>()?,
        ));
    }
    map1(v, &mut |s| {
        if convert.is_some_and(|w| w != 4 && to != ScalarKind::Bool) {
            return Err(Fault::Unsupported(format!(
                "a conversion to a {}-byte scalar (only 32-bit scalars run)",
                convert.unwrap_or(0)
            )));
        }
        Ok(match (convert, to, s) {
            (Some(_), ScalarKind::Float, _) => {
                Value::F32(s.as_f32().ok_or_else(|| kind("a conversion", s))?)
            }
            // Float to integer truncates toward zero and saturates, as
            // WGSL specifies; Rust's `as` does the same.
            (Some(_), ScalarKind::Sint, Value::F32(x)) => Value::I32(*x as i32),
            (Some(_), ScalarKind::Uint, Value::F32(x)) => Value::U32(*x as u32),
            (Some(_), ScalarKind::Sint, Value::U32(x))
            | (None, ScalarKind::Sint, Value::U32(x)) => Value::I32(*x as i32),
            (Some(_), ScalarKind::Uint, Value::I32(x))
            | (None, ScalarKind::Uint, Value::I32(x)) => Value::U32(*x as u32),
            (Some(_), ScalarKind::Sint, Value::Bool(b)) => Value::I32(i32::from(*b)),
            (Some(_), ScalarKind::Uint, Value::Bool(b)) => Value::U32(u32::from(*b)),
            (Some(_), ScalarKind::Bool, Value::F32(x)) => Value::Bool(*x != 0.0),
            (Some(_), ScalarKind::Bool, Value::I32(x)) => Value::Bool(*x != 0),
            (Some(_), ScalarKind::Bool, Value::U32(x)) => Value::Bool(*x != 0),
            (_, ScalarKind::Sint, Value::I32(_))
            | (_, ScalarKind::Uint, Value::U32(_))
            | (_, ScalarKind::Float, Value::F32(_))
            | (Some(_), ScalarKind::Bool, Value::Bool(_)) => s.clone(),
            (None, ScalarKind::Float, Value::I32(x)) => Value::F32(f32::from_bits(*x as u32)),
            (None, ScalarKind::Float, Value::U32(x)) => Value::F32(f32::from_bits(*x)),
            (None, ScalarKind::Sint, Value::F32(x)) => Value::I32(x.to_bits() as i32),
            (None, ScalarKind::Uint, Value::F32(x)) => Value::U32(x.to_bits()),
            _ => return Err(kind(&format!("a conversion to {to:?}"), s)),
        })
    })
}

/// The name WGSL spells a math function with, for messages.
pub(crate) fn math_name(fun: M) -> String {
    let debug = format!("{fun:?}");
    let mut chars = debug.chars();
    chars
        .next()
        .map_or(String::new(), |c| c.to_lowercase().chain(chars).collect())
}

/// A WGSL built-in function.
pub(crate) fn math(fun: M, args: &[Value], d: &Domains) -> Res {
    // The name only for messages: made when one is.
    let name = || math_name(fun);
    let arg = |i: usize| {
        args.get(i)
            .ok_or_else(|| Fault::Kind(format!("`{}` without its argument {i}", name())))
    };
    let f1 =
        |g: &dyn Fn(f32) -> f32| -> Res { map1(arg(0)?, &mut |s| Ok(Value::F32(g(f32_of(s)?)))) };
    let checked = |ok: &dyn Fn(f32) -> bool, domain: &str, g: &dyn Fn(f32) -> f32| -> Res {
        map1(arg(0)?, &mut |s| {
            let x = f32_of(s)?;
            d.require(
                ok(x),
                || format!("`{}` (WGSL specifies it for {domain})", name()),
                x,
            )?;
            Ok(Value::F32(g(x)))
        })
    };
    let pi = std::f32::consts::PI;
    let v = match fun {
        M::Abs => map1(arg(0)?, &mut |s| {
            Ok(match s {
                Value::F32(x) => Value::F32(x.abs()),
                Value::I32(x) => Value::I32(x.wrapping_abs()),
                Value::U32(x) => Value::U32(*x),
                other => return Err(kind("abs", other)),
            })
        })?,
        M::Min | M::Max => map2(arg(0)?, arg(1)?, &mut |a, b| {
            let max = fun == M::Max;
            Ok(match (a, b) {
                (Value::F32(x), Value::F32(y)) => {
                    Value::F32(if max { x.max(*y) } else { x.min(*y) })
                }
                (Value::I32(x), Value::I32(y)) => {
                    Value::I32(if max { *x.max(y) } else { *x.min(y) })
                }
                (Value::U32(x), Value::U32(y)) => {
                    Value::U32(if max { *x.max(y) } else { *x.min(y) })
                }
                (other, _) => return Err(kind(&name(), other)),
            })
        })?,
        M::Clamp => {
            let lo = math(M::Max, &[arg(0)?.clone(), arg(1)?.clone()], d)?;
            math(M::Min, &[lo, arg(2)?.clone()], d)?
        }
        M::Saturate => f1(&|x| x.clamp(0.0, 1.0))?,
        M::Sin | M::Cos | M::Tan => checked(
            &|x| (-pi..=pi).contains(&x),
            "arguments in [-π, π]",
            &|x| match fun {
                M::Sin => x.sin(),
                M::Cos => x.cos(),
                _ => x.tan(),
            },
        )?,
        M::Sinh => f1(&f32::sinh)?,
        M::Cosh => f1(&f32::cosh)?,
        M::Tanh => f1(&f32::tanh)?,
        M::Asin => checked(&|x| x.abs() <= 1.0, "arguments in [-1, 1]", &f32::asin)?,
        M::Acos => checked(&|x| x.abs() <= 1.0, "arguments in [-1, 1]", &f32::acos)?,
        M::Atan => f1(&f32::atan)?,
        M::Asinh => f1(&f32::asinh)?,
        M::Acosh => checked(&|x| x >= 1.0, "arguments of at least 1", &f32::acosh)?,
        M::Atanh => checked(&|x| x.abs() < 1.0, "arguments in (-1, 1)", &f32::atanh)?,
        M::Atan2 => map2(arg(0)?, arg(1)?, &mut |y, x| {
            Ok(Value::F32(f32_of(y)?.atan2(f32_of(x)?)))
        })?,
        M::Radians => f1(&f32::to_radians)?,
        M::Degrees => f1(&f32::to_degrees)?,
        M::Ceil => f1(&f32::ceil)?,
        M::Floor => f1(&f32::floor)?,
        // WGSL rounds halves to even.
        M::Round => f1(&f32::round_ties_even)?,
        M::Fract => f1(&|x| x - x.floor())?,
        M::Trunc => f1(&f32::trunc)?,
        M::Exp => f1(&f32::exp)?,
        M::Exp2 => f1(&f32::exp2)?,
        M::Log => checked(&|x| x > 0.0, "positive arguments", &f32::ln)?,
        M::Log2 => checked(&|x| x > 0.0, "positive arguments", &f32::log2)?,
        M::Sqrt => checked(&|x| x >= 0.0, "arguments of at least 0", &f32::sqrt)?,
        M::InverseSqrt => checked(&|x| x > 0.0, "positive arguments", &|x| 1.0 / x.sqrt())?,
        M::Pow => map2(arg(0)?, arg(1)?, &mut |a, b| {
            let (x, y) = (f32_of(a)?, f32_of(b)?);
            d.require(
                x > 0.0 || (x == 0.0 && y > 0.0),
                || "`pow` (WGSL specifies it as exp2(y * log2(x)), for x > 0)".into(),
                x,
            )?;
            Ok(Value::F32(x.powf(y)))
        })?,
        M::Ldexp => map2(arg(0)?, arg(1)?, &mut |a, b| {
            let (x, e) = (
                f32_of(a)?,
                match b {
                    Value::I32(e) => *e,
                    other => return Err(kind("ldexp's exponent", other)),
                },
            );
            Ok(Value::F32(x * 2f32.powi(e.clamp(-300, 300))))
        })?,
        M::Sign => map1(arg(0)?, &mut |s| {
            Ok(match s {
                Value::F32(x) => Value::F32(if *x > 0.0 {
                    1.0
                } else if *x < 0.0 {
                    -1.0
                } else {
                    0.0
                }),
                Value::I32(x) => Value::I32(x.signum()),
                other => return Err(kind("sign", other)),
            })
        })?,
        M::Fma => map3(arg(0)?, arg(1)?, arg(2)?, &mut |a, b, c| {
            Ok(Value::F32(f32_of(a)?.mul_add(f32_of(b)?, f32_of(c)?)))
        })?,
        // WGSL: `e1 * (1 - e3) + e2 * e3`.
        M::Mix => map3(arg(0)?, arg(1)?, arg(2)?, &mut |a, b, t| {
            let t = f32_of(t)?;
            Ok(Value::F32(f32_of(a)? * (1.0 - t) + f32_of(b)? * t))
        })?,
        M::Step => map2(arg(0)?, arg(1)?, &mut |edge, x| {
            Ok(Value::F32(if f32_of(x)? >= f32_of(edge)? {
                1.0
            } else {
                0.0
            }))
        })?,
        M::SmoothStep => map3(arg(0)?, arg(1)?, arg(2)?, &mut |lo, hi, x| {
            let (lo, hi, x) = (f32_of(lo)?, f32_of(hi)?, f32_of(x)?);
            let t = ((x - lo) / (hi - lo)).clamp(0.0, 1.0);
            Ok(Value::F32(t * t * (3.0 - 2.0 * t)))
        })?,
        M::Dot => {
            let (a, b) = (arg(0)?.components(), arg(1)?.components());
            match a.first() {
                Some(Value::F32(_)) => Value::F32(dot_f32(a, b)?),
                // Wrapping sums and products of 32-bit integers have the
                // same bits signed or not: one loop over the bits.
                Some(first @ (Value::I32(_) | Value::U32(_))) => {
                    let bits = |v: &Value| match *v {
                        Value::I32(x) => Ok(x as u32),
                        Value::U32(x) => Ok(x),
                        ref other => Err(kind("dot", other)),
                    };
                    let mut s = 0u32;
                    for (x, y) in a.iter().zip(b) {
                        s = s.wrapping_add(bits(x)?.wrapping_mul(bits(y)?));
                    }
                    match first {
                        Value::I32(_) => Value::I32(s as i32),
                        _ => Value::U32(s),
                    }
                }
                _ => return Err(kind("dot", arg(0)?)),
            }
        }
        M::Cross => {
            let (a, b) = (arg(0)?.components(), arg(1)?.components());
            if a.len() != 3 || b.len() != 3 {
                return Err(kind("cross", arg(0)?));
            }
            let a: Vec<f32> = a.iter().map(f32_of).collect::<Result<_, _>>()?;
            let b: Vec<f32> = b.iter().map(f32_of).collect::<Result<_, _>>()?;
            Value::Vector(vec![
                Value::F32(a[1] * b[2] - a[2] * b[1]),
                Value::F32(a[2] * b[0] - a[0] * b[2]),
                Value::F32(a[0] * b[1] - a[1] * b[0]),
            ])
        }
        M::Length => Value::F32(length(arg(0)?)?),
        M::Distance => {
            let diff = binary(B::Subtract, arg(0)?, arg(1)?, &Domains { check: false })?;
            Value::F32(length(&diff)?)
        }
        M::Normalize => {
            let n = length(arg(0)?)?;
            d.require(n > 0.0, || "`normalize` (of a zero vector)".into(), n)?;
            map1(arg(0)?, &mut |s| Ok(Value::F32(f32_of(s)? / n)))?
        }
        M::FaceForward => {
            let (e1, e2, e3) = (arg(0)?, arg(1)?, arg(2)?);
            if dot_f32(e2.components(), e3.components())? < 0.0 {
                e1.clone()
            } else {
                unary(UnaryOperator::Negate, e1)?
            }
        }
        // `e1 - 2 * dot(e2, e1) * e2`.
        M::Reflect => {
            let (e1, e2) = (arg(0)?, arg(1)?);
            let k = 2.0 * dot_f32(e2.components(), e1.components())?;
            map2(e1, e2, &mut |a, b| {
                Ok(Value::F32(f32_of(a)? - k * f32_of(b)?))
            })?
        }
        M::Refract => {
            let (e1, e2, eta) = (arg(0)?, arg(1)?, f32_of(arg(2)?)?);
            let c = dot_f32(e2.components(), e1.components())?;
            let k = 1.0 - eta * eta * (1.0 - c * c);
            if k < 0.0 {
                map1(e1, &mut |_| Ok(Value::F32(0.0)))?
            } else {
                let m = eta * c + k.sqrt();
                map2(e1, e2, &mut |a, b| {
                    Ok(Value::F32(eta * f32_of(a)? - m * f32_of(b)?))
                })?
            }
        }
        M::Transpose => {
            let m = arg(0)?.components();
            let rows = m.first().map_or(0, |c| c.components().len());
            Value::Matrix(
                (0..rows)
                    .map(|r| Value::Vector(m.iter().map(|c| c.components()[r].clone()).collect()))
                    .collect(),
            )
        }
        M::Determinant => {
            let m: Vec<Vec<f32>> = arg(0)?
                .components()
                .iter()
                .map(|c| c.components().iter().map(f32_of).collect())
                .collect::<Result<_, _>>()?;
            Value::F32(determinant(&m))
        }
        M::CountOneBits => int1(arg(0)?, &name(), &|x| x.count_ones())?,
        M::ReverseBits => int1(arg(0)?, &name(), &u32::reverse_bits)?,
        M::CountLeadingZeros => int1(arg(0)?, &name(), &u32::leading_zeros)?,
        M::CountTrailingZeros => int1(arg(0)?, &name(), &u32::trailing_zeros)?,
        M::FirstTrailingBit => int1(arg(0)?, &name(), &|x| {
            if x == 0 {
                u32::MAX
            } else {
                x.trailing_zeros()
            }
        })?,
        M::FirstLeadingBit => map1(arg(0)?, &mut |s| {
            Ok(match *s {
                Value::U32(x) => Value::U32(if x == 0 {
                    u32::MAX
                } else {
                    31 - x.leading_zeros()
                }),
                // The highest bit that differs from the sign bit.
                Value::I32(x) => {
                    let y = if x < 0 { !x } else { x } as u32;
                    Value::I32(if y == 0 {
                        -1
                    } else {
                        31 - y.leading_zeros() as i32
                    })
                }
                ref other => return Err(kind(&name(), other)),
            })
        })?,
        M::ExtractBits => {
            let (o, c) = (u32_of(arg(1)?)?, u32_of(arg(2)?)?);
            let o = o.min(32);
            let c = c.min(32 - o);
            map1(arg(0)?, &mut |s| {
                Ok(match *s {
                    _ if c == 0 => match s {
                        Value::I32(_) => Value::I32(0),
                        _ => Value::U32(0),
                    },
                    Value::U32(x) => Value::U32((x >> o) & mask(c)),
                    // Sign-extended from the count's top bit.
                    Value::I32(x) => {
                        let shifted = ((x as u32) << (32 - o - c)) as i32;
                        Value::I32(shifted >> (32 - c))
                    }
                    ref other => return Err(kind(&name(), other)),
                })
            })?
        }
        M::InsertBits => {
            let (o, c) = (u32_of(arg(2)?)?, u32_of(arg(3)?)?);
            let o = o.min(32);
            let c = c.min(32 - o);
            let m = if c == 0 { 0 } else { mask(c) << o };
            map2(arg(0)?, arg(1)?, &mut |e, n| {
                Ok(match (e, n) {
                    (Value::U32(e), Value::U32(n)) => {
                        Value::U32((e & !m) | (n.wrapping_shl(o) & m))
                    }
                    (Value::I32(e), Value::I32(n)) => {
                        Value::I32(((*e as u32 & !m) | ((*n as u32).wrapping_shl(o) & m)) as i32)
                    }
                    (other, _) => return Err(kind(&name(), other)),
                })
            })?
        }
        other => {
            return Err(Fault::Unsupported(format!(
                "the built-in `{}`",
                math_name(other)
            )))
        }
    };
    if matches!(
        fun,
        M::Sinh | M::Cosh | M::Exp | M::Exp2 | M::Pow | M::Ldexp
    ) {
        d.finite(&v, &|| format!("`{}` (its result overflows)", name()))?;
    }
    Ok(v)
}

fn mask(c: u32) -> u32 {
    if c >= 32 {
        u32::MAX
    } else {
        (1u32 << c) - 1
    }
}

fn u32_of(v: &Value) -> Result<u32, Fault> {
    match v {
        Value::U32(x) => Ok(*x),
        other => Err(kind("a bit offset or count", other)),
    }
}

/// A bit function of `u32` applied to `u32` or (through its bits) `i32`.
fn int1(v: &Value, name: &str, g: &dyn Fn(u32) -> u32) -> Res {
    map1(v, &mut |s| {
        Ok(match *s {
            Value::U32(x) => Value::U32(g(x)),
            Value::I32(x) => Value::I32(g(x as u32) as i32),
            ref other => return Err(kind(name, other)),
        })
    })
}

fn length(v: &Value) -> Result<f32, Fault> {
    match v {
        Value::F32(x) => Ok(x.abs()),
        Value::Vector(c) => Ok(dot_f32(c, c)?.sqrt()),
        other => Err(kind("length", other)),
    }
}

/// The determinant by cofactor expansion (matrices are at most 4x4).
fn determinant(m: &[Vec<f32>]) -> f32 {
    match m.len() {
        0 => 1.0,
        1 => m[0][0],
        2 => m[0][0] * m[1][1] - m[1][0] * m[0][1],
        n => (0..n)
            .map(|c| {
                let minor: Vec<Vec<f32>> = (0..n)
                    .filter(|&k| k != c)
                    .map(|k| m[k][1..].to_vec())
                    .collect();
                let sign = if c % 2 == 0 { 1.0 } else { -1.0 };
                sign * m[c][0] * determinant(&minor)
            })
            .sum(),
    }
}
