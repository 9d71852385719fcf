//! WGSL code generation from the kernel IR.
//!
//! One shader is generated per kernel *structure* (iterator kinds, operand
//! count, scalar body, accumulation), *stride classes* (which strides
//! are zero, one, or anything else) and [`Schedule`]; every size, stride
//! and offset is read from a uniform buffer at run time, so a shader
//! compiled once serves every launch of the same structure whose zero and
//! unit strides sit in the same places, which running a program at other
//! sizes keeps.
//!
//! Two schedules (chosen per launch by [`crate::reduction::plan`]):
//!
//! - [`Schedule::PerElement`]: each invocation owns one point of the
//!   parallel iterators, and so one result element: it walks the
//!   reduction points itself in one loop, in the same order as the CPU
//!   reference, and writes its element once. No two invocations write the
//!   same element and none reads what another writes, so the kernel needs
//!   neither atomics nor barriers.
//! - [`Schedule::WorkgroupReduction`]: a workgroup of
//!   [`REDUCTION_WORKGROUP_SIZE`] invocations reduces one span of one
//!   output's reduction points, combines its invocations' values in
//!   workgroup memory and writes one value: the result element, or a
//!   partial for the next pass.
//!
//! Every loop of a generated shader is counted against the launch's
//! [`crate::LoopBudget`]: the reduction points are walked by one loop with
//! an odometer over the reduction iterators (one back-edge per point, not
//! one per loop level), the workgroup tree is unrolled, and kernels
//! without reduction iterators have no loop at all.

use std::fmt::Write;

use shape_core::kernel::{Accumulate, CompareOp, Expr, IterKind, Kernel, Launch, Layout, UnaryOp};
use shape_core::scalar::WgslBinary;

pub use crate::tiled::TileConfig;

pub use crate::reduction::REDUCTION_WORKGROUP_SIZE;

/// Invocations per workgroup, along x, of [`Schedule::PerElement`].
pub const WORKGROUP_SIZE: u32 = 64;

/// Values combined per lane and level of a workgroup reduction's tree:
/// 256 lanes take two levels (256 to 16 to 1), so two barriers. On
/// llvmpipe each barrier switches between the workgroup's 32 SIMD
/// coroutines; a binary tree's eight barriers cost more than its fewer
/// combinations save.
pub const TREE_FAN_IN: u32 = 16;

/// How a shader divides a launch among invocations.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Schedule {
    /// One invocation per parallel point (result element), which reduces
    /// all of its points; workgroups of [`WORKGROUP_SIZE`].
    #[default]
    PerElement,
    /// One workgroup of [`REDUCTION_WORKGROUP_SIZE`] per span of an
    /// output's reduction points, combined in workgroup memory. Only for
    /// kernels that reduce: with no reduction iterator, or with
    /// [`Accumulate::Assign`] (which keeps the last point's value), a
    /// kernel always runs per element (see [`Schedule::effective`]).
    WorkgroupReduction,
    /// A tiled contraction ([`crate::tiled`]): one workgroup per tile of
    /// results, operand tiles staged in workgroup memory. Only for
    /// kernels whose structure is a contraction of two operands
    /// ([`crate::tiled::TileAxes::of`]); others run per element.
    Tiled(TileConfig),
    /// The first pass of a split-K contraction ([`crate::tiled`]): the
    /// tiled shader over one chunk of the reduction points per workgroup,
    /// writing partials that a second pass adds in a fixed order. Its
    /// parameter block ends with the splits per tile and the points per
    /// split, where a workgroup reduction's has its workgroups per output
    /// and points per invocation.
    SplitK(TileConfig),
    /// A launch over the rows of ragged data ([`shape_core::kernel::RowTable`]),
    /// per element: the kernel's last operand is the row table (`u32`
    /// words: each row's length along iterator `along`, then its
    /// offsets), and invocation `row * per_row + point` computes parallel
    /// point `point` of row `row`, returning where the point lies past the
    /// row's length. Its parameter block ends with the points per row.
    Rows {
        /// The iterator whose extent is each row's length.
        along: usize,
    },
}

impl Schedule {
    /// The schedule `kernel` actually runs with when `self` is asked for.
    pub fn effective(self, kernel: &Kernel) -> Schedule {
        let reduces = kernel.iterators.contains(&IterKind::Reduction)
            && kernel.accumulate != Accumulate::Assign;
        match self {
            Schedule::Rows { .. } => self,
            _ if !reduces => Schedule::PerElement,
            other => other,
        }
    }
}

