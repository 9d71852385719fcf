//! NumPy `.npy` files of floats, read and written with the `npyz` crate.
//!
//! Writes little-endian `float32` in C order, streamed from the values (no
//! copy of the array), with the header padded as NumPy pads it (the data
//! starts at a multiple of 64 bytes). Reads format versions 1.0, 2.0 and
//! 3.0 in C or Fortran order with dtype `<f4`, `>f4`, `<f8` or `>f8`
//! (doubles are rounded to `f32`). [`read_data`] gives the elements in the
//! file's order, which [`Header::fortran_order`] says: a Fortran-ordered
//! file becomes a Fortran-strided tensor, read in place
//! (`shape_run::HostTensor::fortran`); [`read`] alone reorders into C
//! order.
//!
//! A double must fit an `f32`: a finite one too large in magnitude to round
//! to a finite `f32` (past `3.4028235677973366e38`, as `1e39`) is refused
//! ([`NpyError::OutOfRange`], with its index), where a cast would have
//! made it an infinity. NaN and the infinities stay what they are.
//!
//! Reading is in two steps, so that nothing large is allocated for a file
//! that cannot be right: [`read_header`] reads only the header (at most
//! [`MAX_HEADER_BYTES`]) and checks it, and [`read_data`] then reads
//! exactly the bytes the header promises into a buffer allocated
//! fallibly, failing if the file ends early or holds more. Before handing
//! the header to `npyz`, this module checks what `npyz` would otherwise
//! allocate for (a header length of up to 4 GiB) or panic on (a shape
//! whose element count overflows 64 bits).
//!
//! ```
//! use shapec::npy::{read, to_bytes, Array};
//! let a = Array { shape: vec![2, 3], data: vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0] };
//! let bytes = to_bytes(&a).unwrap();
//! assert_eq!(&bytes[..6], b"\x93NUMPY");
//! assert_eq!(read(&bytes).unwrap(), a);
//! ```

use std::io::{self, Read, Write};

use npyz::WriterBuilder;

/// An n-dimensional array of `f32` in C (row-major) order.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    /// The sizes of the axes; empty for a 0-d array (one element).
    pub shape: Vec<u64>,
    /// The elements, last axis fastest.
    pub data: Vec<f32>,
}

/// The longest header read, in bytes. NumPy's own `numpy.load` refuses
/// headers over 10,000 bytes unless told otherwise.
pub const MAX_HEADER_BYTES: u32 = 65_536;

/// The deepest nesting of brackets a header may have: NumPy writes a
/// dictionary holding a tuple (two levels).
const MAX_HEADER_NESTING: usize = 8;

/// What is wrong with a `.npy` file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NpyError {
    /// The file does not start with the `.npy` magic string.
    #[error("not a .npy file (it does not start with \\x93NUMPY)")]
    NotNpy,
    /// A format version this reader does not know.
    #[error("unsupported .npy format version {major}.{minor} (1.0, 2.0 and 3.0 are read)")]
    Version {
        /// Major version.
        major: u8,
        /// Minor version.
        minor: u8,
    },
    /// The file ends inside its header.
    #[error("the file ends inside its header")]
    Truncated,
    /// A header longer than [`MAX_HEADER_BYTES`].
    #[error(
        "the header is {len} bytes long; shapec reads headers of at most {MAX_HEADER_BYTES} bytes"
    )]
    HeaderTooLong {
        /// The length the file gives.
        len: u32,
    },
    /// A header that is not the dictionary NumPy writes.
    #[error("malformed header: {0}")]
    Header(String),
    /// An element type other than 32- or 64-bit floats.
    #[error(
        "unsupported dtype '{0}': shapec reads float32 or float64 ('<f4', '>f4', '<f8', '>f8')"
    )]
    Dtype(String),
    /// Fortran (column-major) order. No longer returned: Fortran-ordered
    /// files are read ([`Header::fortran_order`]).
    #[error("the array is in Fortran order; save it in C order (numpy.ascontiguousarray)")]
    FortranOrder,
    /// The data after the header does not match the shape.
    #[error(
        "the header's shape {shape:?} needs {expected} bytes of data, but the file has {found}"
    )]
    Length {
        /// The shape.
        shape: Vec<u64>,
        /// Bytes needed.
        expected: u128,
        /// Bytes present.
        found: u64,
    },
    /// More data after the bytes the shape needs (found where the length
    /// is not known beforehand, as in a pipe).
    #[error("the header's shape {shape:?} needs {expected} bytes of data, but the file has more")]
    Longer {
        /// The shape.
        shape: Vec<u64>,
        /// Bytes needed.
        expected: u128,
    },
    /// A finite `float64` too large in magnitude for `float32`: the first
    /// such element.
    #[error("element {} (flat index {flat}) is {value}, past the range of float32 (whose largest magnitude is {:e}); an infinity is saved as inf", tuple(index), f32::MAX)]
    OutOfRange {
        /// Its index in C order, one entry per axis.
        index: Vec<u64>,
        /// Its index in the flat data.
        flat: u64,
        /// The value, as written by `{:e}`.
        value: String,
    },
    /// The array is larger than memory can hold.
    #[error("out of memory: the array needs {bytes} bytes")]
    OutOfMemory {
        /// Bytes needed.
        bytes: u128,
    },
    /// Reading failed.
    #[error("{0}")]
    Io(String),
}

