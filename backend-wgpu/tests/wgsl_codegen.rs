//! The generated WGSL, checked without a device: every shader parses and
//! validates with naga, representative shaders are snapshotted, and the
//! parameter block packs launches where the shader reads them.

use backend_wgpu::tiled::{TileAxes, TileConfig};
use backend_wgpu::wgsl::{
    f32_literal, generate, generate_for, generate_scheduled, ParamLayout, Schedule, StrideClass,
    StrideClasses,
};
use proptest::prelude::*;
use shape_core::kernel::{
    Accumulate, BinaryOp, CompareOp, Expr, IterKind, Kernel, Launch, Layout, UnaryOp,
};

fn validate(source: &str) -> Result<(), String> {
    let module = naga::front::wgsl::parse_str(source).map_err(|e| e.emit_to_string(source))?;
    naga::valid::Validator::new(
        naga::valid::ValidationFlags::all(),
        naga::valid::Capabilities::empty(),
    )
    .validate(&module)
    .map_err(|e| format!("{e:?}"))?;
    Ok(())
}

/// The loops of a shader: Mesa's per-invocation budget counts every
/// back-edge, so a generated shader has at most one loop, whose length the
/// planner bounds (see `backend_wgpu::reduction`).
fn loops(source: &str) -> usize {
    source
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .flat_map(|code| code.split(|c: char| !c.is_alphanumeric() && c != '_'))
        .filter(|word| matches!(*word, "for" | "loop" | "while"))
        .count()
}

fn load(i: usize) -> Box<Expr> {
    Box::new(Expr::Load(i))
}

fn representative() -> Vec<(&'static str, Kernel)> {
    use IterKind::{Parallel as P, Reduction as R};
    vec![
        (
            "broadcast add over two parallel iterators",
            Kernel::new(
                vec![P, P],
                2,
                Expr::Binary(BinaryOp::Add, load(0), load(1)),
                Accumulate::Assign,
            ),
        ),
        (
            "matrix product: sum of products over one reduction",
            Kernel::new(
                vec![P, P, R],
                2,
                Expr::Binary(BinaryOp::Mul, load(0), load(1)),
                Accumulate::Add,
            ),
        ),
        (
            "max over two reductions around a parallel iterator",
            Kernel::new(
                vec![R, P, R],
                1,
                Expr::Unary(UnaryOp::Exp, load(0)),
                Accumulate::Max,
            ),
        ),
        (
            "relu, a comparison and a select with constants",
            Kernel::new(
                vec![P],
                1,
                Expr::Select(
                    Box::new(Expr::Compare(
                        CompareOp::Lt,
                        load(0),
                        Box::new(Expr::Const(-0.5)),
                    )),
                    Box::new(Expr::Unary(UnaryOp::Relu, load(0))),
                    Box::new(Expr::Const(f32::INFINITY)),
                ),
                Accumulate::Assign,
            ),
        ),
        (
            "a scalar fill: no iterators, no operands",
            Kernel::new(vec![], 0, Expr::Const(1.5e-7), Accumulate::Assign),
        ),
    ]
}

