//! Full-table scans (docs/PROTOCOL.md §12) over real processes on
//! 127.0.0.1. On four data nodes in two node groups a scan returns every
//! row exactly once, in small rounds or large ones, and its filters keep
//! exactly the rows the reference model keeps; scans closed or dropped
//! early give their scan records back; a table dropped under a scan, a
//! malformed filter program and an unsupported lock mode end the scan with
//! a clear error and leave the node serving; a data node killed during a
//! scan ends it with a temporary error, never with rows missing presented
//! as a complete scan.

mod common;

use common::{runtime, TestCluster};
use futures::FutureExt;
use shoal_client::{
    Cluster, ClusterOptions, CmpOp, ColumnDef, ColumnType, ErrorClass, ErrorCode, ExecType,
    FilterExpr, LockMode, Scan, ShoalError, Table, TableDef, Value,
};
use shoal_types::distribution::distribution_key;
use shoal_types::filter::{opcode, FILTER_BYTES_MAX, FILTER_INSTRUCTIONS_MAX, FILTER_STACK_MAX};
use shoal_types::{hash_key, RowLayout};
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Rows of the four-node tables: a few hundred per fragment, so a small
/// batch takes hundreds of rounds.
const ROWS: u32 = 2_000;
/// Rows per inserting transaction.
const INSERT_BATCH_ROWS: u32 = 250;

/// Column ids of [`table_def`], in its order.
const ID: u16 = 0;
const BIG: u16 = 1;
const NAME: u16 = 2;
const N: u16 = 3;

/// Prefixes of the names. One holds LIKE's wildcards, which a pattern
/// must escape to match them literally.
const WORDS: [&str; 6] = ["ada", "alan", "grace", "50%_off", "edsger", "barbara"];

/// Rows by key, each its values in column order.
type Model = BTreeMap<u64, Vec<Value>>;

/// A row as a scan returned it: (column id, value), in its record's order.
type Cells = Vec<(u16, Value)>;

fn table_def(name: &str) -> TableDef {
    TableDef::new(
        name,
        vec![
            ColumnDef::new("id", ColumnType::Int { unsigned: true }),
            ColumnDef::new("big", ColumnType::BigInt { unsigned: false }),
            ColumnDef::new("name", ColumnType::VarChar(24)).nullable(),
            ColumnDef::new("n", ColumnType::Int { unsigned: false }).nullable(),
        ],
        &["id"],
    )
    .unwrap()
}

/// Row `id` as inserted. `big` runs over -5000..=5006 (its least value,
/// -5000, only at id 0); every tenth name and every seventh `n` is NULL,
/// at ids chosen so that some rows have both.
fn row_of(id: u32) -> Vec<Value> {
    let big = i64::from(id) * 7_919 % 10_007 - 5_000;
    let name = if id % 10 == 3 {
        Value::Null
    } else {
        Value::Str(format!("{}{id}", WORDS[id as usize % WORDS.len()]))
    };
    let n = if id % 7 == 5 {
        Value::Null
    } else {
        Value::Int(i64::from(id * 31 % 1_000) - 500)
    };
    vec![Value::UInt(id.into()), Value::Int(big), name, n]
}

/// Creates table `name` and inserts rows 0..rows in batched transactions;
/// returns the table and the model of what it holds.
async fn create_and_fill(c: &Cluster, name: &str, rows: u32) -> (Table, Model) {
    let table = c
        .create_table(table_def(name))
        .await
        .unwrap_or_else(|e| panic!("create table {name}: {e}"));
    for (col, id) in [("id", ID), ("big", BIG), ("name", NAME), ("n", N)] {
        assert_eq!(table.column_id(col).unwrap(), id, "column {col}");
    }
    let rec = table.full_record();
    let mut model = Model::new();
    let mut start = 0;
    while start < rows {
        let end = (start + INSERT_BATCH_ROWS).min(rows);
        let mut tx = c.transaction();
        for id in start..end {
            let row = row_of(id);
            tx.insert(&rec, &row).expect("queue an insert");
            model.insert(id.into(), row);
        }
        tx.execute(ExecType::Commit)
            .await
            .unwrap_or_else(|e| panic!("insert rows {start}..{end}: {e}"));
        start = end;
    }
    (table, model)
}

/// Reads the scan to its end, a row at a time.
async fn drain(scan: &mut Scan) -> Result<Vec<Cells>, ShoalError> {
    let mut rows = Vec::new();
    while let Some(row) = scan.next_row().await? {
        rows.push(row.values());
    }
    Ok(rows)
}

/// Reads the scan until it ends or fails: the rows read, and how it ended.
async fn drain_until_error(scan: &mut Scan) -> (Vec<Cells>, Result<(), ShoalError>) {
    let mut rows = Vec::new();
    loop {
        match scan.next_row().await {
            Ok(Some(row)) => rows.push(row.values()),
            Ok(None) => return (rows, Ok(())),
            Err(e) => return (rows, Err(e)),
        }
    }
}

/// Whole rows by key; panics if a key comes twice or a row is not whole.
fn by_key(rows: Vec<Cells>, what: &str) -> Model {
    let mut out = Model::new();
    for cells in rows {
        let ids: Vec<u16> = cells.iter().map(|(c, _)| *c).collect();
        assert_eq!(
            ids,
            [ID, BIG, NAME, N],
            "{what}: a row with columns {ids:?}"
        );
        let values: Vec<Value> = cells.into_iter().map(|(_, v)| v).collect();
        let Value::UInt(id) = values[0] else {
            panic!("{what}: key {:?} is not an unsigned integer", values[0]);
        };
        assert!(
            out.insert(id, values).is_none(),
            "{what}: key {id} came twice"
        );
    }
    out
}

