//! TC: the scans clients run through this node (NDB's SCAN_TABREQ and its
//! DBTC scan records), committed read. A scan asks the fragments'
//! primaries (or, for a read-from-backup table, a local replica) for
//! batches of rows from a row-id cursor per fragment, gathers one round of
//! batches and hands it to the client in one `ScanTabConf`; the client's
//! `ScanNextReq` starts the next round. docs/PROTOCOL.md §12.
//!
//! Invariants:
//! - Scan records are bounded by `max_concurrent_scans`; a round's rows by
//!   `max_answer_bytes` (at most `parallel` fragments asked, each for a
//!   share of half the answer plus at most one row past it).
//! - A scan routes every batch of a fragment by the distribution version
//!   it began with: if the fragment's replicas change (a node failed, a
//!   restarted one took over), the scan ends with a temporary error
//!   instead of going on somewhere else — never rows presented as
//!   complete that are not.
//! - At most one round is in flight per scan, and a fragment is asked for
//!   at most one batch at a time; answers of a scan that ended, or for a
//!   fragment not asked, are dropped.

use super::scan_merge::Buffered;
use super::Tc;
use crate::dih::Dih;
use crate::node::{ConnId, Output};
use crate::signal::{first_txn_ref, BlockSignal, ClusterSignal, TxnRef};
use shoal_types::distribution::FragmentId;
use shoal_types::filter::Filter;
use shoal_types::schema::{COLUMNS_MAX, INDEX_KEY_BYTES_MAX, ROW_BYTES_MAX};
use shoal_types::{ErrorCode, SchemaVersion, ShoalError, TableId, TransId};
use shoal_wire::node::{ScanCursor, ScanSignal};
use shoal_wire::scan::{decode_bounds, SCAN_DESCENDING, SCAN_NO_INDEX, SCAN_ORDERED};
use shoal_wire::{LockMode, ScanNextReq, ScanTabConf, ScanTabRef, ScanTabReq, Signal};
use std::collections::{BTreeMap, VecDeque};

/// The most one row's attribute list takes in an answer: a header per
/// column plus the row's bytes.
const ROW_ANSWER_BYTES_MAX: usize = 2 + 4 * COLUMNS_MAX + ROW_BYTES_MAX;
/// What a batch may bring past its share of bytes: one row, with its
/// index key and the two lengths framing them (an ordered scan's).
const BATCH_OVERSHOOT_BYTES_MAX: usize = ROW_ANSWER_BYTES_MAX + 2 + INDEX_KEY_BYTES_MAX + 4;
/// The longest read list a scan may carry (every column named once).
const COLUMNS_BYTES_MAX: usize = 2 + 2 * COLUMNS_MAX;
/// Bytes of a `ScanTabConf` before its rows.
const CONF_FIXED_BYTES: usize = 32;

/// One fragment's place in a scan.
struct FragCursor {
    frag: FragmentId,
    /// The replica asked, and the distribution version that route is of.
    node: u16,
    version: u32,
    next: ScanCursor,
    done: bool,
    /// An ordered scan's rows of it not handed out yet (index order).
    buffered: Buffered,
    /// A batch is asked of it and not answered yet.
    asked: bool,
    /// The number of its latest batch asked (answers echo it).
    batch: u32,
}

struct ScanRec {
    conn: ConnId,
    trans: TransId,
    /// The client request being answered (0: the `ScanTabReq`).
    request: u32,
    table: TableId,
    version: SchemaVersion,
    columns: Vec<u8>,
    filter: Vec<u8>,
    index: u16,
    flags: u8,
    bounds: Vec<u8>,
    frags: Vec<FragCursor>,
    /// Fragments asked per round, at most, and where the next round
    /// starts looking for unfinished ones.
    parallel: usize,
    next_pick: usize,
    rows_per_frag: u32,
    bytes_per_frag: u32,
    /// Batches asked and not answered in this round.
    outstanding: usize,
    rows: Vec<u8>,
    count: u32,
    examined: u64,
    /// The round was answered; the client's next request is awaited.
    with_client: bool,
    /// It failed while the client held a round: the next request hears it.
    failed: Option<ShoalError>,
}

