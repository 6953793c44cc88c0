//! Full-table scans, like NDB's NdbScanOperation: a [`ScanBuilder`] (from
//! [`Transaction::scan`](crate::Transaction::scan)) says which columns to
//! return, which rows to keep (a [`FilterExpr`] the data nodes run) and how
//! many rows a round may bring; [`ScanBuilder::open`] sends `ScanTabReq` to
//! a data node, the scan's coordinator, and [`Scan`] hands the rows out a
//! round at a time, asking for each next round (`ScanNextReq`) only once
//! every row of the last one was taken.
//!
//! Rows land in [`RowBuf`]s laid out by the scan's [`Record`], as the rows
//! of key reads do, so every column is then read in O(1). The buffers are
//! reused from round to round.
//!
//! Invariants:
//! - A scan has at most one request in flight. Requests are numbered 0
//!   (the `ScanTabReq`), then 1, 2, ... (each `ScanNextReq`), and the
//!   connection hands the scan only the answer naming the one in flight.
//! - A round's rows are parsed and checked once, when the round arrives;
//!   a malformed round fails the scan, and none of its rows is handed out.
//! - Once the scan has ended (its last round, a `ScanTabRef`, a failure),
//!   it sends nothing more, except that a scan that may still be open on
//!   its coordinator (dropped before its end, failed on a malformed or
//!   late answer) sends a close without waiting, so the coordinator frees
//!   it at once rather than holding a scan record until the connection closes.
//!
//! Signals sent: `ScanTabReq`, `ScanNextReq`. Taken (through the
//! connection's routing): `ScanTabConf`, `ScanTabRef`.

use crate::cluster::Cluster;
use crate::conn::{Connection, Reply, ReplyResult, ScanReply};
use crate::error::{bad_request, from_wire};
use crate::record::{Record, Table};
use crate::replies::ReplySlot;
use crate::row_buf::RowBuf;
use shoal_types::filter::FilterExpr;
use shoal_types::index_key::encode_key;
use shoal_types::Value;
use shoal_types::{ErrorCode, SchemaVersion, ShoalError, TableId, TransId};
use shoal_wire::scan::{
    encode_bounds, KeyRange, SCAN_DESCENDING, SCAN_NO_INDEX, SCAN_ORDERED, SCAN_RANGES_MAX,
};
use shoal_wire::{LockMode, ScanTabConf, ScanTabReq};
use std::ops::Bound;
use std::sync::Arc;

/// Rows a round brings at most unless [`ScanBuilder::batch`] says
/// otherwise.
pub const SCAN_BATCH_ROWS_DEFAULT: u32 = 256;
/// Bytes of rows a round brings at most unless [`ScanBuilder::batch`]
/// says otherwise (the coordinator lowers it to what fits one answer).
pub const SCAN_BATCH_BYTES_DEFAULT: u32 = 256 * 1024;

/// Upper bound of a `ScanTabReq` body's fixed part (36 bytes today),
/// used to refuse a request that could not fit in one frame before it is
/// encoded. Generous, like the connection's bounds of a `TcKeyReq`.
pub(crate) const SCAN_REQUEST_FIXED_BYTES_MAX: usize = 64;

/// A scan's first request, all but the transaction id the connection
/// gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ScanRequest {
    pub table: TableId,
    pub version: SchemaVersion,
    pub lock: LockMode,
    pub batch_rows: u32,
    pub batch_bytes: u32,
    /// The record's read list.
    pub columns: Vec<u8>,
    /// A compiled filter program; empty: every row.
    pub filter: Vec<u8>,
    /// The ordered index scanned (`SCAN_NO_INDEX`: the table), its
    /// `SCAN_*` flags and its encoded ranges.
    pub index: u16,
    pub flags: u8,
    pub bounds: Vec<u8>,
}

impl ScanRequest {
    /// Bytes its `ScanTabReq` body may take at most.
    pub(crate) fn bytes_max(&self) -> usize {
        SCAN_REQUEST_FIXED_BYTES_MAX + self.columns.len() + self.filter.len() + self.bounds.len()
    }

