//! Strided inputs (Fortran order, transposed, sliced and broadcast views)
//! give the same values as their C-ordered copies, read in place.

use backend_cpu::CpuBackend;
use shape_graph::Graph;
use shape_run::{read_in_place, HostTensor, Inputs, RunGraph, RunOptions, View};

fn seq(n: usize) -> Vec<f32> {
    (0..n).map(|i| (i as f32) * 0.5 - 3.0).collect()
}

#[test]
fn views_give_the_values_of_their_copies() {
    let mut g = Graph::new();
    let a = g.input("a", "3,4").unwrap();
    let b = g.input("b", "4,5").unwrap();
    let e = g.unary("exp", a).unwrap();
    let c = g.einsum("ij;jk=>ik", &[e, b]).unwrap();
    let s = g.permute("ik=>i", c).unwrap();
    let solved = g.solve().unwrap();
    let fa = HostTensor::fortran(vec![3, 4], seq(12)).unwrap();
    // b: a sliced view (every other column of a 4 x 10 buffer, from 1).
    let sb = HostTensor::strided(vec![4, 5], vec![10, 2], 1, seq(40)).unwrap();
    for options in [RunOptions::default(), RunOptions::default().unfused()] {
        // Both are read where they lie, with no copy.
        let plan = solved.plan(&[c, s], &options).unwrap();
        assert!(read_in_place(&solved, &plan, a, &View::of(&fa)).unwrap());
        assert!(read_in_place(&solved, &plan, b, &View::of(&sb)).unwrap());
        for mut backend in [CpuBackend::reference(), CpuBackend::coalesced()] {
            let strided = Inputs::new().with(a, fa.clone()).with(b, sb.clone());
            let copies = Inputs::new()
                .with(a, fa.to_contiguous().unwrap())
                .with(b, sb.to_contiguous().unwrap());
            let x = solved
                .run(&mut backend, strided, &[c, s], &options)
                .unwrap();
            let y = solved.run(&mut backend, copies, &[c, s], &options).unwrap();
            for t in [c, s] {
                let (x, y) = (x.get(t).unwrap(), y.get(t).unwrap());
                assert!(x.is_c_contiguous());
                assert_eq!(
                    x.values().iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
                    y.values().iter().map(|v| v.to_bits()).collect::<Vec<_>>()
                );
            }
        }
    }
}

#[test]
fn a_broadcast_view_repeats_its_values() {
    let mut g = Graph::new();
    let a = g.input("a", "3,4").unwrap();
    let y = g.unary("neg", a).unwrap();
    let solved = g.solve().unwrap();
    let row = HostTensor::strided(vec![3, 4], vec![0, 1], 0, vec![1.0, 2.0, 3.0, 4.0]).unwrap();
    let out = solved
        .run(
            &mut CpuBackend::coalesced(),
            Inputs::new().with(a, row),
            &[y],
            &RunOptions::default(),
        )
        .unwrap();
    assert_eq!(
        out.get(y).unwrap().values(),
        &[-1.0, -2.0, -3.0, -4.0].repeat(3)[..]
    );
}

#[test]
fn hostile_strides_are_typed_errors() {
    use shape_run::DataError;
    let strides = |dims: Vec<u64>, strides: Vec<u64>, offset: u64, n: usize| {
        HostTensor::strided(dims, strides, offset, vec![0.0; n])
    };
    assert!(matches!(
        strides(vec![2, 3], vec![3, 1], 0, 5),
        Err(DataError::Strides { .. })
    ));
    assert!(matches!(
        strides(vec![2, 3], vec![3], 0, 6),
        Err(DataError::Strides { .. })
    ));
    assert!(matches!(
        strides(vec![2, 3], vec![3, 1], 1, 6),
        Err(DataError::Strides { .. })
    ));
    assert!(matches!(
        strides(vec![2, 2], vec![u64::MAX, u64::MAX], u64::MAX, 4),
        Err(DataError::Strides { .. })
    ));
    assert!(matches!(
        strides(vec![u64::MAX, u64::MAX], vec![1, 1], 0, 4),
        Err(DataError::Strides { .. })
    ));
    // No elements: any strides.
    assert!(strides(vec![0, 3], vec![u64::MAX, 1], 0, 0).is_ok());
    assert!(matches!(
        HostTensor::fortran(vec![2, 3], vec![0.0; 5]),
        Err(DataError::Length { .. })
    ));
}
