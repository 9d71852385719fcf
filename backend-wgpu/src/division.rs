//! Integer division and bit-field offsets made defined before a call's
//! WGSL reaches a shader writer that leaves them undefined.
//!
//! WGSL defines `e1 / 0` as `e1` and `e1 % 0` as 0 for integers (and
//! `i32::MIN / -1` as `i32::MIN`, its remainder 0); naga's SPIR-V, HLSL
//! and Metal writers emit guards for it, but its GLSL writer emits a plain
//! division, and llvmpipe through OpenGL then traps: `SIGFPE` kills the
//! process. On GL, a call's module therefore goes through naga first:
//! every integer `/` and `%` gets WGSL's guard (the divisor replaced by 1
//! where it is 0, or -1 under `i32::MIN`), written into the IR, and the
//! module is written back as WGSL. `extractBits` and `insertBits` get
//! WGSL's clamping of their offset and count the same way (GLSL's
//! `bitfieldExtract` is undefined past 32 bits, and llvmpipe then
//! returns other values). The results are WGSL's, as the CPU interpreter
//! computes them (found by the interpreter's differential test on GL).

use naga::{BinaryOperator as B, Expression, Handle, Literal, ScalarKind, Statement};

/// `source` with every integer division and remainder guarded, or `None`
/// when it has none (or naga cannot read it: wgpu then reports that).
pub(crate) fn guarded(source: &str) -> Option<String> {
    try_guarded(source).ok().flatten()
}

/// [`guarded`], saying why it gave up.
fn try_guarded(source: &str) -> Result<Option<String>, String> {
    let mut module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    let flags = naga::valid::ValidationFlags::all();
    let caps = naga::valid::Capabilities::all();
    let validate = |m: &naga::Module| {
        naga::valid::Validator::new(flags, caps)
            .validate(m)
            .map_err(|e| format!("{e:?}"))
    };
    let info = validate(&module)?;
    let mut changed = false;
    let types = &module.types;
    for (h, f) in module.functions.iter_mut() {
        changed |= guard_function(f, &info[h], types);
    }
    for (i, ep) in module.entry_points.iter_mut().enumerate() {
        changed |= guard_function(&mut ep.function, info.get_entry_point(i), types);
    }
    if !changed {
        return Ok(None);
    }
    let info = validate(&module)?;
    naga::back::wgsl::write_string(&module, &info, naga::back::wgsl::WriterFlags::empty())
        .map(Some)
        .map_err(|e| e.to_string())
}

/// Guards the integer divisions of `f`; whether it had any. The
/// expression arena is rebuilt in order with each division's guard just
/// before it (naga refuses an expression that depends on a later one),
/// and every handle is remapped. A function with an expression or
/// statement this does not know is left as it is.
fn guard_function(
    f: &mut naga::Function,
    info: &naga::valid::FunctionInfo,
    types: &naga::UniqueArena<naga::Type>,
) -> bool {
    let targets: Vec<Handle<Expression>> = f
        .expressions
        .iter()
        .filter(|(h, e)| match e {
            Expression::Binary {
                op: B::Divide | B::Modulo,
                ..
            } => matches!(
                info[*h].ty.inner_with(types).scalar_kind(),
                Some(ScalarKind::Sint | ScalarKind::Uint)
            ),
            Expression::Math {
                fun: naga::MathFunction::ExtractBits | naga::MathFunction::InsertBits,
                ..
            } => true,
            _ => false,
        })
        .map(|(h, _)| h)
        .collect();
    if targets.is_empty() {
        return false;
    }
    let mut map: Vec<Handle<Expression>> = Vec::with_capacity(f.expressions.len());
    let mut rebuilt = naga::Arena::new();
    for (h, e) in f.expressions.iter() {
        let span = f.expressions.get_span(h);
        let Some(e) = remap_expression(e, &map) else {
            return false;
        };
        let new = match e {
            Expression::Binary { op, left, right } if targets.contains(&h) => {
                let kind = info[h].ty.inner_with(types);
                match guard(&mut rebuilt, left, right, kind, span) {
                    Some(safe) => rebuilt.append(
                        Expression::Binary {
                            op,
                            left,
                            right: safe,
                        },
                        span,
                    ),
                    None => return false,
                }
            }
            Expression::Math {
                fun,
                arg,
                arg1,
                arg2,
                arg3,
            } if targets.contains(&h) => {
                // `extractBits(e, offset, count)`, `insertBits(e, new,
                // offset, count)`: WGSL clamps the offset to 32 and the
                // count to what is left; GLSL leaves both undefined.
                let insert = fun == naga::MathFunction::InsertBits;
                let (offset, count) = if insert { (arg2, arg3) } else { (arg1, arg2) };
                let (Some(offset), Some(count)) = (offset, count) else {
                    return false;
                };
                let (offset, count) = clamp_bits(&mut rebuilt, offset, count, span);
                let e = if insert {
                    Expression::Math {
                        fun,
                        arg,
                        arg1,
                        arg2: Some(offset),
                        arg3: Some(count),
                    }
                } else {
                    Expression::Math {
                        fun,
                        arg,
                        arg1: Some(offset),
                        arg2: Some(count),
                        arg3,
                    }
                };
                rebuilt.append(e, span)
            }
            e => rebuilt.append(e, span),
        };
        map.push(new);
    }
    let Some(body) = remap_block(&f.body, &map, &rebuilt) else {
        return false;
    };
    f.expressions = rebuilt;
    f.body = body;
    for (_, local) in f.local_variables.iter_mut() {
        local.init = local.init.map(|h| map[h.index()]);
    }
    f.named_expressions = std::mem::take(&mut f.named_expressions)
        .into_iter()
        .map(|(h, name)| (map[h.index()], name))
        .collect();
    true
}

