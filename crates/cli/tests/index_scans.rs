//! Ordered-index scans (docs/PROTOCOL.md §12: bounds, "Merging",
//! "Ordered indexes", "Adding and dropping an index") over real processes
//! on 127.0.0.1, each checked against a model the test keeps. On four data
//! nodes in two node groups, ranges of every shape over a signed BIGINT
//! and a (nullable VARCHAR, BIGINT) index return exactly the model's rows,
//! ascending and descending, merged across fragments in rounds of a few
//! rows, also with a filter and a projection, and again after the indexed
//! columns of rows changed. An index created while a writer updates its
//! column holds exactly the writer's final values; dropped, its scans fail
//! clearly; created again under its old name, it is whole. Indexes come
//! back whole after a node restart (the restarted node then serving
//! alone), also when indexes were dropped and created while the node was
//! away or starting, and after a restart of the whole cluster from its
//! files. Bad index requests are refused with clear errors and the node
//! stays up.

mod common;

use common::{runtime, TestCluster};
use shoal_client::{
    Cluster, ClusterOptions, CmpOp, ColumnDef, ColumnType, ErrorClass, ErrorCode, ExecType,
    FilterExpr, LockMode, Scan, ScanBuilder, ShoalError, Table, TableDef, Transaction, Value,
};
use shoal_types::distribution::{distribution_key, FragmentId};

use shoal_types::{hash_key, RowLayout};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound::{self, Excluded, Included, Unbounded};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A row's values in column order.
type Row = Vec<Value>;
/// Rows by primary key.
type Model = BTreeMap<u64, Row>;
/// A row as a scan returned it: (column id, value), in its record's order.
type Cells = Vec<(u16, Value)>;

/// Rows per writing transaction.
const WRITE_BATCH_ROWS: usize = 250;
/// Rounds of an ordered scan "in small batches": 3 rows and 200 bytes
/// asked, so each round brings about one row per fragment and the
/// coordinator merges hundreds of rounds.
const SMALL_BATCH: (u32, u32) = (3, 200);
/// The client's default round.
const DEFAULT_BATCH: (u32, u32) = (256, 256 << 10);

// ---------------------------------------------------------------------
// The model of an index: keys, ranges, expected rows.
// ---------------------------------------------------------------------

/// One column of an index key as the index orders it: NULL before every
/// value, integers by value, strings by their bytes. Written here rather
/// than taken from `shoal_types::index_key`, so that the product's
/// encoding is what the test checks. (The derived order compares the
/// variant first; one index column holds one variant besides NULL.)
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum KeyPart {
    Null,
    Int(i128),
    Bytes(Vec<u8>),
}

fn key_part(v: &Value) -> KeyPart {
    match v {
        Value::Null => KeyPart::Null,
        Value::Int(x) => KeyPart::Int(i128::from(*x)),
        Value::UInt(x) => KeyPart::Int(i128::from(*x)),
        Value::Str(s) => KeyPart::Bytes(s.as_bytes().to_vec()),
        other => panic!("the model has no key order for {other:?}"),
    }
}

/// An index as the model sees it: its name and the positions of its
/// columns in a row.
#[derive(Clone, Copy, Debug)]
struct Ix {
    name: &'static str,
    columns: &'static [usize],
}

impl Ix {
    fn key(&self, row: &[Value]) -> Vec<KeyPart> {
        self.columns.iter().map(|&c| key_part(&row[c])).collect()
    }
}

/// One range of an index scan: values for a prefix of the index's
/// columns at each end.
#[derive(Clone, Debug)]
struct Range {
    low: Bound<Vec<Value>>,
    high: Bound<Vec<Value>>,
}

fn range(low: Bound<Vec<Value>>, high: Bound<Vec<Value>>) -> Range {
    Range { low, high }
}

fn eq(values: Vec<Value>) -> Range {
    range(Included(values.clone()), Included(values))
}

/// How the first `bound.len()` columns of `key` compare with `bound`.
fn cmp_prefix(key: &[KeyPart], bound: &[Value]) -> Ordering {
    let bound: Vec<KeyPart> = bound.iter().map(key_part).collect();
    key[..bound.len()].cmp(&bound[..])
}

impl Range {
    /// Whether the range holds `key`; `closed`: as if both ends were
    /// inclusive (the entries a walk of the range may look at).
    fn holds(&self, key: &[KeyPart], closed: bool) -> bool {
        let above_low = match &self.low {
            Unbounded => true,
            Included(b) => cmp_prefix(key, b) != Ordering::Less,
            Excluded(b) => match cmp_prefix(key, b) {
                Ordering::Greater => true,
                Ordering::Equal => closed,
                Ordering::Less => false,
            },
        };
        let below_high = match &self.high {
            Unbounded => true,
            Included(b) => cmp_prefix(key, b) != Ordering::Greater,
            Excluded(b) => match cmp_prefix(key, b) {
                Ordering::Less => true,
                Ordering::Equal => closed,
                Ordering::Greater => false,
            },
        };
        above_low && below_high
    }
}

/// Whether any of `ranges` holds `key` (no ranges: the whole index).
fn in_ranges(ranges: &[Range], key: &[KeyPart]) -> bool {
    ranges.is_empty() || ranges.iter().any(|r| r.holds(key, false))
}

/// How a scan walks the index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Order {
    /// Each fragment in index order, fragments interleaved.
    Any,
    /// Each fragment from its high end down, fragments interleaved.
    AnyDescending,
    /// One stream in index order, merged by the coordinator.
    Ascending,
    /// One stream from the high end down, merged by the coordinator.
    Descending,
}

impl Order {
    const ALL: [Order; 4] = [
        Order::Any,
        Order::AnyDescending,
        Order::Ascending,
        Order::Descending,
    ];

    /// The round size a check of this order uses: small for the merged
    /// orders, so the merge runs over many rounds.
    fn batch(self) -> (u32, u32) {
        match self {
            Order::Any | Order::AnyDescending => DEFAULT_BATCH,
            Order::Ascending | Order::Descending => SMALL_BATCH,
        }
    }
}

/// What an index scan asks for.
struct Ask<'a> {
    index: Ix,
    ranges: &'a [Range],
    order: Order,
    batch: (u32, u32),
}

fn as_slices(b: &Bound<Vec<Value>>) -> Bound<&[Value]> {
    b.as_ref().map(Vec::as_slice)
}

/// Adds the index, ranges, order and batch of `ask` to `builder`.
fn with_ask(builder: ScanBuilder, ask: &Ask<'_>) -> ScanBuilder {
    let mut b = builder.index(ask.index.name);
    for r in ask.ranges {
        b = b.range(as_slices(&r.low), as_slices(&r.high));
    }
    let b = match ask.order {
        Order::Any => b,
        Order::AnyDescending => b.descending(),
        Order::Ascending => b.ordered(),
        Order::Descending => b.ordered().descending(),
    };
    b.batch(ask.batch.0, ask.batch.1)
}

/// Opens the scan and reads it to its end, a row at a time: the rows in
/// the order they came, and the rows the data nodes examined.
async fn run_scan(builder: ScanBuilder) -> Result<(Vec<Cells>, u64), ShoalError> {
    let mut scan = builder.open().await?;
    let rows = drain(&mut scan).await?;
    Ok((rows, scan.rows_examined()))
}

async fn drain(scan: &mut Scan) -> Result<Vec<Cells>, ShoalError> {
    let mut rows = Vec::new();
    while let Some(row) = scan.next_row().await? {
        rows.push(row.values());
    }
    Ok(rows)
}

/// The key of a row of any table here: its first column, unsigned.
fn id_of(row: &[Value], what: &str) -> u64 {
    match row[0] {
        Value::UInt(id) => id,
        ref other => panic!("{what}: key {other:?} is not an unsigned integer"),
    }
}

/// Whole rows (every one of `columns` columns, in order), as they came.
fn whole_rows(rows: Vec<Cells>, columns: usize, what: &str) -> Vec<Row> {
    let want: Vec<u16> = (0..columns as u16).collect();
    rows.into_iter()
        .map(|cells| {
            let ids: Vec<u16> = cells.iter().map(|(c, _)| *c).collect();
            assert_eq!(ids, want, "{what}: a row with columns {ids:?}");
            cells.into_iter().map(|(_, v)| v).collect()
        })
        .collect()
}

