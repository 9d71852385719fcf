//! Run-time sizes: declaring them, reading symbolic shapes, and binding
//! values to them.
//!
//! A graph solved once with run-time sizes (`size b` alone in the text
//! language, [`Graph::run_time_size`] here) keeps them as symbols in every
//! shape, with the guards inference could not decide
//! ([`shape_solver::guard`]). [`SolvedGraph::bind`] gives the sizes values,
//! checks the guards and the bounds stated on the sizes, and returns a
//! graph whose shapes are all numbers, ready to lower and run. Binding
//! solves nothing: it substitutes, and costs a pass over the guards plus
//! one over each shape read.
//!
//! ```
//! use shape_graph::Graph;
//! let mut g = Graph::new();
//! let b = g.run_time_size("b").unwrap();
//! let x = g.input("x", "b|8").unwrap();
//! let w = g.parameter_with_spec("w", "8->10").unwrap();
//! let y = g.compose(w, x).unwrap();
//! let solved = g.solve().unwrap();
//! assert_eq!(solved.symbolic_shape(y).unwrap().to_string(), "b|->10");
//! for n in [1, 4, 32] {
//!     let at = solved.bind(&[(b, n)]).unwrap();
//!     assert_eq!(at.shape(y).unwrap().to_string(), format!("{n}|->10"));
//! }
//! assert_eq!(g.solves(), 1);
//! ```

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use shape_core::{Dim, KnownDim, RowKind, Size, SolvedShape, SymSize};

use crate::graph::{Graph, GraphError, SizeId, SolvedGraph, TensorId, SHAPE_BLOCK};
use shape_solver::guard::{GuardCheck, SizeGuard};
use shape_solver::TensorRef;

/// The values given to a graph's run-time sizes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct BoundSizes {
    values: HashMap<Arc<str>, u64>,
    /// In the graph's order of the sizes, for reports.
    order: Vec<(Arc<str>, u64)>,
}

impl Graph {
    /// Declares `name` a size known only at run time (`size b` alone in
    /// the text language): specs that write `name` use it, inference keeps
    /// it as a symbol in every shape, and [`SolvedGraph::bind`] gives it a
    /// value. It is at least 1, and bounds stated on it
    /// ([`Graph::bound_size`]) are checked when it is bound.
    pub fn run_time_size(&mut self, name: &str) -> Result<SizeId, GraphError> {
        let s = self.size(name);
        let (name, v) = self.size_var(s)?;
        // Numbered like every size statement, repeated or not.
        let why = self.size_origin(name.clone(), "(known at run time)".to_string());
        if self.run_time_sizes.contains(&s) {
            return Ok(s);
        }
        let symbol = KnownDim::symbolic(SymSize::symbol(&name));
        self.equal_sizes(Dim::Var(v), Dim::Known(symbol), why)?;
        self.run_time_sizes.push_back(s);
        Ok(s)
    }

    /// The run-time sizes, in order of declaration.
    pub fn run_time_sizes(&self) -> impl Iterator<Item = (SizeId, &str)> {
        self.run_time_sizes
            .iter()
            .filter_map(|&s| self.sizes().nth(s.index()).map(|(_, name)| (s, name)))
    }

