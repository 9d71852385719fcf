//! A versioned store of variables, written once for dims and for rows, in
//! the style of rustc's `ena` unification tables.
//!
//! A [`Store`] maps dense variable ids to entries and keeps, beside the
//! entries, everything that versions them:
//!
//! - a persistent vector ([`shape_core::chunks::ChunkVec`]): cloning a
//!   store shares its chunks of 1,024 entries, and an update copies the
//!   chunk it writes to if a clone shares it, which is what lets a solver
//!   state be forked;
//! - an undo log with nested snapshots: [`Store::snapshot`] opens one,
//!   [`Store::rollback_to`] takes back everything since (an inner snapshot
//!   rolls back alone, its outer one stays open), [`Store::commit`] keeps
//!   it. The successful path copies nothing;
//! - an overlay ([`Store::start_overlay`]) that later writes go to, leaving
//!   the persistent vector shared with the clone it came from;
//! - the set of open (unsolved) variables, read without the entries;
//! - change tracking ([`Store::track_changes`]): the variables whose entries
//!   changed, or whose neighbours' did, for finalization to look at again;
//! - chains of solved variables ([`Link`]): a look-up that walks two or
//!   more aliases points them at the end ([`Store::compress`], path
//!   compression), so that the next look-up at the start of a long chain
//!   of variables bound to each other takes one step;
//!   [`Store::compress_into`] does the same for a store that no longer
//!   changes, in a [`LinkCache`] beside it.

mod ids;
mod overlay;

use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use ids::{ChangeList, IdSet};
use overlay::Overlay;
use shape_core::chunks::ChunkVec;

/// Where a variable's value leads: what chains of solved variables are
/// made of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Link {
    /// Not solved yet.
    Open,
    /// Solved to a value that names no other variable.
    End,
    /// Solved to another variable and nothing else: a look-up may skip it.
    Alias(u32),
    /// Solved to something of its own, followed by another variable.
    Through(u32),
}

/// What a [`Store`] holds for each variable.
pub(crate) trait Entry: Clone + fmt::Debug {
    /// What undoes an update of an open entry that only appends to its
    /// lists (and sets what it may set): their lengths, not a copy.
    type Appended: Clone + fmt::Debug;

    /// Where the entry's value leads.
    fn link(&self) -> Link;

    /// Points an [`Link::Alias`] or [`Link::Through`] entry at a variable
    /// further along the same chain.
    fn relink(&mut self, to: u32);

    /// The mark of an open entry, before an update.
    fn appended(&self) -> Option<Self::Appended>;

    /// Takes an open entry back to a mark.
    fn restore(&mut self, mark: Self::Appended);

    /// The variables an open entry records relations with: when it is
    /// solved, their own rules may apply now.
    fn for_each_neighbour(&self, f: impl FnMut(u32));

    fn is_open(&self) -> bool {
        self.link() == Link::Open
    }
}

/// One undo step.
#[derive(Clone, Debug)]
enum Undo<E: Entry> {
    /// An entry that was replaced.
    Set(u32, E),
    /// An open entry that was appended to.
    Appended(u32, E::Appended),
    /// A link that was compressed, and where it pointed.
    Relink(u32, u32),
}

/// An open snapshot of a [`Store`]; consumed by [`Store::commit`] or
/// [`Store::rollback_to`], innermost first.
#[derive(Debug)]
#[must_use = "a snapshot is committed or rolled back"]
pub(crate) struct Snapshot {
    log_len: usize,
    len: usize,
    depth: usize,
}

/// Entries by dense id, versioned (see the module documentation).
#[derive(Debug)]
pub(crate) struct Store<E: Entry> {
    map: ChunkVec<E>,
    /// Entries written since [`Store::start_overlay`], which take
    /// precedence over `map`; shared by clones, copied on write.
    overlay: Option<Arc<Overlay<E>>>,
    /// Which variables are open: kept by every change of an entry's kind.
    open: IdSet,
    /// Undo steps of the open snapshots, oldest first.
    log: Vec<Undo<E>>,
    /// The number of variables when each open snapshot began, innermost
    /// last. A change to a variable created since the innermost one needs
    /// no undo step: rolling back removes the variable.
    snapshots: Vec<usize>,
    /// What changed, while change tracking is on.
    changes: Option<ChangeList>,
}

impl<E: Entry> Default for Store<E> {
    fn default() -> Store<E> {
        Store {
            map: ChunkVec::default(),
            overlay: None,
            open: IdSet::default(),
            log: Vec::new(),
            snapshots: Vec::new(),
            changes: None,
        }
    }
}

/// A clone never inherits open snapshots: its changes are its own.
impl<E: Entry> Clone for Store<E> {
    fn clone(&self) -> Store<E> {
        Store {
            map: self.map.clone(),
            overlay: self.overlay.clone(),
            open: self.open.clone(),
            log: Vec::new(),
            snapshots: Vec::new(),
            changes: self.changes.clone(),
        }
    }
}