/// The element types read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Element {
    F32,
    F64,
}

/// A checked `.npy` header: what the data after it must be.
#[derive(Clone)]
pub struct Header {
    /// The sizes of the axes.
    pub shape: Vec<u64>,
    /// The header's length in the file, magic string included: where the
    /// data starts.
    pub len: u64,
    /// Whether the data is in Fortran (column-major) order: the first
    /// axis fastest (`'fortran_order': True`).
    pub fortran_order: bool,
    element: Element,
    parsed: npyz::NpyHeader,
}

impl std::fmt::Debug for Header {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Header")
            .field("shape", &self.shape)
            .field("len", &self.len)
            .field("fortran_order", &self.fortran_order)
            .field("element", &self.element)
            .finish_non_exhaustive()
    }
}

impl Header {
    /// The number of elements.
    pub fn elements(&self) -> u128 {
        self.shape.iter().map(|&d| d as u128).product()
    }

    /// The bytes of data the header promises.
    pub fn data_bytes(&self) -> u128 {
        let width = match self.element {
            Element::F32 => 4,
            Element::F64 => 8,
        };
        self.elements() * width
    }
}

fn io_error(e: io::Error) -> NpyError {
    if e.kind() == io::ErrorKind::UnexpectedEof {
        NpyError::Truncated
    } else {
        NpyError::Io(e.to_string())
    }
}

/// Reads and checks a header; `r` is left at the first byte of data.
pub fn read_header<R: Read>(r: &mut R) -> Result<Header, NpyError> {
    let mut pre = [0u8; 8];
    let got = read_up_to(r, &mut pre).map_err(io_error)?;
    if got < pre.len() || &pre[..6] != b"\x93NUMPY" {
        return Err(NpyError::NotNpy);
    }
    let (major, minor) = (pre[6], pre[7]);
    let mut bytes = pre.to_vec();
    let len = match (major, minor) {
        (1, 0) => {
            let mut b = [0u8; 2];
            r.read_exact(&mut b).map_err(io_error)?;
            bytes.extend_from_slice(&b);
            u16::from_le_bytes(b) as u32
        }
        (2 | 3, 0) => {
            let mut b = [0u8; 4];
            r.read_exact(&mut b).map_err(io_error)?;
            bytes.extend_from_slice(&b);
            u32::from_le_bytes(b)
        }
        _ => return Err(NpyError::Version { major, minor }),
    };
    if len > MAX_HEADER_BYTES {
        return Err(NpyError::HeaderTooLong { len });
    }
    let start = bytes.len();
    bytes.resize(start + len as usize, 0);
    r.read_exact(&mut bytes[start..]).map_err(io_error)?;
    let shape = checked_shape(&bytes[start..])?;
    let parsed =
        npyz::NpyHeader::from_reader(&bytes[..]).map_err(|e| NpyError::Header(e.to_string()))?;
    let descr = match parsed.dtype() {
        npyz::DType::Plain(t) => t.to_string(),
        other => other.descr(),
    };
    let element = match descr.as_str() {
        "<f4" | ">f4" => Element::F32,
        "<f8" | ">f8" => Element::F64,
        _ => return Err(NpyError::Dtype(descr)),
    };
    let fortran_order = parsed.order() == npyz::Order::Fortran;
    debug_assert_eq!(parsed.shape(), &shape[..]);
    Ok(Header {
        shape,
        len: bytes.len() as u64,
        fortran_order,
        element,
        parsed,
    })
}

