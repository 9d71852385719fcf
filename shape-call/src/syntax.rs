//! Reading types, Slang-style signatures and struct declarations.
//!
//! Types may be spelled as Slang writes them (`float3`, `int2[10]`,
//! `vector<T,N>`, `float4x4`, `StructuredBuffer<float4>`, `Texture2D<float>`,
//! `Slice<2,float4>`, slangpy's `Tensor<float,3>`, `RWTensor<float,3>`,
//! `NDBuffer<float,3>`, `RWNDBuffer<float,3>`) or as WGSL does (`vec3<f32>`, `vec3f`,
//! `array<vec2<i32>,10>`, `mat4x4<f32>`), in signatures and in arguments
//! alike.

use std::collections::HashMap;
use std::sync::Arc;

use super::error::CallError;
use super::signature::{Direction, Param, Signature};
use super::types::{Extent, Language, ParamType, Scalar, StructType, TensorKind};

/// One token of a declaration.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Tok {
    Ident(String),
    Number(String),
    Punct(char),
}

/// A token with its byte offset.
pub(crate) type Spanned = (Tok, usize);

/// Splits `text` into tokens; `//` comments are skipped.
pub(crate) fn tokens(text: &str) -> Result<Vec<Spanned>, CallError> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        if c.is_ascii_whitespace() {
            i += 1;
        } else if text[i..].starts_with("//") {
            while i < bytes.len() && bytes[i] != b'\n' {
                i += 1;
            }
        } else if c.is_ascii_alphabetic() || c == b'_' {
            let start = i;
            while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                i += 1;
            }
            out.push((Tok::Ident(text[start..i].to_owned()), start));
        } else if c.is_ascii_digit()
            || (c == b'-' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit))
        {
            let start = i;
            i += 1;
            while i < bytes.len()
                && (bytes[i].is_ascii_alphanumeric()
                    || bytes[i] == b'.'
                    || bytes[i] == b'_'
                    // An exponent's sign: `1e-5`.
                    || (matches!(bytes[i], b'+' | b'-') && matches!(bytes[i - 1], b'e' | b'E')))
            {
                i += 1;
            }
            out.push((Tok::Number(text[start..i].to_owned()), start));
        } else if c.is_ascii_punctuation() {
            out.push((Tok::Punct(c as char), i));
            i += 1;
        } else {
            let ch = text[i..].chars().next().unwrap_or('?');
            return Err(CallError::syntax(
                text,
                i,
                format!("unexpected character `{}`", ch.escape_default()),
            ));
        }
    }
    Ok(out)
}

/// What names mean where a type is read: structs and generic parameters.
#[derive(Clone, Debug, Default)]
pub struct TypeScope {
    structs: HashMap<Arc<str>, Arc<StructType>>,
    generic_types: Vec<Arc<str>>,
    generic_sizes: Vec<Arc<str>>,
    /// Every generic parameter, types and sizes, in declaration order
    /// (what `f<float, 3>` specializes position by position).
    generic_order: Vec<Arc<str>>,
}

impl TypeScope {
    /// A scope with no structs and no generics.
    pub fn new() -> TypeScope {
        TypeScope::default()
    }

    /// Makes `s` known by its name.
    pub fn add_struct(&mut self, s: StructType) {
        self.structs.insert(s.name.clone(), Arc::new(s));
    }

    /// The generic parameters in declaration order, each with whether it
    /// is a size (`let N : int`) rather than a type.
    pub(crate) fn generics(&self) -> impl Iterator<Item = (&Arc<str>, bool)> + '_ {
        self.generic_order
            .iter()
            .map(|g| (g, self.generic_sizes.contains(g)))
    }

    /// Adds the structs of `other` that this scope lacks.
    pub fn merge(&mut self, other: &TypeScope) {
        for (name, s) in &other.structs {
            self.structs
                .entry(name.clone())
                .or_insert_with(|| s.clone());
        }
    }

    /// The struct named `name`, if declared.
    pub fn get_struct(&self, name: &str) -> Option<&Arc<StructType>> {
        self.structs.get(name)
    }
}

