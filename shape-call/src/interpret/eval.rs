//! Running a function of a naga module: frames, variables and pointers,
//! statements and expressions.

use naga::{Arena, Block, Expression, Handle, Span, Statement, SwitchValue, TypeInner};

use super::builtin::{self, Domains, Fault};
use super::value::Value;
use super::{Accessor, AccessorKind, Interpreter};
use crate::error::CallError;

/// An error on its way out of the machine, boxed: results that carry a
/// whole [`CallError`] by value made every evaluation step move it
/// (measured: a third of the time of a loop).
pub(crate) type Trap = Box<CallError>;

/// The slices, tensors and buffers a function reads through accessors
/// (`p_load`, `p_size`, `p_store`), by their accessor's slot.
pub(crate) trait Accessors {
    fn load(&mut self, slot: usize, index: &[u32]) -> Result<Value, Fault>;
    fn size(&self, slot: usize, dim: u32) -> u32;
    fn store(&mut self, slot: usize, index: &[u32], value: &Value) -> Result<(), Fault>;
}

/// No accessors: a function of values only.
pub(crate) struct NoAccessors;

impl Accessors for NoAccessors {
    fn load(&mut self, _: usize, _: &[u32]) -> Result<Value, Fault> {
        Err(Fault::Unsupported("a slice accessor outside a call".into()))
    }
    fn size(&self, _: usize, _: u32) -> u32 {
        0
    }
    fn store(&mut self, _: usize, _: &[u32], _: &Value) -> Result<(), Fault> {
        Err(Fault::Unsupported("a slice accessor outside a call".into()))
    }
}

/// A pointer: a variable's slot and the path of member indices in it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Ptr {
    slot: usize,
    path: Vec<u32>,
}

/// A pointer to the whole variable in `slot`.
pub(crate) fn pointer_to(slot: usize) -> Item {
    Item::Ptr(Ptr {
        slot,
        path: Vec::new(),
    })
}

/// What an expression evaluates to.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Item {
    Val(Value),
    Ptr(Ptr),
}

enum Flow {
    Next,
    Break,
    Continue,
    Return(Option<Value>),
}

/// One function's activation: its expressions' values so far, its
/// arguments and where its local variables start in memory.
struct Frame<'m> {
    name: &'m str,
    exprs: &'m Arena<Expression>,
    args: Vec<Item>,
    cache: Vec<Option<Item>>,
    locals: usize,
}

/// Calls nest at most this deep (WGSL forbids recursion; naga's validator
/// refuses it, this is a second line).
const MAX_DEPTH: usize = 64;

pub(crate) struct Machine<'a> {
    pub(crate) it: &'a Interpreter,
    pub(crate) constants: &'a [Value],
    pub(crate) memory: Vec<Value>,
    pub(crate) steps: u64,
    pub(crate) accessors: &'a mut dyn Accessors,
    depth: usize,
}

