//! Random WGSL functions over the grammar the CPU interpreter of WGSL
//! ([`shape_call::Interpreter`]) runs, batched into one module per GPU
//! pipeline, for checking the interpreter against wgpu.
//!
//! A [`Batch`] holds `count` generated functions `wf0 .. wfN-1` (with
//! their helper functions and a shared struct type), one wrapper per
//! function that builds its arguments from a common pool and folds its
//! result into a `vec4<f32>`, and last a dispatcher
//!
//! ```text
//! fn wbatch(sel: f32, x: vec4<f32>, y: vec4<f32>, nh: vec4<f32>, nl: vec4<f32>) -> vec4<f32>
//! ```
//!
//! that switches on `u32(sel)`: one call over tensors of selectors and
//! arguments runs every function on many samples ([`Batch::samples`]).
//! `x` holds quarter-integers in [-8, 8] (exact floats), `y` floats in
//! [-4, 4], and `nh`, `nl` four 32-bit integers as a high 24 and a low 8
//! bits (bit 8 of `nl` is a bool), so that every value crosses the f32
//! buffers exactly.
//!
//! The generator keeps every float finite and in its built-ins' domains
//! by construction where it can (`sin(clamp(e, -3.0, 3.0))`,
//! `log(abs(e) + 0.25)`, bounds kept with `clamp` on every assignment)
//! and sometimes draws the unguarded form of a built-in on an exact
//! argument (`sqrt(e)`, `log(e)`, `sin(e)`, `a / e`): those samples are
//! the ones the interpreter with `check_domains` reports out of domain,
//! and the test discards them. It also tracks which float expressions are
//! *exact* (dyadic values small enough that `+`, `-`, `*`, `floor`,
//! `round`, … compute them without rounding on any conforming device):
//! only exact floats reach discontinuous operations (comparisons,
//! `floor`, `round`, `step`, `sign`, conversions to integers, `bitcast`),
//! so that a rounding difference upstream cannot flip a branch or an
//! integer. Integer and bool results, and exact float results, must
//! agree exactly; the other floats within a tolerance
//! ([`Component::Float`]).
//!
//! ```
//! use shape_tests::wgsl::Batch;
//! let batch = Batch::generate(7, 4, 3);
//! assert!(batch.source.contains("fn wbatch("));
//! assert_eq!(batch.samples.len(), 4 * 3);
//! shape_call::Interpreter::new(&batch.source).unwrap();
//! ```

use std::fmt::Write as _;

/// How one component of a wrapper's `vec4<f32>` result is compared.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Component {
    /// Unused (0 on both sides; compared exactly).
    Pad,
    /// An integer, a bool or an exact float: equal bits (up to the sign
    /// of zero) on both sides.
    Exact,
    /// A float that rounding may change: equal within the test's
    /// tolerance.
    Float,
}

/// One generated function: its name, its source (with its helpers), and
/// how its folded result is compared.
#[derive(Clone, Debug)]
pub struct Generated {
    /// `wfK`.
    pub name: String,
    /// The function and its helpers, as they appear in the batch.
    pub source: String,
    /// The comparison of each of the four components of its wrapper's
    /// result.
    pub components: [Component; 4],
}

/// The arguments of one call of the dispatcher: the selected function
/// and the pool its wrapper draws arguments from.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The function's index (the dispatcher's `sel`).
    pub sel: u32,
    /// Quarter-integers in [-8, 8].
    pub x: [f32; 4],
    /// Floats in [-4, 4].
    pub y: [f32; 4],
    /// The high 24 bits of four 32-bit integers.
    pub nh: [f32; 4],
    /// Their low 8 bits, and a bool in bit 8.
    pub nl: [f32; 4],
}

impl Sample {
    /// The four 32-bit integers the sample encodes.
    pub fn ints(&self) -> [u32; 4] {
        std::array::from_fn(|k| ((self.nh[k] as u32) << 8) | (self.nl[k] as u32 & 255))
    }
}

/// Generated functions in one WGSL module with a dispatcher, and samples
/// of arguments for each.
#[derive(Clone, Debug)]
pub struct Batch {
    /// The module: a struct type, the functions, their wrappers, and the
    /// dispatcher `wbatch` last (the function a call runs).
    pub source: String,
    /// The functions, by selector.
    pub functions: Vec<Generated>,
    /// `samples_each` samples per function, in selector order.
    pub samples: Vec<Sample>,
}

/// The name of the dispatcher function of every batch.
pub const DISPATCHER: &str = "wbatch";

impl Batch {
    /// `count` functions drawn from `seed`, with `samples_each` argument
    /// samples for each.
    pub fn generate(seed: u64, count: usize, samples_each: usize) -> Batch {
        let mut rng = Rng::new(seed);
        let mut source = String::from(STRUCT);
        let mut functions = Vec::with_capacity(count);
        for k in 0..count {
            let mut g = FnGen::new(&mut rng, k);
            let generated = g.function();
            source.push_str(&generated.source);
            functions.push(generated);
        }
        source.push_str(&dispatcher(&(0..count).collect::<Vec<_>>()));
        let mut samples = Vec::with_capacity(count * samples_each);
        for sel in 0..count {
            for _ in 0..samples_each {
                samples.push(rng.sample(sel as u32));
            }
        }
        Batch {
            source,
            functions,
            samples,
        }
    }

    /// The batch of the functions `keep` (by selector) alone, with their
    /// samples, renumbered: for narrowing a failure down to one function.
    pub fn subset(&self, keep: &[usize]) -> Batch {
        let mut source = String::from(STRUCT);
        for &k in keep {
            source.push_str(&self.functions[k].source);
        }
        source.push_str(&dispatcher(keep));
        let samples = keep
            .iter()
            .enumerate()
            .flat_map(|(i, &k)| {
                self.samples
                    .iter()
                    .filter(move |s| s.sel as usize == k)
                    .map(move |s| Sample {
                        sel: i as u32,
                        ..s.clone()
                    })
            })
            .collect();
        Batch {
            source,
            functions: keep.iter().map(|&k| self.functions[k].clone()).collect(),
            samples,
        }
    }
}

/// The dispatcher calling the wrappers `ww{k}` for `k` in `wrappers`, by
/// position.
fn dispatcher(wrappers: &[usize]) -> String {
    let mut source = String::new();
    {
        let _ = writeln!(
            source,
            "fn {DISPATCHER}(sel: f32, x: vec4<f32>, y: vec4<f32>, nh: vec4<f32>, nl: vec4<f32>) -> vec4<f32> {{\n  \
             let n = (vec4<u32>(nh) << vec4<u32>(8u)) | (vec4<u32>(nl) & vec4<u32>(255u));\n  \
             let b = (vec4<u32>(nl) & vec4<u32>(256u)) != vec4<u32>(0u);\n  switch u32(sel) {{"
        );
        for (i, k) in wrappers.iter().enumerate() {
            let _ = writeln!(source, "    case {i}u: {{ return ww{k}(x, y, n, b); }}");
        }
        source.push_str("    default: { return vec4<f32>(0.0f); }\n  }\n}\n");
    }
    source
}

