//! Random programs in `shapec`'s text language that draw every production
//! of `docs/spec-grammar.md`, and the productions a parsed program uses.
//!
//! [`programs`] is a proptest strategy of [`GrammarProgram`]s: text built
//! statement by statement around concrete shapes the generator keeps, so
//! that nearly every program infers (and runs), with a few that are meant
//! to fail (a requirement that contradicts the rest). Each program lists
//! its statements with the names each defines and uses, so that tests can
//! reorder them topologically. Each program also draws the memory layout
//! of each dense input's data (C order for about half, else a Fortran,
//! permuted, sliced or stride-0 broadcast view: [`DataLayout`]), after its
//! statements, from the same stream of choices; [`runnable_with_layouts`]
//! gives the data so, and the layouts count as productions (`data:c`,
//! `data:fortran`, ...).
//!
//! [`productions`] maps a parsed program to the productions it contains
//! through exhaustive matches on the parser's syntax tree
//! ([`shape_lang::syntax`]) and the spec AST ([`shape_core::spec`]), and
//! [`all_productions`] lists every production those matches can give: a
//! new variant does not compile until it has a production, and a coverage
//! test then fails until the generator draws it.
//!
//! ```
//! use shape_tests::grammar::{all_productions, productions};
//! let p = shape_lang::syntax::parse("input x: 2, ..r..\ny = exp(x)\n").unwrap();
//! let used = productions(&p);
//! assert!(used.contains("decl:input"));
//! assert!(used.contains("flank:before"));
//! assert!(used.iter().all(|u| all_productions().contains(u)));
//! ```

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use shape_core::kernel::BinaryOp;
use shape_core::spec::{AxisKind, EinsumSpec, RowSpec, RowVarName, ShapeSpec};
use shape_core::{RaggedAxis, RowKind};
use shape_graph::{Registry, SizeBound};
use shape_lang::syntax::{Arg, BinOp, DeclKind, Expr, ExprKind, Program, SizeSource, Statement};
use shape_run::HostTensor;

use crate::strided::{strided_view, ViewKind};

/// One statement of a generated program, with the names it defines and
/// the names (tensors and sizes) it uses.
#[derive(Clone, Debug, PartialEq)]
pub struct Stmt {
    /// The statement's text, without its newline.
    pub text: String,
    /// The tensor or size names it defines.
    pub defines: Vec<String>,
    /// The tensor or size names it uses (which must be defined before it).
    pub uses: Vec<String>,
}

/// A generated program.
#[derive(Clone, Debug, PartialEq)]
pub struct GrammarProgram {
    /// Its statements, in order.
    pub statements: Vec<Stmt>,
    /// Whether it declares a run-time size (`size b` alone).
    pub run_time: bool,
    /// Whether it declares a ragged (`var`) input, which needs data to run.
    pub ragged: bool,
    /// Whether the generator added a requirement that contradicts the rest.
    pub meant_to_fail: bool,
    /// The productions the program's parsed text uses ([`productions`]),
    /// and `data:` followed by the layout of each dense input's data
    /// ([`DataLayout::production`]).
    pub productions: BTreeSet<String>,
    /// How each dense input's (and parameter's) data lies in memory when
    /// the program runs ([`runnable_with_layouts`]), by name. An input
    /// whose shape the generator does not know (one of a run-time size)
    /// or that is ragged is not listed: it stays in C order.
    pub layouts: BTreeMap<String, DataLayout>,
}

/// How a dense input's data lies in memory: C order, or a strided view
/// ([`strided_view`]) of a kind with the seed of its choices. The
/// generator draws a strided layout only where its view is not C order
/// for the input's shape (a broadcast needs an axis longer than 1; a
/// Fortran or permuted view, two), and C otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataLayout {
    /// C (row-major) order, as [`runnable`] gives the data.
    C,
    /// A view of [`strided_view`]: its kind, and the seed of its choices
    /// (which axes are permuted, which is broadcast).
    Strided(ViewKind, u64),
}

impl DataLayout {
    /// The production a layout stands for: `data:c`, `data:fortran`,
    /// `data:permuted`, `data:sliced` or `data:broadcast`.
    pub fn production(&self) -> &'static str {
        match self {
            DataLayout::C => "data:c",
            DataLayout::Strided(ViewKind::Fortran, _) => "data:fortran",
            DataLayout::Strided(ViewKind::Permuted, _) => "data:permuted",
            DataLayout::Strided(ViewKind::Sliced, _) => "data:sliced",
            DataLayout::Strided(ViewKind::Broadcast, _) => "data:broadcast",
        }
    }

    /// Every layout's production.
    fn productions() -> Vec<&'static str> {
        std::iter::once(DataLayout::C)
            .chain(ViewKind::ALL.map(|k| DataLayout::Strided(k, 0)))
            .map(|l| l.production())
            .collect()
    }
}

impl GrammarProgram {
    /// The program's text, one statement a line.
    pub fn text(&self) -> String {
        text_of(self.statements.iter())
    }
}

/// The text of statements, one a line.
pub fn text_of<'a>(statements: impl IntoIterator<Item = &'a Stmt>) -> String {
    statements
        .into_iter()
        .map(|s| format!("{}\n", s.text))
        .collect()
}

// ---------------------------------------------------------------------
// Productions, from the syntax tree.
// ---------------------------------------------------------------------

/// Declares a function that maps a value to its production by an
/// exhaustive `match` (no catch-all arm: a new variant does not compile
/// until it is given one) and a function that lists every production the
/// match can give.
macro_rules! productions_of {
    ($(#[$m:meta])* $f:ident, $all:ident, $t:ty, { $($p:pat => $name:expr),+ $(,)? }) => {
        $(#[$m])*
        fn $f(v: &$t) -> &'static str {
            #[allow(unused_variables)]
            match v {
                $($p => $name),+
            }
        }
        fn $all() -> Vec<&'static str> {
            vec![$($name),+]
        }
    };
}

productions_of!(statement_production, statement_productions, Statement, {
    Statement::Declare { .. } => "stmt:declare",
    Statement::Assign { .. } => "stmt:assign",
    Statement::AssignInto { .. } => "stmt:assign_into",
    Statement::AssignExisting { .. } => "stmt:assign_existing",
    Statement::RunTimeSize { .. } => "stmt:run_time_size",
    Statement::SizeBound { .. } => "stmt:size_bound",
    Statement::Size { .. } => "stmt:size",
    Statement::Require { .. } => "stmt:require",
    Statement::Function { .. } => "stmt:function",
});

productions_of!(decl_production, decl_productions, DeclKind, {
    DeclKind::Input => "decl:input",
    DeclKind::Param => "decl:param",
    DeclKind::Const => "decl:const",
});

productions_of!(bound_production, bound_productions, SizeBound, {
    SizeBound::AtLeast(_) => "size_bound:>=",
    SizeBound::AtMost(_) => "size_bound:<=",
    SizeBound::Equal(_) => "size_bound:==",
    SizeBound::Remainder { .. } => "size_bound:%",
});

productions_of!(source_production, source_productions, SizeSource, {
    SizeSource::Number(..) => "size:= number",
    SizeSource::Size(_) => "size:== size",
    SizeSource::Label { .. } => "size:= label of",
    SizeSource::RowVar { .. } => "size:= ..row.. of",
});

productions_of!(expr_production, expr_productions, ExprKind, {
    ExprKind::Name(_) => "expr:name",
    ExprKind::Number(_) => "expr:number",
    ExprKind::Neg(_) => "expr:neg",
    ExprKind::Binary { .. } => "expr:binary",
    ExprKind::Call { .. } => "expr:call",
});

/// The production of an infix operator.
fn binop_production(op: &BinOp) -> String {
    format!("op:{}", op.symbol())
}

/// Every infix operator the registry gives the language.
fn binop_productions() -> Vec<String> {
    (Registry::builtin().infix_operators().iter())
        .map(|(symbol, _)| format!("op:{symbol}"))
        .collect()
}

/// The binary pointwise functions as programs write them: the operator
/// where the scalar table gives one (`+`), the call otherwise (`max`).
fn pointwise_spellings() -> Vec<&'static str> {
    (BinaryOp::ALL.iter())
        .map(|op| op.infix_operator().map_or(op.name(), |(symbol, _)| symbol))
        .collect()
}

