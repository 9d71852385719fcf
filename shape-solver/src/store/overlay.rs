//! Entries written over a persistent map, leaving the map as it was.
//!
//! Why: finalization rewrites nearly every entry of a state that the graph
//! keeps unfinalized (so that it can be extended and solved again). Writing
//! into the shared map copies each 64-entry chunk on its first write, and
//! the copy clones every entry's `Arc`: one write to a separate heap
//! allocation per variable, scattered over the whole state. That cost grew
//! much faster than the state (25-30 times from 1,000 to 10,000
//! operations). Here an entry is copied only when it is written, into a
//! dense vector that nothing else holds.

use imbl::Vector;
use rustc_hash::FxHashMap;

#[derive(Clone, Debug)]
pub(crate) struct Overlay<E> {
    /// Variables from this id on were created after the overlay began:
    /// nothing else holds their entries, so they are written in the map.
    /// Below it, nothing grows, so the vectors are never reallocated
    /// (which would copy megabytes at a time).
    covered: usize,
    /// One bit per covered variable: whether `entries` holds it. Small
    /// enough to stay in cache, so that reading an entry that was never
    /// written touches the map only.
    written: Vec<u64>,
    /// For each covered variable that was written, where in `entries` its
    /// entry is: a hash map, as few are written (a `u32` for every covered
    /// variable was 4 MB at 100,000 operations, for 100,000 writes).
    at: FxHashMap<u32, u32>,
    /// The entries written, in the order of their first writes: a
    /// finalization writes few of the entries it covers (some 1% of the
    /// dims and 20% of the rows of the benchmark network), and a dense
    /// vector of every covered entry was a tenth of its memory.
    entries: Vec<E>,
}

impl<E: Clone> Overlay<E> {
    /// An overlay over the first `covered` entries of a map.
    pub fn new(covered: usize, expected: usize) -> Overlay<E> {
        Overlay {
            covered,
            written: vec![0; covered.div_ceil(64)],
            at: FxHashMap::with_capacity_and_hasher(expected, Default::default()),
            entries: Vec::with_capacity(expected),
        }
    }

    fn is_written(&self, i: usize) -> bool {
        i < self.covered && self.written[i / 64] & (1 << (i % 64)) != 0
    }

    /// The entry written here for `i`, if any.
    pub fn get(&self, i: usize) -> Option<&E> {
        if self.is_written(i) {
            let at = *self.at.get(&(i as u32))?;
            self.entries.get(at as usize)
        } else {
            None
        }
    }

    /// Where entry `i` is written (copied here from `map` on the first
    /// write).
    pub fn slot<'a>(&'a mut self, map: &'a mut Vector<E>, i: usize) -> Option<&'a mut E> {
        if i >= self.covered {
            return map.get_mut(i);
        }
        if !self.is_written(i) {
            let base = map.get(i)?.clone();
            // At most `covered` entries, each a variable id: a `u32`.
            let at = u32::try_from(self.entries.len()).ok()?;
            self.at.insert(u32::try_from(i).ok()?, at);
            self.entries.push(base);
            self.written[i / 64] |= 1 << (i % 64);
        }
        let at = *self.at.get(&u32::try_from(i).ok()?)?;
        self.entries.get_mut(at as usize)
    }

    /// Forgets the entries of variables from `n` on (they were removed;
    /// their copies stay in `entries`, unreachable).
    pub fn truncate(&mut self, n: usize) {
        if n >= self.covered {
            return;
        }
        self.covered = n;
        self.at.retain(|&i, _| (i as usize) < n);
        self.written.truncate(n.div_ceil(64));
        if let Some(last) = self.written.last_mut().filter(|_| !n.is_multiple_of(64)) {
            *last &= (1 << (n % 64)) - 1;
        }
    }
}
