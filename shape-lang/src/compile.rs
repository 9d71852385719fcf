//! From a parsed program to a shape [`Graph`], remembering where in the
//! text every tensor, operation and requirement came from, so that the
//! solver's errors and explanations point back at the source.
//!
//! ```
//! use shape_lang::compile::compile;
//! use shape_lang::syntax::parse;
//! let program = parse("input x: 4|8\nparam w\ny = w @ x\nrequire y: 4|->3\n").unwrap();
//! let compiled = compile(&program).unwrap();
//! let solved = compiled.solve().unwrap();
//! let w = compiled.tensor("w").unwrap();
//! assert_eq!(solved.shape(w).unwrap().to_string(), "|8->3");
//! ```

use std::collections::HashMap;
use std::sync::Arc;

use shape_core::spec::ShapeSpec;
use shape_core::SpecError;
use shape_graph::{GraphError, Registry, SolvedGraph, TensorId};
use shape_solver::{Origin, ShapeError};

pub use shape_graph::Graph;

use crate::error::{Note, ProgramError};
use crate::syntax::{
    Arg, DeclKind, Expr, ExprKind, Ident, Program, SizeSource, Span, SpecText, Statement,
};

/// Every function a program may call, in the order messages list them:
/// the names of the built-in registry, which the parser reads too.
pub fn function_names() -> Vec<String> {
    Registry::builtin()
        .names()
        .into_iter()
        .map(str::to_string)
        .collect()
}

/// Where a tensor came from in the text.
#[derive(Clone, Debug)]
struct TensorSite {
    /// The declaration's name, or the expression that computes it.
    span: Span,
    /// The declared spec, when the tensor has one written in the text.
    spec: Option<Span>,
    /// A constant's values.
    values: Option<Span>,
}

/// Places in the text of the graph's tensors, operations and requirements.
#[derive(Clone, Debug, Default)]
pub struct SourceMap {
    tensors: Vec<TensorSite>,
    ops: Vec<Span>,
    requires: Vec<(usize, String, Span)>,
    /// Size statements, in order (their origins number them), with the
    /// size each names.
    sizes: Vec<(String, Span)>,
}

impl SourceMap {
    /// The expression that created operation number `op`.
    pub fn op_span(&self, op: usize) -> Option<Span> {
        self.ops.get(op).cloned()
    }

    /// The first statement about the size `name` (its declaration).
    fn size_declaration(&self, name: &str) -> Option<Span> {
        self.sizes
            .iter()
            .find(|(n, _)| **n == *name)
            .map(|(_, span)| span.clone())
    }

    /// Where tensor number `t` is declared or computed.
    pub fn tensor_span(&self, t: usize) -> Option<Span> {
        self.tensors.get(t).map(|site| site.span.clone())
    }

    /// Where a constraint's origin is written, narrowed to one axis of a
    /// written spec when `axis_from_end` says which.
    pub fn origin_span(
        &self,
        origin: &Origin,
        axis_from_end: Option<shape_solver::AxisFromEnd>,
    ) -> Option<Span> {
        let axis_from_end = axis_from_end.map(shape_solver::AxisFromEnd::after);
        match origin {
            Origin::Declared { tensor, kind, spec } => {
                let site = self.tensors.get(tensor.id)?;
                match &site.spec {
                    Some(at) => Some(axis_span(spec, at, *kind, axis_from_end)),
                    None => Some(site.span.clone()),
                }
            }
            Origin::Required { tensor, kind, spec } => {
                let (_, _, at) = self
                    .requires
                    .iter()
                    .find(|(t, s, _)| *t == tensor.id && s.as_str() == &**spec)?;
                Some(axis_span(spec, at, *kind, axis_from_end))
            }
            Origin::ElementCount { tensor, .. } => {
                let site = self.tensors.get(tensor.id)?;
                site.values.clone().or(Some(site.span.clone()))
            }
            Origin::Op { op, .. } | Origin::OpRow { op, .. } => self.op_span(op.id),
            Origin::Size { statement, .. } => self.sizes.get(*statement).map(|(_, s)| s.clone()),
            Origin::Direct { .. } | Origin::Finalization => None,
        }
    }

    /// Places a solver error: where it showed up (falling back to
    /// `trigger`, the statement being compiled), and where each fact it
    /// involves came from.
    pub fn locate(&self, error: GraphError, trigger: Option<Span>) -> ProgramError {
        let mut at = Placement {
            op: None,
            primary: trigger.clone().map(|span| Note {
                span,
                text: String::new(),
            }),
            notes: Vec::new(),
        };
        match &error {
            GraphError::Shape(e) => self.place_shape_error(e, &mut at),
            GraphError::NotGiven {
                what: shape_graph::NotGiven::Size(name),
                ..
            } => self.place_at_size_statement(name, &mut at),
            GraphError::SizeBound {
                statement, name, ..
            } => self.place_size_bound(*statement, name, &mut at),
            GraphError::GuardConflict { first, second } => {
                self.place_guard_conflict(first, second, &mut at)
            }
            GraphError::UnboundSize { name, tensor } => {
                self.place_unbound_size(name, tensor.as_ref(), &mut at)
            }
            GraphError::SizeConflict {
                name,
                first,
                second,
                tensors,
                ..
            } => self.place_size_conflict(name, (*first, *second), tensors, &mut at),
            GraphError::NotGiven { tensor, .. } => self.place_not_given(tensor, &mut at),
            other => self.place_at_op(other, &mut at),
        }
        label_primary(&error, &mut at);
        // When the error surfaced elsewhere than in the statement being
        // added, that statement is shown too.
        if let (Some(t), Some(p)) = (&trigger, &at.primary) {
            if *t != p.span && !at.notes.iter().any(|n| n.span == *t) {
                at.notes.push(Note {
                    span: t.clone(),
                    text: "the conflict shows up when this is added".into(),
                });
            }
        }
        ProgramError::Graph {
            error: Box::new(error),
            op: at.op,
            primary: at.primary,
            notes: at.notes,
        }
    }

