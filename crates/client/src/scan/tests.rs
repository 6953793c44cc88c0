//! Scans against a scripted data node: builder encoding, rounds, errors.
use super::*;
use crate::conn::tests::{open, scripted_node, ScriptedNode};
use crate::record::tests::{attr_list, table};
use shoal_types::filter::CmpOp;
use shoal_types::{ErrorClass, Value};
use shoal_wire::{ScanNextReq, ScanTabRef, Signal};
use std::time::Duration;
use tokio::sync::mpsc::error::TryRecvError;

/// A row of `table()` through the record `["k1", "k2", "name"]`.
fn row(k1: u64) -> Vec<u8> {
    attr_list(&[
        (3, Some(&k1.to_le_bytes())),
        (1, Some(format!("k{k1}").as_bytes())),
        (
            2,
            if k1.is_multiple_of(2) {
                None
            } else {
                Some(b"odd")
            },
        ),
    ])
}

fn conf(trans: TransId, request: u32, done: bool, keys: &[u64]) -> ScanTabConf {
    ScanTabConf {
        trans,
        request,
        done,
        examined: 10,
        count: keys.len() as u32,
        rows: keys.iter().flat_map(|&k| row(k)).collect(),
    }
}

fn builder(conn: Option<Arc<Connection>>) -> ScanBuilder {
    ScanBuilder::new(None, conn, table().full_record())
}

fn request(b: ScanBuilder) -> Result<ScanRequest, ShoalError> {
    b.into_request().map(|(_, r)| r)
}

#[test]
fn scans_and_their_futures_can_move_between_threads() {
    fn send<T: Send>(_: &T) {}
    fn scan_is_send(s: Scan) {
        send(&s);
    }
    fn futures_are_send(b: ScanBuilder, mut s: Scan) {
        send(&b.open());
        send(&s.next_row());
        send(&s.collect_all());
        send(&s.close());
    }
    let _ = (scan_is_send, futures_are_send);
}

#[test]
fn the_builder_encodes_columns_filter_and_batch() {
    let t = table();
    let def = t.def().clone();
    // Defaults: every column, no filter, committed read, 256 rows and
    // 256 KiB a round.
    let r = request(builder(None)).unwrap();
    assert_eq!(
        r,
        ScanRequest {
            table: TableId(7),
            version: SchemaVersion(3),
            lock: LockMode::CommittedRead,
            batch_rows: 256,
            batch_bytes: 256 * 1024,
            columns: vec![0xFF, 0xFF],
            filter: Vec::new(),
            index: shoal_wire::scan::SCAN_NO_INDEX,
            flags: 0,
            bounds: Vec::new(),
        }
    );
    let like = FilterExpr::Like {
        col: 1,
        pattern: b"a%".to_vec(),
    };
    let r = request(
        builder(None)
            .columns(&["name", "k1"])
            .filter(like.clone())
            .batch(10, 4096)
            .lock(LockMode::Shared),
    )
    .unwrap();
    assert_eq!(r.columns, vec![2, 0, 2, 0, 3, 0]);
    assert_eq!(r.filter, like.compile(&def).unwrap());
    assert_eq!((r.batch_rows, r.batch_bytes), (10, 4096));
    assert_eq!(r.lock, LockMode::Shared);
    // Columns named through the table give the same program.
    let named = request(builder(None).filter_with(|t| {
        Ok(FilterExpr::And(vec![
            FilterExpr::Cmp {
                col: t.column_id("k1")?,
                op: CmpOp::Gt,
                value: Value::UInt(100),
            },
            FilterExpr::Like {
                col: t.column_id("k2")?,
                pattern: b"a%".to_vec(),
            },
        ]))
    }))
    .unwrap();
    let by_id = FilterExpr::And(vec![
        FilterExpr::Cmp {
            col: 3,
            op: CmpOp::Gt,
            value: Value::UInt(100),
        },
        like,
    ]);
    assert_eq!(named.filter, by_id.compile(&def).unwrap());
    // The signal carries it all, under the id it is given.
    let sig = named.clone().into_signal(TransId(42));
    assert_eq!(sig.trans, TransId(42));
    assert_eq!((sig.table, sig.version), (TableId(7), SchemaVersion(3)));
    assert_eq!((sig.columns, sig.filter), (named.columns, named.filter));
    // A raw program goes as it is.
    let raw = request(builder(None).filter_program(vec![9, 9])).unwrap();
    assert_eq!(raw.filter, vec![9, 9]);
}

