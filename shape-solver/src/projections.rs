//! Projections: how each operation's loop iterators index its tensors.
//!
//! For one operation, every axis of the result and of each operand gets a
//! slot; the operation's relations (broadcasting, composition, the einsum
//! spec) join slots into classes. Each class of size above 1 is one loop
//! iterator; a class with no result axis is a reduction. An operand axis of
//! size 1 that broadcasts against a larger one is indexed at 0 instead.
//!
//! The classes are built afresh for every operation from its solved shapes,
//! never from the solver's variables: two axes that another operation found
//! equal in size do not share an iterator here unless this operation
//! relates them (the specification's "contamination" concern).

use shape_core::spec::{AxisKind, RowVarName};
use shape_core::{IterKind, KnownDim, RowKind, SolvedShape};

use crate::graph::{GraphError, OpId, SolvedGraph};
use crate::ops::OpKind;

/// How one axis of a tensor is indexed by an operation's loop nest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AxisIndex {
    /// By loop iterator `n`.
    Iterator(usize),
    /// At a fixed position (0 on a broadcast size-1 axis).
    Fixed(u64),
    /// At the batch-slice index, given when the kernel runs.
    Slice,
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

/// The tensors of one operation, their axes numbered as slots.
struct Slots<'a> {
    shapes: Vec<&'a SolvedShape>,
    /// First slot of each tensor.
    base: Vec<usize>,
}

impl Slots<'_> {
    /// The slot of axis `j` of row `kind` of tensor `t`, with its size.
    fn slot(&self, t: usize, kind: RowKind, j: usize) -> (usize, u64) {
        let s = self.shapes[t];
        let before = match kind {
            RowKind::Batch => 0,
            RowKind::Output => s.batch.len(),
            RowKind::Input => s.batch.len() + s.output.len(),
        };
        (self.base[t] + before + j, s.row(kind)[j].size())
    }

    fn row(&self, t: usize, kind: RowKind) -> &[KnownDim] {
        self.shapes[t].row(kind)
    }
}

