//! Differential tests of vectorized calls: a WGSL function run by the
//! wgpu backend, or by the CPU interpreter of WGSL ([`Interpreted`]),
//! against the same function written as a Rust closure and run by the
//! reference executor ([`CallKernel::run_cpu`]).
//!
//! ```
//! use shape_call::{Arg, CallArgs, Function};
//! use shape_tests::calls::{call_data, compare_call};
//!
//! let f = Function::parse("fn twice(x: f32) -> f32 { return 2.0 * x; }").unwrap();
//! let args = CallArgs::new().arg(Arg::tensor(&[5]));
//! let bound = f.bind(&args).unwrap();
//! let kernel = bound.kernel(&bound.call(&args).unwrap()).unwrap();
//! let data = call_data(&kernel, 1);
//! // Without a GPU, compare the reference with itself.
//! let mut twice = |v: &mut [Vec<f32>]| v[1][0] = 2.0 * v[0][0];
//! let reference = {
//!     let mut d = kernel.buffers(data.clone()).unwrap();
//!     kernel.run_cpu(&mut d, &mut twice).unwrap();
//!     d
//! };
//! compare_call(&kernel, &reference, &reference).unwrap();
//! ```

use backend_wgpu::WgpuBackend;
use proptest::prelude::*;
use shape_call::CallKernel;

/// Quarter-integer data for the leaves a call reads (not those it
/// allocates, nor generators), in leaf order: sums and products of a few of them are
/// exact in `f32`, so backends agree bit for bit.
pub fn call_data(kernel: &CallKernel, seed: u64) -> Vec<Vec<f32>> {
    let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    kernel
        .leaves
        .iter()
        .filter(|l| !l.allocated && l.generator.is_none())
        .map(|l| {
            (0..l.len)
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    ((state % 17) as f32 - 8.0) * 0.25
                })
                .collect()
        })
        .collect()
}

/// The first element where two runs' outputs differ: `Err` names the
/// argument, the flat index and both values. Outputs that several call
/// indices write (when the call allowed races) are not compared.
pub fn compare_call(
    kernel: &CallKernel,
    reference: &[Vec<f32>],
    other: &[Vec<f32>],
) -> Result<(), String> {
    let racy = |l: &shape_call::KernelLeaf| {
        kernel.races_allowed
            && kernel
                .call_shape
                .iter()
                .zip(&l.call_strides)
                .any(|(&size, &stride)| size > 1 && stride == 0)
    };
    for (i, l) in kernel.leaves.iter().enumerate() {
        if !l.writes() || racy(l) {
            continue;
        }
        let (a, b) = (&reference[i], &other[i]);
        if a.len() != b.len() {
            return Err(format!(
                "`{}`: {} elements against {}",
                l.path,
                a.len(),
                b.len()
            ));
        }
        // Equal values, or both NaN; WGSL lets a device ignore the sign of
        // zero, so 0 and -0 agree.
        if let Some(k) = (0..a.len()).find(|&k| a[k] != b[k] && !(a[k].is_nan() && b[k].is_nan())) {
            return Err(format!(
                "`{}` (call shape {:?}) differs at element {k}: reference {} against {}",
                l.path, kernel.call_shape, a[k], b[k]
            ));
        }
    }
    Ok(())
}

/// A backend that runs vectorized calls of WGSL functions; the
/// conformance suite's [`crate::conformance::vectorized_calls`] checks
/// one against the reference executor.
pub trait CallRunner {
    /// The backend's name, for messages.
    fn call_runner_name(&self) -> String;
    /// Runs `kernel` on `buffers` (made by [`CallKernel::buffers`]) and
    /// returns them with the outputs written.
    fn run_call(
        &mut self,
        kernel: &CallKernel,
        buffers: Vec<Vec<f32>>,
    ) -> Result<Vec<Vec<f32>>, String>;
}

/// The CPU interpreter of WGSL ([`CallKernel::run_interpreted`]) as a
/// call runner: the conformance suite holds it to the Rust closures as it
/// holds a GPU backend, and it needs no adapter.
#[derive(Clone, Copy, Debug, Default)]
pub struct Interpreted;

impl CallRunner for Interpreted {
    fn call_runner_name(&self) -> String {
        "the WGSL interpreter".into()
    }

    fn run_call(
        &mut self,
        kernel: &CallKernel,
        mut buffers: Vec<Vec<f32>>,
    ) -> Result<Vec<Vec<f32>>, String> {
        kernel
            .run_interpreted(&mut buffers)
            .map_err(|e| e.to_string())?;
        Ok(buffers)
    }
}

impl CallRunner for WgpuBackend {
    fn call_runner_name(&self) -> String {
        shape_core::Backend::name(self)
    }

    fn run_call(
        &mut self,
        kernel: &CallKernel,
        buffers: Vec<Vec<f32>>,
    ) -> Result<Vec<Vec<f32>>, String> {
        self.run_call_on_host(kernel, buffers)
            .map_err(|e| e.to_string())
    }
}

/// Runs `kernel` on the reference executor with `f` and on `runner`, on
/// the same data, and panics with the first difference. A kernel with
/// WGSL (source, or a declaration's body) is also run on the CPU
/// interpreter ([`Interpreted`]), which must agree with `f` too.
pub fn assert_call_agrees(
    runner: &mut dyn CallRunner,
    kernel: &CallKernel,
    data: Vec<Vec<f32>>,
    f: &mut dyn FnMut(&mut [Vec<f32>]),
) {
    let mut reference = kernel.buffers(data).expect("data fits the call");
    let given = reference.clone();
    kernel
        .run_cpu(&mut reference, f)
        .expect("the reference run");
    if kernel.source.is_some() || kernel.body.is_some() {
        let interpreted = Interpreted
            .run_call(kernel, given.clone())
            .unwrap_or_else(|e| panic!("the interpreter could not run `{}`: {e}", kernel.function));
        if let Err(e) = compare_call(kernel, &reference, &interpreted) {
            panic!(
                "the interpreter disagrees with the closure on a call of `{}`: {e}",
                kernel.function
            );
        }
    }
    let name = runner.call_runner_name();
    let found = runner
        .run_call(kernel, given)
        .unwrap_or_else(|e| panic!("{name} could not run a call of `{}`: {e}", kernel.function));
    if let Err(e) = compare_call(kernel, &reference, &found) {
        panic!(
            "{name} disagrees with the reference on a call of `{}`: {e}",
            kernel.function
        );
    }
}

/// The kernel of `f` called with `args`, bound and resolved.
pub fn call_kernel(f: &shape_call::Function, args: &shape_call::CallArgs) -> CallKernel {
    let bound = f.bind(args).unwrap_or_else(|e| panic!("binding: {e}"));
    let resolved = bound.call(args).unwrap_or_else(|e| panic!("calling: {e}"));
    bound
        .kernel(&resolved)
        .unwrap_or_else(|e| panic!("the kernel: {e}"))
}