#[test]
fn building_errors_surface_at_open_first_one_first() {
    let code = |b: ScanBuilder| request(b).unwrap_err().code;
    assert_eq!(
        code(builder(None).columns(&["nope"])),
        ErrorCode::NoSuchColumn
    );
    assert_eq!(
        code(builder(None).filter_with(|t| Ok(FilterExpr::IsNull(t.column_id("nope")?)))),
        ErrorCode::NoSuchColumn
    );
    assert_eq!(
        code(builder(None).filter(FilterExpr::IsNull(99))),
        ErrorCode::NoSuchColumn
    );
    // A constant not of the column's type.
    assert_eq!(
        code(builder(None).filter(FilterExpr::Cmp {
            col: 3,
            op: CmpOp::Eq,
            value: Value::Str("x".into()),
        })),
        ErrorCode::BadValue
    );
    assert_eq!(code(builder(None).batch(0, 10)), ErrorCode::BadRequest);
    assert_eq!(code(builder(None).batch(10, 0)), ErrorCode::BadRequest);
    // The first error wins, whatever follows.
    assert_eq!(
        code(
            builder(None)
                .columns(&["a", "a"])
                .columns(&["nope"])
                .filter(FilterExpr::True)
        ),
        ErrorCode::BadRequest
    );
}

#[test]
fn a_round_fills_one_buffer_per_row() {
    let rec = table().record(&["k1", "k2", "name"]).unwrap();
    let mut rows = Vec::new();
    fill_round(&mut rows, &rec, &conf(TransId(1), 0, false, &[1, 2, 3])).unwrap();
    assert_eq!(rows.len(), 3);
    for (i, r) in rows.iter().enumerate() {
        let k1 = i as u64 + 1;
        assert_eq!(r.get_u64(3).unwrap(), Some(k1));
        assert_eq!(r.get_str(1).unwrap(), Some(format!("k{k1}").as_str()));
        assert_eq!(r.is_null(2).unwrap(), k1.is_multiple_of(2));
    }
    // A smaller round reuses the buffers; an empty one is fine.
    fill_round(&mut rows, &rec, &conf(TransId(1), 1, false, &[7])).unwrap();
    assert_eq!(rows[0].get_u64(3).unwrap(), Some(7));
    fill_round(&mut rows, &rec, &conf(TransId(1), 2, true, &[])).unwrap();
    // Plain rows (every column fixed-size, none NULL) take the short
    // path, back to back.
    let plain = table().record(&["k1", "req"]).unwrap();
    let list = |k: u64| attr_list(&[(3, Some(&k.to_le_bytes())), (5, Some(&[1, 0]))]);
    let mut round = conf(TransId(1), 0, false, &[]);
    round.count = 2;
    round.rows = [list(5), list(6)].concat();
    fill_round(&mut rows, &plain, &round).unwrap();
    assert_eq!(rows[1].get_u64(3).unwrap(), Some(6));
    assert_eq!(rows[1].get_i16(5).unwrap(), Some(1));
}

#[test]
fn a_malformed_round_is_refused() {
    let rec = table().record(&["k1", "k2", "name"]).unwrap();
    let good = conf(TransId(1), 0, false, &[1, 2]);
    let with = |count: u32, rows: Vec<u8>| ScanTabConf {
        count,
        rows,
        ..good.clone()
    };
    let mut extra = good.rows.clone();
    extra.push(0);
    let cases = [
        // Fewer rows than announced, and more.
        with(3, good.rows.clone()),
        with(1, good.rows.clone()),
        // Bytes after the last row; the last row cut short.
        with(2, extra),
        with(2, good.rows[..good.rows.len() - 1].to_vec()),
        // A column the record does not have, one missing, a bad value.
        with(
            1,
            attr_list(&[(3, Some(&[0; 8])), (1, Some(b"k")), (0, None)]),
        ),
        with(1, attr_list(&[(3, Some(&[0; 8])), (1, Some(b"k"))])),
        with(
            1,
            attr_list(&[(3, Some(&[0; 7])), (1, Some(b"k")), (2, None)]),
        ),
        with(1, vec![0xFF]),
    ];
    for bad in cases {
        let mut rows = Vec::new();
        let what = fill_round(&mut rows, &rec, &bad).unwrap_err();
        assert!(!what.is_empty(), "{bad:?}");
    }
}

