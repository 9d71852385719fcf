//! Tensor values as JSON nested lists: read with `run --input NAME=FILE.json`
//! and written by `run --json`.
//!
//! A tensor of dims `[2, 3]` (memory order: batch, then output, then input
//! axes) is `[[a, b, c], [d, e, f]]`; a tensor without axes is a bare
//! number. A ragged axis (`var`) has lists of their own lengths there:
//! `[[1], [2, 3]]` for `2, var`. Written by
//! [`shape_solver::HostTensor::write_nested`]. Finite values are numbers; NaN and the infinities are the
//! strings `"nan"`, `"inf"` and `"-inf"`, which JSON numbers cannot write.

use std::io::Read;
use std::path::Path;

use serde_json::Value;
use shape_solver::HostTensor;

use crate::error::CliError;

/// The most bytes one value may take in a JSON file (a long number with
/// its separator and whitespace); files past this many per element are
/// refused before they are parsed, so that `/dev/zero` or a huge file
/// cannot exhaust memory.
const BYTES_PER_VALUE: u64 = 64;

/// Reads `--input NAME=FILE.json`: nested lists whose lengths are `dims`
/// (the tensor's solved shape in memory order), a bare value for a tensor
/// without axes; at the ragged axis `ragged` (memory order), if any, each
/// list has a length of its own.
pub fn read_json_input(
    path: &Path,
    name: &str,
    shape_text: &str,
    dims: &[u64],
    ragged: Option<usize>,
) -> Result<HostTensor, CliError> {
    let read_error = |source: std::io::Error| CliError::Read {
        path: path.to_path_buf(),
        source,
    };
    let data_error = |what: String| {
        CliError::Data(format!(
            "{}: `{name}` has the solved shape {shape_text}, so its values must be nested lists of lengths {} (batch, then output, then input axes): {what}",
            path.display(),
            lengths(dims, ragged)
        ))
    };
    let elements: u64 = dims
        .iter()
        .enumerate()
        .filter(|&(j, _)| Some(j) != ragged)
        .try_fold(1u64, |a, (_, &d)| a.checked_mul(d))
        .unwrap_or(u64::MAX);
    // A ragged file is bounded by what memory can hold, not by its shape:
    // a parsed number takes up to 32 bytes for its 2 of text.
    let limit = if ragged.is_some() {
        crate::memory::available().map_or(u64::MAX, |b| b.bytes / 64)
    } else {
        elements
            .saturating_mul(BYTES_PER_VALUE)
            .saturating_add(4096)
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    if file.metadata().map_err(read_error)?.is_dir() {
        return Err(read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it is a directory",
        )));
    }
    let value: Value = if ragged.is_some() {
        // Parsed as it is read, so that what is not JSON (`/dev/zero`)
        // fails at its first byte; at most `limit` bytes are read.
        let reader = std::io::BufReader::new(file.take(limit));
        serde_json::from_reader(reader).map_err(|e| {
            let what = if e.is_eof() {
                format!("it ends early, or is longer than the {limit} bytes memory allows ({e})")
            } else {
                format!("it is not JSON ({e})")
            };
            data_error(what)
        })?
    } else {
        let mut text = Vec::new();
        file.take(limit.saturating_add(1))
            .read_to_end(&mut text)
            .map_err(read_error)?;
        if text.len() as u64 > limit {
            return Err(data_error(format!(
                "the file is longer than {limit} bytes, more than {elements} values can take"
            )));
        }
        serde_json::from_slice(&text).map_err(|e| data_error(format!("it is not JSON ({e})")))?
    };
    let reserve = if ragged.is_some() { 0 } else { elements };
    let mut out = crate::npy::try_vec(usize::try_from(reserve).unwrap_or(usize::MAX))
        .ok_or_else(|| data_error("there is not enough memory for the values".into()))?;
    let mut lengths: Vec<u64> = Vec::new();
    // Depth first without recursion: (value, level, index path).
    let mut stack: Vec<(&Value, usize, Vec<u64>)> = vec![(&value, 0, Vec::new())];
    while let Some((v, level, at)) = stack.pop() {
        if level == dims.len() {
            out.push(number(v).ok_or_else(|| {
                data_error(format!("{} is {}, not a number", place(&at), describe(v)))
            })?);
            continue;
        }
        let Value::Array(items) = v else {
            return Err(data_error(format!(
                "{} is {}, where a list of {} is expected",
                place(&at),
                describe(v),
                dims[level]
            )));
        };
        if Some(level) == ragged {
            lengths.push(items.len() as u64);
        } else if items.len() as u64 != dims[level] {
            return Err(data_error(format!(
                "{} has {} entries, where axis {level} has {}",
                place(&at),
                items.len(),
                dims[level]
            )));
        }
        // Pushed in reverse so that they are read in order.
        for (k, item) in items.iter().enumerate().rev() {
            let mut next = at.clone();
            next.push(k as u64);
            stack.push((item, level + 1, next));
        }
    }
    let tensor = match ragged {
        Some(axis) => HostTensor::ragged(
            dims[..axis].to_vec(),
            &lengths,
            dims[axis + 1..].to_vec(),
            out,
        ),
        None => HostTensor::new(dims.to_vec(), out),
    };
    tensor.map_err(|e| data_error(e.to_string()))
}