/// The struct type every batch declares; its float members keep the
/// classes `a`: exact (|a| <= 64), `v`: any (|v| <= 16).
const STRUCT: &str = "struct WS { a: f32, v: vec3<f32>, i: i32, u: vec2<u32>, b: bool }\n\n";

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5851_f42d_4c95_7f2d)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    fn int(&mut self) -> u32 {
        const SPECIAL: [u32; 10] = [
            0,
            1,
            u32::MAX,
            0x8000_0000,
            0x7fff_ffff,
            2,
            31,
            32,
            0xffff_fffe,
            3,
        ];
        match self.below(10) {
            0..=2 => *self.pick(&SPECIAL),
            3..=5 => (self.below(33) as i32 - 16) as u32,
            _ => self.next() as u32,
        }
    }

    fn sample(&mut self, sel: u32) -> Sample {
        let x = std::array::from_fn(|_| (self.below(65) as f32 - 32.0) * 0.25);
        let y =
            std::array::from_fn(|_| ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0);
        let ints: [u32; 4] = std::array::from_fn(|_| self.int());
        let nh = std::array::from_fn(|k| (ints[k] >> 8) as f32);
        let nl =
            std::array::from_fn(|k| ((ints[k] & 255) | ((self.next() as u32 & 1) << 8)) as f32);
        Sample { sel, x, y, nh, nl }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sc {
    F,
    I,
    U,
    B,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ty {
    s: Sc,
    w: u8,
}

impl Ty {
    const fn new(s: Sc, w: u8) -> Ty {
        Ty { s, w }
    }

    fn scalar(self) -> Ty {
        Ty::new(self.s, 1)
    }

    fn with(self, w: u8) -> Ty {
        Ty::new(self.s, w)
    }

    fn elem(self) -> &'static str {
        match self.s {
            Sc::F => "f32",
            Sc::I => "i32",
            Sc::U => "u32",
            Sc::B => "bool",
        }
    }

    fn wgsl(self) -> String {
        if self.w == 1 {
            self.elem().into()
        } else {
            format!("vec{}<{}>", self.w, self.elem())
        }
    }

    fn int(self) -> bool {
        matches!(self.s, Sc::I | Sc::U)
    }
}

/// A generated expression: its text, type, and for floats whether it is
/// exact, its magnitude bound and its fraction bits.
#[derive(Clone, Debug)]
struct E {
    s: String,
    ty: Ty,
    exact: bool,
    m: f64,
    f: u32,
    konst: bool,
}

impl E {
    fn new(s: String, ty: Ty) -> E {
        E {
            s,
            ty,
            exact: true,
            m: 0.0,
            f: 0,
            konst: false,
        }
    }

    fn float(s: String, ty: Ty, exact: bool, m: f64, f: u32) -> E {
        E {
            s,
            ty,
            exact,
            m,
            f,
            konst: false,
        }
    }
}

/// A place the function may read (and, if mutable, assign): a parameter,
/// a `var`, a `let`, a struct member or an array (indexed when used).
#[derive(Clone, Debug)]
struct Place {
    s: String,
    ty: Ty,
    exact: bool,
    m: f64,
    f: u32,
    mutable: bool,
    konst: bool,
    array: bool,
}

/// The float classes variables keep: exact with |v| <= 64 and 4 fraction
/// bits, or any with |v| <= 16.
const EXACT_M: f64 = 64.0;
const EXACT_F: u32 = 4;
const ANY_M: f64 = 16.0;

struct Helper {
    name: String,
    params: Vec<(Ty, bool, bool)>,
    ret: Ty,
    ret_exact: bool,
}

struct FnGen<'r> {
    rng: &'r mut Rng,
    k: usize,
    scopes: Vec<Vec<Place>>,
    names: usize,
    helpers: Vec<Helper>,
    /// The integer parameter every function has: a non-constant source
    /// of any type.
    anchor: String,
    ret: Ty,
    ret_exact: bool,
    loop_depth: u32,
    /// Inside a `switch` of the innermost loop: no `continue` there.
    in_switch: bool,
}

const TYPES: [Ty; 8] = [
    Ty::new(Sc::F, 1),
    Ty::new(Sc::F, 2),
    Ty::new(Sc::F, 3),
    Ty::new(Sc::F, 4),
    Ty::new(Sc::I, 1),
    Ty::new(Sc::U, 1),
    Ty::new(Sc::I, 2),
    Ty::new(Sc::B, 1),
];

