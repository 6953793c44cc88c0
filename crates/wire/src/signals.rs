//! The signal catalogue: every message a client and a data node exchange,
//! with its global signal number (GSN) and its body codec.
//!
//! Invariants: a body is a fixed sequence of little-endian fields (see
//! `docs/PROTOCOL.md`, "Signals"); every reserved byte is zero; every enum
//! byte and flag bit is one this version defines; every length is checked
//! against the bytes that remain before anything is sliced or allocated;
//! a body must be consumed exactly (trailing bytes are an error). Decoding
//! never panics. Encoding asserts on values that cannot be represented (a
//! key longer than `u16::MAX` bytes, more than `u16::MAX` operations), since
//! such a signal is a bug in the caller, who must check its limits first.

pub use crate::fragment_rows::{FragmentRowsConf, FragmentRowsReq, FRAGMENT_ROWS_END};
use crate::frame::{WireError, SIGNAL_HEADER_BYTES};
pub use crate::scan::{ScanNextReq, ScanTabConf, ScanTabRef, ScanTabReq};
use shoal_types::{SchemaVersion, TableId, TransId};

/// GSN of [`TcKeyReq`].
pub const GSN_TC_KEY_REQ: u16 = 1;
/// GSN of [`TcKeyConf`].
pub const GSN_TC_KEY_CONF: u16 = 2;
/// GSN of [`TcKeyRef`].
pub const GSN_TC_KEY_REF: u16 = 3;
/// GSN of [`ErrorReport`].
pub const GSN_ERROR_REPORT: u16 = 4;
/// GSN of [`TcCommitAck`].
pub const GSN_TC_COMMIT_ACK: u16 = 5;
/// GSN of [`TcKeyFailConf`].
pub const GSN_TC_KEY_FAIL_CONF: u16 = 6;
/// GSN of [`TcNodeFailRep`].
pub const GSN_TC_NODE_FAIL_REP: u16 = 7;
/// GSN of [`FragmentRowsReq`].
pub const GSN_FRAGMENT_ROWS_REQ: u16 = 8;
/// GSN of [`FragmentRowsConf`].
pub const GSN_FRAGMENT_ROWS_CONF: u16 = 9;
/// GSN of [`ScanTabReq`].
pub const GSN_SCAN_TAB_REQ: u16 = 10;
/// GSN of [`ScanNextReq`].
pub const GSN_SCAN_NEXT_REQ: u16 = 11;
/// GSN of [`ScanTabConf`].
pub const GSN_SCAN_TAB_CONF: u16 = 12;
/// GSN of [`ScanTabRef`].
pub const GSN_SCAN_TAB_REF: u16 = 13;
/// GSNs from here on are reserved for node-to-node signals.
pub const GSN_NODE_SIGNALS_FIRST: u16 = 16;

/// The longest detail string a signal can carry (the width of its length
/// field). Longer details are cut at a character boundary when encoded.
pub const SIGNAL_DETAIL_BYTES_MAX: usize = u16::MAX as usize;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum ExecType {
    NoCommit = 0,
    Commit = 1,
    Rollback = 2,
}

