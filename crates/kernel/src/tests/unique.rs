//! Unique hash indexes through one data node: entries kept in the same
//! transaction as each write (and gone with its rollback), duplicates
//! refused, NULLs allowed, reads, updates and deletes by unique key, and
//! writes to an index's own table refused.

use super::*;
use shoal_types::schema::UniqueIndexDef;
use shoal_wire::OP_BY_UNIQUE_KEY;

const BY_V: TableId = TableId(8);
const BY_S: TableId = TableId(9);

struct Unique {
    h: Harness,
    by_v: TableDef,
    by_s: TableDef,
}

fn unique_index(base: &TableDef, name: &str, col: u16, id: TableId) -> (UniqueIndexDef, TableDef) {
    let u = UniqueIndexDef {
        name: name.into(),
        columns: vec![col],
        table: id,
        building: false,
    };
    let mut hidden = u.table_def(base).unwrap();
    hidden.id = id;
    hidden.version = SchemaVersion(1);
    (u, hidden)
}

impl Unique {
    fn new() -> Unique {
        Unique::with(false)
    }

    /// Both indexes listed as being built (`building`).
    fn with(building: bool) -> Unique {
        let mut base = table();
        let (mut u_v, by_v) = unique_index(&base, "by_v", 1, BY_V);
        let (mut u_s, by_s) = unique_index(&base, "by_s", 2, BY_S);
        u_v.building = building;
        u_s.building = building;
        base.unique_indexes = vec![u_v, u_s];
        base.validate().unwrap();
        let mut h = Harness::with_table(KernelConfig::default(), by_v.clone());
        h.node.create_table(&by_s);
        h.node.create_table(&base);
        h.layout = RowLayout::new(&base);
        h.def = base;
        Unique { h, by_v, by_s }
    }

    fn v_key(&self, v: i64) -> Vec<u8> {
        let mut out = Vec::new();
        RowLayout::new(&self.by_v)
            .encode_key(&[Value::Int(v)], &mut out)
            .unwrap();
        out
    }

    fn s_key(&self, s: &str) -> Vec<u8> {
        let mut out = Vec::new();
        RowLayout::new(&self.by_s)
            .encode_key(&[Value::Str(s.into())], &mut out)
            .unwrap();
        out
    }

    /// The base key an entry holds, if the entry exists.
    fn entry(&mut self, table: TableId, key: Vec<u8>) -> Option<Vec<u8>> {
        let mut attrs = 1u16.to_le_bytes().to_vec();
        attrs.extend_from_slice(&1u16.to_le_bytes()); // `$pk`, after one column
        let op = KeyOp::new(
            OpType::Read,
            LockMode::CommittedRead,
            OP_IGNORE_ERROR,
            table,
            SchemaVersion(1),
            &key,
            &attrs,
        );
        let c = self.h.commit(vec![op]);
        if c.results[0].code == ErrorCode::TupleNotFound as u16 {
            return None;
        }
        let (attrs, _) = shoal_types::AttrSlice::parse(&c.results[0].data).unwrap();
        let (col, pk) = attrs.iter().next().unwrap();
        assert_eq!(col, 1);
        Some(pk.unwrap().to_vec())
    }

    fn insert(&self, k: u32, v: i64, s: Option<&str>) -> KeyOp {
        let mut op = self.h.op(OpType::Insert, k, v, s.unwrap_or(""));
        if s.is_none() {
            let vv = Value::Int(v);
            op.encode_attrs(|buf| {
                shoal_types::layout::encode_attrs(&self.h.def, &[(1, &vv), (2, &Value::Null)], buf)
            })
            .unwrap();
        }
        op
    }

    /// `op` on the row whose v is `v`, by unique key.
    fn by_v(&self, mut op: KeyOp, v: i64) -> KeyOp {
        op.flags |= OP_BY_UNIQUE_KEY;
        op.table = BY_V;
        op.set_key(&self.v_key(v));
        op
    }
}

