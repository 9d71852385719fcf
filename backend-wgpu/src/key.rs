//! The pipeline cache's key: a kernel's structure and its launch's stride
//! classes as a flat word sequence.
//!
//! Two launches get the same key exactly when they generate the same WGSL:
//! iterator kinds, operand count, accumulation, the scalar body (with
//! constants compared by their bits, so `-0.0`, `0.0` and NaNs stay apart
//! and the key can be `Eq`), the stride classes and the schedule. Building
//! it allocates one small vector and formats nothing, which keeps a cache
//! hit cheap.

use shape_core::kernel::{Accumulate, Expr, IterKind, Kernel};

use crate::wgsl::{Schedule, StrideClass, StrideClasses};

/// A kernel's structure, hashable.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct KernelKey(Vec<u32>);

impl KernelKey {
    pub(crate) fn of(kernel: &Kernel, classes: &StrideClasses, schedule: Schedule) -> KernelKey {
        let mut words = Vec::with_capacity(8 + kernel.iterators.len());
        match schedule.effective(kernel) {
            Schedule::PerElement => words.push(0),
            Schedule::WorkgroupReduction => words.push(1),
            Schedule::Rows { along } => words.extend([4, along as u32]),
            Schedule::Tiled(config) | Schedule::SplitK(config) => {
                let split = matches!(schedule.effective(kernel), Schedule::SplitK(_));
                words.extend([
                    2 + u32::from(split),
                    config.side_m,
                    config.side_n,
                    config.per_thread,
                    config.depth,
                    config.batch,
                ])
            }
        }
        words.push(kernel.iterators.len() as u32);
        words.extend(kernel.iterators.iter().map(|k| match k {
            IterKind::Parallel => 0,
            IterKind::Reduction => 1,
        }));
        words.push(kernel.operands as u32);
        words.push(match kernel.accumulate {
            Accumulate::Assign => 0,
            Accumulate::Add => 1,
            Accumulate::Mul => 2,
            Accumulate::Max => 3,
            Accumulate::Min => 4,
        });
        encode(&kernel.body, &mut words);
        match &kernel.epilogue {
            Some(e) => {
                words.push(1);
                encode(e, &mut words);
            }
            None => words.push(0),
        }
        words.extend(classes.contiguous.iter().map(|&c| u32::from(c)));
        words.extend(
            classes
                .strides
                .iter()
                .flatten()
                .chain(&classes.offsets)
                .map(|c| match c {
                    StrideClass::Zero => 0,
                    StrideClass::One => 1,
                    StrideClass::General => 2,
                }),
        );
        KernelKey(words)
    }
}

/// Prefix encoding: a tag word, the operator's discriminant, then the
/// children; unambiguous because every tag has a fixed arity.
fn encode(e: &Expr, out: &mut Vec<u32>) {
    match e {
        Expr::Load(i) => out.extend([0, *i as u32]),
        Expr::Const(c) => out.extend([1, c.to_bits()]),
        Expr::Unary(op, a) => {
            out.extend([2, *op as u32]);
            encode(a, out);
        }
        Expr::Binary(op, a, b) => {
            out.extend([3, *op as u32]);
            encode(a, out);
            encode(b, out);
        }
        Expr::Compare(op, a, b) => {
            out.extend([4, *op as u32]);
            encode(a, out);
            encode(b, out);
        }
        Expr::Select(c, a, b) => {
            out.push(5);
            encode(c, out);
            encode(a, out);
            encode(b, out);
        }
        Expr::Accumulated => out.push(6),
        // Refused before any pipeline is looked up (`wgsl::supports`).
        _ => out.push(u32::MAX),
    }
}
