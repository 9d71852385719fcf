//! Vectorized calls of a user's WGSL function
//! (`shape_call::CallKernel`): the function is inlined into a
//! generated kernel that, per call index, loads each argument's value
//! from its buffer, calls the function and stores what it writes.
//!
//! Sizes and strides are read from a parameter buffer, so a pipeline
//! depends only on the function, the argument types and directions, the
//! number of call dims and the generators' settings: calls at other sizes
//! reuse it.

use std::fmt::Write as _;

use shape_call::{
    CallKernel, Direction, Extent, GeneratedLeaf, Generator, KernelLeaf, ParamType, ParamValue,
    Scalar, ValueLayout,
};

use crate::error::WgpuError;

/// Invocations per workgroup.
pub(crate) const CALL_WORKGROUP: u64 = 64;

/// Why a call kernel cannot run on wgpu.
fn unsupported(reason: impl Into<String>) -> WgpuError {
    WgpuError::UnsupportedCall {
        reason: reason.into(),
    }
}

/// Parameter word `i` in WGSL: the words are packed four to a `vec4`,
/// as uniform arrays need.
fn word(i: usize) -> String {
    format!("shape_call_p.w[{}][{}]", i / 4, i % 4)
}

/// The `vec4<u32>` of a call's parameter block.
pub(crate) fn param_vectors(kernel: &CallKernel) -> usize {
    let words = 2
        + kernel.call_shape.len() * (1 + kernel.leaves.len())
        + kernel
            .leaves
            .iter()
            .map(|l| 2 * l.type_shape.len())
            .sum::<usize>();
    words.div_ceil(4).max(1)
}

/// Where each leaf's strides start in the parameter words:
/// `[base point, points, call shape.., (call strides.., type strides..,
/// type sizes..) per leaf]`.
pub(crate) fn stride_offsets(kernel: &CallKernel) -> Vec<usize> {
    let k = kernel.call_shape.len();
    let mut at = 2 + k;
    kernel
        .leaves
        .iter()
        .map(|l| {
            let start = at;
            at += k + 2 * l.type_shape.len();
            start
        })
        .collect()
}

/// The parameter words of a call, with the base point 0.
pub(crate) fn param_words(kernel: &CallKernel) -> Result<Vec<u32>, WgpuError> {
    let word = |what: &'static str, v: u64| {
        u32::try_from(v).map_err(|_| WgpuError::IndexRange {
            what,
            value: v,
            limit: u32::MAX as u64,
        })
    };
    let points = u64::try_from(kernel.points()).unwrap_or(u64::MAX);
    if points > 1 << 31 {
        return Err(WgpuError::IndexRange {
            what: "number of call indices",
            value: points,
            limit: 1 << 31,
        });
    }
    let mut words = vec![0, word("number of call indices", points)?];
    for &s in &kernel.call_shape {
        words.push(word("call size", s)?);
    }
    for l in &kernel.leaves {
        if l.len > 1 << 32 {
            return Err(WgpuError::IndexRange {
                what: "buffer length",
                value: l.len,
                limit: 1 << 32,
            });
        }
        for &s in l.call_strides.iter().chain(&l.type_strides) {
            words.push(word("stride", s)?);
        }
        for &s in &l.type_shape {
            words.push(word("type size", s)?);
        }
    }
    words.resize(param_vectors(kernel) * 4, 0);
    Ok(words)
}

