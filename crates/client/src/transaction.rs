//! [`Transaction`]: operations queued on the client and sent to one data
//! node (its coordinator) in one `TcKeyReq` per [`Transaction::execute`].
//!
//! Invariants:
//! - Every operation gets an [`OpId`] when queued; ids index `ops` and stay
//!   valid for the transaction's life. Ops `..sent` have been sent.
//! - At most one request is in flight (`execute` takes `&mut self`).
//! - Once the transaction is finished (committed, aborted or failed), it
//!   sends nothing more; `execute` answers `BadRequest`, except a
//!   `Rollback`, which is a no-op.
//! - A transaction dropped while it may be open on the node sends a
//!   fire-and-forget rollback, so its locks are released at once rather
//!   than at the inactivity timeout.

use crate::cluster::Cluster;
use crate::conn::{Connection, Reply, ReplyResult};
use crate::error::{bad_request, from_wire};
use crate::record::{encode_delete, Record, Table};
use crate::replies::ReplySlot;
use crate::row_buf::RowBuf;
use crate::scan::ScanBuilder;
use crate::unique::UniqueIndex;
use shoal_types::{ErrorCode, ShoalError, TransId, Value};
use shoal_wire::{ExecType, KeyOp, LockMode, OpType, TransState, OP_IGNORE_ERROR};
use std::cell::RefCell;
use std::sync::Arc;

/// Pairs of vectors a thread keeps for its next transactions.
const SPARE_MAX: usize = 512;
/// Vectors with room for more operations than this are not kept (a
/// vector's first allocation has room for 4).
const SPARE_OPS_MAX: usize = 4;

thread_local! {
    /// The emptied vectors of transactions dropped on this thread, for the
    /// next ones it starts. A batch of hundreds of transactions otherwise
    /// allocates its vectors together and frees them together, which
    /// overflows the allocator's per-thread cache: each batch then costs
    /// trips to its shared arenas. Bounded by [`SPARE_MAX`] and
    /// [`SPARE_OPS_MAX`] (under 512 KB per thread; see the test).
    static SPARE: RefCell<Vec<(Vec<KeyOp>, Vec<OpSlot>)>> = const { RefCell::new(Vec::new()) };
}

/// A request handed to the connection, awaiting its answer (in the
/// transaction's `in_flight` slot).
struct Request {
    exec: ExecType,
    /// Index of its first operation in `ops`, and how many it carried.
    first: usize,
    count: usize,
}

/// What the first half of an execute left to do.
enum Sent {
    Done(Result<(), ShoalError>),
    Waiting(Request),
}

/// Names one operation of a transaction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OpId(u32);

impl OpId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransactionState {
    /// Nothing executed yet.
    Started,
    /// Executed with `NoCommit`: open on the data node, locks held.
    Open,
    Committed,
    /// Rolled back, or aborted by the data node after an error.
    Aborted,
    /// The outcome is unknown or the transaction cannot go on (its
    /// connection failed, the reply timed out, the execute was cancelled).
    Failed,
}

impl TransactionState {
    fn is_finished(self) -> bool {
        matches!(
            self,
            TransactionState::Committed | TransactionState::Aborted | TransactionState::Failed
        )
    }
}

struct OpSlot {
    /// What the operation is on, kept for routing, errors and reads.
    target: Target,
    /// An operation by unique key: the index (routing goes by its hidden
    /// table, which the coordinator reads first).
    via: Option<UniqueIndex>,
    /// For a read, the buffer its answer lands in: the caller's (from
    /// [`Transaction::read_into`]) or one made when the answer arrives.
    /// Filled only once the answer has been checked.
    row: Option<RowBuf>,
    error: Option<ShoalError>,
}

/// The table an operation is on, and for a read the record its answer is
/// laid out by. A read into a buffer last filled through the same record
/// (a steady stream of reads reusing their buffers) finds the record in
/// the buffer: nothing is cloned, so no reference count is touched per
/// read.
enum Target {
    /// A write or a delete.
    Write(Table),
    /// A read laid out by this record.
    Read(Record),
    /// A read laid out by the record `row` already holds.
    ReadAsBefore,
}

impl OpSlot {
    /// The operation's table; `None` only for a read as before whose row
    /// was taken already (its request was answered).
    fn table(&self) -> Option<&Table> {
        match &self.target {
            Target::Write(t) => Some(t),
            Target::Read(r) => Some(r.table()),
            Target::ReadAsBefore => self
                .row
                .as_ref()
                .and_then(RowBuf::kept_record)
                .map(Record::table),
        }
    }

