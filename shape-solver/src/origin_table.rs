//! The origins a solver records, stored compactly.
//!
//! Why: an operation records one origin per pair of rows it relates and
//! per row it constrains (five to nine for the usual operations), and a
//! declaration one per row. Stored as [`Origin`]s (72 bytes each, in a
//! persistent vector) they were a fifth of the solver's memory. Here each
//! origin is a 12-byte record that names its operation, tensor or text by
//! index into tables that hold each of them once: an operation's
//! [`OpRef`] once for all its origins, a declaration's tensor and spec
//! once for its three rows. An [`Origin`] is rebuilt when a message or a
//! provenance asks for one.
//!
//! An operation is not kept as its [`OpRef`] either (104 bytes and an
//! operand list of 40 bytes a tensor, two allocations for every operation
//! a graph applies): its tensors are kept once each, in a list of
//! [`TensorRef`]s that the operations after it share (a result is the
//! operand of the next operation), and the operation as its id, name and
//! the indices of its tensors there. The [`OpRef`] is rebuilt with the
//! origin, equal to the one recorded.

use std::sync::Arc;

use imbl::OrdMap;

use shape_core::chunks::ChunkVec;
use shape_core::RowKind;

use crate::origin::{OpRef, Origin, Relation, RowSite, TensorRef};

/// An origin as stored: what varies between an operation's origins, with
/// the rest by index.
#[derive(Clone, Copy, Debug)]
enum Packed {
    /// [`Origin::Op`].
    Op {
        op: u32,
        left: Site,
        right: Site,
        relation: Relation,
    },
    /// [`Origin::OpRow`], its text in `texts` at the operation's first
    /// text index plus `what` (an operation's texts are recorded next to
    /// each other, or found among the last few).
    OpRow { op: u32, what: i8, site: Site },
    /// [`Origin::Declared`], its tensor and spec in `tensors`.
    Declared { tensor: u32, kind: RowKind },
    /// [`Origin::Required`], its tensor and spec in `tensors`.
    Required { tensor: u32, kind: RowKind },
    /// [`Origin::Finalization`].
    Finalization,
    /// Any other origin (and those whose positions do not fit above), in
    /// `others`.
    Other(u32),
}

// Eight bytes: 713,000 of them for the 100,000-operation benchmark.
const _: () = assert!(std::mem::size_of::<Packed>() <= 8);

/// A [`RowSite`] in one byte: its position (below 64) and kind.
#[derive(Clone, Copy, Debug)]
struct Site(u8);

impl Site {
    fn new(s: RowSite) -> Option<Site> {
        let kind = match s.kind {
            RowKind::Batch => 0,
            RowKind::Input => 1,
            RowKind::Output => 2,
        };
        // Below 64: the shift keeps it in the byte.
        (s.position < 64).then_some(Site(((s.position as u8) << 2) | kind))
    }

    fn get(self) -> RowSite {
        RowSite {
            position: u32::from(self.0 >> 2),
            kind: match self.0 & 3 {
                0 => RowKind::Batch,
                1 => RowKind::Input,
                _ => RowKind::Output,
            },
        }
    }
}

/// How many of the last texts a new one is compared with: an operation's
/// row rules are shared by its applications (an einsum spec used several
/// times in a row), so that each is stored once.
const TEXT_WINDOW: usize = 16;

/// An operation as stored (see the module documentation).
#[derive(Clone, Debug)]
enum OpRecord {
    /// An operation of one or two operands: its tensors by index into
    /// [`OriginTable::refs`] (the second operand's unused for one).
    Compact {
        id: u32,
        /// Index into [`OriginTable::names`].
        name: u32,
        result: u32,
        operands: [u32; 2],
        len: u8,
        texts: u32,
    },
    /// Any other operation, whole, in [`OriginTable::whole`].
    Whole { op: u32, texts: u32 },
}

// 28 bytes: one for each operation a graph applies.
const _: () = assert!(std::mem::size_of::<OpRecord>() <= 28);

