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
use shoal_types::value::decode_value;
use shoal_types::{AttrSlice, ErrorClass, ErrorCode, TransId, Value};
use shoal_wire::{LockMode, ScanNextReq, ScanTabConf, ScanTabReq, Signal, ALL_COLUMNS};
use std::collections::BTreeSet;

use super::net::random_delay;
use super::{Event, Lane, World, TABLE, VERSION};
use crate::model::Row;

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
}

impl World {
    /// Each client's first scan, a little after the load begins.
    pub(super) fn start_scans(&mut self) {
        if !self.opts.scans {
            return;
        }
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
            },
        );
        self.report.scans += 1;
        if self.trace {
            eprintln!(
                "{:>8} ms client {client} conn {conn} scan {} begins after commit #{since}",
                self.now, trans.0
            );
        }
        let signal = Signal::ScanTabReq(ScanTabReq {
            trans,
            table: TABLE,
            version: VERSION,
            lock: LockMode::CommittedRead,
            batch_rows,
            batch_bytes,
            columns: ALL_COLUMNS.to_le_bytes().to_vec(),
            filter: program,
        });
        self.send(Lane::ToNode(conn), Event::ScanToNode { conn, signal });
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
            if scan.filter.eval_values(&self.def, &values) == Some(true) {
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