/// The scans this node coordinates.
pub(super) struct Scans {
    recs: BTreeMap<TxnRef, ScanRec>,
    by_client: BTreeMap<(ConnId, TransId), TxnRef>,
    next: TxnRef,
}

impl Scans {
    /// Scan numbers are unique in the cluster (node and start in the top
    /// bits, as transaction handles): answers meant for a failed node's
    /// scans, redirected to the node taking it over, match none of its
    /// own.
    pub(super) fn new(node: u16, incarnation: u32) -> Scans {
        Scans {
            recs: BTreeMap::new(),
            by_client: BTreeMap::new(),
            next: first_txn_ref(node, incarnation),
        }
    }

    pub(super) fn len(&self) -> usize {
        self.recs.len()
    }
}

impl Tc {
    /// Scans this node coordinates.
    pub(crate) fn scan_count(&self) -> usize {
        self.scans.len()
    }
}

fn scan_ref(trans: TransId, request: u32, e: &ShoalError) -> Signal {
    Signal::ScanTabRef(ScanTabRef {
        trans,
        request,
        code: e.code as u16,
        detail: e.detail.clone(),
    })
}

fn error(code: ErrorCode, detail: impl Into<String>) -> ShoalError {
    ShoalError::with_detail(code, detail)
}

impl Tc {
    /// A client's `ScanTabReq`: checks it, then asks the first round.
    pub(crate) fn scan_req(
        &mut self,
        conn: ConnId,
        req: ScanTabReq,
        dih: &Dih,
        started: bool,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let (trans, request) = (req.trans, 0);
        match self.open_scan(conn, req, dih, started) {
            Ok(scan) => self.ask_round(scan, dih, q, out),
            Err(e) => out.push(Output::Send {
                conn,
                signal: scan_ref(trans, request, &e),
            }),
        }
    }