/// A coordinator serving `rounds` (keys per round; the last one is
/// `done`) and answering a close with an empty last round.
async fn serving(rounds: Vec<Vec<u64>>) -> ScriptedNode {
    let last = rounds.len() as u32 - 1;
    scripted_node(64 * 1024, move |sig| {
        let (trans, request, close) = match sig {
            Signal::ScanTabReq(r) => (r.trans, 0, false),
            Signal::ScanNextReq(r) => (r.trans, r.request, r.close),
            _ => return Some(Vec::new()),
        };
        let answer = match rounds.get(request as usize) {
            _ if close => conf(trans, request, true, &[]),
            Some(keys) => conf(trans, request, request == last, keys),
            None => panic!("request {request} after the last round"),
        };
        Some(vec![Signal::ScanTabConf(answer)])
    })
    .await
}

fn next_req(sig: Option<Signal>) -> ScanNextReq {
    match sig {
        Some(Signal::ScanNextReq(r)) => r,
        other => panic!("expected a ScanNextReq, got {other:?}"),
    }
}

/// Nothing more reaches the node within a moment.
async fn quiet(node: &mut ScriptedNode) {
    tokio::time::sleep(Duration::from_millis(100)).await;
    match node.seen.try_recv() {
        Err(TryRecvError::Empty) => {}
        other => panic!("the node got {other:?}"),
    }
}

#[tokio::test]
async fn a_scan_reads_every_round_then_ends() {
    let mut node = serving(vec![vec![1, 2], vec![3, 4], vec![]]).await;
    let conn = open(&node.addr, None).await;
    let rec = table().record(&["k1", "k2", "name"]).unwrap();
    let mut scan = ScanBuilder::new(None, Some(conn), rec)
        .batch(2, 1024)
        .open()
        .await
        .unwrap();
    let Some(Signal::ScanTabReq(req)) = node.seen.recv().await else {
        panic!("the node saw the scan open")
    };
    assert_eq!(
        (req.trans, req.batch_rows, req.batch_bytes),
        (scan.id(), 2, 1024)
    );
    assert_eq!(req.columns, vec![3, 0, 3, 0, 1, 0, 2, 0]);
    let mut keys = Vec::new();
    while let Some(row) = scan.next_row().await.unwrap() {
        keys.push(row.get_u64(3).unwrap().unwrap());
        // A round is asked for only once the last one's rows are all
        // taken: after rows 2 and 4.
        if keys.len() == 1 {
            quiet(&mut node).await;
        }
    }
    assert_eq!(keys, vec![1, 2, 3, 4]);
    assert!(scan.is_done());
    assert_eq!(scan.rows_examined(), 30);
    for request in [1, 2] {
        let r = next_req(node.seen.recv().await);
        assert_eq!((r.trans, r.request, r.close), (scan.id(), request, false));
    }
    // Ended: more calls say so, and dropping it sends nothing.
    assert!(scan.next_row().await.unwrap().is_none());
    drop(scan);
    quiet(&mut node).await;
}

#[tokio::test]
async fn collect_all_takes_every_row_left() {
    let node = serving(vec![vec![1, 2], vec![], vec![3], vec![4]]).await;
    let conn = open(&node.addr, None).await;
    let mut scan = builder(Some(conn))
        .columns(&["k1", "k2", "name"])
        .open()
        .await
        .unwrap();
    let first = scan.next_row().await.unwrap().unwrap().get_u64(3).unwrap();
    assert_eq!(first, Some(1));
    let rest = scan.collect_all().await.unwrap();
    let keys: Vec<_> = rest
        .iter()
        .map(|r| r.get_u64(3).unwrap().unwrap())
        .collect();
    assert_eq!(keys, vec![2, 3, 4]);
    assert_eq!(rest[0].get("name"), Some(Value::Null));
    assert_eq!(rest[1].get("name"), Some(Value::Str("odd".into())));
}