/// Random shapes that broadcast: a call shape of up to 3 dims with
/// sizes up to 5, and two argument shapes taken from its trailing dims
/// with some sizes replaced by 1.
pub fn broadcast_pairs() -> impl Strategy<Value = (Vec<u64>, Vec<u64>)> {
    prop::collection::vec(1u64..=5, 0..=3).prop_flat_map(|call| {
        let n = call.len();
        (Just(call), 0..=n, 0..=n, any::<u8>(), any::<u8>()).prop_map(|(call, da, db, ma, mb)| {
            let take = |d: usize, mask: u8| -> Vec<u64> {
                call[call.len() - d..]
                    .iter()
                    .enumerate()
                    .map(|(i, &s)| if mask >> i & 1 == 1 { 1 } else { s })
                    .collect()
            };
            (take(da, ma), take(db, mb))
        })
    })
}

// ---------------------------------------------------------------------
// Random calls over the whole grammar of calls.
// ---------------------------------------------------------------------

/// Every production [`random_calls`] labels its draws with: parameter
/// types, directions, return types, argument spellings (generators
/// included), maps, specializations and features of the call shape. A
/// new production is one line here and one `used(..)` in the generator;
/// the coverage test (`tests/tests/call_coverage.rs`) then fails until
/// enough draws that resolve use it.
pub const CALL_PRODUCTIONS: &[&str] = &[
    // Parameter types.
    "type:float",
    "type:int",
    "type:uint",
    "type:float2",
    "type:float3",
    "type:float4",
    "type:int2",
    "type:int3",
    "type:float2x3",
    "type:int[2]",
    "type:float[]",
    "type:StructuredBuffer<float>",
    "type:Slice<2,float>",
    "type:Tensor<float,2>",
    "type:RWTensor<float,1>",
    "type:NDBuffer<float2,1>",
    "type:RWNDBuffer<float,2>",
    "type:T",
    "type:vector<T,N>",
    // Directions (`in` written out; a parameter without one is `in` too).
    "direction:in",
    "direction:out",
    "direction:inout",
    // Return types.
    "return:void",
    "return:scalar",
    "return:vector",
    "return:T",
    // Arguments.
    "arg:tensor",
    "arg:tensor<type>",
    "arg:inttensor",
    "arg:uinttensor",
    "arg:buffer",
    "arg:value",
    "arg:number_int",
    "arg:number_float",
    "arg:ref",
    "arg:output",
    "arg:output<type>(dims)",
    "arg:call_id",
    "arg:thread_id",
    "arg:grid",
    "arg:grid(-1)",
    "arg:grid(stride)",
    "arg:wang_hash",
    "arg:rand_float",
    "arg:positional",
    // The return value.
    "result:allocated",
    "result:given",
    // Maps.
    "map:full",
    "map:short",
    "map:padded",
    "map:type",
    "map:type_quoted",
    // Specializations.
    "spec:size",
    "spec:type",
    "spec:all",
    // The call shape.
    "call:rank0",
    "call:rank3",
    "call:stretch",
];

/// The deliberate ill-fits [`random_calls`] makes (one per draw at most,
/// in about one draw in four), each with the error kind it must give.
pub const CALL_ILL_FITS: &[(&str, &str)] = &[
    ("ill:element_type", "type_mismatch"),
    ("ill:type_shape", "type_shape"),
    ("ill:dimensionality", "dimensionality"),
    ("ill:broadcast", "broadcast_mismatch"),
    ("ill:generator_type", "type_mismatch"),
    ("ill:call_id_count", "type_mismatch"),
    ("ill:unspecialized", "unspecialized"),
    ("ill:ambiguous", "ambiguous_overload"),
    ("ill:race", "race"),
    ("ill:output_dims", "undefinable_dimensions"),
    ("ill:map_too_long", "invalid_map"),
    ("ill:map_unknown", "unknown_parameter"),
    ("ill:map_twice", "duplicate_argument"),
    ("ill:spec_unknown", "invalid_specialization"),
];

/// A random vectorized call, in the text forms of `shapec call`: the
/// signature, each argument, the maps and the specializations, with the
/// productions it used.
#[derive(Clone, Debug, PartialEq)]
pub struct RandomCall {
    /// The Slang-style signature: `float f<T>(float3 a, out T b)`.
    pub signature: String,
    /// `(parameter name, argument text)` in parameter order, `_result`
    /// last when given.
    pub args: Vec<(String, String)>,
    /// How many leading arguments are given positionally (never
    /// `_result`); the rest are given by name.
    pub positional: usize,
    /// `(argument name, map text)`, for [`shape_call::ArgMap::parse`].
    pub maps: Vec<(String, String)>,
    /// Specializations, for [`shape_call::Function::specialized`]:
    /// `N=3`, `f<float,3>`.
    pub specializations: Vec<String>,
    /// The productions ([`CALL_PRODUCTIONS`]) the call uses, each once.
    pub productions: Vec<&'static str>,
    /// The deliberate ill-fit ([`CALL_ILL_FITS`]), if the call has one.
    pub ill_fit: Option<&'static str>,
    /// The call shape the generator built the arguments around, for a
    /// call without an ill-fit.
    pub call_shape: Vec<u64>,
}

impl RandomCall {
    /// The function: the signature with the maps and specializations.
    pub fn function(&self) -> Result<shape_call::Function, shape_call::CallError> {
        let mut f = shape_call::Function::parse(&self.signature)?;
        for (name, text) in &self.maps {
            f = f.map(name, shape_call::ArgMap::parse(text)?);
        }
        for s in &self.specializations {
            f = f.specialized(s)?;
        }
        Ok(f)
    }

    /// The arguments, read in `f`'s scope, with the arguments by name in
    /// the order `order` gives (indices into the named arguments; `None`
    /// keeps theirs).
    pub fn call_args_ordered(
        &self,
        f: &shape_call::Function,
        order: Option<&[usize]>,
    ) -> Result<shape_call::CallArgs, shape_call::CallError> {
        let scope = f.scope();
        let mut args = shape_call::CallArgs::new();
        for (_, text) in &self.args[..self.positional] {
            args = args.arg(shape_call::Arg::parse(text, &scope)?);
        }
        let named = &self.args[self.positional..];
        let identity: Vec<usize> = (0..named.len()).collect();
        for &i in order.unwrap_or(&identity) {
            let (name, text) = &named[i];
            args = args.named(name, shape_call::Arg::parse(text, &scope)?);
        }
        Ok(args)
    }

    /// The arguments, read in `f`'s scope.
    pub fn call_args(
        &self,
        f: &shape_call::Function,
    ) -> Result<shape_call::CallArgs, shape_call::CallError> {
        self.call_args_ordered(f, None)
    }

    /// The call resolved ([`shape_call::Function::resolve`]), or the
    /// first error reading or resolving it.
    pub fn resolve(&self) -> Result<shape_call::Resolution, shape_call::CallError> {
        let f = self.function()?;
        let args = self.call_args(&f)?;
        f.resolve(&args)
    }

    /// The error kind the call's ill-fit must give, if it has one.
    pub fn expected_error(&self) -> Option<&'static str> {
        let ill = self.ill_fit?;
        CALL_ILL_FITS
            .iter()
            .find(|(label, _)| *label == ill)
            .map(|(_, kind)| *kind)
    }
}

