//! Parameter types of a vectorized function and their type shapes.
//!
//! A type is a container shape followed by its element's shape
//! (`shape = container_shape + element.shape`): `float3` is `(3)`,
//! `int2[10]` is `(10, 2)`, `Slice<2,float4>` is `(?, ?, 4)`. The dims a
//! parameter's type takes are consumed from the right of its argument's
//! shape; what is left is the argument shape, which takes part in the call
//! shape.

use std::fmt;
use std::sync::Arc;

/// The language a signature is written in, which also decides how types
/// are spelled in messages and JSON (`float3` or `vec3<f32>`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Language {
    /// Slang-style declarations, as the slangpy documents write them.
    Slang,
    /// WGSL source, reflected with naga.
    Wgsl,
}

/// A scalar element type. There is no implicit conversion between two of
/// them: an `int` parameter does not take a `float` tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scalar {
    /// 32-bit float: `float`, `f32`.
    Float,
    /// 16-bit float: `half`, `f16`.
    Half,
    /// 32-bit signed integer: `int`, `i32`.
    Int,
    /// 32-bit unsigned integer: `uint`, `u32`.
    Uint,
    /// Boolean: `bool`.
    Bool,
}

impl Scalar {
    /// The scalar's name in `language`.
    pub fn spelled(self, language: Language) -> &'static str {
        match (language, self) {
            (Language::Slang, Scalar::Float) => "float",
            (Language::Slang, Scalar::Half) => "half",
            (Language::Slang, Scalar::Int) => "int",
            (Language::Slang, Scalar::Uint) => "uint",
            (Language::Wgsl, Scalar::Float) => "f32",
            (Language::Wgsl, Scalar::Half) => "f16",
            (Language::Wgsl, Scalar::Int) => "i32",
            (Language::Wgsl, Scalar::Uint) => "u32",
            (_, Scalar::Bool) => "bool",
        }
    }

    /// The scalar named `name` in either language.
    pub fn named(name: &str) -> Option<Scalar> {
        Some(match name {
            "float" | "f32" => Scalar::Float,
            "half" | "f16" => Scalar::Half,
            "int" | "i32" => Scalar::Int,
            "uint" | "u32" => Scalar::Uint,
            "bool" => Scalar::Bool,
            _ => return None,
        })
    }
}

/// The size of one dim of a type shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Extent {
    /// A size fixed by the type: the 3 of `float3`.
    Fixed(u64),
    /// A generic size parameter (`N` of `vector<float,N>` under
    /// `let N : int`): one size, shared by every place that names it.
    Generic(Arc<str>),
    /// Any size (`?`): a runtime-sized array, a buffer, a texture or a
    /// slice dimension. Each such dim takes its argument's size.
    Any,
}

impl fmt::Display for Extent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Extent::Fixed(n) => write!(f, "{n}"),
            Extent::Generic(name) => f.write_str(name),
            Extent::Any => f.write_str("?"),
        }
    }
}

/// A struct type: named fields, each with its own type shape.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StructType {
    /// The struct's name.
    pub name: Arc<str>,
    /// Its fields, in declaration order.
    pub fields: Vec<(Arc<str>, ParamType)>,
}

/// Which of slangpy's tensor parameter types a [`ParamType::Tensor`] is:
/// read-only or read-write, and whether it is spelled `Tensor` or
/// `NDBuffer` (the two consume dims alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorKind {
    /// `Tensor<T,N>`: read.
    Tensor,
    /// `RWTensor<T,N>`: read and written.
    RWTensor,
    /// `NDBuffer<T,N>`: read.
    NDBuffer,
    /// `RWNDBuffer<T,N>`: read and written.
    RWNDBuffer,
}

impl TensorKind {
    /// The type's name: `Tensor`, `RWTensor`, `NDBuffer` or `RWNDBuffer`.
    pub fn name(self) -> &'static str {
        match self {
            TensorKind::Tensor => "Tensor",
            TensorKind::RWTensor => "RWTensor",
            TensorKind::NDBuffer => "NDBuffer",
            TensorKind::RWNDBuffer => "RWNDBuffer",
        }
    }

    /// The kind named `name`, if it is one.
    pub fn named(name: &str) -> Option<TensorKind> {
        Some(match name {
            "Tensor" => TensorKind::Tensor,
            "RWTensor" => TensorKind::RWTensor,
            "NDBuffer" => TensorKind::NDBuffer,
            "RWNDBuffer" => TensorKind::RWNDBuffer,
            _ => return None,
        })
    }

    /// Whether the function may write through it (`RWTensor`,
    /// `RWNDBuffer`).
    pub fn writable(self) -> bool {
        matches!(self, TensorKind::RWTensor | TensorKind::RWNDBuffer)
    }
}