/// Reads into `buf` until it is full or the reader ends; returns how many
/// bytes were read.
fn read_up_to<R: Read>(r: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match r.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// The header's shape, checked before `npyz` sees the header: nesting no
/// deeper than [`MAX_HEADER_NESTING`] (its parser recurses), and sizes
/// whose product fits in 64 bits (its element count would overflow).
fn checked_shape(text: &[u8]) -> Result<Vec<u64>, NpyError> {
    let bad = |what: &str| NpyError::Header(what.to_string());
    let text = std::str::from_utf8(text).map_err(|_| bad("the header is not UTF-8 text"))?;
    let mut depth = 0usize;
    let mut quote = None;
    for c in text.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, '(' | '[' | '{') => {
                depth += 1;
                if depth > MAX_HEADER_NESTING {
                    return Err(bad("brackets nested too deeply"));
                }
            }
            (None, ')' | ']' | '}') => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    let value: py_literal::Value = text
        .trim_end()
        .parse()
        .map_err(|e| bad(&format!("not a Python literal ({e})")))?;
    let py_literal::Value::Dict(entries) = value else {
        return Err(bad("it is not a {...} dictionary"));
    };
    let shape = entries
        .iter()
        .find(|(k, _)| matches!(k, py_literal::Value::String(s) if s == "shape"))
        .map(|(_, v)| v)
        .ok_or_else(|| bad("no 'shape'"))?;
    let (py_literal::Value::Tuple(dims) | py_literal::Value::List(dims)) = shape else {
        return Err(bad("'shape' is not a tuple"));
    };
    let dims = dims
        .iter()
        .map(|d| match d {
            py_literal::Value::Integer(n) => n.to_string().parse::<u64>().map_err(|_| {
                bad(&format!(
                    "'shape' has the size {n}, not a size from 0 to 2^64 - 1"
                ))
            }),
            other => Err(bad(&format!("'shape' has a non-integer `{other}`"))),
        })
        .collect::<Result<Vec<u64>, _>>()?;
    let nonzero = dims
        .iter()
        .filter(|&&d| d != 0)
        .try_fold(1u64, |acc, &d| acc.checked_mul(d));
    if nonzero.is_none() {
        return Err(bad(&format!(
            "the shape {dims:?} has more than 2^64 elements"
        )));
    }
    Ok(dims)
}

/// Counts the bytes read through it.
struct Counting<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// A vector of `len` elements' capacity, or an out-of-memory error.
pub fn try_vec<T>(len: usize) -> Option<Vec<T>> {
    let mut v = Vec::new();
    v.try_reserve_exact(len).ok()?;
    Some(v)
}