    pub(crate) fn into_signal(self, trans: TransId) -> ScanTabReq {
        ScanTabReq {
            trans,
            table: self.table,
            version: self.version,
            lock: self.lock,
            flags: self.flags,
            index: self.index,
            bounds: self.bounds,
            batch_rows: self.batch_rows,
            batch_bytes: self.batch_bytes,
            columns: self.columns,
            filter: self.filter,
        }
    }
}

/// Describes a scan of one table; [`ScanBuilder::open`] starts it. Errors
/// met while building (an unknown column, a filter that does not fit the
/// table) are kept and returned by `open`, so the calls chain.
#[must_use = "a scan builder does nothing until it is opened"]
pub struct ScanBuilder {
    /// For a connection when the transaction has none, and to forget a
    /// table definition the coordinator calls stale. `None` only in this
    /// crate's tests, which hand a connection in.
    cluster: Option<Cluster>,
    /// The transaction's coordinator, if it has one.
    conn: Option<Arc<Connection>>,
    record: Record,
    filter: Vec<u8>,
    /// The filter as built, for a locking scan's check of each locked row
    /// (`None`: none, or a raw program).
    filter_expr: Option<FilterExpr>,
    raw_filter: bool,
    lock: LockMode,
    batch_rows: u32,
    batch_bytes: u32,
    /// The ordered index scanned (`SCAN_NO_INDEX`: the table), its
    /// `SCAN_*` flags, and its ranges as encoded keys.
    index: u16,
    flags: u8,
    ranges: Vec<OwnedRange>,
    /// The first error met while building.
    error: Option<ShoalError>,
}

/// A range of an index scan: (encoded bound, inclusive) at each end.
pub(crate) type OwnedRange = (Option<(Vec<u8>, bool)>, Option<(Vec<u8>, bool)>);

impl std::fmt::Debug for ScanBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScanBuilder")
            .field("table", &self.record.table().name())
            .field("columns", &self.record.columns())
            .field("filter_bytes", &self.filter.len())
            .field("lock", &self.lock)
            .field("batch_rows", &self.batch_rows)
            .field("batch_bytes", &self.batch_bytes)
            .field("error", &self.error)
            .finish()
    }
}

impl ScanBuilder {
    pub(crate) fn new(
        cluster: Option<Cluster>,
        conn: Option<Arc<Connection>>,
        record: Record,
    ) -> ScanBuilder {
        ScanBuilder {
            cluster,
            conn,
            record,
            filter: Vec::new(),
            filter_expr: None,
            raw_filter: false,
            lock: LockMode::CommittedRead,
            batch_rows: SCAN_BATCH_ROWS_DEFAULT,
            batch_bytes: SCAN_BATCH_BYTES_DEFAULT,
            index: SCAN_NO_INDEX,
            flags: 0,
            ranges: Vec::new(),
            error: None,
        }
    }

    /// Scans the table's ordered index `name` instead of the table: rows
    /// come per fragment in the index's order (all of them in order with
    /// [`ScanBuilder::ordered`]), and ranges ([`ScanBuilder::range`],
    /// [`ScanBuilder::eq`]) bound what is read. `PRIMARY` is the primary
    /// key's (unless the table was created hash only).
    pub fn index(mut self, name: &str) -> Self {
        match self.record.table().def().index_number(name) {
            Some(i) => self.index = i,
            None => self.keep_error(ShoalError::with_detail(
                ErrorCode::NoSuchColumn,
                format!(
                    "table {:?} has no ordered index {name:?} (it has {:?}; an index added since this client read the table shows after Cluster::invalidate_table)",
                    self.record.table().name(),
                    self.record
                        .table()
                        .def()
                        .indexes
                        .iter()
                        .map(|i| i.name.as_str())
                        .collect::<Vec<_>>()
                ),
            )),
        }
        self
    }

    /// Adds a range of the index: `low` and `high` give values for the
    /// first columns of the index (a prefix: fewer values bound only
    /// those columns). Give ranges in ascending order, not overlapping
    /// (rows of overlapping ones may come twice).
    pub fn range(mut self, low: Bound<&[Value]>, high: Bound<&[Value]>) -> Self {
        let low = self.bound(low);
        let high = self.bound(high);
        if let (Some(low), Some(high)) = (low, high) {
            self.ranges.push((low, high));
        }
        self
    }