/// A cursor over tokens, with the text for messages.
pub(crate) struct Cursor<'a> {
    pub(crate) text: &'a str,
    pub(crate) toks: Vec<Spanned>,
    pub(crate) pos: usize,
    /// How deeply types (or arguments) nest where the cursor is.
    pub(crate) depth: usize,
}

/// The deepest nesting of types or arguments read; deeper text is
/// refused rather than risking the stack.
pub(crate) const MAX_DEPTH: usize = 64;

impl<'a> Cursor<'a> {
    pub(crate) fn new(text: &'a str) -> Result<Cursor<'a>, CallError> {
        Ok(Cursor {
            text,
            toks: tokens(text)?,
            pos: 0,
            depth: 0,
        })
    }

    pub(crate) fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }

    pub(crate) fn offset(&self) -> usize {
        self.toks.get(self.pos).map_or(self.text.len(), |t| t.1)
    }

    pub(crate) fn error(&self, message: impl Into<String>) -> CallError {
        CallError::syntax(self.text, self.offset(), message.into())
    }

    pub(crate) fn at_end(&self) -> bool {
        self.pos >= self.toks.len()
    }

    pub(crate) fn next(&mut self) -> Option<Tok> {
        let t = self.toks.get(self.pos).map(|t| t.0.clone());
        self.pos += 1;
        t
    }

