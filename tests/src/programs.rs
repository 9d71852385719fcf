//! Random well-shaped programs with random data, for differential tests
//! of backends: every generated program solves, and every operation in
//! it can be lowered to a kernel.

use std::collections::HashMap;

use proptest::prelude::*;
use shape_core::SolvedShape;
use shape_solver::{Graph, TensorId};

/// A generated program: the graph, the data of its inputs, and every
/// tensor an operation computes.
#[derive(Clone, Debug)]
pub struct Program {
    /// The graph.
    pub graph: Graph,
    /// Values of every input, by name.
    pub data: HashMap<String, Vec<f32>>,
    /// Every operation's result.
    pub results: Vec<TensorId>,
    /// The batch index batch slices take.
    pub slice: u64,
}

/// A small deterministic generator, so a program is a pure function of
/// the seeds proptest shrinks.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn dims_text(dims: &[u64]) -> String {
    dims.iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

fn spec_of(batch: &[u64], input: &[u64], output: &[u64]) -> String {
    format!(
        "{} |{} ->{} ,",
        dims_text(batch),
        dims_text(input),
        dims_text(output)
    )
}

fn sizes(s: &SolvedShape, kind: shape_core::RowKind) -> Vec<u64> {
    s.sizes(kind)
}

struct Builder {
    g: Graph,
    data: HashMap<String, Vec<f32>>,
    results: Vec<TensorId>,
    pool: Vec<TensorId>,
    rng: Rng,
    /// The smallest leading batch size any batch slice drops.
    slice_bound: Option<u64>,
}

impl Builder {
    fn input(&mut self, batch: &[u64], input: &[u64], output: &[u64]) -> TensorId {
        let name = format!("in{}", self.data.len());
        let t = self
            .g
            .input(&name, &spec_of(batch, input, output))
            .expect("a ground shape");
        let n: u64 = batch.iter().chain(input).chain(output).product();
        let values = (0..n)
            .map(|_| (self.rng.below(17) as f32 - 8.0) / 4.0)
            .collect();
        self.data.insert(name, values);
        self.pool.push(t);
        t
    }

    fn shape(&self, t: TensorId) -> SolvedShape {
        self.g
            .solve()
            .expect("generated programs solve")
            .shape(t)
            .expect("known")
            .clone()
    }

    /// A shape that broadcasts to `dims`: some axes set to 1, maybe
    /// fewer leading axes.
    fn broadcastable(&mut self, dims: &[u64]) -> Vec<u64> {
        let drop = self.rng.below(dims.len() as u64 + 1) as usize;
        dims[drop..]
            .iter()
            .map(|&d| if self.rng.below(3) == 0 { 1 } else { d })
            .collect()
    }

    fn push(&mut self, t: TensorId) {
        self.results.push(t);
        self.pool.push(t);
    }

    fn step(&mut self) {
        let t = self.pool[self.rng.below(self.pool.len() as u64) as usize];
        let s = self.shape(t);
        let (b, i, o) = (
            sizes(&s, shape_core::RowKind::Batch),
            sizes(&s, shape_core::RowKind::Input),
            sizes(&s, shape_core::RowKind::Output),
        );
        let labels = |n: usize, from: u8| {
            (0..n)
                .map(|k| ((from + k as u8) as char).to_string())
                .collect::<Vec<_>>()
        };
        let ok = match self.rng.below(7) {
            0 => {
                let f = ["relu", "neg", "exp", "id"][self.rng.below(4) as usize];
                self.g.unary(f, t)
            }
            1 => {
                let (bb, bi, bo) = (
                    self.broadcastable(&b),
                    self.broadcastable(&i),
                    self.broadcastable(&o),
                );
                let other = self.input(&bb, &bi, &bo);
                let f = ["add", "mul", "sub", "max"][self.rng.below(4) as usize];
                if self.rng.below(2) == 0 {
                    self.g.binary(f, t, other)
                } else {
                    self.g.binary(f, other, t)
                }
            }
            2 => {
                // Compose with a fresh matrix consuming t's outputs.
                let k = 1 + self.rng.below(3);
                let w = self.input(&[], &o, &[k]);
                self.g.compose(w, t)
            }
            3 if !o.is_empty() => {
                // Reverse the output axes, or sum the last one.
                let ls = labels(o.len(), b'a');
                let mut rev = ls.clone();
                rev.reverse();
                let reduced = &ls[..ls.len() - 1];
                let result = if self.rng.below(2) == 0 {
                    rev.join(",")
                } else {
                    reduced.join(",")
                };
                let bl = labels(b.len(), b'm').join(",");
                let il = labels(i.len(), b'u').join(",");
                self.g.permute(
                    &format!("{bl}|{il}->{}=>{bl}|{il}->{result},", ls.join(",")),
                    t,
                )
            }
            4 if !o.is_empty() => {
                // Contract the last output axis with a fresh vector.
                let last = *o.last().expect("non-empty");
                let v = self.input(&[], &[], &[last]);
                let ls = labels(o.len(), b'a');
                let bl = labels(b.len(), b'm').join(",");
                let il = labels(i.len(), b'u').join(",");
                let keep = ls[..ls.len() - 1].join(",");
                let spec = format!(
                    "{bl}|{il}->{};{}=>{bl}|{il}->{keep},",
                    ls.join(","),
                    ls[ls.len() - 1]
                );
                self.g.einsum(&spec, &[t, v])
            }
            5 if !b.is_empty() => {
                // The slice index must exist in every sliced axis.
                self.slice_bound = Some(self.slice_bound.map_or(b[0], |m| m.min(b[0])));
                self.g.batch_slice(t)
            }
            6 => self.g.transpose(t),
            _ => self.g.unary("relu", t),
        };
        let r = ok.expect("generated operations are well-shaped");
        self.push(r);
    }
}

/// A random program of `steps` operations.
pub fn program(seed: u64, steps: usize) -> Program {
    let mut b = Builder {
        g: Graph::new(),
        data: HashMap::new(),
        results: Vec::new(),
        pool: Vec::new(),
        rng: Rng(seed | 1),
        slice_bound: None,
    };
    let dims = |rng: &mut Rng, max: u64| -> Vec<u64> {
        (0..rng.below(max + 1)).map(|_| 1 + rng.below(4)).collect()
    };
    let (bb, bi, bo) = (
        dims(&mut b.rng, 2),
        dims(&mut b.rng, 1),
        dims(&mut b.rng, 2),
    );
    b.input(&bb, &bi, &bo);
    for _ in 0..steps {
        b.step();
    }
    let slice = b.slice_bound.map_or(0, |n| b.rng.below(n));
    Program {
        graph: b.g,
        data: b.data,
        results: b.results,
        slice,
    }
}

/// Random programs of 1 to `max_steps` operations.
pub fn programs(max_steps: usize) -> impl Strategy<Value = Program> {
    (any::<u64>(), 1..=max_steps).prop_map(|(seed, steps)| program(seed, steps))
}