    /// Adds a range of the rows whose first index columns equal `values`.
    pub fn eq(self, values: &[Value]) -> Self {
        self.range(Bound::Included(values), Bound::Included(values))
    }

    /// Rows in index order across every fragment (the coordinator merges
    /// the fragments' streams). Without it, each fragment's rows come in
    /// order but fragments interleave.
    pub fn ordered(mut self) -> Self {
        self.flags |= SCAN_ORDERED;
        self
    }

    /// Walks the index from its high end down.
    pub fn descending(mut self) -> Self {
        self.flags |= SCAN_DESCENDING;
        self
    }

    /// Encodes one end of a range; `None` if it failed (the error kept).
    fn bound(&mut self, b: Bound<&[Value]>) -> Option<Option<(Vec<u8>, bool)>> {
        if self.index == SCAN_NO_INDEX {
            self.keep_error(bad_request(
                "a range needs an index: call .index(name) first",
            ));
            return None;
        }
        let (values, inclusive) = match b {
            Bound::Unbounded => return Some(None),
            Bound::Included(v) => (v, true),
            Bound::Excluded(v) => (v, false),
        };
        let def = self.record.table().def();
        let columns = &def.indexes[usize::from(self.index)].columns;
        let mut key = Vec::new();
        match encode_key(def, columns, values, &mut key) {
            Ok(()) => Some(Some((key, inclusive))),
            Err(e) => {
                self.keep_error(e);
                None
            }
        }
    }

    /// The scanned table (to look column ids up for a filter:
    /// [`Table::column_id`]).
    pub fn table(&self) -> &Table {
        self.record.table()
    }

    /// Returns the named columns of the table, in this order (the rows are
    /// laid out by [`Table::record`] of these names). By default a scan
    /// returns every column.
    pub fn columns(mut self, names: &[&str]) -> Self {
        match self.record.table().record(names) {
            Ok(record) => self.record = record,
            Err(e) => self.keep_error(e),
        }
        self
    }

    /// Keeps only the rows `filter` holds TRUE for (the data nodes run
    /// it; rows it drops never cross the network). Column ids index the
    /// table's columns ([`Table::column_id`]). Replaces any earlier filter.
    pub fn filter(mut self, filter: FilterExpr) -> Self {
        match filter.compile(self.record.table().def()) {
            Ok(program) => {
                self.filter = program;
                self.filter_expr = Some(filter);
                self.raw_filter = false;
            }
            Err(e) => self.keep_error(e),
        }
        self
    }

    /// [`ScanBuilder::filter`] with the filter built by `build` from the
    /// scanned table, so columns can be named:
    /// `.filter_with(|t| Ok(FilterExpr::IsNull(t.column_id("name")?)))`.
    pub fn filter_with(
        mut self,
        build: impl FnOnce(&Table) -> Result<FilterExpr, ShoalError>,
    ) -> Self {
        match build(self.record.table()) {
            Ok(filter) => self.filter(filter),
            Err(e) => {
                self.keep_error(e);
                self
            }
        }
    }

    /// An already compiled filter program (`shoal_types::filter`), sent
    /// as it is: the data node verifies it and refuses a bad one with
    /// `BadFilter` (4270). For tests of that refusal; prefer
    /// [`ScanBuilder::filter`]. Empty: every row.
    pub fn filter_program(mut self, program: Vec<u8>) -> Self {
        self.filter = program;
        self.filter_expr = None;
        self.raw_filter = true;
        self
    }

    /// How many rows (`rows`) and bytes of rows (`bytes`) a round may
    /// bring at most; both at least 1 (defaults
    /// [`SCAN_BATCH_ROWS_DEFAULT`], [`SCAN_BATCH_BYTES_DEFAULT`]). A
    /// round may bring more rows than asked when the table has more
    /// fragments (at least one row per fragment scanned).
    pub fn batch(mut self, rows: u32, bytes: u32) -> Self {
        self.batch_rows = rows;
        self.batch_bytes = bytes;
        self
    }

    /// The lock mode of the scan: `CommittedRead` (the default: the
    /// newest committed image of each row, no locks), or `Shared` /
    /// `Exclusive`, which lock each row returned until its transaction
    /// ends — open those with [`ScanBuilder::open_locking`].
    pub fn lock(mut self, lock: LockMode) -> Self {
        self.lock = lock;
        self
    }

