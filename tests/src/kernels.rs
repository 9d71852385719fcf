//! Random kernels with launches and data, for testing a backend below the
//! graph level: every iterator kind, accumulation and scalar operation of
//! the kernel IR, layouts with offsets, broadcast (zero) strides, permuted
//! and partial axes, and data with zeros, infinities and NaNs.

use proptest::prelude::*;
use shape_core::kernel::{
    Accumulate, BinaryOp, CompareOp, Expr, IterKind, Kernel, Launch, Layout, UnaryOp,
};

use crate::programs::Rng;

/// A kernel, a launch that fits it, and data for its operands.
#[derive(Clone, Debug)]
pub struct KernelCase {
    /// The kernel.
    pub kernel: Kernel,
    /// Its launch.
    pub launch: Launch,
    /// One buffer per operand, as long as its layout says.
    pub operands: Vec<Vec<f32>>,
}

fn pick<T: Copy>(rng: &mut Rng, items: &[T]) -> T {
    items[rng.below(items.len() as u64) as usize]
}

fn expr(rng: &mut Rng, operands: usize, depth: u32) -> Expr {
    let leaf = depth == 0 || rng.below(3) == 0;
    if leaf {
        return if operands > 0 && rng.below(4) != 0 {
            Expr::Load(rng.below(operands as u64) as usize)
        } else {
            Expr::Const(pick(rng, &[0.0, -0.0, 1.0, -1.5, 0.25, 3.0, f32::INFINITY]))
        };
    }
    let sub = |rng: &mut Rng| Box::new(expr(rng, operands, depth - 1));
    match rng.below(4) {
        0 => {
            let op = UnaryOp::ALL[rng.below(UnaryOp::ALL.len() as u64) as usize];
            Expr::Unary(op, sub(rng))
        }
        1 => {
            let op = BinaryOp::ALL[rng.below(BinaryOp::ALL.len() as u64) as usize];
            Expr::Binary(op, sub(rng), sub(rng))
        }
        2 => {
            let op =
                [CompareOp::Lt, CompareOp::Le, CompareOp::Eq, CompareOp::Ne][rng.below(4) as usize];
            Expr::Compare(op, sub(rng), sub(rng))
        }
        _ => Expr::Select(sub(rng), sub(rng), sub(rng)),
    }
}

/// A layout over the iterators in `axes` (outermost first), row-major,
/// with a small offset and some slack at the end. Iterators not in
/// `axes` get stride 0.
fn layout(rng: &mut Rng, axes: &[usize], sizes: &[u64]) -> Layout {
    let mut strides = vec![0; sizes.len()];
    let mut step = 1;
    for &k in axes.iter().rev() {
        strides[k] = step;
        step *= sizes[k];
    }
    let offset = rng.below(3);
    let len = offset + step + rng.below(2);
    Layout::new(offset, strides, len)
}