    /// A shape error: at the statement its context names, with a note at
    /// each of the two facts that conflict.
    fn place_shape_error(&self, e: &ShapeError, at: &mut Placement) {
        if let Some(ctx) = e.context() {
            at.op = ctx.op().map(|o| o.name.to_string());
            if let Some(span) = self.origin_span(ctx, None) {
                at.primary = Some(Note {
                    span,
                    text: String::new(),
                });
            }
        }
        if let Some(p) = &mut at.primary {
            p.text = headline(e);
        }
        let facts = match e {
            ShapeError::DimMismatch { left, right, .. }
            | ShapeError::LabelMismatch { left, right, .. } => vec![left, right],
            _ => vec![],
        };
        for fact in facts {
            if let Some(span) = self.origin_span(&fact.origin, fact.axis_from_end) {
                at.notes.push(Note {
                    span,
                    text: format!("{} comes from {}", fact.value, fact.place()),
                });
            }
        }
    }

    /// At the first statement about the size `name`.
    fn place_at_size_statement(&self, name: &str, at: &mut Placement) {
        // Placed at the first statement about the size.
        if let Some((_, span)) = self.sizes.iter().find(|(n, _)| **n == *name) {
            at.primary = Some(Note {
                span: span.clone(),
                text: String::new(),
            });
        }
    }

    /// At the size bound that fails, with a note at the size's
    /// declaration.
    fn place_size_bound(&self, statement: usize, name: &str, at: &mut Placement) {
        if let Some((_, span)) = self.sizes.get(statement) {
            at.primary = Some(Note {
                span: span.clone(),
                text: "the bound".into(),
            });
        }
        let declared = self.size_declaration(name);
        if let Some(span) = declared.filter(|d| at.primary.as_ref().is_none_or(|p| p.span != *d)) {
            at.notes.push(Note {
                span,
                text: format!("`{name}` is declared here"),
            });
        }
    }

    /// At the second of two guards that conflict, with a note at the
    /// first.
    fn place_guard_conflict(
        &self,
        first: &shape_solver::guard::SizeGuard,
        second: &shape_solver::guard::SizeGuard,
        at: &mut Placement,
    ) {
        if let Some(span) = self.origin_span(&second.context, second.axis) {
            at.primary = Some(Note {
                span,
                text: format!("requires `{}`", second.requires()),
            });
        }
        if let Some(span) = self.origin_span(&first.context, first.axis) {
            at.notes.push(Note {
                span,
                text: format!("requires `{}`", first.requires()),
            });
        }
    }

    /// At the declaration of a size that has no value, with a note at
    /// the tensor whose shape needs it.
    fn place_unbound_size(
        &self,
        name: &str,
        tensor: Option<&shape_solver::TensorRef>,
        at: &mut Placement,
    ) {
        if let Some(span) = self.size_declaration(name) {
            at.primary = Some(Note {
                span,
                text: format!("declared here; give it with `--size {name}=N`"),
            });
        }
        if let Some(site) = tensor.and_then(|t| self.tensors.get(t.id)) {
            at.notes.push(Note {
                span: site.span.clone(),
                text: format!("the shape of `{}` needs it", tensor.map_or("", |t| &t.name)),
            });
        }
    }

    /// At the declaration of a size two data give different values, with
    /// a note at each of them.
    fn place_size_conflict(
        &self,
        name: &str,
        (first, second): (u64, u64),
        tensors: &shape_graph::ConflictingData,
        at: &mut Placement,
    ) {
        let (first_tensor, second_tensor) = (&tensors.first, &tensors.second);
        if let Some(span) = self.size_declaration(name) {
            at.primary = Some(Note {
                span,
                text: format!("`{name}` is declared here"),
            });
        }
        for (t, value) in [(first_tensor, first), (second_tensor, second)] {
            if let Some((t, site)) = t.as_ref().and_then(|t| Some((t, self.tensors.get(t.id)?))) {
                at.notes.push(Note {
                    span: site.span.clone(),
                    text: format!("the data of `{}` makes `{name}` {value}", t.name),
                });
            }
        }
    }

    /// At the declaration of the tensor nothing gives a shape to.
    fn place_not_given(&self, tensor: &shape_solver::TensorRef, at: &mut Placement) {
        // Placed at the declaration of the tensor nothing gives a
        // shape to.
        if let Some(site) = self.tensors.get(tensor.id) {
            at.primary = Some(Note {
                span: site.span.clone(),
                text: String::new(),
            });
        }
    }

    /// An error about one operation: at it.
    fn place_at_op(&self, error: &GraphError, at: &mut Placement) {
        // An error about one operation is placed at it.
        if let Some(o) = error.op() {
            at.op = Some(o.name.to_string());
            if let Some(span) = self.op_span(o.id) {
                at.primary = Some(Note {
                    span,
                    text: String::new(),
                });
            }
        }
    }
}

/// A short label for where a shape error showed up.
fn headline(e: &ShapeError) -> String {
    match e {
        ShapeError::DimMismatch { axis, .. } => {
            let at = axis.map(|a| format!(" at {a}")).unwrap_or_default();
            format!("{}{at}", e.mismatch_text().unwrap_or_default())
        }
        ShapeError::LabelMismatch { left, right, .. } => {
            format!("labels differ: {} and {}", left.value, right.value)
        }
        ShapeError::AxisCountMismatch { .. } => "the numbers of axes do not fit".into(),
        ShapeError::InfiniteAxes { .. } => "a row would contain itself".into(),
        ShapeError::TotalElems { .. } => "the element count does not fit".into(),
        ShapeError::Underdetermined { .. } => "too many unknown sizes".into(),
        ShapeError::NothingToSlice { .. } => "no batch axis to slice".into(),
        ShapeError::SumMismatch { .. } => "the parts do not add up".into(),
        _ => "here".into(),
    }
}