#[test]
fn entries_follow_inserts_updates_and_deletes() {
    let mut u = Unique::new();
    let op = u.insert(1, 10, Some("a"));
    u.h.commit(vec![op]);
    let (k1, v10, sa) = (u.h.key(1), u.v_key(10), u.s_key("a"));
    assert_eq!(u.entry(BY_V, v10.clone()), Some(k1.clone()));
    assert_eq!(u.entry(BY_S, sa.clone()), Some(k1.clone()));
    // An update of v moves its entry; s's stays.
    let upd = u.h.op(OpType::Update, 1, 20, "a");
    u.h.commit(vec![upd]);
    assert_eq!(u.entry(BY_V, v10.clone()), None);
    assert_eq!(u.entry(BY_V, u.v_key(20)), Some(k1.clone()));
    assert_eq!(u.entry(BY_S, sa.clone()), Some(k1.clone()));
    // The old value is free for another row.
    let op = u.insert(2, 10, Some("b"));
    u.h.commit(vec![op]);
    assert_eq!(u.entry(BY_V, v10.clone()), Some(u.h.key(2)));
    // A delete takes its entries with it.
    let del = u.h.op(OpType::Delete, 1, 0, "");
    u.h.commit(vec![del]);
    assert_eq!(u.entry(BY_V, u.v_key(20)), None);
    assert_eq!(u.entry(BY_S, sa), None);
    // Insert and update of one row in one request, then a write (upsert).
    let ops = vec![
        u.insert(3, 30, Some("c")),
        u.h.op(OpType::Update, 3, 31, "c"),
    ];
    u.h.commit(ops);
    assert_eq!(u.entry(BY_V, u.v_key(30)), None);
    assert_eq!(u.entry(BY_V, u.v_key(31)), Some(u.h.key(3)));
    let w = u.h.op(OpType::Write, 3, 32, "d");
    u.h.commit(vec![w]);
    assert_eq!(u.entry(BY_V, u.v_key(31)), None);
    assert_eq!(u.entry(BY_S, u.s_key("c")), None);
    assert_eq!(u.entry(BY_S, u.s_key("d")), Some(u.h.key(3)));
    let s = u.h.node.stats();
    assert_eq!(
        (s.transactions, s.operations),
        (0, 0),
        "nothing left behind"
    );
}

#[test]
fn a_duplicate_fails_the_transaction_and_leaves_nothing() {
    let mut u = Unique::new();
    let op = u.insert(1, 10, Some("a"));
    u.h.commit(vec![op]);
    let ops = vec![u.insert(2, 20, Some("b")), u.insert(3, 10, Some("c"))];
    let out = u.h.send(1, 5, ExecType::Commit, ops);
    let Output::Send {
        signal: Signal::TcKeyRef(r),
        ..
    } = &out[0]
    else {
        panic!("expected a refusal, got {out:?}");
    };
    assert_eq!(
        (r.code, r.op_index),
        (ErrorCode::TupleAlreadyExists as u16, 1)
    );
    assert!(r.detail.contains("by_v"), "{}", r.detail);
    assert_eq!(u.h.value(2), None);
    assert_eq!(u.h.value(3), None);
    assert_eq!(u.entry(BY_V, u.v_key(20)), None);
    assert_eq!(u.entry(BY_S, u.s_key("b")), None);
    // An update onto a taken value fails the same way.
    let op = u.insert(2, 20, Some("b"));
    u.h.commit(vec![op]);
    let upd = u.h.op(OpType::Update, 2, 10, "b");
    let out = u.h.send(1, 6, ExecType::Commit, vec![upd]);
    assert_eq!(refused(&out).0, ErrorCode::TupleAlreadyExists as u16);
    assert_eq!(u.h.value(2), Some((20, Some("b".into()))));
    assert_eq!(u.entry(BY_V, u.v_key(20)), Some(u.h.key(2)));
}

#[test]
fn nulls_have_no_entry_and_may_repeat() {
    let mut u = Unique::new();
    for k in 1..=3 {
        let op = u.insert(k, i64::from(k), None);
        u.h.commit(vec![op]);
    }
    assert_eq!(u.h.value(2), Some((2, None)));
    // Giving one row a value makes its entry; NULL again removes it.
    let upd = u.h.op(OpType::Update, 2, 2, "x");
    u.h.commit(vec![upd]);
    assert_eq!(u.entry(BY_S, u.s_key("x")), Some(u.h.key(2)));
    let op = u.insert(4, 4, None);
    u.h.commit(vec![op]);
    let mut to_null = u.h.op(OpType::Update, 2, 2, "");
    to_null
        .encode_attrs(|buf| shoal_types::layout::encode_attrs(&u.h.def, &[(2, &Value::Null)], buf))
        .unwrap();
    u.h.commit(vec![to_null]);
    assert_eq!(u.entry(BY_S, u.s_key("x")), None);
}