/// Panics unless `got` holds exactly the rows of `want`, naming the first
/// few rows missing, extra or different.
fn assert_same(got: &Model, want: &Model, what: &str) {
    let missing: Vec<&u64> = want.keys().filter(|k| !got.contains_key(k)).collect();
    let extra: Vec<&u64> = got.keys().filter(|k| !want.contains_key(k)).collect();
    let wrong: Vec<(&u64, &Vec<Value>, &Vec<Value>)> = got
        .iter()
        .filter_map(|(k, row)| Some((k, row, want.get(k)?)))
        .filter(|(_, row, wanted)| row != wanted)
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty() && wrong.is_empty(),
        "{what}: {} rows, {} expected; {} missing (first {:?}), {} not expected (first {:?}), \
         {} with other values (first, got and expected: {:?})",
        got.len(),
        want.len(),
        missing.len(),
        &missing[..missing.len().min(5)],
        extra.len(),
        &extra[..extra.len().min(5)],
        wrong.len(),
        &wrong[..wrong.len().min(3)],
    );
}

/// The model's rows `keep` holds for.
fn rows_where(model: &Model, keep: impl Fn(&[Value]) -> bool) -> Model {
    model
        .iter()
        .filter(|(_, row)| keep(row))
        .map(|(k, row)| (*k, row.clone()))
        .collect()
}

/// Scans `table` through `filter` (in rounds of at most 64 rows) and
/// checks that the rows are exactly those of the model `keep` holds for,
/// and that every row was examined. Returns how many rows came.
async fn check_filter(
    c: &Cluster,
    table: &Table,
    model: &Model,
    what: &str,
    filter: FilterExpr,
    keep: impl Fn(&[Value]) -> bool,
) -> usize {
    let mut scan = c
        .transaction()
        .scan(table)
        .filter(filter)
        .batch(64, 16 << 10)
        .open()
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let rows = drain(&mut scan)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = by_key(rows, what);
    assert_same(&got, &rows_where(model, keep), what);
    assert_eq!(
        scan.rows_examined(),
        model.len() as u64,
        "{what}: rows examined"
    );
    got.len()
}

/// [`check_filter`] with the filter's reference semantics
/// ([`FilterExpr::eval_values`]) deciding which rows it keeps.
async fn check_against_model(
    c: &Cluster,
    table: &Table,
    model: &Model,
    what: &str,
    filter: FilterExpr,
) -> usize {
    let def = table.def().clone();
    let oracle = filter.clone();
    let keep = move |row: &[Value]| oracle.eval_values(&def, row) == Some(true);
    check_filter(c, table, model, what, filter, keep).await
}

/// A full scan (default batch) returns exactly the model's rows.
async fn check_full_scan(c: &Cluster, table: &Table, model: &Model, what: &str) {
    let mut scan = c
        .transaction()
        .scan(table)
        .open()
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let rows = scan
        .collect_all()
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = by_key(rows.iter().map(|r| r.values()).collect(), what);
    assert_same(&got, model, what);
}

fn cmp(col: u16, op: CmpOp, value: Value) -> FilterExpr {
    FilterExpr::Cmp { col, op, value }
}

fn like(col: u16, pattern: &str) -> FilterExpr {
    FilterExpr::Like {
        col,
        pattern: pattern.as_bytes().to_vec(),
    }
}

fn not(inner: FilterExpr) -> FilterExpr {
    FilterExpr::Not(Box::new(inner))
}

fn int_of(v: &Value) -> Option<i64> {
    match v {
        Value::Int(x) => Some(*x),
        _ => None,
    }
}

