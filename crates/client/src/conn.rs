//! One connection to one data node: the handshake, a writer task that sends
//! what every transaction queued since its last write in one `write`, a
//! reader task that routes replies to the waiting transactions by
//! transaction id, and (with a receive timeout) a sweeper that answers
//! requests the node never answered.
//!
//! Invariants:
//! - A request is registered in `pending`, with a reply slot
//!   ([`ReplySlots`]), in the same critical section that encodes it into
//!   `out`, and `pending` is drained when the connection closes, so every
//!   registered request gets exactly one answer in its slot: its reply, a
//!   timeout, or the connection's failure (for a commit, through
//!   [`Shared`], which answers it with a [`SlotAnswerer`]).
//! - Once `closed` is set nothing new is encoded or registered.
//! - `out` only ever holds whole signals; the writer closes the open frame
//!   (`FrameEncoder::finish`) under the lock before it takes the buffer.
//!
//! - A commit whose answer the node marks `ack_wanted` is acknowledged
//!   (`TcCommitAck`, batched with the next write) whether or not anyone
//!   still waits for it: the node keeps a commit marker until then.
//! - When the connection fails, a waiting `Commit` is handed to
//!   [`Shared`], which answers it from the takeover's reports (or with
//!   `CommitOutcomeUnknown` at its deadline); anything else fails with
//!   `NodeFailureAbort`.
//!
//! Signals sent: `TcKeyReq`, `TcCommitAck`, `FragmentRowsReq`,
//! `ScanTabReq`, `ScanNextReq`. Taken: `TcKeyConf`, `TcKeyRef`,
//! `FragmentRowsConf`, `ScanTabConf`, `ScanTabRef` (routed by transaction
//! id and request number), `TcKeyFailConf`, `TcNodeFailRep` (to
//! [`Shared`]), `ErrorReport` (logged; the connection is then lost).

use crate::cluster::ClusterOptions;
use crate::error::from_wire;
use crate::outcomes::Shared;
use crate::park_spin::Probe;
use crate::replies::{ReplySlot, ReplySlots};
use crate::scan::ScanRequest;
use shoal_types::{ErrorCode, ShoalError, TransId};
use shoal_wire::{
    ExecType, FragmentRowsConf, FragmentRowsReq, FrameDecoder, FrameEncoder, Hello, HelloReply,
    KeyOp, ScanNextReq, ScanTabConf, ScanTabRef, Signal, TcCommitAck, TcKeyConf, TcKeyRef,
    TcKeyReq, COMMIT_ACKS_MAX, FRAME_BYTES_MAX, FRAME_HEADER_BYTES, SIGNALS_PER_FRAME_MAX,
};
use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::future::Future;
use std::hash::{BuildHasherDefault, Hasher};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::task::{Context, Poll, Waker};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::Notify;
use tokio::task::{AbortHandle, JoinHandle};

/// Bytes the reader asks the socket for at least, per read.
const READ_CHUNK_BYTES: usize = 64 * 1024;
/// Acknowledgements gathered while requests are in flight that make the
/// writer send them without waiting for a request to ride with.
const ACKS_ALONE_MIN: usize = 1024;

/// Buffers above this size are shrunk back once empty, so one burst does
/// not pin memory for the life of the connection.
const BUFFER_KEEP_BYTES: usize = 4 * 1024 * 1024;
/// Largest handshake reply we wait for before calling the peer broken.
const HELLO_REPLY_BYTES_MAX: usize = 64 * 1024;
/// Signal header: `u16 gsn | u16 reserved | u32 body length`.
const SIGNAL_HEADER_BYTES: usize = shoal_wire::frame::SIGNAL_HEADER_BYTES;
/// Upper bounds of a `TcKeyReq` body's fixed parts, used to refuse a
/// request that could not fit in one frame before it is encoded. They are
/// deliberately generous: a request this close to the limit is refused a
/// little early rather than risk an encoder assertion.
const REQUEST_OVERHEAD_BYTES: usize = 64;
const OP_OVERHEAD_BYTES: usize = 32;
/// Operations in one request: `TcKeyRef::op_index` is a u16 with 0xFFFF
/// meaning "none".
pub(crate) const OPS_PER_REQUEST_MAX: usize = 0xFFFE;

/// The answer to one request.
#[derive(Debug)]
pub(crate) enum Reply {
    Conf(TcKeyConf),
    Ref(TcKeyRef),
    /// The coordinator failed before answering a commit; the node that
    /// took its transactions over reported how it ended (the answer's
    /// results, such as rows read, are lost with it).
    TakenOver {
        committed: bool,
    },
    /// A page of one replica's rows (`Cluster::compare_replicas`).
    Rows(FragmentRowsConf),
    /// The answer to a scan's request (`crate::scan`).
    Scan(ScanReply),
}

/// What a coordinator answered a scan's request with.
#[derive(Debug)]
pub(crate) enum ScanReply {
    /// A round of rows (or the end of the scan).
    Conf(ScanTabConf),
    /// The scan failed and is over.
    Ref(ScanTabRef),
}

pub(crate) type ReplyResult = Result<Reply, ShoalError>;

/// Answers one request whose connection failed (a commit waiting for the
/// takeover's report, held by [`Shared`]). Dropped without answering (its
/// runtime shut down first, say), it answers that the request was lost,
/// so the waiter never waits for ever.
pub(crate) struct SlotAnswerer {
    conn: Option<Arc<Connection>>,
    slot: ReplySlot,
}

impl SlotAnswerer {
    pub(crate) fn answer(mut self, result: ReplyResult) {
        if let Some(conn) = self.conn.take() {
            conn.answer(self.slot, result);
        }
    }
}

impl Drop for SlotAnswerer {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            conn.answer(
                self.slot,
                Err(cluster_failure(format!(
                    "connection to data node {} dropped the request",
                    conn.node_id
                ))),
            );
        }
    }
}

/// Waits for the answer in one slot of `conn`, and gives the slot up if
/// dropped before it came.
pub(crate) struct ReplyWait<'c> {
    conn: &'c Connection,
    slot: Option<ReplySlot>,
}

impl<'c> ReplyWait<'c> {
    pub(crate) fn new(conn: &'c Connection, slot: ReplySlot) -> Self {
        ReplyWait {
            conn,
            slot: Some(slot),
        }
    }
}

impl Future for ReplyWait<'_> {
    type Output = ReplyResult;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<ReplyResult> {
        let slot = self.slot.expect("polled after it was ready");
        let answer = self.conn.poll_reply(slot, cx);
        if answer.is_ready() {
            self.slot = None;
        }
        answer
    }
}

