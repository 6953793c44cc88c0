//! Simulated scans (`--scans`): each client keeps one committed-read scan
//! of the table going beside its transactions, with a random filter, batch
//! size and early close, over a random one of its connections; the checks
//! hold every scan to what a committed read promises (PROTOCOL.md §12):
//!
//! - every row it returns is an image its key held at some point while
//!   the scan ran, and one the filter keeps;
//! - no key that no commit touched while the scan ran comes twice (one
//!   deleted and inserted again may: it has a new row id);
//! - a scan read to its end misses no row that was there, whole on every
//!   replica, when it began and that no commit touched until it ended
//!   (if the filter keeps it);
//! - a scan that fails does so with a temporary error (a node failed, a
//!   replica moved, too many scans), never a permanent one.

use rand::Rng;
use shoal_kernel::ConnId;
use shoal_types::filter::{CmpOp, FilterExpr};
use shoal_types::index_key::encode_key;
use shoal_types::value::decode_value;
use shoal_types::{AttrSlice, ErrorClass, ErrorCode, TransId, Value};
use shoal_wire::scan::{encode_bounds, KeyRange, SCAN_DESCENDING, SCAN_NO_INDEX, SCAN_ORDERED};
use shoal_wire::{LockMode, ScanNextReq, ScanTabConf, ScanTabReq, Signal, ALL_COLUMNS};
use std::collections::BTreeSet;

use super::net::random_delay;
use super::{Event, Lane, World, TABLE, VERSION};
use crate::model::Row;

/// A range of an index scan: (bound, inclusive) at each end.
type OwnedRange = (Option<(Vec<u8>, bool)>, Option<(Vec<u8>, bool)>);

/// What an index scan asked.
pub(super) struct IndexScan {
    index: u16,
    ranges: Vec<OwnedRange>,
    ordered: bool,
    descending: bool,
    /// The key of the last row returned (an ordered scan's come in order).
    last_key: Option<Vec<u8>>,
}

impl IndexScan {
    fn in_ranges(&self, key: &[u8]) -> bool {
        self.ranges.iter().any(|(low, high)| {
            let r = KeyRange {
                low: low.as_ref().map(|(b, i)| (&b[..], *i)),
                high: high.as_ref().map(|(b, i)| (&b[..], *i)),
            };
            r.above_low(key) && r.below_high(key)
        })
    }
}

/// One scan a client runs.
pub(super) struct SimScan {
    client: usize,
    conn: ConnId,
    trans: TransId,
    /// The request awaited (0: the `ScanTabReq`).
    request: u32,
    filter: FilterExpr,
    /// Every commit up to this one was whole on every replica when the
    /// scan was sent.
    since: u64,
    seen: BTreeSet<u32>,
    /// Close after this many rounds (`None`: read to the end).
    close_after: Option<u32>,
    rounds: u32,
    closing: bool,
    /// An index scan's index, ranges and order (`None`: the table).
    index: Option<IndexScan>,
}

impl World {
    /// Each client's first scan, a little after the load begins, and an
    /// index added while the load runs.
    pub(super) fn start_scans(&mut self) {
        if !self.opts.scans {
            return;
        }
        // From the seed, not the RNG: somewhere in the first seconds.
        let at = self.now + 200 + self.opts.seed % 3000;
        self.schedule(at, Event::AddIndex);
        for client in 0..self.clients.len() {
            let at = self.now + 1 + random_delay(&mut self.rng, 100);
            self.schedule(at, Event::ScanStart { client });
        }
    }

