//! WGSL code generation from the kernel IR.
//!
//! One shader is generated per kernel *structure* (iterator kinds, operand
//! count, scalar body, accumulation) and *stride classes* (which strides
//! are zero, one, or anything else); every size, stride and offset is read
//! from a uniform buffer at run time, so a shader compiled once serves
//! every launch of the same structure whose zero and unit strides sit in
//! the same places, which running a program at other sizes keeps.
//!
//! Each invocation owns one point of the parallel iterators, and so one
//! result element: it runs the reduction iterators itself, in the same
//! order as the CPU reference, and writes its element once. No two
//! invocations write the same element and none reads what another writes,
//! so the kernel needs neither atomics nor barriers.

use std::fmt::Write;

use shape_core::kernel::{
    Accumulate, BinaryOp, CompareOp, Expr, IterKind, Kernel, Launch, Layout, UnaryOp,
};

/// Invocations per workgroup, along x.
pub const WORKGROUP_SIZE: u32 = 64;

/// Where each launch parameter sits in the uniform parameter block, as
/// 32-bit words: the generated shader and [`ParamLayout::pack`] agree on it.
///
/// The block holds, in order: the number of parallel points, the first
/// point this dispatch computes (a launch larger than one dispatch's grid
/// is split into several), the size of each iterator, then for the result
/// and each operand its offset and one stride per iterator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamLayout {
    /// Iterators of the kernel.
    pub iterators: usize,
    /// Operands of the kernel.
    pub operands: usize,
}

impl ParamLayout {
    /// The layout for `kernel`.
    pub fn of(kernel: &Kernel) -> ParamLayout {
        ParamLayout {
            iterators: kernel.iterators.len(),
            operands: kernel.operands,
        }
    }

    /// Words before the first tensor's offset.
    fn tensors_start(&self) -> usize {
        2 + self.iterators
    }

    /// The word of the parallel point count.
    fn total(&self) -> usize {
        0
    }

    /// The word of the first point of this dispatch.
    pub fn base(&self) -> usize {
        1
    }

    /// The word of iterator `k`'s size.
    fn size(&self, k: usize) -> usize {
        2 + k
    }

    /// The word of tensor `t`'s offset (0: the result, `1 + n`: operand `n`).
    fn offset(&self, t: usize) -> usize {
        self.tensors_start() + t * (1 + self.iterators)
    }

    /// The word of tensor `t`'s stride along iterator `k`.
    fn stride(&self, t: usize, k: usize) -> usize {
        self.offset(t) + 1 + k
    }

    /// The number of meaningful words.
    pub fn words(&self) -> usize {
        self.offset(1 + self.operands)
    }

    /// The number of `vec4<u32>` the block is declared with (at least one).
    pub fn vec4s(&self) -> usize {
        self.words().div_ceil(4).max(1)
    }

    /// The size of the block in bytes.
    pub fn bytes(&self) -> usize {
        self.vec4s() * 16
    }

    /// Packs a launch into the block's words, or names the first value
    /// that does not fit in 32 bits (or a launch of another shape than the
    /// layout's). `total` is the number of parallel points; the base point
    /// is left 0. Strides along size-1 iterators are never used, so they
    /// pack as 0 whatever their value.
    pub fn pack(&self, launch: &Launch, total: u64) -> Result<Vec<u32>, (&'static str, u64)> {
        let arity = |what: &'static str, found: usize, expected: usize| {
            if found == expected {
                Ok(())
            } else {
                Err((what, found as u64))
            }
        };
        arity("iterator count", launch.sizes.len(), self.iterators)?;
        arity("operand count", launch.operands.len(), self.operands)?;
        let word = |what: &'static str, v: u64| u32::try_from(v).map_err(|_| (what, v));
        let mut words = vec![0u32; self.vec4s() * 4];
        words[self.total()] = word("parallel point count", total)?;
        for (k, &s) in launch.sizes.iter().enumerate() {
            words[self.size(k)] = word("iterator size", s)?;
        }
        let tensors = std::iter::once(&launch.result).chain(&launch.operands);
        for (t, layout) in tensors.enumerate() {
            arity("stride count", layout.strides.len(), self.iterators)?;
            words[self.offset(t)] = word("offset", layout.offset)?;
            for (k, (&s, &size)) in layout.strides.iter().zip(&launch.sizes).enumerate() {
                if size > 1 {
                    words[self.stride(t, k)] = word("stride", s)?;
                }
            }
        }
        Ok(words)
    }
}

/// The WGSL expression reading parameter word `w`.
fn param(w: usize) -> String {
    format!("params.w[{}].{}", w / 4, ["x", "y", "z", "w"][w % 4])
}