#[test]
fn scans_on_four_nodes_return_every_row_once_and_filter_like_the_model() {
    let mut cluster = TestCluster::start_nodes(4, 2, |_| {});
    let rt = runtime();
    let c = rt
        .block_on(Cluster::connect(&cluster.mgmd_addr))
        .expect("connect");
    let (table, model) = rt.block_on(create_and_fill(&c, "scanned", ROWS));
    // The premise: several fragments, over both node groups.
    let replicas = table.fragment_replicas().expect("a distributed table");
    let groups: BTreeSet<Vec<u16>> = replicas
        .iter()
        .map(|r| {
            let mut g = r.clone();
            g.sort_unstable();
            g
        })
        .collect();
    assert!(replicas.len() >= 4, "fragments: {replicas:?}");
    assert_eq!(groups.len(), 2, "fragments: {replicas:?}");
    assert!(groups.iter().all(|g| g.len() == 2), "{replicas:?}");

    rt.block_on(async {
        // Rounds asked for 7 rows and 1000 bytes: each round asks every
        // fragment for at least one row, so it brings about one row per
        // fragment, and the scan takes hundreds of rounds.
        let mut scan = c
            .transaction()
            .scan(&table)
            .batch(7, 1000)
            .open()
            .await
            .expect("open a scan in small rounds");
        let first_round = scan.rows_examined();
        assert!(
            first_round > 0 && first_round <= 2 * replicas.len() as u64,
            "the first round of a 7-row batch examined {first_round} rows"
        );
        assert!(!scan.is_done(), "one small round cannot end the scan");
        let got = by_key(drain(&mut scan).await.expect("small rounds"), "small rounds");
        assert_same(&got, &model, "small rounds");
        assert_eq!(scan.rows_examined(), u64::from(ROWS));
        assert!(scan.is_done());
        assert!(
            scan.next_row().await.expect("after the end").is_none(),
            "a scan read to its end stays at its end"
        );

        // One round large enough for the whole table.
        let mut scan = c
            .transaction()
            .scan(&table)
            .batch(ROWS * 4, 4 << 20)
            .open()
            .await
            .expect("open a scan in one round");
        assert!(
            scan.is_done(),
            "a batch of {} rows brings all {ROWS} in its first round (examined {})",
            ROWS * 4,
            scan.rows_examined()
        );
        let rows = scan.collect_all().await.expect("one round");
        let got = by_key(rows.iter().map(|r| r.values()).collect(), "one round");
        assert_same(&got, &model, "one round");

        // The default batch.
        check_full_scan(&c, &table, &model, "default rounds").await;

        // Filters that keep nothing and everything: each row is examined.
        for (what, filter) in [
            ("big > 1000000", cmp(BIG, CmpOp::Gt, Value::Int(1_000_000))),
            ("FALSE", FilterExpr::False),
            ("id > 3000 AND name LIKE '%'", {
                FilterExpr::And(vec![
                    cmp(ID, CmpOp::Gt, Value::UInt(3_000)),
                    like(NAME, "%"),
                ])
            }),
        ] {
            let count = check_against_model(&c, &table, &model, what, filter).await;
            assert_eq!(count, 0, "{what}");
        }
        for (what, filter) in [
            (
                "name IS NULL OR name IS NOT NULL",
                FilterExpr::Or(vec![FilterExpr::IsNull(NAME), FilterExpr::IsNotNull(NAME)]),
            ),
            ("big >= -5000", cmp(BIG, CmpOp::Ge, Value::Int(-5_000))),
            ("TRUE", FilterExpr::True),
        ] {
            let count = check_against_model(&c, &table, &model, what, filter).await;
            assert_eq!(count, ROWS as usize, "{what}");
        }

        // Selective filters (about 1 %) mixing comparisons, AND/OR/NOT,
        // IS NULL, LIKE and a column compared with a column.
        let selective = [
            (
                "(name LIKE 'gr%14' OR (name IS NULL AND big > 4000)) \
                 AND NOT n < -450 AND big > n",
                FilterExpr::And(vec![
                    FilterExpr::Or(vec![
                        like(NAME, "gr%14"),
                        FilterExpr::And(vec![
                            FilterExpr::IsNull(NAME),
                            cmp(BIG, CmpOp::Gt, Value::Int(4_000)),
                        ]),
                    ]),
                    not(cmp(N, CmpOp::Lt, Value::Int(-450))),
                    FilterExpr::CmpCols {
                        a: BIG,
                        op: CmpOp::Gt,
                        b: N,
                    },
                ]),
            ),
            (
                "name LIKE '50\\%\\_off1_7' OR (id >= 1980 AND name NOT LIKE '%9' AND n <> 0)",
                FilterExpr::Or(vec![
                    like(NAME, "50\\%\\_off1_7"),
                    FilterExpr::And(vec![
                        cmp(ID, CmpOp::Ge, Value::UInt(1_980)),
                        FilterExpr::NotLike {
                            col: NAME,
                            pattern: b"%9".to_vec(),
                        },
                        cmp(N, CmpOp::Ne, Value::Int(0)),
                    ]),
                ]),
            ),
            (
                "NOT (id < 100 OR id >= 1900 OR name IS NULL OR n IS NULL) \
                 AND name >= 'edsger15' AND name < 'edsger16' AND big <= n",
                FilterExpr::And(vec![
                    not(FilterExpr::Or(vec![
                        cmp(ID, CmpOp::Lt, Value::UInt(100)),
                        cmp(ID, CmpOp::Ge, Value::UInt(1_900)),
                        FilterExpr::IsNull(NAME),
                        FilterExpr::IsNull(N),
                    ])),
                    cmp(NAME, CmpOp::Ge, Value::Str("edsger15".into())),
                    cmp(NAME, CmpOp::Lt, Value::Str("edsger16".into())),
                    FilterExpr::CmpCols {
                        a: BIG,
                        op: CmpOp::Le,
                        b: N,
                    },
                ]),
            ),
        ];
        for (what, filter) in selective {
            let count = check_against_model(&c, &table, &model, what, filter).await;
            assert!(
                (3..=60).contains(&count),
                "{what}: {count} rows is not a selective filter's share of {ROWS}"
            );
        }
        // The escaped LIKE once more, against plain Rust: `\%` and `\_`
        // are literal, `_` one character.
        let count = check_filter(
            &c,
            &table,
            &model,
            "name LIKE '50\\%\\_off1_7' (plain Rust)",
            like(NAME, "50\\%\\_off1_7"),
            |r| {
                matches!(&r[2], Value::Str(s)
                    if s.len() == "50%_off1x7".len() && s.starts_with("50%_off1") && s.ends_with('7'))
            },
        )
        .await;
        assert!(count > 0, "no name matched the escaped pattern");

        // A projection returns only its columns, in its order.
        let mut scan = c
            .transaction()
            .scan(&table)
            .columns(&["name", "id"])
            .filter(cmp(BIG, CmpOp::Ge, Value::Int(4_000)))
            .batch(16, 4096)
            .open()
            .await
            .expect("open a projection");
        let want = rows_where(&model, |r| int_of(&r[1]).unwrap() >= 4_000);
        let mut seen = BTreeSet::new();
        while let Some(row) = scan.next_row().await.expect("a projection") {
            assert_eq!(row.len(), 2, "{:?}", row.values());
            assert_eq!(row.get("big"), None, "a column not asked for");
            let cells = row.values();
            let ids: Vec<u16> = cells.iter().map(|(c, _)| *c).collect();
            assert_eq!(ids, [NAME, ID], "{cells:?}");
            let Value::UInt(id) = cells[1].1 else {
                panic!("{cells:?}")
            };
            let wanted = want.get(&id).unwrap_or_else(|| panic!("row {id} kept"));
            assert_eq!(cells[0].1, wanted[2], "name of row {id}");
            assert!(seen.insert(id), "row {id} came twice");
        }
        assert_eq!(seen.len(), want.len(), "rows of the projection");
        assert!(!seen.is_empty());
        // A projection without the key, through a record.
        let bigs = table.record(&["big"]).expect("a record of one column");
        let mut scan = c
            .transaction()
            .scan_record(&bigs)
            .open()
            .await
            .expect("open a scan of one column");
        let mut got: Vec<i64> = Vec::new();
        for row in scan.collect_all().await.expect("one column") {
            let cells = row.values();
            assert_eq!(cells.len(), 1, "{cells:?}");
            assert_eq!(cells[0].0, BIG, "{cells:?}");
            got.push(int_of(&cells[0].1).expect("a BIGINT"));
        }
        let mut want: Vec<i64> = model.values().map(|r| int_of(&r[1]).unwrap()).collect();
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want, "every big, once");

        // Bounds: exactly one row, at either end of the keys and inside;
        // nothing below the least key or the least big.
        let last = u64::from(ROWS - 1);
        for (what, filter, keep) in [
            (
                "id = 0",
                cmp(ID, CmpOp::Eq, Value::UInt(0)),
                Box::new(|r: &[Value]| r[0] == Value::UInt(0)) as Box<dyn Fn(&[Value]) -> bool>,
            ),
            (
                "id = 1234",
                cmp(ID, CmpOp::Eq, Value::UInt(1_234)),
                Box::new(|r: &[Value]| r[0] == Value::UInt(1_234)),
            ),
            (
                "id >= last",
                cmp(ID, CmpOp::Ge, Value::UInt(last)),
                Box::new(move |r: &[Value]| r[0] == Value::UInt(last)),
            ),
            (
                "id <= 0",
                cmp(ID, CmpOp::Le, Value::UInt(0)),
                Box::new(|r: &[Value]| r[0] == Value::UInt(0)),
            ),
            (
                "big <= -5000",
                cmp(BIG, CmpOp::Le, Value::Int(-5_000)),
                Box::new(|r: &[Value]| r[0] == Value::UInt(0)),
            ),
            (
                "id > 1233 AND id < 1235",
                FilterExpr::And(vec![
                    cmp(ID, CmpOp::Gt, Value::UInt(1_233)),
                    cmp(ID, CmpOp::Lt, Value::UInt(1_235)),
                ]),
                Box::new(|r: &[Value]| r[0] == Value::UInt(1_234)),
            ),
        ] {
            let count = check_filter(&c, &table, &model, what, filter, keep).await;
            assert_eq!(count, 1, "{what}");
        }
        for (what, filter) in [
            ("id < 0", cmp(ID, CmpOp::Lt, Value::UInt(0))),
            ("big < -5000", cmp(BIG, CmpOp::Lt, Value::Int(-5_000))),
            ("id > last", cmp(ID, CmpOp::Gt, Value::UInt(last))),
        ] {
            let count = check_filter(&c, &table, &model, what, filter, |_| false).await;
            assert_eq!(count, 0, "{what}");
        }

        // NULL: IS NULL keeps exactly the NULL rows; a comparison with a
        // NULL column keeps nothing, and neither does its negation.
        let n_nulls = (0..ROWS).filter(|id| id % 7 == 5).count();
        let name_nulls = (0..ROWS).filter(|id| id % 10 == 3).count();
        let is_null = |col: usize| move |r: &[Value]| r[col].is_null();
        let not_null = |col: usize| move |r: &[Value]| !r[col].is_null();
        let count = check_filter(
            &c,
            &table,
            &model,
            "n IS NULL",
            FilterExpr::IsNull(N),
            is_null(3),
        )
        .await;
        assert_eq!(count, n_nulls, "n IS NULL");
        let count = check_filter(
            &c,
            &table,
            &model,
            "name IS NULL",
            FilterExpr::IsNull(NAME),
            is_null(2),
        )
        .await;
        assert_eq!(count, name_nulls, "name IS NULL");
        let count = check_filter(
            &c,
            &table,
            &model,
            "NOT n IS NOT NULL",
            not(FilterExpr::IsNotNull(N)),
            is_null(3),
        )
        .await;
        assert_eq!(count, n_nulls, "NOT n IS NOT NULL");
        for (what, filter) in [
            (
                "n < 0 OR n >= 0",
                FilterExpr::Or(vec![
                    cmp(N, CmpOp::Lt, Value::Int(0)),
                    cmp(N, CmpOp::Ge, Value::Int(0)),
                ]),
            ),
            (
                "n = n",
                FilterExpr::CmpCols {
                    a: N,
                    op: CmpOp::Eq,
                    b: N,
                },
            ),
            ("n <> 1000000", cmp(N, CmpOp::Ne, Value::Int(1_000_000))),
        ] {
            let count = check_filter(&c, &table, &model, what, filter, not_null(3)).await;
            assert_eq!(count, ROWS as usize - n_nulls, "{what}");
        }
        let count = check_filter(
            &c,
            &table,
            &model,
            "NOT n < 0",
            not(cmp(N, CmpOp::Lt, Value::Int(0))),
            |r| int_of(&r[3]).is_some_and(|n| n >= 0),
        )
        .await;
        assert!(count > 0 && count < ROWS as usize - n_nulls, "NOT n < 0");
        for (what, filter) in [
            ("name NOT LIKE '%'", {
                FilterExpr::NotLike {
                    col: NAME,
                    pattern: b"%".to_vec(),
                }
            }),
            ("n IS NULL AND n = 0", {
                FilterExpr::And(vec![
                    FilterExpr::IsNull(N),
                    cmp(N, CmpOp::Eq, Value::Int(0)),
                ])
            }),
        ] {
            let count = check_filter(&c, &table, &model, what, filter, |_| false).await;
            assert_eq!(count, 0, "{what}");
        }
    });
    drop(c);
    cluster.assert_alive();
    cluster.verify_replicas();
}

