//! Tiled contractions: kernels that reduce a function of two operands,
//! each indexed by parallel iterators the other ignores (a matrix
//! product, a batched one, an einsum with one or more reduced labels).
//!
//! One workgroup of `side × side` invocations computes a tile of
//! `tile × tile` results (`tile = side * per_thread`) of one batch point:
//! rows along the iterator `m` that only operand A follows, columns along
//! `n` that only operand B follows. The reduction points, counted
//! row-major over the reduction iterators as the CPU reference counts
//! them, are walked `depth` at a time: the workgroup copies a
//! `tile × depth` slab of each operand into workgroup memory (each
//! invocation copies `tile * depth / side²` values, outside the tensors'
//! bounds as zeros that nothing reads), waits at a barrier, and each
//! invocation then combines the slab into its `per_thread²` accumulators
//! (rows `y, y + side, ...`, columns `x, x + side, ...` of the tile),
//! reading each staged value from workgroup memory instead of the
//! operand's buffer.
//!
//! **Order.** Each result element is accumulated by one invocation, from
//! the accumulation's identity, over the reduction points in order, one
//! at a time: exactly the CPU reference's order, so a tiled result
//! differs from it only where the shader compiler contracts a multiply
//! and an add into one rounding.
//!
//! **Loop budget.** The slab loop runs `⌊points / depth⌋` times and the
//! loop over each slab's points once per point, so an invocation runs
//! `points + ⌊points / depth⌋` iterations; a contraction past the
//! launch's [`crate::LoopBudget`] runs on the other schedules. The copies
//! and the `per_thread²` accumulations of a step are unrolled. (Unrolling
//! the steps too made shaders 16 times longer and, on llvmpipe through
//! Vulkan, a 512³ product slower: 90 ms against 58 ms.)
//!
//! **Sizes.** Any sizes: tiles at the edges are partial (their missing
//! rows and columns are computed on zeros and never written), the last
//! slab is guarded point by point. Which sizes are tiled depends only on
//! the sizes and the options ([`TileAxes::worthwhile`]), so the schedule
//! and the order of additions are the same on every run.

use std::fmt::Write;

use shape_core::kernel::{Accumulate, IterKind, Kernel, Launch, Races};

use crate::reduction::{point_counts, LoopBudget};
use crate::wgsl::{self, Generator, ParamLayout, Schedule, StrideClass, StrideClasses};

/// The shape of a tiled contraction's workgroup, chosen from the
/// adapter's limits ([`TileConfig::for_limits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileConfig {
    pub(crate) side: u32,
    pub(crate) per_thread: u32,
    pub(crate) depth: u32,
}

impl TileConfig {
    /// 16 × 16 invocations, 4 × 4 results each: 64 × 64 tiles, slabs of
    /// 16 reduction points, 8 KiB of workgroup memory.
    pub const LARGE: TileConfig = TileConfig {
        side: 16,
        per_thread: 4,
        depth: 16,
    };

    /// 8 × 8 invocations, 4 × 4 results each: 32 × 32 tiles, slabs of 8
    /// points, 2 KiB of workgroup memory.
    pub const SMALL: TileConfig = TileConfig {
        side: 8,
        per_thread: 4,
        depth: 8,
    };

    /// The largest configuration the limits allow; `None` when even
    /// [`TileConfig::SMALL`] exceeds them (contractions then run on the
    /// other schedules).
    pub fn for_limits(limits: &wgpu::Limits) -> Option<TileConfig> {
        [TileConfig::LARGE, TileConfig::SMALL]
            .into_iter()
            .find(|c| {
                c.invocations() <= limits.max_compute_invocations_per_workgroup
                    && c.side <= limits.max_compute_workgroup_size_x
                    && c.side <= limits.max_compute_workgroup_size_y
                    && c.workgroup_bytes() <= limits.max_compute_workgroup_storage_size
            })
    }

    /// Invocations per workgroup.
    pub fn invocations(self) -> u32 {
        self.side * self.side
    }

    /// Rows (and columns) of results per tile.
    pub fn tile(self) -> u32 {
        self.side * self.per_thread
    }

    /// Reduction points per slab.
    pub fn depth(self) -> u32 {
        self.depth
    }

