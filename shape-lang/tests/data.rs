//! `shape_lang::data`: the values a program gives its own tensors, and its
//! refusals (typed, naming the tensor; never an abort).

use shape_lang::compile::{compile, Compiled};
use shape_lang::data::{program_inputs, random_values, written_values, Written};
use shape_lang::syntax::parse;
use shape_lang::ProgramError;

fn compiled(text: &str) -> Compiled {
    compile(&parse(text).unwrap()).unwrap()
}

#[test]
fn constants_and_sizes_are_given_as_written() {
    let c = compiled("const k: 3 = [1, 2, 3]\nsize d = 4\ninput x: d\ny = x / d\n");
    let solved = c.solve().unwrap();
    let k = c.tensor("k").unwrap();
    assert_eq!(
        written_values(&c, &solved, k).unwrap(),
        Some(Written::Constant(&[1.0, 2.0, 3.0][..]))
    );
    let x = c.tensor("x").unwrap();
    assert_eq!(written_values(&c, &solved, x).unwrap(), None);
    let inputs = program_inputs(&c, &solved, 9).unwrap();
    assert_eq!(inputs.get(k).unwrap().values(), [1.0, 2.0, 3.0]);
    // The input's values are the seeded ones for its name, four of them.
    let expected = random_values(9, "x", 4).unwrap();
    assert_eq!(inputs.get(x).unwrap().values(), &expected[..]);
    assert!(expected.iter().all(|v| (-1.0..1.0).contains(v)));
    // The size used as a number is its value.
    let sizes: Vec<f32> = c
        .size_values
        .keys()
        .map(|&t| inputs.get(t).unwrap().values()[0])
        .collect();
    assert_eq!(sizes, [4.0]);
}

#[test]
fn a_ragged_input_has_no_values_of_the_program() {
    let c = compiled("input a: 2, var\nb = exp(a)\n");
    let solved = c.solve().unwrap();
    let err = program_inputs(&c, &solved, 1).unwrap_err();
    assert!(matches!(err, ProgramError::Run { .. }), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("`a`") && text.contains("ragged"), "{text}");
}

#[test]
fn values_too_large_for_memory_are_refused_not_aborted() {
    // 2^32 · 2^32 elements: more than any allocation, and more than usize
    // on 32-bit targets.
    let c = compiled("input x: 4294967296, 4294967296\n");
    let solved = c.solve().unwrap();
    let err = program_inputs(&c, &solved, 1).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("`x`") && text.contains("does not fit in memory"),
        "{text}"
    );
    assert!(random_values(1, "x", usize::MAX / 2).is_none());
}
