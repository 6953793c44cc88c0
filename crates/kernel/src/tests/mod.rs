//! Unit tests of the data node blocks through `DataNode`, the way a driver
//! uses them: client signals in, client signals out, time passed in.
//! (The simulator, crates/sim, runs thousands of random transactions
//! against a model; these pin down specific behaviours.)

use crate::{ConnId, DataNode, KernelConfig, Output};
use shoal_types::{
    ColumnDef, ColumnType, ErrorCode, RowLayout, SchemaVersion, TableDef, TableId, TransId, Value,
};
use shoal_wire::{
    ExecType, KeyOp, LockMode, OpType, Signal, TcKeyConf, TcKeyReq, TransState, ALL_COLUMNS,
    OP_IGNORE_ERROR,
};

mod durability;
mod read_backup;
mod scans;
mod unique;

const T: TableId = TableId(7);
const V: SchemaVersion = SchemaVersion(3);

fn table() -> TableDef {
    let mut def = TableDef::new(
        "t",
        vec![
            ColumnDef::new("k", ColumnType::Int { unsigned: true }),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
            ColumnDef::new("s", ColumnType::VarChar(200)).nullable(),
        ],
        &["k"],
    )
    .unwrap();
    def.id = T;
    def.version = V;
    def
}

struct Harness {
    node: DataNode,
    def: TableDef,
    layout: RowLayout,
    now: u64,
    /// A test's transaction (connection, number) → the id it has on the
    /// wire and its next request number. Wire ids grow per connection, as
    /// the node requires; a test may reuse a number once its transaction
    /// ended.
    wire: std::collections::HashMap<(ConnId, u64), (TransId, u32)>,
    next_wire_id: u64,
}

impl Harness {
    fn new(cfg: KernelConfig) -> Harness {
        Harness::with_table(cfg, table())
    }

    fn with_table(cfg: KernelConfig, def: TableDef) -> Harness {
        let mut node = DataNode::new(cfg, 0);
        node.create_table(&def);
        // Alone, the node forms its cluster at its first tick.
        node.tick(1_000, &mut Vec::new());
        assert_eq!(node.role(), crate::NodeRole::Started);
        let layout = RowLayout::new(&def);
        Harness {
            node,
            def,
            layout,
            now: 1_000,
            wire: Default::default(),
            next_wire_id: 1,
        }
    }

    /// Forgets the wire ids of transactions that `out` ends.
    fn observe(&mut self, out: &[Output]) {
        for o in out {
            let Output::Send { conn, signal } = o else {
                continue;
            };
            let ended = match signal {
                Signal::TcKeyConf(c) if c.state != TransState::Open => c.trans,
                Signal::TcKeyRef(r) => r.trans,
                _ => continue,
            };
            self.wire
                .retain(|&(c, _), (id, _)| !(c == *conn && *id == ended));
        }
    }

    fn key(&self, k: u32) -> Vec<u8> {
        let mut out = Vec::new();
        self.layout
            .encode_key(&[Value::UInt(u64::from(k))], &mut out)
            .unwrap();
        out
    }

    fn op(&self, op: OpType, k: u32, v: i64, s: &str) -> KeyOp {
        let mut attrs = Vec::new();
        if matches!(op, OpType::Insert | OpType::Update | OpType::Write) {
            // Key columns travel in the key, not in the attribute list.
            let (vv, sv) = (Value::Int(v), Value::Str(s.into()));
            shoal_types::layout::encode_attrs(&self.def, &[(1, &vv), (2, &sv)], &mut attrs)
                .unwrap();
        } else if op == OpType::Read {
            attrs.extend_from_slice(&ALL_COLUMNS.to_le_bytes());
        }
        KeyOp::new(op, LockMode::CommittedRead, 0, T, V, &self.key(k), &attrs)
    }

    fn read(&self, k: u32, lock: LockMode) -> KeyOp {
        let mut op = self.op(OpType::Read, k, 0, "");
        op.lock = lock;
        op
    }

    fn send(&mut self, conn: ConnId, trans: u64, exec: ExecType, ops: Vec<KeyOp>) -> Vec<Output> {
        let req = self.request(conn, trans, exec, ops);
        let out = self.send_raw(conn, req);
        self.observe(&out);
        out
    }

    /// The next request of the test's transaction `trans` on `conn`, with
    /// its wire id and request number.
    fn request(&mut self, conn: ConnId, trans: u64, exec: ExecType, ops: Vec<KeyOp>) -> TcKeyReq {
        let next_id = &mut self.next_wire_id;
        let (id, request) = self.wire.entry((conn, trans)).or_insert_with(|| {
            *next_id += 1;
            (TransId(*next_id), 0)
        });
        let req = TcKeyReq {
            trans: *id,
            request: *request,
            exec,
            durable: false,
            ops,
        };
        *request += 1;
        req
    }

    /// Sends exactly this request.
    fn send_raw(&mut self, conn: ConnId, req: TcKeyReq) -> Vec<Output> {
        let mut out = Vec::new();
        self.node
            .client_signal(self.now, conn, Signal::TcKeyReq(req), &mut out)
            .unwrap();
        out
    }

    fn tick(&mut self, ms: u64) -> Vec<Output> {
        let mut out = Vec::new();
        let end = self.now + ms;
        while self.now < end {
            self.now += 10;
            self.node.tick(self.now, &mut out);
        }
        self.observe(&out);
        out
    }

    /// Commits one transaction and expects success.
    fn commit(&mut self, ops: Vec<KeyOp>) -> TcKeyConf {
        let out = self.send(1, 1_000_000 + self.now, ExecType::Commit, ops);
        conf(&out)
    }