/// A JSON value as an `f32`: a number, or `"nan"`, `"inf"`, `"-inf"`.
fn number(v: &Value) -> Option<f32> {
    match v {
        Value::Number(n) => n.as_f64().map(|x| x as f32),
        Value::String(s) => match s.as_str() {
            "nan" => Some(f32::NAN),
            "inf" => Some(f32::INFINITY),
            "-inf" => Some(f32::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

fn describe(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

fn place(at: &[u64]) -> String {
    if at.is_empty() {
        "the whole value".to_string()
    } else {
        let idx: Vec<String> = at.iter().map(u64::to_string).collect();
        format!("entry [{}]", idx.join("]["))
    }
}

fn lengths(dims: &[u64], ragged: Option<usize>) -> String {
    if dims.is_empty() {
        "() (a bare value)".to_string()
    } else {
        let d: Vec<String> = (dims.iter().enumerate())
            .map(|(j, n)| {
                if Some(j) == ragged {
                    "var".to_string()
                } else {
                    n.to_string()
                }
            })
            .collect();
        format!("({})", d.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(dims: &[u64], values: &[f32]) -> String {
        let t = HostTensor::new(dims.to_vec(), values.to_vec()).unwrap();
        let mut out = Vec::new();
        t.write_nested(&mut out, &|w, v| write!(w, "{v:?}"))
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn empty_tensors_are_empty_lists() {
        assert_eq!(nested(&[0], &[]), "[]");
        assert_eq!(nested(&[0, 3], &[]), "[]");
        assert_eq!(nested(&[2, 0], &[]), "[[], []]");
        assert_eq!(nested(&[2, 0, 3], &[]), "[[], []]");
        assert_eq!(nested(&[1, 2, 0], &[]), "[[[], []]]");
    }

    #[test]
    fn values_nest_by_their_dims() {
        assert_eq!(nested(&[], &[2.5]), "2.5");
        assert_eq!(nested(&[3], &[1.0, 2.0, 3.0]), "[1.0, 2.0, 3.0]");
        assert_eq!(
            nested(&[2, 3], &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]),
            "[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]"
        );
        assert_eq!(nested(&[1, 1, 2], &[7.0, 8.0]), "[[[7.0, 8.0]]]");
        // Thousands of axes of size 1: no recursion.
        let deep = nested(&vec![1; 5000], &[1.0]);
        assert_eq!(deep.len(), 5000 * 2 + 3);
    }

    #[test]
    fn ragged_rows_have_their_own_lengths() {
        let t = HostTensor::ragged(
            vec![3],
            &[1, 0, 2],
            vec![2],
            vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        )
        .unwrap();
        assert_eq!(t.to_string(), "[[[1, 2]], [], [[3, 4], [5, 6]]]");
    }
}
