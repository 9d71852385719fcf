//! Building a graph with expressions that nest, as tensor code reads:
//! [`Tensor`] handles whose methods apply operations.
//!
//! [`Graph`]'s methods take `&mut self`, so `g.unary("relu", g.add(a,
//! b)?)` borrows the graph twice and every operation needs its own `let`.
//! A [`Scope`] holds the graph behind a cell and hands out [`Tensor`]
//! handles (a tensor id and the scope, `Copy`); their methods borrow the
//! scope immutably, so expressions nest. The methods of the scalar
//! functions (`relu`, `exp`, `add`, `max`, ...) are generated from
//! `shape-core`'s tables: a function added there is a method here too.
//!
//! The scope never lends its graph out (it gives clones, cheap over
//! persistent maps), so no borrow can be held across a call and no call
//! can fail for one.

use std::cell::RefCell;
use std::sync::Arc;

use shape_core::kernel::{BinaryOp, UnaryOp};

use crate::graph::{Graph, GraphError, SolvedGraph, TensorId};
use crate::registry::Registry;

/// A graph being built through [`Tensor`] handles.
///
/// ```
/// use shape_graph::Scope;
/// let g = Scope::new();
/// let x = g.input("x", "32|784")?;
/// let (w1, b1) = (g.parameter("w1")?, g.parameter_with_spec("b1", "128")?);
/// let (w2, b2) = (g.parameter("w2")?, g.parameter_with_spec("b2", "10")?);
/// let h = w1.compose(&x)?.add(&b1)?.relu()?.named("h")?;
/// let y = w2.compose(&h)?.add(&b2)?;
/// let solved = g.solve()?;
/// assert_eq!(solved.shape(w1.id())?.to_string(), "|784->128");
/// assert_eq!(solved.shape(w2.id())?.to_string(), "|128->10");
/// assert_eq!(solved.shape(y.id())?.to_string(), "32|->10");
/// assert_eq!(h.name(), "h");
/// # Ok::<(), shape_graph::GraphError>(())
/// ```
#[derive(Debug, Default)]
pub struct Scope {
    graph: RefCell<Graph>,
}

/// A tensor of a [`Scope`]: its id and the scope. Its methods apply
/// operations to it and return their results. Two handles are equal when
/// they are the same tensor of the same scope.
#[derive(Clone, Copy)]
pub struct Tensor<'s> {
    id: TensorId,
    scope: &'s Scope,
}

impl std::fmt::Debug for Tensor<'_> {
    /// The tensor's id and name (not the whole scope's graph).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("id", &self.id)
            .field("name", &self.name())
            .finish()
    }
}

impl PartialEq for Tensor<'_> {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && std::ptr::eq(self.scope, other.scope)
    }
}

impl Eq for Tensor<'_> {}

impl std::hash::Hash for Tensor<'_> {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.id.hash(state);
        std::ptr::hash(self.scope, state);
    }
}

impl Scope {
    /// A scope over an empty graph of the built-in operations.
    pub fn new() -> Scope {
        Scope::default()
    }

    /// A scope over an empty graph whose calls by name see `registry`.
    pub fn with_registry(registry: Arc<Registry>) -> Scope {
        Scope::from_graph(Graph::with_registry(registry))
    }

    /// A scope that goes on building `graph`.
    pub fn from_graph(graph: Graph) -> Scope {
        Scope {
            graph: RefCell::new(graph),
        }
    }

    /// Runs `f` on the graph. Every borrow ends inside one call of this
    /// scope, and nothing a call runs can reach the scope again, so the
    /// borrow is always free.
    fn with<R>(&self, f: impl FnOnce(&mut Graph) -> R) -> R {
        f(&mut self.graph.borrow_mut())
    }

