//! Entries written over a persistent map, leaving the map as it was.
//!
//! Why: finalization rewrites nearly every entry of a state that the graph
//! keeps unfinalized (so that it can be extended and solved again). Writing
//! into the shared map copies each 64-entry chunk on its first write, and
//! the copy clones every entry's `Arc`: one write to a separate heap
//! allocation per variable, scattered over the whole state. That cost grew
//! much faster than the state (25-30 times from 1,000 to 10,000
//! operations). Here only the entries a finalization writes are copied,
//! into a dense vector that nothing else holds: those of the variables
//! open when it begins, up front and in id order, and any other on its
//! first write.

use rustc_hash::FxHashMap;

use shape_core::chunks::ChunkVec;

#[derive(Clone, Debug)]
pub(crate) struct Overlay<E> {
    /// Variables from this id on were created after the overlay began:
    /// nothing else holds their entries, so they are written in the map.
    /// Below it, nothing grows, so the vectors are never reallocated
    /// (which would copy megabytes at a time).
    covered: usize,
    /// One bit per covered variable that was open when the overlay began.
    /// A finalization writes exactly those (each solved, or its bounds
    /// written, once), so their entries are copied up front, in id order,
    /// into `open_entries`, and one is found by counting bits: no hash
    /// look-up per read, and no index beside the entries.
    open: Vec<u64>,
    /// For each block of 64 covered variables, how many of the blocks
    /// before it are in `open`.
    rank: Vec<u32>,
    /// The entries of the variables in `open`, lowest id first.
    open_entries: Vec<E>,
    /// One bit per other covered variable that was written since (a
    /// chain of solved variables shortened): whether `others` holds it.
    /// Small enough to stay in cache, so that reading an entry that was
    /// never written touches the map only.
    written: Vec<u64>,
    /// The entries of those other variables: few, so a hash map.
    others: FxHashMap<u32, E>,
}

impl<E: Clone> Overlay<E> {
    /// An overlay over `map` (every entry it has now), with the entries of
    /// the variables `open` lists (ascending) copied in.
    pub fn new(map: &ChunkVec<E>, open: impl Iterator<Item = u32>, expected: usize) -> Overlay<E> {
        let covered = map.len();
        let blocks = covered.div_ceil(64);
        let mut bits = vec![0u64; blocks];
        let mut open_entries = Vec::with_capacity(expected);
        for i in open {
            let Some(e) = map.get(i as usize) else {
                continue;
            };
            bits[i as usize / 64] |= 1 << (i % 64);
            open_entries.push(e.clone());
        }
        let mut rank = Vec::with_capacity(blocks);
        let mut before = 0u32;
        for word in &bits {
            rank.push(before);
            before += word.count_ones();
        }
        Overlay {
            covered,
            open: bits,
            rank,
            open_entries,
            written: vec![0; blocks],
            others: FxHashMap::default(),
        }
    }

    /// Where in `open_entries` the entry of `i` is, if `i` was open.
    #[inline]
    fn open_at(&self, i: usize) -> Option<usize> {
        if i >= self.covered {
            return None;
        }
        let (b, bit) = (i / 64, i % 64);
        let word = self.open[b];
        if word & (1 << bit) == 0 {
            return None;
        }
        let below = (word & ((1u64 << bit) - 1)).count_ones();
        Some((self.rank[b] + below) as usize)
    }

    fn is_written(&self, i: usize) -> bool {
        i < self.covered && self.written[i / 64] & (1 << (i % 64)) != 0
    }

    /// The entry written here for `i`, if any.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&E> {
        if let Some(at) = self.open_at(i) {
            return self.open_entries.get(at);
        }
        if self.is_written(i) {
            self.others.get(&(i as u32))
        } else {
            None
        }
    }

    /// Where entry `i` is written (copied here from `map` on the first
    /// write).
    pub fn slot<'a>(&'a mut self, map: &'a mut ChunkVec<E>, i: usize) -> Option<&'a mut E> {
        if i >= self.covered {
            return map.get_mut(i);
        }
        if let Some(at) = self.open_at(i) {
            return self.open_entries.get_mut(at);
        }
        let key = u32::try_from(i).ok()?;
        if !self.is_written(i) {
            let base = map.get(i)?.clone();
            self.others.insert(key, base);
            self.written[i / 64] |= 1 << (i % 64);
        }
        self.others.get_mut(&key)
    }

    /// Forgets the entries of variables from `n` on (they were removed;
    /// the copies of those that were open stay in `open_entries`,
    /// unreachable).
    pub fn truncate(&mut self, n: usize) {
        if n >= self.covered {
            return;
        }
        self.covered = n;
        self.others.retain(|&i, _| (i as usize) < n);
        let blocks = n.div_ceil(64);
        for bits in [&mut self.open, &mut self.written] {
            bits.truncate(blocks);
            if let Some(last) = bits.last_mut().filter(|_| !n.is_multiple_of(64)) {
                *last &= (1 << (n % 64)) - 1;
            }
        }
        self.rank.truncate(blocks);
    }
}
