//! The graph's tensor and operation lists: appended to once per tensor
//! or operation, read by index, and cloned by every `Graph::solve` (the
//! `SolvedGraph` keeps a copy).
//!
//! Shared chunks of [`CHUNK`] entries behind a flat list, and an unshared
//! tail, as the solver's stores keep their entries (see
//! `shape-solver/src/store/chunks.rs`): a clone copies one pointer per
//! chunk. Why not `imbl::Vector`: its 64-entry chunks are each one of
//! glibc's large requests (3.5 KB for tensors), which make malloc merge
//! every small block freed since the last one; with the solver's stores
//! in large chunks, the graph's lists made most of those requests.

use std::sync::Arc;

/// Entries per shared chunk.
const CHUNK: usize = 1024;

/// See the module documentation.
pub(crate) struct ChunkList<T> {
    /// Full chunks of `CHUNK` entries each.
    full: Vec<Arc<[T]>>,
    /// The entries after them, fewer than `CHUNK`.
    tail: Vec<T>,
}

impl<T> Default for ChunkList<T> {
    fn default() -> Self {
        ChunkList {
            full: Vec::new(),
            tail: Vec::new(),
        }
    }
}

/// Shares the full chunks and copies the tail.
impl<T: Clone> Clone for ChunkList<T> {
    fn clone(&self) -> Self {
        ChunkList {
            full: self.full.clone(),
            tail: self.tail.clone(),
        }
    }
}

/// As a list, like the `imbl::Vector` it replaces.
impl<T: std::fmt::Debug> std::fmt::Debug for ChunkList<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T> ChunkList<T> {
    /// The number of entries.
    pub fn len(&self) -> usize {
        self.full.len() * CHUNK + self.tail.len()
    }

    /// Entry `i`, if there is one.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&T> {
        match self.full.get(i / CHUNK) {
            Some(chunk) => chunk.get(i % CHUNK),
            None => self.tail.get(i - self.full.len() * CHUNK),
        }
    }

    /// Entry `i` to write, its chunk copied first if a clone shares it.
    pub fn get_mut(&mut self, i: usize) -> Option<&mut T>
    where
        T: Clone,
    {
        let start = self.full.len() * CHUNK;
        match self.full.get_mut(i / CHUNK) {
            Some(chunk) => {
                if Arc::get_mut(chunk).is_none() {
                    *chunk = chunk.iter().cloned().collect();
                }
                Arc::get_mut(chunk)?.get_mut(i % CHUNK)
            }
            None => self.tail.get_mut(i - start),
        }
    }

    /// Appends an entry.
    pub fn push_back(&mut self, t: T) {
        self.tail.push(t);
        if self.tail.len() == CHUNK {
            let full: Arc<[T]> = self.tail.drain(..).collect();
            self.full.push(full);
        }
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = &T> + '_ {
        self.full.iter().flat_map(|c| c.iter()).chain(&self.tail)
    }
}

impl<T> std::ops::Index<usize> for ChunkList<T> {
    type Output = T;

    fn index(&self, i: usize) -> &T {
        self.get(i).expect("an index below the length")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_iterates_like_a_vec() {
        let mut l = ChunkList::default();
        let total = 2 * CHUNK + 7;
        for i in 0..total {
            l.push_back(i);
        }
        let copy = l.clone();
        l.push_back(total);
        assert_eq!(l.len(), total + 1);
        assert_eq!(copy.len(), total);
        assert!((0..=total).all(|i| l[i] == i && l.get(i) == Some(&i)));
        assert_eq!(l.get(total + 1), None);
        *l.get_mut(3).unwrap() = 0;
        *l.get_mut(total).unwrap() = 0;
        assert_eq!((l[3], copy[3], l[total]), (0, 3, 0));
        *l.get_mut(3).unwrap() = 3;
        *l.get_mut(total).unwrap() = total;
        assert!(l.iter().copied().eq(0..=total));
        assert_eq!(
            format!("{:?}", copy).len(),
            format!("{:?}", (0..total).collect::<Vec<_>>()).len()
        );
    }
}
