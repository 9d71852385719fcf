//! Projections: how an operation's loop iterators index its tensors.
//!
//! For one operation, every axis of the result and of each operand gets a
//! slot; the operation ([`crate::Operation::project`]) ties slots together
//! through a [`ProjectionBuilder`]. Each class of tied slots of size above
//! 1 is one loop iterator; a class with no result axis is a reduction. An
//! operand axis of size 1 that broadcasts against a larger one is indexed
//! at 0 instead.
//!
//! The classes are built afresh for every operation from its solved shapes,
//! never from the solver's variables: two axes that another operation found
//! equal in size do not share an iterator here unless this operation
//! relates them (the specification's "contamination" concern).

use shape_core::{IterKind, KnownDim, RowKind, SolvedShape};

use shape_solver::RowSite;

/// How one axis of a tensor is indexed by an operation's loop nest.
///
/// `#[non_exhaustive]`: concatenated indices are an addition still to come.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum AxisIndex {
    /// By loop iterator `n`.
    Iterator(usize),
    /// At a fixed position (0 on a broadcast size-1 axis).
    Fixed(u64),
    /// At the batch-slice index, given when the kernel runs.
    Slice,
    /// At `stride × over + dilation × kernel`, a convolution's input
    /// (iterators `over` and `kernel`; `None` for an axis of one element).
    /// With `padded`, the position is in a copy of the axis padded at both
    /// ends ([`Projections::padding`]), which the lowering makes.
    Affine {
        /// How far the window moves per output element.
        stride: u64,
        /// The output iterator.
        over: Option<usize>,
        /// The spacing of the kernel's taps.
        dilation: u64,
        /// The kernel iterator.
        kernel: Option<usize>,
        /// Whether the axis is read through a padded copy.
        padded: bool,
    },
}

impl AxisIndex {
    /// An affine index's two terms, `(factor, iterator)` for the output and
    /// for the kernel (`None` for an axis of one element); `None` for any
    /// other index.
    pub fn affine_terms(&self) -> Option<[(u64, Option<usize>); 2]> {
        match *self {
            AxisIndex::Affine {
                stride,
                over,
                dilation,
                kernel,
                ..
            } => Some([(stride, over), (dilation, kernel)]),
            _ => None,
        }
    }
}

/// The kernel of an affine axis: another tensor's axis, or a number of
/// taps that only the affine axis names (pooling, `k:3`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AffineKernel {
    /// Tied to this axis's iterator.
    Axis(AxisSite),
    /// An iterator of its own, over this many taps.
    Taps(u64),
}

/// An operation's loop nest and how it indexes each tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Projections {
    /// The size of each iterator (the product space), outermost first.
    pub sizes: Vec<u64>,
    /// Whether each iterator spans the result or is reduced.
    pub kinds: Vec<IterKind>,
    /// The result's axes in memory order (batch, output, input).
    pub result: Vec<AxisIndex>,
    /// Each operand's axes in memory order.
    pub operands: Vec<Vec<AxisIndex>>,
}

impl Projections {
    /// How `index` reads in listings: `i2` for a parallel iterator, `r2`
    /// for a reduced one, a number for a fixed index, `s` for the
    /// batch-slice index.
    pub fn index_text(&self, index: &AxisIndex) -> String {
        match index {
            AxisIndex::Iterator(i) => match self.kinds.get(*i) {
                Some(IterKind::Reduction) => format!("r{i}"),
                _ => format!("i{i}"),
            },
            AxisIndex::Fixed(k) => k.to_string(),
            AxisIndex::Slice => "s".to_string(),
            AxisIndex::Affine { padded, .. } => {
                let terms: Vec<String> = (index.affine_terms().into_iter().flatten())
                    .filter_map(|(c, it)| {
                        let name = self.index_text(&AxisIndex::Iterator(it?));
                        Some(if c == 1 { name } else { format!("{c}*{name}") })
                    })
                    .collect();
                let sum = if terms.is_empty() {
                    "0".to_string()
                } else {
                    terms.join("+")
                };
                if *padded {
                    format!("pad({sum})")
                } else {
                    sum
                }
            }
        }
    }

    /// For a padded affine axis `axis` (memory order) of an operand of
    /// `len` elements along it: the elements added before and after, as
    /// OCANNL splits them (for a kernel spanning
    /// `e = dilation × (taps − 1) + 1` elements, `e / 2` before, and after
    /// as many as the last window needs). `None` for any other axis, and
    /// where nothing is added (one tap, windows inside the axis), which
    /// reads as unpadded.
    pub fn padding(&self, index: &AxisIndex, len: u64) -> Option<(u64, u64)> {
        let AxisIndex::Affine {
            stride,
            over,
            dilation,
            kernel,
            padded: true,
        } = index
        else {
            return None;
        };
        let size = |it: &Option<usize>| it.and_then(|i| self.sizes.get(i).copied()).unwrap_or(1);
        let span = dilation.saturating_mul(size(kernel) - 1).saturating_add(1);
        let before = span / 2;
        let reach = stride.saturating_mul(size(over) - 1).saturating_add(span);
        let after = reach.saturating_sub(before.saturating_add(len));
        (before > 0 || after > 0).then_some((before, after))
    }