    /// Opens a scan that locks every row it returns in `txn` (`Shared`
    /// or `Exclusive`, as [`ScanBuilder::lock`] said), held until `txn`
    /// commits or rolls back; `txn` may update or delete them meanwhile.
    /// Rows come with every column. See [`LockingScan`].
    pub async fn open_locking(
        mut self,
        txn: &mut crate::Transaction,
    ) -> Result<LockingScan<'_>, ShoalError> {
        let lock = self.lock;
        if lock == LockMode::CommittedRead {
            return Err(bad_request(
                "a locking scan needs .lock(Shared) or .lock(Exclusive); open a committed-read scan with .open()",
            ));
        }
        if self.raw_filter {
            return Err(bad_request(
                "a locking scan checks each locked row against its filter: give it with .filter(), not as a raw program",
            ));
        }
        let filter = self.filter_expr.take();
        let full = self.record.table().full_record();
        let batch = self.batch_rows.clamp(1, LOCK_BATCH_ROWS_MAX) as usize;
        // An index scan's rows are checked against its ranges again too.
        let bounds = (self.index != SCAN_NO_INDEX && !self.ranges.is_empty()).then(|| {
            let def = self.record.table().def();
            (
                def.indexes[usize::from(self.index)].columns.clone(),
                self.ranges.clone(),
            )
        });
        self.record = full.clone();
        self.lock = LockMode::CommittedRead;
        let scan = self.open().await?;
        Ok(LockingScan::new(
            scan, txn, full, lock, filter, bounds, batch,
        ))
    }

    fn keep_error(&mut self, e: ShoalError) {
        self.error.get_or_insert(e);
    }

    /// Checks what was built and turns it into the scan's first request.
    fn into_request(self) -> Result<(Opening, ScanRequest), ShoalError> {
        let ScanBuilder {
            cluster,
            conn,
            record,
            filter,
            lock,
            batch_rows,
            batch_bytes,
            index,
            flags,
            ranges,
            error,
            ..
        } = self;
        if let Some(e) = error {
            return Err(e);
        }
        if batch_rows == 0 || batch_bytes == 0 {
            return Err(bad_request(format!(
                "a scan's batch needs at least one row and one byte (got {batch_rows} rows, {batch_bytes} bytes)"
            )));
        }
        let mut bounds = Vec::new();
        if !ranges.is_empty() {
            if ranges.len() > SCAN_RANGES_MAX {
                return Err(bad_request(format!(
                    "{} ranges; a scan takes at most {SCAN_RANGES_MAX}",
                    ranges.len()
                )));
            }
            let ranges: Vec<KeyRange> = ranges
                .iter()
                .map(|(low, high)| KeyRange {
                    low: low.as_ref().map(|(b, i)| (&b[..], *i)),
                    high: high.as_ref().map(|(b, i)| (&b[..], *i)),
                })
                .collect();
            encode_bounds(&ranges, &mut bounds);
        }
        if flags != 0 && index == SCAN_NO_INDEX {
            return Err(bad_request(
                "ordered and descending scans need an index: call .index(name)",
            ));
        }
        let table = record.table();
        let request = ScanRequest {
            table: table.id(),
            version: table.version(),
            lock,
            batch_rows,
            batch_bytes,
            columns: record.read_list().to_vec(),
            filter,
            index,
            flags,
            bounds,
        };
        Ok((
            Opening {
                cluster,
                conn,
                record,
            },
            request,
        ))
    }

    /// Starts the scan: sends `ScanTabReq` to the transaction's
    /// coordinator, or, if it has none yet, to a data node chosen as a new
    /// transaction without a key hint chooses one, and waits for the first
    /// round. Errors: what building met; `RequestTooLarge` when the
    /// column list and filter do not fit one request; the coordinator's
    /// refusal (`NoSuchTable`, `InvalidSchemaVersion` — the cached table
    /// is then forgotten, fetch it again —, `BadFilter`, `TooManyScans`,
    /// a lock mode it does not serve, ...); a connection failure
    /// (`NodeFailureAbort`, `ClusterFailure`, `ReceiveTimeout`: retry).
    pub async fn open(self) -> Result<Scan, ShoalError> {
        if self.lock != LockMode::CommittedRead {
            return Err(bad_request(format!(
                "a {:?} scan locks its rows in a transaction: open it with .open_locking(&mut txn), or scan with CommittedRead",
                self.lock
            )));
        }
        let (opening, request) = self.into_request()?;
        let Opening {
            cluster,
            conn,
            record,
        } = opening;
        let conn = match (conn.filter(|c| c.is_alive()), &cluster) {
            (Some(c), _) => c,
            (None, Some(cluster)) => cluster.pick_connection()?,
            (None, None) => {
                return Err(ShoalError::with_detail(
                    ErrorCode::ClusterFailure,
                    "no connection to scan through",
                ))
            }
        };
        let (trans, slot) = conn.submit_scan(request)?;
        let mut scan = Scan {
            cluster,
            conn,
            record,
            trans,
            requests: 1,
            in_flight: Some(slot),
            rows: Vec::new(),
            filled: 0,
            next: 0,
            state: ScanState::Open,
            examined: 0,
        };
        scan.fetch().await;
        match &scan.state {
            ScanState::Failed(e) => Err(e.clone()),
            ScanState::Open | ScanState::Done => Ok(scan),
        }
    }
}