    fn open_scan(
        &mut self,
        conn: ConnId,
        req: ScanTabReq,
        dih: &Dih,
        started: bool,
    ) -> Result<TxnRef, ShoalError> {
        if !started {
            return Err(error(
                ErrorCode::NodeNotReady,
                "this data node is not started (or still restoring its rows); retry",
            ));
        }
        if self.scans.by_client.contains_key(&(conn, req.trans)) {
            return Err(error(
                ErrorCode::BadRequest,
                format!("scan id {:?} is in use by an open scan", req.trans),
            ));
        }
        if req.lock != LockMode::CommittedRead {
            return Err(error(
                ErrorCode::BadRequest,
                format!(
                    "{:?} scans are run by the client (a committed-read scan, then locking key reads in the transaction: ScanBuilder::open_locking); a data node scans with CommittedRead",
                    req.lock
                ),
            ));
        }
        if self.scans.len() >= self.cfg.max_concurrent_scans {
            return Err(error(
                ErrorCode::TooManyScans,
                format!(
                    "data node {} runs {} scans already (max_concurrent_scans = {}); close scans or retry",
                    self.cfg.node_id,
                    self.scans.len(),
                    self.cfg.max_concurrent_scans
                ),
            ));
        }
        if req.columns.len() > COLUMNS_BYTES_MAX {
            return Err(error(
                ErrorCode::RequestTooLarge,
                format!(
                    "a column list of {} bytes; at most {COLUMNS_BYTES_MAX}",
                    req.columns.len()
                ),
            ));
        }
        let Some(route) = dih.table(req.table) else {
            return Err(error(
                ErrorCode::NoSuchTable,
                format!("table id {} is not known to this node", req.table),
            ));
        };
        let def = &route.layout.table;
        if def.version != req.version {
            return Err(error(
                ErrorCode::InvalidSchemaVersion,
                format!(
                    "table {:?} is at version {}, the scan used version {}",
                    def.name, def.version, req.version
                ),
            ));
        }
        // Checked here once, so a bad program fails before any fragment
        // is asked (each replica checks it again: it trusts no peer).
        Filter::verify(&req.filter, def)?;
        if req.index == SCAN_NO_INDEX {
            if req.flags != 0 || !req.bounds.is_empty() {
                return Err(error(
                    ErrorCode::BadRequest,
                    "order, direction and bounds need an index to scan",
                ));
            }
        } else {
            if def
                .indexes
                .get(usize::from(req.index))
                .is_none_or(|i| i.dropped)
            {
                return Err(error(
                    ErrorCode::BadRequest,
                    format!(
                        "table {:?} has no ordered index number {} (dropped, or never made; it has {} numbers)",
                        def.name,
                        req.index,
                        def.indexes.len()
                    ),
                ));
            }
            decode_bounds(&req.bounds)
                .map_err(|e| error(ErrorCode::BadRequest, format!("malformed scan bounds: {e}")))?;
        }
        // Bounds that fix the distribution key name the fragments to ask.
        let pruned = if req.index == SCAN_NO_INDEX || req.bounds.is_empty() {
            None
        } else {
            let ranges = decode_bounds(&req.bounds).expect("checked above");
            super::scan_prune::fragments_of_ranges(route, def, usize::from(req.index), &ranges)
        };
        let own = self.cfg.node_id;
        let mut frags = Vec::with_capacity(route.frags.len());
        for (i, f) in route.frags.iter().enumerate() {
            let frag = i as FragmentId;
            if pruned.as_ref().is_some_and(|p| !p.contains(&frag)) {
                continue;
            }
            let Some(chain) = route.committed_read_chain(frag, own) else {
                return Err(error(
                    ErrorCode::NodeFailed,
                    format!(
                        "fragment {frag} of table {:?} has no live replica (its node group is down)",
                        def.name
                    ),
                ));
            };
            frags.push(FragCursor {
                frag,
                node: chain[0],
                version: f.version,
                next: ScanCursor::default(),
                done: false,
                buffered: Buffered::default(),
                asked: false,
                batch: 0,
            });
        }
        // Half an answer for the rows asked, the other half for the one
        // row each batch may bring past its share.
        let half = self.cfg.max_answer_bytes.saturating_sub(CONF_FIXED_BYTES) / 2;
        // An ordered scan merges every fragment's stream, so it asks them
        // all each round (its answer is bounded when merged instead).
        let parallel = if req.flags & SCAN_ORDERED != 0 {
            frags.len().max(1)
        } else {
            frags.len().clamp(1, (half / ROW_ANSWER_BYTES_MAX).max(1))
        };
        let budget = (req.batch_bytes as usize).clamp(1, half.max(1));
        let scan = self.scans.next;
        self.scans.next += 1;
        self.scans.by_client.insert((conn, req.trans), scan);
        self.scans.recs.insert(
            scan,
            ScanRec {
                conn,
                trans: req.trans,
                request: 0,
                table: req.table,
                version: req.version,
                columns: req.columns,
                filter: req.filter,
                index: req.index,
                flags: req.flags,
                bounds: req.bounds,
                frags,
                parallel,
                next_pick: 0,
                rows_per_frag: (req.batch_rows.max(1) / parallel as u32).max(1),
                bytes_per_frag: (budget / parallel).max(1) as u32,
                outstanding: 0,
                rows: Vec::new(),
                count: 0,
                examined: 0,
                with_client: false,
                failed: None,
            },
        );
        Ok(scan)
    }

    /// Asks the next round's batches (or takes it in at once if every
    /// fragment is done or has rows waiting).
    fn ask_round(
        &mut self,
        scan: TxnRef,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let Some(rec) = self.scans.recs.get_mut(&scan) else {
            return;
        };
        assert_eq!(rec.outstanding, 0, "a round asked while one is out");
        rec.with_client = false;
        match ask_waiting(self.cfg.node_id, scan, rec, dih, q) {
            Err(e) => self.end_scan(scan, Some(e), out),
            // Every fragment is done, or has rows waiting to be merged.
            Ok(0) => self.round_in(scan, dih, q, out),
            Ok(_) => {}
        }
    }