impl Drop for ReplyWait<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.conn.abandon(slot);
        }
    }
}

/// A request waiting for its reply.
struct Pending {
    /// Where its answer goes.
    slot: ReplySlot,
    /// The request's number in its transaction: an answer with another
    /// number is not for it.
    request: u32,
    /// What the request asked for: a lost `Commit` has an unknown outcome.
    exec: ExecType,
    /// Sweeper tick at which the request was queued.
    sent_tick: u32,
}

/// Transaction ids come from a counter, so a multiply is hash enough.
#[derive(Default)]
struct TransIdHasher(u64);

impl Hasher for TransIdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (n ^ (n >> 32)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

type PendingMap = HashMap<TransId, Pending, BuildHasherDefault<TransIdHasher>>;

struct ConnState {
    /// Encoded signals waiting for the writer.
    out: Vec<u8>,
    /// The next transaction id this connection hands out, and the end of
    /// its block (see `Shared::next_trans_block`): ids grow on a
    /// connection, as the node requires, and are unique for the API node.
    next_trans: u64,
    trans_block_end: u64,
    encoder: FrameEncoder,
    pending: PendingMap,
    /// The answers of `pending` requests, and of requests that lost their
    /// connection and wait for a takeover report, until their
    /// transactions take them.
    replies: ReplySlots,
    /// Commits to acknowledge with the next write.
    acks: Vec<TransId>,
    closed: bool,
    close_reason: String,
    /// Advanced by the sweeper; stamps requests for the receive timeout.
    tick: u32,
}

/// A connection to one data node, shared by every transaction using it.
pub(crate) struct Connection {
    /// This connection, for the answerers of commits handed to [`Shared`]
    /// when it fails.
    me: Weak<Connection>,
    node_id: u16,
    /// The node's start number (from its handshake reply).
    incarnation: u32,
    addr: String,
    shared: Arc<Shared>,
    /// Mirrors `ConnState::closed` for lock-free routing decisions; the
    /// flag under the lock is the authority.
    alive: AtomicBool,
    state: Mutex<ConnState>,
    /// Wakes the writer.
    notify: Notify,
    /// Largest `TcKeyReq` body that fits in one frame.
    request_bytes_max: usize,
    reader: Mutex<Option<AbortHandle>>,
    writer: Mutex<Option<JoinHandle<()>>>,
    /// The socket's second handle that a [`crate::ParkSpin`] peeks at;
    /// closed when the connection fails.
    probe: Option<Arc<Probe>>,
}

/// Locks, ignoring poisoning: the state stays consistent across a panic in
/// any critical section here (none of them can leave it half-updated in a
/// way later users depend on), and `Drop` paths must not panic twice.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

fn cluster_failure(detail: String) -> ShoalError {
    ShoalError::with_detail(ErrorCode::ClusterFailure, detail)
}

/// Bytes a `TcKeyReq` of these operations may take at most.
fn request_bytes(ops: &[KeyOp]) -> usize {
    ops.iter()
        .map(|op| OP_OVERHEAD_BYTES + op.key().len() + op.attrs().len())
        .sum::<usize>()
        + REQUEST_OVERHEAD_BYTES
}

impl Connection {
    /// Connects, handshakes and starts the I/O tasks on the current
    /// runtime. `hello.target_node_id` is the node expected at `addr`.
    pub(crate) async fn open(
        addr: &str,
        hello: &Hello,
        opts: &ClusterOptions,
        shared: Arc<Shared>,
    ) -> Result<Arc<Connection>, ShoalError> {
        let node_id = hello.target_node_id;
        let what = |e: String| cluster_failure(format!("data node {node_id} at {addr}: {e}"));
        let attempt = async {
            let mut stream = TcpStream::connect(addr)
                .await
                .map_err(|e| what(format!("connect: {e}")))?;
            stream
                .set_nodelay(true)
                .map_err(|e| what(format!("TCP_NODELAY: {e}")))?;
            stream
                .write_all(&hello.encode())
                .await
                .map_err(|e| what(format!("sending hello: {e}")))?;
            let (reply, rest) = read_hello_reply(&mut stream, node_id, addr).await?;
            Ok::<_, ShoalError>((stream, reply, rest))
        };
        let (stream, reply, rest) = tokio::time::timeout(opts.connect_timeout, attempt)
            .await
            .map_err(|_| what(format!("no handshake within {:?}", opts.connect_timeout)))??;
        if reply.status != 0 {
            let mut err = from_wire(reply.status, &reply.detail);
            if err.code == ErrorCode::Internal {
                err.code = ErrorCode::HandshakeRejected;
            }
            err.detail = format!(
                "data node {node_id} at {addr} refused the handshake: {}",
                err.detail
            );
            return Err(err);
        }
        if reply.node_id != node_id {
            return Err(ShoalError::with_detail(
                ErrorCode::HandshakeRejected,
                format!(
                    "expected data node {node_id} at {addr}, node {} answered",
                    reply.node_id
                ),
            ));
        }
        let frame_bytes_max = (reply.max_frame_bytes as usize).min(FRAME_BYTES_MAX);
        let signals_max = (reply.max_signals_per_frame as usize).min(SIGNALS_PER_FRAME_MAX);
        let overhead = FRAME_HEADER_BYTES + SIGNAL_HEADER_BYTES + REQUEST_OVERHEAD_BYTES;
        if frame_bytes_max <= overhead || signals_max == 0 {
            return Err(ShoalError::with_detail(
                ErrorCode::HandshakeRejected,
                format!(
                    "data node {node_id} at {addr} offered unusable limits: {} frame bytes, {} signals per frame",
                    reply.max_frame_bytes, reply.max_signals_per_frame
                ),
            ));
        }
        let (stream, probe) = match &opts.park_spin {
            None => (stream, None),
            Some(spin) => {
                let (stream, dup) = duplicate(stream).map_err(|e| what(format!("dup: {e}")))?;
                (stream, Some(spin.watch(dup)))
            }
        };
        let conn = Arc::new_cyclic(|me| Connection {
            me: me.clone(),
            node_id,
            incarnation: reply.incarnation,
            addr: addr.to_string(),
            shared,
            alive: AtomicBool::new(true),
            state: Mutex::new(ConnState {
                out: Vec::with_capacity(READ_CHUNK_BYTES),
                encoder: FrameEncoder::new(frame_bytes_max, signals_max),
                pending: PendingMap::default(),
                replies: ReplySlots::default(),
                acks: Vec::new(),
                next_trans: 0,
                trans_block_end: 0,
                closed: false,
                close_reason: String::new(),
                tick: 0,
            }),
            notify: Notify::new(),
            request_bytes_max: frame_bytes_max - FRAME_HEADER_BYTES - SIGNAL_HEADER_BYTES,
            reader: Mutex::new(None),
            writer: Mutex::new(None),
            probe,
        });
        conn.shared.register(node_id, conn.incarnation, &conn);
        let (rd, wr) = stream.into_split();
        let decoder = FrameDecoder::new(frame_bytes_max, signals_max);
        let writer = tokio::spawn(write_loop(conn.clone(), wr, opts.coalesce_sends));
        *lock(&conn.writer) = Some(writer);
        let reader = tokio::spawn(read_loop(conn.clone(), rd, decoder, rest));
        *lock(&conn.reader) = Some(reader.abort_handle());
        if let Some(timeout) = opts.receive_timeout {
            // Ticks of an eighth of the timeout: a request times out between
            // `timeout` and `timeout + tick` after it was queued, and the
            // sweeper wakes only eight times per timeout period.
            let tick = (timeout / 8).clamp(Duration::from_millis(10), Duration::from_secs(1));
            let ticks_max = timeout
                .as_nanos()
                .div_ceil(tick.as_nanos())
                .min(u32::MAX as u128 / 2) as u32;
            tokio::spawn(sweep_loop(conn.clone(), tick, ticks_max, timeout));
        }
        if !conn.is_alive() {
            // Failed before the reader's abort handle was stored.
            reader.abort();
        }
        Ok(conn)
    }

    pub(crate) fn node_id(&self) -> u16 {
        self.node_id
    }

    /// The start of the node this connection reaches.
    pub(crate) fn incarnation(&self) -> u32 {
        self.incarnation
    }

    /// False once the connection has failed or was closed.
    pub(crate) fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Encodes one `TcKeyReq` into the outgoing buffer, registers the
    /// transaction for its reply and wakes the writer. Takes the operations
    /// out of `ops` and hands the emptied vector back for reuse. A
    /// transaction's first request (`*trans` is `None`) gets its id here.
    /// Returns the slot the answer will be in: the caller takes it with
    /// [`Connection::poll_reply`], or gives it up with
    /// [`Connection::abandon`].
    pub(crate) fn submit(
        &self,
        trans: &mut Option<TransId>,
        request: u32,
        exec: ExecType,
        durable: bool,
        ops: &mut Vec<KeyOp>,
    ) -> Result<ReplySlot, ShoalError> {
        if ops.len() > OPS_PER_REQUEST_MAX {
            return Err(ShoalError::with_detail(
                ErrorCode::RequestTooLarge,
                format!(
                    "{} operations in one execute; the limit is {OPS_PER_REQUEST_MAX}",
                    ops.len()
                ),
            ));
        }
        let bytes = request_bytes(ops);
        if bytes > self.request_bytes_max {
            return Err(ShoalError::with_detail(
                ErrorCode::RequestTooLarge,
                format!(
                    "the operations of one execute take about {bytes} bytes; data node {} accepts {} per request",
                    self.node_id, self.request_bytes_max
                ),
            ));
        }
        let (slot, wake_writer) = {
            let mut guard = lock(&self.state);
            let st = &mut *guard;
            if st.closed {
                return Err(cluster_failure(format!(
                    "connection to data node {} is down: {}",
                    self.node_id, st.close_reason
                )));
            }
            // Taken under the lock: on this connection, ids grow in the
            // order first requests are sent, as the node requires.
            let trans = *trans.get_or_insert_with(|| next_trans(st, &self.shared));
            let sig = Signal::TcKeyReq(TcKeyReq {
                trans,
                request,
                exec,
                durable,
                ops: std::mem::take(ops),
            });
            let was_empty = st.out.is_empty();
            st.encoder.push(&mut st.out, &sig);
            let slot = st.replies.open();
            let pending = Pending {
                slot,
                request,
                exec,
                sent_tick: st.tick,
            };
            // A transaction has at most one request in flight (the
            // transaction refuses to execute while one is).
            let earlier = st.pending.insert(trans, pending);
            debug_assert!(earlier.is_none(), "two requests in flight for {trans:?}");
            if let Signal::TcKeyReq(req) = sig {
                *ops = req.ops;
            }
            (slot, was_empty)
        };
        ops.clear();
        // A request that finds `out` holding signals rides with them: the
        // one that made it non-empty woke the writer, which has not taken
        // the buffer since (it empties it when it does).
        if wake_writer {
            self.notify.notify_one();
        }
        Ok(slot)
    }

    /// The answer in `slot` (from [`Connection::submit`] or
    /// [`Connection::request_rows`]) once it came; the slot is then free
    /// and must not be used again. Until then the task is woken when it
    /// comes.
    pub(crate) fn poll_reply(&self, slot: ReplySlot, cx: &mut Context<'_>) -> Poll<ReplyResult> {
        lock(&self.state).replies.poll_take(slot, cx)
    }

    /// Gives `slot` up: nobody waits for its answer any more.
    pub(crate) fn abandon(&self, slot: ReplySlot) {
        lock(&self.state).replies.abandon(slot);
    }

    /// Gives up request `trans`'s answer in `slot` for good, when the
    /// answer may never come (a scan closed or dropped while a round was
    /// on its way: its coordinator may answer only the close). Unlike
    /// [`Connection::abandon`], which frees the slot when the answer
    /// comes, this forgets the request at once, so nothing stays behind.
    pub(crate) fn cancel(&self, trans: TransId, slot: ReplySlot) {
        let mut guard = lock(&self.state);
        let st = &mut *guard;
        if let Entry::Occupied(e) = st.pending.entry(trans) {
            if e.get().slot == slot {
                e.remove();
                let nobody = Err(cluster_failure("request cancelled".into()));
                // Its waiter is the caller, who no longer waits.
                drop(st.replies.answer(slot, nobody));
            }
        }
        st.replies.abandon(slot);
    }

    /// Answers `slot` (for [`SlotAnswerer`]).
    fn answer(&self, slot: ReplySlot, result: ReplyResult) {
        let waker = lock(&self.state).replies.answer(slot, result);
        if let Some(w) = waker {
            w.wake();
        }
    }

    /// Asks for a page of this node's replica of a fragment (see
    /// `FragmentRowsReq`).
    pub(crate) fn request_rows(
        &self,
        table: shoal_types::TableId,
        frag: u32,
        from_row: u32,
        max_bytes: u32,
    ) -> Result<ReplySlot, ShoalError> {
        let slot = {
            let mut guard = lock(&self.state);
            let st = &mut *guard;
            if st.closed {
                return Err(cluster_failure(format!(
                    "connection to data node {} is down: {}",
                    self.node_id, st.close_reason
                )));
            }
            let trans = next_trans(st, &self.shared);
            let sig = Signal::FragmentRowsReq(FragmentRowsReq {
                trans,
                table,
                frag,
                from_row,
                max_bytes,
            });
            st.encoder.push(&mut st.out, &sig);
            let slot = st.replies.open();
            st.pending.insert(
                trans,
                Pending {
                    slot,
                    request: 0,
                    exec: ExecType::NoCommit,
                    sent_tick: st.tick,
                },
            );
            slot
        };
        self.notify.notify_one();
        Ok(slot)
    }

    /// Asks the node to roll `trans` back without waiting for the answer
    /// (used when a transaction is dropped while open). The reply, if any,
    /// finds no pending entry and is dropped by the reader.
    pub(crate) fn send_rollback(&self, trans: TransId, request: u32) {
        {
            let mut guard = lock(&self.state);
            let st = &mut *guard;
            if st.closed {
                return;
            }
            let sig = Signal::TcKeyReq(TcKeyReq {
                trans,
                request,
                exec: ExecType::Rollback,
                durable: false,
                ops: Vec::new(),
            });
            st.encoder.push(&mut st.out, &sig);
        }
        self.notify.notify_one();
    }

    /// Sends a scan's first request (`ScanTabReq`, request 0) under a new
    /// transaction id, which names the scan from then on, and registers it
    /// for its answer. A request too large for one frame is refused with
    /// `RequestTooLarge` before anything is encoded.
    pub(crate) fn submit_scan(&self, req: ScanRequest) -> Result<(TransId, ReplySlot), ShoalError> {
        let bytes = req.bytes_max();
        if bytes > self.request_bytes_max {
            return Err(ShoalError::with_detail(
                ErrorCode::RequestTooLarge,
                format!(
                    "the scan's column list and filter take about {bytes} bytes; data node {} accepts {} per request",
                    self.node_id, self.request_bytes_max
                ),
            ));
        }
        let (trans, slot) = {
            let mut guard = lock(&self.state);
            let st = &mut *guard;
            if st.closed {
                return Err(self.down(st));
            }
            let trans = next_trans(st, &self.shared);
            let sig = Signal::ScanTabReq(req.into_signal(trans));
            let slot = self.register(st, &sig, trans, 0);
            (trans, slot)
        };
        self.notify.notify_one();
        Ok((trans, slot))
    }

    /// Asks for the next round of scan `trans` (`ScanNextReq`, `request`
    /// 1, 2, ...), or with `close` ends it, and registers the request for
    /// its answer. A scan has at most one request in flight.
    pub(crate) fn scan_next(
        &self,
        trans: TransId,
        request: u32,
        close: bool,
    ) -> Result<ReplySlot, ShoalError> {
        let slot = {
            let mut guard = lock(&self.state);
            let st = &mut *guard;
            if st.closed {
                // The scan was open on this connection: its coordinator
                // is lost, not the whole cluster.
                return Err(ShoalError::with_detail(
                    ErrorCode::NodeFailureAbort,
                    format!(
                        "connection to data node {}, the scan's coordinator, is down: {}",
                        self.node_id, st.close_reason
                    ),
                ));
            }
            let sig = Signal::ScanNextReq(ScanNextReq {
                trans,
                request,
                close,
            });
            self.register(st, &sig, trans, request)
        };
        self.notify.notify_one();
        Ok(slot)
    }

    /// Asks the coordinator to close scan `trans` without waiting for the
    /// answer (a scan dropped before its end, or one whose answer did not
    /// come in time). The answer finds no pending entry and is dropped.
    pub(crate) fn send_scan_close(&self, trans: TransId, request: u32) {
        {
            let mut guard = lock(&self.state);
            let st = &mut *guard;
            if st.closed {
                return;
            }
            let sig = Signal::ScanNextReq(ScanNextReq {
                trans,
                request,
                close: true,
            });
            st.encoder.push(&mut st.out, &sig);
        }
        self.notify.notify_one();
    }

    /// Encodes `sig` and registers request `request` of `trans` for its
    /// answer, in one critical section (the module's first invariant).
    fn register(
        &self,
        st: &mut ConnState,
        sig: &Signal,
        trans: TransId,
        request: u32,
    ) -> ReplySlot {
        st.encoder.push(&mut st.out, sig);
        let slot = st.replies.open();
        let earlier = st.pending.insert(
            trans,
            Pending {
                slot,
                request,
                exec: ExecType::NoCommit,
                sent_tick: st.tick,
            },
        );
        // A scan waits for each answer before it sends its next request.
        debug_assert!(earlier.is_none(), "two requests in flight for {trans:?}");
        slot
    }

    /// The error of a request refused because the connection is down.
    fn down(&self, st: &ConnState) -> ShoalError {
        cluster_failure(format!(
            "connection to data node {} is down: {}",
            self.node_id, st.close_reason
        ))
    }

    /// Closes the connection for good and fails every waiting request: a
    /// `Commit` waits for the takeover's report (or, if the application
    /// closed the connection, fails with `CommitOutcomeUnknown` at once),
    /// anything else fails with `NodeFailureAbort`. Idempotent.
    pub(crate) fn fail(&self, reason: &str, expected: bool) {
        // Held across the lock so that the last reference to this
        // connection is never dropped inside it.
        let me = self.me.upgrade();
        let mut wakers = Vec::new();
        let mut commits = Vec::new();
        {
            let mut guard = lock(&self.state);
            let st = &mut *guard;
            if !st.closed {
                st.closed = true;
                st.close_reason = reason.to_string();
                if expected {
                    tracing::debug!(node = self.node_id, addr = %self.addr, "connection closed: {reason}");
                } else {
                    tracing::warn!(
                        node = self.node_id,
                        addr = %self.addr,
                        pending = st.pending.len(),
                        "connection to data node lost: {reason}"
                    );
                }
            }
            self.alive.store(false, Ordering::Release);
            if !st.pending.is_empty() {
                let detail = format!("connection to data node {} closed: {reason}", self.node_id);
                for (trans, p) in std::mem::take(&mut st.pending) {
                    let code = match p.exec {
                        // Answered by the takeover's report, below.
                        ExecType::Commit if !expected && me.is_some() => {
                            commits.push((trans, p.slot));
                            continue;
                        }
                        ExecType::Commit => ErrorCode::CommitOutcomeUnknown,
                        ExecType::NoCommit | ExecType::Rollback => ErrorCode::NodeFailureAbort,
                    };
                    let answer = Err(ShoalError::with_detail(code, detail.clone()));
                    wakers.extend(st.replies.answer(p.slot, answer));
                }
            }
        }
        wakers.into_iter().for_each(Waker::wake);
        if let Some(me) = me {
            for (trans, slot) in commits {
                let answerer = SlotAnswerer {
                    conn: Some(me.clone()),
                    slot,
                };
                self.shared
                    .await_outcome(self.node_id, self.incarnation, trans, answerer, reason);
            }
        }
        self.notify.notify_one();
        if let Some(reader) = lock(&self.reader).take() {
            reader.abort();
        }
        if let Some(probe) = &self.probe {
            probe.close();
        }
    }

    /// Waits (at most `limit`) for the writer to flush and exit after
    /// [`Connection::fail`].
    pub(crate) async fn join_writer(&self, limit: Duration) {
        let writer = lock(&self.writer).take();
        if let Some(w) = writer {
            let abort = w.abort_handle();
            if tokio::time::timeout(limit, w).await.is_err() {
                abort.abort();
            }
        }
    }

    /// Routes received signals to their transactions. Returns why the
    /// connection must close, if it must.
    fn deliver(&self, signals: &mut Vec<Signal>, wakers: &mut Vec<Waker>) -> Result<(), String> {
        let mut reports = Vec::new();
        let result = self.route_replies(signals, &mut reports, wakers);
        // Woken outside the lock: a waiter on another thread would block
        // on it.
        wakers.drain(..).for_each(Waker::wake);
        // Reports are handled outside this connection's lock: one may
        // close another connection.
        for report in reports {
            match report {
                Signal::TcKeyFailConf(f) if f.committed => {
                    self.shared.committed(f.node, f.incarnation, f.trans)
                }
                Signal::TcKeyFailConf(_) => {}
                Signal::TcNodeFailRep(f) => {
                    if let Some(gone) = self.shared.complete(f.node, f.incarnation, &f.committed) {
                        gone.fail(
                            &format!(
                                "the cluster declared data node {} (start {}) failed",
                                f.node, f.incarnation
                            ),
                            false,
                        );
                    }
                }
                _ => unreachable!("only reports are collected"),
            }
        }
        result
    }

    fn route_replies(
        &self,
        signals: &mut Vec<Signal>,
        reports: &mut Vec<Signal>,
        wakers: &mut Vec<Waker>,
    ) -> Result<(), String> {
        let mut st = lock(&self.state);
        let acks_before = st.acks.len();
        let result = (|| {
            for sig in signals.drain(..) {
                let (trans, request, reply) = match sig {
                    Signal::TcKeyConf(c) => {
                        if c.ack_wanted {
                            st.acks.push(c.trans);
                        }
                        (c.trans, c.request, Reply::Conf(c))
                    }
                    Signal::TcKeyRef(r) => (r.trans, r.request, Reply::Ref(r)),
                    Signal::FragmentRowsConf(c) => (c.trans, 0, Reply::Rows(c)),
                    Signal::ScanTabConf(c) => (c.trans, c.request, Reply::Scan(ScanReply::Conf(c))),
                    Signal::ScanTabRef(r) => (r.trans, r.request, Reply::Scan(ScanReply::Ref(r))),
                    report @ (Signal::TcKeyFailConf(_) | Signal::TcNodeFailRep(_)) => {
                        reports.push(report);
                        continue;
                    }
                    Signal::ErrorReport(e) => {
                        tracing::error!(
                            node = self.node_id,
                            code = e.code,
                            "data node reported a protocol error: {}",
                            e.detail
                        );
                        return Err(format!("data node reported error {}: {}", e.code, e.detail));
                    }
                    Signal::TcKeyReq(_)
                    | Signal::TcCommitAck(_)
                    | Signal::FragmentRowsReq(_)
                    | Signal::ScanTabReq(_)
                    | Signal::ScanNextReq(_)
                    | Signal::Node(_) => {
                        return Err(format!("data node sent a client a {}", sig.name()))
                    }
                };
                match st.pending.entry(trans) {
                    Entry::Occupied(e) if e.get().request == request => {
                        let p = e.remove();
                        wakers.extend(st.replies.answer(p.slot, Ok(reply)));
                    }
                    _ => tracing::trace!(
                        node = self.node_id,
                        ?trans,
                        request,
                        "reply for a request nobody waits for (rolled back on drop, or timed out)"
                    ),
                }
            }
            Ok(())
        })();
        // Acknowledgements ride with the next write. Only when nothing is
        // in flight (so no later answer is sure to bring a write along) or
        // many have gathered does the writer go out for them alone: a
        // frame of acknowledgements per answer batch costs both sides a
        // write, a read and a decode.
        let wake = st.acks.len() > acks_before
            && (st.pending.is_empty() || st.acks.len() >= ACKS_ALONE_MIN);
        drop(st);
        if wake {
            self.notify.notify_one();
        }
        result
    }
}

/// Reads the handshake reply; returns it with any bytes that followed it.
async fn read_hello_reply(
    stream: &mut TcpStream,
    node_id: u16,
    addr: &str,
) -> Result<(HelloReply, Vec<u8>), ShoalError> {
    let mut buf = Vec::with_capacity(256);
    loop {
        match HelloReply::decode(&buf) {
            Ok(Some((reply, used))) => {
                buf.drain(..used);
                return Ok((reply, buf));
            }
            Ok(None) => {}
            Err(e) => {
                return Err(ShoalError::with_detail(
                    ErrorCode::HandshakeRejected,
                    format!("data node {node_id} at {addr}: malformed handshake reply: {e:?}"),
                ))
            }
        }
        if buf.len() > HELLO_REPLY_BYTES_MAX {
            return Err(ShoalError::with_detail(
                ErrorCode::HandshakeRejected,
                format!("data node {node_id} at {addr}: handshake reply longer than {HELLO_REPLY_BYTES_MAX} bytes"),
            ));
        }
        buf.reserve(256);
        let n = stream.read_buf(&mut buf).await.map_err(|e| {
            cluster_failure(format!(
                "data node {node_id} at {addr}: reading handshake: {e}"
            ))
        })?;
        if n == 0 {
            return Err(cluster_failure(format!(
                "data node {node_id} at {addr} closed the connection during the handshake"
            )));
        }
    }
}

/// The connection's next transaction id, from its block (a new block
/// when it is used up; blocks taken later start higher).
fn next_trans(st: &mut ConnState, shared: &Shared) -> TransId {
    if st.next_trans == st.trans_block_end {
        st.next_trans = shared.next_trans_block();
        st.trans_block_end = st.next_trans + crate::outcomes::TRANS_ID_BLOCK;
    }
    st.next_trans += 1;
    TransId(st.next_trans - 1)
}

/// `stream` and a second, std handle on its socket (for [`Probe`]),
/// non-blocking: a park hook must never wait on it.
fn duplicate(stream: TcpStream) -> std::io::Result<(TcpStream, std::net::TcpStream)> {
    let stream = stream.into_std()?;
    let dup = stream.try_clone()?;
    dup.set_nonblocking(true)?;
    Ok((TcpStream::from_std(stream)?, dup))
}

/// Sends whatever accumulated in `out` since the last write, in one write.
/// Swapping two buffers keeps both allocations alive across writes.
async fn write_loop(conn: Arc<Connection>, mut wr: OwnedWriteHalf, coalesce: bool) {
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK_BYTES);
    loop {
        conn.notify.notified().await;
        if coalesce {
            // Let every task that is ready now queue its requests first,
            // so that they leave in one write: tokio would otherwise run
            // this task next (its LIFO slot) after each request.
            tokio::task::yield_now().await;
        }
        let closed = {
            let mut guard = lock(&conn.state);
            let st = &mut *guard;
            if !st.acks.is_empty() && !st.closed {
                let acks = std::mem::take(&mut st.acks);
                // Each acknowledgement fits one frame.
                let per_signal = COMMIT_ACKS_MAX
                    .min((conn.request_bytes_max - 16) / 8)
                    .max(1);
                for chunk in acks.chunks(per_signal) {
                    let sig = Signal::TcCommitAck(TcCommitAck {
                        trans: chunk.to_vec(),
                    });
                    st.encoder.push(&mut st.out, &sig);
                }
            }
            st.encoder.finish(&mut st.out);
            std::mem::swap(&mut st.out, &mut buf);
            st.closed
        };
        if !buf.is_empty() {
            if let Err(e) = wr.write_all(&buf).await {
                conn.fail(&format!("write failed: {e}"), closed);
                return;
            }
            buf.clear();
            if buf.capacity() > BUFFER_KEEP_BYTES {
                buf.shrink_to(READ_CHUNK_BYTES);
            }
        }
        if closed {
            let _ = wr.shutdown().await;
            return;
        }
    }
}