    fn is_read(&self) -> bool {
        !matches!(self.target, Target::Write(_))
    }

    /// Lays the answer `data` out in the operation's row buffer.
    fn fill(&mut self, data: &[u8]) -> Result<(), ShoalError> {
        match &self.target {
            Target::Write(_) => Ok(()),
            Target::Read(record) => self.row.get_or_insert_with(RowBuf::new).fill(record, data),
            // The buffer is taken only once filled, after its answer.
            Target::ReadAsBefore => match &mut self.row {
                Some(row) => row.fill_as_before(data),
                None => Err(ShoalError::with_detail(
                    ErrorCode::Internal,
                    "a read's row buffer was gone before its answer came",
                )),
            },
        }
    }
}

/// Accepted by [`Transaction::delete`]: a table or any record of it.
pub trait TableRef {
    fn table_ref(&self) -> &Table;
}

impl TableRef for Table {
    fn table_ref(&self) -> &Table {
        self
    }
}

impl TableRef for Record {
    fn table_ref(&self) -> &Table {
        self.table()
    }
}

pub struct Transaction {
    cluster: Cluster,
    /// Given by the coordinator's connection with the first request.
    trans: Option<TransId>,
    /// Requests sent so far (the next one's number).
    requests: u32,
    /// The coordinator, chosen at the first execute.
    conn: Option<Arc<Connection>>,
    /// The reply slot of the request in flight on `conn`, until its
    /// answer is taken; a transaction dropped (or an execute cancelled)
    /// before then gives it up.
    in_flight: Option<ReplySlot>,
    /// Operations queued for the next execute.
    queued: Vec<KeyOp>,
    ops: Vec<OpSlot>,
    /// `ops[..sent]` have been sent.
    sent: usize,
    /// Its commit is answered only once durable ([`Transaction::set_durable`]).
    durable: bool,
    state: TransactionState,
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("id", &self.trans)
            .field("state", &self.state)
            .field("ops", &self.ops.len())
            .field("queued", &self.queued.len())
            .finish()
    }
}

impl Transaction {
    pub(crate) fn new(cluster: Cluster) -> Transaction {
        let (queued, ops) = SPARE
            .try_with(|s| s.borrow_mut().pop())
            .ok()
            .flatten()
            .unwrap_or_default();
        Transaction {
            cluster,
            trans: None,
            requests: 0,
            conn: None,
            in_flight: None,
            queued,
            ops,
            sent: 0,
            durable: false,
            state: TransactionState::Started,
        }
    }

    /// Asks for a durable commit: `execute(Commit)` returns only once the
    /// transaction's epoch is durable, on disk on every live data node, so
    /// it survives a crash of the whole cluster. Without it a commit is
    /// answered once every replica holds it in memory, and a crash of
    /// every node may lose the last epoch or two (about
    /// `epoch_interval_ms` each). It costs up to about one epoch interval
    /// plus a disk sync of latency (docs/BENCHMARKS.md). A diskless
    /// cluster refuses it (4000).
    pub fn set_durable(&mut self, durable: bool) {
        self.durable = durable;
    }

    /// The transaction's id on its coordinator's connection, given by
    /// the first execute that sends operations (`None` before).
    pub fn id(&self) -> Option<TransId> {
        self.trans
    }

    /// How error messages name the transaction.
    fn name(&self) -> String {
        match self.trans {
            Some(t) => format!("transaction {t}"),
            None => "the transaction".into(),
        }
    }

    pub fn state(&self) -> TransactionState {
        self.state
    }

    fn push(
        &mut self,
        op: KeyOp,
        table: &Table,
        read: Option<(&Record, Option<RowBuf>)>,
    ) -> Result<OpId, ShoalError> {
        self.push_via(op, table, None, read)
    }

    fn push_via(
        &mut self,
        op: KeyOp,
        table: &Table,
        via: Option<&UniqueIndex>,
        read: Option<(&Record, Option<RowBuf>)>,
    ) -> Result<OpId, ShoalError> {
        if self.state.is_finished() {
            return Err(bad_request(format!(
                "{} is {:?}; start a new one",
                self.name(),
                self.state
            )));
        }
        let id = OpId(self.ops.len() as u32);
        self.queued.push(op);
        let (target, row) = match read {
            Some((record, Some(buf))) if buf.keeps_record(record) => {
                (Target::ReadAsBefore, Some(buf))
            }
            Some((record, buf)) => (Target::Read(record.clone()), buf),
            None => (Target::Write(table.clone()), None),
        };
        self.ops.push(OpSlot {
            target,
            via: via.cloned(),
            row,
            error: None,
        });
        Ok(id)
    }

