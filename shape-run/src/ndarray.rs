//! Conversions between [`HostTensor`] and `ndarray` arrays (the `ndarray`
//! feature). A `HostTensor` holds its values in memory order (batch,
//! output, input), row-major: an array's axes are those dims in that
//! order, and an array in another layout (a transposed view, Fortran
//! order) is copied to row-major order on the way in.

use ndarray::{Array, ArrayD, Dimension, IxDyn};
use shape_core::DataError;

use crate::host::HostTensor;

impl<D: Dimension> From<Array<f32, D>> for HostTensor {
    /// The array's values with its shape as dims; a row-major array gives
    /// its buffer without a copy.
    ///
    /// ```
    /// use ndarray::array;
    /// use shape_run::HostTensor;
    /// let t = HostTensor::from(array![[1.0f32, 2.0], [3.0, 4.0]]);
    /// assert_eq!(t.dims(), &[2, 2]);
    /// // A transposed array is copied in row-major order.
    /// let t = HostTensor::from(array![[1.0f32, 2.0], [3.0, 4.0]].reversed_axes());
    /// assert_eq!(t.values(), &[1.0, 3.0, 2.0, 4.0]);
    /// ```
    fn from(array: Array<f32, D>) -> HostTensor {
        let dims: Vec<u64> = array.shape().iter().map(|&d| d as u64).collect();
        let len = array.len();
        let values = if array.is_standard_layout() {
            // Row-major and contiguous: the buffer, from where the array
            // starts in it.
            let (mut values, offset) = array.into_raw_vec_and_offset();
            let start = offset.unwrap_or(0);
            if start > 0 || values.len() != len {
                values = values[start..start + len].to_vec();
            }
            values
        } else {
            array.iter().copied().collect()
        };
        // An array's shape holds exactly its values.
        HostTensor::from_parts(dims, values)
    }
}

impl TryFrom<HostTensor> for ArrayD<f32> {
    type Error = DataError;

    /// The values as an array of the tensor's dims (memory order), a
    /// strided view copied into C order; ragged values have no such array
    /// ([`DataError::Ragged`]).
    ///
    /// ```
    /// use ndarray::ArrayD;
    /// use shape_run::HostTensor;
    /// let t = HostTensor::new(vec![2, 3], (0..6).map(|v| v as f32).collect())?;
    /// let a = ArrayD::try_from(t)?;
    /// assert_eq!(a.shape(), &[2, 3]);
    /// assert_eq!(a[[1, 2]], 5.0);
    /// # Ok::<(), shape_run::DataError>(())
    /// ```
    fn try_from(t: HostTensor) -> Result<ArrayD<f32>, DataError> {
        if t.ragged_axis().is_some() {
            return Err(DataError::Ragged {
                reason: "its rows have lengths of their own".into(),
            });
        }
        // A strided view is copied into C order.
        let t = t.into_contiguous()?;
        let dims = t
            .dims()
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<Vec<usize>, _>>()
            .map_err(|_| DataError::OutOfMemory {
                elements: crate::host::elements(t.dims()),
                bytes: crate::host::elements(t.dims()).saturating_mul(4),
            })?;
        let found = t.len();
        ArrayD::from_shape_vec(IxDyn(&dims), t.into_values()).map_err(|_| DataError::Length {
            expected: crate::host::elements(&dims.iter().map(|&d| d as u64).collect::<Vec<_>>()),
            dims: dims.iter().map(|&d| d as u64).collect(),
            found,
        })
    }
}