    pub(crate) fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Punct(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub(crate) fn expect(&mut self, c: char) -> Result<(), CallError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.error(format!("expected `{c}`")))
        }
    }

    pub(crate) fn ident(&mut self, what: &str) -> Result<String, CallError> {
        match self.peek() {
            Some(Tok::Ident(s)) => {
                let s = s.clone();
                self.pos += 1;
                Ok(s)
            }
            _ => Err(self.error(format!("expected {what}"))),
        }
    }

    pub(crate) fn number(&mut self, what: &str) -> Result<u64, CallError> {
        match self.peek() {
            Some(Tok::Number(s)) => {
                let n = s.parse::<u64>().map_err(|_| {
                    self.error(format!(
                        "`{s}` is not a size (sizes are whole numbers below 2^64)"
                    ))
                })?;
                self.pos += 1;
                Ok(n)
            }
            _ => Err(self.error(format!("expected {what}"))),
        }
    }

    /// Reads a type.
    pub(crate) fn ty(&mut self, scope: &TypeScope) -> Result<ParamType, CallError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.error(format!("types nest more than {MAX_DEPTH} deep")));
        }
        self.depth += 1;
        let t = self.ty_inner(scope);
        self.depth -= 1;
        t
    }

    fn ty_inner(&mut self, scope: &TypeScope) -> Result<ParamType, CallError> {
        let start = self.offset();
        let name = self.ident("a type")?;
        let mut ty = if self.peek() == Some(&Tok::Punct('<')) {
            self.pos += 1;
            let t = self.generic_type(&name, scope, start)?;
            self.expect('>')?;
            t
        } else {
            named_type(&name, scope).ok_or_else(|| {
                CallError::syntax(self.text, start, format!("unknown type `{name}`"))
            })?
        };
        ty = self.array_suffixes(ty)?;
        Ok(ty)
    }

    /// `[N]` and `[]` suffixes; the first written is the outermost.
    pub(crate) fn array_suffixes(&mut self, ty: ParamType) -> Result<ParamType, CallError> {
        let mut extents = Vec::new();
        while self.eat('[') {
            if self.eat(']') {
                extents.push(Extent::Any);
            } else {
                extents.push(self.extent_arg(&TypeScope::default(), true)?);
                self.expect(']')?;
            }
        }
        Ok(extents
            .into_iter()
            .rev()
            .fold(ty, |t, n| ParamType::Array(Box::new(t), n)))
    }

    fn extent_arg(&mut self, scope: &TypeScope, allow_any: bool) -> Result<Extent, CallError> {
        match self.peek() {
            Some(Tok::Number(_)) => {
                let n = self.number("a size")?;
                if n == 0 {
                    return Err(self.error("a type's size is at least 1"));
                }
                Ok(Extent::Fixed(n))
            }
            Some(Tok::Ident(s)) if scope.generic_sizes.iter().any(|g| **g == **s) => {
                let s = Arc::from(s.as_str());
                self.pos += 1;
                Ok(Extent::Generic(s))
            }
            Some(Tok::Ident(s)) if allow_any => {
                // A generic size in an array suffix: `T[N]`.
                let s = Arc::from(s.as_str());
                self.pos += 1;
                Ok(Extent::Generic(s))
            }
            _ => Err(self.error("expected a size or a generic size parameter")),
        }
    }

    fn generic_type(
        &mut self,
        name: &str,
        scope: &TypeScope,
        start: usize,
    ) -> Result<ParamType, CallError> {
        let boxed = |t: ParamType| Box::new(t);
        if let Some(kind) = TensorKind::named(name) {
            // slangpy's `Tensor<T,N>`: the element type first, then the
            // number of dims, a whole number (the kernel's dims are fixed
            // when it is generated).
            let e = self.ty(scope)?;
            self.expect(',')?;
            let n = self.number(&format!("{name}'s number of dims (a whole number)"))?;
            if n == 0 {
                return Err(self.error(format!("a {name} has at least 1 dim")));
            }
            let n = u32::try_from(n).map_err(|_| self.error(format!("too many {name} dims")))?;
            return Ok(ParamType::Tensor(kind, n, boxed(e)));
        }
        Ok(match name {
            "vector" => {
                let e = self.ty(scope)?;
                self.expect(',')?;
                ParamType::Vector(boxed(e), self.extent_arg(scope, false)?)
            }
            "matrix" => {
                let e = self.ty(scope)?;
                self.expect(',')?;
                let r = self.extent_arg(scope, false)?;
                self.expect(',')?;
                ParamType::Matrix(boxed(e), r, self.extent_arg(scope, false)?)
            }
            "vec2" | "vec3" | "vec4" => {
                let n = u64::from(name.as_bytes()[3] - b'0');
                ParamType::Vector(boxed(self.ty(scope)?), Extent::Fixed(n))
            }
            "array" => {
                let e = self.ty(scope)?;
                let n = if self.eat(',') {
                    self.extent_arg(scope, false)?
                } else {
                    Extent::Any
                };
                ParamType::Array(boxed(e), n)
            }
            "StructuredBuffer" | "RWStructuredBuffer" => {
                ParamType::StructuredBuffer(boxed(self.ty(scope)?))
            }
            "Texture2D" | "RWTexture2D" => ParamType::Texture2D(boxed(self.ty(scope)?)),
            "texture_2d" => {
                let e = self.ty(scope)?;
                ParamType::Texture2D(boxed(ParamType::Vector(boxed(e), Extent::Fixed(4))))
            }
            "Slice" => {
                let n = self.number("the slice's number of dims")?;
                let n = u32::try_from(n).map_err(|_| self.error("too many slice dims"))?;
                self.expect(',')?;
                ParamType::Slice(n, boxed(self.ty(scope)?))
            }
            _ if name.starts_with("mat") => match matrix_dims(&name[3..]) {
                Some((r, c)) => {
                    ParamType::Matrix(boxed(self.ty(scope)?), Extent::Fixed(r), Extent::Fixed(c))
                }
                None => {
                    return Err(CallError::syntax(
                        self.text,
                        start,
                        format!("unknown generic type `{name}<...>`"),
                    ))
                }
            },
            _ => {
                return Err(CallError::syntax(
                    self.text,
                    start,
                    format!("unknown generic type `{name}<...>`"),
                ))
            }
        })
    }
}

/// `RxC` with R and C from 1 to 4.
fn matrix_dims(s: &str) -> Option<(u64, u64)> {
    let b = s.as_bytes();
    (b.len() == 3 && b[1] == b'x' && (b'1'..=b'4').contains(&b[0]) && (b'1'..=b'4').contains(&b[2]))
        .then(|| (u64::from(b[0] - b'0'), u64::from(b[2] - b'0')))
}