    /// The (v, s) a committed read of `k` returns, or None if not found.
    fn value(&mut self, k: u32) -> Option<(i64, Option<String>)> {
        let mut op = self.read(k, LockMode::CommittedRead);
        op.flags = OP_IGNORE_ERROR;
        let c = self.commit(vec![op]);
        if c.results[0].code == ErrorCode::TupleNotFound as u16 {
            return None;
        }
        let (attrs, _) = shoal_types::AttrSlice::parse(&c.results[0].data).unwrap();
        let mut v = None;
        let mut s = None;
        for (col, bytes) in attrs.iter() {
            match col {
                1 => v = bytes.map(|b| shoal_types::value::decode_value(self.def.columns[1].ty, b)),
                2 => s = bytes.map(|b| shoal_types::value::decode_value(self.def.columns[2].ty, b)),
                _ => {}
            }
        }
        let v = match v {
            Some(Value::Int(v)) => v,
            other => panic!("v is {other:?}"),
        };
        let s = s.map(|s| match s {
            Value::Str(s) => s,
            other => panic!("s is {other:?}"),
        });
        Some((v, s))
    }
}

fn conf(out: &[Output]) -> TcKeyConf {
    match out {
        [Output::Send {
            signal: Signal::TcKeyConf(c),
            ..
        }] => c.clone(),
        other => panic!("expected one TcKeyConf, got {other:?}"),
    }
}

fn refused(out: &[Output]) -> (u16, u16) {
    match out {
        [Output::Send {
            signal: Signal::TcKeyRef(r),
            ..
        }] => (r.code, r.op_index),
        other => panic!("expected one TcKeyRef, got {other:?}"),
    }
}

/// An output carries a signal out of the node by value; within 128 bytes
/// its moves stay inline copies (see `per_operation_signals_stay_small`
/// in the wire crate).
#[test]
#[cfg(target_pointer_width = "64")]
fn outputs_stay_small() {
    assert!(std::mem::size_of::<Output>() <= 128);
}

#[test]
fn insert_read_update_delete() {
    let mut h = Harness::new(KernelConfig::default());
    let ins = h.op(OpType::Insert, 1, 10, "ten");
    let c = h.commit(vec![ins]);
    assert_eq!(c.state, TransState::Committed);
    assert_eq!(h.value(1), Some((10, Some("ten".into()))));
    let upd = h.op(OpType::Update, 1, 11, &"x".repeat(150));
    h.commit(vec![upd]);
    assert_eq!(h.value(1), Some((11, Some("x".repeat(150)))));
    let del = h.op(OpType::Delete, 1, 0, "");
    h.commit(vec![del]);
    assert_eq!(h.value(1), None);
    let s = h.node.stats();
    assert_eq!((s.rows, s.transactions, s.operations), (0, 0, 0));
}

#[test]
fn errors_abort_unless_ignored() {
    let mut h = Harness::new(KernelConfig::default());
    let ins = h.op(OpType::Insert, 1, 1, "a");
    h.commit(vec![ins]);
    // Insert of an existing key: 630, and the whole transaction (with its
    // other insert) has no effect.
    let ops = vec![
        h.op(OpType::Insert, 2, 2, "b"),
        h.op(OpType::Insert, 1, 1, "a"),
    ];
    let out = h.send(1, 5, ExecType::Commit, ops);
    assert_eq!(refused(&out), (ErrorCode::TupleAlreadyExists as u16, 1));
    assert_eq!(h.value(2), None);
    // Update of a missing key with IGNORE_ERROR: reported per op, the rest commits.
    let mut missing = h.op(OpType::Update, 9, 9, "");
    missing.flags = OP_IGNORE_ERROR;
    let ops = vec![missing, h.op(OpType::Insert, 2, 2, "b")];
    let c = h.commit(ops);
    assert_eq!(c.results[0].code, ErrorCode::TupleNotFound as u16);
    assert_eq!(c.results[1].code, 0);
    assert_eq!(h.value(2), Some((2, Some("b".into()))));
}

#[test]
fn unknown_table_and_stale_version() {
    let mut h = Harness::new(KernelConfig::default());
    let mut op = h.op(OpType::Insert, 1, 1, "a");
    op.table = TableId(99);
    let out = h.send(1, 1, ExecType::Commit, vec![op]);
    assert_eq!(refused(&out).0, ErrorCode::NoSuchTable as u16);
    let mut op = h.op(OpType::Insert, 1, 1, "a");
    op.version = SchemaVersion(2);
    let out = h.send(1, 2, ExecType::Commit, vec![op]);
    assert_eq!(refused(&out).0, ErrorCode::InvalidSchemaVersion as u16);
    // After a drop, the table is unknown.
    let mut out = Vec::new();
    h.node.drop_table(h.now, T, &mut out);
    let op = h.op(OpType::Insert, 1, 1, "a");
    let out = h.send(1, 3, ExecType::Commit, vec![op]);
    assert_eq!(refused(&out).0, ErrorCode::NoSuchTable as u16);
    // Nothing of the refused writes stays behind.
    let s = h.node.stats();
    assert_eq!((s.transactions, s.operations, s.lqh_records), (0, 0, 0));
}

#[test]
fn no_commit_keeps_locks_and_own_writes_visible() {
    let mut h = Harness::new(KernelConfig::default());
    let ins = h.op(OpType::Insert, 1, 1, "a");
    h.commit(vec![ins]);
    // Transaction 10 updates row 1 and stays open.
    let upd = h.op(OpType::Update, 1, 2, "b");
    let c = conf(&h.send(1, 10, ExecType::NoCommit, vec![upd]));
    assert_eq!(c.state, TransState::Open);
    // It reads its own write.
    let own = h.read(1, LockMode::Shared);
    let c = conf(&h.send(1, 10, ExecType::NoCommit, vec![own]));
    assert!(!c.results[0].data.is_empty());
    // A committed read by another transaction sees the old value, unblocked.
    assert_eq!(h.value(1), Some((1, Some("a".into()))));
    // A shared read by another transaction waits for the lock.
    let other = h.read(1, LockMode::Shared);
    assert!(
        h.send(2, 20, ExecType::Commit, vec![other]).is_empty(),
        "waits for the lock"
    );
    // Commit of transaction 10 answers it, then the waiter gets the new value.
    let out = h.send(1, 10, ExecType::Commit, vec![]);
    assert_eq!(out.len(), 2, "{out:?}");
    assert_eq!(h.value(1), Some((2, Some("b".into()))));
    let s = h.node.stats();
    assert_eq!((s.transactions, s.operations), (0, 0));
}

