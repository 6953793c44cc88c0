//! Per-fragment storage of a data node: a compact row store with stable row
//! ids (fixed part + variable part), a primary-key hash index, a row lock
//! manager, and memory accounting against the node's `data_memory`.
//!
//! Invariants:
//! - The row store holds only row images the kernel handed it; it never
//!   decides visibility. A row inserted by an uncommitted transaction is
//!   flagged *tentative* until the kernel commits or removes it.
//! - Every byte this crate allocates for rows, var parts and index buckets
//!   is charged to the [`Memory`] budget first; an allocation that does not
//!   fit fails with [`OutOfMemory`] and changes nothing.
//! - Row ids are stable for the life of a row and reused after removal.
//!
//! The crate does no I/O and keeps no clocks, so the simulator and the
//! runtime drive it alike. The redo log's format ([`redo`]) is here for
//! the same reason: its writer hands out bytes and its reader takes them,
//! whoever does the writing. Checkpoints (durability issue) will read
//! rows by row id in row-id order, which the page layout keeps cheap.

#![forbid(unsafe_code)]

mod changed;
mod crc32c;
mod frag_ordered;
mod fragment;
mod index;
mod key;
mod locks;
mod memory;
mod ordered;
pub mod redo;
mod row_epochs;
mod rows;
pub mod sysfile;

pub use changed::ChangedRows;
pub use crc32c::{crc32c, crc32c_update};
pub use fragment::Fragment;
pub use locks::{LockManager, LockMode, LockOutcome, LockOwner, WaitToken};
pub use memory::{Memory, OutOfMemory, PAGE_BYTES};
pub use ordered::{
    OrderedIndex, OrderedInsertError, OrderedIter, OrderedIterBack, ORDERED_KEY_BYTES_MAX,
};
pub use row_epochs::RowEpochs;
pub use rows::RowId;