    /// A `ScanFragConf` or `ScanFragRef` came.
    pub(super) fn scan_answer(
        &mut self,
        sig: ScanSignal,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let (scan, frag, batch) = match &sig {
            ScanSignal::FragConf {
                scan, frag, batch, ..
            }
            | ScanSignal::FragRef {
                scan, frag, batch, ..
            } => (*scan, *frag, *batch),
            ScanSignal::FragReq { .. } => return,
        };
        let max_answer = self.cfg.max_answer_bytes;
        let Some(rec) = self.scans.recs.get_mut(&scan) else {
            return; // Ended (failed, closed, client gone): late answers drop.
        };
        // A repeat of an answer, or one to a repeated request, finds its
        // batch answered already.
        let Some(i) = rec
            .frags
            .iter()
            .position(|f| f.frag == frag && f.asked && f.batch == batch)
        else {
            return;
        };
        rec.frags[i].asked = false;
        match sig {
            ScanSignal::FragConf {
                next,
                examined,
                count,
                rows,
                ..
            } => {
                let ordered = rec.flags & SCAN_ORDERED != 0;
                // A batch is its share of bytes plus at most one row (with
                // its key): a plain round is then within one answer by the
                // choice of `parallel`, and an ordered scan holds at most
                // that per fragment (merged into answers of one frame).
                let batch_max = rec.bytes_per_frag as usize + BATCH_OVERSHOOT_BYTES_MAX;
                let round_over =
                    !ordered && rec.rows.len() + rows.len() + CONF_FIXED_BYTES > max_answer;
                if rows.len() > batch_max || round_over {
                    // Only a replica breaking its bounds gets here.
                    let e = error(
                        ErrorCode::Internal,
                        format!(
                            "fragment {frag}: a batch of {} bytes is over its bound ({batch_max} bytes, or the round's answer)",
                            rows.len()
                        ),
                    );
                    return self.end_scan(scan, Some(e), out);
                }
                if ordered {
                    if let Err(e) = rec.frags[i].buffered.take(rows, count) {
                        let e = error(
                            ErrorCode::Internal,
                            format!("fragment {frag}: a malformed ordered batch: {e}"),
                        );
                        return self.end_scan(scan, Some(e), out);
                    }
                } else {
                    rec.rows.extend_from_slice(&rows);
                    rec.count += count;
                }
                rec.examined += u64::from(examined);
                let cursor = &mut rec.frags[i];
                cursor.done = next.is_end();
                cursor.next = next;
                if count == 0 && !cursor.done {
                    // Its batch looked at its most rows and kept none: ask
                    // on, so a round brings rows or the end.
                    if let Err(e) = route_still_holds(rec, i, dih) {
                        return self.end_scan(scan, Some(e), out);
                    }
                    return ask_batch(self.cfg.node_id, scan, rec, i, q);
                }
                rec.outstanding -= 1;
                if rec.outstanding == 0 {
                    self.round_in(scan, dih, q, out);
                }
            }
            ScanSignal::FragRef { code, detail, .. } => {
                let node = rec.frags[i].node;
                let code = ErrorCode::from_u16(code).unwrap_or(ErrorCode::Internal);
                let e = error(
                    code,
                    format!("fragment {frag} on data node {node}: {detail}"),
                );
                self.end_scan(scan, Some(e), out);
            }
            ScanSignal::FragReq { .. } => unreachable!("matched above"),
        }
    }

    /// Every batch asked for the round is in. An ordered scan merges what
    /// it holds; if the merge stopped early, at a fragment with no rows
    /// waiting, it asks that fragment on before answering, so the client
    /// is not sent a round of a row or two and made to come back (a
    /// round trip each) — with two fragments of a window, every other
    /// round would be one. The rows held stay within one batch per
    /// fragment: only fragments with none waiting are asked.
    fn round_in(
        &mut self,
        scan: TxnRef,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let max_answer = self.cfg.max_answer_bytes.saturating_sub(CONF_FIXED_BYTES);
        let rec = self
            .scans
            .recs
            .get_mut(&scan)
            .expect("scan with a round in");
        if rec.flags & SCAN_ORDERED != 0 {
            let descending = rec.flags & SCAN_DESCENDING != 0;
            let mut streams: Vec<(bool, &mut Buffered)> = rec
                .frags
                .iter_mut()
                .map(|f| (f.done, &mut f.buffered))
                .collect();
            rec.count +=
                super::scan_merge::merge(&mut streams, descending, max_answer, &mut rec.rows);
            let short = rec.count < rec.rows_per_frag && rec.rows.len() < max_answer / 2;
            if short {
                match ask_waiting(self.cfg.node_id, scan, rec, dih, q) {
                    Err(e) => return self.end_scan(scan, Some(e), out),
                    Ok(0) => {}
                    Ok(_) => return,
                }
            }
        }
        self.answer_round(scan, out);
    }