/// What a scan needs besides its request.
struct Opening {
    cluster: Option<Cluster>,
    conn: Option<Arc<Connection>>,
    record: Record,
}

enum ScanState {
    /// The coordinator holds the scan: more rounds may come.
    Open,
    /// The last round came, or the scan was closed: the coordinator
    /// forgot it.
    Done,
    /// The scan failed; every later call returns this error.
    Failed(ShoalError),
}

/// An open scan: its rows, a round at a time ([`Scan::next_row`]). Dropped
/// before its end, it closes itself on the coordinator without waiting.
pub struct Scan {
    cluster: Option<Cluster>,
    conn: Arc<Connection>,
    record: Record,
    /// Names the scan in its requests and answers.
    trans: TransId,
    /// Requests sent so far: the next one's number.
    requests: u32,
    /// The slot of the request in flight, until its answer is taken. A
    /// wait that was cancelled leaves it here, and the next one resumes it.
    in_flight: Option<ReplySlot>,
    /// `rows[..filled]` hold the current round, `rows[next..filled]` its
    /// rows not handed out yet; buffers past `filled` wait for reuse.
    rows: Vec<RowBuf>,
    filled: usize,
    next: usize,
    state: ScanState,
    /// Rows the data nodes looked at so far.
    examined: u64,
}

impl std::fmt::Debug for Scan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scan")
            .field("id", &self.trans)
            .field("table", &self.record.table().name())
            .field("node", &self.conn.node_id())
            .field("requests", &self.requests)
            .field("examined", &self.examined)
            .field("done", &self.is_done())
            .finish()
    }
}

impl Scan {
    /// The next row, laid out by the scan's record; `None` once the scan
    /// has handed out its last row. The row is valid until the next call;
    /// take a copy (`clone`) to keep it. Asks the coordinator for the next
    /// round only when every row of the last one was taken. Cancelling the
    /// call loses nothing: the next one waits for the same round.
    pub async fn next_row(&mut self) -> Result<Option<&RowBuf>, ShoalError> {
        loop {
            if self.next < self.filled {
                let i = self.next;
                self.next += 1;
                return Ok(Some(&self.rows[i]));
            }
            match &self.state {
                ScanState::Done => return Ok(None),
                ScanState::Failed(e) => return Err(e.clone()),
                ScanState::Open => self.fetch().await,
            }
        }
    }

    /// Every row not handed out yet, to the end of the scan, in one
    /// vector (it holds them all in memory: for tests and small tables).
    /// The scan stays, for [`Scan::rows_examined`].
    pub async fn collect_all(&mut self) -> Result<Vec<RowBuf>, ShoalError> {
        let mut all = Vec::new();
        loop {
            let round = self.next..self.filled;
            all.extend(self.rows[round].iter_mut().map(std::mem::take));
            self.next = self.filled;
            match &self.state {
                ScanState::Done => return Ok(all),
                ScanState::Failed(e) => return Err(e.clone()),
                ScanState::Open => self.fetch().await,
            }
        }
    }

