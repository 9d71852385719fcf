//! How a launch's reduction is split across invocations and passes.
//!
//! Mesa's software adapters (lavapipe on Vulkan, llvmpipe through GL)
//! give every shader invocation one budget of 65,535 loop iterations,
//! spent by every back-edge of every loop, and silently leave a loop when
//! it runs out: a sum of 65,536 ones gave 65,535. So no generated kernel
//! runs more than [`LoopBudget`] iterations per invocation, counting all
//! its loops, and a reduction longer than that is split:
//!
//! - **per element** ([`Plan::PerElement`]): one invocation per result
//!   element walks all the reduction points in one loop, in the CPU
//!   reference's order. Used when the reduction fits the budget and is
//!   short (below [`WgpuOptions::workgroup_reduction_threshold`]) or has
//!   at least as many outputs as points per output.
//! - **workgroup reduction** ([`Plan::Workgroup`]): each output's points
//!   are cut into `groups` spans of `chunk * 256` points; workgroup `g`
//!   (256 invocations) reduces span `g`: invocation `t` accumulates points
//!   `t, t + 256, t + 512, ...` of the span (at most `chunk`, within the
//!   budget), then the 256 values are combined in workgroup memory by a
//!   fixed tree of fan-in [`crate::wgsl::TREE_FAN_IN`] (lane `t < 16` folds
//!   lanes `t + 16, t + 32, ..., t + 240`, then lane 0 folds lanes 1 to
//!   15). With one span per output the result is written through its
//!   layout; otherwise each workgroup writes one partial value and the
//!   partials, `groups` per output, are reduced by the next pass, planned
//!   the same way ([`partials_kernel`], [`partials_launch`]).
//!
//! The plan depends only on the kernel's structure, the launch's sizes and
//! the options, never on the adapter or on timing, so the order in which
//! values combine (and so the rounding) is the same on every run.
//!
//! [`WgpuOptions::workgroup_reduction_threshold`]: crate::WgpuOptions::workgroup_reduction_threshold

use std::num::NonZeroU32;

use shape_core::kernel::{Accumulate, Expr, IterKind, Kernel, Launch, Layout, Races};

use crate::error::WgpuError;

/// Invocations of a workgroup reduction, a power of two: every adapter
/// that runs compute shaders allows 256 invocations per workgroup
/// (WebGPU's minimum limit), and 1 KiB of workgroup memory.
pub const REDUCTION_WORKGROUP_SIZE: u32 = 256;

/// The most loop iterations any invocation of a generated kernel runs,
/// counting every loop.
///
/// Mesa's software adapters stop a loop silently after 65,535 iterations
/// per invocation, all loops together. The budget stays well below that
/// (at most [`LoopBudget::MAX`], half of Mesa's), leaving room for loops
/// in functions that a kernel calls per point: a function with loops of
/// `L` iterations multiplies each point's cost by `L + 1`, so a kernel
/// calling one needs a budget of at most `32,768 / (L + 1)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LoopBudget(NonZeroU32);

impl LoopBudget {
    /// The default: 4,096 iterations, 16 times below Mesa's limit. One
    /// workgroup reduction pass then covers 2^20 points per workgroup.
    pub const DEFAULT: LoopBudget = LoopBudget(NonZeroU32::new(4096).unwrap());

    /// The largest budget allowed: 32,768, half of Mesa's limit.
    pub const MAX: LoopBudget = LoopBudget(NonZeroU32::new(32768).unwrap());

    /// A budget of `iterations`, or `None` unless `1 <= iterations <=
    /// 32,768`.
    ///
    /// ```
    /// use backend_wgpu::LoopBudget;
    /// assert_eq!(LoopBudget::new(4096), Some(LoopBudget::DEFAULT));
    /// assert_eq!(LoopBudget::new(0), None);
    /// assert_eq!(LoopBudget::new(65_536), None);
    /// ```
    pub const fn new(iterations: u32) -> Option<LoopBudget> {
        match NonZeroU32::new(iterations) {
            Some(n) if iterations <= LoopBudget::MAX.get() => Some(LoopBudget(n)),
            _ => None,
        }
    }

    /// The number of iterations.
    pub const fn get(self) -> u32 {
        self.0.get()
    }
}

impl Default for LoopBudget {
    fn default() -> Self {
        LoopBudget::DEFAULT
    }
}

/// Default of [`crate::WgpuOptions::workgroup_reduction_threshold`].
pub const DEFAULT_WORKGROUP_REDUCTION_THRESHOLD: u64 = 1024;