/// Scans the early-close test's data node may coordinate at once: a
/// handful, so that a scan record not given back shows within a few scans.
const SCAN_LIMIT: u32 = 4;

/// Opens a scan of `table` asking rounds of 2 rows.
async fn open_small(c: &Cluster, table: &Table) -> Result<Scan, ShoalError> {
    c.transaction().scan(table).batch(2, 1024).open().await
}

/// Panics unless `cells` is a whole row, the one `model` holds under its
/// key.
fn check_row(model: &Model, cells: Cells, what: &str) {
    let row = by_key(vec![cells], what);
    let (id, values) = row.into_iter().next().unwrap();
    assert_eq!(model.get(&id), Some(&values), "{what}: row {id}");
}

/// Opens scans until the coordinator refuses one, up to `SCAN_LIMIT + 1`:
/// the scans it took, and the refusal.
async fn fill_scan_records(c: &Cluster, table: &Table) -> (Vec<Scan>, ShoalError) {
    let mut held = Vec::new();
    for _ in 0..=SCAN_LIMIT {
        match open_small(c, table).await {
            Ok(scan) => held.push(scan),
            Err(e) => return (held, e),
        }
    }
    panic!(
        "{} scans open at once, max_concurrent_scans is {SCAN_LIMIT}",
        held.len()
    );
}