/// Reads the data `header` promises from `r` (positioned just after the
/// header), into a buffer allocated fallibly, in the file's order (C or
/// Fortran, as [`Header::fortran_order`] says). `data_len`, when known (a
/// regular file's length minus the header's), is checked before anything
/// is allocated; otherwise the reader must end right after the data.
pub fn read_data<R: Read>(
    header: Header,
    r: R,
    data_len: Option<u64>,
) -> Result<Vec<f32>, NpyError> {
    let expected = header.data_bytes();
    let length = |found: u64| NpyError::Length {
        shape: header.shape.clone(),
        expected,
        found,
    };
    if let Some(found) = data_len {
        if found as u128 != expected {
            return Err(length(found));
        }
    }
    let elements = header.elements();
    let mut out = usize::try_from(elements)
        .ok()
        .and_then(try_vec::<f32>)
        .ok_or(NpyError::OutOfMemory {
            bytes: elements * 4,
        })?;
    let shape = header.shape.clone();
    let fortran = header.fortran_order;
    let element = header.element;
    let mut counted = Counting { inner: r, read: 0 };
    // The first double past the range of `f32`: its flat index and value.
    let mut past: Option<(u64, f64)> = None;
    {
        let file = npyz::NpyFile::with_header(header.parsed, &mut counted);
        let dtype_error = |e: npyz::DTypeError| NpyError::Dtype(e.to_string());
        let read: io::Result<()> = match element {
            Element::F32 => file
                .data::<f32>()
                .map_err(dtype_error)?
                .try_for_each(|v| v.map(|v| out.push(v))),
            Element::F64 => file.data::<f64>().map_err(dtype_error)?.try_for_each(|v| {
                v.map(|v| {
                    let x = v as f32;
                    if past.is_none() && v.is_finite() && x.is_infinite() {
                        past = Some((out.len() as u64, v));
                    }
                    out.push(x);
                })
            }),
        };
        if let Err(e) = read {
            return Err(if e.kind() == io::ErrorKind::UnexpectedEof {
                length(counted.read)
            } else {
                NpyError::Io(e.to_string())
            });
        }
    }
    if data_len.is_none() {
        let mut one = [0u8; 1];
        if read_up_to(&mut counted, &mut one).map_err(io_error)? > 0 {
            return Err(NpyError::Longer { shape, expected });
        }
    }
    if let Some((flat, v)) = past {
        let index = if fortran {
            // The first axis fastest: the C index of the reversed shape.
            let reversed: Vec<u64> = shape.iter().rev().copied().collect();
            unravel(flat, &reversed).into_iter().rev().collect()
        } else {
            unravel(flat, &shape)
        };
        return Err(NpyError::OutOfRange {
            index,
            flat,
            value: format!("{v:e}"),
        });
    }
    Ok(out)
}

/// The C-order index of the element at `flat` in an array of `shape`.
fn unravel(mut flat: u64, shape: &[u64]) -> Vec<u64> {
    let mut index = vec![0; shape.len()];
    for (i, &d) in shape.iter().enumerate().rev() {
        if d > 0 {
            index[i] = flat % d;
            flat /= d;
        }
    }
    index
}

/// `(1, 0)`, `(3,)` or `()`, as Python writes a tuple.
fn tuple(index: &[u64]) -> String {
    match index {
        [one] => format!("({one},)"),
        _ => {
            let parts: Vec<String> = index.iter().map(u64::to_string).collect();
            format!("({})", parts.join(", "))
        }
    }
}

/// Reads a whole `.npy` file's bytes.
pub fn read(bytes: &[u8]) -> Result<Array, NpyError> {
    let mut r = bytes;
    let header = read_header(&mut r)?;
    let shape = header.shape.clone();
    let fortran = header.fortran_order;
    let data = read_data(header, r, Some(r.len() as u64))?;
    if fortran && shape.len() > 1 {
        // Into C order: element (i0, .., in) is at i0 + d0 * (i1 + ..).
        let mut c = try_vec::<f32>(data.len()).ok_or(NpyError::OutOfMemory {
            bytes: data.len() as u128 * 4,
        })?;
        for flat in 0..data.len() as u64 {
            let index = unravel(flat, &shape);
            let at = index
                .iter()
                .zip(&shape)
                .rev()
                .fold(0u64, |a, (&i, &d)| a * d + i);
            c.push(data[at as usize]);
        }
        return Ok(Array { shape, data: c });
    }
    Ok(Array { shape, data })
}

/// The length of the header [`write()`] writes for `shape`, magic string
/// included; `npyz` writes headers of at most 65,535 bytes.
pub fn header_len(shape: &[u64]) -> u64 {
    let dims: u64 = shape.iter().map(|d| d.to_string().len() as u64 + 2).sum();
    let unpadded = 10 + 55 + dims + 1;
    unpadded.div_ceil(64) * 64
}

/// The most bytes a header [`write()`] writes may have.
pub const MAX_WRITTEN_HEADER_BYTES: u64 = 65_535;

