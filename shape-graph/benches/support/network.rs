//! The synthetic network both solver benchmarks build: a deep MLP whose
//! hidden sizes are mostly unknown, interleaved with attention-style
//! einsums.

use shape_graph::{Graph, GraphError, TensorId};

/// A network of at least `n` operations; returns it with its last tensor.
pub fn synthetic_network(n: usize) -> Result<(Graph, TensorId), GraphError> {
    network_over(n, false)
}

/// [`synthetic_network`] whose batch and sequence sizes are the run-time
/// sizes `b` and `s` instead of 32 and 16.
#[allow(dead_code)] // used by one of the two benchmarks that include this
pub fn symbolic_network(n: usize) -> Result<(Graph, TensorId), GraphError> {
    network_over(n, true)
}

fn network_over(n: usize, symbolic: bool) -> Result<(Graph, TensorId), GraphError> {
    let mut g = Graph::new();
    let mut h = if symbolic {
        g.run_time_size("b")?;
        g.run_time_size("s")?;
        g.input("x", "b,s|64")?
    } else {
        g.input("x", "32,16|64")?
    };
    let mut layer = 0;
    while g.num_ops() < n {
        // An MLP layer: the hidden size is given on the bias of every
        // fourth layer, and on the weight's output row of the others;
        // everything else (input rows, the other bias and weight rows) is
        // inferred. (A parameter's size may not be left to a default.)
        let (w, b) = if layer % 4 == 3 {
            (
                g.parameter(&format!("w{layer}"))?,
                g.parameter_with_spec(&format!("b{layer}"), "64")?,
            )
        } else {
            (
                g.parameter_with_spec(&format!("w{layer}"), "..i..->64")?,
                g.parameter(&format!("b{layer}"))?,
            )
        };
        let z = g.compose(w, h)?;
        let z = g.add(z, b)?;
        h = g.unary("relu", z)?;
        if layer % 4 == 3 {
            // An attention block over the sequence axis.
            let wq = g.parameter_with_spec(&format!("wq{layer}"), "..i..->4,16")?;
            let wk = g.parameter(&format!("wk{layer}"))?;
            let wv = g.parameter_with_spec(&format!("wv{layer}"), "..i..->4,16")?;
            let wo = g.parameter(&format!("wo{layer}"))?;
            let proj = "b,s|d;d->h,k=>b,s|h,k";
            let q = g.einsum(proj, &[h, wq])?;
            let k = g.einsum(proj, &[h, wk])?;
            let v = g.einsum(proj, &[h, wv])?;
            let s = g.einsum("b,s|h,k;b,t|h,k=>b|h,s,t", &[q, k])?;
            let p = g.unary("exp", s)?;
            let m = g.einsum("b|h,s,t;b,t|h,k=>b,s|h,k", &[p, v])?;
            let o = g.einsum("b,s|h,k;h,k->d=>b,s|d", &[m, wo])?;
            h = g.add(o, h)?;
        }
        layer += 1;
    }
    Ok((g, h))
}

/// Frees a solved network outside the timed part of a benchmark round,
/// including the work the allocator defers from those frees.
///
/// Why: glibc's malloc parks small freed blocks in "fast bins" and merges
/// them only when a later request for a large block comes in; the first
/// such request of the next round (an environment chunk) then walks every
/// block the previous network freed, which at 10,000 operations is tens of
/// thousands of cache misses charged to building the next network. A
/// request of that size here settles it while the clock is stopped. With
/// other allocators this is one allocation and one free.
pub fn free_untimed<T>(network: T) {
    drop(network);
    drop(std::hint::black_box(Vec::<u8>::with_capacity(4096)));
}