/// The random case of `seed`.
pub fn kernel_case(seed: u64) -> KernelCase {
    let mut rng = Rng(seed | 1);
    let n = rng.below(5) as usize;
    let iterators: Vec<IterKind> = (0..n)
        .map(|_| {
            pick(
                &mut rng,
                &[IterKind::Parallel, IterKind::Parallel, IterKind::Reduction],
            )
        })
        .collect();
    let sizes: Vec<u64> = (0..n).map(|_| 1 + rng.below(4)).collect();
    let operand_count = rng.below(4) as usize;
    let body = expr(&mut rng, operand_count, 3);
    let accumulate = pick(
        &mut rng,
        &[
            Accumulate::Assign,
            Accumulate::Add,
            Accumulate::Mul,
            Accumulate::Max,
            Accumulate::Min,
        ],
    );
    let parallel: Vec<usize> = (0..n)
        .filter(|&k| iterators[k] == IterKind::Parallel)
        .collect();
    let result = layout(&mut rng, &parallel, &sizes);
    let mut operands = Vec::new();
    let mut data = Vec::new();
    for _ in 0..operand_count {
        // A random subset of the iterators, in a random order.
        let mut axes: Vec<usize> = (0..n).filter(|_| rng.below(4) != 0).collect();
        for i in (1..axes.len()).rev() {
            axes.swap(i, rng.below(i as u64 + 1) as usize);
        }
        let l = layout(&mut rng, &axes, &sizes);
        data.push(
            (0..l.len)
                .map(|_| match rng.below(40) {
                    0 => f32::NAN,
                    1 => f32::INFINITY,
                    2 => f32::NEG_INFINITY,
                    3 => -0.0,
                    _ => (rng.below(17) as f32 - 8.0) / 4.0,
                })
                .collect(),
        );
        operands.push(l);
    }
    let mut kernel = Kernel::new(iterators, operand_count, body, accumulate);
    // A third of the cases get an epilogue, drawn from a second generator
    // so that the rest of every case stays what its seed always gave: a
    // function of the accumulated value and of an extra operand that only
    // the parallel iterators move.
    let mut extra = Rng((seed ^ 0x5eed_e911_0600_0001).rotate_left(23) | 1);
    if extra.below(3) == 0 {
        let accumulated = expr(&mut extra, 1, 2).map_loads(&|_| Expr::Accumulated);
        let op =
            [BinaryOp::Add, BinaryOp::Mul, BinaryOp::Max, BinaryOp::Sub][extra.below(4) as usize];
        kernel.operands += 1;
        kernel.epilogue = Some(Expr::Binary(
            op,
            Box::new(accumulated),
            Box::new(Expr::Load(operand_count)),
        ));
        let l = layout(&mut extra, &parallel, &sizes);
        data.push(
            (0..l.len)
                .map(|_| (extra.below(17) as f32 - 8.0) / 4.0)
                .collect(),
        );
        operands.push(l);
    }
    KernelCase {
        kernel,
        launch: Launch::new(sizes, result, operands),
        operands: data,
    }
}

/// Random kernel cases.
pub fn kernel_cases() -> impl Strategy<Value = KernelCase> {
    any::<u64>().prop_map(kernel_case)
}

/// Whether `e` computes through a function whose last bits backends may
/// round differently (the scalar table's inexact functions, a division).
fn inexact(e: &Expr) -> bool {
    match e {
        Expr::Unary(op, _) if !op.exact() => true,
        Expr::Binary(BinaryOp::Div, _, _) => true,
        Expr::Unary(_, a) => inexact(a),
        Expr::Binary(_, a, b) | Expr::Compare(_, a, b) => inexact(a) || inexact(b),
        Expr::Select(c, a, b) => inexact(c) || inexact(a) || inexact(b),
        _ => false,
    }
}

/// Evaluates `e`, or `None` when any value along the way (the result
/// included) is a NaN or an infinity, or a comparison of two sides within
/// rounding of each other that went through an inexact function.
fn finite_eval(e: &Expr, loads: &[f32], acc: f32) -> Option<f32> {
    let v = match e {
        Expr::Load(_) | Expr::Const(_) | Expr::Accumulated => e.eval_at(loads, acc),
        Expr::Unary(op, a) => {
            Expr::Unary(*op, Box::new(Expr::Const(finite_eval(a, loads, acc)?))).eval(&[])
        }
        Expr::Binary(op, a, b) => Expr::Binary(
            *op,
            Box::new(Expr::Const(finite_eval(a, loads, acc)?)),
            Box::new(Expr::Const(finite_eval(b, loads, acc)?)),
        )
        .eval(&[]),
        Expr::Compare(op, a, b) => {
            let (x, y) = (finite_eval(a, loads, acc)?, finite_eval(b, loads, acc)?);
            // Two sides within rounding of each other, one of which went
            // through a function that backends round differently (an ulp
            // apart is within the tolerance): the comparison may come out
            // either way, so the element is not held to the CPU's.
            if (inexact(a) || inexact(b)) && (x - y).abs() <= 1e-4 * x.abs().max(y.abs()) {
                return None;
            }
            Expr::Compare(*op, Box::new(Expr::Const(x)), Box::new(Expr::Const(y))).eval(&[])
        }
        Expr::Select(c, a, b) => {
            let (c, a, b) = (
                finite_eval(c, loads, acc)?,
                finite_eval(a, loads, acc)?,
                finite_eval(b, loads, acc)?,
            );
            if c != 0.0 {
                a
            } else {
                b
            }
        }
        // Kinds added later: only the value itself is checked.
        _ => e.eval_at(loads, acc),
    };
    v.is_finite().then_some(v)
}

