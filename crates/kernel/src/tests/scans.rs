//! Scans through one data node: rounds, filters, projections, uncommitted
//! rows, closes, bounds and bad requests (docs/PROTOCOL.md §12).

use super::*;
use shoal_types::filter::{CmpOp, FilterExpr};
use shoal_wire::{ScanNextReq, ScanTabConf, ScanTabReq};

fn scan_req(trans: u64, batch_rows: u32, filter: Vec<u8>) -> ScanTabReq {
    ScanTabReq {
        trans: TransId(trans),
        table: T,
        version: V,
        lock: LockMode::CommittedRead,
        flags: 0,
        index: shoal_wire::scan::SCAN_NO_INDEX,
        bounds: Vec::new(),
        batch_rows,
        batch_bytes: 1 << 20,
        columns: ALL_COLUMNS.to_le_bytes().to_vec(),
        filter,
    }
}

impl Harness {
    fn scan_signal(&mut self, conn: ConnId, signal: Signal) -> Vec<Output> {
        let mut out = Vec::new();
        self.node
            .client_signal(self.now, conn, signal, &mut out)
            .unwrap();
        out
    }

    /// Inserts keys `keys` with v = key * 10, s = "s<key>".
    fn fill(&mut self, keys: std::ops::Range<u32>) {
        for k in keys {
            let op = self.op(OpType::Insert, k, i64::from(k) * 10, &format!("s{k}"));
            self.commit(vec![op]);
        }
    }

    /// Runs a scan to its end (asking each next round); the keys of every
    /// row, in the order they came, and the rounds.
    fn scan_all(&mut self, conn: ConnId, req: ScanTabReq) -> (Vec<u32>, u32) {
        let trans = req.trans;
        let mut out = self.scan_signal(conn, Signal::ScanTabReq(req));
        let mut keys = Vec::new();
        let mut request = 0;
        loop {
            let c = round(&out);
            assert_eq!(c.request, request);
            keys.extend(row_keys(&c));
            if c.done {
                return (keys, request + 1);
            }
            request += 1;
            out = self.scan_signal(
                conn,
                Signal::ScanNextReq(ScanNextReq {
                    trans,
                    request,
                    close: false,
                }),
            );
        }
    }
}

fn round(out: &[Output]) -> ScanTabConf {
    match out {
        [Output::Send {
            signal: Signal::ScanTabConf(c),
            ..
        }] => c.clone(),
        other => panic!("expected one ScanTabConf, got {other:?}"),
    }
}

fn scan_refused(out: &[Output]) -> u16 {
    match out {
        [Output::Send {
            signal: Signal::ScanTabRef(r),
            ..
        }] => r.code,
        other => panic!("expected one ScanTabRef, got {other:?}"),
    }
}

/// The key (column 0) of each row of a round.
fn row_keys(c: &ScanTabConf) -> Vec<u32> {
    let mut rows = &c.rows[..];
    let mut keys = Vec::new();
    while !rows.is_empty() {
        let (attrs, rest) = shoal_types::AttrSlice::parse(rows).unwrap();
        rows = rest;
        let k = attrs
            .iter()
            .find(|(col, _)| *col == 0)
            .and_then(|(_, b)| b)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
            .expect("every row has its key");
        keys.push(k);
    }
    assert_eq!(keys.len(), c.count as usize);
    keys
}

fn sorted(mut v: Vec<u32>) -> Vec<u32> {
    v.sort_unstable();
    v
}

#[test]
fn a_scan_returns_every_row_once_in_rounds() {
    let mut h = Harness::new(KernelConfig::default());
    h.fill(0..50);
    let (keys, rounds) = h.scan_all(1, scan_req(1, 7, Vec::new()));
    assert_eq!(sorted(keys), (0..50).collect::<Vec<_>>());
    assert_eq!(rounds, 8, "50 rows, 7 a round");
    // The scan is forgotten once done: a next request finds nothing.
    let out = h.scan_signal(
        1,
        Signal::ScanNextReq(ScanNextReq {
            trans: TransId(1),
            request: 8,
            close: false,
        }),
    );
    assert_eq!(scan_refused(&out), ErrorCode::ScanNotFound as u16);
}