impl std::fmt::Display for RandomCall {
    /// The call as a `shapec call` command line.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "shapec call '{}'", self.signature)?;
        for (k, (name, text)) in self.args.iter().enumerate() {
            if k < self.positional {
                write!(f, " '{text}'")?;
            } else {
                write!(f, " {name}='{text}'")?;
            }
        }
        for (name, text) in &self.maps {
            write!(f, " --map '{name}={text}'")?;
        }
        for s in &self.specializations {
            write!(f, " --specialize '{s}'")?;
        }
        Ok(())
    }
}

/// Random calls over the whole grammar of calls: every parameter type
/// (scalars, vectors, matrices, fixed and runtime arrays, structured
/// buffers, slices, slangpy's tensor types, a bare generic `T` and
/// `vector<T,N>`), direction, argument spelling (tensors, buffers,
/// values, numbers, references, outputs and the five generators), map
/// (full, short, by type) and specialization. The arguments are built
/// around a call shape the generator draws, so most calls resolve; about
/// one in four has one deliberate ill-fit ([`RandomCall::ill_fit`]).
/// Shrinking moves each choice towards the simplest option.
///
/// ```
/// use proptest::strategy::{Strategy, ValueTree};
/// use proptest::test_runner::TestRunner;
/// use shape_tests::calls::random_calls;
/// let mut runner = TestRunner::deterministic();
/// let call = random_calls().new_tree(&mut runner).unwrap().current();
/// if call.ill_fit.is_none() {
///     assert_eq!(call.resolve().unwrap().call_shape, call.call_shape, "{call}");
/// }
/// ```
pub fn random_calls() -> impl Strategy<Value = RandomCall> {
    prop::collection::vec(any::<u32>(), 160).prop_map(generate_call)
}

/// Generates a call from a stream of choices (0 is always the simplest
/// option).
pub fn generate_call(choices: Vec<u32>) -> RandomCall {
    CallGen::new(choices).run()
}

// A stream of choices: the program generator's (0 is always the
// simplest option, so shrinking simplifies the call).
use crate::grammar::Choices as CallChoices;

/// A scalar type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sc {
    Float,
    Int,
    Uint,
}

impl Sc {
    fn name(self) -> &'static str {
        match self {
            Sc::Float => "float",
            Sc::Int => "int",
            Sc::Uint => "uint",
        }
    }
    /// The plain tensor of this scalar, and its production.
    fn tensor(self) -> (&'static str, &'static str) {
        match self {
            Sc::Float => ("tensor", "arg:tensor"),
            Sc::Int => ("inttensor", "arg:inttensor"),
            Sc::Uint => ("uinttensor", "arg:uinttensor"),
        }
    }
}

/// A concrete parameter type of the catalogue.
struct CatalogueType {
    /// As written in a signature.
    text: &'static str,
    label: &'static str,
    scalar: Sc,
    /// Its type shape; 0 is a size of any value (`?`).
    dims: &'static [u64],
    /// A typed tensor's element (`tensor<float3>`), and how many of the
    /// trailing dims it covers.
    elem: Option<(&'static str, usize)>,
    /// Whether a value (and a buffer of elements) of it can be given.
    value: bool,
    /// Whether it may be `out` or `inout`.
    directions: bool,
    /// Whether `buffer(n, float)` gives all of it (a runtime array).
    whole_buffer: bool,
}

/// A catalogue entry; a type with a size of any value (`?`) takes no
/// value and no direction.
const fn ty(
    text: &'static str,
    label: &'static str,
    scalar: Sc,
    dims: &'static [u64],
    elem: Option<(&'static str, usize)>,
) -> CatalogueType {
    let fixed = {
        let mut ok = true;
        let mut i = 0;
        while i < dims.len() {
            if dims[i] == 0 {
                ok = false;
            }
            i += 1;
        }
        ok
    };
    CatalogueType {
        text,
        label,
        scalar,
        dims,
        elem,
        value: fixed,
        directions: fixed,
        whole_buffer: false,
    }
}

const CATALOGUE: &[CatalogueType] = &[
    ty("float", "type:float", Sc::Float, &[], None),
    ty("int", "type:int", Sc::Int, &[], None),
    ty("uint", "type:uint", Sc::Uint, &[], None),
    ty(
        "float2",
        "type:float2",
        Sc::Float,
        &[2],
        Some(("float2", 1)),
    ),
    ty(
        "float3",
        "type:float3",
        Sc::Float,
        &[3],
        Some(("float3", 1)),
    ),
    ty(
        "float4",
        "type:float4",
        Sc::Float,
        &[4],
        Some(("float4", 1)),
    ),
    ty("int2", "type:int2", Sc::Int, &[2], Some(("int2", 1))),
    ty("int3", "type:int3", Sc::Int, &[3], Some(("int3", 1))),
    ty(
        "float2x3",
        "type:float2x3",
        Sc::Float,
        &[2, 3],
        Some(("float2x3", 2)),
    ),
    ty("int[2]", "type:int[2]", Sc::Int, &[2], None),
    CatalogueType {
        whole_buffer: true,
        ..ty("float[]", "type:float[]", Sc::Float, &[0], None)
    },
    CatalogueType {
        whole_buffer: true,
        ..ty(
            "StructuredBuffer<float>",
            "type:StructuredBuffer<float>",
            Sc::Float,
            &[0],
            None,
        )
    },
    ty(
        "Slice<2,float>",
        "type:Slice<2,float>",
        Sc::Float,
        &[0, 0],
        None,
    ),
    ty(
        "Tensor<float,2>",
        "type:Tensor<float,2>",
        Sc::Float,
        &[0, 0],
        None,
    ),
    ty(
        "RWTensor<float,1>",
        "type:RWTensor<float,1>",
        Sc::Float,
        &[0],
        None,
    ),
    ty(
        "NDBuffer<float2,1>",
        "type:NDBuffer<float2,1>",
        Sc::Float,
        &[0, 2],
        Some(("float2", 1)),
    ),
    ty(
        "RWNDBuffer<float,2>",
        "type:RWNDBuffer<float,2>",
        Sc::Float,
        &[0, 0],
        None,
    ),
];

/// What a parameter is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `CATALOGUE[i]`.
    Concrete(usize),
    /// A bare `T`.
    Generic,
    /// `vector<T,N>`.
    GenericVector,
}

/// A parameter's direction as written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    Plain,
    In,
    Out,
    InOut,
}

impl Dir {
    fn writes(self) -> bool {
        matches!(self, Dir::Out | Dir::InOut)
    }
}

/// A parameter's type once the generics are bound: what its arguments
/// must fit.
#[derive(Clone, Debug)]
struct Effective {
    /// As the resolution spells it: `float3`, `int[2]`, `Slice<2,float>`.
    text: String,
    scalar: Sc,
    /// 0 is a size of any value.
    dims: Vec<u64>,
    elem: Option<(String, usize)>,
    value: bool,
    whole_buffer: bool,
    /// A bare `T`: a tensor binds it by its element type only, so a
    /// tensor for it is typed when `T` is a vector.
    generic: bool,
}