/// A type written as one word: a scalar, `float3`, `float4x4`, `vec3f`,
/// `mat2x2f`, a struct or a generic type.
fn named_type(name: &str, scope: &TypeScope) -> Option<ParamType> {
    if let Some(s) = Scalar::named(name) {
        return Some(ParamType::Scalar(s));
    }
    if let Some(s) = scope.structs.get(name) {
        return Some(ParamType::Struct(s.clone()));
    }
    if scope.generic_types.iter().any(|g| **g == *name) {
        return Some(ParamType::Generic(Arc::from(name)));
    }
    let scalar = |t: Scalar| Box::new(ParamType::Scalar(t));
    // Slang: float3, int2, float4x4.
    for base in ["float", "half", "int", "uint", "bool"] {
        if let Some(rest) = name.strip_prefix(base) {
            let s = Scalar::named(base)?;
            let b = rest.as_bytes();
            if b.len() == 1 && (b'1'..=b'4').contains(&b[0]) {
                return Some(ParamType::Vector(
                    scalar(s),
                    Extent::Fixed(u64::from(b[0] - b'0')),
                ));
            }
            if let Some((r, c)) = matrix_dims(rest) {
                return Some(ParamType::Matrix(
                    scalar(s),
                    Extent::Fixed(r),
                    Extent::Fixed(c),
                ));
            }
        }
    }
    // WGSL shorthands: vec3f, vec2i, mat4x4f.
    let suffix = |c: u8| match c {
        b'f' => Some(Scalar::Float),
        b'h' => Some(Scalar::Half),
        b'i' => Some(Scalar::Int),
        b'u' => Some(Scalar::Uint),
        _ => None,
    };
    let b = name.as_bytes();
    if b.len() == 5 && name.starts_with("vec") && (b'2'..=b'4').contains(&b[3]) {
        return Some(ParamType::Vector(
            scalar(suffix(b[4])?),
            Extent::Fixed(u64::from(b[3] - b'0')),
        ));
    }
    if b.len() == 7 && name.starts_with("mat") {
        let (r, c) = matrix_dims(&name[3..6])?;
        return Some(ParamType::Matrix(
            scalar(suffix(b[6])?),
            Extent::Fixed(r),
            Extent::Fixed(c),
        ));
    }
    None
}

/// Reads a type on its own, in `scope` (for argument element types).
pub fn parse_type(text: &str, scope: &TypeScope) -> Result<ParamType, CallError> {
    let mut c = Cursor::new(text)?;
    let t = c.ty(scope)?;
    if !c.at_end() {
        return Err(c.error("unexpected text after the type"));
    }
    Ok(t)
}

/// Reads struct declarations (`struct P { float3 position; float3
/// velocity; };`) into `scope`, from where the cursor is, while there are.
fn struct_decls(c: &mut Cursor<'_>, scope: &mut TypeScope) -> Result<(), CallError> {
    while c.peek() == Some(&Tok::Ident("struct".into())) {
        c.next();
        let name = c.ident("the struct's name")?;
        c.expect('{')?;
        let mut fields: Vec<(Arc<str>, ParamType)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        while !c.eat('}') {
            let ty = c.ty(scope)?;
            let field = c.ident("a field name")?;
            let ty = c.array_suffixes(ty)?;
            if !seen.insert(field.clone()) {
                return Err(c.error(format!("field `{field}` is declared twice")));
            }
            fields.push((Arc::from(field.as_str()), ty));
            c.expect(';')?;
        }
        c.eat(';');
        scope.add_struct(StructType {
            name: Arc::from(name.as_str()),
            fields,
        });
    }
    Ok(())
}

