//! Unique hash indexes (docs/PROTOCOL.md, "Unique indexes") over real
//! processes on 127.0.0.1: four data nodes in two node groups, tables of
//! several fragments. A table created with a unique index refuses a
//! duplicate with 630 naming the index, leaving nothing of the failed
//! transaction behind, and takes any number of NULLs; reads, updates and
//! deletes by unique key find their row (or fail with 626, or report it
//! under ignore_error); an update of the unique column frees the old value
//! and takes the new one; a rolled-back insert leaves the value free.
//! An index created on a table with rows while a writer inserts, updates
//! and deletes holds exactly one entry per row with a value (checked
//! against the writer's model, entry by entry); one created over rows that
//! break it fails with 630 naming the rows and leaves no index behind, and
//! works once the rows are fixed. A dropped index frees its values and
//! operations through it fail clearly; its hidden table takes no direct
//! writes while the index is in service, and goes with its table.

mod common;

use common::{runtime, TestCluster};
use shoal_client::{
    Cluster, ColumnDef, ColumnType, ErrorClass, ErrorCode, ExecType, LockMode, Record, ShoalError,
    Table, TableDef, Transaction, UniqueIndex, Value,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Rows of `users`, the table created with its index.
const USERS: u64 = 200;
/// Rows of `live` before its index is created under writes.
const LIVE_ROWS: u64 = 3_000;
/// Rows per inserting transaction.
const INSERT_BATCH_ROWS: u64 = 250;

fn users_def() -> TableDef {
    TableDef::new(
        "users",
        vec![
            ColumnDef::new("id", ColumnType::BigInt { unsigned: true }),
            ColumnDef::new("email", ColumnType::VarChar(32)).nullable(),
            ColumnDef::new("n", ColumnType::Int { unsigned: false }),
        ],
        &["id"],
    )
    .unwrap()
    .with_unique_index("by_email", &["email"])
    .unwrap()
}

/// Every tenth user has no email.
fn email_of(id: u64) -> Value {
    if id.is_multiple_of(10) {
        Value::Null
    } else {
        Value::Str(format!("u{id}@x"))
    }
}

fn s(text: &str) -> Value {
    Value::Str(text.into())
}

/// Runs `f` on a fresh transaction and commits it.
async fn commit(
    c: &Cluster,
    f: impl FnOnce(&mut Transaction) -> Result<(), ShoalError>,
) -> Result<(), ShoalError> {
    let mut tx = c.transaction();
    f(&mut tx)?;
    tx.execute(ExecType::Commit).await
}

/// Inserts `rows` through `rec` in batched transactions.
async fn insert_all(c: &Cluster, rec: &Record, rows: &[Vec<Value>]) {
    for batch in rows.chunks(INSERT_BATCH_ROWS as usize) {
        commit(c, |tx| {
            for row in batch {
                tx.insert(rec, row)?;
            }
            Ok(())
        })
        .await
        .unwrap_or_else(|e| panic!("inserting {} rows: {e}", batch.len()));
    }
}

/// The id of the row `index` finds under `key` (committed read), or the
/// error its read met.
async fn id_by_unique(
    c: &Cluster,
    rec: &Record,
    index: &UniqueIndex,
    key: &[Value],
) -> Result<u64, ShoalError> {
    let mut tx = c.transaction();
    let op = tx.read_unique(rec, index, key, LockMode::CommittedRead)?;
    tx.execute(ExecType::Commit).await?;
    let row = tx.row(op).expect("a row read");
    match row.get("id") {
        Some(Value::UInt(id)) => Ok(id),
        other => panic!("row without its id: {other:?}"),
    }
}

/// Whether the primary key `id` holds a row.
async fn exists(c: &Cluster, table: &Table, id: u64) -> bool {
    let mut tx = c.transaction();
    let op = tx
        .read(
            &table.full_record(),
            &[Value::UInt(id)],
            LockMode::CommittedRead,
        )
        .unwrap();
    tx.ignore_error(op);
    tx.execute(ExecType::Commit).await.unwrap();
    tx.row(op).is_some()
}

fn expect_code(
    r: Result<impl std::fmt::Debug, ShoalError>,
    code: ErrorCode,
    what: &str,
) -> ShoalError {
    match r {
        Ok(v) => panic!("{what}: expected error {code:?}, got {v:?}"),
        Err(e) => {
            assert_eq!(e.code, code, "{what}: {e}");
            e
        }
    }
}

/// A table created with a unique index: duplicates, NULLs, every
/// operation by unique key, updates of the unique column, rollbacks,
/// direct writes of the hidden table.
async fn created_with_the_table(c: &Cluster, mgmd_addr: &str) {
    let users = c.create_table(users_def()).await.expect("create users");
    let full = users.full_record();
    let rows: Vec<Vec<Value>> = (0..USERS)
        .map(|id| vec![Value::UInt(id), email_of(id), Value::Int(id as i64)])
        .collect();
    insert_all(c, &full, &rows).await;
    let ix = c
        .unique_index("users", "by_email")
        .await
        .expect("the index");
    assert_eq!(ix.column_names(), vec!["email"]);
    assert!(!ix.is_building());

    // Every row with an email is found by it.
    let rec = users.record(&["id", "n"]).unwrap();
    for id in (1..USERS).filter(|id| id % 10 != 0).step_by(7) {
        let got = id_by_unique(c, &rec, &ix, &[email_of(id)]).await;
        assert_eq!(got, Ok(id), "u{id}@x");
    }

    // A duplicate fails the transaction with 630 naming the index, and
    // nothing of it stays: not the row it made before, not its entry.
    let r = commit(c, |tx| {
        tx.insert(&full, &[Value::UInt(1001), s("new1@x"), Value::Int(0)])?;
        tx.insert(&full, &[Value::UInt(1002), s("u2@x"), Value::Int(0)])?;
        Ok(())
    })
    .await;
    let e = expect_code(r, ErrorCode::TupleAlreadyExists, "a duplicate email");
    assert!(e.detail.contains("by_email"), "the index is named: {e}");
    assert!(
        !exists(c, &users, 1001).await,
        "the failed transaction's row"
    );
    assert!(!exists(c, &users, 1002).await);
    let e = id_by_unique(c, &rec, &ix, &[s("new1@x")]).await;
    expect_code(
        e,
        ErrorCode::TupleNotFound,
        "the failed transaction's entry",
    );
    assert_eq!(id_by_unique(c, &rec, &ix, &[s("u2@x")]).await, Ok(2));
    commit(c, |tx| {
        tx.insert(&full, &[Value::UInt(1003), s("new1@x"), Value::Int(0)])
            .map(|_| ())
    })
    .await
    .expect("the value the failed transaction wanted is free");

    // Any number of NULLs.
    commit(c, |tx| {
        for id in 1010..1015 {
            tx.insert(&full, &[Value::UInt(id), Value::Null, Value::Int(0)])?;
        }
        Ok(())
    })
    .await
    .expect("rows without an email");
    let e = rec.table().record(&["id"]).and_then(|r| {
        c.transaction()
            .read_unique(&r, &ix, &[Value::Null], LockMode::Shared)
    });
    expect_code(e, ErrorCode::IllegalNull, "a NULL unique key");

    // Not found: the transaction fails with 626, or goes on under
    // ignore_error.
    let e = id_by_unique(c, &rec, &ix, &[s("nobody@x")]).await;
    expect_code(e, ErrorCode::TupleNotFound, "a value no row holds");
    let mut tx = c.transaction();
    let missing = tx
        .read_unique(&rec, &ix, &[s("nobody@x")], LockMode::Shared)
        .unwrap();
    tx.ignore_error(missing);
    let found = tx
        .read_unique(&rec, &ix, &[s("u3@x")], LockMode::Shared)
        .unwrap();
    let gone = tx.delete_unique(&ix, &[s("nobody@x")]).unwrap();
    tx.ignore_error(gone);
    tx.execute(ExecType::Commit).await.expect("errors ignored");
    assert!(tx.row(missing).is_none());
    assert_eq!(
        tx.op_error(missing).map(|e| e.code),
        Some(ErrorCode::TupleNotFound)
    );
    assert_eq!(
        tx.op_error(gone).map(|e| e.code),
        Some(ErrorCode::TupleNotFound)
    );
    assert_eq!(tx.row(found).and_then(|r| r.get("n")), Some(Value::Int(3)));

    // Updates by unique key: a plain column, then the unique column itself
    // (its old value is freed, the new one taken).
    let set_n = users.record(&["n"]).unwrap();
    commit(c, |tx| {
        tx.update_unique(&set_n, &ix, &[s("u6@x")], &[Value::Int(77)])
            .map(|_| ())
    })
    .await
    .expect("update n by email");
    let mut tx = c.transaction();
    let op = tx
        .read(&full, &[Value::UInt(6)], LockMode::CommittedRead)
        .unwrap();
    tx.execute(ExecType::Commit).await.unwrap();
    assert_eq!(tx.row(op).and_then(|r| r.get("n")), Some(Value::Int(77)));
    let set_email = users.record(&["email"]).unwrap();
    commit(c, |tx| {
        tx.update_unique(&set_email, &ix, &[s("u7@x")], &[s("seven@x")])
            .map(|_| ())
    })
    .await
    .expect("change an email by email");
    expect_code(
        id_by_unique(c, &rec, &ix, &[s("u7@x")]).await,
        ErrorCode::TupleNotFound,
        "the old value",
    );
    assert_eq!(id_by_unique(c, &rec, &ix, &[s("seven@x")]).await, Ok(7));
    commit(c, |tx| {
        tx.insert(&full, &[Value::UInt(2000), s("u7@x"), Value::Int(0)])
            .map(|_| ())
    })
    .await
    .expect("the freed value is free");
    assert_eq!(id_by_unique(c, &rec, &ix, &[s("u7@x")]).await, Ok(2000));
    // By primary key too; into a value another row holds: 630.
    let r = commit(c, |tx| {
        tx.update(&full, &[Value::UInt(8), s("u9@x"), Value::Int(8)])
            .map(|_| ())
    })
    .await;
    expect_code(
        r,
        ErrorCode::TupleAlreadyExists,
        "an update into a held value",
    );
    assert_eq!(id_by_unique(c, &rec, &ix, &[s("u8@x")]).await, Ok(8));
    let r = commit(c, |tx| {
        tx.update_unique(&set_email, &ix, &[s("u12@x")], &[s("u13@x")])
            .map(|_| ())
    })
    .await;
    expect_code(
        r,
        ErrorCode::TupleAlreadyExists,
        "an update by unique key into a held value",
    );
    // Setting NULL takes the row out of the index.
    commit(c, |tx| {
        tx.update_unique(&set_email, &ix, &[s("u14@x")], &[Value::Null])
            .map(|_| ())
    })
    .await
    .expect("email set NULL");
    expect_code(
        id_by_unique(c, &rec, &ix, &[s("u14@x")]).await,
        ErrorCode::TupleNotFound,
        "a value set NULL",
    );

    // Deletes by unique key: the row goes, and its value is free.
    commit(c, |tx| tx.delete_unique(&ix, &[s("u11@x")]).map(|_| ()))
        .await
        .expect("delete by email");
    assert!(!exists(c, &users, 11).await);
    let r = commit(c, |tx| tx.delete_unique(&ix, &[s("u11@x")]).map(|_| ())).await;
    expect_code(r, ErrorCode::TupleNotFound, "a second delete");
    commit(c, |tx| {
        tx.insert(&full, &[Value::UInt(2011), s("u11@x"), Value::Int(0)])
            .map(|_| ())
    })
    .await
    .expect("a deleted row's value is free");

    // A rolled-back insert leaves no entry.
    let mut tx = c.transaction();
    tx.insert(&full, &[Value::UInt(3000), s("rolled@x"), Value::Int(0)])
        .unwrap();
    tx.execute(ExecType::NoCommit)
        .await
        .expect("insert, not committed");
    tx.execute(ExecType::Rollback).await.expect("rollback");
    expect_code(
        id_by_unique(c, &rec, &ix, &[s("rolled@x")]).await,
        ErrorCode::TupleNotFound,
        "a rolled-back value",
    );
    commit(c, |tx| {
        tx.insert(&full, &[Value::UInt(3001), s("rolled@x"), Value::Int(0)])
            .map(|_| ())
    })
    .await
    .expect("a rolled-back value is free");

    // The hidden table takes no direct writes once the index serves.
    let hidden = c
        .table("users$unique$by_email")
        .await
        .expect("the hidden table is served");
    let r = commit(c, |tx| {
        tx.insert(
            &hidden.full_record(),
            &[s("forged@x"), Value::Bytes(vec![1, 0, 0, 0, 0, 0, 0, 0])],
        )
        .map(|_| ())
    })
    .await;
    expect_code(
        r,
        ErrorCode::BadRequest,
        "a direct write of the hidden table",
    );
    let tables: Vec<String> = shoal_mgmd::MgmClient::connect(mgmd_addr)
        .await
        .unwrap()
        .list_tables()
        .await
        .unwrap()
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert!(tables.contains(&"users".to_string()), "{tables:?}");
    assert!(
        !tables.iter().any(|t| t.contains("$unique$")),
        "hidden tables are not listed: {tables:?}"
    );

    // Dropped: its values repeat freely, operations through it fail
    // clearly, and it is unknown afterwards.
    let without = c
        .drop_index("users", "by_email")
        .await
        .expect("drop by_email");
    assert!(without.def().unique_indexes.is_empty());
    commit(c, |tx| {
        tx.insert(&full, &[Value::UInt(4000), s("u5@x"), Value::Int(0)])
            .map(|_| ())
    })
    .await
    .expect("a value of a dropped index repeats");
    let e = id_by_unique(c, &rec, &ix, &[s("u5@x")]).await;
    let e = e.expect_err("a read through a dropped index");
    assert_eq!(e.code, ErrorCode::NoSuchTable, "{e}");
    assert!(e.detail.contains("by_email"), "{e}");
    let e = c.unique_index("users", "by_email").await;
    expect_code(e, ErrorCode::NoSuchColumn, "a dropped index");
    expect_code(
        c.table("users$unique$by_email").await,
        ErrorCode::NoSuchTable,
        "a dropped index's table",
    );
    c.drop_table("users").await.expect("drop users");
}

/// `live(id, code INT NULL, w INT)`: `code` is unique and every 13th NULL.
fn live_def(name: &str) -> TableDef {
    TableDef::new(
        name,
        vec![
            ColumnDef::new("id", ColumnType::BigInt { unsigned: true }),
            ColumnDef::new("code", ColumnType::Int { unsigned: false }).nullable(),
            ColumnDef::new("w", ColumnType::Int { unsigned: false }),
        ],
        &["id"],
    )
    .unwrap()
}

fn live_code(id: u64) -> Option<i64> {
    (id % 13 != 5).then_some(id as i64 * 7)
}

/// Rows by id: their code.
type Model = BTreeMap<u64, Option<i64>>;

/// A writer on `live` while the index builds: inserts rows with fresh
/// codes, changes codes to fresh ones (and to NULL and back), deletes
/// rows. Keeps `model` to what it committed.
struct Writer {
    stop: Arc<AtomicBool>,
    commits: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<Result<(), ShoalError>>,
}

fn start_writer(c: &Cluster, table: &Table, model: Arc<Mutex<Model>>) -> Writer {
    let stop = Arc::new(AtomicBool::new(false));
    let commits = Arc::new(AtomicU64::new(0));
    let (c, table, stop2, commits2) = (c.clone(), table.clone(), stop.clone(), commits.clone());
    let task = tokio::spawn(async move {
        let full = table.full_record();
        let mut next_id = LIVE_ROWS;
        let mut next_code = 1_000_000i64;
        let mut step = 0u64;
        while !stop2.load(Ordering::Relaxed) {
            step += 1;
            // Four changes a transaction: an insert, a code change, a
            // NULL code (or one back), a delete.
            let ids: Vec<u64> = {
                let m = model.lock().unwrap();
                let keys: Vec<u64> = m.keys().copied().collect();
                (0..3)
                    .map(|i| keys[((step * 7_919 + i * 104_729) % keys.len() as u64) as usize])
                    .collect()
            };
            if ids[0] == ids[1] || ids[1] == ids[2] || ids[0] == ids[2] {
                continue;
            }
            let mut changes: Vec<(u64, Option<Option<i64>>)> = Vec::new();
            let mut tx = c.transaction();
            next_code += 1;
            tx.insert(
                &full,
                &[Value::UInt(next_id), Value::Int(next_code), Value::Int(0)],
            )?;
            changes.push((next_id, Some(Some(next_code))));
            next_code += 1;
            tx.update(
                &full,
                &[Value::UInt(ids[0]), Value::Int(next_code), Value::Int(1)],
            )?;
            changes.push((ids[0], Some(Some(next_code))));
            let was_null = model.lock().unwrap()[&ids[1]].is_none();
            next_code += 1;
            let code = if was_null { Some(next_code) } else { None };
            tx.update(
                &full,
                &[
                    Value::UInt(ids[1]),
                    code.map_or(Value::Null, Value::Int),
                    Value::Int(2),
                ],
            )?;
            changes.push((ids[1], Some(code)));
            tx.delete(&table, &[Value::UInt(ids[2])])?;
            changes.push((ids[2], None));
            match tx.execute(ExecType::Commit).await {
                Ok(()) => {
                    next_id += 1;
                    let mut m = model.lock().unwrap();
                    for (id, change) in changes {
                        match change {
                            Some(code) => m.insert(id, code),
                            None => m.remove(&id),
                        };
                    }
                    commits2.fetch_add(1, Ordering::Relaxed);
                }
                // Lock waits against the build's batches, node overload:
                // try another change.
                Err(e) if e.class() == ErrorClass::Temporary => {
                    tokio::time::sleep(Duration::from_millis(2)).await
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    });
    Writer {
        stop,
        commits,
        task,
    }
}

impl Writer {
    async fn wait_commits(&self, count: u64) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.commits.load(Ordering::Relaxed) < count {
            assert!(!self.task.is_finished(), "the writer stopped early");
            assert!(Instant::now() < deadline, "the writer is stuck");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    async fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        self.task
            .await
            .expect("the writer panicked")
            .unwrap_or_else(|e| panic!("the writer failed: {e}"));
        self.commits.load(Ordering::Relaxed)
    }
}

/// The index's entries, by scanning its hidden table: code → the row id
/// its `$pk` names.
async fn entries(c: &Cluster, index: &UniqueIndex) -> BTreeMap<i64, u64> {
    let mut scan = c
        .transaction()
        .scan(index.index_table())
        .open()
        .await
        .expect("scan the hidden table");
    let mut out = BTreeMap::new();
    let def = index.table().def().clone();
    while let Some(row) = scan.next_row().await.expect("a row") {
        let Some(Value::Int(code)) = row.get("code") else {
            panic!("an entry without its code: {:?}", row.values());
        };
        let Some(Value::Bytes(pk)) = row.get("$pk") else {
            panic!("an entry without its $pk: {:?}", row.values());
        };
        let mut id = None;
        shoal_types::RowLayout::new(&def)
            .split_key(&pk, |_, b| {
                id = Some(u64::from_le_bytes(b.try_into().expect("8 bytes")))
            })
            .expect("a key of the table");
        assert!(
            out.insert(code, id.expect("an id")).is_none(),
            "code {code} twice"
        );
    }
    out
}

/// An index created on a table with rows while a writer changes them.
async fn created_under_writes(c: &Cluster, cluster: &TestCluster) {
    let live = c.create_table(live_def("live")).await.expect("create live");
    let rows: Vec<Vec<Value>> = (0..LIVE_ROWS)
        .map(|id| {
            vec![
                Value::UInt(id),
                live_code(id).map_or(Value::Null, Value::Int),
                Value::Int(0),
            ]
        })
        .collect();
    insert_all(c, &live.full_record(), &rows).await;
    let model: Arc<Mutex<Model>> = Arc::new(Mutex::new(
        (0..LIVE_ROWS).map(|id| (id, live_code(id))).collect(),
    ));
    let writer = start_writer(c, &live, model.clone());
    writer.wait_commits(10).await;
    let before = writer.commits.load(Ordering::Relaxed);
    let started = Instant::now();
    let with = c
        .create_unique_index("live", "by_code", &["code"])
        .await
        .expect("create by_code under writes");
    let took = started.elapsed();
    let during = writer.commits.load(Ordering::Relaxed) - before;
    writer.wait_commits(before + during + 10).await;
    let commits = writer.stop().await;
    assert!(
        during > 0,
        "no write committed during the {took:?} the build took ({commits} in all)"
    );
    let u = with.def().unique_index("by_code").expect("listed");
    assert!(!u.building);
    assert!(with.same_version(&live), "an index changes no version");

    // Every entry is a row's, every row with a code has its entry.
    let model = model.lock().unwrap().clone();
    let ix = c.unique_index("live", "by_code").await.expect("the index");
    let want: BTreeMap<i64, u64> = model
        .iter()
        .filter_map(|(&id, &code)| code.map(|code| (code, id)))
        .collect();
    let got = entries(c, &ix).await;
    if got != want {
        let missing: Vec<_> = want
            .iter()
            .filter(|(k, _)| !got.contains_key(k))
            .take(10)
            .collect();
        let extra: Vec<_> = got
            .iter()
            .filter(|(k, _)| !want.contains_key(k))
            .take(10)
            .collect();
        panic!(
            "the index holds {} entries, the rows {} values; missing {missing:?}, extra {extra:?}",
            got.len(),
            want.len()
        );
    }
    // And reads by unique key find them (a sample).
    let rec = live.record(&["id", "code"]).unwrap();
    for (&code, &id) in want.iter().step_by(97) {
        assert_eq!(
            id_by_unique(c, &rec, &ix, &[Value::Int(code)]).await,
            Ok(id)
        );
    }
    // The writer's last value changes went through the index.
    let r = commit(c, |tx| {
        let (&code, _) = want.iter().next_back().unwrap();
        tx.insert(
            &live.full_record(),
            &[Value::UInt(9_999_999), Value::Int(code), Value::Int(0)],
        )
        .map(|_| ())
    })
    .await;
    expect_code(
        r,
        ErrorCode::TupleAlreadyExists,
        "a code the writer set last",
    );
    // Both replicas of every fragment of the table and of its index's
    // table hold the same rows.
    let out = cluster.shoal(&["verify", "--connect", &cluster.mgmd_addr]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success()
            && stdout.contains("2 table(s)")
            && stdout.contains("every replica identical"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    c.drop_table("live").await.expect("drop live");
}

/// An index over rows that break it fails clearly and leaves nothing; made
/// again over fixed rows, it holds.
async fn refused_over_duplicates(c: &Cluster) {
    let dups = c.create_table(live_def("dups")).await.expect("create dups");
    let rows: Vec<Vec<Value>> = (0..500u64)
        .map(|id| {
            let code = if id == 333 { 7 * 111 } else { id as i64 * 7 };
            vec![Value::UInt(id), Value::Int(code), Value::Int(0)]
        })
        .collect();
    insert_all(c, &dups.full_record(), &rows).await;
    let e = c.create_unique_index("dups", "by_code", &["code"]).await;
    let e = expect_code(e, ErrorCode::TupleAlreadyExists, "rows with one code twice");
    for part in [
        "\"by_code\"",
        "\"dups\"",
        "id = 111",
        "id = 333",
        "code = 777",
    ] {
        assert!(e.detail.contains(part), "{part} in: {e}");
    }
    c.invalidate_table("dups");
    let t = c.table("dups").await.unwrap();
    assert!(
        t.def().unique_indexes.is_empty(),
        "no index stays: {:?}",
        t.def()
    );
    expect_code(
        c.unique_index("dups", "by_code").await,
        ErrorCode::NoSuchColumn,
        "a failed index",
    );
    expect_code(
        c.table("dups$unique$by_code").await,
        ErrorCode::NoSuchTable,
        "a failed index's table",
    );
    // Writes are not kept by a failed index.
    commit(c, |tx| {
        tx.insert(
            &dups.full_record(),
            &[Value::UInt(600), Value::Int(0), Value::Int(0)],
        )
        .map(|_| ())
    })
    .await
    .expect("a second code 0");
    // Fixed, the same create works.
    commit(c, |tx| {
        tx.delete(&dups, &[Value::UInt(333)])?;
        tx.delete(&dups, &[Value::UInt(600)]).map(|_| ())
    })
    .await
    .expect("fix the rows");
    c.create_unique_index("dups", "by_code", &["code"])
        .await
        .expect("create over unique rows");
    let ix = c.unique_index("dups", "by_code").await.unwrap();
    assert_eq!(entries(c, &ix).await.len(), 499);
    let r = commit(c, |tx| {
        tx.insert(
            &dups.full_record(),
            &[Value::UInt(700), Value::Int(7), Value::Int(0)],
        )
        .map(|_| ())
    })
    .await;
    expect_code(
        r,
        ErrorCode::TupleAlreadyExists,
        "a duplicate after the build",
    );
    c.drop_table("dups").await.expect("drop dups");
    expect_code(
        c.table("dups$unique$by_code").await,
        ErrorCode::NoSuchTable,
        "a dropped table's index table",
    );
}

#[test]
fn unique_indexes_keep_values_unique_and_serve_reads_by_them() {
    let cluster = TestCluster::start_nodes(4, 2, |_| {});
    let rt = runtime();
    rt.block_on(async {
        let c = Cluster::connect(&cluster.mgmd_addr).await.expect("connect");
        created_with_the_table(&c, &cluster.mgmd_addr).await;
        created_under_writes(&c, &cluster).await;
        refused_over_duplicates(&c).await;
    });
}
