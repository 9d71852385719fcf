//! Generator arguments (slangpy's `call_id`, `thread_id`, `grid`,
//! `wang_hash`, `rand_float`): values the kernel computes for each call
//! instead of reading them from a buffer.
//!
//! | text | binds to | call dims | value per call |
//! |---|---|---|---|
//! | `call_id` | `int`/`uint` vector of the call's dims, or `int[K]` | none: the call's own | the call index (a vector's `x` is the right-most call dim; an array is in call-dim order) |
//! | `thread_id` | `int`/`uint`, or a vector of 1 to 3 | none | `(i, 0, 0)`, `i` the call's row-major index |
//! | `grid(shape=(4,-1), stride=(2,2), offset=(0,0))` | `int`/`uint` vector of the grid's dims, `int[N]`, or a scalar for one dim | the grid's, `-1` takes its size from the others | `offset + index * stride` per grid dim |
//! | `wang_hash(seed=1, warmup=0, hash_seed=true)` | `uint`/`int`, or a vector of 1 to 3 | none | Wang hashes of the call's index (below) |
//! | `rand_float(min=0.0, max=1.0, seed=1, ..)` | `float`, or a vector of 1 to 3 | none | uniform in `[min, max)` from those hashes |
//!
//! The hashes follow slangpy: with `seed' = wang(seed)` (or `seed` when
//! `hash_seed=false`), a scalar is `wang(wang^warmup(i) ^ seed')`; a
//! vector of `n` starts from `h = wang^warmup(i * n) ^ seed'` and takes
//! `h = wang(h)` for each component in turn. `rand_float` maps each hash
//! `h` to `min + (max - min) * (h & 0x7FFFFF) / 2^23`.

use super::error::CallError;
use super::types::{Extent, ParamType, Scalar};

/// The most hashes of a call's start value before the seed is mixed in:
/// each call runs them, in a kernel that has no loop budget to spare.
pub const MAX_WARMUP: u32 = 1024;

/// slangpy's default seed for `wang_hash` and `rand_float`.
pub const DEFAULT_SEED: u32 = 2_640_457_667;

/// A generator argument.
#[derive(Clone, Debug, PartialEq)]
pub enum Generator {
    /// The call index.
    CallId,
    /// The call's row-major index as `x`, `y = z = 0`.
    ThreadId,
    /// A grid of `shape` (`None`: `-1`, the size the other arguments give),
    /// each value `offset + index * stride`.
    Grid {
        /// Its size per dim.
        shape: Vec<Option<u64>>,
        /// The step between neighbouring values per dim.
        stride: Vec<i64>,
        /// The first value per dim.
        offset: Vec<i64>,
    },
    /// Wang hashes of the call's index.
    WangHash(HashSeed),
    /// Uniform floats in `[min, max)` from Wang hashes.
    RandFloat {
        /// The smallest value.
        min: f32,
        /// The bound no value reaches.
        max: f32,
        /// The hash's seed.
        seed: HashSeed,
    },
}

/// How the hash of a random generator is seeded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct HashSeed {
    /// The seed.
    pub seed: u32,
    /// Hashes of the start value before the seed is mixed in.
    pub warmup: u32,
    /// Whether the seed is hashed once before use (slangpy's default).
    pub hash_seed: bool,
}

impl Default for HashSeed {
    fn default() -> Self {
        HashSeed {
            seed: DEFAULT_SEED,
            warmup: 0,
            hash_seed: true,
        }
    }
}

/// Thomas Wang's 32-bit integer hash, as slangpy's `wanghasharg.slang`.
///
/// ```
/// assert_eq!(shape_call::wang_hash(0), 3_232_319_850);
/// assert_eq!(shape_call::wang_hash(1), 663_891_101);
/// ```
pub fn wang_hash(mut s: u32) -> u32 {
    s = (s ^ 61) ^ (s >> 16);
    s = s.wrapping_mul(9);
    s ^= s >> 4;
    s = s.wrapping_mul(0x27d4_eb2d);
    s ^ (s >> 15)
}

impl HashSeed {
    /// The seed mixed into every call's hash.
    pub fn effective(&self) -> u32 {
        if self.hash_seed {
            wang_hash(self.seed)
        } else {
            self.seed
        }
    }

    /// The `n` hashes of call `index` (`n = 0` for a scalar, which gives
    /// one).
    pub fn hashes(&self, index: u64, n: usize) -> Vec<u32> {
        let start = (index as u32).wrapping_mul(n.max(1) as u32);
        let mut h = start;
        for _ in 0..self.warmup {
            h = wang_hash(h);
        }
        h ^= self.effective();
        (0..n.max(1))
            .map(|_| {
                h = wang_hash(h);
                h
            })
            .collect()
    }
}

