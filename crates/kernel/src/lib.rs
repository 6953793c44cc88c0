//! The data node's logic as sans-IO blocks: plain state machines that take
//! a signal and the current time and return signals to send. No block opens
//! a socket, spawns a thread, reads the clock or draws a random number; the
//! runtime (real TCP, threads) and the simulator (virtual time, one seeded
//! RNG) drive the very same code.
//!
//! Blocks (NDB's names, see docs/GLOSSARY.md):
//! - [`tc::Tc`], the transaction coordinator: owns client transactions,
//!   sends each operation to the LQH that holds its fragment, collects the
//!   answers, runs commit and abort, enforces the transaction limits and
//!   the inactivity timeout, takes over a failed coordinator's
//!   transactions.
//! - [`lqh::Lqh`], the local query handler: owns this node's fragments
//!   (storage), takes row locks, keeps each transaction's uncommitted
//!   changes, applies them at commit (or complete) and drops them at abort, times out
//!   lock waits (deadlock timeout), copies fragments to restarting nodes.
//! - [`qmgr::Qmgr`], membership: heartbeats, failure detection, views
//!   agreed in two phases by the president, arbitration, joining.
//! - [`dih::Dih`], distribution: each fragment's replicas, primary and
//!   version as membership changes; a restarting node's copy.
//!
//! [`node::DataNode`] wires the blocks of one node together and delivers
//! their local signals run-to-completion.

#![forbid(unsafe_code)]

pub mod config;
pub mod detmap;
pub mod dih;
pub mod finished;
pub mod gcp;
pub mod lqh;
pub mod node;
pub mod pool;
pub mod qmgr;
pub mod signal;
pub mod tc;
pub mod testkit;

pub use config::{Faults, KernelConfig};
pub use node::{ConnId, DataNode, LocalFiles, NodeRole, NodeStats, Output};

#[cfg(test)]
mod tests;
