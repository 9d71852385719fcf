//! One error type for every backend, and data a run borrows: code shared
//! between backends is one generic function, and one set of inputs runs
//! on several backends without a clone.

use backend_cpu::CpuBackend;
use shape_core::kernel::{Kernel, Launch};
use shape_core::Backend;
use shape_graph::{Scope, SolvedGraph, TensorId};
use shape_run::{HostTensor, Inputs, RunError, RunGraph, RunOptions};

/// What a user would write once for every backend.
fn run_any<B: Backend>(
    backend: &mut B,
    solved: &SolvedGraph,
    inputs: &Inputs,
    y: TensorId,
) -> Result<Vec<f32>, RunError> {
    let mut out = solved.run(backend, inputs, &[y], &RunOptions::default())?;
    Ok(out
        .remove(y)
        .map(HostTensor::into_values)
        .unwrap_or_default())
}

/// The failure of [`Refusing`].
#[derive(Debug, thiserror::Error, PartialEq)]
#[error("this backend refuses every kernel")]
struct Refused;

/// The CPU reference, except that it runs no kernel.
struct Refusing(CpuBackend);

impl Backend for Refusing {
    type Buffer = <CpuBackend as Backend>::Buffer;
    type Error = Refused;

    fn name(&self) -> String {
        "refusing".into()
    }
    fn alloc(&mut self, len: usize) -> Result<Self::Buffer, Refused> {
        self.0.alloc(len).map_err(|_| Refused)
    }
    fn upload(&mut self, data: &[f32]) -> Result<Self::Buffer, Refused> {
        self.0.upload(data).map_err(|_| Refused)
    }
    fn download(&mut self, buffer: &Self::Buffer) -> Result<Vec<f32>, Refused> {
        self.0.download(buffer).map_err(|_| Refused)
    }
    fn len(&self, buffer: &Self::Buffer) -> u64 {
        self.0.len(buffer)
    }
    fn execute(
        &mut self,
        _: &Kernel,
        _: &Launch,
        _: &mut Self::Buffer,
        _: &[&Self::Buffer],
    ) -> Result<(), Refused> {
        Err(Refused)
    }
}

fn graph() -> (Scope, TensorId, TensorId) {
    let s = Scope::new();
    let x = s.input("x", "3").unwrap();
    let y = x.exp().unwrap().mul(&x).unwrap();
    let (x, y) = (x.id(), y.id());
    (s, x, y)
}

#[test]
fn borrowed_inputs_run_on_two_backends_as_owned_ones_run_on_one() {
    let (s, x, y) = graph();
    let solved = s.solve().unwrap();
    let inputs = Inputs::new().with(x, HostTensor::new(vec![3], vec![-1.0, 0.0, 2.0]).unwrap());
    let reference = run_any(&mut CpuBackend::new(), &solved, &inputs, y).unwrap();
    let coalesced = run_any(&mut CpuBackend::coalesced(), &solved, &inputs, y).unwrap();
    // The data is still the caller's: owned, it gives the same values.
    let owned = solved
        .run(&mut CpuBackend::new(), inputs, &[y], &RunOptions::default())
        .unwrap();
    let expected: Vec<f32> = [-1.0f32, 0.0, 2.0].iter().map(|v| v.exp() * v).collect();
    assert_eq!(reference, expected);
    assert_eq!(coalesced, expected);
    assert_eq!(owned.get(y).unwrap().values(), expected.as_slice());
}

#[test]
fn a_backend_failure_is_one_error_type_with_the_backend_error_as_source() {
    let (s, x, y) = graph();
    let solved = s.solve().unwrap();
    let inputs = Inputs::new().with(x, HostTensor::new(vec![3], vec![1.0, 2.0, 3.0]).unwrap());
    let e = run_any(&mut Refusing(CpuBackend::new()), &solved, &inputs, y).unwrap_err();
    assert_eq!(e.kind(), "backend");
    let RunError::Backend {
        backend,
        op,
        source,
    } = &e
    else {
        panic!("{e:?}");
    };
    assert_eq!(backend, "refusing");
    assert!(op.is_some());
    assert_eq!(source.downcast_ref::<Refused>(), Some(&Refused));
    let cause = std::error::Error::source(&e).expect("the backend's error is the source");
    assert_eq!(cause.to_string(), Refused.to_string());
    assert!(e.to_string().contains("refuses every kernel"), "{e}");
}

/// Arrays in and out, against values written out by hand.
#[cfg(feature = "ndarray")]
#[test]
fn ndarray_arrays_convert_both_ways_in_memory_order() {
    use ndarray::{array, s, ArrayD};
    let a = array![[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]];
    let t = HostTensor::from(a.clone());
    assert_eq!(
        (t.dims(), t.values()),
        (&[2u64, 3][..], &[1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0][..])
    );
    // Another layout is copied to row-major order.
    let t = HostTensor::from(a.clone().reversed_axes());
    assert_eq!(
        (t.dims(), t.values()),
        (&[3u64, 2][..], &[1.0f32, 4.0, 2.0, 5.0, 3.0, 6.0][..])
    );
    // A slice that starts inside its buffer.
    let tail = a.slice(s![1.., ..]).to_owned();
    assert_eq!(HostTensor::from(tail).values(), &[4.0, 5.0, 6.0]);
    let back = ArrayD::try_from(HostTensor::from(a.clone())).unwrap();
    assert_eq!(back, a.into_dyn());
    let ragged = HostTensor::ragged(vec![2], &[1, 2], vec![], vec![1.0, 2.0, 3.0]).unwrap();
    assert_eq!(ArrayD::try_from(ragged).unwrap_err().kind(), "ragged");
}