#[test]
fn scans_closed_or_dropped_early_give_their_scan_records_back() {
    let mut cluster = TestCluster::start_with(|c| c.max_concurrent_scans = SCAN_LIMIT);
    let rt = runtime();
    rt.block_on(async {
        let c = Cluster::connect(&cluster.mgmd_addr).await.expect("connect");
        let (table, model) = create_and_fill(&c, "early", 300).await;

        // The limit holds: SCAN_LIMIT scans open (none read), the next one
        // is refused with a temporary error that names the limit.
        let (mut held, e) = fill_scan_records(&c, &table).await;
        assert_eq!(held.len(), SCAN_LIMIT as usize, "{e}");
        assert_eq!(e.code, ErrorCode::TooManyScans, "{e}");
        assert_eq!(e.class(), ErrorClass::Temporary, "{e}");
        assert!(e.detail.contains("max_concurrent_scans"), "{e}");
        // A closed one makes room for exactly one more.
        held.pop()
            .unwrap()
            .close()
            .await
            .expect("close an unread scan");
        held.push(
            open_small(&c, &table)
                .await
                .expect("a scan in the freed record"),
        );
        let e = open_small(&c, &table)
            .await
            .expect_err("past the limit again");
        assert_eq!(e.code, ErrorCode::TooManyScans, "{e}");
        drop(held);

        // Many times the limit, one after another, each ended early.
        for i in 0..SCAN_LIMIT * 25 {
            let what = format!("scan {i}");
            match i % 5 {
                // Closed after a few rows.
                0 => {
                    let mut scan = open_small(&c, &table).await.expect(&what);
                    for _ in 0..3 {
                        let row = scan.next_row().await.expect(&what).expect("a row");
                        check_row(&model, row.values(), &what);
                    }
                    scan.close().await.expect(&what);
                }
                // Closed with its first round unread.
                1 => {
                    let scan = open_small(&c, &table).await.expect(&what);
                    scan.close().await.expect(&what);
                }
                // Dropped after a few rows, holding a round.
                2 => {
                    let mut scan = open_small(&c, &table).await.expect(&what);
                    for _ in 0..3 {
                        let row = scan.next_row().await.expect(&what).expect("a row");
                        check_row(&model, row.values(), &what);
                    }
                    drop(scan);
                }
                // Dropped while its next round is on its way: every row
                // of the first round is taken, then the wait for the next
                // one (its request sent) is given up after one poll.
                3 => {
                    let mut scan = open_small(&c, &table).await.expect(&what);
                    let mut read = 0;
                    while let Some(row) = scan.next_row().now_or_never() {
                        let row = row.expect(&what).expect("not the end yet");
                        check_row(&model, row.values(), &what);
                        read += 1;
                    }
                    assert!(read > 0, "{what}: the first round held no row");
                    assert!(!scan.is_done(), "{what}");
                    drop(scan);
                }
                // Dropped while it is being opened: its `ScanTabReq` is
                // queued, and the wait for the first round given up.
                _ => {
                    if let Some(scan) = open_small(&c, &table).now_or_never() {
                        panic!("{what}: opened without waiting: {scan:?}");
                    }
                }
            }
        }

        // None of them kept its record: SCAN_LIMIT fit at once again, and
        // no more; read side by side to their ends, each holds every row.
        let (mut held, e) = fill_scan_records(&c, &table).await;
        assert_eq!(held.len(), SCAN_LIMIT as usize, "{e}");
        assert_eq!(e.code, ErrorCode::TooManyScans, "{e}");
        let mut rows: Vec<Vec<Cells>> = vec![Vec::new(); held.len()];
        let mut open = held.len();
        while open > 0 {
            open = 0;
            for (scan, rows) in held.iter_mut().zip(&mut rows) {
                if let Some(row) = scan.next_row().await.expect("a scan side by side") {
                    rows.push(row.values());
                    open += 1;
                }
            }
        }
        for (i, rows) in rows.into_iter().enumerate() {
            let what = format!("scan {i} of {SCAN_LIMIT} side by side");
            assert_same(&by_key(rows, &what), &model, &what);
        }
        // Read to their ends, they are forgotten too.
        let (held, e) = fill_scan_records(&c, &table).await;
        assert_eq!(held.len(), SCAN_LIMIT as usize, "{e}");
        drop(held);
        check_full_scan(&c, &table, &model, "a full scan after them all").await;
    });
    cluster.assert_alive();
}

#[test]
fn a_scan_of_a_table_dropped_meanwhile_ends_with_a_clear_error() {
    let mut cluster = TestCluster::start();
    let rt = runtime();
    let (a, b) = rt.block_on(async {
        let a = Cluster::connect(&cluster.mgmd_addr)
            .await
            .expect("connect a");
        let b = Cluster::connect(&cluster.mgmd_addr)
            .await
            .expect("connect b");
        (a, b)
    });
    let (table, model) = rt.block_on(create_and_fill(&a, "doomed", 500));
    let (mut scan, first) = rt.block_on(async {
        let mut scan = a
            .transaction()
            .scan(&table)
            .batch(4, 4096)
            .open()
            .await
            .expect("open");
        let first = scan
            .next_row()
            .await
            .expect("a round")
            .expect("a row")
            .values();
        (scan, first)
    });
    check_row(&model, first, "the first row");
    // Another client drops the table; mgmd answers once the data node has
    // dropped it too.
    rt.block_on(b.drop_table("doomed"))
        .expect("drop the table through another client");
    let (rows, end) = rt.block_on(drain_until_error(&mut scan));
    let e = end.expect_err("the rest of a scan of a dropped table");
    assert!(
        matches!(
            e.code,
            ErrorCode::NoSuchTable | ErrorCode::InvalidSchemaVersion
        ),
        "{e}"
    );
    assert_eq!(e.class(), ErrorClass::Permanent, "{e}");
    // The client names the scan's table, the node what became of it.
    assert!(e.detail.contains("\"doomed\""), "{e}");
    assert!(
        e.detail.contains("dropped") || e.detail.contains("version"),
        "{e}"
    );
    // At most the rest of the round already there came before the error
    // (a round asks 4 rows, but at least one of every fragment).
    let fragments = table
        .fragment_replicas()
        .expect("a distributed table")
        .len();
    let round_rows_max = fragments.max(4);
    assert!(
        rows.len() < round_rows_max,
        "{} rows after the drop: {e}",
        rows.len()
    );
    for cells in rows {
        check_row(&model, cells, "a row of the round before the drop");
    }
    assert!(scan.is_done(), "a failed scan is over");
    let again = rt.block_on(scan.next_row()).map(|r| r.is_some());
    assert_eq!(again.map_err(|e| e.code), Err(e.code), "it stays failed");
    cluster.assert_alive();

    rt.block_on(async {
        // The error made the client forget the table's definition: it asks
        // mgmd again and learns the table is gone.
        let e = a.table("doomed").await.expect_err("a dropped table");
        assert_eq!(e.code, ErrorCode::NoSuchTable, "{e}");
        // A scan through the stale definition is refused, not served.
        let e = a
            .transaction()
            .scan(&table)
            .open()
            .await
            .expect_err("a scan of a dropped table");
        assert!(
            matches!(
                e.code,
                ErrorCode::NoSuchTable | ErrorCode::InvalidSchemaVersion
            ),
            "{e}"
        );
        // A new table of the same name is scanned through its own
        // definition; the stale one is still refused.
        let (_, model) = create_and_fill(&b, "doomed", 50).await;
        let fresh = a.table("doomed").await.expect("the new table");
        assert!(!fresh.same_version(&table), "a new definition");
        check_full_scan(&a, &fresh, &model, "the new table").await;
        let e = a
            .transaction()
            .scan(&table)
            .open()
            .await
            .expect_err("a scan through the dropped table's definition");
        assert!(
            matches!(
                e.code,
                ErrorCode::NoSuchTable | ErrorCode::InvalidSchemaVersion
            ),
            "{e}"
        );
    });
    cluster.assert_alive();
}