/// Where each launch parameter sits in the uniform parameter block, as
/// 32-bit words: the generated shader and [`ParamLayout::pack`] agree on it.
///
/// The block holds, in order: the number of parallel points (of
/// workgroups, for a workgroup reduction), the first point (workgroup)
/// this dispatch computes (a launch larger than one dispatch's grid is
/// split into several), the size of each iterator, then for the result
/// and each operand its offset and one stride per iterator; a workgroup
/// reduction adds its workgroups per output and its points per invocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParamLayout {
    /// Iterators of the kernel.
    pub iterators: usize,
    /// Operands of the kernel.
    pub operands: usize,
    /// The shader's schedule.
    pub schedule: Schedule,
}

impl ParamLayout {
    /// The layout for `kernel` run per element.
    pub fn of(kernel: &Kernel) -> ParamLayout {
        ParamLayout::scheduled(kernel, Schedule::PerElement)
    }

    /// The layout for `kernel` run with `schedule`.
    pub fn scheduled(kernel: &Kernel, schedule: Schedule) -> ParamLayout {
        ParamLayout {
            iterators: kernel.iterators.len(),
            operands: kernel.operands,
            schedule: schedule.effective(kernel),
        }
    }

    /// Words before the first tensor's offset.
    pub(crate) fn tensors_start(&self) -> usize {
        2 + self.iterators
    }

    /// The word of the parallel point count.
    pub(crate) fn total(&self) -> usize {
        0
    }

    /// The word of the first point (workgroup) of this dispatch.
    pub fn base(&self) -> usize {
        1
    }

    /// The word of iterator `k`'s size.
    pub(crate) fn size(&self, k: usize) -> usize {
        2 + k
    }

    /// The word of tensor `t`'s offset (0: the result, `1 + n`: operand `n`).
    pub(crate) fn offset(&self, t: usize) -> usize {
        self.tensors_start() + t * (1 + self.iterators)
    }

    /// The word of tensor `t`'s stride along iterator `k`.
    pub(crate) fn stride(&self, t: usize, k: usize) -> usize {
        self.offset(t) + 1 + k
    }

    /// The words of a workgroup reduction's workgroups per output and
    /// points per invocation; `None` for other schedules.
    pub fn reduction_words(&self) -> Option<(usize, usize)> {
        let end = self.offset(1 + self.operands);
        matches!(
            self.schedule,
            Schedule::WorkgroupReduction | Schedule::SplitK(_)
        )
        .then_some((end, end + 1))
    }

    /// The word of a row launch's points per row; `None` for other
    /// schedules.
    pub fn rows_word(&self) -> Option<usize> {
        matches!(self.schedule, Schedule::Rows { .. }).then(|| self.offset(1 + self.operands))
    }