impl<'a> Machine<'a> {
    pub(crate) fn new(
        it: &'a Interpreter,
        constants: &'a [Value],
        accessors: &'a mut dyn Accessors,
    ) -> Machine<'a> {
        Machine {
            it,
            constants,
            memory: Vec::new(),
            steps: 0,
            accessors,
            depth: 0,
        }
    }

    /// The value of a module-scope expression (a constant's or a private
    /// variable's initializer).
    pub(crate) fn global_expression(&mut self, h: Handle<Expression>) -> Result<Value, Trap> {
        let module = &self.it.module;
        let mut frame = Frame {
            name: "<module>",
            exprs: &module.global_expressions,
            args: Vec::new(),
            cache: vec![None; module.global_expressions.len()],
            locals: 0,
        };
        self.value(&mut frame, h)
    }

    /// Calls function `h` with `args` (values, or pointers for `ptr`
    /// parameters).
    pub(crate) fn call(
        &mut self,
        h: Handle<naga::Function>,
        args: Vec<Item>,
    ) -> Result<Option<Value>, Trap> {
        let module = &self.it.module;
        let function = &module.functions[h];
        let name = function.name.as_deref().unwrap_or("<function>");
        if self.depth >= MAX_DEPTH {
            return Err(Box::new(CallError::UnsupportedWgsl {
                function: name.to_string(),
                construct: format!("calls nested more than {MAX_DEPTH} deep"),
                at: String::new(),
            }));
        }
        self.depth += 1;
        let mut frame = Frame {
            name,
            exprs: &function.expressions,
            args,
            cache: vec![None; function.expressions.len()],
            locals: self.memory.len(),
        };
        for (_, var) in function.local_variables.iter() {
            let v = match var.init {
                Some(init) => self.value(&mut frame, init)?,
                None => zero(&module.types, var.ty)
                    .map_err(|f| self.fault(&frame, Span::UNDEFINED, f))?,
            };
            self.memory.push(v);
        }
        let flow = self.block(&mut frame, &function.body);
        self.memory.truncate(frame.locals);
        self.depth -= 1;
        match flow? {
            Flow::Return(v) => Ok(v),
            _ => Ok(None),
        }
    }

    /// A [`Fault`] as the caller's error, placed at `span`.
    fn fault(&self, frame: &Frame, span: Span, f: Fault) -> Trap {
        let at = self.it.place(span);
        let function = frame.name.to_string();
        Box::new(match f {
            Fault::Unsupported(construct) => CallError::UnsupportedWgsl {
                function,
                construct,
                at,
            },
            Fault::Kind(what) => CallError::UnsupportedWgsl {
                function,
                construct: format!("an operation on operands it does not take: {what}"),
                at,
            },
            Fault::Domain { what, value } => CallError::OutOfDomain {
                function,
                what,
                value,
                at,
            },
        })
    }

    fn block(&mut self, f: &mut Frame, block: &Block) -> Result<Flow, Trap> {
        for (statement, span) in block.span_iter() {
            self.steps += 1;
            if self.steps > self.it.options.step_limit {
                return Err(Box::new(CallError::StepLimit {
                    function: f.name.to_string(),
                    limit: self.it.options.step_limit,
                    at: self.it.place(*span),
                }));
            }
            let flow = self.statement(f, statement, *span)?;
            if !matches!(flow, Flow::Next) {
                return Ok(flow);
            }
        }
        Ok(Flow::Next)
    }

    fn statement(&mut self, f: &mut Frame, s: &Statement, span: Span) -> Result<Flow, Trap> {
        match s {
            Statement::Emit(range) => {
                for h in range.clone() {
                    let v = self.compute(f, h)?;
                    f.cache[h.index()] = Some(v);
                }
            }
            Statement::Block(b) => return self.block(f, b),
            Statement::If {
                condition,
                accept,
                reject,
            } => {
                let c = self.value(f, *condition)?;
                let taken = match c {
                    Value::Bool(b) => b,
                    other => {
                        return Err(self.fault(
                            f,
                            span,
                            Fault::Kind(format!("`if` on a {}", other.type_name())),
                        ))
                    }
                };
                return self.block(f, if taken { accept } else { reject });
            }
            Statement::Switch { selector, cases } => {
                let v = self.value(f, *selector)?;
                let matches = |c: &SwitchValue| match (c, &v) {
                    (SwitchValue::I32(a), Value::I32(b)) => a == b,
                    (SwitchValue::U32(a), Value::U32(b)) => a == b,
                    _ => false,
                };
                let start = cases
                    .iter()
                    .position(|c| matches(&c.value))
                    .or_else(|| cases.iter().position(|c| c.value == SwitchValue::Default));
                if let Some(start) = start {
                    for case in &cases[start..] {
                        match self.block(f, &case.body)? {
                            Flow::Next if case.fall_through => continue,
                            Flow::Next | Flow::Break => break,
                            other => return Ok(other),
                        }
                    }
                }
            }
            Statement::Loop {
                body,
                continuing,
                break_if,
            } => loop {
                match self.block(f, body)? {
                    Flow::Break => break,
                    Flow::Return(v) => return Ok(Flow::Return(v)),
                    Flow::Next | Flow::Continue => {}
                }
                match self.block(f, continuing)? {
                    Flow::Return(v) => return Ok(Flow::Return(v)),
                    Flow::Break => break,
                    _ => {}
                }
                if let Some(c) = break_if {
                    if self.value(f, *c)? == Value::Bool(true) {
                        break;
                    }
                }
                self.steps += 1;
                if self.steps > self.it.options.step_limit {
                    return Err(Box::new(CallError::StepLimit {
                        function: f.name.to_string(),
                        limit: self.it.options.step_limit,
                        at: self.it.place(span),
                    }));
                }
            },
            Statement::Break => return Ok(Flow::Break),
            Statement::Continue => return Ok(Flow::Continue),
            Statement::Return { value } => {
                let v = match value {
                    Some(h) => Some(self.value(f, *h)?),
                    None => None,
                };
                return Ok(Flow::Return(v));
            }
            Statement::Store { pointer, value } => {
                let p = self.pointer(f, *pointer, span)?;
                let v = self.value(f, *value)?;
                self.store(&p, v).map_err(|e| self.fault(f, span, e))?;
            }
            Statement::Call {
                function,
                arguments,
                result,
            } => {
                let mut args = Vec::with_capacity(arguments.len());
                for a in arguments {
                    args.push(self.get(f, *a)?);
                }
                let ret = match self.it.accessors.get(function) {
                    Some(acc) => self
                        .access(*acc, &args)
                        .map_err(|e| self.fault(f, span, e))?,
                    None => self.call(*function, args)?,
                };
                if let (Some(r), Some(v)) = (result, ret) {
                    f.cache[r.index()] = Some(Item::Val(v));
                }
            }
            other => {
                return Err(self.fault(
                    f,
                    span,
                    Fault::Unsupported(format!("the statement {}", statement_name(other))),
                ))
            }
        }
        Ok(Flow::Next)
    }

    /// A call of a slice's accessor.
    fn access(&mut self, acc: Accessor, args: &[Item]) -> Result<Option<Value>, Fault> {
        let index = |items: &[Item]| -> Result<Vec<u32>, Fault> {
            items
                .iter()
                .map(|i| match i {
                    Item::Val(Value::U32(x)) => Ok(*x),
                    _ => Err(Fault::Kind("an accessor index that is not a u32".into())),
                })
                .collect()
        };
        match acc.kind {
            AccessorKind::Load => Ok(Some(self.accessors.load(acc.slot, &index(args)?)?)),
            AccessorKind::Size => match args {
                [Item::Val(Value::U32(d))] => {
                    Ok(Some(Value::U32(self.accessors.size(acc.slot, *d))))
                }
                _ => Err(Fault::Kind("a size accessor without a u32 dim".into())),
            },
            AccessorKind::Store => match args.split_last() {
                Some((Item::Val(v), idx)) => {
                    self.accessors.store(acc.slot, &index(idx)?, v)?;
                    Ok(None)
                }
                _ => Err(Fault::Kind("a store accessor without a value".into())),
            },
        }
    }

    fn get(&mut self, f: &mut Frame, h: Handle<Expression>) -> Result<Item, Trap> {
        if let Some(v) = &f.cache[h.index()] {
            return Ok(v.clone());
        }
        let v = self.compute(f, h)?;
        f.cache[h.index()] = Some(v.clone());
        Ok(v)
    }

    fn value(&mut self, f: &mut Frame, h: Handle<Expression>) -> Result<Value, Trap> {
        match self.get(f, h)? {
            Item::Val(v) => Ok(v),
            Item::Ptr(_) => Err(self.fault(
                f,
                f.exprs.get_span(h),
                Fault::Kind("a pointer where a value was expected".into()),
            )),
        }
    }

    fn pointer(&mut self, f: &mut Frame, h: Handle<Expression>, span: Span) -> Result<Ptr, Trap> {
        match self.get(f, h)? {
            Item::Ptr(p) => Ok(p),
            Item::Val(_) => Err(self.fault(
                f,
                span,
                Fault::Kind("a value where a pointer was expected".into()),
            )),
        }
    }

    fn load(&self, p: &Ptr) -> Result<Value, Fault> {
        let mut v = self
            .memory
            .get(p.slot)
            .ok_or_else(|| Fault::Kind("a pointer to a variable that is gone".into()))?;
        for &i in &p.path {
            v = v
                .components()
                .get(i as usize)
                .ok_or_else(|| Fault::Kind("a pointer into a scalar".into()))?;
        }
        Ok(v.clone())
    }

    fn store(&mut self, p: &Ptr, value: Value) -> Result<(), Fault> {
        let mut v = self
            .memory
            .get_mut(p.slot)
            .ok_or_else(|| Fault::Kind("a pointer to a variable that is gone".into()))?;
        for &i in &p.path {
            v = v
                .components_mut()
                .get_mut(i as usize)
                .ok_or_else(|| Fault::Kind("a pointer into a scalar".into()))?;
        }
        *v = value;
        Ok(())
    }

    /// The number of components of what `p` points at.
    fn pointee_len(&self, p: &Ptr) -> Result<usize, Fault> {
        Ok(self.load(p)?.components().len())
    }

    fn compute(&mut self, f: &mut Frame, h: Handle<Expression>) -> Result<Item, Trap> {
        let span = f.exprs.get_span(h);
        let d = Domains {
            check: self.it.options.check_domains,
        };
        let module = &self.it.module;
        let wrap = |m: &Machine, f: &Frame, r: Result<Value, Fault>| -> Result<Item, Trap> {
            r.map(Item::Val).map_err(|e| m.fault(f, span, e))
        };
        let item = match &f.exprs[h] {
            Expression::Literal(l) => wrap(self, f, literal(l))?,
            Expression::Constant(c) => {
                Item::Val(self.constants.get(c.index()).cloned().ok_or_else(|| {
                    self.fault(
                        f,
                        span,
                        Fault::Unsupported("a constant used before it is defined".into()),
                    )
                })?)
            }
            Expression::ZeroValue(ty) => wrap(self, f, zero(&module.types, *ty))?,
            Expression::Compose { ty, components } => {
                let mut parts = Vec::with_capacity(components.len());
                for c in components {
                    parts.push(self.value(f, *c)?);
                }
                wrap(self, f, compose(&module.types[*ty].inner, parts))?
            }
            Expression::Splat { size, value } => {
                let v = self.value(f, *value)?;
                Item::Val(Value::Vector(vec![v; *size as usize]))
            }
            Expression::Swizzle {
                size,
                vector,
                pattern,
            } => {
                let v = self.value(f, *vector)?;
                let c = v.components();
                let picked: Option<Vec<Value>> = pattern[..*size as usize]
                    .iter()
                    .map(|p| c.get(*p as usize).cloned())
                    .collect();
                let picked = picked.ok_or_else(|| {
                    self.fault(f, span, Fault::Kind("a swizzle past a vector's end".into()))
                })?;
                Item::Val(Value::Vector(picked))
            }
            Expression::FunctionArgument(i) => f
                .args
                .get(*i as usize)
                .cloned()
                .ok_or_else(|| self.fault(f, span, Fault::Kind("a missing argument".into())))?,
            Expression::GlobalVariable(g) => {
                match self.it.privates.iter().position(|(p, _)| p == g) {
                    Some(slot) => Item::Ptr(Ptr {
                        slot,
                        path: Vec::new(),
                    }),
                    None => {
                        let space = module.global_variables[*g].space;
                        return Err(self.fault(
                        f,
                        span,
                        Fault::Unsupported(format!(
                            "a module-scope variable in address space {space:?} (only `var<private>` runs)"
                        )),
                    ));
                    }
                }
            }
            Expression::LocalVariable(l) => Item::Ptr(Ptr {
                slot: f.locals + l.index(),
                path: Vec::new(),
            }),
            Expression::Load { pointer } => {
                let p = self.pointer(f, *pointer, span)?;
                wrap(self, f, self.load(&p))?
            }
            Expression::Access { base, index } => {
                let i = match self.value(f, *index)? {
                    Value::U32(i) => i64::from(i),
                    Value::I32(i) => i64::from(i),
                    other => {
                        return Err(self.fault(
                            f,
                            span,
                            Fault::Kind(format!("an index of type {}", other.type_name())),
                        ))
                    }
                };
                self.index(f, *base, i, span)?
            }
            Expression::AccessIndex { base, index } => {
                self.index(f, *base, i64::from(*index), span)?
            }
            Expression::Unary { op, expr } => {
                let v = self.value(f, *expr)?;
                wrap(self, f, builtin::unary(*op, &v))?
            }
            Expression::Binary { op, left, right } => {
                let (a, b) = (self.value(f, *left)?, self.value(f, *right)?);
                let r = builtin::binary(*op, &a, &b, &d).and_then(|v| {
                    d.finite(&v, &|| {
                        format!("`{}` (its result is not finite)", binary_symbol(*op))
                    })?;
                    Ok(v)
                });
                wrap(self, f, r)?
            }
            Expression::Select {
                condition,
                accept,
                reject,
            } => {
                let c = self.value(f, *condition)?;
                let (a, r) = (self.value(f, *accept)?, self.value(f, *reject)?);
                wrap(self, f, builtin::select(&c, &a, &r))?
            }
            Expression::Relational { fun, argument } => {
                let v = self.value(f, *argument)?;
                wrap(self, f, builtin::relational(*fun, &v))?
            }
            Expression::Math {
                fun,
                arg,
                arg1,
                arg2,
                arg3,
            } => {
                let mut args = vec![self.value(f, *arg)?];
                for a in [arg1, arg2, arg3].into_iter().flatten() {
                    args.push(self.value(f, *a)?);
                }
                let r = builtin::math(*fun, &args, &d).and_then(|v| {
                    d.finite(&v, &|| {
                        format!("`{}` (its result is not finite)", builtin::math_name(*fun))
                    })?;
                    Ok(v)
                });
                wrap(self, f, r)?
            }
            Expression::As {
                expr,
                kind,
                convert,
            } => {
                let v = self.value(f, *expr)?;
                wrap(self, f, builtin::cast(&v, *kind, *convert))?
            }
            Expression::CallResult(_) => {
                return Err(self.fault(
                    f,
                    span,
                    Fault::Kind("a call's result before the call".into()),
                ))
            }
            other => {
                return Err(self.fault(
                    f,
                    span,
                    Fault::Unsupported(format!("the expression {}", expression_name(other))),
                ))
            }
        };
        Ok(item)
    }

    /// Component `i` of a composite value, or a pointer to it. WGSL leaves
    /// an index past the end implementation-defined for values computed at
    /// run time; here it takes the last component (as wgpu's `Restrict`
    /// bounds-check policy does).
    fn index(
        &mut self,
        f: &mut Frame,
        base: Handle<Expression>,
        i: i64,
        span: Span,
    ) -> Result<Item, Trap> {
        let clamp = |i: i64, len: usize| i.clamp(0, len.saturating_sub(1) as i64) as u32;
        match self.get(f, base)? {
            Item::Val(v) => {
                let c = v.components();
                let picked = c.get(clamp(i, c.len()) as usize).cloned().ok_or_else(|| {
                    self.fault(
                        f,
                        span,
                        Fault::Kind(format!("an index into a {}", v.type_name())),
                    )
                })?;
                Ok(Item::Val(picked))
            }
            Item::Ptr(mut p) => {
                let len = self.pointee_len(&p).map_err(|e| self.fault(f, span, e))?;
                p.path.push(clamp(i, len));
                Ok(Item::Ptr(p))
            }
        }
    }
}