/// A drawn argument.
#[derive(Clone, Debug)]
enum ArgDraw {
    /// `form(shape)`: `tensor`, `inttensor`, `tensor<float3>`; `place`
    /// gives each dim's position in the call (`None` for a type dim).
    Tensor {
        form: String,
        shape: Vec<u64>,
        place: Vec<Option<usize>>,
    },
    /// `buffer(n, elem)`, its one dim at `place` (or a type dim).
    Buffer {
        n: u64,
        elem: String,
        place: Option<usize>,
    },
    /// A grid generator: each dim's size (`None`: -1) at its position.
    Grid {
        sizes: Vec<Option<u64>>,
        stride: Option<Vec<i64>>,
        offset: Option<Vec<i64>>,
        place: Vec<usize>,
    },
    /// Anything without dims of its own: a value, a number, a reference,
    /// an output or a generator.
    Text(String),
}

impl ArgDraw {
    fn text(&self) -> String {
        let list = |v: &[String]| v.join(",");
        match self {
            ArgDraw::Tensor { form, shape, .. } => format!(
                "{form}({})",
                list(&shape.iter().map(u64::to_string).collect::<Vec<_>>())
            ),
            ArgDraw::Buffer { n, elem, .. } => format!("buffer({n}, {elem})"),
            ArgDraw::Grid {
                sizes,
                stride,
                offset,
                ..
            } => {
                // The grammar's `ints` has no trailing comma: `(4)`.
                let tuple = |v: Vec<String>| format!("({})", list(&v));
                let mut t = format!(
                    "grid(shape={}",
                    tuple(
                        sizes
                            .iter()
                            .map(|s| s.map_or_else(|| "-1".to_owned(), |n| n.to_string()))
                            .collect()
                    )
                );
                if let Some(s) = stride {
                    t += &format!(", stride={}", tuple(s.iter().map(i64::to_string).collect()));
                }
                if let Some(o) = offset {
                    t += &format!(", offset={}", tuple(o.iter().map(i64::to_string).collect()));
                }
                t + ")"
            }
            ArgDraw::Text(t) => t.clone(),
        }
    }

    /// `(call position, size)` of each call dim the argument gives.
    fn placements(&self) -> Vec<(usize, u64)> {
        match self {
            ArgDraw::Tensor { shape, place, .. } => shape
                .iter()
                .zip(place)
                .filter_map(|(&s, p)| p.map(|p| (p, s)))
                .collect(),
            ArgDraw::Buffer { n, place, .. } => place.map(|p| (p, *n)).into_iter().collect(),
            ArgDraw::Grid { sizes, place, .. } => sizes
                .iter()
                .zip(place)
                .map(|(s, &p)| (p, s.unwrap_or(1)))
                .collect(),
            ArgDraw::Text(_) => Vec::new(),
        }
    }
}

/// A drawn parameter and its argument.
#[derive(Clone, Debug)]
struct DrawnParam {
    name: &'static str,
    kind: Kind,
    dir: Dir,
    eff: Effective,
    arg: Option<ArgDraw>,
    map: Option<String>,
    /// A generator's name, when the argument is one.
    generator: Option<&'static str>,
    /// Whether the argument binds `T` on its own (a bare `T` only).
    binds: bool,
    anchor: bool,
}

/// The generator's state.
struct CallGen {
    c: CallChoices,
    used: Vec<&'static str>,
    /// The call shape the arguments are drawn around.
    call: Vec<u64>,
    params: Vec<DrawnParam>,
    /// What a bare `T` binds to, and its scalar.
    t_bind: Option<(String, Sc, Vec<u64>)>,
    /// `N` of `vector<T,N>`, when the signature has it.
    n: Option<u64>,
    ret: Option<(String, Kind)>,
    result_arg: Option<ArgDraw>,
    specs: Vec<String>,
    extra_maps: Vec<(String, String)>,
    ill: Option<&'static str>,
}

/// Parameter names: at most 3 concrete parameters, 2 bare `T` and 2
/// `vector<T,N>`.
const NAMES: [&str; 7] = ["a", "b", "c", "d", "e", "g", "h"];

impl CallGen {
    fn new(choices: Vec<u32>) -> CallGen {
        CallGen {
            c: CallChoices {
                data: choices,
                pos: 0,
            },
            used: Vec::new(),
            call: Vec::new(),
            params: Vec::new(),
            t_bind: None,
            n: None,
            ret: None,
            result_arg: None,
            specs: Vec::new(),
            extra_maps: Vec::new(),
            ill: None,
        }
    }

    fn used(&mut self, label: &'static str) {
        debug_assert!(CALL_PRODUCTIONS.contains(&label), "{label}");
        if !self.used.contains(&label) {
            self.used.push(label);
        }
    }

    /// A size for a dim of any size.
    fn free_size(&mut self) -> u64 {
        1 + self.c.below(3) as u64
    }

    fn run(mut self) -> RandomCall {
        // The call shape: rank 1 and 2 most often.
        let rank = [1, 2, 1, 2, 3, 0, 2, 3][self.c.below(8)];
        self.call = (0..rank)
            .map(|_| [2, 3, 4, 1, 2, 3][self.c.below(6)])
            .collect();
        self.draw_signature();
        self.draw_in_arguments();
        let shape = self.call_shape();
        self.draw_out_arguments(&shape);
        self.draw_result(&shape);
        self.draw_specializations();
        if self.c.chance(25) {
            self.ill_fit(&shape);
        }
        self.finish(shape)
    }