#[test]
fn a_filter_runs_on_the_node_and_a_projection_returns_its_columns() {
    // Batches look at three rows: a selective filter needs many of them
    // per round.
    let mut h = Harness::new(KernelConfig {
        scan_examine_rows_max: 3,
        ..KernelConfig::default()
    });
    h.fill(0..40);
    let filter = FilterExpr::And(vec![
        FilterExpr::Cmp {
            col: 1,
            op: CmpOp::Ge,
            value: Value::Int(100),
        },
        FilterExpr::Like {
            col: 2,
            pattern: b"s2%".to_vec(),
        },
    ])
    .compile(&h.def)
    .unwrap();
    let (keys, _) = h.scan_all(1, scan_req(1, 1000, filter));
    assert_eq!(sorted(keys), (20..30).collect::<Vec<_>>());

    let mut h = Harness::new(KernelConfig::default());
    h.fill(0..40);
    let mut req = scan_req(2, 1000, Vec::new());
    req.columns = vec![2, 0, 0, 0, 2, 0]; // k, s
    let out = h.scan_signal(1, Signal::ScanTabReq(req));
    let c = round(&out);
    assert!(c.done);
    let (attrs, _) = shoal_types::AttrSlice::parse(&c.rows).unwrap();
    let cols: Vec<u16> = attrs.iter().map(|(col, _)| col).collect();
    assert_eq!(cols, [0, 2]);
    assert_eq!(c.count, 40);
    assert_eq!(c.examined, 40);
}

#[test]
fn a_scan_sees_committed_rows_only() {
    let mut h = Harness::new(KernelConfig::default());
    h.fill(0..5);
    // Open: an insert of 9, an update of 1 and a delete of 2, uncommitted.
    let ops = vec![
        h.op(OpType::Insert, 9, 90, "new"),
        h.op(OpType::Update, 1, 11, "changed"),
        h.op(OpType::Delete, 2, 0, ""),
    ];
    let out = h.send(2, 1, ExecType::NoCommit, ops);
    conf(&out);
    let out = h.scan_signal(1, Signal::ScanTabReq(scan_req(1, 100, Vec::new())));
    let c = round(&out);
    assert_eq!(sorted(row_keys(&c)), [0, 1, 2, 3, 4]);
    assert!(!String::from_utf8_lossy(&c.rows).contains("changed"));
    // Committed: the next scan sees it all.
    let out = h.send(2, 1, ExecType::Commit, Vec::new());
    conf(&out);
    let out = h.scan_signal(1, Signal::ScanTabReq(scan_req(2, 100, Vec::new())));
    assert_eq!(sorted(row_keys(&round(&out))), [0, 1, 3, 4, 9]);
}

#[test]
fn a_scan_closed_early_is_forgotten_and_bounds_give_clear_errors() {
    let mut h = Harness::new(KernelConfig {
        max_concurrent_scans: 2,
        ..KernelConfig::default()
    });
    h.fill(0..10);
    for trans in [1, 2] {
        let c = round(&h.scan_signal(1, Signal::ScanTabReq(scan_req(trans, 2, Vec::new()))));
        assert!(!c.done);
    }
    let out = h.scan_signal(1, Signal::ScanTabReq(scan_req(3, 2, Vec::new())));
    assert_eq!(scan_refused(&out), ErrorCode::TooManyScans as u16);
    // A close ends scan 1 (answered with no rows) and frees its place.
    let c = round(&h.scan_signal(
        1,
        Signal::ScanNextReq(ScanNextReq {
            trans: TransId(1),
            request: 1,
            close: true,
        }),
    ));
    assert!(c.done && c.count == 0);
    let c = round(&h.scan_signal(1, Signal::ScanTabReq(scan_req(3, 2, Vec::new()))));
    assert!(!c.done);
    // The client going away ends its scans.
    h.node.client_disconnected(h.now, 1, &mut Vec::new());
    let (keys, _) = h.scan_all(2, scan_req(1, 100, Vec::new()));
    assert_eq!(keys.len(), 10);
    let out = h.scan_signal(2, Signal::ScanTabReq(scan_req(2, 100, Vec::new())));
    assert!(round(&out).done, "room for scans again");
}

