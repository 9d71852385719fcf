//! `shapec call`: resolving a vectorized call (slangpy's call-shape
//! rules, `shape_call`) from the command line.
//!
//! ```
//! use shapec::call::{resolve, Request};
//! let request = Request {
//!     signature: "float dot(float3 a, float3 b)",
//!     overloads: &[],
//!     args: &["a=tensor(100,3)".into(), "b=float3".into()],
//!     maps: &[],
//!     specializations: &[],
//!     vmap: None,
//!     allow_races: false,
//! };
//! let json = resolve(&request, true).unwrap();
//! assert!(json.starts_with(r#"{"args":{"a":{"arg_shape":[100],"#));
//! ```

use serde_json::{json, Map, Value};
use shape_call::{Arg, ArgMap, CallArgs, Function, ResolvedArg, Signature};

use crate::error::CliError;
use crate::run::tuple;

/// What `shapec call` was asked.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// The first overload's signature.
    pub signature: &'a str,
    /// More overloads.
    pub overloads: &'a [String],
    /// `NAME=ARG` or positional `ARG`.
    pub args: &'a [String],
    /// `NAME=(..)` or `NAME=TYPE`.
    pub maps: &'a [String],
    /// `NAME=VALUE` or `f<VALUE, ..>`.
    pub specializations: &'a [String],
    /// `(N),(M)->(N,M)`.
    pub vmap: Option<&'a str>,
    /// Whether outputs written by several call indices are accepted.
    pub allow_races: bool,
}

/// Resolves the call; returns the text (or JSON) to print.
pub fn resolve(request: &Request<'_>, as_json: bool) -> Result<String, CliError> {
    let mut f = Function::parse(request.signature)?;
    for s in request.overloads {
        f = f.overload(Signature::parse(s)?);
    }
    // `NAME=MAP` maps by name; a map without a name maps the next
    // parameter by position (slangpy's `map(float, float2)`).
    let mut position = 0;
    for m in request.maps {
        match m.split_once('=') {
            Some((name, map)) if !name.trim().starts_with('(') => {
                f = f.map(name.trim(), ArgMap::parse(map)?);
            }
            _ => {
                f = f.map_positional(position, ArgMap::parse(m)?);
                position += 1;
            }
        }
    }
    for sp in request.specializations {
        f = f.specialized(sp)?;
    }
    if let Some(v) = request.vmap {
        f = f.vmap(v)?;
    }
    if request.allow_races {
        f = f.allowing_races();
    }
    let scope = f.scope();
    let mut args = CallArgs::new();
    for a in request.args {
        // `NAME=ARG` when what precedes `=` is a plain name.
        match a.split_once('=') {
            Some((name, arg))
                if !name.is_empty()
                    && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                args = args.named(name, Arg::parse(arg, &scope)?);
            }
            _ => args = args.arg(Arg::parse(a, &scope)?),
        }
    }
    let r = f.resolve(&args)?;
    if as_json {
        let mut named = Map::new();
        for a in &r.args {
            named.insert(a.path.clone(), arg_json(a));
        }
        let v = json!({
            "call_shape": r.call_shape,
            "overload": r.overload,
            "args": named,
            "result": r.result.as_ref().map_or(Value::Null, arg_json),
        });
        Ok(v.to_string())
    } else {
        let mut lines = vec![
            format!("overload: {}", r.overload),
            format!("call shape: {}", tuple(&r.call_shape)),
        ];
        lines.extend(r.args.iter().map(arg_text));
        lines.extend(r.result.iter().map(arg_text));
        Ok(lines.join("\n"))
    }
}

fn arg_json(a: &ResolvedArg) -> Value {
    json!({
        "type": a.ty,
        "type_shape": a.type_shape,
        "arg_shape": a.arg_shape,
        "call_dims": a.call_dims,
        "mapping": a.mapping,
    })
}

fn arg_text(a: &ResolvedArg) -> String {
    format!(
        "{}: {}, type shape {}, argument shape {} on call dims {}{}",
        a.path,
        a.ty,
        tuple(&a.type_shape),
        tuple(&a.arg_shape),
        tuple(&a.mapping.iter().map(|&m| m as u64).collect::<Vec<_>>()),
        if a.allocated { " (allocated)" } else { "" }
    )
}