    /// Ends the scan before its last row: asks the coordinator to close
    /// it and waits for the answer. `Ok` once the coordinator has
    /// forgotten the scan, or when the scan had already ended (whatever
    /// it ended with was returned by [`Scan::next_row`]).
    pub async fn close(mut self) -> Result<(), ShoalError> {
        if !matches!(self.state, ScanState::Open) {
            return Ok(());
        }
        // A round still on its way (a `next_row` was cancelled) is not
        // waited for: the close goes at once, and that round's answer, if
        // the coordinator sends it, is dropped on arrival.
        if let Some(slot) = self.in_flight.take() {
            self.conn.cancel(self.trans, slot);
        }
        let request = self.requests;
        let slot = match self.conn.scan_next(self.trans, request, true) {
            Ok(slot) => slot,
            Err(e) => {
                let e = self.in_scan(e);
                self.state = ScanState::Failed(e.clone());
                return Err(e);
            }
        };
        self.requests += 1;
        self.in_flight = Some(slot);
        // Forgotten by the coordinator once it answers: if this wait is
        // cancelled, dropping the scan sends no second close.
        self.state = ScanState::Done;
        let reply = self.wait(slot).await;
        let result = match reply {
            Ok(Reply::Scan(ScanReply::Conf(c))) if c.done => Ok(()),
            Ok(Reply::Scan(ScanReply::Conf(_))) => Err(ShoalError::with_detail(
                ErrorCode::ProtocolViolation,
                format!("data node answered close request {request} with more rows"),
            )),
            Ok(Reply::Scan(ScanReply::Ref(r))) if r.code == ErrorCode::ScanNotFound as u16 => {
                Ok(())
            }
            Ok(Reply::Scan(ScanReply::Ref(r))) => Err(from_wire(r.code, &r.detail)),
            Ok(other) => Err(unexpected(&other)),
            Err(e) => Err(e),
        };
        result.map_err(|e| {
            let e = self.in_scan(e);
            self.state = ScanState::Failed(e.clone());
            e
        })
    }

    /// Rows the data nodes looked at so far, including those the filter
    /// dropped.
    pub fn rows_examined(&self) -> u64 {
        self.examined
    }

    /// True once the scan has ended (its last round came, it was closed,
    /// or it failed): the coordinator holds nothing for it.
    pub fn is_done(&self) -> bool {
        !matches!(self.state, ScanState::Open)
    }

    /// The record the rows are laid out by.
    pub fn record(&self) -> &Record {
        &self.record
    }

    /// The scan's id on its coordinator's connection.
    pub fn id(&self) -> TransId {
        self.trans
    }

    /// Asks for the next round unless a request is in flight already,
    /// waits for the answer and takes it in. Called only while the scan
    /// is open and every row of the last round was taken.
    async fn fetch(&mut self) {
        let slot = match self.in_flight {
            Some(slot) => slot,
            None => match self.conn.scan_next(self.trans, self.requests, false) {
                Ok(slot) => {
                    self.requests += 1;
                    self.in_flight = Some(slot);
                    slot
                }
                // The connection is down: so is the scan on its node.
                Err(e) => return self.fail(e, false),
            },
        };
        let reply = self.wait(slot).await;
        self.take_answer(reply);
    }

    /// The answer in `slot`, the request in flight. Cancelled, it leaves
    /// the slot in `in_flight` for the next wait (or `Drop`).
    async fn wait(&mut self, slot: ReplySlot) -> ReplyResult {
        let conn = &self.conn;
        let reply = std::future::poll_fn(|cx| conn.poll_reply(slot, cx)).await;
        // The slot is free now.
        self.in_flight = None;
        reply
    }