#[test]
fn bad_scan_requests_are_refused_and_the_node_goes_on() {
    let mut h = Harness::new(KernelConfig::default());
    h.fill(0..3);
    let cases: Vec<(ScanTabReq, ErrorCode)> = vec![
        (
            ScanTabReq {
                filter: vec![0x10, 9],
                ..scan_req(1, 10, Vec::new())
            },
            ErrorCode::BadFilter,
        ),
        (
            ScanTabReq {
                filter: vec![0x20; 20_000],
                ..scan_req(2, 10, Vec::new())
            },
            ErrorCode::BadFilter,
        ),
        (
            ScanTabReq {
                table: TableId(99),
                ..scan_req(3, 10, Vec::new())
            },
            ErrorCode::NoSuchTable,
        ),
        (
            ScanTabReq {
                version: SchemaVersion(1),
                ..scan_req(4, 10, Vec::new())
            },
            ErrorCode::InvalidSchemaVersion,
        ),
        (
            ScanTabReq {
                lock: LockMode::Exclusive,
                ..scan_req(5, 10, Vec::new())
            },
            ErrorCode::BadRequest,
        ),
        (
            ScanTabReq {
                columns: vec![1, 0, 9, 0],
                ..scan_req(6, 10, Vec::new())
            },
            ErrorCode::NoSuchColumn,
        ),
        (
            ScanTabReq {
                columns: vec![3, 0, 1, 0],
                ..scan_req(7, 10, Vec::new())
            },
            ErrorCode::BadRequest,
        ),
    ];
    for (req, code) in cases {
        let out = h.scan_signal(1, Signal::ScanTabReq(req.clone()));
        assert_eq!(scan_refused(&out), code as u16, "{req:?}");
    }
    // A next request out of order ends the scan with an error.
    let c = round(&h.scan_signal(1, Signal::ScanTabReq(scan_req(10, 1, Vec::new()))));
    assert!(!c.done);
    let out = h.scan_signal(
        1,
        Signal::ScanNextReq(ScanNextReq {
            trans: TransId(10),
            request: 5,
            close: false,
        }),
    );
    assert_eq!(scan_refused(&out), ErrorCode::BadRequest as u16);
    // Nothing leaked, and the rows are as they were.
    let (keys, _) = h.scan_all(1, scan_req(11, 100, Vec::new()));
    assert_eq!(sorted(keys), [0, 1, 2]);
    assert_eq!(h.value(2), Some((20, Some("s2".into()))));
}

/// The test table with ordered indexes on its key and on `v`.
fn indexed_table() -> TableDef {
    let mut def = table().with_index("by_v", &["v"]).unwrap();
    def.add_primary_index();
    def
}

fn v_key(h: &Harness, v: i64) -> Vec<u8> {
    let mut key = Vec::new();
    shoal_types::index_key::encode_key(&h.def, &[1], &[Value::Int(v)], &mut key).unwrap();
    key
}

fn index_req(
    trans: u64,
    index: u16,
    flags: u8,
    ranges: &[shoal_wire::scan::KeyRange],
) -> ScanTabReq {
    let mut bounds = Vec::new();
    if !ranges.is_empty() {
        shoal_wire::scan::encode_bounds(ranges, &mut bounds);
    }
    ScanTabReq {
        index,
        flags,
        bounds,
        ..scan_req(trans, 3, Vec::new())
    }
}