fn literal(l: &naga::Literal) -> Result<Value, Fault> {
    use naga::Literal as L;
    Ok(match *l {
        L::F32(x) => Value::F32(x),
        L::I32(x) => Value::I32(x),
        L::U32(x) => Value::U32(x),
        L::Bool(b) => Value::Bool(b),
        L::AbstractInt(x) => {
            Value::I32(i32::try_from(x).map_err(|_| {
                Fault::Unsupported(format!("the abstract integer {x} (beyond i32)"))
            })?)
        }
        L::AbstractFloat(x) => Value::F32(x as f32),
        other => {
            return Err(Fault::Unsupported(format!(
                "the literal {other:?} (only 32-bit scalars run)"
            )))
        }
    })
}

/// At most this many scalars in one value the interpreter makes (a value
/// takes about 32 bytes per scalar).
const MAX_SCALARS: u64 = 1 << 22;

/// The number of scalars a value of type `ty` holds (saturating).
fn scalars(types: &naga::UniqueArena<naga::Type>, ty: Handle<naga::Type>) -> u64 {
    match &types[ty].inner {
        TypeInner::Vector { size, .. } => *size as u64,
        TypeInner::Matrix { columns, rows, .. } => *columns as u64 * *rows as u64,
        TypeInner::Array {
            base,
            size: naga::ArraySize::Constant(n),
            ..
        } => u64::from(n.get()).saturating_mul(scalars(types, *base)),
        TypeInner::Struct { members, .. } => members
            .iter()
            .fold(0u64, |a, m| a.saturating_add(scalars(types, m.ty))),
        _ => 1,
    }
}

