//! Projections, kernels and the CPU reference executor on hand-computed
//! examples.

use backend_cpu::CpuBackend;
use shape_core::IterKind;
use shape_graph::{AxisIndex, Graph, TensorId};
use shape_run::{HostTensor, Inputs, RunGraph, RunOptions};
use shape_tests::differential::ProgramRunner;
use shape_tests::programs::Program;

/// The values of `out`, with the values of the leaves `out` depends on
/// given by name (others are ignored).
fn run(g: &Graph, data: &[(&str, Vec<f32>)], out: TensorId) -> Vec<f32> {
    let program = Program::with_named_data(g.clone(), vec![out], data.to_vec()).unwrap();
    let solved = g.solve().unwrap();
    let plan = solved.plan(&[out], &RunOptions::default()).unwrap();
    // Only the leaves the plan reads: a name given for another is fine.
    let mut inputs = Inputs::new();
    for &t in plan.leaves() {
        inputs.insert(t, program.inputs.get(t).unwrap().clone());
    }
    solved
        .run(
            &mut CpuBackend::new(),
            inputs,
            &[out],
            &RunOptions::default(),
        )
        .unwrap()
        .remove(out)
        .unwrap()
        .into_values()
}

#[test]
fn pointwise_add_broadcasts_a_column() {
    let mut g = Graph::new();
    let a = g.input("a", "2,3").unwrap();
    let b = g.input("b", "2,1").unwrap();
    let c = g.add(a, b).unwrap();
    let got = run(
        &g,
        &[("a", vec![1., 2., 3., 4., 5., 6.]), ("b", vec![10., 20.])],
        c,
    );
    assert_eq!(got, vec![11., 12., 13., 24., 25., 26.]);
    // The broadcast axis of b is read at index 0.
    let s = g.solve().unwrap();
    let p = s.projections(g.producer(c).unwrap()).unwrap();
    assert_eq!(
        p.operands[1],
        vec![AxisIndex::Iterator(0), AxisIndex::Fixed(0)]
    );
}

#[test]
fn pointwise_add_broadcasts_missing_leading_axes() {
    let mut g = Graph::new();
    let a = g.input("a", "2,3").unwrap();
    let b = g.input("b", "3").unwrap();
    let c = g.binary("mul", a, b).unwrap();
    let got = run(
        &g,
        &[
            ("a", vec![1., 2., 3., 4., 5., 6.]),
            ("b", vec![1., 10., 100.]),
        ],
        c,
    );
    assert_eq!(got, vec![1., 20., 300., 4., 50., 600.]);
}

#[test]
fn compose_is_a_matrix_product() {
    // w: 2 inputs -> 3 outputs, stored output-major: [[1,2],[3,4],[5,6]].
    // x: batch of 2 vectors [1,0] and [0,1].
    let mut g = Graph::new();
    let w = g.input("w", "2->3").unwrap();
    let x = g.input("x", "2|2").unwrap();
    let y = g.compose(w, x).unwrap();
    let got = run(
        &g,
        &[
            ("w", vec![1., 2., 3., 4., 5., 6.]),
            ("x", vec![1., 0., 0., 1.]),
        ],
        y,
    );
    assert_eq!(got, vec![1., 3., 5., 2., 4., 6.]);
    let s = g.solve().unwrap();
    let p = s.projections(g.producer(y).unwrap()).unwrap();
    assert_eq!(
        p.kinds,
        vec![IterKind::Parallel, IterKind::Parallel, IterKind::Reduction]
    );
}