/// Rows by key; panics if a key comes twice.
fn by_key(rows: &[Row], what: &str) -> Model {
    let mut out = Model::new();
    for row in rows {
        let id = id_of(row, what);
        assert!(
            out.insert(id, row.clone()).is_none(),
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
    let wrong: Vec<(&u64, &Row, &Row)> = got
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

/// Panics unless the keys come in `order` (for the merged orders; ties in
/// any order).
fn assert_in_order(keys: &[Vec<KeyPart>], order: Order, what: &str) {
    let wrong = match order {
        Order::Any | Order::AnyDescending => return,
        Order::Ascending => Ordering::Greater,
        Order::Descending => Ordering::Less,
    };
    if let Some(i) = keys.windows(2).position(|w| w[0].cmp(&w[1]) == wrong) {
        panic!(
            "{what}: {order:?} scan out of order at row {i} of {}: {:?} then {:?}",
            keys.len(),
            keys[i],
            keys[i + 1]
        );
    }
}

/// The fragment of key `id` and the data node holding its primary
/// replica, by the table's distribution (the rule the client and the data
/// nodes share).
fn fragment_of(table: &Table, id: u64) -> (FragmentId, u16) {
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
        .encode_key(&[Value::UInt(id)], &mut key)
        .expect("encode a key");
    let dkey = distribution_key(&layout, &key, def.options.distribution_key_columns)
        .expect("its distribution key");
    let fragment = map.fragment_of(hash_key(dkey));
    (fragment, map.replicas(fragment)[0])
}

/// Checks the rows of an index scan of `table` (whole rows) against the
/// model: exactly the model's rows the ranges hold, each once and whole;
/// in index order for a merged scan, and each fragment's rows in index
/// order for the others; at least one row examined per row returned, and
/// no more than the entries of each range (both ends taken as inclusive)
/// summed, so the index was walked, not the table. Returns how many rows
/// came.
fn check_rows(
    table: &Table,
    model: &Model,
    ask: &Ask<'_>,
    rows: Vec<Cells>,
    examined: u64,
    what: &str,
) -> usize {
    let columns = model.values().next().map_or(0, Vec::len);
    let rows = whole_rows(rows, columns, what);
    let got = by_key(&rows, what);
    let want: Model = model
        .iter()
        .filter(|(_, row)| in_ranges(ask.ranges, &ask.index.key(row)))
        .map(|(k, row)| (*k, row.clone()))
        .collect();
    assert_same(&got, &want, what);
    let keys: Vec<Vec<KeyPart>> = rows.iter().map(|r| ask.index.key(r)).collect();
    assert_in_order(&keys, ask.order, what);
    if matches!(ask.order, Order::Any | Order::AnyDescending) {
        let in_fragment_order = match ask.order {
            Order::AnyDescending => Order::Descending,
            _ => Order::Ascending,
        };
        let mut by_fragment: BTreeMap<FragmentId, Vec<Vec<KeyPart>>> = BTreeMap::new();
        for (row, key) in rows.iter().zip(keys) {
            let (fragment, _) = fragment_of(table, id_of(row, what));
            by_fragment.entry(fragment).or_default().push(key);
        }
        for (fragment, keys) in by_fragment {
            let what = format!("{what}: fragment {fragment}");
            assert_in_order(&keys, in_fragment_order, &what);
        }
    }
    // Each range is walked on its own, so an entry two ranges' ends
    // share may be looked at twice.
    let spanned: u64 = if ask.ranges.is_empty() {
        model.len() as u64
    } else {
        ask.ranges
            .iter()
            .map(|r| {
                model
                    .values()
                    .filter(|row| r.holds(&ask.index.key(row), true))
                    .count() as u64
            })
            .sum()
    };
    assert!(
        examined >= rows.len() as u64 && examined <= spanned,
        "{what}: {examined} rows examined for {} returned; the ranges span {spanned} entries",
        rows.len()
    );
    rows.len()
}

/// Runs an index scan of whole rows (through a new transaction) and
/// checks it with [`check_rows`].
async fn check_index_scan(
    c: &Cluster,
    table: &Table,
    model: &Model,
    ask: &Ask<'_>,
    what: &str,
) -> usize {
    let what = format!(
        "{what}: {} {:?} {:?}",
        ask.index.name, ask.order, ask.ranges
    );
    let (rows, examined) = run_scan(with_ask(c.transaction().scan(table), ask))
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    check_rows(table, model, ask, rows, examined, &what)
}

/// [`check_index_scan`] in every order (the merged ones in small
/// rounds). Returns how many rows the ranges hold.
async fn check_every_order(
    c: &Cluster,
    table: &Table,
    model: &Model,
    index: Ix,
    ranges: &[Range],
    what: &str,
) -> usize {
    let mut counts = BTreeSet::new();
    for order in Order::ALL {
        let ask = Ask {
            index,
            ranges,
            order,
            batch: order.batch(),
        };
        counts.insert(check_index_scan(c, table, model, &ask, what).await);
    }
    assert_eq!(counts.len(), 1, "{what}: {counts:?}");
    counts.into_iter().next().unwrap()
}

/// Runs `changes` (a row to write — insert or update —, or a key to
/// delete) in transactions of [`WRITE_BATCH_ROWS`], each `durable` if
/// asked, and applies them to the model once committed. A failure that is
/// not permanent (a data node just failed) is retried: the writes are
/// upserts and deletes that may find nothing, so a repeat does the same.
async fn write_rows(
    c: &Cluster,
    table: &Table,
    model: &mut Model,
    changes: &[(u64, Option<Row>)],
    durable: bool,
) {
    let rec = table.full_record();
    for chunk in changes.chunks(WRITE_BATCH_ROWS) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut tx = c.transaction();
            tx.set_durable(durable);
            for (id, row) in chunk {
                match row {
                    Some(row) => {
                        tx.write(&rec, row).expect("queue a write");
                    }
                    None => {
                        let op = tx
                            .delete(table, &[Value::UInt(*id)])
                            .expect("queue a delete");
                        tx.ignore_error(op);
                    }
                }
            }
            match tx.execute(ExecType::Commit).await {
                Ok(()) => break,
                Err(e) if e.class() != ErrorClass::Permanent && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("write {} rows from key {}: {e}", chunk.len(), chunk[0].0),
            }
        }
        for (id, row) in chunk {
            match row {
                Some(row) => model.insert(*id, row.clone()),
                None => model.remove(id),
            };
        }
    }
}

/// Panics unless the table is spread over several fragments in both node
/// groups of a four-node cluster.
fn assert_spread(table: &Table) {
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
}

/// Panics unless the table's indexes are, by number, `names` (dropped
/// ones as `-`).
fn assert_indexes(table: &Table, names: &[&str]) {
    let got: Vec<&str> = table
        .def()
        .indexes
        .iter()
        .map(|i| if i.dropped { "-" } else { i.name.as_str() })
        .collect();
    assert_eq!(got, names, "indexes of {:?}", table.name());
}

// ---------------------------------------------------------------------
// 1. Ranges of every shape on four data nodes.
// ---------------------------------------------------------------------

/// Column positions of [`ranked_def`].
const ID: usize = 0;
const V: usize = 1;
const S: usize = 2;
const N: usize = 3;

const PRIMARY: Ix = Ix {
    name: "PRIMARY",
    columns: &[ID],
};
const BY_V: Ix = Ix {
    name: "by_v",
    columns: &[V],
};
const BY_S_V: Ix = Ix {
    name: "by_s_v",
    columns: &[S, V],
};

/// Rows of the four-node table.
const RANKED_ROWS: u32 = 2_000;

/// Strings of `s`: several share prefixes, one is a prefix of others
/// with a zero byte after it (escaped in keys), one sorts after ASCII.
const WORDS: [&str; 12] = [
    "a",
    "ab",
    "abc",
    "abd",
    "abcd",
    "b",
    "ba",
    "B",
    "zz",
    "ab\u{0}",
    "ab\u{0}c",
    "\u{e9}t\u{e9}",
];

fn ranked_def(name: &str) -> TableDef {
    TableDef::new(
        name,
        vec![
            ColumnDef::new("id", ColumnType::Int { unsigned: true }),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
            ColumnDef::new("s", ColumnType::VarChar(32)).nullable(),
            ColumnDef::new("n", ColumnType::Int { unsigned: true }),
        ],
        &["id"],
    )
    .and_then(|d| d.with_index("by_v", &["v"]))
    .and_then(|d| d.with_index("by_s_v", &["s", "v"]))
    .unwrap()
}

/// Row `id` as inserted. `v` runs over -200..=200, about five rows each,
/// but for the extremes: i64::MIN (row 0, and i64::MIN + 1 for row
/// 2000), i64::MAX (row 1), ∓2^40 (rows 2 and 3). Every ninth `s` is
/// NULL, some others are empty; the rest are words, every fifth with a
/// suffix (so every word comes bare and extended).
fn ranked_row(id: u32) -> Row {
    let v = match id {
        0 => i64::MIN,
        1 => i64::MAX,
        2 => -(1 << 40),
        3 => 1 << 40,
        2000 => i64::MIN + 1,
        _ => i64::from(id * 7_919 % 401) - 200,
    };
    let word = WORDS[id as usize % WORDS.len()];
    let s = if id % 9 == 4 {
        Value::Null
    } else if id % 13 == 6 {
        Value::Str(String::new())
    } else if id.is_multiple_of(5) {
        Value::Str(format!("{word}{}", id % 17))
    } else {
        Value::Str(word.to_string())
    };
    vec![
        Value::UInt(id.into()),
        Value::Int(v),
        s,
        Value::UInt(u64::from(id * 31 % 100)),
    ]
}

fn int(v: i64) -> Value {
    Value::Int(v)
}

fn text(s: &str) -> Value {
    Value::Str(s.to_string())
}

fn v_of(row: &[Value]) -> i64 {
    match row[V] {
        Value::Int(v) => v,
        ref other => panic!("v {other:?}"),
    }
}

/// The ranges of `by_v` checked, by name, from the model's values (its
/// least and greatest `v`, a `v` several rows share), each with whether
/// it must be empty.
fn by_v_ranges(model: &Model) -> Vec<(&'static str, Vec<Range>, bool)> {
    let min = model.values().map(|r| v_of(r)).min().expect("rows");
    let max = model.values().map(|r| v_of(r)).max().expect("rows");
    let mut counts: BTreeMap<i64, usize> = BTreeMap::new();
    for row in model.values() {
        *counts.entry(v_of(row)).or_default() += 1;
    }
    // Taken from -80..-20, so that it sits between two of the disjoint
    // ranges below.
    let (&dup, &dups) = counts
        .range(-80..-20)
        .max_by_key(|(_, n)| **n)
        .expect("rows");
    assert!(dups >= 3, "no v is shared by three rows: {counts:?}");
    let b = |v: i64| vec![int(v)];
    vec![
        ("the whole index", vec![range(Unbounded, Unbounded)], false),
        (
            "[-50, 50]",
            vec![range(Included(b(-50)), Included(b(50)))],
            false,
        ),
        (
            "(-50, 50)",
            vec![range(Excluded(b(-50)), Excluded(b(50)))],
            false,
        ),
        (
            "[-50, 50)",
            vec![range(Included(b(-50)), Excluded(b(50)))],
            false,
        ),
        (
            "(-50, 50]",
            vec![range(Excluded(b(-50)), Included(b(50)))],
            false,
        ),
        (
            "[150, ...)",
            vec![range(Included(b(150)), Unbounded)],
            false,
        ),
        (
            "(150, ...)",
            vec![range(Excluded(b(150)), Unbounded)],
            false,
        ),
        (
            "(..., -150)",
            vec![range(Unbounded, Excluded(b(-150)))],
            false,
        ),
        (
            "(..., -150]",
            vec![range(Unbounded, Included(b(-150)))],
            false,
        ),
        ("= a shared v", vec![eq(b(dup))], false),
        ("= a v no row has", vec![eq(b(12_345))], true),
        ("(5, 6)", vec![range(Excluded(b(5)), Excluded(b(6)))], true),
        (
            "[1000, 2000]",
            vec![range(Included(b(1_000)), Included(b(2_000)))],
            true,
        ),
        (
            "disjoint ranges",
            vec![
                range(Unbounded, Excluded(b(-190))),
                range(Included(b(-100)), Included(b(-95))),
                eq(b(dup)),
                range(Excluded(b(0)), Included(b(3))),
                range(Included(b(190)), Excluded(b(200))),
                range(Excluded(b((1 << 40) - 1)), Unbounded),
            ],
            false,
        ),
        (
            "below the least v",
            vec![range(Unbounded, Excluded(b(min)))],
            true,
        ),
        (
            "up to the least v",
            vec![range(Unbounded, Included(b(min)))],
            false,
        ),
        (
            "above the greatest v",
            vec![range(Excluded(b(max)), Unbounded)],
            true,
        ),
        (
            "from the greatest v",
            vec![range(Included(b(max)), Unbounded)],
            false,
        ),
        (
            "[i64::MIN, i64::MAX]",
            vec![range(Included(b(i64::MIN)), Included(b(i64::MAX)))],
            false,
        ),
        (
            "both sides beyond the values",
            vec![
                range(Unbounded, Excluded(b(min))),
                range(Excluded(b(max)), Unbounded),
            ],
            true,
        ),
    ]
}

/// The ranges of `by_s_v` checked, by name, with what each must hold at
/// least (so a range that the model empties is noticed).
fn by_s_v_ranges(model: &Model) -> Vec<(&'static str, Vec<Range>, usize)> {
    // A full key a row holds, with a string and its v.
    let (s_full, v_full) = model
        .values()
        .find_map(|r| match &r[S] {
            Value::Str(s) if s == "abc" => Some((s.clone(), v_of(r))),
            _ => None,
        })
        .expect("a row with s = 'abc'");
    vec![
        ("s IS NULL", vec![eq(vec![Value::Null])], 50),
        ("s = ''", vec![eq(vec![text("")])], 20),
        (
            "s = 'ab' (not its extensions)",
            vec![eq(vec![text("ab")])],
            20,
        ),
        ("s = 'ab\\0'", vec![eq(vec![text("ab\u{0}")])], 20),
        (
            "'ab' < s <= 'abd' (its extensions, not itself)",
            vec![range(
                Excluded(vec![text("ab")]),
                Included(vec![text("abd")]),
            )],
            100,
        ),
        (
            "'ab' <= s < 'b'",
            vec![range(Included(vec![text("ab")]), Excluded(vec![text("b")]))],
            100,
        ),
        (
            "s <= 'ab\\0' (not 'ab\\0c' nor 'abc')",
            vec![range(Unbounded, Included(vec![text("ab\u{0}")]))],
            100,
        ),
        (
            "s = 'abc' AND -50 <= v < 100",
            vec![range(
                Included(vec![text("abc"), int(-50)]),
                Excluded(vec![text("abc"), int(100)]),
            )],
            5,
        ),
        (
            "s IS NULL AND 0 <= v <= 100",
            vec![range(
                Included(vec![Value::Null, int(0)]),
                Included(vec![Value::Null, int(100)]),
            )],
            5,
        ),
        (
            "(s, v) = a row's",
            vec![eq(vec![Value::Str(s_full), int(v_full)])],
            1,
        ),
        (
            "s IS NOT NULL (above NULL)",
            vec![range(Excluded(vec![Value::Null]), Unbounded)],
            1_000,
        ),
        (
            "NULLs, 'b' <= s < 'zz', s = 'zz' with v > 0",
            vec![
                eq(vec![Value::Null]),
                range(Included(vec![text("b")]), Excluded(vec![text("zz")])),
                range(
                    Excluded(vec![text("zz"), int(0)]),
                    Included(vec![text("zz")]),
                ),
            ],
            100,
        ),
        ("the whole index", vec![], 1_000),
    ]
}

/// Every check of the four-node table against the model.
async fn check_ranked(c: &Cluster, table: &Table, model: &Model, when: &str) {
    // PRIMARY: every key, ascending and descending; a key range.
    for order in Order::ALL {
        let ask = Ask {
            index: PRIMARY,
            ranges: &[],
            order,
            batch: order.batch(),
        };
        let what = format!("{when}: PRIMARY");
        let (rows, examined) = run_scan(with_ask(c.transaction().scan(table), &ask))
            .await
            .unwrap_or_else(|e| panic!("{what} {order:?}: {e}"));
        let ids: Vec<u64> = rows
            .iter()
            .map(|cells| match cells[0] {
                (0, Value::UInt(id)) => id,
                ref other => panic!("{what}: first cell {other:?}"),
            })
            .collect();
        let count = check_rows(table, model, &ask, rows, examined, &what);
        assert_eq!(count, model.len(), "{what}");
        let strictly = match order {
            Order::Ascending => ids.windows(2).all(|w| w[0] < w[1]),
            Order::Descending => ids.windows(2).all(|w| w[0] > w[1]),
            Order::Any | Order::AnyDescending => true,
        };
        assert!(strictly, "{what} {order:?}: keys {ids:?}");
    }
    let keys = [range(
        Included(vec![Value::UInt(100)]),
        Excluded(vec![Value::UInt(200)]),
    )];
    let count =
        check_every_order(c, table, model, PRIMARY, &keys, &format!("{when}: PRIMARY")).await;
    assert!(count > 50, "{when}: {count} keys in [100, 200)");

    // by_v: ranges of every shape.
    let mut total = 0;
    for (name, ranges, empty) in by_v_ranges(model) {
        let what = format!("{when}: by_v {name}");
        let count = check_every_order(c, table, model, BY_V, &ranges, &what).await;
        assert_eq!(count == 0, empty, "{what}: {count} rows");
        total += count;
    }
    assert!(total > model.len(), "{when}: by_v ranges held {total} rows");

    // by_s_v: NULLs, prefixes of the first column, both columns.
    for (name, ranges, least) in by_s_v_ranges(model) {
        let what = format!("{when}: by_s_v {name}");
        let count = check_every_order(c, table, model, BY_S_V, &ranges, &what).await;
        assert!(
            count >= least,
            "{what}: {count} rows, expected {least} at least"
        );
    }

    check_filtered_projections(c, table, model, when).await;
}

/// Index scans with a pushed-down filter and a projection: the rows the
/// model keeps, only the columns asked for, in index order even when the
/// projection leaves the indexed column out.
async fn check_filtered_projections(c: &Cluster, table: &Table, model: &Model, when: &str) {
    // Ordered by v in [-100, 100], s LIKE 'ab%' OR s IS NULL; only (id, s).
    let what = format!("{when}: by_v [-100, 100] filtered, projected to (id, s)");
    let ranges = [range(Included(vec![int(-100)]), Included(vec![int(100)]))];
    let keep = |r: &Row| {
        let v = v_of(r);
        (-100..=100).contains(&v)
            && match &r[S] {
                Value::Null => true,
                Value::Str(s) => s.starts_with("ab"),
                _ => false,
            }
    };
    let ask = Ask {
        index: BY_V,
        ranges: &ranges,
        order: Order::Ascending,
        batch: SMALL_BATCH,
    };
    let builder = with_ask(c.transaction().scan(table), &ask)
        .columns(&["id", "s"])
        .filter(FilterExpr::Or(vec![
            FilterExpr::Like {
                col: S as u16,
                pattern: b"ab%".to_vec(),
            },
            FilterExpr::IsNull(S as u16),
        ]));
    let (rows, examined) = run_scan(builder)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut seen = BTreeSet::new();
    let mut last_v = i64::MIN;
    for cells in &rows {
        let ids: Vec<u16> = cells.iter().map(|(c, _)| *c).collect();
        assert_eq!(ids, [ID as u16, S as u16], "{what}: {cells:?}");
        let Value::UInt(id) = cells[0].1 else {
            panic!("{what}: {cells:?}")
        };
        let row = model
            .get(&id)
            .unwrap_or_else(|| panic!("{what}: row {id} is not in the model"));
        assert!(keep(row), "{what}: row {id} {row:?} is not one to keep");
        assert_eq!(cells[1].1, row[S], "{what}: s of row {id}");
        let v = v_of(row);
        assert!(v >= last_v, "{what}: row {id} with v {v} after v {last_v}");
        last_v = v;
        assert!(seen.insert(id), "{what}: row {id} came twice");
    }
    let want: BTreeSet<u64> = model
        .iter()
        .filter(|(_, r)| keep(r))
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(seen, want, "{what}");
    assert!(want.len() > 20, "{what}: {} rows", want.len());
    let spanned = model
        .values()
        .filter(|r| (-100..=100).contains(&v_of(r)))
        .count() as u64;
    // The filter looks at every row of the range, and at no other.
    assert_eq!(examined, spanned, "{what}: rows examined");

    // A filter no row passes, in an ordered scan of small rounds: every
    // fragment ends without a row, and the merge ends with none.
    let what = format!("{when}: PRIMARY ordered, filter FALSE");
    let ask = Ask {
        index: PRIMARY,
        ranges: &[],
        order: Order::Descending,
        batch: SMALL_BATCH,
    };
    let builder = with_ask(c.transaction().scan(table), &ask).filter(FilterExpr::False);
    let (rows, examined) = run_scan(builder)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(rows.is_empty(), "{what}: {} rows", rows.len());
    assert_eq!(examined, model.len() as u64, "{what}: rows examined");

    // Descending on (s, v) for s >= 'b', n < 50; only (v, id).
    let what = format!("{when}: by_s_v s >= 'b' descending, n < 50, projected to (v, id)");
    let ranges = [range(Included(vec![text("b")]), Unbounded)];
    let ask = Ask {
        index: BY_S_V,
        ranges: &ranges,
        order: Order::Descending,
        batch: (5, 300),
    };
    let builder = with_ask(c.transaction().scan(table), &ask)
        .columns(&["v", "id"])
        .filter(FilterExpr::Cmp {
            col: N as u16,
            op: CmpOp::Lt,
            value: Value::UInt(50),
        });
    let (rows, _) = run_scan(builder)
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let keep = |r: &Row| {
        matches!(&r[N], Value::UInt(n) if *n < 50)
            && BY_S_V.key(r)[0] >= KeyPart::Bytes(b"b".to_vec())
    };
    let mut seen = BTreeSet::new();
    let mut keys = Vec::new();
    for cells in &rows {
        let ids: Vec<u16> = cells.iter().map(|(c, _)| *c).collect();
        assert_eq!(ids, [V as u16, ID as u16], "{what}: {cells:?}");
        let Value::UInt(id) = cells[1].1 else {
            panic!("{what}: {cells:?}")
        };
        let row = model
            .get(&id)
            .unwrap_or_else(|| panic!("{what}: row {id} is not in the model"));
        assert!(keep(row), "{what}: row {id} {row:?} is not one to keep");
        assert_eq!(cells[0].1, row[V], "{what}: v of row {id}");
        assert!(seen.insert(id), "{what}: row {id} came twice");
        keys.push(BY_S_V.key(row));
    }
    assert_in_order(&keys, Order::Descending, &what);
    let want: BTreeSet<u64> = model
        .iter()
        .filter(|(_, r)| keep(r))
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(seen, want, "{what}");
    assert!(want.len() > 20, "{what}: {} rows", want.len());
}

/// The changes after the first checks: rows whose v and s both change,
/// rows whose s alone changes (their by_v entry stays), deleted rows
/// (the least v among them), and new rows (a new least v among them).
fn ranked_changes(model: &Model) -> Vec<(u64, Option<Row>)> {
    let mut changes = Vec::new();
    for (&id, row) in model {
        if id == 0 || id % 11 == 5 {
            changes.push((id, None));
        } else if id % 7 == 2 {
            let mut new = row.clone();
            new[V] = int(3_i64.saturating_sub(v_of(row)));
            new[S] = match id % 3 {
                0 => Value::Null,
                1 => text(""),
                _ => Value::Str(format!("{}~", WORDS[(id as usize / 7) % WORDS.len()])),
            };
            changes.push((id, Some(new)));
        } else if id % 13 == 9 {
            let mut new = row.clone();
            new[S] = match &row[S] {
                Value::Null => text("ab"),
                Value::Str(_) => Value::Null,
                other => panic!("s {other:?}"),
            };
            changes.push((id, Some(new)));
        }
    }
    for id in RANKED_ROWS..RANKED_ROWS + 100 {
        changes.push((id.into(), Some(ranked_row(id))));
    }
    changes
}

/// An ordered scan of `by_v` in small rounds, a third read, then rows
/// changed under it (v moved across the whole range, rows deleted and
/// inserted), then read to its end. As docs/PROTOCOL.md §12 ("Why it is
/// right") promises: the keys still come in order; every row untouched
/// by the changes comes exactly once, as it is; a changed row comes as
/// it was or as it became, at most twice (at its old and its new key); a
/// deleted one at most once, as it was; a new one at most once.
async fn check_scan_under_changes(
    c: &Cluster,
    table: &Table,
    model: &mut Model,
    order: Order,
    pass: u64,
) {
    let what = format!("a {order:?} scan under changes");
    let before = model.clone();
    let ask = Ask {
        index: BY_V,
        ranges: &[],
        order,
        batch: SMALL_BATCH,
    };
    let mut scan = with_ask(c.transaction().scan(table), &ask)
        .open()
        .await
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    let mut rows = Vec::new();
    while rows.len() < before.len() / 3 {
        let row = scan
            .next_row()
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"))
            .unwrap_or_else(|| panic!("{what}: ended after {} rows", rows.len()));
        rows.push(row.values());
    }
    let first = 5_000 + 100 * pass;
    let mut changes: Vec<(u64, Option<Row>)> = Vec::new();
    for (&id, row) in &before {
        match (id + pass) % 10 {
            1 => {
                let mut new = row.clone();
                new[V] = int(v_of(row).saturating_neg());
                changes.push((id, Some(new)));
            }
            7 => changes.push((id, None)),
            _ => {}
        }
    }
    for id in first..first + 100 {
        changes.push((id, Some(ranked_row(id as u32))));
    }
    write_rows(c, table, model, &changes, false).await;
    rows.extend(
        drain(&mut scan)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}")),
    );

    let rows = whole_rows(rows, before.values().next().map_or(0, Vec::len), &what);
    let keys: Vec<Vec<KeyPart>> = rows.iter().map(|r| BY_V.key(r)).collect();
    assert_in_order(&keys, order, &what);
    let touched: BTreeSet<u64> = changes.iter().map(|(id, _)| *id).collect();
    let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
    for row in &rows {
        let id = id_of(row, &what);
        *seen.entry(id).or_default() += 1;
        let was = before.get(&id);
        let is = model.get(&id);
        assert!(
            was == Some(row) || is == Some(row),
            "{what}: row {id} came as {row:?}; it was {was:?} and is {is:?}"
        );
    }
    for (id, row) in &before {
        let times = seen.get(id).copied().unwrap_or(0);
        if touched.contains(id) {
            let most = if model.contains_key(id) { 2 } else { 1 };
            assert!(times <= most, "{what}: changed row {id} came {times} times");
        } else {
            assert_eq!(times, 1, "{what}: untouched row {id} {row:?}");
        }
    }
    for id in first..first + 100 {
        let times = seen.get(&id).copied().unwrap_or(0);
        assert!(times <= 1, "{what}: new row {id} came {times} times");
    }
}

