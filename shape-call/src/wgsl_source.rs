//! WGSL text handed to naga. naga's front end and validator recurse once
//! per level of nesting, so a hostile source (20,000 terms in one sum)
//! overflows the stack and aborts the process. Here a scan first refuses
//! statements with more than [`MAX_NESTING`] operators and blocks nested
//! deeper than that, and naga then runs on a thread of its own whose
//! stack has room for the nesting the scan lets through.

use crate::error::CallError;

/// At most this many operators (and opening parentheses and brackets) in
/// one statement, and this many nested blocks: far past what a shader
/// writes, far below what naga's recursion can take on
/// [`PARSER_STACK`].
pub(crate) const MAX_NESTING: usize = 1000;

/// The stack of the thread naga runs on.
const PARSER_STACK: usize = 64 << 20;

/// Parses `source` with naga and, when `validate`, validates it; errors
/// are naga's, with the source quoted.
pub(crate) fn parse(source: &str, validate: bool) -> Result<naga::Module, CallError> {
    check_nesting(source)?;
    let work = move || -> Result<naga::Module, CallError> {
        let module = naga::front::wgsl::parse_str(source)
            .map_err(|e| CallError::Wgsl(e.emit_to_string(source)))?;
        if validate {
            naga::valid::Validator::new(
                naga::valid::ValidationFlags::all(),
                naga::valid::Capabilities::all(),
            )
            .validate(&module)
            .map_err(|e| CallError::Wgsl(e.emit_to_string(source)))?;
        }
        Ok(module)
    };
    std::thread::scope(|scope| {
        match std::thread::Builder::new()
            .name("naga".into())
            .stack_size(PARSER_STACK)
            .spawn_scoped(scope, work)
        {
            Ok(handle) => handle
                .join()
                .unwrap_or_else(|_| Err(CallError::Wgsl("naga failed on this source".into()))),
            // No thread to be had: the caller's stack, which the scan's
            // limit keeps to modest depths.
            Err(_) => work(),
        }
    })
}

/// Refuses a statement with more than [`MAX_NESTING`] operators or blocks
/// nested deeper than that, naming its line.
fn check_nesting(source: &str) -> Result<(), CallError> {
    let (mut ops, mut depth, mut line, mut start) = (0usize, 0usize, 1usize, 1usize);
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\n' => line += 1,
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        line += 1;
                        break;
                    }
                }
                continue;
            }
            '/' if chars.peek() == Some(&'*') => {
                // A block comment (WGSL's nest; a banner of stars is no
                // operator either way).
                chars.next();
                let mut level = 1usize;
                while let Some(c) = chars.next() {
                    match (c, chars.peek()) {
                        ('\n', _) => line += 1,
                        ('*', Some('/')) => {
                            chars.next();
                            level -= 1;
                            if level == 0 {
                                break;
                            }
                        }
                        ('/', Some('*')) => {
                            chars.next();
                            level += 1;
                        }
                        _ => {}
                    }
                }
                continue;
            }
            ';' | '{' | '}' => {
                ops = 0;
                start = line;
                match c {
                    '{' => depth += 1,
                    '}' => depth = depth.saturating_sub(1),
                    _ => {}
                }
                if depth > MAX_NESTING {
                    return Err(CallError::Wgsl(format!(
                        "blocks nested more than {MAX_NESTING} deep at line {line}"
                    )));
                }
            }
            '+' | '-' | '*' | '/' | '%' | '&' | '|' | '^' | '<' | '>' | '!' | '~' | '(' | '[' => {
                ops += 1;
                if ops > MAX_NESTING {
                    return Err(CallError::Wgsl(format!(
                        "the statement from line {start} has more than {MAX_NESTING} operators; split it with `let`"
                    )));
                }
            }
            _ => {}
        }
    }
    Ok(())
}