#[test]
fn a_rollback_takes_the_entries_with_it() {
    let mut u = Unique::new();
    let op = u.insert(1, 10, Some("a"));
    let out = u.h.send(1, 7, ExecType::NoCommit, vec![op]);
    assert_eq!(conf(&out).state, TransState::Open);
    let out = u.h.send(1, 7, ExecType::Rollback, vec![]);
    assert_eq!(conf(&out).state, TransState::Aborted);
    assert_eq!(u.entry(BY_V, u.v_key(10)), None);
    let op = u.insert(2, 10, Some("a"));
    u.h.commit(vec![op]);
    assert_eq!(u.entry(BY_V, u.v_key(10)), Some(u.h.key(2)));
}

#[test]
fn reads_updates_and_deletes_by_unique_key() {
    let mut u = Unique::new();
    let ops = vec![u.insert(1, 10, Some("a")), u.insert(2, 20, Some("b"))];
    u.h.commit(ops);
    // A read by v answers the base row's columns.
    let read = u.by_v(u.h.read(2, LockMode::Shared), 20);
    let c = u.h.commit(vec![read]);
    let (attrs, _) = shoal_types::AttrSlice::parse(&c.results[0].data).unwrap();
    let cols: Vec<_> = attrs
        .iter()
        .map(|(c, v)| (c, v.map(<[u8]>::to_vec)))
        .collect();
    assert_eq!(cols[0], (0, Some(2u32.to_le_bytes().to_vec())));
    // No such value: 626, or its result with IGNORE_ERROR.
    let missing = u.by_v(u.h.read(1, LockMode::CommittedRead), 99);
    let out = u.h.send(1, 8, ExecType::Commit, vec![missing.clone()]);
    assert_eq!(refused(&out), (ErrorCode::TupleNotFound as u16, 0));
    let mut ignored = missing;
    ignored.flags |= OP_IGNORE_ERROR;
    let ops = vec![ignored, u.by_v(u.h.read(1, LockMode::CommittedRead), 10)];
    let c = u.h.commit(ops);
    assert_eq!(c.results[0].code, ErrorCode::TupleNotFound as u16);
    assert_eq!(c.results[1].code, 0);
    // An update by v that changes v moves the entry.
    let upd = u.by_v(u.h.op(OpType::Update, 0, 11, "a2"), 10);
    u.h.commit(vec![upd]);
    assert_eq!(u.h.value(1), Some((11, Some("a2".into()))));
    assert_eq!(u.entry(BY_V, u.v_key(10)), None);
    assert_eq!(u.entry(BY_V, u.v_key(11)), Some(u.h.key(1)));
    // A delete by v.
    let del = u.by_v(u.h.op(OpType::Delete, 0, 0, ""), 20);
    u.h.commit(vec![del]);
    assert_eq!(u.h.value(2), None);
    assert_eq!(u.entry(BY_S, u.s_key("b")), None);
    // Inserts by unique key make no sense; a non-index table is refused.
    let ins = u.by_v(u.insert(5, 50, Some("e")), 50);
    let out = u.h.send(1, 9, ExecType::Commit, vec![ins]);
    assert_eq!(refused(&out).0, ErrorCode::BadRequest as u16);
    let mut not_index = u.h.read(1, LockMode::CommittedRead);
    not_index.flags |= OP_BY_UNIQUE_KEY;
    let out = u.h.send(1, 10, ExecType::Commit, vec![not_index]);
    assert_eq!(refused(&out).0, ErrorCode::NoSuchTable as u16);
    let s = u.h.node.stats();
    assert_eq!(
        (s.transactions, s.operations),
        (0, 0),
        "nothing left behind"
    );
}

#[test]
fn an_index_table_takes_no_writes_of_its_own() {
    let mut u = Unique::new();
    let op = entry_insert(&u, 10, 1);
    let out = u.h.send(1, 11, ExecType::Commit, vec![op]);
    assert_eq!(refused(&out).0, ErrorCode::BadRequest as u16);
    assert_eq!(u.entry(BY_V, u.v_key(10)), None);
}

/// An insert of the entry `v` → row `k` straight into index `by_v`.
fn entry_insert(u: &Unique, v: i64, k: u32) -> KeyOp {
    let mut attrs = 1u16.to_le_bytes().to_vec();
    shoal_types::layout::push_attr(&mut attrs, 1, Some(&u.h.key(k)));
    KeyOp::new(
        OpType::Insert,
        LockMode::Exclusive,
        0,
        BY_V,
        SchemaVersion(1),
        &u.v_key(v),
        &attrs,
    )
}

/// An entry of index `by_v` written directly (as a build does).
fn put_entry(u: &mut Unique, v: i64, k: u32) {
    let op = entry_insert(u, v, k);
    u.h.commit(vec![op]);
}

