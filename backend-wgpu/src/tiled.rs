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
//! the sizes and the options ([`TileAxes::plan`]), so the schedule
//! and the order of additions are the same on every run.
//!
//! **Batched tiles** ([`TileConfig::batched`]): products with fewer
//! than half a tile of rows or columns. Each invocation computes a
//! register tile of `per_thread²` results reading the operands straight
//! from their buffers (no slabs, no barrier), and a workgroup covers
//! several batch points (its `z`). Same order as above.
//!
//! **Split-K** ([`TiledPlan::SplitK`]): reductions past the loop budget.
//! The tiled shader walks one chunk of the points per workgroup and
//! writes partials; a second pass ([`crate::reduction::partials_kernel`])
//! adds each result's partials in order of their chunks. The order is
//! fixed by the sizes, not the reference's (a sum of chunk sums).

use std::fmt::Write;

use shape_core::kernel::{Accumulate, IterKind, Kernel, Launch, Races};

use crate::reduction::point_counts;
use crate::wgsl::{self, Generator, ParamLayout, Schedule, StrideClass, StrideClasses};

/// The shape of a tiled contraction's workgroup: [`TileConfig::LARGE`]
/// or [`TileConfig::SMALL`] from the adapter's limits
/// ([`TileConfig::for_limits`]), or a batched tile for small products
/// ([`TileConfig::batched`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TileConfig {
    /// Invocations along the rows (`m`, the workgroup's y).
    pub(crate) side_m: u32,
    /// Invocations along the columns (`n`, the workgroup's x).
    pub(crate) side_n: u32,
    pub(crate) per_thread: u32,
    pub(crate) depth: u32,
    /// Batch points per workgroup (the workgroup's z), each with its own
    /// slabs.
    pub(crate) batch: u32,
}

impl TileConfig {
    /// 16 × 16 invocations, 4 × 4 results each: 64 × 64 tiles, slabs of
    /// 16 reduction points, 8 KiB of workgroup memory.
    pub const LARGE: TileConfig = TileConfig {
        side_m: 16,
        side_n: 16,
        per_thread: 4,
        depth: 16,
        batch: 1,
    };

    /// 8 × 8 invocations, 4 × 4 results each: 32 × 32 tiles, slabs of 8
    /// points, 2 KiB of workgroup memory.
    pub const SMALL: TileConfig = TileConfig {
        side_m: 8,
        side_n: 8,
        per_thread: 4,
        depth: 8,
        batch: 1,
    };

    /// The largest configuration the limits allow; `None` when even
    /// [`TileConfig::SMALL`] exceeds them (contractions then run on the
    /// other schedules).
    pub fn for_limits(limits: &wgpu::Limits) -> Option<TileConfig> {
        [TileConfig::LARGE, TileConfig::SMALL]
            .into_iter()
            .find(|c| c.fits(limits))
    }

    /// Whether the device's limits allow this workgroup.
    pub fn fits(self, limits: &wgpu::Limits) -> bool {
        self.invocations() <= limits.max_compute_invocations_per_workgroup
            && self.side_n <= limits.max_compute_workgroup_size_x
            && self.side_m <= limits.max_compute_workgroup_size_y
            && self.batch <= limits.max_compute_workgroup_size_z
            && self.workgroup_bytes() <= limits.max_compute_workgroup_storage_size
    }

    /// The batched tile for products of `rows × columns` results (one of
    /// them below half a [`TileConfig::LARGE`] tile) at `batch` batch
    /// points. Its invocations read the operands straight from their
    /// buffers (no slabs, no barriers: on a small product, staging costs
    /// more than it saves) and each computes a register tile of
    /// `per_thread²` results (2 × 2, or 4 × 4 when rows and columns
    /// reach 4), loading `2 × per_thread` values per reduction point for
    /// `per_thread²` steps. The sides are the powers of two at or above
    /// the sizes over `per_thread` (at most 16, grown along the larger
    /// size up to 64 invocations), and a workgroup covers as many batch
    /// points as fill 256 invocations (at most 64, and no more than the
    /// batch needs). Sizes alone decide it, so a launch's schedule is the
    /// same on every run.
    pub fn batched(rows: u64, columns: u64, batch: u64) -> TileConfig {
        let per = rows.min(columns).next_power_of_two().clamp(2, 4);
        let side = |size: u64| size.div_ceil(per).next_power_of_two().min(16) as u32;
        let (mut m, mut n) = (side(rows), side(columns));
        while m * n < 64 {
            if columns > u64::from(n) * per {
                n *= 2;
            } else if rows > u64::from(m) * per {
                m *= 2;
            } else {
                break;
            }
        }
        let wanted = batch.next_power_of_two().min(64) as u32;
        TileConfig {
            side_m: m,
            side_n: n,
            per_thread: per as u32,
            depth: 0,
            batch: (256 / (m * n)).clamp(1, 64).min(wanted),
        }
    }

