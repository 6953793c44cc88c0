//! Bad input never hurts the cluster: each case sends something wrong to a
//! real data node and checks that the offender gets a clear error (at most
//! its own connection is closed), that the node stays up, that another
//! client's connection keeps working, and that committed rows survive.

mod common;

use common::{runtime, TestCluster};
use shoal_client::{
    Cluster, ColumnDef, ColumnType, ErrorCode, ExecType, LockMode, TableDef, Value,
};
use shoal_types::{SchemaVersion, TableId, TransId};
use shoal_wire::{
    ErrorReport, ExecType as WireExec, FrameDecoder, FrameEncoder, Hello, HelloReply, KeyOp,
    LockMode as WireLock, NodeType, OpType, Signal, TcKeyReq, FRAME_BYTES_MAX,
    HELLO_REPLY_FIXED_BYTES, SIGNALS_PER_FRAME_MAX,
};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const ROWS: u64 = 200;

/// A cluster with table `t` holding ROWS committed rows, and a client
/// connected before the bad input arrives (so "other clients" includes one
/// whose connection is already established).
struct Fixture {
    cluster: TestCluster,
    rt: tokio::runtime::Runtime,
    client: Cluster,
}

fn table_def() -> TableDef {
    TableDef::new(
        "t",
        vec![
            ColumnDef::new("id", ColumnType::BigInt { unsigned: true }),
            ColumnDef::new("n", ColumnType::Int { unsigned: false }),
            ColumnDef::new("s", ColumnType::VarChar(10)).nullable(),
        ],
        &["id"],
    )
    .unwrap()
}

impl Fixture {
    fn new() -> Fixture {
        Fixture::with(TestCluster::start())
    }

    fn with(cluster: TestCluster) -> Fixture {
        let rt = runtime();
        let client = rt.block_on(async {
            let client = Cluster::connect(&cluster.mgmd_addr).await.expect("connect");
            let t = client
                .create_table(table_def())
                .await
                .expect("create table");
            let rec = t.full_record();
            let mut tx = client.transaction();
            for id in 0..ROWS {
                tx.insert(
                    &rec,
                    &[
                        Value::UInt(id),
                        Value::Int(id as i64),
                        Value::Str("x".into()),
                    ],
                )
                .unwrap();
            }
            tx.execute(ExecType::Commit).await.expect("insert rows");
            client
        });
        Fixture {
            cluster,
            rt,
            client,
        }
    }

    /// The node is up, the established client still works, a new client
    /// can connect, and every committed row is intact.
    fn check_unaffected(&mut self) {
        self.cluster.assert_alive();
        let client = self.client.clone();
        self.rt.block_on(async {
            check_rows(&client).await;
            let fresh = Cluster::connect(&self.cluster.mgmd_addr)
                .await
                .expect("a new client connects");
            check_rows(&fresh).await;
            // Writes still work too.
            let rec = client.table("t").await.unwrap().full_record();
            let mut tx = client.transaction();
            tx.update(
                &rec,
                &[Value::UInt(0), Value::Int(0), Value::Str("y".into())],
            )
            .unwrap();
            tx.execute(ExecType::Commit)
                .await
                .expect("update after bad input");
        });
    }
}

async fn check_rows(client: &Cluster) {
    let rec = client.table("t").await.unwrap().full_record();
    let mut tx = client.transaction();
    let ops: Vec<_> = (0..ROWS)
        .map(|id| {
            tx.read(&rec, &[Value::UInt(id)], LockMode::CommittedRead)
                .unwrap()
        })
        .collect();
    tx.execute(ExecType::Commit)
        .await
        .expect("read committed rows");
    for (id, op) in ops.into_iter().enumerate() {
        let row = tx.row(op).unwrap_or_else(|| panic!("row {id} lost"));
        assert_eq!(row.get("n"), Some(Value::Int(id as i64)), "row {id}");
    }
}

/// A raw connection speaking the wire protocol by hand.
struct Raw {
    sock: TcpStream,
    encoder: FrameEncoder,
    decoder: FrameDecoder,
    inbuf: Vec<u8>,
}

