//! Nested ragged (`var`) axes: DyND's `3 * var * var * T` (sentences of
//! words of characters), one level of offsets per ragged axis. Every
//! result is held to an independent reference written over plain nested
//! `Vec`s (DyND's rules at every level: a row of 1 broadcasts, a row of
//! the length it meets is read in step, anything else is refused), on the
//! CPU reference, the coalesced CPU path and wgpu.

use backend_cpu::CpuBackend;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use shape_core::{Backend, RaggedAxis};
use shape_graph::{Graph, TensorId};
use shape_run::{HostTensor, Inputs, RunGraph, RunOptions};

/// Sentences of words of characters.
type Nested = Vec<Vec<Vec<f32>>>;

/// `x` as data of a `S, var, var` tensor.
fn nested(x: &Nested) -> HostTensor {
    let words: Vec<u64> = x.iter().map(|s| s.len() as u64).collect();
    let chars: Vec<u64> = x.iter().flatten().map(|w| w.len() as u64).collect();
    let words = RaggedAxis::from_lengths(1, &words).unwrap();
    let chars = RaggedAxis::from_lengths(2, &chars).unwrap();
    let dims = vec![x.len() as u64, 0, 0];
    let rows = RaggedAxis::nested(vec![words], chars, &dims).unwrap();
    let values = x.iter().flatten().flatten().copied().collect();
    HostTensor::with_rows(dims, rows, values).unwrap()
}

/// Per-word values as data of a `S, var, 1` tensor.
fn per_word(x: &[Vec<f32>]) -> HostTensor {
    let lengths: Vec<u64> = x.iter().map(|s| s.len() as u64).collect();
    let values = x.iter().flatten().copied().collect();
    HostTensor::ragged(vec![x.len() as u64], &lengths, vec![1], values).unwrap()
}

/// Nested lists as numpy's `tolist` prints them.
fn show<T: Show>(x: &[T]) -> String {
    let items: Vec<String> = x.iter().map(Show::show).collect();
    format!("[{}]", items.join(", "))
}

trait Show {
    fn show(&self) -> String;
}

impl Show for f32 {
    fn show(&self) -> String {
        format!("{self}")
    }
}

impl<T: Show> Show for Vec<T> {
    fn show(&self) -> String {
        show(self)
    }
}

/// Runs `outs` of `g` on the CPU reference, the coalesced path and wgpu
/// (where an adapter exists); every backend must give the same nested
/// values (the data are small integers, so sums are exact everywhere),
/// which are returned, or the same error kind.
fn run_everywhere(
    g: &Graph,
    data: &[(TensorId, HostTensor)],
    outs: &[TensorId],
) -> Result<Vec<String>, String> {
    let solved = g.solve().map_err(|e| format!("{}: {e}", e.kind()))?;
    let inputs = || {
        let mut inputs = Inputs::new();
        for (t, v) in data {
            inputs.insert(*t, v.clone());
        }
        inputs
    };
    fn go<B: Backend>(
        solved: &shape_graph::SolvedGraph,
        b: &mut B,
        inputs: Inputs,
        outs: &[TensorId],
    ) -> Result<Vec<String>, String> {
        let mut r = solved
            .run(b, inputs, outs, &RunOptions::default())
            .map_err(|e| format!("{}: {e}", e.kind()))?;
        Ok(outs
            .iter()
            .map(|&t| r.remove(t).unwrap().to_string())
            .collect())
    }
    let reference = go(&solved, &mut CpuBackend::reference(), inputs(), outs);
    let coalesced = go(&solved, &mut CpuBackend::coalesced(), inputs(), outs);
    let kind = |r: &Result<Vec<String>, String>| match r {
        Ok(v) => Ok(v.clone()),
        Err(e) => Err(e.split(':').next().unwrap_or_default().to_string()),
    };
    assert_eq!(kind(&reference), kind(&coalesced), "the coalesced CPU path");
    let on_gpu =
        shape_tests::gpu::with_shared_wgpu("nested ragged", |gpu| go(&solved, gpu, inputs(), outs));
    if let Some(on_gpu) = on_gpu {
        assert_eq!(kind(&reference), kind(&on_gpu), "wgpu");
    }
    reference
}