productions_of!(arg_production, arg_productions, Arg, {
    Arg::Expr(_) => "arg:expr",
    Arg::Spec(_) => "arg:spec",
});

productions_of!(axis_production, axis_productions, AxisKind, {
    AxisKind::Label(_) => "axis:label",
    AxisKind::Size(_) => "axis:size",
    AxisKind::LabeledSize(..) => "axis:label:size",
    AxisKind::Anonymous => "axis:_",
    AxisKind::Fixed(_) => "axis:fixed_index",
    AxisKind::Ragged => "axis:var",
    AxisKind::Affine(_) => "axis:affine",
});

productions_of!(row_kind_production, row_kind_productions, RowKind, {
    RowKind::Batch => "batch",
    RowKind::Input => "input",
    RowKind::Output => "output",
});

productions_of!(row_var_production, row_var_productions, RowVarName, {
    RowVarName::Named(_) => "..r..",
    RowVarName::OfKind(_) => "...",
});

/// Where a spec is written: the productions of its axes depend on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    Declaration,
    Require,
    AssignInto,
    Operand,
    Result,
}

productions_of!(place_production, place_productions, Place, {
    Place::Declaration => "declaration",
    Place::Require => "require",
    Place::AssignInto => "assign_into",
    Place::Operand => "einsum_operand",
    Place::Result => "einsum_result",
});

/// The productions of convolution axes, one per part of `affine`.
const AFFINE_PRODUCTIONS: [&str; 5] = [
    "affine:stride",
    "affine:dilation",
    "affine:padded",
    "affine:unpadded",
    "affine:kernel_taps",
];

/// The numbers of operands of `concat` the generator must draw.
const CONCAT_ARITIES: std::ops::RangeInclusive<usize> = 2..=5;

/// Every production [`productions`] can report.
pub fn all_productions() -> BTreeSet<String> {
    let mut all: BTreeSet<String> = BTreeSet::new();
    let s = |v: Vec<&'static str>| v.into_iter().map(str::to_string).collect::<Vec<_>>();
    all.extend(s(statement_productions()));
    all.extend(s(decl_productions()));
    all.extend(s(bound_productions()));
    all.extend(s(source_productions()));
    all.extend(s(expr_productions()));
    all.extend(binop_productions());
    all.extend(s(arg_productions()));
    all.extend(s(axis_productions()));
    all.extend(s(AFFINE_PRODUCTIONS.to_vec()));
    all.extend(s(DataLayout::productions()));
    all.insert("decl:param without spec".into());
    all.insert("const:unknown size".into());
    all.insert("const:row variable".into());
    all.insert("repeated_label:einsum_operand".into());
    all.insert("repeated_label:einsum_result".into());
    all.insert("repeated_label:declaration".into());
    all.insert("fixed_index:einsum_operand".into());
    all.insert("fixed_index:einsum_result".into());
    all.insert("label:size:einsum_result".into());
    all.insert("size_name:in spec".into());
    all.insert("size_name:in expression".into());
    all.insert("flank:before".into());
    all.insert("flank:after".into());
    all.insert("einsum:two operands".into());
    all.insert("ragged:nested".into());
    all.insert("ragged:first axis".into());
    for place in place_productions() {
        all.insert(format!("spec:{place}"));
    }
    for f in shape_lang::compile::function_names() {
        all.insert(format!("call:{f}"));
    }
    // A call of a `function` statement's function, a number argument
    // of one.
    all.insert("call:function".into());
    all.insert("call:function number".into());
    for n in CONCAT_ARITIES {
        all.insert(format!("call:concat/{n}"));
    }
    for kind in row_kind_productions() {
        for var in row_var_productions() {
            all.insert(format!("row_var:{var} in {kind}"));
        }
    }
    all
}

/// The productions `program` contains, read from its syntax tree.
pub fn productions(program: &Program) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let sizes: BTreeSet<String> = program
        .statements
        .iter()
        .filter_map(|s| match s {
            Statement::Size { name, .. }
            | Statement::RunTimeSize { name, .. }
            | Statement::SizeBound { name, .. } => Some(name.text.clone()),
            _ => None,
        })
        .collect();
    let tensors: BTreeSet<String> = program
        .statements
        .iter()
        .filter_map(|s| match s {
            Statement::Declare { name, .. }
            | Statement::Assign { name, .. }
            | Statement::AssignInto { name, .. } => Some(name.text.clone()),
            _ => None,
        })
        .collect();
    for s in &program.statements {
        out.insert(statement_production(s).to_string());
        match s {
            Statement::Declare {
                kind, spec, values, ..
            } => {
                out.insert(decl_production(kind).to_string());
                match spec {
                    Some(spec) => {
                        if let Ok(parsed) = ShapeSpec::parse(&spec.text) {
                            shape_spec(&parsed, Place::Declaration, &sizes, &mut out);
                            let ragged: Vec<bool> = parsed
                                .axes()
                                .map(|(_, a)| matches!(a.kind, AxisKind::Ragged))
                                .collect();
                            if ragged.iter().filter(|&&r| r).count() > 1 {
                                out.insert("ragged:nested".into());
                            }
                            if ragged.first() == Some(&true) {
                                out.insert("ragged:first axis".into());
                            }
                            if *kind == DeclKind::Const
                                && values.is_some()
                                && parsed.axes().any(|(_, a)| {
                                    matches!(a.kind, AxisKind::Label(ref l) if !sizes.contains(l))
                                })
                            {
                                out.insert("const:unknown size".into());
                            }
                            if *kind == DeclKind::Const && parsed.row_vars().next().is_some() {
                                out.insert("const:row variable".into());
                            }
                        }
                    }
                    None => {
                        if *kind == DeclKind::Param {
                            out.insert("decl:param without spec".into());
                        }
                    }
                }
            }
            Statement::Assign { expr, .. } => expression(expr, &sizes, &tensors, &mut out),
            Statement::AssignInto { spec, expr, .. } => {
                if let Ok(parsed) = ShapeSpec::parse(&spec.text) {
                    shape_spec(&parsed, Place::AssignInto, &sizes, &mut out);
                }
                expression(expr, &sizes, &tensors, &mut out);
            }
            Statement::AssignExisting { expr, .. } => expression(expr, &sizes, &tensors, &mut out),
            Statement::RunTimeSize { .. } => {}
            Statement::SizeBound { bound, .. } => {
                out.insert(bound_production(bound).to_string());
            }
            Statement::Size { source, .. } => {
                out.insert(source_production(source).to_string());
            }
            Statement::Require { spec, .. } => {
                if let Ok(parsed) = ShapeSpec::parse(&spec.text) {
                    shape_spec(&parsed, Place::Require, &sizes, &mut out);
                }
            }
            Statement::Function { .. } => {}
        }
    }
    // Calls of the program's own functions are one production.
    for s in &program.statements {
        if let Statement::Function { name, .. } = s {
            if out.remove(&format!("call:{}", name.text)) {
                out.insert("call:function".into());
            }
        }
    }
    for s in &program.statements {
        if let Statement::Assign { expr, .. } = s {
            function_numbers(expr, program, &mut out);
        }
    }
    out
}

/// `call:function number`: a number given to a `function` statement's
/// function.
fn function_numbers(e: &Expr, program: &Program, out: &mut BTreeSet<String>) {
    match &e.kind {
        ExprKind::Call { func, args } => {
            let own = program
                .statements
                .iter()
                .any(|s| matches!(s, Statement::Function { name, .. } if name.text == func.text));
            for a in args {
                if let Arg::Expr(x) = a {
                    if own && matches!(x.kind, ExprKind::Number(_)) {
                        out.insert("call:function number".into());
                    }
                    function_numbers(x, program, out);
                }
            }
        }
        ExprKind::Neg(x) => function_numbers(x, program, out),
        ExprKind::Binary { lhs, rhs, .. } => {
            function_numbers(lhs, program, out);
            function_numbers(rhs, program, out);
        }
        ExprKind::Name(_) | ExprKind::Number(_) => {}
    }
}