/// Appends WGSL's safe divisor for `left / right` of type `ty`: `right`,
/// or 1 where it is 0 (or -1 under `i32::MIN`).
fn guard(
    arena: &mut naga::Arena<Expression>,
    left: Handle<Expression>,
    right: Handle<Expression>,
    ty: &naga::TypeInner,
    span: naga::Span,
) -> Option<Handle<Expression>> {
    let (kind, size) = match *ty {
        naga::TypeInner::Scalar(s) => (s.kind, None),
        naga::TypeInner::Vector { size, scalar } => (scalar.kind, Some(size)),
        _ => return None,
    };
    let mut constant = |v: i64| {
        let literal = match kind {
            ScalarKind::Sint => Literal::I32(v as i32),
            _ => Literal::U32(v as u32),
        };
        let l = arena.append(Expression::Literal(literal), span);
        match size {
            Some(size) => arena.append(Expression::Splat { size, value: l }, span),
            None => l,
        }
    };
    let zero = constant(0);
    let one = constant(1);
    let signed = (kind == ScalarKind::Sint).then(|| (constant(i64::from(i32::MIN)), constant(-1)));
    let binary = |op, left, right| Expression::Binary { op, left, right };
    let mut bad = arena.append(binary(B::Equal, right, zero), span);
    if let Some((min, minus_one)) = signed {
        let at_min = arena.append(binary(B::Equal, left, min), span);
        let by_minus_one = arena.append(binary(B::Equal, right, minus_one), span);
        let both = arena.append(binary(B::And, at_min, by_minus_one), span);
        bad = arena.append(binary(B::InclusiveOr, bad, both), span);
    }
    Some(arena.append(
        Expression::Select {
            condition: bad,
            accept: one,
            reject: right,
        },
        span,
    ))
}

/// WGSL's clamped bit offset and count: `min(offset, 32)` and
/// `min(count, 32 - that)`.
fn clamp_bits(
    arena: &mut naga::Arena<Expression>,
    offset: Handle<Expression>,
    count: Handle<Expression>,
    span: naga::Span,
) -> (Handle<Expression>, Handle<Expression>) {
    let width = arena.append(Expression::Literal(Literal::U32(32)), span);
    let min = |arena: &mut naga::Arena<Expression>, a, b| {
        arena.append(
            Expression::Math {
                fun: naga::MathFunction::Min,
                arg: a,
                arg1: Some(b),
                arg2: None,
                arg3: None,
            },
            span,
        )
    };
    let offset = min(arena, offset, width);
    let left = arena.append(
        Expression::Binary {
            op: B::Subtract,
            left: width,
            right: offset,
        },
        span,
    );
    let count = min(arena, count, left);
    (offset, count)
}

/// `e` with its operands remapped; `None` for an expression this module
/// does not know.
fn remap_expression(e: &Expression, map: &[Handle<Expression>]) -> Option<Expression> {
    let m = |h: Handle<Expression>| map.get(h.index()).copied();
    // An optional operand: `Some(None)` when absent, `None` when unmapped.
    let mo = |h: Option<Handle<Expression>>| h.map_or(Some(None), |h| m(h).map(Some));
    use Expression as E;
    Some(match e.clone() {
        e @ (E::Literal(_)
        | E::Constant(_)
        | E::Override(_)
        | E::ZeroValue(_)
        | E::FunctionArgument(_)
        | E::GlobalVariable(_)
        | E::LocalVariable(_)
        | E::CallResult(_)) => e,
        E::Compose { ty, components } => E::Compose {
            ty,
            components: components.into_iter().map(m).collect::<Option<_>>()?,
        },
        E::Access { base, index } => E::Access {
            base: m(base)?,
            index: m(index)?,
        },
        E::AccessIndex { base, index } => E::AccessIndex {
            base: m(base)?,
            index,
        },
        E::Splat { size, value } => E::Splat {
            size,
            value: m(value)?,
        },
        E::Swizzle {
            size,
            vector,
            pattern,
        } => E::Swizzle {
            size,
            vector: m(vector)?,
            pattern,
        },
        E::Load { pointer } => E::Load {
            pointer: m(pointer)?,
        },
        E::Unary { op, expr } => E::Unary { op, expr: m(expr)? },
        E::Binary { op, left, right } => E::Binary {
            op,
            left: m(left)?,
            right: m(right)?,
        },
        E::Select {
            condition,
            accept,
            reject,
        } => E::Select {
            condition: m(condition)?,
            accept: m(accept)?,
            reject: m(reject)?,
        },
        E::Relational { fun, argument } => E::Relational {
            fun,
            argument: m(argument)?,
        },
        E::Math {
            fun,
            arg,
            arg1,
            arg2,
            arg3,
        } => E::Math {
            fun,
            arg: m(arg)?,
            arg1: mo(arg1)?,
            arg2: mo(arg2)?,
            arg3: mo(arg3)?,
        },
        E::As {
            expr,
            kind,
            convert,
        } => E::As {
            expr: m(expr)?,
            kind,
            convert,
        },
        E::ArrayLength(h) => E::ArrayLength(m(h)?),
        _ => return None,
    })
}