#[test]
fn index_scans_on_four_nodes_match_the_model_before_and_after_changes() {
    let mut cluster = TestCluster::start_nodes(4, 2, |_| {});
    let rt = runtime();
    let c = rt
        .block_on(Cluster::connect(&cluster.mgmd_addr))
        .expect("connect");
    rt.block_on(async {
        let table = c
            .create_table(ranked_def("ranked"))
            .await
            .expect("create ranked");
        assert_spread(&table);
        assert_indexes(&table, &["PRIMARY", "by_v", "by_s_v"]);
        let mut model = Model::new();
        let rows: Vec<(u64, Option<Row>)> = (0..RANKED_ROWS)
            .map(|id| (u64::from(id), Some(ranked_row(id))))
            .collect();
        write_rows(&c, &table, &mut model, &rows, false).await;
        check_ranked(&c, &table, &model, "as inserted").await;

        let changes = ranked_changes(&model);
        let moved = changes.iter().filter(|(_, r)| r.is_some()).count();
        assert!(
            moved > 300 && changes.len() > moved + 100,
            "{moved} of {}",
            changes.len()
        );
        write_rows(&c, &table, &mut model, &changes, false).await;
        assert!(!model.contains_key(&0), "row 0 (v = i64::MIN) deleted");
        check_ranked(&c, &table, &model, "after updates and deletes").await;

        for (pass, order) in [(0, Order::Ascending), (1, Order::Descending)] {
            check_scan_under_changes(&c, &table, &mut model, order, pass).await;
        }
        check_ranked(&c, &table, &model, "after the changes under scans").await;
    });
    drop(c);
    cluster.assert_alive();
    cluster.verify_replicas();
}

