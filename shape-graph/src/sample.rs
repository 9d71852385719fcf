//! What a [`crate::registry::Sampler`] draws a random operation with: the
//! random program generator (in `shape-tests`) implements [`SampleCx`],
//! and each operation's entry says how to draw an application of it, so
//! adding an operation to the table adds it to the random programs too.

use shape_core::SolvedShape;

use crate::graph::{Graph, GraphError, TensorId};

/// A random program under construction, as a sampler sees it.
pub trait SampleCx {
    /// A random number in `0..n` (0 when `n` is 0).
    fn below(&mut self, n: u64) -> u64;

    /// A random tensor of the program so far.
    fn pick(&mut self) -> TensorId;

    /// The solved shape of a tensor of the program so far.
    fn shape(&mut self, t: TensorId) -> Result<SolvedShape, GraphError>;

    /// A new input of exactly this shape, with random data.
    fn input(
        &mut self,
        batch: &[u64],
        input: &[u64],
        output: &[u64],
    ) -> Result<TensorId, GraphError>;

    /// The graph, to apply operations to.
    fn graph(&mut self) -> &mut Graph;

    /// Records that a batch slice drops a leading axis of `size`, so that
    /// the run's slice index stays below it.
    fn slices_batch(&mut self, size: u64);

    /// A shape that broadcasts to `dims`: some axes 1, maybe fewer
    /// leading axes.
    fn broadcastable(&mut self, dims: &[u64]) -> Vec<u64> {
        let drop = self.below(dims.len() as u64 + 1) as usize;
        let mut out = Vec::with_capacity(dims.len() - drop);
        for &d in &dims[drop..] {
            out.push(if self.below(3) == 0 { 1 } else { d });
        }
        out
    }
}