/// A hash's uniform float in `[min, max)`: its low 23 bits as a fraction,
/// `min + (max - min) * u` in `f32` (`max - min` rounded once, as the
/// kernel has it).
pub fn hash_to_float(h: u32, min: f32, max: f32) -> f32 {
    let u = (h & 0x7F_FFFF) as f32 / 8_388_608.0;
    let width = max - min;
    min + width * u
}

/// How a generator's value is laid out in its parameter's type.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueLayout {
    /// A scalar.
    Scalar,
    /// A vector of `n`: component 0 (`x`) is the last dim.
    Vector(usize),
    /// An array of `n`: element 0 is the first dim.
    Array(usize),
}

impl ValueLayout {
    /// The components' count.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(self) -> usize {
        match self {
            ValueLayout::Scalar => 1,
            ValueLayout::Vector(n) | ValueLayout::Array(n) => n,
        }
    }

    /// Values given per dim (`per_dim[0]` the first dim) in this layout.
    pub fn place(self, per_dim: &[i64]) -> Vec<i64> {
        match self {
            ValueLayout::Vector(_) => per_dim.iter().rev().copied().collect(),
            ValueLayout::Scalar | ValueLayout::Array(_) => per_dim.to_vec(),
        }
    }
}

impl std::hash::Hash for Generator {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            Generator::CallId | Generator::ThreadId => {}
            Generator::Grid {
                shape,
                stride,
                offset,
            } => (shape, stride, offset).hash(state),
            Generator::WangHash(seed) => seed.hash(state),
            Generator::RandFloat { min, max, seed } => {
                (min.to_bits(), max.to_bits(), seed).hash(state)
            }
        }
    }
}

impl Eq for Generator {}

impl Generator {
    /// Its name as written.
    pub fn name(&self) -> &'static str {
        match self {
            Generator::CallId => "call_id",
            Generator::ThreadId => "thread_id",
            Generator::Grid { .. } => "grid",
            Generator::WangHash(_) => "wang_hash",
            Generator::RandFloat { .. } => "rand_float",
        }
    }

    /// The layout of this generator's value in `ty`, or why `ty` cannot
    /// take it (its kind of element; the count is checked where the call's dims
    /// are known).
    pub fn layout(&self, ty: &ParamType) -> Result<ValueLayout, String> {
        let scalar_wanted: &[Scalar] = match self {
            Generator::RandFloat { .. } => &[Scalar::Float],
            _ => &[Scalar::Int, Scalar::Uint],
        };
        let scalar_ok =
            |t: &ParamType| matches!(t, ParamType::Scalar(s) if scalar_wanted.contains(s));
        let layout = match ty {
            t if scalar_ok(t) => ValueLayout::Scalar,
            ParamType::Vector(e, Extent::Fixed(n)) if scalar_ok(e) => {
                ValueLayout::Vector(*n as usize)
            }
            ParamType::Array(e, Extent::Fixed(n))
                if scalar_ok(e) && matches!(self, Generator::CallId | Generator::Grid { .. }) =>
            {
                ValueLayout::Array(*n as usize)
            }
            _ => {
                let want = match self {
                    Generator::RandFloat { .. } => "a float or a float vector of 1 to 3",
                    Generator::CallId | Generator::Grid { .. } => {
                        "an int or uint vector, or an int array, with one entry per dim"
                    }
                    _ => "an int or uint, or a vector of 1 to 3 of them",
                };
                return Err(format!("{} gives {want}", self.name()));
            }
        };
        Ok(layout)
    }

    /// Checks that `layout` takes the values this generator gives per
    /// call: `dims` of them (the call's dims for `call_id`, the grid's for
    /// `grid`), or for the others any count from 1 to 3 (`None`).
    pub(crate) fn check_count(
        &self,
        layout: ValueLayout,
        dims: Option<usize>,
    ) -> Result<(), String> {
        match dims {
            Some(d) if layout == ValueLayout::Scalar && d != 1 => Err(format!(
                "{} gives {d} values per call here, a scalar takes one",
                self.name()
            )),
            Some(d) if layout != ValueLayout::Scalar && layout.len() != d => Err(format!(
                "{} gives {d} values per call here (one per dim), the parameter takes {}",
                self.name(),
                layout.len()
            )),
            None if layout.len() > 3 => Err(format!("{} gives at most 3 values", self.name())),
            _ => Ok(()),
        }
    }

    /// The grid's dims, or `None` for the other generators.
    pub(crate) fn grid_dims(&self) -> Option<usize> {
        match self {
            Generator::Grid { shape, .. } => Some(shape.len()),
            _ => None,
        }
    }

    /// The values of one call, in the parameter's layout and scalar kind
    /// (integers wrap to 32 bits as the kernel's do, then travel as
    /// `f32`): `index` is the call index (for `call_id`) or the grid's
    /// indices (for `grid`), `flat` the call's row-major index.
    pub fn values(
        &self,
        layout: ValueLayout,
        scalar: Scalar,
        index: &[u64],
        flat: u64,
    ) -> Vec<f32> {
        // An integer as the parameter's kind holds it: i32 or u32 bits.
        let int = |x: u32| match scalar {
            Scalar::Int => x as i32 as f32,
            _ => x as f32,
        };
        match self {
            Generator::CallId => {
                let per_dim: Vec<i64> = index.iter().map(|&i| i as i64).collect();
                layout
                    .place(&per_dim)
                    .into_iter()
                    .map(|x| int(x as u32))
                    .collect()
            }
            Generator::ThreadId => {
                let mut v = vec![int(0); layout.len()];
                v[0] = int(flat as u32);
                v
            }
            Generator::Grid { stride, offset, .. } => {
                // 32-bit wrapping arithmetic, as the kernel computes it.
                let per_dim: Vec<i64> = index
                    .iter()
                    .zip(stride.iter().zip(offset))
                    .map(|(&i, (&s, &o))| {
                        i64::from((o as i32).wrapping_add((i as u32 as i32).wrapping_mul(s as i32)))
                    })
                    .collect();
                layout
                    .place(&per_dim)
                    .into_iter()
                    .map(|x| int(x as i32 as u32))
                    .collect()
            }
            Generator::WangHash(seed) => seed
                .hashes(flat, layout.len())
                .into_iter()
                .map(int)
                .collect(),
            Generator::RandFloat { min, max, seed } => seed
                .hashes(flat, layout.len())
                .into_iter()
                .map(|h| hash_to_float(h, *min, *max))
                .collect(),
        }
    }

    /// A description for messages: `the generator grid(shape=(4,-1))`.
    pub fn describe(&self) -> String {
        match self {
            Generator::Grid { shape, .. } => {
                let dims: Vec<String> = shape
                    .iter()
                    .map(|d| d.map_or_else(|| "-1".to_owned(), |n| n.to_string()))
                    .collect();
                format!("the generator grid(shape=({}))", dims.join(","))
            }
            g => format!("the generator {}", g.name()),
        }
    }
}