#[test]
fn representative_shaders_validate_and_match_their_snapshots() {
    let mut all = String::new();
    // The broadcast add specialized for a row-major matrix plus a row
    // vector: unit and zero strides need no multiply.
    let add = representative().remove(0).1;
    let matrix = Layout::new(0, vec![8, 1], 32);
    let launch = Launch::new(
        vec![4, 8],
        matrix.clone(),
        vec![matrix, Layout::new(0, vec![0, 1], 8)],
    );
    let specialized = generate_for(&add, &StrideClasses::of(&add, &launch));
    validate(&specialized).unwrap();
    all.push_str(&format!(
        "// ===== broadcast add, specialized for [4, 8] + [8]\n{specialized}\n"
    ));
    for (what, kernel) in representative() {
        let source = generate(&kernel);
        if let Err(e) = validate(&source) {
            panic!("{what}: {e}\n{source}");
        }
        all.push_str(&format!("// ===== {what}\n{source}\n"));
    }
    // Workgroup reductions: one reduction iterator (a row sum), and two
    // around a parallel one (the odometer carries between them).
    for (what, kernel) in representative() {
        if Schedule::WorkgroupReduction.effective(&kernel) != Schedule::WorkgroupReduction {
            continue;
        }
        let source = generate_scheduled(
            &kernel,
            &StrideClasses::general(&kernel),
            Schedule::WorkgroupReduction,
        );
        if let Err(e) = validate(&source) {
            panic!("{what}, workgroup reduction: {e}\n{source}");
        }
        all.push_str(&format!(
            "// ===== {what}, as a workgroup reduction\n{source}\n"
        ));
    }
    insta::assert_snapshot!(all);
}

#[test]
fn literals_are_exact_for_every_class_of_value() {
    assert_eq!(f32_literal(1.0), "f32(1.0)");
    assert_eq!(f32_literal(-0.5), "f32(-0.5)");
    assert_eq!(f32_literal(-0.0), "f32(-0.0)");
    assert_eq!(f32_literal(1.5e-7), "f32(1.5e-7)");
    assert_eq!(f32_literal(f32::INFINITY), "bitcast<f32>(2139095040u)");
    assert_eq!(f32_literal(f32::NEG_INFINITY), "bitcast<f32>(4286578688u)");
    assert!(f32_literal(f32::NAN).starts_with("bitcast<f32>("));
    assert_eq!(f32_literal(1e-45), "bitcast<f32>(1u)");
    for v in [f32::MAX, f32::MIN_POSITIVE, -3.25e38, 0.1] {
        let source = format!("const c = {};", f32_literal(v));
        validate(&source).unwrap();
    }
}

#[test]
fn the_parameter_block_holds_the_launch_where_the_shader_reads_it() {
    let kernel = Kernel::new(
        vec![IterKind::Parallel, IterKind::Reduction],
        1,
        Expr::Load(0),
        Accumulate::Add,
    );
    let layout = ParamLayout::of(&kernel);
    // total, base, 2 sizes, result (offset + 2 strides), operand (same).
    assert_eq!(layout.words(), 2 + 2 + 3 + 3);
    assert_eq!(layout.vec4s(), 3);
    assert_eq!(layout.bytes(), 48);
    let launch = Launch::new(
        vec![2, 3],
        Layout::new(7, vec![1, 0], 9),
        vec![Layout::new(0, vec![3, 1], 6)],
    );
    let words = layout.pack(&launch, 2).unwrap();
    assert_eq!(words, vec![2, 0, 2, 3, 7, 1, 0, 0, 3, 1, 0, 0]);
    let too_big = {
        let mut x = launch;
        x.sizes = vec![1 << 33, 1];
        x
    };
    assert_eq!(layout.pack(&too_big, 2), Err(("iterator size", 1 << 33)));
}

fn exprs(operands: usize) -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        (0..operands.max(1)).prop_map(Expr::Load),
        any::<f32>().prop_map(Expr::Const),
    ];
    leaf.prop_recursive(4, 24, 3, |inner| {
        prop_oneof![
            (prop::sample::select(UnaryOp::ALL), inner.clone())
                .prop_map(|(op, a)| Expr::Unary(op, Box::new(a))),
            (
                prop::sample::select(BinaryOp::ALL),
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(op, a, b)| Expr::Binary(op, Box::new(a), Box::new(b))),
            (
                prop_oneof![
                    Just(CompareOp::Lt),
                    Just(CompareOp::Le),
                    Just(CompareOp::Eq),
                    Just(CompareOp::Ne)
                ],
                inner.clone(),
                inner.clone()
            )
                .prop_map(|(op, a, b)| Expr::Compare(op, Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone(), inner).prop_map(|(c, a, b)| Expr::Select(
                Box::new(c),
                Box::new(a),
                Box::new(b)
            )),
        ]
    })
}

