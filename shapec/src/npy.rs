//! A small reader and writer for NumPy `.npy` files of floats.
//!
//! Writes format version 1.0, little-endian `float32`, C order, with the
//! header padded as NumPy pads it (the data starts at a multiple of 64
//! bytes). Reads versions 1.0, 2.0 and 3.0 in C order with dtype `<f4`,
//! `>f4`, `<f8` or `>f8` (doubles are rounded to `f32`).
//!
//! ```
//! use shapec::npy::{read, write, Array};
//! let a = Array { shape: vec![2, 3], data: vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0] };
//! let bytes = write(&a);
//! assert_eq!(&bytes[..6], b"\x93NUMPY");
//! assert_eq!(read(&bytes).unwrap(), a);
//! ```

/// An n-dimensional array of `f32` in C (row-major) order.
#[derive(Clone, Debug, PartialEq)]
pub struct Array {
    /// The sizes of the axes; empty for a 0-d array (one element).
    pub shape: Vec<u64>,
    /// The elements, last axis fastest.
    pub data: Vec<f32>,
}

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
    /// A header that is not the dictionary NumPy writes.
    #[error("malformed header: {0}")]
    Header(String),
    /// An element type other than 32- or 64-bit floats.
    #[error(
        "unsupported dtype '{0}': shapec reads float32 or float64 ('<f4', '>f4', '<f8', '>f8')"
    )]
    Dtype(String),
    /// Fortran (column-major) order.
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
        found: usize,
    },
}

const MAGIC: &[u8] = b"\x93NUMPY";