/// The span of one axis of a spec written at `at`, or of the whole spec.
fn axis_span(spec: &str, at: &Span, kind: shape_core::RowKind, from_end: Option<u32>) -> Span {
    let whole = at.clone();
    if at.len() != spec.len() {
        return whole;
    }
    let Ok(parsed) = ShapeSpec::parse(spec) else {
        return whole;
    };
    let (Some(row), Some(a)) = (parsed.row(kind), from_end) else {
        return whole;
    };
    let n = row.axes.len();
    match (a as usize).checked_add(1).and_then(|k| n.checked_sub(k)) {
        Some(i) => at.start + row.axes[i].span.start..at.start + row.axes[i].span.end,
        None => whole,
    }
}

/// Something a program may not mean, at a place in its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Warning {
    /// A stable name for what it is about.
    pub code: &'static str,
    /// What it says.
    pub message: String,
    /// Where.
    pub span: Span,
    /// What to do about it.
    pub note: String,
}

/// A compiled program: the graph, the text positions of its parts, and the
/// values written in it.
#[derive(Clone, Debug)]
pub struct Compiled {
    /// The shape graph.
    pub graph: Graph,
    /// Where each part came from.
    pub map: SourceMap,
    /// Constants' values (written lists and number literals), by tensor.
    pub constants: HashMap<TensorId, Vec<f32>>,
    /// Constants that stand for a named size used as a number (`x / d`):
    /// their value is the size once solved.
    pub size_values: HashMap<TensorId, shape_graph::SizeId>,
    /// The tensors named by assignments, in order: the program's results.
    pub results: Vec<TensorId>,
    /// What the program compiles to but may not mean: shown on standard
    /// error, never an error.
    pub warnings: Vec<Warning>,
    names: HashMap<String, (TensorId, Span)>,
    /// The versions of each name that `NAME[...] <- EXPR` wrote, the first
    /// (its declaration or first assignment) first.
    versions: HashMap<String, Vec<TensorId>>,
    /// Versions that a later `NAME[...] <- EXPR` replaced: not results.
    superseded: std::collections::HashSet<TensorId>,
    /// The functions of `function` statements, by name, with the
    /// statement's name.
    functions: HashMap<String, (Arc<dyn shape_graph::Operation>, Span)>,
}

impl Compiled {
    /// The tensor a name refers to at the end of the program: its last
    /// version, where `NAME[...] <- EXPR` wrote it ([`Compiled::versions`]).
    pub fn tensor(&self, name: &str) -> Option<TensorId> {
        self.names.get(name).map(|(t, _)| *t)
    }

    /// Every tensor a name has stood for, in order: its declaration or
    /// first assignment, then each version `NAME[...] <- EXPR` made (the
    /// last is [`Compiled::tensor`]). Empty for an unknown name.
    ///
    /// ```
    /// let program = shape_lang::syntax::parse("input d: 2, 3\nd[...] <- 0\n")?;
    /// let compiled = shape_lang::compile::compile(&program)?;
    /// let versions = compiled.versions("d");
    /// assert_eq!(versions.len(), 2);
    /// assert_eq!(compiled.tensor("d"), versions.last().copied());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn versions(&self, name: &str) -> Vec<TensorId> {
        match (self.versions.get(name), self.tensor(name)) {
            (Some(all), _) => all.clone(),
            (None, Some(t)) => vec![t],
            (None, None) => Vec::new(),
        }
    }

    /// The tensor a name was first defined as: its declaration (an input
    /// or parameter that takes data) or its first assignment.
    pub fn first_version(&self, name: &str) -> Option<TensorId> {
        self.versions
            .get(name)
            .and_then(|v| v.first().copied())
            .or_else(|| self.tensor(name))
    }

    /// Solves every shape; an error is placed in the text.
    pub fn solve(&self) -> Result<SolvedGraph, ProgramError> {
        self.graph.solve().map_err(|e| self.map.locate(e, None))
    }

    /// The line (from 1) of a byte offset in `source`.
    pub fn line_of(source: &str, offset: usize) -> usize {
        source[..offset.min(source.len())].matches('\n').count() + 1
    }
}

/// Builds the graph of a program, statement by statement, with the
/// built-in operations; the first error stops it.
pub fn compile(program: &Program) -> Result<Compiled, ProgramError> {
    compile_with(program, Registry::builtin())
}

/// [`compile`] with the operations of `registry`: its functions by name
/// and its operators (a program read with
/// [`parse_with`](crate::syntax::parse_with) and the same registry).
pub fn compile_with(program: &Program, registry: Arc<Registry>) -> Result<Compiled, ProgramError> {
    let mut c = Compiled {
        graph: Graph::with_registry(registry),
        map: SourceMap::default(),
        constants: HashMap::new(),
        results: Vec::new(),
        warnings: Vec::new(),
        size_values: HashMap::new(),
        names: HashMap::new(),
        versions: HashMap::new(),
        superseded: Default::default(),
        functions: HashMap::new(),
    };
    for st in &program.statements {
        statement(&mut c, st)?;
    }
    if !c.superseded.is_empty() {
        let superseded = std::mem::take(&mut c.superseded);
        c.results.retain(|r| !superseded.contains(r));
    }
    Ok(c)
}

fn spec_error(context: String, error: SpecError, at: &SpecText) -> ProgramError {
    let span = if at.text.len() == at.span.len() {
        let end = (at.span.start + error.span.end).min(at.span.end);
        let start = (at.span.start + error.span.start).min(end);
        start..end.max(start)
    } else {
        at.span.clone()
    };
    ProgramError::Spec {
        context,
        error: Box::new(error),
        span,
    }
}

