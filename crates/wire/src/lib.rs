//! The wire protocol: a versioned handshake, frames that carry batches of
//! signals, and the signal catalogue. This crate is the only interface
//! between clients and data nodes; `docs/PROTOCOL.md` documents every byte.
//!
//! Invariants: every integer is fixed-width little-endian; a decoder never
//! trusts a length it has not checked against the bytes it holds and the
//! negotiated limits; malformed input is an error, never a panic.

#![forbid(unsafe_code)]

mod fragment_rows;
pub mod frame;
pub mod handshake;
pub mod node;
pub mod scan;
pub mod signals;

pub use frame::{
    FrameDecoder, FrameEncoder, WireError, FRAME_BYTES_MAX, FRAME_HEADER_BYTES,
    SIGNALS_PER_FRAME_MAX,
};
pub use frame::{FRAME_BYTES_MIN, SIGNAL_HEADER_BYTES};
pub use handshake::{Hello, HelloReply, NodeType, HELLO_BYTES, MAGIC, PROTOCOL_VERSION};
pub use handshake::{HELLO_DETAIL_BYTES_MAX, HELLO_REPLY_FIXED_BYTES, HELLO_STATUS_ACCEPTED};
pub use signals::{
    gsn_name, ALL_COLUMNS, GSN_ERROR_REPORT, GSN_NODE_SIGNALS_FIRST, GSN_TC_KEY_CONF,
    GSN_TC_KEY_REF, GSN_TC_KEY_REQ, OP_BY_UNIQUE_KEY, OP_FLAGS_KNOWN, OP_IGNORE_ERROR,
    SIGNAL_DETAIL_BYTES_MAX,
};
pub use signals::{
    ErrorReport, ExecType, KeyOp, LockMode, OpResult, OpType, Signal, TcCommitAck, TcKeyConf,
    TcKeyFailConf, TcKeyRef, TcKeyReq, TcNodeFailRep, TransState, COMMIT_ACKS_MAX,
};
pub use signals::{FragmentRowsConf, FragmentRowsReq, FRAGMENT_ROWS_END};
pub use signals::{ScanNextReq, ScanTabConf, ScanTabRef, ScanTabReq};