/// The seed document's sentences: `3 * var * var`, one of them empty.
fn sentences() -> Nested {
    vec![
        vec![vec![1., 2.], vec![3.], vec![]],
        vec![vec![4., 5., 6.]],
        vec![],
    ]
}

#[test]
fn sentences_of_words_of_characters() {
    let x = sentences();
    let mut g = Graph::new();
    let xs = g.input("x", "3, var, var").unwrap();
    let one = g.input("one", "1").unwrap();
    let w = g.input("w", "3, var, 1").unwrap();
    let plus = g.add(xs, one).unwrap();
    let scaled = g.mul(xs, w).unwrap();
    let twice = g.add(xs, xs).unwrap();
    let word_sums = g.einsum("ijk=>ij", &[xs]).unwrap();
    let sentence_sums = g.einsum("ij=>i", &[word_sums]).unwrap();
    let solved = g.solve().unwrap();
    assert_eq!(solved.ragged_axes(xs).unwrap(), vec![1, 2]);
    assert_eq!(solved.shape(plus).unwrap().to_string(), "|->3, var, var");
    assert_eq!(solved.shape(word_sums).unwrap().to_string(), "|->3, var");
    let weights = vec![vec![10., 20., 30.], vec![2.], vec![]];
    let out = run_everywhere(
        &g,
        &[
            (xs, nested(&x)),
            (one, HostTensor::new(vec![1], vec![1.]).unwrap()),
            (w, per_word(&weights)),
        ],
        &[plus, scaled, twice, word_sums, sentence_sums],
    )
    .unwrap();
    assert_eq!(out[0], "[[[2, 3], [4], []], [[5, 6, 7]], []]");
    assert_eq!(out[1], "[[[10, 20], [60], []], [[8, 10, 12]], []]");
    assert_eq!(out[2], "[[[2, 4], [6], []], [[8, 10, 12]], []]");
    assert_eq!(out[3], "[[3, 3, 0], [15], []]");
    assert_eq!(out[4], "[6, 15, 0]");
    assert_eq!(
        nested(&x).to_string(),
        "[[[1, 2], [3], []], [[4, 5, 6]], []]"
    );
}

#[test]
fn broadcasting_at_every_level() {
    // A sentence of one word broadcasts over the other's words; a word of
    // one character over the other's characters (DyND: var with 1 gives
    // var, var with var gives var row by row).
    let x: Nested = vec![
        vec![vec![1., 2.], vec![3., 4.]],
        vec![vec![5.], vec![6., 7., 8.]],
    ];
    let y: Nested = vec![vec![vec![10., 20.]], vec![vec![100.], vec![1., 2., 3.]]];
    let mut g = Graph::new();
    let xs = g.input("x", "2, var, var").unwrap();
    let ys = g.input("y", "2, var, var").unwrap();
    let v = g.input("v", "2, 1, var").unwrap();
    let sum = g.add(xs, ys).unwrap();
    let with_v = g.add(xs, v).unwrap();
    let v_data = HostTensor::ragged(vec![2, 1], &[2, 1], vec![], vec![0.5, 0.25, 9.]).unwrap();
    let out = run_everywhere(
        &g,
        &[(xs, nested(&x)), (ys, nested(&y)), (v, v_data)],
        &[sum],
    );
    assert_eq!(
        out.unwrap()[0],
        "[[[11, 22], [13, 24]], [[105], [7, 9, 11]]]"
    );
    // v's rows: [0.5, 0.25] against words of 2, then [9] against any word.
    let v_data = HostTensor::ragged(vec![2, 1], &[2, 1], vec![], vec![0.5, 0.25, 9.]).unwrap();
    let out = run_everywhere(&g, &[(xs, nested(&x)), (v, v_data)], &[with_v]).unwrap();
    assert_eq!(out[0], "[[[1.5, 2.25], [3.5, 4.25]], [[14], [15, 16, 17]]]");
    // Three words against two: refused, naming the row.
    let z: Nested = vec![vec![vec![1.], vec![2.], vec![3.]], vec![vec![5.], vec![6.]]];
    let e = run_everywhere(&g, &[(xs, nested(&x)), (ys, nested(&z))], &[sum]).unwrap_err();
    assert!(e.starts_with("ragged_row"), "{e}");
    assert!(e.contains("at row (0)"), "{e}");
    // A word of 3 characters against one of 2.
    let z: Nested = vec![
        vec![vec![1., 2.], vec![3., 4., 5.]],
        vec![vec![5.], vec![6.]],
    ];
    let e = run_everywhere(&g, &[(xs, nested(&x)), (ys, nested(&z))], &[sum]).unwrap_err();
    assert!(e.starts_with("ragged_row"), "{e}");
    assert!(e.contains("at row (0, 1)"), "{e}");
}