/// The generated kernel's WGSL: the user's source, the bindings and the
/// entry point `shape_call_main`.
pub(crate) fn source(kernel: &CallKernel) -> Result<String, WgpuError> {
    let offsets = stride_offsets(kernel);
    let k = kernel.call_shape.len();
    let cx = Gen {
        kernel,
        offsets: &offsets,
    };
    let mut s = String::with_capacity(4096);
    match (&kernel.source, &kernel.body) {
        (Some(user), _) => s.push_str(user),
        (None, Some(_)) => {}
        (None, None) => {
            return Err(unsupported(format!(
                "`{}` has neither WGSL source nor a WGSL body (`Signature::with_wgsl_body`); give the CPU a closure for it",
                kernel.function
            )))
        }
    }
    let _ = writeln!(
        s,
        "\n\nstruct ShapeCallParams {{ w: array<vec4<u32>, {}> }}\n@group(0) @binding(0) var<uniform> shape_call_p: ShapeCallParams;",
        param_vectors(kernel)
    );
    for (i, l) in kernel.leaves.iter().enumerate() {
        // `var<storage>` alone is read-only: the word `read` is not
        // written, so a user function may be called `read`.
        let access = if l.writes() { ", read_write" } else { "" };
        let _ = writeln!(
            s,
            "@group(0) @binding({}) var<storage{access}> shape_call_l{i}: array<f32>;",
            i + 1
        );
    }
    if let (None, Some(body)) = (&kernel.source, &kernel.body) {
        s.push_str(&cx.declaration(body)?);
    }
    let _ = writeln!(
        s,
        "\n@compute @workgroup_size({CALL_WORKGROUP})\nfn shape_call_main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {{"
    );
    let _ = writeln!(
        s,
        "    let point = {} + gid.x + gid.y * groups.x * {CALL_WORKGROUP}u;\n    if (point >= {}) {{ return; }}\n    var rest = point;",
        word(0),
        word(1)
    );
    for c in (0..k).rev() {
        let _ = writeln!(
            s,
            "    let c{c} = rest % {}; rest = rest / {};",
            word(2 + c),
            word(2 + c)
        );
    }
    for (i, at) in offsets.iter().enumerate() {
        let terms: Vec<String> = (0..k).map(|c| format!("c{c} * {}", word(at + c))).collect();
        let base = if terms.is_empty() {
            "0u".to_string()
        } else {
            terms.join(" + ")
        };
        let _ = writeln!(s, "    let b{i} = {base};");
    }
    if kernel
        .leaves
        .iter()
        .any(|l| l.generator.as_ref().and_then(hash_seed).is_some())
    {
        s.insert_str(0, WANG_HASH_WGSL);
    }
    for (i, l) in kernel.leaves.iter().enumerate() {
        if let Some(g) = &l.generator {
            s.push_str(&generated_values(i, g));
        }
    }
    let mut args = Vec::with_capacity(kernel.params.len());
    for (p, param) in kernel.params.iter().enumerate() {
        if let (Some(_), ParamValue::Leaf(i)) = (param.ty.accessed(), &param.value) {
            if kernel.body.is_some() && kernel.source.is_none() {
                let _ = writeln!(s, "    shape_call_a{i} = b{i};");
                continue;
            }
        }
        let value = cx.value(&param.value)?;
        let ty = param.ty.spelled(shape_call::Language::Wgsl);
        if param.direction == Direction::In {
            let _ = writeln!(s, "    let v{p}: {ty} = {value};");
            args.push(format!("v{p}"));
        } else {
            let _ = writeln!(s, "    var v{p}: {ty} = {value};");
            args.push(format!("&v{p}"));
        }
    }
    let call = format!("{}({})", kernel.function, args.join(", "));
    match kernel.result {
        Some(r) => {
            let _ = writeln!(s, "    let ret = {call};");
            for line in cx.store(r, &kernel.leaves[r].ty, "ret", format!("b{r}"), 0)? {
                let _ = writeln!(s, "    {line}");
            }
        }
        None => {
            let _ = writeln!(s, "    {call};");
        }
    }
    for (p, param) in kernel.params.iter().enumerate() {
        if param.direction != Direction::In {
            for line in cx.store_value(&param.value, &format!("v{p}"))? {
                let _ = writeln!(s, "    {line}");
            }
        }
    }
    s.push_str("}\n");
    Ok(s)
}