/// Workgroups the first pass aims at across all outputs, so that a
/// reduction with few outputs still occupies a large GPU.
const TARGET_WORKGROUPS: u64 = 512;

/// The fewest points an invocation of a workgroup reduction accumulates
/// before the tree (unless the budget is smaller): with fewer, workgroups
/// multiply and their trees and barriers cost more than the loop. On
/// llvmpipe a barrier switches between the workgroup's 32 SIMD
/// coroutines: 16 row sums of 32,768 took 6.2 ms with 16 points per
/// invocation and 4.5 ms with 256 (sequential criterion runs).
const MIN_CHUNK: u64 = 256;

/// How one launch (or one pass) runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    /// One invocation per result element, reducing all its points.
    PerElement,
    /// Workgroup reductions: `groups` workgroups per output, each of whose
    /// invocations accumulates at most `chunk` points.
    Workgroup {
        /// Workgroups per output; 1 writes the result, more write
        /// partials for another pass.
        groups: u32,
        /// Points per invocation, at most the loop budget.
        chunk: u32,
    },
}

/// The number of parallel points (outputs) and of reduction points per
/// output of `launch`.
pub(crate) fn point_counts(kernel: &Kernel, launch: &Launch) -> (u128, u128) {
    let product = |kind: IterKind| -> u128 {
        kernel
            .iterators
            .iter()
            .zip(&launch.sizes)
            .filter(|(k, _)| **k == kind)
            .map(|(_, &s)| s as u128)
            .product()
    };
    (product(IterKind::Parallel), product(IterKind::Reduction))
}

/// Chooses how a launch of `kernel` runs, from its sizes and the options
/// alone. `launch` has no size 0 (such launches do nothing).
pub fn plan(
    kernel: &Kernel,
    launch: &Launch,
    budget: LoopBudget,
    threshold: u64,
) -> Result<Plan, WgpuError> {
    let reduces = kernel.iterators.contains(&IterKind::Reduction);
    // An assignment keeps the last point's value: the shader computes only
    // that point, without a loop.
    if !reduces || kernel.accumulate == Accumulate::Assign {
        return Ok(Plan::PerElement);
    }
    let (outputs, points) = point_counts(kernel, launch);
    // Shaders walk the reduction points with a 32-bit linear index.
    if points > u32::MAX as u128 {
        return Err(WgpuError::IndexRange {
            what: "number of reduction points per result element",
            value: points.min(u64::MAX as u128) as u64,
            limit: u32::MAX as u64,
        });
    }
    let budget = budget.get() as u128;
    let long = points >= threshold as u128 && points > outputs;
    if points <= budget && !long {
        return Ok(Plan::PerElement);
    }
    let width = REDUCTION_WORKGROUP_SIZE as u128;
    let target_groups = (TARGET_WORKGROUPS as u128).div_ceil(outputs).max(1);
    let chunk = points
        .div_ceil(width * target_groups)
        .max(MIN_CHUNK as u128)
        .min(budget);
    let groups = points.div_ceil(width * chunk);
    // Workgroups are numbered with 32-bit integers too.
    let workgroups = outputs * groups;
    if workgroups > u32::MAX as u128 {
        return Err(WgpuError::IndexRange {
            what: "workgroup count of a reduction",
            value: workgroups.min(u64::MAX as u128) as u64,
            limit: u32::MAX as u64,
        });
    }
    Ok(Plan::Workgroup {
        groups: groups as u32,
        chunk: chunk as u32,
    })
}

/// The kernel of the pass after a workgroup reduction of `kernel`: it
/// reduces the partials, one row of them per output, into the result with
/// the same accumulation. Its iterators are `kernel`'s parallel ones, in
/// order, then one reduction over the partials. Its operand 0 is the
/// partials; an epilogue moves to it, with the operands it reads after
/// the partials, in order ([`Kernel::epilogue_operands`]).
pub fn partials_kernel(kernel: &Kernel) -> Kernel {
    let mut iterators: Vec<IterKind> = kernel
        .iterators
        .iter()
        .copied()
        .filter(|&k| k == IterKind::Parallel)
        .collect();
    iterators.push(IterKind::Reduction);
    let read = kernel.epilogue_operands();
    let next = Kernel::new(iterators, 1 + read.len(), Expr::Load(0), kernel.accumulate);
    match &kernel.epilogue {
        Some(e) => next.with_epilogue(
            e.map_loads(&|o| Expr::Load(1 + read.iter().position(|&r| r == o).unwrap_or(0))),
        ),
        None => next,
    }
}