/// The type of a parameter, a return value or an argument's elements.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ParamType {
    /// A scalar: type shape `()`.
    Scalar(Scalar),
    /// A generic type parameter (`T`), bound to the argument's scalar type.
    Generic(Arc<str>),
    /// `vector<T,N>`: `(N)` then the element's shape.
    Vector(Box<ParamType>, Extent),
    /// A matrix: `(outer, inner)` then the element's shape. Slang's
    /// `float2x3` is 2 rows of 3 (`(2, 3)`); WGSL's `mat2x3<f32>` is 2
    /// columns of 3 (`(2, 3)`): the outer size is the one written first.
    Matrix(Box<ParamType>, Extent, Extent),
    /// An array `T[N]` (or `T[]`, [`Extent::Any`]): `(N)` then T's shape.
    Array(Box<ParamType>, Extent),
    /// `StructuredBuffer<T>`: `(?)` then T's shape.
    StructuredBuffer(Box<ParamType>),
    /// `Texture2D<T>`: `(?, ?)` then T's shape.
    Texture2D(Box<ParamType>),
    /// `Slice<N,T>`: N dims of any size, then T's shape.
    Slice(u32, Box<ParamType>),
    /// slangpy's `Tensor<T,N>`, `RWTensor<T,N>`, `NDBuffer<T,N>` and
    /// `RWNDBuffer<T,N>`: like `Slice<N,T>`, N dims of any size (N >= 1),
    /// then T's shape. The function reads the call's whole tensor, and
    /// writes it through the read-write kinds: those writes land in the
    /// argument's own storage and are not races.
    Tensor(TensorKind, u32, Box<ParamType>),
    /// A struct: type shape `()`; its fields bind one by one.
    Struct(Arc<StructType>),
}

impl ParamType {
    /// For a parameter read through accessors (a slice, a tensor, a
    /// structured buffer, a runtime-sized array): its number of indexed
    /// dims and its element type; `None` for a value. A function reads
    /// such a parameter `p` with `p_load(i0, ..)` and `p_size(d)`, and
    /// writes a read-write tensor with `p_store(i0, .., value)`.
    pub fn accessed(&self) -> Option<(usize, &ParamType)> {
        match self {
            ParamType::Slice(n, e) | ParamType::Tensor(_, n, e) => Some((*n as usize, e)),
            ParamType::StructuredBuffer(e) | ParamType::Array(e, Extent::Any) => Some((1, e)),
            _ => None,
        }
    }

    /// The type shape: the dims this type consumes, outermost first.
    ///
    /// ```
    /// use shape_call::{Extent, ParamType, Scalar};
    /// let int2 = ParamType::Vector(Box::new(ParamType::Scalar(Scalar::Int)), Extent::Fixed(2));
    /// let array = ParamType::Array(Box::new(int2), Extent::Fixed(10));
    /// assert_eq!(array.type_shape(), vec![Extent::Fixed(10), Extent::Fixed(2)]);
    /// ```
    pub fn type_shape(&self) -> Vec<Extent> {
        let mut out = Vec::new();
        self.push_shape(&mut out);
        out
    }

    fn push_shape(&self, out: &mut Vec<Extent>) {
        match self {
            ParamType::Scalar(_) | ParamType::Generic(_) | ParamType::Struct(_) => {}
            ParamType::Vector(e, n) | ParamType::Array(e, n) => {
                out.push(n.clone());
                e.push_shape(out);
            }
            ParamType::Matrix(e, r, c) => {
                out.push(r.clone());
                out.push(c.clone());
                e.push_shape(out);
            }
            ParamType::StructuredBuffer(e) => {
                out.push(Extent::Any);
                e.push_shape(out);
            }
            ParamType::Texture2D(e) => {
                out.extend([Extent::Any, Extent::Any]);
                e.push_shape(out);
            }
            ParamType::Slice(n, e) | ParamType::Tensor(_, n, e) => {
                out.extend((0..*n).map(|_| Extent::Any));
                e.push_shape(out);
            }
        }
    }

    /// The type shape's sizes where the type fixes them (`None` for a
    /// generic size or `?`).
    pub fn fixed_sizes(&self) -> Vec<Option<u64>> {
        self.type_shape()
            .iter()
            .map(|e| match e {
                Extent::Fixed(n) => Some(*n),
                _ => None,
            })
            .collect()
    }

    /// The innermost element: a scalar, a generic type or a struct.
    pub fn leaf(&self) -> &ParamType {
        match self {
            ParamType::Scalar(_) | ParamType::Generic(_) | ParamType::Struct(_) => self,
            ParamType::Vector(e, _)
            | ParamType::Matrix(e, _, _)
            | ParamType::Array(e, _)
            | ParamType::StructuredBuffer(e)
            | ParamType::Texture2D(e)
            | ParamType::Slice(_, e)
            | ParamType::Tensor(_, _, e) => e.leaf(),
        }
    }

    /// Whether the function writes its argument through this type, though
    /// the parameter is not `out` or `inout`: a read-write tensor
    /// (`RWTensor`, `RWNDBuffer`), at any depth.
    ///
    /// ```
    /// use shape_call::{parse_type, TypeScope};
    /// let scope = TypeScope::new();
    /// assert!(parse_type("RWTensor<float,2>", &scope).unwrap().writes_through());
    /// assert!(!parse_type("Tensor<float,2>", &scope).unwrap().writes_through());
    /// ```
    pub fn writes_through(&self) -> bool {
        match self {
            ParamType::Tensor(kind, _, e) => kind.writable() || e.writes_through(),
            ParamType::Scalar(_) | ParamType::Generic(_) => false,
            ParamType::Struct(s) => s.fields.iter().any(|(_, t)| t.writes_through()),
            ParamType::Vector(e, _)
            | ParamType::Matrix(e, _, _)
            | ParamType::Array(e, _)
            | ParamType::StructuredBuffer(e)
            | ParamType::Texture2D(e)
            | ParamType::Slice(_, e) => e.writes_through(),
        }
    }