impl Raw {
    fn connect(cluster: &TestCluster) -> Raw {
        let (addr, _) = cluster.datanode_addr();
        let sock = TcpStream::connect(&addr).expect("connect to data node");
        sock.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        Raw {
            sock,
            encoder: FrameEncoder::new(FRAME_BYTES_MAX, SIGNALS_PER_FRAME_MAX),
            decoder: FrameDecoder::new(FRAME_BYTES_MAX, SIGNALS_PER_FRAME_MAX),
            inbuf: Vec::new(),
        }
    }

    /// Connects and completes a valid handshake.
    fn handshake(cluster: &TestCluster) -> Raw {
        let mut raw = Raw::connect(cluster);
        let (_, cluster_id) = cluster.datanode_addr();
        raw.send(&Hello::new(NodeType::Api, cluster_id, 200, 1).encode());
        let reply = raw.hello_reply();
        assert_eq!(reply.status, 0, "handshake refused: {}", reply.detail);
        raw
    }

    fn send(&mut self, bytes: &[u8]) {
        // The node may already have closed the connection; that is fine.
        let _ = self.sock.write_all(bytes);
    }

    fn hello_reply(&mut self) -> HelloReply {
        let mut buf = vec![0u8; HELLO_REPLY_FIXED_BYTES];
        self.sock.read_exact(&mut buf).expect("hello reply");
        let detail_len = u16::from_le_bytes([
            buf[HELLO_REPLY_FIXED_BYTES - 2],
            buf[HELLO_REPLY_FIXED_BYTES - 1],
        ]) as usize;
        let mut rest = vec![0u8; detail_len];
        self.sock.read_exact(&mut rest).expect("hello reply detail");
        buf.extend_from_slice(&rest);
        HelloReply::decode(&buf)
            .expect("valid hello reply")
            .expect("whole hello reply")
            .0
    }

    fn frame(&mut self, signals: &[Signal]) -> Vec<u8> {
        let mut out = Vec::new();
        for s in signals {
            self.encoder.push(&mut out, s);
        }
        self.encoder.finish(&mut out);
        out
    }

    /// Reads until the node closes the connection; returns the signals it
    /// sent before closing. Panics if it does not close within 10 s.
    fn until_closed(&mut self) -> Vec<Signal> {
        let mut bytes = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match self.sock.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("node did not close the connection: {e}"),
            }
        }
        let mut signals = Vec::new();
        let mut at = 0;
        bytes.splice(0..0, self.inbuf.drain(..));
        while let Ok(Some(n)) = self.decoder.decode(&bytes[at..], &mut signals) {
            at += n;
        }
        signals
    }

    /// Reads exactly one reply frame's signals (the connection stays open).
    fn reply(&mut self) -> Vec<Signal> {
        let mut buf = [0u8; 4096];
        loop {
            let mut signals = Vec::new();
            if let Some(n) = self
                .decoder
                .decode(&self.inbuf, &mut signals)
                .expect("valid frame from node")
            {
                self.inbuf.drain(..n);
                return signals;
            }
            let n = self.sock.read(&mut buf).expect("reply");
            assert!(n > 0, "node closed the connection instead of answering");
            self.inbuf.extend_from_slice(&buf[..n]);
        }
    }
}

fn error_report(signals: &[Signal]) -> &ErrorReport {
    match signals.last() {
        Some(Signal::ErrorReport(r)) => r,
        other => panic!("expected an ErrorReport before the close, got {other:?}"),
    }
}

