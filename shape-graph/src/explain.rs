//! Why a tensor has its shape, as text: every axis's size with where it
//! came from and the constraints that carried it there.

use std::fmt;

use shape_core::{RowKind, SolvedShape};
use shape_solver::{AxisFromEnd, Origin, Provenance};

use crate::graph::{GraphError, SolvedGraph, TensorId};

/// Where every axis of a tensor's shape came from
/// ([`SolvedGraph::explain_tensor`]). Its `Display` is what `shapec infer
/// --explain` prints, without the line numbers only a program's text has.
///
/// ```
/// use shape_graph::Scope;
/// let g = Scope::new();
/// let x = g.input("x", "8|784")?;
/// let w = g.parameter("w")?;
/// let _y = w.compose(&x)?.require("...|->10")?;
/// let solved = g.solve()?;
/// let text = solved.explain_tensor(w.id())?.to_string();
/// assert!(text.starts_with("w: |784->10\n"), "{text}");
/// assert!(text.contains("input axis 0 = 784: from the declared shape \"8|784\" of `x`"), "{text}");
/// # Ok::<(), shape_graph::GraphError>(())
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct Explanation {
    /// The tensor's name.
    pub name: String,
    /// Its shape, with run-time sizes as symbols.
    pub shape: SolvedShape,
    /// Each axis, in the order batch, input, output.
    pub axes: Vec<AxisExplanation>,
}

/// Where one axis's size came from.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct AxisExplanation {
    /// The row.
    pub kind: RowKind,
    /// The axis within the row.
    pub axis: usize,
    /// The size, its source and the constraints that carried it.
    pub provenance: Provenance,
}

impl Explanation {
    /// Writes the explanation, with `at(origin, axis)` after each place
    /// (a front end's line numbers; nothing for [`fmt::Display`]).
    pub fn write_with(
        &self,
        f: &mut dyn fmt::Write,
        at: &dyn Fn(&Origin, Option<AxisFromEnd>) -> String,
    ) -> fmt::Result {
        writeln!(f, "{}: {}", self.name, self.shape)?;
        if self.axes.is_empty() {
            return f.write_str("  (no axes)\n");
        }
        for a in &self.axes {
            let p = &a.provenance;
            let place = match p.source_axis {
                Some(axis) => format!("{} at {axis}", p.source),
                None => p.source.to_string(),
            };
            writeln!(
                f,
                "  {} axis {} = {}: from {place}{}",
                a.kind,
                a.axis,
                p.value,
                at(&p.source, p.source_axis)
            )?;
            for via in p.via.iter().filter(|via| ***via != *p.source) {
                writeln!(f, "      via {via}{}", at(via, None))?;
            }
        }
        Ok(())
    }
}

impl fmt::Display for Explanation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_with(f, &|_, _| String::new())
    }
}

impl SolvedGraph {
    /// Where every axis of tensor `t`'s shape came from (see
    /// [`Explanation`]); [`SolvedGraph::explain`] for one axis.
    pub fn explain_tensor(&self, t: TensorId) -> Result<Explanation, GraphError> {
        let shape = self.symbolic_shape(t)?;
        let mut axes = Vec::new();
        for kind in RowKind::ALL {
            for axis in 0..shape.row(kind).len() {
                axes.push(AxisExplanation {
                    kind,
                    axis,
                    provenance: self.explain(t, kind, axis)?,
                });
            }
        }
        Ok(Explanation {
            name: self.graph().name(t)?.to_string(),
            shape,
            axes,
        })
    }
}
