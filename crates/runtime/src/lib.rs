//! The real-world driver of a data node: a TCP event loop (mio/epoll) that
//! feeds client signals to the kernel blocks and writes their answers, a
//! timer that ticks the blocks, and a link to mgmd for config, schema
//! events and status reports.
//!
//! The kernel decides everything; this crate only moves bytes, keeps time
//! and enforces the transport limits (handshake, frame limits, connection
//! count, output backlog).

mod conn;
mod datanode;
mod mgm_link;
mod stop_signal;

pub use datanode::{run_datanode, DataNodeOptions};