#[test]
fn einsum_contraction_and_reduction() {
    let mut g = Graph::new();
    let a = g.input("a", "2,3").unwrap();
    let b = g.input("b", "3,2").unwrap();
    let c = g.einsum("ij;jk=>ik", &[a, b]).unwrap();
    let a_vals = vec![1., 2., 3., 4., 5., 6.];
    let b_vals = vec![1., 0., 0., 1., 1., 1.];
    // [[1,2,3],[4,5,6]] x [[1,0],[0,1],[1,1]] = [[4,5],[10,11]]
    assert_eq!(
        run(&g, &[("a", a_vals.clone()), ("b", b_vals.clone())], c),
        vec![4., 5., 10., 11.]
    );
    let rows = g.permute("ij=>i", a).unwrap();
    assert_eq!(
        run(&g, &[("a", a_vals.clone()), ("b", b_vals.clone())], rows),
        vec![6., 15.]
    );
    let total = g.permute("ij=>", a).unwrap();
    assert_eq!(
        run(&g, &[("a", a_vals.clone()), ("b", b_vals.clone())], total),
        vec![21.]
    );
    let outer = g.einsum("i;j=>ij", &[rows, rows]).unwrap();
    assert_eq!(
        run(&g, &[("a", a_vals), ("b", b_vals)], outer),
        vec![36., 90., 90., 225.]
    );
}

#[test]
fn einsum_diagonal_sums_strides() {
    let mut g = Graph::new();
    let a = g.input("a", "3,3").unwrap();
    let trace = g.permute("ii=>", a).unwrap();
    let diag = g.permute("ii=>i", a).unwrap();
    let vals = (1..=9).map(|v| v as f32).collect::<Vec<_>>();
    assert_eq!(run(&g, &[("a", vals.clone())], trace), vec![15.]);
    assert_eq!(run(&g, &[("a", vals)], diag), vec![1., 5., 9.]);
}

#[test]
fn permute_and_transpose() {
    let mut g = Graph::new();
    let a = g.input("a", "2,3").unwrap();
    let p = g.permute("ij=>ji", a).unwrap();
    let vals = vec![1., 2., 3., 4., 5., 6.];
    assert_eq!(
        run(&g, &[("a", vals.clone())], p),
        vec![1., 4., 2., 5., 3., 6.]
    );
    // transpose swaps input and output rows: "3->2" stored [[..3..] x2]
    let m = g.input("m", "3->2").unwrap();
    let t = g.transpose(m).unwrap();
    assert_eq!(g.solve().unwrap().shape(t).unwrap().to_string(), "|2->3");
    assert_eq!(
        run(&g, &[("a", vals.clone()), ("m", vals)], t),
        vec![1., 4., 2., 5., 3., 6.]
    );
}

#[test]
fn batch_slice_takes_the_given_index() {
    let mut g = Graph::new();
    let a = g.input("a", "3|2").unwrap();
    let s = g.batch_slice(a).unwrap();
    let mut p = Program::with_named_data(g.clone(), vec![s], [("a", vec![1., 2., 3., 4., 5., 6.])])
        .unwrap();
    let solved = g.solve().unwrap();
    for (i, want) in [(0, vec![1., 2.]), (1, vec![3., 4.]), (2, vec![5., 6.])] {
        p.options = RunOptions::default().with_slice(i);
        let out = CpuBackend::new().run_solved(&solved, &p).unwrap();
        assert_eq!(out[&s], want);
    }
    p.options = RunOptions::default().with_slice(3);
    let err = solved
        .run(&mut CpuBackend::new(), p.inputs.clone(), &[s], &p.options)
        .unwrap_err();
    assert_eq!(err.kind(), "slice_out_of_range");
    assert_eq!(
        err.to_string(),
        "`t1 = batch_slice(a)` (op #0) takes batch index 3, but the batch axis it slices has size 3"
    );
}

#[test]
fn projections_do_not_share_iterators_through_another_operation() {
    // x's two axes are equal in size, and another operation (the einsum
    // below) relates them; a plain relu of x must still iterate them as two
    // independent axes.
    let mut g = Graph::new();
    let x = g.input("x", "4,4").unwrap();
    let _trace = g.permute("ii=>", x).unwrap();
    let r = g.unary("relu", x).unwrap();
    let s = g.solve().unwrap();
    let p = s.projections(g.producer(r).unwrap()).unwrap();
    assert_eq!(p.sizes, vec![4, 4]);
    assert_eq!(
        p.operands[0],
        vec![AxisIndex::Iterator(0), AxisIndex::Iterator(1)]
    );
}