    /// Sends the round's rows to the client; the scan ends with them if
    /// every fragment is done.
    fn answer_round(&mut self, scan: TxnRef, out: &mut Vec<Output>) {
        let rec = self.scans.recs.get_mut(&scan).expect("answered scan");
        let done = rec.frags.iter().all(|f| f.done && f.buffered.is_empty());
        let conf = ScanTabConf {
            trans: rec.trans,
            request: rec.request,
            done,
            examined: std::mem::take(&mut rec.examined),
            count: std::mem::take(&mut rec.count),
            rows: std::mem::take(&mut rec.rows),
        };
        out.push(Output::Send {
            conn: rec.conn,
            signal: Signal::ScanTabConf(conf),
        });
        if done {
            self.forget_scan(scan);
        } else {
            rec.with_client = true;
        }
    }

    /// A client's `ScanNextReq`: the next round, or the end.
    pub(crate) fn scan_next(
        &mut self,
        conn: ConnId,
        req: ScanNextReq,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let reply = |signal| Output::Send { conn, signal };
        let Some(&scan) = self.scans.by_client.get(&(conn, req.trans)) else {
            if req.close {
                // Closing a scan that ended already is no error.
                return out.push(reply(Signal::ScanTabConf(ScanTabConf {
                    trans: req.trans,
                    request: req.request,
                    done: true,
                    examined: 0,
                    count: 0,
                    rows: Vec::new(),
                })));
            }
            let e = error(
                ErrorCode::ScanNotFound,
                format!("scan {:?} is not open on this node", req.trans),
            );
            return out.push(reply(scan_ref(req.trans, req.request, &e)));
        };
        let rec = self.scans.recs.get_mut(&scan).expect("listed scan");
        if req.close {
            // Any time, a round in flight too (the client dropped the scan
            // while waiting): its answers are dropped when they come.
            rec.request = req.request;
            rec.rows.clear();
            rec.count = 0;
            rec.examined = 0;
            for f in &mut rec.frags {
                f.done = true;
                f.buffered = Buffered::default();
            }
            rec.outstanding = 0;
            return self.answer_round(scan, out);
        }
        if !rec.with_client || req.request != rec.request.wrapping_add(1) {
            let e = error(
                ErrorCode::BadRequest,
                format!(
                    "ScanNextReq {} while request {} of the scan is {}; the scan is ended",
                    req.request,
                    rec.request,
                    if rec.with_client {
                        "answered"
                    } else {
                        "in progress"
                    }
                ),
            );
            rec.request = req.request;
            return self.end_scan(scan, Some(e), out);
        }
        rec.request = req.request;
        if let Some(e) = rec.failed.take() {
            return self.end_scan(scan, Some(e), out);
        }
        self.ask_round(scan, dih, q, out)
    }

    /// Ends a scan: the client hears `error` (if any) for its current
    /// request.
    fn end_scan(&mut self, scan: TxnRef, error: Option<ShoalError>, out: &mut Vec<Output>) {
        let Some(rec) = self.forget_scan(scan) else {
            return;
        };
        if let Some(e) = error {
            out.push(Output::Send {
                conn: rec.conn,
                signal: scan_ref(rec.trans, rec.request, &e),
            });
        }
    }

    fn forget_scan(&mut self, scan: TxnRef) -> Option<ScanRec> {
        let rec = self.scans.recs.remove(&scan)?;
        self.scans.by_client.remove(&(rec.conn, rec.trans));
        Some(rec)
    }

