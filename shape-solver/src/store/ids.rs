//! Sets of variable ids kept beside a store: which variables are open, and
//! which ones changed since finalization last looked.

/// A set of ids, one bit per id, with its size.
///
/// A plain vector, copied by every clone (1.25 KB per 10,000 ids): behind
/// an `Arc`, each change would pay an atomic uniqueness check, and changes
/// happen for every variable the solver creates or solves.
#[derive(Clone, Debug, Default)]
pub(crate) struct IdSet {
    bits: Vec<u64>,
    len: usize,
}

impl IdSet {
    /// How many ids are in the set.
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn contains(&self, id: usize) -> bool {
        self.bits
            .get(id / 64)
            .is_some_and(|word| word & (1 << (id % 64)) != 0)
    }

    /// Puts `id` in the set (`member`) or takes it out.
    #[inline]
    pub fn set(&mut self, id: usize, member: bool) {
        if self.contains(id) == member {
            return;
        }
        let w = id / 64;
        if w >= self.bits.len() {
            self.bits.resize(w + 1, 0);
        }
        self.bits[w] ^= 1 << (id % 64);
        if member {
            self.len += 1;
        } else {
            self.len -= 1;
        }
    }

    /// Removes every id from `n` on.
    pub fn truncate(&mut self, n: usize) {
        if self.bits.len() <= n / 64 {
            // Every member is below `n`.
            return;
        }
        if !n.is_multiple_of(64) {
            let keep = (1u64 << (n % 64)) - 1;
            let word = &mut self.bits[n / 64];
            self.len -= (*word & !keep).count_ones() as usize;
            *word &= keep;
        }
        let whole = n.div_ceil(64).min(self.bits.len());
        for word in self.bits.drain(whole..) {
            self.len -= word.count_ones() as usize;
        }
    }

    /// The members, lowest first.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.bits.iter().enumerate().flat_map(|(w, &word)| {
            let mut rest = word;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let b = rest.trailing_zeros();
                    rest &= rest - 1;
                    w as u32 * 64 + b
                })
            })
        })
    }
}

/// Ids in the order they were first added, each once until taken: what a
/// store records of its changes while change tracking is on. Taking them
/// costs what changed, not what the store holds.
#[derive(Clone, Debug, Default)]
pub(crate) struct ChangeList {
    seen: IdSet,
    ids: Vec<u32>,
}

impl ChangeList {
    pub fn add(&mut self, id: u32) {
        if !self.seen.contains(id as usize) {
            self.seen.set(id as usize, true);
            self.ids.push(id);
        }
    }

    /// Hands `f` every id added since the last call, in the order they
    /// came, and empties the list (keeping its buffer).
    pub fn drain(&mut self, mut f: impl FnMut(u32)) {
        for &id in &self.ids {
            self.seen.set(id as usize, false);
            f(id);
        }
        self.ids.clear();
    }

    #[cfg(test)]
    pub fn take(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
        self.drain(|id| out.push(id));
        out
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_set_tracks_membership_and_truncates() {
        let mut s = IdSet::default();
        for i in [0, 3, 63, 64, 65, 200] {
            s.set(i, true);
        }
        s.set(3, true);
        assert_eq!(s.len(), 6);
        s.set(64, false);
        s.set(64, false);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 3, 63, 65, 200]);
        s.truncate(65);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0, 3, 63]);
        assert_eq!(s.len(), 3);
        s.truncate(64);
        assert_eq!(s.len(), 3);
        s.truncate(1);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![0]);
        assert_eq!(s.len(), 1);
        s.truncate(1000);
        assert_eq!(s.len(), 1);
    }

    #[test]
    fn change_list_keeps_first_arrival_order_once() {
        let mut c = ChangeList::default();
        for id in [5, 1, 5, 70, 1] {
            c.add(id);
        }
        assert_eq!(c.take(), vec![5, 1, 70]);
        assert!(c.is_empty());
        c.add(5);
        assert_eq!(c.take(), vec![5]);
    }
}