#[test]
fn rollback_undoes_everything() {
    let mut h = Harness::new(KernelConfig::default());
    let ins = h.op(OpType::Insert, 1, 1, "a");
    h.commit(vec![ins]);
    let ops = vec![
        h.op(OpType::Update, 1, 5, "long value"),
        h.op(OpType::Insert, 2, 2, "b"),
        h.op(OpType::Delete, 1, 0, ""),
    ];
    conf(&h.send(1, 10, ExecType::NoCommit, ops));
    let c = conf(&h.send(1, 10, ExecType::Rollback, vec![]));
    assert_eq!(c.state, TransState::Aborted);
    assert_eq!(h.value(1), Some((1, Some("a".into()))));
    assert_eq!(h.value(2), None);
    assert_eq!(h.node.stats().rows, 1);
}

#[test]
fn deadlock_times_out_one_transaction() {
    let mut h = Harness::new(KernelConfig {
        deadlock_timeout_ms: 500,
        ..KernelConfig::default()
    });
    let ops = vec![
        h.op(OpType::Insert, 1, 1, ""),
        h.op(OpType::Insert, 2, 2, ""),
    ];
    h.commit(ops);
    // A locks 1, B locks 2, then each wants the other's row.
    let a1 = h.read(1, LockMode::Exclusive);
    conf(&h.send(1, 100, ExecType::NoCommit, vec![a1]));
    let b2 = h.read(2, LockMode::Exclusive);
    conf(&h.send(2, 200, ExecType::NoCommit, vec![b2]));
    let a2 = h.read(2, LockMode::Exclusive);
    assert!(h.send(1, 100, ExecType::NoCommit, vec![a2]).is_empty());
    let b1 = h.read(1, LockMode::Exclusive);
    assert!(h.send(2, 200, ExecType::NoCommit, vec![b1]).is_empty());
    // Both waits pass the timeout in the same tick. Only the older one
    // (A's) fails; its abort releases row 1, so B's wait is granted.
    h.now += 600;
    let mut out = Vec::new();
    h.node.tick(h.now, &mut out);
    let mut answers: Vec<(ConnId, u16)> = out
        .iter()
        .map(|o| match o {
            Output::Send {
                conn,
                signal: Signal::TcKeyRef(r),
            } => (*conn, r.code),
            Output::Send {
                conn,
                signal: Signal::TcKeyConf(_),
            } => (*conn, 0),
            other => panic!("{other:?}"),
        })
        .collect();
    answers.sort_unstable();
    assert_eq!(
        answers,
        vec![(1, ErrorCode::DeadlockTimeout as u16), (2, 0)]
    );
    // B now holds both rows and commits.
    let upd = h.op(OpType::Update, 1, 11, "b");
    let c = conf(&h.send(2, 200, ExecType::Commit, vec![upd]));
    assert_eq!(c.state, TransState::Committed);
    assert_eq!(h.value(1), Some((11, Some("b".into()))));
}

#[test]
fn inactive_transaction_is_aborted() {
    let mut h = Harness::new(KernelConfig {
        transaction_inactive_timeout_ms: 300,
        ..KernelConfig::default()
    });
    let ins = h.op(OpType::Insert, 1, 1, "a");
    conf(&h.send(1, 10, ExecType::NoCommit, vec![ins]));
    h.tick(400);
    // The row insert was undone and the locks released.
    assert_eq!(h.value(1), None);
    let out = h.send(1, 10, ExecType::Commit, vec![]);
    assert_eq!(refused(&out).0, ErrorCode::InactiveTimeout as u16);

    // A request that arrives after the timeout but before the next tick
    // (the node was paused, or busy) finds the transaction expired too.
    let ins = h.op(OpType::Insert, 2, 1, "b");
    conf(&h.send(1, 11, ExecType::NoCommit, vec![ins]));
    h.now += 1_000;
    let out = h.send(1, 11, ExecType::Commit, vec![]);
    assert_eq!(refused(&out), (ErrorCode::InactiveTimeout as u16, 0xFFFF));
    assert_eq!(h.value(2), None);
}

#[test]
fn client_disconnect_aborts_its_transactions() {
    let mut h = Harness::new(KernelConfig::default());
    let ins = h.op(OpType::Insert, 1, 1, "a");
    conf(&h.send(5, 10, ExecType::NoCommit, vec![ins]));
    let mut out = Vec::new();
    h.node.client_disconnected(h.now, 5, &mut out);
    assert!(out.is_empty(), "nothing is sent to a gone client: {out:?}");
    assert_eq!(h.value(1), None);
    let s = h.node.stats();
    assert_eq!((s.transactions, s.operations, s.rows), (0, 0, 0));
}

#[test]
fn transaction_limits() {
    let mut h = Harness::new(KernelConfig {
        max_concurrent_transactions: 2,
        max_operations_per_transaction: 3,
        ..KernelConfig::default()
    });
    let ops: Vec<_> = (0..4).map(|k| h.op(OpType::Insert, k, 0, "")).collect();
    // Too many operations in one transaction can never succeed: permanent.
    let out = h.send(1, 1, ExecType::Commit, ops);
    assert_eq!(refused(&out).0, ErrorCode::RequestTooLarge as u16);
    let a = h.op(OpType::Insert, 1, 0, "");
    conf(&h.send(1, 2, ExecType::NoCommit, vec![a]));
    let b = h.op(OpType::Insert, 2, 0, "");
    conf(&h.send(1, 3, ExecType::NoCommit, vec![b]));
    let c = h.op(OpType::Insert, 3, 0, "");
    let out = h.send(1, 4, ExecType::Commit, vec![c]);
    assert_eq!(refused(&out).0, ErrorCode::TooManyTransactions as u16);
    assert_eq!(
        ErrorCode::TooManyTransactions.class(),
        shoal_types::ErrorClass::Temporary
    );
}