    /// Workgroup memory of the two staged slabs, in bytes.
    pub fn workgroup_bytes(self) -> u32 {
        2 * self.tile() * self.depth * 4
    }

    /// Values of one slab each invocation copies.
    fn copies(self) -> u32 {
        self.tile() * self.depth / self.invocations()
    }
}

/// Which operand and iterator play which part in a tiled contraction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileAxes {
    /// The parallel iterator of the tile's rows: operand 0 follows it,
    /// operand 1 does not.
    pub m: usize,
    /// The parallel iterator of the tile's columns: operand 1 follows it,
    /// operand 0 does not.
    pub n: usize,
}

impl TileAxes {
    /// Whether `kernel`'s structure alone allows tiling (the conditions of
    /// [`TileAxes::of`] that do not look at strides): a cheap test that
    /// spares launches of other kernels the stride classes.
    pub fn candidate(kernel: &Kernel) -> bool {
        let epilogue = kernel.epilogue_operands();
        kernel.body.operands_used() == 2
            && kernel.iterators.contains(&IterKind::Reduction)
            && kernel.accumulate != Accumulate::Assign
            && kernel.body.reads(0)
            && kernel.body.reads(1)
            && !epilogue.contains(&0)
            && !epilogue.contains(&1)
    }

    /// The tile axes of launches of `kernel` whose strides have
    /// `classes`, when its structure is a contraction: a body that reads
    /// operands 0 and 1 and no other (an epilogue may read the others,
    /// not these), a reduction that accumulates (not an
    /// assignment), a parallel iterator only operand 0 follows and one
    /// only operand 1 follows (the innermost of each). Every other
    /// parallel iterator is a batch iterator: one tile grid per point.
    pub fn of(kernel: &Kernel, classes: &StrideClasses) -> Option<TileAxes> {
        if !TileAxes::candidate(kernel) {
            return None;
        }
        let only = |follows: usize, ignores: usize| {
            (0..kernel.iterators.len()).rev().find(|&k| {
                kernel.iterators[k] == IterKind::Parallel
                    && classes.stride(1 + follows, k) != StrideClass::Zero
                    && classes.stride(1 + ignores, k) == StrideClass::Zero
            })
        };
        Some(TileAxes {
            m: only(0, 1)?,
            n: only(1, 0)?,
        })
    }

    /// The number of workgroups a tiled launch takes, when tiling it is
    /// worthwhile: at least half a tile of rows and of columns, racing
    /// writes refused, slabs within the loop budget, and a reduction
    /// that is not long next to the number of results (those run as
    /// workgroup reductions: see [`crate::reduction::plan`]).
    pub fn worthwhile(
        self,
        kernel: &Kernel,
        launch: &Launch,
        config: TileConfig,
        budget: LoopBudget,
        threshold: u64,
    ) -> Option<u64> {
        let size = |k: usize| launch.sizes.get(k).copied();
        let (rows, columns) = (size(self.m)?, size(self.n)?);
        let half = u64::from(config.tile() / 2);
        if launch.races != Races::Refused || rows < half || columns < half {
            return None;
        }
        let (outputs, points) = point_counts(kernel, launch);
        let long = points >= threshold as u128 && points > outputs;
        if long || points > u32::MAX as u128 {
            return None;
        }
        // Every slab's steps and the slab loop itself.
        if points + points / u128::from(config.depth) > u128::from(budget.get()) {
            return None;
        }
        let tiles = u128::from(rows.div_ceil(u64::from(config.tile())))
            * u128::from(columns.div_ceil(u64::from(config.tile())));
        let batch = outputs / (u128::from(rows) * u128::from(columns));
        let workgroups = tiles * batch;
        (workgroups <= u32::MAX as u128).then_some(workgroups as u64)
    }
}