    /// Applies the answer to the request `self.requests - 1`.
    fn take_answer(&mut self, reply: ReplyResult) {
        match reply {
            Ok(Reply::Scan(ScanReply::Conf(c))) => self.take_round(c),
            Ok(Reply::Scan(ScanReply::Ref(r))) => {
                let e = from_wire(r.code, &r.detail);
                if matches!(
                    e.code,
                    ErrorCode::NoSuchTable | ErrorCode::InvalidSchemaVersion
                ) {
                    if let Some(cluster) = &self.cluster {
                        cluster.invalidate_table(self.record.table().name());
                    }
                }
                self.fail(e, false);
            }
            Ok(other) => {
                let e = unexpected(&other);
                self.fail(e, true);
            }
            // A late answer may still come: the coordinator may hold the
            // scan. A lost connection took the scan with it.
            Err(e) => {
                let may_hold = e.code == ErrorCode::ReceiveTimeout;
                self.fail(e, may_hold);
            }
        }
    }

    /// Parses a round's rows into the row buffers, checking each.
    fn take_round(&mut self, conf: ScanTabConf) {
        self.examined = self.examined.saturating_add(conf.examined);
        self.filled = 0;
        self.next = 0;
        match fill_round(&mut self.rows, &self.record, &conf) {
            Ok(()) => {
                self.filled = conf.count as usize;
                if conf.done {
                    self.state = ScanState::Done;
                }
            }
            Err(what) => {
                let e = ShoalError::with_detail(
                    ErrorCode::ProtocolViolation,
                    format!("round {} of {} rows: {what}", conf.request, conf.count),
                );
                self.fail(e, !conf.done);
            }
        }
    }

    /// Ends the scan with `e`; `close` when the coordinator may still hold
    /// it (it is then asked to close it, without waiting).
    fn fail(&mut self, e: ShoalError, close: bool) {
        if close {
            self.conn.send_scan_close(self.trans, self.requests);
            self.requests += 1;
        }
        self.filled = 0;
        self.next = 0;
        self.state = ScanState::Failed(self.in_scan(e));
    }

    /// `e` with the scan named in its detail.
    fn in_scan(&self, mut e: ShoalError) -> ShoalError {
        let at = format!(
            "scan {} of table {:?} on data node {}",
            self.trans,
            self.record.table().name(),
            self.conn.node_id()
        );
        e.detail = if e.detail.is_empty() {
            at
        } else {
            format!("{at}: {}", e.detail)
        };
        e
    }
}

impl Drop for Scan {
    fn drop(&mut self) {
        if let Some(slot) = self.in_flight.take() {
            self.conn.cancel(self.trans, slot);
        }
        if matches!(self.state, ScanState::Open) {
            self.conn.send_scan_close(self.trans, self.requests);
        }
    }
}

/// Fills `rows[..conf.count]` from a round's attribute lists, growing
/// `rows` as needed. Errors say what was wrong: a list that does not
/// parse or does not fit the record (a column it lacks, one missing, a
/// bad value), fewer lists than `count`, bytes after the last one.
fn fill_round(rows: &mut Vec<RowBuf>, record: &Record, conf: &ScanTabConf) -> Result<(), String> {
    let count = conf.count as usize;
    // The wire decoder checked that `count` lists can fit in `rows`' bytes
    // (each takes at least two), so this is bounded by a frame.
    if rows.len() < count {
        rows.resize_with(count, RowBuf::new);
    }
    let mut rest = &conf.rows[..];
    for (i, row) in rows[..count].iter_mut().enumerate() {
        let used = row
            .fill_front(record, rest)
            .map_err(|what| format!("row {i}: {what}"))?;
        rest = &rest[used..];
    }
    if !rest.is_empty() {
        return Err(format!("{} bytes after the last row", rest.len()));
    }
    Ok(())
}

/// The error of an answer of the wrong kind for a scan.
fn unexpected(reply: &Reply) -> ShoalError {
    let kind = match reply {
        Reply::Conf(_) => "a TcKeyConf",
        Reply::Ref(_) => "a TcKeyRef",
        Reply::TakenOver { .. } => "a takeover report",
        Reply::Rows(_) => "a FragmentRowsConf",
        Reply::Scan(_) => "a scan's answer",
    };
    ShoalError::with_detail(
        ErrorCode::ProtocolViolation,
        format!("data node answered a scan's request with {kind}"),
    )
}

#[cfg(test)]
mod tests;

mod locking;
pub use locking::{LockingScan, LOCK_BATCH_ROWS_MAX};