/// The launch of [`partials_kernel`] after a pass that wrote `groups`
/// partials per output: the partials are row-major, the partial of output
/// `p` (the row-major index over the parallel iterators) and workgroup `g`
/// at `p * groups + g`; the result keeps `launch`'s layout, and its
/// permission to race.
pub fn partials_launch(kernel: &Kernel, launch: &Launch, groups: u32) -> Launch {
    let parallel = kernel.iterators_of(IterKind::Parallel);
    let mut sizes: Vec<u64> = parallel.iter().map(|&k| launch.sizes[k]).collect();
    sizes.push(groups as u64);
    let mut result_strides: Vec<u64> = parallel.iter().map(|&k| launch.result.strides[k]).collect();
    result_strides.push(0);
    let mut strides = vec![0u64; sizes.len()];
    let mut step = 1u64;
    for k in (0..sizes.len()).rev() {
        strides[k] = step;
        step = step.saturating_mul(sizes[k]);
    }
    // The epilogue's operands, at the same parallel points.
    let epilogue = kernel.epilogue_operands().into_iter().map(|o| {
        let layout = &launch.operands[o];
        let mut strides: Vec<u64> = parallel.iter().map(|&k| layout.strides[k]).collect();
        strides.push(0);
        Layout::new(layout.offset, strides, layout.len)
    });
    let partials = Launch::new(
        sizes,
        Layout::new(launch.result.offset, result_strides, launch.result.len),
        std::iter::once(Layout::new(0, strides, step))
            .chain(epilogue)
            .collect(),
    );
    // Points that write one result element (an explicit race) still do.
    match launch.races {
        Races::Allowed => partials.allowing_races(),
        _ => partials,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(iterators: Vec<IterKind>) -> Kernel {
        Kernel::new(iterators, 1, Expr::Load(0), Accumulate::Add)
    }

    fn launch(sizes: Vec<u64>) -> Launch {
        let n = sizes.len();
        Launch::new(sizes, Layout::new(0, vec![0; n], 1), vec![])
    }

    const P: IterKind = IterKind::Parallel;
    const R: IterKind = IterKind::Reduction;

    fn default_plan(kernel: &Kernel, sizes: Vec<u64>) -> Plan {
        plan(
            kernel,
            &launch(sizes),
            LoopBudget::DEFAULT,
            DEFAULT_WORKGROUP_REDUCTION_THRESHOLD,
        )
        .unwrap()
    }

    #[test]
    fn short_reductions_and_many_outputs_run_per_element() {
        let k = sum(vec![P, R]);
        assert_eq!(default_plan(&k, vec![3, 1000]), Plan::PerElement);
        // A 512^3 matrix product: 512 points for each of 262,144 outputs.
        let mm = sum(vec![P, P, R]);
        assert_eq!(default_plan(&mm, vec![512, 512, 512]), Plan::PerElement);
        // As many outputs as points: enough invocations already.
        assert_eq!(default_plan(&k, vec![4096, 4096]), Plan::PerElement);
        let assign = k.clone().with_accumulate(Accumulate::Assign);
        assert_eq!(default_plan(&assign, vec![1, 1 << 30]), Plan::PerElement);
        assert_eq!(default_plan(&sum(vec![P, P]), vec![5, 5]), Plan::PerElement);
    }

    #[test]
    fn long_reductions_are_split_within_the_budget() {
        let k = sum(vec![R]);
        // 65,536 points for one output: 512 workgroups would take one
        // point per invocation, so each takes the minimum chunk, and one
        // workgroup covers them all.
        assert_eq!(
            default_plan(&k, vec![65_536]),
            Plan::Workgroup {
                groups: 1,
                chunk: 256
            }
        );
        // 16M points: 256 workgroups of the minimum chunk; 64M points,
        // 512 workgroups of 512 points per invocation.
        assert_eq!(
            default_plan(&k, vec![1 << 24]),
            Plan::Workgroup {
                groups: 256,
                chunk: 256
            }
        );
        assert_eq!(
            default_plan(&k, vec![1 << 26]),
            Plan::Workgroup {
                groups: 512,
                chunk: 512
            }
        );
        // Many outputs past the budget: one workgroup each when it covers
        // the row, more when it does not.
        let rows = sum(vec![P, R]);
        assert_eq!(
            default_plan(&rows, vec![100_000, 5000]),
            Plan::Workgroup {
                groups: 1,
                chunk: 256
            }
        );
        assert_eq!(
            default_plan(&rows, vec![1000, 3 << 20]),
            Plan::Workgroup {
                groups: 3,
                chunk: 4096
            }
        );
        for (sizes, budget) in [
            (vec![1, 1 << 20], 1u32),
            (vec![7, 99_999], 3),
            (vec![1, (1 << 32) - 1], 4096),
            (vec![3, 123_456_789], 32_768),
        ] {
            let budget = LoopBudget::new(budget).unwrap();
            let Plan::Workgroup { groups, chunk } =
                plan(&rows, &launch(sizes.clone()), budget, u64::MAX).unwrap()
            else {
                panic!("{sizes:?}: not split");
            };
            assert!(chunk <= budget.get());
            assert!(groups as u64 * chunk as u64 * 256 >= sizes[1]);
            assert!((groups as u64 - 1) * chunk as u64 * 256 < sizes[1]);
        }
    }

    proptest::proptest! {
        /// Whatever the sizes and options, every pass keeps each
        /// invocation within the budget, covers every point, and the
        /// passes end.
        #[test]
        fn every_pass_of_every_plan_stays_within_the_budget(
            outputs in 1u64..5000,
            reduction in proptest::collection::vec(1u64..200_000, 1..3),
            budget in 1u32..=32_768,
            threshold in 0u64..5000,
        ) {
            let budget = LoopBudget::new(budget).unwrap();
            let mut kernel = sum(vec![P, R]);
            kernel.iterators.extend(std::iter::repeat_n(R, reduction.len() - 1));
            let mut sizes = vec![outputs];
            sizes.extend(&reduction);
            let mut launch = launch(sizes);
            let mut passes = 0;
            loop {
                passes += 1;
                proptest::prop_assert!(passes <= 4, "{:?}: {} passes", launch.sizes, passes);
                let (outs, points) = point_counts(&kernel, &launch);
                proptest::prop_assert_eq!(outs, outputs as u128);
                match plan(&kernel, &launch, budget, threshold) {
                    Ok(Plan::PerElement) => {
                        proptest::prop_assert!(points <= budget.get() as u128);
                        break;
                    }
                    Ok(Plan::Workgroup { groups, chunk }) => {
                        proptest::prop_assert!(chunk <= budget.get());
                        let span = chunk as u128 * REDUCTION_WORKGROUP_SIZE as u128;
                        proptest::prop_assert!(groups as u128 * span >= points);
                        proptest::prop_assert!((groups as u128 - 1) * span < points);
                        if groups == 1 {
                            break;
                        }
                        launch = partials_launch(&kernel, &launch, groups);
                        kernel = partials_kernel(&kernel);
                    }
                    Err(e) => {
                        proptest::prop_assert!(points > u32::MAX as u128, "{}", e);
                        break;
                    }
                }
            }
        }
    }

    #[test]
    fn a_budget_outside_its_range_is_refused() {
        assert_eq!(LoopBudget::new(1).map(LoopBudget::get), Some(1));
        assert_eq!(LoopBudget::new(32_768), Some(LoopBudget::MAX));
        assert_eq!(LoopBudget::new(32_769), None);
        assert_eq!(LoopBudget::new(0), None);
    }

    #[test]
    fn reductions_past_32_bit_indices_are_typed_errors() {
        let k = sum(vec![R, R]);
        let e = plan(
            &k,
            &launch(vec![1 << 16, 1 << 16]),
            LoopBudget::DEFAULT,
            1024,
        )
        .unwrap_err();
        assert!(
            matches!(e, WgpuError::IndexRange { value, .. } if value == 1 << 32),
            "{e}"
        );
    }

    #[test]
    fn the_partials_pass_keeps_the_parallel_iterators_and_the_result_layout() {
        let k = sum(vec![R, P, R, P]).with_accumulate(Accumulate::Max);
        let l = Launch::new(
            vec![5, 3, 7, 2],
            Layout::new(4, vec![0, 1, 0, 3], 10),
            vec![],
        );
        let k2 = partials_kernel(&k);
        assert_eq!(k2.iterators, vec![P, P, R]);
        assert_eq!(k2.accumulate, Accumulate::Max);
        let l2 = partials_launch(&k, &l, 9);
        assert_eq!(l2.sizes, vec![3, 2, 9]);
        assert_eq!(l2.result.strides, vec![1, 3, 0]);
        assert_eq!(l2.result.offset, 4);
        assert_eq!(l2.operands[0].strides, vec![18, 9, 1]);
        assert_eq!(l2.operands[0].len, 54);
        assert_eq!(l2.races, Races::Refused);
        l2.check(&k2).unwrap();
        // A launch whose points may race keeps that permission.
        let racing = partials_launch(&k, &l.allowing_races(), 9);
        assert_eq!(racing.races, Races::Allowed);
    }
}