    /// Queues an insert of `values` (in `record`'s column order); fails
    /// with 630 at execute if the key exists.
    pub fn insert(&mut self, record: &Record, values: &[Value]) -> Result<OpId, ShoalError> {
        let op = record.encode_write(OpType::Insert, values)?;
        self.push(op, record.table(), None)
    }

    /// Queues an update of the record's columns; fails with 626 at execute
    /// if the key does not exist.
    pub fn update(&mut self, record: &Record, values: &[Value]) -> Result<OpId, ShoalError> {
        let op = record.encode_write(OpType::Update, values)?;
        self.push(op, record.table(), None)
    }

    /// Queues an insert-or-update (upsert).
    pub fn write(&mut self, record: &Record, values: &[Value]) -> Result<OpId, ShoalError> {
        let op = record.encode_write(OpType::Write, values)?;
        self.push(op, record.table(), None)
    }

    /// Queues a delete by primary key (values in key order); fails with
    /// 626 at execute if the key does not exist.
    pub fn delete(&mut self, table: &impl TableRef, key: &[Value]) -> Result<OpId, ShoalError> {
        let table = table.table_ref();
        let op = encode_delete(table, key)?;
        self.push(op, table, None)
    }

    /// Queues a read of the record's columns by primary key (values in key
    /// order). `CommittedRead` takes no lock and sees the latest committed
    /// row; `Shared` and `Exclusive` lock it until the transaction ends.
    pub fn read(
        &mut self,
        record: &Record,
        key: &[Value],
        lock: LockMode,
    ) -> Result<OpId, ShoalError> {
        let op = record.encode_read(key, lock)?;
        self.push(op, record.table(), Some((record, None)))
    }

    /// Queues a read like [`Transaction::read`] whose row lands in `buf`,
    /// a buffer the caller reuses from transaction to transaction (as
    /// NDB's NdbRecord reads into the caller's row memory): its memory is
    /// kept, so a steady stream of reads allocates nothing for rows. Get
    /// it back with [`Transaction::take_row`] after the execute; until
    /// then it is empty. On an error here the buffer is dropped.
    pub fn read_into(
        &mut self,
        record: &Record,
        key: &[Value],
        lock: LockMode,
        mut buf: RowBuf,
    ) -> Result<OpId, ShoalError> {
        let op = record.encode_read(key, lock)?;
        buf.clear();
        self.push(op, record.table(), Some((record, Some(buf))))
    }

    /// Queues a read of the record's columns of the row whose unique
    /// index `index` holds `key` (the index columns' values, in key
    /// order), in one request: the coordinator looks the index entry up,
    /// then reads the row, with the lock asked for. The row lands laid out
    /// by `record` (a record of `index`'s table), as a [`Transaction::read`]'s
    /// does. Fails with 626 at execute if no row holds `key`. A NULL in
    /// `key` is refused here (839): rows with NULL there have no entry.
    pub fn read_unique(
        &mut self,
        record: &Record,
        index: &UniqueIndex,
        key: &[Value],
        lock: LockMode,
    ) -> Result<OpId, ShoalError> {
        let op = record.encode_read_unique(index, key, lock)?;
        self.push_via(op, record.table(), Some(index), Some((record, None)))
    }

    /// Queues an update of the row whose unique index `index` holds `key`:
    /// sets `record`'s columns to `values` (in record order). The record
    /// lists only the columns to set, never a primary-key column (the row
    /// keeps its key); it may hold the index's own columns, and the index
    /// follows (a value another row holds fails the transaction with 630).
    /// Fails with 626 at execute if no row holds `key`.
    pub fn update_unique(
        &mut self,
        record: &Record,
        index: &UniqueIndex,
        key: &[Value],
        values: &[Value],
    ) -> Result<OpId, ShoalError> {
        let op = record.encode_update_unique(index, key, values)?;
        self.push_via(op, record.table(), Some(index), None)
    }

    /// Queues a delete of the row whose unique index `index` holds `key`
    /// (its entries in every index go with it). Fails with 626 at execute
    /// if no row holds `key`.
    pub fn delete_unique(
        &mut self,
        index: &UniqueIndex,
        key: &[Value],
    ) -> Result<OpId, ShoalError> {
        let op = index.encode_delete(key)?;
        self.push_via(op, index.table(), Some(index), None)
    }