/// A WGSL `f32` literal for any value, exact: finite normal values and
/// zeros print as decimals (Rust prints the shortest text that reads back
/// to the same bits), the rest as their bit pattern.
pub fn f32_literal(v: f32) -> String {
    if v.is_normal() || v == 0.0 {
        let text = format!("{:?}", v.abs());
        let text = if v.is_sign_negative() {
            format!("-{text}")
        } else {
            text
        };
        format!("f32({text})")
    } else {
        format!("bitcast<f32>({}u)", v.to_bits())
    }
}

/// Writes `e` as WGSL. Constants become references to `k{n}`, variables
/// declared in [`constants`]: WGSL folds expressions made only of
/// constants at compile time and rejects the shader when one overflows or
/// has no value (`log(0.0)`), where the CPU computes an infinity or NaN.
fn expr(e: &Expr, consts: &mut Vec<f32>, out: &mut String) {
    match e {
        Expr::Load(i) => {
            let _ = write!(out, "v{i}");
        }
        Expr::Const(c) => {
            let _ = write!(out, "k{}", consts.len());
            consts.push(*c);
        }
        Expr::Unary(op, a) => {
            let f = match op {
                UnaryOp::Neg => "-",
                UnaryOp::Exp => "exp",
                UnaryOp::Log => "log",
                UnaryOp::Sqrt => "sqrt",
                UnaryOp::Relu => "relu",
                // Refused before generation (`supports`); a name that no
                // shader defines makes any other use fail to compile.
                _ => "unsupported_function",
            };
            out.push_str(f);
            out.push('(');
            expr(a, consts, out);
            out.push(')');
        }
        Expr::Binary(op, a, b) => {
            let infix = match op {
                BinaryOp::Add => Some(" + "),
                BinaryOp::Sub => Some(" - "),
                BinaryOp::Mul => Some(" * "),
                BinaryOp::Div => Some(" / "),
                BinaryOp::Max | BinaryOp::Min => None,
                _ => Some(" unsupported_operator "),
            };
            match infix {
                Some(sym) => {
                    out.push('(');
                    expr(a, consts, out);
                    out.push_str(sym);
                    expr(b, consts, out);
                    out.push(')');
                }
                None => {
                    // Rust's f32::max/min, which the CPU reference uses,
                    // return the other operand when one is NaN.
                    out.push_str(if *op == BinaryOp::Max {
                        "fmax("
                    } else {
                        "fmin("
                    });
                    expr(a, consts, out);
                    out.push_str(", ");
                    expr(b, consts, out);
                    out.push(')');
                }
            }
        }
        Expr::Compare(op, a, b) => {
            let sym = match op {
                CompareOp::Lt => " < ",
                CompareOp::Le => " <= ",
                CompareOp::Eq => " == ",
                CompareOp::Ne => " == ",
                _ => " unsupported_comparison ",
            };
            // Ne as the negation of an ordered ==: WGSL's != compiles to an
            // ordered comparison on Vulkan, false when an operand is NaN,
            // where Rust's != is true.
            out.push_str(if *op == CompareOp::Ne {
                "select(1.0, 0.0, "
            } else {
                "select(0.0, 1.0, "
            });
            expr(a, consts, out);
            out.push_str(sym);
            expr(b, consts, out);
            out.push(')');
        }
        Expr::Select(c, a, b) => {
            // The CPU takes `a` when `c != 0.0`, NaN included.
            out.push_str("select(");
            expr(a, consts, out);
            out.push_str(", ");
            expr(b, consts, out);
            out.push_str(", ");
            expr(c, consts, out);
            out.push_str(" == 0.0)");
        }
        _ => out.push_str("unsupported_expression()"),
    }
}

/// Whether every part of `body` has a WGSL translation; kernels with a
/// part that has none are refused with a typed error before generation.
pub fn supports(body: &Expr) -> bool {
    match body {
        Expr::Load(_) | Expr::Const(_) => true,
        Expr::Unary(op, a) => {
            matches!(
                op,
                UnaryOp::Neg | UnaryOp::Exp | UnaryOp::Log | UnaryOp::Sqrt | UnaryOp::Relu
            ) && supports(a)
        }
        Expr::Binary(op, a, b) => {
            matches!(
                op,
                BinaryOp::Add
                    | BinaryOp::Sub
                    | BinaryOp::Mul
                    | BinaryOp::Div
                    | BinaryOp::Max
                    | BinaryOp::Min
            ) && supports(a)
                && supports(b)
        }
        Expr::Compare(op, a, b) => {
            matches!(
                op,
                CompareOp::Lt | CompareOp::Le | CompareOp::Eq | CompareOp::Ne
            ) && supports(a)
                && supports(b)
        }
        Expr::Select(c, a, b) => supports(c) && supports(a) && supports(b),
        _ => false,
    }
}