#[test]
fn out_of_memory_keeps_reads_updates_and_deletes_working() {
    let mut h = Harness::new(KernelConfig {
        data_memory_bytes: 256 * 1024,
        ..KernelConfig::default()
    });
    let mut n = 0;
    let code = loop {
        let ins = h.op(OpType::Insert, n, i64::from(n), &"v".repeat(100));
        let out = h.send(1, u64::from(n) + 1, ExecType::Commit, vec![ins]);
        match &out[..] {
            [Output::Send {
                signal: Signal::TcKeyConf(_),
                ..
            }] => n += 1,
            _ => break refused(&out).0,
        }
        assert!(n < 100_000, "memory limit never reached");
    };
    assert_eq!(code, ErrorCode::OutOfDataMemory as u16);
    assert!(n > 100);
    // Reads, same-size updates and deletes still work.
    assert_eq!(h.value(0), Some((0, Some("v".repeat(100)))));
    let upd = h.op(OpType::Update, 0, -1, &"w".repeat(100));
    h.commit(vec![upd]);
    assert_eq!(h.value(0), Some((-1, Some("w".repeat(100)))));
    let deletes: Vec<_> = (0..n / 2).map(|k| h.op(OpType::Delete, k, 0, "")).collect();
    h.commit(deletes);
    // Freed memory is reused by new inserts.
    let inserts: Vec<_> = (n..n + n / 4)
        .map(|k| h.op(OpType::Insert, k, 0, &"z".repeat(100)))
        .collect();
    let c = h.commit(inserts);
    assert!(c.results.iter().all(|r| r.code == 0));
}

#[test]
fn client_may_not_send_node_signals() {
    let mut h = Harness::new(KernelConfig::default());
    let mut out = Vec::new();
    let bogus = Signal::TcKeyConf(TcKeyConf {
        trans: TransId(1),
        request: 0,
        state: TransState::Committed,
        ack_wanted: false,
        results: vec![],
    });
    let err = h.node.client_signal(h.now, 1, bogus, &mut out).unwrap_err();
    assert_eq!(err.code, ErrorCode::ProtocolViolation);
    // Nor a node-to-node signal (it could abort anyone's transaction).
    let forged = Signal::Node(crate::signal::BlockSignal::AbortReq {
        txn: crate::signal::first_txn_ref(1, 1),
        node: 1,
    });
    let err = h
        .node
        .client_signal(h.now, 1, forged, &mut out)
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::ProtocolViolation);
    assert!(err.detail.contains("AbortReq"), "{err}");
    assert!(out.is_empty());
}

#[test]
fn rows_spread_over_fragments_and_a_key_prefix_keeps_them_together() {
    use shoal_types::distribution::DistributionSpec;
    let mut def = TableDef::new(
        "orders",
        vec![
            ColumnDef::new("customer", ColumnType::Int { unsigned: true }),
            ColumnDef::new("order_no", ColumnType::Int { unsigned: true }),
            ColumnDef::new("amount", ColumnType::BigInt { unsigned: false }),
        ],
        &["customer", "order_no"],
    )
    .unwrap();
    def.id = TableId(9);
    def.version = SchemaVersion(1);
    def.options.distribution_key_columns = Some(1);
    def.distribution = Some(DistributionSpec::single_node(1, 8));
    let layout = RowLayout::new(&def);
    let mut node = DataNode::new(KernelConfig::default(), 0);
    node.create_table(&def);
    node.tick(10, &mut Vec::new());
    let op = |customer: u64, order: u64, op: OpType| {
        let mut key = Vec::new();
        layout
            .encode_key(&[Value::UInt(customer), Value::UInt(order)], &mut key)
            .unwrap();
        let mut attrs = Vec::new();
        if op == OpType::Insert {
            let amount = Value::Int((customer * 100 + order) as i64);
            shoal_types::layout::encode_attrs(&def, &[(2, &amount)], &mut attrs).unwrap();
        } else {
            attrs.extend_from_slice(&ALL_COLUMNS.to_le_bytes());
        }
        KeyOp::new(
            op,
            LockMode::CommittedRead,
            0,
            def.id,
            def.version,
            &key,
            &attrs,
        )
    };
    // Customer c has c+1 orders, one customer per transaction.
    let mut out = Vec::new();
    for c in 0..40u64 {
        let ops = (0..=c).map(|o| op(c, o, OpType::Insert)).collect();
        let req = TcKeyReq {
            trans: TransId(c + 1),
            request: 0,
            exec: ExecType::Commit,
            durable: false,
            ops,
        };
        node.client_signal(0, 1, Signal::TcKeyReq(req), &mut out)
            .unwrap();
        conf(&out);
        out.clear();
    }
    let per_fragment = node.fragment_rows(def.id);
    assert_eq!(per_fragment.len(), 8);
    let total: u64 = per_fragment.iter().map(|(_, n)| n).sum();
    assert_eq!(total, (1..=40).sum::<u64>());
    let used = per_fragment.iter().filter(|(_, n)| *n > 0).count();
    assert!(
        used >= 6,
        "40 customers should reach most of 8 fragments: {per_fragment:?}"
    );
    // Every row of one customer is in one fragment: the row counts are
    // sums of whole customers' order counts, and all rows read back.
    let ops = (0..40u64)
        .flat_map(|c| (0..=c).map(move |o| (c, o)))
        .map(|(c, o)| op(c, o, OpType::Read))
        .collect();
    let req = TcKeyReq {
        trans: TransId(1000),
        request: 0,
        exec: ExecType::Commit,
        durable: false,
        ops,
    };
    node.client_signal(0, 1, Signal::TcKeyReq(req), &mut out)
        .unwrap();
    let c = conf(&out);
    assert!(c.results.iter().all(|r| r.code == 0 && !r.data.is_empty()));
    let route = node.dih().table(def.id).unwrap();
    for cust in 0..40u64 {
        let frags: std::collections::BTreeSet<_> = (0..=cust)
            .map(|o| route.fragment_of(op(cust, o, OpType::Read).key()))
            .collect();
        assert_eq!(frags.len(), 1, "customer {cust} spread over {frags:?}");
    }
}

