//! How a run goes: fusion and the lowering's options.

use shape_graph::LowerOptions;

/// How a run goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunOptions {
    /// The batch index that batch slices take.
    pub slice: u64,
    /// Whether planning leaves every operation its own kernels (no
    /// fusion of pointwise chains; see [`RunGraph::plan`](crate::RunGraph::plan)).
    pub unfused: bool,
}

impl RunOptions {
    /// These options without fusion: every operation runs its own
    /// kernels and writes its result.
    pub fn unfused(mut self) -> RunOptions {
        self.unfused = true;
        self
    }

    /// These options with batch slices taking index `slice`.
    pub fn with_slice(mut self, slice: u64) -> RunOptions {
        self.slice = slice;
        self
    }

    /// What the run's lowerings take from these options.
    pub fn lowering(&self) -> LowerOptions {
        LowerOptions::default().with_slice(self.slice)
    }
}