/// How many of the last operation names a new one is looked up among (a
/// network applies a few operations over and over).
const NAME_WINDOW: usize = 16;

impl OpRecord {
    /// The length of `texts` when the operation was recorded: where
    /// [`Packed::OpRow`] counts its text from.
    fn texts(&self) -> u32 {
        match self {
            OpRecord::Compact { texts, .. } | OpRecord::Whole { texts, .. } => *texts,
        }
    }
}

/// How many of the last tensors recorded a new one is looked up among
/// (an operation's operands are mostly the results just made).
const REF_WINDOW: usize = 32;

/// A tensor recorded lately, by identity: its id and the addresses of its
/// name and definition, which [`OriginTable::refs`] keeps alive (so no
/// other name can take the address while the entry is here).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct RefKey {
    id: usize,
    name: usize,
    definition: usize,
}

impl RefKey {
    fn of(t: &TensorRef) -> RefKey {
        RefKey {
            id: t.id,
            name: Arc::as_ptr(&t.name).cast::<u8>() as usize,
            definition: t.definition.as_ref().map_or(0, |d| d.addr()),
        }
    }
}

/// The lengths of a [`OriginTable`]'s parts, to take it back to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OriginMark {
    entries: usize,
    ops: usize,
    refs: usize,
    names: usize,
    whole: usize,
    texts: usize,
    tensors: usize,
    others: usize,
}

/// Origins by id (see the module documentation). Cloning shares every
/// part (persistent vectors).
#[derive(Clone, Debug, Default)]
pub(crate) struct OriginTable {
    entries: ChunkVec<Packed>,
    /// Operations, each once for the run of origins that name it.
    ops: ChunkVec<OpRecord>,
    /// The last operation recorded, as given, and its first text index:
    /// origins of it that follow are recognised by pointer, and handed
    /// back without a rebuild.
    last_op: Option<(Arc<OpRef>, u32)>,
    /// The tensors operations name, each once for a run of operations
    /// that name it alike.
    refs: ChunkVec<TensorRef>,
    /// The last [`REF_WINDOW`] entries of `refs` (a ring, `next` the
    /// oldest), to find a tensor recorded lately without reading `refs`.
    recent: [(RefKey, u32); REF_WINDOW],
    next: usize,
    /// The names of operations, each once for a run of operations.
    names: ChunkVec<Arc<str>>,
    /// The last [`NAME_WINDOW`] names recorded, by address (kept alive by
    /// `names`), and their index there; `next_name` the oldest.
    recent_names: [(usize, u32); NAME_WINDOW],
    next_name: usize,
    /// Operations kept whole ([`OpRecord::Whole`]).
    whole: ChunkVec<Arc<OpRef>>,
    /// The texts of [`Origin::OpRow`]s.
    texts: ChunkVec<Arc<str>>,
    /// The tensors and spec texts of declarations and requirements.
    tensors: ChunkVec<(TensorRef, Arc<str>)>,
    others: ChunkVec<Origin>,
    /// Origins renamed since they were recorded
    /// ([`OriginTable::rename`]), which take precedence over `entries`.
    renamed: OrdMap<u32, Origin>,
}

fn index(len: usize) -> u32 {
    // Each table has at most as many rows as there are origins, whose ids
    // are `u32`s.
    u32::try_from(len).unwrap_or(u32::MAX)
}