    /// A client begins a scan on one of its connections (or tries again
    /// later if it has none).
    pub(super) fn scan_start(&mut self, client: usize) -> Result<(), String> {
        if self.done() {
            return Ok(());
        }
        let conns: Vec<ConnId> = self.clients[client]
            .conns
            .values()
            .copied()
            .filter(|c| self.conns[c].open)
            .collect();
        if conns.is_empty() {
            let at = self.now + 10 + random_delay(&mut self.rng, 50);
            self.schedule(at, Event::ScanStart { client });
            return Ok(());
        }
        let conn = conns[self.rng.random_range(0..conns.len())];
        let trans = TransId(self.next_trans_id);
        self.next_trans_id += 1;
        let filter = if self.rng.random_bool(0.3) {
            FilterExpr::True
        } else {
            self.random_filter(3)
        };
        let program = if filter == FilterExpr::True {
            Vec::new()
        } else {
            filter
                .compile(&self.def)
                .map_err(|e| format!("the simulator built a filter the table refuses: {e}"))?
        };
        let batch_rows = [1, 3, 16, 1000][self.rng.random_range(0..4)];
        let batch_bytes = [1, 200, 4096, 1 << 20][self.rng.random_range(0..4)];
        let close_after = self
            .rng
            .random_bool(0.15)
            .then(|| self.rng.random_range(0..4));
        let index = self
            .rng
            .random_bool(0.5)
            .then(|| self.random_index_scan())
            .transpose()?;
        let (index_no, flags, bounds) = match &index {
            None => (SCAN_NO_INDEX, 0, Vec::new()),
            Some(ix) => {
                let ranges: Vec<KeyRange> = ix
                    .ranges
                    .iter()
                    .map(|(low, high)| KeyRange {
                        low: low.as_ref().map(|(b, i)| (&b[..], *i)),
                        high: high.as_ref().map(|(b, i)| (&b[..], *i)),
                    })
                    .collect();
                let mut bounds = Vec::new();
                if !(ranges.len() == 1 && ranges[0] == KeyRange::ALL) || self.rng.random_bool(0.5) {
                    encode_bounds(&ranges, &mut bounds);
                }
                let flags = if ix.ordered { SCAN_ORDERED } else { 0 }
                    | if ix.descending { SCAN_DESCENDING } else { 0 };
                (ix.index, flags, bounds)
            }
        };
        // Commits still in progress may not be whole on every replica yet.
        let since = self
            .in_progress
            .values()
            .map(|&s| s - 1)
            .fold(self.model.seq(), u64::min);
        self.scans.insert(
            (conn, trans),
            SimScan {
                client,
                conn,
                trans,
                request: 0,
                filter,
                since,
                seen: BTreeSet::new(),
                close_after,
                rounds: 0,
                closing: false,
                index,
            },
        );
        self.report.scans += 1;
        if self.trace {
            eprintln!(
                "{:>8} ms client {client} conn {conn} scan {} begins after commit #{since}: index {index_no} flags {flags} bounds {bounds:?} batch {batch_rows} rows {batch_bytes} bytes",
                self.now, trans.0
            );
        }
        let signal = Signal::ScanTabReq(ScanTabReq {
            trans,
            table: TABLE,
            version: VERSION,
            lock: LockMode::CommittedRead,
            flags,
            index: index_no,
            bounds,
            batch_rows,
            batch_bytes,
            columns: ALL_COLUMNS.to_le_bytes().to_vec(),
            filter: program,
        });
        self.send(Lane::ToNode(conn), Event::ScanToNode { conn, signal });
        Ok(())
    }

    /// A random index scan: an index of the table (`PRIMARY` on `k`,
    /// `by_v`, `by_s_v`), one to three disjoint ranges in ascending order
    /// (or the whole index), ordered or not, either direction.
    fn random_index_scan(&mut self) -> Result<IndexScan, String> {
        let index = self.rng.random_range(0..self.def.indexes.len()) as u16;
        let columns = self.def.indexes[index as usize].columns.clone();
        let first = columns[0];
        // Ascending points on the first column, then ranges between them.
        let mut points: Vec<Value> = (0..self.rng.random_range(0..=6))
            .map(|_| match first {
                0 => Value::UInt(u64::from(self.rng.random_range(0..self.load.keys))),
                1 => Value::Int(self.rng.random_range(-1000..1000)),
                _ => match self.rng.random_range(0..4) {
                    0 => Value::Null,
                    1 => Value::Str(String::new()),
                    2 => Value::Str("m".into()),
                    _ => Value::Str(((b'a' + self.rng.random_range(0..26u8)) as char).to_string()),
                },
            })
            .collect();
        let mut keyed: Vec<(Vec<u8>, Value)> = Vec::new();
        for v in points.drain(..) {
            let mut key = Vec::new();
            encode_key(&self.def, &columns[..1], std::slice::from_ref(&v), &mut key)
                .map_err(|e| format!("the simulator built a bound the index refuses: {e}"))?;
            keyed.push((key, v));
        }
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        keyed.dedup_by(|a, b| a.0 == b.0);
        let bounds: Vec<Vec<u8>> = keyed.into_iter().map(|(k, _)| k).collect();
        let mut ranges: Vec<OwnedRange> = Vec::new();
        if !bounds.is_empty() && self.rng.random_bool(0.3) {
            // Points: an equality per bound (on the primary key's index,
            // the coordinator asks only the fragments they hash to).
            ranges = bounds
                .iter()
                .map(|b| (Some((b.clone(), true)), Some((b.clone(), true))))
                .collect();
        }
        let mut i = if ranges.is_empty() { 0 } else { bounds.len() };
        // Pairs of points: [a, b] with either end open, none overlapping
        // (b < next a, since the points are distinct and sorted).
        while i + 1 < bounds.len() && ranges.len() < 3 {
            // Only the first range may be open below, and only the last
            // above: the ranges stay disjoint.
            let low = (i > 0 || self.rng.random_bool(0.7))
                .then(|| (bounds[i].clone(), self.rng.random_bool(0.5)));
            let high = (self.rng.random_bool(0.8) || i + 2 < bounds.len())
                .then(|| (bounds[i + 1].clone(), self.rng.random_bool(0.5)));
            ranges.push((low, high));
            i += 2;
            if ranges.last().is_some_and(|r| r.1.is_none()) {
                break;
            }
        }
        if ranges.is_empty() {
            if let Some(point) = bounds.first() {
                // An equality on the first column.
                ranges.push((Some((point.clone(), true)), Some((point.clone(), true))));
            } else {
                ranges.push((None, None));
            }
        }
        Ok(IndexScan {
            index,
            ranges,
            ordered: self.rng.random_bool(0.5),
            descending: self.rng.random_bool(0.5),
            last_key: None,
        })
    }