/// Fails the connection when the reader stops for any reason, including
/// being aborted or its runtime shutting down, so no request is left
/// waiting on a reader that is gone.
struct FailOnDrop(Arc<Connection>);

impl Drop for FailOnDrop {
    fn drop(&mut self) {
        self.0.fail("reader task stopped", true);
    }
}

async fn read_loop(
    conn: Arc<Connection>,
    mut rd: OwnedReadHalf,
    mut decoder: FrameDecoder,
    initial: Vec<u8>,
) {
    let guard = FailOnDrop(conn);
    let conn = &guard.0;
    let mut buf = initial;
    let mut signals: Vec<Signal> = Vec::with_capacity(256);
    let mut wakers: Vec<Waker> = Vec::new();
    loop {
        let mut start = 0usize;
        loop {
            match decoder.decode(&buf[start..], &mut signals) {
                Ok(Some(used)) => start += used,
                Ok(None) => break,
                Err(e) => {
                    // Deliver what decoded cleanly before the bad frame.
                    let _ = conn.deliver(&mut signals, &mut wakers);
                    conn.fail(&format!("malformed frame from the data node: {e:?}"), false);
                    return;
                }
            }
        }
        if !signals.is_empty() {
            if let Err(reason) = conn.deliver(&mut signals, &mut wakers) {
                conn.fail(&reason, false);
                return;
            }
        }
        buf.drain(..start);
        if buf.is_empty() && buf.capacity() > BUFFER_KEEP_BYTES {
            buf.shrink_to(READ_CHUNK_BYTES);
        }
        buf.reserve(READ_CHUNK_BYTES);
        match rd.read_buf(&mut buf).await {
            Ok(0) => {
                conn.fail("the data node closed the connection", !conn.is_alive());
                return;
            }
            Ok(_) => {}
            Err(e) => {
                conn.fail(&format!("read failed: {e}"), !conn.is_alive());
                return;
            }
        }
    }
}

