//! Tensor values as JSON nested lists: read with `run --input NAME=FILE.json`
//! and written by `run --json`.
//!
//! A tensor of dims `[2, 3]` (memory order: batch, then output, then input
//! axes) is `[[a, b, c], [d, e, f]]`; a tensor without axes is a bare
//! number. A ragged axis (`var`) has lists of their own lengths there:
//! `[[1], [2, 3]]` for `2, var`. Written by
//! [`shape_run::HostTensor::write_nested`]. Finite values are numbers; NaN and the infinities are the
//! strings `"nan"`, `"inf"` and `"-inf"`, which JSON numbers cannot write.
//!
//! # Reading
//!
//! [`read_json_input`] parses the file as it reads it (serde's streaming
//! deserializer with a visitor of its own) and writes each number straight
//! into one buffer of `f32`: no tree of JSON values is built, so a file
//! takes about 4 bytes of memory a value, whatever its text. A dense
//! tensor's buffer is reserved once, for the elements its shape has; a
//! ragged tensor's grows as its rows come, as does the list of their
//! lengths. Every allocation is fallible: one that fails is
//! `error[memory]`, never an abort. The bytes read are bounded too: a
//! dense file by its element count (64 bytes a value), a ragged one by the
//! memory available; what is not JSON (`/dev/zero`) fails at its first
//! byte.
//!
//! Lists are checked against the shape as they come. The error reported is
//! the first in document order, a list's own length before what it holds
//! (so `[1, 2, 3, 4, 5, 6]` for `2, 3` is a list of 6 where 2 are
//! expected, not a number where a list is expected); what is not JSON
//! anywhere in the file is reported before any of these.
//!
//! A number must fit an `f32`: a finite number too large in magnitude to
//! round to a finite `f32` (`3.5e38`, `1e39`, anything past
//! `3.4028235677973366e38`) is `error[data]` naming the file and the
//! entry (`entry [1][0] is 1e39, ...`), where a cast would have made it an
//! infinity. An infinity is written deliberately as `"inf"` or `"-inf"`.
//! Numbers past the range of `f64` (`1e400`) are not JSON that can be
//! read.

use std::fmt;
use std::io::Read;
use std::path::Path;

use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use shape_run::HostTensor;

use crate::error::CliError;

/// The most bytes one value may take in a JSON file (a long number with
/// its separator and whitespace); files past this many per element are
/// refused before they are parsed, so that `/dev/zero` or a huge file
/// cannot exhaust memory.
const BYTES_PER_VALUE: u64 = 64;

/// Reads `--input NAME=FILE.json`: nested lists whose lengths are `dims`
/// (the tensor's solved shape in memory order), a bare value for a tensor
/// without axes; at the ragged axes `ragged` (memory order, every level of
/// a nested ragged tensor), each list has a length of its own.
pub fn read_json_input(
    path: &Path,
    name: &str,
    shape_text: &str,
    dims: &[u64],
    ragged: &[usize],
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
    let out_of_memory = |needed: u128| CliError::OutOfMemory {
        what: format!("the values of `{name}` read from {}", path.display()),
        needed,
        budget: None,
    };
    let elements: u64 = dims
        .iter()
        .enumerate()
        .filter(|(j, _)| !ragged.contains(j))
        .try_fold(1u64, |a, (_, &d)| a.checked_mul(d))
        .unwrap_or(u64::MAX);
    // A ragged file is bounded by what memory can hold, not by its shape:
    // a value takes at least 2 bytes of text (`0,`) and 4 bytes of memory,
    // 8 while its buffer doubles; a row at least 3 (`[],`), and 8 bytes for
    // its length (16 while that list doubles) and 8 for its offset. At 16
    // bytes of memory a byte of text, half of what there is is enough.
    let limit = if !ragged.is_empty() {
        crate::memory::available().map_or(u64::MAX, |b| b.bytes / 16)
    } else {
        elements
            .saturating_mul(BYTES_PER_VALUE)
            .saturating_add(4096)
    };
    let longer = || match ragged {
        [_, ..] => data_error(format!("it is longer than the {limit} bytes memory allows")),
        [] => data_error(format!(
            "the file is longer than {limit} bytes, more than {elements} values can take"
        )),
    };
    let file = std::fs::File::open(path).map_err(read_error)?;
    let meta = file.metadata().map_err(read_error)?;
    if meta.is_dir() {
        return Err(read_error(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "it is a directory",
        )));
    }
    if meta.is_file() && meta.len() > limit {
        return Err(longer());
    }
    let reserve = if ragged.is_empty() { elements } else { 0 };
    let values = usize::try_from(reserve)
        .ok()
        .and_then(crate::npy::try_vec)
        .ok_or_else(|| out_of_memory(reserve as u128 * 4))?;
    let mut reader = Reader {
        dims,
        ragged,
        values,
        lengths: vec![Vec::new(); ragged.len()],
        at: Vec::new(),
        problem: None,
        memory: None,
    };
    // Parsed as it is read, so that what is not JSON (`/dev/zero`) fails
    // at its first byte; at most one byte past `limit` is read, which
    // tells a file that is too long (a pipe's length is not known before).
    let mut source = std::io::BufReader::new(file.take(limit.saturating_add(1)));
    let parsed = {
        let mut de = serde_json::Deserializer::from_reader(&mut source);
        Level {
            reader: &mut reader,
            level: 0,
        }
        .deserialize(&mut de)
        .and_then(|()| de.end())
    };
    let over = source.get_ref().limit() == 0;
    if let Some(needed) = reader.memory {
        return Err(out_of_memory(needed));
    }
    match parsed {
        Err(e) if e.is_io() => return Err(read_error(e.into())),
        Err(e) if e.is_eof() && over => return Err(longer()),
        Err(e) if e.is_eof() && !ragged.is_empty() => {
            return Err(data_error(format!(
                "it ends early, or is longer than the {limit} bytes memory allows ({e})"
            )))
        }
        Err(e) => return Err(data_error(format!("it is not JSON ({e})"))),
        Ok(()) if over => return Err(longer()),
        Ok(()) => {}
    }
    if let Some(what) = reader.problem {
        return Err(data_error(what));
    }
    let tensor = if ragged.is_empty() {
        HostTensor::new(dims.to_vec(), reader.values)
    } else {
        let mut levels = Vec::with_capacity(ragged.len());
        for (&axis, lengths) in ragged.iter().zip(&reader.lengths) {
            levels.push(
                shape_core::RaggedAxis::from_lengths(axis, lengths)
                    .map_err(|e| data_error(e.to_string()))?,
            );
        }
        let inner = levels.pop().expect("a ragged level");
        shape_core::RaggedAxis::nested(levels, inner, dims)
            .and_then(|rows| HostTensor::with_rows(dims.to_vec(), rows, reader.values))
    };
    tensor.map_err(|e| data_error(e.to_string()))
}

