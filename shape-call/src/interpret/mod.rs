//! A CPU reference for WGSL: an interpreter of naga's IR that runs a
//! user's function on the CPU, so that a call needs no hand-written Rust
//! closure and the wgpu backend has an independent oracle.
//!
//! It runs 32-bit scalars (`f32`, `i32`, `u32`, `bool`), vectors,
//! matrices, fixed arrays and structs; WGSL's operators with its integer
//! rules (wrapping, division by zero giving the left operand and a
//! remainder of 0, shift amounts modulo 32, saturating float-to-integer
//! conversions); the math, geometry and bit built-ins; local variables,
//! `var<private>` and `ptr<function, T>` parameters; `if`, `switch`,
//! `loop`/`for`/`while` with `break`, `continue` and `return`; calls of
//! the module's other functions; and, for a call, the slice accessors
//! and generators a call kernel provides. Anything else is a typed
//! [`CallError::UnsupportedWgsl`] naming the construct and its place,
//! never a wrong value. Each call index runs at most
//! [`InterpretOptions::step_limit`] statements and loop iterations: a
//! runaway loop is [`CallError::StepLimit`], not a hang.
//!
//! ```
//! use shape_call::{Interpreter, Value};
//! let m = Interpreter::new(
//!     "fn poly(x: f32) -> f32 { var s = 0.0; for (var i = 0; i < 3; i++) { s = s * x + f32(i + 1); } return s; }",
//! ).unwrap();
//! // 1 x^2 + 2 x + 3 at x = 2.
//! assert_eq!(m.call("poly", &mut [Value::F32(2.0)]).unwrap(), Some(Value::F32(11.0)));
//! ```

mod builtin;
mod eval;
mod kernel;
mod value;

use std::collections::HashMap;
use std::sync::Arc;

use naga::{Handle, TypeInner};

pub use value::Value;

use crate::error::{quoted, CallError};
use eval::{Item, Machine, NoAccessors};

/// The statements and loop iterations one call index may run by default.
pub const DEFAULT_STEP_LIMIT: u64 = 1 << 20;

/// How the interpreter runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterpretOptions {
    /// The statements and loop iterations one call (one call index) may
    /// run before it is stopped with [`CallError::StepLimit`].
    pub step_limit: u64,
    /// Whether leaving a built-in's specified domain is an error
    /// ([`CallError::OutOfDomain`]): `sin`/`cos`/`tan` outside [-π, π],
    /// `log`, `sqrt`, `pow` and friends outside where they are defined,
    /// division by magnitudes outside [2^-126, 2^126], and any float
    /// result that is not finite. WGSL lets implementations assume no
    /// infinity or NaN and specifies accuracy only inside these domains,
    /// so a value computed outside them may differ between a GPU and this
    /// reference; with the check off the interpreter computes IEEE's
    /// answer.
    pub check_domains: bool,
}

impl Default for InterpretOptions {
    fn default() -> Self {
        InterpretOptions {
            step_limit: DEFAULT_STEP_LIMIT,
            check_domains: false,
        }
    }
}

/// What a generated accessor function does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AccessorKind {
    Load,
    Size,
    Store,
}

/// A function of the module that the interpreter answers itself: a
/// slice's accessor, with the slot of its slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Accessor {
    pub(crate) slot: usize,
    pub(crate) kind: AccessorKind,
}

/// A WGSL module, parsed and validated by naga, whose functions run on
/// the CPU.
#[derive(Debug)]
pub struct Interpreter {
    module: naga::Module,
    source: Arc<str>,
    /// The module's constants, by handle index.
    constants: Vec<Value>,
    /// `var<private>` variables and their initial values; a variable's
    /// slot is its position here.
    privates: Vec<(Handle<naga::GlobalVariable>, Value)>,
    accessors: HashMap<Handle<naga::Function>, Accessor>,
    /// Where the user's text starts in `source`, and its first line's
    /// prefix length (a body wrapped into a declaration).
    origin: (usize, usize),
    options: InterpretOptions,
}

