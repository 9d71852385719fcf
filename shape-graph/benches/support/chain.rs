//! Chains of `k` identity permutes (issue 10, finding 4): the size that
//! fixes them all given first or last, a star of permutes of one tensor,
//! and a chain over an open batch row. With the size given last, every
//! intermediate size is a chain of variables bound to each other that ends
//! at the fixed one: look-ups that walk such chains without shortening
//! them made inference quadratic.

use shape_graph::{Graph, GraphError, TensorId};

/// Which chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chain {
    /// `require x: 5` on the parameter, before the chain.
    FactFirst,
    /// `require h_k: 5` on the chain's end, after it.
    FactLast,
    /// Every permute reads `x` (a star, not a chain); the size last.
    Star,
    /// A chain over an input with open batch axes (`..b..|i`), each
    /// permute keeping them (`...|i=>...|i`); the batch axis last.
    BatchLast,
    /// A chain of rotations through leading flanks
    /// (`a, ..m.., b=>b, ..m.., a`) over an input whose middle nothing
    /// gives, so every flank waits for finalization (issue 13). Two
    /// rotations per step, so that the ends are back in place.
    FlanksOpen,
}

impl Chain {
    pub const ALL: [Chain; 5] = [
        Chain::FactFirst,
        Chain::FactLast,
        Chain::Star,
        Chain::BatchLast,
        Chain::FlanksOpen,
    ];

    /// The shape every tensor of the chain solves to.
    pub fn shape(self) -> &'static str {
        match self {
            Chain::BatchLast => "2|->5",
            Chain::FlanksOpen => "|->3, 7",
            _ => "|->5",
        }
    }
}

/// The chain of `k` permutes, with its first and last tensors.
pub fn chain(k: usize, which: Chain) -> Result<(Graph, TensorId, TensorId), GraphError> {
    let mut g = Graph::new();
    let x = match which {
        Chain::BatchLast => g.input("x", "..b..|i")?,
        Chain::FlanksOpen => g.input("x", "3, ..q.., 7")?,
        _ => g.parameter("x")?,
    };
    if which == Chain::FactFirst {
        g.require(x, "5")?;
    }
    let mut h = x;
    for _ in 0..k {
        h = match which {
            Chain::Star => g.permute("i=>i", x)?,
            Chain::BatchLast => g.permute("...|i=>...|i", h)?,
            Chain::FlanksOpen => {
                let swapped = g.permute("a, ..m.., b=>b, ..m.., a", h)?;
                g.permute("a, ..m.., b=>b, ..m.., a", swapped)?
            }
            _ => g.permute("i=>i", h)?,
        };
    }
    match which {
        Chain::FactLast | Chain::Star => g.require(h, "5")?,
        Chain::BatchLast => g.require(h, "2|5")?,
        Chain::FactFirst | Chain::FlanksOpen => {}
    }
    Ok((g, x, h))
}
