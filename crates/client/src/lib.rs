//! The native asynchronous Rust API of Shoal: connect to a cluster, describe
//! tables once as [`Record`]s (like NDB's NdbRecord), and run transactions
//! whose operations travel to a data node in one batched round trip.
//!
//! ```no_run
//! # async fn demo() -> Result<(), shoal_client::ShoalError> {
//! use shoal_client::{Cluster, ExecType, LockMode, Value};
//! let cluster = Cluster::connect("127.0.0.1:1186").await?;
//! let accounts = cluster.table("accounts").await?;
//! let rec = accounts.record(&["id", "balance"])?;
//! let mut tx = cluster.transaction();
//! tx.insert(&rec, &[Value::UInt(1), Value::Int(100)])?;
//! let read = tx.read(&rec, &[Value::UInt(1)], LockMode::Shared)?;
//! tx.execute(ExecType::Commit).await?;
//! println!("{:?}", tx.row(read).and_then(|r| r.get("balance")));
//! # Ok(()) }
//! ```
//!
//! Structure:
//! - [`Cluster`] registers with mgmd as an API node, keeps the schema cache
//!   and one [`conn`] connection per data node. Each connection has a writer
//!   task that sends whatever all transactions queued since its last write
//!   in one `write`, and a reader task that routes replies by transaction id.
//! - [`Table`] and [`Record`] hold a table definition with its row layout,
//!   and a column list with everything precomputed that encoding needs.
//! - [`Transaction`] queues operations (encoding and validating each one at
//!   once, so bad values fail before anything is sent) and sends them with
//!   one `TcKeyReq` per [`Transaction::execute`].
//! - [`RowBuf`] is where a read lands: its answer is checked once, on
//!   arrival, and laid out by the read's record (null bits, fixed-size
//!   columns at offsets the record fixed, variable-size ones through an
//!   offset entry), so every column is then read in O(1), typed
//!   (`get_u32`, `get_str`, …) without building a [`Value`]. Buffers are
//!   reused across transactions ([`Transaction::read_into`],
//!   [`Transaction::take_row`]), like NdbRecord's row memory. [`Row`] is
//!   the same for an attribute list no record describes.
//! - [`Scan`] reads every row of a table (committed read), a round of rows
//!   at a time, keeping only those a [`FilterExpr`] the data nodes run
//!   holds true for; its rows land in [`RowBuf`]s like a read's
//!   ([`Transaction::scan`], [`scan`]).
//!
//! - [`UniqueIndex`] reads, updates and deletes a row by the values of a
//!   unique index's columns, in one request
//!   ([`Transaction::read_unique`]); [`Cluster::create_unique_index`]
//!   adds one to a table with rows, filling it while writes go on
//!   ([`unique`]).
//!
//! - [`auto_increment`] keeps every table's AUTO_INCREMENT counter in a
//!   hidden table of the cluster, each `Cluster` taking ranges of values
//!   from it as NDB's API nodes do ([`Cluster::auto_increment_values`]).
//!
//! - [`users`]: the SQL accounts mgmd keeps for every SQL node
//!   ([`Cluster::create_users`], [`Cluster::grant`], ...).
//!
//! - When a data node fails, [`outcomes`] tells a commit that lost its
//!   answer how it ended, from the report of the node that took the failed
//!   coordinator's transactions over; the cluster reconnects to data nodes
//!   as they (re)start.
//!
//! Invariants:
//! - A transaction talks to exactly one data node (its coordinator), chosen
//!   at its first execute. A scan is a request stream of its own, under its
//!   own id, on one data node (the transaction's coordinator once chosen).
//! - Every request waiting for a reply is answered exactly once: by the
//!   reply, by a receive timeout, or by the failure of its connection.
//!   Nothing waits forever.
//! - A transaction left open (dropped after `NoCommit`) is rolled back on
//!   the data node, fire-and-forget, so its locks are released.
//!
//! The I/O tasks are spawned on the tokio runtime that calls
//! [`Cluster::connect`]; that runtime needs I/O and time enabled
//! (`enable_all()`), and must keep running while the cluster is in use. A
//! `current_thread` runtime per thread with its own `Cluster` works, as does
//! one `multi_thread` runtime shared by all.

mod attr_reader;
pub mod auto_increment;
pub mod cluster;
mod column_access;
pub mod conn;
pub mod error;
mod outcomes;
pub mod park_spin;
pub mod record;
mod record_layout;
mod replies;
pub mod row;
pub mod row_buf;
pub mod scan;
pub mod transaction;
pub mod unique;
pub mod users;
pub mod verify;

pub use auto_increment::AutoIncrementValues;
pub use cluster::{Cluster, ClusterOptions};
pub use error::{ErrorClass, ErrorCode, ShoalError};
pub use park_spin::ParkSpin;
pub use record::{Record, Table};
pub use row::Row;
pub use row_buf::RowBuf;
pub use scan::{LockingScan, Scan, ScanBuilder};
pub use shoal_mgmd::proto::{
    AccountName, GrantLevel, Grants, PasswordChange, StoredPassword, UserAccount,
};
pub use transaction::{OpId, TableRef, Transaction, TransactionState};
pub use unique::UniqueIndex;
pub use verify::ReplicaReport;

pub use shoal_types::filter::{CmpOp, FilterExpr};
pub use shoal_types::{ColumnDef, ColumnType, Decimal, TableDef, Value};
pub use shoal_wire::{ExecType, LockMode};