#[test]
fn dense_data_for_a_nested_ragged_input_is_full_rows() {
    let mut g = Graph::new();
    let xs = g.input("x", "2, var, var").unwrap();
    let s = g.einsum("ijk=>ij", &[xs]).unwrap();
    let data = HostTensor::new(vec![2, 2, 3], (1..=12).map(|v| v as f32).collect()).unwrap();
    let out = run_everywhere(&g, &[(xs, data)], &[s]).unwrap();
    assert_eq!(out[0], "[[6, 15], [24, 33]]");
}

#[test]
fn nested_rows_must_match_the_shape() {
    // Rows at one ragged axis given for a tensor with two.
    let mut g = Graph::new();
    let xs = g.input("x", "2, var, var").unwrap();
    let y = g.add(xs, xs).unwrap();
    let one_level = HostTensor::ragged(vec![2, 2], &[1, 2, 0, 1], vec![], vec![1.; 4]).unwrap();
    let e = run_everywhere(&g, &[(xs, one_level)], &[y]).unwrap_err();
    assert!(e.starts_with("data_shape"), "{e}");
    // Offsets of a level that do not add up to the next level's rows.
    let words = RaggedAxis::from_lengths(1, &[1, 2]).unwrap();
    let chars = RaggedAxis::from_lengths(2, &[1, 1]).unwrap();
    assert!(RaggedAxis::nested(vec![words], chars, &[2, 0, 0]).is_err());
}