impl SolvedGraph {
    /// The projections of one operation.
    ///
    /// ```
    /// use shape_solver::{AxisIndex, Graph};
    /// use shape_core::IterKind;
    /// let mut g = Graph::new();
    /// let a = g.input("a", "2,3").unwrap();
    /// let b = g.input("b", "3,4").unwrap();
    /// let c = g.einsum("ij;jk=>ik", &[a, b]).unwrap();
    /// let s = g.solve().unwrap();
    /// let p = s.projections(g.producer(c).unwrap()).unwrap();
    /// assert_eq!(p.sizes, vec![2, 4, 3]);
    /// assert_eq!(p.kinds, vec![IterKind::Parallel, IterKind::Parallel, IterKind::Reduction]);
    /// assert_eq!(p.operands[0], vec![AxisIndex::Iterator(0), AxisIndex::Iterator(2)]);
    /// ```
    pub fn projections(&self, op: OpId) -> Result<Projections, GraphError> {
        let (kind, operands, result) = self
            .graph()
            .op(op)
            .ok_or(GraphError::UnknownOp(op.index()))?;
        let mut shapes = vec![self.shape(result)?];
        for &t in operands {
            shapes.push(self.shape(t)?);
        }
        let mut base = Vec::with_capacity(shapes.len());
        let mut total = 0;
        for s in &shapes {
            base.push(total);
            total += s.batch.len() + s.input.len() + s.output.len();
        }
        let slots = Slots { shapes, base };
        let mut classes = Classes {
            parent: (0..total).collect(),
        };
        let mut fixed: Vec<Option<AxisIndex>> = vec![None; total];

        // `cur >= subr`, aligned at the end.
        let mut broadcast =
            |classes: &mut Classes, cur: (usize, RowKind), subr: (usize, RowKind)| {
                let (lc, ls) = (
                    slots.row(cur.0, cur.1).len(),
                    slots.row(subr.0, subr.1).len(),
                );
                for i in 0..ls.min(lc) {
                    let (c, cn) = slots.slot(cur.0, cur.1, lc - 1 - i);
                    let (s, sn) = slots.slot(subr.0, subr.1, ls - 1 - i);
                    if sn == 1 && cn != 1 {
                        fixed[s] = Some(AxisIndex::Fixed(0));
                    } else {
                        classes.union(c, s);
                    }
                }
            };
        let equal =
            |classes: &mut Classes, a: (usize, RowKind), b: (usize, RowKind), skip_a: usize| {
                let (la, lb) = (slots.row(a.0, a.1).len(), slots.row(b.0, b.1).len());
                for j in 0..lb.min(la.saturating_sub(skip_a)) {
                    classes.union(
                        slots.slot(a.0, a.1, j + skip_a).0,
                        slots.slot(b.0, b.1, j).0,
                    );
                }
            };
        match kind {
            OpKind::Unary(_) | OpKind::Binary(_) | OpKind::Compose | OpKind::Transpose => {
                if let OpKind::Compose = kind {
                    broadcast(&mut classes, (1, RowKind::Input), (2, RowKind::Output));
                }
                for &(rk, operand, ok) in kind.result_bounds() {
                    broadcast(&mut classes, (0, rk), (operand, ok));
                }
            }
            OpKind::BatchSlice => {
                if !slots.row(1, RowKind::Batch).is_empty() {
                    fixed[slots.slot(1, RowKind::Batch, 0).0] = Some(AxisIndex::Slice);
                }
                equal(&mut classes, (1, RowKind::Batch), (0, RowKind::Batch), 1);
                equal(&mut classes, (1, RowKind::Input), (0, RowKind::Input), 0);
                equal(&mut classes, (1, RowKind::Output), (0, RowKind::Output), 0);
            }
            OpKind::Einsum(e) => {
                let spec = e.spec();
                let specs = std::iter::once(&spec.result).chain(&spec.operands);
                let mut keys: Vec<(EinsumKey<'_>, usize)> = Vec::new();
                for (t, s) in specs.enumerate() {
                    for kind in RowKind::ALL {
                        let len = slots.row(t, kind).len();
                        let (var, axes): (Option<&RowVarName>, &[_]) = match (s.row(kind), kind) {
                            (Some(r), _) => (r.row_var.as_ref().map(|(n, _)| n), &r.axes),
                            (None, RowKind::Batch) => (Some(&BATCH), &[]),
                            (None, _) => (None, &[]),
                        };
                        let spread = len.saturating_sub(axes.len());
                        for j in 0..len {
                            let key = if j < spread {
                                var.map(|v| EinsumKey::RowVar(v, j))
                            } else {
                                match &axes[j - spread].kind {
                                    AxisKind::Label(l) => Some(EinsumKey::Label(l)),
                                    _ => None,
                                }
                            };
                            let Some(key) = key else { continue };
                            let slot = slots.slot(t, kind, j).0;
                            match keys.iter().find(|(k, _)| *k == key) {
                                Some(&(_, first)) => classes.union(first, slot),
                                None => keys.push((key, slot)),
                            }
                        }
                    }
                }
            }
        }

        // One iterator per class of size above 1, in order of first use.
        let mut iter_of: Vec<Option<usize>> = vec![None; total];
        let mut sizes = Vec::new();
        let mut has_result = Vec::new();
        let mut index = vec![AxisIndex::Fixed(0); total];
        let result_slots = slots.base.get(1).copied().unwrap_or(total);
        for slot in 0..total {
            if let Some(f) = fixed[slot] {
                index[slot] = f;
                continue;
            }
            let t = slots.base.iter().rposition(|&b| b <= slot).unwrap_or(0);
            let size = axis_size(&slots, t, slot - slots.base[t]);
            if size == 1 {
                continue;
            }
            let root = classes.find(slot);
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
        let mut per_tensor = Vec::new();
        for t in 0..slots.shapes.len() {
            let end = slots.base.get(t + 1).copied().unwrap_or(total);
            per_tensor.push(index[slots.base[t]..end].to_vec());
        }
        let result = per_tensor.remove(0);
        Ok(Projections {
            sizes,
            kinds,
            result,
            operands: per_tensor,
        })
    }
}

static BATCH: RowVarName = RowVarName::OfKind(RowKind::Batch);

/// What lines an einsum axis up with others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EinsumKey<'a> {
    Label(&'a str),
    RowVar(&'a RowVarName, usize),
}

/// The size of the `j`-th memory-order axis of tensor `t`.
fn axis_size(slots: &Slots<'_>, t: usize, j: usize) -> u64 {
    let s = slots.shapes[t];
    let (b, o) = (s.batch.len(), s.output.len());
    let d = if j < b {
        &s.batch[j]
    } else if j < b + o {
        &s.output[j - b]
    } else {
        &s.input[j - b - o]
    };
    d.size()
}
