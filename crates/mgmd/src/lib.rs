//! The management server (mgmd) and its client API: cluster configuration
//! (a TOML file with NDB's concepts), node-id allocation, node states, and
//! the schema (tables, durable in the data dir with atomic writes), data
//! node start numbers, the arbitrator that decides which side of a split
//! survives, and which data nodes the operator wants running. Data traffic
//! never passes through mgmd.
//!
//! - [`config`]: the config file, its validation and the per-node settings.
//! - [`proto`]: the length-prefixed JSON protocol between mgmd and its peers.
//! - [`server`]: mgmd itself (`server::run`).
//! - [`client`]: `MgmClient` and the data node / API node sessions.

pub mod client;
pub mod config;
pub mod dir_lock;
pub mod proto;
pub mod server;
mod store;

pub use client::{
    format_show, wait_started, ApiSession, ClusterStatus, DataNodeSession, MgmClient, NodeInfo,
};
pub use config::{ClusterConfig, DataNodeConfig, NodeSection};
pub use proto::{MgmEvent, NodeState, NodeStatus, StartPhase};

#[cfg(test)]
mod tests;
