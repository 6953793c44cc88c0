//! Benchmarks with the flags and output of NDB's own test programs, so
//! figures can be compared side by side: `flexasynch` (NDB's flexAsynch),
//! `readperf` (NDB's testReadPerf: each access path's time per row) and
//! `bank` (NDB's test bank: transfers that must keep the total).

pub mod bank;
mod cpu;
pub mod flexasynch;
pub mod readperf;
mod stats;