    /// The number of meaningful words.
    pub fn words(&self) -> usize {
        self.offset(1 + self.operands)
            + if self.reduction_words().is_some() {
                2
            } else {
                usize::from(self.rows_word().is_some())
            }
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
    /// layout's). `total` is the number of parallel points (workgroups);
    /// the base point and a workgroup reduction's words are left 0.
    /// Strides along size-1 iterators are never used, so they pack as 0
    /// whatever their value.
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
pub(crate) fn param(w: usize) -> String {
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
pub(crate) fn expr(e: &Expr, consts: &mut Vec<f32>, out: &mut String) {
    match e {
        Expr::Load(i) => {
            let _ = write!(out, "v{i}");
        }
        Expr::Const(c) => {
            let _ = write!(out, "k{}", consts.len());
            consts.push(*c);
        }
        Expr::Unary(op, a) => {
            // The scalar table's spelling: a builtin or a prelude function.
            out.push_str(op.wgsl());
            out.push('(');
            expr(a, consts, out);
            out.push(')');
        }
        Expr::Binary(op, a, b) => {
            // The scalar table's spelling: an operator, a builtin or a
            // prelude function.
            let (open, between) = match op.wgsl() {
                WgslBinary::Infix(sym) => (String::from("("), format!(" {sym} ")),
                WgslBinary::Call(name) => (format!("{name}("), String::from(", ")),
            };
            out.push_str(&open);
            expr(a, consts, out);
            out.push_str(&between);
            expr(b, consts, out);
            out.push(')');
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
        Expr::Accumulated => out.push_str("acc"),
        _ => out.push_str("unsupported_expression()"),
    }
}

/// Whether every part of `body` has a WGSL translation; kernels with a
/// part that has none are refused with a typed error before generation.
pub fn supports(body: &Expr) -> bool {
    match body {
        Expr::Load(_) | Expr::Const(_) => true,
        // Every function of the scalar table has a WGSL spelling.
        Expr::Unary(_, a) => supports(a),
        // Every function of the scalar table has a WGSL spelling.
        Expr::Binary(_, a, b) => supports(a) && supports(b),
        Expr::Compare(op, a, b) => {
            matches!(
                op,
                CompareOp::Lt | CompareOp::Le | CompareOp::Eq | CompareOp::Ne
            ) && supports(a)
                && supports(b)
        }
        Expr::Select(c, a, b) => supports(c) && supports(a) && supports(b),
        Expr::Accumulated => true,
        _ => false,
    }
}

/// Helper functions whose semantics must match the CPU reference exactly.
const PRELUDE: &str = "\
// NaN tested on the bits: float comparisons with NaN are unreliable across drivers.
fn is_nan(x: f32) -> bool { return (bitcast<u32>(x) & 0x7fffffffu) > 0x7f800000u; }
// max and min as shape_core::scalar::{max_number, min_number}: a NaN operand
// yields the other, and of two equal values (+0 and -0) max gives +0 and min -0.
fn fmax(a: f32, b: f32) -> f32 { return select(select(select(max(a, b), bitcast<f32>(bitcast<u32>(a) & bitcast<u32>(b)), a == b), a, is_nan(b)), b, is_nan(a)); }
fn fmin(a: f32, b: f32) -> f32 { return select(select(select(min(a, b), bitcast<f32>(bitcast<u32>(a) | bitcast<u32>(b)), a == b), a, is_nan(b)), b, is_nan(a)); }
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

    pub(crate) fn stride(&self, tensor: usize, iterator: usize) -> StrideClass {
        self.strides
            .get(tensor)
            .and_then(|t| t.get(iterator))
            .copied()
            .unwrap_or(StrideClass::General)
    }

    pub(crate) fn offset(&self, tensor: usize) -> StrideClass {
        self.offsets
            .get(tensor)
            .copied()
            .unwrap_or(StrideClass::General)
    }
}

/// The WGSL compute shader for `kernel` run per element, for any launch.
pub fn generate(kernel: &Kernel) -> String {
    generate_for(kernel, &StrideClasses::general(kernel))
}

/// The per-element WGSL compute shader for launches of `kernel` whose
/// strides have the classes `classes`: [`generate_scheduled`] with
/// [`Schedule::PerElement`].
pub fn generate_for(kernel: &Kernel, classes: &StrideClasses) -> String {
    generate_scheduled(kernel, classes, Schedule::PerElement)
}

/// The WGSL compute shader for launches of `kernel` whose strides have
/// the classes `classes`, run with `schedule` (or the schedule
/// [`Schedule::effective`] gives).
///
/// Bindings (group 0): 0 the parameter block (uniform), 1 the result
/// (read-write storage; a workgroup reduction's partials buffer when it
/// writes partials), `2 + n` operand `n` (read-only storage). The entry
/// point is `main`, dispatched on a 2-D grid of workgroups.
///
/// Per element, invocation `x + y * (groups_x * WORKGROUP_SIZE)`
/// computes the parallel point `base` plus that linear index, counted
/// row-major over the parallel iterators. For a workgroup reduction,
/// workgroup `g = base + x + y * groups_x` computes span `g % G` of
/// output `g / G`, where `G` is the number of workgroups per output, and
/// writes the result element when `G` is 1, else partial `g`.
pub fn generate_scheduled(kernel: &Kernel, classes: &StrideClasses, schedule: Schedule) -> String {
    let schedule = schedule.effective(kernel);
    if let Schedule::Tiled(config) | Schedule::SplitK(config) = schedule {
        let split = matches!(schedule, Schedule::SplitK(_));
        if let Some(source) = crate::tiled::generate(kernel, classes, config, split) {
            return source;
        }
        return generate_scheduled(kernel, classes, Schedule::PerElement);
    }
    let layout = ParamLayout::scheduled(kernel, schedule);
    if let Schedule::Rows { along } = schedule {
        return generate_rows(kernel, classes, layout, along);
    }
    let mut s = header(kernel, &layout);
    let point_of_workgroup = match (schedule, layout.reduction_words()) {
        (Schedule::WorkgroupReduction, Some((groups_word, _))) => Some(groups_word),
        _ => None,
    };
    if let Some(groups_word) = point_of_workgroup {
        let _ = writeln!(
            s,
            "var<workgroup> lanes: array<f32, {REDUCTION_WORKGROUP_SIZE}>;\n\n\
             @compute @workgroup_size({REDUCTION_WORKGROUP_SIZE})\n\
             fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_index) lane: u32) {{\n\
             \x20   let group = {} + wid.x + wid.y * groups.x;\n\
             \x20   if (group >= {}) {{ return; }}\n\
             \x20   let per_output = {};\n\
             \x20   let point = group / per_output;\n\
             \x20   let part = group - point * per_output;",
            param(layout.base()),
            param(layout.total()),
            param(groups_word)
        );
    } else {
        let _ = writeln!(
            s,
            "\n@compute @workgroup_size({WORKGROUP_SIZE})\n\
             fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{\n\
             \x20   let point = {} + gid.x + gid.y * groups.x * {WORKGROUP_SIZE}u;\n\
             \x20   if (point >= {}) {{ return; }}",
            param(layout.base()),
            param(layout.total())
        );
    }
    let gen = Generator {
        kernel,
        classes,
        layout,
        rows: None,
    };
    let parallel = gen.iterators(IterKind::Parallel);
    let reduction = gen.iterators(IterKind::Reduction);
    gen.decode(&mut s, "point", &parallel, "", "i", "let");
    gen.bases(&mut s, &parallel);
    let body = gen.constants_and_body(&mut s);
    if kernel.accumulate == Accumulate::Assign {
        let value = gen.last_point(&mut s, &reduction, &body);
        let _ = writeln!(s, "    result[base_out] = {value};\n}}");
        return s;
    }
    // Like the CPU, other accumulations start from their identity even
    // without reduction iterators (it decides -0.0 + 0.0 and NaN cases).
    let _ = writeln!(
        s,
        "    var acc = {};",
        f32_literal(kernel.accumulate.identity())
    );
    let step = match point_of_workgroup {
        None => {
            gen.walk(&mut s, &reduction, &body, None);
            let value = finish_call(kernel, "acc", &|o| format!("base_in{o}"));
            let _ = writeln!(s, "    result[base_out] = {value};\n}}");
            return s;
        }
        Some(_) => REDUCTION_WORKGROUP_SIZE,
    };
    // This invocation's points of the span: lane, lane + step, ...
    let (_, chunk_word) = layout.reduction_words().expect("a workgroup reduction");
    let _ = writeln!(
        s,
        "    let points = {};\n\
         \x20   let span = {} * {step}u;\n\
         \x20   let begin = part * span;\n\
         \x20   let end = begin + min(points - begin, span);\n\
         \x20   var count = 0u;\n\
         \x20   if (begin + lane < end) {{ count = (end - begin - lane - 1u) / {step}u + 1u; }}",
        gen.point_count(&reduction),
        param(chunk_word)
    );
    gen.walk(&mut s, &reduction, &body, Some(step));
    // A fixed tree of fan-in TREE_FAN_IN: at each level, lane t < width
    // folds lanes t + width, t + 2 * width, ... into its own, in order.
    let _ = writeln!(s, "    lanes[lane] = acc;\n    workgroupBarrier();");
    let mut width = REDUCTION_WORKGROUP_SIZE;
    while width > 1 {
        let fan_in = TREE_FAN_IN.min(width);
        width /= fan_in;
        let mut folded = "lanes[lane]".to_string();
        for k in 1..fan_in {
            folded = combine(
                kernel.accumulate,
                &folded,
                &format!("lanes[lane + {}u]", k * width),
            );
        }
        let _ = writeln!(s, "    if (lane < {width}u) {{ lanes[lane] = {folded}; }}");
        if width > 1 {
            s.push_str("    workgroupBarrier();\n");
        }
    }
    // Only the pass that writes the result applies the epilogue.
    let value = finish_call(kernel, "lanes[0]", &|o| format!("base_in{o}"));
    let _ = writeln!(
        s,
        "    if (lane == 0u) {{\n\
         \x20       if (per_output == 1u) {{ result[base_out] = {value}; }} else {{ result[group] = lanes[0]; }}\n\
         \x20   }}\n}}"
    );
    s
}

/// The start of every shader of `kernel`: the parameter block, the
/// bindings and the helper functions.
pub(crate) fn header(kernel: &Kernel, layout: &ParamLayout) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "// generated from: {kernel}\nstruct Params {{ w: array<vec4<u32>, {}> }}\n\
         @group(0) @binding(0) var<uniform> params: Params;\n\
         @group(0) @binding(1) var<storage, read_write> result: array<f32>;",
        layout.vec4s()
    );
    let table = matches!(layout.schedule, Schedule::Rows { .. }).then(|| kernel.operands - 1);
    for o in 0..kernel.operands {
        let _ = if Some(o) == table {
            writeln!(
                s,
                "@group(0) @binding({}) var<storage, read> rows: array<u32>;",
                o + 2
            )
        } else {
            writeln!(
                s,
                "@group(0) @binding({}) var<storage, read> in{o}: array<f32>;",
                o + 2
            )
        };
    }
    s.push_str(PRELUDE);
    // The scalar table's functions that are not WGSL builtins (`relu`
    // keeps NaN, as numpy and torch do).
    for op in UnaryOp::ALL {
        if let Some(definition) = op.wgsl_definition() {
            s.push_str(definition);
            s.push('\n');
        }
    }
    if let Some(epilogue) = &kernel.epilogue {
        // The epilogue as a function of the accumulated value and the
        // operands it reads.
        let params: String = kernel
            .epilogue_operands()
            .iter()
            .map(|o| format!(", v{o}: f32"))
            .collect();
        let (mut text, mut consts) = (String::new(), Vec::new());
        expr(epilogue, &mut consts, &mut text);
        let _ = writeln!(s, "fn finish(acc: f32{params}) -> f32 {{");
        for (n, c) in consts.iter().enumerate() {
            let _ = writeln!(s, "    var k{n} = {};", f32_literal(*c));
        }
        let _ = writeln!(s, "    return {text};\n}}");
    }
    s
}

/// The value written for accumulated value `acc`: `acc` itself, or the
/// epilogue's call with each operand `o` it reads at element `at(o)`.
pub(crate) fn finish_call(kernel: &Kernel, acc: &str, at: &dyn Fn(usize) -> String) -> String {
    if kernel.epilogue.is_none() {
        return acc.to_string();
    }
    let args: String = kernel
        .epilogue_operands()
        .iter()
        .map(|&o| format!(", in{o}[{}]", at(o)))
        .collect();
    format!("finish({acc}{args})")
}

/// `acc` combined with `x` by `accumulate`, as WGSL.
pub(crate) fn combine(accumulate: Accumulate, acc: &str, x: &str) -> String {
    match accumulate {
        Accumulate::Assign => x.to_string(),
        Accumulate::Add => format!("{acc} + {x}"),
        Accumulate::Mul => format!("{acc} * {x}"),
        Accumulate::Max => format!("fmax({acc}, {x})"),
        Accumulate::Min => format!("fmin({acc}, {x})"),
    }
}

/// The shader of a launch over rows (see [`Schedule::Rows`]) for
/// `kernel`, whose last operand is the row table.
fn generate_rows(
    kernel: &Kernel,
    classes: &StrideClasses,
    layout: ParamLayout,
    along: usize,
) -> String {
    let mut s = header(kernel, &layout);
    let per_row = layout.rows_word().expect("a row launch's layout");
    // A row's entry: its length, then the result's and each operand's
    // offset (the table itself has none).
    let width = kernel.operands + 1;
    let _ = writeln!(
        s,
        "\n@compute @workgroup_size({WORKGROUP_SIZE})\n\
         fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{\n\
         \x20   let flat = {} + gid.x + gid.y * groups.x * {WORKGROUP_SIZE}u;\n\
         \x20   if (flat >= {}) {{ return; }}\n\
         \x20   let per_row = {};\n\
         \x20   let row = flat / per_row;\n\
         \x20   let point = flat - row * per_row;\n\
         \x20   let entry = row * {width}u;\n\
         \x20   let len = rows[entry];",
        param(layout.base()),
        param(layout.total()),
        param(per_row)
    );
    let along_parallel = kernel.iterators.get(along) == Some(&IterKind::Parallel);
    let gen = Generator {
        kernel,
        classes,
        layout,
        rows: Some(RowsGen {
            along_len: (!along_parallel).then_some(along),
        }),
    };
    let parallel = gen.iterators(IterKind::Parallel);
    let reduction = gen.iterators(IterKind::Reduction);
    gen.decode(&mut s, "point", &parallel, "", "i", "let");
    if along_parallel {
        // Padded to the longest row: points past this row's end are not.
        let _ = writeln!(s, "    if (i{along} >= len) {{ return; }}");
    }
    gen.bases(&mut s, &parallel);
    let body = gen.constants_and_body(&mut s);
    let value = if kernel.accumulate == Accumulate::Assign {
        // The lowering never gives an empty row to an assignment.
        gen.last_point(&mut s, &reduction, &body)
    } else {
        let _ = writeln!(
            s,
            "    var acc = {};",
            f32_literal(kernel.accumulate.identity())
        );
        gen.walk(&mut s, &reduction, &body, None);
        finish_call(kernel, "acc", &|o| format!("base_in{o}"))
    };
    let _ = writeln!(s, "    result[base_out] = {value};\n}}");
    s
}

/// What a row launch's shader reads from the row table.
pub(crate) struct RowsGen {
    /// The reduction iterator whose extent is the row's length (`len`),
    /// if the row's iterator is a reduction.
    along_len: Option<usize>,
}

/// What the pieces of a shader need to know.
pub(crate) struct Generator<'a> {
    pub(crate) kernel: &'a Kernel,
    pub(crate) classes: &'a StrideClasses,
    pub(crate) layout: ParamLayout,
    /// For a launch over rows: offsets come from the row table.
    pub(crate) rows: Option<RowsGen>,
}

