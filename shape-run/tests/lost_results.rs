//! A backend that gives back the wrong number of values for a result is
//! reported as such (`lost_result`), naming the backend, the tensor and
//! both counts; it was `unknown_tensor`, an error about the graph.

use backend_cpu::CpuBackend;
use shape_core::kernel::{Kernel, Launch};
use shape_core::Backend;
use shape_graph::Graph;
use shape_run::{HostTensor, Inputs, RunError, RunGraph, RunOptions};

/// The CPU reference, except that every buffer taken back loses its last
/// value.
struct Lossy(CpuBackend);

impl Backend for Lossy {
    type Buffer = <CpuBackend as Backend>::Buffer;
    type Error = <CpuBackend as Backend>::Error;

    fn name(&self) -> String {
        format!("lossy {}", self.0.name())
    }

    fn alloc(&mut self, len: usize) -> Result<Self::Buffer, Self::Error> {
        self.0.alloc(len)
    }

    fn upload(&mut self, data: &[f32]) -> Result<Self::Buffer, Self::Error> {
        self.0.upload(data)
    }

    fn download(&mut self, buffer: &Self::Buffer) -> Result<Vec<f32>, Self::Error> {
        let mut v = self.0.download(buffer)?;
        v.pop();
        Ok(v)
    }

    fn len(&self, buffer: &Self::Buffer) -> u64 {
        self.0.len(buffer)
    }

    fn take(&mut self, buffer: Self::Buffer) -> Result<Vec<f32>, Self::Error> {
        self.download(&buffer)
    }

    fn execute(
        &mut self,
        kernel: &Kernel,
        launch: &Launch,
        result: &mut Self::Buffer,
        operands: &[&Self::Buffer],
    ) -> Result<(), Self::Error> {
        self.0.execute(kernel, launch, result, operands)
    }
}

#[test]
fn a_backend_that_loses_values_is_named_with_both_counts() {
    let mut g = Graph::new();
    let x = g.input("x", "2, 3").unwrap();
    let y = g.unary("exp", x).unwrap();
    let solved = g.solve().unwrap();
    let inputs = Inputs::new().with(x, HostTensor::new(vec![2, 3], vec![0.0; 6]).unwrap());
    let err = solved
        .run(
            &mut Lossy(CpuBackend::reference()),
            inputs,
            &[y],
            &RunOptions::default(),
        )
        .unwrap_err();
    assert_eq!(err.kind(), "lost_result");
    let RunError::LostResult {
        expected, found, ..
    } = &err
    else {
        panic!("{err}");
    };
    assert_eq!((*expected, *found), (6, 5));
    let text = err.to_string();
    assert!(
        text.contains("lossy") && text.contains("`t1`") && text.contains("holds 6"),
        "{text}"
    );
}
