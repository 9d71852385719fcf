//! Function signatures: parameters with types and directions, from
//! Slang-style declarations or from WGSL source reflected with naga.

use std::fmt;
use std::sync::Arc;

use super::error::CallError;
use super::syntax::{parse_slang, tokens, Tok, TypeScope};
use super::types::{Extent, Language, ParamType, Scalar, StructType};

/// How a parameter passes data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Read only: takes the shape it is passed.
    In,
    /// Written: a given tensor or reference, or an output to allocate.
    Out,
    /// Read and written.
    InOut,
    /// The function's return value (`_result`).
    Return,
}

impl Direction {
    /// Whether the function writes through it.
    pub fn writes(self) -> bool {
        !matches!(self, Direction::In)
    }
}

/// One parameter of a signature.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Param {
    /// Its name.
    pub name: Arc<str>,
    /// Its type.
    pub ty: ParamType,
    /// How it passes data.
    pub direction: Direction,
}

/// A function's signature: one overload.
#[derive(Clone, Debug)]
pub struct Signature {
    /// The function's name.
    pub name: Arc<str>,
    /// Its parameters, in order.
    pub params: Vec<Param>,
    /// The return type; `None` for `void`.
    pub result: Option<ParamType>,
    /// The language it was written in.
    pub language: Language,
    /// Its structs and generic parameters.
    pub(crate) scope: TypeScope,
    /// The WGSL source it was reflected from, which a generated kernel
    /// inlines.
    pub(crate) source: Option<Arc<str>>,
    /// A WGSL body for a Slang-style declaration (see
    /// [`Signature::with_wgsl_body`]).
    pub(crate) body: Option<Arc<str>>,
}

impl Signature {
    pub(crate) fn new(
        name: Arc<str>,
        params: Vec<Param>,
        result: Option<ParamType>,
        language: Language,
        scope: TypeScope,
    ) -> Signature {
        Signature {
            name,
            params,
            result,
            language,
            scope,
            source: None,
            body: None,
        }
    }

    /// This Slang-style signature with a body written in WGSL, so that it
    /// runs on wgpu: the generated kernel declares the function with its
    /// value parameters in WGSL types (`int2` is `vec2<i32>`) and gives
    /// each slice, tensor, buffer or runtime array parameter `p` two
    /// accessors instead: `p_load(i0: u32, ..) -> T` reads an element of
    /// the current call's slice and `p_size(d: u32) -> u32` gives its size
    /// along dim `d`; a read-write tensor (`RWTensor<T,N>`,
    /// `RWNDBuffer<T,N>`) also gets `p_store(i0: u32, .., value: T)`,
    /// which writes an element.
    ///
    /// ```
    /// use shape_call::Signature;
    /// let read = Signature::parse("float4 read(int2 index, Slice<2,float4> array)")
    ///     .unwrap()
    ///     .with_wgsl_body("{ return array_load(u32(index.x), u32(index.y)); }");
    /// assert!(read.wgsl_body().is_some());
    /// ```
    pub fn with_wgsl_body(mut self, body: &str) -> Signature {
        self.body = Some(Arc::from(body));
        self
    }

    /// The WGSL body given by [`Signature::with_wgsl_body`].
    pub fn wgsl_body(&self) -> Option<&str> {
        self.body.as_deref()
    }

    /// Reads a signature: WGSL source (it declares `fn NAME(`) through
    /// naga, or a Slang-style declaration.
    ///
    /// ```
    /// use shape_call::Signature;
    /// let s = Signature::parse("float dot(float3 a, float3 b)").unwrap();
    /// assert_eq!(s.to_string(), "float dot(float3 a, float3 b)");
    /// let w = Signature::parse("fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32 { return dot(a, b); }").unwrap();
    /// assert_eq!(w.to_string(), "fn dot3(a: vec3<f32>, b: vec3<f32>) -> f32");
    /// ```
    pub fn parse(text: &str) -> Result<Signature, CallError> {
        // WGSL declares `fn NAME(`; a Slang parameter may be called `fn`.
        let toks = tokens(text)?;
        let is_wgsl = toks.windows(3).any(|w| {
            w[0].0 == Tok::Ident("fn".into())
                && matches!(w[1].0, Tok::Ident(_))
                && w[2].0 == Tok::Punct('(')
        });
        if is_wgsl {
            reflect_wgsl(text)
        } else {
            parse_slang(text)
        }
    }

    /// The WGSL source of a signature reflected from WGSL.
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// The scope its types were read in (its structs), for reading
    /// argument types.
    pub fn scope(&self) -> &TypeScope {
        &self.scope
    }
}