/// The dims of the nested lists in a `.json` file, to bind run-time sizes
/// from (as a `.npy` header's shape binds them): the length of the first
/// list at each of `rank` levels, when every list at a level has that
/// length. `None` when the file cannot be read, is not JSON, or is not
/// such lists; reading its values reports why. Nothing is kept but the
/// lengths, and at most what memory could hold of it is read.
pub fn json_dims(path: &Path, rank: usize) -> Option<Vec<u64>> {
    let file = std::fs::File::open(path).ok()?;
    if file.metadata().ok()?.is_dir() {
        return None;
    }
    let limit = crate::memory::available().map_or(u64::MAX, |b| b.bytes / 16);
    let mut probe = Probe {
        dims: vec![None; rank],
        uniform: true,
    };
    let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(file.take(limit)));
    ProbeLevel {
        probe: &mut probe,
        level: 0,
    }
    .deserialize(&mut de)
    .ok()?;
    de.end().ok()?;
    if !probe.uniform {
        return None;
    }
    probe.dims.into_iter().collect()
}

/// The lengths met at each level so far, and whether they agree.
struct Probe {
    dims: Vec<Option<u64>>,
    uniform: bool,
}

/// One level of [`json_dims`]'s walk.
struct ProbeLevel<'p> {
    probe: &'p mut Probe,
    level: usize,
}

impl<'de> DeserializeSeed<'de> for ProbeLevel<'_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.level == self.probe.dims.len() {
            d.deserialize_ignored_any(IgnoredAny)?;
            return Ok(());
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ProbeLevel<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("nested lists")
    }

    fn visit_seq<A: de::SeqAccess<'de>>(self, mut items: A) -> Result<(), A::Error> {
        let mut n: u64 = 0;
        while items
            .next_element_seed(ProbeLevel {
                probe: &mut *self.probe,
                level: self.level + 1,
            })?
            .is_some()
        {
            n += 1;
        }
        let slot = &mut self.probe.dims[self.level];
        match slot {
            None => *slot = Some(n),
            Some(m) if *m != n => self.probe.uniform = false,
            Some(_) => {}
        }
        Ok(())
    }
}

/// What the parse has read so far.
struct Reader<'d> {
    dims: &'d [u64],
    ragged: &'d [usize],
    /// The values, in order.
    values: Vec<f32>,
    /// The length of each list at each ragged axis, in order.
    lengths: Vec<Vec<u64>>,
    /// The index of the value being read.
    at: Vec<u64>,
    /// The first fault in document order; once there is one, the rest of
    /// the file is only parsed (lists that hold it still check their own
    /// lengths, which come first).
    problem: Option<String>,
    /// Bytes that could not be allocated: the parse stops.
    memory: Option<u128>,
}