/// Checks a grid's lists: as long as its shape, strides set.
pub(crate) fn check_grid(
    shape: &[Option<u64>],
    stride: &[i64],
    offset: &[i64],
) -> Result<(), CallError> {
    let bad = |message: String| CallError::syntax("grid(..)", 0, message);
    if shape.is_empty() {
        return Err(bad("a grid has at least one dim".into()));
    }
    let limit = 1i64 << 30;
    if stride.iter().chain(offset).any(|v| v.abs() >= limit) {
        return Err(bad(
            "a grid's strides and offsets are below 2^30 in size (kernels compute them in 32 bits)"
                .into(),
        ));
    }
    if stride.len() != shape.len() || offset.len() != shape.len() {
        return Err(bad(format!(
            "the grid has {} dims, its stride {} and its offset {}: give one per dim",
            shape.len(),
            stride.len(),
            offset.len()
        )));
    }
    Ok(())
}

/// Reads a generator after its name (the cursor on what follows it):
/// `call_id`, `thread_id`, `grid(shape=(..), stride=(..), offset=(..))`,
/// `wang_hash(seed=.., warmup=.., hash_seed=..)`, `rand_float(min=..,
/// max=.., seed=.., warmup=.., hash_seed=..)`; every option may be left out
/// but a grid's shape.
pub(crate) fn parse(name: &str, c: &mut super::syntax::Cursor<'_>) -> Result<Generator, CallError> {
    let mut options: Vec<(String, Value)> = Vec::new();
    if c.eat('(') && !c.eat(')') {
        loop {
            let key = c.ident("an option name")?;
            c.expect('=')?;
            let value = if c.eat('(') {
                let mut items = Vec::new();
                if !c.eat(')') {
                    loop {
                        items.push(signed(c)?);
                        if c.eat(')') {
                            break;
                        }
                        c.expect(',')?;
                        // Python's one-element tuple, `(4,)`.
                        if c.eat(')') {
                            break;
                        }
                    }
                }
                Value::List(items)
            } else if let Some(super::syntax::Tok::Ident(w)) = c.peek().cloned() {
                c.next();
                match w.as_str() {
                    "true" => Value::Bool(true),
                    "false" => Value::Bool(false),
                    _ => return Err(c.error("expected a number, a list `(..)`, `true` or `false`")),
                }
            } else {
                Value::Number(signed(c)?)
            };
            if options.iter().any(|(k, _)| *k == key) {
                return Err(c.error(format!("option `{key}` is given twice")));
            }
            options.push((key, value));
            if c.eat(')') {
                break;
            }
            c.expect(',')?;
        }
    }
    let mut take = |key: &str| {
        options
            .iter()
            .position(|(k, _)| k == key)
            .map(|i| options.remove(i).1)
    };
    let seed = |take: &mut dyn FnMut(&str) -> Option<Value>| -> Result<HashSeed, CallError> {
        let d = HashSeed::default();
        Ok(HashSeed {
            seed: take("seed").map_or(Ok(d.seed), |v| v.into_u32(c, "seed"))?,
            warmup: match take("warmup").map_or(Ok(d.warmup), |v| v.into_u32(c, "warmup"))? {
                w if w > MAX_WARMUP => {
                    return Err(c.error(format!(
                        "`warmup` is at most {MAX_WARMUP} (each call hashes that many times)"
                    )))
                }
                w => w,
            },
            hash_seed: take("hash_seed")
                .map_or(Ok(d.hash_seed), |v| v.into_bool(c, "hash_seed"))?,
        })
    };
    let g = match name {
        "call_id" => Generator::CallId,
        "thread_id" => Generator::ThreadId,
        "grid" => {
            let shape: Vec<Option<u64>> = take("shape")
                .ok_or_else(|| c.error("a grid needs its `shape=(..)`"))?
                .into_list(c, "shape")?
                .into_iter()
                .map(|n| match n {
                    -1 => Ok(None),
                    n if n >= 1 => Ok(Some(n as u64)),
                    _ => Err(
                        c.error("a grid's sizes are at least 1, or -1 for the size the call gives")
                    ),
                })
                .collect::<Result<_, _>>()?;
            let n = shape.len();
            let stride = take("stride").map_or(Ok(vec![1; n]), |v| v.into_list(c, "stride"))?;
            let offset = take("offset").map_or(Ok(vec![0; n]), |v| v.into_list(c, "offset"))?;
            check_grid(&shape, &stride, &offset)?;
            Generator::Grid {
                shape,
                stride,
                offset,
            }
        }
        "wang_hash" => Generator::WangHash(seed(&mut take)?),
        "rand_float" => {
            let min = take("min").map_or(Ok(0.0), |v| v.into_f32(c, "min"))?;
            let max = take("max").map_or(Ok(1.0), |v| v.into_f32(c, "max"))?;
            if min >= max || !(max - min).is_finite() {
                return Err(c.error(format!(
                    "rand_float needs min < max with a finite max - min in f32, not {min} and {max}"
                )));
            }
            Generator::RandFloat {
                min,
                max,
                seed: seed(&mut take)?,
            }
        }
        _ => return Err(c.error(format!("`{name}` is no generator"))),
    };
    if let Some((k, _)) = options.first() {
        return Err(c.error(format!("{} has no option `{k}`", g.name())));
    }
    Ok(g)
}