#[tokio::test]
async fn a_refused_scan_fails_with_the_coordinators_error() {
    let mut node = scripted_node(64 * 1024, |sig| {
        Some(match sig {
            Signal::ScanTabReq(r) => vec![Signal::ScanTabRef(ScanTabRef {
                trans: r.trans,
                request: 0,
                code: ErrorCode::TooManyScans as u16,
                detail: "32 scans run".into(),
            })],
            _ => Vec::new(),
        })
    })
    .await;
    let conn = open(&node.addr, None).await;
    let e = builder(Some(conn.clone())).open().await.unwrap_err();
    assert_eq!(e.code, ErrorCode::TooManyScans);
    assert_eq!(e.class(), ErrorClass::Temporary);
    assert!(
        e.detail.contains("\"t\"") && e.detail.contains("32 scans run"),
        "{e}"
    );
    // The scan is over on the node: no close follows the request.
    assert!(matches!(
        node.seen.recv().await,
        Some(Signal::ScanTabReq(_))
    ));
    quiet(&mut node).await;
    assert!(conn.is_alive());
}

#[tokio::test]
async fn a_refusal_in_a_later_round_ends_the_scan() {
    let mut node = scripted_node(64 * 1024, |sig| {
        Some(match sig {
            Signal::ScanTabReq(r) => vec![Signal::ScanTabConf(conf(r.trans, 0, false, &[1]))],
            Signal::ScanNextReq(r) => vec![Signal::ScanTabRef(ScanTabRef {
                trans: r.trans,
                request: r.request,
                code: ErrorCode::InvalidSchemaVersion as u16,
                detail: String::new(),
            })],
            _ => Vec::new(),
        })
    })
    .await;
    let conn = open(&node.addr, None).await;
    let rec = table().record(&["k1", "k2", "name"]).unwrap();
    let mut scan = ScanBuilder::new(None, Some(conn), rec)
        .open()
        .await
        .unwrap();
    assert!(scan.next_row().await.unwrap().is_some());
    let e = scan.next_row().await.unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidSchemaVersion);
    // Every later call says the same; the scan sends nothing more.
    assert_eq!(scan.next_row().await.unwrap_err().code, e.code);
    assert!(scan.is_done());
    scan.close().await.unwrap();
    assert!(matches!(
        node.seen.recv().await,
        Some(Signal::ScanTabReq(_))
    ));
    assert_eq!(next_req(node.seen.recv().await).request, 1);
    quiet(&mut node).await;
}

#[tokio::test]
async fn a_malformed_round_fails_the_scan_and_closes_it() {
    let mut node = scripted_node(64 * 1024, |sig| {
        Some(match sig {
            Signal::ScanTabReq(r) => {
                let mut c = conf(r.trans, 0, false, &[1, 2]);
                c.count = 3;
                vec![Signal::ScanTabConf(c)]
            }
            _ => Vec::new(),
        })
    })
    .await;
    let conn = open(&node.addr, None).await;
    let rec = table().record(&["k1", "k2", "name"]).unwrap();
    let e = ScanBuilder::new(None, Some(conn.clone()), rec)
        .open()
        .await
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::ProtocolViolation);
    assert!(e.detail.contains("row 2"), "{e}");
    assert!(matches!(
        node.seen.recv().await,
        Some(Signal::ScanTabReq(_))
    ));
    let close = next_req(node.seen.recv().await);
    assert_eq!((close.request, close.close), (1, true));
    assert!(conn.is_alive());
}