/// The test table with one fragment in one node group of nodes 1 and 2
/// (node 1 its primary); `read_backup` as asked.
fn one_fragment_on_two_nodes(read_backup: bool) -> TableDef {
    use shoal_types::distribution::DistributionSpec;
    let mut def = table();
    def.options.read_backup = read_backup;
    def.distribution = Some(DistributionSpec {
        version: 1,
        node_groups: vec![vec![1, 2]],
        fragments_per_group: 1,
    });
    def
}

/// Data nodes 1 and 2, one node group, holding `def` (if any), linked to
/// each other but in no cluster yet.
fn two_linked_nodes(def: Option<&TableDef>, faults: crate::Faults) -> Vec<DataNode> {
    let mut nodes: Vec<DataNode> = [1u16, 2]
        .iter()
        .map(|&node_id| {
            let mut n = DataNode::new(
                KernelConfig {
                    node_id,
                    data_nodes: vec![1, 2],
                    node_groups: vec![vec![1, 2]],
                    arbitration_timeout_ms: 500,
                    faults: faults.clone(),
                    ..KernelConfig::default()
                },
                0,
            );
            if let Some(def) = def {
                n.create_table(def);
            }
            n
        })
        .collect();
    let mut out = Vec::new();
    for (i, peer) in [(0usize, 2u16), (1, 1)] {
        let mut o = Vec::new();
        nodes[i].peer_linked(0, peer, 1, &mut o);
        let from = nodes[i].node_id();
        out.extend(o.into_iter().map(|o| (from, o)));
    }
    crate::testkit::deliver(&mut nodes, 0, out);
    nodes
}

/// Runs `nodes` from `now_ms` in steps of 10 ms until one asks the
/// arbitrator (or `until_ms`); returns the time and what was asked.
fn run_until_asked(nodes: &mut [DataNode], mut now_ms: u64, until_ms: u64) -> (u64, Vec<Vec<u16>>) {
    let mut asked = Vec::new();
    while asked.is_empty() && now_ms < until_ms {
        now_ms += 10;
        let mut out = Vec::new();
        for n in nodes.iter_mut() {
            let mut o = Vec::new();
            n.tick(now_ms, &mut o);
            out.extend(o.into_iter().map(|o| (n.node_id(), o)));
        }
        for o in crate::testkit::deliver(nodes, now_ms, out) {
            if let Output::Arbitrate { survivors, .. } = o {
                asked.push(survivors);
            }
        }
    }
    (now_ms, asked)
}

/// Two data nodes with two replicas of the test table's one fragment
/// (node 1 its primary), formed into a cluster.
fn two_replicas_one_fragment() -> Vec<DataNode> {
    let def = one_fragment_on_two_nodes(false);
    let mut nodes = two_linked_nodes(Some(&def), crate::Faults::default());
    crate::testkit::form_cluster(&mut nodes, 0);
    nodes
}

/// Two data nodes with two replicas, driven by hand: shows where the
/// transaction's state lives while it commits.
#[test]
fn replicas_keep_what_a_takeover_needs() {
    use crate::signal::BlockSignal;
    let mut nodes = two_replicas_one_fragment();
    let h = Harness::new(KernelConfig::default());
    // The one fragment's primary is node 1: a write runs 1 -> 2.
    let send = |nodes: &mut Vec<DataNode>, request, exec, ops| {
        let mut out = Vec::new();
        let req = TcKeyReq {
            trans: TransId(5),
            request,
            exec,
            durable: false,
            ops,
        };
        nodes[0]
            .client_signal(0, 9, Signal::TcKeyReq(req), &mut out)
            .unwrap();
        out
    };
    // Delivers node-to-node signals one at a time until `stop` says so.
    let run =
        |nodes: &mut Vec<DataNode>, mut out: Vec<Output>, stop: &dyn Fn(&BlockSignal) -> bool| {
            let mut client = Vec::new();
            let mut queue: std::collections::VecDeque<(u16, BlockSignal)> = Default::default();
            let mut from = 1;
            loop {
                for o in out.drain(..) {
                    match o {
                        Output::ToNode { signal, .. } => queue.push_back((from, signal)),
                        Output::Send { .. } => client.push(o),
                        _ => {}
                    }
                }
                let Some((sender, sig)) = queue.pop_front() else {
                    return (client, None);
                };
                if stop(&sig) {
                    return (client, Some(sig));
                }
                let to = sig.destination_node();
                from = to;
                nodes[to as usize - 1].node_signal(0, sender, sig, &mut out);
            }
        };
    let out = send(
        &mut nodes,
        0,
        ExecType::NoCommit,
        vec![h.op(OpType::Insert, 1, 10, "x")],
    );
    let (client, _) = run(&mut nodes, out, &|_| false);
    conf(&client);
    let backup = nodes[1].replica_transactions(1);
    assert_eq!(backup.len(), 1);
    assert_eq!(
        (
            backup[0].locked_rows,
            backup[0].pending_rows,
            backup[0].committed
        ),
        (1, 1, false)
    );

    // Commit: the backup commits first; hold its confirmation, so the
    // primary's round (local to the coordinator) has not started.
    let out = send(&mut nodes, 1, ExecType::Commit, vec![]);
    let backup_confirms = |s: &BlockSignal| matches!(s, BlockSignal::CommitConf { node: 2, .. });
    let (client, held) = run(&mut nodes, out, &backup_confirms);
    assert!(
        client.is_empty(),
        "no answer before every replica committed"
    );
    let backup = nodes[1].replica_transactions(1);
    assert_eq!(
        (backup[0].pending_rows, backup[0].committed),
        (0, true),
        "{backup:?}"
    );
    let primary = nodes[0].replica_transactions(1);
    assert_eq!(
        (primary[0].pending_rows, primary[0].committed),
        (1, false),
        "{primary:?}"
    );
    // The rest: primary commits, client hears, backups complete.
    let mut out = Vec::new();
    let held = held.expect("the backup's confirmation");
    nodes[0].node_signal(0, 2, held, &mut out);
    let (client, _) = run(&mut nodes, out, &|_| false);
    assert_eq!(conf(&client).state, TransState::Committed);
    assert!(nodes[0].replica_transactions(1).is_empty());
    assert!(
        nodes[1].replica_transactions(1).is_empty(),
        "complete released the backup"
    );
    for n in &nodes {
        assert_eq!(n.stats().rows, 1);
    }
}