impl KernelCase {
    /// For each result element, whether every value computed for it (each
    /// operation of the body at each point, and each accumulation) is
    /// finite. WGSL lets drivers assume that no NaN or infinity occurs
    /// (and optimize `x - x` to 0, say), so a GPU is only held to the CPU's
    /// results where this holds.
    pub fn finite_elements(&self) -> Vec<bool> {
        let (kernel, launch) = (&self.kernel, &self.launch);
        let mut finite = vec![true; launch.result.len as usize];
        if launch.sizes.contains(&0) {
            return finite;
        }
        let n = kernel.iterators.len();
        let mut index = vec![0u64; n];
        let mut acc: std::collections::HashMap<u64, f32> = std::collections::HashMap::new();
        let mut at_element: std::collections::HashMap<u64, Vec<f32>> =
            std::collections::HashMap::new();
        loop {
            let at = |l: &Layout| {
                l.offset
                    + l.strides
                        .iter()
                        .zip(&index)
                        .map(|(s, i)| s * i)
                        .sum::<u64>()
            };
            let loads: Vec<f32> = launch
                .operands
                .iter()
                .zip(&self.operands)
                .map(|(l, d)| d[at(l) as usize])
                .collect();
            let element = at(&launch.result);
            // The epilogue's operands stay put along the reductions: the
            // loads at any point of the element serve it.
            at_element.entry(element).or_insert_with(|| loads.clone());
            let value = finite_eval(&kernel.body, &loads, f32::NAN);
            let before = *acc.entry(element).or_insert(kernel.accumulate.identity());
            let combined = value.map(|v| kernel.accumulate.combine(before, v));
            match combined {
                Some(c) if c.is_finite() => {
                    acc.insert(element, c);
                }
                _ => finite[element as usize] = false,
            }
            // Next point, row-major.
            let mut k = n;
            loop {
                if k == 0 {
                    // Each element's epilogue, on its accumulated value.
                    if let Some(epilogue) = &kernel.epilogue {
                        for (&element, &value) in &acc {
                            let loads = &at_element[&element];
                            if finite_eval(epilogue, loads, value).is_none() {
                                finite[element as usize] = false;
                            }
                        }
                    }
                    return finite;
                }
                k -= 1;
                index[k] += 1;
                if index[k] < launch.sizes[k] {
                    break;
                }
                index[k] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_case_is_a_valid_launch() {
        for seed in 0..2000 {
            let case = kernel_case(seed);
            case.launch
                .check_buffers(
                    &case.kernel,
                    case.launch.result.len,
                    case.operands.iter().map(|d| d.len() as u64),
                )
                .unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
    }

    #[test]
    fn most_result_elements_are_finite_and_so_compared() {
        let (mut finite, mut all) = (0, 0);
        for seed in 0..2000 {
            let mask = kernel_case(seed).finite_elements();
            finite += mask.iter().filter(|&&f| f).count();
            all += mask.len();
        }
        assert!(finite * 10 > all * 6, "{finite} of {all}");
    }

    #[test]
    fn non_finite_values_anywhere_mark_their_element() {
        let case = KernelCase {
            // x - x is 0 for finite x, NaN for an infinity.
            kernel: Kernel::new(
                vec![IterKind::Parallel],
                1,
                Expr::Binary(
                    BinaryOp::Sub,
                    Box::new(Expr::Load(0)),
                    Box::new(Expr::Load(0)),
                ),
                Accumulate::Assign,
            ),
            launch: Launch::new(
                vec![3],
                Layout::new(0, vec![1], 3),
                vec![Layout::new(0, vec![1], 3)],
            ),
            operands: vec![vec![1.0, f32::INFINITY, 2.0]],
        };
        assert_eq!(case.finite_elements(), vec![true, false, true]);
    }
}