/// Thomas Wang's hash in WGSL (`shape_call::wang_hash`).
const WANG_HASH_WGSL: &str = "fn shape_call_wang(seed: u32) -> u32 {\n    var s = (seed ^ 61u) ^ (seed >> 16u);\n    s = s * 9u;\n    s = s ^ (s >> 4u);\n    s = s * 0x27d4eb2du;\n    return s ^ (s >> 15u);\n}\n";

/// The statements that compute a random generator's hashes for leaf `i`
/// (`g{i}_0`, `g{i}_1`, ..), from the call's row-major index `point`, as
/// `shape_call::HashSeed::hashes` does; nothing for the others.
fn generated_values(i: usize, g: &GeneratedLeaf) -> String {
    let Some(seed) = hash_seed(g) else {
        return String::new();
    };
    let n = g.layout.len();
    let mut out = format!("    var g{i}_h = point * {n}u;\n");
    if seed.warmup > 0 {
        let _ = writeln!(
            out,
            "    for (var w = 0u; w < {}u; w = w + 1u) {{ g{i}_h = shape_call_wang(g{i}_h); }}",
            seed.warmup
        );
    }
    let _ = writeln!(out, "    g{i}_h = g{i}_h ^ {}u;", seed.effective());
    for j in 0..n {
        let _ = writeln!(
            out,
            "    g{i}_h = shape_call_wang(g{i}_h);\n    let g{i}_{j} = g{i}_h;"
        );
    }
    out
}

/// The seed of a random generator, which hashes; `None` for the others.
fn hash_seed(g: &GeneratedLeaf) -> Option<&shape_call::HashSeed> {
    match &g.generator {
        Generator::WangHash(seed) | Generator::RandFloat { seed, .. } => Some(seed),
        _ => None,
    }
}

/// The WGSL value of generator leaf `i` in its parameter's type `ty`.
fn generated_value(i: usize, g: &GeneratedLeaf, ty: &ParamType) -> Result<String, WgpuError> {
    let scalar = match ty.leaf() {
        ParamType::Scalar(s) => *s,
        _ => return Err(unsupported("a generator of a non-scalar element type")),
    };
    let int = |x: String| match scalar {
        Scalar::Int => format!("i32({x})"),
        Scalar::Uint => format!("u32({x})"),
        _ => format!("f32({x})"),
    };
    let parts: Vec<String> = match &g.generator {
        Generator::CallId => g
            .layout
            .place(&(0..g.dims.len() as i64).collect::<Vec<_>>())
            .into_iter()
            .map(|d| int(format!("c{}", g.dims[d as usize].unwrap_or(0))))
            .collect(),
        Generator::Grid { stride, offset, .. } => {
            let per_dim: Vec<String> = g
                .dims
                .iter()
                .zip(stride.iter().zip(offset))
                .map(|(d, (st, of))| match d {
                    Some(c) => format!("({of} + i32(c{c}) * {st})"),
                    None => format!("({of})"),
                })
                .collect();
            let order = g
                .layout
                .place(&(0..per_dim.len() as i64).collect::<Vec<_>>());
            order
                .into_iter()
                .map(|d| int(per_dim[d as usize].clone()))
                .collect()
        }
        Generator::ThreadId => (0..g.layout.len())
            .map(|j| int(if j == 0 { "point".into() } else { "0u".into() }))
            .collect(),
        Generator::WangHash(_) => (0..g.layout.len())
            .map(|j| int(format!("g{i}_{j}")))
            .collect(),
        Generator::RandFloat { min, max, .. } => {
            // Exact f32 bits, `max - min` rounded in f32 as on the CPU (a
            // WGSL literal expression would be folded in f64 first).
            let (lo, width) = (min.to_bits(), (max - min).to_bits());
            (0..g.layout.len())
                .map(|j| {
                    format!(
                        "(bitcast<f32>({lo:#x}u) + bitcast<f32>({width:#x}u) * (f32(g{i}_{j} & 0x7FFFFFu) / 8388608.0))"
                    )
                })
                .collect()
        }
    };
    Ok(match g.layout {
        ValueLayout::Scalar => parts.into_iter().next().unwrap_or_default(),
        _ => format!(
            "{}({})",
            ty.spelled(shape_call::Language::Wgsl),
            parts.join(", ")
        ),
    })
}