/// An option's value as written.
enum Value {
    Number(f64),
    Bool(bool),
    List(Vec<f64>),
}

impl Value {
    fn into_u32(self, c: &super::syntax::Cursor<'_>, key: &str) -> Result<u32, CallError> {
        match self {
            Value::Number(n) if n >= 0.0 && n <= u32::MAX as f64 && n.fract() == 0.0 => {
                Ok(n as u32)
            }
            _ => Err(c.error(format!("`{key}` is a whole number from 0 to 2^32 - 1"))),
        }
    }

    fn into_bool(self, c: &super::syntax::Cursor<'_>, key: &str) -> Result<bool, CallError> {
        match self {
            Value::Bool(b) => Ok(b),
            _ => Err(c.error(format!("`{key}` is `true` or `false`"))),
        }
    }

    fn into_f32(self, c: &super::syntax::Cursor<'_>, key: &str) -> Result<f32, CallError> {
        match self {
            Value::Number(n) if (n as f32).is_finite() => Ok(n as f32),
            _ => Err(c.error(format!("`{key}` is a finite number"))),
        }
    }

    fn into_list(self, c: &super::syntax::Cursor<'_>, key: &str) -> Result<Vec<i64>, CallError> {
        let whole = |n: f64| (n.fract() == 0.0 && n.abs() < 2f64.powi(53)).then_some(n as i64);
        match self {
            Value::List(items) => items
                .into_iter()
                .map(|n| whole(n).ok_or_else(|| c.error(format!("`{key}` lists whole numbers"))))
                .collect(),
            _ => Err(c.error(format!("`{key}` is a list, `(..)`"))),
        }
    }
}

/// A number with an optional `-`.
fn signed(c: &mut super::syntax::Cursor<'_>) -> Result<f64, CallError> {
    let negative = c.eat('-');
    match c.peek().cloned() {
        Some(super::syntax::Tok::Number(text)) => {
            c.next();
            let n: f64 = text
                .parse()
                .map_err(|_| c.error(format!("`{text}` is not a number")))?;
            Ok(if negative { -n } else { n })
        }
        _ => Err(c.error("expected a number")),
    }
}