    /// Whether some iterator is reduced.
    pub fn has_reduction(&self) -> bool {
        self.kinds.contains(&IterKind::Reduction)
    }
}

/// One axis of one row of an operation's tensors, counted from the left.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct AxisSite {
    /// The row.
    pub row: RowSite,
    /// The axis, from the left (0 is the first).
    pub axis: usize,
}

/// Union-find over axis slots.
struct Classes {
    parent: Vec<usize>,
}

impl Classes {
    fn find(&mut self, mut x: usize) -> usize {
        while self.parent[x] != x {
            self.parent[x] = self.parent[self.parent[x]];
            x = self.parent[x];
        }
        x
    }

    fn union(&mut self, a: usize, b: usize) {
        let (a, b) = (self.find(a), self.find(b));
        if a != b {
            self.parent[a.max(b)] = a.min(b);
        }
    }
}

/// Ties the axes of one operation's tensors into loop iterators; what an
/// [`crate::Operation::project`] works with.
///
/// Slots that are never tied to a slot of size above 1 and never fixed get
/// an iterator of their own when their size is above 1 (a result axis that
/// no operand has), and index 0 when their size is 1.
pub struct ProjectionBuilder<'a> {
    shapes: Vec<&'a SolvedShape>,
    /// First slot of each tensor.
    base: Vec<usize>,
    classes: Classes,
    fixed: Vec<Option<AxisIndex>>,
    /// Affine axes: slot, stride, output slot, dilation, kernel, padded.
    affines: Vec<(usize, u64, usize, u64, Option<AffineKernel>, bool)>,
    /// Slots tied as equal (not broadcast): a ragged run checks their rows
    /// for equal lengths.
    ties: Vec<usize>,
}