    /// Lets operation `op` fail with "not found" (626) or "already exists"
    /// (630) without aborting the transaction (NDB's AO_IgnoreError); the
    /// error is then reported by [`Transaction::op_error`]. Only affects
    /// operations not yet executed.
    pub fn ignore_error(&mut self, op: OpId) {
        if let Some(k) = op
            .index()
            .checked_sub(self.sent)
            .and_then(|i| self.queued.get_mut(i))
        {
            k.flags |= OP_IGNORE_ERROR;
        }
    }

    /// The row a read returned (after its execute), laid out by the
    /// read's record, or `None` if it has not run, failed, or found
    /// nothing under `ignore_error`.
    pub fn row(&self, op: OpId) -> Option<&RowBuf> {
        self.ops
            .get(op.index())
            .and_then(|s| s.row.as_ref())
            .filter(|r| r.is_filled())
    }

    /// Takes the row a read returned out of the transaction, to keep it
    /// or to hand its buffer to the next [`Transaction::read_into`];
    /// `None` as for [`Transaction::row`] (then any buffer the read was
    /// given is dropped with the transaction).
    pub fn take_row(&mut self, op: OpId) -> Option<RowBuf> {
        let slot = self.ops.get_mut(op.index())?;
        if slot.row.as_ref().is_some_and(RowBuf::is_filled) {
            slot.row.take()
        } else {
            None
        }
    }

    /// The error operation `op` ended with, if any.
    pub fn op_error(&self, op: OpId) -> Option<&ShoalError> {
        self.ops.get(op.index()).and_then(|s| s.error.as_ref())
    }

    /// Starts describing a scan of every row of `table`, returning all its
    /// columns (narrow them with [`ScanBuilder::columns`]); nothing is
    /// sent until [`ScanBuilder::open`]. The scan goes to this
    /// transaction's coordinator, or, before its first execute, to a data
    /// node picked as for a transaction without a key hint. A committed
    /// read scan (the only kind served today) takes no locks, so it is
    /// independent of the transaction's operations and outcome; the scan
    /// does not choose the transaction's coordinator.
    pub fn scan(&self, table: &Table) -> ScanBuilder {
        self.scan_record(&table.full_record())
    }

    /// [`Transaction::scan`] returning `record`'s columns, its rows laid
    /// out by `record` (as a read through it would be).
    pub fn scan_record(&self, record: &Record) -> ScanBuilder {
        ScanBuilder::new(
            Some(self.cluster.clone()),
            self.conn.clone(),
            record.clone(),
        )
    }

    /// Sends the queued operations in one request and waits for the answer.
    ///
    /// - `NoCommit`: runs them; the transaction stays open with its locks.
    /// - `Commit`: runs them and commits everything the transaction did.
    /// - `Rollback`: drops the queued operations and undoes the rest.
    ///
    /// An error aborts the whole transaction on the node (unless the op
    /// was marked with [`Transaction::ignore_error`]); its class says
    /// whether to retry. After a `Failed` state a commit's outcome is
    /// unknown (`CommitOutcomeUnknown`, 4012).
    pub async fn execute(&mut self, exec: ExecType) -> Result<(), ShoalError> {
        match self.send(exec) {
            Sent::Done(result) => result,
            Sent::Waiting(request) => {
                let reply = self.reply().await;
                self.finish(request, reply)
            }
        }
    }

    /// The answer to the request in flight. Cancelled, it leaves the slot
    /// in `in_flight`, for `Drop` or the next execute to give up.
    async fn reply(&mut self) -> ReplyResult {
        let (Some(conn), Some(slot)) = (&self.conn, self.in_flight) else {
            unreachable!("a request in flight has a connection and a slot")
        };
        let reply = std::future::poll_fn(|cx| conn.poll_reply(slot, cx)).await;
        // The slot is free now.
        self.in_flight = None;
        reply
    }

    /// Executes many transactions in one go, like NDB's
    /// `executeAsynchPrepare` + `sendPollNdb`: every request is queued
    /// first (so they share writes), then the answers are collected, one
    /// result per transaction, in order. The same as calling
    /// [`Transaction::execute`] on each concurrently, with far less
    /// per-transaction overhead: no future or waker per transaction.
    pub async fn execute_all(
        txns: &mut [Transaction],
        exec: ExecType,
    ) -> Vec<Result<(), ShoalError>> {
        let sent: Vec<Sent> = txns.iter_mut().map(|t| t.send(exec)).collect();
        let mut results = Vec::with_capacity(txns.len());
        for (t, s) in txns.iter_mut().zip(sent) {
            results.push(match s {
                Sent::Done(result) => result,
                Sent::Waiting(request) => {
                    let reply = t.reply().await;
                    t.finish(request, reply)
                }
            });
        }
        results
    }

