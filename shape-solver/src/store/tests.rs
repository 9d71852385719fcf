//! The store on a small entry type of its own.

use super::*;

/// An entry: open with a list of neighbours, or solved to a number, to
/// another variable, or to a number followed by another variable.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Toy {
    Open(Vec<u32>),
    Value(u64),
    Alias(u32),
    Through(u64, u32),
}

impl Entry for Toy {
    type Appended = usize;

    fn link(&self) -> Link {
        match self {
            Toy::Open(_) => Link::Open,
            Toy::Value(_) => Link::End,
            Toy::Alias(to) => Link::Alias(*to),
            Toy::Through(_, to) => Link::Through(*to),
        }
    }

    fn relink(&mut self, to: u32) {
        if let Toy::Alias(t) | Toy::Through(_, t) = self {
            *t = to;
        }
    }

    fn appended(&self) -> Option<usize> {
        match self {
            Toy::Open(ns) => Some(ns.len()),
            _ => None,
        }
    }

    fn restore(&mut self, mark: usize) {
        if let Toy::Open(ns) = self {
            ns.truncate(mark);
        }
    }

    fn for_each_neighbour(&self, f: impl FnMut(u32)) {
        if let Toy::Open(ns) = self {
            ns.iter().copied().for_each(f);
        }
    }
}

fn open() -> Toy {
    Toy::Open(Vec::new())
}

fn store(n: usize) -> Store<Toy> {
    let mut s = Store::default();
    for _ in 0..n {
        s.push(open());
    }
    s
}

fn push_neighbour(s: &mut Store<Toy>, i: u32, n: u32) -> bool {
    s.update(i, |e| {
        if let Toy::Open(ns) = e {
            ns.push(n);
        }
    })
}

/// Follows aliases from `i` (taking a known end from `known` where it has
/// one): where they end and how many steps it took, as the environment's
/// look-ups walk.
fn walk(s: &Store<Toy>, i: u32, known: impl Fn(u32) -> Option<u32>) -> (u32, usize) {
    let (mut at, mut hops) = (i, 0);
    while !s.is_open(at) {
        if let Some(end) = known(at) {
            return (end, hops + 1);
        }
        match s.get(at).map(Entry::link) {
            Some(Link::Alias(next)) => {
                at = next;
                hops += 1;
            }
            _ => break,
        }
    }
    (at, hops)
}

/// A look-up that compresses what it walked.
fn find(s: &mut Store<Toy>, i: u32) -> u32 {
    let (end, hops) = walk(s, i, |_| None);
    if hops >= 2 {
        s.compress(i, end);
    }
    end
}

/// The same for a store that no longer changes.
fn find_cached(s: &Store<Toy>, i: u32, cache: &LinkCache) -> u32 {
    let (end, hops) = walk(s, i, |at| cache.get(at));
    if hops >= 2 {
        s.compress_into(i, end, cache);
    }
    end
}

fn open_ids(s: &Store<Toy>) -> Vec<u32> {
    s.open_ids().collect()
}

#[test]
fn entries_and_the_open_set_agree() {
    let mut s = store(4);
    assert_eq!(s.set(1, Toy::Value(7)), Some(open()));
    assert_eq!(s.set(9, Toy::Value(7)), None);
    assert_eq!(open_ids(&s), vec![0, 2, 3]);
    assert!(s.open_set_matches_entries());
    assert!(push_neighbour(&mut s, 0, 3));
    assert!(
        !push_neighbour(&mut s, 1, 3),
        "a solved entry is not updated"
    );
    assert_eq!(s.get(0), Some(&Toy::Open(vec![3])));
}

#[test]
fn an_inner_rollback_undoes_the_inner_snapshot_alone() {
    let mut s = store(3);
    let outer = s.snapshot();
    s.set(0, Toy::Value(1));
    let created_in_outer = s.push(open());
    let inner = s.snapshot();
    s.set(1, Toy::Value(2));
    s.set(created_in_outer, Toy::Value(3));
    push_neighbour(&mut s, 2, 0);
    let created_in_inner = s.push(Toy::Value(4));
    s.rollback_to(inner);
    // The inner changes are gone, the outer ones stay.
    assert_eq!(s.get(0), Some(&Toy::Value(1)));
    assert_eq!(s.get(1), Some(&open()));
    assert_eq!(s.get(created_in_outer), Some(&open()));
    assert_eq!(s.get(2), Some(&open()));
    assert_eq!(s.get(created_in_inner), None);
    assert_eq!(open_ids(&s), vec![1, 2, 3]);
    // The outer snapshot is still open and takes back the rest.
    s.rollback_to(outer);
    assert_eq!(s.len(), 3);
    assert_eq!(open_ids(&s), vec![0, 1, 2]);
    assert!(s.get(0) == Some(&open()));
}

#[test]
fn an_outer_rollback_undoes_a_committed_inner_snapshot() {
    let mut s = store(2);
    let outer = s.snapshot();
    let created_in_outer = s.push(open());
    let inner = s.snapshot();
    s.set(0, Toy::Value(1));
    // Created before the inner snapshot: its change is recorded there.
    s.set(created_in_outer, Toy::Value(2));
    s.commit(inner);
    assert_eq!(s.get(0), Some(&Toy::Value(1)));
    s.rollback_to(outer);
    assert_eq!(s.get(0), Some(&open()));
    assert_eq!(s.len(), 2);
    assert!(s.open_set_matches_entries());
    // With every snapshot closed, nothing is recorded any more.
    s.set(1, Toy::Value(5));
    assert!(s.log.is_empty());
}