fn expression(
    e: &Expr,
    sizes: &BTreeSet<String>,
    tensors: &BTreeSet<String>,
    out: &mut BTreeSet<String>,
) {
    out.insert(expr_production(&e.kind).to_string());
    match &e.kind {
        ExprKind::Name(n) => {
            if sizes.contains(n) && !tensors.contains(n) {
                out.insert("size_name:in expression".into());
            }
        }
        ExprKind::Number(_) => {}
        ExprKind::Neg(inner) => expression(inner, sizes, tensors, out),
        ExprKind::Binary { op, lhs, rhs } => {
            out.insert(binop_production(op));
            expression(lhs, sizes, tensors, out);
            expression(rhs, sizes, tensors, out);
        }
        ExprKind::Call { func, args } => {
            out.insert(format!("call:{}", func.text));
            if func.text == "concat" {
                out.insert(format!("call:concat/{}", args.len()));
            }
            for a in args {
                out.insert(arg_production(a).to_string());
                match a {
                    Arg::Expr(inner) => expression(inner, sizes, tensors, out),
                    Arg::Spec(spec) => {
                        if let Ok(parsed) = EinsumSpec::parse(&spec.text) {
                            if parsed.operands.len() == 2 {
                                out.insert("einsum:two operands".into());
                            }
                            for o in &parsed.operands {
                                shape_spec(o, Place::Operand, sizes, out);
                            }
                            shape_spec(&parsed.result, Place::Result, sizes, out);
                        }
                    }
                }
            }
        }
    }
}

fn shape_spec(
    spec: &ShapeSpec,
    place: Place,
    sizes: &BTreeSet<String>,
    out: &mut BTreeSet<String>,
) {
    let place_name = place_production(&place);
    out.insert(format!("spec:{place_name}"));
    let mut labels: Vec<&str> = Vec::new();
    for kind in RowKind::ALL {
        let Some(row) = spec.row(kind) else { continue };
        row_spec(row, kind, out);
    }
    for (_, axis) in spec.axes() {
        out.insert(axis_production(&axis.kind).to_string());
        match &axis.kind {
            AxisKind::Label(l) => {
                if sizes.contains(l) && matches!(place, Place::Declaration | Place::Require) {
                    out.insert("size_name:in spec".into());
                }
                if labels.contains(&l.as_str()) {
                    if let Place::Declaration | Place::Operand | Place::Result = place {
                        out.insert(format!("repeated_label:{place_name}"));
                    }
                }
                labels.push(l);
            }
            AxisKind::LabeledSize(l, _) => {
                if place == Place::Result {
                    out.insert("label:size:einsum_result".into());
                }
                labels.push(l);
            }
            AxisKind::Fixed(_) => {
                if let Place::Operand | Place::Result = place {
                    out.insert(format!("fixed_index:{place_name}"));
                }
            }
            AxisKind::Affine(a) => {
                if a.stride.get() > 1 {
                    out.insert("affine:stride".into());
                }
                if a.dilation.get() > 1 {
                    out.insert("affine:dilation".into());
                }
                out.insert(
                    if a.padded {
                        "affine:padded"
                    } else {
                        "affine:unpadded"
                    }
                    .into(),
                );
                if matches!(a.kernel, Some((_, Some(_)))) {
                    out.insert("affine:kernel_taps".into());
                }
            }
            AxisKind::Size(_) | AxisKind::Anonymous | AxisKind::Ragged => {}
        }
    }
}

fn row_spec(row: &RowSpec, kind: RowKind, out: &mut BTreeSet<String>) {
    if let Some((var, _)) = &row.row_var {
        out.insert(format!(
            "row_var:{} in {}",
            row_var_production(var),
            row_kind_production(&kind)
        ));
        if !row.before.is_empty() {
            out.insert("flank:before".into());
        }
        if !row.axes.is_empty() {
            out.insert("flank:after".into());
        }
    }
}

// ---------------------------------------------------------------------
// The generator.
// ---------------------------------------------------------------------

/// A stream of choices; past its end every choice is the first option,
/// so that shrinking towards zeros gives simpler programs.
pub(crate) struct Choices {
    pub(crate) data: Vec<u32>,
    pub(crate) pos: usize,
}