impl<'r> FnGen<'r> {
    fn new(rng: &'r mut Rng, k: usize) -> FnGen<'r> {
        FnGen {
            rng,
            k,
            scopes: Vec::new(),
            names: 0,
            helpers: Vec::new(),
            anchor: String::new(),
            ret: Ty::new(Sc::F, 1),
            ret_exact: false,
            loop_depth: 0,
            in_switch: false,
        }
    }

    fn fresh(&mut self, prefix: &str) -> String {
        self.names += 1;
        format!("{prefix}{}", self.names)
    }

    fn random_ty(&mut self) -> Ty {
        let t = *self.rng.pick(&TYPES);
        match self.rng.below(6) {
            0 if t.s != Sc::F => t.with(2 + self.rng.below(3) as u8),
            _ => t,
        }
    }

    fn push(&mut self, p: Place) {
        self.scopes.last_mut().expect("a scope").push(p);
    }

    fn places(&self) -> impl Iterator<Item = &Place> {
        self.scopes.iter().flatten()
    }

    /// The function, its helpers and its wrapper.
    fn function(&mut self) -> Generated {
        let mut out = String::new();
        for _ in 0..self.rng.below(3) {
            let h = self.helper(&mut out);
            self.helpers.push(h);
        }
        // Parameters: the anchor integer, an exact float, then 0-3 of
        // random types.
        let exact_float = Ty::new(Sc::F, 1 + self.rng.below(4) as u8);
        let mut params = vec![
            (Ty::new(*self.rng.pick(&[Sc::I, Sc::U]), 1), true),
            (exact_float, true),
        ];
        for _ in 0..self.rng.below(4) {
            let t = self.random_ty();
            params.push((t, t.s != Sc::F || self.rng.chance(0.5)));
        }
        self.ret = self.random_ty();
        if self.ret.int() && self.ret.w > 2 && self.rng.chance(0.5) {
            self.ret.w = 2;
        }
        self.ret_exact = self.ret.s != Sc::F || self.rng.chance(0.3);
        self.scopes = vec![Vec::new()];
        let mut decl = Vec::new();
        let mut args = Vec::new();
        for (i, &(t, exact)) in params.iter().enumerate() {
            let name = format!("p{i}");
            decl.push(format!("{name}: {}", t.wgsl()));
            args.push(self.pool_arg(t, exact));
            self.push(Place {
                s: name.clone(),
                ty: t,
                exact,
                m: if exact { 8.0 } else { 4.0 },
                f: 2,
                mutable: false,
                konst: false,
                array: false,
            });
            if i == 0 {
                self.anchor = name;
            }
        }
        let name = format!("wf{}", self.k);
        let _ = writeln!(
            out,
            "fn {name}({}) -> {} {{",
            decl.join(", "),
            self.ret.wgsl()
        );
        let mut body = String::new();
        let n = 2 + self.rng.below(5);
        self.block(&mut body, n, 2, 1);
        let r = self.expr(self.ret, self.ret_exact, 3);
        let r = self.coerce(r, self.ret_exact, ANY_M.max(EXACT_M));
        let _ = writeln!(body, "  return {};", r.s);
        out.push_str(&body);
        out.push_str("}\n");
        let (fold, components) = self.fold("r");
        let _ = writeln!(
            out,
            "fn ww{k}(x: vec4<f32>, y: vec4<f32>, n: vec4<u32>, b: vec4<bool>) -> vec4<f32> {{\n  let r = {name}({});\n  return {fold};\n}}\n",
            args.join(", "),
            k = self.k
        );
        Generated {
            name,
            source: out,
            components,
        }
    }

    /// A parameter of type `t` from the pool: exact floats from `x`, any
    /// floats from `y`, integers from `n`, bools from `b`.
    fn pool_arg(&mut self, t: Ty, exact: bool) -> String {
        let swz: String = (0..t.w)
            .map(|_| *self.rng.pick(&['x', 'y', 'z', 'w']))
            .collect();
        match t.s {
            Sc::F if exact => format!("x.{swz}"),
            Sc::F => format!("y.{swz}"),
            Sc::U => format!("n.{swz}"),
            Sc::I => format!("bitcast<{}>(n.{swz})", t.wgsl()),
            Sc::B => format!("b.{swz}"),
        }
    }

    /// The wrapper's folding of result `r` into a `vec4<f32>`.
    fn fold(&self, r: &str) -> (String, [Component; 4]) {
        use Component::{Exact, Float, Pad};
        let t = self.ret;
        let mut comps = [Pad; 4];
        let parts: Vec<String> = match t.s {
            Sc::F => {
                let c = if self.ret_exact { Exact } else { Float };
                (0..t.w as usize)
                    .map(|i| {
                        comps[i] = c;
                        if t.w == 1 {
                            r.to_string()
                        } else {
                            format!("{r}[{i}]")
                        }
                    })
                    .collect()
            }
            Sc::B => (0..t.w as usize)
                .map(|i| {
                    comps[i] = Exact;
                    let c = if t.w == 1 {
                        r.to_string()
                    } else {
                        format!("{r}[{i}]")
                    };
                    format!("select(0.0f, 1.0f, {c})")
                })
                .collect(),
            Sc::I | Sc::U => {
                let comp = |i: usize| {
                    let c = if t.w == 1 {
                        r.to_string()
                    } else {
                        format!("{r}[{i}]")
                    };
                    if t.s == Sc::I {
                        format!("bitcast<u32>({c})")
                    } else {
                        c
                    }
                };
                if t.w <= 2 {
                    // 16-bit halves: every bit, exactly.
                    (0..t.w as usize)
                        .flat_map(|i| {
                            let c = comp(i);
                            [format!("f32({c} & 0xFFFFu)"), format!("f32({c} >> 16u)")]
                        })
                        .collect::<Vec<_>>()
                } else {
                    // The top 8 bits folded into the low 24.
                    (0..t.w as usize)
                        .map(|i| {
                            let c = comp(i);
                            format!("f32(({c} ^ ({c} >> 24u)) & 0xFFFFFFu)")
                        })
                        .collect()
                }
                .into_iter()
                .enumerate()
                .map(|(i, s)| {
                    comps[i] = Exact;
                    s
                })
                .collect()
            }
        };
        let mut parts = parts;
        while parts.len() < 4 {
            parts.push("0.0f".into());
        }
        (format!("vec4<f32>({})", parts.join(", ")), comps)
    }

    /// A helper function: value parameters and sometimes a
    /// `ptr<function, T>` it writes through.
    fn helper(&mut self, out: &mut String) -> Helper {
        let name = format!("wh{}_{}", self.k, self.helpers.len());
        self.scopes = vec![Vec::new()];
        let saved_anchor = std::mem::take(&mut self.anchor);
        let mut params = vec![
            (Ty::new(Sc::U, 1), true, false),
            (Ty::new(Sc::F, 1 + self.rng.below(4) as u8), true, false),
        ];
        for _ in 0..self.rng.below(2) {
            let t = self.random_ty();
            params.push((t, t.s != Sc::F || self.rng.chance(0.5), false));
        }
        if self.rng.chance(0.5) {
            let t = self.random_ty();
            params.push((t, t.s != Sc::F || self.rng.chance(0.5), true));
        }
        let ret = self.random_ty();
        let ret_exact = ret.s != Sc::F || self.rng.chance(0.5);
        let (saved_ret, saved_exact) = (self.ret, self.ret_exact);
        self.ret = ret;
        self.ret_exact = ret_exact;
        let mut decl = Vec::new();
        for (i, &(t, exact, ptr)) in params.iter().enumerate() {
            let pname = format!("q{i}");
            if ptr {
                decl.push(format!("{pname}: ptr<function, {}>", t.wgsl()));
            } else {
                decl.push(format!("{pname}: {}", t.wgsl()));
            }
            let (m, f) = if ptr {
                (if exact { EXACT_M } else { ANY_M }, EXACT_F)
            } else if exact {
                (EXACT_M, EXACT_F)
            } else {
                (ANY_M, 0)
            };
            self.push(Place {
                s: if ptr {
                    format!("(*{pname})")
                } else {
                    pname.clone()
                },
                ty: t,
                exact,
                m,
                f,
                mutable: ptr,
                konst: false,
                array: false,
            });
            if i == 0 {
                self.anchor = pname;
            }
        }
        let _ = writeln!(out, "fn {name}({}) -> {} {{", decl.join(", "), ret.wgsl());
        let mut body = String::new();
        let n = 1 + self.rng.below(3);
        self.block(&mut body, n, 1, 1);
        if let Some(&(t, exact, true)) = params.last() {
            let e = self.expr(t, exact, 2);
            let e = self.coerce(e, exact, if exact { EXACT_M } else { ANY_M });
            let _ = writeln!(body, "  *q{} = {};", params.len() - 1, e.s);
        }
        let r = self.expr(ret, ret_exact, 2);
        let r = self.coerce(r, ret_exact, if ret_exact { EXACT_M } else { ANY_M });
        let _ = writeln!(body, "  return {};", r.s);
        out.push_str(&body);
        out.push_str("}\n");
        self.anchor = saved_anchor;
        self.ret = saved_ret;
        self.ret_exact = saved_exact;
        Helper {
            name,
            params,
            ret,
            ret_exact,
        }
    }

    // ----- statements -----

    fn block(&mut self, out: &mut String, n: usize, depth: u32, indent: usize) {
        for _ in 0..n {
            self.statement(out, depth, indent);
        }
    }

    fn statement(&mut self, out: &mut String, depth: u32, indent: usize) {
        let pad = "  ".repeat(indent);
        let choice = if depth == 0 {
            self.rng.below(4)
        } else {
            self.rng.below(11)
        };
        match choice {
            0 | 1 => self.declare(out, &pad),
            2 | 3 => self.assign(out, &pad),
            4 => {
                let c = self.expr(Ty::new(Sc::B, 1), true, 2);
                let _ = writeln!(out, "{pad}if ({}) {{", c.s);
                self.nested(out, depth, indent);
                if self.rng.chance(0.5) {
                    let _ = writeln!(out, "{pad}}} else {{");
                    self.nested(out, depth, indent);
                }
                let _ = writeln!(out, "{pad}}}");
            }
            5 => {
                let t = Ty::new(*self.rng.pick(&[Sc::I, Sc::U]), 1);
                let e = self.expr(t, true, 2);
                let suffix = if t.s == Sc::I { "i" } else { "u" };
                let sel = if self.rng.chance(0.7) {
                    format!("({} & 3{suffix})", e.s)
                } else {
                    e.s
                };
                let _ = writeln!(out, "{pad}switch {sel} {{");
                let saved = std::mem::replace(&mut self.in_switch, true);
                let _ = writeln!(out, "{pad}  case 0{suffix}: {{");
                self.nested(out, depth, indent + 1);
                let _ = writeln!(out, "{pad}  }}\n{pad}  case 1{suffix}, 2{suffix}: {{");
                self.nested(out, depth, indent + 1);
                let _ = writeln!(out, "{pad}  }}\n{pad}  default: {{");
                self.nested(out, depth, indent + 1);
                let _ = writeln!(out, "{pad}  }}\n{pad}}}");
                self.in_switch = saved;
            }
            6 | 7 => self.a_loop(out, depth, indent),
            8 if self.loop_depth > 0 => {
                let c = self.expr(Ty::new(Sc::B, 1), true, 1);
                let word = if self.in_switch || self.rng.chance(0.5) {
                    "break"
                } else {
                    "continue"
                };
                let _ = writeln!(out, "{pad}if ({}) {{ {word}; }}", c.s);
            }
            8 | 9 => {
                let c = self.expr(Ty::new(Sc::B, 1), true, 1);
                let r = self.expr(self.ret, self.ret_exact, 2);
                let r = self.coerce(r, self.ret_exact, EXACT_M);
                let _ = writeln!(out, "{pad}if ({}) {{ return {}; }}", c.s, r.s);
            }
            _ => self.call_statement(out, &pad),
        }
    }

    fn nested(&mut self, out: &mut String, depth: u32, indent: usize) {
        self.scopes.push(Vec::new());
        let n = 1 + self.rng.below(2);
        self.block(out, n, depth - 1, indent + 1);
        self.scopes.pop();
    }

    fn a_loop(&mut self, out: &mut String, depth: u32, indent: usize) {
        let pad = "  ".repeat(indent);
        let i = self.fresh("k");
        let bound = format!("{}i", 1 + self.rng.below(4));
        self.scopes.push(Vec::new());
        self.loop_depth += 1;
        let saved_switch = std::mem::replace(&mut self.in_switch, false);
        let counter = Place {
            s: i.clone(),
            ty: Ty::new(Sc::I, 1),
            exact: true,
            m: 0.0,
            f: 0,
            mutable: false,
            konst: false,
            array: false,
        };
        match self.rng.below(3) {
            0 => {
                let _ = writeln!(out, "{pad}for (var {i} = 0i; {i} < {bound}; {i}++) {{");
                self.push(counter);
                let n = 1 + self.rng.below(3);
                self.block(out, n, depth - 1, indent + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            1 => {
                let _ = writeln!(
                    out,
                    "{pad}var {i} = 0i;\n{pad}while ({i} < {bound}) {{\n{pad}  {i} += 1i;"
                );
                self.push(counter);
                let n = 1 + self.rng.below(3);
                self.block(out, n, depth - 1, indent + 1);
                let _ = writeln!(out, "{pad}}}");
            }
            _ => {
                let _ = writeln!(
                    out,
                    "{pad}var {i} = 0i;\n{pad}loop {{\n{pad}  if ({i} >= {bound}) {{ break; }}"
                );
                self.push(counter);
                let n = 1 + self.rng.below(3);
                self.block(out, n, depth - 1, indent + 1);
                let _ = writeln!(out, "{pad}  continuing {{ {i} += 1i; }}\n{pad}}}");
            }
        }
        self.loop_depth -= 1;
        self.in_switch = saved_switch;
        self.scopes.pop();
    }

    fn declare(&mut self, out: &mut String, pad: &str) {
        match self.rng.below(6) {
            0 => {
                // A struct.
                let name = self.fresh("s");
                let a = self.expr(Ty::new(Sc::F, 1), true, 2);
                let a = self.coerce(a, true, EXACT_M);
                let v = self.expr(Ty::new(Sc::F, 3), false, 2);
                let v = self.coerce(v, false, ANY_M);
                let i = self.expr(Ty::new(Sc::I, 1), true, 1);
                let u = self.expr(Ty::new(Sc::U, 2), true, 1);
                let b = self.expr(Ty::new(Sc::B, 1), true, 1);
                let _ = writeln!(
                    out,
                    "{pad}var {name} = WS({}, {}, {}, {}, {});",
                    a.s, v.s, i.s, u.s, b.s
                );
                for (field, ty, exact, m) in [
                    ("a", Ty::new(Sc::F, 1), true, EXACT_M),
                    ("v", Ty::new(Sc::F, 3), false, ANY_M),
                    ("i", Ty::new(Sc::I, 1), true, 0.0),
                    ("u", Ty::new(Sc::U, 2), true, 0.0),
                    ("b", Ty::new(Sc::B, 1), true, 0.0),
                ] {
                    self.push(Place {
                        s: format!("{name}.{field}"),
                        ty,
                        exact,
                        m,
                        f: EXACT_F,
                        mutable: true,
                        konst: false,
                        array: false,
                    });
                }
            }
            1 => {
                // An array.
                let name = self.fresh("a");
                let t = self.random_ty();
                let exact = t.s != Sc::F || self.rng.chance(0.5);
                let m = if exact { EXACT_M } else { ANY_M };
                let items: Vec<String> = (0..4)
                    .map(|_| {
                        let e = self.expr(t, exact, 1);
                        self.coerce(e, exact, m).s
                    })
                    .collect();
                let _ = writeln!(
                    out,
                    "{pad}var {name} = array<{}, 4>({});",
                    t.wgsl(),
                    items.join(", ")
                );
                self.push(Place {
                    s: name,
                    ty: t,
                    exact,
                    m,
                    f: EXACT_F,
                    mutable: true,
                    konst: false,
                    array: true,
                });
            }
            n => {
                let t = self.random_ty();
                let exact = t.s != Sc::F || self.rng.chance(0.5);
                let m = if exact { EXACT_M } else { ANY_M };
                let is_let = n == 2;
                let name = self.fresh(if is_let { "l" } else { "v" });
                let e = self.expr(t, exact, 3);
                let e = self.coerce(e, exact, m);
                if !is_let && self.rng.chance(0.15) {
                    // Zero-initialized.
                    let _ = writeln!(out, "{pad}var {name}: {};", t.wgsl());
                } else {
                    let kw = if is_let { "let" } else { "var" };
                    let _ = writeln!(out, "{pad}{kw} {name}: {} = {};", t.wgsl(), e.s);
                }
                self.push(Place {
                    s: name,
                    ty: t,
                    exact,
                    m,
                    f: EXACT_F,
                    mutable: !is_let,
                    konst: is_let && e.konst,
                    array: false,
                });
            }
        }
    }

    fn assign(&mut self, out: &mut String, pad: &str) {
        let targets: Vec<Place> = self.places().filter(|p| p.mutable).cloned().collect();
        if targets.is_empty() {
            return self.declare(out, pad);
        }
        let p = self.rng.pick(&targets).clone();
        let mut lhs = p.s.clone();
        if p.array {
            lhs = format!("{}[{}]", p.s, self.index());
        }
        let mut ty = p.ty;
        if ty.w > 1 && self.rng.chance(0.3) {
            lhs = format!(
                "{lhs}.{}",
                ['x', 'y', 'z', 'w'][self.rng.below(ty.w as usize)]
            );
            ty = ty.scalar();
        }
        let m = if p.exact { EXACT_M } else { ANY_M };
        let e = if ty.s != Sc::B && self.rng.chance(0.4) {
            // A compound update, `lhs = lhs op e`, brought back in bounds.
            let rhs = self.expr(ty, p.exact, 2);
            let cur = E::float(lhs.clone(), ty, p.exact, m, p.f);
            self.arith(cur, rhs)
        } else {
            self.expr(ty, p.exact, 3)
        };
        let e = self.coerce(e, p.exact, m);
        let _ = writeln!(out, "{pad}{lhs} = {};", e.s);
    }

    fn call_statement(&mut self, out: &mut String, pad: &str) {
        // A pointer argument is a whole variable: WGSL without the
        // `unrestricted_pointer_parameters` extension requires it, and
        // naga 30's SPIR-V writer panics on `&s.member` ("Expression is
        // not cached") although its validator accepts it.
        let targets: Vec<Place> = self
            .places()
            .filter(|p| p.mutable && !p.array && !p.s.contains('.'))
            .cloned()
            .collect();
        let options: Vec<usize> = (0..self.helpers.len())
            .filter(|&h| {
                let last = self.helpers[h].params.last().expect("an anchor");
                last.2
                    && targets
                        .iter()
                        .any(|t| t.ty == last.0 && (t.exact || !last.1) && !t.s.contains('*'))
            })
            .collect();
        if options.is_empty() {
            return self.assign(out, pad);
        }
        let h = *self.rng.pick(&options);
        let (t, exact, _) = *self.helpers[h].params.last().expect("an anchor");
        let fits: Vec<Place> = targets
            .into_iter()
            .filter(|p| p.ty == t && (p.exact || !exact) && !p.s.contains('*'))
            .collect();
        let target = self.rng.pick(&fits).clone();
        let call = self.call(h, Some(&target.s));
        let name = self.fresh("c");
        let _ = writeln!(out, "{pad}let {name} = {};", call.s);
        self.push(Place {
            s: name,
            ty: call.ty,
            exact: call.exact,
            m: call.m,
            f: call.f,
            mutable: false,
            konst: false,
            array: false,
        });
    }

    /// A call of helper `h`; its pointer argument (if any) is `&target`.
    fn call(&mut self, h: usize, target: Option<&str>) -> E {
        let params = self.helpers[h].params.clone();
        let mut args = Vec::new();
        for (t, exact, ptr) in params {
            if ptr {
                args.push(format!("&{}", target.expect("a pointer target")));
            } else {
                let e = self.expr(t, exact, 1);
                args.push(self.coerce(e, exact, if exact { EXACT_M } else { ANY_M }).s);
            }
        }
        let hp = &self.helpers[h];
        E::float(
            format!("{}({})", hp.name, args.join(", ")),
            hp.ret,
            hp.ret_exact,
            if hp.ret_exact { EXACT_M } else { ANY_M },
            EXACT_F,
        )
    }

    /// An index into a 4-element array: masked, so always in bounds.
    fn index(&mut self) -> String {
        match self.rng.below(3) {
            0 => format!("{}u", self.rng.below(4)),
            1 => {
                let e = self.expr(Ty::new(Sc::U, 1), true, 1);
                format!("({} & 3u)", e.s)
            }
            _ => {
                let e = self.expr(Ty::new(Sc::I, 1), true, 1);
                format!("({} & 3i)", e.s)
            }
        }
    }

    // ----- expressions -----

    /// Brings a float expression into a class: exact ones to at most
    /// `EXACT_F` fraction bits, and magnitudes within `m`.
    fn coerce(&mut self, mut e: E, exact: bool, m: f64) -> E {
        if e.ty.s != Sc::F {
            return e;
        }
        debug_assert!(
            e.exact || !exact,
            "an inexact value where an exact one is needed"
        );
        if e.exact && e.f > EXACT_F {
            let scale = (1u32 << EXACT_F) as f32;
            e.s = format!("(floor({} * {scale:?}f) * {:?}f)", e.s, 1.0 / scale);
            e.f = EXACT_F;
        }
        if e.m > m {
            let lit = self.splat(e.ty, &format!("{m:?}f"));
            let neg = self.splat(e.ty, &format!("-{m:?}f"));
            e.s = format!("clamp({}, {neg}, {lit})", e.s);
            e.m = m;
            e.konst = false;
        }
        if !exact {
            e.exact = false;
        }
        e
    }

    fn splat(&self, t: Ty, scalar: &str) -> String {
        if t.w == 1 {
            scalar.to_string()
        } else {
            format!("{}({scalar})", t.wgsl())
        }
    }

    /// `a + b`, `a - b` or `a * b` of floats or integers.
    fn arith(&mut self, a: E, b: E) -> E {
        let ty = a.ty;
        if ty.int() {
            let op = self.rng.pick(&["+", "-", "*", "/", "%", "^", "&", "|"]);
            return self.int_binary(a, b, op);
        }
        let exact = a.exact && b.exact;
        match self.rng.below(3) {
            0 => E::float(
                format!("({} + {})", a.s, b.s),
                ty,
                exact,
                a.m + b.m,
                a.f.max(b.f),
            ),
            1 => E::float(
                format!("({} - {})", a.s, b.s),
                ty,
                exact,
                a.m + b.m,
                a.f.max(b.f),
            ),
            _ => {
                let a = self.coerce(a, exact, 16.0);
                let b = self.coerce(b, exact, 16.0);
                let (a, b) = (self.narrow(a), self.narrow(b));
                E::float(
                    format!("({} * {})", a.s, b.s),
                    ty,
                    exact,
                    a.m * b.m,
                    a.f + b.f,
                )
            }
        }
    }

    /// An exact float's fraction bits kept to 4 (for products).
    fn narrow(&mut self, mut e: E) -> E {
        if e.exact && e.f > EXACT_F {
            e = self.coerce(e, true, f64::INFINITY);
        }
        e
    }

    fn int_binary(&mut self, a: E, mut b: E, op: &str) -> E {
        if a.konst && b.konst {
            b = self.nonconst(b.ty, true);
        }
        let ty = a.ty;
        if op == "/" || op == "%" {
            // Divisors that are often 0 or -1, and dividends that are
            // often i32::MIN.
            if self.rng.chance(0.4) {
                b = match ty.s {
                    Sc::I => E::new(
                        format!("({} >> {})", b.s, self.splat(ty.with(ty.w).with_u(), "31u")),
                        ty,
                    ),
                    _ => E::new(format!("({} & {})", b.s, self.splat(ty, "1u")), ty),
                };
            }
            // naga rejects a constant divisor of zero, and a vector
            // divisor built with a literal zero component (`vec2<u32>(q0,
            // 0u)`) too: hide the construction behind an operator.
            if self.is_const(&b.s) {
                b = self.nonconst(ty, true);
            }
            if b.s.starts_with("vec") {
                let zero = self.splat(ty, if ty.s == Sc::I { "0i" } else { "0u" });
                b.s = format!("({} | {zero})", b.s);
            }
        }
        let mut e = E::new(format!("({} {op} {})", a.s, b.s), ty);
        e.konst = false;
        e
    }

    fn expr(&mut self, ty: Ty, exact: bool, depth: u32) -> E {
        if depth == 0 || self.rng.chance(0.2) {
            return self.leaf(ty, exact);
        }
        let e = match ty.s {
            Sc::F => self.float_expr(ty, exact, depth - 1),
            Sc::I | Sc::U => self.int_expr(ty, depth - 1),
            Sc::B => self.bool_expr(ty, depth - 1),
        };
        // A composite of constants only would be a const-expression, which
        // naga evaluates (and rejects where it overflows or divides by
        // zero): take a non-constant value instead.
        if self.is_const(&e.s) {
            return self.nonconst(ty, exact);
        }
        // Exact values stay below 2^12 with 8 fraction bits, so sums and
        // the products of narrowed operands stay exact; other floats stay
        // within 16, so rounding errors stay small in absolute terms.
        if e.ty.s == Sc::F && e.exact && (e.m > 4096.0 || e.f > 8) {
            return self.coerce(e, true, EXACT_M);
        }
        if e.ty.s == Sc::F && !e.exact && e.m > ANY_M {
            return self.coerce(e, false, ANY_M);
        }
        e
    }

    /// Whether `s` reads no parameter, variable or helper: a
    /// const-expression.
    fn is_const(&self, s: &str) -> bool {
        let live: std::collections::HashSet<&str> = self
            .places()
            .filter(|p| !p.konst)
            .filter_map(|p| {
                p.s.trim_start_matches(['(', '*'])
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .next()
            })
            .collect();
        !s.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|t| live.contains(t) || t.starts_with("wh"))
    }

    fn literal(&mut self, ty: Ty) -> E {
        let s = match ty.s {
            Sc::F => {
                let v = (self.rng.below(33) as f32 - 16.0) * 0.25;
                let lit = if v < 0.0 {
                    format!("({v:?}f)")
                } else {
                    format!("{v:?}f")
                };
                let mut e = E::float(self.splat(ty, &lit), ty, true, v.abs() as f64, 2);
                e.konst = true;
                return e;
            }
            Sc::I => match self.rng.below(6) {
                0 => "bitcast<i32>(0x80000000u)".to_string(),
                1 => "2147483647i".to_string(),
                _ => {
                    let v = self.rng.below(41) as i32 - 20;
                    if v < 0 {
                        format!("({v}i)")
                    } else {
                        format!("{v}i")
                    }
                }
            },
            Sc::U => match self.rng.below(5) {
                0 => "0xFFFFFFFFu".to_string(),
                1 => "0x80000000u".to_string(),
                _ => format!("{}u", self.rng.below(40)),
            },
            Sc::B => self.rng.pick(&["true", "false"]).to_string(),
        };
        let mut e = E::new(self.splat(ty, &s), ty);
        e.konst = true;
        e
    }

    /// A non-constant expression of any type, from the anchor parameter.
    fn nonconst(&mut self, ty: Ty, exact: bool) -> E {
        // A parameter or variable of the same kind, else the anchor.
        let same: Vec<Place> = self
            .places()
            .filter(|p| {
                !p.konst
                    && !p.array
                    && p.ty.s == ty.s
                    && (p.exact || !exact)
                    && (p.ty.w == ty.w || p.ty.w > 1)
            })
            .cloned()
            .collect();
        if !same.is_empty() && self.rng.chance(0.8) {
            let p = self.rng.pick(&same).clone();
            let s = if p.ty.w == ty.w {
                p.s.clone()
            } else {
                let c = ['x', 'y', 'z', 'w'][self.rng.below(p.ty.w as usize)];
                if ty.w == 1 {
                    format!("{}.{c}", p.s)
                } else {
                    format!("{}({}.{c})", ty.wgsl(), p.s)
                }
            };
            return E {
                s,
                ty,
                exact: p.exact || ty.s != Sc::F,
                m: p.m,
                f: p.f,
                konst: false,
            };
        }
        let a = self.anchor.clone();
        let anchor_signed = self
            .places()
            .find(|p| p.s == a)
            .is_some_and(|p| p.ty.s == Sc::I);
        let au = if anchor_signed {
            format!("bitcast<u32>({a})")
        } else {
            a.clone()
        };
        let scalar = match ty.s {
            Sc::U => E::new(au, ty.scalar()),
            Sc::I => E::new(format!("bitcast<i32>({au})"), ty.scalar()),
            Sc::F => E::float(format!("f32({au} & 15u)"), ty.scalar(), true, 15.0, 0),
            Sc::B => E::new(format!("(({au} & 1u) == 1u)"), ty.scalar()),
        };
        if ty.w == 1 {
            scalar
        } else {
            E {
                s: format!("{}({})", ty.wgsl(), scalar.s),
                ty,
                ..scalar
            }
        }
    }

    fn leaf(&mut self, ty: Ty, exact: bool) -> E {
        // Places of this type, or vectors to take components of.
        let fits: Vec<Place> = self
            .places()
            .filter(|p| {
                (p.exact || !exact || p.ty.s != Sc::F)
                    && p.ty.s == ty.s
                    && (p.ty.w == ty.w || (ty.w == 1 && p.ty.w > 1) || (ty.w > 1 && p.ty.w >= ty.w))
            })
            .cloned()
            .collect();
        if fits.is_empty() || self.rng.chance(0.15) {
            return if self.rng.chance(0.5) {
                self.literal(ty)
            } else {
                self.nonconst(ty, exact)
            };
        }
        let p = self.rng.pick(&fits).clone();
        let mut s = if p.array {
            format!("{}[{}]", p.s, self.index())
        } else {
            p.s.clone()
        };
        if p.ty.w != ty.w {
            let swz: String = (0..ty.w)
                .map(|_| ['x', 'y', 'z', 'w'][self.rng.below(p.ty.w as usize)])
                .collect();
            s = format!("{s}.{swz}");
        }
        E {
            s,
            ty,
            exact: p.exact || ty.s != Sc::F,
            m: p.m,
            f: p.f,
            konst: p.konst,
        }
    }

    fn float_expr(&mut self, ty: Ty, exact: bool, d: u32) -> E {
        let w = ty.w;
        let sc = ty.scalar();
        loop {
            let c = self.rng.below(if exact { 16 } else { 30 });
            let e = match c {
                0..=2 => {
                    let a = self.expr(ty, exact, d);
                    let b = self.expr(ty, exact, d);
                    self.arith(a, b)
                }
                3 => {
                    let a = self.expr(ty, exact, d);
                    let f = *self.rng.pick(&["-", "abs"]);
                    E::float(
                        if f == "-" {
                            format!("(-{})", a.s)
                        } else {
                            format!("abs({})", a.s)
                        },
                        ty,
                        a.exact,
                        a.m,
                        a.f,
                    )
                }
                4 => {
                    let a = self.expr(ty, exact, d);
                    let b = self.expr(ty, exact, d);
                    let f = self.rng.pick(&["min", "max"]);
                    E::float(
                        format!("{f}({}, {})", a.s, b.s),
                        ty,
                        a.exact && b.exact,
                        a.m.max(b.m),
                        a.f.max(b.f),
                    )
                }
                5 => {
                    let a = self.expr(ty, exact, d);
                    let lo = self.rng.below(9) as f32 * 0.5 - 4.0;
                    let hi = lo + 0.5 + self.rng.below(8) as f32 * 0.5;
                    let (l, h) = (
                        self.splat(ty, &format!("{lo:?}f")),
                        self.splat(ty, &format!("{hi:?}f")),
                    );
                    E::float(
                        format!("clamp({}, {l}, {h})", a.s),
                        ty,
                        a.exact,
                        lo.abs().max(hi.abs()) as f64,
                        a.f.max(1),
                    )
                }
                6 => {
                    let a = self.expr(ty, exact, d);
                    let b = self.expr(ty, exact, d);
                    let cond = if w > 1 && self.rng.chance(0.5) {
                        self.expr(Ty::new(Sc::B, w), true, d)
                    } else {
                        self.expr(Ty::new(Sc::B, 1), true, d)
                    };
                    E::float(
                        format!("select({}, {}, {})", a.s, b.s, cond.s),
                        ty,
                        a.exact && b.exact,
                        a.m.max(b.m),
                        a.f.max(b.f),
                    )
                }
                7 => {
                    // Discontinuous: on exact arguments only.
                    let a = self.expr(ty, true, d);
                    let f = *self
                        .rng
                        .pick(&["floor", "ceil", "round", "trunc", "fract", "sign"]);
                    let (m, fb) = match f {
                        "fract" => (1.0, a.f),
                        "sign" => (1.0, 0),
                        _ => (a.m + 1.0, 0),
                    };
                    E::float(format!("{f}({})", a.s), ty, true, m, fb)
                }
                8 => {
                    let edge = self.expr(ty, true, d);
                    let a = self.expr(ty, true, d);
                    E::float(format!("step({}, {})", edge.s, a.s), ty, true, 1.0, 0)
                }
                9 => {
                    let a = self.expr(ty, exact, d);
                    let b = self.expr(ty, exact, d);
                    let c = self.expr(ty, exact, d);
                    let (a, b) = (self.coerce(a, exact, 8.0), self.coerce(b, exact, 8.0));
                    let (a, b) = (self.narrow(a), self.narrow(b));
                    let c = self.narrow(c);
                    E::float(
                        format!("fma({}, {}, {})", a.s, b.s, c.s),
                        ty,
                        a.exact && b.exact && c.exact,
                        a.m * b.m + c.m,
                        (a.f + b.f).max(c.f),
                    )
                }
                10 => {
                    // From integers: exactly, or scaled.
                    let t = Ty::new(*self.rng.pick(&[Sc::I, Sc::U]), w);
                    let i = self.expr(t, true, d);
                    let sh = self.splat(t.with_u(), "24u");
                    if exact || self.rng.chance(0.5) {
                        E::float(
                            format!("{}(({}) >> {sh})", ty.wgsl(), i.s),
                            ty,
                            true,
                            256.0,
                            0,
                        )
                    } else {
                        E::float(
                            format!("({}({}) * {})", ty.wgsl(), i.s, self.splat(ty, "0x1p-28f")),
                            ty,
                            false,
                            16.0,
                            0,
                        )
                    }
                }
                11 => {
                    let b = self.expr(Ty::new(Sc::B, w), true, d);
                    E::float(format!("{}({})", ty.wgsl(), b.s), ty, true, 1.0, 0)
                }
                12 if w == 1 => {
                    let vw = 2 + self.rng.below(3) as u8;
                    let a = self.expr(ty.with(vw), exact, d);
                    let b = self.expr(ty.with(vw), exact, d);
                    let (a, b) = (self.coerce(a, exact, 8.0), self.coerce(b, exact, 8.0));
                    let (a, b) = (self.narrow(a), self.narrow(b));
                    E::float(
                        format!("dot({}, {})", a.s, b.s),
                        ty,
                        a.exact && b.exact,
                        vw as f64 * a.m * b.m,
                        a.f + b.f,
                    )
                }
                12 | 13 => {
                    // A matrix product: matCxR * vecC gives vecR; vecR *
                    // matCxR gives vecC.
                    let other = 2 + self.rng.below(3) as u8;
                    let left = self.rng.chance(0.5);
                    let (cols, rows) = if w == 1 {
                        (other, 2 + self.rng.below(3) as u8)
                    } else if left {
                        (other, w)
                    } else {
                        (w, other)
                    };
                    let colt = Ty::new(Sc::F, rows);
                    let mut cs = Vec::new();
                    let (mut mm, mut mf, mut ex) = (0.0f64, 0u32, true);
                    for _ in 0..cols {
                        let c = self.expr(colt, exact, d.saturating_sub(1));
                        let c = self.coerce(c, exact, 4.0);
                        let c = self.narrow(c);
                        mm = mm.max(c.m);
                        mf = mf.max(c.f);
                        ex &= c.exact;
                        cs.push(c.s);
                    }
                    let mat = format!("mat{cols}x{rows}<f32>({})", cs.join(", "));
                    let vlen = if left || w == 1 { cols } else { rows };
                    let v = self.expr(Ty::new(Sc::F, vlen), exact, d.saturating_sub(1));
                    let v = self.coerce(v, exact, 4.0);
                    let v = self.narrow(v);
                    let prod = if left || w == 1 {
                        format!("({mat} * {})", v.s)
                    } else {
                        format!("({} * {mat})", v.s)
                    };
                    let prod = if w == 1 { format!("{prod}.y") } else { prod };
                    let k = if left || w == 1 { cols } else { rows };
                    E::float(prod, ty, ex && v.exact, k as f64 * mm * v.m, mf + v.f)
                }
                14 if w == 3 => {
                    let a = self.expr(ty, exact, d);
                    let b = self.expr(ty, exact, d);
                    let (a, b) = (self.coerce(a, exact, 8.0), self.coerce(b, exact, 8.0));
                    let (a, b) = (self.narrow(a), self.narrow(b));
                    E::float(
                        format!("cross({}, {})", a.s, b.s),
                        ty,
                        a.exact && b.exact,
                        2.0 * a.m * b.m,
                        a.f + b.f,
                    )
                }
                14 | 15 => {
                    if w > 1 {
                        // A vector from scalars.
                        let mut parts = Vec::new();
                        let (mut m, mut f, mut ex) = (0.0f64, 0u32, true);
                        for _ in 0..w {
                            let c = self.expr(sc, exact, d);
                            m = m.max(c.m);
                            f = f.max(c.f);
                            ex &= c.exact;
                            parts.push(c.s);
                        }
                        E::float(format!("{}({})", ty.wgsl(), parts.join(", ")), ty, ex, m, f)
                    } else {
                        let hs: Vec<usize> = (0..self.helpers.len())
                            .filter(|&h| {
                                let hp = &self.helpers[h];
                                hp.ret == ty
                                    && (hp.ret_exact || !exact)
                                    && !hp.params.last().is_some_and(|p| p.2)
                            })
                            .collect();
                        if hs.is_empty() {
                            continue;
                        }
                        let h = *self.rng.pick(&hs);
                        self.call(h, None)
                    }
                }
                // Inexact results from here on.
                16 | 17 => {
                    let a = self.expr(ty, false, d);
                    let f = *self
                        .rng
                        .pick(&["sin", "cos", "sin", "cos", "tan", "exp", "exp2"]);
                    let (lo, hi, m) = match f {
                        "tan" => (-1.2, 1.2, 2.6),
                        "exp" => (-4.0, 3.0, 20.1),
                        "exp2" => (-5.0, 4.0, 16.0),
                        _ => (-3.0, 3.0, 1.0),
                    };
                    let (l, h) = (
                        self.splat(ty, &format!("{lo:?}f")),
                        self.splat(ty, &format!("{hi:?}f")),
                    );
                    E::float(format!("{f}(clamp({}, {l}, {h}))", a.s), ty, false, m, 0)
                }
                18 => {
                    let a = self.expr(ty, false, d);
                    let f = *self.rng.pick(&["log", "log2", "sqrt", "inverseSqrt"]);
                    let a = self.coerce(a, false, 16.0);
                    let q = self.splat(ty, "0.25f");
                    let m = match f {
                        "sqrt" => 4.2,
                        "inverseSqrt" => 2.0,
                        "log" => 2.9,
                        _ => 4.1,
                    };
                    E::float(format!("{f}(abs({}) + {q})", a.s), ty, false, m, 0)
                }
                19 => {
                    let a = self.expr(ty, false, d);
                    let b = self.expr(ty, false, d);
                    let a = self.coerce(a, false, 3.5);
                    let h = self.splat(ty, "0.5f");
                    let (l2, h2) = (self.splat(ty, "-2.0f"), self.splat(ty, "2.0f"));
                    E::float(
                        format!("pow(abs({}) + {h}, clamp({}, {l2}, {h2}))", a.s, b.s),
                        ty,
                        false,
                        16.0,
                        0,
                    )
                }
                20 => {
                    let a = self.expr(ty, false, d);
                    let b = self.expr(ty, false, d);
                    let a = self.coerce(a, false, 16.0);
                    let b = self.coerce(b, false, 16.0);
                    let one = self.splat(ty, "1.0f");
                    E::float(
                        format!("({} / (abs({}) + {one}))", a.s, b.s),
                        ty,
                        false,
                        16.0,
                        0,
                    )
                }
                21 => {
                    let a = self.expr(ty, false, d);
                    let b = self.expr(ty, false, d);
                    let t = self.expr(ty, false, d);
                    let (a, b) = (self.coerce(a, false, 16.0), self.coerce(b, false, 16.0));
                    let t = self.coerce(t, false, 2.0);
                    E::float(
                        format!("mix({}, {}, {})", a.s, b.s, t.s),
                        ty,
                        false,
                        80.0,
                        0,
                    )
                }
                22 => {
                    let a = self.expr(ty, false, d);
                    let lo = self.rng.below(5) as f32 - 3.0;
                    let hi = lo + 1.0 + self.rng.below(3) as f32;
                    let (l, h) = (
                        self.splat(ty, &format!("{lo:?}f")),
                        self.splat(ty, &format!("{hi:?}f")),
                    );
                    E::float(format!("smoothstep({l}, {h}, {})", a.s), ty, false, 1.0, 0)
                }
                23 => {
                    // Geometry: length, distance, normalize (kept away
                    // from the zero vector).
                    let vw = if w == 1 {
                        2 + self.rng.below(3) as u8
                    } else {
                        w
                    };
                    let vt = Ty::new(Sc::F, vw);
                    let a = self.expr(vt, false, d);
                    let a = self.coerce(a, false, 16.0);
                    if w == 1 {
                        if self.rng.chance(0.5) {
                            E::float(format!("length({})", a.s), ty, false, 32.0, 0)
                        } else {
                            let b = self.expr(vt, false, d);
                            let b = self.coerce(b, false, 16.0);
                            E::float(format!("distance({}, {})", a.s, b.s), ty, false, 64.0, 0)
                        }
                    } else {
                        let mut off = vec!["0.0f".to_string(); w as usize];
                        off[self.rng.below(w as usize)] = format!("{:?}f", a.m + 1.0);
                        E::float(
                            format!("normalize({} + {}({}))", a.s, ty.wgsl(), off.join(", ")),
                            ty,
                            false,
                            1.0,
                            0,
                        )
                    }
                }
                24 => {
                    // An unguarded built-in on an exact argument: out of
                    // domain for some samples, which the test discards.
                    let mut a = self.expr(ty, true, d);
                    if self.is_const(&a.s) {
                        a = self.nonconst(ty, true);
                    }
                    let f = *self
                        .rng
                        .pick(&["sqrt", "log", "log2", "sin", "cos", "inverseSqrt"]);
                    let a = self.coerce(a, true, EXACT_M);
                    E::float(format!("{f}({})", a.s), ty, false, 8.5, 0)
                }
                25 => {
                    let a = self.expr(ty, false, d);
                    let b = self.expr(ty, true, d);
                    let a = self.coerce(a, false, 16.0);
                    let b = self.coerce(b, true, EXACT_M);
                    E::float(format!("({} / {})", a.s, b.s), ty, false, 256.0, 0)
                }
                26 => {
                    let a = self.expr(ty, true, d);
                    let b = self.expr(ty, false, d);
                    let a = self.coerce(a, true, 8.0);
                    let b = self.coerce(b, false, 3.0);
                    E::float(format!("pow({}, {})", a.s, b.s), ty, false, 4096.0, 0)
                }
                _ => {
                    let a = self.expr(ty, exact, d);
                    let b = self.expr(ty, exact, d);
                    self.arith(a, b)
                }
            };
            return e;
        }
    }

    fn int_expr(&mut self, ty: Ty, d: u32) -> E {
        let w = ty.w;
        let u = ty.with_u();
        loop {
            let c = self.rng.below(18);
            let e = match c {
                0..=3 => {
                    let a = self.expr(ty, true, d);
                    let b = self.expr(ty, true, d);
                    let op = *self
                        .rng
                        .pick(&["+", "-", "*", "/", "%", "&", "|", "^", "/", "%"]);
                    self.int_binary(a, b, op)
                }
                4 => {
                    let a = self.expr(ty, true, d);
                    let s = self.expr(u, true, d);
                    let op = self.rng.pick(&["<<", ">>"]);
                    E::new(
                        format!("({} {op} ({} & {}))", a.s, s.s, self.splat(u, "31u")),
                        ty,
                    )
                }
                5 => {
                    let a = self.expr(ty, true, d);
                    if ty.s == Sc::I && self.rng.chance(0.5) {
                        E::new(format!("(-{})", a.s), ty)
                    } else {
                        E::new(format!("(~{})", a.s), ty)
                    }
                }
                6 => {
                    let a = self.expr(ty, true, d);
                    let f = *self.rng.pick(&[
                        "countOneBits",
                        "reverseBits",
                        "countLeadingZeros",
                        "countTrailingZeros",
                        "firstLeadingBit",
                        "firstTrailingBit",
                        "abs",
                    ]);
                    E::new(format!("{f}({})", a.s), ty)
                }
                7 => {
                    let a = self.expr(ty, true, d);
                    let b = self.expr(ty, true, d);
                    let f = self.rng.pick(&["min", "max"]);
                    E::new(format!("{f}({}, {})", a.s, b.s), ty)
                }
                8 => {
                    let a = self.expr(ty, true, d);
                    let lo = self.rng.below(20) as i64 - if ty.s == Sc::I { 10 } else { 0 };
                    let hi = lo + self.rng.below(20) as i64;
                    let sfx = if ty.s == Sc::I { "i" } else { "u" };
                    let lit = |v: i64| {
                        if v < 0 {
                            format!("({v}{sfx})")
                        } else {
                            format!("{v}{sfx}")
                        }
                    };
                    E::new(
                        format!(
                            "clamp({}, {}, {})",
                            a.s,
                            self.splat(ty, &lit(lo)),
                            self.splat(ty, &lit(hi))
                        ),
                        ty,
                    )
                }
                9 => {
                    let a = self.expr(ty, true, d);
                    let o = self.expr(Ty::new(Sc::U, 1), true, d);
                    let n = self.expr(Ty::new(Sc::U, 1), true, d);
                    let (o, n) = if self.rng.chance(0.7) {
                        (format!("({} & 31u)", o.s), format!("({} & 31u)", n.s))
                    } else {
                        (o.s, n.s)
                    };
                    if self.rng.chance(0.5) {
                        E::new(format!("extractBits({}, {o}, {n})", a.s), ty)
                    } else {
                        let b = self.expr(ty, true, d);
                        E::new(format!("insertBits({}, {}, {o}, {n})", a.s, b.s), ty)
                    }
                }
                10 => {
                    let a = self.expr(ty, true, d);
                    let b = self.expr(ty, true, d);
                    let cond = if w > 1 && self.rng.chance(0.5) {
                        self.expr(Ty::new(Sc::B, w), true, d)
                    } else {
                        self.expr(Ty::new(Sc::B, 1), true, d)
                    };
                    E::new(format!("select({}, {}, {})", a.s, b.s, cond.s), ty)
                }
                11 => {
                    // Conversions between the integer types.
                    let other = Ty::new(if ty.s == Sc::I { Sc::U } else { Sc::I }, w);
                    let a = self.expr(other, true, d);
                    if self.rng.chance(0.5) {
                        E::new(format!("{}({})", ty.wgsl(), a.s), ty)
                    } else {
                        E::new(format!("bitcast<{}>({})", ty.wgsl(), a.s), ty)
                    }
                }
                12 => {
                    // From exact floats: truncation, saturation of
                    // negatives to u32, bits.
                    let a = self.expr(Ty::new(Sc::F, w), true, d);
                    match self.rng.below(3) {
                        0 => {
                            let a = self.coerce(a, true, EXACT_M);
                            E::new(format!("bitcast<{}>(abs({}))", ty.wgsl(), a.s), ty)
                        }
                        _ => E::new(format!("{}({})", ty.wgsl(), a.s), ty),
                    }
                }
                13 => {
                    let b = self.expr(Ty::new(Sc::B, w), true, d);
                    E::new(format!("{}({})", ty.wgsl(), b.s), ty)
                }
                14 if w == 1 => {
                    let vw = 2 + self.rng.below(3) as u8;
                    let a = self.expr(ty.with(vw), true, d);
                    let b = self.expr(ty.with(vw), true, d);
                    E::new(format!("dot({}, {})", a.s, b.s), ty)
                }
                14 if ty.s == Sc::I => {
                    let a = self.expr(ty, true, d);
                    E::new(format!("sign({})", a.s), ty)
                }
                15 if w > 1 => {
                    let parts: Vec<String> =
                        (0..w).map(|_| self.expr(ty.scalar(), true, d).s).collect();
                    E::new(format!("{}({})", ty.wgsl(), parts.join(", ")), ty)
                }
                15 => {
                    let hs: Vec<usize> = (0..self.helpers.len())
                        .filter(|&h| {
                            self.helpers[h].ret == ty
                                && !self.helpers[h].params.last().is_some_and(|p| p.2)
                        })
                        .collect();
                    if hs.is_empty() {
                        continue;
                    }
                    let h = *self.rng.pick(&hs);
                    self.call(h, None)
                }
                16 if ty.s == Sc::I => {
                    // Division's corner: i32::MIN by -1.
                    let b = self.expr(ty, true, d);
                    let min = self.splat(ty, "bitcast<i32>(0x80000000u)");
                    let op = self.rng.pick(&["/", "%"]);
                    E::new(
                        format!("({min} {op} ({} | {}))", b.s, self.splat(ty, "-1i")),
                        ty,
                    )
                }
                _ => {
                    let a = self.expr(ty, true, d);
                    let b = self.expr(ty, true, d);
                    let op = *self.rng.pick(&["+", "-", "*", "^"]);
                    self.int_binary(a, b, op)
                }
            };
            return e;
        }
    }

    fn bool_expr(&mut self, ty: Ty, d: u32) -> E {
        let w = ty.w;
        let c = self.rng.below(8);
        match c {
            0..=2 => {
                // Comparisons of integers or exact floats.
                let s = *self.rng.pick(&[Sc::I, Sc::U, Sc::F]);
                let vw = if w == 1 && self.rng.chance(0.3) {
                    2 + self.rng.below(3) as u8
                } else {
                    w
                };
                let t = Ty::new(s, vw);
                let a = self.expr(t, true, d);
                let mut b = self.expr(t, true, d);
                if a.konst && b.konst {
                    b = self.nonconst(t, true);
                }
                let op = self.rng.pick(&["<", "<=", ">", ">=", "==", "!="]);
                let cmp = format!("({} {op} {})", a.s, b.s);
                if vw != w {
                    let f = self.rng.pick(&["any", "all"]);
                    E::new(format!("{f}{cmp}"), ty)
                } else {
                    E::new(cmp, ty)
                }
            }
            3 => {
                let a = self.expr(ty, true, d);
                E::new(format!("(!{})", a.s), ty)
            }
            4 if w == 1 => {
                let a = self.expr(ty, true, d);
                let b = self.expr(ty, true, d);
                let op = self.rng.pick(&["&&", "||", "==", "!=", "&", "|"]);
                E::new(format!("({} {op} {})", a.s, b.s), ty)
            }
            4 | 5 => {
                let a = self.expr(ty, true, d);
                let b = self.expr(ty, true, d);
                let cond = self.expr(Ty::new(Sc::B, 1), true, d);
                E::new(format!("select({}, {}, {})", a.s, b.s, cond.s), ty)
            }
            6 if w == 1 => {
                let vw = 2 + self.rng.below(3) as u8;
                let a = self.expr(Ty::new(Sc::B, vw), true, d);
                let f = self.rng.pick(&["any", "all"]);
                E::new(format!("{f}({})", a.s), ty)
            }
            _ => {
                let a = self.expr(ty, true, d);
                let b = self.expr(ty, true, d);
                if w == 1 {
                    E::new(format!("({} != {})", a.s, b.s), ty)
                } else {
                    E::new(format!("({} == {})", a.s, b.s), ty)
                }
            }
        }
    }
}

impl Ty {
    /// The same width in `u32` (shift amounts).
    fn with_u(self) -> Ty {
        Ty::new(Sc::U, self.w)
    }
}