// ---------------------------------------------------------------------
// 2. An index created while a writer updates its column.
// ---------------------------------------------------------------------

/// Rows of the table an index is added to.
const LIVE_ROWS: u32 = 4_000;
/// Rows each of the writer's transactions updates.
const WRITER_ROWS_PER_COMMIT: usize = 4;
/// The index added: on `w`, the second column of [`live_def`].
const BY_W: Ix = Ix {
    name: "by_w",
    columns: &[1],
};

fn live_def() -> TableDef {
    TableDef::new(
        "live",
        vec![
            ColumnDef::new("id", ColumnType::Int { unsigned: true }),
            ColumnDef::new("w", ColumnType::Int { unsigned: false }).nullable(),
        ],
        &["id"],
    )
    .unwrap()
}

fn live_row(id: u64, w: Option<i64>) -> Row {
    vec![Value::UInt(id), w.map_or(Value::Null, Value::Int)]
}

/// A small seeded generator (splitmix64), so a failing run can be
/// replayed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A value of `w`: NULL one time in eight, else in -1000..=1000.
    fn w(&mut self) -> Option<i64> {
        (!self.next().is_multiple_of(8)).then(|| (self.next() % 2_001) as i64 - 1_000)
    }
}

/// A writer on its own thread and connection: it updates `w` of random
/// rows (of those in the model when it started), a few per transaction,
/// and records each committed transaction's values in the shared model.
struct Writer {
    stop: Arc<AtomicBool>,
    commits: Arc<AtomicU64>,
    thread: std::thread::JoinHandle<Result<(), String>>,
}