#[test]
fn garbage_bytes_instead_of_a_handshake() {
    let mut f = Fixture::new();
    let mut raw = Raw::connect(&f.cluster);
    raw.send(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    let reply = raw.hello_reply();
    assert_eq!(
        reply.status,
        ErrorCode::HandshakeRejected as u16,
        "{}",
        reply.detail
    );
    raw.until_closed();
    f.check_unaffected();
}

#[test]
fn wrong_protocol_version_is_refused() {
    let mut f = Fixture::new();
    let mut raw = Raw::connect(&f.cluster);
    let (_, cluster_id) = f.cluster.datanode_addr();
    let mut hello = Hello::new(NodeType::Api, cluster_id, 200, 1);
    hello.protocol_version = 99;
    raw.send(&hello.encode());
    let reply = raw.hello_reply();
    assert_eq!(reply.status, ErrorCode::HandshakeRejected as u16);
    assert!(
        reply.detail.contains("99"),
        "the reason names the version: {}",
        reply.detail
    );
    raw.until_closed();
    // Wrong cluster id too.
    let mut raw = Raw::connect(&f.cluster);
    raw.send(&Hello::new(NodeType::Api, cluster_id ^ 1, 200, 1).encode());
    assert_eq!(
        raw.hello_reply().status,
        ErrorCode::HandshakeRejected as u16
    );
    f.check_unaffected();
}

#[test]
fn garbage_bytes_after_the_handshake() {
    let mut f = Fixture::new();
    let mut raw = Raw::handshake(&f.cluster);
    let garbage: Vec<u8> = (0..4096u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    raw.send(&garbage);
    let signals = raw.until_closed();
    let report = error_report(&signals);
    assert!(
        report.code == ErrorCode::ProtocolViolation as u16
            || report.code == ErrorCode::FrameTooLarge as u16,
        "{report:?}"
    );
    f.check_unaffected();
}

#[test]
fn oversized_frame_closes_only_that_connection() {
    let mut f = Fixture::new();
    let mut raw = Raw::handshake(&f.cluster);
    let mut header = Vec::new();
    header.extend_from_slice(&((FRAME_BYTES_MAX + 1) as u32).to_le_bytes());
    header.extend_from_slice(&0u32.to_le_bytes());
    header.extend_from_slice(&1u16.to_le_bytes());
    header.extend_from_slice(&0u16.to_le_bytes());
    raw.send(&header);
    let signals = raw.until_closed();
    assert_eq!(error_report(&signals).code, ErrorCode::FrameTooLarge as u16);
    f.check_unaffected();
}

#[test]
fn truncated_frame_from_a_vanishing_client() {
    let mut f = Fixture::new();
    let mut raw = Raw::handshake(&f.cluster);
    let req = Signal::TcKeyReq(TcKeyReq {
        trans: TransId(1),
        request: 0,
        exec: WireExec::Commit,
        durable: false,
        ops: vec![],
    });
    let frame = raw.frame(&[req]);
    raw.send(&frame[..frame.len() - 3]);
    // The client vanishes mid-frame.
    raw.sock.shutdown(std::net::Shutdown::Both).unwrap();
    drop(raw);
    f.check_unaffected();
}

#[test]
fn out_of_order_and_malformed_frames() {
    let mut f = Fixture::new();
    // A frame with the wrong sequence number.
    let mut raw = Raw::handshake(&f.cluster);
    let req = Signal::TcKeyReq(TcKeyReq {
        trans: TransId(1),
        request: 0,
        exec: WireExec::Rollback,
        durable: false,
        ops: vec![],
    });
    let mut frame = raw.frame(&[req]);
    frame[4..8].copy_from_slice(&7u32.to_le_bytes());
    raw.send(&frame);
    assert_eq!(
        error_report(&raw.until_closed()).code,
        ErrorCode::ProtocolViolation as u16
    );
    // A frame whose signal has an unknown GSN.
    let mut raw = Raw::handshake(&f.cluster);
    let req = Signal::TcKeyReq(TcKeyReq {
        trans: TransId(1),
        request: 0,
        exec: WireExec::Rollback,
        durable: false,
        ops: vec![],
    });
    let mut frame = raw.frame(&[req]);
    frame[12..14].copy_from_slice(&999u16.to_le_bytes());
    raw.send(&frame);
    assert_eq!(
        error_report(&raw.until_closed()).code,
        ErrorCode::ProtocolViolation as u16
    );
    // A signal only data nodes may send.
    let mut raw = Raw::handshake(&f.cluster);
    let frame = raw.frame(&[Signal::ErrorReport(ErrorReport {
        code: 1,
        detail: "hi".into(),
    })]);
    raw.send(&frame);
    assert_eq!(
        error_report(&raw.until_closed()).code,
        ErrorCode::ProtocolViolation as u16
    );
    // A node-to-node signal from a client (it would abort someone's
    // transaction): refused, and the connection closed.
    let mut raw = Raw::handshake(&f.cluster);
    let forged = Signal::Node(shoal_wire::node::BlockSignal::AbortReq {
        txn: shoal_wire::node::first_txn_ref(1, 1),
        node: 1,
    });
    let frame = raw.frame(&[forged]);
    raw.send(&frame);
    let report = error_report(&raw.until_closed()).clone();
    assert_eq!(report.code, ErrorCode::ProtocolViolation as u16);
    assert!(report.detail.contains("AbortReq"), "{report:?}");
    f.check_unaffected();
}

#[test]
fn a_stranger_posing_as_a_data_node_is_refused() {
    let mut f = Fixture::new();
    let (_, cluster_id) = f.cluster.datanode_addr();
    // Node 7 is no data node of this one-node cluster; node 1 is the data
    // node itself.
    for claimed in [7u16, 1] {
        let mut raw = Raw::connect(&f.cluster);
        raw.send(&Hello::new(NodeType::DataNode, cluster_id, claimed, 1).encode());
        let reply = raw.hello_reply();
        assert_eq!(
            reply.status,
            ErrorCode::HandshakeRejected as u16,
            "{reply:?}"
        );
        assert!(reply.detail.contains("data node"), "{}", reply.detail);
        raw.until_closed();
    }
    f.check_unaffected();
}

/// Semantic errors are answered on the connection, which stays open.
#[test]
fn unknown_table_wrong_type_and_overlong_value_over_the_wire() {
    let mut f = Fixture::new();
    let (table, version) = f.rt.block_on(async {
        let t = f.client.table("t").await.unwrap();
        (t.id(), t.version())
    });
    let mut raw = Raw::handshake(&f.cluster);
    let key = 5u64.to_le_bytes().to_vec();
    let op = |table: TableId, version: SchemaVersion, attrs: Vec<u8>| {
        KeyOp::new(
            OpType::Update,
            WireLock::CommittedRead,
            0,
            table,
            version,
            &key,
            &attrs,
        )
    };
    // Attribute list: count, then (column, length, bytes).
    let attrs = |col: u16, bytes: &[u8]| {
        let mut a = Vec::new();
        a.extend_from_slice(&1u16.to_le_bytes());
        a.extend_from_slice(&col.to_le_bytes());
        a.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
        a.extend_from_slice(bytes);
        a
    };
    let cases = [
        (
            op(TableId(9999), version, attrs(1, &1i32.to_le_bytes())),
            ErrorCode::NoSuchTable,
        ),
        (
            op(
                table,
                SchemaVersion(version.0 + 7),
                attrs(1, &1i32.to_le_bytes()),
            ),
            ErrorCode::InvalidSchemaVersion,
        ),
        // INT is 4 bytes, not 2.
        (op(table, version, attrs(1, &[1, 2])), ErrorCode::BadValue),
        // VARCHAR(10) given 40 bytes.
        (
            op(table, version, attrs(2, &[b'a'; 40])),
            ErrorCode::ValueTooLong,
        ),
        (
            op(table, version, attrs(77, &[0; 4])),
            ErrorCode::NoSuchColumn,
        ),
        // A read naming column 1 twice: refused, so no list can repeat a
        // wide column into an answer of gigabytes.
        (
            KeyOp::new(
                OpType::Read,
                WireLock::CommittedRead,
                0,
                table,
                version,
                &key,
                &[2, 0, 1, 0, 1, 0],
            ),
            ErrorCode::BadRequest,
        ),
    ];
    for (i, (op, want)) in cases.into_iter().enumerate() {
        let frame = raw.frame(&[Signal::TcKeyReq(TcKeyReq {
            trans: TransId(100 + i as u64),
            request: 0,
            exec: WireExec::Commit,
            durable: false,
            ops: vec![op],
        })]);
        raw.send(&frame);
        match &raw.reply()[..] {
            [Signal::TcKeyRef(r)] => assert_eq!(r.code, want as u16, "case {i}: {}", r.detail),
            other => panic!("case {i}: expected TcKeyRef {want:?}, got {other:?}"),
        }
    }
    f.check_unaffected();
}

#[test]
fn client_api_refuses_bad_values_before_sending() {
    let mut f = Fixture::new();
    f.rt.block_on(async {
        let err = f.client.table("no_such_table").await.unwrap_err();
        assert_eq!(err.code, ErrorCode::NoSuchTable);
        let rec = f.client.table("t").await.unwrap().full_record();
        let mut tx = f.client.transaction();
        let e = tx
            .insert(
                &rec,
                &[
                    Value::UInt(1000),
                    Value::Str("not a number".into()),
                    Value::Null,
                ],
            )
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::BadValue, "{e}");
        let e = tx
            .insert(
                &rec,
                &[
                    Value::UInt(1000),
                    Value::Int(1),
                    Value::Str("far too long for ten".into()),
                ],
            )
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::ValueTooLong, "{e}");
        let e = tx
            .insert(&rec, &[Value::UInt(1000), Value::Null, Value::Null])
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::IllegalNull, "{e}");
        let e = tx
            .insert(
                &rec,
                &[
                    Value::UInt(1000),
                    Value::Int(i64::from(i32::MAX) + 1),
                    Value::Null,
                ],
            )
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::BadValue, "{e}");
        // The transaction itself is still usable.
        tx.insert(&rec, &[Value::UInt(1000), Value::Int(1), Value::Null])
            .unwrap();
        tx.execute(ExecType::Commit).await.unwrap();
    });
    f.check_unaffected();
}