struct Gen<'a> {
    kernel: &'a CallKernel,
    offsets: &'a [usize],
}

impl Gen<'_> {
    fn leaf(&self, i: usize) -> &KernelLeaf {
        &self.kernel.leaves[i]
    }

    /// The type stride of leaf `i`'s type dim `d`.
    fn stride(&self, i: usize, d: usize) -> String {
        word(self.offsets[i] + self.kernel.call_shape.len() + d)
    }

    /// For a Slang-style declaration with a WGSL body: the accessors of
    /// its slice, tensor and buffer parameters (`p_load`, `p_size`, and
    /// `p_store` for a read-write tensor), and the function itself with
    /// its value parameters in WGSL types.
    fn declaration(&self, body: &str) -> Result<String, WgpuError> {
        let wgsl = |t: &ParamType| t.spelled(shape_call::Language::Wgsl);
        let k = self.kernel.call_shape.len();
        let mut out = String::new();
        let mut params = Vec::new();
        for param in &self.kernel.params {
            let Some((n, element)) = param.ty.accessed() else {
                params.push(match param.direction {
                    Direction::In => format!("{}: {}", param.name, wgsl(&param.ty)),
                    _ => format!("{}: ptr<function, {}>", param.name, wgsl(&param.ty)),
                });
                continue;
            };
            let ParamValue::Leaf(i) = param.value else {
                return Err(unsupported(format!(
                    "slice parameter `{}` given field by field",
                    param.name
                )));
            };
            if param.direction != Direction::In {
                return Err(unsupported(format!(
                    "slice or buffer parameter `{}` is written; accessors only read",
                    param.name
                )));
            }
            let indices: Vec<String> = (0..n).map(|d| format!("i{d}: u32")).collect();
            let terms: Vec<String> = (0..n)
                .map(|d| format!(" + i{d} * {}", self.stride(i, d)))
                .collect();
            let load = self.load(i, element, "off".to_string(), n)?;
            let types = self.leaf(i).type_shape.len();
            let sizes: Vec<String> = (0..n)
                .map(|d| word(self.offsets[i] + k + types + d))
                .collect();
            let _ = writeln!(
                out,
                "var<private> shape_call_a{i}: u32;\n\
                 fn {name}_load({idx}) -> {ty} {{ let off = shape_call_a{i}{terms}; return {load}; }}\n\
                 fn {name}_size(d: u32) -> u32 {{ var sizes = array<u32, {n}>({sizes}); return sizes[min(d, {last}u)]; }}",
                name = param.name,
                idx = indices.join(", "),
                ty = wgsl(element),
                terms = terms.concat(),
                sizes = sizes.join(", "),
                last = n - 1,
            );
            // A read-write tensor is written through `p_store`, straight
            // into its argument's buffer (bound `read_write`).
            if param.ty.writes_through() {
                let stores = self.store(i, element, "value", "off".to_string(), n)?;
                let _ = writeln!(
                    out,
                    "fn {name}_store({idx}, value: {ty}) {{ let off = shape_call_a{i}{terms}; {stores} }}",
                    name = param.name,
                    idx = indices.join(", "),
                    ty = wgsl(element),
                    terms = terms.concat(),
                    stores = stores.join(" "),
                );
            }
        }
        let ret = self
            .kernel
            .result
            .map_or(String::new(), |r| format!(" -> {}", wgsl(&self.leaf(r).ty)));
        let body = body.trim();
        let body = if body.starts_with('{') {
            body.to_string()
        } else {
            format!("{{ {body} }}")
        };
        let _ = writeln!(
            out,
            "fn {}({}){ret} {body}",
            self.kernel.function,
            params.join(", ")
        );
        Ok(out)
    }

    fn value(&self, v: &ParamValue) -> Result<String, WgpuError> {
        match v {
            ParamValue::Leaf(i) if self.leaf(*i).generator.is_some() => {
                let l = self.leaf(*i);
                let g = l.generator.as_ref().expect("a generator leaf");
                generated_value(*i, g, &l.ty)
            }
            ParamValue::Leaf(i) => self.load(*i, &self.leaf(*i).ty, format!("b{i}"), 0),
            ParamValue::Fields(fields) => {
                let ty = self.struct_name(v)?;
                let parts = fields
                    .iter()
                    .map(|(_, f)| self.value(f))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(format!("{ty}({})", parts.join(", ")))
            }
        }
    }

    /// The struct type a field-by-field value builds, from its parameter.
    fn struct_name(&self, v: &ParamValue) -> Result<String, WgpuError> {
        fn find<'a>(
            ty: &'a ParamType,
            value: &ParamValue,
            target: &ParamValue,
        ) -> Option<&'a ParamType> {
            if std::ptr::eq(value, target) {
                return Some(ty);
            }
            match (ty, value) {
                (ParamType::Struct(s), ParamValue::Fields(fields)) => {
                    fields.iter().find_map(|(name, f)| {
                        let (_, fty) = s.fields.iter().find(|(n, _)| n == name)?;
                        find(fty, f, target)
                    })
                }
                _ => None,
            }
        }
        self.kernel
            .params
            .iter()
            .find_map(|p| find(&p.ty, &p.value, v))
            .map(|t| t.spelled(shape_call::Language::Wgsl))
            .ok_or_else(|| unsupported("a struct argument whose type is unknown"))
    }

    fn load(&self, i: usize, ty: &ParamType, off: String, d: usize) -> Result<String, WgpuError> {
        let wgsl = |t: &ParamType| t.spelled(shape_call::Language::Wgsl);
        Ok(match ty {
            ParamType::Scalar(s) => {
                let x = format!("shape_call_l{i}[{off}]");
                match s {
                    Scalar::Float => x,
                    Scalar::Int => format!("i32({x})"),
                    Scalar::Uint => format!("u32({x})"),
                    Scalar::Bool => format!("({x} != 0.0)"),
                    Scalar::Half => return Err(unsupported("f16 arguments (the buffers hold f32)")),
                }
            }
            ParamType::Vector(e, Extent::Fixed(n)) | ParamType::Array(e, Extent::Fixed(n)) => {
                let parts = (0..*n)
                    .map(|j| self.load(i, e, format!("{off} + {j}u * {}", self.stride(i, d)), d + 1))
                    .collect::<Result<Vec<_>, _>>()?;
                format!("{}({})", wgsl(ty), parts.join(", "))
            }
            ParamType::Matrix(e, Extent::Fixed(c), Extent::Fixed(r)) => {
                let column = ParamType::Vector(e.clone(), Extent::Fixed(*r));
                let parts = (0..*c)
                    .map(|j| self.load(i, &column, format!("{off} + {j}u * {}", self.stride(i, d)), d + 1))
                    .collect::<Result<Vec<_>, _>>()?;
                format!("{}({})", wgsl(ty), parts.join(", "))
            }
            _ => {
                return Err(unsupported(format!(
                    "argument `{}` of type {}: only scalars, vectors, matrices, fixed arrays and structs given field by field run on wgpu",
                    self.leaf(i).path,
                    wgsl(ty)
                )))
            }
        })
    }

    fn store(
        &self,
        i: usize,
        ty: &ParamType,
        v: &str,
        off: String,
        d: usize,
    ) -> Result<Vec<String>, WgpuError> {
        Ok(match ty {
            ParamType::Scalar(s) => {
                let x = match s {
                    Scalar::Float => v.to_string(),
                    Scalar::Int | Scalar::Uint => format!("f32({v})"),
                    Scalar::Bool => format!("select(0.0, 1.0, {v})"),
                    Scalar::Half => return Err(unsupported("f16 outputs (the buffers hold f32)")),
                };
                vec![format!("shape_call_l{i}[{off}] = {x};")]
            }
            ParamType::Vector(e, Extent::Fixed(n)) | ParamType::Array(e, Extent::Fixed(n)) => {
                let mut out = Vec::new();
                for j in 0..*n {
                    out.extend(self.store(
                        i,
                        e,
                        &format!("{v}[{j}]"),
                        format!("{off} + {j}u * {}", self.stride(i, d)),
                        d + 1,
                    )?);
                }
                out
            }
            ParamType::Matrix(e, Extent::Fixed(c), Extent::Fixed(r)) => {
                let column = ParamType::Vector(e.clone(), Extent::Fixed(*r));
                let mut out = Vec::new();
                for j in 0..*c {
                    out.extend(self.store(
                        i,
                        &column,
                        &format!("{v}[{j}]"),
                        format!("{off} + {j}u * {}", self.stride(i, d)),
                        d + 1,
                    )?);
                }
                out
            }
            _ => {
                return Err(unsupported(format!(
                    "output `{}` of type {}",
                    self.leaf(i).path,
                    ty.spelled(shape_call::Language::Wgsl)
                )))
            }
        })
    }

    fn store_value(&self, value: &ParamValue, v: &str) -> Result<Vec<String>, WgpuError> {
        match value {
            ParamValue::Leaf(i) => self.store(*i, &self.leaf(*i).ty, v, format!("b{i}"), 0),
            ParamValue::Fields(fields) => {
                let mut out = Vec::new();
                for (name, f) in fields {
                    out.extend(self.store_value(f, &format!("{v}.{name}"))?);
                }
                Ok(out)
            }
        }
    }
}

