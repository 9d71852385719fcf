//! The parser: one statement per line, expressions by precedence climbing.

use super::{
    Arg, BinOp, DeclKind, Expr, ExprKind, Ident, Program, SizeSource, Span, SpecText, Statement,
    Values,
};
use shape_graph::{Precedence, Registry, SizeBound};

/// A malformed program: what was expected where, and what was found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("expected {expected}, found {found}")]
pub struct SyntaxError {
    /// What the parser expected.
    pub expected: String,
    /// What it found, described for a person.
    pub found: String,
    /// Where.
    pub span: Span,
}

/// The most operations, calls, numbers, names and parentheses one
/// statement may hold; deeper expressions would exhaust the stack.
pub const MAX_NODES: usize = 1000;

/// The deepest nesting of parentheses, calls and unary minuses.
pub const MAX_DEPTH: usize = 64;

/// Words that start a statement (or are reserved for the notation) and cannot
/// name tensors.
pub const KEYWORDS: &[&str] = &["input", "param", "const", "require", "size", "of", "var"];

/// Parses a whole program, with the built-in operations' infix
/// operators.
pub fn parse(source: &str) -> Result<Program, SyntaxError> {
    parse_with(source, &Registry::builtin())
}

/// Parses a whole program whose infix operators, and how tightly each
/// binds, are those of `registry` (an operation registered with an
/// [`Operator::Infix`](shape_graph::Operator::Infix) is written with it).
pub fn parse_with(source: &str, registry: &Registry) -> Result<Program, SyntaxError> {
    let infix = registry.infix_operators();
    let symbols: Vec<&str> = infix.iter().map(|(s, _)| *s).collect();
    let after_operand = format!(
        "an operator (`{}`) or the end of the statement",
        symbols.join(" ")
    );
    let mut statements = Vec::new();
    let mut start = 0;
    for line in source.split_inclusive('\n') {
        let end = start + line.len();
        let body = strip_comment(line);
        let trimmed = body.trim_end();
        if !trimmed.trim_start().is_empty() {
            let mut p = Parser {
                src: source,
                pos: start,
                end: start + trimmed.len(),
                nodes: 0,
                depth: 0,
                infix: &infix,
                after_operand: &after_operand,
            };
            statements.push(p.statement()?);
        }
        start = end;
    }
    Ok(Program { statements })
}