#[test]
fn memory_full_refuses_inserts_and_keeps_serving() {
    let cluster = TestCluster::start_with(|c| c.data_memory_bytes = 1 << 20);
    let mut f = Fixture::with(cluster);
    let client = f.client.clone();
    let inserted = f.rt.block_on(async {
        let rec = client.table("t").await.unwrap().full_record();
        let mut id = ROWS;
        loop {
            let mut tx = client.transaction();
            for k in id..id + 100 {
                tx.insert(
                    &rec,
                    &[
                        Value::UInt(k),
                        Value::Int(k as i64),
                        Value::Str("0123456789".into()),
                    ],
                )
                .unwrap();
            }
            match tx.execute(ExecType::Commit).await {
                Ok(()) => id += 100,
                Err(e) => {
                    assert_eq!(e.code, ErrorCode::OutOfDataMemory, "{e}");
                    assert_eq!(e.class(), shoal_client::ErrorClass::Temporary);
                    break id;
                }
            }
            assert!(id < 10_000_000, "1 MiB never filled up");
        }
    });
    assert!(inserted > ROWS + 1000, "only {inserted} rows fit in 1 MiB");
    let status = f
        .cluster
        .wait_for_status(|s| s.data_memory_used_bytes > s.data_memory_total_bytes * 9 / 10);
    assert!(
        status.data_memory_used_bytes > status.data_memory_total_bytes * 9 / 10,
        "{status:?}"
    );
    // Reads, updates that fit and deletes work; deletes free memory for inserts.
    f.rt.block_on(async {
        let rec = client.table("t").await.unwrap().full_record();
        let mut tx = client.transaction();
        tx.update(
            &rec,
            &[Value::UInt(ROWS), Value::Int(-1), Value::Str("abc".into())],
        )
        .unwrap();
        tx.execute(ExecType::Commit)
            .await
            .expect("update that fits");
        let mut tx = client.transaction();
        for k in ROWS..ROWS + 2000 {
            tx.delete(&rec, &[Value::UInt(k)]).unwrap();
        }
        tx.execute(ExecType::Commit)
            .await
            .expect("deletes when full");
        let mut tx = client.transaction();
        for k in ROWS..ROWS + 1000 {
            tx.insert(&rec, &[Value::UInt(k), Value::Int(k as i64), Value::Null])
                .unwrap();
        }
        tx.execute(ExecType::Commit)
            .await
            .expect("inserts into freed memory");
    });
    f.check_unaffected();
}