#[test]
fn mlp_forward_pass() {
    let mut g = Graph::new();
    let x = g.input("x", "2|3").unwrap();
    let w1 = g.parameter("w1").unwrap();
    let b1 = g.parameter_with_spec("b1", "2").unwrap();
    let h = g.compose(w1, x).unwrap();
    let h = g.add(h, b1).unwrap();
    let h = g.unary("relu", h).unwrap();
    let w2 = g.parameter("w2").unwrap();
    let y = g.compose(w2, h).unwrap();
    g.require(y, "2|->1").unwrap();
    let data = [
        ("x", vec![1., 2., 3., -1., -2., -3.]),
        ("w1", vec![1., 0., 0., 0., 1., 1.]), // h = [x0, x1 + x2]
        ("b1", vec![0., -1.]),
        ("w2", vec![1., 2.]),
    ];
    // batch 0: h = relu([1, 5 - 1]) = [1, 4]; y = 1 + 8 = 9
    // batch 1: h = relu([-1, -5 - 1]) = [0, 0]; y = 0
    assert_eq!(run(&g, &data, y), vec![9., 0.]);
}

#[test]
fn missing_and_misshapen_data_are_errors() {
    let mut g = Graph::new();
    let a = g.input("a", "2").unwrap();
    let b = g.unary("relu", a).unwrap();
    let s = g.solve().unwrap();
    let options = RunOptions::default();
    let err = s
        .run(&mut CpuBackend::new(), Inputs::new(), &[b], &options)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "no data for input `a`: give 2 values (its solved shape is |->2)"
    );
    let wrong = Inputs::new().with(a, HostTensor::new(vec![1], vec![1.0]).unwrap());
    let err = s
        .run(&mut CpuBackend::new(), wrong, &[b], &options)
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "`a` needs dims [2] (its solved shape is |->2, in memory order: batch, output, input) but was given dims [1]"
    );
    let computed = Inputs::new()
        .with(a, HostTensor::new(vec![2], vec![1.0, 2.0]).unwrap())
        .with(b, HostTensor::new(vec![2], vec![1.0, 2.0]).unwrap());
    let err = s
        .run(&mut CpuBackend::new(), computed, &[b], &options)
        .unwrap_err();
    assert_eq!(err.kind(), "not_a_leaf");
    // Unknown functions are refused when the graph is built, not when it runs.
    let err = g.unary("tanhh", a).unwrap_err();
    assert_eq!(err.kind(), "unknown_function");
    assert!(
        err.to_string()
            .starts_with("unknown function `tanhh`; the functions are id, neg"),
        "{err}"
    );
}

#[test]
fn kernel_ir_of_representative_operations() {
    let mut g = Graph::new();
    let a = g.input("a", "4|2,3").unwrap();
    let b = g.input("b", "4|2,1").unwrap();
    let w = g.input("w", "3->5").unwrap();
    let x = g.input("x", "4|3").unwrap();
    let ops = [
        ("add (broadcast)", g.add(a, b).unwrap()),
        ("relu", g.unary("relu", a).unwrap()),
        ("compose", g.compose(w, x).unwrap()),
        ("row sums", g.permute("b|ij=>b|i", a).unwrap()),
        ("transpose", g.permute("b|ij=>b|ji", a).unwrap()),
        ("batch slice", g.batch_slice(a).unwrap()),
    ];
    let s = g.solve().unwrap();
    let mut out = String::new();
    for (name, t) in ops {
        let lowered = s
            .lower(
                g.producer(t).unwrap(),
                &shape_graph::LowerOptions::default().with_slice(1),
            )
            .unwrap();
        let (kernel, launch) = (&lowered.steps[0].kernel, &lowered.steps[0].launch);
        out.push_str(&format!(
            "{name}:\n  {kernel}\n  sizes {:?}\n  out {:?}\n",
            launch.sizes, launch.result
        ));
        for (i, l) in launch.operands.iter().enumerate() {
            out.push_str(&format!("  in{i} {l:?}\n"));
        }
    }
    insta::assert_snapshot!(out);
}