/// Turns a graph error from a call about `at` into a located error; spec
/// errors point into `spec` when given.
fn graph_error(c: &Compiled, e: GraphError, at: &Span, spec: Option<&SpecText>) -> ProgramError {
    match (e, spec) {
        (GraphError::Spec { context, source }, Some(spec)) => {
            spec_error(context.to_string(), *source, spec)
        }
        (e, _) => c.map.locate(e, Some(at.clone())),
    }
}

/// Fails when `name` is already defined.
/// The tensor named `name` that `op` (an assignment) makes of
/// `operands`, placed at `expr` in the source map.
fn assignment(
    c: &mut Compiled,
    name: &Ident,
    op: Arc<dyn shape_graph::Operation>,
    operands: &[TensorId],
    expr: &Expr,
) -> Result<TensorId, ProgramError> {
    let t = c
        .graph
        .apply_named(&name.text, op, operands)
        .map_err(|e| graph_error(c, e, &expr.span, None))?;
    c.map.ops.push(expr.span.clone());
    c.map.tensors.push(TensorSite {
        span: expr.span.clone(),
        spec: None,
        values: None,
    });
    Ok(t)
}

fn check_new(c: &Compiled, name: &Ident) -> Result<(), ProgramError> {
    match c.names.get(&name.text) {
        Some((_, previous)) => Err(ProgramError::Redefined {
            name: name.text.clone(),
            span: name.span.clone(),
            previous: previous.clone(),
        }),
        None => Ok(()),
    }
}

fn define(c: &mut Compiled, name: &Ident, t: TensorId) {
    c.names.insert(name.text.clone(), (t, name.span.clone()));
}

fn statement(c: &mut Compiled, st: &Statement) -> Result<(), ProgramError> {
    match st {
        Statement::Declare {
            kind,
            name,
            spec,
            values,
            ..
        } => {
            check_new(c, name)?;
            let result = match (kind, spec, values) {
                (DeclKind::Input, Some(s), _) => c.graph.input(&name.text, &s.text),
                (DeclKind::Param, Some(s), _) => c.graph.parameter_with_spec(&name.text, &s.text),
                (DeclKind::Param, None, _) => c.graph.parameter(&name.text),
                (DeclKind::Const, Some(s), Some(v)) => {
                    crate::checks::constant_fits(&name.text, &s.text, v.values.len(), &v.span)?;
                    c.graph.constant(&name.text, &s.text, v.values.len() as u64)
                }
                // The parser gives inputs and constants a spec, and
                // constants their values.
                _ => {
                    return Err(ProgramError::Arguments {
                        func: kind.keyword().into(),
                        expected: "a shape spec".into(),
                        given: "none".into(),
                        span: name.span.clone(),
                    })
                }
            };
            let t = result.map_err(|e| {
                let at = values
                    .as_ref()
                    .map(|v| v.span.clone())
                    .unwrap_or(name.span.clone());
                graph_error(c, e, &at, spec.as_ref())
            })?;
            c.map.tensors.push(TensorSite {
                span: name.span.clone(),
                spec: spec.as_ref().map(|s| s.span.clone()),
                values: values.as_ref().map(|v| v.span.clone()),
            });
            if let Some(v) = values {
                c.constants.insert(t, v.values.clone());
            }
            define(c, name, t);
            Ok(())
        }
        Statement::Assign { name, expr, .. } => {
            check_new(c, name)?;
            let mut counter = 0;
            let t = expression(c, expr, &name.text, &mut counter, true)?;
            c.results.push(t);
            define(c, name, t);
            Ok(())
        }
        Statement::AssignInto {
            name, spec, expr, ..
        } => {
            check_new(c, name)?;
            full_shape(spec)?;
            let mut counter = 0;
            let source = expression(c, expr, &name.text, &mut counter, false)?;
            // A copy into exactly the declared shape, from a source that
            // broadcasts to it one way (the destination never sizes it).
            let t = assignment(c, name, Arc::new(shape_graph::ops::Assign), &[source], expr)?;
            c.map
                .requires
                .push((t.index(), spec.text.clone(), spec.span.clone()));
            c.graph
                .require(t, &spec.text)
                .map_err(|e| graph_error(c, e, &spec.span, Some(spec)))?;
            c.results.push(t);
            define(c, name, t);
            Ok(())
        }
        Statement::AssignExisting { name, expr, .. } => {
            let dest = lookup(c, &name.text, &name.span)?;
            let mut counter = 0;
            let source = expression(c, expr, &name.text, &mut counter, false)?;
            // A new version of the tensor: its own node, so a statement
            // above reads the old values and one below the new.
            let operands = [dest, source];
            let t = assignment(
                c,
                name,
                Arc::new(shape_graph::ops::AssignExisting),
                &operands,
                expr,
            )?;
            // The name's results are its last version's values (the
            // earlier ones leave the results when the program is done).
            c.superseded.insert(dest);
            c.results.push(t);
            c.versions
                .entry(name.text.clone())
                .or_insert_with(|| vec![dest])
                .push(t);
            define(c, name, t);
            Ok(())
        }
        Statement::RunTimeSize { name, span } => {
            c.map.sizes.push((name.text.clone(), span.clone()));
            c.graph
                .run_time_size(&name.text)
                .map(|_| ())
                .map_err(|e| graph_error(c, e, span, None))
        }
        Statement::SizeBound { name, bound, span } => {
            let s = c.graph.size(&name.text);
            c.map.sizes.push((name.text.clone(), span.clone()));
            c.graph
                .bound_size(s, *bound)
                .map_err(|e| graph_error(c, e, span, None))
        }
        Statement::Size { name, source, span } => {
            let s = c.graph.size(&name.text);
            c.map.sizes.push((name.text.clone(), span.clone()));
            let result = match source {
                SizeSource::Number(n, _) => c.graph.set_size(s, *n),
                SizeSource::Size(other) => match c.graph.size_named(&other.text) {
                    Some(o) => c.graph.equate_sizes(s, o),
                    None => {
                        return Err(ProgramError::UnknownName {
                            name: other.text.clone(),
                            span: other.span.clone(),
                        })
                    }
                },
                SizeSource::Label { label, of } => {
                    let t = lookup(c, &of.text, &of.span)?;
                    c.graph.capture_label(s, t, &label.text)
                }
                SizeSource::RowVar { name: var, of } => {
                    let t = lookup(c, &of.text, &of.span)?;
                    c.graph.capture_count(s, t, &var.text)
                }
            };
            result.map_err(|e| graph_error(c, e, span, None))
        }
        Statement::Function { name, source, span } => function(c, name, source, span),
        Statement::Require { name, spec, .. } => {
            let t = lookup(c, &name.text, &name.span)?;
            c.map
                .requires
                .push((t.index(), spec.text.clone(), spec.span.clone()));
            c.graph
                .require(t, &spec.text)
                .map_err(|e| graph_error(c, e, &spec.span, Some(spec)))
        }
    }
}