impl Generator<'_> {
    /// Declares the body's constants and gives the body as WGSL.
    fn constants_and_body(&self, s: &mut String) -> String {
        let mut body = String::new();
        let mut consts = Vec::new();
        expr(&self.kernel.body, &mut consts, &mut body);
        for (n, c) in consts.iter().enumerate() {
            let _ = writeln!(s, "    var k{n} = {};", f32_literal(*c));
        }
        body
    }

    /// An assignment's value: the body at the last reduction point (the
    /// result of an assignment over points is the last one's; no loop).
    fn last_point(&self, s: &mut String, reduction: &[usize], body: &str) -> String {
        for &k in reduction {
            let _ = writeln!(s, "    let i{k} = {} - 1u;", self.size(k));
        }
        self.loads(s, "    ", reduction);
        finish_call(self.kernel, body, &|o| format!("base_in{o}"))
    }

    /// The extent of iterator `k`, as WGSL: its size in the parameter
    /// block, or a row's length.
    pub(crate) fn size(&self, k: usize) -> String {
        match &self.rows {
            Some(r) if r.along_len == Some(k) => "len".to_string(),
            _ => param(self.layout.size(k)),
        }
    }

    pub(crate) fn iterators(&self, kind: IterKind) -> Vec<usize> {
        (0..self.kernel.iterators.len())
            .filter(|&k| self.kernel.iterators[k] == kind)
            .collect()
    }

    /// Declares `{name}{k}` for each iterator of `iters`, the digits of
    /// the linear index `value` counted row-major over them (innermost
    /// fastest). The outermost digit is not wrapped: it may exceed its
    /// size when `value` is past the last point. `tag` keeps the
    /// temporaries of several decodings apart.
    pub(crate) fn decode(
        &self,
        s: &mut String,
        value: &str,
        iters: &[usize],
        tag: &str,
        name: &str,
        decl: &str,
    ) {
        if iters.is_empty() {
            return;
        }
        let (rest, q) = (format!("rest{tag}"), format!("q{tag}"));
        let _ = writeln!(s, "    var {rest} = {value};");
        for (pos, &k) in iters.iter().enumerate().rev() {
            if pos == 0 {
                let _ = writeln!(s, "    {decl} {name}{k} = {rest};");
            } else {
                // One division per iterator: the remainder from the quotient
                // (software adapters have no vector integer division).
                let size = self.size(k);
                let _ = writeln!(
                    s,
                    "    let {q}{k} = {rest} / {size};\n    {decl} {name}{k} = {rest} - {q}{k} * {size};\n    {rest} = {q}{k};"
                );
            }
        }
    }

    /// The sum of the strides times the iterators of `iters` for tensor
    /// `t`, as WGSL terms each starting with ` + `.
    pub(crate) fn offset_sum(&self, t: usize, iters: &[usize]) -> String {
        let mut text = String::new();
        for &k in iters {
            let _ = match self.classes.stride(t, k) {
                StrideClass::Zero => Ok(()),
                StrideClass::One => write!(text, " + i{k}"),
                StrideClass::General => {
                    write!(text, " + {} * i{k}", param(self.layout.stride(t, k)))
                }
            };
        }
        text
    }

    /// Declares `base_out` and `base_in{n}`: each tensor's element at this
    /// parallel point with every reduction iterator at 0.
    fn bases(&self, s: &mut String, parallel: &[usize]) {
        // A row launch's table (its last operand) has no base.
        let tensors = 1 + self.kernel.operands - usize::from(self.rows.is_some());
        for t in 0..tensors {
            let name = if t == 0 {
                "out".to_string()
            } else {
                format!("in{}", t - 1)
            };
            let _ = writeln!(
                s,
                "    let base_{name} = {}{};",
                match self.classes.offset(t) {
                    _ if self.rows.is_some() => format!("rows[entry + {}u]", 1 + t),
                    StrideClass::Zero => "0u".to_string(),
                    _ => param(self.layout.offset(t)),
                },
                if self.classes.contiguous.get(t) == Some(&true) {
                    " + point".to_string()
                } else {
                    self.offset_sum(t, parallel)
                }
            );
        }
    }

    /// Declares `v{n}` for each operand the body reads, at the current
    /// reduction point.
    fn loads(&self, s: &mut String, indent: &str, reduction: &[usize]) {
        let used = self.kernel.body.operands_used().min(self.kernel.operands);
        for o in 0..used {
            let _ = writeln!(
                s,
                "{indent}let v{o} = in{o}[base_in{o}{}];",
                self.offset_sum(o + 1, reduction)
            );
        }
    }

    /// The number of reduction points, as WGSL (the planner keeps it below
    /// 2^32).
    pub(crate) fn point_count(&self, reduction: &[usize]) -> String {
        if reduction.is_empty() {
            return "1u".to_string();
        }
        reduction
            .iter()
            .map(|&k| self.size(k))
            .collect::<Vec<_>>()
            .join(" * ")
    }

    /// Accumulates `body` into `acc` over reduction points with ONE loop:
    /// an odometer over the reduction iterators advances by one point per
    /// iteration, so each point costs one back-edge of Mesa's budget
    /// however many iterators there are. `step` `None`: every point from
    /// the first; `Some(n)`: `count` points from `begin + lane`, `n` apart.
    fn walk(&self, s: &mut String, reduction: &[usize], body: &str, step: Option<u32>) {
        let acc = combine(self.kernel.accumulate, "acc", body);
        if reduction.is_empty() {
            self.loads(s, "    ", reduction);
            let _ = writeln!(s, "    acc = {acc};");
            return;
        }
        let count = match step {
            None => {
                for &k in reduction {
                    let _ = writeln!(s, "    var i{k} = 0u;");
                }
                self.point_count(reduction)
            }
            Some(n) => {
                self.decode(s, "begin + lane", reduction, "_r", "i", "var");
                // The step's digits.
                self.decode(s, &format!("{n}u"), reduction, "_w", "w", "let");
                "count".to_string()
            }
        };
        let _ = writeln!(s, "    for (var j = 0u; j < {count}; j = j + 1u) {{");
        self.loads(s, "        ", reduction);
        let _ = writeln!(s, "        acc = {acc};");
        // Add the step with carries, innermost first; each digit stays
        // below its size, so one subtraction wraps it. The outermost digit
        // is not wrapped.
        let mut carry = String::new();
        for (pos, &k) in reduction.iter().enumerate().rev() {
            let digit = match step {
                Some(_) => format!(" + w{k}"),
                None if pos + 1 == reduction.len() => " + 1u".to_string(),
                None => String::new(),
            };
            if pos == 0 {
                let _ = writeln!(s, "        i{k} = i{k}{digit}{carry};");
            } else {
                let size = self.size(k);
                let _ = writeln!(
                    s,
                    "        let t{k} = i{k}{digit}{carry};\n        let c{k} = t{k} >= {size};\n        i{k} = select(t{k}, t{k} - {size}, c{k});"
                );
                carry = format!(" + select(0u, 1u, c{k})");
            }
        }
        s.push_str("    }\n");
    }
}