    /// The first half of an execute: checks, then hands the request to the
    /// connection (nothing is awaited).
    fn send(&mut self, exec: ExecType) -> Sent {
        self.abandon_reply();
        if self.state.is_finished() {
            if exec == ExecType::Rollback {
                return Sent::Done(Ok(()));
            }
            return Sent::Done(Err(bad_request(format!(
                "{} is already {:?}; start a new one",
                self.name(),
                self.state
            ))));
        }
        if exec == ExecType::Rollback {
            // Queued operations are never sent.
            self.ops.truncate(self.sent);
            self.queued.clear();
            if self.conn.is_none() {
                self.state = TransactionState::Aborted;
                return Sent::Done(Ok(()));
            }
        } else if self.conn.is_none() && self.queued.is_empty() {
            // Nothing to do on any node.
            if exec == ExecType::Commit {
                self.state = TransactionState::Committed;
            }
            return Sent::Done(Ok(()));
        }
        let conn = match &self.conn {
            Some(c) => c,
            None => {
                // Start at the node holding the first key's primary: the
                // first of its replicas, in preferred order, that this
                // client is connected to (it connects only to started
                // nodes, so after a failure that is the surviving replica
                // that took over the primary, as on the data nodes); or at
                // the client's neighbour, if it holds a replica of a
                // READ_BACKUP table.
                let hinted = self.queued.first().and_then(|op| {
                    let slot = &self.ops[self.sent];
                    let table = slot
                        .via
                        .as_ref()
                        .map_or(slot.table(), |i| Some(i.index_table()))?;
                    self.cluster.coordinator_for(table, op.key())
                });
                match hinted.map_or_else(|| self.cluster.pick_connection(), Ok) {
                    Ok(c) => self.conn.insert(c),
                    Err(e) => return Sent::Done(Err(e)),
                }
            }
        };
        let first = self.sent;
        let count = self.queued.len();
        let durable = self.durable && exec == ExecType::Commit;
        let slot = match conn.submit(
            &mut self.trans,
            self.requests,
            exec,
            durable,
            &mut self.queued,
        ) {
            Ok(slot) => slot,
            Err(e) => return Sent::Done(Err(e)),
        };
        self.in_flight = Some(slot);
        self.requests += 1;
        self.sent = first + count;
        // If the caller stops waiting, the transaction's fate is unknown:
        // `Failed` until the answer says otherwise.
        self.state = TransactionState::Failed;
        Sent::Waiting(Request { exec, first, count })
    }

    /// Gives up the slot of a request whose answer nobody took (its
    /// execute was cancelled).
    fn abandon_reply(&mut self) {
        if let (Some(slot), Some(conn)) = (self.in_flight.take(), &self.conn) {
            conn.abandon(slot);
        }
    }