fn start_writer(mgmd_addr: &str, model: Arc<Mutex<Model>>, seed: u64) -> Writer {
    let stop = Arc::new(AtomicBool::new(false));
    let commits = Arc::new(AtomicU64::new(0));
    let ids: Vec<u64> = model.lock().unwrap().keys().copied().collect();
    let addr = mgmd_addr.to_string();
    let thread = {
        let (stop, commits) = (stop.clone(), commits.clone());
        std::thread::spawn(move || {
            runtime().block_on(async move {
                let c = Cluster::connect(&addr)
                    .await
                    .map_err(|e| format!("writer: connect: {e}"))?;
                let table = c
                    .table("live")
                    .await
                    .map_err(|e| format!("writer: table: {e}"))?;
                let rec = table.full_record();
                let mut rng = Rng(seed);
                while !stop.load(AtomicOrdering::Relaxed) {
                    let mut rows = BTreeMap::new();
                    while rows.len() < WRITER_ROWS_PER_COMMIT {
                        let id = ids[(rng.next() % ids.len() as u64) as usize];
                        rows.insert(id, live_row(id, rng.w()));
                    }
                    let mut tx = c.transaction();
                    for row in rows.values() {
                        tx.update(&rec, row)
                            .map_err(|e| format!("writer: queue {row:?}: {e}"))?;
                    }
                    tx.execute(ExecType::Commit).await.map_err(|e| {
                        format!(
                            "writer: commit {} of rows {:?}: {e}",
                            commits.load(AtomicOrdering::Relaxed),
                            rows.keys().collect::<Vec<_>>()
                        )
                    })?;
                    model.lock().unwrap().extend(rows);
                    commits.fetch_add(1, AtomicOrdering::Relaxed);
                }
                Ok(())
            })
        })
    };
    Writer {
        stop,
        commits,
        thread,
    }
}

impl Writer {
    fn commits(&self) -> u64 {
        self.commits.load(AtomicOrdering::Relaxed)
    }