/// The zero value of a type; a value of more than [`MAX_SCALARS`]
/// scalars is refused before anything is allocated.
pub(crate) fn zero(
    types: &naga::UniqueArena<naga::Type>,
    ty: Handle<naga::Type>,
) -> Result<Value, Fault> {
    let n = scalars(types, ty);
    if n > MAX_SCALARS {
        return Err(Fault::Unsupported(format!(
            "a value of {n} scalars (the interpreter makes values of at most {MAX_SCALARS})"
        )));
    }
    zero_checked(types, ty)
}

fn zero_checked(
    types: &naga::UniqueArena<naga::Type>,
    ty: Handle<naga::Type>,
) -> Result<Value, Fault> {
    let scalar = |s: naga::Scalar| -> Result<Value, Fault> {
        use naga::ScalarKind as K;
        Ok(match (s.kind, s.width) {
            (K::Bool, _) => Value::Bool(false),
            (K::Float, 4) => Value::F32(0.0),
            (K::Sint, 4) => Value::I32(0),
            (K::Uint, 4) => Value::U32(0),
            (K::AbstractInt, _) => Value::I32(0),
            (K::AbstractFloat, _) => Value::F32(0.0),
            _ => {
                return Err(Fault::Unsupported(format!(
                    "the scalar type {s:?} (only 32-bit scalars run)"
                )))
            }
        })
    };
    Ok(match &types[ty].inner {
        TypeInner::Scalar(s) => scalar(*s)?,
        TypeInner::Vector { size, scalar: s } => Value::Vector(vec![scalar(*s)?; *size as usize]),
        TypeInner::Matrix {
            columns,
            rows,
            scalar: s,
        } => Value::Matrix(vec![
            Value::Vector(vec![scalar(*s)?; *rows as usize]);
            *columns as usize
        ]),
        TypeInner::Array {
            base,
            size: naga::ArraySize::Constant(n),
            ..
        } => Value::Array(vec![zero_checked(types, *base)?; n.get() as usize]),
        TypeInner::Struct { members, .. } => Value::Struct(
            members
                .iter()
                .map(|m| zero_checked(types, m.ty))
                .collect::<Result<_, _>>()?,
        ),
        other => return Err(Fault::Unsupported(format!("a value of type {other:?}"))),
    })
}