#[tokio::test]
async fn closing_or_dropping_an_open_scan_closes_it_on_the_node() {
    let mut node = serving(vec![vec![1, 2], vec![3]]).await;
    let conn = open(&node.addr, None).await;
    let rec = table().record(&["k1", "k2", "name"]).unwrap();
    let open_scan = || ScanBuilder::new(None, Some(conn.clone()), rec.clone()).open();
    // Closed: waits for the coordinator's answer.
    let mut scan = open_scan().await.unwrap();
    assert!(scan.next_row().await.unwrap().is_some());
    scan.close().await.unwrap();
    assert!(matches!(
        node.seen.recv().await,
        Some(Signal::ScanTabReq(_))
    ));
    let close = next_req(node.seen.recv().await);
    assert_eq!((close.request, close.close), (1, true));
    // Dropped: the close goes without waiting.
    let scan = open_scan().await.unwrap();
    let id = scan.id();
    drop(scan);
    assert!(matches!(
        node.seen.recv().await,
        Some(Signal::ScanTabReq(_))
    ));
    let close = next_req(node.seen.recv().await);
    assert_eq!((close.trans, close.request, close.close), (id, 1, true));
    quiet(&mut node).await;
}

#[tokio::test]
async fn a_lost_connection_or_a_late_answer_fails_the_scan() {
    // The node goes away when asked for the second round.
    let node = scripted_node(64 * 1024, |sig| match sig {
        Signal::ScanTabReq(r) => Some(vec![Signal::ScanTabConf(conf(r.trans, 0, false, &[1]))]),
        _ => None,
    })
    .await;
    let conn = open(&node.addr, None).await;
    let mut scan = builder(Some(conn))
        .columns(&["k1", "k2", "name"])
        .open()
        .await
        .unwrap();
    assert!(scan.next_row().await.unwrap().is_some());
    let e = scan.next_row().await.unwrap_err();
    assert_eq!(e.code, ErrorCode::NodeFailureAbort);
    assert_eq!(e.class(), ErrorClass::Temporary);
    // The node never answers the second round: the scan times out and
    // asks the node to close it, in case the answer is merely late.
    let mut node = scripted_node(64 * 1024, |sig| match sig {
        Signal::ScanTabReq(r) => Some(vec![Signal::ScanTabConf(conf(r.trans, 0, false, &[]))]),
        _ => Some(Vec::new()),
    })
    .await;
    let conn = open(&node.addr, Some(Duration::from_millis(100))).await;
    let mut scan = builder(Some(conn))
        .columns(&["k1", "k2", "name"])
        .open()
        .await
        .unwrap();
    let e = scan.next_row().await.unwrap_err();
    assert_eq!(e.code, ErrorCode::ReceiveTimeout);
    assert!(matches!(
        node.seen.recv().await,
        Some(Signal::ScanTabReq(_))
    ));
    let ask = next_req(node.seen.recv().await);
    assert_eq!((ask.request, ask.close), (1, false));
    let close = next_req(node.seen.recv().await);
    assert_eq!((close.request, close.close), (2, true));
    drop(scan);
    quiet(&mut node).await;
}

#[tokio::test]
async fn a_cancelled_wait_loses_no_round() {
    // Round 1 is held back until the test sends it.
    let mut node = scripted_node(64 * 1024, |sig| {
        Some(match sig {
            Signal::ScanTabReq(r) => vec![Signal::ScanTabConf(conf(r.trans, 0, false, &[1]))],
            _ => Vec::new(),
        })
    })
    .await;
    let conn = open(&node.addr, None).await;
    let mut scan = builder(Some(conn))
        .columns(&["k1", "k2", "name"])
        .open()
        .await
        .unwrap();
    assert!(scan.next_row().await.unwrap().is_some());
    let cut = tokio::time::timeout(Duration::from_millis(100), scan.next_row()).await;
    assert!(cut.is_err(), "the second round is held back");
    assert!(matches!(
        node.seen.recv().await,
        Some(Signal::ScanTabReq(_))
    ));
    let ask = next_req(node.seen.recv().await);
    assert_eq!((ask.request, ask.close), (1, false));
    node.send
        .send(Signal::ScanTabConf(conf(scan.id(), 1, true, &[2])))
        .unwrap();
    // The next call waits for the same round rather than asking again.
    let row = scan.next_row().await.unwrap().unwrap();
    assert_eq!(row.get_u64(3).unwrap(), Some(2));
    assert!(scan.next_row().await.unwrap().is_none());
    quiet(&mut node).await;
}