    /// mgmd adds an ordered index on (`v`, `k`) to the table, as every
    /// node hears it (a node down now creates the table with it when it
    /// starts). Each node builds it over its next ticks while writes go
    /// on; scans of it are refused (temporarily) until built there.
    pub(super) fn add_index(&mut self) -> Result<(), String> {
        let def = self
            .def
            .clone()
            .with_index("by_v_k", &["v", "k"])
            .map_err(|e| format!("the simulator's index is refused: {e}"))?;
        self.def = def;
        self.report.indexes_added += 1;
        for id in 1..=self.opts.data_nodes {
            let def = self.def.clone();
            let Some(n) = self.node_mut(id) else {
                continue;
            };
            n.alter_indexes(&def)
                .map_err(|e| format!("node {id} refused an index change: {e}"))?;
        }
        Ok(())
    }

    /// A random filter over the table's columns `k`, `v`, `s`.
    fn random_filter(&mut self, depth: u32) -> FilterExpr {
        let ops = CmpOp::ALL;
        let op = ops[self.rng.random_range(0..ops.len())];
        let leaf = depth == 0 || self.rng.random_bool(0.5);
        if leaf {
            return match self.rng.random_range(0..7) {
                0 => FilterExpr::Cmp {
                    col: 0,
                    op,
                    value: Value::UInt(u64::from(self.rng.random_range(0..self.load.keys))),
                },
                1 | 2 => FilterExpr::Cmp {
                    col: 1,
                    op,
                    value: Value::Int(self.rng.random_range(-1000..1000)),
                },
                3 => FilterExpr::Cmp {
                    col: 2,
                    op,
                    value: Value::Str(
                        ["", "a", "m", "zz", "kq"][self.rng.random_range(0..5)].to_string(),
                    ),
                },
                4 => {
                    if self.rng.random_bool(0.5) {
                        FilterExpr::IsNull(2)
                    } else {
                        FilterExpr::IsNotNull(2)
                    }
                }
                5 => FilterExpr::Like {
                    col: 2,
                    pattern: ["%a%", "b%", "_", "%", "%e_", ""][self.rng.random_range(0..6)]
                        .as_bytes()
                        .to_vec(),
                },
                _ => FilterExpr::CmpCols { a: 0, op, b: 1 },
            };
        }
        match self.rng.random_range(0..3) {
            0 => FilterExpr::And(vec![
                self.random_filter(depth - 1),
                self.random_filter(depth - 1),
            ]),
            1 => FilterExpr::Or(vec![
                self.random_filter(depth - 1),
                self.random_filter(depth - 1),
            ]),
            _ => FilterExpr::Not(Box::new(self.random_filter(depth - 1))),
        }
    }

    /// A scan's request reaches its data node.
    pub(super) fn scan_to_node(&mut self, conn: ConnId, signal: Signal) -> Result<(), String> {
        let Some(info) = self.conns.get(&conn).copied() else {
            return Ok(());
        };
        let node = info.node;
        if !info.open || self.nodes[node as usize - 1].incarnation != info.incarnation {
            return Ok(());
        }
        let now = self.now;
        let Some(n) = self.running(node) else {
            return Ok(());
        };
        let mut out = Vec::new();
        n.client_signal(now, conn, signal, &mut out)
            .map_err(|e| format!("node {node} refused a scan request: {e}"))?;
        self.handle_outputs(node, out)
    }