/// The strategy of nested data: up to 4 sentences of up to 4 words of up
/// to 5 characters, small integers.
fn sentences_strategy() -> impl Strategy<Value = Nested> {
    let word = prop::collection::vec((-4i32..5).prop_map(|v| v as f32), 0..5);
    let sentence = prop::collection::vec(word, 0..4);
    prop::collection::vec(sentence, 1..4)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "../proptest-regressions/nested_ragged.txt",
        ))),
        ..ProptestConfig::default()
    })]

    /// Random sentences: a function of the characters, a weight per word,
    /// sums along the characters then the words, and a sentence-wide bias,
    /// each equal to the closure over nested `Vec`s on every backend.
    #[test]
    fn nested_operations_equal_their_reference(x in sentences_strategy(), seed in 0u64..1000) {
        let weights: Vec<Vec<f32>> = x
            .iter()
            .enumerate()
            .map(|(i, s)| (0..s.len()).map(|j| ((seed as usize + 3 * i + j) % 7) as f32 - 3.0).collect())
            .collect();
        let bias: Vec<f32> = (0..x.len()).map(|i| ((seed as usize + i) % 5) as f32).collect();
        let mut g = Graph::new();
        let xs = g.input("x", &format!("{}, var, var", x.len())).unwrap();
        let w = g.input("w", &format!("{}, var, 1", x.len())).unwrap();
        let b = g.input("b", &format!("{}, 1, 1", x.len())).unwrap();
        let scaled = g.mul(xs, w).unwrap();
        let shifted = g.add(scaled, b).unwrap();
        let relu = g.unary("relu", shifted).unwrap();
        let word_sums = g.einsum("ijk=>ij", &[relu]).unwrap();
        let sentence_sums = g.einsum("ij=>i", &[word_sums]).unwrap();
        let data = [
            (xs, nested(&x)),
            (w, per_word(&weights)),
            (b, HostTensor::new(vec![x.len() as u64, 1, 1], bias.clone()).unwrap()),
        ];
        let out = run_everywhere(&g, &data, &[relu, word_sums, sentence_sums]).unwrap();
        // The reference: plain loops over the nested lists.
        let relu_ref: Nested = x
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s.iter()
                    .enumerate()
                    .map(|(j, word)| word.iter().map(|c| (c * weights[i][j] + bias[i]).max(0.0)).collect())
                    .collect()
            })
            .collect();
        let word_ref: Vec<Vec<f32>> = relu_ref
            .iter()
            .map(|s| s.iter().map(|word| word.iter().fold(0.0, |a, c| a + c)).collect())
            .collect();
        // A sum starts at +0 (Rust's `Sum` of no `f32` is -0).
        let sentence_ref: Vec<f32> = word_ref.iter().map(|s| s.iter().fold(0.0, |a, c| a + c)).collect();
        prop_assert_eq!(&out[0], &show(&relu_ref));
        prop_assert_eq!(&out[1], &show(&word_ref));
        prop_assert_eq!(&out[2], &show(&sentence_ref));
    }
}

#[test]
fn nested_rows_of_changing_lengths_are_one_launch() {
    // 40 sentences of 0..4 words of 0..6 characters: a weight per word
    // and a sum along the characters each lower to one launch over a row
    // table (one row per word), where a launch per row would be ~60.
    let x: Nested = (0..40)
        .map(|i| (0..i % 4).map(|j| vec![1.0; (i + j) % 6]).collect())
        .collect();
    let weights: Vec<Vec<f32>> = x.iter().map(|s| vec![2.0; s.len()]).collect();
    let mut g = Graph::new();
    let xs = g.input("x", "40, var, var").unwrap();
    let w = g.input("w", "40, var, 1").unwrap();
    let y = g.mul(xs, w).unwrap();
    let s = g.einsum("ijk=>ij", &[y]).unwrap();
    let solved = g.solve().unwrap();
    let (xd, wd) = (nested(&x), per_word(&weights));
    let options = shape_graph::LowerOptions::default().with_row_tables(true);
    let lowered = |t: TensorId, rows: &[Option<&RaggedAxis>]| {
        let op = solved.graph().producer(t).unwrap();
        solved.lower_ragged(op, rows, &options).unwrap()
    };
    let product = lowered(y, &[xd.ragged_axis(), wd.ragged_axis()]);
    assert_eq!(product.lowered.steps.len(), 1);
    assert!(product.lowered.steps[0].launch.rows.is_some());
    let y_rows = product.result_rows.clone().unwrap();
    assert_eq!(y_rows, xd.ragged_axis().unwrap().clone());
    let sum = lowered(s, &[Some(&y_rows)]);
    assert_eq!(sum.lowered.steps.len(), 1);
    assert!(sum.lowered.steps[0].launch.rows.is_some());
    // And the values, on every backend.
    let out = run_everywhere(&g, &[(xs, xd), (w, wd)], &[s]).unwrap();
    let expected: Vec<Vec<f32>> = x
        .iter()
        .map(|s| s.iter().map(|word| 2.0 * word.len() as f32).collect())
        .collect();
    assert_eq!(out[0], show(&expected));
}