/// The header text for a little-endian `f32` C-order array, padded with
/// spaces and ended by a newline so that the data is 64-byte aligned.
fn header(shape: &[u64]) -> String {
    let dims = match shape {
        [] => "()".to_string(),
        [n] => format!("({n},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut h = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {dims}, }}");
    // magic (6) + version (2) + length (2) + header + '\n'
    let unpadded = MAGIC.len() + 4 + h.len() + 1;
    h.push_str(&" ".repeat((64 - unpadded % 64) % 64));
    h.push('\n');
    h
}

/// The bytes of a version 1.0 `.npy` file holding `array` as `<f4`.
///
/// The header length is at most a few hundred bytes for any shape of up
/// to 32 axes, well within the 16-bit length field of version 1.0.
pub fn write(array: &Array) -> Vec<u8> {
    let h = header(&array.shape);
    let mut out = Vec::with_capacity(10 + h.len() + 4 * array.data.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    for v in &array.data {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

/// Reads a `.npy` file's bytes.
pub fn read(bytes: &[u8]) -> Result<Array, NpyError> {
    if bytes.len() < MAGIC.len() + 2 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(NpyError::NotNpy);
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (len, start): (usize, usize) = match major {
        1 => {
            let b = bytes.get(8..10).ok_or(NpyError::Truncated)?;
            (u16::from_le_bytes([b[0], b[1]]) as usize, 10)
        }
        2 | 3 => {
            let b = bytes.get(8..12).ok_or(NpyError::Truncated)?;
            (u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize, 12)
        }
        _ => return Err(NpyError::Version { major, minor }),
    };
    if minor != 0 {
        return Err(NpyError::Version { major, minor });
    }
    let end = start.checked_add(len).ok_or(NpyError::Truncated)?;
    let text = bytes.get(start..end).ok_or(NpyError::Truncated)?;
    let text =
        std::str::from_utf8(text).map_err(|_| NpyError::Header("the header is not text".into()))?;
    let fields = parse_header(text)?;
    let data = &bytes[end..];
    let (little, width) = match fields.descr.as_str() {
        "<f4" => (true, 4),
        ">f4" => (false, 4),
        "<f8" => (true, 8),
        ">f8" => (false, 8),
        other => return Err(NpyError::Dtype(other.to_string())),
    };
    if fields.fortran_order {
        return Err(NpyError::FortranOrder);
    }
    let count = fields
        .shape
        .iter()
        .try_fold(1u128, |acc, &d| acc.checked_mul(d as u128));
    let expected = count.and_then(|c| c.checked_mul(width as u128));
    if expected != Some(data.len() as u128) {
        return Err(NpyError::Length {
            shape: fields.shape,
            expected: expected.unwrap_or(u128::MAX),
            found: data.len(),
        });
    }
    let values = data
        .chunks_exact(width)
        .map(|c| match (width, little) {
            (4, true) => f32::from_le_bytes([c[0], c[1], c[2], c[3]]),
            (4, false) => f32::from_be_bytes([c[0], c[1], c[2], c[3]]),
            (_, le) => {
                let b: [u8; 8] = [c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]];
                (if le {
                    f64::from_le_bytes(b)
                } else {
                    f64::from_be_bytes(b)
                }) as f32
            }
        })
        .collect();
    Ok(Array {
        shape: fields.shape,
        data: values,
    })
}

struct Fields {
    descr: String,
    fortran_order: bool,
    shape: Vec<u64>,
}

/// Parses the header dictionary: `{'descr': '<f4', 'fortran_order':
/// False, 'shape': (2, 3), }`, keys in any order.
fn parse_header(text: &str) -> Result<Fields, NpyError> {
    let bad = |what: &str| NpyError::Header(what.to_string());
    let body = text
        .trim()
        .strip_prefix('{')
        .and_then(|t| t.strip_suffix('}'))
        .ok_or_else(|| bad("it is not a {...} dictionary"))?;
    let mut descr = None;
    let mut fortran = None;
    let mut shape = None;
    let mut rest = body.trim_start();
    while !rest.is_empty() {
        let (key, after) = quoted(rest).ok_or_else(|| bad("expected a quoted key"))?;
        let after = after
            .trim_start()
            .strip_prefix(':')
            .ok_or_else(|| bad("expected `:` after a key"))?
            .trim_start();
        let after = match key {
            "descr" => {
                let (v, a) = quoted(after).ok_or_else(|| bad("'descr' is not a string"))?;
                descr = Some(v.to_string());
                a
            }
            "fortran_order" => {
                if let Some(a) = after.strip_prefix("False") {
                    fortran = Some(false);
                    a
                } else if let Some(a) = after.strip_prefix("True") {
                    fortran = Some(true);
                    a
                } else {
                    return Err(bad("'fortran_order' is not True or False"));
                }
            }
            "shape" => {
                let inner = after
                    .strip_prefix('(')
                    .ok_or_else(|| bad("'shape' is not a tuple"))?;
                let close = inner
                    .find(')')
                    .ok_or_else(|| bad("'shape' is not closed"))?;
                let dims = inner[..close]
                    .split(',')
                    .map(str::trim)
                    .filter(|d| !d.is_empty())
                    .map(|d| {
                        d.trim_end_matches('L')
                            .parse::<u64>()
                            .map_err(|_| bad(&format!("'shape' has a non-integer `{d}`")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                shape = Some(dims);
                &inner[close + 1..]
            }
            other => return Err(bad(&format!("unknown key '{other}'"))),
        };
        let after = after.trim_start();
        rest = after.strip_prefix(',').unwrap_or(after).trim_start();
        if after.len() == rest.len() && !rest.is_empty() {
            return Err(bad("expected `,` between entries"));
        }
    }
    Ok(Fields {
        descr: descr.ok_or_else(|| bad("no 'descr'"))?,
        fortran_order: fortran.ok_or_else(|| bad("no 'fortran_order'"))?,
        shape: shape.ok_or_else(|| bad("no 'shape'"))?,
    })
}

/// A `'...'` or `"..."` string at the start of `s`, and what follows it.
fn quoted(s: &str) -> Option<(&str, &str)> {
    let q = s.chars().next().filter(|&c| c == '\'' || c == '"')?;
    let body = &s[1..];
    let end = body.find(q)?;
    Some((&body[..end], &body[end + 1..]))
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
    fn writes_the_bytes_numpy_writes() {
        let a = Array {
            shape: vec![2, 3],
            data: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        };
        let bytes = write(&a);
        assert_eq!(bytes, numpy_2x3());
        assert_eq!(bytes.len(), 128 + 24);
        // 1.0f32 little-endian right after the 128-byte header.
        assert_eq!(&bytes[128..132], &[0x00, 0x00, 0x80, 0x3f]);
    }

    #[test]
    fn round_trips_0d_1d_and_empty_axes() {
        for shape in [vec![], vec![3], vec![1, 1, 2], vec![2, 0]] {
            let n: u64 = shape.iter().product();
            let a = Array {
                shape: shape.clone(),
                data: (0..n).map(|i| i as f32 * 0.25 - 1.0).collect(),
            };
            let bytes = write(&a);
            assert_eq!(bytes.len() % 64, (4 * n as usize) % 64, "{shape:?}");
            assert_eq!(read(&bytes).unwrap(), a);
        }
        let h = header(&[]);
        assert!(h.starts_with("{'descr': '<f4', 'fortran_order': False, 'shape': (), }"));
        assert!(header(&[7]).contains("'shape': (7,)"));
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
        assert_eq!(swap("False", "True "), Err(NpyError::FortranOrder));
        assert!(matches!(swap("(2, 3)", "(2, x)"), Err(NpyError::Header(_))));
        assert!(matches!(
            swap("'shape'", "'shapf'"),
            Err(NpyError::Header(_))
        ));
    }
}