#[test]
fn oversized_results_are_errors_not_aborts() {
    // An outer product of two inputs of 100,000 elements would need 40 GB.
    let mut g = Graph::new();
    let a = g.input("a", "100000").unwrap();
    let b = g.input("b", "100000").unwrap();
    let outer = g.einsum("i;j=>ij", &[a, b]).unwrap();
    let s = g.solve().unwrap();
    let p = Program::with_named_data(
        g.clone(),
        vec![outer],
        [("a", vec![1.0; 100_000]), ("b", vec![1.0; 100_000])],
    )
    .unwrap();
    let err = s
        .run(&mut CpuBackend::coalesced(), p.inputs, &[outer], &p.options)
        .unwrap_err();
    assert!(
        err.to_string().contains("exceeds the CPU backend's limit"),
        "{err}"
    );
}

#[test]
fn a_run_returns_every_one_of_many_results() {
    // Issue 10, finding 5: the runner tested each result against the list
    // of outputs (100,000 results took 155 s through shapec). Its speed is
    // measured by `cargo bench -p shape-graph --bench run_scaling`; this
    // checks that a run of many results, every one an output, returns them
    // all, each once and right, with a repeated output counted once.
    const N: usize = 30_000;
    let mut g = Graph::new();
    let x = g.input("x", "4").unwrap();
    let mut t = x;
    let mut outputs = Vec::with_capacity(N + 1);
    for i in 0..N {
        t = g.unary(["neg", "relu", "neg"][i % 3], t).unwrap();
        outputs.push(t);
    }
    outputs.push(outputs[0]);
    let s = g.solve().unwrap();
    let inputs = Inputs::new().with(
        x,
        HostTensor::new(vec![4], vec![-1.0, 2.0, -3.0, 4.0]).unwrap(),
    );
    let out = s
        .run(
            &mut CpuBackend::coalesced(),
            inputs,
            &outputs,
            &RunOptions::default(),
        )
        .unwrap();
    assert_eq!(out.iter().count(), N);
    // neg, relu, neg of [-1, 2, -3, 4] is [-1, 0, -3, 0], a fixed point of
    // the three after that.
    let last = out.get(outputs[N - 1]).unwrap().values();
    assert_eq!(last, [-1.0, 0.0, -3.0, 0.0]);
    assert_eq!(
        out.get(outputs[0]).unwrap().values(),
        [1.0, -2.0, 3.0, -4.0]
    );
}

#[test]
fn a_long_pointwise_chain_fuses_into_kernels_of_bounded_size() {
    // Fused bodies are capped, so a chain of any length neither builds one
    // body thousands of levels deep (evaluation and code generation
    // recurse through it) nor copies it quadratically.
    const N: usize = 5_000;
    let mut g = Graph::new();
    let x = g.input("x", "4").unwrap();
    let mut t = x;
    for i in 0..N {
        t = g.unary(["neg", "relu", "neg"][i % 3], t).unwrap();
    }
    let s = g.solve().unwrap();
    let plan = s.plan(&[t], &RunOptions::default()).unwrap();
    assert!(plan.ops().len() < N / 10, "{} kernels", plan.ops().len());
    assert!(plan.ops().len() > 1);
    let inputs = Inputs::new().with(
        x,
        HostTensor::new(vec![4], vec![-1.0, 2.0, -3.0, 4.0]).unwrap(),
    );
    let fused = s
        .run_plan(&mut CpuBackend::coalesced(), &plan, inputs.clone())
        .unwrap();
    let plain = s
        .run(
            &mut CpuBackend::coalesced(),
            inputs,
            &[t],
            &RunOptions::default().unfused(),
        )
        .unwrap();
    assert_eq!(
        fused.get(t).unwrap().values(),
        plain.get(t).unwrap().values()
    );
}

