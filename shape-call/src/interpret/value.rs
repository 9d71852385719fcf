//! The values a WGSL function computes with, and how they are read from
//! and written to a call's leaves (buffers of `f32`).

use crate::types::{Extent, ParamType, Scalar};

/// A WGSL value: a scalar, or a composite of values. Vectors hold
/// scalars; matrices hold column vectors; arrays and structs hold their
/// elements and members in order.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `bool`.
    Bool(bool),
    /// `i32`.
    I32(i32),
    /// `u32`.
    U32(u32),
    /// `f32`.
    F32(f32),
    /// `vecN<T>`: its components.
    Vector(Vec<Value>),
    /// `matCxR<f32>`: its columns, each a [`Value::Vector`].
    Matrix(Vec<Value>),
    /// `array<T, N>`: its elements.
    Array(Vec<Value>),
    /// A struct: its members, in declaration order.
    Struct(Vec<Value>),
}

impl Value {
    /// The components of a composite value; none for a scalar.
    pub fn components(&self) -> &[Value] {
        match self {
            Value::Vector(c) | Value::Matrix(c) | Value::Array(c) | Value::Struct(c) => c,
            _ => &[],
        }
    }

    /// Mutable components of a composite value; none for a scalar.
    pub(crate) fn components_mut(&mut self) -> &mut [Value] {
        match self {
            Value::Vector(c) | Value::Matrix(c) | Value::Array(c) | Value::Struct(c) => c,
            _ => &mut [],
        }
    }

    /// The value as an `f32`, for a scalar (integers converted, `bool`
    /// as 0 or 1).
    pub fn as_f32(&self) -> Option<f32> {
        Some(match *self {
            Value::F32(x) => x,
            Value::I32(x) => x as f32,
            Value::U32(x) => x as f32,
            Value::Bool(b) => f32::from(u8::from(b)),
            _ => return None,
        })
    }

    /// The WGSL type's name, for messages: `f32`, `vec3<f32>`, `array`.
    pub fn type_name(&self) -> String {
        match self {
            Value::Bool(_) => "bool".into(),
            Value::I32(_) => "i32".into(),
            Value::U32(_) => "u32".into(),
            Value::F32(_) => "f32".into(),
            Value::Vector(c) => format!(
                "vec{}<{}>",
                c.len(),
                c.first().map_or("?".into(), Value::type_name)
            ),
            Value::Matrix(c) => format!(
                "mat{}x{}<f32>",
                c.len(),
                c.first().map_or(0, |v| v.components().len())
            ),
            Value::Array(c) => format!(
                "array<{}, {}>",
                c.first().map_or("?".into(), Value::type_name),
                c.len()
            ),
            Value::Struct(_) => "struct".into(),
        }
    }

    /// Reads a value of type `ty` from `data` (row-major over the type's
    /// shape), as a call loads an argument: integers are converted from
    /// `f32` (saturating), `bool` is "not zero". `None` when `ty` is not
    /// a value type with fixed sizes, or `data` is too short.
    pub fn read(ty: &ParamType, data: &[f32]) -> Option<Value> {
        let mut at = 0;
        let v = read_at(ty, data, &mut at)?;
        Some(v)
    }

    /// Writes the value into `out` (row-major over its type's shape) as a
    /// call stores an output: integers as `f32`, `bool` as 0 or 1.
    /// Returns the number of elements written, or `None` when `out` is
    /// too short.
    pub fn write(&self, out: &mut [f32]) -> Option<usize> {
        let mut at = 0;
        write_at(self, out, &mut at)?;
        Some(at)
    }
}

fn read_at(ty: &ParamType, data: &[f32], at: &mut usize) -> Option<Value> {
    let fixed = |e: &Extent| match e {
        Extent::Fixed(n) => usize::try_from(*n).ok(),
        _ => None,
    };
    Some(match ty {
        ParamType::Scalar(s) => {
            let x = *data.get(*at)?;
            *at += 1;
            match s {
                Scalar::Float => Value::F32(x),
                Scalar::Int => Value::I32(x as i32),
                Scalar::Uint => Value::U32(x as u32),
                Scalar::Bool => Value::Bool(x != 0.0),
                Scalar::Half => return None,
            }
        }
        ParamType::Vector(e, n) => Value::Vector(read_many(e, fixed(n)?, data, at)?),
        ParamType::Array(e, n) => Value::Array(read_many(e, fixed(n)?, data, at)?),
        ParamType::Matrix(e, c, r) => {
            let column = ParamType::Vector(e.clone(), r.clone());
            Value::Matrix(read_many(&column, fixed(c)?, data, at)?)
        }
        ParamType::Struct(s) => Value::Struct(
            s.fields
                .iter()
                .map(|(_, t)| read_at(t, data, at))
                .collect::<Option<_>>()?,
        ),
        _ => return None,
    })
}

fn read_many(ty: &ParamType, n: usize, data: &[f32], at: &mut usize) -> Option<Vec<Value>> {
    // Bounded by the data: a huge declared size fails here, not in an
    // allocation.
    if n > data.len().saturating_sub(*at) + 1 {
        return None;
    }
    (0..n).map(|_| read_at(ty, data, at)).collect()
}

fn write_at(v: &Value, out: &mut [f32], at: &mut usize) -> Option<()> {
    match v {
        Value::Vector(c) | Value::Matrix(c) | Value::Array(c) | Value::Struct(c) => {
            for x in c {
                write_at(x, out, at)?;
            }
        }
        scalar => {
            *out.get_mut(*at)? = scalar.as_f32()?;
            *at += 1;
        }
    }
    Some(())
}

impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Bool(b) => write!(f, "{b}"),
            Value::I32(x) => write!(f, "{x}i"),
            Value::U32(x) => write!(f, "{x}u"),
            Value::F32(x) => write!(f, "{x:?}f"),
            composite => {
                let parts: Vec<String> = composite
                    .components()
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                write!(f, "{}({})", composite.type_name(), parts.join(", "))
            }
        }
    }
}
