//! A dependent crate: `docs/rust-guide.md`'s Rust blocks are its
//! doc-tests, compiled against the library's public API as a user's crate
//! would be (see the guide).
#![forbid(unsafe_code)]
#![doc = include_str!("../../../docs/rust-guide.md")]