/// What the generated source depends on, hashed: the function, the
/// parameters, the leaves' types, directions and numbers of type dims,
/// and the number of call dims; not sizes or strides. Looking a pipeline
/// up by this spares generating the source on every call.
fn structure_hash(k: &CallKernel) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    (
        &k.source,
        &k.body,
        &k.function,
        &k.params,
        k.call_shape.len(),
    )
        .hash(&mut h);
    for l in &k.leaves {
        (&l.ty, l.direction, l.type_shape.len(), &l.generator).hash(&mut h);
    }
    h.finish()
}

/// Whether two calls generate the same source (what
/// [`structure_hash`] hashes, compared).
fn same_structure(a: &CallKernel, b: &CallKernel) -> bool {
    (
        &a.source,
        &a.body,
        &a.function,
        &a.params,
        a.call_shape.len(),
    ) == (
        &b.source,
        &b.body,
        &b.function,
        &b.params,
        b.call_shape.len(),
    ) && a.leaves.len() == b.leaves.len()
        && a.leaves.iter().zip(&b.leaves).all(|(x, y)| {
            (&x.ty, x.direction, x.type_shape.len(), &x.generator)
                == (&y.ty, y.direction, y.type_shape.len(), &y.generator)
        })
}

/// A compiled call kernel.
pub(crate) struct CallPipeline {
    /// The call it was compiled for: calls of the same structure
    /// ([`same_structure`]) reuse it.
    example: CallKernel,
    pipeline: wgpu::ComputePipeline,
    layout: wgpu::BindGroupLayout,
    /// Distinguishes call pipelines in bind group keys (the top bit
    /// keeps them apart from the kernel pipelines' indices).
    index: u64,
}

