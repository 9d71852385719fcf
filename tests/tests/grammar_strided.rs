//! Strided inputs over the programs of [`shape_tests::grammar`] (issue
//! 31): each program's dense inputs in the layouts it drew (C, Fortran,
//! permuted, sliced, broadcast at stride 0) give the values of the same
//! program on C-ordered copies, bit for bit on both CPU paths, fused or
//! not, and within the GPU tolerance on wgpu.
//!
//! `PROPTEST_CASES` sets the number of cases (default 256); failures are
//! saved in `proptest-regressions/grammar_strided.txt`.

use std::collections::HashMap;

use backend_cpu::CpuBackend;
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use shape_graph::{SolvedGraph, TensorId};
use shape_tests::differential::{compare_backends, ProgramRunner, Tolerance};
use shape_tests::grammar::{programs, runnable, with_layouts, DataLayout};
use shape_tests::programs::Program;

/// The number of cases: `PROPTEST_CASES`, or 256.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(256)
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: cases(),
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "../proptest-regressions/grammar_strided.txt",
        ))),
        // Programs with ragged inputs, or with every input in C order,
        // are skipped: about a third.
        max_global_rejects: 1024.max(cases()),
        ..ProptestConfig::default()
    }
}

/// A runner that gives the values a backend computed before: its run on
/// C-ordered data, which [`compare_backends`] then compares with the same
/// backend's run on strided data.
struct Ran {
    name: String,
    values: HashMap<TensorId, Vec<f32>>,
}

impl ProgramRunner for Ran {
    fn runner_name(&self) -> String {
        self.name.clone()
    }

    fn run_solved(
        &mut self,
        _: &SolvedGraph,
        _: &Program,
    ) -> Result<HashMap<TensorId, Vec<f32>>, String> {
        Ok(self.values.clone())
    }
}

/// Runs `contiguous` and `strided` (one graph, the same values) on
/// `runner`, and compares every result within `tolerance`.
fn layouts_agree(
    runner: &mut dyn ProgramRunner,
    contiguous: &Program,
    strided: &Program,
    tolerance: Tolerance,
) -> Result<(), String> {
    let solved = contiguous.graph.solve().map_err(|e| e.to_string())?;
    let values = runner.run_solved(&solved, contiguous)?;
    let mut ran = Ran {
        name: format!("{} on C-ordered inputs", runner.runner_name()),
        values,
    };
    let backends: &mut [&mut dyn ProgramRunner] = &mut [&mut ran, runner];
    compare_backends(strided, backends, tolerance).map_err(|d| d.to_string())
}

/// The layouts `p` drew, for a failure's report.
fn drawn(layouts: &std::collections::BTreeMap<String, DataLayout>) -> String {
    layouts
        .iter()
        .map(|(name, l)| format!("{name}: {l:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn drawn_layouts_give_the_values_of_c_ordered_inputs(p in programs(), unfused in any::<bool>()) {
        prop_assume!(!p.ragged);
        prop_assume!(p.layouts.values().any(|l| *l != DataLayout::C));
        let text = p.text();
        let Ok(c) = runnable(&text, 3) else { return Ok(()) };
        let (mut contiguous, mut strided) = match with_layouts(&c, &p.layouts) {
            Ok(pair) => pair,
            Err(e) => return Err(TestCaseError::fail(format!("{e}\n{text}"))),
        };
        if unfused {
            contiguous.options = contiguous.options.clone().unfused();
            strided.options = strided.options.clone().unfused();
        }
        for mut cpu in [CpuBackend::reference(), CpuBackend::coalesced()] {
            if let Err(d) = layouts_agree(&mut cpu, &contiguous, &strided, Tolerance::EXACT) {
                prop_assert!(false, "{d}\nlayouts: {}\n{text}", drawn(&p.layouts));
            }
        }
        let gpu = shape_tests::gpu::with_shared_wgpu("drawn_layouts_give_the_values_of_c_ordered_inputs", |gpu| {
            layouts_agree(gpu, &contiguous, &strided, Tolerance::GPU)
        });
        if let Some(Err(d)) = gpu {
            prop_assert!(false, "{d}\nlayouts: {}\n{text}", drawn(&p.layouts));
        }
    }
}