    /// The second half of an execute: applies the answer.
    fn finish(&mut self, request: Request, reply: ReplyResult) -> Result<(), ShoalError> {
        let Request { exec, first, count } = request;
        match reply {
            Err(e) => {
                self.fail_ops(first, &e);
                if e.code == ErrorCode::ReceiveTimeout && exec != ExecType::Commit {
                    // The node may still hold the transaction: release it.
                    self.send_rollback();
                }
                Err(e)
            }
            Ok(Reply::Conf(c)) => {
                if c.results.len() != count {
                    let e = ShoalError::with_detail(
                        ErrorCode::ProtocolViolation,
                        format!(
                            "data node answered {} results for {count} operations",
                            c.results.len()
                        ),
                    );
                    self.fail_ops(first, &e);
                    return Err(e);
                }
                let mut bad_row = None;
                for (i, r) in c.results.into_iter().enumerate() {
                    let slot = &mut self.ops[first + i];
                    if r.code != 0 {
                        slot.error = Some(from_wire(
                            r.code,
                            "operation failed (error ignored on request)",
                        ));
                    } else if let Err(e) = slot.fill(&r.data) {
                        slot.error = Some(e.clone());
                        bad_row.get_or_insert(e);
                    }
                }
                self.state = match c.state {
                    TransState::Open => TransactionState::Open,
                    TransState::Committed => TransactionState::Committed,
                    TransState::Aborted => TransactionState::Aborted,
                };
                match bad_row {
                    Some(e) => Err(e),
                    None => Ok(()),
                }
            }
            Ok(Reply::Rows(_) | Reply::Scan(_)) => {
                let e = ShoalError::with_detail(
                    ErrorCode::ProtocolViolation,
                    "data node answered a transaction with a page of rows or a scan's answer",
                );
                self.fail_ops(first, &e);
                Err(e)
            }
            Ok(Reply::TakenOver { committed: true }) => {
                // The coordinator failed after the commit; the answer's
                // results went with it: reads of this execute have no row.
                let e = ShoalError::with_detail(
                    ErrorCode::NodeFailureAbort,
                    "the commit went through, but its coordinator failed before sending the rows read",
                );
                for slot in &mut self.ops[first..first + count] {
                    if slot.is_read() {
                        slot.error.get_or_insert_with(|| e.clone());
                    }
                }
                self.state = TransactionState::Committed;
                Ok(())
            }
            Ok(Reply::TakenOver { committed: false }) => {
                self.state = TransactionState::Aborted;
                let e = ShoalError::with_detail(
                    ErrorCode::NodeFailureAbort,
                    format!(
                        "data node {} failed before committing; the node that took over its transactions aborted this one: retry it",
                        self.conn.as_ref().map_or(0, |c| c.node_id())
                    ),
                );
                self.fail_ops(first, &e);
                self.state = TransactionState::Aborted;
                Err(e)
            }
            Ok(Reply::Ref(r)) => {
                self.state = TransactionState::Aborted;
                let mut e = from_wire(r.code, &r.detail);
                let failing = (r.op_index as usize) < count;
                if failing {
                    let slot = &mut self.ops[first + r.op_index as usize];
                    // A slot of this request has its table (its row is
                    // taken only after an answer that filled it).
                    let table = slot.table().map(|t| t.name().to_string());
                    let table = table.unwrap_or_default();
                    if matches!(
                        e.code,
                        ErrorCode::NoSuchTable | ErrorCode::InvalidSchemaVersion
                    ) && !table.is_empty()
                    {
                        self.cluster.invalidate_table(&table);
                        if let Some(index) = &slot.via {
                            self.cluster.invalidate_table(index.index_table().name());
                        }
                    }
                    slot.error = Some(e.clone());
                    let by = match &slot.via {
                        Some(index) => format!(" by unique index {:?}", index.name()),
                        None => String::new(),
                    };
                    let at = format!(
                        "operation {} on table {table:?}{by}",
                        first + r.op_index as usize
                    );
                    e.detail = if e.detail.is_empty() {
                        at
                    } else {
                        format!("{at}: {}", e.detail)
                    };
                }
                Err(e)
            }
        }
    }

    /// Asks the coordinator to roll back, without waiting for it.
    fn send_rollback(&mut self) {
        if let (Some(trans), Some(conn)) = (self.trans, &self.conn) {
            conn.send_rollback(trans, self.requests);
            self.requests += 1;
        }
    }

    fn fail_ops(&mut self, first: usize, e: &ShoalError) {
        self.state = TransactionState::Failed;
        for slot in &mut self.ops[first..] {
            slot.error.get_or_insert_with(|| e.clone());
        }
    }
}

impl Drop for Transaction {
    fn drop(&mut self) {
        self.abandon_reply();
        let maybe_open = matches!(
            self.state,
            TransactionState::Open | TransactionState::Failed
        );
        if maybe_open {
            self.send_rollback();
        }
        let (mut queued, mut ops) = (
            std::mem::take(&mut self.queued),
            std::mem::take(&mut self.ops),
        );
        if queued.capacity() <= SPARE_OPS_MAX && ops.capacity() <= SPARE_OPS_MAX {
            queued.clear();
            ops.clear();
            // Fails only while the thread exits; the vectors are freed.
            let _ = SPARE.try_with(|s| {
                let mut s = s.borrow_mut();
                if s.len() < SPARE_MAX {
                    s.push((queued, ops));
                }
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spare_vectors_stay_within_their_budget() {
        let pair = SPARE_OPS_MAX * (std::mem::size_of::<KeyOp>() + std::mem::size_of::<OpSlot>())
            + std::mem::size_of::<(Vec<KeyOp>, Vec<OpSlot>)>();
        assert!(SPARE_MAX * pair <= 512 * 1024, "{pair} bytes per pair");
    }
}