impl Interpreter {
    /// Parses and validates `source` (naga's WGSL front end and
    /// validator: the module a GPU would compile).
    pub fn new(source: &str) -> Result<Interpreter, CallError> {
        Interpreter::build(source, HashMap::new(), (0, 0))
    }

    pub(crate) fn build(
        source: &str,
        accessors: HashMap<String, Accessor>,
        origin: (usize, usize),
    ) -> Result<Interpreter, CallError> {
        let module = crate::wgsl_source::parse(source, true)?;
        let accessors = module
            .functions
            .iter()
            .filter_map(|(h, f)| Some((h, *accessors.get(f.name.as_deref()?)?)))
            .collect();
        let mut it = Interpreter {
            module,
            source: Arc::from(source),
            constants: Vec::new(),
            privates: Vec::new(),
            accessors,
            origin,
            options: InterpretOptions::default(),
        };
        let mut constants = Vec::with_capacity(it.module.constants.len());
        for (_, c) in it.module.constants.iter() {
            let v = Machine::new(&it, &constants, &mut NoAccessors)
                .global_expression(c.init)
                .map_err(|e| *e)?;
            constants.push(v);
        }
        let mut privates = Vec::new();
        for (h, g) in it.module.global_variables.iter() {
            if g.space != naga::AddressSpace::Private {
                continue;
            }
            let v = match g.init {
                Some(init) => Machine::new(&it, &constants, &mut NoAccessors)
                    .global_expression(init)
                    .map_err(|e| *e)?,
                None => {
                    eval::zero(&it.module.types, g.ty).map_err(|_| CallError::UnsupportedWgsl {
                        function: g.name.clone().unwrap_or_default(),
                        construct: "a private variable of a type the interpreter does not run"
                            .into(),
                        at: String::new(),
                    })?
                }
            };
            privates.push((h, v));
        }
        it.constants = constants;
        it.privates = privates;
        Ok(it)
    }

    /// The same module run with `options`.
    pub fn with_options(mut self, options: InterpretOptions) -> Interpreter {
        self.options = options;
        self
    }

    /// The options it runs with.
    pub fn options(&self) -> InterpretOptions {
        self.options
    }

    /// The names of the module's functions, in order.
    pub fn functions(&self) -> impl Iterator<Item = &str> {
        self.module
            .functions
            .iter()
            .filter_map(|(_, f)| f.name.as_deref())
    }

    /// Calls `function` with `args`, one per parameter. A `ptr<function,
    /// T>` parameter's argument is the value it points at, and holds what
    /// the function left there afterwards. Returns what the function
    /// returns.
    pub fn call(&self, function: &str, args: &mut [Value]) -> Result<Option<Value>, CallError> {
        self.call_with(function, args, &mut NoAccessors)
    }

    pub(crate) fn call_with(
        &self,
        function: &str,
        args: &mut [Value],
        accessors: &mut dyn eval::Accessors,
    ) -> Result<Option<Value>, CallError> {
        let (h, f) = self.function(function)?;
        if f.arguments.len() != args.len() {
            return Err(CallError::Data {
                arg: function.to_string(),
                message: format!(
                    "`{function}` takes {} arguments, {} were given",
                    f.arguments.len(),
                    args.len()
                ),
            });
        }
        let mut machine = Machine::new(self, &self.constants, accessors);
        machine.memory = self.privates.iter().map(|(_, v)| v.clone()).collect();
        let mut items = Vec::with_capacity(args.len());
        let mut pointers = Vec::new();
        for (a, v) in f.arguments.iter().zip(args.iter()) {
            let ty = match &self.module.types[a.ty].inner {
                TypeInner::Pointer { base, .. } => {
                    pointers.push(machine.memory.len());
                    machine.memory.push(v.clone());
                    items.push(Item::Val(Value::Bool(false)));
                    *base
                }
                _ => {
                    items.push(Item::Val(v.clone()));
                    a.ty
                }
            };
            if !conforms(&self.module.types, ty, v) {
                return Err(CallError::Data {
                    arg: a.name.clone().unwrap_or_default(),
                    message: format!(
                        "`{function}` takes a {} here, not the value {}",
                        type_name(&self.module, ty),
                        quoted(&v.to_string())
                    ),
                });
            }
        }
        // Pointer arguments point at their slots, made above.
        let mut slots = pointers.iter();
        for (a, item) in f.arguments.iter().zip(items.iter_mut()) {
            if matches!(self.module.types[a.ty].inner, TypeInner::Pointer { .. }) {
                if let Some(&slot) = slots.next() {
                    *item = eval::pointer_to(slot);
                }
            }
        }
        let ret = machine.call(h, items).map_err(|e| *e)?;
        let mut slots = pointers.iter();
        for (a, v) in f.arguments.iter().zip(args.iter_mut()) {
            if matches!(self.module.types[a.ty].inner, TypeInner::Pointer { .. }) {
                if let Some(&slot) = slots.next() {
                    *v = machine.memory[slot].clone();
                }
            }
        }
        Ok(ret)
    }

