//! Dimensions: one axis of a tensor, either known or still a variable.

use std::fmt;
use std::num::NonZeroU64;
use std::sync::Arc;

use crate::size::{Size, SymSize};

/// A dimension variable: an axis whose size the solver has yet to find.
///
/// Ids are dense and allocated by the solver, so an environment can index
/// entries by id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DimVar(pub u32);

impl DimVar {
    /// The index of this variable in the solver's environment.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for DimVar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "d{}", self.0)
    }
}

/// The semantic label of a dimension, such as `rgb` for a size-3 colour axis.
///
/// Two axes that must agree on their size must also agree on their labels
/// when both have one; an unlabeled size takes the label of the other side.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Label(Arc<String>);

impl Label {
    /// Creates a label from its text.
    pub fn new(text: &str) -> Self {
        Label(Arc::new(text.to_owned()))
    }

    /// The label's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Label {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A dimension whose size is known, optionally labeled. The size may be
/// 0 (an empty axis), as in numpy: 1 broadcasts to it, any other size
/// does not.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct KnownDim {
    size: Size,
    label: Option<Label>,
}

impl KnownDim {
    /// An unlabeled dimension of the given size.
    pub fn new(size: NonZeroU64) -> Self {
        KnownDim::sized(size.get())
    }

    /// An unlabeled dimension of size `size` (0 included).
    pub fn sized(size: u64) -> Self {
        KnownDim {
            size: Size::Static(size),
            label: None,
        }
    }

    /// An unlabeled dimension whose size is known only at run time.
    pub fn symbolic(size: SymSize) -> Self {
        KnownDim {
            size: Size::Symbolic(size),
            label: None,
        }
    }

    /// An unlabeled ragged (`var`) dimension: each row of the axes before
    /// it has its own length ([`Size::Ragged`]).
    ///
    /// ```
    /// use shape_core::KnownDim;
    /// let v = KnownDim::ragged();
    /// assert!(v.is_ragged());
    /// assert_eq!(v.to_string(), "var");
    /// assert_eq!(v.static_size(), None);
    /// ```
    pub fn ragged() -> Self {
        KnownDim {
            size: Size::Ragged,
            label: None,
        }
    }

    /// Whether this is a ragged (`var`) dimension.
    pub fn is_ragged(&self) -> bool {
        self.size == Size::Ragged
    }

    /// A dimension of the given size, unlabeled.
    pub fn of_size(size: Size) -> Self {
        KnownDim { size, label: None }
    }

    /// An unlabeled dimension of size `size`, or `None` when `size` is 0;
    /// for the places that need a size of at least 1 (a convolution's
    /// stride, an element count). [`KnownDim::sized`] takes any size.
    pub fn of(size: u64) -> Option<Self> {
        NonZeroU64::new(size).map(KnownDim::new)
    }

    /// The size-1 dimension, which broadcasts against any size.
    pub fn one() -> Self {
        KnownDim::sized(1)
    }

    /// This dimension with the given label.
    pub fn with_label(mut self, label: Option<Label>) -> Self {
        self.label = label;
        self
    }

    /// The size of a static dimension (0 for an empty axis).
    ///
    /// A symbolic dimension has no size until its run-time sizes are
    /// bound, and a ragged one has a length per row; both give
    /// `u64::MAX`, a size no tensor can have: symbolic dims never reach
    /// the shapes that lowering and backends read (`SolvedGraph::bind`
    /// substitutes them first), and ragged ones are lowered row by row
    /// with each row's length. Code that may meet one reads
    /// [`KnownDim::static_size`] or [`KnownDim::extent`].
    pub fn size(&self) -> u64 {
        self.static_size().unwrap_or(u64::MAX)
    }

    /// The size, static or symbolic.
    pub fn extent(&self) -> &Size {
        &self.size
    }

    /// The static size; `None` for a size known only at run time.
    pub fn static_size(&self) -> Option<u64> {
        match &self.size {
            Size::Static(n) => Some(*n),
            Size::Symbolic(_) | Size::Ragged => None,
        }
    }

    /// The symbolic size; `None` for a static one.
    pub fn symbolic_size(&self) -> Option<&SymSize> {
        match &self.size {
            Size::Static(_) | Size::Ragged => None,
            Size::Symbolic(s) => Some(s),
        }
    }

    /// Whether the two sizes are the same: equal static sizes, or the same
    /// symbolic expression (the solver's e-graph decides the rest).
    pub fn same_size(&self, other: &KnownDim) -> bool {
        self.size == other.size
    }

    /// The size as a non-zero integer; `None` for an empty axis (or a
    /// symbolic one).
    pub fn non_zero_size(&self) -> Option<NonZeroU64> {
        NonZeroU64::new(self.static_size()?)
    }

    /// Whether the axis is empty (static size 0).
    pub fn is_empty(&self) -> bool {
        self.size == Size::Static(0)
    }

    /// The label, if any.
    pub fn label(&self) -> Option<&Label> {
        self.label.as_ref()
    }

    /// Whether this is a size-1 dimension (which broadcasts).
    pub fn is_one(&self) -> bool {
        self.size == Size::Static(1)
    }

    /// Whether the two dimensions' labels can stand for the same axis:
    /// equal, or at least one of them absent.
    pub fn labels_agree(&self, other: &KnownDim) -> bool {
        match (&self.label, &other.label) {
            (Some(a), Some(b)) => a == b,
            _ => true,
        }
    }
}

impl fmt::Display for KnownDim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.label {
            Some(label) => write!(f, "{label}:{}", self.size),
            None => write!(f, "{}", self.size),
        }
    }
}

/// One axis of a shape.
///
/// New kinds of dimension (dynamic `?` sizes, ragged `var` dims, affine
/// convolution dims) are added as variants. The enum is deliberately not
/// `#[non_exhaustive]`: every match in the solver must be revisited when a
/// variant is added, and a wildcard arm would hide that.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dim {
    /// A known size.
    Known(KnownDim),
    /// A size still to be inferred.
    Var(DimVar),
}

impl Dim {
    /// A known, unlabeled dimension; `None` when `size` is 0 (for sizes
    /// that must be at least 1; [`Dim::sized`] takes any size).
    pub fn known(size: u64) -> Option<Dim> {
        KnownDim::of(size).map(Dim::Known)
    }

    /// A known, unlabeled dimension of any size, 0 included.
    pub fn sized(size: u64) -> Dim {
        Dim::Known(KnownDim::sized(size))
    }

    /// The known dimension, when this is one.
    pub fn as_known(&self) -> Option<&KnownDim> {
        match self {
            Dim::Known(k) => Some(k),
            Dim::Var(_) => None,
        }
    }
}

impl From<KnownDim> for Dim {
    fn from(k: KnownDim) -> Self {
        Dim::Known(k)
    }
}

impl From<DimVar> for Dim {
    fn from(v: DimVar) -> Self {
        Dim::Var(v)
    }
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Known(k) => k.fmt(f),
            Dim::Var(v) => v.fmt(f),
        }
    }
}
