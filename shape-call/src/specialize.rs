//! Explicit specialization of a generic function: `f<8>`,
//! `add<float, 3>`, or one generic parameter at a time (`N=8`). A kernel's
//! types and sizes are fixed when it is generated, so a generic size that
//! no value or element type fixes must be given this way.

use std::sync::Arc;

use super::error::{quoted, CallError};
use super::signature::Signature;
use super::syntax::{parse_type, TypeScope};
use super::types::ParamType;

/// What a generic parameter is specialized to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GenericArg {
    /// A type, for a generic type parameter (`T = float`).
    Type(ParamType),
    /// A size, for a generic size parameter (`let N : int`, `N = 8`).
    Size(u64),
}

impl GenericArg {
    /// Reads `8` as a size, anything else as a type.
    ///
    /// ```
    /// use shape_call::{GenericArg, ParamType, Scalar};
    /// assert_eq!(GenericArg::parse("8").unwrap(), GenericArg::Size(8));
    /// assert_eq!(GenericArg::parse("float").unwrap(), GenericArg::Type(ParamType::Scalar(Scalar::Float)));
    /// ```
    pub fn parse(text: &str) -> Result<GenericArg, CallError> {
        let t = text.trim();
        if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
            return t.parse().map(GenericArg::Size).map_err(|_| {
                CallError::syntax(text, 0, "too large a size for a generic size".into())
            });
        }
        parse_type(t, &TypeScope::new()).map(GenericArg::Type)
    }
}

/// Reads a specialization: `N=8`, `T=float`, or the function's name with
/// its generic arguments in declaration order, `add<float, 3>` (checked
/// against `sig`, the first overload).
pub(crate) fn parse_specialization(
    text: &str,
    sig: &Signature,
) -> Result<Vec<(Arc<str>, GenericArg)>, CallError> {
    let bad = |message: String| CallError::InvalidSpecialization {
        text: quoted(text),
        message,
    };
    let t = text.trim();
    if let Some((name, value)) = t.split_once('=') {
        return Ok(vec![(Arc::from(name.trim()), GenericArg::parse(value)?)]);
    }
    let (name, rest) = t
        .split_once('<')
        .ok_or_else(|| bad("write `NAME=VALUE` or `f<VALUE, ..>`".into()))?;
    if name.trim() != &*sig.name {
        return Err(bad(format!("the function is `{}`", sig.name)));
    }
    let inner = rest
        .trim_end()
        .strip_suffix('>')
        .ok_or_else(|| bad("the generic arguments end with `>`".into()))?;
    let values = split_top_level(inner);
    let generics: Vec<&Arc<str>> = sig.scope.generics().map(|(g, _)| g).collect();
    if values.len() != generics.len() {
        return Err(bad(format!(
            "`{}` has {} generic parameters, {} given",
            sig.name,
            generics.len(),
            values.len()
        )));
    }
    generics
        .into_iter()
        .zip(values)
        .map(|(g, v)| Ok((g.clone(), GenericArg::parse(v)?)))
        .collect()
}

/// `float, vector<float,3>, 4` split at the commas outside `<..>`.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut items = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in text.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                items.push(text[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = text[start..].trim();
    if !last.is_empty() || !items.is_empty() {
        items.push(last);
    }
    items
}

/// Checks that each specialization names a generic parameter of some
/// overload, of its kind (a type for a type, a size for a size), once.
pub(crate) fn check_specializations(
    specializations: &[(Arc<str>, GenericArg)],
    overloads: &[Signature],
) -> Result<(), CallError> {
    for (k, (name, arg)) in specializations.iter().enumerate() {
        let bad = |message: String| CallError::InvalidSpecialization {
            text: quoted(name),
            message,
        };
        if specializations[..k].iter().any(|(n, _)| n == name) {
            return Err(bad("it is specialized twice".into()));
        }
        if *arg == GenericArg::Size(0) {
            return Err(bad("a generic size is at least 1".into()));
        }
        let kinds: Vec<bool> = overloads
            .iter()
            .flat_map(|s| {
                s.scope
                    .generics()
                    .filter(|(g, _)| *g == name)
                    .map(|(_, size)| size)
            })
            .collect();
        let wanted_size = matches!(arg, GenericArg::Size(_));
        if kinds.is_empty() {
            let known: Vec<String> = overloads
                .iter()
                .flat_map(|s| s.scope.generics().map(|(g, _)| g.to_string()))
                .collect();
            return Err(bad(format!(
                "no overload has a generic parameter of that name (it has: {})",
                if known.is_empty() {
                    "none".to_owned()
                } else {
                    known.join(", ")
                }
            )));
        }
        if !kinds.contains(&wanted_size) {
            return Err(bad(if wanted_size {
                "it is a generic type: give a type".into()
            } else {
                "it is a generic size: give a number".into()
            }));
        }
    }
    Ok(())
}