/// Where entry `i` is written: in the overlay when there is one (copied
/// there on the first write), else in the map. A function of the two
/// fields, so that the caller can still push to the log.
#[inline]
fn slot<'a, E: Entry>(
    map: &'a mut ChunkVec<E>,
    overlay: &'a mut Option<Arc<Overlay<E>>>,
    i: u32,
) -> Option<&'a mut E> {
    match overlay {
        None => map.get_mut(i as usize),
        Some(o) => Arc::make_mut(o).slot(map, i as usize),
    }
}

impl<E: Entry> Store<E> {
    /// The number of variables.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The entry of variable `i`, as last written.
    #[inline]
    pub fn get(&self, i: u32) -> Option<&E> {
        match self.overlay.as_deref().and_then(|o| o.get(i as usize)) {
            Some(e) => Some(e),
            None => self.map.get(i as usize),
        }
    }

    /// Adds a variable.
    pub fn push(&mut self, e: E) -> u32 {
        let i = self.map.len() as u32;
        self.open.set(i as usize, e.is_open());
        self.map.push_back(e);
        if let Some(c) = &mut self.changes {
            c.add(i);
        }
        i
    }

    /// Whether variable `i` is open, without reading its entry.
    #[inline]
    pub fn is_open(&self, i: u32) -> bool {
        self.open.contains(i as usize)
    }

    /// Whether any variable is open.
    pub fn any_open(&self) -> bool {
        self.open.len() > 0
    }