    /// Whether the type has a fixed shape: no generic and no `?` size
    /// (a value of it can be given).
    pub fn is_concrete(&self) -> bool {
        self.type_shape()
            .iter()
            .all(|e| matches!(e, Extent::Fixed(_)))
            && !matches!(self.leaf(), ParamType::Generic(_))
    }

    /// The type with generic types and sizes replaced by `types` and
    /// `sizes`, where they are bound.
    pub fn substituted(
        &self,
        types: &dyn Fn(&str) -> Option<ParamType>,
        sizes: &dyn Fn(&str) -> Option<u64>,
    ) -> ParamType {
        let ext = |e: &Extent| match e {
            Extent::Generic(n) => sizes(n).map_or_else(|| e.clone(), Extent::Fixed),
            _ => e.clone(),
        };
        let sub = |e: &ParamType| Box::new(e.substituted(types, sizes));
        match self {
            ParamType::Generic(n) => types(n).unwrap_or_else(|| self.clone()),
            ParamType::Scalar(_) | ParamType::Struct(_) => self.clone(),
            ParamType::Vector(e, n) => ParamType::Vector(sub(e), ext(n)),
            ParamType::Matrix(e, r, c) => ParamType::Matrix(sub(e), ext(r), ext(c)),
            ParamType::Array(e, n) => ParamType::Array(sub(e), ext(n)),
            ParamType::StructuredBuffer(e) => ParamType::StructuredBuffer(sub(e)),
            ParamType::Texture2D(e) => ParamType::Texture2D(sub(e)),
            ParamType::Slice(n, e) => ParamType::Slice(*n, sub(e)),
            ParamType::Tensor(k, n, e) => ParamType::Tensor(*k, *n, sub(e)),
        }
    }

    /// The type as `language` writes it: `float3` or `vec3<f32>`.
    pub fn spelled(&self, language: Language) -> String {
        let inner = |e: &ParamType| e.spelled(language);
        match (language, self) {
            (_, ParamType::Scalar(s)) => s.spelled(language).to_owned(),
            (_, ParamType::Generic(n)) => n.to_string(),
            (_, ParamType::Struct(s)) => s.name.to_string(),
            (Language::Slang, ParamType::Vector(e, Extent::Fixed(n @ 1..=4)))
                if matches!(**e, ParamType::Scalar(_)) =>
            {
                format!("{}{n}", inner(e))
            }
            (Language::Slang, ParamType::Vector(e, n)) => format!("vector<{},{n}>", inner(e)),
            (
                Language::Slang,
                ParamType::Matrix(e, Extent::Fixed(r @ 1..=4), Extent::Fixed(c @ 1..=4)),
            ) if matches!(**e, ParamType::Scalar(_)) => {
                format!("{}{r}x{c}", inner(e))
            }
            (Language::Slang, ParamType::Matrix(e, r, c)) => {
                format!("matrix<{},{r},{c}>", inner(e))
            }
            (Language::Slang, ParamType::Array(e, Extent::Any)) => format!("{}[]", inner(e)),
            (Language::Slang, ParamType::Array(e, n)) => format!("{}[{n}]", inner(e)),
            (Language::Slang, ParamType::StructuredBuffer(e)) => {
                format!("StructuredBuffer<{}>", inner(e))
            }
            (Language::Slang, ParamType::Texture2D(e)) => format!("Texture2D<{}>", inner(e)),
            (Language::Slang, ParamType::Slice(n, e)) => format!("Slice<{n},{}>", inner(e)),
            (Language::Wgsl, ParamType::Vector(e, n)) => format!("vec{n}<{}>", inner(e)),
            (Language::Wgsl, ParamType::Matrix(e, r, c)) => format!("mat{r}x{c}<{}>", inner(e)),
            (Language::Wgsl, ParamType::Array(e, Extent::Any)) => format!("array<{}>", inner(e)),
            (Language::Wgsl, ParamType::Array(e, n)) => format!("array<{},{n}>", inner(e)),
            (Language::Wgsl, ParamType::StructuredBuffer(e)) => format!("array<{}>", inner(e)),
            (Language::Wgsl, ParamType::Texture2D(e)) => {
                format!("texture_2d<{}>", inner(e.leaf()))
            }
            (Language::Wgsl, ParamType::Slice(n, e)) => format!("Slice<{n},{}>", inner(e)),
            // slangpy's spelling in both languages, the element as the
            // language writes it: `RWTensor<float3,2>`, `RWTensor<vec3<f32>,2>`.
            (_, ParamType::Tensor(k, n, e)) => format!("{}<{},{n}>", k.name(), inner(e)),
        }
    }
}
