//! Axes before a row variable: a leading flank (`a, ..r.., b`).
//!
//! The solver's rows keep their row variable in front of the axes they
//! spell out, so broadcasting and unification align them from the end. A
//! row with axes before its variable is such a row over a fresh variable
//! `s`, tied to the spec's variable `r` by one first-axis constraint per
//! leading axis: `s` without its first axis is `r`, and that first axis is
//! `a` ([`Constraint::DropFirst`] with `first` named; a chain of them for a
//! longer flank). Equalities then line up both flanks at the row's outer
//! edges, and inequalities do once the rows' lengths are settled, as
//! OCANNL's leading flanks do; the waiting and closing rules of batch
//! slices, which use the same constraint, apply unchanged.

use shape_core::{Dim, Row, RowVar};

use crate::constraint::Constraint;
use crate::origin::Why;

/// The row `before ++ ..var.. ++ after`, and the constraints that tie its
/// leading flank `before` to `var` (none when `before` is empty).
pub fn flanked_row(
    before: Vec<Dim>,
    var: RowVar,
    after: Vec<Dim>,
    mut fresh_row: impl FnMut() -> RowVar,
    why: Why,
    out: &mut Vec<Constraint>,
) -> Row {
    if before.is_empty() {
        return Row::open(var, after);
    }
    let head = fresh_row();
    let mut outer = head;
    let last = before.len() - 1;
    for (i, first) in before.into_iter().enumerate() {
        let inner = if i == last { var } else { fresh_row() };
        out.push(Constraint::DropFirst {
            whole: Row::open(outer, Vec::new()),
            rest: Row::open(inner, Vec::new()),
            first: Some(first),
            why,
        });
        outer = inner;
    }
    Row::open(head, after)
}
