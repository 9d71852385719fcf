//! Arguments of a vectorized call, and their text form.
//!
//! | text | argument |
//! |---|---|
//! | `tensor(100,3)` | a `float` tensor of shape (100, 3) |
//! | `tensor<float3>(10)` | a tensor of 10 `float3` (full shape (10, 3)) |
//! | `inttensor(1000,2)` | an `int` tensor |
//! | `tensor(channels=3, width=100, height=100)` | a tensor with named dims |
//! | `buffer(50, int2)` | a buffer of 50 `int2` |
//! | `float3` | a value of a type |
//! | `10.0`, `10` | a number (a float; an integer literal) |
//! | `ref`, `ref<int>` | a scalar reference that receives an output |
//! | `output`, `output<float3>(dims=1)`, `output(shape=(100))` | an output to allocate |
//! | `{position=tensor<float3>(10), velocity=float3}` | a struct, field by field |
//! | `call_id`, `thread_id`, `grid(shape=(4,-1))`, `wang_hash`, `rand_float(min=0.0, max=1.0)` | a generator ([`Generator`]) |

use std::sync::Arc;

use super::error::CallError;
use super::generator::Generator;
use super::syntax::{Cursor, Tok, TypeScope, MAX_DEPTH};
use super::types::{Extent, ParamType, Scalar};

/// A number given as an argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Number {
    /// A float literal (`10.0`): binds to `float` or `half` only.
    Float(f64),
    /// An integer literal (`10`): binds to any numeric scalar.
    Int(i64),
}

/// An output to allocate, optionally constrained.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OutputSpec {
    /// Its element type; the parameter's type when absent.
    pub elem: Option<ParamType>,
    /// Its number of argument dims (those beyond its type's).
    pub dims: Option<usize>,
    /// Its argument shape, when fixed by the caller.
    pub shape: Option<Vec<u64>>,
}

/// One argument of a call.
#[derive(Clone, Debug, PartialEq)]
pub enum Arg {
    /// A tensor or buffer: elements of type `elem`, in `shape`; its full
    /// shape is `shape` followed by `elem`'s type shape.
    Tensor {
        /// The element type (concrete).
        elem: ParamType,
        /// The shape, outermost first, without the element's dims.
        shape: Vec<u64>,
        /// Names of the full shape's dims, for a `map` by name.
        names: Option<Vec<Arc<str>>>,
    },
    /// A value of a (concrete) type: `float3`.
    Value(ParamType),
    /// A plain number.
    Number(Number),
    /// A scalar reference that receives an output (shape `()`).
    Ref(Scalar),
    /// An output to allocate with the call shape.
    Output(OutputSpec),
    /// A struct given field by field.
    Fields(Vec<(Arc<str>, Arg)>),
    /// A value the kernel generates for each call (`call_id`, `grid`,
    /// `rand_float`, ...).
    Generator(Generator),
}

impl Arg {
    /// A `float` tensor of `shape`.
    pub fn tensor(shape: &[u64]) -> Arg {
        Arg::tensor_of(ParamType::Scalar(Scalar::Float), shape)
    }

    /// A tensor of `elem` elements in `shape`.
    pub fn tensor_of(elem: ParamType, shape: &[u64]) -> Arg {
        Arg::Tensor {
            elem,
            shape: shape.to_vec(),
            names: None,
        }
    }

    /// An output to allocate, sized by the call.
    pub fn output() -> Arg {
        Arg::Output(OutputSpec::default())
    }

    /// Reads an argument in its text form (see the module's table), with
    /// the structs of `scope`.
    ///
    /// ```
    /// use shape_call::{Arg, TypeScope};
    /// let a = Arg::parse("tensor(100,3)", &TypeScope::new()).unwrap();
    /// assert_eq!(a, Arg::tensor(&[100, 3]));
    /// assert!(Arg::parse("tensor(100,", &TypeScope::new()).is_err());
    /// ```
    pub fn parse(text: &str, scope: &TypeScope) -> Result<Arg, CallError> {
        let mut c = Cursor::new(text)?;
        let a = arg(&mut c, scope)?;
        if !c.at_end() {
            return Err(c.error("unexpected text after the argument"));
        }
        Ok(a)
    }