/// Refuses a destination shape with a row variable (`...`, `..r..`): the
/// destination of `<-` is declared with its full shape.
fn full_shape(spec: &SpecText) -> Result<(), ProgramError> {
    let context = || "the shape of a `<-` destination".to_string();
    let parsed = shape_core::ShapeSpec::parse(&spec.text).map_err(|error| ProgramError::Spec {
        context: context(),
        span: spec.span.start + error.span.start..spec.span.start + error.span.end,
        error: Box::new(error),
    })?;
    let rows = [
        parsed.batch.as_ref(),
        parsed.input.as_ref(),
        Some(&parsed.output),
    ];
    if let Some((var, at)) = rows.into_iter().flatten().find_map(|r| r.row_var.as_ref()) {
        let error = shape_core::SpecError {
            spec: spec.text.clone(),
            span: at.clone(),
            expected:
                "the destination's full shape (sizes or labels on every axis, no row variable)"
                    .to_string(),
            found: format!("`{var}`"),
        };
        return Err(ProgramError::Spec {
            context: context(),
            span: spec.span.start + at.start..spec.span.start + at.end,
            error: Box::new(error),
        });
    }
    Ok(())
}

fn lookup(c: &Compiled, name: &str, span: &Span) -> Result<TensorId, ProgramError> {
    c.names
        .get(name)
        .map(|(t, _)| *t)
        .ok_or_else(|| ProgramError::UnknownName {
            name: name.to_string(),
            span: span.clone(),
        })
}

/// A scalar constant holding the size `s` (named `name`), once solved.
fn size_value(
    c: &mut Compiled,
    name: &str,
    s: shape_graph::SizeId,
    span: &Span,
) -> Result<TensorId, ProgramError> {
    let t = c
        .graph
        .constant(name, "1", 1)
        .map_err(|err| graph_error(c, err, span, None))?;
    c.map.tensors.push(TensorSite {
        span: span.clone(),
        spec: None,
        values: None,
    });
    c.size_values.insert(t, s);
    Ok(t)
}

/// Calls the function `func` of the graph's registry, naming the result
/// after the statement: the root of the expression gets the statement's
/// name, inner operations `name.1`, `name.2`, ... in evaluation order.
#[allow(clippy::too_many_arguments)]
fn apply(
    c: &mut Compiled,
    func: &str,
    spec: Option<&SpecText>,
    operands: &[TensorId],
    span: &Span,
    base: &str,
    counter: &mut usize,
    root: bool,
) -> Result<TensorId, ProgramError> {
    apply_op(c, func, None, spec, operands, span, base, counter, root)
}

/// [`apply`] of the registry's `func`, or of `op` (a `function`
/// statement's) when given.
#[allow(clippy::too_many_arguments)]
fn apply_op(
    c: &mut Compiled,
    func: &str,
    op: Option<Arc<dyn shape_graph::Operation>>,
    spec: Option<&SpecText>,
    operands: &[TensorId],
    span: &Span,
    base: &str,
    counter: &mut usize,
    root: bool,
) -> Result<TensorId, ProgramError> {
    let name = if root {
        base.to_string()
    } else {
        *counter += 1;
        format!("{base}.{counter}")
    };
    let applied = match op {
        Some(op) => c.graph.apply_named(&name, op, operands),
        None => c
            .graph
            .call_named(&name, func, spec.map(|s| s.text.as_str()), operands),
    };
    let t = applied.map_err(|e| match (e, spec) {
        // A spec whose operand count differs from the tensors given.
        (
            GraphError::Arity { expected, .. }
            | GraphError::PermuteSpec {
                operands: expected, ..
            },
            Some(s),
        ) => ProgramError::Arguments {
            func: format!("{func} \"{}\"", s.text),
            expected: format!("{expected} tensor(s), one per operand of its spec"),
            given: match operands.len() {
                1 => "1 tensor".to_string(),
                n => format!("{n} tensors"),
            },
            span: span.clone(),
        },
        (e, _) => graph_error(c, e, span, spec),
    })?;
    if let Some(s) = spec {
        warn_result_digits(c, func, s);
    }
    c.map.ops.push(span.clone());
    c.map.tensors.push(TensorSite {
        span: span.clone(),
        spec: None,
        values: None,
    });
    Ok(t)
}

/// A digit in an einsum result was a size before issue 13 and is a fixed
/// index (a position) now: a program written before may mean a size-1
/// axis where it now writes position 1 of a longer one. Operand digits
/// need no warning: an old program's size `d` leaves the new index `d` out
/// of range, an error that says what changed.
fn warn_result_digits(c: &mut Compiled, func: &str, spec: &SpecText) {
    if !spec.text.contains(|ch: char| ch.is_ascii_digit()) {
        return;
    }
    let Ok(parsed) = shape_core::EinsumSpec::parse(&spec.text) else {
        return;
    };
    for (_, axis) in parsed.result.axes() {
        if let shape_core::spec::AxisKind::Fixed(i) = axis.kind {
            c.warnings.push(Warning {
                code: "fixed_index",
                message: format!(
                    "the digit `{i}` in the result of {func} \"{}\" is a fixed index: the values \
                     go to position {i} of an axis of at least {}, the others stay 0",
                    spec.text,
                    elements(u128::from(i) + 1)
                ),
                span: spec.span.start + axis.span.start..spec.span.start + axis.span.end,
                note: "digits in einsum specs were sizes before; a new axis of size 1 is \
                       written `label:1` with a label no operand has (`\"...|t,u=>...|t,one:1\"`)"
                    .into(),
            });
        }
    }
}