/// A program's operand: a little-endian u16.
fn le(v: u16) -> [u8; 2] {
    v.to_le_bytes()
}

#[test]
fn malformed_filters_and_locking_scans_are_refused_and_the_node_stays_up() {
    let mut cluster = TestCluster::start();
    let rt = runtime();
    let c = rt
        .block_on(Cluster::connect(&cluster.mgmd_addr))
        .expect("connect");
    let (table, model) = rt.block_on(create_and_fill(&c, "filtered", 500));

    // A raw program is sent as it is and run: `n IS NULL`, written by hand.
    let is_null_n = [&[opcode::IS_NULL][..], &le(N)].concat();
    assert_eq!(
        FilterExpr::IsNull(N).compile(table.def()).unwrap(),
        is_null_n
    );
    rt.block_on(async {
        let mut scan = c
            .transaction()
            .scan(&table)
            .filter_program(is_null_n)
            .open()
            .await
            .expect("a valid raw program");
        let rows = drain(&mut scan).await.expect("a valid raw program");
        let got = by_key(rows, "raw n IS NULL");
        assert_same(
            &got,
            &rows_where(&model, |r| r[3].is_null()),
            "raw n IS NULL",
        );
        assert!(!got.is_empty());
    });

    let mut over_bytes = vec![opcode::TRUE];
    while over_bytes.len() <= FILTER_BYTES_MAX {
        over_bytes.extend([opcode::TRUE, opcode::AND]);
    }
    let mut over_insns = vec![opcode::TRUE];
    while over_insns.len() <= FILTER_INSTRUCTIONS_MAX {
        over_insns.extend([opcode::TRUE, opcode::OR]);
    }
    let mut too_deep = vec![opcode::TRUE; FILTER_STACK_MAX + 1];
    too_deep.extend(vec![opcode::AND; FILTER_STACK_MAX]);
    let eq = CmpOp::Eq.as_u8();
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "an unknown opcode",
            vec![opcode::TRUE, 0x7f],
            "unknown opcode 0x7f",
        ),
        (
            "a truncated column id",
            vec![opcode::CMP_CONST, eq, 0x00],
            "truncated operand",
        ),
        (
            "a truncated constant",
            [&[opcode::CMP_CONST, eq][..], &le(BIG), &le(8), &[1, 2, 3]].concat(),
            "truncated operand",
        ),
        (
            "a stack underflow",
            vec![opcode::TRUE, opcode::AND],
            "stack underflow",
        ),
        (
            "two values left",
            vec![opcode::TRUE, opcode::TRUE],
            "exactly one value",
        ),
        (
            "a program over 16 KiB",
            over_bytes,
            "exceeds FILTER_BYTES_MAX",
        ),
        (
            "too many instructions",
            over_insns,
            "FILTER_INSTRUCTIONS_MAX",
        ),
        ("too deep a stack", too_deep, "FILTER_STACK_MAX"),
        (
            "a column the table lacks",
            [&[opcode::IS_NULL][..], &le(9)].concat(),
            "column 9 does not exist",
        ),
        (
            "LIKE on an INT column",
            [&[opcode::LIKE][..], &le(N), &le(1), b"%"].concat(),
            "LIKE needs",
        ),
        (
            "an INT compared with a VARCHAR",
            [&[opcode::CMP_COLS, eq][..], &le(N), &le(NAME)].concat(),
            "not comparable",
        ),
        (
            "a 4-byte constant for a BIGINT",
            [
                &[opcode::CMP_CONST, eq][..],
                &le(BIG),
                &le(4),
                &[0, 0, 0, 0],
            ]
            .concat(),
            "constant",
        ),
        (
            "an unknown comparison",
            [&[opcode::CMP_COLS, 9][..], &le(N), &le(N)].concat(),
            "comparison byte 9",
        ),
    ];
    for (what, program, says) in cases {
        let e = rt
            .block_on(c.transaction().scan(&table).filter_program(program).open())
            .expect_err(what);
        assert_eq!(e.code, ErrorCode::BadFilter, "{what}: {e}");
        assert!(e.detail.contains(says), "{what}: {e}");
        cluster.assert_alive();
        rt.block_on(check_full_scan(
            &c,
            &table,
            &model,
            &format!("a full scan after {what}"),
        ));
    }

    // The same mistakes through FilterExpr are caught before anything is
    // sent.
    rt.block_on(async {
        let e = c
            .transaction()
            .scan(&table)
            .filter(FilterExpr::IsNull(9))
            .open()
            .await
            .expect_err("a column the table lacks");
        assert_eq!(e.code, ErrorCode::NoSuchColumn, "{e}");
        let e = c
            .transaction()
            .scan(&table)
            .filter(like(N, "%"))
            .open()
            .await
            .expect_err("LIKE on an INT column");
        assert_eq!(e.code, ErrorCode::BadFilter, "{e}");
        assert!(e.detail.contains("LIKE needs"), "{e}");
    });

    // Only committed-read scans are served.
    for lock in [LockMode::Shared, LockMode::Exclusive] {
        let e = rt
            .block_on(c.transaction().scan(&table).lock(lock).open())
            .expect_err("a locking scan");
        assert_eq!(e.code, ErrorCode::BadRequest, "{lock:?}: {e}");
        assert!(
            e.detail.contains(&format!("{lock:?}")) && e.detail.contains("CommittedRead"),
            "{lock:?}: {e}"
        );
        cluster.assert_alive();
    }
    rt.block_on(async {
        check_full_scan(&c, &table, &model, "a full scan at the end").await;
        let count = check_against_model(
            &c,
            &table,
            &model,
            "n > 400 OR name LIKE 'alan1%'",
            FilterExpr::Or(vec![
                cmp(N, CmpOp::Gt, Value::Int(400)),
                like(NAME, "alan1%"),
            ]),
        )
        .await;
        assert!(count > 0);
    });
    cluster.assert_alive();
}

