//! The MySQL client/server protocol: what lets stock clients, connectors
//! and sysbench talk to the SQL node.
//!
//! A connection goes through the greeting and login (`handshake`,
//! checked against a [`UserDirectory`]), then serves commands (`command`)
//! by running statements through a [`Handler`] and encoding its
//! [`Outcome`]s and streamed rows (`resultset`; prepared statements in `prepared` and
//! `binary`). [`serve`] accepts connections, one task each.
//!
//! Modules, one job each:
//! - `wire`: bounds-checked reading and writing of the protocol's
//!   integers and strings;
//! - `packet`: framing (length + sequence id, 16 MiB splits,
//!   `max_allowed_packet`, timeouts);
//! - `auth`: accounts, password hashes, scramble proofs;
//! - `handshake`: greeting, handshake response, auth switch;
//! - `command`: the command loop of a logged-in connection;
//! - `resultset`: OK/ERR/EOF packets, column definitions, rows;
//! - `answers`: the sink a handler writes its answers to, which streams
//!   a result set's rows to the client as they come;
//! - `prepared`, `binary`, `sql_scan`: prepared statements, binary values,
//!   and the lexical scan that finds placeholders and statement breaks;
//! - `errors`: the MySQL error codes this layer answers with;
//! - `server`: the listener, connection limit and graceful stop.
//!
//! Invariant: no input a client sends can panic the server; malformed
//! input is answered with an ERR packet and the connection is closed.
//!
//! [`Handler`]: crate::handler::Handler
//! [`Outcome`]: crate::outcome::Outcome

mod answers;
mod auth;
pub(crate) mod binary;
mod command;
mod errors;
mod handshake;
mod packet;
mod prepared;
mod resultset;
mod server;
pub(crate) mod sql_scan;
mod wire;

pub use auth::{Account, AccountFuture, PasswordHashes, UserDirectory, Users};
pub use server::{serve, serve_with_shutdown, ServerConfig};