    /// A scan's answer reaches its client.
    pub(super) fn scan_to_client(&mut self, conn: ConnId, signal: Signal) -> Result<(), String> {
        let (trans, request) = match &signal {
            Signal::ScanTabConf(c) => (c.trans, c.request),
            Signal::ScanTabRef(r) => (r.trans, r.request),
            other => return Err(format!("a scan answer that is none: {other:?}")),
        };
        if !self.conns.get(&conn).is_some_and(|c| c.open) {
            return Ok(());
        }
        let Some(scan) = self.scans.get_mut(&(conn, trans)) else {
            // Abandoned (the whole cluster went down meanwhile).
            return Ok(());
        };
        if request != scan.request {
            return Err(format!(
                "conn {conn} scan {}: the answer to request {request} came while request {} was awaited",
                trans.0, scan.request
            ));
        }
        let client = scan.client;
        match signal {
            Signal::ScanTabRef(r) => {
                let code = ErrorCode::from_u16(r.code);
                if code.is_none_or(|c| c.class() != ErrorClass::Temporary) {
                    return Err(format!(
                        "scan {} failed with a permanent error {}: {}",
                        trans.0, r.code, r.detail
                    ));
                }
                *self.report.scans_failed.entry(r.code).or_default() += 1;
                self.scan_over(conn, trans, client);
            }
            Signal::ScanTabConf(c) => self.scan_round(conn, c)?,
            _ => unreachable!("matched above"),
        }
        Ok(())
    }

    /// One round of a scan: every row checked; then on, closed, or over.
    fn scan_round(&mut self, conn: ConnId, c: ScanTabConf) -> Result<(), String> {
        let key = (conn, c.trans);
        let mut rows = &c.rows[..];
        let mut count = 0;
        while !rows.is_empty() {
            let (attrs, rest) = AttrSlice::parse(rows)
                .map_err(|e| format!("scan {}: a malformed row: {e}", c.trans.0))?;
            rows = rest;
            count += 1;
            let mut values = vec![Value::Null; self.def.columns.len()];
            for (col, bytes) in attrs.iter() {
                let def = self.def.columns.get(col as usize).ok_or_else(|| {
                    format!(
                        "scan {}: a row with column {col} the table lacks",
                        c.trans.0
                    )
                })?;
                values[col as usize] = bytes.map_or(Value::Null, |b| decode_value(def.ty, b));
            }
            let Value::UInt(k) = values[0] else {
                return Err(format!(
                    "scan {}: a row without its key: {values:?}",
                    c.trans.0
                ));
            };
            let k = k as u32;
            let image = Some(Row {
                v: values[1].as_i64().ok_or("a row without v")?,
                s: values[2].as_str().map(str::to_string),
            });
            if self.trace {
                eprintln!("{:>8} ms scan {} <- key {k} {image:?}", self.now, c.trans.0);
            }
            let scan = self.scans.get_mut(&key).expect("present");
            // A key deleted and inserted again meanwhile may come back at
            // another row id: twice is wrong only for a key left alone.
            if !scan.seen.insert(k) && self.model.latest_seq(k) <= scan.since {
                return Err(format!(
                    "scan {} returned key {k} twice, and no commit touched it while the scan ran",
                    c.trans.0
                ));
            }
            if !self.model.held_since(k, scan.since, &image) {
                return Err(format!(
                    "scan {} returned key {k} as {image:?}, which it never held while the scan ran (since commit #{}; its commits: {:?})",
                    c.trans.0,
                    scan.since,
                    self.model.history(k)
                ));
            }
            if let Some(ix) = &mut scan.index {
                let columns = &self.def.indexes[ix.index as usize].columns;
                let mut key = Vec::new();
                let of_row: Vec<Value> = columns
                    .iter()
                    .map(|&c| values[c as usize].clone())
                    .collect();
                encode_key(&self.def, columns, &of_row, &mut key)
                    .map_err(|e| format!("scan {}: a row's index key: {e}", c.trans.0))?;
                if !ix.in_ranges(&key) {
                    return Err(format!(
                        "scan {} of index {} returned key {k} as {values:?}, outside its ranges",
                        c.trans.0, ix.index
                    ));
                }
                if ix.ordered {
                    if let Some(last) = &ix.last_key {
                        let in_order = if ix.descending {
                            key <= *last
                        } else {
                            key >= *last
                        };
                        if !in_order {
                            return Err(format!(
                                "ordered scan {} of index {} ({}) returned key {k} as {values:?} out of order",
                                c.trans.0,
                                ix.index,
                                if ix.descending { "descending" } else { "ascending" }
                            ));
                        }
                    }
                    ix.last_key = Some(key);
                }
            }
            if scan.filter.eval_values(&self.def, &values) != Some(true) {
                return Err(format!(
                    "scan {} returned key {k} as {values:?}, which its filter {:?} drops",
                    c.trans.0, scan.filter
                ));
            }
        }
        if count != c.count {
            return Err(format!(
                "scan {}: a round says {} rows and holds {count}",
                c.trans.0, c.count
            ));
        }
        self.report.scan_rows += u64::from(count);
        let scan = self.scans.get_mut(&key).expect("present");
        let client = scan.client;
        scan.rounds += 1;
        if c.done {
            if scan.closing {
                if count != 0 {
                    return Err(format!("scan {}: a close answered with rows", c.trans.0));
                }
                self.report.scans_closed += 1;
            } else {
                self.scan_complete(key)?;
                self.report.scans_complete += 1;
            }
            self.scan_over(conn, c.trans, client);
            return Ok(());
        }
        if scan.closing {
            return Err(format!(
                "scan {}: a close answered with more to come",
                c.trans.0
            ));
        }
        let close = scan.close_after.is_some_and(|n| scan.rounds > n);
        scan.closing = close;
        scan.request += 1;
        let signal = Signal::ScanNextReq(ScanNextReq {
            trans: c.trans,
            request: scan.request,
            close,
        });
        self.send(Lane::ToNode(conn), Event::ScanToNode { conn, signal });
        Ok(())
    }