impl ExecType {
    pub fn from_u8(byte: u8) -> Option<Self> {
        match byte {
            0 => Some(ExecType::NoCommit),
            1 => Some(ExecType::Commit),
            2 => Some(ExecType::Rollback),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum OpType {
    Read = 0,
    Insert = 1,
    Update = 2,
    /// Insert or update (upsert).
    Write = 3,
    Delete = 4,
}

impl OpType {
    pub fn from_u8(byte: u8) -> Option<Self> {
        match byte {
            0 => Some(OpType::Read),
            1 => Some(OpType::Insert),
            2 => Some(OpType::Update),
            3 => Some(OpType::Write),
            4 => Some(OpType::Delete),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum LockMode {
    /// No lock; the latest committed version.
    CommittedRead = 0,
    Shared = 1,
    Exclusive = 2,
}

impl LockMode {
    pub fn from_u8(byte: u8) -> Option<Self> {
        match byte {
            0 => Some(LockMode::CommittedRead),
            1 => Some(LockMode::Shared),
            2 => Some(LockMode::Exclusive),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum TransState {
    /// After NoCommit: the transaction stays open, its locks held.
    Open = 0,
    Committed = 1,
    /// After Rollback.
    Aborted = 2,
}

impl TransState {
    pub fn from_u8(byte: u8) -> Option<Self> {
        match byte {
            0 => Some(TransState::Open),
            1 => Some(TransState::Committed),
            2 => Some(TransState::Aborted),
            _ => None,
        }
    }
}

/// `KeyOp::flags` bit: an error of this operation is reported in its
/// result and does not abort the transaction (NDB's AO_IgnoreError).
pub const OP_IGNORE_ERROR: u8 = 1;
/// `KeyOp::flags` bit: a read, update or delete by unique key. `table` is
/// the unique index's hidden table and `key` its key (the index columns'
/// values, encoded as a primary key of them); the operation runs on the
/// base table's row the index entry names, and `version` and `attrs` are
/// the base table's. No entry: the operation fails with 626.
pub const OP_BY_UNIQUE_KEY: u8 = 2;
/// Every `KeyOp::flags` bit this protocol version defines; a decoder
/// rejects any other bit.
pub const OP_FLAGS_KNOWN: u8 = OP_IGNORE_ERROR | OP_BY_UNIQUE_KEY;
/// Read column list value meaning "all columns".
pub const ALL_COLUMNS: u16 = 0xFFFF;

/// One operation on a row by its key.
///
/// The key and the attributes share one buffer: one allocation per
/// operation instead of two, and a `KeyOp` of 40 bytes keeps the signals
/// that carry one (`LqhKeyReq`) small enough to move with inline copies.
#[derive(Clone, PartialEq, Eq)]
pub struct KeyOp {
    pub op: OpType,
    pub lock: LockMode,
    pub flags: u8,
    pub table: TableId,
    pub version: SchemaVersion,
    /// Bytes of `buf` that are the key.
    key_len: u32,
    /// The encoded primary key (`shoal_types::layout`), then the
    /// attributes: for insert/update/write an encoded attribute list; for
    /// a read a column list, `u16 count` then `count` × `u16 column id`
    /// (count `0xFFFF`: all columns, no ids follow); for a delete nothing.
    buf: Vec<u8>,
}

impl KeyOp {
    /// An operation with `key` and `attrs` (copied into one buffer).
    pub fn new(
        op: OpType,
        lock: LockMode,
        flags: u8,
        table: TableId,
        version: SchemaVersion,
        key: &[u8],
        attrs: &[u8],
    ) -> KeyOp {
        let mut buf = Vec::with_capacity(key.len() + attrs.len());
        buf.extend_from_slice(key);
        buf.extend_from_slice(attrs);
        KeyOp::from_buf(op, lock, flags, table, version, buf, key.len())
    }

    /// An operation whose `buf` holds the key's `key_len` bytes, then the
    /// attributes. Panics if `key_len` exceeds `buf`.
    pub fn from_buf(
        op: OpType,
        lock: LockMode,
        flags: u8,
        table: TableId,
        version: SchemaVersion,
        buf: Vec<u8>,
        key_len: usize,
    ) -> KeyOp {
        assert!(
            key_len <= buf.len(),
            "a key of {key_len} bytes in a buffer of {}",
            buf.len()
        );
        let key_len =
            u32::try_from(key_len).expect("a key's length fits u32 (it is under the buffer's)");
        KeyOp {
            op,
            lock,
            flags,
            table,
            version,
            key_len,
            buf,
        }
    }

    /// The encoded primary key.
    #[inline]
    pub fn key(&self) -> &[u8] {
        &self.buf[..self.key_len as usize]
    }

    /// The attribute list (writes), column list (reads) or nothing
    /// (deletes).
    #[inline]
    pub fn attrs(&self) -> &[u8] {
        &self.buf[self.key_len as usize..]
    }

    /// Replaces the key, keeping the attributes: the attributes move by
    /// the difference in length, then the key is copied in (`splice` did
    /// the same byte by byte, ~650 instructions for a unique read's key).
    pub fn set_key(&mut self, key: &[u8]) {
        let old = self.key_len as usize;
        let end = self.buf.len();
        if key.len() > old {
            self.buf.resize(end + key.len() - old, 0);
        }
        self.buf.copy_within(old..end, key.len());
        self.buf.truncate(key.len() + end - old);
        self.buf[..key.len()].copy_from_slice(key);
        self.key_len = u32::try_from(key.len()).expect("a key's length fits u32");
    }

    /// Replaces the attributes with what `encode` appends to the buffer
    /// (which then holds the key alone); `encode` must only append.
    pub fn encode_attrs<R>(&mut self, encode: impl FnOnce(&mut Vec<u8>) -> R) -> R {
        let key_len = self.key_len as usize;
        self.buf.truncate(key_len);
        let out = encode(&mut self.buf);
        assert!(
            self.buf.len() >= key_len,
            "an attribute encoder removed bytes of the key"
        );
        out
    }

    /// Replaces the attributes.
    pub fn set_attrs(&mut self, attrs: &[u8]) {
        self.encode_attrs(|buf| buf.extend_from_slice(attrs));
    }
}

impl std::fmt::Debug for KeyOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyOp")
            .field("op", &self.op)
            .field("lock", &self.lock)
            .field("flags", &self.flags)
            .field("table", &self.table)
            .field("version", &self.version)
            .field("key", &self.key())
            .field("attrs", &self.attrs())
            .finish()
    }
}

/// `TcKeyReq` flags: answer a commit once it is durable.
pub const TC_KEY_REQ_DURABLE: u8 = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcKeyReq {
    pub trans: TransId,
    /// The request's number within its transaction: 0, 1, 2, ... A node
    /// ignores a request whose number it has already taken (a repeat).
    pub request: u32,
    pub exec: ExecType,
    /// With `Commit`: answer `Committed` only once the transaction's epoch
    /// is durable (on disk on every live data node), not as soon as every
    /// replica holds it in memory.
    pub durable: bool,
    pub ops: Vec<KeyOp>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OpResult {
    /// 0 = success, else an error code (only with `OP_IGNORE_ERROR`).
    pub code: u16,
    /// Reads: the attribute list read; others: empty.
    pub data: Vec<u8>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcKeyConf {
    pub trans: TransId,
    /// The number of the request this answers.
    pub request: u32,
    pub state: TransState,
    /// `Committed` only: the replicas keep a commit marker for the
    /// transaction until the client acknowledges this answer with a
    /// [`TcCommitAck`] (so a coordinator taking over can report the
    /// commit if this answer is lost with its node).
    pub ack_wanted: bool,
    /// One per operation of the request that this answers, in order.
    pub results: Vec<OpResult>,
}

/// `TcKeyConf` flag bit: [`TcKeyConf::ack_wanted`].
pub const CONF_ACK_WANTED: u8 = 1;

/// Client → its transactions' coordinator: these committed transactions'
/// answers arrived; their commit markers may go (NDB's TC_COMMIT_ACK).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcCommitAck {
    pub trans: Vec<TransId>,
}

/// Most transactions one [`TcCommitAck`] names.
pub const COMMIT_ACKS_MAX: usize = 8192;

/// A data node → a client: the coordinator of transaction `trans` (data
/// node `node`, in `incarnation`) failed, and the node that took over its
/// transactions found this outcome (NDB's TCKEY_FAILCONF / FAILREF).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcKeyFailConf {
    pub node: u16,
    pub incarnation: u32,
    pub trans: TransId,
    pub committed: bool,
}

/// A data node → a client: every transaction that coordinator `node` (in
/// `incarnation`) held has been taken over. Those of this client (its API
/// node) that committed are listed; every other one is aborted. The list
/// is complete on its own: a client that connected after some
/// [`TcKeyFailConf`]s went out still learns every outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcNodeFailRep {
    pub node: u16,
    pub incarnation: u32,
    pub committed: Vec<TransId>,
}

/// The transaction failed and is aborted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcKeyRef {
    pub trans: TransId,
    /// The number of the request this answers.
    pub request: u32,
    pub code: u16,
    /// Index of the failing operation in its request, or 0xFFFF.
    pub op_index: u16,
    pub detail: String,
}

/// Sent by a node just before it closes a connection for a protocol error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ErrorReport {
    pub code: u16,
    pub detail: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Signal {
    TcKeyReq(TcKeyReq),
    TcKeyConf(TcKeyConf),
    TcKeyRef(TcKeyRef),
    ErrorReport(ErrorReport),
    TcCommitAck(TcCommitAck),
    TcKeyFailConf(TcKeyFailConf),
    TcNodeFailRep(TcNodeFailRep),
    FragmentRowsReq(FragmentRowsReq),
    FragmentRowsConf(FragmentRowsConf),
    ScanTabReq(ScanTabReq),
    ScanNextReq(ScanNextReq),
    ScanTabConf(ScanTabConf),
    ScanTabRef(ScanTabRef),
    /// Between data nodes only; a client sending one is a protocol
    /// violation.
    Node(crate::node::BlockSignal),
}

// Fixed parts of the bodies, in bytes (see docs/PROTOCOL.md).
const TC_KEY_REQ_FIXED_BYTES: usize = 8 + 4 + 1 + 1 + 2;
/// op, lock, flags, reserved, table, version, key_len, attrs_len.
const KEY_OP_FIXED_BYTES: usize = 1 + 1 + 1 + 1 + 4 + 4 + 2 + 4;
const TC_KEY_CONF_FIXED_BYTES: usize = 8 + 4 + 1 + 1 + 2;
/// code, data_len.
const OP_RESULT_FIXED_BYTES: usize = 2 + 4;
const TC_KEY_REF_FIXED_BYTES: usize = 8 + 4 + 2 + 2 + 2;
const ERROR_REPORT_FIXED_BYTES: usize = 2 + 2;

impl Signal {
    /// The global signal number that identifies this signal on the wire.
    #[inline]
    pub fn gsn(&self) -> u16 {
        match self {
            Signal::TcKeyReq(_) => GSN_TC_KEY_REQ,
            Signal::TcKeyConf(_) => GSN_TC_KEY_CONF,
            Signal::TcKeyRef(_) => GSN_TC_KEY_REF,
            Signal::ErrorReport(_) => GSN_ERROR_REPORT,
            Signal::TcCommitAck(_) => GSN_TC_COMMIT_ACK,
            Signal::TcKeyFailConf(_) => GSN_TC_KEY_FAIL_CONF,
            Signal::TcNodeFailRep(_) => GSN_TC_NODE_FAIL_REP,
            Signal::FragmentRowsReq(_) => GSN_FRAGMENT_ROWS_REQ,
            Signal::FragmentRowsConf(_) => GSN_FRAGMENT_ROWS_CONF,
            Signal::ScanTabReq(_) => GSN_SCAN_TAB_REQ,
            Signal::ScanNextReq(_) => GSN_SCAN_NEXT_REQ,
            Signal::ScanTabConf(_) => GSN_SCAN_TAB_CONF,
            Signal::ScanTabRef(_) => GSN_SCAN_TAB_REF,
            Signal::Node(n) => n.gsn(),
        }
    }

    /// The signal's name, for messages and logs.
    pub fn name(&self) -> &'static str {
        gsn_name(self.gsn()).unwrap_or("?")
    }

    /// The size of the encoded body in bytes.
    pub fn body_len(&self) -> usize {
        match self {
            Signal::TcKeyReq(req) => {
                TC_KEY_REQ_FIXED_BYTES
                    + req
                        .ops
                        .iter()
                        .map(|op| KEY_OP_FIXED_BYTES + op.buf.len())
                        .sum::<usize>()
            }
            Signal::TcKeyConf(conf) => {
                TC_KEY_CONF_FIXED_BYTES
                    + conf
                        .results
                        .iter()
                        .map(|r| OP_RESULT_FIXED_BYTES + r.data.len())
                        .sum::<usize>()
            }
            Signal::TcKeyRef(r) => TC_KEY_REF_FIXED_BYTES + detail_prefix(&r.detail).len(),
            Signal::ErrorReport(r) => ERROR_REPORT_FIXED_BYTES + detail_prefix(&r.detail).len(),
            Signal::TcCommitAck(a) => 2 + 8 * a.trans.len(),
            Signal::TcKeyFailConf(_) => 2 + 4 + 8 + 1 + 1,
            Signal::TcNodeFailRep(f) => 2 + 4 + 4 + 8 * f.committed.len(),
            Signal::FragmentRowsReq(_) => crate::fragment_rows::REQ_BYTES,
            Signal::FragmentRowsConf(c) => c.body_len(),
            Signal::ScanTabReq(r) => r.body_len(),
            Signal::ScanNextReq(_) => crate::scan::SCAN_NEXT_REQ_BYTES,
            Signal::ScanTabConf(c) => c.body_len(),
            Signal::ScanTabRef(r) => r.body_len(),
            Signal::Node(n) => n.body_len(),
        }
    }

    /// The size of the signal in a frame: signal header plus body.
    pub fn encoded_len(&self) -> usize {
        SIGNAL_HEADER_BYTES + self.body_len()
    }

    /// Appends the signal header (`u16 gsn | u16 reserved | u32 body_len`)
    /// and the body to `out`, reserving space once.
    pub fn encode(&self, out: &mut Vec<u8>) {
        self.encode_sized(out, self.body_len());
    }

    /// `encode` for a caller that has already computed `body_len()`.
    pub(crate) fn encode_sized(&self, out: &mut Vec<u8>, body_len: usize) {
        assert!(
            u32::try_from(body_len).is_ok(),
            "{} body of {body_len} bytes does not fit a u32 length",
            self.name()
        );
        out.reserve(SIGNAL_HEADER_BYTES + body_len);
        let start = out.len();
        put_u16(out, self.gsn());
        put_u16(out, 0);
        put_u32(out, body_len as u32);
        self.encode_body(out);
        assert_eq!(
            out.len() - start,
            SIGNAL_HEADER_BYTES + body_len,
            "{} body_len disagrees with encode_body",
            self.name()
        );
    }

    /// Appends only the body to `out`.
    pub fn encode_body(&self, out: &mut Vec<u8>) {
        match self {
            Signal::TcKeyReq(req) => encode_tc_key_req(req, out),
            Signal::TcKeyConf(conf) => encode_tc_key_conf(conf, out),
            Signal::TcKeyRef(r) => {
                put_u64(out, r.trans.0);
                put_u32(out, r.request);
                put_u16(out, r.code);
                put_u16(out, r.op_index);
                put_detail(out, &r.detail);
            }
            Signal::ErrorReport(r) => {
                put_u16(out, r.code);
                put_detail(out, &r.detail);
            }
            Signal::TcCommitAck(a) => {
                assert!(
                    a.trans.len() <= COMMIT_ACKS_MAX,
                    "TcCommitAck of {} transactions",
                    a.trans.len()
                );
                put_u16(out, a.trans.len() as u16);
                for t in &a.trans {
                    put_u64(out, t.0);
                }
            }
            Signal::TcKeyFailConf(f) => {
                put_u16(out, f.node);
                put_u32(out, f.incarnation);
                put_u64(out, f.trans.0);
                out.push(u8::from(f.committed));
                out.push(0);
            }
            Signal::TcNodeFailRep(f) => {
                put_u16(out, f.node);
                put_u32(out, f.incarnation);
                put_u32(out, f.committed.len() as u32);
                for t in &f.committed {
                    put_u64(out, t.0);
                }
            }
            Signal::FragmentRowsReq(r) => r.encode(out),
            Signal::FragmentRowsConf(c) => c.encode(out),
            Signal::ScanTabReq(r) => r.encode(out),
            Signal::ScanNextReq(r) => r.encode(out),
            Signal::ScanTabConf(c) => c.encode(out),
            Signal::ScanTabRef(r) => r.encode(out),
            Signal::Node(n) => n.encode_body(out),
        }
    }

    /// Decodes the body of a signal with number `gsn`. The body must be
    /// exactly one signal's bytes: trailing bytes are an error.
    pub fn decode(gsn: u16, body: &[u8]) -> Result<Signal, WireError> {
        match gsn {
            GSN_TC_KEY_REQ => decode_tc_key_req(body).map(Signal::TcKeyReq),
            GSN_TC_KEY_CONF => decode_tc_key_conf(body).map(Signal::TcKeyConf),
            GSN_TC_KEY_REF => decode_tc_key_ref(body).map(Signal::TcKeyRef),
            GSN_ERROR_REPORT => decode_error_report(body).map(Signal::ErrorReport),
            GSN_TC_COMMIT_ACK => decode_commit_ack(body).map(Signal::TcCommitAck),
            GSN_TC_KEY_FAIL_CONF => {
                let mut r = Reader::new(body, "TcKeyFailConf");
                let node = r.u16("node")?;
                let incarnation = r.u32("incarnation")?;
                let trans = TransId(r.u64("trans")?);
                let committed = crate::node::read_flag(&mut r, "committed")?;
                r.reserved_u8("reserved")?;
                r.finish()?;
                Ok(Signal::TcKeyFailConf(TcKeyFailConf {
                    node,
                    incarnation,
                    trans,
                    committed,
                }))
            }
            GSN_TC_NODE_FAIL_REP => {
                let mut r = Reader::new(body, "TcNodeFailRep");
                let node = r.u16("node")?;
                let incarnation = r.u32("incarnation")?;
                let count = r.u32("count")? as usize;
                r.check_count(count, 8, "count")?;
                let committed = (0..count)
                    .map(|_| r.u64("trans").map(TransId))
                    .collect::<Result<Vec<_>, _>>()?;
                r.finish()?;
                Ok(Signal::TcNodeFailRep(TcNodeFailRep {
                    node,
                    incarnation,
                    committed,
                }))
            }
            GSN_FRAGMENT_ROWS_REQ => FragmentRowsReq::decode(body).map(Signal::FragmentRowsReq),
            GSN_FRAGMENT_ROWS_CONF => FragmentRowsConf::decode(body).map(Signal::FragmentRowsConf),
            GSN_SCAN_TAB_REQ => ScanTabReq::decode(body).map(Signal::ScanTabReq),
            GSN_SCAN_NEXT_REQ => ScanNextReq::decode(body).map(Signal::ScanNextReq),
            GSN_SCAN_TAB_CONF => ScanTabConf::decode(body).map(Signal::ScanTabConf),
            GSN_SCAN_TAB_REF => ScanTabRef::decode(body).map(Signal::ScanTabRef),
            GSN_NODE_SIGNALS_FIRST..=crate::node::GSN_NODE_SIGNALS_LAST
                if gsn_name(gsn).is_some() =>
            {
                crate::node::BlockSignal::decode(gsn, body).map(Signal::Node)
            }
            _ => Err(WireError::UnknownSignal(gsn)),
        }
    }
}

/// The name of a known GSN.
pub fn gsn_name(gsn: u16) -> Option<&'static str> {
    match gsn {
        GSN_TC_KEY_REQ => Some("TcKeyReq"),
        GSN_TC_KEY_CONF => Some("TcKeyConf"),
        GSN_TC_KEY_REF => Some("TcKeyRef"),
        GSN_ERROR_REPORT => Some("ErrorReport"),
        GSN_TC_COMMIT_ACK => Some("TcCommitAck"),
        GSN_TC_KEY_FAIL_CONF => Some("TcKeyFailConf"),
        GSN_TC_NODE_FAIL_REP => Some("TcNodeFailRep"),
        GSN_FRAGMENT_ROWS_REQ => Some("FragmentRowsReq"),
        GSN_FRAGMENT_ROWS_CONF => Some("FragmentRowsConf"),
        GSN_SCAN_TAB_REQ => Some("ScanTabReq"),
        GSN_SCAN_NEXT_REQ => Some("ScanNextReq"),
        GSN_SCAN_TAB_CONF => Some("ScanTabConf"),
        GSN_SCAN_TAB_REF => Some("ScanTabRef"),
        crate::node::GSN_LQH_KEY_REQ => Some("LqhKeyReq"),
        crate::node::GSN_LQH_KEY_CONF => Some("LqhKeyConf"),
        crate::node::GSN_LQH_KEY_REF => Some("LqhKeyRef"),
        crate::node::GSN_COMMIT_REQ => Some("CommitReq"),
        crate::node::GSN_COMMIT_CONF => Some("CommitConf"),
        crate::node::GSN_COMPLETE_REQ => Some("CompleteReq"),
        crate::node::GSN_COMPLETE_CONF => Some("CompleteConf"),
        crate::node::GSN_ABORT_REQ => Some("AbortReq"),
        crate::node::GSN_ABORT_CONF => Some("AbortConf"),
        crate::node::cluster::GSN_TAKEOVER_REQ => Some("TakeoverReq"),
        crate::node::cluster::GSN_TAKEOVER_TXN => Some("TakeoverTxn"),
        crate::node::cluster::GSN_TAKEOVER_CONF => Some("TakeoverConf"),
        crate::node::cluster::GSN_TAKEOVER_DONE => Some("TakeoverDone"),
        crate::node::cluster::GSN_HEARTBEAT => Some("Heartbeat"),
        crate::node::cluster::GSN_JOIN_REQ => Some("JoinReq"),
        crate::node::cluster::GSN_JOIN_REF => Some("JoinRef"),
        crate::node::cluster::GSN_VIEW_PREPARE => Some("ViewPrepare"),
        crate::node::cluster::GSN_VIEW_PREPARE_CONF => Some("ViewPrepareConf"),
        crate::node::cluster::GSN_VIEW_PREPARE_REF => Some("ViewPrepareRef"),
        crate::node::cluster::GSN_VIEW_COMMIT => Some("ViewCommit"),
        crate::node::cluster::GSN_FAIL_REPORT => Some("FailReport"),
        crate::node::cluster::GSN_CLUSTER_SHUTDOWN => Some("ClusterShutdown"),
        crate::node::cluster::GSN_FRAG_STATE => Some("FragState"),
        crate::node::cluster::GSN_COPY_FRAG_REQ => Some("CopyFragReq"),
        crate::node::cluster::GSN_COPY_ROWS => Some("CopyRows"),
        crate::node::cluster::GSN_COPY_ROWS_CONF => Some("CopyRowsConf"),
        crate::node::cluster::GSN_COPY_FRAG_CONF => Some("CopyFragConf"),
        crate::node::cluster::GSN_COPY_FRAG_REF => Some("CopyFragRef"),
        crate::node::cluster::GSN_FRAG_STATE_CONF => Some("FragStateConf"),
        crate::node::cluster::GSN_COPY_MARKERS => Some("CopyMarkers"),
        crate::node::epoch::GSN_EPOCH_PREPARE => Some("EpochPrepare"),
        crate::node::epoch::GSN_EPOCH_PREPARE_CONF => Some("EpochPrepareConf"),
        crate::node::epoch::GSN_EPOCH_COMMIT => Some("EpochCommit"),
        crate::node::epoch::GSN_EPOCH_PROGRESS => Some("EpochProgress"),
        crate::node::epoch::GSN_EPOCH_SAVE => Some("EpochSave"),
        crate::node::epoch::GSN_EPOCH_DURABLE => Some("EpochDurable"),
        crate::node::epoch::GSN_EPOCH_RESTORE => Some("EpochRestore"),
        crate::node::scan::GSN_SCAN_FRAG_REQ => Some("ScanFragReq"),
        crate::node::scan::GSN_SCAN_FRAG_CONF => Some("ScanFragConf"),
        crate::node::scan::GSN_SCAN_FRAG_REF => Some("ScanFragRef"),
        _ => None,
    }
}

fn encode_tc_key_req(req: &TcKeyReq, out: &mut Vec<u8>) {
    let op_count = u16::try_from(req.ops.len())
        .unwrap_or_else(|_| panic!("TcKeyReq with {} ops exceeds u16::MAX", req.ops.len()));
    put_u64(out, req.trans.0);
    put_u32(out, req.request);
    out.push(req.exec as u8);
    out.push(u8::from(req.durable) * TC_KEY_REQ_DURABLE);
    put_u16(out, op_count);
    for (i, op) in req.ops.iter().enumerate() {
        encode_key_op(op, i, out);
    }
}

/// `u8 op | u8 lock | u8 flags | u8 reserved | u32 table | u32 version |
/// u16 key_len | key | u32 attrs_len | attrs`. `i` names the op in panics.
pub(crate) fn encode_key_op(op: &KeyOp, i: usize, out: &mut Vec<u8>) {
    assert_eq!(
        op.flags & !OP_FLAGS_KNOWN,
        0,
        "op {i}: unknown flag bits {:#04x}",
        op.flags
    );
    let (key, attrs) = (op.key(), op.attrs());
    let key_len = u16::try_from(key.len())
        .unwrap_or_else(|_| panic!("op {i}: key of {} bytes exceeds u16::MAX", key.len()));
    let attrs_len = u32::try_from(attrs.len())
        .unwrap_or_else(|_| panic!("op {i}: attrs of {} bytes exceed u32::MAX", attrs.len()));
    out.extend_from_slice(&[op.op as u8, op.lock as u8, op.flags, 0]);
    put_u32(out, op.table.0);
    put_u32(out, op.version.0);
    put_u16(out, key_len);
    out.extend_from_slice(key);
    put_u32(out, attrs_len);
    out.extend_from_slice(attrs);
}

/// Bytes of an encoded [`KeyOp`].
pub(crate) fn key_op_len(op: &KeyOp) -> usize {
    KEY_OP_FIXED_BYTES + op.buf.len()
}

pub(crate) fn decode_key_op(r: &mut Reader<'_>) -> Result<KeyOp, WireError> {
    let op = r.enum_u8("op", OpType::from_u8)?;
    let lock = r.enum_u8("lock", LockMode::from_u8)?;
    let flags_at = r.pos;
    let flags = r.u8("flags")?;
    if flags & !OP_FLAGS_KNOWN != 0 {
        return Err(r.malformed_at(flags_at, format_args!("unknown flag bits {flags:#04x}")));
    }
    r.reserved_u8("reserved")?;
    let table = TableId(r.u32("table")?);
    let version = SchemaVersion(r.u32("version")?);
    let key_len = usize::from(r.u16("key_len")?);
    let key = r.bytes(key_len, "key")?;
    let attrs_len = r.u32("attrs_len")? as usize;
    let attrs = r.bytes(attrs_len, "attrs")?;
    Ok(KeyOp::new(op, lock, flags, table, version, key, attrs))
}

fn encode_tc_key_conf(conf: &TcKeyConf, out: &mut Vec<u8>) {
    let result_count = u16::try_from(conf.results.len()).unwrap_or_else(|_| {
        panic!(
            "TcKeyConf with {} results exceeds u16::MAX",
            conf.results.len()
        )
    });
    put_u64(out, conf.trans.0);
    put_u32(out, conf.request);
    out.push(conf.state as u8);
    out.push(if conf.ack_wanted { CONF_ACK_WANTED } else { 0 });
    put_u16(out, result_count);
    for (i, result) in conf.results.iter().enumerate() {
        let data_len = u32::try_from(result.data.len()).unwrap_or_else(|_| {
            panic!(
                "TcKeyConf result {i}: data of {} bytes exceeds u32::MAX",
                result.data.len()
            )
        });
        put_u16(out, result.code);
        put_u32(out, data_len);
        out.extend_from_slice(&result.data);
    }
}

fn decode_tc_key_req(body: &[u8]) -> Result<TcKeyReq, WireError> {
    let mut r = Reader::new(body, "TcKeyReq");
    let trans = TransId(r.u64("trans")?);
    let request = r.u32("request")?;
    let exec = r.enum_u8("exec", ExecType::from_u8)?;
    let flags_at = r.pos;
    let flags = r.u8("flags")?;
    if flags & !TC_KEY_REQ_DURABLE != 0 {
        return Err(r.malformed_at(
            flags_at,
            format_args!("request flags {flags:#04x}: only bit 0 (durable) exists"),
        ));
    }
    let op_count = usize::from(r.u16("op_count")?);
    r.check_count(op_count, KEY_OP_FIXED_BYTES, "op_count")?;
    let mut ops = Vec::with_capacity(op_count);
    for i in 0..op_count {
        r.item = Some(("op", i));
        ops.push(decode_key_op(&mut r)?);
    }
    r.item = None;
    r.finish()?;
    Ok(TcKeyReq {
        trans,
        request,
        exec,
        durable: flags & TC_KEY_REQ_DURABLE != 0,
        ops,
    })
}

fn decode_tc_key_conf(body: &[u8]) -> Result<TcKeyConf, WireError> {
    let mut r = Reader::new(body, "TcKeyConf");
    let trans = TransId(r.u64("trans")?);
    let request = r.u32("request")?;
    let state = r.enum_u8("state", TransState::from_u8)?;
    let flags_at = r.pos;
    let flags = r.u8("flags")?;
    if flags & !CONF_ACK_WANTED != 0 || (flags != 0 && state != TransState::Committed) {
        return Err(r.malformed_at(
            flags_at,
            format_args!("flags {flags:#04x} with state {state:?}"),
        ));
    }
    let ack_wanted = flags & CONF_ACK_WANTED != 0;
    let result_count = usize::from(r.u16("result_count")?);
    r.check_count(result_count, OP_RESULT_FIXED_BYTES, "result_count")?;
    let mut results = Vec::with_capacity(result_count);
    for i in 0..result_count {
        r.item = Some(("result", i));
        let code = r.u16("code")?;
        let data_len = r.u32("data_len")? as usize;
        let data = r.bytes(data_len, "data")?.to_vec();
        results.push(OpResult { code, data });
    }
    r.item = None;
    r.finish()?;
    Ok(TcKeyConf {
        trans,
        request,
        state,
        ack_wanted,
        results,
    })
}

fn decode_commit_ack(body: &[u8]) -> Result<TcCommitAck, WireError> {
    let mut r = Reader::new(body, "TcCommitAck");
    let at = r.pos;
    let count = usize::from(r.u16("count")?);
    if count > COMMIT_ACKS_MAX {
        return Err(r.malformed_at(
            at,
            format_args!("{count} transactions, at most {COMMIT_ACKS_MAX}"),
        ));
    }
    r.check_count(count, 8, "count")?;
    let trans = (0..count)
        .map(|_| r.u64("trans").map(TransId))
        .collect::<Result<Vec<_>, _>>()?;
    r.finish()?;
    Ok(TcCommitAck { trans })
}

fn decode_tc_key_ref(body: &[u8]) -> Result<TcKeyRef, WireError> {
    let mut r = Reader::new(body, "TcKeyRef");
    let trans = TransId(r.u64("trans")?);
    let request = r.u32("request")?;
    let code = r.u16("code")?;
    let op_index = r.u16("op_index")?;
    let detail_len = usize::from(r.u16("detail_len")?);
    let detail = r.utf8(detail_len, "detail")?;
    r.finish()?;
    Ok(TcKeyRef {
        trans,
        request,
        code,
        op_index,
        detail,
    })
}

fn decode_error_report(body: &[u8]) -> Result<ErrorReport, WireError> {
    let mut r = Reader::new(body, "ErrorReport");
    let code = r.u16("code")?;
    let detail_len = usize::from(r.u16("detail_len")?);
    let detail = r.utf8(detail_len, "detail")?;
    r.finish()?;
    Ok(ErrorReport { code, detail })
}

/// The longest prefix of `s` that fits `max` bytes and ends on a character
/// boundary.
pub(crate) fn truncate_at_char_boundary(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

pub(crate) fn detail_prefix(detail: &str) -> &str {
    truncate_at_char_boundary(detail, SIGNAL_DETAIL_BYTES_MAX)
}

/// Writes `u16 detail_len | detail`, cutting the detail to the field width.
pub(crate) fn put_detail(out: &mut Vec<u8>, detail: &str) {
    let detail = detail_prefix(detail);
    put_u16(out, detail.len() as u16);
    out.extend_from_slice(detail.as_bytes());
}

#[inline]
pub(crate) fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

#[inline]
pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

#[inline]
pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A bounds-checked cursor over one message. Every read checks the bytes
/// that remain and, on failure, builds a message naming the message, the
/// item (operation or result index), the field and the offset.
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    /// Invariant: `pos <= buf.len()`.
    pub(crate) pos: usize,
    what: &'static str,
    /// The repeated item being read, for messages ("op 3").
    pub(crate) item: Option<(&'static str, usize)>,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8], what: &'static str) -> Self {
        Reader {
            buf,
            pos: 0,
            what,
            item: None,
        }
    }

    #[inline]
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    #[inline]
    pub(crate) fn bytes(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], WireError> {
        if n > self.remaining() {
            return Err(self.truncated(field, n));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    #[inline]
    fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], WireError> {
        match self.buf[self.pos..].first_chunk::<N>() {
            Some(a) => {
                self.pos += N;
                Ok(*a)
            }
            None => Err(self.truncated(field, N)),
        }
    }

    #[inline]
    pub(crate) fn u8(&mut self, field: &'static str) -> Result<u8, WireError> {
        Ok(self.array::<1>(field)?[0])
    }

    #[inline]
    pub(crate) fn u16(&mut self, field: &'static str) -> Result<u16, WireError> {
        self.array(field).map(u16::from_le_bytes)
    }

    #[inline]
    pub(crate) fn u32(&mut self, field: &'static str) -> Result<u32, WireError> {
        self.array(field).map(u32::from_le_bytes)
    }

    #[inline]
    pub(crate) fn u64(&mut self, field: &'static str) -> Result<u64, WireError> {
        self.array(field).map(u64::from_le_bytes)
    }

    #[inline]
    pub(crate) fn reserved_u8(&mut self, field: &'static str) -> Result<(), WireError> {
        let at = self.pos;
        match self.u8(field)? {
            0 => Ok(()),
            v => Err(self.malformed_at(at, format_args!("{field} byte is {v:#04x}, must be 0"))),
        }
    }

    #[inline]
    pub(crate) fn enum_u8<T>(
        &mut self,
        field: &'static str,
        from_u8: fn(u8) -> Option<T>,
    ) -> Result<T, WireError> {
        let at = self.pos;
        let v = self.u8(field)?;
        from_u8(v)
            .ok_or_else(|| self.malformed_at(at, format_args!("{field} value {v} is out of range")))
    }

    /// Reads `n` bytes that must be UTF-8.
    pub(crate) fn utf8(&mut self, n: usize, field: &'static str) -> Result<String, WireError> {
        let at = self.pos;
        let bytes = self.bytes(n, field)?;
        match std::str::from_utf8(bytes) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(self.malformed_at(
                at + e.valid_up_to(),
                format_args!("{field} is not valid UTF-8"),
            )),
        }
    }

    /// Checks that `count` items of at least `min_item_bytes` each can fit
    /// in what remains, so a forged count cannot make us allocate more than
    /// the input implies.
    #[inline]
    pub(crate) fn check_count(
        &self,
        count: usize,
        min_item_bytes: usize,
        field: &'static str,
    ) -> Result<(), WireError> {
        let need = count * min_item_bytes;
        if need > self.remaining() {
            return Err(self.malformed_at(
                self.pos,
                format_args!(
                    "{field} {count} needs at least {need} more bytes, {} left",
                    self.remaining()
                ),
            ));
        }
        Ok(())
    }

    /// Fails if any bytes are left.
    pub(crate) fn finish(&self) -> Result<(), WireError> {
        if self.remaining() != 0 {
            return Err(self.malformed_at(
                self.pos,
                format_args!("{} trailing bytes", self.remaining()),
            ));
        }
        Ok(())
    }

    #[cold]
    fn truncated(&self, field: &'static str, need: usize) -> WireError {
        self.malformed_at(
            self.pos,
            format_args!(
                "{field} truncated: needs {need} bytes, {} left",
                self.remaining()
            ),
        )
    }

    #[cold]
    pub(crate) fn malformed_at(&self, at: usize, what: std::fmt::Arguments<'_>) -> WireError {
        let msg = match self.item {
            Some((item, i)) => format!("{} {item} {i}: {what} at offset {at}", self.what),
            None => format!("{}: {what} at offset {at}", self.what),
        };
        WireError::Malformed(msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// A new key of any length leaves the attributes as they were.
        #[test]
        fn set_key_keeps_the_attributes(
            key in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
            attrs in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
            new_key in proptest::collection::vec(proptest::num::u8::ANY, 0..40),
        ) {
            let mut op = KeyOp::new(
                OpType::Read,
                LockMode::CommittedRead,
                0,
                TableId(1),
                SchemaVersion(1),
                &key,
                &attrs,
            );
            op.set_key(&new_key);
            proptest::prop_assert_eq!(op.key(), &new_key[..]);
            proptest::prop_assert_eq!(op.attrs(), &attrs[..]);
        }
    }

    fn sample_req() -> TcKeyReq {
        TcKeyReq {
            trans: TransId(0x0102_0304_0506_0708),
            request: 0x0a0b_0c0d,
            exec: ExecType::Commit,
            durable: false,
            ops: vec![
                KeyOp::new(
                    OpType::Insert,
                    LockMode::Exclusive,
                    OP_IGNORE_ERROR,
                    TableId(7),
                    SchemaVersion(3),
                    &[1, 2, 3],
                    &[9; 5],
                ),
                KeyOp::new(
                    OpType::Read,
                    LockMode::CommittedRead,
                    0,
                    TableId(8),
                    SchemaVersion(1),
                    &[4],
                    ALL_COLUMNS.to_le_bytes().as_ref(),
                ),
            ],
        }
    }

    fn body_of(signal: &Signal) -> Vec<u8> {
        let mut out = Vec::new();
        signal.encode_body(&mut out);
        assert_eq!(out.len(), signal.body_len());
        out
    }

    fn malformed(result: Result<Signal, WireError>) -> String {
        match result {
            Err(WireError::Malformed(msg)) => msg,
            other => panic!("expected Malformed, got {other:?}"),
        }
    }

    #[test]
    fn tc_key_req_layout_is_byte_exact() {
        let body = body_of(&Signal::TcKeyReq(sample_req()));
        let mut expected = Vec::new();
        expected.extend_from_slice(&0x0102_0304_0506_0708u64.to_le_bytes());
        expected.extend_from_slice(&0x0a0b_0c0du32.to_le_bytes());
        expected.extend_from_slice(&[1, 0, 2, 0]); // exec, flags, op_count
        expected.extend_from_slice(&[1, 2, 1, 0]); // op, lock, flags, reserved
        expected.extend_from_slice(&7u32.to_le_bytes());
        expected.extend_from_slice(&3u32.to_le_bytes());
        expected.extend_from_slice(&[3, 0, 1, 2, 3]);
        expected.extend_from_slice(&5u32.to_le_bytes());
        expected.extend_from_slice(&[9; 5]);
        expected.extend_from_slice(&[0, 0, 0, 0]);
        expected.extend_from_slice(&8u32.to_le_bytes());
        expected.extend_from_slice(&1u32.to_le_bytes());
        expected.extend_from_slice(&[1, 0, 4]);
        expected.extend_from_slice(&2u32.to_le_bytes());
        expected.extend_from_slice(&[0xFF, 0xFF]);
        assert_eq!(body, expected);
    }

    #[test]
    fn every_signal_round_trips() {
        let signals = [
            Signal::TcKeyReq(sample_req()),
            Signal::TcKeyReq(TcKeyReq {
                trans: TransId(0),
                request: 0,
                exec: ExecType::NoCommit,
                durable: false,
                ops: vec![],
            }),
            Signal::TcKeyConf(TcKeyConf {
                trans: TransId(u64::MAX),
                request: u32::MAX,
                state: TransState::Aborted,
                ack_wanted: false,
                results: vec![
                    OpResult {
                        code: 0,
                        data: vec![1, 2],
                    },
                    OpResult {
                        code: 626,
                        data: vec![],
                    },
                ],
            }),
            Signal::TcKeyRef(TcKeyRef {
                trans: TransId(5),
                request: 3,
                code: 266,
                op_index: 0xFFFF,
                detail: "lock wait timeout ⏱".into(),
            }),
            Signal::ErrorReport(ErrorReport {
                code: 5001,
                detail: String::new(),
            }),
            Signal::TcKeyConf(TcKeyConf {
                trans: TransId(6),
                request: 1,
                state: TransState::Committed,
                ack_wanted: true,
                results: vec![],
            }),
            Signal::TcCommitAck(TcCommitAck {
                trans: vec![TransId(1), TransId(u64::MAX)],
            }),
            Signal::TcKeyFailConf(TcKeyFailConf {
                node: 3,
                incarnation: 9,
                trans: TransId(44),
                committed: true,
            }),
            Signal::TcNodeFailRep(TcNodeFailRep {
                node: 3,
                incarnation: 9,
                committed: vec![TransId(5), TransId(7)],
            }),
            Signal::FragmentRowsReq(FragmentRowsReq {
                trans: TransId(3),
                table: TableId(2),
                frag: 1,
                from_row: 17,
                max_bytes: 65536,
            }),
            Signal::FragmentRowsConf(FragmentRowsConf {
                trans: TransId(3),
                code: 0,
                next_row: FRAGMENT_ROWS_END,
                rows: vec![(4, vec![1, 2, 3]), (9, vec![])],
            }),
            Signal::ScanTabReq(ScanTabReq {
                trans: TransId(8),
                table: TableId(3),
                version: SchemaVersion(2),
                lock: LockMode::CommittedRead,
                flags: 2,
                index: 1,
                bounds: vec![0, 0],
                batch_rows: 64,
                batch_bytes: 1 << 20,
                columns: vec![0xFF, 0xFF],
                filter: vec![1],
            }),
            Signal::ScanNextReq(ScanNextReq {
                trans: TransId(8),
                request: 2,
                close: true,
            }),
            Signal::ScanTabConf(ScanTabConf {
                trans: TransId(8),
                request: 1,
                done: false,
                examined: 1 << 33,
                count: 2,
                rows: vec![0, 0, 0, 0],
            }),
            Signal::ScanTabRef(ScanTabRef {
                trans: TransId(8),
                request: 3,
                code: 488,
                detail: "too many scans".into(),
            }),
        ];
        for signal in signals {
            let body = body_of(&signal);
            assert_eq!(Signal::decode(signal.gsn(), &body), Ok(signal.clone()));
            let mut framed = Vec::new();
            signal.encode(&mut framed);
            assert_eq!(framed.len(), signal.encoded_len());
            assert_eq!(&framed[..2], &signal.gsn().to_le_bytes());
            assert_eq!(&framed[4..8], &(body.len() as u32).to_le_bytes());
            assert_eq!(&framed[8..], &body[..]);
        }
    }

    #[test]
    fn unknown_gsn_is_rejected() {
        assert_eq!(Signal::decode(0, &[]), Err(WireError::UnknownSignal(0)));
        let past = crate::node::GSN_NODE_SIGNALS_LAST + 1;
        assert_eq!(
            Signal::decode(past, &[]),
            Err(WireError::UnknownSignal(past))
        );
        // Gaps in the numbering are unknown too (a body that names a node
        // first is read far enough to see the number is not assigned).
        for gsn in [14, 15, 29, 31, 41, 47] {
            assert!(
                matches!(Signal::decode(gsn, &[1, 0]), Err(WireError::UnknownSignal(g)) if g == gsn),
                "GSN {gsn}"
            );
        }
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        let mut body = body_of(&Signal::TcKeyReq(sample_req()));
        body.push(0);
        let msg = malformed(Signal::decode(GSN_TC_KEY_REQ, &body));
        assert!(msg.contains("1 trailing bytes"), "{msg}");
    }

    #[test]
    fn every_truncation_is_rejected() {
        let body = body_of(&Signal::TcKeyReq(sample_req()));
        for len in 0..body.len() {
            let msg = malformed(Signal::decode(GSN_TC_KEY_REQ, &body[..len]));
            assert!(msg.starts_with("TcKeyReq"), "{msg}");
        }
    }

    #[test]
    fn enum_bytes_out_of_range_are_rejected() {
        let body = body_of(&Signal::TcKeyReq(sample_req()));
        // exec at 12, first op's op at 16, lock at 17.
        for (offset, field) in [(12, "exec"), (16, "op"), (17, "lock")] {
            let mut bad = body.clone();
            bad[offset] = 9;
            let msg = malformed(Signal::decode(GSN_TC_KEY_REQ, &bad));
            assert!(
                msg.contains(field) && msg.contains(&format!("offset {offset}")),
                "{msg}"
            );
        }
        let mut bad = body.clone();
        bad[18] = 0x80;
        let msg = malformed(Signal::decode(GSN_TC_KEY_REQ, &bad));
        assert!(msg.contains("op 0: unknown flag bits"), "{msg}");
    }

    #[test]
    fn reserved_bytes_must_be_zero() {
        let body = body_of(&Signal::TcKeyReq(sample_req()));
        let mut bad = body.clone();
        bad[19] = 1;
        let msg = malformed(Signal::decode(GSN_TC_KEY_REQ, &bad));
        assert!(msg.contains("reserved"), "{msg}");
        // Byte 13 holds the request flags: bit 0 (durable) only.
        let mut durable = body.clone();
        durable[13] = TC_KEY_REQ_DURABLE;
        match Signal::decode(GSN_TC_KEY_REQ, &durable) {
            Ok(Signal::TcKeyReq(r)) => assert!(r.durable),
            other => panic!("{other:?}"),
        }
        let mut bad = body;
        bad[13] = 2;
        let msg = malformed(Signal::decode(GSN_TC_KEY_REQ, &bad));
        assert!(msg.contains("flags"), "{msg}");
    }

    #[test]
    fn forged_count_does_not_allocate() {
        // op_count 65535 with no ops behind it: rejected before allocating.
        let mut body = vec![0; 12];
        body.extend_from_slice(&[0, 0, 0xFF, 0xFF]);
        let msg = malformed(Signal::decode(GSN_TC_KEY_REQ, &body));
        assert!(msg.contains("op_count 65535"), "{msg}");
    }

    #[test]
    fn invalid_utf8_is_rejected() {
        let mut body = 5001u16.to_le_bytes().to_vec();
        body.extend_from_slice(&3u16.to_le_bytes());
        body.extend_from_slice(&[b'a', 0xFF, b'b']);
        let msg = malformed(Signal::decode(GSN_ERROR_REPORT, &body));
        assert!(msg.contains("UTF-8") && msg.contains("offset 5"), "{msg}");
    }

    #[test]
    fn long_detail_is_cut_at_a_char_boundary() {
        let detail = "é".repeat(SIGNAL_DETAIL_BYTES_MAX); // 2 bytes each
        let signal = Signal::ErrorReport(ErrorReport {
            code: 1,
            detail: detail.clone(),
        });
        let body = body_of(&signal);
        let Ok(Signal::ErrorReport(decoded)) = Signal::decode(GSN_ERROR_REPORT, &body) else {
            panic!("decode failed");
        };
        assert_eq!(decoded.detail.len(), SIGNAL_DETAIL_BYTES_MAX - 1);
        assert!(detail.starts_with(&decoded.detail));
    }
}