/// The line without its comment (a `#` outside a string).
fn strip_comment(line: &str) -> &str {
    let mut in_string = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => in_string = !in_string,
            '#' if !in_string => return &line[..i],
            _ => {}
        }
    }
    line
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// A parser over one statement, `src[pos..end]`.
struct Parser<'a> {
    src: &'a str,
    pos: usize,
    end: usize,
    /// Expression nodes and parentheses read so far.
    nodes: usize,
    /// The current nesting depth.
    depth: usize,
    /// The infix operators, longest first, with their precedence.
    infix: &'a [(&'static str, Precedence)],
    /// What may follow a complete operand, for messages.
    after_operand: &'a str,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.src[self.pos..self.end]
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn skip_ws(&mut self) {
        let rest = self.rest();
        self.pos += rest.len() - rest.trim_start().len();
    }

    /// The next token described for a message, and its span.
    fn found(&self) -> (String, Span) {
        let rest = self.rest();
        match rest.chars().next() {
            None => ("the end of the line".to_string(), self.pos..self.pos),
            Some(c) if is_ident_char(c) => {
                let len = rest.find(|c: char| !is_ident_char(c)).unwrap_or(rest.len());
                (format!("`{}`", &rest[..len]), self.pos..self.pos + len)
            }
            Some(c) => (format!("`{c}`"), self.pos..self.pos + c.len_utf8()),
        }
    }

    fn error<T>(&self, expected: impl Into<String>) -> Result<T, SyntaxError> {
        let (found, span) = self.found();
        Err(SyntaxError {
            expected: expected.into(),
            found,
            span,
        })
    }

    fn eat(&mut self, c: char) -> bool {
        self.skip_ws();
        if self.peek() == Some(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char, expected: &str) -> Result<(), SyntaxError> {
        if self.eat(c) {
            Ok(())
        } else {
            self.error(expected)
        }
    }

    fn ident(&mut self, expected: &str) -> Result<Ident, SyntaxError> {
        self.skip_ws();
        let rest = self.rest();
        match rest.chars().next() {
            Some(c) if is_ident_start(c) => {
                let len = rest.find(|c: char| !is_ident_char(c)).unwrap_or(rest.len());
                let ident = Ident {
                    text: rest[..len].to_string(),
                    span: self.pos..self.pos + len,
                };
                self.pos += len;
                Ok(ident)
            }
            _ => self.error(expected),
        }
    }

    /// A tensor name being defined: an identifier that is not a keyword.
    fn new_name(&mut self) -> Result<Ident, SyntaxError> {
        let name = self.ident("a tensor name")?;
        if KEYWORDS.contains(&name.text.as_str()) {
            return Err(SyntaxError {
                expected: "a tensor name".into(),
                found: format!("the keyword `{}`", name.text),
                span: name.span,
            });
        }
        Ok(name)
    }

    fn at_end(&mut self) -> bool {
        self.skip_ws();
        self.pos >= self.end
    }

    fn expect_end(&mut self, expected: &str) -> Result<(), SyntaxError> {
        if self.at_end() {
            Ok(())
        } else {
            self.error(expected)
        }
    }

    fn statement(&mut self) -> Result<Statement, SyntaxError> {
        self.skip_ws();
        let start = self.pos;
        let first =
            self.ident("a declaration (`input`, `param`, `const`), `require`, or `NAME = ...`")?;
        if first.text == "function" && self.rest().trim_start().starts_with(is_ident_start) {
            return self.function_statement(start);
        }
        let kind = match first.text.as_str() {
            "input" => Some(DeclKind::Input),
            "param" => Some(DeclKind::Param),
            "const" => Some(DeclKind::Const),
            "size" => return self.size_statement(start),
            "require" => {
                let name = self.ident("the name of the tensor to require a shape of")?;
                self.expect(':', "`:` and the required shape")?;
                let spec = self.spec_to('=', "a shape spec after `:`")?;
                self.expect_end("the end of the statement")?;
                return Ok(Statement::Require {
                    name,
                    spec,
                    span: start..self.end,
                });
            }
            _ => None,
        };
        match kind {
            Some(kind) => self.declaration(kind, start),
            None => {
                if self.eat(':') {
                    // `NAME: SPEC <- EXPR`; specs never hold `<-`.
                    let spec = self.spec_to_text("<-", "the destination's shape after `:`")?;
                    if !self.rest().starts_with("<-") {
                        return self.error("`<-` and the expression to broadcast into the shape");
                    }
                    self.pos += 2;
                    let expr = self.expr()?;
                    self.expect_end(self.after_operand)?;
                    return Ok(Statement::AssignInto {
                        name: first,
                        spec,
                        expr,
                        span: start..self.end,
                    });
                }
                if self.eat('[') {
                    // `NAME[...] <- EXPR`: the whole of an existing tensor.
                    self.skip_ws();
                    if !self.rest().starts_with("...") {
                        return self.error(
                            "`...]` (an assignment writes every element: `NAME[...] <- EXPR`)",
                        );
                    }
                    self.pos += 3;
                    self.expect(']', "`]` after `...`")?;
                    self.skip_ws();
                    if !self.rest().starts_with("<-") {
                        return self.error("`<-` and the expression to assign into the tensor");
                    }
                    self.pos += 2;
                    let expr = self.expr()?;
                    self.expect_end(self.after_operand)?;
                    return Ok(Statement::AssignExisting {
                        name: first,
                        expr,
                        span: start..self.end,
                    });
                }
                if !self.eat('=') {
                    return self.error(format!(
                        "`=` after `{}` (statements are declarations, `require`, `NAME = EXPR`, `NAME: SHAPE <- EXPR`, or `NAME[...] <- EXPR`)",
                        first.text
                    ));
                }
                let expr = self.expr()?;
                self.expect_end(self.after_operand)?;
                Ok(Statement::Assign {
                    name: first,
                    expr,
                    span: start..self.end,
                })
            }
        }
    }

    /// After `function`: `NAME = "WGSL source"`.
    fn function_statement(&mut self, start: usize) -> Result<Statement, SyntaxError> {
        let name = self.new_name()?;
        self.expect('=', "`=` and the function's WGSL source in quotes")?;
        self.skip_ws();
        if self.peek() != Some('"') {
            return self
                .error("the function's WGSL source in quotes (`\"fn NAME(..) -> T { .. }\"`)");
        }
        let source = self.string()?;
        self.expect_end("the end of the function statement")?;
        Ok(Statement::Function {
            name,
            source,
            span: start..self.end,
        })
    }

    /// After `size`: `NAME = 64`, `NAME = other`, `NAME == other`,
    /// `NAME = j of y`, `NAME = ..r.. of x`, a bound (`NAME >= 1`), or
    /// `NAME` alone: a run-time size.
    fn size_statement(&mut self, start: usize) -> Result<Statement, SyntaxError> {
        let name = self.new_size_name()?;
        if self.at_end() {
            return Ok(Statement::RunTimeSize {
                name,
                span: start..self.end,
            });
        }
        self.skip_ws();
        if let Some(bound) = self.size_bound()? {
            self.expect_end("the end of the size statement")?;
            return Ok(Statement::SizeBound {
                name,
                bound,
                span: start..self.end,
            });
        }
        let source = if self.rest().starts_with("==") {
            self.pos += 2;
            SizeSource::Size(self.ident("the name of another size")?)
        } else {
            self.expect('=', "`=` or `==` after the size's name")?;
            self.skip_ws();
            let rest = self.rest();
            if rest.starts_with(|c: char| c.is_ascii_digit()) {
                let len = rest
                    .find(|c: char| !c.is_ascii_digit())
                    .unwrap_or(rest.len());
                let span = self.pos..self.pos + len;
                let n = rest[..len].parse::<u64>().map_err(|_| SyntaxError {
                    expected: "a size that fits in 64 bits".into(),
                    found: format!("`{}`", &rest[..len]),
                    span: span.clone(),
                })?;
                self.pos += len;
                SizeSource::Number(n, span)
            } else if rest.starts_with("..") {
                self.pos += 2;
                let var = self.ident("a row variable's name after `..`")?;
                if !self.rest().starts_with("..") {
                    return self.error("`..` closing the row variable");
                }
                self.pos += 2;
                self.of_keyword()?;
                let of = self.ident("the tensor whose spec has the row variable")?;
                SizeSource::RowVar { name: var, of }
            } else {
                let first =
                    self.ident("a size, a size's name, `LABEL of TENSOR` or `..ROW.. of TENSOR`")?;
                self.skip_ws();
                if self.rest().starts_with("of")
                    && !self.rest()[2..].starts_with(|c: char| is_ident_char(c))
                {
                    self.of_keyword()?;
                    let of = self.ident("the tensor whose spec has the label")?;
                    SizeSource::Label { label: first, of }
                } else {
                    SizeSource::Size(first)
                }
            }
        };
        self.expect_end("the end of the size statement")?;
        Ok(Statement::Size {
            name,
            source,
            span: start..self.end,
        })
    }

    /// After a size's name: `>= n`, `<= n`, `== n` (a number) or
    /// `% m == r`, a bound on the size; `None` when the text is none of
    /// these (a definition such as `= 64` or `== other`).
    fn size_bound(&mut self) -> Result<Option<SizeBound>, SyntaxError> {
        let rest = self.rest();
        let op = ["%", ">=", "<=", "=="]
            .into_iter()
            .find(|op| rest.starts_with(op))
            .unwrap_or("");
        let after = rest[op.len()..].trim_start();
        if op.is_empty() || (op == "==" && !after.starts_with(|c: char| c.is_ascii_digit())) {
            return Ok(None);
        }
        self.pos += op.len();
        let (first, first_span) = self.size_number_spanned()?;
        Ok(Some(match op {
            ">=" => SizeBound::AtLeast(first),
            "<=" => SizeBound::AtMost(first),
            "==" => SizeBound::Equal(first),
            _ => {
                let Some(modulus) = std::num::NonZeroU64::new(first) else {
                    return Err(SyntaxError {
                        expected: "a divisor of at least 1 after `%`".into(),
                        found: "`0`".into(),
                        span: first_span,
                    });
                };
                self.skip_ws();
                if !self.rest().starts_with("==") {
                    return self.error("`==` and the remainder (`size d % 8 == 0`)");
                }
                self.pos += 2;
                let (remainder, remainder_span) = self.size_number_spanned()?;
                if remainder >= modulus.get() {
                    return Err(SyntaxError {
                        expected: format!("a remainder below the divisor {modulus}"),
                        found: format!("`{remainder}`"),
                        span: remainder_span,
                    });
                }
                SizeBound::Remainder { modulus, remainder }
            }
        }))
    }

    /// A whole number that fits in 64 bits.
    /// [`Parser::size_number`] with the span of its digits.
    fn size_number_spanned(&mut self) -> Result<(u64, Span), SyntaxError> {
        let n = self.size_number()?;
        let digits = self.src[..self.pos]
            .trim_end_matches(|c: char| c.is_ascii_digit())
            .len();
        Ok((n, digits..self.pos))
    }

    fn size_number(&mut self) -> Result<u64, SyntaxError> {
        self.skip_ws();
        let rest = self.rest();
        let len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if len == 0 {
            return self.error("a whole number");
        }
        let n = rest[..len].parse::<u64>().map_err(|_| SyntaxError {
            expected: "a size that fits in 64 bits".into(),
            found: format!("`{}`", &rest[..len]),
            span: self.pos..self.pos + len,
        })?;
        self.pos += len;
        Ok(n)
    }

    fn of_keyword(&mut self) -> Result<(), SyntaxError> {
        match self.ident("`of` and a tensor") {
            Ok(w) if w.text == "of" => Ok(()),
            Ok(w) => Err(SyntaxError {
                expected: "`of` and a tensor".into(),
                found: format!("`{}`", w.text),
                span: w.span,
            }),
            Err(e) => Err(e),
        }
    }

    /// A size being named: an identifier that is not a keyword.
    fn new_size_name(&mut self) -> Result<Ident, SyntaxError> {
        let name = self.ident("a size's name after `size`")?;
        if KEYWORDS.contains(&name.text.as_str()) {
            return Err(SyntaxError {
                expected: "a size's name".into(),
                found: format!("the keyword `{}`", name.text),
                span: name.span,
            });
        }
        Ok(name)
    }

    fn declaration(&mut self, kind: DeclKind, start: usize) -> Result<Statement, SyntaxError> {
        let name = self.new_name()?;
        let spec = if self.eat(':') {
            Some(self.spec_to('=', "a shape spec after `:`")?)
        } else {
            None
        };
        if spec.is_none() && kind != DeclKind::Param {
            return self.error(format!(
                "`:` and a shape spec (`{} {}: SPEC`); only a `param` may leave its shape to inference",
                kind.keyword(),
                name.text
            ));
        }
        let values = if kind == DeclKind::Const {
            self.expect('=', "`=` and the constant's values, like `= [1, 2, 3]`")?;
            Some(self.values()?)
        } else {
            None
        };
        self.expect_end("the end of the declaration")?;
        Ok(Statement::Declare {
            kind,
            name,
            spec,
            values,
            span: start..self.end,
        })
    }

    /// Spec text from here up to `stop` or the end of the statement, trimmed.
    fn spec_to(&mut self, stop: char, expected: &str) -> Result<SpecText, SyntaxError> {
        let mut buf = [0u8; 4];
        self.spec_to_text(stop.encode_utf8(&mut buf), expected)
    }

    /// The spec text up to `stop` (or the end of the line), trimmed.
    fn spec_to_text(&mut self, stop: &str, expected: &str) -> Result<SpecText, SyntaxError> {
        self.skip_ws();
        let rest = self.rest();
        let len = rest.find(stop).unwrap_or(rest.len());
        let text = rest[..len].trim_end();
        if text.is_empty() {
            return self.error(expected);
        }
        let spec = SpecText {
            text: text.to_string(),
            span: self.pos..self.pos + text.len(),
        };
        self.pos += len;
        Ok(spec)
    }

    fn values(&mut self) -> Result<Values, SyntaxError> {
        self.skip_ws();
        let start = self.pos;
        self.expect('[', "`[` starting the list of values")?;
        let mut values = Vec::new();
        if !self.eat(']') {
            loop {
                self.skip_ws();
                let negative = self.eat('-');
                self.skip_ws();
                let v = self.number("a number")?;
                values.push(if negative { -v } else { v });
                if self.eat(']') {
                    break;
                }
                self.expect(',', "`,` or `]`")?;
            }
        }
        Ok(Values {
            values,
            span: start..self.pos,
        })
    }

    fn number(&mut self, expected: &str) -> Result<f32, SyntaxError> {
        let rest = self.rest();
        let bytes = rest.as_bytes();
        let mut len = 0;
        let digits = |len: &mut usize| {
            while *len < bytes.len() && bytes[*len].is_ascii_digit() {
                *len += 1;
            }
        };
        digits(&mut len);
        if len == 0 {
            return self.error(expected);
        }
        if len < bytes.len() && bytes[len] == b'.' {
            len += 1;
            digits(&mut len);
        }
        if len < bytes.len() && (bytes[len] == b'e' || bytes[len] == b'E') {
            let mut l = len + 1;
            if l < bytes.len() && (bytes[l] == b'+' || bytes[l] == b'-') {
                l += 1;
            }
            let before = l;
            digits(&mut l);
            if l > before {
                len = l;
            }
        }
        let text = &rest[..len];
        match text.parse::<f32>() {
            Ok(v) if v.is_finite() => {
                self.pos += len;
                Ok(v)
            }
            _ => Err(SyntaxError {
                expected: "a number that fits in an f32".into(),
                found: format!("`{text}`"),
                span: self.pos..self.pos + len,
            }),
        }
    }

    fn expr(&mut self) -> Result<Expr, SyntaxError> {
        self.operands(None)
    }

    /// Operands joined by infix operators that bind at least as tightly
    /// as `min` (any, for `None`), by precedence climbing: an operator's
    /// right operand holds only operators that bind tighter, so operators
    /// of one level associate to the left.
    fn operands(&mut self, min: Option<Precedence>) -> Result<Expr, SyntaxError> {
        let mut lhs = self.unary()?;
        while let Some((symbol, precedence)) = self.infix_operator(min) {
            self.pos += symbol.len();
            let rhs = match precedence.0.checked_add(1) {
                Some(tighter) => self.operands(Some(Precedence(tighter)))?,
                None => self.unary()?,
            };
            lhs = binary(BinOp::new(symbol), lhs, rhs);
        }
        Ok(lhs)
    }

    /// The infix operator that comes next, if it binds at least as
    /// tightly as `min` (the longest symbol that matches).
    fn infix_operator(&mut self, min: Option<Precedence>) -> Option<(&'static str, Precedence)> {
        self.skip_ws();
        let rest = self.rest();
        self.infix
            .iter()
            .find(|(symbol, _)| rest.starts_with(symbol))
            .filter(|(_, p)| min.is_none_or(|m| *p >= m))
            .copied()
    }

    /// Counts one more node of the statement's expression.
    fn count(&mut self) -> Result<(), SyntaxError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(SyntaxError {
                expected: format!(
                    "at most {MAX_NODES} operations, names and parentheses in one statement (split it into several)"
                ),
                found: "more".into(),
                span: self.pos..self.pos,
            });
        }
        Ok(())
    }

    fn unary(&mut self) -> Result<Expr, SyntaxError> {
        self.skip_ws();
        self.count()?;
        if self.depth >= MAX_DEPTH {
            return Err(SyntaxError {
                expected: format!(
                    "at most {MAX_DEPTH} levels of parentheses, calls and minus signs"
                ),
                found: "more".into(),
                span: self.pos..self.pos,
            });
        }
        self.depth += 1;
        let e = self.unary_inner();
        self.depth -= 1;
        e
    }

    fn unary_inner(&mut self) -> Result<Expr, SyntaxError> {
        let start = self.pos;
        if self.eat('-') {
            let inner = self.unary()?;
            let span = start..inner.span.end;
            return Ok(match inner.kind {
                ExprKind::Number(v) => Expr {
                    kind: ExprKind::Number(-v),
                    span,
                },
                _ => Expr {
                    kind: ExprKind::Neg(Box::new(inner)),
                    span,
                },
            });
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<Expr, SyntaxError> {
        self.skip_ws();
        let start = self.pos;
        match self.peek() {
            Some('(') => {
                self.pos += 1;
                let inner = self.expr()?;
                self.expect(')', "`)` or an operator")?;
                Ok(Expr {
                    kind: inner.kind,
                    span: start..self.pos,
                })
            }
            Some(c) if c.is_ascii_digit() => {
                let v = self.number("a number")?;
                Ok(Expr {
                    kind: ExprKind::Number(v),
                    span: start..self.pos,
                })
            }
            Some(c) if is_ident_start(c) => {
                let name = self.ident("a tensor name")?;
                if self.peek() == Some('(') {
                    self.pos += 1;
                    let args = self.args()?;
                    return Ok(Expr {
                        kind: ExprKind::Call { func: name, args },
                        span: start..self.pos,
                    });
                }
                if KEYWORDS.contains(&name.text.as_str()) {
                    return Err(SyntaxError {
                        expected: "a tensor name".into(),
                        found: format!("the keyword `{}`", name.text),
                        span: name.span,
                    });
                }
                Ok(Expr {
                    kind: ExprKind::Name(name.text),
                    span: name.span,
                })
            }
            _ => self.error("a tensor name, a number, a function call or `(`"),
        }
    }

    /// Arguments after `(`, through the closing `)`.
    fn args(&mut self) -> Result<Vec<Arg>, SyntaxError> {
        let mut args = Vec::new();
        if self.eat(')') {
            return Ok(args);
        }
        loop {
            self.skip_ws();
            if self.peek() == Some('"') {
                args.push(Arg::Spec(self.string()?));
            } else {
                args.push(Arg::Expr(self.expr()?));
            }
            if self.eat(')') {
                return Ok(args);
            }
            self.expect(',', "`,` or `)` in the argument list")?;
        }
    }

    /// A `"..."` string; its span is that of the text inside the quotes.
    fn string(&mut self) -> Result<SpecText, SyntaxError> {
        let open = self.pos;
        self.pos += 1;
        match self.rest().find('"') {
            Some(len) => {
                let spec = SpecText {
                    text: self.rest()[..len].to_string(),
                    span: self.pos..self.pos + len,
                };
                self.pos += len + 1;
                Ok(spec)
            }
            None => Err(SyntaxError {
                expected: "a closing `\"`".into(),
                found: "the end of the line".into(),
                span: open..self.end,
            }),
        }
    }
}

fn binary(op: BinOp, lhs: Expr, rhs: Expr) -> Expr {
    let span = lhs.span.start..rhs.span.end;
    Expr {
        kind: ExprKind::Binary {
            op,
            lhs: Box::new(lhs),
            rhs: Box::new(rhs),
        },
        span,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expr_of(src: &str) -> Expr {
        match parse(src).unwrap().statements.remove(0) {
            Statement::Assign { expr, .. } => expr,
            s => panic!("not an assignment: {s:?}"),
        }
    }

    /// The expression with explicit parentheses, for precedence checks.
    fn show(e: &Expr) -> String {
        match &e.kind {
            ExprKind::Name(n) => n.clone(),
            ExprKind::Number(v) => v.to_string(),
            ExprKind::Neg(x) => format!("(-{})", show(x)),
            ExprKind::Binary { op, lhs, rhs } => format!("({} {op} {})", show(lhs), show(rhs)),
            ExprKind::Call { func, args } => {
                let args: Vec<String> = args
                    .iter()
                    .map(|a| match a {
                        Arg::Expr(e) => show(e),
                        Arg::Spec(s) => format!("{:?}", s.text),
                    })
                    .collect();
                format!("{}({})", func.text, args.join(", "))
            }
        }
    }

    #[test]
    fn precedence_and_associativity() {
        assert_eq!(
            show(&expr_of("y = a + b * c @ d - e")),
            "((a + ((b * c) @ d)) - e)"
        );
        assert_eq!(show(&expr_of("y = -a @ (b + c)")), "((-a) @ (b + c))");
        assert_eq!(show(&expr_of("y = a / 2 * -0.5")), "((a / 2) * -0.5)");
    }

    #[test]
    fn calls_with_spec_strings() {
        let e = expr_of(r#"y = einsum("ij;jk=>ik", a, relu(b))"#);
        assert_eq!(show(&e), r#"einsum("ij;jk=>ik", a, relu(b))"#);
        let ExprKind::Call { args, .. } = &e.kind else {
            panic!()
        };
        // The spec's span covers the text inside the quotes.
        assert_eq!(args[0].span(), 12..21);
    }

    #[test]
    fn assignments_into_a_shape_keep_the_spec_and_the_expression() {
        let src = "a: 2|3 <- b * 2  # into a batch row\n";
        let p = parse(src).unwrap();
        let Statement::AssignInto {
            name, spec, expr, ..
        } = &p.statements[0]
        else {
            panic!("{:?}", p.statements[0]);
        };
        assert_eq!(name.text, "a");
        assert_eq!(spec.text, "2|3");
        assert_eq!(&src[spec.span.clone()], "2|3");
        assert_eq!(show(expr), "(b * 2)");
        let missing = parse("a: 3 b\n").unwrap_err();
        assert!(missing.to_string().contains("`<-`"), "{missing}");
    }

    #[test]
    fn assignments_into_an_existing_tensor_keep_the_name_and_the_expression() {
        let src = "d [ ... ] <- b * 2  # every element\n";
        let p = parse(src).unwrap();
        let Statement::AssignExisting { name, expr, span } = &p.statements[0] else {
            panic!("{:?}", p.statements[0]);
        };
        assert_eq!(name.text, "d");
        assert_eq!(show(expr), "(b * 2)");
        assert_eq!(&src[span.clone()], "d [ ... ] <- b * 2");
        for (bad, expected) in [
            ("d[0] <- 1\n", "`...]`"),
            ("d[... <- 1\n", "`]` after `...`"),
            ("d[...] = 1\n", "`<-`"),
            ("d[...] <-\n", "a tensor name"),
        ] {
            let e = parse(bad).unwrap_err();
            assert!(e.to_string().contains(expected), "{bad}: {e}");
        }
    }

    #[test]
    fn declarations_keep_spec_text_and_spans() {
        let src = "input x: 8|rgb:3  # data\nparam w\nconst c: 2 = [1, -2.5e1]\nrequire w: 3->4\n";
        let p = parse(src).unwrap();
        let Statement::Declare {
            kind, name, spec, ..
        } = &p.statements[0]
        else {
            panic!()
        };
        assert_eq!((*kind, name.text.as_str()), (DeclKind::Input, "x"));
        let spec = spec.as_ref().unwrap();
        assert_eq!(spec.text, "8|rgb:3");
        assert_eq!(&src[spec.span.clone()], "8|rgb:3");
        assert!(matches!(
            &p.statements[1],
            Statement::Declare {
                kind: DeclKind::Param,
                spec: None,
                ..
            }
        ));
        let Statement::Declare { values, .. } = &p.statements[2] else {
            panic!()
        };
        assert_eq!(values.as_ref().unwrap().values, vec![1.0, -25.0]);
        let Statement::Require { spec, .. } = &p.statements[3] else {
            panic!()
        };
        assert_eq!(spec.text, "3->4");
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let p = parse("# only a comment\n\n   \ny = f(\"a#b\") # c\n").unwrap();
        assert_eq!(p.statements.len(), 1);
        let Statement::Assign { expr, .. } = &p.statements[0] else {
            panic!()
        };
        assert_eq!(show(expr), r#"f("a#b")"#);
    }

    #[test]
    fn deep_expressions_are_refused_not_overflowed() {
        let long = format!("y = {}x\n", "x + ".repeat(MAX_NODES));
        let e = parse(&long).unwrap_err();
        assert!(e.expected.starts_with("at most 1000 operations"), "{e}");
        let deep = format!("y = {}x{}\n", "(".repeat(100_000), ")".repeat(100_000));
        assert!(parse(&deep)
            .unwrap_err()
            .expected
            .starts_with("at most 64 levels"));
        let negs = format!("y = {}x\n", "-".repeat(100_000));
        assert!(parse(&negs).is_err());
        let calls = format!("y = {}x{}\n", "relu(".repeat(100_000), ")".repeat(100_000));
        assert!(parse(&calls).is_err());
        let nested = format!("y = {}x{}\n", "(".repeat(60), ")".repeat(60));
        assert!(parse(&nested).is_ok());
        let fine = format!("y = {}x\n", "x + ".repeat(400));
        assert!(parse(&fine).is_ok());
    }

    #[test]
    fn errors_say_what_was_expected_and_where() {
        let e = parse("x = a +\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "expected a tensor name, a number, a function call or `(`, found the end of the line"
        );
        assert_eq!(e.span, 7..7);
        let e = parse("input x\n").unwrap_err();
        assert!(e.expected.contains("only a `param`"), "{e}");
        let e = parse("y = relu(x\n").unwrap_err();
        assert_eq!(e.expected, "`,` or `)` in the argument list");
        let e = parse("input = 3\n").unwrap_err();
        assert_eq!((e.found.as_str(), e.span.clone()), ("`=`", 6..7));
        let e = parse("const c: 2 = [1, 1e99]\n").unwrap_err();
        assert_eq!(e.found, "`1e99`");
        let e = parse("y = a b\n").unwrap_err();
        assert_eq!(e.found, "`b`");
        let e = parse("y = f(\"ij\n").unwrap_err();
        assert_eq!(e.expected, "a closing `\"`");
    }
}