/// Heartbeats of the node-failure test: a killed node's links close at
/// once, and a short interval keeps the rest of the failure handling
/// short too.
const HEARTBEAT_MS: u64 = 250;
/// The client's patience in the node-failure test.
const RECEIVE_TIMEOUT: Duration = Duration::from_secs(10);

/// The data node holding the primary replica of key `id`, by the table's
/// distribution (the rule the client and the data nodes share).
fn primary_of(table: &Table, id: u32) -> u16 {
    let def = table.def();
    let map = def
        .distribution
        .as_ref()
        .expect("a distributed table")
        .map()
        .expect("its distribution map");
    let layout = RowLayout::new(def);
    let mut key = Vec::new();
    layout
        .encode_key(&[Value::UInt(id.into())], &mut key)
        .expect("encode a key");
    let dkey = distribution_key(&layout, &key, def.options.distribution_key_columns)
        .expect("its distribution key");
    map.replicas(map.fragment_of(hash_key(dkey)))[0]
}

/// A scan in rounds of at most 8 rows (one per fragment) coordinated by
/// data node `node`: a transaction's scan goes to its coordinator, and a
/// committed read of a key whose primary `node` holds makes `node` the
/// coordinator.
async fn scan_on(c: &Cluster, table: &Table, model: &Model, node: u16) -> Scan {
    let key = (0..ROWS)
        .find(|&id| primary_of(table, id) == node)
        .unwrap_or_else(|| panic!("no key has its primary on data node {node}"));
    let mut tx = c.transaction();
    let read = tx
        .read(
            &table.full_record(),
            &[Value::UInt(key.into())],
            LockMode::CommittedRead,
        )
        .expect("queue a read");
    tx.execute(ExecType::Commit).await.expect("read a row");
    assert_eq!(
        tx.row(read)
            .map(|r| r.values().into_iter().map(|(_, v)| v).collect()),
        model.get(&u64::from(key)).cloned(),
        "row {key}"
    );
    tx.scan(table)
        .batch(8, 8 << 10)
        .open()
        .await
        .unwrap_or_else(|e| panic!("open a scan on data node {node}: {e}"))
}

/// Reads `scan` on after its coordinator or a replica it reads failed: it
/// must end with a temporary error, after no more rows than a round holds,
/// each of them right. Returns the error.
async fn expect_failed(
    scan: &mut Scan,
    model: &Model,
    round_rows_max: usize,
    what: &str,
) -> ShoalError {
    let (rows, end) = drain_until_error(scan).await;
    let Err(e) = end else {
        panic!(
            "{what}: the scan ended as complete after {} more rows, though a data node it read from died",
            rows.len()
        );
    };
    assert_eq!(e.class(), ErrorClass::Temporary, "{what}: {e}");
    assert!(
        rows.len() <= round_rows_max,
        "{what}: {} rows: {e}",
        rows.len()
    );
    for cells in rows {
        check_row(model, cells, what);
    }
    e
}

