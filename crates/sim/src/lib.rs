//! The deterministic simulator: the data node's real blocks (shoal-kernel)
//! driven in one thread with virtual time, by simulated clients over a
//! simulated network, with one seeded RNG deciding every delay, reordering,
//! lost message (a broken connection), idle period and operation. Every
//! answer is checked against a model of the committed data.
//!
//! A run is a pure function of its seed: a failure prints the seed and the
//! command that replays it (`cargo run --release -p shoal-sim -- --seed N`).
//!
//! - [`disk`]: a node's disk, where a crash loses or tears unsynced writes
//!   (not yet used by the blocks: the durability work builds on it).
//! - [`model`]: committed images per key, in commit order.
//! - [`txn`]: a client transaction and the checks of its answers.
//! - [`world`]: the event loop, network, faults, clients and checks.

#![forbid(unsafe_code)]

pub mod disk;
pub mod model;
pub mod txn;
pub mod world;

pub use world::{run, table_def, SimFailure, SimOptions, SimReport};