    /// A handle on a result of `f`.
    fn handle(
        &self,
        f: impl FnOnce(&mut Graph) -> Result<TensorId, GraphError>,
    ) -> Result<Tensor<'_>, GraphError> {
        let id = self.with(f)?;
        Ok(Tensor { id, scope: self })
    }

    /// The id of `t`, refused when `t` is another scope's.
    fn own(&self, t: &Tensor<'_>) -> Result<TensorId, GraphError> {
        if std::ptr::eq(self, t.scope) {
            Ok(t.id)
        } else {
            Err(GraphError::ForeignTensor {
                name: Arc::from(t.name()),
            })
        }
    }

    /// The ids of `ts`, each refused when it is another scope's.
    fn own_all(&self, ts: &[Tensor<'_>]) -> Result<Vec<TensorId>, GraphError> {
        ts.iter().map(|t| self.own(t)).collect()
    }

    /// An input of shape `spec` ([`Graph::input`]).
    pub fn input(&self, name: &str, spec: &str) -> Result<Tensor<'_>, GraphError> {
        self.handle(|g| g.input(name, spec))
    }

    /// A parameter whose shape is inferred from its uses
    /// ([`Graph::parameter`]).
    pub fn parameter(&self, name: &str) -> Result<Tensor<'_>, GraphError> {
        self.handle(|g| g.parameter(name))
    }

    /// A parameter with a (partial) shape ([`Graph::parameter_with_spec`]).
    pub fn parameter_with_spec(&self, name: &str, spec: &str) -> Result<Tensor<'_>, GraphError> {
        self.handle(|g| g.parameter_with_spec(name, spec))
    }

    /// A constant of `num_elems` values ([`Graph::constant`]).
    pub fn constant(
        &self,
        name: &str,
        spec: &str,
        num_elems: u64,
    ) -> Result<Tensor<'_>, GraphError> {
        self.handle(|g| g.constant(name, spec, num_elems))
    }

    /// A handle on a tensor of this scope's graph made another way (by
    /// [`Graph`]'s methods before [`Scope::from_graph`]).
    pub fn tensor(&self, id: TensorId) -> Result<Tensor<'_>, GraphError> {
        self.with(|g| g.kind(id))?;
        Ok(Tensor { id, scope: self })
    }

    /// The einsum `spec` of `operands` ([`Graph::einsum`]).
    pub fn einsum(&self, spec: &str, operands: &[Tensor<'_>]) -> Result<Tensor<'_>, GraphError> {
        let ids = self.own_all(operands)?;
        self.handle(|g| g.einsum(spec, &ids))
    }

    /// The tensors one after another along their last output axis
    /// ([`Graph::concat`]).
    pub fn concat(&self, parts: &[Tensor<'_>]) -> Result<Tensor<'_>, GraphError> {
        let ids = self.own_all(parts)?;
        self.handle(|g| g.concat(&ids))
    }

    /// The registry's operation `name`, built from `spec` where it takes
    /// one, applied to `operands` ([`Graph::call`]).
    pub fn call(
        &self,
        name: &str,
        spec: Option<&str>,
        operands: &[Tensor<'_>],
    ) -> Result<Tensor<'_>, GraphError> {
        let ids = self.own_all(operands)?;
        self.handle(|g| g.call(name, spec, &ids))
    }

    /// The graph as built so far (a clone: the scope goes on).
    pub fn graph(&self) -> Graph {
        self.with(|g| g.clone())
    }

    /// The graph, the scope ended.
    pub fn into_graph(self) -> Graph {
        self.graph.into_inner()
    }

    /// Solves the graph as built so far ([`Graph::solve`]).
    pub fn solve(&self) -> Result<SolvedGraph, GraphError> {
        self.with(|g| g.solve())
    }
}

/// The methods of the unary scalar functions, one per entry of
/// `shape-core`'s table.
macro_rules! unary_methods {
    ($(
        $(#[$doc:meta])*
        $variant:ident => { name: $name:ident, summary: $summary:literal, $($rest:tt)* }
    ),* $(,)?) => {
        // Named as the functions are (`neg`, `add`): fallible, so not the
        // `std::ops` traits, whose results would have to be `Result`s.
        #[allow(clippy::should_implement_trait)]
        impl<'s> Tensor<'s> {
            $(
                #[doc = concat!("`", stringify!($name), "` of this tensor, elementwise: ", $summary, ".")]
                pub fn $name(self) -> Result<Tensor<'s>, GraphError> {
                    self.unary(UnaryOp::$variant)
                }
            )*
        }
    };
}

shape_core::unary_table!(unary_methods);

/// The methods of the binary scalar functions, one per entry of
/// `shape-core`'s table.
macro_rules! binary_methods {
    ($(
        $(#[$doc:meta])*
        $variant:ident => { name: $name:ident, summary: $summary:literal, $($rest:tt)* }
    ),* $(,)?) => {
        #[allow(clippy::should_implement_trait)]
        impl<'s> Tensor<'s> {
            $(
                #[doc = concat!("`", stringify!($name), "` of this tensor (`a`) and `other` (`b`), elementwise with broadcasting: ", $summary, ".")]
                pub fn $name(self, other: &Tensor<'s>) -> Result<Tensor<'s>, GraphError> {
                    self.binary(BinaryOp::$variant, other)
                }
            )*
        }
    };
}

shape_core::binary_table!(binary_methods);

impl<'s> Tensor<'s> {
    /// The tensor's id in the scope's graph.
    pub fn id(self) -> TensorId {
        self.id
    }

    /// The scope the tensor belongs to.
    pub fn scope(self) -> &'s Scope {
        self.scope
    }

    /// The tensor's name.
    pub fn name(self) -> String {
        self.scope
            .with(|g| g.name(self.id).map(str::to_string))
            .unwrap_or_default()
    }

    /// This tensor under the name `name` ([`Graph::rename`]): later
    /// operations and messages call it that.
    pub fn named(self, name: &str) -> Result<Tensor<'s>, GraphError> {
        self.scope.with(|g| g.rename(self.id, name))?;
        Ok(self)
    }

    /// Requires the tensor's shape to fit `spec` ([`Graph::require`]).
    pub fn require(self, spec: &str) -> Result<Tensor<'s>, GraphError> {
        self.scope.with(|g| g.require(self.id, spec))?;
        Ok(self)
    }

    /// A unary function of the scalar table, elementwise.
    pub fn unary(self, op: UnaryOp) -> Result<Tensor<'s>, GraphError> {
        self.scope.handle(|g| g.unary(op.name(), self.id))
    }

    /// A binary function of the scalar table, elementwise with
    /// broadcasting: `op(self, other)`.
    pub fn binary(self, op: BinaryOp, other: &Tensor<'s>) -> Result<Tensor<'s>, GraphError> {
        let b = self.scope.own(other)?;
        self.scope.handle(|g| g.binary(op.name(), self.id, b))
    }

    /// `self @ other`: `other`'s outputs feed this tensor's inputs
    /// ([`Graph::compose`]).
    pub fn compose(self, other: &Tensor<'s>) -> Result<Tensor<'s>, GraphError> {
        let b = self.scope.own(other)?;
        self.scope.handle(|g| g.compose(self.id, b))
    }

    /// The input and output rows swapped ([`Graph::transpose`]).
    pub fn transpose(self) -> Result<Tensor<'s>, GraphError> {
        self.scope.handle(|g| g.transpose(self.id))
    }

    /// The leftmost batch axis dropped ([`Graph::batch_slice`]).
    pub fn batch_slice(self) -> Result<Tensor<'s>, GraphError> {
        self.scope.handle(|g| g.batch_slice(self.id))
    }

    /// The leftmost batch axis, of `range` elements, dropped
    /// ([`Graph::batch_slice_range`]).
    pub fn batch_slice_range(self, range: u64) -> Result<Tensor<'s>, GraphError> {
        self.scope.handle(|g| g.batch_slice_range(self.id, range))
    }

    /// The one-operand einsum `spec` of this tensor: a permutation, and
    /// with labels left out a reduction ([`Graph::permute`]).
    pub fn permute(self, spec: &str) -> Result<Tensor<'s>, GraphError> {
        self.scope.handle(|g| g.permute(spec, self.id))
    }
}