/// A value of type `ty` made of `parts`: a vector's may be scalars and
/// vectors, a matrix's columns or scalars.
fn compose(ty: &TypeInner, parts: Vec<Value>) -> Result<Value, Fault> {
    Ok(match ty {
        TypeInner::Vector { .. } => {
            let mut flat = Vec::with_capacity(4);
            for p in parts {
                match p {
                    Value::Vector(c) => flat.extend(c),
                    s => flat.push(s),
                }
            }
            Value::Vector(flat)
        }
        TypeInner::Matrix { rows, .. } => {
            if parts.iter().all(|p| matches!(p, Value::Vector(_))) {
                Value::Matrix(parts)
            } else {
                Value::Matrix(
                    parts
                        .chunks(*rows as usize)
                        .map(|c| Value::Vector(c.to_vec()))
                        .collect(),
                )
            }
        }
        TypeInner::Array { .. } => Value::Array(parts),
        TypeInner::Struct { .. } => Value::Struct(parts),
        other => return Err(Fault::Unsupported(format!("constructing a {other:?}"))),
    })
}

fn binary_symbol(op: naga::BinaryOperator) -> &'static str {
    use naga::BinaryOperator as B;
    match op {
        B::Add => "+",
        B::Subtract => "-",
        B::Multiply => "*",
        B::Divide => "/",
        B::Modulo => "%",
        B::Equal => "==",
        B::NotEqual => "!=",
        B::Less => "<",
        B::LessEqual => "<=",
        B::Greater => ">",
        B::GreaterEqual => ">=",
        B::And => "&",
        B::ExclusiveOr => "^",
        B::InclusiveOr => "|",
        B::LogicalAnd => "&&",
        B::LogicalOr => "||",
        B::ShiftLeft => "<<",
        B::ShiftRight => ">>",
    }
}

/// The variant's name: what a user reads in an `unsupported` error.
fn variant_name(debug: String) -> String {
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_string()
}

fn statement_name(s: &Statement) -> String {
    let name = variant_name(format!("{s:?}"));
    match s {
        Statement::Kill => "`discard`".into(),
        Statement::ControlBarrier(_) | Statement::MemoryBarrier(_) => format!("{name} (a barrier)"),
        Statement::Atomic { .. } | Statement::ImageAtomic { .. } => format!("{name} (atomics)"),
        Statement::ImageStore { .. } => "`textureStore`".into(),
        _ => name,
    }
}

fn expression_name(e: &Expression) -> String {
    let name = variant_name(format!("{e:?}"));
    match e {
        Expression::ImageSample { .. }
        | Expression::ImageLoad { .. }
        | Expression::ImageQuery { .. } => {
            format!("{name} (textures)")
        }
        Expression::Derivative { .. } => format!("{name} (derivatives run in fragment shaders)"),
        Expression::ArrayLength(_) => "`arrayLength` (runtime-sized arrays)".into(),
        Expression::Override(_) => "an `override` constant".into(),
        _ => name,
    }
}