/// Reads a Slang-style declaration: struct declarations, then one
/// function, with or without a body:
/// `float dot(float3 a, float3 b)`,
/// `void dot(float3 a, float3 b, out float r)`,
/// `T sum<T, let N : int>(vector<T,N> v)`.
pub(crate) fn parse_slang(text: &str) -> Result<Signature, CallError> {
    let mut c = Cursor::new(text)?;
    let mut scope = TypeScope::default();
    struct_decls(&mut c, &mut scope)?;
    // The return type may name generics declared after the function name,
    // so find the name first (the word before `(`, or before the `<...>`
    // that comes right before `(`), read the generics, then come back.
    let ret_at = c.pos;
    let paren = (c.pos..c.toks.len())
        .find(|&k| c.toks[k].0 == Tok::Punct('('))
        .ok_or_else(|| c.error("expected a function declaration: `TYPE NAME(PARAMS)`"))?;
    let mut name_at = paren.checked_sub(1);
    if name_at.is_some_and(|k| c.toks[k].0 == Tok::Punct('>')) {
        let mut depth = 0usize;
        let mut k = paren - 1;
        loop {
            match c.toks[k].0 {
                Tok::Punct('>') => depth += 1,
                Tok::Punct('<') => depth -= 1,
                _ => {}
            }
            if depth == 0 || k == ret_at {
                break;
            }
            k -= 1;
        }
        name_at = k.checked_sub(1);
    }
    match name_at {
        Some(k) if k > ret_at => c.pos = k,
        _ => return Err(c.error("expected a function declaration: `TYPE NAME(PARAMS)`")),
    }
    let name = c.ident("the function's name")?;
    if c.eat('<') {
        loop {
            if c.peek() == Some(&Tok::Ident("let".into())) {
                c.next();
                let g = c.ident("a generic size's name")?;
                c.expect(':')?;
                let kind = c.ident("`int` or `uint`")?;
                if kind != "int" && kind != "uint" {
                    return Err(c.error("a generic size is an `int` or a `uint`"));
                }
                scope.generic_sizes.push(Arc::from(g.as_str()));
                scope.generic_order.push(Arc::from(g.as_str()));
            } else {
                let g = c.ident("a generic type's name")?;
                if c.eat(':') {
                    c.ident("an interface")?;
                }
                scope.generic_types.push(Arc::from(g.as_str()));
                scope.generic_order.push(Arc::from(g.as_str()));
            }
            if !c.eat(',') {
                break;
            }
        }
        c.expect('>')?;
    }
    let params_at = c.pos;
    c.pos = ret_at;
    let result = if c.peek() == Some(&Tok::Ident("void".into())) {
        c.next();
        None
    } else {
        Some(c.ty(&scope)?)
    };
    if c.peek() != Some(&Tok::Ident(name.clone())) {
        return Err(c.error("expected the function's name after its return type"));
    }
    c.pos = params_at;
    c.expect('(')?;
    let mut names = std::collections::HashSet::new();
    let mut params: Vec<Param> = Vec::new();
    if !c.eat(')') {
        loop {
            let mut direction = Direction::In;
            if let Some(Tok::Ident(m)) = c.peek() {
                let d = match m.as_str() {
                    "in" => Some(Direction::In),
                    "out" => Some(Direction::Out),
                    "inout" => Some(Direction::InOut),
                    _ => None,
                };
                if let Some(d) = d {
                    direction = d;
                    c.next();
                }
            }
            let ty_at = c.offset();
            let ty = c.ty(&scope)?;
            if let (ParamType::Tensor(kind, ..), Direction::Out | Direction::InOut) =
                (&ty, direction)
            {
                return Err(CallError::syntax(
                    text,
                    ty_at,
                    format!(
                        "a {} parameter is neither `out` nor `inout`: the function writes a tensor through `RWTensor` or `RWNDBuffer`",
                        kind.name()
                    ),
                ));
            }
            let pname = c.ident("a parameter name")?;
            let ty = c.array_suffixes(ty)?;
            if !names.insert(pname.clone()) {
                return Err(c.error(format!("parameter `{pname}` is declared twice")));
            }
            params.push(Param {
                name: Arc::from(pname.as_str()),
                ty,
                direction,
            });
            if c.eat(')') {
                break;
            }
            c.expect(',')?;
        }
    }
    // A body, if any, is not read: only the declaration matters here.
    if c.peek() == Some(&Tok::Punct('{')) {
        let mut depth = 0usize;
        while let Some(t) = c.next() {
            match t {
                Tok::Punct('{') => depth += 1,
                Tok::Punct('}') => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                _ => {}
            }
        }
        if depth != 0 {
            return Err(c.error("the function's body is not closed by `}`"));
        }
    }
    c.eat(';');
    if !c.at_end() {
        return Err(c.error("unexpected text after the declaration"));
    }
    Ok(Signature::new(
        Arc::from(name.as_str()),
        params,
        result,
        Language::Slang,
        scope,
    ))
}
