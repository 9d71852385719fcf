//! The values a program gives its own tensors: constants as written,
//! sizes used as numbers, and seeded random values for the rest.

use shape_graph::{GraphError, SolvedGraph, TensorId, TensorKind};
use shape_run::{HostTensor, Inputs};

use crate::compile::Compiled;
use crate::ProgramError;

/// Seeded values in `[-1, 1)`: the same seed and name give the same values,
/// whatever else the program holds. `None` when memory for them cannot be
/// had.
pub fn random_values(seed: u64, name: &str, len: usize) -> Option<Vec<f32>> {
    // FNV-1a of the name, mixed with the seed, drives a splitmix64 stream.
    let mut state = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
    }) ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut out = Vec::new();
    out.try_reserve_exact(len).ok()?;
    out.extend((0..len).map(|_| {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        // 24 random bits: exact in an f32.
        (z >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }));
    Some(out)
}

/// What the program itself writes for a tensor.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Written<'a> {
    /// A constant's values, as written.
    Constant(&'a [f32]),
    /// A named size used as a number (`x / d`): its solved value, exact up
    /// to 2^24 and the nearest `f32` beyond.
    Size(f32),
}

/// The values the program itself writes for `t`, or `None` for a tensor
/// whose values come from outside (an input, a parameter) or are
/// computed.
pub fn written_values<'a>(
    compiled: &'a Compiled,
    solved: &SolvedGraph,
    t: TensorId,
) -> Result<Option<Written<'a>>, GraphError> {
    if let Some(&s) = compiled.size_values.get(&t) {
        return Ok(Some(Written::Size(solved.size(s)? as f32)));
    }
    Ok(compiled.constants.get(&t).map(|v| Written::Constant(v)))
}

/// Values for every tensor that takes data, from the program alone: what
/// it writes ([`written_values`]) and seeded random values
/// ([`random_values`]) for its inputs and parameters. A tensor with a
/// ragged axis has no such values (its rows' lengths come with its data):
/// that, and values too large for memory, is [`ProgramError::Run`].
pub fn program_inputs(
    compiled: &Compiled,
    solved: &SolvedGraph,
    seed: u64,
) -> Result<Inputs, ProgramError> {
    program_inputs_with(compiled, solved, seed, &mut |_, _, _| None)
}

/// Data for a ragged input from its name, solved shape and ragged axes
/// (memory order), or none.
pub type RaggedData<'a> =
    dyn FnMut(&str, &shape_core::SolvedShape, &[usize]) -> Option<HostTensor> + 'a;

/// [`program_inputs`], with the data of each ragged input from `ragged`
/// (its name, solved shape and ragged axes in memory order), which may
/// give none (then the input is refused as [`program_inputs`] refuses
/// it): test harnesses draw rows' lengths this way.
pub fn program_inputs_with(
    compiled: &Compiled,
    solved: &SolvedGraph,
    seed: u64,
    ragged: &mut RaggedData<'_>,
) -> Result<Inputs, ProgramError> {
    let g = &compiled.graph;
    let locate = |e| compiled.map.locate(e, None);
    let refuse = |message: String| ProgramError::Run {
        message,
        op: None,
        span: None,
    };
    let mut inputs = Inputs::new();
    for t in g.tensor_ids() {
        if let TensorKind::Result(_) = g.kind(t).map_err(locate)? {
            continue;
        }
        let name = g.name(t).map_err(locate)?;
        let shape = solved.shape(t).map_err(locate)?;
        let axes = solved.ragged_axes(t).map_err(locate)?;
        if !axes.is_empty() {
            let Some(data) = ragged(name, shape, &axes) else {
                return Err(refuse(format!(
                    "`{name}` has the ragged shape {shape}: its rows' lengths come with its data"
                )));
            };
            inputs.insert(t, data);
            continue;
        }
        let too_large = || {
            refuse(format!(
                "the data of `{name}` (shape {shape}) does not fit in memory"
            ))
        };
        let values = match written_values(compiled, solved, t).map_err(locate)? {
            Some(Written::Size(size)) => vec![size],
            Some(Written::Constant(v)) => {
                let mut copy = Vec::new();
                copy.try_reserve_exact(v.len()).map_err(|_| too_large())?;
                copy.extend_from_slice(v);
                copy
            }
            None => {
                let len = shape
                    .num_elems()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(too_large)?;
                random_values(seed, name, len).ok_or_else(too_large)?
            }
        };
        let tensor = HostTensor::new(shape.memory_dims(), values)
            .map_err(|e| refuse(format!("`{name}` has the solved shape {shape}: {e}")))?;
        inputs.insert(t, tensor);
    }
    Ok(inputs)
}