/// A single-operation delete commits at its last replica (the row goes
/// at once, and the replica's record with it); an abort arriving there
/// afterwards (its coordinator, seeing the primary fail, aborted without
/// hearing the decision) must be answered "committed", from what the
/// replica remembers of the finished transaction.
#[test]
fn an_abort_after_a_last_replica_committed_delete_is_answered_committed() {
    use crate::signal::BlockSignal;
    let mut nodes = two_replicas_one_fragment();
    let h = Harness::new(KernelConfig::default());
    let deliver_all =
        |nodes: &mut Vec<DataNode>, mut out: Vec<Output>, stop: &dyn Fn(&BlockSignal) -> bool| {
            let mut queue: std::collections::VecDeque<(u16, BlockSignal)> = Default::default();
            let mut from = 1;
            loop {
                for o in out.drain(..) {
                    if let Output::ToNode { signal, .. } = o {
                        queue.push_back((from, signal));
                    }
                }
                let (sender, sig) = queue.pop_front()?;
                if stop(&sig) {
                    return Some(sig);
                }
                let to = sig.destination_node();
                from = to;
                nodes[to as usize - 1].node_signal(0, sender, sig, &mut out);
            }
        };
    let send = |nodes: &mut Vec<DataNode>, trans, op| {
        let mut out = Vec::new();
        let req = TcKeyReq {
            trans: TransId(trans),
            request: 0,
            exec: ExecType::Commit,
            durable: false,
            ops: vec![op],
        };
        nodes[0]
            .client_signal(0, 9, Signal::TcKeyReq(req), &mut out)
            .unwrap();
        out
    };
    let out = send(&mut nodes, 1, h.op(OpType::Insert, 1, 10, "x"));
    assert!(deliver_all(&mut nodes, out, &|_| false).is_none());
    let out = send(&mut nodes, 2, h.op(OpType::Delete, 1, 0, ""));
    let conf = deliver_all(&mut nodes, out, &|s| {
        matches!(s, BlockSignal::LqhKeyConf { .. })
    });
    let Some(BlockSignal::LqhKeyConf { txn, committed, .. }) = conf else {
        panic!("the last replica answers: {conf:?}");
    };
    assert!(committed, "the last replica decided");
    assert!(
        nodes[1].replica_transactions(1).is_empty(),
        "the committed delete finished the record"
    );
    let mut out = Vec::new();
    nodes[1].node_signal(0, 1, BlockSignal::AbortReq { txn, node: 2 }, &mut out);
    let answer = out.iter().find_map(|o| match o {
        Output::ToNode {
            signal: BlockSignal::AbortConf { committed, .. },
            ..
        } => Some(*committed),
        _ => None,
    });
    assert_eq!(answer, Some(true), "{out:?}");
}

#[test]
fn repeated_client_requests_run_once() {
    let mut h = Harness::new(KernelConfig::default());
    let req = |trans, request, exec, ops| TcKeyReq {
        trans: TransId(trans),
        request,
        exec,
        durable: false,
        ops,
    };
    let ins = h.op(OpType::Insert, 1, 10, "a");
    let first = req(50, 0, ExecType::NoCommit, vec![ins.clone()]);
    assert_eq!(conf(&h.send_raw(3, first.clone())).request, 0);
    // A repeat of a request the transaction took: dropped, no answer.
    assert!(h.send_raw(3, first.clone()).is_empty());
    // A request number that skips one: refused.
    let (code, _) = refused(&h.send_raw(3, req(50, 2, ExecType::Commit, vec![])));
    assert_eq!(code, ErrorCode::BadRequest as u16);
    let c = conf(&h.send_raw(3, req(50, 1, ExecType::Commit, vec![])));
    assert_eq!((c.request, c.state), (1, TransState::Committed));
    // After the end: a repeat of the first request is refused (ids must
    // grow), a repeat of a later one too; neither runs its operations.
    let (code, _) = refused(&h.send_raw(3, first));
    assert_eq!(code, ErrorCode::BadRequest as u16);
    let late = req(
        50,
        1,
        ExecType::Commit,
        vec![h.op(OpType::Delete, 1, 0, "")],
    );
    let (code, _) = refused(&h.send_raw(3, late));
    assert_eq!(code, ErrorCode::TransactionNotFound as u16);
    assert_eq!(
        h.value(1),
        Some((10, Some("a".into()))),
        "the delete never ran"
    );
    // An older id on another connection is fine: ids are per connection.
    let ins = h.op(OpType::Insert, 2, 20, "b");
    let c = conf(&h.send_raw(2, req(7, 0, ExecType::Commit, vec![ins])));
    assert_eq!(c.state, TransState::Committed);
}