/// `block` with its handles remapped; each `Emit` covers the remapped
/// range (the guards included) without the expressions naga counts as
/// always in scope (literals and friends), which must not be emitted.
fn remap_block(
    block: &naga::Block,
    map: &[Handle<Expression>],
    arena: &naga::Arena<Expression>,
) -> Option<naga::Block> {
    let m = |h: Handle<Expression>| map.get(h.index()).copied();
    let mo = |h: Option<Handle<Expression>>| h.map_or(Some(None), |h| m(h).map(Some));
    let mut out = naga::Block::with_capacity(block.len());
    for (statement, span) in block.span_iter() {
        let span = *span;
        let remapped = match statement {
            Statement::Emit(range) => {
                let Some((first, last)) = range.first_and_last() else {
                    continue;
                };
                let (first, last) = (m(first)?, m(last)?);
                let mut run: Option<(Handle<Expression>, Handle<Expression>)> = None;
                for (h, e) in arena.iter() {
                    if h.index() < first.index() || h.index() > last.index() {
                        continue;
                    }
                    if e.needs_pre_emit() {
                        if let Some((a, b)) = run.take() {
                            out.push(Statement::Emit(naga::Range::new_from_bounds(a, b)), span);
                        }
                    } else {
                        run = Some(run.map_or((h, h), |(a, _)| (a, h)));
                    }
                }
                if let Some((a, b)) = run {
                    out.push(Statement::Emit(naga::Range::new_from_bounds(a, b)), span);
                }
                continue;
            }
            Statement::Block(b) => Statement::Block(remap_block(b, map, arena)?),
            Statement::If {
                condition,
                accept,
                reject,
            } => Statement::If {
                condition: m(*condition)?,
                accept: remap_block(accept, map, arena)?,
                reject: remap_block(reject, map, arena)?,
            },
            Statement::Switch { selector, cases } => Statement::Switch {
                selector: m(*selector)?,
                cases: cases
                    .iter()
                    .map(|c| {
                        Some(naga::SwitchCase {
                            value: c.value,
                            body: remap_block(&c.body, map, arena)?,
                            fall_through: c.fall_through,
                        })
                    })
                    .collect::<Option<_>>()?,
            },
            Statement::Loop {
                body,
                continuing,
                break_if,
            } => Statement::Loop {
                body: remap_block(body, map, arena)?,
                continuing: remap_block(continuing, map, arena)?,
                break_if: mo(*break_if)?,
            },
            Statement::Break => Statement::Break,
            Statement::Continue => Statement::Continue,
            Statement::Kill => Statement::Kill,
            Statement::Return { value } => Statement::Return { value: mo(*value)? },
            Statement::Store { pointer, value } => Statement::Store {
                pointer: m(*pointer)?,
                value: m(*value)?,
            },
            Statement::Call {
                function,
                arguments,
                result,
            } => Statement::Call {
                function: *function,
                arguments: arguments.iter().map(|h| m(*h)).collect::<Option<_>>()?,
                result: mo(*result)?,
            },
            _ => return None,
        };
        out.push(remapped, span);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn integer_divisions_are_guarded_and_the_module_stays_valid() {
        let src = "fn f(a: i32, b: i32, v: vec2<u32>, w: vec2<u32>) -> i32 { var s = 0; for (var i = 0; i < 3; i++) { s += a / (b - i) + a % b; } let q = v / w; return s + i32(q.x % w.y); }";
        let out = super::try_guarded(src).unwrap().expect("guarded");
        assert!(out.contains("select("), "{out}");
        // It parses and validates again.
        let m = naga::front::wgsl::parse_str(&out).expect("parses");
        naga::valid::Validator::new(
            naga::valid::ValidationFlags::all(),
            naga::valid::Capabilities::all(),
        )
        .validate(&m)
        .expect("valid");
        assert_eq!(
            super::guarded("fn g(x: f32) -> f32 { return x / 2.0; }"),
            None
        );
    }
}