/// A `widened` warning for each axis a later use widened where the
/// widened size changes a value ([`SolvedGraph::widened_axes`]), placed
/// at the operation that sees it. A result whose shape a `<-` or a
/// `require` declares is not widened by a use: it has its declared size.
pub fn widened_warnings(c: &Compiled, solved: &SolvedGraph) -> Vec<Warning> {
    // Warnings are advice: an analysis that fails (it computes the same
    // projections a run would, which would then report the error) adds none.
    let Ok(found) = solved.widened_axes() else {
        return Vec::new();
    };
    let declared: std::collections::HashSet<usize> =
        c.map.requires.iter().map(|(t, _, _)| *t).collect();
    let g = &c.graph;
    let name = |t: TensorId| g.name(t).unwrap_or("?");
    let statement = |op: shape_graph::OpId| {
        g.op(op)
            .map(|(o, operands, _)| {
                let names: Vec<&str> = operands.iter().map(|&t| name(t)).collect();
                o.spell(&names)
            })
            .unwrap_or_default()
    };
    found
        .into_iter()
        .filter(|w| !declared.contains(&w.tensor.index()))
        .filter_map(|w| {
            let span = c.map.ops.get(w.seen_by.index())?.clone();
            let by = match w.widened_by {
                Some(op) => format!(
                    "the later use `{} = {}`",
                    g.op(op).map_or("?", |(_, _, r)| name(r)),
                    statement(op)
                ),
                None => "a later use".to_string(),
            };
            let seer = g.op(w.seen_by).map_or("?", |(_, _, r)| name(r));
            Some(Warning {
                code: "widened",
                message: format!(
                    "`{t}` is computed from operands of size 1 (or none) along its {row} axis {axis}, \
                     but {by} widens it to {size}; `{seer} = {op}` {verb} along that axis, so its \
                     values depend on the later use",
                    t = name(w.tensor),
                    row = w.row,
                    axis = w.axis,
                    size = w.size,
                    op = statement(w.seen_by),
                    verb = w.seen_as.verb(),
                ),
                span,
                note: "an intermediate is as large as its uses allow (OCANNL's rule, see \
                       docs/deviations.md); to keep it at its operands' size, declare it \
                       (`require NAME: SHAPE`) or copy it into a declared shape with `<-`"
                    .into(),
            })
        })
        .collect()
}

/// `n elements`, or `1 element`.
fn elements(n: u128) -> String {
    match n {
        1 => "1 element".into(),
        n => format!("{n} elements"),
    }
}

/// The function of the registry that the operator `symbol` writes (infix or prefix).
fn operator_function(
    c: &Compiled,
    symbol: &str,
    infix: bool,
    span: &Span,
) -> Result<String, ProgramError> {
    let registry = c.graph.registry();
    let entry = if infix {
        registry.by_infix(symbol)
    } else {
        registry.by_prefix(symbol)
    };
    entry
        .map(|e| e.name().to_string())
        .ok_or_else(|| ProgramError::UnknownFunction {
            name: symbol.to_string(),
            span: span.clone(),
        })
}

fn expression(
    c: &mut Compiled,
    e: &Expr,
    base: &str,
    counter: &mut usize,
    root: bool,
) -> Result<TensorId, ProgramError> {
    match &e.kind {
        ExprKind::Name(n) => {
            // A size's name that no tensor has is the size as a number.
            let t = match (lookup(c, n, &e.span), c.graph.size_named(n)) {
                (Err(_), Some(s)) => size_value(c, n, s, &e.span)?,
                (t, _) => t?,
            };
            if root {
                // `y = x` gives `x` a second name as a copy.
                apply(c, "id", None, &[t], &e.span, base, counter, root)
            } else {
                Ok(t)
            }
        }
        ExprKind::Number(v) => {
            let t = c
                .graph
                .constant(&v.to_string(), "1", 1)
                .map_err(|err| graph_error(c, err, &e.span, None))?;
            c.map.tensors.push(TensorSite {
                span: e.span.clone(),
                spec: None,
                values: None,
            });
            c.constants.insert(t, vec![*v]);
            if root {
                apply(c, "id", None, &[t], &e.span, base, counter, root)
            } else {
                Ok(t)
            }
        }
        ExprKind::Neg(inner) => {
            let a = expression(c, inner, base, counter, false)?;
            let f = operator_function(c, "-", false, &e.span)?;
            apply(c, &f, None, &[a], &e.span, base, counter, root)
        }
        ExprKind::Binary { op: bin, lhs, rhs } => {
            let a = expression(c, lhs, base, counter, false)?;
            let b = expression(c, rhs, base, counter, false)?;
            let f = operator_function(c, bin.symbol(), true, &e.span)?;
            apply(c, &f, None, &[a, b], &e.span, base, counter, root)
        }
        ExprKind::Call { func, args } => call(c, e, func, args, base, counter, root),
    }
}

fn describe_args(args: &[Arg]) -> String {
    let specs = args.iter().filter(|a| matches!(a, Arg::Spec(_))).count();
    let tensors = args.len() - specs;
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    match (specs, tensors) {
        (0, t) => plural(t, "tensor"),
        (s, t) => format!("{} and {}", plural(s, "spec string"), plural(t, "tensor")),
    }
}