/// Answers requests older than the receive timeout with `ReceiveTimeout`.
async fn sweep_loop(conn: Arc<Connection>, tick: Duration, ticks_max: u32, timeout: Duration) {
    let mut interval = tokio::time::interval(tick);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut wakers = Vec::new();
    loop {
        interval.tick().await;
        {
            let mut guard = lock(&conn.state);
            let st = &mut *guard;
            if st.closed {
                return;
            }
            st.tick = st.tick.wrapping_add(1);
            let now = st.tick;
            let late: Vec<TransId> = st
                .pending
                .iter()
                .filter(|(_, p)| now.wrapping_sub(p.sent_tick) > ticks_max)
                .map(|(t, _)| *t)
                .collect();
            for t in &late {
                let p = st.pending.remove(t).expect("listed from the map");
                let answer = Err(ShoalError::with_detail(
                    ErrorCode::ReceiveTimeout,
                    format!(
                        "data node {} did not answer within {timeout:?}",
                        conn.node_id
                    ),
                ));
                wakers.extend(st.replies.answer(p.slot, answer));
            }
            if !late.is_empty() && st.pending.is_empty() && !st.acks.is_empty() {
                // Acknowledgements that waited for a write nobody will
                // make now.
                conn.notify.notify_one();
            }
        }
        wakers.drain(..).for_each(Waker::wake);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::scan::SCAN_REQUEST_FIXED_BYTES_MAX;
    use shoal_types::{SchemaVersion, TableId};
    use shoal_wire::{LockMode, NodeType, OpType, HELLO_BYTES};
    use tokio::net::TcpListener;
    use tokio::sync::mpsc;

    const NODE: u16 = 1;
    const INCARNATION: u32 = 7;

    /// A fake data node that answers: it accepts the handshake (offering
    /// frames of at most `frame_bytes`), decodes every signal a client
    /// sends, answers it with what `answer` returns for it, and passes it
    /// on through `seen`; signals given to `send` go to the client as they
    /// come. It closes its socket when it is dropped (with `_close`), or
    /// when `answer` returns `None`.
    pub(crate) struct ScriptedNode {
        pub addr: String,
        pub seen: mpsc::UnboundedReceiver<Signal>,
        pub send: mpsc::UnboundedSender<Signal>,
        pub _close: tokio::sync::oneshot::Sender<()>,
    }

    pub(crate) async fn scripted_node(
        frame_bytes: u32,
        mut answer: impl FnMut(&Signal) -> Option<Vec<Signal>> + Send + 'static,
    ) -> ScriptedNode {
        const SIGNALS: u32 = 64;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (close, mut close_rx) = tokio::sync::oneshot::channel::<()>();
        let (seen_tx, seen) = mpsc::unbounded_channel();
        let (send, mut to_send) = mpsc::unbounded_channel::<Signal>();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut hello = [0u8; HELLO_BYTES];
            s.read_exact(&mut hello).await.unwrap();
            let mut reply = Vec::new();
            HelloReply::accepted(NODE, frame_bytes, SIGNALS, INCARNATION).encode(&mut reply);
            s.write_all(&reply).await.unwrap();
            let mut decoder = FrameDecoder::new(frame_bytes as usize, SIGNALS as usize);
            let mut encoder = FrameEncoder::new(frame_bytes as usize, SIGNALS as usize);
            let mut buf = Vec::new();
            let mut signals = Vec::new();
            loop {
                let mut out = Vec::new();
                tokio::select! {
                    _ = &mut close_rx => return,
                    Some(sig) = to_send.recv() => encoder.push(&mut out, &sig),
                    r = s.read_buf(&mut buf) => if matches!(r, Ok(0) | Err(_)) { return },
                }
                let mut start = 0;
                while let Some(used) = decoder.decode(&buf[start..], &mut signals).unwrap() {
                    start += used;
                }
                buf.drain(..start);
                for sig in signals.drain(..) {
                    let Some(answers) = answer(&sig) else { return };
                    for a in &answers {
                        encoder.push(&mut out, a);
                    }
                    let _ = seen_tx.send(sig);
                }
                encoder.finish(&mut out);
                if s.write_all(&out).await.is_err() {
                    return;
                }
            }
        });
        ScriptedNode {
            addr,
            seen,
            send,
            _close: close,
        }
    }

    /// A data node that accepts the handshake, then reads and ignores
    /// every request; sending on (or dropping) the returned sender closes
    /// its socket.
    async fn silent_node() -> (String, tokio::sync::oneshot::Sender<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        let (close_tx, mut close_rx) = tokio::sync::oneshot::channel::<()>();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut hello = [0u8; HELLO_BYTES];
            s.read_exact(&mut hello).await.unwrap();
            let mut reply = Vec::new();
            HelloReply::accepted(NODE, 64 * 1024, 64, INCARNATION).encode(&mut reply);
            s.write_all(&reply).await.unwrap();
            let mut buf = vec![0u8; 4096];
            loop {
                tokio::select! {
                    _ = &mut close_rx => return,
                    r = s.read(&mut buf) => if matches!(r, Ok(0) | Err(_)) { return },
                }
            }
        });
        (addr, close_tx)
    }

    pub(crate) async fn open(addr: &str, receive_timeout: Option<Duration>) -> Arc<Connection> {
        let opts = ClusterOptions {
            connect_timeout: Duration::from_secs(5),
            receive_timeout,
            takeover_wait: Duration::from_millis(100),
            ..ClusterOptions::default()
        };
        let hello = Hello::new(NodeType::Api, 1, 100, NODE);
        Connection::open(addr, &hello, &opts, Shared::new(opts.takeover_wait))
            .await
            .unwrap()
    }

    /// Sends a one-read request of a new transaction.
    fn submit(conn: &Connection, exec: ExecType) -> (TransId, ReplySlot) {
        let mut trans = None;
        let mut ops = vec![KeyOp::new(
            OpType::Read,
            LockMode::CommittedRead,
            0,
            TableId(1),
            SchemaVersion(1),
            &[1, 2, 3, 4],
            &[0xFF, 0xFF],
        )];
        let slot = conn.submit(&mut trans, 0, exec, false, &mut ops).unwrap();
        assert!(ops.is_empty(), "the operations were taken");
        (trans.unwrap(), slot)
    }

    pub(crate) async fn answer(conn: &Connection, slot: ReplySlot) -> ReplyResult {
        tokio::time::timeout(Duration::from_secs(10), ReplyWait::new(conn, slot))
            .await
            .expect("every request is answered")
    }

    fn code(r: ReplyResult) -> ErrorCode {
        r.expect_err("the node never answers").code
    }

    #[tokio::test]
    async fn a_request_the_node_never_answers_times_out() {
        let (addr, _close) = silent_node().await;
        let conn = open(&addr, Some(Duration::from_millis(100))).await;
        let (_, slot) = submit(&conn, ExecType::NoCommit);
        assert_eq!(code(answer(&conn, slot).await), ErrorCode::ReceiveTimeout);
        // A waiter that went away: its slot is freed by the timeout.
        let (_, gone) = submit(&conn, ExecType::NoCommit);
        conn.abandon(gone);
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(lock(&conn.state).replies.in_use(), 0);
        assert!(conn.is_alive());
    }

    #[tokio::test]
    async fn a_lost_connection_answers_every_request_by_its_kind() {
        let (addr, close) = silent_node().await;
        let conn = open(&addr, None).await;
        let (_, open_one) = submit(&conn, ExecType::NoCommit);
        let (reported, commit_reported) = submit(&conn, ExecType::Commit);
        let (_, commit_unknown) = submit(&conn, ExecType::Commit);
        let (_, gone) = submit(&conn, ExecType::NoCommit);
        conn.abandon(gone);
        // Let the node take the requests before it goes.
        tokio::time::sleep(Duration::from_millis(50)).await;
        close.send(()).unwrap();
        assert_eq!(
            code(answer(&conn, open_one).await),
            ErrorCode::NodeFailureAbort
        );
        assert!(!conn.is_alive());
        // The node taking over reports one commit (before or after the
        // loss was noticed: either way it answers); the other has no
        // report and is unknown at the deadline.
        conn.shared.committed(NODE, INCARNATION, reported);
        assert!(matches!(
            answer(&conn, commit_reported).await,
            Ok(Reply::TakenOver { committed: true })
        ));
        assert_eq!(
            code(answer(&conn, commit_unknown).await),
            ErrorCode::CommitOutcomeUnknown
        );
        assert_eq!(lock(&conn.state).replies.in_use(), 0);
        let mut trans = None;
        let refused = conn.submit(&mut trans, 0, ExecType::NoCommit, false, &mut Vec::new());
        assert_eq!(refused.unwrap_err().code, ErrorCode::ClusterFailure);
    }

    /// With a park spin, a connection's second handle on its socket is
    /// watched while it is up and closed when it fails, even while the
    /// connection is still referenced: it never keeps a socket open.
    #[tokio::test]
    async fn a_failed_connection_closes_the_handle_its_park_spin_watches() {
        use crate::park_spin::{ParkSpin, SpinEnd};
        let (addr, _close) = silent_node().await;
        let spin = ParkSpin::new(Duration::from_micros(100));
        let opts = ClusterOptions {
            park_spin: Some(spin.clone()),
            ..ClusterOptions::default()
        };
        let hello = Hello::new(NodeType::Api, 1, 100, NODE);
        let conn = Connection::open(&addr, &hello, &opts, Shared::new(opts.takeover_wait))
            .await
            .unwrap();
        // The silent node sends nothing: the spin runs its whole time.
        assert_eq!(spin.spin_once(), SpinEnd::Deadline);
        conn.fail("closed by the test", true);
        assert_eq!(spin.spin_once(), SpinEnd::Nothing);
        assert!(!conn.is_alive());
        drop(conn);
    }

    fn scan_request(filter_bytes: usize) -> ScanRequest {
        ScanRequest {
            table: TableId(1),
            version: SchemaVersion(1),
            lock: LockMode::CommittedRead,
            batch_rows: 8,
            batch_bytes: 1024,
            columns: vec![0xFF, 0xFF],
            filter: vec![0x01; filter_bytes],
            index: shoal_wire::scan::SCAN_NO_INDEX,
            flags: 0,
            bounds: Vec::new(),
        }
    }

    fn round(trans: TransId, request: u32, done: bool) -> Signal {
        Signal::ScanTabConf(ScanTabConf {
            trans,
            request,
            done,
            examined: 3,
            count: 0,
            rows: Vec::new(),
        })
    }

    #[tokio::test]
    async fn scan_answers_reach_the_request_they_name() {
        let mut node = scripted_node(64 * 1024, |sig| {
            Some(match sig {
                // A stray answer naming another request comes first; it
                // must not be taken for this one.
                Signal::ScanTabReq(r) => vec![round(r.trans, 7, false), round(r.trans, 0, false)],
                Signal::ScanNextReq(r) => vec![Signal::ScanTabRef(ScanTabRef {
                    trans: r.trans,
                    request: r.request,
                    code: ErrorCode::ScanNotFound as u16,
                    detail: "gone".into(),
                })],
                _ => Vec::new(),
            })
        })
        .await;
        let conn = open(&node.addr, None).await;
        let (trans, slot) = conn.submit_scan(scan_request(3)).unwrap();
        match answer(&conn, slot).await {
            Ok(Reply::Scan(ScanReply::Conf(c))) => assert_eq!((c.trans, c.request), (trans, 0)),
            other => panic!("expected round 0, got {other:?}"),
        }
        let Some(Signal::ScanTabReq(sent)) = node.seen.recv().await else {
            panic!("the node saw the request")
        };
        assert_eq!((sent.trans, sent.filter.len()), (trans, 3));
        let slot = conn.scan_next(trans, 1, false).unwrap();
        match answer(&conn, slot).await {
            Ok(Reply::Scan(ScanReply::Ref(r))) => assert_eq!((r.trans, r.request), (trans, 1)),
            other => panic!("expected a refusal of request 1, got {other:?}"),
        }
        assert_eq!(lock(&conn.state).replies.in_use(), 0);
        assert!(lock(&conn.state).pending.is_empty());
        assert!(conn.is_alive());
    }

    #[tokio::test]
    async fn a_scan_too_large_for_a_frame_is_refused_before_encoding() {
        const FRAME: u32 = 1024;
        let mut node = scripted_node(FRAME, |_| Some(Vec::new())).await;
        let conn = open(&node.addr, None).await;
        let fits = conn.request_bytes_max - SCAN_REQUEST_FIXED_BYTES_MAX - 2;
        let refused = conn.submit_scan(scan_request(fits + 1)).unwrap_err();
        assert_eq!(refused.code, ErrorCode::RequestTooLarge);
        assert!(refused.detail.contains("scan"), "{refused}");
        let far_too_large = conn.submit_scan(scan_request(1 << 20)).unwrap_err();
        assert_eq!(far_too_large.code, ErrorCode::RequestTooLarge);
        // The largest accepted one is encoded into one frame and arrives.
        let (trans, slot) = conn.submit_scan(scan_request(fits)).unwrap();
        let Some(Signal::ScanTabReq(sent)) = node.seen.recv().await else {
            panic!("the node saw the request")
        };
        assert_eq!((sent.trans, sent.filter.len()), (trans, fits));
        conn.cancel(trans, slot);
        assert_eq!(lock(&conn.state).replies.in_use(), 0);
        assert!(conn.is_alive());
    }

    #[tokio::test]
    async fn a_data_node_sending_a_client_scan_request_breaks_the_connection() {
        let node = scripted_node(64 * 1024, |sig| {
            Some(match sig {
                Signal::TcKeyReq(r) => vec![Signal::ScanNextReq(ScanNextReq {
                    trans: r.trans,
                    request: 0,
                    close: false,
                })],
                _ => Vec::new(),
            })
        })
        .await;
        let conn = open(&node.addr, None).await;
        let (_, slot) = submit(&conn, ExecType::NoCommit);
        assert_eq!(code(answer(&conn, slot).await), ErrorCode::NodeFailureAbort);
        assert!(!conn.is_alive());
        let refused = conn.submit_scan(scan_request(0)).unwrap_err();
        assert_eq!(refused.code, ErrorCode::ClusterFailure);
    }

    #[tokio::test]
    async fn a_lost_connection_fails_a_waiting_scan_with_a_temporary_error() {
        let (addr, close) = silent_node().await;
        let conn = open(&addr, None).await;
        let (trans, slot) = conn.submit_scan(scan_request(0)).unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        close.send(()).unwrap();
        let e = answer(&conn, slot).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::NodeFailureAbort);
        assert_eq!(e.class(), shoal_types::ErrorClass::Temporary);
        // The scan's own coordinator is lost, not the cluster.
        assert_eq!(
            conn.scan_next(trans, 1, false).unwrap_err().code,
            ErrorCode::NodeFailureAbort
        );
        // A close of a scan on a dead connection is a no-op.
        conn.send_scan_close(trans, 1);
    }

    #[tokio::test]
    async fn a_cancelled_scan_request_leaves_nothing_behind() {
        let (addr, _close) = silent_node().await;
        let conn = open(&addr, None).await;
        let (trans, slot) = conn.submit_scan(scan_request(0)).unwrap();
        conn.cancel(trans, slot);
        let st = lock(&conn.state);
        assert_eq!(st.replies.in_use(), 0);
        assert!(st.pending.is_empty());
    }
}
