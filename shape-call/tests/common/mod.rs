//! Helpers the call tests share.

use shape_call::{Arg, CallArgs, CallError, Function, Resolution};

/// `f` called with `args` (`name=ARG` or positional `ARG`), resolved.
pub fn call(f: &Function, args: &[&str]) -> Result<Resolution, CallError> {
    let scope = f.scope();
    let mut a = CallArgs::new();
    for text in args {
        match text.split_once('=') {
            Some((name, arg)) if !name.contains('(') && !name.contains('{') => {
                a = a.named(name, Arg::parse(arg, &scope).unwrap());
            }
            _ => a = a.arg(Arg::parse(text, &scope).unwrap()),
        }
    }
    f.resolve(&a)
}

pub fn func(sig: &str) -> Function {
    Function::parse(sig).unwrap()
}