    /// The client's connection closed: its scans end.
    pub(super) fn scans_client_gone(&mut self, conn: ConnId) {
        let gone: Vec<TxnRef> = self
            .scans
            .by_client
            .range((conn, TransId(0))..=(conn, TransId(u64::MAX)))
            .map(|(_, &s)| s)
            .collect();
        for scan in gone {
            self.forget_scan(scan);
        }
    }

    /// Data nodes failed: every scan with a fragment left on one of them
    /// fails (with the round in flight, or with the client's next
    /// request).
    pub(super) fn scans_nodes_failed(&mut self, failed: &[u16], out: &mut Vec<Output>) {
        let hit: Vec<(TxnRef, u16)> = self
            .scans
            .recs
            .iter()
            .filter_map(|(&scan, rec)| {
                rec.frags
                    .iter()
                    .find(|f| !f.done && failed.contains(&f.node))
                    .map(|f| (scan, f.node))
            })
            .collect();
        for (scan, node) in hit {
            let e = error(
                ErrorCode::NodeFailed,
                format!("data node {node}, holding a fragment the scan had not finished, failed; retry the scan"),
            );
            let rec = self.scans.recs.get_mut(&scan).expect("listed scan");
            if rec.with_client {
                rec.failed = Some(e);
            } else {
                self.end_scan(scan, Some(e), out);
            }
        }
    }
}

/// The replica the scan reads fragment `i` from is still a ready replica
/// of it; the route's distribution version is brought up to date (a
/// change elsewhere in the fragment's replicas, such as a backup failing
/// or a restarted one being copied, leaves this replica's rows whole).
fn route_still_holds(rec: &mut ScanRec, i: usize, dih: &Dih) -> Result<(), ShoalError> {
    let f = &mut rec.frags[i];
    match dih.frag(rec.table, f.frag) {
        Some(now) if now.is_ready(f.node) => {
            f.version = now.version;
            Ok(())
        }
        Some(_) => Err(error(
            ErrorCode::DistributionChanged,
            format!(
                "fragment {} lost its replica on data node {} during the scan; retry the scan",
                f.frag, f.node
            ),
        )),
        None => Err(error(
            ErrorCode::NoSuchTable,
            format!("table id {} was dropped during the scan", rec.table),
        )),
    }
}

/// Asks the fragments not done and with no rows waiting for their next
/// batches, at most `parallel` of them, starting where the last round
/// stopped looking; returns how many were asked.
fn ask_waiting(
    own: u16,
    scan: TxnRef,
    rec: &mut ScanRec,
    dih: &Dih,
    q: &mut VecDeque<BlockSignal>,
) -> Result<usize, ShoalError> {
    let n = rec.frags.len();
    let mut asked = 0;
    let mut looked = 0;
    while asked < rec.parallel && looked < n {
        let i = (rec.next_pick + looked) % n;
        looked += 1;
        if rec.frags[i].done || !rec.frags[i].buffered.is_empty() {
            continue;
        }
        route_still_holds(rec, i, dih)?;
        ask_batch(own, scan, rec, i, q);
        rec.outstanding += 1;
        asked += 1;
    }
    rec.next_pick = (rec.next_pick + looked) % n.max(1);
    Ok(asked)
}

/// Asks fragment `i` of the scan for its next batch.
fn ask_batch(own: u16, scan: TxnRef, rec: &mut ScanRec, i: usize, q: &mut VecDeque<BlockSignal>) {
    let f = &mut rec.frags[i];
    debug_assert!(!f.asked && !f.done, "fragment {} asked twice", f.frag);
    f.asked = true;
    f.batch = f.batch.wrapping_add(1);
    q.push_back(BlockSignal::from(ClusterSignal::Scan(
        ScanSignal::FragReq {
            to: f.node,
            scan,
            tc: own,
            table: rec.table,
            version: rec.version,
            frag: f.frag,
            batch: f.batch,
            frag_version: f.version,
            index: rec.index,
            flags: rec.flags,
            bounds: rec.bounds.clone(),
            from: f.next.clone(),
            max_rows: rec.rows_per_frag,
            max_bytes: rec.bytes_per_frag,
            columns: rec.columns.clone(),
            filter: rec.filter.clone(),
        },
    )));
}