#[test]
fn while_building_an_entry_goes_only_with_its_own_row() {
    let mut u = Unique::with(true);
    // Rows the build has not reached: no entries yet.
    let ops = vec![u.insert(1, 10, Some("a")), u.insert(2, 20, Some("b"))];
    u.h.commit(ops);
    let k1 = u.h.key(1);
    assert_eq!(
        u.entry(BY_V, u.v_key(10)),
        Some(k1.clone()),
        "writes keep it already"
    );
    let del = u.h.op(OpType::Delete, 1, 0, "");
    let del_entry = KeyOp::new(
        OpType::Delete,
        LockMode::Exclusive,
        0,
        BY_V,
        SchemaVersion(1),
        &u.v_key(20),
        &[],
    );
    u.h.commit(vec![del_entry]);
    // Row 2 lost its entry (as if the build had not reached it); row 3
    // takes its value meanwhile (the build will find the clash).
    let op = u.insert(3, 20, Some("c"));
    u.h.commit(vec![op]);
    assert_eq!(u.entry(BY_V, u.v_key(20)), Some(u.h.key(3)));
    // Deleting row 2 leaves row 3's entry alone.
    let del2 = u.h.op(OpType::Delete, 2, 0, "");
    u.h.commit(vec![del2]);
    assert_eq!(u.entry(BY_V, u.v_key(20)), Some(u.h.key(3)));
    // A delete of a row whose entry is missing needs nothing.
    put_entry(&mut u, 40, 9);
    let op = u.insert(4, 41, Some("d"));
    u.h.commit(vec![op]);
    let upd = u.h.op(OpType::Update, 4, 40, "d");
    let out = u.h.send(1, 21, ExecType::Commit, vec![upd]);
    assert_eq!(
        refused(&out).0,
        ErrorCode::TupleAlreadyExists as u16,
        "a real clash"
    );
    // A row deleted and inserted again with its value in one request.
    let ops = vec![del, u.insert(1, 10, Some("a"))];
    u.h.commit(ops);
    assert_eq!(u.entry(BY_V, u.v_key(10)), Some(k1));
    // Reads by the index wait for the build.
    let read = u.by_v(u.h.read(1, LockMode::CommittedRead), 10);
    let out = u.h.send(1, 22, ExecType::Commit, vec![read]);
    assert_eq!(refused(&out).0, ErrorCode::NodeNotReady as u16);
    let s = u.h.node.stats();
    assert_eq!((s.transactions, s.operations, s.lqh_records), (0, 0, 0));
}

#[test]
fn while_building_a_value_moved_onto_a_row_and_away_leaves_no_entry() {
    // Sim seed 100289: one request deletes row 1 (v 10), inserts row 2
    // with v 10 (queued behind the checked delete of row 1's entry), then
    // moves row 2 to v 11. The entry 10 → row 2 must not outlive the
    // request.
    let mut u = Unique::with(true);
    let op = u.insert(1, 10, Some("a"));
    u.h.commit(vec![op]);
    let ops = vec![
        u.h.op(OpType::Delete, 1, 0, ""),
        u.insert(2, 10, Some("b")),
        u.h.op(OpType::Update, 2, 11, "b"),
    ];
    u.h.commit(ops);
    assert_eq!(u.entry(BY_V, u.v_key(10)), None, "no row holds 10");
    assert_eq!(u.entry(BY_V, u.v_key(11)), Some(u.h.key(2)));
    // And the same with a delete of the row that took the value.
    let ops = vec![
        u.h.op(OpType::Delete, 2, 0, ""),
        u.insert(3, 11, Some("c")),
        u.h.op(OpType::Delete, 3, 0, ""),
    ];
    u.h.commit(ops);
    assert_eq!(u.entry(BY_V, u.v_key(11)), None, "no row holds 11");
    // The value can be taken again.
    let op = u.insert(4, 11, Some("d"));
    u.h.commit(vec![op]);
    assert_eq!(u.entry(BY_V, u.v_key(11)), Some(u.h.key(4)));
    // Passed on twice: the changes behind the second checked delete wait
    // for it in turn.
    let ops = vec![
        u.h.op(OpType::Delete, 4, 0, ""),
        u.insert(5, 11, Some("e")),
        u.h.op(OpType::Delete, 5, 0, ""),
        u.insert(6, 11, Some("f")),
    ];
    u.h.commit(ops);
    assert_eq!(u.entry(BY_V, u.v_key(11)), Some(u.h.key(6)));
    let s = u.h.node.stats();
    assert_eq!((s.transactions, s.operations, s.lqh_records), (0, 0, 0));
}
