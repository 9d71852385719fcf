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

use std::sync::Arc;

use imbl::{OrdMap, Vector};
use shape_core::RowKind;

use crate::origin::{OpRef, Origin, Relation, RowSite, TensorRef};

/// An origin as stored: what varies between an operation's origins, with
/// the rest by index.
#[derive(Clone, Copy, Debug)]
enum Packed {
    /// [`Origin::Op`].
    Op {
        op: u32,
        left: u16,
        right: u16,
        left_kind: RowKind,
        right_kind: RowKind,
        relation: Relation,
    },
    /// [`Origin::OpRow`], its text in `texts`.
    OpRow {
        op: u32,
        what: u32,
        position: u16,
        kind: RowKind,
    },
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

// Twelve bytes: 685,000 of them for the 100,000-operation benchmark.
const _: () = assert!(std::mem::size_of::<Packed>() <= 12);

/// How many of the last texts a new one is compared with: an operation's
/// row rules are shared by its applications (an einsum spec used several
/// times in a row), so that each is stored once.
const TEXT_WINDOW: usize = 16;

/// The lengths of a [`OriginTable`]'s parts, to take it back to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OriginMark {
    entries: usize,
    ops: usize,
    texts: usize,
    tensors: usize,
    others: usize,
}

/// Origins by id (see the module documentation). Cloning shares every
/// part (persistent vectors).
#[derive(Clone, Debug, Default)]
pub(crate) struct OriginTable {
    entries: Vector<Packed>,
    /// Operations, each once for the run of origins that name it.
    ops: Vector<Arc<OpRef>>,
    /// The texts of [`Origin::OpRow`]s.
    texts: Vector<Arc<str>>,
    /// The tensors and spec texts of declarations and requirements.
    tensors: Vector<(TensorRef, Arc<str>)>,
    others: Vector<Origin>,
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
            texts: self.texts.len(),
            tensors: self.tensors.len(),
            others: self.others.len(),
        }
    }

    /// Forgets every origin recorded since `m` (renames of older ones
    /// stay, as they did when each origin was stored whole).
    pub fn truncate(&mut self, m: OriginMark) {
        self.entries.truncate(m.entries);
        self.ops.truncate(m.ops);
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

    fn op_index(&mut self, op: &Arc<OpRef>) -> u32 {
        if let Some(last) = self.ops.last() {
            if Arc::ptr_eq(last, op) {
                return index(self.ops.len() - 1);
            }
        }
        self.ops.push_back(op.clone());
        index(self.ops.len() - 1)
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
            } => match (u16::try_from(left.position), u16::try_from(right.position)) {
                (Ok(l), Ok(r)) => Packed::Op {
                    op: self.op_index(op),
                    left: l,
                    right: r,
                    left_kind: left.kind,
                    right_kind: right.kind,
                    relation: *relation,
                },
                _ => self.other(origin),
            },
            Origin::OpRow { op, site, what } => match u16::try_from(site.position) {
                Ok(position) => Packed::OpRow {
                    op: self.op_index(op),
                    what: self.text_index(what),
                    position,
                    kind: site.kind,
                },
                Err(_) => self.other(origin),
            },
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
        let op = |i: u32| self.ops.get(i as usize).cloned();
        Some(match *self.entries.get(id as usize)? {
            Packed::Op {
                op: i,
                left,
                right,
                left_kind,
                right_kind,
                relation,
            } => Origin::Op {
                op: op(i)?,
                left: RowSite {
                    position: left.into(),
                    kind: left_kind,
                },
                right: RowSite {
                    position: right.into(),
                    kind: right_kind,
                },
                relation,
            },
            Packed::OpRow {
                op: i,
                what,
                position,
                kind,
            } => Origin::OpRow {
                op: op(i)?,
                site: RowSite {
                    position: position.into(),
                    kind,
                },
                what: self.texts.get(what as usize)?.clone(),
            },
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
}