    fn draw_signature(&mut self) {
        let has_t = self.c.chance(35);
        let has_vec = self.c.chance(25);
        let s = if self.c.chance(70) {
            Sc::Float
        } else {
            Sc::Int
        };
        if has_vec {
            self.n = Some(2 + self.c.below(3) as u64);
        }
        if has_t || has_vec {
            let (text, dims) = match self.c.below(if has_vec { 1 } else { 4 }) {
                0 => (s.name().to_owned(), vec![]),
                1 => ("float2".to_owned(), vec![2]),
                2 => ("float3".to_owned(), vec![3]),
                _ => ("int".to_owned(), vec![]),
            };
            let sc = if text == "int" {
                Sc::Int
            } else if text.starts_with("float") {
                Sc::Float
            } else {
                s
            };
            self.t_bind = Some((text, sc, dims));
        }
        let mut kinds: Vec<Kind> = (0..self.c.below(4))
            .map(|_| Kind::Concrete(self.c.below(CATALOGUE.len())))
            .collect();
        if kinds.is_empty() && !has_t && !has_vec {
            kinds.push(Kind::Concrete(self.c.below(CATALOGUE.len())));
        }
        if has_t {
            let at = self.c.below(kinds.len() + 1);
            kinds.insert(at, Kind::Generic);
            if self.c.chance(30) {
                let at = self.c.below(kinds.len() + 1);
                kinds.insert(at, Kind::Generic);
            }
        }
        if has_vec {
            let at = self.c.below(kinds.len() + 1);
            kinds.insert(at, Kind::GenericVector);
            if self.c.chance(25) {
                let at = self.c.below(kinds.len() + 1);
                kinds.insert(at, Kind::GenericVector);
            }
        }
        let mut first_t = true;
        for (i, kind) in kinds.into_iter().enumerate() {
            let eff = self.effective(kind);
            let may_write = match kind {
                Kind::Concrete(k) => CATALOGUE[k].directions,
                // The first bare `T` is read, so that it binds `T`.
                Kind::Generic => !std::mem::replace(&mut first_t, false),
                Kind::GenericVector => false,
            };
            let dir = match self.c.below(20) {
                0..=2 if may_write => Dir::Out,
                3 | 4 if may_write => Dir::InOut,
                5 | 6 => Dir::In,
                _ => Dir::Plain,
            };
            self.params.push(DrawnParam {
                name: NAMES[i],
                kind,
                dir,
                eff,
                arg: None,
                map: None,
                generator: None,
                binds: false,
                anchor: false,
            });
        }
        // At least one parameter is read, and one read parameter spans the
        // whole call shape.
        if !self.call.is_empty() {
            let readers: Vec<usize> = (0..self.params.len())
                .filter(|&i| !self.params[i].dir.writes())
                .collect();
            let anchor = if readers.is_empty() {
                self.params[0].dir = Dir::Plain;
                0
            } else {
                readers[self.c.below(readers.len())]
            };
            self.params[anchor].anchor = true;
        }
        self.ret = match self.c.below(10) {
            0..=2 => None,
            3..=5 => Some(("float".into(), Kind::Concrete(0))),
            6 => Some(("int".into(), Kind::Concrete(1))),
            7 => Some(("float3".into(), Kind::Concrete(4))),
            _ if self.t_bind.is_some() => Some(("T".into(), Kind::Generic)),
            _ => Some(("float".into(), Kind::Concrete(0))),
        };
        match &self.ret {
            None => self.used("return:void"),
            Some((t, _)) if t == "T" => self.used("return:T"),
            Some((t, _)) if t == "float3" => self.used("return:vector"),
            Some(_) => self.used("return:scalar"),
        }
        for p in self.params.clone() {
            match p.kind {
                Kind::Concrete(k) => self.used(CATALOGUE[k].label),
                Kind::Generic => self.used("type:T"),
                Kind::GenericVector => self.used("type:vector<T,N>"),
            }
            match p.dir {
                Dir::Plain => {}
                Dir::In => self.used("direction:in"),
                Dir::Out => self.used("direction:out"),
                Dir::InOut => self.used("direction:inout"),
            }
        }
        match self.call.len() {
            0 => self.used("call:rank0"),
            3 => self.used("call:rank3"),
            _ => {}
        }
    }

    /// What a parameter of `kind` must take.
    fn effective(&self, kind: Kind) -> Effective {
        match kind {
            Kind::Concrete(k) => {
                let t = &CATALOGUE[k];
                Effective {
                    text: t.text.to_owned(),
                    scalar: t.scalar,
                    dims: t.dims.to_vec(),
                    elem: t.elem.map(|(e, n)| (e.to_owned(), n)),
                    value: t.value,
                    whole_buffer: t.whole_buffer,
                    generic: false,
                }
            }
            Kind::Generic => {
                let (text, sc, dims) = self.t_bind.clone().expect("T is bound");
                Effective {
                    elem: (!dims.is_empty()).then(|| (text.clone(), 1)),
                    text,
                    scalar: sc,
                    dims,
                    value: true,
                    whole_buffer: false,
                    generic: true,
                }
            }
            Kind::GenericVector => {
                let (_, sc, _) = self.t_bind.clone().expect("T is bound");
                let n = self.n.expect("N is declared");
                let text = format!("{}{n}", sc.name());
                Effective {
                    elem: Some((text.clone(), 1)),
                    text,
                    scalar: sc,
                    dims: vec![n],
                    value: true,
                    whole_buffer: false,
                    generic: false,
                }
            }
        }
    }

    /// The call positions of an argument of `k` dims, right-aligned.
    fn right_aligned(&self, k: usize) -> Vec<usize> {
        (self.call.len() - k..self.call.len()).collect()
    }

    /// The size at call position `p`: the call's, or 1 (stretched) with
    /// `pct` percent.
    fn size_at(&mut self, p: usize, pct: usize) -> u64 {
        if self.c.chance(pct) {
            1
        } else {
            self.call[p]
        }
    }

    /// Type dims' sizes, `?` drawn.
    fn type_sizes(&mut self, dims: &[u64]) -> Vec<u64> {
        dims.iter()
            .map(|&d| if d == 0 { self.free_size() } else { d })
            .collect()
    }

    /// A tensor for `eff` at positions `place`, plain or typed.
    fn tensor_at(
        &mut self,
        eff: &Effective,
        place: &[usize],
        typed: bool,
        stretch: usize,
    ) -> ArgDraw {
        let mut shape: Vec<u64> = place.iter().map(|&p| self.size_at(p, stretch)).collect();
        let mut places: Vec<Option<usize>> = place.iter().map(|&p| Some(p)).collect();
        let sizes = self.type_sizes(&eff.dims);
        let form = match (&eff.elem, typed) {
            (Some((elem, covered)), true) => {
                self.used("arg:tensor<type>");
                let keep = sizes.len() - covered;
                shape.extend(&sizes[..keep]);
                places.extend((0..keep).map(|_| None));
                format!("tensor<{elem}>")
            }
            _ => {
                let (form, label) = eff.scalar.tensor();
                self.used(label);
                shape.extend(&sizes);
                places.extend(sizes.iter().map(|_| None));
                form.to_owned()
            }
        };
        ArgDraw::Tensor {
            form,
            shape,
            place: places,
        }
    }