    /// How many times this graph, or a clone of it, has been solved:
    /// binding and running a solved graph at other sizes solves nothing.
    pub fn solves(&self) -> u64 {
        self.solves.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl SolvedGraph {
    /// The tensor's shape as solved, run-time sizes as symbols (`b|->10`),
    /// whether or not the graph is bound: for showing and inspecting.
    /// Lowering reads [`SolvedGraph::shape`], which has numbers only.
    pub fn symbolic_shape(&self, t: TensorId) -> Result<SolvedShape, GraphError> {
        let rows = self.graph.tensor(t)?.shape();
        Ok(SolvedShape {
            batch: self.solution.row(&rows.batch)?,
            input: self.solution.row(&rows.input)?,
            output: self.solution.row(&rows.output)?,
        })
    }

    /// `shape` with the bound values of its run-time sizes.
    pub(crate) fn bind_shape(
        &self,
        t: TensorId,
        shape: SolvedShape,
    ) -> Result<SolvedShape, GraphError> {
        let symbolic = |row: &[KnownDim]| row.iter().any(|d| d.symbolic_size().is_some());
        if !RowKind::ALL.iter().any(|&k| symbolic(shape.row(k))) {
            return Ok(shape);
        }
        let bind_row = |row: Vec<KnownDim>| -> Result<Vec<KnownDim>, GraphError> {
            row.into_iter()
                .map(|d| match d.symbolic_size() {
                    None => Ok(d),
                    Some(sym) => {
                        let n = self
                            .eval_size(sym)
                            .map_err(|name| GraphError::UnboundSize {
                                name,
                                tensor: self.graph.tensor_ref(t).ok(),
                            })?;
                        Ok(KnownDim::sized(n).with_label(d.label().cloned()))
                    }
                })
                .collect()
        };
        Ok(SolvedShape {
            batch: bind_row(shape.batch)?,
            input: bind_row(shape.input)?,
            output: bind_row(shape.output)?,
        })
    }

    /// The value of a symbolic size under the bound sizes; the name of a
    /// size without one otherwise.
    pub(crate) fn eval_size(&self, sym: &SymSize) -> Result<u64, Arc<str>> {
        let values = self.bound.as_deref();
        let value = |name: &str| values.and_then(|b| b.values.get(name).copied());
        sym.eval(&value).map_err(|e| match e {
            shape_core::size::EvalError::Unbound(name) => Arc::from(name),
            shape_core::size::EvalError::Overflow(text) => Arc::from(text),
        })
    }

    /// The guards inference left on run-time sizes, checked by
    /// [`SolvedGraph::bind`].
    pub fn guards(&self) -> Vec<SizeGuard> {
        self.solution.guards()
    }

    /// Whether the graph has run-time sizes still to bind: shapes,
    /// lowering and runs need values for them first (a run of
    /// `shape-run` takes them from the inputs' data, through
    /// [`SolvedGraph::bind_dims`]).
    pub fn needs_binding(&self) -> bool {
        !self.graph.run_time_sizes.is_empty() && self.bound.is_none()
    }

    /// The bound run-time sizes, by name, in order of declaration (empty
    /// before binding).
    pub fn bound_sizes(&self) -> Vec<(Arc<str>, u64)> {
        self.bound
            .as_ref()
            .map_or_else(Vec::new, |b| b.order.clone())
    }

    /// The dims (memory order: batch, output, input) the data of `t` has
    /// when the run-time sizes take the values `sizes` (every run-time
    /// size, once; nothing for a graph without any): what to allocate
    /// before a run, without a `bind` call of the caller's (it binds a
    /// copy, so the sizes' guards and bounds are checked as
    /// [`SolvedGraph::bind`] checks them).
    ///
    /// ```
    /// use shape_graph::Graph;
    /// let mut g = Graph::new();
    /// let b = g.run_time_size("b")?;
    /// let x = g.input("x", "b|784")?;
    /// let w = g.parameter_with_spec("w", "784->10")?;
    /// let y = g.compose(w, x)?;
    /// let solved = g.solve()?;
    /// assert_eq!(solved.data_dims(x, &[(b, 32)])?, vec![32, 784]);
    /// assert_eq!(solved.data_dims(y, &[(b, 8)])?, vec![8, 10]);
    /// assert_eq!(solved.data_dims(w, &[(b, 8)])?, vec![10, 784]);
    /// # Ok::<(), shape_graph::GraphError>(())
    /// ```
    pub fn data_dims(&self, t: TensorId, sizes: &[(SizeId, u64)]) -> Result<Vec<u64>, GraphError> {
        if sizes.is_empty() && !self.needs_binding() {
            return Ok(self.shape(t)?.memory_dims());
        }
        Ok(self.bind(sizes)?.shape(t)?.memory_dims())
    }

    /// This graph with its run-time sizes given the values `sizes` (every
    /// run-time size, once): the guards and the bounds stated on the sizes
    /// are checked, and every shape is then made of numbers. Solves
    /// nothing. Binding a bound graph again starts from the symbols.
    pub fn bind(&self, sizes: &[(SizeId, u64)]) -> Result<SolvedGraph, GraphError> {
        let mut given: HashMap<SizeId, u64> = HashMap::with_capacity(sizes.len());
        for &(s, n) in sizes {
            let (name, _) = self.graph.size_var(s)?;
            if !self.graph.run_time_sizes.contains(&s) {
                return Err(GraphError::NotRunTime { name });
            }
            given.insert(s, n);
        }
        let mut bound = BoundSizes::default();
        for &s in &self.graph.run_time_sizes {
            let (name, _) = self.graph.size_var(s)?;
            let Some(&n) = given.get(&s) else {
                return Err(GraphError::UnboundSize { name, tensor: None });
            };
            bound.values.insert(name.clone(), n);
            bound.order.push((name, n));
        }
        let values = |name: &str| bound.values.get(name).copied();
        // A symbol is at least 1.
        for (name, n) in &bound.order {
            if *n == 0 {
                return Err(GraphError::SizeBound {
                    name: name.clone(),
                    bound: crate::SizeBound::AtLeast(1),
                    value: 0,
                    statement: usize::MAX,
                });
            }
        }
        for &(s, bound_on, statement) in &self.graph.size_bounds {
            let (name, v) = self.graph.size_var(s)?;
            let dim = self.solution.dim(&Dim::Var(v))?;
            let Size::Symbolic(sym) = dim.extent() else {
                continue;
            };
            let value = sym.eval(&values).map_err(|_| GraphError::UnboundSize {
                name: name.clone(),
                tensor: None,
            })?;
            if !bound_on.holds(value) {
                return Err(GraphError::SizeBound {
                    name,
                    bound: bound_on,
                    value,
                    statement,
                });
            }
        }
        for guard in self.solution.guards() {
            match guard.check(&values) {
                Ok(()) => {}
                Err(GuardCheck::Failed(f)) => return Err(GraphError::Guard(f)),
                Err(GuardCheck::Unevaluable(e)) => {
                    return Err(GraphError::UnboundSize {
                        name: Arc::from(e.to_string()),
                        tensor: None,
                    })
                }
            }
        }
        Ok(SolvedGraph {
            graph: self.graph.clone(),
            shapes: (0..self.graph.num_tensors().div_ceil(SHAPE_BLOCK))
                .map(|_| OnceLock::new())
                .collect(),
            solution: self.solution.clone(),
            bound: Some(Arc::new(bound)),
        })
    }

    /// [`SolvedGraph::bind`] with the values the data's dims give
    /// (memory order: batch, output, input): an input axis whose solved
    /// size is a run-time size binds it to the data's length there (the
    /// same size in two inputs must get the same value), and `sizes`
    /// gives the rest (a value in `sizes` that the data contradicts is a
    /// conflict too). A front end can call it before it reads the values;
    /// a run binds its inputs through it.
    pub fn bind_dims(
        &self,
        data: &[(TensorId, &[u64])],
        sizes: &[(SizeId, u64)],
    ) -> Result<SolvedGraph, GraphError> {
        // Each size's value, where it came from, and the tensor whose data
        // gave it (none for a size given by number).
        type Found = (u64, String, Option<TensorRef>);
        let mut found: HashMap<Arc<str>, Found> = HashMap::new();
        for &(s, n) in sizes {
            let (name, _) = self.graph.size_var(s)?;
            found.insert(
                name.clone(),
                (n, format!("the size given (`{name}={n}`)"), None),
            );
        }
        for &(t, data_dims) in data {
            let Ok(shape) = self.symbolic_shape(t) else {
                continue;
            };
            let dims: Vec<&KnownDim> = RowKind::MEMORY_ORDER
                .iter()
                .flat_map(|&k| shape.row(k).iter())
                .collect();
            if dims.len() != data_dims.len() {
                // Refused with the data's shape by the run itself.
                continue;
            }
            for (axis, (d, &n)) in dims.iter().zip(data_dims).enumerate() {
                let Some(name) = d.symbolic_size().and_then(SymSize::as_symbol) else {
                    continue;
                };
                let at = || {
                    let tensor = self.graph.tensor_ref(t).map(|r| r.to_string());
                    format!("the data of {} (axis {axis})", tensor.unwrap_or_default())
                };
                match found.get(name) {
                    Some((m, first_at, first_tensor)) if *m != n => {
                        return Err(GraphError::SizeConflict {
                            name: Arc::from(name),
                            first: *m,
                            first_at: first_at.clone(),
                            second: n,
                            second_at: at(),
                            tensors: Box::new(crate::graph::ConflictingData {
                                first: first_tensor.clone(),
                                second: self.graph.tensor_ref(t).ok(),
                            }),
                        })
                    }
                    Some(_) => {}
                    None => {
                        let tensor = self.graph.tensor_ref(t).ok();
                        found.insert(Arc::from(name), (n, at(), tensor));
                    }
                }
            }
        }
        let mut all = Vec::with_capacity(found.len());
        for (s, name) in self.graph.run_time_sizes() {
            if let Some((n, _, _)) = found.get(name) {
                all.push((s, *n));
            }
        }
        // A size given that is not a run-time size is refused by `bind`.
        for &(s, n) in sizes {
            if !self.graph.run_time_sizes.contains(&s) {
                all.push((s, n));
            }
        }
        self.bind(&all)
    }
}