/// The answers of a frame of requests on one connection held and run
/// together (`client_signal_held`, then `run_held`: the runtime's way,
/// which warms the rows of the queued operations first) are the answers
/// of the same requests taken one at a time.
#[test]
fn held_requests_answer_as_if_taken_one_at_a_time() {
    let mut one = Harness::new(KernelConfig::default());
    let mut held = Harness::new(KernelConfig::default());
    for h in [&mut one, &mut held] {
        for k in 0..100 {
            h.commit(vec![h.op(OpType::Insert, k, i64::from(k), "x")]);
        }
    }
    // Every request touches its own keys, so that no order between them
    // could change an answer: reads (found and missing), updates,
    // deletes, inserts (new and duplicate), a transaction of several
    // operations reading its own write, one left open, an unknown table.
    let requests = |h: &Harness| -> Vec<(u64, ExecType, Vec<KeyOp>)> {
        let mut r = Vec::new();
        for k in 0..20 {
            r.push((
                k,
                ExecType::Commit,
                vec![h.read(k as u32, LockMode::CommittedRead)],
            ));
        }
        r.push((
            20,
            ExecType::Commit,
            vec![h.read(500, LockMode::CommittedRead)],
        ));
        r.push((
            21,
            ExecType::Commit,
            vec![h.op(OpType::Update, 30, -30, "u")],
        ));
        r.push((22, ExecType::Commit, vec![h.op(OpType::Delete, 31, 0, "")]));
        r.push((
            23,
            ExecType::Commit,
            vec![h.op(OpType::Insert, 200, 2, "new")],
        ));
        r.push((
            24,
            ExecType::Commit,
            vec![h.op(OpType::Insert, 32, 2, "dup")],
        ));
        r.push((
            25,
            ExecType::Commit,
            vec![
                h.op(OpType::Update, 33, 333, "w"),
                h.read(33, LockMode::Shared),
                h.read(34, LockMode::Exclusive),
            ],
        ));
        r.push((
            26,
            ExecType::NoCommit,
            vec![h.op(OpType::Update, 35, 35, "open")],
        ));
        let mut unknown = h.read(36, LockMode::CommittedRead);
        unknown.table = TableId(99);
        r.push((27, ExecType::Commit, vec![unknown]));
        for k in 40..60 {
            r.push((
                k,
                ExecType::Commit,
                vec![h.read(k as u32, LockMode::Shared)],
            ));
        }
        r
    };
    let conn = 4;
    let mut answers_one = Vec::new();
    for (trans, exec, ops) in requests(&one) {
        answers_one.extend(one.send(conn, trans, exec, ops));
    }
    let mut answers_held = Vec::new();
    for (trans, exec, ops) in requests(&held) {
        let req = held.request(conn, trans, exec, ops);
        held.node
            .client_signal_held(held.now, conn, Signal::TcKeyReq(req), &mut answers_held)
            .unwrap();
    }
    held.node.run_held(held.now, &mut answers_held);
    held.observe(&answers_held);
    let sorted = |mut v: Vec<Output>| {
        let mut v: Vec<String> = v.drain(..).map(|o| format!("{o:?}")).collect();
        v.sort();
        v
    };
    assert_eq!(answers_one.len(), 48, "{answers_one:?}");
    assert_eq!(sorted(answers_one), sorted(answers_held));
    for k in [30, 31, 32, 33, 35, 200] {
        assert_eq!(one.value(k), held.value(k), "key {k}");
    }
}

#[test]
fn an_overloaded_link_refuses_new_operations_towards_it() {
    let mut nodes = two_replicas_one_fragment();
    let h = Harness::new(KernelConfig::default());
    // The fragment's primary is node 1; node 2 coordinates.
    let insert = |nodes: &mut Vec<DataNode>, trans: u64, k: u32| {
        let mut out = Vec::new();
        let req = TcKeyReq {
            trans: TransId(trans),
            request: 0,
            exec: ExecType::Commit,
            durable: false,
            ops: vec![h.op(OpType::Insert, k, 10, "x")],
        };
        nodes[1]
            .client_signal(0, 9, Signal::TcKeyReq(req), &mut out)
            .unwrap();
        let out = out.into_iter().map(|o| (2u16, o)).collect();
        crate::testkit::deliver(nodes, 0, out)
    };
    nodes[1].set_peer_overloaded(1, true);
    let (code, _) = refused(&insert(&mut nodes, 1, 1));
    assert_eq!(code, ErrorCode::SendBufferOverloaded as u16);
    assert_eq!(
        ErrorCode::SendBufferOverloaded.class(),
        shoal_types::ErrorClass::Temporary
    );
    // Drained: the same insert commits.
    nodes[1].set_peer_overloaded(1, false);
    assert_eq!(conf(&insert(&mut nodes, 2, 1)).state, TransState::Committed);
}