#[test]
fn client_killed_mid_batch() {
    let mut f = Fixture::new();
    let addr = f.cluster.mgmd_addr.clone();
    // A flexasynch with many transactions in flight, killed with SIGKILL.
    let mut bench = std::process::Command::new(common::SHOAL)
        .args([
            "bench",
            "flexasynch",
            "-t",
            "1",
            "-p",
            "128",
            "-o",
            "1000000",
            "-a",
            "2",
            "--connect",
            &addr,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Let it get going: wait until rows appear.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while f.cluster.datanode_status().rows < ROWS + 1000 {
        assert!(
            std::time::Instant::now() < deadline,
            "flexasynch made no progress"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    bench.kill().unwrap();
    bench.wait().unwrap();
    f.check_unaffected();
    // Its transactions are gone and its locks released: the node reports
    // no open transactions once it noticed the disconnect, and a second
    // flexasynch (which first deletes leftover rows, taking every lock)
    // runs to the end.
    let out = f.cluster.shoal(&[
        "bench",
        "flexasynch",
        "-t",
        "1",
        "-p",
        "32",
        "-o",
        "20",
        "-a",
        "2",
        "--connect",
        &addr,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    f.check_unaffected();
}

#[test]
fn oversized_transaction_is_refused_by_the_client() {
    let mut f = Fixture::new();
    f.rt.block_on(async {
        let rec = f.client.table("t").await.unwrap().full_record();
        let mut tx = f.client.transaction();
        // 100k operations exceed max_operations_per_transaction (and a frame).
        let mut refused = None;
        for k in 0..100_000u64 {
            if let Err(e) = tx.insert(
                &rec,
                &[
                    Value::UInt(10_000 + k),
                    Value::Int(0),
                    Value::Str("0123456789".into()),
                ],
            ) {
                refused = Some(e);
                break;
            }
        }
        let err = match refused {
            Some(e) => e,
            None => tx.execute(ExecType::Commit).await.unwrap_err(),
        };
        assert!(
            matches!(
                err.code,
                ErrorCode::RequestTooLarge | ErrorCode::TooManyOperations
            ),
            "{err}"
        );
    });
    f.check_unaffected();
}

/// A valid request whose answer would not fit one frame (400 committed
/// reads of a 28 KB row: 11 MB against an 8 MB frame) fails with
/// `RequestTooLarge` and a message saying what to do; the node, its other
/// clients and the rows are unaffected, and a smaller read of the same
/// row works.
#[test]
fn an_answer_larger_than_a_frame_is_refused() {
    let mut f = Fixture::new();
    let client = f.client.clone();
    f.rt.block_on(async {
        let wide = client
            .create_table(
                TableDef::new(
                    "wide",
                    vec![
                        ColumnDef::new("id", ColumnType::Int { unsigned: true }),
                        ColumnDef::new("blob", ColumnType::VarBinary(28_000)),
                    ],
                    &["id"],
                )
                .unwrap(),
            )
            .await
            .expect("create table");
        let rec = wide.full_record();
        let mut tx = client.transaction();
        tx.insert(&rec, &[Value::UInt(1), Value::Bytes(vec![7u8; 28_000])])
            .unwrap();
        tx.execute(ExecType::Commit).await.expect("insert the row");

        let mut tx = client.transaction();
        for _ in 0..400 {
            tx.read(&rec, &[Value::UInt(1)], LockMode::CommittedRead)
                .unwrap();
        }
        let e = tx.execute(ExecType::Commit).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::RequestTooLarge, "{e}");
        assert!(e.detail.contains("read fewer rows"), "{e}");

        let mut tx = client.transaction();
        let reads: Vec<_> = (0..100)
            .map(|_| {
                tx.read(&rec, &[Value::UInt(1)], LockMode::CommittedRead)
                    .unwrap()
            })
            .collect();
        tx.execute(ExecType::Commit).await.expect("100 reads fit");
        let row = tx.row(reads[99]).expect("the row");
        assert_eq!(row.get("blob"), Some(Value::Bytes(vec![7u8; 28_000])));
    });
    f.check_unaffected();
}