    fn function(&self, name: &str) -> Result<(Handle<naga::Function>, &naga::Function), CallError> {
        self.module
            .functions
            .iter()
            .find(|(_, f)| f.name.as_deref() == Some(name))
            .ok_or_else(|| {
                let known: Vec<&str> = self.functions().collect();
                CallError::Wgsl(format!(
                    "the module has no function `{}` (it has: {})",
                    quoted(name),
                    known.join(", ")
                ))
            })
    }

    /// `line L, column C: `text``: where `span` is in the user's text.
    pub(crate) fn place(&self, span: naga::Span) -> String {
        let Some(range) = span.to_range() else {
            return String::new();
        };
        let (start, prefix) = self.origin;
        if range.start < start || range.end > self.source.len() {
            return String::new();
        }
        let loc = naga::Span::new((range.start - start) as u32, (range.end - start) as u32)
            .location(&self.source[start..]);
        let column = if loc.line_number == 1 {
            (loc.line_position as usize).saturating_sub(prefix)
        } else {
            loc.line_position as usize
        };
        format!(
            "line {}, column {column}: `{}`",
            loc.line_number,
            quoted(&self.source[range])
        )
    }
}

/// Whether `v` is a value of type `ty`.
fn conforms(types: &naga::UniqueArena<naga::Type>, ty: Handle<naga::Type>, v: &Value) -> bool {
    use naga::ScalarKind as K;
    let scalar = |s: &naga::Scalar, v: &Value| {
        matches!(
            (s.kind, s.width, v),
            (K::Float, 4, Value::F32(_))
                | (K::Sint, 4, Value::I32(_))
                | (K::Uint, 4, Value::U32(_))
                | (K::Bool, _, Value::Bool(_))
        )
    };
    match (&types[ty].inner, v) {
        (TypeInner::Scalar(s), v) => scalar(s, v),
        (TypeInner::Vector { size, scalar: s }, Value::Vector(c)) => {
            c.len() == *size as usize && c.iter().all(|x| scalar(s, x))
        }
        (
            TypeInner::Matrix {
                columns,
                rows,
                scalar: s,
            },
            Value::Matrix(c),
        ) => {
            c.len() == *columns as usize
                && c.iter().all(|col| {
                    col.components().len() == *rows as usize
                        && col.components().iter().all(|x| scalar(s, x))
                })
        }
        (
            TypeInner::Array {
                base,
                size: naga::ArraySize::Constant(n),
                ..
            },
            Value::Array(c),
        ) => c.len() == n.get() as usize && c.iter().all(|x| conforms(types, *base, x)),
        (TypeInner::Struct { members, .. }, Value::Struct(c)) => {
            c.len() == members.len() && members.iter().zip(c).all(|(m, x)| conforms(types, m.ty, x))
        }
        _ => false,
    }
}

fn type_name(module: &naga::Module, ty: Handle<naga::Type>) -> String {
    module.types[ty]
        .name
        .clone()
        .unwrap_or_else(|| format!("{:?}", module.types[ty].inner))
}