impl crate::WgpuBackend {
    /// Runs a vectorized call of a WGSL function: `buffers` holds every
    /// leaf of `kernel` in order (inputs, and outputs the function
    /// writes, allocated with [`KernelLeaf::len`] elements). A second call
    /// with other sizes and the same types and number of call dims reuses
    /// the pipeline ([`crate::CacheStats::call_compiles`] counts
    /// compilations).
    pub fn run_call(
        &mut self,
        kernel: &CallKernel,
        buffers: &[&crate::WgpuBuffer],
    ) -> Result<(), WgpuError> {
        kernel.check_buffers(buffers.iter().map(|b| b.len()))?;
        if buffers.iter().any(|b| b.owner != self.id) {
            return Err(WgpuError::ForeignBuffer);
        }
        for (i, l) in kernel.leaves.iter().enumerate() {
            if l.writes()
                && buffers
                    .iter()
                    .enumerate()
                    .any(|(j, b)| j != i && b.id == buffers[i].id)
            {
                return Err(unsupported(format!(
                    "output `{}` shares its buffer with another argument; give it a buffer of its own",
                    l.path
                )));
            }
        }
        let limit = self.limits.max_storage_buffers_per_shader_stage as usize;
        if kernel.leaves.len() > limit {
            return Err(unsupported(format!(
                "its {} arguments need as many storage buffers, but adapter {} binds at most {limit}",
                kernel.leaves.len(),
                self.adapter_name()
            )));
        }
        let block = param_vectors(kernel) as u64 * 16;
        let block_limit = self
            .limits
            .max_uniform_buffer_binding_size
            .min(crate::ARENA_BYTES as u64);
        if block > block_limit {
            return Err(unsupported(format!(
                "its parameter block of {block} bytes exceeds the adapter's {block_limit}-byte uniform binding"
            )));
        }
        let mut words = param_words(kernel)?;
        let points = u64::from(words[1]);
        if points == 0 {
            return Ok(());
        }
        let hash = structure_hash(kernel);
        let found = self
            .call_pipelines
            .get(&hash)
            .and_then(|ps| ps.iter().position(|p| same_structure(&p.example, kernel)));
        let at = match found {
            Some(at) => {
                self.stats.call_hits += 1;
                at
            }
            None => {
                let compiled = self.compile_call(kernel, &source(kernel)?)?;
                self.stats.call_compiles += 1;
                let same_hash = self.call_pipelines.entry(hash).or_default();
                same_hash.push(compiled);
                same_hash.len() - 1
            }
        };
        let max = u64::from(self.limits.max_compute_workgroups_per_dimension.max(1));
        let groups = points.div_ceil(CALL_WORKGROUP);
        let block = (words.len() * 4) as u64;
        let mut done = 0u64;
        while done < groups {
            let now = (groups - done).min(max * max);
            let (x, y) = if now <= max {
                (now, 1)
            } else {
                (max, now.div_ceil(max))
            };
            words[0] = (done * CALL_WORKGROUP) as u32;
            let offset = self.stage_params(&words)?;
            let compiled = &self.call_pipelines[&hash][at];
            let key: Vec<u64> = std::iter::once(compiled.index)
                .chain(buffers.iter().map(|b| b.id))
                .collect();
            if !self.recording.bind_groups.contains_key(&key) {
                let mut entries = vec![wgpu::BindGroupEntry {
                    binding: 0,
                    resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                        buffer: &self.arena.buffer,
                        offset: 0,
                        size: std::num::NonZeroU64::new(block),
                    }),
                }];
                for (i, b) in buffers.iter().enumerate() {
                    entries.push(wgpu::BindGroupEntry {
                        binding: i as u32 + 1,
                        resource: b.buffer.as_entire_binding(),
                    });
                }
                let group = self.device.create_bind_group(&wgpu::BindGroupDescriptor {
                    label: Some("call"),
                    layout: &compiled.layout,
                    entries: &entries,
                });
                self.recording.bind_groups.insert(key.clone(), group);
            } else {
                self.stats.bind_group_reuses += 1;
            }
            let group = self.recording.bind_groups[&key].clone();
            let pipeline = compiled.pipeline.clone();
            let pass = self.recording.pass(&self.device);
            pass.set_pipeline(&pipeline);
            pass.set_bind_group(0, &group, &[offset as u32]);
            pass.dispatch_workgroups(x as u32, y as u32, 1);
            self.stats.dispatches += 1;
            self.recording.dispatches += 1;
            done += x * y;
            if self.recording.dispatches >= self.options.max_pending_dispatches {
                self.flush()?;
            }
        }
        self.check(|| format!("running a call of `{}`", kernel.function))
    }

    /// A call of host data by argument name ([`shape_call::Function::host_call`])
    /// run on this device; returns what it wrote by name, with dims.
    pub fn run_host_call(
        &mut self,
        call: shape_call::HostCall,
    ) -> Result<shape_call::HostOutputs, WgpuError> {
        call.run_with(|kernel, buffers| self.run_call_on_host(kernel, buffers))
    }

    /// [`crate::WgpuBackend::run_call`] on host data: `buffers` as
    /// [`CallKernel::buffers`] makes them; returns them with the outputs
    /// filled in.
    pub fn run_call_on_host(
        &mut self,
        kernel: &CallKernel,
        buffers: Vec<Vec<f32>>,
    ) -> Result<Vec<Vec<f32>>, WgpuError> {
        kernel.check_buffers(buffers.iter().map(|b| b.len() as u64))?;
        let mut device = Vec::with_capacity(buffers.len());
        for b in &buffers {
            device.push(shape_core::Backend::upload(self, b)?);
        }
        self.run_call(kernel, &device.iter().collect::<Vec<_>>())?;
        let mut out = buffers;
        for (i, l) in kernel.leaves.iter().enumerate() {
            if l.writes() {
                out[i] = shape_core::Backend::download(self, &device[i])?;
            }
        }
        Ok(out)
    }

    fn compile_call(
        &mut self,
        kernel: &CallKernel,
        source: &str,
    ) -> Result<CallPipeline, WgpuError> {
        // naga's GLSL writer leaves integer division by zero undefined, and
        // llvmpipe traps on it (the process dies): on GL the module gets
        // WGSL's guards first.
        let guarded = match self.adapter_info().backend {
            wgpu::Backend::Gl => crate::division::guarded(source),
            _ => None,
        };
        let module = self
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some("call"),
                source: wgpu::ShaderSource::Wgsl(guarded.as_deref().unwrap_or(source).into()),
            });
        let entry = |binding: u32, read_only: bool| wgpu::BindGroupLayoutEntry {
            binding,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Storage { read_only },
                has_dynamic_offset: false,
                min_binding_size: None,
            },
            count: None,
        };
        let mut entries = vec![wgpu::BindGroupLayoutEntry {
            binding: 0,
            visibility: wgpu::ShaderStages::COMPUTE,
            ty: wgpu::BindingType::Buffer {
                ty: wgpu::BufferBindingType::Uniform,
                has_dynamic_offset: true,
                min_binding_size: std::num::NonZeroU64::new(param_vectors(kernel) as u64 * 16),
            },
            count: None,
        }];
        for (i, l) in kernel.leaves.iter().enumerate() {
            entries.push(entry(i as u32 + 1, !l.writes()));
        }
        let layout = self
            .device
            .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                label: Some("call"),
                entries: &entries,
            });
        let pipeline_layout = self
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some("call"),
                bind_group_layouts: &[Some(&layout)],
                immediate_size: 0,
            });
        let pipeline = self
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some("call"),
                layout: Some(&pipeline_layout),
                module: &module,
                entry_point: Some("shape_call_main"),
                compilation_options: wgpu::PipelineCompilationOptions::default(),
                cache: None,
            });
        self.check(|| format!("compiling the call kernel of `{}`", kernel.function))?;
        Ok(CallPipeline {
            example: kernel.clone(),
            pipeline,
            layout,
            index: (1 << 63) | self.stats.call_compiles,
        })
    }
}