/// A call `func(args)`: checked against the registry's entry for `func`
/// (its spec string and tensor count), then applied.
fn call(
    c: &mut Compiled,
    e: &Expr,
    func: &Ident,
    args: &[Arg],
    base: &str,
    counter: &mut usize,
    root: bool,
) -> Result<TensorId, ProgramError> {
    let name = func.text.as_str();
    if let Some((op, _)) = c.functions.get(name) {
        let op = op.clone();
        if args.len() != op.arity() || args.iter().any(|a| matches!(a, Arg::Spec(_))) {
            return Err(ProgramError::Arguments {
                func: name.to_string(),
                expected: match op.arity() {
                    1 => "1 tensor".to_string(),
                    n => format!("{n} tensors"),
                },
                given: describe_args(args),
                span: e.span.clone(),
            });
        }
        let mut operands = Vec::with_capacity(args.len());
        for a in args {
            match a {
                // A number is a scalar: a constant with no axes.
                Arg::Expr(Expr {
                    kind: ExprKind::Number(v),
                    span,
                }) => {
                    let t = (c.graph.constant(&v.to_string(), "|", 1))
                        .map_err(|err| graph_error(c, err, span, None))?;
                    c.map.tensors.push(TensorSite {
                        span: span.clone(),
                        spec: None,
                        values: None,
                    });
                    c.constants.insert(t, vec![*v]);
                    operands.push(t);
                }
                Arg::Expr(x) => operands.push(expression(c, x, base, counter, false)?),
                Arg::Spec(_) => {}
            }
        }
        return apply_op(
            c,
            name,
            Some(op),
            None,
            &operands,
            &e.span,
            base,
            counter,
            root,
        );
    }
    let Some(entry) = c.graph.registry().get(name) else {
        return Err(ProgramError::UnknownFunction {
            name: name.to_string(),
            span: func.span.clone(),
        });
    };
    let (takes_spec, tensors) = (entry.takes_spec(), entry.operands());
    let bad_args = || ProgramError::Arguments {
        func: name.to_string(),
        expected: entry.describe_arguments(),
        given: describe_args(args),
        span: e.span.clone(),
    };
    let (spec, rest) = match (takes_spec, args.split_first()) {
        (true, Some((Arg::Spec(s), rest))) => (Some(s), rest),
        (true, _) => return Err(bad_args()),
        (false, _) => (None, args),
    };
    if !tensors.contains(&rest.len()) || rest.iter().any(|a| matches!(a, Arg::Spec(_))) {
        return Err(bad_args());
    }
    let mut operands = Vec::with_capacity(rest.len());
    for a in rest {
        if let Arg::Expr(x) = a {
            operands.push(expression(c, x, base, counter, false)?);
        }
    }
    apply(c, name, spec, &operands, &e.span, base, counter, root)
}

/// A `function NAME = "WGSL"` statement: the function, checked to be an
/// operation, kept for the calls below it.
fn function(
    c: &mut Compiled,
    name: &Ident,
    source: &SpecText,
    span: &Span,
) -> Result<(), ProgramError> {
    if c.graph.registry().get(&name.text).is_some() || c.functions.contains_key(&name.text) {
        return Err(ProgramError::FunctionRedefined {
            name: name.text.clone(),
            span: name.span.clone(),
        });
    }
    #[cfg(feature = "call")]
    {
        let _ = span;
        let invalid = |kind: &'static str, message: String| ProgramError::InvalidFunction {
            name: name.text.clone(),
            kind,
            message,
            span: source.span.clone(),
        };
        let op = shape_call::CallOp::parse(&source.text)
            .map_err(|e| invalid(e.kind(), e.to_string()))?;
        if op.signature().name.as_ref() != name.text {
            return Err(ProgramError::FunctionName {
                name: name.text.clone(),
                found: op.signature().name.to_string(),
                span: name.span.clone(),
            });
        }
        c.functions
            .insert(name.text.clone(), (Arc::new(op), name.span.clone()));
        Ok(())
    }
    #[cfg(not(feature = "call"))]
    {
        let _ = source;
        Err(ProgramError::CallsUnavailable { span: span.clone() })
    }
}

/// Where an error goes in the program: the operation it names, the span
/// it is shown at (with its label) and notes at other spans.
struct Placement {
    op: Option<String>,
    primary: Option<Note>,
    notes: Vec<Note>,
}