#[test]
fn committing_the_outermost_snapshot_keeps_everything() {
    let mut s = store(2);
    let outer = s.snapshot();
    let inner = s.snapshot();
    s.set(0, Toy::Value(1));
    s.commit(inner);
    s.set(1, Toy::Value(2));
    s.commit(outer);
    assert_eq!(s.get(0), Some(&Toy::Value(1)));
    assert_eq!(s.get(1), Some(&Toy::Value(2)));
    assert!(s.log.is_empty());
}

#[test]
fn find_compresses_chains_and_rollback_restores_them() {
    // 0 -> 1 -> 2 -> 3 -> 4 (open).
    let mut s = store(5);
    for i in 0..4 {
        s.set(i, Toy::Alias(i + 1));
    }
    let snap = s.snapshot();
    assert_eq!(find(&mut s, 0), 4);
    for i in 0..4 {
        assert_eq!(s.get(i), Some(&Toy::Alias(4)), "variable {i}");
    }
    // The end moves on: the next look-up goes one step further.
    s.set(4, Toy::Alias(2));
    s.set(2, Toy::Value(9));
    assert_eq!(find(&mut s, 0), 2);
    s.rollback_to(snap);
    for i in 0..4 {
        assert_eq!(s.get(i), Some(&Toy::Alias(i + 1)), "variable {i}");
    }
    assert_eq!(find(&mut s, 3), 4);
}

#[test]
fn find_stops_at_a_variable_with_a_value_of_its_own() {
    // 0 -> 1 -> 2 = 5 then 3 -> 4 (open).
    let mut s = store(5);
    s.set(0, Toy::Alias(1));
    s.set(1, Toy::Alias(2));
    s.set(2, Toy::Through(5, 3));
    s.set(3, Toy::Alias(4));
    assert_eq!(find(&mut s, 0), 2);
    assert_eq!(s.get(0), Some(&Toy::Alias(2)));
    assert_eq!(find(&mut s, 3), 4);
    // A variable that does not exist is its own end.
    assert_eq!(find(&mut s, 99), 99);
}

#[test]
fn find_cached_agrees_with_find_and_leaves_the_store_alone() {
    let mut s = store(6);
    for i in 0..5 {
        s.set(i, Toy::Alias(i + 1));
    }
    s.set(5, Toy::Value(3));
    let cache = LinkCache::default();
    let frozen = s.clone();
    for i in 0..6 {
        assert_eq!(find_cached(&frozen, i, &cache), 5);
    }
    assert_eq!(frozen.get(0), Some(&Toy::Alias(1)));
    assert_eq!(cache.get(0), Some(5));
    assert_eq!(cache.clone().get(0), None, "a copy starts empty");
    assert_eq!(find(&mut s, 0), 5);
}

#[test]
fn the_overlay_leaves_the_shared_vector_alone() {
    let mut base = store(100);
    base.set(5, Toy::Value(7));
    let mut over = base.clone();
    over.start_overlay();
    over.set(6, Toy::Value(8));
    push_neighbour(&mut over, 9, 1);
    let late = over.push(open());
    over.set(late, Toy::Value(9));
    // The overlay reads its own writes and the vector's entries.
    assert_eq!(over.get(5), Some(&Toy::Value(7)));
    assert_eq!(over.get(6), Some(&Toy::Value(8)));
    assert_eq!(over.get(late), Some(&Toy::Value(9)));
    assert_eq!(over.get(9), Some(&Toy::Open(vec![1])));
    assert_eq!(over.open_ids().count(), 98);
    // The store it was cloned from is unchanged.
    assert_eq!(base.get(6), Some(&open()));
    assert_eq!(base.get(9), Some(&open()));
    assert_eq!(base.len(), 100);
    assert_eq!(base.open_ids().count(), 99);
}

#[test]
fn rollback_undoes_writes_through_the_overlay() {
    let mut s = store(10);
    s.start_overlay();
    s.set(0, Toy::Value(2));
    let snap = s.snapshot();
    s.set(1, Toy::Value(3));
    push_neighbour(&mut s, 2, 4);
    let new = s.push(open());
    s.set(new, Toy::Value(5));
    s.rollback_to(snap);
    assert_eq!(s.get(0), Some(&Toy::Value(2)));
    assert_eq!(s.get(1), Some(&open()));
    assert_eq!(s.get(2), Some(&open()));
    assert_eq!(s.len(), 10);
    assert_eq!(open_ids(&s), (1..10).collect::<Vec<u32>>());
}

#[test]
fn a_clone_has_no_open_snapshot() {
    let mut s = store(2);
    let snap = s.snapshot();
    let mut fork = s.clone();
    fork.set(0, Toy::Value(1));
    assert!(fork.log.is_empty());
    s.rollback_to(snap);
    assert_eq!(fork.get(0), Some(&Toy::Value(1)));
    assert_eq!(s.get(0), Some(&open()));
}

#[test]
fn change_tracking_reports_writes_and_the_neighbours_of_solved_entries() {
    let mut s = store(6);
    push_neighbour(&mut s, 0, 4);
    s.track_changes(true);
    assert!(s.take_changes().is_empty());
    push_neighbour(&mut s, 0, 5);
    let new = s.push(open());
    assert_eq!(s.take_changes(), vec![0, new]);
    // Solving 0 reports it, the neighbours it recorded, and where its
    // value leads.
    s.set(0, Toy::Through(1, 2));
    assert_eq!(s.take_changes(), vec![0, 4, 5, 2]);
    // Compression changes no value: nothing to report.
    s.set(1, Toy::Alias(3));
    s.set(3, Toy::Alias(2));
    s.take_changes();
    find(&mut s, 1);
    assert!(s.take_changes().is_empty());
    s.track_changes(false);
    s.set(4, Toy::Value(1));
    assert!(s.take_changes().is_empty());
}
