//! Benchmarks with the flags and output of NDB's own test programs, so
//! figures can be compared side by side: `flexasynch` (NDB's flexAsynch).

pub mod flexasynch;
mod stats;