/// The tiled shader for launches of `kernel` with `classes`, or `None`
/// when its structure is not a contraction.
///
/// Workgroup `g = base + x + y * groups_x` computes tile `g % tiles_n`
/// of the columns and `(g / tiles_n) % tiles_m` of the rows, at batch
/// point `g / (tiles_n * tiles_m)` (row-major over the batch iterators).
pub fn generate(kernel: &Kernel, classes: &StrideClasses, config: TileConfig) -> Option<String> {
    let axes = TileAxes::of(kernel, classes)?;
    let layout = ParamLayout::scheduled(kernel, Schedule::Tiled(config));
    let gen = Generator {
        kernel,
        classes,
        layout,
    };
    let param = |w: usize| wgsl::param(w);
    let (tile, side, depth, per) = (config.tile(), config.side, config.depth, config.per_thread);
    let mut s = wgsl::header(kernel, &layout);
    let reduction = gen.iterators(IterKind::Reduction);
    let batch: Vec<usize> = gen
        .iterators(IterKind::Parallel)
        .into_iter()
        .filter(|&k| k != axes.m && k != axes.n)
        .collect();
    // One point's contribution as a function: the body is written once,
    // not once per accumulator (16 times).
    let mut body = String::new();
    let mut consts = Vec::new();
    wgsl::expr(&kernel.body, &mut consts, &mut body);
    s.push_str("fn point(acc: f32, v0: f32, v1: f32) -> f32 {\n");
    for (n, c) in consts.iter().enumerate() {
        let _ = writeln!(s, "    var k{n} = {};", wgsl::f32_literal(*c));
    }
    let _ = writeln!(
        s,
        "    return {};\n}}",
        wgsl::combine(kernel.accumulate, "acc", &body)
    );
    let _ = writeln!(
        s,
        "var<workgroup> slab0: array<f32, {slab}>;\n\
         var<workgroup> slab1: array<f32, {slab}>;\n\n\
         @compute @workgroup_size({side}, {side})\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {{\n\
         \x20   let group = {base} + wid.x + wid.y * groups.x;\n\
         \x20   if (group >= {total}) {{ return; }}\n\
         \x20   let size_m = {size_m};\n\
         \x20   let size_n = {size_n};\n\
         \x20   let tiles_n = (size_n + {last}u) / {tile}u;\n\
         \x20   let tiles_m = (size_m + {last}u) / {tile}u;\n\
         \x20   let tile_n = group % tiles_n;\n\
         \x20   let rows_and_batch = group / tiles_n;\n\
         \x20   let tile_m = rows_and_batch % tiles_m;\n\
         \x20   let m0 = tile_m * {tile}u;\n\
         \x20   let n0 = tile_n * {tile}u;\n\
         \x20   let points = {points};",
        slab = tile * depth,
        base = param(layout.base()),
        total = param(layout.total()),
        size_m = param(layout.size(axes.m)),
        size_n = param(layout.size(axes.n)),
        last = tile - 1,
        points = gen.point_count(&reduction),
    );
    gen.decode(&mut s, "rows_and_batch / tiles_m", &batch, "_b", "i", "let");
    for t in 0..1 + kernel.operands {
        let name = tensor_name(t);
        let offset = match classes.offset(t) {
            StrideClass::Zero => "0u".to_string(),
            _ => param(layout.offset(t)),
        };
        let _ = writeln!(
            s,
            "    let base_{name} = {offset}{};",
            gen.offset_sum(t, &batch)
        );
    }
    let identity = wgsl::f32_literal(kernel.accumulate.identity());
    for i in 0..per {
        for j in 0..per {
            let _ = writeln!(s, "    var acc_{i}_{j} = {identity};");
        }
    }
    let slab_step = |s: &mut String, guarded: bool| {
        copy_slabs(s, &gen, axes, config, &reduction, guarded);
        s.push_str("        workgroupBarrier();\n");
        let steps = if guarded {
            "points - kt".to_string()
        } else {
            format!("{depth}u")
        };
        let _ = writeln!(
            s,
            "        for (var kk = 0u; kk < {steps}; kk = kk + 1u) {{\n\
             \x20           let at = kk * {tile}u;"
        );
        for i in 0..per {
            let _ = writeln!(
                s,
                "            let a{i} = slab0[at + lid.y + {}u];",
                i * side
            );
        }
        for j in 0..per {
            let _ = writeln!(
                s,
                "            let b{j} = slab1[at + lid.x + {}u];",
                j * side
            );
        }
        for i in 0..per {
            for j in 0..per {
                let _ = writeln!(
                    s,
                    "            acc_{i}_{j} = point(acc_{i}_{j}, a{i}, b{j});"
                );
            }
        }
        s.push_str("        }\n");
    };
    let _ = writeln!(
        s,
        "    var kt = 0u;\n    for (; kt + {depth}u <= points; kt = kt + {depth}u) {{"
    );
    slab_step(&mut s, false);
    s.push_str("        workgroupBarrier();\n    }\n    if (kt < points) {\n");
    slab_step(&mut s, true);
    s.push_str("    }\n");
    let term = |t: usize, k: usize, value: &str| match classes.stride(t, k) {
        StrideClass::Zero => String::new(),
        StrideClass::One => format!(" + {value}"),
        StrideClass::General => format!(" + {value} * {}", param(layout.stride(t, k))),
    };
    for i in 0..per {
        for j in 0..per {
            let _ = writeln!(
                s,
                "    {{\n        let m = m0 + lid.y + {}u;\n        let n = n0 + lid.x + {}u;\n\
                 \x20       if (m < size_m && n < size_n) {{ result[base_out{}{}] = {}; }}\n    }}",
                i * side,
                j * side,
                term(0, axes.m, "m"),
                term(0, axes.n, "n"),
                wgsl::finish_call(kernel, &format!("acc_{i}_{j}"), &|o| format!(
                    "base_in{o}{}{}",
                    term(1 + o, axes.m, "m"),
                    term(1 + o, axes.n, "n")
                )),
            );
        }
    }
    s.push_str("}\n");
    Some(s)
}

