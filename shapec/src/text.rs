//! Text from the command line shown back in messages: control characters
//! escaped, so that a message never moves the cursor, rings, or clears a
//! terminal.

use std::borrow::Cow;

/// `text` with every control character written as an escape (`\n`, `\t`,
/// `\r`, `\u{1b}`, ...); unchanged when it has none.
///
/// ```
/// use shapec::text::escaped;
/// assert_eq!(escaped("2,3"), "2,3");
/// assert_eq!(escaped("2\x1b[2J,3\n"), "2\\u{1b}[2J,3\\n");
/// ```
pub fn escaped(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}
