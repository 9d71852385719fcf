//! Free buffers by length, for reuse.

use std::collections::HashMap;

/// Free buffers by length, for reuse.
pub(crate) struct Pool<T> {
    free: HashMap<u64, Vec<T>>,
}

impl<T> Pool<T> {
    pub(crate) fn new() -> Pool<T> {
        Pool {
            free: HashMap::new(),
        }
    }

    pub(crate) fn take(&mut self, len: u64) -> Option<T> {
        self.free.get_mut(&len)?.pop()
    }

    pub(crate) fn put(&mut self, len: u64, buffer: T) {
        self.free.entry(len).or_default().push(buffer);
    }
}