/// The name of tensor `t` in a shader (0: the result, `1 + n`: operand n).
fn tensor_name(t: usize) -> String {
    if t == 0 {
        "out".to_string()
    } else {
        format!("in{}", t - 1)
    }
}

/// Copies this slab of both operands into workgroup memory: slab `o`
/// holds operand `o` at `[point * tile + row]` for the slab's points and
/// the tile's rows (columns, for operand 1). When an operand's stride
/// along the single reduction iterator is one, consecutive invocations
/// copy consecutive points (its contiguous axis), otherwise consecutive
/// rows.
fn copy_slabs(
    s: &mut String,
    gen: &Generator<'_>,
    axes: TileAxes,
    config: TileConfig,
    reduction: &[usize],
    guarded: bool,
) {
    let (tile, depth) = (config.tile(), config.depth);
    for o in 0..2 {
        let (axis, first, size) = if o == 0 {
            (axes.m, "m0", "size_m")
        } else {
            (axes.n, "n0", "size_n")
        };
        let t = 1 + o;
        let points_fast = matches!(reduction, [r] if gen.classes.stride(t, *r) == StrideClass::One)
            && gen.classes.stride(t, axis) != StrideClass::One;
        let row_term = match gen.classes.stride(t, axis) {
            StrideClass::Zero => String::new(),
            StrideClass::One => " + row".to_string(),
            StrideClass::General => format!(" + row * {}", wgsl::param(gen.layout.stride(t, axis))),
        };
        for e in 0..config.copies() {
            let (row, point) = if points_fast {
                ("r / {depth}u", "r % {depth}u")
            } else {
                ("r % {tile}u", "r / {tile}u")
            };
            let row = row
                .replace("{depth}", &depth.to_string())
                .replace("{tile}", &tile.to_string());
            let point = point
                .replace("{depth}", &depth.to_string())
                .replace("{tile}", &tile.to_string());
            let _ = writeln!(
                s,
                "        {{\n            let r = lane + {}u;\n            let row_in = {row};\n            let point_in = {point};\n\
                 \x20           let row = {first} + row_in;\n            let k = kt + point_in;\n            var v = 0.0;",
                e * config.invocations()
            );
            let bound = if guarded {
                format!("row < {size} && k < points")
            } else {
                format!("row < {size}")
            };
            let _ = writeln!(s, "            if ({bound}) {{");
            let point_terms = match reduction {
                [r] => match gen.classes.stride(t, *r) {
                    StrideClass::Zero => String::new(),
                    StrideClass::One => " + k".to_string(),
                    StrideClass::General => {
                        format!(" + k * {}", wgsl::param(gen.layout.stride(t, *r)))
                    }
                },
                _ => {
                    gen.decode(s, "k", reduction, "_k", "i", "let");
                    gen.offset_sum(t, reduction)
                }
            };
            let _ = writeln!(
                s,
                "                v = in{o}[base_in{o}{row_term}{point_terms}];\n            }}\n\
                 \x20           slab{o}[point_in * {tile}u + row_in] = v;\n        }}"
            );
        }
    }
}
