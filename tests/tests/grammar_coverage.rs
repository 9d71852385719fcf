//! Coverage of the grammar by the random program generator
//! ([`shape_tests::grammar`]): over a fixed range of seeds, every
//! production of the syntax tree is drawn by at least 20 programs that
//! infer and run on the CPU reference (ragged inputs with seeded rows of
//! every level, [`shape_tests::grammar::ragged_data`]), each dense input's data in the layout the program
//! drew for it (`data:c`, `data:fortran`, `data:permuted`, `data:sliced`,
//! `data:broadcast`).

use std::collections::BTreeMap;

use backend_cpu::CpuBackend;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use shape_tests::differential::ProgramRunner;
use shape_tests::grammar::{all_productions, programs, runnable, with_layouts, Inferred};

const PROGRAMS: usize = 2000;
const AT_LEAST: usize = 20;

#[test]
fn every_production_is_drawn_by_programs_that_solve_and_run() {
    let mut runner = TestRunner::new_with_rng(
        Config::default(),
        TestRng::from_seed(RngAlgorithm::ChaCha, &[26; 32]),
    );
    let strategy = programs();
    let all = all_productions();
    let mut counts: BTreeMap<String, usize> = all.iter().map(|p| (p.clone(), 0)).collect();
    let (mut solved, mut ran, mut failed_meant, mut failed) = (0, 0, 0, Vec::new());
    // Strided layouts drawn for dims other than the input's.
    let mut misdrawn = Vec::new();
    let mut reference = CpuBackend::reference();
    for _ in 0..PROGRAMS {
        let p = strategy.new_tree(&mut runner).expect("a program").current();
        let text = p.text();
        for used in &p.productions {
            assert!(all.contains(used), "production {used} is not in the list");
        }
        let ok = match shape_tests::grammar::infer(&text) {
            Inferred::Shapes(_) => {
                solved += 1;
                let laid_out = runnable(&text, 3).and_then(|prog| {
                    with_layouts(&prog, &p.layouts).map_err(|e| {
                        misdrawn.push(format!("{e}\n{text}"));
                        e
                    })
                });
                match laid_out.and_then(|(_, strided)| {
                    let s = strided.graph.solve().map_err(|e| e.to_string())?;
                    reference.run_solved(&s, &strided)
                }) {
                    Ok(_) => {
                        ran += 1;
                        true
                    }
                    Err(e) => {
                        failed.push(format!("does not run: {e}\n{text}"));
                        false
                    }
                }
            }
            Inferred::Error { kind, message, .. } => {
                if p.meant_to_fail {
                    failed_meant += 1;
                } else {
                    failed.push(format!("error[{kind}]: {message}\n{text}"));
                }
                false
            }
        };
        if ok {
            for used in &p.productions {
                *counts.entry(used.clone()).or_default() += 1;
            }
        }
    }
    println!("{PROGRAMS} programs: {solved} solved, {ran} ran on the CPU reference, {failed_meant} failed as meant, {} failed otherwise", failed.len());
    for (prod, n) in &counts {
        println!("{n:6}  {prod}");
    }
    for f in failed.iter().take(8) {
        println!("---\n{f}");
    }
    assert!(
        misdrawn.is_empty(),
        "{} programs drew a strided layout that their inputs' dims leave in C order; the first:\n{}",
        misdrawn.len(),
        misdrawn[0]
    );
    let short: Vec<String> = counts
        .iter()
        .filter(|(_, &n)| n < AT_LEAST)
        .map(|(p, n)| format!("{p} ({n})"))
        .collect();
    assert!(
        short.is_empty(),
        "productions drawn by fewer than {AT_LEAST} programs that solved and ran: {}",
        short.join(", ")
    );
    // Nearly every program the generator does not mean to fail infers.
    assert!(
        failed.len() * 20 <= PROGRAMS,
        "{} of {PROGRAMS} programs failed unexpectedly; the first:\n{}",
        failed.len(),
        failed.first().cloned().unwrap_or_default()
    );
}
