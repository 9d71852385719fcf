//! The built-in operations, one file each.
//!
//! Each file holds one operation (or one family, such as the pointwise
//! functions of one tensor): its type, its [`crate::Operation`] impl
//! (constraints, projections, lowering, spelling) and `entries()`, its rows
//! of the [`crate::Registry`]. To add a built-in operation, write its file
//! and add its name to the list below; `Registry::builtin` then offers it
//! to the graph API, the text language and the random programs.

macro_rules! builtin_operations {
    ($($module:ident),* $(,)?) => {
        $(mod $module;)*

        /// Every built-in entry, module by module in the order listed.
        pub(crate) fn builtin_entries() -> Vec<crate::registry::OpEntry> {
            let mut entries = Vec::new();
            $(entries.extend($module::entries());)*
            entries
        }
    };
}

builtin_operations!(
    unary,
    binary,
    compose,
    transpose,
    batch_slice,
    einsum,
    concat
);

mod assign;
pub(crate) mod terminal;

pub use assign::{Assign, AssignExisting};
pub use batch_slice::{BatchSlice, BatchSliceRange};
pub use binary::Binary;
#[allow(deprecated)]
pub use binary::BinaryFunction;
pub use compose::Compose;
pub use concat::Concat;
pub use einsum::{Einsum, Reduction};
pub use transpose::Transpose;
pub use unary::{Unary, UnaryFunction};