    /// Whether the tile reads its operands straight from their buffers
    /// (a batched tile), not through slabs in workgroup memory.
    pub fn direct(self) -> bool {
        self.depth == 0
    }

    /// Invocations per workgroup.
    pub fn invocations(self) -> u32 {
        self.layer() * self.batch
    }

    /// Invocations per batch point of a workgroup.
    fn layer(self) -> u32 {
        self.side_m * self.side_n
    }

    /// Rows of results per tile.
    pub fn tile(self) -> u32 {
        self.tile_m()
    }

    /// Rows of results per tile.
    pub fn tile_m(self) -> u32 {
        self.side_m * self.per_thread
    }

    /// Columns of results per tile.
    pub fn tile_n(self) -> u32 {
        self.side_n * self.per_thread
    }

    /// Reduction points per slab.
    pub fn depth(self) -> u32 {
        self.depth
    }

    /// Batch points per workgroup.
    pub fn batch(self) -> u32 {
        self.batch
    }

    /// Workgroup memory of the two staged slabs, in bytes.
    pub fn workgroup_bytes(self) -> u32 {
        (self.tile_m() + self.tile_n()) * self.depth * self.batch * 4
    }
}

/// Workgroups a split-K launch aims at across all its tiles, so that a
/// few tiles still occupy a GPU.
const SPLIT_K_TARGET_WORKGROUPS: u128 = 256;

/// The fewest reduction points a split-K workgroup covers (unless the
/// budget allows fewer): the partials cost one write and one read per
/// result and split, next to `chunk` steps of the tile.
const SPLIT_K_MIN_CHUNK: u128 = 1024;

/// How a contraction runs tiled ([`TileAxes::plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TiledPlan {
    /// One pass ([`Schedule::Tiled`]): `workgroups` tiles, each result
    /// accumulated over all its points.
    Tiled {
        /// The tile shape (a large, small or batched tile).
        config: TileConfig,
        /// Workgroups of the launch.
        workgroups: u64,
    },
    /// Split-K ([`Schedule::SplitK`]): `splits` workgroups per tile, split
    /// `s` accumulating points `s·chunk` to `(s + 1)·chunk - 1` into
    /// partial `p·splits + s` (`p` the result's row-major index over the
    /// parallel iterators); a second pass adds each result's partials in
    /// order of `s` ([`crate::reduction::partials_kernel`]).
    SplitK {
        /// The tile shape.
        config: TileConfig,
        /// Workgroups of the first pass (tiles × splits).
        workgroups: u64,
        /// Splits per tile, at least 2.
        splits: u32,
        /// Points per split (a multiple of the slab depth), within the
        /// loop budget.
        chunk: u32,
    },
}