    /// A scan read to its end missed nothing it must have seen.
    fn scan_complete(&self, key: (ConnId, TransId)) -> Result<(), String> {
        let scan = &self.scans[&key];
        for k in 0..self.load.keys {
            if scan.seen.contains(&k) || self.model.latest_seq(k) > scan.since {
                continue;
            }
            let Some(row) = self.model.current(k) else {
                continue;
            };
            let values = [
                Value::UInt(u64::from(k)),
                Value::Int(row.v),
                row.s.clone().map_or(Value::Null, Value::Str),
            ];
            let in_ranges = match &scan.index {
                None => true,
                Some(ix) => {
                    let columns = &self.def.indexes[ix.index as usize].columns;
                    let of_row: Vec<Value> = columns
                        .iter()
                        .map(|&c| values[c as usize].clone())
                        .collect();
                    let mut key = Vec::new();
                    encode_key(&self.def, columns, &of_row, &mut key)
                        .map_err(|e| format!("a row's index key: {e}"))?;
                    ix.in_ranges(&key)
                }
            };
            if in_ranges && scan.filter.eval_values(&self.def, &values) == Some(true) {
                return Err(format!(
                    "scan {} missed key {k} ({row:?}): it was there before the scan began and untouched until it ended, and the filter {:?} keeps it",
                    key.1 .0, scan.filter
                ));
            }
        }
        Ok(())
    }

    /// The scan ended (or failed): the client starts another later.
    fn scan_over(&mut self, conn: ConnId, trans: TransId, client: usize) {
        self.scans.remove(&(conn, trans));
        let at = self.now + 1 + random_delay(&mut self.rng, 100);
        self.schedule(at, Event::ScanStart { client });
    }

    /// The whole cluster went down: every scan is abandoned (what is
    /// still on its way describes data that is gone).
    pub(super) fn scans_all_lost(&mut self) {
        let conns: BTreeSet<ConnId> = self.scans.keys().map(|&(c, _)| c).collect();
        for conn in conns {
            self.scans_conn_lost(conn);
        }
    }

    /// The client's connection broke: its scan on it is abandoned.
    pub(super) fn scans_conn_lost(&mut self, conn: ConnId) {
        let lost: Vec<(ConnId, TransId, usize)> = self
            .scans
            .values()
            .filter(|s| s.conn == conn)
            .map(|s| (s.conn, s.trans, s.client))
            .collect();
        for (conn, trans, client) in lost {
            self.report.scans_abandoned += 1;
            self.scan_over(conn, trans, client);
        }
    }
}