impl Reader<'_> {
    /// Grows `values` or `lengths` by one, fallibly.
    fn room<T>(list: &mut Vec<T>, memory: &mut Option<u128>) -> bool {
        if list.len() < list.capacity() || list.try_reserve(1).is_ok() {
            return true;
        }
        let wanted = list.len().saturating_mul(2).max(8) as u128;
        *memory = Some(wanted * std::mem::size_of::<T>() as u128);
        false
    }
}

/// The value at one level of nesting: level `dims.len()` is a number, any
/// other a list.
struct Level<'r, 'd> {
    reader: &'r mut Reader<'d>,
    level: usize,
}

fn stop<E: de::Error>() -> E {
    E::custom("out of memory")
}

impl Level<'_, '_> {
    fn is_leaf(&self) -> bool {
        self.level == self.reader.dims.len()
    }

    /// Something other than what belongs here: `found` is what it is.
    fn wrong(self, found: &str) {
        let r = self.reader;
        let what = if self.level == r.dims.len() {
            format!("{} is {found}, not a number", place(&r.at))
        } else if r.ragged.contains(&self.level) {
            format!(
                "{} is {found}, where a list (a row of any length) is expected",
                place(&r.at)
            )
        } else {
            format!(
                "{} is {found}, where a list of {} is expected",
                place(&r.at),
                r.dims[self.level]
            )
        };
        r.problem.get_or_insert(what);
    }

    fn value<E: de::Error>(self, v: f32) -> Result<(), E> {
        if !self.is_leaf() {
            self.wrong("a number");
            return Ok(());
        }
        let r = self.reader;
        if !Reader::room(&mut r.values, &mut r.memory) {
            return Err(stop());
        }
        r.values.push(v);
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Level<'_, '_> {
    type Value = ();

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.reader.problem.is_some() {
            // After the first fault the file is only parsed.
            d.deserialize_ignored_any(IgnoredAny)?;
            return Ok(());
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Level<'_, '_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_leaf() {
            f.write_str("a number")
        } else {
            f.write_str("a list")
        }
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.wrong("a boolean");
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.value(v as f64 as f32)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.value(v as f64 as f32)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<(), E> {
        let x = v as f32;
        if v.is_finite() && x.is_infinite() && self.is_leaf() {
            let r = self.reader;
            r.problem.get_or_insert(format!(
                "{} is {v:e}, past the range of f32 (whose largest magnitude is {:e}); write \"inf\" or \"-inf\" for an infinity",
                place(&r.at),
                f32::MAX
            ));
            return Ok(());
        }
        self.value(x)
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        if !self.is_leaf() {
            self.wrong("a string");
            return Ok(());
        }
        match v {
            "nan" => self.value(f32::NAN),
            "inf" => self.value(f32::INFINITY),
            "-inf" => self.value(f32::NEG_INFINITY),
            _ => {
                self.wrong("a string");
                Ok(())
            }
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.wrong("null");
        Ok(())
    }

    fn visit_none<E: de::Error>(self) -> Result<(), E> {
        self.visit_unit()
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        self.wrong("an object");
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.is_leaf() {
            while seq.next_element::<IgnoredAny>()?.is_some() {}
            self.wrong("a list");
            return Ok(());
        }
        let level = self.level;
        let r = self.reader;
        let ragged = r.ragged.iter().position(|&a| a == level);
        let size = r.dims[level];
        // A list is read when it begins after no fault (see `deserialize`),
        // so any fault found now is in what it holds, and its own length,
        // which comes first in document order, takes its place.
        let mut count: u64 = 0;
        loop {
            let more = if ragged.is_some() || count < size {
                r.at.push(count);
                let more = seq.next_element_seed(Level {
                    reader: &mut *r,
                    level: level + 1,
                })?;
                r.at.pop();
                more.is_some()
            } else {
                // Past the length: parsed, and counted for the message.
                seq.next_element::<IgnoredAny>()?.is_some()
            };
            if !more {
                break;
            }
            count += 1;
        }
        if ragged.is_none() && count != size {
            r.problem = Some(format!(
                "{} has {count} entries, where axis {level} has {size}",
                place(&r.at)
            ));
        } else if let (Some(l), None) = (ragged, &r.problem) {
            if !Reader::room(&mut r.lengths[l], &mut r.memory) {
                return Err(stop());
            }
            r.lengths[l].push(count);
        }
        Ok(())
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

fn lengths(dims: &[u64], ragged: &[usize]) -> String {
    if dims.is_empty() {
        "() (a bare value)".to_string()
    } else {
        let d: Vec<String> = (dims.iter().enumerate())
            .map(|(j, n)| {
                if ragged.contains(&j) {
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