/// Writes `data` (in C order) as a version 1.0 `.npy` file of `<f4` with
/// the shape `shape`, streaming the values.
pub fn write<W: Write>(w: W, shape: &[u64], data: &[f32]) -> io::Result<()> {
    if header_len(shape) > MAX_WRITTEN_HEADER_BYTES {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "an array of {} axes needs a header longer than the {MAX_WRITTEN_HEADER_BYTES} bytes .npy version 1.0 allows",
                shape.len()
            ),
        ));
    }
    let elements: u128 = shape.iter().map(|&d| d as u128).product();
    if elements != data.len() as u128 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "the shape {shape:?} holds {elements} elements, but {} were given",
                data.len()
            ),
        ));
    }
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(shape)
        .writer(w)
        .begin_nd()?;
    writer.extend(data.iter().copied())?;
    writer.finish()
}

/// Writes a ragged result's row offsets as a version 1.0 `.npy` file of
/// `<i8` (int64), one axis.
pub fn write_offsets<W: Write>(w: W, offsets: &[u64]) -> io::Result<()> {
    let mut values = Vec::new();
    values
        .try_reserve_exact(offsets.len())
        .map_err(|_| io::Error::new(io::ErrorKind::OutOfMemory, "no memory for the offsets"))?;
    for &o in offsets {
        values.push(i64::try_from(o).map_err(|_| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the offset {o} does not fit in an int64"),
            )
        })?);
    }
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&[offsets.len() as u64])
        .writer(w)
        .begin_nd()?;
    writer.extend(values)?;
    writer.finish()
}

