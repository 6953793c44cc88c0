//! The SQL node (`shoal sql`, NDB's mysqld as an SQL node): the MySQL
//! client/server protocol on a TCP port, and SQL run against the cluster
//! through the native client library only (no back door: every SQL
//! feature is something the native API can do).
//!
//! Modules:
//! - [`outcome`]: what a statement answers (an OK, or a result set), and
//!   SQL errors with MySQL's codes and SQLSTATEs, and [`handler`]: the
//!   interface between the protocol layer and the executor, which
//!   writes each answer to an [`answer`] sink as it comes (result sets
//!   stream);
//! - [`protocol`]: packets, the handshake and authentication, commands, and
//!   result sets on the wire, and the server that accepts connections;
//! - `session`: one client connection's SQL state (current database,
//!   autocommit, the open transaction) and statement execution;
//! - [`node`]: the `shoal sql` process (one API node of the cluster
//!   serving the protocol).

#![forbid(unsafe_code)]

pub mod answer;
pub mod catalog;
pub mod exec;
pub mod handler;
pub mod node;
pub mod outcome;
pub mod protocol;
pub mod session;
pub mod sqltypes;

pub use handler::{Handler, HandlerFactory, SessionStatus};
pub use outcome::{Column, ColumnKind, Outcome, SqlError};
pub use session::{Session, SessionFactory};