#[test]
fn an_index_scan_reads_its_ranges_in_order_and_follows_changes() {
    use shoal_wire::scan::{KeyRange, SCAN_DESCENDING, SCAN_ORDERED};
    let mut h = Harness::with_table(KernelConfig::default(), indexed_table());
    // v = key * 10 for keys 0..40, inserted in a scrambled order.
    for k in (0..40).map(|i| (i * 7) % 40) {
        let op = h.op(OpType::Insert, k, i64::from(k) * 10, "x");
        h.commit(vec![op]);
    }
    let (lo, hi) = (v_key(&h, 100), v_key(&h, 200));
    let range = KeyRange {
        low: Some((&lo, true)),
        high: Some((&hi, false)),
    };
    let by_v = 1;
    let (keys, _) = h.scan_all(1, index_req(1, by_v, SCAN_ORDERED, &[range]));
    assert_eq!(keys, (10..20).collect::<Vec<_>>(), "[100, 200) ascending");
    let (keys, _) = h.scan_all(
        1,
        index_req(2, by_v, SCAN_ORDERED | SCAN_DESCENDING, &[range]),
    );
    assert_eq!(keys, (10..20).rev().collect::<Vec<_>>(), "descending");
    // Two ranges, exclusive low.
    let (a, b, c) = (v_key(&h, 50), v_key(&h, 70), v_key(&h, 380));
    let ranges = [
        KeyRange {
            low: Some((&a, false)),
            high: Some((&b, true)),
        },
        KeyRange {
            low: Some((&c, true)),
            high: None,
        },
    ];
    let (keys, _) = h.scan_all(1, index_req(3, by_v, SCAN_ORDERED, &ranges));
    assert_eq!(keys, [6, 7, 38, 39]);
    let (keys, _) = h.scan_all(
        1,
        index_req(4, by_v, SCAN_ORDERED | SCAN_DESCENDING, &ranges),
    );
    assert_eq!(keys, [39, 38, 7, 6]);
    // An update moves its entry; a delete takes it out; an uncommitted
    // insert is not there.
    let up = h.op(OpType::Update, 12, 1000, "moved");
    h.commit(vec![up]);
    let del = h.op(OpType::Delete, 13, 0, "");
    h.commit(vec![del]);
    let ins = h.op(OpType::Insert, 99, 150, "open");
    conf(&h.send(2, 1, ExecType::NoCommit, vec![ins]));
    let (keys, _) = h.scan_all(1, index_req(5, by_v, SCAN_ORDERED, &[range]));
    assert_eq!(keys, [10, 11, 14, 15, 16, 17, 18, 19]);
    let (keys, _) = h.scan_all(1, index_req(6, by_v, SCAN_ORDERED, &[]));
    assert_eq!(keys.len(), 39);
    assert_eq!(keys.last(), Some(&12), "v = 1000 is the largest");
    // The primary key's index: keys in order.
    let (keys, _) = h.scan_all(1, index_req(7, 0, SCAN_ORDERED, &[]));
    let mut want: Vec<u32> = (0..40).filter(|&k| k != 13).collect();
    want.sort_unstable();
    assert_eq!(keys, want);
    conf(&h.send(2, 1, ExecType::Rollback, Vec::new()));
    h.node.check_ordered_indexes().unwrap();
    // Bad index requests: an index the table lacks, bounds without one.
    let out = h.scan_signal(1, Signal::ScanTabReq(index_req(8, 9, 0, &[])));
    assert_eq!(scan_refused(&out), ErrorCode::BadRequest as u16);
    let out = h.scan_signal(
        1,
        Signal::ScanTabReq(ScanTabReq {
            flags: SCAN_ORDERED,
            ..scan_req(9, 3, Vec::new())
        }),
    );
    assert_eq!(scan_refused(&out), ErrorCode::BadRequest as u16);
    let out = h.scan_signal(
        1,
        Signal::ScanTabReq(ScanTabReq {
            bounds: vec![9, 9, 9],
            ..index_req(10, by_v, 0, &[])
        }),
    );
    assert_eq!(scan_refused(&out), ErrorCode::BadRequest as u16);
}

