//! A persistent vector in two levels: shared chunks of [`CHUNK`] entries
//! behind one flat list, and the last, partly filled chunk kept apart.
//! For the lists that grow by one entry per variable, origin, tensor or
//! operation and are cloned about once per solve: the solver's stores and
//! origin table, the graph's tensors and operations.
//!
//! Why not `imbl::Vector`: a store only ever appends, reads and writes by
//! index, and truncates, and it is cloned about once per solve. A read
//! here is two dependent loads (the list, then the chunk) where the RRB
//! tree walks three or four levels and their size tables: at a million
//! operations those walks were a twentieth of the solver's time. A clone
//! copies the list of chunk pointers (16 bytes per chunk: 64 KB for four
//! million variables) instead of one root, and the tail.
//!
//! Chunks are large (1,024 entries, 24 KB of dims): each is one request
//! of glibc's large size, which makes malloc merge every small block
//! freed since the last one (`malloc_consolidate`); with 64-entry chunks
//! that came every few operations, and 1,024 took a tenth off a
//! million-operation round (user time 10.5 -> 9.5 s for both rounds).
//! The price is that a write to a chunk a clone shares copies the whole
//! chunk (`imbl` copied 64 entries and a path of nodes): a graph extended
//! while an earlier `SolvedGraph` of it is alive pays that once per chunk
//! it writes to. Finalization writes to an overlay, never to the chunks.

use std::sync::Arc;

/// Entries per shared chunk.
pub const CHUNK: usize = 1024;

/// A persistent vector of shared chunks (see the module documentation):
/// cloning it shares every full chunk, and a write to a shared chunk
/// copies that chunk first.
///
/// ```
/// use shape_core::chunks::ChunkVec;
/// let mut v = ChunkVec::default();
/// for i in 0..3000u32 {
///     v.push_back(i);
/// }
/// let earlier = v.clone();
/// *v.get_mut(5).unwrap() = 0;
/// assert_eq!((v[5], earlier[5], v.len()), (0, 5, 3000));
/// assert!(earlier.iter().copied().eq(0..3000));
/// ```
pub struct ChunkVec<E> {
    /// Full chunks of [`CHUNK`] entries each.
    full: Vec<Arc<[E]>>,
    /// The entries after the full chunks, fewer than [`CHUNK`]; owned by
    /// this vector alone, so appending never checks for sharing.
    tail: Vec<E>,
}

impl<E> Default for ChunkVec<E> {
    fn default() -> ChunkVec<E> {
        ChunkVec {
            full: Vec::new(),
            tail: Vec::new(),
        }
    }
}

/// Shares the full chunks and copies the tail (fewer than [`CHUNK`]
/// entries).
impl<E: Clone> Clone for ChunkVec<E> {
    fn clone(&self) -> ChunkVec<E> {
        ChunkVec {
            full: self.full.clone(),
            tail: self.tail.clone(),
        }
    }
}

/// As a list.
impl<E: std::fmt::Debug> std::fmt::Debug for ChunkVec<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<E> ChunkVec<E> {
    /// The number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.full.len() * CHUNK + self.tail.len()
    }

    /// Whether it has no entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Entry `i`, if there is one.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&E> {
        match self.full.get(i / CHUNK) {
            Some(chunk) => chunk.get(i % CHUNK),
            None => self.tail.get(i - self.full.len() * CHUNK),
        }
    }

    /// The last entry, if there is one.
    pub fn last(&self) -> Option<&E> {
        self.get(self.len().checked_sub(1)?)
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = &E> + '_ {
        self.full.iter().flat_map(|c| c.iter()).chain(&self.tail)
    }
}

impl<E> std::ops::Index<usize> for ChunkVec<E> {
    type Output = E;

    /// Entry `i`; panics past the end, as a slice does.
    fn index(&self, i: usize) -> &E {
        self.get(i).expect("an index below the length")
    }
}

impl<E: Clone> ChunkVec<E> {
    /// Entry `i` to write, its chunk copied first if a clone shares it.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<&mut E> {
        let start = self.full.len() * CHUNK;
        match self.full.get_mut(i / CHUNK) {
            Some(chunk) => {
                if Arc::get_mut(chunk).is_none() {
                    *chunk = Arc::from(chunk.to_vec());
                }
                Arc::get_mut(chunk)?.get_mut(i % CHUNK)
            }
            None => self.tail.get_mut(i - start),
        }
    }

    /// Appends an entry.
    pub fn push_back(&mut self, e: E) {
        // The tail grows as a `Vec` does (a small solver holds little) up
        // to `CHUNK`, and keeps that buffer from then on.
        self.tail.push(e);
        if self.tail.len() == CHUNK {
            // Moved into one allocation of the exact size; the tail keeps
            // its buffer for the next chunk.
            let full: Arc<[E]> = self.tail.drain(..).collect();
            self.full.push(full);
        }
    }

    /// Removes every entry from `n` on.
    pub fn truncate(&mut self, n: usize) {
        if n >= self.len() {
            return;
        }
        let whole = n / CHUNK;
        if whole < self.full.len() {
            // The chunk that `n` falls in becomes the tail.
            self.tail = self.full[whole][..n % CHUNK].to_vec();
            self.full.truncate(whole);
        } else {
            self.tail.truncate(n - whole * CHUNK);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_writes_and_truncates_like_a_vec() {
        let total = 2 * CHUNK + 300;
        let mut v = ChunkVec::default();
        let mut model = Vec::new();
        for i in 0..total as u32 {
            v.push_back(i);
            model.push(i);
        }
        assert_eq!(v.len(), total);
        assert_eq!(v.last(), model.last());
        let shared = v.clone();
        for i in (0..total).step_by(7) {
            *v.get_mut(i).unwrap() += 100_000;
            model[i] += 100_000;
        }
        assert!((0..total).all(|i| v.get(i) == model.get(i)));
        // The clone kept its values: the chunks written were copied.
        assert!((0..total as u32).all(|i| shared.get(i as usize) == Some(&i)));
        assert_eq!(v.get(total), None);
        for n in [total - 1, 2 * CHUNK, CHUNK + 5, CHUNK, CHUNK - 1, 1, 0] {
            v.truncate(n);
            model.truncate(n);
            assert_eq!(v.len(), n);
            assert!((0..n + 2).all(|i| v.get(i) == model.get(i)));
            v.push_back(7);
            model.push(7);
            v.truncate(n);
            model.truncate(n);
        }
        v.push_back(5);
        assert_eq!(v.get(0), Some(&5));
        assert_eq!(shared.len(), total);
    }

    #[test]
    fn reads_and_iterates_like_a_vec() {
        let mut l = ChunkVec::default();
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