/// The bytes of a `.npy` file holding `array` as `<f4`.
pub fn to_bytes(array: &Array) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    write(&mut out, &array.shape, &array.data)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `numpy.save` of `np.array([[1, 2, 3], [4, 5, 6]], dtype='<f4')`,
    /// byte for byte (NumPy 1.x and 2.x write the same header).
    fn numpy_2x3() -> Vec<u8> {
        let mut b = b"\x93NUMPY\x01\x00\x76\x00".to_vec();
        let h = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
        b.extend_from_slice(h.as_bytes());
        b.extend(std::iter::repeat_n(b' ', 118 - h.len() - 1));
        b.push(b'\n');
        for v in [1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0] {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b
    }

    #[test]
    fn writes_what_numpy_reads() {
        let a = Array {
            shape: vec![2, 3],
            data: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        };
        let bytes = to_bytes(&a).unwrap();
        // The same layout as NumPy's: version 1.0, a 118-byte header, the
        // data 64-byte aligned; npyz writes the shape as `(2, 3, )`.
        assert_eq!(bytes.len(), numpy_2x3().len());
        assert_eq!(&bytes[..10], &numpy_2x3()[..10]);
        assert_eq!(&bytes[128..], &numpy_2x3()[128..]);
        let text = std::str::from_utf8(&bytes[10..128]).unwrap();
        assert!(text.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3"));
        assert!(text.ends_with(" \n"));
        assert_eq!(header_len(&[2, 3]), 128);
        assert_eq!(read(&numpy_2x3()).unwrap(), a);
    }

    #[test]
    fn round_trips_0d_1d_and_empty_axes() {
        for shape in [vec![], vec![3], vec![1, 1, 2], vec![2, 0]] {
            let n: u64 = shape.iter().product();
            let a = Array {
                shape: shape.clone(),
                data: (0..n).map(|i| i as f32 * 0.25 - 1.0).collect(),
            };
            let bytes = to_bytes(&a).unwrap();
            assert_eq!(bytes.len() % 64, (4 * n as usize) % 64, "{shape:?}");
            assert_eq!(bytes.len() as u64, header_len(&shape) + 4 * n, "{shape:?}");
            assert_eq!(read(&bytes).unwrap(), a);
        }
        assert!(to_bytes(&Array {
            shape: vec![2],
            data: vec![1.0]
        })
        .is_err());
        let many = vec![1u64; 30_000];
        assert!(header_len(&many) > MAX_WRITTEN_HEADER_BYTES);
        assert!(write(Vec::new(), &many, &[0.0]).is_err());
    }

    #[test]
    fn reads_big_endian_and_doubles_and_version_2() {
        let mut b = b"\x93NUMPY\x02\x00".to_vec();
        let h = "{'shape': (2,), 'fortran_order': False, 'descr': '>f8'}\n";
        b.extend_from_slice(&(h.len() as u32).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        b.extend_from_slice(&1.5f64.to_be_bytes());
        b.extend_from_slice(&(-2.0f64).to_be_bytes());
        assert_eq!(
            read(&b).unwrap(),
            Array {
                shape: vec![2],
                data: vec![1.5, -2.0]
            }
        );
        let mut b = b"\x93NUMPY\x03\x00".to_vec();
        let h = "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n";
        b.extend_from_slice(&(h.len() as u32).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        b.extend_from_slice(&0.25f32.to_be_bytes());
        assert_eq!(read(&b).unwrap().data, vec![0.25]);
    }

    /// A version 1.0 file of `<f8` with `shape` and `values`.
    fn doubles(shape: &str, values: &[f64]) -> Vec<u8> {
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        let h = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}\n");
        b.extend_from_slice(&(h.len() as u16).to_le_bytes());
        b.extend_from_slice(h.as_bytes());
        for v in values {
            b.extend_from_slice(&v.to_le_bytes());
        }
        b
    }

    #[test]
    fn doubles_past_the_range_of_f32_are_refused() {
        // Issue 25: 1e39 as a float64 became inf.
        let b = doubles("(2, 2)", &[1.0, 2.0, 1e39, 4.0]);
        let e = read(&b).unwrap_err();
        assert_eq!(
            e,
            NpyError::OutOfRange {
                index: vec![1, 0],
                flat: 2,
                value: "1e39".into()
            }
        );
        assert_eq!(
            e.to_string(),
            "element (1, 0) (flat index 2) is 1e39, past the range of float32 (whose largest magnitude is 3.4028235e38); an infinity is saved as inf"
        );
        // The first one is named, negative ones too, and a stream says the
        // same.
        let b = doubles("(3,)", &[0.0, -3.5e38, f64::MAX]);
        assert!(matches!(
            read(&b),
            Err(NpyError::OutOfRange { ref index, flat: 1, .. }) if index == &[1]
        ));
        let mut r: &[u8] = &b;
        let h = read_header(&mut r).unwrap();
        assert!(matches!(
            read_data(h, r, None),
            Err(NpyError::OutOfRange { flat: 1, .. })
        ));
        // What rounds to f32::MAX fits; NaN and the infinities stay.
        let b = doubles(
            "(5,)",
            &[
                3.4028235e38,
                -3.4028235e38,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
            ],
        );
        let a = read(&b).unwrap();
        assert_eq!(
            &a.data[..4],
            &[f32::MAX, f32::MIN, f32::INFINITY, f32::NEG_INFINITY]
        );
        assert!(a.data[4].is_nan());
        assert_eq!(unravel(5, &[2, 3]), vec![1, 2]);
        assert_eq!(unravel(0, &[]), Vec::<u64>::new());
    }

    #[test]
    fn rejects_what_it_cannot_read() {
        assert_eq!(read(b"hello"), Err(NpyError::NotNpy));
        let mut b = numpy_2x3();
        b[6] = 9;
        assert_eq!(read(&b), Err(NpyError::Version { major: 9, minor: 0 }));
        let b = numpy_2x3();
        assert_eq!(read(&b[..50]), Err(NpyError::Truncated));
        assert!(matches!(
            read(&b[..b.len() - 1]),
            Err(NpyError::Length {
                expected: 24,
                found: 23,
                ..
            })
        ));
        // Replaces text in the header (same length), keeping the data.
        let swap = |from: &str, to: &str| {
            let mut v = numpy_2x3();
            let at = v
                .windows(from.len())
                .position(|w| w == from.as_bytes())
                .expect("text in the header");
            v[at..at + from.len()].copy_from_slice(to.as_bytes());
            read(&v)
        };
        assert_eq!(swap("<f4", "<i4"), Err(NpyError::Dtype("<i4".into())));
        // Fortran order: the same six values, (2, 3) read first axis
        // fastest, reordered into C order by `read`.
        let f = swap("False", "True ").unwrap();
        assert_eq!(f.shape, vec![2, 3]);
        assert_eq!(f.data, vec![1.0, 3.0, 5.0, 2.0, 4.0, 6.0]);
        assert!(matches!(swap("(2, 3)", "(2, x)"), Err(NpyError::Header(_))));
        assert!(matches!(
            swap("'shape'", "'shapf'"),
            Err(NpyError::Header(_))
        ));
    }

    /// A version 2.0 file whose header is `text`, then `data`.
    fn v2(text: &str, data: &[u8]) -> Vec<u8> {
        let mut b = b"\x93NUMPY\x02\x00".to_vec();
        b.extend_from_slice(&(text.len() as u32).to_le_bytes());
        b.extend_from_slice(text.as_bytes());
        b.extend_from_slice(data);
        b
    }

    #[test]
    fn hostile_headers_are_refused_before_anything_large_is_allocated() {
        // A header length of 4 GiB.
        let mut b = b"\x93NUMPY\x02\x00".to_vec();
        b.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(read(&b), Err(NpyError::HeaderTooLong { len: u32::MAX }));
        // A shape of more than 2^64 elements (npyz would overflow).
        let huge =
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }";
        assert!(
            matches!(read(&v2(huge, &[])), Err(NpyError::Header(m)) if m.contains("more than 2^64"))
        );
        let zero =
            "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4294967296, 4294967296), }";
        assert!(matches!(read(&v2(zero, &[])), Err(NpyError::Header(_))));
        let negative = "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }";
        assert!(matches!(read(&v2(negative, &[])), Err(NpyError::Header(_))));
        // Deep nesting (the literal parser recurses).
        let deep = format!("{{'shape': {}{}}}", "(".repeat(20_000), ")".repeat(20_000));
        assert!(matches!(read(&v2(&deep, &[])), Err(NpyError::Header(_))));
        // A shape of 2^40 elements with 8 bytes of data: the length is
        // checked before the buffer is allocated.
        let big = "{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776,), }";
        assert!(matches!(
            read(&v2(big, &[0; 8])),
            Err(NpyError::Length { found: 8, .. })
        ));
    }

    #[test]
    fn streams_must_end_after_the_data() {
        let b = numpy_2x3();
        let mut r: &[u8] = &b;
        let h = read_header(&mut r).unwrap();
        assert_eq!((h.len, h.data_bytes()), (128, 24));
        assert_eq!(read_data(h, r, None).unwrap().len(), 6);
        let mut longer = numpy_2x3();
        longer.push(0);
        let mut r: &[u8] = &longer;
        let h = read_header(&mut r).unwrap();
        assert!(matches!(
            read_data(h, r, None),
            Err(NpyError::Longer { expected: 24, .. })
        ));
        let mut r: &[u8] = &b[..b.len() - 2];
        let h = read_header(&mut r).unwrap();
        assert!(matches!(
            read_data(h, r, None),
            Err(NpyError::Length {
                expected: 24,
                found: 22,
                ..
            })
        ));
        // Zeros (as from /dev/zero) are not a .npy file.
        assert_eq!(
            read_header(&mut io::repeat(0).take(1 << 20)).unwrap_err(),
            NpyError::NotNpy
        );
    }

    #[test]
    fn fortran_files_are_read_in_file_order_and_name_indices_in_it() {
        let h = "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }\n";
        let bytes = |values: [f64; 6]| -> Vec<u8> {
            v2(
                h,
                &values
                    .iter()
                    .flat_map(|v| v.to_le_bytes())
                    .collect::<Vec<u8>>(),
            )
        };
        let file = bytes([0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
        let mut r = &file[..];
        let header = read_header(&mut r).unwrap();
        assert!(header.fortran_order);
        // The data as the file holds it, first axis fastest ...
        assert_eq!(
            read_data(header, r, None).unwrap(),
            [0., 1., 2., 3., 4., 5.]
        );
        // ... and `read` in C order.
        assert_eq!(read(&file).unwrap().data, [0., 2., 4., 1., 3., 5.]);
        // Position 3 of a Fortran (2, 3) array is element (1, 1).
        match read(&bytes([0.0, 1.0, 2.0, 1e39, 4.0, 5.0])) {
            Err(NpyError::OutOfRange { index, flat, .. }) => {
                assert_eq!((index, flat), (vec![1, 1], 3));
            }
            other => panic!("{other:?}"),
        }
    }
}