/// Every round of an ordered scan but its last brings at least one
/// fragment's batch: a merge stopped at a fragment with no rows waiting
/// asks it on inside the coordinator instead of answering a row or two.
#[test]
fn an_ordered_scan_answers_no_round_of_a_row_or_two() {
    use shoal_wire::scan::{SCAN_DESCENDING, SCAN_ORDERED};
    let frags = 2;
    let mut def = indexed_table();
    def.distribution = Some(shoal_types::distribution::DistributionSpec::single_node(
        1, frags,
    ));
    let mut h = Harness::with_table(KernelConfig::default(), def);
    h.fill(0..300);
    let batch_rows = 8 * frags;
    for (trans, flags) in [(1, SCAN_ORDERED), (2, SCAN_ORDERED | SCAN_DESCENDING)] {
        let req = ScanTabReq {
            batch_rows,
            ..index_req(trans, 0, flags, &[])
        };
        let conn = 1;
        let mut out = h.scan_signal(conn, Signal::ScanTabReq(req));
        let mut keys = Vec::new();
        let mut request = 0;
        loop {
            let c = round(&out);
            keys.extend(row_keys(&c));
            if c.done {
                break;
            }
            assert!(
                c.count >= 8,
                "round {request} of scan {trans} brought {} rows, under one fragment's batch of 8",
                c.count
            );
            request += 1;
            out = h.scan_signal(
                conn,
                Signal::ScanNextReq(ScanNextReq {
                    trans: TransId(trans),
                    request,
                    close: false,
                }),
            );
        }
        let mut want: Vec<u32> = (0..300).collect();
        if flags & SCAN_DESCENDING != 0 {
            want.reverse();
        }
        assert_eq!(keys, want, "scan {trans}: every row once, in order");
    }
}

#[test]
fn an_index_added_to_a_table_with_rows_is_built_while_writes_go_on_and_can_be_dropped() {
    use shoal_wire::scan::SCAN_ORDERED;
    let mut h = Harness::with_table(
        KernelConfig {
            index_build_rows_per_tick: 3,
            ..KernelConfig::default()
        },
        table(),
    );
    h.fill(0..40);
    let def = table().with_index("by_v", &["v"]).unwrap();
    assert!(h.node.alter_indexes(&def).unwrap(), "a build is under way");
    let by_v = 0;
    // Scans of it wait until it is built (a temporary error).
    let out = h.scan_signal(1, Signal::ScanTabReq(index_req(1, by_v, SCAN_ORDERED, &[])));
    assert_eq!(scan_refused(&out), ErrorCode::NodeNotReady as u16);
    // Writes at both ends while the build walks the rows, a tick at a time.
    let mut built = false;
    for step in 0..40u32 {
        let out = h.tick(10);
        built |= out
            .iter()
            .any(|o| matches!(o, Output::IndexesBuilt { error: None, .. }));
        let low = step % 8;
        let high = 39 - step % 8;
        let ops = vec![
            h.op(OpType::Update, low, 1000 - i64::from(step), "u"),
            h.op(OpType::Write, high, -i64::from(step), "w"),
        ];
        h.commit(ops);
        if step == 5 {
            let del = h.op(OpType::Delete, 20, 0, "");
            h.commit(vec![del]);
            let ins = h.op(OpType::Insert, 77, 5, "new");
            h.commit(vec![ins]);
        }
    }
    assert!(built, "the build ended and said so");
    h.node.check_ordered_indexes().unwrap();
    let (keys, _) = h.scan_all(1, index_req(2, by_v, SCAN_ORDERED, &[]));
    assert_eq!(keys.len(), 40, "39 rows left of 40, plus key 77");
    // v in key order matches the rows' current values.
    let mut want: Vec<(i64, u32)> = keys
        .iter()
        .map(|&k| (h.value(k).expect("row").0, k))
        .collect();
    want.sort_unstable();
    assert_eq!(keys, want.iter().map(|&(_, k)| k).collect::<Vec<_>>());
    // Dropped: scans of it are refused, its entries are gone.
    let mut dropped = def.clone();
    dropped.indexes[0].dropped = true;
    assert!(!h.node.alter_indexes(&dropped).unwrap());
    let out = h.scan_signal(1, Signal::ScanTabReq(index_req(3, by_v, SCAN_ORDERED, &[])));
    assert_eq!(scan_refused(&out), ErrorCode::BadRequest as u16);
    h.node.check_ordered_indexes().unwrap();
    let ins = h.op(OpType::Insert, 78, 1, "after");
    h.commit(vec![ins]);
    h.node.check_ordered_indexes().unwrap();
}
