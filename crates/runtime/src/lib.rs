//! The real-world driver of a data node: a TCP event loop (mio/epoll) that
//! feeds client signals and other data nodes' signals to the kernel blocks
//! and writes their outputs, a timer that ticks the blocks, and a link to
//! mgmd for config, schema events, arbitration and status reports.
//!
//! The kernel decides everything (membership, failures, takeover,
//! restarts); this crate only moves bytes, keeps time and enforces the
//! transport limits (handshake, frame limits, connection count, buffers).
//!
//! Modules: `datanode` (the process: setup, the loop), `event_loop`
//! (connections, input, outputs), `peers` (links to other data nodes),
//! `conn` (one connection's buffers), `mgm_link` (mgmd), `node_files`
//! (the redo log and sysfile, and their writer thread), `stop_signal`.

mod conn;
mod datanode;
mod event_loop;
mod mgm_link;
mod node_files;
mod peers;
mod stop_signal;

pub use datanode::{run_datanode, DataNodeOptions};
