//! Finalization (§2(f)): what closes the variables that solving left open,
//! in which order, and why the outcome does not depend on the order of the
//! constraints.

use shape_lang::inference::infer;

use crate::{accepted_in_every_order, closed, k, open, sizes, v, Fixture};

#[test]
fn rows_with_nothing_above_them_close_empty_and_dims_to_one() {
    insta::assert_snapshot!(infer(r"
        input x: ..r.. _
        y = exp(x)
    "), @r"
        x : |->1
        y : |->1
        ");
}

#[test]
fn sizes_flow_down_from_the_results_to_the_leaves() {
    // The worked example of docs/constraint-semantics.md: parameters take
    // the largest shapes their uses allow, results the smallest.
    insta::assert_snapshot!(infer(r"
        input x: 8|784
        param w1
        param b1: 64
        h = w1 @ x
        s = h + b1
        a = relu(s)
        param w2
        y = w2 @ a
        require y: 8|->10
    "), @r"
        x  : 8|->784
        w1 : |784->64
        b1 : |->64
        h  : 8|->64
        s  : 8|->64
        a  : 8|->64
        w2 : |64->10
        y  : 8|->10
        ");
}

/// Two row variables that bound each other in a cycle, each also at least
/// one axis long, so each is expanded by a template. Closing one of the
/// cycle's open variables first decided the lengths (`r0 = [1]`,
/// `r2 = [1, 1, 1]`, or `r0 = [1, 1]`, `r2 = [1]`), and which one was first
/// went by id, which for templates follows the order of the constraints
/// (found by the order-independence property). Rule 5 closes all that is
/// left at once, the shortest rows the constraints allow.
#[test]
fn closing_a_cycle_of_row_bounds_does_not_depend_on_the_order() {
    let mut f = Fixture::new();
    let (r0, _, r2) = (f.row(), f.row(), f.row());
    let d0 = v(f.dim());
    let cs = [
        f.row_ge(open(r2, [d0.clone()]), open(r0, [])),
        f.row_ge(open(r0, [d0.clone(), d0.clone()]), open(r2, [])),
        f.row_ge(open(r2, []), closed([d0.clone()])),
        f.row_ge(open(r0, []), closed([d0])),
    ];
    for (order, t) in accepted_in_every_order(&f.s, &cs) {
        let sol = t.finalize().unwrap();
        let lens = (sizes(&sol, &open(r0, [])), sizes(&sol, &open(r2, [])));
        assert_eq!(lens, (vec![1], vec![1]), "order {order:?}");
    }
}

/// A cycle `rank(r2) <= rank(r1) + 1`, `rank(r2) >= rank(r1)` reached
/// through a row equality `r0 = [..r2.., d]`: in one order `r2` stays open,
/// in another it is bound to the template variable expanded from `r0`, so
/// no naming of the cycle's variables is the same in both (found by the
/// order-independence property). All rows left close empty at once.
#[test]
fn closing_a_cycle_reached_through_an_equality_does_not_depend_on_the_order() {
    let mut f = Fixture::new();
    let (r0, r1, r2) = (f.row(), f.row(), f.row());
    let d0 = v(f.dim());
    let cs = [
        f.row_eq(open(r2, [d0.clone(), d0.clone()]), open(r0, [d0.clone()])),
        f.row_ge(open(r1, [d0.clone()]), open(r2, [])),
        f.row_ge(open(r0, []), open(r1, [d0])),
    ];
    for (order, t) in accepted_in_every_order(&f.s, &cs) {
        let sol = t.finalize().unwrap();
        let lens = [r0, r1, r2].map(|r| sizes(&sol, &open(r, [])));
        assert_eq!(lens, [vec![1], vec![], vec![]], "order {order:?}");
    }
}

/// Found by the property tests: a dim above two others whose least upper
/// bounds differ (3 and 2). Closing one to its bound first forced the
/// other to 1, and which went first depended on the order of the
/// constraints; closing both at once reports the conflict in every order.
#[test]
fn least_upper_bounds_close_together_in_every_order() {
    let f = Fixture::new();
    let mut g0 = Fixture::new();
    let d: Vec<_> = (0..5).map(|_| g0.dim()).collect();
    let facts = [
        f.ge(v(d[4]), v(d[0])),
        f.row_ge(closed([v(d[4])]), closed([v(d[1])])),
        f.ge(k(2), v(d[1])),
        f.ge(k(3), v(d[3])),
        f.eq(v(d[0]), v(d[3])),
    ];
    let mut outcomes = std::collections::BTreeSet::new();
    for order in crate::permutations(facts.len()) {
        let mut g = Fixture::new();
        let _ = (0..5).map(|_| g.dim()).count();
        let mut result = Ok(());
        for &i in &order {
            result = result.and_then(|()| g.add(facts[i].clone()));
        }
        let got = result
            .and_then(|()| g.s.finalize())
            .map(|s| {
                d.iter()
                    .map(|x| s.dim(&v(*x)).unwrap().size())
                    .collect::<Vec<_>>()
            })
            .map_err(|e| e.class());
        outcomes.insert(format!("{got:?}"));
    }
    assert_eq!(outcomes.len(), 1, "{outcomes:?}");
}

/// Issue 13, item 1: what only a default would close is not a parameter's
/// shape (OCANNL: "You forgot to specify the hidden dimension(s)").
#[test]
fn a_parameter_shape_that_only_a_default_would_give_is_an_error() {
    // The issue's three programs, once accepted with guessed shapes.
    let out = infer("param x\nparam y\nz = x + y");
    assert_eq!(
        out.trim_end(),
        "error[not_given] line 1: the output size of `x` is never given: declare it, or require \
         a shape downstream (a parameter's shape is inferred from its uses, never guessed)"
    );
    let out = infer("param a\nparam b\nr = einsum(\"|ij;|jk=>|ik\", a, b)");
    assert!(
        out.starts_with("error[not_given] line 1: the size of output axis 0 of `a` is never given"),
        "{out}"
    );
    let out = infer("param w\nconst v: 3 = [1, 2, 3]\ny = w @ v");
    assert!(
        out.starts_with("error[not_given] line 1: the output size of `w` is never given"),
        "{out}"
    );
    // A size passed on from a result that closed by a default is no more
    // given than the result's.
    let out = infer("param p: a\nz = exp(p)");
    assert!(
        out.starts_with("error[not_given] line 1: the size of output axis 0 of `p`"),
        "{out}"
    );
    // A named size of an input must be given: an input's sizes are its
    // data's.
    let out = infer("input x: b|8");
    assert_eq!(
        out.trim_end(),
        "error[not_given] line 1: the size `b` in the declared shape of `x` is never given: give \
         it as a number, or require a shape that fixes it (an input's named sizes are not \
         run-time sizes yet)"
    );
}

#[test]
fn parameters_given_by_their_uses_declarations_or_requirements_are_inferred() {
    insta::assert_snapshot!(infer(r#"
        input x: b|8
        require x: 4|8
        param w
        param bias
        h = w @ x
        y = h + bias
        require y: 4|->3
        param e: ..r..
        s = permute("..r..=>", e)
        require e: 2
    "#), @r"
    x    : 4|->8
    w    : |8->3
    bias : |->3
    h    : 4|->3
    y    : 4|->3
    e    : |->2
    s    : |->
    ");
    // A bias's input row, used only by pointwise operations, may stay
    // empty without being given, as in OCANNL.
    insta::assert_snapshot!(infer(r"
        input x: 5|3
        param b
        y = x + b
    "), @r"
    x : 5|->3
    b : |->3
    y : 5|->3
    ");
    // The result of an explicit reduction keeps the spec's empty row, and
    // results keep finalization's defaults.
    insta::assert_snapshot!(infer(r#"
        input x: 2,3
        s = permute("ij=>", x)
        t = exp(s)
    "#), @r"
    x : |->2, 3
    s : |->
    t : |->
    ");
}

#[test]
fn a_fixed_index_minimum_in_a_cycle_closes_the_same_in_every_order() {
    // proptest-regressions/solver_properties.txt: d2 = d4, d1 >= d3,
    // d2 >= d1, d1 at least 2, [d4] >= [d2]. Rule 5 closed the cycle's dims
    // at once, d3 (below d1) to 1, where in another order d1 closed by rule
    // 4 and d3 took it as its least upper bound, 2. Rule 5 now closes the
    // raised dims alone first.
    let mut f = Fixture::new();
    let d: Vec<_> = (0..5).map(|_| f.dim()).collect();
    let at_least = shape_solver::Constraint::DimAtLeast {
        dim: v(d[1]),
        min: 2.try_into().unwrap(),
        why: f.why,
    };
    let cs = [
        f.eq(v(d[2]), v(d[4])),
        f.ge(v(d[1]), v(d[3])),
        f.ge(v(d[2]), v(d[1])),
        at_least,
        f.row_ge(closed([v(d[4])]), closed([v(d[2])])),
    ];
    for (order, s) in accepted_in_every_order(&f.s, &cs) {
        let sol = s
            .finalize()
            .unwrap_or_else(|e| panic!("order {order:?}: {e}"));
        let sizes: Vec<u64> = d.iter().map(|&x| sol.dim(&v(x)).unwrap().size()).collect();
        assert_eq!(sizes[1..4], [2, 2, 2], "order {order:?}");
    }
}