#[test]
fn a_data_node_killed_during_a_scan_ends_it_with_a_temporary_error() {
    let mut cluster = TestCluster::start_nodes(4, 2, |c| {
        c.heartbeat_interval_ms = HEARTBEAT_MS;
        c.arbitration_timeout_ms = 2_000;
    });
    let rt = runtime();
    let c = rt
        .block_on(Cluster::connect_with(
            &cluster.mgmd_addr,
            // A scan left waiting (a round lost with the node) fails in
            // seconds with ReceiveTimeout, which is not a temporary error,
            // rather than after the default minute.
            ClusterOptions {
                receive_timeout: Some(RECEIVE_TIMEOUT),
                ..ClusterOptions::default()
            },
        ))
        .expect("connect");
    let (table, model) = rt.block_on(create_and_fill(&c, "survivor", ROWS));
    // The victim is a primary in the other node group than node 1's.
    let replicas = table.fragment_replicas().expect("a distributed table");
    let victim = replicas
        .iter()
        .find(|r| !r.contains(&1))
        .map(|r| r[0])
        .expect("a fragment in the other node group");
    let survivors: Vec<u16> = (1..=4).filter(|&n| n != victim).collect();
    let eager_node = survivors[1];
    // Three scans, each holding its first round: one coordinated by node
    // 1, read on once the cluster has seen the failure; one by another
    // survivor, read on at once (its next round likely asked before the
    // failure is known); one by the victim itself.
    let round_rows_max = replicas.len();
    let (mut patient, mut eager, mut on_victim) = rt.block_on(async {
        let mut scans = Vec::new();
        for node in [1, eager_node, victim] {
            let mut scan = scan_on(&c, &table, &model, node).await;
            let row = scan
                .next_row()
                .await
                .expect("a first round")
                .expect("a row");
            check_row(&model, row.values(), "a first row");
            assert!(!scan.is_done());
            scans.push(scan);
        }
        let mut scans = scans.into_iter();
        (
            scans.next().unwrap(),
            scans.next().unwrap(),
            scans.next().unwrap(),
        )
    });

    let mut child = cluster.datanodes[victim as usize - 1]
        .take()
        .expect("the victim runs");
    child.kill().expect("kill -9");
    child.wait().expect("reap");
    let e = rt.block_on(expect_failed(
        &mut eager,
        &model,
        round_rows_max,
        "read on at once",
    ));
    assert!(
        matches!(
            e.code,
            ErrorCode::NodeFailed | ErrorCode::DistributionChanged
        ),
        "{e}"
    );
    assert!(
        e.detail.contains(&format!("on data node {eager_node}")),
        "{e}"
    );

    // Wait until node 1 has seen the failure (its view drops the victim),
    // so that the scan's next request finds it known.
    let deadline = Instant::now() + Duration::from_secs(20);
    let failed = format!("failed [{victim}]");
    while !cluster.log("datanode-1.log").contains(&failed) {
        assert!(
            Instant::now() < deadline,
            "data node 1 did not see data node {victim} fail\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }

    rt.block_on(async {
        // Coordinated elsewhere: the error names the failed node.
        let e = expect_failed(&mut patient, &model, round_rows_max, "read on later").await;
        assert!(
            matches!(
                e.code,
                ErrorCode::NodeFailed | ErrorCode::DistributionChanged
            ),
            "{e}"
        );
        assert!(e.detail.contains("on data node 1"), "{e}");
        assert!(e.detail.contains(&format!("data node {victim}, ")), "{e}");
        // Coordinated by the victim: the connection's loss.
        let e = expect_failed(&mut on_victim, &model, round_rows_max, "dead coordinator").await;
        assert!(
            matches!(
                e.code,
                ErrorCode::NodeFailureAbort | ErrorCode::ClusterFailure
            ),
            "{e}"
        );
        assert!(
            e.detail
                .contains(&format!("connection to data node {victim}")),
            "{e}"
        );

        // Each survivor coordinates a scan that returns every row.
        for &node in &survivors {
            let what = format!("a full scan coordinated by data node {node} after the failure");
            let mut scan = scan_on(&c, &table, &model, node).await;
            let rows = drain(&mut scan)
                .await
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_same(&by_key(rows, &what), &model, &what);
        }
    });
    cluster.assert_alive();
}

/// Locking scans: a shared-lock scan holds every row it returned until its
/// transaction ends (a writer of one waits, then goes on); an
/// exclusive-lock scan's transaction updates the rows it locked; its filter
/// is checked against each locked image; closing the scan early keeps the
/// locks, and the transaction's end frees them.
#[test]
fn locking_scans_hold_their_rows_until_the_transaction_ends() {
    let mut cluster = TestCluster::start_nodes(2, 2, |_| {});
    let rt = runtime();
    rt.block_on(async {
        let c = Cluster::connect(&cluster.mgmd_addr).await.expect("connect");
        let (table, model) = create_and_fill(&c, "locked", 200).await;
        let rec = table.full_record();
        // Shared: every row of the filter, locked.
        let mut tx = c.transaction();
        let mut scan = tx
            .scan(&table)
            .filter(cmp(BIG, CmpOp::Lt, Value::Int(0)))
            .lock(LockMode::Shared)
            .batch(16, 1 << 20)
            .open_locking(&mut tx)
            .await
            .expect("open a shared-lock scan");
        let rows = scan.collect_all().await.expect("a shared-lock scan");
        drop(scan);
        let want = rows_where(&model, |r| int_of(&r[BIG as usize]).is_some_and(|b| b < 0));
        let got = by_key(
            rows.iter().map(|r| r.values()).collect(),
            "shared-lock scan",
        );
        assert_same(&got, &want, "shared-lock scan");
        let (&locked_id, _) = want.iter().next().expect("a negative row");
        // Another transaction's update of a locked row waits for the lock:
        // it cannot commit until the scanning one ends.
        let writer = {
            let c = c.clone();
            let rec = rec.clone();
            tokio::spawn(async move {
                let mut w = c.transaction();
                let mut row = row_of(locked_id as u32);
                row[BIG as usize] = Value::Int(-1);
                w.update(&rec, &row).expect("queue an update");
                let began = Instant::now();
                let result = w.execute(ExecType::Commit).await;
                (result, began.elapsed())
            })
        };
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !writer.is_finished(),
            "the update did not wait for the shared lock"
        );
        tx.execute(ExecType::Commit)
            .await
            .expect("commit the scan's transaction");
        let (result, waited) = writer.await.expect("the writer task");
        result.expect("the update goes on once the lock is free");
        assert!(waited >= Duration::from_millis(250), "waited {waited:?}");

        // Exclusive: the scan's transaction updates what it locked, and a
        // row that no longer matches by the time it is locked is skipped.
        let mut tx = c.transaction();
        let mut scan = tx
            .scan(&table)
            .filter(cmp(ID, CmpOp::Lt, Value::UInt(10)))
            .lock(LockMode::Exclusive)
            .batch(4, 1 << 20)
            .open_locking(&mut tx)
            .await
            .expect("open an exclusive-lock scan");
        let rows = scan.collect_all().await.expect("an exclusive-lock scan");
        drop(scan);
        assert_eq!(rows.len(), 10);
        for r in &rows {
            let mut values: Vec<Value> = r.values().into_iter().map(|(_, v)| v).collect();
            values[BIG as usize] = Value::Int(7_000);
            tx.update(&rec, &values)
                .expect("queue an update of a locked row");
        }
        tx.execute(ExecType::Commit)
            .await
            .expect("update the locked rows");
        let mut check = c
            .transaction()
            .scan(&table)
            .filter(cmp(BIG, CmpOp::Eq, Value::Int(7_000)))
            .open()
            .await
            .expect("open");
        assert_eq!(check.collect_all().await.expect("scan").len(), 10);

        // A plain open of a locking scan says how to open one.
        let e = c
            .transaction()
            .scan(&table)
            .lock(LockMode::Shared)
            .open()
            .await
            .expect_err("a locking scan through open()");
        assert_eq!(e.code, ErrorCode::BadRequest, "{e}");
        assert!(e.detail.contains("open_locking"), "{e}");
    });
    cluster.assert_alive();
}