/// The label of an error's primary span, for errors other than shape
/// errors (which [`Compiled::locate`] labels with their headline).
fn label_primary(error: &GraphError, at: &mut Placement) {
    if let (false, Some(p)) = (matches!(error, GraphError::Shape(_)), &mut at.primary) {
        p.text = match &error {
            GraphError::Arity { op: name, .. } => {
                at.op = Some(name.to_string());
                "wrong number of operands".into()
            }
            GraphError::Constant { .. } => "this constant".into(),
            GraphError::NotGiven { .. } => "nothing gives this shape".into(),
            GraphError::SliceOutOfRange { index, size, .. } => {
                format!("batch index {index} is outside 0..{size}")
            }
            // A label given where the error was placed stays.
            _ => std::mem::take(&mut p.text),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::syntax::parse;

    fn compiled(src: &str) -> Result<Compiled, ProgramError> {
        compile(&parse(src).map_err(ProgramError::from)?)
    }

    #[test]
    fn operations_are_named_after_their_statement() {
        let src = "input x: 2|3\nparam w\nparam b: 4\ny = relu(w @ x + b)\n";
        let c = compiled(src).unwrap();
        let names: Vec<&str> = c
            .graph
            .tensor_ids()
            .map(|t| c.graph.name(t).unwrap())
            .collect();
        assert_eq!(names, ["x", "w", "b", "y.1", "y.2", "y"]);
        let s = c.solve().unwrap();
        assert_eq!(
            s.shape(c.tensor("w").unwrap()).unwrap().to_string(),
            "|3->4"
        );
        assert_eq!(
            s.shape(c.tensor("y").unwrap()).unwrap().to_string(),
            "2|->4"
        );
        assert_eq!(c.results, vec![c.tensor("y").unwrap()]);
        // The op's span is the expression's.
        assert_eq!(&src[c.map.op_span(0).unwrap()], "w @ x");
        assert_eq!(&src[c.map.op_span(2).unwrap()], "relu(w @ x + b)");
    }

    #[test]
    fn an_assignment_into_an_existing_tensor_makes_a_new_version() {
        let src = "input d: 2, 3\ny = d + 1\nd[...] <- y * 2\nz = d + y\nd[...] <- z\n";
        let c = compile(&crate::syntax::parse(src).unwrap()).unwrap();
        let versions = c.versions("d");
        assert_eq!(versions.len(), 3);
        assert_eq!(c.first_version("d"), Some(versions[0]));
        assert_eq!(c.tensor("d"), Some(versions[2]));
        // `y` read the declaration, `z` the second version.
        let operands = |t: TensorId| -> Vec<TensorId> {
            let shape_graph::TensorKind::Result(op) = c.graph.kind(t).unwrap() else {
                panic!("a result")
            };
            c.graph.op(op).unwrap().1.to_vec()
        };
        assert_eq!(operands(c.tensor("y").unwrap())[0], versions[0]);
        assert_eq!(operands(c.tensor("z").unwrap())[0], versions[1]);
        assert_eq!(operands(versions[2])[0], versions[1]);
        // The results: `y`, `z` and the last version of `d` only.
        assert_eq!(
            c.results,
            vec![c.tensor("y").unwrap(), c.tensor("z").unwrap(), versions[2]]
        );
        let s = c.solve().unwrap();
        for t in versions {
            assert_eq!(s.shape(t).unwrap().to_string(), "|->2, 3");
        }
        // Only a name that exists is assigned into.
        let e = compile(&crate::syntax::parse("q[...] <- 1\n").unwrap()).unwrap_err();
        assert!(e.to_string().contains("unknown tensor `q`"), "{e}");
    }

    #[test]
    fn einsum_permute_transpose_and_slices() {
        let src = "input a: 5|2,3\ninput b: 5|3,4\nm = einsum(\"...|ij;...|jk=>...|ik\", a, b)\n\
                   t = permute(\"...|ik=>...|ki\", m)\nr = einsum(\"...|ki=>...|k\", t)\n\
                   s = batch_slice(r)\nu = transpose(s)\n";
        let c = compiled(src).unwrap();
        let s = c.solve().unwrap();
        let shape = |n: &str| s.shape(c.tensor(n).unwrap()).unwrap().to_string();
        assert_eq!(shape("m"), "5|->2, 4");
        assert_eq!(shape("t"), "5|->4, 2");
        assert_eq!(shape("r"), "5|->4");
        assert_eq!(shape("s"), "|->4");
        assert_eq!(shape("u"), "|4->");
    }

    #[test]
    fn literals_and_constants_carry_values() {
        let c = compiled("const k: 2 = [1, 2]\ny = k * 0.5\nz = y\n").unwrap();
        assert_eq!(c.constants[&c.tensor("k").unwrap()], vec![1.0, 2.0]);
        assert!(c.constants.values().any(|v| v == &vec![0.5]));
        let s = c.solve().unwrap();
        assert_eq!(s.shape(c.tensor("z").unwrap()).unwrap().to_string(), "|->2");
    }

    #[test]
    fn name_and_call_errors() {
        let e = compiled("y = relu(x)\n").unwrap_err();
        assert!(
            matches!(&e, ProgramError::UnknownName { name, span } if name == "x" && *span == (9..10))
        );
        let e = compiled("input x: 2\nx = relu(x)\n").unwrap_err();
        assert!(matches!(&e, ProgramError::Redefined { previous, .. } if *previous == (6..7)));
        let e = compiled("input x: 2\ny = gelu(x)\n").unwrap_err();
        assert!(e
            .to_string()
            .starts_with("unknown function `gelu`; the functions are id, neg"));
        let e = compiled("input x: 2\ny = einsum(x, x)\n").unwrap_err();
        assert_eq!(e.to_string(), "`einsum` takes a spec string, like \"ij;jk=>ik\", then 1 or 2 tensors, but was given 2 tensors");
        let e = compiled("input x: 2\ny = permute(\"ij;jk=>ik\", x)\n").unwrap_err();
        assert_eq!(e.kind(), "arguments");
    }

    #[test]
    fn spec_errors_point_into_the_text() {
        let src = "input x: 2|3|4\n";
        let e = compiled(src).unwrap_err();
        assert_eq!(e.kind(), "spec");
        assert_eq!(&src[e.span().unwrap()], "|");
        assert_eq!(e.span().unwrap(), 12..13);
        let src = "input x: 2,3\ny = permute(\"ij=>iz\", x)\n";
        let e = compiled(src).unwrap_err();
        assert_eq!(&src[e.span().unwrap()], "z");
    }

    #[test]
    fn shape_errors_name_where_each_fact_came_from() {
        let src = "input x: 8|784\nparam w\nh = w @ x\ninput z: 8|100\ny = w @ z\n";
        let e = compiled(src).unwrap_err();
        assert_eq!(e.kind(), "dim_mismatch");
        assert_eq!(e.op(), Some("compose"));
        let ProgramError::Graph { primary, notes, .. } = &e else {
            panic!("{e:?}")
        };
        let primary = primary.as_ref().unwrap();
        assert_eq!(&src[primary.span.clone()], "w @ z");
        assert_eq!(primary.text, "the inner sizes 784 and 100 differ (the axes a product contracts are equal, or the second is 1) at axis -1");
        let placed: Vec<&str> = notes.iter().map(|n| &src[n.span.clone()]).collect();
        assert_eq!(placed, ["784", "100"]);
        assert_eq!(Compiled::line_of(src, notes[1].span.start), 4);
    }
}