    /// The argument's full shape (its dims and its element type's), when
    /// it has one: an output to allocate without a shape has none yet.
    pub fn full_shape(&self) -> Option<Vec<u64>> {
        let fixed = |t: &ParamType| -> Vec<u64> {
            t.type_shape()
                .iter()
                .map(|e| match e {
                    Extent::Fixed(n) => *n,
                    _ => 1,
                })
                .collect()
        };
        match self {
            Arg::Tensor { elem, shape, .. } => {
                let mut s = shape.clone();
                s.extend(fixed(elem));
                Some(s)
            }
            Arg::Value(t) => Some(fixed(t)),
            Arg::Number(_) | Arg::Ref(_) => Some(Vec::new()),
            Arg::Output(o) => o.shape.as_ref().map(|s| {
                let mut s = s.clone();
                if let Some(e) = &o.elem {
                    s.extend(fixed(e));
                }
                s
            }),
            Arg::Fields(_) => None,
            // A grid's own dims (its `-1` sizes stretch); the others have
            // no dims of their own.
            Arg::Generator(Generator::Grid { shape, .. }) => {
                Some(shape.iter().map(|d| d.unwrap_or(1)).collect())
            }
            Arg::Generator(_) => Some(Vec::new()),
        }
    }

    /// What the argument is, for messages: `a float tensor of 2 dims`.
    pub fn describe(&self, language: super::Language) -> String {
        match self {
            Arg::Tensor { elem, shape, .. } => format!(
                "a tensor of {} with {} dims",
                elem.spelled(language),
                shape.len()
            ),
            Arg::Value(t) => format!("a {} value", t.spelled(language)),
            Arg::Number(Number::Float(_)) => "a float number".into(),
            Arg::Number(Number::Int(_)) => "an integer number".into(),
            Arg::Ref(s) => format!("a {} reference", s.spelled(language)),
            Arg::Output(_) => "an output to allocate".into(),
            Arg::Fields(_) => "a struct given field by field".into(),
            Arg::Generator(g) => g.describe(),
        }
    }
}

/// Arguments of a call: positional ones first, then by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallArgs {
    /// Positional arguments.
    pub positional: Vec<Arg>,
    /// Arguments by parameter name (`_result` for the return value).
    pub named: Vec<(Arc<str>, Arg)>,
}

impl CallArgs {
    /// No arguments.
    pub fn new() -> CallArgs {
        CallArgs::default()
    }

    /// These arguments and `arg`, positional.
    pub fn arg(mut self, arg: Arg) -> CallArgs {
        self.positional.push(arg);
        self
    }

    /// These arguments and `arg` for parameter `name`.
    pub fn named(mut self, name: &str, arg: Arg) -> CallArgs {
        self.named.push((Arc::from(name), arg));
        self
    }
}