impl OriginTable {
    /// The number of origins: the id the next one gets.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn mark(&self) -> OriginMark {
        OriginMark {
            entries: self.entries.len(),
            ops: self.ops.len(),
            refs: self.refs.len(),
            names: self.names.len(),
            whole: self.whole.len(),
            texts: self.texts.len(),
            tensors: self.tensors.len(),
            others: self.others.len(),
        }
    }

    /// Forgets every origin recorded since `m` (renames of older ones
    /// stay, as they did when each origin was stored whole).
    pub fn truncate(&mut self, m: OriginMark) {
        self.entries.truncate(m.entries);
        if m.ops < self.ops.len() {
            self.last_op = None;
        }
        self.ops.truncate(m.ops);
        if m.refs < self.refs.len() {
            // Forget what points past the end: those names may be freed,
            // and their addresses taken by others.
            for slot in &mut self.recent {
                if slot.1 as usize >= m.refs {
                    *slot = Default::default();
                }
            }
        }
        self.refs.truncate(m.refs);
        if m.names < self.names.len() {
            for slot in &mut self.recent_names {
                if slot.1 as usize >= m.names {
                    *slot = Default::default();
                }
            }
        }
        self.names.truncate(m.names);
        self.whole.truncate(m.whole);
        self.texts.truncate(m.texts);
        self.tensors.truncate(m.tensors);
        self.others.truncate(m.others);
        if self
            .renamed
            .get_max()
            .is_some_and(|(id, _)| *id as usize >= m.entries)
        {
            let (keep, _, _) = self.renamed.split_lookup(&index(m.entries));
            self.renamed = keep;
        }
    }

    /// The index of `op` in `ops`, and its first text index.
    fn op_index(&mut self, op: &Arc<OpRef>) -> (u32, u32) {
        if let Some((last, texts)) = &self.last_op {
            if Arc::ptr_eq(last, op) {
                return (index(self.ops.len() - 1), *texts);
            }
        }
        let texts = index(self.texts.len());
        let record = match (u32::try_from(op.id), &op.operands[..]) {
            (Ok(id), operands) if operands.len() <= 2 => {
                let mut ids = [0; 2];
                for (slot, t) in ids.iter_mut().zip(operands) {
                    *slot = self.ref_index(t);
                }
                OpRecord::Compact {
                    id,
                    name: self.name_index(&op.name),
                    result: self.ref_index(&op.result),
                    operands: ids,
                    len: operands.len() as u8,
                    texts,
                }
            }
            _ => {
                self.whole.push_back(op.clone());
                OpRecord::Whole {
                    op: index(self.whole.len() - 1),
                    texts,
                }
            }
        };
        self.ops.push_back(record);
        self.last_op = Some((op.clone(), texts));
        (index(self.ops.len() - 1), texts)
    }

    /// The index of `name` in `names`, recorded now unless it was lately.
    fn name_index(&mut self, name: &Arc<str>) -> u32 {
        let addr = Arc::as_ptr(name).cast::<u8>() as usize;
        if let Some(&(_, i)) = self.recent_names.iter().find(|(a, _)| *a == addr) {
            return i;
        }
        self.names.push_back(name.clone());
        let i = index(self.names.len() - 1);
        self.recent_names[self.next_name] = (addr, i);
        self.next_name = (self.next_name + 1) % NAME_WINDOW;
        i
    }

    /// The index of `t` in `refs`, recorded now unless it was lately.
    fn ref_index(&mut self, t: &TensorRef) -> u32 {
        let key = RefKey::of(t);
        if let Some(&(_, i)) = self.recent.iter().find(|(k, _)| *k == key) {
            return i;
        }
        self.refs.push_back(t.clone());
        let i = index(self.refs.len() - 1);
        self.recent[self.next] = (key, i);
        self.next = (self.next + 1) % REF_WINDOW;
        i
    }

    /// Operation `i` as recorded.
    fn op(&self, i: u32) -> Option<Arc<OpRef>> {
        if i as usize + 1 == self.ops.len() {
            if let Some((last, _)) = &self.last_op {
                return Some(last.clone());
            }
        }
        match self.ops.get(i as usize)? {
            OpRecord::Whole { op, .. } => self.whole.get(*op as usize).cloned(),
            OpRecord::Compact {
                id,
                name,
                result,
                operands,
                len,
                ..
            } => {
                let tensor = |r: u32| self.refs.get(r as usize).cloned();
                Some(Arc::new(OpRef {
                    id: *id as usize,
                    name: self.names.get(*name as usize)?.clone(),
                    operands: operands[..usize::from(*len)]
                        .iter()
                        .map(|&r| tensor(r))
                        .collect::<Option<_>>()?,
                    result: tensor(*result)?,
                }))
            }
        }
    }

    fn text_index(&mut self, what: &Arc<str>) -> u32 {
        let n = self.texts.len();
        let start = n.saturating_sub(TEXT_WINDOW);
        for i in (start..n).rev() {
            if self.texts.get(i).is_some_and(|t| t == what) {
                return index(i);
            }
        }
        self.texts.push_back(what.clone());
        index(n)
    }

    fn tensor_index(&mut self, tensor: &TensorRef, spec: &Arc<str>) -> u32 {
        if let Some((t, s)) = self.tensors.last() {
            if Arc::ptr_eq(s, spec) && t == tensor {
                return index(self.tensors.len() - 1);
            }
        }
        self.tensors.push_back((tensor.clone(), spec.clone()));
        index(self.tensors.len() - 1)
    }

    fn other(&mut self, origin: Origin) -> Packed {
        self.others.push_back(origin);
        Packed::Other(index(self.others.len() - 1))
    }

    /// Records `origin`; returns its id.
    pub fn push(&mut self, origin: Origin) -> u32 {
        let id = index(self.entries.len());
        let packed = match &origin {
            Origin::Op {
                op,
                left,
                right,
                relation,
            } => match (Site::new(*left), Site::new(*right)) {
                (Some(left), Some(right)) => Packed::Op {
                    op: self.op_index(op).0,
                    left,
                    right,
                    relation: *relation,
                },
                _ => self.other(origin),
            },
            Origin::OpRow { op, site, what } => {
                let packed = match Site::new(*site) {
                    Some(site) => {
                        let (op, base) = self.op_index(op);
                        let at = i64::from(self.text_index(what)) - i64::from(base);
                        i8::try_from(at)
                            .ok()
                            .map(|what| Packed::OpRow { op, what, site })
                    }
                    None => None,
                };
                match packed {
                    Some(p) => p,
                    None => self.other(origin),
                }
            }
            Origin::Declared { tensor, kind, spec } => Packed::Declared {
                tensor: self.tensor_index(tensor, spec),
                kind: *kind,
            },
            Origin::Required { tensor, kind, spec } => Packed::Required {
                tensor: self.tensor_index(tensor, spec),
                kind: *kind,
            },
            Origin::Finalization => Packed::Finalization,
            _ => self.other(origin),
        };
        self.entries.push_back(packed);
        id
    }

    /// The origin with id `id`.
    pub fn get(&self, id: u32) -> Option<Origin> {
        if !self.renamed.is_empty() {
            if let Some(o) = self.renamed.get(&id) {
                return Some(o.clone());
            }
        }
        let op = |i: u32| self.op(i);
        Some(match *self.entries.get(id as usize)? {
            Packed::Op {
                op: i,
                left,
                right,
                relation,
            } => Origin::Op {
                op: op(i)?,
                left: left.get(),
                right: right.get(),
                relation,
            },
            Packed::OpRow { op: i, what, site } => {
                let at = i64::from(self.ops.get(i as usize)?.texts()) + i64::from(what);
                Origin::OpRow {
                    op: op(i)?,
                    site: site.get(),
                    what: self.texts.get(usize::try_from(at).ok()?)?.clone(),
                }
            }
            Packed::Declared { tensor, kind } => {
                let (tensor, spec) = self.tensors.get(tensor as usize)?.clone();
                Origin::Declared { tensor, kind, spec }
            }
            Packed::Required { tensor, kind } => {
                let (tensor, spec) = self.tensors.get(tensor as usize)?.clone();
                Origin::Required { tensor, kind, spec }
            }
            Packed::Finalization => Origin::Finalization,
            Packed::Other(i) => self.others.get(i as usize)?.clone(),
        })
    }

    /// Replaces origin `id` (which exists) by `origin`.
    pub fn rename(&mut self, id: u32, origin: Origin) {
        self.renamed.insert(id, origin);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(id: usize) -> Arc<OpRef> {
        Arc::new(OpRef {
            id,
            name: "add".into(),
            operands: vec![TensorRef::new(1, "a".into()), TensorRef::new(2, "b".into())],
            result: TensorRef::new(3, "c".into()),
        })
    }

    #[test]
    fn origins_come_back_as_recorded_and_truncate() {
        let mut t = OriginTable::default();
        let a = op(0);
        let what: Arc<str> = "to be 3".into();
        let spec: Arc<str> = "3".into();
        let x = TensorRef::new(1, "x".into());
        let recorded = [
            Origin::Declared {
                tensor: x.clone(),
                kind: RowKind::Batch,
                spec: spec.clone(),
            },
            Origin::Declared {
                tensor: x.clone(),
                kind: RowKind::Output,
                spec: spec.clone(),
            },
            Origin::Op {
                op: a.clone(),
                left: RowSite::result(RowKind::Batch),
                right: RowSite::operand(1, RowKind::Input),
                relation: Relation::Broadcasts,
            },
            Origin::OpRow {
                op: a.clone(),
                site: RowSite::operand(0, RowKind::Output),
                what: what.clone(),
            },
            Origin::Op {
                op: a.clone(),
                left: RowSite {
                    position: 70_000,
                    kind: RowKind::Batch,
                },
                right: RowSite::result(RowKind::Output),
                relation: Relation::Equal,
            },
            Origin::Direct {
                what: "direct".into(),
            },
            Origin::Finalization,
        ];
        for (i, o) in recorded.iter().enumerate() {
            assert_eq!(t.push(o.clone()) as usize, i);
        }
        assert_eq!((t.ops.len(), t.tensors.len(), t.texts.len()), (1, 1, 1));
        let m = t.mark();
        for (i, o) in recorded.iter().enumerate() {
            assert_eq!(t.get(i as u32).as_ref(), Some(o));
        }
        t.push(Origin::OpRow {
            op: op(1),
            site: RowSite::result(RowKind::Batch),
            what: "other".into(),
        });
        t.rename(0, Origin::Finalization);
        t.rename(7, Origin::Finalization);
        t.truncate(m);
        assert_eq!(t.len(), recorded.len());
        assert_eq!(t.get(0), Some(Origin::Finalization));
        assert_eq!(t.get(7), None);
        assert_eq!((t.ops.len(), t.texts.len()), (1, 1));
    }

    #[test]
    fn operations_share_the_tensors_they_name_and_come_back_equal() {
        let mut t = OriginTable::default();
        let (a, b) = (TensorRef::new(1, "a".into()), TensorRef::new(2, "b".into()));
        let c = TensorRef::new(3, "c".into()).with_definition(Some(crate::Definition::new(
            "add".into(),
            ["a".into(), "b".into()],
        )));
        let first = Arc::new(OpRef {
            id: 0,
            name: "add".into(),
            operands: vec![a.clone(), b],
            result: c.clone(),
        });
        let second = Arc::new(OpRef {
            id: 1,
            name: "mul".into(),
            operands: vec![c, a],
            result: TensorRef::new(4, "d".into()),
        });
        let origin = |op: &Arc<OpRef>| Origin::OpRow {
            op: op.clone(),
            site: RowSite::result(RowKind::Batch),
            what: "w".into(),
        };
        t.push(origin(&first));
        let m = t.mark();
        t.push(origin(&second));
        // `c` and `a` are recorded once for both operations.
        assert_eq!((t.ops.len(), t.refs.len()), (2, 4));
        assert_eq!(t.get(0), Some(origin(&first)));
        assert_eq!(t.get(1), Some(origin(&second)));
        t.truncate(m);
        assert_eq!((t.ops.len(), t.refs.len()), (1, 3));
        assert_eq!(t.get(0), Some(origin(&first)));
        // A tensor recorded after a rollback is recorded again.
        let third = Arc::new(OpRef {
            id: 1,
            name: "exp".into(),
            operands: vec![TensorRef::new(4, "d".into())],
            result: TensorRef::new(5, "e".into()),
        });
        t.push(origin(&third));
        assert_eq!((t.ops.len(), t.refs.len()), (2, 5));
        assert_eq!(t.get(1), Some(origin(&third)));
    }
}