    /// A plain tensor for `eff` with a map by dims: its call dims at
    /// distinct positions in any order, its type dims after them.
    fn mapped_tensor(&mut self, eff: &Effective, k: usize) -> (ArgDraw, String) {
        let rank = self.call.len();
        let mut free: Vec<usize> = (0..rank).collect();
        let mut positions = Vec::new();
        for _ in 0..k {
            positions.push(free.remove(self.c.below(free.len())));
        }
        let m = positions.iter().max().map_or(0, |&p| p + 1);
        if m > k {
            self.used("map:padded");
        }
        // Roles: (target position, size, call position).
        let mut roles: Vec<(usize, u64, Option<usize>)> = Vec::new();
        for &p in &positions {
            let s = self.size_at(p, 20);
            roles.push((p, s, Some(p)));
        }
        let sizes = self.type_sizes(&eff.dims);
        for (j, &s) in sizes.iter().enumerate() {
            roles.push((m + j, s, None));
        }
        let short = !sizes.is_empty() && self.c.chance(50);
        let entries: Vec<usize>;
        if short {
            self.used("map:short");
            entries = positions.clone();
        } else {
            self.used("map:full");
            // Any order of the dims, type dims included.
            let mut order: Vec<usize> = (0..roles.len()).collect();
            for i in (1..order.len()).rev() {
                order.swap(i, self.c.below(i + 1));
            }
            roles = order.iter().map(|&i| roles[i]).collect();
            entries = roles.iter().map(|r| r.0).collect();
        }
        let (form, label) = eff.scalar.tensor();
        self.used(label);
        let text = if entries.len() == 1 {
            format!("({},)", entries[0])
        } else {
            format!(
                "({})",
                entries
                    .iter()
                    .map(usize::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            )
        };
        (
            ArgDraw::Tensor {
                form: form.to_owned(),
                shape: roles.iter().map(|r| r.1).collect(),
                place: roles.iter().map(|r| r.2).collect(),
            },
            text,
        )
    }

    /// A map by type, quoted or not.
    fn type_map(&mut self, text: &str) -> String {
        self.used("map:type");
        if self.c.chance(30) {
            self.used("map:type_quoted");
            format!("'{text}'")
        } else {
            text.to_owned()
        }
    }

    /// A generator for a read parameter of a concrete type `eff`, if one
    /// fits and is drawn.
    fn generator(&mut self, eff: &Effective) -> Option<(ArgDraw, &'static str)> {
        let rank = self.call.len();
        let count = match eff.text.as_str() {
            "int" | "uint" => 1,
            "int2" | "int[2]" => 2,
            "int3" => 3,
            "float" | "float2" | "float3" => {
                return self.c.chance(30).then(|| {
                    self.used("arg:rand_float");
                    let text = match self.c.below(3) {
                        0 => "rand_float".to_owned(),
                        1 => "rand_float(min=-1.0, max=2.5)".to_owned(),
                        _ => format!("rand_float(min=0.5, max=1.5, seed={})", self.c.below(100)),
                    };
                    (ArgDraw::Text(text), "rand_float")
                });
            }
            _ => return None,
        };
        let array = eff.text == "int[2]";
        let mut options: Vec<&'static str> = Vec::new();
        if count == rank {
            options.extend(["call_id", "call_id", "call_id"]);
        }
        if count <= rank {
            options.extend(["grid", "grid"]);
        }
        if !array {
            options.extend(["thread_id", "wang_hash"]);
        }
        if options.is_empty() || !self.c.chance(60) {
            return None;
        }
        let g = *self.c.pick(&options);
        let draw = match g {
            "call_id" => {
                self.used("arg:call_id");
                ArgDraw::Text("call_id".into())
            }
            "thread_id" => {
                self.used("arg:thread_id");
                ArgDraw::Text("thread_id".into())
            }
            "wang_hash" => {
                self.used("arg:wang_hash");
                ArgDraw::Text(match self.c.below(3) {
                    0 => "wang_hash".into(),
                    1 => format!("wang_hash(seed={})", self.c.below(1000)),
                    _ => format!(
                        "wang_hash(seed={}, warmup=2, hash_seed=false)",
                        self.c.below(1000)
                    ),
                })
            }
            _ => {
                self.used("arg:grid");
                let place = self.right_aligned(count);
                let mut sizes = Vec::new();
                for &p in &place {
                    sizes.push(if self.c.chance(40) {
                        self.used("arg:grid(-1)");
                        None
                    } else {
                        Some(self.size_at(p, 10))
                    });
                }
                let stride = self.c.chance(50).then(|| {
                    self.used("arg:grid(stride)");
                    (0..count).map(|_| 1 + self.c.below(3) as i64).collect()
                });
                let offset = self
                    .c
                    .chance(30)
                    .then(|| (0..count).map(|_| self.c.below(5) as i64 - 2).collect());
                ArgDraw::Grid {
                    sizes,
                    stride,
                    offset,
                    place,
                }
            }
        };
        Some((draw, g))
    }

    fn draw_in_arguments(&mut self) {
        let rank = self.call.len();
        let mut t_bound = false;
        for i in 0..self.params.len() {
            let p = self.params[i].clone();
            if p.dir.writes() {
                continue;
            }
            let eff = p.eff.clone();
            let vector_t = p.kind == Kind::Generic && !eff.dims.is_empty();
            // The number of call dims of a tensor argument.
            let k = if p.anchor {
                rank
            } else {
                self.c.below(rank + 1)
            };
            let stretch = if p.anchor { 10 } else { 25 };
            let concrete = matches!(p.kind, Kind::Concrete(_));
            if concrete && !p.anchor {
                if let Some((draw, g)) = self.generator(&eff) {
                    self.params[i].arg = Some(draw);
                    self.params[i].generator = Some(g);
                    continue;
                }
            }
            let mut map = None;
            let mut binds = p.kind == Kind::Generic;
            let draw = match self.c.below(10) {
                // A map by dims on a plain tensor.
                0 | 1 if rank > 0 && !vector_t && (p.anchor || k > 0) => {
                    let (d, m) = self.mapped_tensor(&eff, if p.anchor { rank } else { k });
                    map = Some(m);
                    d
                }
                // A map by type on a plain tensor (or, for a bare `T` of a
                // vector, on a value).
                2 if p.kind != Kind::GenericVector => {
                    let d = if vector_t && !p.anchor && self.c.chance(40) {
                        self.used("arg:value");
                        ArgDraw::Text(eff.text.clone())
                    } else {
                        let place = self.right_aligned(k);
                        self.tensor_at(&eff, &place, false, stretch)
                    };
                    map = Some(self.type_map(&eff.text));
                    d
                }
                // A value or a number, which has no call dims.
                3 | 4 | 6 if !p.anchor && eff.value && (!vector_t || t_bound) => {
                    if vector_t {
                        binds = false;
                    }
                    self.value_or_number(&eff, p.kind)
                }
                // Scalars take numbers more often.
                7 if !p.anchor && eff.dims.is_empty() => {
                    if vector_t {
                        binds = false;
                    }
                    self.value_or_number(&eff, p.kind)
                }
                // A buffer of elements.
                5 if !p.anchor && eff.value && k > 0 && concrete => {
                    self.used("arg:buffer");
                    let place = rank - 1;
                    let n = self.size_at(place, 20);
                    ArgDraw::Buffer {
                        n,
                        elem: eff.text.clone(),
                        place: Some(place),
                    }
                }
                5 if !p.anchor && eff.whole_buffer => {
                    self.used("arg:buffer");
                    ArgDraw::Buffer {
                        n: self.free_size(),
                        elem: "float".into(),
                        place: None,
                    }
                }
                // A tensor, typed where the type has an element.
                _ => {
                    let place = self.right_aligned(k);
                    let typed = vector_t || (eff.elem.is_some() && self.c.chance(40));
                    self.tensor_at(&eff, &place, typed, stretch)
                }
            };
            if binds {
                t_bound = true;
            }
            self.params[i].arg = Some(draw);
            self.params[i].map = map;
            self.params[i].binds = binds;
        }
    }

    /// A value of `eff`'s type, or a number for a scalar.
    fn value_or_number(&mut self, eff: &Effective, kind: Kind) -> ArgDraw {
        let scalar = eff.dims.is_empty();
        let choice = if scalar { self.c.below(4) } else { 0 };
        // An integer literal binds any numeric scalar, but a bare `T` as
        // `int`; a float literal binds `float` only.
        let int_ok = kind != Kind::Generic || eff.scalar == Sc::Int;
        match choice {
            1 if int_ok => {
                self.used("arg:number_int");
                ArgDraw::Text("2".into())
            }
            1..=3 if eff.scalar == Sc::Float => {
                self.used("arg:number_float");
                ArgDraw::Text("2.0".into())
            }
            2 | 3 if int_ok => {
                self.used("arg:number_int");
                ArgDraw::Text("2".into())
            }
            _ => {
                self.used("arg:value");
                ArgDraw::Text(eff.text.clone())
            }
        }
    }

    /// The call shape the arguments give: NumPy's broadcasting of their
    /// call dims, each at its position.
    fn call_shape(&self) -> Vec<u64> {
        let mut shape = vec![1; self.call.len()];
        for p in &self.params {
            if let Some(a) = &p.arg {
                for (pos, s) in a.placements() {
                    shape[pos] = shape[pos].max(s);
                }
            }
        }
        shape
    }

    /// How many of the call's dims an output must span, the leading
    /// ones of size 1 being optional.
    fn output_dims(&mut self, shape: &[u64]) -> usize {
        let ones = shape.iter().take_while(|&&s| s == 1).count();
        shape.len() - self.c.below(ones + 1)
    }

    /// An argument for an output of `eff` over `shape`.
    fn output_arg(&mut self, eff: &Effective, shape: &[u64]) -> ArgDraw {
        let single = shape.iter().all(|&s| s == 1);
        if single && eff.dims.is_empty() && self.c.chance(40) {
            self.used("arg:ref");
            return ArgDraw::Text(match eff.scalar {
                Sc::Float => "ref".into(),
                s => format!("ref<{}>", s.name()),
            });
        }
        match self.c.below(8) {
            0..=2 => {
                self.used("arg:output");
                ArgDraw::Text("output".into())
            }
            3 | 4 => {
                self.used("arg:output<type>(dims)");
                let d = self.output_dims(shape);
                ArgDraw::Text(format!("output<{}>(dims={d})", eff.text))
            }
            _ => {
                let place: Vec<usize> = (0..shape.len()).collect();
                let saved = self.call.clone();
                self.call = shape.to_vec();
                let typed = eff.elem.is_some() && (eff.generic || self.c.chance(40));
                let d = self.tensor_at(eff, &place, typed, 0);
                self.call = saved;
                d
            }
        }
    }

    fn draw_out_arguments(&mut self, shape: &[u64]) {
        for i in 0..self.params.len() {
            if self.params[i].dir.writes() {
                let eff = self.params[i].eff.clone();
                let a = self.output_arg(&eff, shape);
                self.params[i].arg = Some(a);
            }
        }
        // Whether an argument stretches a dim of 1 along the call.
        let stretches = self.params.iter().any(|p| {
            p.arg.as_ref().is_some_and(|a| {
                a.placements()
                    .iter()
                    .any(|&(pos, s)| s == 1 && shape[pos] > 1)
            })
        });
        if stretches {
            self.used("call:stretch");
        }
    }

    fn draw_result(&mut self, shape: &[u64]) {
        let Some((_, kind)) = self.ret.clone() else {
            return;
        };
        if self.c.chance(35) {
            self.used("result:given");
            let eff = self.effective(kind);
            self.result_arg = Some(self.output_arg(&eff, shape));
        } else {
            self.used("result:allocated");
        }
    }

    fn draw_specializations(&mut self) {
        let Some((t_text, sc, _)) = self.t_bind.clone() else {
            return;
        };
        if let Some(n) = self.n {
            // Whether an argument fixes N: a typed tensor or a value.
            let fixed = self.params.iter().any(|p| {
                p.kind == Kind::GenericVector
                    && match &p.arg {
                        Some(ArgDraw::Tensor { form, .. }) => form.contains('<'),
                        Some(ArgDraw::Text(_)) => true,
                        _ => false,
                    }
            });
            if !fixed || self.c.chance(20) {
                if self.c.chance(50) {
                    self.used("spec:size");
                    self.specs.push(format!("N={n}"));
                } else {
                    self.used("spec:all");
                    self.specs.push(format!("f<{}, {n}>", sc.name()));
                }
            }
        } else if self.c.chance(20) {
            if self.c.chance(50) {
                self.used("spec:type");
                self.specs.push(format!("T={t_text}"));
            } else {
                self.used("spec:all");
                self.specs.push(format!("f<{t_text}>"));
            }
        }
    }

    /// Makes one deliberate ill-fit, of those that apply.
    fn ill_fit(&mut self, shape: &[u64]) {
        let mut labels: Vec<&'static str> = CALL_ILL_FITS.iter().map(|(l, _)| *l).collect();
        for i in (1..labels.len()).rev() {
            labels.swap(i, self.c.below(i + 1));
        }
        for label in labels {
            if self.try_ill_fit(label, shape) {
                self.ill = Some(label);
                return;
            }
        }
    }

    /// Indices of read parameters of a concrete type whose argument is an
    /// unmapped plain tensor, and that pass `keep`.
    fn plain_tensors(&self, keep: impl Fn(&DrawnParam) -> bool) -> Vec<usize> {
        (0..self.params.len())
            .filter(|&i| {
                let p = &self.params[i];
                !p.dir.writes()
                    && matches!(p.kind, Kind::Concrete(_))
                    && p.map.is_none()
                    && matches!(&p.arg, Some(ArgDraw::Tensor { form, .. }) if !form.contains('<'))
                    && keep(p)
            })
            .collect()
    }

    fn try_ill_fit(&mut self, label: &'static str, shape: &[u64]) -> bool {
        let pick = |g: &mut CallGen, v: &[usize]| -> Option<usize> {
            (!v.is_empty()).then(|| v[g.c.below(v.len())])
        };
        match label {
            "ill:element_type" => {
                let v = self.plain_tensors(|_| true);
                let Some(i) = pick(self, &v) else {
                    return false;
                };
                let other = if self.params[i].eff.scalar == Sc::Float {
                    "inttensor"
                } else {
                    "tensor"
                };
                if let Some(ArgDraw::Tensor { form, .. }) = &mut self.params[i].arg {
                    *form = other.into();
                }
            }
            "ill:type_shape" | "ill:dimensionality" | "ill:map_too_long" => {
                let candidates = self.plain_tensors(|p| match label {
                    // A fixed trailing size to get wrong.
                    "ill:type_shape" => p.eff.dims.last().is_some_and(|&d| d != 0),
                    // A type dim to leave out.
                    "ill:dimensionality" => !p.eff.dims.is_empty(),
                    _ => true,
                });
                let Some(i) = pick(self, &candidates) else {
                    return false;
                };
                let type_dims = self.params[i].eff.dims.len();
                if let Some(ArgDraw::Tensor { shape, .. }) = &mut self.params[i].arg {
                    match label {
                        "ill:type_shape" => {
                            let last = shape.last_mut().expect("a type dim");
                            *last += 1;
                        }
                        "ill:dimensionality" => {
                            let keep = type_dims - 1;
                            let drop = shape.len() - keep;
                            shape.drain(..drop);
                        }
                        _ => {
                            let entries: Vec<String> =
                                (0..=shape.len()).map(|e| e.to_string()).collect();
                            self.params[i].map = Some(format!("({})", entries.join(",")));
                        }
                    }
                }
            }
            "ill:broadcast" => {
                // A read tensor whose size along a call dim another argument
                // also gives (> 1) becomes one more.
                let mut found = None;
                for (i, p) in self.params.iter().enumerate() {
                    let Some(ArgDraw::Tensor {
                        shape: s, place, ..
                    }) = &p.arg
                    else {
                        continue;
                    };
                    if p.dir.writes() || p.map.is_some() {
                        continue;
                    }
                    for (j, pos) in place.iter().enumerate() {
                        let Some(pos) = *pos else { continue };
                        if s[j] < 2 || s[j] != shape[pos] {
                            continue;
                        }
                        let others = self.params.iter().enumerate().any(|(o, q)| {
                            o != i
                                && q.arg
                                    .as_ref()
                                    .is_some_and(|a| a.placements().contains(&(pos, shape[pos])))
                        }) || self
                            .result_arg
                            .as_ref()
                            .is_some_and(|a| a.placements().contains(&(pos, shape[pos])));
                        if others {
                            found = Some((i, j));
                        }
                    }
                }
                let Some((i, j)) = found else {
                    return false;
                };
                if let Some(ArgDraw::Tensor { shape, .. }) = &mut self.params[i].arg {
                    shape[j] += 1;
                }
            }
            "ill:generator_type" => {
                let v: Vec<usize> = (0..self.params.len())
                    .filter(|&i| self.params[i].generator.is_some())
                    .collect();
                let Some(i) = pick(self, &v) else {
                    return false;
                };
                let to = if self.params[i].generator == Some("rand_float") {
                    "thread_id"
                } else {
                    "rand_float"
                };
                self.params[i].arg = Some(ArgDraw::Text(to.into()));
            }
            "ill:call_id_count" => {
                let rank = shape.len();
                let v: Vec<usize> = (0..self.params.len())
                    .filter(|&i| {
                        let p = &self.params[i];
                        let count = match p.eff.text.as_str() {
                            "int" | "uint" => 1,
                            "int2" | "int[2]" => 2,
                            "int3" => 3,
                            _ => return false,
                        };
                        !p.anchor
                            && !p.dir.writes()
                            && matches!(p.kind, Kind::Concrete(_))
                            && p.map.is_none()
                            && count != rank
                    })
                    .collect();
                let Some(i) = pick(self, &v) else {
                    return false;
                };
                self.params[i].arg = Some(ArgDraw::Text("call_id".into()));
            }
            "ill:unspecialized" => {
                let vectors: Vec<&DrawnParam> = self
                    .params
                    .iter()
                    .filter(|p| p.kind == Kind::GenericVector)
                    .collect();
                let plain = !vectors.is_empty()
                    && vectors.iter().all(|p| {
                        matches!(&p.arg, Some(ArgDraw::Tensor { form, .. }) if !form.contains('<'))
                    });
                if !plain {
                    return false;
                }
                self.specs.clear();
            }
            "ill:ambiguous" => {
                let generic: Vec<usize> = (0..self.params.len())
                    .filter(|&i| self.params[i].kind == Kind::Generic)
                    .collect();
                if generic.len() != 1
                    || self.n.is_some()
                    || !self.specs.is_empty()
                    || self.params[generic[0]].dir.writes()
                {
                    return false;
                }
                let i = generic[0];
                // A tensor given for the result would bind `T` (an output
                // of type `T` binds it as any argument does).
                if matches!(self.result_arg, Some(ArgDraw::Tensor { .. })) {
                    self.result_arg = None;
                }
                self.params[i].map = None;
                self.params[i].arg = Some(ArgDraw::Text("float2".into()));
            }
            "ill:race" => {
                let Some(pos) = shape.iter().position(|&s| s > 1) else {
                    return false;
                };
                let v: Vec<usize> = (0..self.params.len())
                    .filter(|&i| self.params[i].dir.writes())
                    .collect();
                let Some(i) = pick(self, &v) else {
                    return false;
                };
                let eff = self.params[i].eff.clone();
                if eff.dims.is_empty() {
                    self.params[i].arg = Some(ArgDraw::Text(match eff.scalar {
                        Sc::Float => "ref".into(),
                        s => format!("ref<{}>", s.name()),
                    }));
                } else {
                    // A tensor of the call shape but for a 1 along a dim
                    // of more.
                    let mut s = shape.to_vec();
                    s[pos] = 1;
                    let form = match &eff.elem {
                        Some((elem, covered)) => {
                            s.extend(&eff.dims[..eff.dims.len() - covered]);
                            format!("tensor<{elem}>")
                        }
                        None => {
                            s.extend(&eff.dims);
                            eff.scalar.tensor().0.to_owned()
                        }
                    };
                    self.params[i].arg = Some(ArgDraw::Tensor {
                        form,
                        place: s.iter().map(|_| None).collect(),
                        shape: s,
                    });
                }
            }
            "ill:output_dims" => {
                let text = format!("output(dims={})", shape.len() + 1);
                let v: Vec<usize> = (0..self.params.len())
                    .filter(|&i| self.params[i].dir.writes())
                    .collect();
                if let Some(i) = pick(self, &v) {
                    self.params[i].arg = Some(ArgDraw::Text(text));
                } else if self.ret.is_some() {
                    self.result_arg = Some(ArgDraw::Text(text));
                } else {
                    return false;
                }
            }
            "ill:map_unknown" => self.extra_maps.push(("z".into(), "(0,)".into())),
            "ill:map_twice" => {
                let Some(p) = self.params.iter().find(|p| p.map.is_some()) else {
                    return false;
                };
                self.extra_maps
                    .push((p.name.into(), p.map.clone().expect("a map")));
            }
            "ill:spec_unknown" => self.specs.push("M=2".into()),
            _ => return false,
        }
        true
    }

    fn finish(mut self, shape: Vec<u64>) -> RandomCall {
        let mut generics = Vec::new();
        if self.t_bind.is_some() {
            generics.push("T".to_owned());
        }
        if self.n.is_some() {
            generics.push("let N : int".to_owned());
        }
        let generics = if generics.is_empty() {
            String::new()
        } else {
            format!("<{}>", generics.join(", "))
        };
        let params: Vec<String> = self
            .params
            .iter()
            .map(|p| {
                let dir = match p.dir {
                    Dir::Plain => "",
                    Dir::In => "in ",
                    Dir::Out => "out ",
                    Dir::InOut => "inout ",
                };
                let ty = match p.kind {
                    Kind::Concrete(k) => CATALOGUE[k].text,
                    Kind::Generic => "T",
                    Kind::GenericVector => "vector<T,N>",
                };
                format!("{dir}{ty} {}", p.name)
            })
            .collect();
        let ret = self.ret.as_ref().map_or("void", |(t, _)| t.as_str());
        let signature = format!("{ret} f{generics}({})", params.join(", "));
        let mut args: Vec<(String, String)> = self
            .params
            .iter()
            .map(|p| {
                (
                    p.name.to_owned(),
                    p.arg
                        .as_ref()
                        .expect("every parameter has an argument")
                        .text(),
                )
            })
            .collect();
        let positional = if self.c.chance(25) {
            self.used("arg:positional");
            1 + self.c.below(args.len())
        } else {
            0
        };
        if let Some(r) = &self.result_arg {
            args.push(("_result".into(), r.text()));
        }
        let mut maps: Vec<(String, String)> = self
            .params
            .iter()
            .filter_map(|p| p.map.clone().map(|m| (p.name.to_owned(), m)))
            .collect();
        maps.append(&mut self.extra_maps);
        RandomCall {
            signature,
            args,
            positional,
            maps,
            specializations: self.specs,
            productions: self.used,
            ill_fit: self.ill,
            call_shape: shape,
        }
    }
}