/// Helper functions whose semantics must match the CPU reference exactly.
const PRELUDE: &str = "\
// NaN tested on the bits: float comparisons with NaN are unreliable across drivers.
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
// max and min as Rust's f32::max and f32::min: a NaN operand yields the other.
fn fmax(a: f32, b: f32) -> f32 { return select(select(max(a, b), a, is_nan(b)), b, is_nan(a)); }
fn fmin(a: f32, b: f32) -> f32 { return select(select(min(a, b), a, is_nan(b)), b, is_nan(a)); }
fn relu(x: f32) -> f32 { return fmax(x, 0.0); }
";

/// What a shader may assume about one stride (or offset) of a launch:
/// specializing on zero and unit strides saves a multiply per term where
/// they occur (broadcast operands, the innermost axis of row-major
/// tensors), and on zero offsets a parameter read and an add.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StrideClass {
    /// Not used: a zero stride, or an iterator of size 1.
    Zero,
    /// One element per step.
    One,
    /// Read from the parameter block.
    General,
}

/// The class of every offset and stride of a launch, tensor by tensor
/// (the result first): what a shader may assume about them.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct StrideClasses {
    /// Per tensor, one class per iterator.
    pub strides: Vec<Vec<StrideClass>>,
    /// Per tensor, `Zero` when its offset is 0 (nearly always: only
    /// slices and fixed indices move it), else `General`.
    pub offsets: Vec<StrideClass>,
    /// Per tensor, whether its strides along the parallel iterators are
    /// the row-major strides of the parallel sizes, so that its element
    /// at a parallel point is its offset plus the point's linear index
    /// (the result of nearly every operation, and operands of its shape).
    pub contiguous: Vec<bool>,
}

impl StrideClasses {
    /// The classes of the offsets and strides of `launch`, a launch of
    /// `kernel`.
    pub fn of(kernel: &Kernel, launch: &Launch) -> StrideClasses {
        let class = |l: &Layout| {
            l.strides
                .iter()
                .zip(&launch.sizes)
                .map(|(&stride, &size)| match (stride, size) {
                    (_, 0..=1) | (0, _) => StrideClass::Zero,
                    (1, _) => StrideClass::One,
                    _ => StrideClass::General,
                })
                .collect()
        };
        let tensors = || std::iter::once(&launch.result).chain(&launch.operands);
        let contiguous = |l: &Layout| {
            let mut step = 1u64;
            for k in (0..launch.sizes.len()).rev() {
                let size = launch.sizes[k];
                if kernel.iterators.get(k) == Some(&IterKind::Parallel) && size > 1 {
                    if l.strides.get(k) != Some(&step) {
                        return false;
                    }
                    step = step.saturating_mul(size);
                }
            }
            true
        };
        StrideClasses {
            contiguous: tensors().map(contiguous).collect(),
            strides: tensors().map(class).collect(),
            offsets: tensors()
                .map(|l| {
                    if l.offset == 0 {
                        StrideClass::Zero
                    } else {
                        StrideClass::General
                    }
                })
                .collect(),
        }
    }

    /// Every offset and stride read from the parameter block: the shader
    /// for any launch of the kernel.
    pub fn general(kernel: &Kernel) -> StrideClasses {
        StrideClasses {
            strides: vec![vec![StrideClass::General; kernel.iterators.len()]; 1 + kernel.operands],
            offsets: vec![StrideClass::General; 1 + kernel.operands],
            contiguous: vec![false; 1 + kernel.operands],
        }
    }

    fn stride(&self, tensor: usize, iterator: usize) -> StrideClass {
        self.strides
            .get(tensor)
            .and_then(|t| t.get(iterator))
            .copied()
            .unwrap_or(StrideClass::General)
    }

    fn offset(&self, tensor: usize) -> StrideClass {
        self.offsets
            .get(tensor)
            .copied()
            .unwrap_or(StrideClass::General)
    }
}

/// The WGSL compute shader for `kernel`, for any launch.
pub fn generate(kernel: &Kernel) -> String {
    generate_for(kernel, &StrideClasses::general(kernel))
}