/// Two of three data nodes find no running cluster: after
/// `start_partial_timeout_ms` they ask the arbitrator before starting one
/// without the third, wait while it refuses (a cluster may run where they
/// cannot see it), and start once it agrees.
#[test]
fn a_partial_start_waits_for_the_arbitrator() {
    let mut nodes: Vec<DataNode> = [1u16, 2]
        .iter()
        .map(|&node_id| {
            DataNode::new(
                KernelConfig {
                    node_id,
                    data_nodes: vec![1, 2, 3],
                    node_groups: vec![vec![1, 2, 3]],
                    start_partial_timeout_ms: 1000,
                    arbitration_timeout_ms: 500,
                    ..KernelConfig::default()
                },
                0,
            )
        })
        .collect();
    let mut now_ms = 0;
    let mut out = Vec::new();
    for (i, peer) in [(0usize, 2u16), (1, 1)] {
        let mut o = Vec::new();
        nodes[i].peer_linked(now_ms, peer, 1, &mut o);
        let from = nodes[i].node_id();
        out.extend(o.into_iter().map(|o| (from, o)));
    }
    crate::testkit::deliver(&mut nodes, now_ms, out);
    // Runs the two nodes for `ms`; returns the arbitration requests made.
    let run = |nodes: &mut Vec<DataNode>, now_ms: &mut u64, ms: u64| {
        let mut asked = Vec::new();
        for _ in 0..ms / 10 {
            *now_ms += 10;
            let mut out = Vec::new();
            for n in nodes.iter_mut() {
                let mut o = Vec::new();
                n.tick(*now_ms, &mut o);
                out.extend(o.into_iter().map(|o| (n.node_id(), o)));
            }
            for o in crate::testkit::deliver(nodes, *now_ms, out) {
                if let Output::Arbitrate {
                    view, survivors, ..
                } = o
                {
                    asked.push((view, survivors));
                }
            }
        }
        asked
    };
    let asked = run(&mut nodes, &mut now_ms, 1500);
    assert_eq!(asked.first(), Some(&(0, vec![1, 2])), "{asked:?}");
    assert!(nodes.iter().all(|n| n.role() == crate::NodeRole::Joining));
    // Refused: no cluster forms, and the question is asked again later.
    let mut o = Vec::new();
    nodes[0].arbitration_result(now_ms, false, &mut o);
    let asked = run(&mut nodes, &mut now_ms, 3000);
    assert!(nodes.iter().all(|n| n.role() == crate::NodeRole::Joining));
    assert!(!asked.is_empty(), "asked again after a refusal");
    // Granted: the two form a cluster.
    let mut o = Vec::new();
    nodes[0].arbitration_result(now_ms, true, &mut o);
    let out = o.into_iter().map(|o| (1u16, o)).collect();
    crate::testkit::deliver(&mut nodes, now_ms, out);
    run(&mut nodes, &mut now_ms, 100);
    assert!(
        nodes.iter().all(|n| n.role() == crate::NodeRole::Started),
        "{:?}",
        nodes.iter().map(|n| n.role()).collect::<Vec<_>>()
    );
}

/// A start of every configured node asks the arbitrator too: what the
/// others last said of themselves ("fresh") may be stale — they may have
/// formed a partial cluster since, allowed by the arbitrator, its word
/// still on the way (sim seed 30431 formed a second cluster over a
/// running one that way, and their distribution states parted).
#[test]
fn a_start_of_every_node_waits_for_the_arbitrator_too() {
    let mut nodes = two_linked_nodes(None, crate::Faults::default());
    let (now_ms, asked) = run_until_asked(&mut nodes, 0, 1000);
    assert_eq!(asked.first(), Some(&vec![1, 2]), "{asked:?}");
    assert!(
        nodes.iter().all(|n| n.role() == crate::NodeRole::Joining),
        "formed before the arbitrator answered"
    );
    // Refused (another start was allowed just before): no cluster.
    let mut o = Vec::new();
    nodes[0].arbitration_result(now_ms, false, &mut o);
    assert!(nodes.iter().all(|n| n.role() == crate::NodeRole::Joining));
    // Allowed: the two form a cluster.
    let now_ms = crate::testkit::form_cluster(&mut nodes, now_ms);
    assert!(now_ms > 0);
    assert!(nodes.iter().all(|n| n.role() == crate::NodeRole::Started));
}

/// The former's `ViewCommit` reaches each node in its own time: a node
/// that committed the first view may already send a still-joining peer
/// an operation. The peer keeps it and runs it once the view is in force
/// there (sim seed 90711 hung a transaction forever when it was dropped).
#[test]
fn an_operation_that_reaches_a_node_before_its_first_view_runs_after_it() {
    use crate::signal::ClusterSignal;
    let def = one_fragment_on_two_nodes(false);
    let mut nodes = two_linked_nodes(Some(&def), crate::Faults::default());
    // Node 1 asks the arbitrator, then forms the view; its ViewCommit to
    // node 2 is held back.
    let (now_ms, asked) = run_until_asked(&mut nodes, 0, 10_000);
    assert!(!asked.is_empty(), "node 1 never asked the arbitrator");
    let mut formed = Vec::new();
    nodes[0].arbitration_result(now_ms, true, &mut formed);
    assert_eq!(nodes[0].role(), crate::NodeRole::Started);
    assert_eq!(nodes[1].role(), crate::NodeRole::Joining);
    let commit = formed
        .into_iter()
        .find_map(|o| match o {
            Output::ToNode { signal, .. }
                if matches!(signal.as_cluster(), Some(ClusterSignal::ViewCommit { .. })) =>
            {
                Some(signal)
            }
            _ => None,
        })
        .expect("the first view's commit to node 2");

    // A write on node 1 runs there and goes on to node 2, still joining.
    let h = Harness::new(KernelConfig::default());
    let req = TcKeyReq {
        trans: TransId(1),
        request: 0,
        exec: ExecType::Commit,
        durable: false,
        ops: vec![h.op(OpType::Insert, 1, 10, "x")],
    };
    let mut out = Vec::new();
    nodes[0]
        .client_signal(now_ms, 9, Signal::TcKeyReq(req), &mut out)
        .unwrap();
    for o in out {
        if let Output::ToNode { signal, .. } = o {
            let mut ignored = Vec::new();
            nodes[1].node_signal(now_ms, 1, signal, &mut ignored);
        }
    }
    // The view's commit arrives; the operation runs, the write commits.
    let mut out = Vec::new();
    nodes[1].node_signal(now_ms, 1, commit, &mut out);
    nodes[1].tick(now_ms + 1, &mut out);
    let out = out.into_iter().map(|o| (2u16, o)).collect();
    let client = crate::testkit::deliver(&mut nodes, now_ms + 1, out);
    let answer = client.iter().find_map(|o| match o {
        Output::Send {
            signal: Signal::TcKeyConf(c),
            ..
        } => Some(c.state),
        _ => None,
    });
    assert_eq!(answer, Some(TransState::Committed), "{client:?}");
}