impl Choices {
    pub(crate) fn below(&mut self, n: usize) -> usize {
        let v = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        if n == 0 {
            0
        } else {
            v as usize % n
        }
    }
    /// True with `pct` percent (false at zero).
    pub(crate) fn chance(&mut self, pct: usize) -> bool {
        self.below(100) >= 100 - pct
    }
    fn size(&mut self) -> u64 {
        1 + self.below(4) as u64
    }
    /// A seed: a whole choice (0 past the end).
    fn seed(&mut self) -> u64 {
        let v = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        u64::from(v)
    }
    pub(crate) fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// A tensor the generator has made: its name and concrete rows (batch,
/// input, output).
#[derive(Clone, Debug)]
struct Tensor {
    name: String,
    rows: [Vec<u64>; 3],
}

const B: usize = 0;
const I: usize = 1;
const O: usize = 2;

/// The state of a program being generated.
struct Gen {
    c: Choices,
    stmts: Vec<Stmt>,
    pool: Vec<Tensor>,
    /// Named sizes with their values.
    sizes: Vec<(String, u64)>,
    /// Captures possible: (what to write after `=`, the tensor, value).
    captures: Vec<(String, String, u64)>,
    next: usize,
    run_time: bool,
    ragged: bool,
    meant_to_fail: bool,
    /// Declaring the operand of a broadcast: no constant, whose element
    /// count over a row variable the broadcast would widen (see the
    /// report of issue 26's items 7 and 8).
    broadcast_operand: bool,
    /// The dense inputs and parameters declared, with their dims in
    /// memory order (batch, output, input), whose data's layouts are
    /// drawn last.
    dense: Vec<(String, Vec<u64>)>,
}

/// `label:size`, with one label per size, so that labels never disagree
/// where sizes meet.
fn labeled(n: u64) -> String {
    format!("s{n}:{n}")
}

const LETTERS: [&str; 12] = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l"];

fn join_entries(rows: &[Vec<String>; 3], write_all: bool, multi: bool) -> String {
    let sep = if multi { ", " } else { "" };
    let mut r: Vec<String> = rows.iter().map(|r| r.join(sep)).collect();
    if multi && rows.iter().all(|r| r.len() < 2) {
        // Multi-character mode needs a comma somewhere.
        let k = if rows[O].len() == 1 || (rows[B].is_empty() && rows[I].is_empty()) {
            O
        } else if rows[I].len() == 1 {
            I
        } else {
            B
        };
        r[k].push(',');
    }
    if write_all || !rows[B].is_empty() || !rows[I].is_empty() {
        format!("{}|{}->{}", r[B], r[I], r[O])
    } else {
        r[O].clone()
    }
}

fn needs_multi(rows: &[Vec<String>; 3]) -> bool {
    rows.iter().any(|r| {
        r.iter().any(|e| {
            !(e.starts_with("..")
                || (e.len() == 1 && e.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')))
        }) || r.windows(2).any(|w| {
            w[0].chars().all(|c| c.is_ascii_digit()) && w[1].chars().all(|c| c.is_ascii_digit())
        })
    })
}

impl Gen {
    fn fresh(&mut self, prefix: &str) -> String {
        self.next += 1;
        format!("{prefix}{}", self.next)
    }

    /// Notes that `name` is a dense input or parameter of `rows`.
    fn dense(&mut self, name: &str, rows: &[Vec<u64>; 3]) {
        let dims = [B, O, I].iter().flat_map(|&k| rows[k].clone()).collect();
        self.dense.push((name.to_string(), dims));
    }

    /// The layout of the data of a dense input of `dims` (memory order):
    /// C for half, the rest a strided view, which falls back to C where
    /// it would be C order anyway.
    fn layout(&mut self, dims: &[u64]) -> DataLayout {
        let kind = match self.c.below(8) {
            0..=3 => None,
            4 => Some(ViewKind::Fortran),
            5 => Some(ViewKind::Permuted),
            6 => Some(ViewKind::Sliced),
            _ => Some(ViewKind::Broadcast),
        };
        // Drawn whatever the kind, so that one choice's change does not
        // shift the rest of the stream.
        let seed = self.c.seed();
        let Some(kind) = kind else {
            return DataLayout::C;
        };
        let len = dims.iter().product::<u64>() as usize;
        let Ok(t) = HostTensor::new(dims.to_vec(), vec![0.0; len]) else {
            return DataLayout::C;
        };
        match strided_view(&t, kind, seed) {
            Some((view, _)) if !view.is_c_contiguous() => DataLayout::Strided(kind, seed),
            _ => DataLayout::C,
        }
    }

    fn push(&mut self, text: String, defines: Vec<String>, uses: Vec<String>) {
        self.stmts.push(Stmt {
            text,
            defines,
            uses,
        });
    }

    fn concrete(rows: &[Vec<u64>; 3]) -> [Vec<String>; 3] {
        rows.clone()
            .map(|r| r.iter().map(u64::to_string).collect::<Vec<_>>())
    }

    /// A full concrete spec of `rows`, every row written.
    fn full_spec(&mut self, rows: &[Vec<u64>; 3]) -> String {
        let e = Self::concrete(rows);
        let multi = needs_multi(&e) || self.c.chance(50);
        join_entries(&e, true, multi)
    }

    /// A declaration's spec of `rows`: numbers, labels (repeated where
    /// sizes repeat), `label:size`, `_`, size names, and at most one row
    /// variable per row with axes on either side. Returns the spec, the
    /// size names it uses, whether it leaves something for inference
    /// (then a requirement pins it), and the named row variables with
    /// their element counts.
    fn decl_spec(
        &mut self,
        rows: &[Vec<u64>; 3],
        allow_row_var: bool,
    ) -> (String, Vec<String>, bool, Vec<(String, u64)>) {
        let mut out: [Vec<String>; 3] = Default::default();
        let mut uses = Vec::new();
        let mut partial = false;
        let mut labels: Vec<(String, u64)> = Vec::new();
        let mut row_vars = Vec::new();
        let mut next_label = 0;
        for k in 0..3 {
            let row = &rows[k];
            let span = if allow_row_var && self.c.chance(30) {
                let start = self.c.below(row.len() + 1);
                let end = start + self.c.below(row.len() - start + 1);
                Some((start, end))
            } else {
                None
            };
            let mut i = 0;
            while i <= row.len() {
                if let Some((s, e)) = span {
                    if i == s {
                        partial = true;
                        if self.c.chance(50) {
                            let name = ["r", "q", "p"][k].to_string();
                            row_vars.push((name.clone(), row[s..e].iter().product()));
                            out[k].push(format!("..{name}.."));
                        } else {
                            out[k].push("...".into());
                        }
                        i = e;
                        if i == row.len() {
                            break;
                        }
                    }
                }
                if i == row.len() {
                    break;
                }
                let n = row[i];
                let entry = match self.c.below(10) {
                    0 | 1 => {
                        partial = true;
                        let reuse = labels.iter().find(|(_, m)| *m == n).cloned();
                        match reuse {
                            Some((l, _)) if self.c.chance(50) => l,
                            _ => {
                                let l = LETTERS[next_label].to_string();
                                next_label += 1;
                                labels.push((l.clone(), n));
                                l
                            }
                        }
                    }
                    2 if n > 1 => labeled(n),
                    3 => {
                        partial = true;
                        "_".into()
                    }
                    4 => match self.sizes.iter().find(|(_, v)| *v == n).cloned() {
                        Some((name, _)) => {
                            uses.push(name.clone());
                            name
                        }
                        None => n.to_string(),
                    },
                    _ => n.to_string(),
                };
                out[k].push(entry);
                i += 1;
            }
        }
        let multi = needs_multi(&out) || self.c.chance(40);
        let write_all = self.c.chance(30);
        (
            join_entries(&out, write_all, multi),
            uses,
            partial,
            row_vars,
        )
    }

    fn random_rows(&mut self, batch: bool) -> [Vec<u64>; 3] {
        let nb = if batch { self.c.below(3) } else { 0 };
        let ni = if self.c.chance(30) {
            1 + self.c.below(2)
        } else {
            0
        };
        let no = 1 + self.c.below(3);
        let mut row = |n: usize| (0..n).map(|_| self.c.size()).collect::<Vec<_>>();
        [row(nb), row(ni), row(no)]
    }

    /// Declares a tensor of `rows` (input, param or const), pinned by a
    /// requirement when its spec leaves sizes open.
    fn declare(&mut self, rows: [Vec<u64>; 3]) -> String {
        let kind = self.c.below(10);
        let name = self.fresh("x");
        let elems: u64 = rows.iter().flatten().product();
        if kind >= 8 && elems <= 64 && !self.broadcast_operand {
            // A constant, with one size (or a row variable of one axis)
            // left to its element count.
            let values: Vec<String> = (0..elems)
                .map(|v| format!("{}", (v % 7) as f32 - 3.0))
                .collect();
            let mut e = Self::concrete(&rows);
            let mut uses = Vec::new();
            let choice = self.c.below(3);
            let axes: Vec<(usize, usize)> = (0..3)
                .flat_map(|k| (0..rows[k].len()).map(move |i| (k, i)))
                .collect();
            if choice > 0 && !axes.is_empty() {
                let &(k, i) = self.c.pick(&axes);
                e[k][i] = if choice == 1 {
                    "m".into()
                } else {
                    "..n..".into()
                };
            } else if let Some((s, v)) = self.sizes.first().cloned() {
                if let Some(pos) = rows[O].iter().position(|&n| n == v) {
                    e[O][pos] = s.clone();
                    uses.push(s);
                }
            }
            let multi = needs_multi(&e) || self.c.chance(40);
            let spec = join_entries(&e, self.c.chance(30), multi);
            self.push(
                format!("const {name}: {spec} = [{}]", values.join(", ")),
                vec![name.clone()],
                uses,
            );
        } else if kind >= 5 && self.c.chance(30) && rows[B].is_empty() {
            // A parameter without a spec: a requirement gives its shape.
            self.push(format!("param {name}"), vec![name.clone()], vec![]);
            self.dense(&name, &rows);
            let spec = self.full_spec(&rows);
            self.push(
                format!("require {name}: {spec}"),
                vec![],
                vec![name.clone()],
            );
        } else {
            let word = if kind >= 5 { "param" } else { "input" };
            let (spec, mut uses, partial, row_vars) = self.decl_spec(&rows, true);
            self.push(
                format!("{word} {name}: {spec}"),
                vec![name.clone()],
                uses.clone(),
            );
            self.dense(&name, &rows);
            for (r, count) in row_vars {
                self.captures
                    .push((format!("..{r}.. of {name}"), name.clone(), count));
            }
            if partial {
                let spec = self.full_spec(&rows);
                uses.clear();
                self.push(
                    format!("require {name}: {spec}"),
                    vec![],
                    vec![name.clone()],
                );
            }
        }
        self.pool.push(Tensor {
            name: name.clone(),
            rows,
        });
        name
    }

    fn tensor(&mut self) -> Tensor {
        if self.pool.is_empty() || self.c.chance(10) {
            let rows = self.random_rows(true);
            self.declare(rows);
        }
        let i = self.c.below(self.pool.len());
        self.pool[self.pool.len() - 1 - i].clone()
    }

    fn result(&mut self, name: String, rows: [Vec<u64>; 3]) {
        self.pool.push(Tensor { name, rows });
    }

    /// An expression of the shape of `t`: leaves are `t`, tensors of the
    /// same shape and numbers.
    fn expr(&mut self, t: &Tensor, depth: usize, uses: &mut Vec<String>) -> String {
        let leaf = depth == 0 || self.c.chance(30);
        if leaf {
            let same: Vec<String> = self
                .pool
                .iter()
                .filter(|u| u.rows == t.rows)
                .map(|u| u.name.clone())
                .collect();
            return match self.c.below(6) {
                0 if !t.rows[O].is_empty() => format!("{}.5", self.c.below(3)),
                1 if !t.rows[O].is_empty() && !self.sizes.is_empty() => {
                    let (s, _) = self.c.pick(&self.sizes).clone();
                    uses.push(s.clone());
                    s
                }
                2 => {
                    let n = self.c.pick(&same).clone();
                    uses.push(n.clone());
                    n
                }
                _ => {
                    uses.push(t.name.clone());
                    t.name.clone()
                }
            };
        }
        let a = self.expr(t, depth - 1, uses);
        match self.c.below(5) {
            0 => {
                // `id` and the scalar table's functions, as the registry has them.
                let functions: Vec<&str> = std::iter::once("id")
                    .chain(shape_core::kernel::UnaryOp::ALL.iter().map(|op| op.name()))
                    .collect();
                let f = *self.c.pick(&functions);
                format!("{f}({a})")
            }
            1 => format!("-{a}"),
            2 => {
                let functions: Vec<&str> = BinaryOp::ALL.iter().map(|op| op.name()).collect();
                let f = *self.c.pick(&functions);
                let b = self.expr(t, depth - 1, uses);
                format!("{f}({a}, {b})")
            }
            _ => {
                let operators: Vec<&str> = (pointwise_spellings().into_iter())
                    .filter(|f| !f.starts_with(char::is_alphabetic))
                    .collect();
                let op = *self.c.pick(&operators);
                let b = self.expr(t, depth - 1, uses);
                // Keep `t` in the expression, so its shape is `t`'s.
                let b = if self.c.chance(50) {
                    format!("({b})")
                } else {
                    b
                };
                format!("{a} {op} {b}")
            }
        }
    }

    fn step(&mut self) {
        match self.c.below(23) {
            22 => self.function_call(),
            0 | 1 => {
                let rows = self.random_rows(true);
                self.declare(rows);
            }
            2..=4 => self.elementwise(),
            5 => self.broadcast_binary(),
            6 => self.compose(),
            7 => {
                let t = self.tensor();
                let y = self.fresh("y");
                self.push(
                    format!("{y} = transpose({})", t.name),
                    vec![y.clone()],
                    vec![t.name],
                );
                let [b, i, o] = t.rows;
                self.result(y, [b, o, i]);
            }
            8 => self.batch_slice(),
            9..=11 => self.einsum(),
            12 => self.binary_einsum(),
            13 => self.convolution(),
            14 => self.concat(),
            15 if self.c.chance(50) => self.assign_into(),
            15 => self.assign_existing(),
            16 => self.size_statement(),
            17 => self.capture(),
            18 => self.bound(),
            19 => {
                // A run-time size, on a tensor of its own.
                self.run_time = true;
                let s = self.fresh("rt");
                self.push(format!("size {s}"), vec![s.clone()], vec![]);
                let x = self.fresh("xr");
                let n = self.c.size();
                self.push(format!("input {x}: {s}, {n}"), vec![x.clone()], vec![s]);
                let y = self.fresh("yr");
                self.push(format!("{y} = exp({x}) * 2"), vec![y], vec![x]);
            }
            20 => {
                // A ragged input (multi-character mode): after an axis, or
                // first in memory (one row, as DyND's top-level var).
                // Or nested: sentences of words of characters, summed
                // along the characters.
                self.ragged = true;
                let x = self.fresh("xv");
                let n = self.c.size();
                let nested = match self.c.below(3) {
                    0 => None,
                    1 => Some(format!("var, {n}")),
                    _ => Some(format!("{n}, var")),
                };
                let spec = nested.clone().unwrap_or_else(|| format!("{n}, var, var"));
                self.push(format!("input {x}: {spec}"), vec![x.clone()], vec![]);
                let y = self.fresh("yv");
                self.push(format!("{y} = relu({x})"), vec![y.clone()], vec![x]);
                if nested.is_none() {
                    let z = self.fresh("zv");
                    let sum = format!("{z} = einsum(\"ijk=>ij\", {y}) * 2");
                    self.push(sum, vec![z], vec![y]);
                }
            }
            _ => {
                // A requirement restating a shape.
                let t = self.tensor();
                let spec = self.full_spec(&t.rows);
                self.push(format!("require {}: {spec}", t.name), vec![], vec![t.name]);
            }
        }
    }

    /// A `function` statement (a WGSL function of a vector and a scalar)
    /// and a call of it, on a new tensor whose output row is the vector's
    /// size, inside a built-in expression half of the time.
    fn function_call(&mut self) {
        let n = 2 + self.c.below(3) as u64;
        let mut rows = self.random_rows(true);
        rows[I] = vec![];
        rows[O] = vec![n];
        let x = self.declare(rows.clone());
        let f = self.fresh("f");
        let v = format!("vec{n}<f32>");
        let (body, ret) = match self.c.below(3) {
            0 => ("f32 { return dot(v, v) * s; }".to_string(), vec![]),
            1 => (
                format!("{v} {{ return clamp(v * s, {v}(-1.0), {v}(1.0)); }}"),
                vec![n],
            ),
            _ => (
                "f32 { var m = v.x; if (v.y > m) { m = v.y; } return m + s; }".to_string(),
                vec![],
            ),
        };
        self.push(
            format!("function {f} = \"fn {f}(v: {v}, s: f32) -> {body}\""),
            vec![f.clone()],
            vec![],
        );
        let y = self.fresh("y");
        let call = if self.c.chance(50) {
            format!("{f}({x}, 0.5)")
        } else {
            format!("{f}({x}, -0.25)")
        };
        let e = if self.c.chance(50) {
            format!("relu({call})")
        } else {
            call
        };
        self.push(format!("{y} = {e}"), vec![y.clone()], vec![f, x]);
        self.result(y, [rows[B].clone(), vec![], ret]);
    }

    fn elementwise(&mut self) {
        let t = self.tensor();
        let mut uses = Vec::new();
        let depth = 1 + self.c.below(3);
        let mut e = self.expr(&t, depth, &mut uses);
        let shaped = self
            .pool
            .iter()
            .any(|u| u.rows == t.rows && uses.contains(&u.name));
        if !shaped {
            // Only numbers: add `t`, so that the result has its shape.
            e = format!("({e}) + {}", t.name);
            uses.push(t.name.clone());
        }
        let y = self.fresh("y");
        uses.dedup();
        self.push(format!("{y} = {e}"), vec![y.clone()], uses);
        self.result(y, t.rows);
    }

    /// `t OP u` with `u` a new tensor that broadcasts to `t`.
    fn broadcast_binary(&mut self) {
        let t = self.tensor();
        let mut rows = t.rows.clone();
        for row in rows.iter_mut() {
            if !row.is_empty() && self.c.chance(30) {
                row.remove(0);
            }
            for n in row.iter_mut() {
                if self.c.chance(20) {
                    *n = 1;
                }
            }
        }
        if rows[O].is_empty() {
            rows[O] = vec![1];
        }
        self.broadcast_operand = true;
        let u = self.declare(rows);
        self.broadcast_operand = false;
        let y = self.fresh("y");
        let (a, b) = if self.c.chance(50) {
            (t.name.clone(), u.clone())
        } else {
            (u.clone(), t.name.clone())
        };
        let f = *self.c.pick(&pointwise_spellings());
        let e = if !f.starts_with(char::is_alphabetic) {
            format!("{a} {f} {b}")
        } else {
            format!("{f}({a}, {b})")
        };
        self.push(
            format!("{y} = {e}"),
            vec![y.clone()],
            vec![t.name.clone(), u],
        );
        let mut out = t.rows.clone();
        if out[O].is_empty() {
            out[O] = vec![1];
        }
        self.result(y, out);
    }

    fn compose(&mut self) {
        let t = self.tensor();
        let w = self.fresh("w");
        let m = self.c.size();
        let y = self.fresh("y");
        let rows = [t.rows[B].clone(), t.rows[I].clone(), vec![m]];
        let wrows = [vec![], t.rows[O].clone(), vec![m]];
        self.dense(&w, &wrows);
        // A 1 in `t`'s output row, or none, would leave `w`'s input size
        // open.
        if self.c.chance(50) && !t.rows[O].contains(&1) && !t.rows[O].is_empty() {
            self.push(format!("param {w}"), vec![w.clone()], vec![]);
            let e = if self.c.chance(50) {
                format!("{w} @ {}", t.name)
            } else {
                format!("compose({w}, {})", t.name)
            };
            self.push(
                format!("{y} = {e}"),
                vec![y.clone()],
                vec![w, t.name.clone()],
            );
            let spec = self.full_spec(&rows);
            self.push(format!("require {y}: {spec}"), vec![], vec![y.clone()]);
        } else {
            let spec = self.full_spec(&wrows);
            self.push(format!("param {w}: {spec}"), vec![w.clone()], vec![]);
            self.push(
                format!("{y} = {w} @ {}", t.name),
                vec![y.clone()],
                vec![w, t.name.clone()],
            );
        }
        self.result(y, rows);
    }

    fn batch_slice(&mut self) {
        let rows = {
            let mut r = self.random_rows(false);
            r[B] = vec![self.c.size(), self.c.size()];
            r
        };
        let t = if let Some(t) = self
            .pool
            .iter()
            .rev()
            .find(|t| !t.rows[B].is_empty())
            .cloned()
        {
            if self.c.chance(50) {
                t
            } else {
                let n = self.declare(rows.clone());
                Tensor { name: n, rows }
            }
        } else {
            let n = self.declare(rows.clone());
            Tensor { name: n, rows }
        };
        let y = self.fresh("y");
        let e = if self.c.chance(50) {
            format!("batch_slice({})", t.name)
        } else {
            format!("batch_slice_range(\"{}\", {})", t.rows[B][0], t.name)
        };
        self.push(format!("{y} = {e}"), vec![y.clone()], vec![t.name.clone()]);
        let mut out = t.rows.clone();
        out[B].remove(0);
        self.result(y, out);
    }

    /// A one-operand einsum (`einsum`, `permute`, `einsum_max`, ...) of a
    /// tensor: labels kept, moved or reduced, fixed indices, `_`, a
    /// diagonal, a row variable with axes on both sides, and in the
    /// result fixed indices, `label:size` and a diagonal.
    fn einsum(&mut self) {
        let t = self.tensor();
        let mut next = 0usize;
        let mut ops: [Vec<String>; 3] = Default::default();
        // Kept items per row: (entry text, sizes it stands for).
        let mut kept: [Vec<(String, Vec<u64>)>; 3] = Default::default();
        let mut labels: Vec<(String, u64)> = Vec::new();
        let mut captures = Vec::new();
        let mut spans = [None; 3];
        for (k, span) in spans.iter_mut().enumerate() {
            let len = t.rows[k].len();
            if self.c.chance(35) {
                let s = self.c.below(len + 1);
                *span = Some((s, s + self.c.below(len - s + 1)));
            }
        }
        for k in 0..3 {
            let row = &t.rows[k];
            let span = spans[k];
            let mut i = 0;
            loop {
                if let Some((s, e)) = span {
                    if i == s {
                        let named = self.c.chance(50);
                        let text = if named {
                            ["..r..", "..q..", "..p.."][k].to_string()
                        } else {
                            "...".to_string()
                        };
                        ops[k].push(text.clone());
                        // `...` stays in its row; a named one may move.
                        let mut to = if named && self.c.chance(30) {
                            self.c.below(3)
                        } else {
                            k
                        };
                        if to != k && spans[to].is_some() {
                            to = k;
                        }
                        kept[to].push((text.clone(), row[s..e].to_vec()));
                        if named {
                            captures
                                .push((format!("{text} of"), row[s..e].iter().product::<u64>()));
                        }
                        i = e;
                    }
                }
                if i >= row.len() {
                    break;
                }
                let n = row[i];
                match self.c.below(10) {
                    0 => ops[k].push(self.c.below(n as usize).to_string()),
                    1 => ops[k].push("_".into()),
                    2 => {
                        // Reduced.
                        let l = LETTERS[next].to_string();
                        next += 1;
                        ops[k].push(l.clone());
                        labels.push((l, n));
                    }
                    3 if labels.iter().any(|(_, m)| *m == n) => {
                        // A diagonal: a label written twice.
                        let (l, _) = labels
                            .iter()
                            .find(|(_, m)| *m == n)
                            .cloned()
                            .unwrap_or_default();
                        ops[k].push(l);
                    }
                    _ => {
                        let l = LETTERS[next].to_string();
                        next += 1;
                        ops[k].push(l.clone());
                        labels.push((l.clone(), n));
                        kept[k].push((l, vec![n]));
                    }
                }
                i += 1;
            }
        }
        // Shuffle kept items within their rows, and move a label across rows.
        for row in kept.iter_mut() {
            if row.len() > 1 && self.c.chance(50) {
                let j = self.c.below(row.len());
                row.swap(0, j);
            }
        }
        if self.c.chance(20) {
            let from = self.c.below(3);
            if let Some(pos) = kept[from].iter().position(|(e, _)| !e.starts_with('.')) {
                let item = kept[from].remove(pos);
                let to = self.c.below(3);
                kept[to].push(item);
            }
        }
        let mut res: [Vec<String>; 3] = Default::default();
        let mut out: [Vec<u64>; 3] = Default::default();
        for k in 0..3 {
            for (e, sizes) in &kept[k] {
                res[k].push(e.clone());
                out[k].extend(sizes);
            }
        }
        match self.c.below(8) {
            0 => {
                let ix = self.c.below(3);
                res[O].push(ix.to_string());
                out[O].push(ix as u64 + 1);
            }
            1 => {
                let n = self.c.size();
                res[O].push(labeled(n));
                out[O].push(n);
            }
            2 => {
                if let Some((l, n)) = kept[O]
                    .iter()
                    .find(|(e, _)| !e.starts_with('.'))
                    .map(|(e, s)| (e.clone(), s[0]))
                {
                    res[O].push(l);
                    out[O].push(n);
                }
            }
            _ => {}
        }
        let multi = needs_multi(&ops) || needs_multi(&res) || self.c.chance(50);
        let spec = format!(
            "{}=>{}",
            join_entries(&ops, true, multi),
            join_entries(&res, true, multi)
        );
        let f = *self.c.pick(&[
            "einsum",
            "permute",
            "einsum_max",
            "einsum_min",
            "einsum_prod",
        ]);
        let y = self.fresh("y");
        self.push(
            format!("{y} = {f}(\"{spec}\", {})", t.name),
            vec![y.clone()],
            vec![t.name.clone()],
        );
        for (l, n) in labels {
            self.captures.push((format!("{l} of {y}"), y.clone(), n));
        }
        for (text, n) in captures {
            self.captures.push((format!("{text} {y}"), y.clone(), n));
        }
        self.result(y, out);
    }

    /// `einsum("...|I->O;|J=>...|R", t, u)`: `u` a new weight without
    /// batch axes, sharing some of `t`'s labels.
    fn binary_einsum(&mut self) {
        let t = self.tensor();
        let mut next = 0;
        let mut a: [Vec<String>; 3] = Default::default();
        let mut labels: Vec<(String, u64, bool)> = Vec::new();
        a[B].push("...".into());
        for k in [I, O] {
            for &n in &t.rows[k] {
                let l = LETTERS[next].to_string();
                next += 1;
                a[k].push(l.clone());
                labels.push((l, n, false));
            }
        }
        let mut b_entries = Vec::new();
        let mut b_rows: [Vec<u64>; 3] = Default::default();
        for (l, n, shared) in labels.iter_mut() {
            if self.c.chance(40) {
                *shared = true;
                b_entries.push(l.clone());
                b_rows[O].push(*n);
            }
        }
        let l = LETTERS[next].to_string();
        let n = self.c.size();
        b_entries.push(l.clone());
        b_rows[O].push(n);
        labels.push((l, n, true));
        let mut res = vec![];
        let mut out = vec![];
        for (l, n, _) in &labels {
            if self.c.chance(60) {
                res.push(l.clone());
                out.push(*n);
            }
        }
        let spec = format!(
            "{};|{}=>...|{}",
            join_entries(&a, true, true),
            b_entries.join(", "),
            res.join(", ")
        );
        let u = self.fresh("w");
        let uspec = self.full_spec(&b_rows);
        self.push(format!("param {u}: {uspec}"), vec![u.clone()], vec![]);
        self.dense(&u, &b_rows);
        let f = *self
            .c
            .pick(&["einsum", "einsum_max", "einsum_min", "einsum_prod"]);
        let y = self.fresh("y");
        self.push(
            format!("{y} = {f}(\"{spec}\", {}, {u})", t.name),
            vec![y.clone()],
            vec![t.name.clone(), u],
        );
        for (l, n, _) in labels {
            self.captures.push((format!("{l} of {y}"), y.clone(), n));
        }
        self.result(y, [t.rows[B].clone(), vec![], out]);
    }

    /// A convolution or pooling over a new input: stride, dilation,
    /// padding, a kernel operand or a number of taps.
    fn convolution(&mut self) {
        let o = self.c.size();
        let s = 1 + self.c.below(2) as u64;
        let d = 1 + self.c.below(2) as u64;
        let k = 1 + self.c.below(3) as u64;
        let padded = self.c.chance(50);
        let n = if padded {
            s * o
        } else {
            s * (o - 1) + d * (k - 1) + 1
        };
        let ch = self.c.size();
        let batch = self.c.size();
        let x = self.fresh("img");
        self.push(
            format!("input {x}: {batch}|{n}, {ch}"),
            vec![x.clone()],
            vec![],
        );
        self.dense(&x, &[vec![batch], vec![], vec![n, ch]]);
        let mut axis = String::new();
        if s > 1 {
            axis += &format!("{s}*");
        }
        axis += if padded { "o=+" } else { "o<+" };
        if d > 1 {
            axis += &format!("{d}*");
        }
        let y = self.fresh("y");
        let pooling = self.c.chance(50);
        if pooling {
            let f = *self.c.pick(&["einsum", "einsum_max", "einsum_min"]);
            self.push(
                format!("{y} = {f}(\"...|{axis}a:{k}, c=>...|o, c\", {x})"),
                vec![y.clone()],
                vec![x.clone()],
            );
            self.result(y, [vec![batch], vec![], vec![o, ch]]);
        } else {
            let f = if padded {
                "einsum"
            } else {
                *self.c.pick(&["einsum", "einsum_max"])
            };
            let w = self.fresh("kw");
            let m = self.c.size();
            self.push(
                format!("param {w}: {k}, {ch}, {m}"),
                vec![w.clone()],
                vec![],
            );
            self.dense(&w, &[vec![], vec![], vec![k, ch, m]]);
            self.push(
                format!("{y} = {f}(\"...|{axis}a, c;a, c, f=>...|o, f\", {x}, {w})"),
                vec![y.clone()],
                vec![x, w],
            );
            self.result(y, [vec![batch], vec![], vec![o, m]]);
        }
    }

    fn concat(&mut self) {
        let t = self.tensor();
        if t.rows[O].is_empty() {
            return;
        }
        let parts = 2 + self.c.below(4);
        let mut names = vec![t.name.clone()];
        let mut total = *t.rows[O].last().unwrap_or(&1);
        for _ in 1..parts {
            if self.c.chance(30) {
                names.push(t.name.clone());
                total += t.rows[O].last().unwrap_or(&1);
            } else {
                let mut rows = t.rows.clone();
                let m = self.c.size();
                if let Some(last) = rows[O].last_mut() {
                    *last = m;
                }
                total += m;
                self.broadcast_operand = true;
                names.push(self.declare(rows));
                self.broadcast_operand = false;
            }
        }
        let y = self.fresh("y");
        let mut uses = names.clone();
        uses.dedup();
        self.push(
            format!("{y} = concat({})", names.join(", ")),
            vec![y.clone()],
            uses,
        );
        let mut out = t.rows.clone();
        if let Some(last) = out[O].last_mut() {
            *last = total;
        }
        self.result(y, out);
    }

    /// `d: SHAPE <- t`, with a new leading axis or a 1 of `t` widened.
    fn assign_into(&mut self) {
        let t = self.tensor();
        let mut rows = t.rows.clone();
        if self.c.chance(50) || rows[O].is_empty() {
            rows[O].insert(0, self.c.size());
        }
        let mut e = Self::concrete(&rows);
        if self.c.chance(40) && rows[O][0] > 1 {
            e[O][0] = labeled(rows[O][0]);
        }
        let multi = needs_multi(&e) || self.c.chance(50);
        let spec = join_entries(&e, self.c.chance(50), multi);
        let d = self.fresh("d");
        let src = if self.c.chance(30) {
            format!("{} * 2", t.name)
        } else {
            t.name.clone()
        };
        self.push(
            format!("{d}: {spec} <- {src}"),
            vec![d.clone()],
            vec![t.name.clone()],
        );
        self.result(d, rows);
    }

    /// `d[...] <- EXPR` into a tensor that exists, making its next
    /// version: a number, a tensor of a suffix of its output row, or an
    /// expression of its shape (which may read `d` itself). Not into a
    /// tensor a capture names: a label is looked for in the spec of the
    /// operation that made the tensor's last version.
    fn assign_existing(&mut self) {
        let t = self.tensor();
        if self.captures.iter().any(|(_, of, _)| *of == t.name) {
            return self.assign_into();
        }
        let mut uses = vec![t.name.clone()];
        let suffixes: Vec<String> = self
            .pool
            .iter()
            .filter(|u| {
                u.name != t.name
                    && u.rows[B] == t.rows[B]
                    && u.rows[I] == t.rows[I]
                    && u.rows[O].len() < t.rows[O].len()
                    && t.rows[O].ends_with(&u.rows[O])
            })
            .map(|u| u.name.clone())
            .collect();
        let src = match self.c.below(3) {
            0 => self.c.pick(&["0.5", "-2", "3"]).to_string(),
            1 if !suffixes.is_empty() => {
                let u = self.c.pick(&suffixes).clone();
                uses.push(u.clone());
                u
            }
            _ => {
                let depth = 1 + self.c.below(2);
                self.expr(&t, depth, &mut uses)
            }
        };
        let target = if self.c.chance(20) {
            format!("{} [ ... ]", t.name)
        } else {
            format!("{}[...]", t.name)
        };
        self.push(format!("{target} <- {src}"), vec![t.name.clone()], uses);
    }

    fn size_statement(&mut self) {
        let s = self.fresh("n");
        if !self.sizes.is_empty() && self.c.chance(40) {
            let (other, v) = self.c.pick(&self.sizes).clone();
            self.push(format!("size {s} == {other}"), vec![s.clone()], vec![other]);
            self.sizes.push((s, v));
        } else {
            let v = self.c.size();
            self.push(format!("size {s} = {v}"), vec![s.clone()], vec![]);
            self.sizes.push((s.clone(), v));
        }
        // Use it in a declaration.
        let mut rows = self.random_rows(true);
        let v = self.sizes.last().map_or(1, |(_, v)| *v);
        rows[O][0] = v;
        self.declare(rows);
    }

    fn capture(&mut self) {
        if self.captures.is_empty() {
            self.einsum();
        }
        if self.captures.is_empty() {
            return;
        }
        let (text, of, v) = self.c.pick(&self.captures).clone();
        if v < 2 {
            // An axis of 1 may be one that broadcasting does not size.
            return;
        }
        let s = self.fresh("n");
        self.push(format!("size {s} = {text}"), vec![s.clone()], vec![of]);
        self.sizes.push((s, v));
        if self.c.chance(50) {
            let mut rows = self.random_rows(false);
            rows[O][0] = v;
            self.declare(rows);
        } else {
            self.elementwise();
        }
    }

    fn bound(&mut self) {
        if self.sizes.is_empty() {
            self.size_statement();
        }
        let (s, v) = self.c.pick(&self.sizes).clone();
        let text = match self.c.below(4) {
            0 => format!("size {s} >= {}", self.c.below(v as usize + 1)),
            1 => format!("size {s} <= {}", v + self.c.below(3) as u64),
            2 => format!("size {s} == {v}"),
            _ => {
                let m = 1 + self.c.below(3) as u64;
                format!("size {s} % {m} == {}", v % m)
            }
        };
        self.push(text, vec![], vec![s]);
    }
}

/// Generates a program from a stream of choices.
pub fn generate(choices: Vec<u32>) -> GrammarProgram {
    let mut g = Gen {
        c: Choices {
            data: choices,
            pos: 0,
        },
        stmts: Vec::new(),
        pool: Vec::new(),
        sizes: Vec::new(),
        captures: Vec::new(),
        next: 0,
        run_time: false,
        ragged: false,
        meant_to_fail: false,
        broadcast_operand: false,
        dense: Vec::new(),
    };
    let rows = g.random_rows(true);
    g.declare(rows);
    let steps = 2 + g.c.below(7);
    for _ in 0..steps {
        g.step();
    }
    if g.c.chance(5) {
        // A requirement that contradicts the rest.
        let t = g.pool[g.c.below(g.pool.len())].clone();
        let mut rows = t.rows.clone();
        match rows[O].first_mut() {
            Some(n) => *n += 1,
            None => rows[O].push(2),
        }
        let spec = g.full_spec(&rows);
        g.push(format!("require {}: {spec}", t.name), vec![], vec![t.name]);
        g.meant_to_fail = true;
    }
    // The layouts last: the statements of a stream stay what they were
    // before layouts were drawn.
    let mut layouts = BTreeMap::new();
    for (name, dims) in std::mem::take(&mut g.dense) {
        let layout = g.layout(&dims);
        layouts.insert(name, layout);
    }
    let mut p = GrammarProgram {
        statements: g.stmts,
        run_time: g.run_time,
        ragged: g.ragged,
        meant_to_fail: g.meant_to_fail,
        productions: BTreeSet::new(),
        layouts,
    };
    if let Ok(parsed) = shape_lang::syntax::parse(&p.text()) {
        p.productions = productions(&parsed);
    }
    p.productions
        .extend(p.layouts.values().map(|l| l.production().to_string()));
    p
}

/// Random programs that draw every production of the grammar.
pub fn programs() -> impl Strategy<Value = GrammarProgram> {
    prop::collection::vec(any::<u32>(), 300).prop_map(generate)
}

// ---------------------------------------------------------------------
// Inferring and running program text.
// ---------------------------------------------------------------------

/// What inference says of a program's text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inferred {
    /// Every tensor's shape by name (symbolic where a run-time size is),
    /// and every named size's value.
    Shapes(std::collections::BTreeMap<String, String>),
    /// The program does not parse, compile or solve.
    Error {
        /// The error's kind (`dim_mismatch`).
        kind: String,
        /// Its class, for a solver error ([`shape_solver::ShapeError::class`]).
        class: Option<shape_solver::ErrorClass>,
        /// Its message.
        message: String,
    },
}

impl Inferred {
    /// The shapes, or `None` after an error.
    pub fn shapes(&self) -> Option<&std::collections::BTreeMap<String, String>> {
        match self {
            Inferred::Shapes(s) => Some(s),
            Inferred::Error { .. } => None,
        }
    }
}

fn program_error(e: shape_lang::ProgramError) -> Inferred {
    let class = match &e {
        shape_lang::ProgramError::Graph { error, .. } => match error.as_ref() {
            shape_graph::GraphError::Shape(s) => Some(s.class()),
            _ => None,
        },
        _ => None,
    };
    Inferred::Error {
        kind: e.kind().to_string(),
        class,
        message: e.to_string(),
    }
}

/// Parses, compiles and solves `text`.
pub fn compile_and_solve(
    text: &str,
) -> Result<(shape_lang::compile::Compiled, shape_graph::SolvedGraph), Inferred> {
    let parsed = shape_lang::syntax::parse(text)
        .map_err(|e| program_error(shape_lang::ProgramError::from(e)))?;
    let compiled = shape_lang::compile::compile(&parsed).map_err(program_error)?;
    let solved = compiled.solve().map_err(program_error)?;
    Ok((compiled, solved))
}

/// Every tensor's shape and every named size of `text`, or its error.
pub fn infer(text: &str) -> Inferred {
    let (compiled, solved) = match compile_and_solve(text) {
        Ok(c) => c,
        Err(e) => return e,
    };
    let g = &compiled.graph;
    let mut out = std::collections::BTreeMap::new();
    for t in g.tensor_ids() {
        let name = g.name(t).unwrap_or("?").to_string();
        let shape = match solved.symbolic_shape(t) {
            Ok(s) => s.to_string(),
            Err(e) => format!("error: {e}"),
        };
        // Number literals are tensors named by their text, one per
        // occurrence, and `0.5` in an expression (`|->1`) and as a call's
        // argument (a scalar, `|->`) differ: they are counted by name and
        // shape, so no order of statements picks one of them.
        let literal = g.kind(t).ok() == Some(shape_graph::TensorKind::Constant)
            && name.parse::<f32>().is_ok();
        if literal {
            let count = out
                .entry(format!("literal {name}: {shape}"))
                .or_insert_with(|| "0".to_string());
            *count = (count.parse::<u64>().unwrap_or(0) + 1).to_string();
        } else {
            out.insert(name, shape);
        }
    }
    for (s, name) in g.sizes() {
        let value = match solved.size_dim(s) {
            Ok(v) => v.extent().to_string(),
            Err(e) => format!("error: {e}"),
        };
        out.insert(format!("size {name}"), value);
    }
    Inferred::Shapes(out)
}

/// A solved program ready to run: the test harness's
/// [`crate::programs::Program`] (graph, seeded data, every assigned
/// name as a result), with run-time sizes bound to `run_time_value`.
/// `Err` says why it cannot run (it does not solve, or has ragged inputs,
/// whose rows need data).
pub fn runnable(text: &str, run_time_value: u64) -> Result<crate::programs::Program, String> {
    let (compiled, solved) = compile_and_solve(text).map_err(|e| format!("{e:?}"))?;
    let g = &compiled.graph;
    let solved = if solved.needs_binding() {
        let sizes: Vec<_> = g
            .sizes()
            .filter(|(s, _)| {
                solved
                    .size_dim(*s)
                    .is_ok_and(|d| matches!(d.extent(), shape_core::Size::Symbolic(_)))
            })
            .map(|(s, _)| (s, run_time_value))
            .collect();
        solved.bind(&sizes).map_err(|e| e.to_string())?
    } else {
        solved
    };
    let inputs =
        shape_lang::data::program_inputs_with(&compiled, &solved, 7, &mut |name, shape, axes| {
            ragged_data(7, name, &shape.memory_dims(), axes)
        })
        .map_err(|e| e.to_string())?;
    Ok(crate::programs::Program {
        graph: compiled.graph.clone(),
        inputs,
        results: compiled.results.clone(),
        options: shape_run::RunOptions::default(),
    })
}

/// Seeded data for a ragged input of memory-order `dims` with ragged
/// `axes`: every level's rows of 0 to 3 positions, drawn from `seed` and
/// the name, and seeded values.
pub fn ragged_data(seed: u64, name: &str, dims: &[u64], axes: &[usize]) -> Option<HostTensor> {
    let mut state = name.bytes().fold(seed ^ 0x9e37_79b9_7f4a_7c15, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    });
    let mut levels = Vec::new();
    let (mut rows, mut from) = (1u64, 0usize);
    for &axis in axes {
        rows = dims
            .get(from..axis)?
            .iter()
            .try_fold(rows, |n, &d| n.checked_mul(d))?;
        if rows > 1 << 16 {
            return None;
        }
        let lengths: Vec<u64> = (0..rows)
            .map(|_| {
                state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                let z = (state ^ (state >> 31)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
                (z ^ (z >> 29)) % 4
            })
            .collect();
        rows = lengths.iter().sum();
        levels.push(RaggedAxis::from_lengths(axis, &lengths).ok()?);
        from = axis + 1;
    }
    let inner = levels.pop()?;
    let rows = RaggedAxis::nested(levels, inner, dims).ok()?;
    let len = usize::try_from(rows.buffer_len(dims)).ok()?;
    let values = shape_lang::data::random_values(seed, name, len)?;
    HostTensor::with_rows(dims.to_vec(), rows, values).ok()
}

/// [`runnable`] with each dense input's data in the layout `program`
/// drew for it ([`GrammarProgram::layouts`]): the program on C-ordered
/// data, and the same program with the same values in the drawn layouts
/// (a broadcast makes the values constant along its axis in both).
pub fn runnable_with_layouts(
    program: &GrammarProgram,
    run_time_value: u64,
) -> Result<(crate::programs::Program, crate::programs::Program), String> {
    let c = runnable(&program.text(), run_time_value)?;
    with_layouts(&c, &program.layouts)
}

/// The program `c` (on C-ordered data) with the data of each input named
/// in `layouts` laid out as it says: `(contiguous, strided)`, the same
/// values in both. `Err` when a strided layout would leave an input in C
/// order after all: the generator drew it for other dims than the
/// input's.
pub fn with_layouts(
    c: &crate::programs::Program,
    layouts: &BTreeMap<String, DataLayout>,
) -> Result<(crate::programs::Program, crate::programs::Program), String> {
    let (mut contiguous, mut strided) = (c.clone(), c.clone());
    for t in c.graph.tensor_ids() {
        let Ok(name) = c.graph.name(t) else {
            continue;
        };
        let Some(&DataLayout::Strided(kind, seed)) = layouts.get(name) else {
            continue;
        };
        // Later versions of the name (assigned to) are results: no data.
        let Some(given) = c.inputs.get(t) else {
            continue;
        };
        match strided_view(given, kind, seed) {
            Some((view, copy)) if !view.is_c_contiguous() => {
                strided.inputs.insert(t, view);
                contiguous.inputs.insert(t, copy);
            }
            _ => {
                return Err(format!(
                    "the {kind:?} layout drawn for `{name}` leaves its dims {:?} in C order",
                    given.dims()
                ))
            }
        }
    }
    Ok((contiguous, strided))
}