    /// The open variables, lowest first.
    pub fn open_ids(&self) -> impl Iterator<Item = u32> + '_ {
        self.open.iter()
    }

    /// Whether the set of open variables says what the entries say (for
    /// debug assertions: it reads every entry).
    pub fn open_set_matches_entries(&self) -> bool {
        (0..self.len() as u32).all(|i| self.get(i).is_some_and(E::is_open) == self.is_open(i))
            && self.open.iter().all(|i| (i as usize) < self.len())
    }

    /// Whether a change to variable `i` needs an undo step.
    #[inline]
    fn recording(&self, i: u32) -> bool {
        self.snapshots.last().is_some_and(|&len| (i as usize) < len)
    }

    fn changed(&mut self, i: u32) {
        if let Some(c) = &mut self.changes {
            c.add(i);
        }
    }

    /// Replaces an entry and returns the old one (`None` for a variable
    /// that does not exist).
    pub fn set(&mut self, i: u32, e: E) -> Option<E> {
        let recording = self.recording(i);
        let new_link = e.link();
        let slot = slot(&mut self.map, &mut self.overlay, i)?;
        let old = std::mem::replace(slot, e);
        self.open.set(i as usize, new_link == Link::Open);
        if recording {
            self.log.push(Undo::Set(i, old.clone()));
        }
        if let Some(c) = &mut self.changes {
            c.add(i);
            old.for_each_neighbour(|n| c.add(n));
            if let Link::Alias(n) | Link::Through(n) = new_link {
                c.add(n);
            }
        }
        Some(old)
    }

    /// Changes what an entry says without changing whether it is open
    /// (the old entry is kept for undo).
    pub fn modify(&mut self, i: u32, f: impl FnOnce(&mut E)) {
        let recording = self.recording(i);
        let Some(slot) = slot(&mut self.map, &mut self.overlay, i) else {
            return;
        };
        if recording {
            self.log.push(Undo::Set(i, slot.clone()));
        }
        let was_open = slot.is_open();
        f(slot);
        debug_assert_eq!(was_open, slot.is_open(), "modify keeps the kind");
    }

    /// Applies `f` to an open entry, which may only append to its lists
    /// and set what [`Entry::restore`] takes back; false (and nothing
    /// done) for a solved or unknown variable.
    pub fn update(&mut self, i: u32, f: impl FnOnce(&mut E)) -> bool {
        if !self.is_open(i) {
            return false;
        }
        let recording = self.recording(i);
        let Some(slot) = slot(&mut self.map, &mut self.overlay, i) else {
            return false;
        };
        if recording {
            if let Some(mark) = slot.appended() {
                self.log.push(Undo::Appended(i, mark));
            }
        }
        f(slot);
        debug_assert!(slot.is_open(), "update keeps the entry open");
        self.changed(i);
        true
    }

    /// Points variable `i`'s link further along its chain (recorded for
    /// undo; not a change that tracking reports: the value is the same).
    pub fn relink(&mut self, i: u32, to: u32) {
        let recording = self.recording(i);
        let Some(slot) = slot(&mut self.map, &mut self.overlay, i) else {
            return;
        };
        let (Link::Alias(old) | Link::Through(old)) = slot.link() else {
            return;
        };
        if old == to {
            return;
        }
        slot.relink(to);
        if recording {
            self.log.push(Undo::Relink(i, old));
        }
    }

    /// Points every alias on the way from `i` to `end` (the end of its
    /// chain, as a walk found it) at `end`.
    pub fn compress(&mut self, i: u32, end: u32) {
        let mut at = i;
        while at != end {
            let Some(Link::Alias(next)) = self.get(at).map(E::link) else {
                break;
            };
            self.relink(at, end);
            at = next;
        }
    }

    /// [`Store::compress`] for a store that no longer changes.
    pub fn compress_into(&self, i: u32, end: u32, cache: &LinkCache) {
        let mut at = i;
        while at != end {
            let next = match cache.get(at) {
                Some(c) => c,
                None => match self.get(at).map(E::link) {
                    Some(Link::Alias(next)) => next,
                    _ => break,
                },
            };
            cache.set(at, end, self.len());
            at = next;
        }
    }

    /// Opens a snapshot: everything until the matching
    /// [`Store::rollback_to`] can be taken back.
    pub fn snapshot(&mut self) -> Snapshot {
        self.snapshots.push(self.len());
        Snapshot {
            log_len: self.log.len(),
            len: self.len(),
            depth: self.snapshots.len(),
        }
    }

    /// Keeps the changes since `s`. An outer snapshot can still take them
    /// back.
    pub fn commit(&mut self, s: Snapshot) {
        debug_assert_eq!(s.depth, self.snapshots.len(), "snapshots nest");
        self.snapshots.pop();
        if self.snapshots.is_empty() {
            self.log.clear();
        }
    }

    /// Undoes every change since `s`, variables created since included.
    pub fn rollback_to(&mut self, s: Snapshot) {
        debug_assert_eq!(s.depth, self.snapshots.len(), "snapshots nest");
        while self.log.len() > s.log_len {
            let Some(step) = self.log.pop() else { break };
            let i = match &step {
                Undo::Set(i, _) | Undo::Appended(i, _) | Undo::Relink(i, _) => *i,
            };
            let Some(slot) = slot(&mut self.map, &mut self.overlay, i) else {
                continue;
            };
            match step {
                Undo::Set(_, e) => {
                    self.open.set(i as usize, e.is_open());
                    *slot = e;
                }
                Undo::Appended(_, mark) => slot.restore(mark),
                Undo::Relink(_, to) => slot.relink(to),
            }
        }
        // Entries first, then the variables created since: an undo step
        // recorded under an inner snapshot may name one of them.
        self.open.truncate(s.len);
        self.map.truncate(s.len);
        if let Some(o) = &mut self.overlay {
            Arc::make_mut(o).truncate(s.len);
        }
        self.snapshots.pop();
    }

    /// From now on, entries are written to an overlay instead of the
    /// persistent vector (see `overlay`); for a state about to be
    /// rewritten wholesale while its vector stays shared with other
    /// clones.
    pub fn start_overlay(&mut self) {
        if self.overlay.is_none() {
            // A finalization writes the variables it finds open (each
            // solved, or its bounds written, once): room for those up
            // front, so that neither list grows at the peak (at a million
            // operations the rows' index doubled from 9 to 19 MB there,
            // both held at once).
            let overlay = Overlay::new(&self.map, self.open.iter(), self.open.len());
            self.overlay = Some(Arc::new(overlay));
        }
    }

    /// Turns change tracking on or off (off forgets what was recorded).
    pub fn track_changes(&mut self, on: bool) {
        self.changes = on.then(ChangeList::default);
    }

    /// The variables created or written since the last call, and those
    /// that a solved variable recorded relations with: each once, in the
    /// order they changed.
    #[cfg(test)]
    pub fn take_changes(&mut self) -> Vec<u32> {
        let mut out = Vec::new();
        self.drain_changes(|i| out.push(i));
        out
    }

    /// [`Store::take_changes`] handed to `f` one at a time; the list keeps
    /// its buffer (finalization drains it after every step: a new list
    /// each time was an allocation per step).
    pub fn drain_changes(&mut self, f: impl FnMut(u32)) {
        if let Some(c) = &mut self.changes {
            c.drain(f);
        }
    }
}

/// Where alias chains of a store that no longer changes end, filled by the
/// look-ups that walk them ([`Store::compress_into`]); allocated by the
/// first one that walks a chain of two or more.
///
/// Atomic, so that a shared, immutable solution can fill it: any value
/// written is a correct end for its variable, so the order in which
/// threads see writes does not matter.
#[derive(Debug, Default)]
pub(crate) struct LinkCache(OnceLock<Box<[AtomicU32]>>);

impl LinkCache {
    /// The end of `i`'s alias chain, if a look-up recorded it.
    pub fn get(&self, i: u32) -> Option<u32> {
        let slot = self.0.get()?.get(i as usize)?;
        slot.load(Ordering::Relaxed).checked_sub(1)
    }

    fn set(&self, i: u32, end: u32, len: usize) {
        let Some(stored) = end.checked_add(1) else {
            return;
        };
        let table = self
            .0
            .get_or_init(|| (0..len).map(|_| AtomicU32::new(0)).collect());
        if let Some(slot) = table.get(i as usize) {
            slot.store(stored, Ordering::Relaxed);
        }
    }
}

/// A copy starts empty: the cache only saves work.
impl Clone for LinkCache {
    fn clone(&self) -> LinkCache {
        LinkCache::default()
    }
}

#[cfg(test)]
mod tests;