/// The WGSL compute shader for launches of `kernel` whose strides have
/// the classes `classes`.
///
/// Bindings (group 0): 0 the parameter block (uniform), 1 the result
/// (read-write storage), `2 + n` operand `n` (read-only storage). The
/// entry point is `main`, dispatched on a 2-D grid of workgroups of
/// [`WORKGROUP_SIZE`]; invocation `x + y * (groups_x * WORKGROUP_SIZE)`
/// computes the parallel point `base` plus that linear index, counted
/// row-major over the parallel iterators.
pub fn generate_for(kernel: &Kernel, classes: &StrideClasses) -> String {
    let layout = ParamLayout::of(kernel);
    let n = kernel.iterators.len();
    let tensors = 1 + kernel.operands;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// generated from: {kernel}\nstruct Params {{ w: array<vec4<u32>, {}> }}\n\
         @group(0) @binding(0) var<uniform> params: Params;\n\
         @group(0) @binding(1) var<storage, read_write> result: array<f32>;",
        layout.vec4s()
    );
    for o in 0..kernel.operands {
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<storage, read> in{o}: array<f32>;",
            o + 2
        );
    }
    s.push_str(PRELUDE);
    let _ = writeln!(
        s,
        "\n@compute @workgroup_size({WORKGROUP_SIZE})\n\
         fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{\n\
         \x20   let point = {} + gid.x + gid.y * groups.x * {WORKGROUP_SIZE}u;\n\
         \x20   if (point >= {}) {{ return; }}",
        param(layout.base()),
        param(layout.total())
    );
    // Parallel iterators from the linear index, innermost fastest.
    let parallel: Vec<usize> = (0..n)
        .filter(|&k| kernel.iterators[k] == IterKind::Parallel)
        .collect();
    let reduction: Vec<usize> = (0..n)
        .filter(|&k| kernel.iterators[k] == IterKind::Reduction)
        .collect();
    if !parallel.is_empty() {
        s.push_str("    var rest = point;\n");
    }
    for (pos, &k) in parallel.iter().enumerate().rev() {
        if pos == 0 {
            let _ = writeln!(s, "    let i{k} = rest;");
        } else {
            // One division per iterator: the remainder from the quotient
            // (software adapters have no vector integer division).
            let size = param(layout.size(k));
            let _ = writeln!(
                s,
                "    let q{k} = rest / {size};\n    let i{k} = rest - q{k} * {size};\n    rest = q{k};"
            );
        }
    }
    // Each tensor's offset at this parallel point.
    let offset_sum = |t: usize, iters: &[usize]| -> String {
        let mut text = String::new();
        for &k in iters {
            let _ = match classes.stride(t, k) {
                StrideClass::Zero => Ok(()),
                StrideClass::One => write!(text, " + i{k}"),
                StrideClass::General => write!(text, " + {} * i{k}", param(layout.stride(t, k))),
            };
        }
        text
    };
    for t in 0..tensors {
        let name = if t == 0 {
            "out".to_string()
        } else {
            format!("in{}", t - 1)
        };
        let _ = writeln!(
            s,
            "    let base_{name} = {}{};",
            match classes.offset(t) {
                StrideClass::Zero => "0u".to_string(),
                _ => param(layout.offset(t)),
            },
            if classes.contiguous.get(t) == Some(&true) {
                " + point".to_string()
            } else {
                offset_sum(t, &parallel)
            }
        );
    }
    let used = kernel.body.operands_used().min(kernel.operands);
    let mut body = String::new();
    let mut consts = Vec::new();
    expr(&kernel.body, &mut consts, &mut body);
    for (n, c) in consts.iter().enumerate() {
        let _ = writeln!(s, "    var k{n} = {};", f32_literal(*c));
    }
    if reduction.is_empty() && kernel.accumulate == Accumulate::Assign {
        for o in 0..used {
            let _ = writeln!(s, "    let v{o} = in{o}[base_in{o}];");
        }
        let _ = writeln!(s, "    result[base_out] = {body};\n}}");
        return s;
    }
    // Like the CPU, other accumulations start from their identity even
    // without reduction iterators (it decides -0.0 + 0.0 and NaN cases).
    let _ = writeln!(
        s,
        "    var acc = {};",
        f32_literal(kernel.accumulate.identity())
    );
    let mut indent = String::from("    ");
    for &k in &reduction {
        let _ = writeln!(
            s,
            "{indent}for (var i{k} = 0u; i{k} < {}; i{k} = i{k} + 1u) {{",
            param(layout.size(k))
        );
        indent.push_str("    ");
    }
    for o in 0..used {
        let _ = writeln!(
            s,
            "{indent}let v{o} = in{o}[base_in{o}{}];",
            offset_sum(o + 1, &reduction)
        );
    }
    let combined = match kernel.accumulate {
        Accumulate::Assign => body,
        Accumulate::Add => format!("acc + {body}"),
        Accumulate::Mul => format!("acc * {body}"),
        Accumulate::Max => format!("fmax(acc, {body})"),
        Accumulate::Min => format!("fmin(acc, {body})"),
    };
    let _ = writeln!(s, "{indent}acc = {combined};");
    for _ in &reduction {
        indent.truncate(indent.len() - 4);
        let _ = writeln!(s, "{indent}}}");
    }
    s.push_str("    result[base_out] = acc;\n}\n");
    s
}