fn kernels() -> impl Strategy<Value = Kernel> {
    (
        proptest::collection::vec(
            prop_oneof![Just(IterKind::Parallel), Just(IterKind::Reduction)],
            0..6,
        ),
        0usize..4,
        prop_oneof![
            Just(Accumulate::Assign),
            Just(Accumulate::Add),
            Just(Accumulate::Mul),
            Just(Accumulate::Max),
            Just(Accumulate::Min)
        ],
    )
        .prop_flat_map(|(iterators, operands, accumulate)| {
            exprs(operands).prop_map(move |body| {
                Kernel::new(
                    iterators.clone(),
                    operands.max(body.operands_used()),
                    body,
                    accumulate,
                )
            })
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct(
            "../proptest-regressions/wgsl_codegen.txt",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_generated_shader_validates(kernel in kernels(), seed in any::<u64>()) {
        let source = generate(&kernel);
        if let Err(e) = validate(&source) {
            prop_assert!(false, "{}\n{}", e, source);
        }
        prop_assert!(loops(&source) <= 1, "{}", source);
        let source = generate_scheduled(&kernel, &StrideClasses::general(&kernel), Schedule::WorkgroupReduction);
        if let Err(e) = validate(&source) {
            prop_assert!(false, "{}\n{}", e, source);
        }
        prop_assert!(loops(&source) <= 1, "{}", source);
        // The same kernel specialized on arbitrary stride classes.
        let classes = StrideClasses {
            contiguous: (0..=kernel.operands).map(|t| (seed >> ((t + 30) % 60)) & 1 == 1).collect(),
            offsets: (0..=kernel.operands)
                .map(|t| if (seed >> (t % 60)) & 1 == 0 { StrideClass::Zero } else { StrideClass::General })
                .collect(),
            strides: (0..=kernel.operands)
                .map(|t| {
                    (0..kernel.iterators.len())
                        .map(|k| match (seed >> ((t * 7 + k) % 60)) & 3 {
                            0 => StrideClass::Zero,
                            1 => StrideClass::One,
                            _ => StrideClass::General,
                        })
                        .collect()
                })
                .collect(),
        };
        let source = generate_for(&kernel, &classes);
        if let Err(e) = validate(&source) {
            prop_assert!(false, "{}\n{}", e, source);
        }
        let source = generate_scheduled(&kernel, &classes, Schedule::WorkgroupReduction);
        if let Err(e) = validate(&source) {
            prop_assert!(false, "{}\n{}", e, source);
        }
        // Over a row table (the kernel's last operand), along any iterator:
        // one loop at most, and the table read as `u32` words.
        if !kernel.iterators.is_empty() {
            let mut with_table = kernel.clone();
            with_table.operands += 1;
            let along = (seed % kernel.iterators.len() as u64) as usize;
            let general = StrideClasses::general(&with_table);
            let source = generate_scheduled(&with_table, &general, Schedule::Rows { along });
            if let Err(e) = validate(&source) {
                prop_assert!(false, "{}\n{}", e, source);
            }
            prop_assert!(loops(&source) <= 1, "{}", source);
            prop_assert!(source.contains("var<storage, read> rows: array<u32>"), "{}", source);
        }
        // Tiled, where the classes make the kernel a contraction (else the
        // per-element shader): the slab loop and the two step loops (see
        // `backend_wgpu::tiled` for how they stay within the budget).
        for config in [TileConfig::LARGE, TileConfig::SMALL] {
            let source = generate_scheduled(&kernel, &classes, Schedule::Tiled(config));
            if let Err(e) = validate(&source) {
                prop_assert!(false, "{}\n{}", e, source);
            }
            let tiled = TileAxes::of(&kernel, &classes).is_some();
            prop_assert_eq!(tiled, source.contains("slab0"));
            prop_assert!(loops(&source) <= if tiled { 3 } else { 1 }, "{}", source);
        }
    }
}

/// Kernels whose structure is a contraction, with stride classes that
/// make it one: two operands both read, an accumulation, parallel
/// iterators `m` (only operand 0 follows it) and `n` (only operand 1).
fn contractions() -> impl Strategy<Value = (Kernel, StrideClasses)> {
    (
        2usize..5,
        1usize..3,
        prop_oneof![
            Just(Accumulate::Add),
            Just(Accumulate::Mul),
            Just(Accumulate::Max),
            Just(Accumulate::Min)
        ],
        exprs(2).prop_filter("reads both operands", |e| {
            let text = e.to_string();
            text.contains("in0") && text.contains("in1")
        }),
        any::<u64>(),
    )
        .prop_map(|(parallel, reductions, accumulate, body, seed)| {
            let mut iterators = vec![IterKind::Parallel; parallel];
            iterators.extend(vec![IterKind::Reduction; reductions]);
            // Rotate so reductions sit anywhere.
            let at = (seed % iterators.len() as u64) as usize;
            iterators.rotate_left(at);
            let parallel_at: Vec<usize> = (0..iterators.len())
                .filter(|&k| iterators[k] == IterKind::Parallel)
                .collect();
            let (m, n) = (parallel_at[0], parallel_at[1]);
            let pick = |shift: u64| match (seed >> (shift % 60)) & 3 {
                0 => StrideClass::Zero,
                1 => StrideClass::One,
                _ => StrideClass::General,
            };
            let strides = (0..3)
                .map(|t| {
                    (0..iterators.len())
                        .map(|k| match (t, k) {
                            (1, k) | (2, k) if k == m || k == n => {
                                let follows = (t == 1) == (k == m);
                                if follows {
                                    StrideClass::General
                                } else {
                                    StrideClass::Zero
                                }
                            }
                            (0, k) if k == m || k == n => StrideClass::General,
                            _ => pick((t * 11 + k * 3) as u64),
                        })
                        .collect()
                })
                .collect();
            let classes = StrideClasses {
                contiguous: vec![false; 3],
                offsets: (0..3).map(|t| pick(50 + t)).collect(),
                strides,
            };
            (Kernel::new(iterators, 2, body, accumulate), classes)
        })
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 128,
        failure_persistence: Some(Box::new(proptest::test_runner::FileFailurePersistence::Direct(
            "../proptest-regressions/wgsl_codegen.txt",
        ))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn every_tiled_shader_validates_with_its_three_loops((kernel, classes) in contractions()) {
        prop_assert!(TileAxes::of(&kernel, &classes).is_some());
        for config in [TileConfig::LARGE, TileConfig::SMALL] {
            for schedule in [Schedule::Tiled(config), Schedule::SplitK(config)] {
                let source = generate_scheduled(&kernel, &classes, schedule);
                prop_assert!(source.contains("slab0"));
                if let Err(e) = validate(&source) {
                    prop_assert!(false, "{}\n{}", e, source);
                }
                prop_assert_eq!(loops(&source), 3, "{}", source);
            }
        }
        // Batched tiles (one reduction iterator only: else per element).
        let reductions = kernel.iterators.iter().filter(|&&k| k == IterKind::Reduction).count();
        for (rows, columns, batch) in [(8, 8, 4096), (16, 16, 512), (3, 70, 5), (2, 2, 1)] {
            let config = TileConfig::batched(rows, columns, batch);
            let source = generate_scheduled(&kernel, &classes, Schedule::Tiled(config));
            if let Err(e) = validate(&source) {
                prop_assert!(false, "{}\n{}", e, source);
            }
            prop_assert_eq!(loops(&source), 1, "{}", source);
            prop_assert_eq!(source.contains("acc_0_1"), reductions == 1, "{}", source);
        }
    }
}