impl fmt::Display for Signature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = self.language;
        match l {
            Language::Slang => {
                let ret = self.result.as_ref().map_or("void".into(), |t| t.spelled(l));
                let params: Vec<String> = self
                    .params
                    .iter()
                    .map(|p| {
                        let d = match p.direction {
                            Direction::Out => "out ",
                            Direction::InOut => "inout ",
                            _ => "",
                        };
                        format!("{d}{} {}", p.ty.spelled(l), p.name)
                    })
                    .collect();
                write!(f, "{ret} {}({})", self.name, params.join(", "))
            }
            Language::Wgsl => {
                let params: Vec<String> = self
                    .params
                    .iter()
                    .map(|p| match p.direction {
                        Direction::In => format!("{}: {}", p.name, p.ty.spelled(l)),
                        _ => format!("{}: ptr<function, {}>", p.name, p.ty.spelled(l)),
                    })
                    .collect();
                write!(f, "fn {}({})", self.name, params.join(", "))?;
                match &self.result {
                    Some(t) => write!(f, " -> {}", t.spelled(l)),
                    None => Ok(()),
                }
            }
        }
    }
}

/// The last function of WGSL `source` (earlier ones are its helpers), its
/// parameters' types reflected with naga. A `ptr<function, T>` parameter
/// is `inout`: WGSL does not say whether the function reads it.
fn reflect_wgsl(source: &str) -> Result<Signature, CallError> {
    let module = crate::wgsl_source::parse(source, false)?;
    let (_, function) = module
        .functions
        .iter()
        .last()
        .ok_or_else(|| CallError::Wgsl("the source declares no function".into()))?;
    let name: Arc<str> = Arc::from(function.name.as_deref().unwrap_or("main"));
    let mut scope = TypeScope::new();
    let mut params = Vec::new();
    for arg in &function.arguments {
        let pname = arg
            .name
            .clone()
            .unwrap_or_else(|| format!("arg{}", params.len()));
        let (ty, direction) = match &module.types[arg.ty].inner {
            naga::TypeInner::Pointer { base, .. } => (*base, Direction::InOut),
            _ => (arg.ty, Direction::In),
        };
        let ty = wgsl_type(&module, ty, &mut scope, &pname)?;
        params.push(Param {
            name: Arc::from(pname.as_str()),
            ty,
            direction,
        });
    }
    let result = match &function.result {
        Some(r) => Some(wgsl_type(&module, r.ty, &mut scope, "_result")?),
        None => None,
    };
    let mut sig = Signature::new(name, params, result, Language::Wgsl, scope);
    sig.source = Some(Arc::from(source));
    Ok(sig)
}

fn wgsl_scalar(s: naga::Scalar) -> Option<Scalar> {
    use naga::ScalarKind as K;
    Some(match (s.kind, s.width) {
        (K::Float, 4) => Scalar::Float,
        (K::Float, 2) => Scalar::Half,
        (K::Sint, 4) => Scalar::Int,
        (K::Uint, 4) => Scalar::Uint,
        (K::Bool, _) => Scalar::Bool,
        _ => return None,
    })
}

fn wgsl_type(
    module: &naga::Module,
    ty: naga::Handle<naga::Type>,
    scope: &mut TypeScope,
    param: &str,
) -> Result<ParamType, CallError> {
    let unsupported = || CallError::UnsupportedType {
        param: param.to_owned(),
        ty: format!("{:?}", module.types[ty].inner),
    };
    let scalar = |s| {
        wgsl_scalar(s)
            .map(ParamType::Scalar)
            .ok_or_else(unsupported)
    };
    Ok(match &module.types[ty].inner {
        naga::TypeInner::Scalar(s) => scalar(*s)?,
        naga::TypeInner::Vector { size, scalar: s } => {
            ParamType::Vector(Box::new(scalar(*s)?), Extent::Fixed(*size as u64))
        }
        naga::TypeInner::Matrix {
            columns,
            rows,
            scalar: s,
        } => ParamType::Matrix(
            Box::new(scalar(*s)?),
            Extent::Fixed(*columns as u64),
            Extent::Fixed(*rows as u64),
        ),
        naga::TypeInner::Array { base, size, .. } => {
            let e = wgsl_type(module, *base, scope, param)?;
            let n = match size {
                naga::ArraySize::Constant(n) => Extent::Fixed(u64::from(n.get())),
                naga::ArraySize::Dynamic => Extent::Any,
                naga::ArraySize::Pending(_) => return Err(unsupported()),
            };
            ParamType::Array(Box::new(e), n)
        }
        naga::TypeInner::Struct { members, .. } => {
            let name: Arc<str> = Arc::from(module.types[ty].name.as_deref().unwrap_or("struct"));
            if let Some(s) = scope.get_struct(&name) {
                return Ok(ParamType::Struct(s.clone()));
            }
            let mut fields = Vec::new();
            for m in members {
                let fname = m.name.clone().unwrap_or_default();
                fields.push((
                    Arc::from(fname.as_str()),
                    wgsl_type(module, m.ty, scope, param)?,
                ));
            }
            let s = StructType { name, fields };
            scope.add_struct(s.clone());
            ParamType::Struct(Arc::new(s))
        }
        naga::TypeInner::Image {
            dim: naga::ImageDimension::D2,
            arrayed: false,
            class: naga::ImageClass::Sampled { kind, multi: false },
        } => {
            let s = scalar(naga::Scalar {
                kind: *kind,
                width: 4,
            })?;
            ParamType::Texture2D(Box::new(ParamType::Vector(Box::new(s), Extent::Fixed(4))))
        }
        _ => return Err(unsupported()),
    })
}