fn arg(c: &mut Cursor<'_>, scope: &TypeScope) -> Result<Arg, CallError> {
    match c.peek().cloned() {
        Some(Tok::Number(n)) => {
            c.next();
            number(c, &n)
        }
        Some(Tok::Punct('-')) => Err(c.error("expected a number after `-`")),
        Some(Tok::Punct('{')) => {
            if c.depth >= MAX_DEPTH {
                return Err(c.error(format!("struct arguments nest more than {MAX_DEPTH} deep")));
            }
            c.depth += 1;
            c.next();
            let mut fields: Vec<(Arc<str>, Arg)> = Vec::new();
            let mut seen = std::collections::HashSet::new();
            if !c.eat('}') {
                loop {
                    let name = c.ident("a field name")?;
                    c.expect('=')?;
                    let a = arg(c, scope)?;
                    if !seen.insert(name.clone()) {
                        return Err(c.error(format!("field `{name}` is given twice")));
                    }
                    fields.push((Arc::from(name.as_str()), a));
                    if c.eat('}') {
                        break;
                    }
                    c.expect(',')?;
                }
            }
            c.depth -= 1;
            Ok(Arg::Fields(fields))
        }
        Some(Tok::Ident(word)) => match word.as_str() {
            "tensor" | "inttensor" | "uinttensor" => {
                c.next();
                let elem = match word.as_str() {
                    "inttensor" => ParamType::Scalar(Scalar::Int),
                    "uinttensor" => ParamType::Scalar(Scalar::Uint),
                    _ => element(c, scope)?.unwrap_or(ParamType::Scalar(Scalar::Float)),
                };
                let (shape, names) = dims(c)?;
                concrete(c, &elem)?;
                Ok(Arg::Tensor { elem, shape, names })
            }
            "buffer" => {
                c.next();
                let elem = element(c, scope)?;
                c.expect('(')?;
                let count = c.number("the buffer's element count")?;
                let elem = match elem {
                    Some(e) => e,
                    None => {
                        c.expect(',')?;
                        c.ty(scope)?
                    }
                };
                c.expect(')')?;
                concrete(c, &elem)?;
                Ok(Arg::Tensor {
                    elem,
                    shape: vec![count],
                    names: None,
                })
            }
            "ref" | "ScalarRef" => {
                c.next();
                let t = element(c, scope)?.unwrap_or(ParamType::Scalar(Scalar::Float));
                if c.eat('(') {
                    // An initial value is accepted and has no shape.
                    if !c.eat(')') {
                        c.next();
                        c.expect(')')?;
                    }
                }
                match t {
                    ParamType::Scalar(s) => Ok(Arg::Ref(s)),
                    _ => Err(c.error("a reference holds a scalar")),
                }
            }
            "output" => {
                c.next();
                let elem = element(c, scope)?;
                if let Some(e) = &elem {
                    concrete(c, e)?;
                }
                let mut spec = OutputSpec {
                    elem,
                    ..OutputSpec::default()
                };
                if c.eat('(') && !c.eat(')') {
                    loop {
                        let key = c.ident("`dims=` or `shape=`")?;
                        c.expect('=')?;
                        match key.as_str() {
                            "dims" => {
                                let n = c.number("a number of dims")?;
                                spec.dims =
                                    Some(usize::try_from(n).map_err(|_| c.error("too many dims"))?);
                            }
                            "shape" => spec.shape = Some(dims(c)?.0),
                            _ => return Err(c.error(format!("unknown output option `{key}`"))),
                        }
                        if c.eat(')') {
                            break;
                        }
                        c.expect(',')?;
                    }
                }
                Ok(Arg::Output(spec))
            }
            "true" | "false" => {
                c.next();
                Ok(Arg::Value(ParamType::Scalar(Scalar::Bool)))
            }
            "call_id" | "thread_id" | "grid" | "wang_hash" | "rand_float" => {
                c.next();
                super::generator::parse(&word, c).map(Arg::Generator)
            }
            _ => {
                let t = c.ty(scope)?;
                concrete(c, &t)?;
                Ok(Arg::Value(t))
            }
        },
        _ => Err(c.error("expected an argument: a tensor, buffer, value, number, ref or output")),
    }
}

/// `<TYPE>` after `tensor`, `buffer`, `ref` or `output`, if written.
fn element(c: &mut Cursor<'_>, scope: &TypeScope) -> Result<Option<ParamType>, CallError> {
    if !c.eat('<') {
        return Ok(None);
    }
    let t = c.ty(scope)?;
    c.expect('>')?;
    Ok(Some(t))
}

/// `(d0, d1, ...)` or `(name=d0, ...)`.
/// Sizes, and their names when the dims are named.
type NamedDims = (Vec<u64>, Option<Vec<Arc<str>>>);

fn dims(c: &mut Cursor<'_>) -> Result<NamedDims, CallError> {
    c.expect('(')?;
    let mut sizes = Vec::new();
    let mut names = Vec::new();
    if !c.eat(')') {
        loop {
            if matches!(c.peek(), Some(Tok::Ident(_))) {
                let n = c.ident("a dim name")?;
                c.expect('=')?;
                names.push(Arc::from(n.as_str()));
            }
            sizes.push(c.number("a size")?);
            if c.eat(')') {
                break;
            }
            c.expect(',')?;
        }
    }
    match names.len() {
        0 => Ok((sizes, None)),
        n if n == sizes.len() => Ok((sizes, Some(names))),
        _ => Err(c.error("name every dim of the tensor, or none")),
    }
}

fn concrete(c: &Cursor<'_>, t: &ParamType) -> Result<(), CallError> {
    if t.is_concrete() {
        Ok(())
    } else {
        Err(c.error(format!(
            "{} has no fixed shape, so it cannot be an element or a value",
            t.spelled(super::Language::Slang)
        )))
    }
}

fn number(c: &Cursor<'_>, text: &str) -> Result<Arg, CallError> {
    if let Ok(i) = text.parse::<i64>() {
        return Ok(Arg::Number(Number::Int(i)));
    }
    match text.parse::<f64>() {
        Ok(f) if f.is_finite() => Ok(Arg::Number(Number::Float(f))),
        _ => Err(c.error(format!("`{text}` is not a number"))),
    }
}