#[test]
fn a_contraction_takes_its_bias_and_activation_as_an_epilogue() {
    let mut g = Graph::new();
    let x = g.input("x", "4|3").unwrap();
    let w = g.input("w", "3->5").unwrap();
    let b = g.input("b", "5").unwrap();
    let h = g.compose(w, x).unwrap();
    let h = g.add(h, b).unwrap();
    let y = g.unary("relu", h).unwrap();
    let s = g.solve().unwrap();
    let plan = s.plan(&[y], &RunOptions::default()).unwrap();
    // compose, add and relu: one kernel, the add and relu its epilogue.
    let [op] = plan.ops() else {
        panic!("{} kernels", plan.ops().len());
    };
    let kernel = op.lowered.steps[0].kernel.to_string();
    assert!(kernel.ends_with("; then relu(add(acc, in2))"), "{kernel}");
    let unfused = s.plan(&[y], &RunOptions::default().unfused()).unwrap();
    assert_eq!(unfused.ops().len(), 3);
    let data = |n: usize, k: usize| -> Vec<f32> {
        (0..n).map(|i| ((i * k) % 11) as f32 * 0.37 - 1.6).collect()
    };
    let inputs = Inputs::new()
        .with(x, HostTensor::new(vec![4, 3], data(12, 5)).unwrap())
        .with(w, HostTensor::new(vec![5, 3], data(15, 7)).unwrap())
        .with(b, HostTensor::new(vec![5], data(5, 3)).unwrap());
    for mut cpu in [CpuBackend::reference(), CpuBackend::coalesced()] {
        let fused = s.run_plan(&mut cpu, &plan, inputs.clone()).unwrap();
        let plain = s.run_plan(&mut cpu, &unfused, inputs.clone()).unwrap();
        let bits = |o: &shape_run::RunOutputs| -> Vec<u32> {
            o.get(y)
                .unwrap()
                .values()
                .iter()
                .map(|v| v.to_bits())
                .collect()
        };
        assert_eq!(bits(&fused), bits(&plain));
        assert!(fused.get(y).unwrap().values().contains(&0.0));
    }
}

#[test]
fn a_pointwise_producer_read_once_fuses_into_the_reduction_reading_it() {
    let mut g = Graph::new();
    let x = g.input("x", "3|4,5").unwrap();
    let m = g.input("m", "5").unwrap();
    let d = g.binary("sub", x, m).unwrap();
    let sq = g.unary("exp", d).unwrap();
    // Each element of exp(x - m) is read once by the sum over the last two
    // axes (the sum's loop visits them in another order than the
    // producer's): one kernel.
    let s = g.einsum("b|i,j=>b|", &[sq]).unwrap();
    // A contraction reads each element of its operand several times: its
    // pointwise producer keeps its own kernel.
    let w = g.input("w", "5,6").unwrap();
    let r = g.unary("relu", x).unwrap();
    let c = g.einsum("b|i,j;j,k=>b|i,k", &[r, w]).unwrap();
    let solved = g.solve().unwrap();
    let plan = solved.plan(&[s, c], &RunOptions::default()).unwrap();
    let kernels: Vec<String> = plan
        .ops()
        .iter()
        .map(|op| op.lowered.steps[0].kernel.to_string())
        .collect();
    assert_eq!(kernels.len(), 3, "{kernels:#?}");
    assert!(
        kernels.iter().any(|k| k.ends_with("+= exp(sub(in0, in1))")),
        "{kernels:#?}"
    );
    let unfused = solved
        .plan(&[s, c], &RunOptions::default().unfused())
        .unwrap();
    assert_eq!(unfused.ops().len(), 5);
    let data = |n: usize, k: usize| -> Vec<f32> {
        (0..n).map(|i| ((i * k) % 13) as f32 * 0.31 - 1.7).collect()
    };
    let inputs = Inputs::new()
        .with(x, HostTensor::new(vec![3, 4, 5], data(60, 7)).unwrap())
        .with(m, HostTensor::new(vec![5], data(5, 3)).unwrap())
        .with(w, HostTensor::new(vec![5, 6], data(30, 11)).unwrap());
    for mut cpu in [CpuBackend::reference(), CpuBackend::coalesced()] {
        let fused = solved.run_plan(&mut cpu, &plan, inputs.clone()).unwrap();
        let plain = solved.run_plan(&mut cpu, &unfused, inputs.clone()).unwrap();
        for t in [s, c] {
            let bits = |o: &shape_run::RunOutputs| -> Vec<u32> {
                o.get(t)
                    .unwrap()
                    .values()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect()
            };
            assert_eq!(bits(&fused), bits(&plain));
        }
    }
}
