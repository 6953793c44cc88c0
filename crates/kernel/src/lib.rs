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
//!   the inactivity timeout.
//! - [`lqh::Lqh`], the local query handler: owns this node's fragments
//!   (storage), takes row locks, keeps each transaction's uncommitted
//!   changes, applies them at commit and drops them at abort, times out
//!   lock waits (deadlock timeout).
//!
//! [`node::DataNode`] wires the blocks of one node together and delivers
//! their local signals run-to-completion.

pub mod config;
pub mod finished;
pub mod lqh;
pub mod node;
pub mod pool;
pub mod route;
pub mod signal;
pub mod tc;

pub use config::KernelConfig;
pub use node::{ConnId, DataNode, NodeStats, Output};

#[cfg(test)]
mod tests;