    /// Waits until the writer committed `count` transactions (panics
    /// with its error if it stopped).
    fn wait_commits(&self, count: u64, cluster: &TestCluster) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.commits() < count {
            assert!(
                !self.thread.is_finished(),
                "the writer stopped after {} commits",
                self.commits()
            );
            assert!(
                Instant::now() < deadline,
                "the writer made {} of {count} commits in 30 s\n{}",
                self.commits(),
                cluster.logs()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Stops the writer; panics with its error if it had one. Returns
    /// how many transactions it committed.
    fn stop(self, cluster: &TestCluster) -> u64 {
        self.stop.store(true, AtomicOrdering::Relaxed);
        let result = self.thread.join().expect("the writer panicked");
        if let Err(e) = result {
            panic!("{e}\n{}", cluster.logs());
        }
        self.commits.load(AtomicOrdering::Relaxed)
    }
}

/// Creates index `by_w` while the writer runs: the writer has committed
/// before the call, commits during it and after it. Returns the table
/// with the index.
fn create_under_writes(
    rt: &tokio::runtime::Runtime,
    cluster: &TestCluster,
    c: &Cluster,
    model: &Arc<Mutex<Model>>,
    seed: u64,
) -> (Table, Model) {
    let writer = start_writer(&cluster.mgmd_addr, model.clone(), seed);
    writer.wait_commits(20, cluster);
    let before = writer.commits();
    let started = Instant::now();
    // On the runtime `c` was connected on: its connections are that
    // runtime's.
    let table = rt
        .block_on(c.create_index("live", "by_w", &["w"]))
        .unwrap_or_else(|e| panic!("create index by_w: {e}\n{}", cluster.logs()));
    let took = started.elapsed();
    let during = writer.commits() - before;
    writer.wait_commits(writer.commits() + 20, cluster);
    let commits = writer.stop(cluster);
    assert!(
        during > 0,
        "no write committed during the {took:?} create_index took ({commits} in all)"
    );
    let model = model.lock().unwrap().clone();
    (table, model)
}

/// Scans of `by_w` against the model: the whole index in every order,
/// the NULLs, and ranges.
async fn check_live(c: &Cluster, table: &Table, model: &Model, when: &str) {
    let b = |v: i64| vec![int(v)];
    let count = check_every_order(c, table, model, BY_W, &[], when).await;
    assert_eq!(count, model.len(), "{when}: the whole index");
    let ranges = [
        vec![eq(vec![Value::Null])],
        vec![range(Included(b(-100)), Excluded(b(100)))],
        vec![
            range(Unbounded, Excluded(b(-900))),
            range(Excluded(b(900)), Unbounded),
        ],
    ];
    for ranges in ranges {
        let count = check_every_order(c, table, model, BY_W, &ranges, when).await;
        assert!(count > 0, "{when}: nothing in {ranges:?}");
    }
}

#[test]
fn an_index_created_under_writes_is_whole_and_can_be_dropped_and_made_again() {
    // A slow build (64 rows a 10 ms tick per node: over half a second for
    // the table), so that the writer's commits land while it runs however
    // fast the machine is (at 16 Ki rows a tick it took 6 ms once).
    let mut cluster = TestCluster::start_nodes(2, 2, |c| c.index_build_rows_per_tick = 64);
    let rt = runtime();
    let c = rt
        .block_on(Cluster::connect(&cluster.mgmd_addr))
        .expect("connect");
    let mut rng = Rng(7);
    let (table, model) = rt.block_on(async {
        let table = c.create_table(live_def()).await.expect("create live");
        assert_indexes(&table, &["PRIMARY"]);
        let rows: Vec<(u64, Option<Row>)> = (0..u64::from(LIVE_ROWS))
            .map(|id| (id, Some(live_row(id, rng.w()))))
            .collect();
        let mut model = Model::new();
        write_rows(&c, &table, &mut model, &rows, false).await;
        (table, model)
    });
    let shared = Arc::new(Mutex::new(model));
    let (with_w, model) = create_under_writes(&rt, &cluster, &c, &shared, 1);
    assert_indexes(&with_w, &["PRIMARY", "by_w"]);
    assert!(with_w.same_version(&table), "an index changes no version");
    rt.block_on(check_live(&c, &with_w, &model, "created under writes"));

    // Dropped: refused by the client through the new definition, by the
    // data node through the one that had it, and unknown to a new client.
    let without = rt
        .block_on(c.drop_index("live", "by_w"))
        .expect("drop index by_w");
    assert_indexes(&without, &["PRIMARY", "-"]);
    rt.block_on(async {
        let e = c
            .transaction()
            .scan(&without)
            .index("by_w")
            .open()
            .await
            .expect_err("a scan of a dropped index");
        assert_eq!(e.code, ErrorCode::NoSuchColumn, "{e}");
        assert!(e.detail.contains("\"by_w\""), "{e}");
        let e = c
            .transaction()
            .scan(&with_w)
            .index("by_w")
            .ordered()
            .open()
            .await
            .expect_err("a scan of a dropped index through an old definition");
        assert_eq!(e.code, ErrorCode::BadRequest, "{e}");
        assert!(
            e.detail.contains("dropped") || e.detail.contains("by_w"),
            "the error neither names the index nor says it is gone: {e}"
        );
        let fresh = Cluster::connect(&cluster.mgmd_addr)
            .await
            .expect("connect a new client");
        let t = fresh.table("live").await.expect("live");
        assert_indexes(&t, &["PRIMARY", "-"]);
        let e = fresh
            .transaction()
            .scan(&t)
            .index("by_w")
            .open()
            .await
            .expect_err("a scan of a dropped index from a new client");
        assert_eq!(e.code, ErrorCode::NoSuchColumn, "{e}");
    });
    cluster.assert_alive();

    // Writes go on: w changes, rows go and come.
    let mut model = model;
    let mut changes: Vec<(u64, Option<Row>)> = Vec::new();
    for id in (0..u64::from(LIVE_ROWS)).step_by(7) {
        changes.push((id, (id % 3 != 0).then(|| live_row(id, rng.w()))));
    }
    for id in u64::from(LIVE_ROWS)..u64::from(LIVE_ROWS) + 200 {
        changes.push((id, Some(live_row(id, rng.w()))));
    }
    rt.block_on(async {
        write_rows(&c, &without, &mut model, &changes, false).await;
        let ask = Ask {
            index: PRIMARY,
            ranges: &[],
            order: Order::Ascending,
            batch: DEFAULT_BATCH,
        };
        let (rows, examined) = run_scan(with_ask(c.transaction().scan(&without), &ask))
            .await
            .expect("a PRIMARY scan after the drop");
        check_rows(
            &without,
            &model,
            &ask,
            rows,
            examined,
            "PRIMARY after the drop",
        );
    });

    // The same name again, under writes again: a new number, whole.
    let shared = Arc::new(Mutex::new(model));
    let (again, model) = create_under_writes(&rt, &cluster, &c, &shared, 2);
    assert_indexes(&again, &["PRIMARY", "-", "by_w"]);
    rt.block_on(async {
        check_live(&c, &again, &model, "created again under its old name").await;
        let e = c
            .transaction()
            .scan(&with_w)
            .index("by_w")
            .open()
            .await
            .expect_err("the dropped number, through the first definition");
        assert_eq!(e.code, ErrorCode::BadRequest, "{e}");
    });
    drop(c);
    cluster.assert_alive();
    cluster.verify_replicas();
}

// ---------------------------------------------------------------------
// 3. Indexes through node restarts and a restart of the cluster.
// ---------------------------------------------------------------------

/// Rows of the table kept through restarts.
const KEPT_ROWS: u64 = 3_000;
/// Its index, on `v`, the second column of [`kept_def`].
const KEPT_BY_V: Ix = Ix {
    name: "by_v",
    columns: &[1],
};
/// The index added while a node restarts: on (v, id).
const KEPT_BY_V_ID: Ix = Ix {
    name: "by_v_id",
    columns: &[1, 0],
};
/// How long a check waits out temporary errors after a node failed or
/// came back.
const SETTLE: Duration = Duration::from_secs(30);

/// Read from backups: a scan reads each fragment on its coordinator when
/// it holds a replica, so a scan coordinated by a node reads that node's
/// indexes.
fn kept_def() -> TableDef {
    let mut def = TableDef::new(
        "kept",
        vec![
            ColumnDef::new("id", ColumnType::Int { unsigned: true }),
            ColumnDef::new("v", ColumnType::BigInt { unsigned: false }).nullable(),
        ],
        &["id"],
    )
    .and_then(|d| d.with_index("by_v", &["v"]))
    .unwrap();
    def.options.read_backup = true;
    def
}

/// Row `id` as written in `round`: v NULL for about one in fifty.
fn kept_row(id: u64, round: u64) -> Row {
    let x = (id * 131 + round * 17) % 1_000;
    let v = if x % 50 == 7 {
        Value::Null
    } else {
        int(x as i64 - 500)
    };
    vec![Value::UInt(id), v]
}

/// Round `round` of changes: rows `update` rewritten, `delete` deleted,
/// `insert` inserted.
fn kept_changes(
    round: u64,
    update: std::ops::Range<u64>,
    delete: std::ops::Range<u64>,
    insert: std::ops::Range<u64>,
) -> Vec<(u64, Option<Row>)> {
    update
        .chain(insert)
        .map(|id| (id, Some(kept_row(id, round))))
        .chain(delete.map(|id| (id, None)))
        .collect()
}

/// A transaction coordinated by data node `node` (a committed read of a
/// key whose primary it holds chose it), or `None` if the client is not
/// connected to it (yet).
async fn transaction_via(c: &Cluster, table: &Table, node: u16) -> Option<Transaction> {
    let key = (0..KEPT_ROWS)
        .find(|&id| fragment_of(table, id).1 == node)
        .unwrap_or_else(|| panic!("no key has its primary on data node {node}"));
    let mut tx = c.transaction();
    let read = tx
        .read(
            &table.full_record(),
            &[Value::UInt(key)],
            LockMode::CommittedRead,
        )
        .expect("queue a read");
    tx.ignore_error(read);
    tx.execute(ExecType::Commit).await.ok()?;
    (probe_coordinator(&tx, table).await? == node).then_some(tx)
}

/// The data node coordinating a probe scan of `table` (on `by_v`, reading
/// nothing) in `tx`: the transaction's coordinator once it has one, else
/// the node a transaction without a key hint starts on; `None` if the
/// scan could not open. The only sign of the coordinator a client shows
/// is the scan's description.
async fn probe_coordinator(tx: &Transaction, table: &Table) -> Option<u16> {
    let probe = tx
        .scan(table)
        .index("by_v")
        .eq(&[int(i64::MAX)])
        .open()
        .await
        .ok()?;
    let described = format!("{probe:?}");
    let at = described.find("node: ").expect("the scan names its node") + "node: ".len();
    let node = described[at..]
        .split(|ch: char| !ch.is_ascii_digit())
        .next()
        .and_then(|n| n.parse().ok());
    Some(node.unwrap_or_else(|| panic!("no node in {described}")))
}

/// The coordinator a committed read of `id` chose, through `c`.
async fn read_coordinator(c: &Cluster, table: &Table, id: u64) -> u16 {
    let mut tx = c.transaction();
    tx.read(
        &table.full_record(),
        &[Value::UInt(id)],
        LockMode::CommittedRead,
    )
    .expect("queue a read");
    tx.execute(ExecType::NoCommit).await.expect("read");
    let node = probe_coordinator(&tx, table).await.expect("a probe scan");
    tx.execute(ExecType::Commit).await.expect("commit the read");
    node
}

/// A client whose neighbour is `node` (NDB's `ndb_data_node_neighbour`)
/// starts a READ_BACKUP table's transactions there, whichever node holds
/// the key's primary, and any table's keyless transactions and scans; a
/// table that reads only its primary still starts at the primary.
/// `survivor`: the only node up (the neighbour is down), which then
/// coordinates everything.
async fn check_neighbour(
    addr: &str,
    kept: &Table,
    plain: &Table,
    node: u16,
    survivor: Option<u16>,
) {
    let opts = ClusterOptions {
        neighbour: Some(node),
        ..ClusterOptions::default()
    };
    let c = Cluster::connect_with(addr, opts).await.expect("connect");
    let kept = c.table(kept.name()).await.expect("kept");
    assert!(
        (0..20).any(|id| fragment_of(&kept, id).1 != node),
        "some of the keys read have their primary away from node {node}"
    );
    for id in 0..20 {
        let primary = fragment_of(&kept, id).1;
        assert_eq!(
            read_coordinator(&c, &kept, id).await,
            survivor.unwrap_or(node),
            "a READ_BACKUP read of {id} (primary on {primary}), neighbour {node}, up alone: {survivor:?}"
        );
        let primary = fragment_of(plain, id).1;
        assert_eq!(
            read_coordinator(&c, plain, id).await,
            survivor.unwrap_or(primary),
            "a read of {id} in a table without READ_BACKUP starts at its primary"
        );
    }
    let tx = c.transaction();
    assert_eq!(
        probe_coordinator(&tx, &kept).await,
        Some(survivor.unwrap_or(node)),
        "a keyless scan"
    );
    c.close().await;
}

/// A scan [`check_kept`] makes: index, ranges, order, batch.
type KeptAsk<'a> = (Ix, &'a [Range], Order, (u32, u32));

/// Index scans of `kept` against the model: the whole index in both
/// merged orders, the NULLs, and disjoint ranges descending; and of
/// `by_v_id` once the table has it. `via`: the
/// data node that coordinates them (so reads its own indexes). A scan
/// that fails with a temporary error (a node just failed or came back) is
/// tried again, for [`SETTLE`] at most.
async fn check_kept(c: &Cluster, table: &Table, model: &Model, via: Option<u16>, when: &str) {
    let b = |v: i64| vec![int(v)];
    let disjoint = [
        range(Unbounded, Included(b(-400))),
        range(Excluded(b(-10)), Excluded(b(10))),
        range(Included(b(450)), Unbounded),
    ];
    let null = [eq(vec![Value::Null])];
    let asks = [
        (&[][..], Order::Ascending, (50, 4_096)),
        (&[][..], Order::Descending, SMALL_BATCH),
        (&null[..], Order::Ascending, SMALL_BATCH),
        (&disjoint[..], Order::Descending, (20, 2_048)),
        (&disjoint[..], Order::Any, DEFAULT_BATCH),
    ];
    let mut asks: Vec<KeptAsk<'_>> = asks
        .into_iter()
        .map(|(ranges, order, batch)| (KEPT_BY_V, ranges, order, batch))
        .collect();
    if table.def().index_number(KEPT_BY_V_ID.name).is_some() {
        asks.push((KEPT_BY_V_ID, &[], Order::Descending, (50, 4_096)));
        asks.push((KEPT_BY_V_ID, &disjoint[..], Order::Ascending, SMALL_BATCH));
    }
    for (index, ranges, order, batch) in asks {
        let ask = Ask {
            index,
            ranges,
            order,
            batch,
        };
        let what = format!("{when}: {} {order:?} {ranges:?} via {via:?}", index.name);
        let deadline = Instant::now() + SETTLE;
        let (rows, examined) = loop {
            let tx = match via {
                None => Some(c.transaction()),
                Some(node) => transaction_via(c, table, node).await,
            };
            let result = match &tx {
                Some(tx) => run_scan(with_ask(tx.scan(table), &ask)).await,
                None => Err(ShoalError::with_detail(
                    ErrorCode::ClusterFailure,
                    format!("not connected to data node {via:?} yet"),
                )),
            };
            match result {
                Ok(done) => break done,
                Err(e) if e.class() != ErrorClass::Permanent && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("{what}: {e}"),
            }
        };
        let count = check_rows(table, model, &ask, rows, examined, &what);
        assert!(count > 0, "{what}: no rows");
    }
}

fn kill9(cluster: &mut TestCluster, node: u16) {
    let mut child = cluster.datanodes[node as usize - 1]
        .take()
        .expect("a running data node");
    child.kill().expect("kill -9");
    child.wait().expect("reap");
}

fn restart(cluster: &mut TestCluster, node: u16) {
    let child = cluster.spawn_datanode(node);
    cluster.datanodes[node as usize - 1] = Some(child);
    cluster.wait_started();
}

/// Waits until data node `node`'s log, past byte `from`, says that data
/// node `failed` failed.
fn wait_failure_seen(cluster: &TestCluster, node: u16, failed: u16, from: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    let name = format!("datanode-{node}.log");
    let says = format!("failed [{failed}]");
    while !cluster.log(&name)[from..].contains(&says) {
        assert!(
            Instant::now() < deadline,
            "data node {node} did not see data node {failed} fail\n{}",
            cluster.logs()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Stops every data node and mgmd with SIGKILL.
fn kill_all(cluster: &mut TestCluster) {
    for node in 1..=cluster.datanodes.len() as u16 {
        if cluster.datanodes[node as usize - 1].is_some() {
            kill9(cluster, node);
        }
    }
    cluster.kill_mgmd();
}

fn start_all(cluster: &mut TestCluster) {
    cluster.start_mgmd();
    for id in 1..=cluster.datanodes.len() as u16 {
        let child = cluster.spawn_datanode(id);
        cluster.datanodes[id as usize - 1] = Some(child);
    }
    cluster.wait_started();
}

#[test]
fn indexes_stay_whole_through_node_restarts_changes_while_away_and_a_cluster_restart() {
    let mut cluster = TestCluster::start_nodes(2, 2, |c| {
        c.heartbeat_interval_ms = 250;
        c.arbitration_timeout_ms = 2_000;
    });
    assert!(!cluster.config.diskless, "the test cluster keeps files");
    let rt = runtime();
    let c = rt
        .block_on(Cluster::connect(&cluster.mgmd_addr))
        .expect("connect");
    let mut model = Model::new();
    let table = rt.block_on(async {
        let table = c.create_table(kept_def()).await.expect("create kept");
        assert_indexes(&table, &["PRIMARY", "by_v"]);
        let rows = kept_changes(0, 0..KEPT_ROWS, 0..0, 0..0);
        write_rows(&c, &table, &mut model, &rows, true).await;
        check_kept(&c, &table, &model, Some(1), "as written").await;
        check_kept(&c, &table, &model, Some(2), "as written").await;
        table
    });
    // The client's neighbour, checked here because this test has a
    // READ_BACKUP table on two nodes, and kills one of them.
    let plain = rt.block_on(async {
        let mut def = kept_def();
        def.name = "plain".into();
        def.options.read_backup = false;
        let plain = c.create_table(def).await.expect("create plain");
        let rows = (0..20).map(|id| kept_row(id, 0)).collect::<Vec<_>>();
        let mut tx = c.transaction();
        for row in &rows {
            tx.insert(&plain.full_record(), row)
                .expect("queue an insert");
        }
        tx.execute(ExecType::Commit)
            .await
            .expect("insert plain rows");
        for node in [1, 2] {
            check_neighbour(&cluster.mgmd_addr, &table, &plain, node, None).await;
        }
        let opts = ClusterOptions {
            neighbour: Some(9),
            ..ClusterOptions::default()
        };
        let Err(e) = Cluster::connect_with(&cluster.mgmd_addr, opts).await else {
            panic!("a neighbour that is no data node is refused");
        };
        assert!(
            e.to_string()
                .contains("neighbour node 9 is not a data node"),
            "{e}"
        );
        plain
    });

    // Node 2 killed; rows changed, deleted and inserted while it is down,
    // and by_v dropped and made again (under a new number).
    let mark = cluster.log("datanode-1.log").len();
    kill9(&mut cluster, 2);
    wait_failure_seen(&cluster, 1, 2, mark);
    rt.block_on(async {
        let changes = kept_changes(1, 0..600, 600..900, KEPT_ROWS..KEPT_ROWS + 500);
        write_rows(&c, &table, &mut model, &changes, true).await;
        check_kept(&c, &table, &model, Some(1), "node 2 down").await;
        check_neighbour(&cluster.mgmd_addr, &table, &plain, 2, Some(1)).await;
        c.drop_index("kept", "by_v")
            .await
            .expect("drop by_v while node 2 is down");
        let changes = kept_changes(2, 100..200, 200..250, 0..0);
        write_rows(&c, &table, &mut model, &changes, true).await;
        let again = c
            .create_index("kept", "by_v", &["v"])
            .await
            .expect("create by_v again while node 2 is down");
        assert_indexes(&again, &["PRIMARY", "-", "by_v"]);
        check_kept(&c, &again, &model, Some(1), "node 2 down, by_v made again").await;
    });

    // Node 2 back, an index created while it starts: its own indexes (it
    // coordinates, and reads its local replicas) hold what it missed,
    // and what comes after.
    let child = cluster.spawn_datanode(2);
    cluster.datanodes[1] = Some(child);
    let table = rt
        .block_on(c.create_index("kept", "by_v_id", &["v", "id"]))
        .expect("create by_v_id while node 2 starts");
    assert_indexes(&table, &["PRIMARY", "-", "by_v", "by_v_id"]);
    cluster.wait_started();
    rt.block_on(async {
        check_kept(&c, &table, &model, Some(2), "node 2 restarted").await;
        let changes = kept_changes(3, 900..1_200, KEPT_ROWS..KEPT_ROWS + 100, 3_500..3_600);
        write_rows(&c, &table, &mut model, &changes, true).await;
        check_kept(&c, &table, &model, Some(2), "node 2 restarted, more writes").await;
    });

    // Node 1 killed: the restarted node serves alone.
    let mark = cluster.log("datanode-2.log").len();
    kill9(&mut cluster, 1);
    wait_failure_seen(&cluster, 2, 1, mark);
    rt.block_on(async {
        check_kept(&c, &table, &model, Some(2), "node 2 alone").await;
        let changes = kept_changes(4, 1_200..1_500, 1_500..1_600, 3_600..3_700);
        write_rows(&c, &table, &mut model, &changes, true).await;
        check_kept(&c, &table, &model, Some(2), "node 2 alone, more writes").await;
    });

    // Node 1 back too.
    restart(&mut cluster, 1);
    rt.block_on(check_kept(&c, &table, &model, Some(1), "node 1 restarted"));
    cluster.verify_replicas();
    drop(c);

    // The whole cluster killed and started from its files.
    kill_all(&mut cluster);
    start_all(&mut cluster);
    rt.block_on(async {
        let c = Cluster::connect(&cluster.mgmd_addr)
            .await
            .expect("connect after the restart");
        let table = c.table("kept").await.expect("kept after the restart");
        assert_indexes(&table, &["PRIMARY", "-", "by_v", "by_v_id"]);
        for via in [Some(1), Some(2)] {
            check_kept(&c, &table, &model, via, "after the cluster restart").await;
        }
    });
    cluster.verify_replicas();
    cluster.assert_alive();
}

// ---------------------------------------------------------------------
// 4. Bad index requests.
// ---------------------------------------------------------------------

#[test]
fn bad_index_requests_are_refused_clearly_and_the_node_stays_up() {
    let mut cluster = TestCluster::start();
    let rt = runtime();
    let c = rt
        .block_on(Cluster::connect(&cluster.mgmd_addr))
        .expect("connect");
    let mut model = Model::new();
    let (table, hashed) = rt.block_on(async {
        let table = c
            .create_table(ranked_def("picky"))
            .await
            .expect("create picky");
        let rows: Vec<(u64, Option<Row>)> = (0..300)
            .map(|id| (u64::from(id), Some(ranked_row(id))))
            .collect();
        write_rows(&c, &table, &mut model, &rows, false).await;
        let mut def = TableDef::new(
            "hashed",
            vec![
                ColumnDef::new("id", ColumnType::Int { unsigned: true }),
                ColumnDef::new("v", ColumnType::BigInt { unsigned: false }),
            ],
            &["id"],
        )
        .and_then(|d| d.with_index("by_v", &["v"]))
        .unwrap();
        def.options.hash_only_primary_key = true;
        let hashed = c.create_table(def).await.expect("create hashed");
        (table, hashed)
    });
    assert_indexes(&hashed, &["by_v"]);

    // A definition with an index the data node does not know (number 3),
    // as a client with a stale or forged definition would send.
    let mut ghost_def = table.def().clone();
    ghost_def.indexes.push(shoal_types::IndexDef {
        name: "ghost".into(),
        columns: vec![V as u16],
        dropped: false,
    });
    let ghost = Table::new(ghost_def);

    let scan = |t: &Table| c.transaction().scan(t);
    let too_many_ranges = (0..=shoal_wire::scan::SCAN_RANGES_MAX as i64)
        .fold(scan(&table).index("by_v"), |b, v| b.eq(&[int(v)]));
    let long = "x".repeat(40);
    let cases: Vec<(&str, ScanBuilder, ErrorCode, Vec<&str>)> = vec![
        (
            "an index the table lacks",
            scan(&table).index("nope"),
            ErrorCode::NoSuchColumn,
            vec!["\"nope\"", "\"picky\""],
        ),
        (
            "a string bound on a BIGINT",
            scan(&table)
                .index("by_v")
                .range(Included(&[text("x")]), Unbounded),
            ErrorCode::BadValue,
            vec!["\"v\"", "BIGINT"],
        ),
        (
            "an integer bound on a VARCHAR",
            scan(&table).index("by_s_v").eq(&[int(5)]),
            ErrorCode::BadValue,
            vec!["\"s\"", "VARCHAR"],
        ),
        (
            "a string bound longer than its column",
            scan(&table).index("by_s_v").eq(&[Value::Str(long)]),
            ErrorCode::ValueTooLong,
            vec!["\"s\""],
        ),
        (
            "two values for an index of one column",
            scan(&table).index("by_v").eq(&[int(1), int(2)]),
            ErrorCode::BadRequest,
            vec!["1 column", "2 value"],
        ),
        (
            "three values for an index of two columns",
            scan(&table)
                .index("by_s_v")
                .range(Unbounded, Excluded(&[Value::Null, int(1), int(2)])),
            ErrorCode::BadRequest,
            vec!["2 column", "3 value"],
        ),
        (
            "ordered without an index",
            scan(&table).ordered(),
            ErrorCode::BadRequest,
            vec!["index"],
        ),
        (
            "descending without an index",
            scan(&table).descending(),
            ErrorCode::BadRequest,
            vec!["index"],
        ),
        (
            "a range without an index",
            scan(&table).range(Included(&[int(1)]), Unbounded),
            ErrorCode::BadRequest,
            vec!["index"],
        ),
        (
            "PRIMARY of a hash-only table",
            scan(&hashed).index("PRIMARY"),
            ErrorCode::NoSuchColumn,
            vec!["\"PRIMARY\""],
        ),
        (
            "more ranges than a scan takes",
            too_many_ranges,
            ErrorCode::BadRequest,
            vec!["ranges"],
        ),
        (
            "an index number the data node lacks",
            scan(&ghost).index("ghost").ordered(),
            ErrorCode::BadRequest,
            vec!["no ordered index number 3"],
        ),
    ];
    for (what, builder, code, says) in cases {
        let e = rt.block_on(builder.open()).expect_err(what);
        assert_eq!(e.code, code, "{what}: {e}");
        for s in says {
            assert!(e.detail.contains(s), "{what}: {e} does not say {s:?}");
        }
        cluster.assert_alive();
    }

    // A bound longer than any key of the index (a forged definition
    // says by_v has three columns): the data node compares what there is
    // and finds nothing; it does not fail.
    let mut long_def = table.def().clone();
    long_def.indexes[1].columns = vec![V as u16, S as u16, V as u16];
    let long_key = Table::new(long_def);
    let rows = rt
        .block_on(async {
            let mut scan = c
                .transaction()
                .scan(&long_key)
                .index("by_v")
                .eq(&[int(5), text("zz"), int(6)])
                .ordered()
                .open()
                .await?;
            drain(&mut scan).await
        })
        .expect("a bound longer than the keys");
    assert!(rows.is_empty(), "{rows:?}");
    cluster.assert_alive();

    // Bad index changes: refused with errors naming what is wrong.
    rt.block_on(async {
        let e = c
            .create_index("picky", "by_v", &["n"])
            .await
            .expect_err("an index name the table has");
        assert!(
            matches!(
                e.code,
                ErrorCode::TableExists | ErrorCode::BadTableDefinition
            ),
            "{e}"
        );
        assert!(e.detail.contains("by_v"), "{e}");
        let e = c
            .create_index("picky", "by_nope", &["nope"])
            .await
            .expect_err("an index on a column the table lacks");
        assert_eq!(e.code, ErrorCode::BadTableDefinition, "{e}");
        assert!(e.detail.contains("\"nope\""), "{e}");
        let e = c
            .create_index("no_such_table", "by_v", &["v"])
            .await
            .expect_err("an index of a table that does not exist");
        assert_eq!(e.code, ErrorCode::NoSuchTable, "{e}");
        let e = c
            .drop_index("picky", "nope")
            .await
            .expect_err("dropping an index the table lacks");
        assert_eq!(e.code, ErrorCode::NoSuchColumn, "{e}");
        assert!(e.detail.contains("nope"), "{e}");
        // None of them changed the table.
        let t = c.table("picky").await.expect("picky");
        assert_indexes(&t, &["PRIMARY", "by_v", "by_s_v"]);
    });
    cluster.assert_alive();

    // The node serves index scans as before.
    rt.block_on(async {
        for ranges in [
            vec![],
            vec![range(Included(vec![int(-20)]), Excluded(vec![int(20)]))],
        ] {
            check_every_order(&c, &table, &model, BY_V, &ranges, "after the bad requests").await;
        }
        let count = check_every_order(
            &c,
            &table,
            &model,
            BY_S_V,
            &[eq(vec![Value::Null])],
            "after the bad requests",
        )
        .await;
        assert!(count > 0);
    });
    cluster.assert_alive();
}