impl<'a> ProjectionBuilder<'a> {
    /// A builder for the tensors `shapes` (the result first).
    pub(crate) fn new(shapes: Vec<&'a SolvedShape>) -> ProjectionBuilder<'a> {
        let mut base = Vec::with_capacity(shapes.len());
        let mut total = 0;
        for s in &shapes {
            base.push(total);
            total += s.batch.len() + s.input.len() + s.output.len();
        }
        ProjectionBuilder {
            shapes,
            base,
            classes: Classes {
                parent: (0..total).collect(),
            },
            fixed: vec![None; total],
            affines: Vec::new(),
            ties: Vec::new(),
        }
    }

    /// The axis at `at` is a convolution's input, indexed by
    /// `stride × over + dilation × kernel` (see [`AxisIndex::Affine`]).
    pub fn affine(
        &mut self,
        at: AxisSite,
        stride: u64,
        over: AxisSite,
        dilation: u64,
        kernel: Option<AffineKernel>,
        padded: bool,
    ) {
        let slot = self.slot(at).0;
        let over = self.slot(over).0;
        // Placed in `finish`, once the iterators are known.
        self.fixed[slot] = Some(AxisIndex::Fixed(0));
        self.affines
            .push((slot, stride, over, dilation, kernel, padded));
    }

    /// The solved shape of the tensor at `position` (0: the result).
    pub fn shape(&self, position: usize) -> &SolvedShape {
        self.shapes[position]
    }

    /// The number of operands.
    pub fn operands(&self) -> usize {
        self.shapes.len() - 1
    }

    fn row(&self, site: RowSite) -> &[KnownDim] {
        self.shapes[site.position as usize].row(site.kind)
    }

    /// The number of axes of a row.
    pub fn row_len(&self, site: RowSite) -> usize {
        self.row(site).len()
    }

    /// The slot of an axis, with its size.
    fn slot(&self, at: AxisSite) -> (usize, u64) {
        let t = at.row.position as usize;
        let s = self.shapes[t];
        let before = match at.row.kind {
            RowKind::Batch => 0,
            RowKind::Output => s.batch.len(),
            RowKind::Input => s.batch.len() + s.output.len(),
        };
        (
            self.base[t] + before + at.axis,
            s.row(at.row.kind)[at.axis].size(),
        )
    }

    /// The two axes share an iterator.
    pub fn tie(&mut self, a: AxisSite, b: AxisSite) {
        let (a, b) = (self.slot(a).0, self.slot(b).0);
        self.classes.union(a, b);
        self.ties.extend([a, b]);
    }

    /// The axis is indexed by `index` rather than by an iterator.
    pub fn fix(&mut self, at: AxisSite, index: AxisIndex) {
        let slot = self.slot(at).0;
        self.fixed[slot] = Some(index);
    }

    /// `cur` broadcasts from `subr`, aligned at their last axes: equal
    /// sizes share an iterator, and a size-1 axis of `subr` against a
    /// larger one of `cur` is indexed at 0.
    pub fn broadcast(&mut self, cur: RowSite, subr: RowSite) {
        let (lc, ls) = (self.row_len(cur), self.row_len(subr));
        for i in 0..ls.min(lc) {
            let c = AxisSite {
                row: cur,
                axis: lc - 1 - i,
            };
            let s = AxisSite {
                row: subr,
                axis: ls - 1 - i,
            };
            let (cs, cn) = self.slot(c);
            let (ss, sn) = self.slot(s);
            if sn == 1 && cn != 1 {
                self.fixed[ss] = Some(AxisIndex::Fixed(0));
            } else {
                self.classes.union(cs, ss);
            }
        }
    }

    /// Axis `skip_a + j` of `a` and axis `j` of `b` share an iterator, for
    /// every `j` both rows have.
    pub fn equal_from(&mut self, a: RowSite, skip_a: usize, b: RowSite) {
        let (la, lb) = (self.row_len(a), self.row_len(b));
        for j in 0..lb.min(la.saturating_sub(skip_a)) {
            self.tie(
                AxisSite {
                    row: a,
                    axis: j + skip_a,
                },
                AxisSite { row: b, axis: j },
            );
        }
    }

    /// The pointwise rule: every row of the result broadcasts from the same
    /// row of every operand.
    pub fn broadcast_all(&mut self) {
        for kind in RowKind::ALL {
            for operand in 0..self.operands() {
                self.broadcast(RowSite::result(kind), RowSite::operand(operand, kind));
            }
        }
    }

    /// One iterator per class of size above 1, in order of first use.
    /// For every slot (the tensors' axes in memory order, tensor after
    /// tensor, the result first): its class (tied slots share one, as do
    /// axes a broadcast lines up unless one side is size 1 against a
    /// larger one), and whether it was tied as equal; with the
    /// projections.
    pub(crate) fn finish_with_classes(mut self) -> (Projections, Vec<(usize, bool)>) {
        let total = self.fixed.len();
        let mut tied = vec![false; total];
        for &slot in &self.ties {
            tied[slot] = true;
        }
        let classes = (0..total)
            .map(|slot| (self.classes.find(slot), tied[slot]))
            .collect();
        (self.finish(), classes)
    }

    pub(crate) fn finish(mut self) -> Projections {
        let total = self.fixed.len();
        let mut iter_of: Vec<Option<usize>> = vec![None; total];
        let mut sizes = Vec::new();
        let mut has_result = Vec::new();
        let mut index = vec![AxisIndex::Fixed(0); total];
        let result_slots = self.base.get(1).copied().unwrap_or(total);
        let mut t = 0;
        for (slot, fixed) in self.fixed.iter().enumerate() {
            while t + 1 < self.base.len() && self.base[t + 1] <= slot {
                t += 1;
            }
            if let Some(f) = fixed {
                index[slot] = *f;
                continue;
            }
            let size = memory_axis(self.shapes[t], slot - self.base[t]).size();
            if size == 1 {
                continue;
            }
            let root = self.classes.find(slot);
            let it = *iter_of[root].get_or_insert_with(|| {
                sizes.push(size);
                has_result.push(false);
                sizes.len() - 1
            });
            if slot < result_slots {
                has_result[it] = true;
            }
            index[slot] = AxisIndex::Iterator(it);
        }
        // Affine axes, from the iterators of their output and kernel axes;
        // a kernel only the affine axis names gets a reduction of its own.
        for &(slot, stride, over, dilation, kernel, padded) in &std::mem::take(&mut self.affines) {
            let iterator = |index: &AxisIndex| match index {
                AxisIndex::Iterator(i) => Some(*i),
                _ => None,
            };
            let kernel = match kernel {
                None => None,
                Some(AffineKernel::Axis(site)) => iterator(&index[self.slot(site).0]),
                Some(AffineKernel::Taps(n)) if n > 1 => {
                    sizes.push(n);
                    has_result.push(false);
                    Some(sizes.len() - 1)
                }
                Some(AffineKernel::Taps(_)) => None,
            };
            index[slot] = AxisIndex::Affine {
                stride,
                over: iterator(&index[over]),
                dilation,
                kernel,
                padded,
            };
        }
        let kinds = has_result
            .iter()
            .map(|&r| {
                if r {
                    IterKind::Parallel
                } else {
                    IterKind::Reduction
                }
            })
            .collect();
        let mut per_tensor: Vec<Vec<AxisIndex>> = (0..self.shapes.len())
            .map(|t| {
                let end = self.base.get(t + 1).copied().unwrap_or(total);
                index[self.base[t]..end].to_vec()
            })
            .collect();
        let result = per_tensor.remove(0);
        Projections {
            sizes,
            kinds,
            result,
            operands: per_tensor,
        }
    }
}

/// The `j`-th axis of a shape in memory order (batch, output, input).
fn memory_axis(s: &SolvedShape, j: usize) -> &KnownDim {
    let (b, o) = (s.batch.len(), s.output.len());
    if j < b {
        &s.batch[j]
    } else if j < b + o {
        &s.output[j - b]
    } else {
        &s.input[j - b - o]
    }
}