impl TiledPlan {
    /// The plan's schedule.
    pub fn schedule(self) -> Schedule {
        match self {
            TiledPlan::Tiled { config, .. } => Schedule::Tiled(config),
            TiledPlan::SplitK { config, .. } => Schedule::SplitK(config),
        }
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

    /// How a launch of this contraction runs tiled, if it does; from the
    /// sizes and the options alone, so that the schedule and the order of
    /// additions are the same on every run. Racing writes are refused.
    ///
    /// - Rows and columns of at least half a `base` tile: the `base` tile
    ///   when `points + points / depth` fit the loop budget and the
    ///   reduction is not long next to the number of results (at least
    ///   the threshold and more than the results); otherwise split-K
    ///   ([`TiledPlan::SplitK`], unless
    ///   [`crate::WgpuOptions::split_k_contractions`] is off), with
    ///   chunks within the budget.
    /// - Fewer rows or columns (at least 2 of each), at 2 batch points
    ///   or more, with one reduction iterator: a batched tile
    ///   ([`TileConfig::batched`], unless
    ///   [`crate::WgpuOptions::batched_tiles`] is off) when the points fit
    ///   the budget, the reduction is not long and the device allows the
    ///   workgroup.
    ///
    /// Anything else runs on the other schedules.
    pub fn plan(
        self,
        kernel: &Kernel,
        launch: &Launch,
        base: TileConfig,
        limits: &wgpu::Limits,
        options: &crate::WgpuOptions,
    ) -> Option<TiledPlan> {
        let size = |k: usize| launch.sizes.get(k).copied();
        let (rows, columns) = (size(self.m)?, size(self.n)?);
        if launch.races != Races::Refused || rows < 2 || columns < 2 {
            return None;
        }
        let (outputs, points) = point_counts(kernel, launch);
        if points > u32::MAX as u128 {
            return None;
        }
        let batch = outputs / (u128::from(rows) * u128::from(columns));
        let budget = u128::from(options.loop_budget.get());
        let long = points >= u128::from(options.workgroup_reduction_threshold) && points > outputs;
        // Every slab's steps and the slab loop itself.
        let fits = |c: TileConfig| match c.depth {
            0 => points <= budget,
            depth => points + points / u128::from(depth) <= budget,
        };
        let tiles = |c: TileConfig| {
            u128::from(rows.div_ceil(u64::from(c.tile_m())))
                * u128::from(columns.div_ceil(u64::from(c.tile_n())))
                * batch.div_ceil(u128::from(c.batch))
        };
        let count = |w: u128| (w <= u32::MAX as u128).then_some(w as u64);
        let half = u64::from(base.tile() / 2);
        if rows >= half && columns >= half {
            if !long && fits(base) {
                return Some(TiledPlan::Tiled {
                    config: base,
                    workgroups: count(tiles(base))?,
                });
            }
            if !options.split_k_contractions {
                return None;
            }
            let depth = u128::from(base.depth);
            // chunk + chunk / depth within the budget, chunk a multiple of
            // the depth.
            let most = budget / (depth + 1) * depth;
            if most == 0 {
                return None;
            }
            let target = SPLIT_K_TARGET_WORKGROUPS.div_ceil(tiles(base)).max(1);
            let chunk = points
                .div_ceil(target)
                .max(SPLIT_K_MIN_CHUNK)
                .next_multiple_of(depth)
                .min(most);
            let splits = points.div_ceil(chunk);
            if splits < 2 {
                return Some(TiledPlan::Tiled {
                    config: base,
                    workgroups: count(tiles(base))?,
                });
            }
            return Some(TiledPlan::SplitK {
                config: base,
                workgroups: count(tiles(base) * splits)?,
                splits: splits as u32,
                chunk: chunk as u32,
            });
        }
        let config = TileConfig::batched(rows, columns, batch.min(u64::MAX as u128) as u64);
        // One reduction iterator: the direct reads step one stride per
        // point (several would need an odometer per operand).
        let reductions = kernel
            .iterators
            .iter()
            .filter(|&&k| k == IterKind::Reduction)
            .count();
        // Batch points: a single small product keeps one invocation per
        // element (and programs of plain products keep compiling nothing
        // new at other sizes, the batched tile's shape following them).
        if !options.batched_tiles
            || batch < 2
            || base != TileConfig::LARGE
            || long
            || reductions != 1
            || !fits(config)
        {
            return None;
        }
        if !config.fits(limits) {
            return None;
        }
        Some(TiledPlan::Tiled {
            config,
            workgroups: count(tiles(config))?,
        })
    }
}

/// The tiled shader for launches of `kernel` with `classes`, or `None`
/// when its structure is not a contraction. With `split`, the split-K
/// shader: it reduces one chunk of the points per workgroup and writes
/// partials, not results.
///
/// Workgroup `g = base + x + y * groups_x` computes (split-K: split
/// `g % splits` of, with `g / splits` in place of `g`) tile
/// `g % tiles_n` of the columns and `(g / tiles_n) % tiles_m` of the
/// rows, at the batch points `(g / (tiles_n * tiles_m)) * batch + z`
/// (row-major over the batch iterators) for the workgroup's `z` in
/// `0..batch`.
pub fn generate(
    kernel: &Kernel,
    classes: &StrideClasses,
    config: TileConfig,
    split: bool,
) -> Option<String> {
    let axes = TileAxes::of(kernel, classes)?;
    let reductions = kernel
        .iterators
        .iter()
        .filter(|&&k| k == IterKind::Reduction)
        .count();
    if config.direct() && reductions != 1 {
        return None;
    }
    let schedule = if split {
        Schedule::SplitK(config)
    } else {
        Schedule::Tiled(config)
    };
    let layout = ParamLayout::scheduled(kernel, schedule);
    let gen = Generator {
        kernel,
        classes,
        layout,
        rows: None,
    };
    let param = |w: usize| wgsl::param(w);
    let (tile_m, tile_n) = (config.tile_m(), config.tile_n());
    let (side_m, side_n) = (config.side_m, config.side_n);
    let (depth, per) = (config.depth, config.per_thread);
    let batched = config.batch > 1;
    let mut s = wgsl::header(kernel, &layout);
    let reduction = gen.iterators(IterKind::Reduction);
    let parallel = gen.iterators(IterKind::Parallel);
    let batch: Vec<usize> = parallel
        .iter()
        .copied()
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
    let workgroup_size = if batched {
        format!("{side_n}, {side_m}, {}", config.batch)
    } else {
        format!("{side_n}, {side_m}")
    };
    if !config.direct() {
        let _ = writeln!(
            s,
            "var<workgroup> slab0: array<f32, {}>;\nvar<workgroup> slab1: array<f32, {}>;",
            tile_m * depth * config.batch,
            tile_n * depth * config.batch,
        );
    }
    let _ = writeln!(
        s,
        "\n@compute @workgroup_size({workgroup_size})\n\
         fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {{\n\
         \x20   let group = {base} + wid.x + wid.y * groups.x;\n\
         \x20   if (group >= {total}) {{ return; }}",
        base = param(layout.base()),
        total = param(layout.total()),
    );
    let split_words = layout.reduction_words().filter(|_| split);
    match split_words {
        Some((splits_word, _)) => {
            let _ = writeln!(
                s,
                "    let splits = {};\n    let split = group % splits;\n    let tile_group = group / splits;",
                param(splits_word)
            );
        }
        None => s.push_str("    let tile_group = group;\n"),
    }
    let _ = writeln!(
        s,
        "    let size_m = {size_m};\n\
         \x20   let size_n = {size_n};\n\
         \x20   let tiles_n = (size_n + {last_n}u) / {tile_n}u;\n\
         \x20   let tiles_m = (size_m + {last_m}u) / {tile_m}u;\n\
         \x20   let tile_n = tile_group % tiles_n;\n\
         \x20   let rows_and_batch = tile_group / tiles_n;\n\
         \x20   let tile_m = rows_and_batch % tiles_m;\n\
         \x20   let m0 = tile_m * {tile_m}u;\n\
         \x20   let n0 = tile_n * {tile_n}u;\n\
         \x20   let points = {points};",
        size_m = param(layout.size(axes.m)),
        size_n = param(layout.size(axes.n)),
        last_n = tile_n - 1,
        last_m = tile_m - 1,
        points = gen.point_count(&reduction),
    );
    match split_words {
        Some((_, chunk_word)) => {
            let _ = writeln!(
                s,
                "    let k_begin = split * {};\n    let k_end = min(points, k_begin + {});",
                param(chunk_word),
                param(chunk_word)
            );
        }
        None => s.push_str("    let k_begin = 0u;\n    let k_end = points;\n"),
    }
    if batched {
        let count = if batch.is_empty() {
            "1u".to_string()
        } else {
            batch
                .iter()
                .map(|&k| param(layout.size(k)))
                .collect::<Vec<_>>()
                .join(" * ")
        };
        let _ = writeln!(
            s,
            "    let batch_raw = (rows_and_batch / tiles_m) * {}u + lid.z;\n\
             \x20   let live = batch_raw < {count};\n\
             \x20   let batch_point = min(batch_raw, {count} - 1u);\n\
             \x20   let flat = lid.x + lid.y * {side_n}u;\n\
             \x20   let z0 = lid.z * {}u;\n\
             \x20   let z1 = lid.z * {}u;",
            config.batch,
            tile_m * depth,
            tile_n * depth,
        );
    } else {
        s.push_str("    let batch_point = rows_and_batch / tiles_m;\n    let flat = lane;\n");
    }
    gen.decode(&mut s, "batch_point", &batch, "_b", "i", "let");
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
    let term = |t: usize, k: usize, value: &str| match classes.stride(t, k) {
        StrideClass::Zero => String::new(),
        StrideClass::One => format!(" + {value}"),
        StrideClass::General => format!(" + {value} * {}", param(layout.stride(t, k))),
    };
    if config.direct() {
        // Each invocation's rows and columns, clamped into the tensors
        // (the clamped ones compute values nobody writes).
        for i in 0..per {
            let _ = writeln!(
                s,
                "    let at0_{i} = base_in0{};",
                term(
                    1,
                    axes.m,
                    &format!("min(m0 + lid.y + {}u, size_m - 1u)", i * side_m)
                )
            );
        }
        for j in 0..per {
            let _ = writeln!(
                s,
                "    let at1_{j} = base_in1{};",
                term(
                    2,
                    axes.n,
                    &format!("min(n0 + lid.x + {}u, size_n - 1u)", j * side_n)
                )
            );
        }
        let r = reduction[0];
        let _ = writeln!(
            s,
            "    for (var k = k_begin; k < k_end; k = k + 1u) {{\n\
             \x20       let k0 = 0u{};\n\
             \x20       let k1 = 0u{};",
            term(1, r, "k"),
            term(2, r, "k")
        );
        for i in 0..per {
            let _ = writeln!(s, "        let a{i} = in0[at0_{i} + k0];");
        }
        for j in 0..per {
            let _ = writeln!(s, "        let b{j} = in1[at1_{j} + k1];");
        }
        for i in 0..per {
            for j in 0..per {
                let _ = writeln!(s, "        acc_{i}_{j} = point(acc_{i}_{j}, a{i}, b{j});");
            }
        }
        s.push_str("    }\n");
    } else {
        staged_loop(&mut s, &gen, axes, config, &reduction);
    }
    let live = if batched { " && live" } else { "" };
    write_results(&mut s, &gen, axes, config, &parallel, split, live);
    s.push_str("}\n");
    Some(s)
}

/// The slab loop of a staged tile: copies, a barrier, `depth` steps.
fn staged_loop(
    s: &mut String,
    gen: &Generator<'_>,
    axes: TileAxes,
    config: TileConfig,
    reduction: &[usize],
) {
    let (tile_m, tile_n) = (config.tile_m(), config.tile_n());
    let (side_m, side_n) = (config.side_m, config.side_n);
    let (depth, per) = (config.depth, config.per_thread);
    let batched = config.batch > 1;
    let (z0, z1) = if batched {
        ("z0 + ", "z1 + ")
    } else {
        ("", "")
    };
    let slab_step = |s: &mut String, guarded: bool| {
        copy_slabs(s, gen, axes, config, reduction, guarded);
        s.push_str("        workgroupBarrier();\n");
        let steps = if guarded {
            "k_end - kt".to_string()
        } else {
            format!("{depth}u")
        };
        let _ = writeln!(
            s,
            "        for (var kk = 0u; kk < {steps}; kk = kk + 1u) {{\n\
             \x20           let at0 = {z0}kk * {tile_m}u;\n\
             \x20           let at1 = {z1}kk * {tile_n}u;"
        );
        for i in 0..per {
            let _ = writeln!(
                s,
                "            let a{i} = slab0[at0 + lid.y + {}u];",
                i * side_m
            );
        }
        for j in 0..per {
            let _ = writeln!(
                s,
                "            let b{j} = slab1[at1 + lid.x + {}u];",
                j * side_n
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
        "    var kt = k_begin;\n    for (; kt + {depth}u <= k_end; kt = kt + {depth}u) {{"
    );
    slab_step(s, false);
    s.push_str("        workgroupBarrier();\n    }\n    if (kt < k_end) {\n");
    slab_step(s, true);
    s.push_str("    }\n");
}

/// Writes each invocation's results: through the result's layout (and
/// the epilogue), or as split-K partials.
fn write_results(
    s: &mut String,
    gen: &Generator<'_>,
    axes: TileAxes,
    config: TileConfig,
    parallel: &[usize],
    split: bool,
    live: &str,
) {
    let (kernel, classes, layout) = (gen.kernel, gen.classes, gen.layout);
    let param = |w: usize| wgsl::param(w);
    let (side_m, side_n, per) = (config.side_m, config.side_n, config.per_thread);
    let term = |t: usize, k: usize, value: &str| match classes.stride(t, k) {
        StrideClass::Zero => String::new(),
        StrideClass::One => format!(" + {value}"),
        StrideClass::General => format!(" + {value} * {}", param(layout.stride(t, k))),
    };
    // Split-K: partial `p * splits + split`, `p` the row-major index of
    // the result element over the parallel iterators.
    let linear = parallel.iter().fold(String::new(), |acc, &k| {
        let digit = if k == axes.m {
            "m".to_string()
        } else if k == axes.n {
            "n".to_string()
        } else {
            format!("i{k}")
        };
        if acc.is_empty() {
            digit
        } else {
            format!("({acc}) * {} + {digit}", param(layout.size(k)))
        }
    });
    for i in 0..per {
        for j in 0..per {
            let target = if split {
                format!("result[({linear}) * splits + split] = acc_{i}_{j};")
            } else {
                format!(
                    "result[base_out{}{}] = {};",
                    term(0, axes.m, "m"),
                    term(0, axes.n, "n"),
                    wgsl::finish_call(kernel, &format!("acc_{i}_{j}"), &|o| format!(
                        "base_in{o}{}{}",
                        term(1 + o, axes.m, "m"),
                        term(1 + o, axes.n, "n")
                    )),
                )
            };
            let _ = writeln!(
                s,
                "    {{\n        let m = m0 + lid.y + {}u;\n        let n = n0 + lid.x + {}u;\n\
                 \x20       if (m < size_m && n < size_n{live}) {{ {target} }}\n    }}",
                i * side_m,
                j * side_n,
            );
        }
    }
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
/// holds operand `o` at `[point * tile + row]` (after its batch point's
/// `z` offset) for the slab's points and the tile's rows (columns, for
/// operand 1). When an operand's stride along the single reduction
/// iterator is one, consecutive invocations copy consecutive points (its
/// contiguous axis), otherwise consecutive rows.
fn copy_slabs(
    s: &mut String,
    gen: &Generator<'_>,
    axes: TileAxes,
    config: TileConfig,
    reduction: &[usize],
    guarded: bool,
) {
    let depth = config.depth;
    let batched = config.batch > 1;
    for o in 0..2 {
        let (axis, first, size, tile) = if o == 0 {
            (axes.m, "m0", "size_m", config.tile_m())
        } else {
            (axes.n, "n0", "size_n", config.tile_n())
        };
        let t = 1 + o;
        let points_fast = matches!(reduction, [r] if gen.classes.stride(t, *r) == StrideClass::One)
            && gen.classes.stride(t, axis) != StrideClass::One;
        let row_term = match gen.classes.stride(t, axis) {
            StrideClass::Zero => String::new(),
            StrideClass::One => " + row".to_string(),
            StrideClass::General => format!(" + row * {}", wgsl::param(gen.layout.stride(t, axis))),
        };
        let values = tile * depth;
        let copies = values.div_ceil(config.layer());
        let (row, point) = if points_fast {
            (format!("r / {depth}u"), format!("r % {depth}u"))
        } else {
            (format!("r % {tile}u"), format!("r / {tile}u"))
        };
        let z = if batched {
            format!("z{o} + ")
        } else {
            String::new()
        };
        for e in 0..copies {
            let _ = writeln!(
                s,
                "        {{\n            let r = flat + {}u;\n            let row_in = {row};\n            let point_in = {point};\n\
                 \x20           let row = {first} + row_in;\n            let k = kt + point_in;\n            var v = 0.0;",
                e * config.layer()
            );
            let mut bound = format!("row < {size}");
            if guarded {
                bound.push_str(" && k < k_end");
            }
            if batched {
                bound.push_str(" && live");
            }
            let partial =
                !values.is_multiple_of(config.layer()) && (e + 1) * config.layer() > values;
            if partial {
                bound.push_str(&format!(" && r < {values}u"));
            }
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
            let store = format!("slab{o}[{z}point_in * {tile}u + row_in] = v;");
            let store = if partial {
                format!("if (r < {values}u) {{ {store} }}")
            } else {
                store
            };
            let _ = writeln!(
                s,
                "                v = in{o}[base_in{o}{row_term}{point_terms}];\n            }}\n\
                 \x20           {store}\n        }}"
            );
        }
    }
}
