//! `shoal bench readperf`: NDB's testReadPerf, with its flags and its
//! output: how long one row takes to read by each access path.
//!
//! The table (`READPERF` unless named) holds `-s` rows: `KEY INT
//! UNSIGNED` (primary key), `A INT UNSIGNED` equal to the key (so the
//! ordered index `IDX_O` on `A` orders rows as the key does), `B INT
//! UNSIGNED` a permutation of the keys (`KEY × m mod size`, `m` a prime
//! that does not divide the size), `C BINARY(8)` a hash of the key. `-c`
//! creates it not logged (as testReadPerf does) with `IDX_O` beside the
//! automatic `PRIMARY` ordered index, and the unique index `IDX_U` on
//! `B`; `-d` loads it.
//!
//! Each of `-i` iterations picks a random window of `-r` keys and times
//! every case over it, each in its own transaction: serial primary-key
//! reads (one execute each), batched ones (one execute), the same by the
//! unique hash index `IDX_U` on `B` (each read finds the entry of `B`,
//! then the row, in one request), one equality scan of `IDX_O` per row,
//! one range scan of `IDX_O`, the same ordered, and a full table scan
//! whose filter (`KEY >= a AND KEY < a + range`) the data nodes run. Key
//! reads are committed reads (`-shared`: shared locks, as testReadPerf's
//! `readTuple`); scans are committed reads.
//!
//! Every row returned is checked: the right values, inside the selection,
//! no key twice, in order when asked, and exactly the rows expected. A
//! wrong result stops the run with an error; it is never a figure.
//!
//! `--scan-selectivity P` runs a different pair instead: a full scan
//! keeping the `P` % of rows whose `B` is below `size × P / 100`, and an
//! `IDX_O` range scan returning as many rows, each reported in rows
//! examined and returned per second.

use crate::cpu::{CpuSample, CpuTotals};
use serde::Serialize;
use shoal_client::scan::SCAN_BATCH_BYTES_DEFAULT;
use shoal_client::{
    Cluster, ClusterOptions, CmpOp, ColumnDef, ColumnType, ErrorClass, ErrorCode, ExecType,
    FilterExpr, LockMode, ParkSpin, Record, RowBuf, ScanBuilder, ShoalError, Table, TableDef,
    Transaction, UniqueIndex, Value,
};
use std::ops::Bound;
use std::time::{Duration, Instant};

const USAGE: &str = "\
usage: shoal bench readperf [flags] [TABLE]
  -r N        rows per window: each case reads this many (default 1000)
  -s N        rows in the table (default 1000000)
  -i N        iterations, each over a new random window (default 3; 0: only -c/-d)
  -c          create the table (dropped first if it exists), not logged,
              with the ordered indexes PRIMARY and IDX_O (on A) and the
              unique index IDX_U (on B)
  -d          load the table: -s rows in batched transactions
  -shared     key reads take shared locks (NDB's readTuple); default committed read
  --read-backup   -c creates the table with READ_BACKUP: committed reads
              (and its unique index's) go to a replica on the coordinator's
              node when there is one, not always to the primary
  --indexes all|ordered|primary|none   indexes -c creates: PRIMARY, IDX_O
              and IDX_U (default), PRIMARY and IDX_O, PRIMARY only, or none
              (hash-only primary key); cases needing a missing index are
              skipped
  --scan-batch N   rows a scan round brings at most, over all fragments
              (default 256 per fragment of the table, as NDB's BatchSize)
  --scan-selectivity P   instead of the eight cases: a full scan keeping P %
              of the rows (B < size * P / 100) and an IDX_O range scan of as
              many rows, in rows examined and returned per second
  --cases LIST   run only these cases, comma-separated: serial-pk,
              batch-pk, serial-unique, batch-unique, eq-bound, range,
              ordered, interpreted (default: all eight; for profiling one)
  --seed N    seed of the random windows (default: from the clock)
  --spin-us N  poll the data-node sockets up to N µs before the client's
              thread sleeps (default 0: never; at most 10000); pair it with
              the data nodes' spin_us, see docs/CONFIG.md
  --neighbour NODE   the client's neighbour data node (NDB's
              ndb_data_node_neighbour): transactions on a READ_BACKUP table
              with a replica there, and every scan, start on it; with
              --read-backup on one node group every read and scan runs there
  --connect HOST:PORT   mgmd (default 127.0.0.1:1186)
  --json      print the results as one JSON object instead of lines
  --json-file PATH   also write them as JSON to PATH
  TABLE       table name (default READPERF)";

/// The ordered index on `A` that testReadPerf calls `IDX_O_<table>`.
pub const ORDERED_INDEX: &str = "IDX_O";
/// The unique hash index on `B`.
pub const UNIQUE_INDEX: &str = "IDX_U";

/// Column ids of the table.
const KEY_COL: u16 = 0;
const A_COL: u16 = 1;
const B_COL: u16 = 2;
const C_COL: u16 = 3;

/// Rows per load transaction, and load transactions each loader sends at
/// once: 4 loaders × 8 × 512 keeps about 16,000 writes in flight, well
/// under a data node's `max_concurrent_operations` (32,768).
const LOAD_ROWS_PER_TRANSACTION: u32 = 512;
const LOAD_TRANSACTIONS_IN_FLIGHT: usize = 8;
const LOAD_TASKS: u32 = 4;
/// Temporary errors in a row before a load transaction gives up.
const LOAD_RETRIES_MAX: u32 = 100;

/// Rows a scan round brings per fragment unless `--scan-batch` says
/// otherwise: NDB's default `BatchSize` (rows per fragment per round).
/// Shoal's batch counts rows over all fragments, so readperf asks for
/// this many times the table's fragments, as an NDB API scan would get.
const SCAN_BATCH_ROWS_PER_FRAGMENT: u32 = 256;

/// A case's CPU busy shares are printed only when it ran for at least this
/// many `/proc` ticks per core (10 ms each) over all iterations.
const CPU_TICKS_MIN: f64 = 10.0;

/// Which indexes `-c` creates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IndexSet {
    /// `PRIMARY`, `IDX_O` and the unique `IDX_U`.
    All,
    /// `PRIMARY` and `IDX_O`.
    Ordered,
    /// `PRIMARY` only.
    Primary,
    /// None: the primary key by hash only.
    None,
}

/// The benchmark's settings, with testReadPerf's defaults.
#[derive(Clone, Debug, Serialize)]
pub struct Options {
    pub range: u32,
    pub size: u32,
    pub iterations: u32,
    pub create: bool,
    pub load: bool,
    /// `-shared`: key reads lock.
    pub shared_locks: bool,
    pub indexes: IndexSet,
    /// `--read-backup`: the table reads from any replica.
    pub read_backup: bool,
    pub scan_batch_rows: Option<u32>,
    /// `--scan-selectivity`: percent of rows the full scan keeps.
    pub scan_selectivity_pct: Option<f64>,
    /// `--cases`: the cases to run, by their flag names (None: all).
    pub cases: Option<Vec<String>>,
    pub seed: Option<u64>,
    /// `--spin-us`: the client's [`shoal_client::ParkSpin`], in µs (0: none).
    pub spin_us: u32,
    /// `--neighbour`: [`ClusterOptions::neighbour`].
    pub neighbour: Option<u16>,
    pub connect: String,
    pub json: bool,
    pub json_file: Option<String>,
    pub table: String,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            range: 1000,
            size: 1_000_000,
            iterations: 3,
            create: false,
            load: false,
            shared_locks: false,
            indexes: IndexSet::All,
            read_backup: false,
            scan_batch_rows: None,
            scan_selectivity_pct: None,
            cases: None,
            seed: None,
            spin_us: 0,
            neighbour: None,
            connect: "127.0.0.1:1186".into(),
            json: false,
            json_file: None,
            table: "READPERF".into(),
        }
    }
}

impl Options {
    /// Parses NDB-style flags (`-r 1000`, `-c`, `-d`) and the table name.
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let mut o = Options::default();
        let mut table = None;
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let mut value = |name: &str| -> Result<&String, String> {
                it.next()
                    .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
            };
            let number = |name: &str, v: &String| -> Result<u64, String> {
                v.parse()
                    .map_err(|_| format!("{name} needs a number, got {v:?}\n{USAGE}"))
            };
            let positive_u32 = |name: &str, v: &String| -> Result<u32, String> {
                match number(name, v)? {
                    0 => Err(format!("{name} must be at least 1\n{USAGE}")),
                    n => u32::try_from(n).map_err(|_| format!("{name} {n} is too large")),
                }
            };
            match flag.as_str() {
                "-r" => o.range = positive_u32("-r", value("-r")?)?,
                "-s" => o.size = positive_u32("-s", value("-s")?)?,
                "-i" => {
                    let v = value("-i")?;
                    o.iterations = u32::try_from(number("-i", v)?)
                        .map_err(|_| format!("-i {v} is too large"))?;
                }
                "-c" => o.create = true,
                "-d" => o.load = true,
                "-shared" => o.shared_locks = true,
                "--read-backup" => o.read_backup = true,
                "--indexes" => {
                    o.indexes = match value("--indexes")?.as_str() {
                        "all" => IndexSet::All,
                        "ordered" => IndexSet::Ordered,
                        "primary" => IndexSet::Primary,
                        "none" => IndexSet::None,
                        other => {
                            return Err(format!(
                            "--indexes takes all, ordered, primary or none, got {other:?}\n{USAGE}"
                        ))
                        }
                    }
                }
                "--scan-batch" => {
                    o.scan_batch_rows = Some(positive_u32("--scan-batch", value("--scan-batch")?)?)
                }
                "--scan-selectivity" => {
                    let v = value("--scan-selectivity")?;
                    let p: f64 = v.parse().map_err(|_| {
                        format!("--scan-selectivity needs a percentage, got {v:?}\n{USAGE}")
                    })?;
                    if !(p > 0.0 && p <= 100.0) {
                        return Err(format!(
                            "--scan-selectivity {v}: a percentage above 0 and at most 100"
                        ));
                    }
                    o.scan_selectivity_pct = Some(p);
                }
                "--cases" => {
                    let list = value("--cases")?;
                    let mut names = Vec::new();
                    for name in list.split(',') {
                        if !CASES.iter().any(|c| c.flag_name() == name) {
                            let known: Vec<&str> = CASES.iter().map(|c| c.flag_name()).collect();
                            return Err(format!(
                                "--cases: no case {name:?}; the cases are {}\n{USAGE}",
                                known.join(",")
                            ));
                        }
                        names.push(name.to_string());
                    }
                    o.cases = Some(names);
                }
                "--seed" => o.seed = Some(number("--seed", value("--seed")?)?),
                "--spin-us" => {
                    let v = value("--spin-us")?;
                    let max = shoal_client::park_spin::PARK_SPIN_MAX.as_micros() as u64;
                    match number("--spin-us", v)? {
                        n if n > max => {
                            return Err(format!("--spin-us {n}: at most {max}\n{USAGE}"))
                        }
                        n => o.spin_us = n as u32,
                    }
                }
                "--neighbour" => {
                    let v = value("--neighbour")?;
                    let n = number("--neighbour", v)?;
                    match u16::try_from(n) {
                        Ok(id) if id > 0 => o.neighbour = Some(id),
                        _ => return Err(format!("--neighbour {n}: not a node id\n{USAGE}")),
                    }
                }
                "--connect" | "-connect" => o.connect = value("--connect")?.clone(),
                "--json" => o.json = true,
                "--json-file" => o.json_file = Some(value("--json-file")?.clone()),
                "-h" | "--help" | "-?" => return Err(USAGE.to_string()),
                other if other.starts_with('-') => {
                    return Err(format!("unknown flag {other:?}\n{USAGE}"))
                }
                name => {
                    if table.replace(name.to_string()).is_some() {
                        return Err(format!(
                            "one table name only (testReadPerf's list of tables is not supported)\n{USAGE}"
                        ));
                    }
                }
            }
        }
        if let Some(t) = table {
            o.table = t;
        }
        if o.range > o.size {
            return Err(format!(
                "-r {} is more than the table's -s {} rows",
                o.range, o.size
            ));
        }
        if o.scan_selectivity_pct.is_some() && o.cases.is_some() {
            return Err(format!(
                "--cases picks among the eight cases; --scan-selectivity runs its two scans instead of them\n{USAGE}"
            ));
        }
        if let Some(p) = o.scan_selectivity_pct {
            if selected_rows(o.size, p) == 0 {
                return Err(format!(
                    "--scan-selectivity {p} of {} rows selects no row",
                    o.size
                ));
            }
        }
        Ok(o)
    }

    fn table_def(&self) -> TableDef {
        let uint = || ColumnType::Int { unsigned: true };
        let mut def = TableDef::new(
            self.table.clone(),
            vec![
                ColumnDef::new("KEY", uint()),
                ColumnDef::new("A", uint()),
                ColumnDef::new("B", uint()),
                ColumnDef::new("C", ColumnType::Binary(8)),
            ],
            &["KEY"],
        )
        .expect("readperf table definition is valid");
        // As testReadPerf creates it: rows in memory only.
        def.options.no_logging = true;
        def.options.read_backup = self.read_backup;
        match self.indexes {
            IndexSet::All => def
                .with_index(ORDERED_INDEX, &["A"])
                .and_then(|d| d.with_unique_index(UNIQUE_INDEX, &["B"]))
                .expect("readperf index definition is valid"),
            IndexSet::Ordered => def
                .with_index(ORDERED_INDEX, &["A"])
                .expect("readperf index definition is valid"),
            IndexSet::Primary => def,
            IndexSet::None => {
                def.options.hash_only_primary_key = true;
                def
            }
        }
    }

    fn lock(&self) -> LockMode {
        if self.shared_locks {
            LockMode::Shared
        } else {
            LockMode::CommittedRead
        }
    }
}

/// Rows a full scan keeping `pct` percent of `size` rows returns (`B` is
/// a permutation of `0..size`, so `B < this` holds for exactly this many).
fn selected_rows(size: u32, pct: f64) -> u32 {
    (f64::from(size) * pct / 100.0).round() as u32
}

/// What every row holds: all columns follow from the key.
#[derive(Clone, Copy, Debug)]
struct Expected {
    size: u32,
    /// `B = KEY × b_multiplier mod size`: a prime not dividing `size`, so
    /// `B` runs over `0..size` once.
    b_multiplier: u64,
}

impl Expected {
    fn new(size: u32) -> Expected {
        // The product of these primes is above u32::MAX: one of them does
        // not divide the size.
        let b_multiplier = [7919u64, 7927, 7933]
            .into_iter()
            .find(|p| u64::from(size) % p != 0)
            .expect("three primes above 7900 cannot all divide a u32");
        Expected { size, b_multiplier }
    }

    fn b_of(&self, key: u32) -> u32 {
        (u64::from(key) * self.b_multiplier % u64::from(self.size)) as u32
    }

    fn c_of(key: u32) -> [u8; 8] {
        (u64::from(key).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x5EED).to_le_bytes()
    }

    fn values(&self, key: u32) -> [Value; 4] {
        [
            Value::UInt(u64::from(key)),
            Value::UInt(u64::from(key)),
            Value::UInt(u64::from(self.b_of(key))),
            Value::Bytes(Expected::c_of(key).to_vec()),
        ]
    }
}

/// The columns of one returned row.
#[derive(Clone, Copy, Debug)]
struct Fields<'a> {
    key: u32,
    a: u32,
    b: u32,
    c: &'a [u8],
}

impl<'a> Fields<'a> {
    fn of(row: &'a RowBuf) -> Result<Fields<'a>, String> {
        let u32_of = |col: u16, name: &str| -> Result<u32, String> {
            row.get_u32(col)
                .map_err(|e| format!("column {name}: {e}"))?
                .ok_or_else(|| format!("column {name} is NULL"))
        };
        Ok(Fields {
            key: u32_of(KEY_COL, "KEY")?,
            a: u32_of(A_COL, "A")?,
            b: u32_of(B_COL, "B")?,
            c: row
                .get_bytes(C_COL)
                .map_err(|e| format!("column C: {e}"))?
                .ok_or("column C is NULL")?,
        })
    }
}

/// Which rows a case must return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Selection {
    /// Keys `first..first + count`.
    Window { first: u32, count: u32 },
    /// The rows whose `B` is below `limit`: exactly `limit` of them.
    BBelow { limit: u32 },
}

/// Checks a case's rows as they come: values, selection, duplicates,
/// order, and at the end the count.
struct ResultCheck {
    expected: Expected,
    selection: Selection,
    ordered: bool,
    /// Bit `key - base` is set once that key was returned.
    seen: Vec<u64>,
    base: u32,
    rows: u64,
    last_key: Option<u32>,
}

impl ResultCheck {
    fn new(expected: Expected, selection: Selection, ordered: bool) -> ResultCheck {
        let (base, span) = match selection {
            Selection::Window { first, count } => (first, count),
            Selection::BBelow { .. } => (0, expected.size),
        };
        ResultCheck {
            expected,
            selection,
            ordered,
            seen: vec![0; (span as usize).div_ceil(64)],
            base,
            rows: 0,
            last_key: None,
        }
    }

    fn row(&mut self, f: Fields<'_>) -> Result<(), String> {
        let key = f.key;
        if key >= self.expected.size {
            return Err(format!(
                "key {key} is not in the table (keys 0..{})",
                self.expected.size
            ));
        }
        let b = self.expected.b_of(key);
        if f.a != key || f.b != b || f.c != Expected::c_of(key) {
            return Err(format!(
                "key {key}: read A={} B={} C={:02x?}, expected A={key} B={b} C={:02x?}",
                f.a,
                f.b,
                f.c,
                Expected::c_of(key)
            ));
        }
        match self.selection {
            Selection::Window { first, count } => {
                if key < first || key - first >= count {
                    return Err(format!(
                        "key {key} is outside the window [{first}, {})",
                        u64::from(first) + u64::from(count)
                    ));
                }
            }
            Selection::BBelow { limit } => {
                if f.b >= limit {
                    return Err(format!(
                        "key {key} has B={}, which the filter B < {limit} drops",
                        f.b
                    ));
                }
            }
        }
        if self.ordered {
            if let Some(last) = self.last_key.filter(|&last| key <= last) {
                return Err(format!(
                    "key {key} came after key {last} in an ordered scan"
                ));
            }
            self.last_key = Some(key);
        }
        let i = (key - self.base) as usize;
        let (word, bit) = (i / 64, 1u64 << (i % 64));
        if self.seen[word] & bit != 0 {
            return Err(format!("key {key} was returned twice"));
        }
        self.seen[word] |= bit;
        self.rows += 1;
        Ok(())
    }

    fn row_buf(&mut self, row: &RowBuf) -> Result<(), String> {
        self.row(Fields::of(row)?)
    }

    /// The rows returned, if they are all the selection holds.
    fn finish(&self) -> Result<u64, String> {
        let want = match self.selection {
            Selection::Window { count, .. } => count,
            Selection::BBelow { limit } => limit,
        };
        if self.rows == u64::from(want) {
            return Ok(self.rows);
        }
        let missing = match self.selection {
            Selection::Window { count, .. } => (0..count)
                .find(|&i| self.seen[i as usize / 64] & (1 << (i % 64)) == 0)
                .map(|i| i + self.base),
            Selection::BBelow { limit } => (0..self.expected.size).find(|&k| {
                self.expected.b_of(k) < limit && self.seen[k as usize / 64] & (1 << (k % 64)) == 0
            }),
        };
        Err(format!(
            "returned {} rows, expected {want}{}",
            self.rows,
            missing.map_or(String::new(), |k| format!(" (key {k} missing)"))
        ))
    }
}

/// testReadPerf's eight cases, in its order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    SerialPk,
    BatchPk,
    SerialUnique,
    BatchUnique,
    IndexEqBound,
    IndexRange,
    IndexOrdered,
    InterpretedScan,
}

const CASES: [Case; 8] = [
    Case::SerialPk,
    Case::BatchPk,
    Case::SerialUnique,
    Case::BatchUnique,
    Case::IndexEqBound,
    Case::IndexRange,
    Case::IndexOrdered,
    Case::InterpretedScan,
];

impl Case {
    fn name(self) -> &'static str {
        match self {
            Case::SerialPk => "serial pk",
            Case::BatchPk => "batch pk",
            Case::SerialUnique => "serial unique",
            Case::BatchUnique => "batch unique",
            Case::IndexEqBound => "index eq-bound",
            Case::IndexRange => "index range",
            Case::IndexOrdered => "index ordered",
            Case::InterpretedScan => "interpreted scan",
        }
    }

    /// The name `--cases` knows it by.
    fn flag_name(self) -> &'static str {
        match self {
            Case::SerialPk => "serial-pk",
            Case::BatchPk => "batch-pk",
            Case::SerialUnique => "serial-unique",
            Case::BatchUnique => "batch-unique",
            Case::IndexEqBound => "eq-bound",
            Case::IndexRange => "range",
            Case::IndexOrdered => "ordered",
            Case::InterpretedScan => "interpreted",
        }
    }

    fn needs_ordered_index(self) -> bool {
        matches!(
            self,
            Case::IndexEqBound | Case::IndexRange | Case::IndexOrdered
        )
    }
}

/// One timed run of a case.
struct CaseRun {
    rows: u64,
    elapsed: Duration,
    examined: u64,
}

/// A case's runs added up over the iterations.
#[derive(Default)]
struct CaseTotals {
    rows: u64,
    elapsed: Duration,
    examined: u64,
    iterations: u32,
    /// The fastest iteration's time per row, in µs (on a shared machine
    /// the average carries every other process's interruptions).
    best_us_per_row: Option<f64>,
    cpu: CpuTotals,
}

/// One case's figures, for the summary and `--json`.
#[derive(Debug, Serialize)]
pub struct CaseReport {
    pub case: &'static str,
    /// Wall time per row returned, over every iteration; `None` when the
    /// case did not run (see `note`).
    pub us_per_row: Option<f64>,
    pub rows_per_sec: Option<f64>,
    /// The fastest iteration's time per row.
    pub best_us_per_row: Option<f64>,
    pub rows: u64,
    pub iterations: u32,
    /// Rows the data nodes looked at per second (scans).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows_examined_per_sec: Option<f64>,
    /// How busy each core of the machine was while the case ran, when it
    /// ran long enough to tell.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores_busy_pct: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub client_cpu_ns_per_row: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One scan of `--scan-selectivity`, over every iteration.
#[derive(Debug, Serialize)]
pub struct SelectivityScan {
    pub scan: String,
    pub ms_per_scan: f64,
    pub rows_returned: u64,
    pub rows_examined: u64,
    pub rows_examined_per_sec: f64,
    pub rows_returned_per_sec: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cores_busy_pct: Option<Vec<f64>>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub options: Options,
    /// The windows' first keys, one per iteration.
    pub windows: Vec<u32>,
    pub seed: u64,
    /// Rows a scan round brought at most (over all fragments).
    pub scan_batch_rows: u32,
    pub cases: Vec<CaseReport>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub selectivity: Vec<SelectivityScan>,
}

/// Entry point of `shoal bench readperf ARGS`.
pub fn main(args: &[String]) -> Result<(), String> {
    let opts = Options::parse(args)?;
    let report = run(&opts)?;
    let json = serde_json::to_string(&report).expect("report serializes");
    if let Some(path) = &opts.json_file {
        std::fs::write(path, format!("{json}\n"))
            .map_err(|e| format!("cannot write {path}: {e}"))?;
    }
    if opts.json {
        println!("{json}");
        return Ok(());
    }
    for c in &report.cases {
        match (c.us_per_row, c.rows_per_sec) {
            (Some(us), Some(rate)) => {
                println!("{} avg: {us:.2} us/row ({rate:.0} rows / sec)", c.case)
            }
            _ => println!(
                "{}: {}",
                c.case,
                c.note.as_deref().unwrap_or("not measured")
            ),
        }
        if let Some(examined) = c.rows_examined_per_sec {
            println!(
                "{} examined: {examined:.0} rows / sec (rows the data nodes looked at)",
                c.case
            );
        }
    }
    for s in &report.selectivity {
        println!(
            "{} avg: {:.2} ms/scan, {:.0} rows examined / sec, {:.0} rows returned / sec",
            s.scan, s.ms_per_scan, s.rows_examined_per_sec, s.rows_returned_per_sec
        );
    }
    Ok(())
}

/// Runs the benchmark and returns its figures; progress and each case's
/// CPU shares go to stderr.
pub fn run(opts: &Options) -> Result<Report, String> {
    // One client thread, as testReadPerf's one Ndb object: every case is
    // a chain of round trips, none overlaps another.
    let mut builder = tokio::runtime::Builder::new_current_thread();
    builder.enable_all();
    let mut cluster_opts = ClusterOptions::default();
    if opts.spin_us > 0 {
        let spin = ParkSpin::new(Duration::from_micros(u64::from(opts.spin_us)));
        builder.on_thread_park(spin.hook());
        cluster_opts.park_spin = Some(spin);
    }
    cluster_opts.neighbour = opts.neighbour;
    let spin = cluster_opts.park_spin.clone();
    let rt = builder
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    rt.block_on(async {
        let cluster = Cluster::connect_with(&opts.connect, cluster_opts)
            .await
            .map_err(|e| format!("cannot connect to mgmd at {}: {e}", opts.connect))?;
        let result = run_with(&cluster, opts).await;
        cluster.close().await;
        result
    })
    .inspect(|_| {
        if let Some(spin) = spin {
            // Proof that the spin was in use: 0 would mean every answer
            // found the thread asleep.
            eprintln!(
                "readperf: the client's spin saw {} answers arrive",
                spin.spins_ended_on_input()
            );
        }
    })
}

async fn run_with(cluster: &Cluster, opts: &Options) -> Result<Report, String> {
    let table = if opts.create {
        create_table(cluster, opts).await?
    } else {
        let t = cluster.table(&opts.table).await.map_err(|e| {
            if e.code == ErrorCode::NoSuchTable {
                format!(
                    "table {} does not exist: create and load it with -c -d",
                    opts.table
                )
            } else {
                format!("cannot look up table {}: {e}", opts.table)
            }
        })?;
        let want = opts.table_def();
        if t.def().columns != want.columns || t.def().primary_key != want.primary_key {
            return Err(format!(
                "table {} exists with another definition; recreate it with -c -d",
                opts.table
            ));
        }
        t
    };
    let expected = Expected::new(opts.size);
    if opts.load {
        load(cluster, &table, expected).await?;
    }
    let seed = opts.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    let fragments = table.fragment_replicas().map_or(1, |f| f.len().max(1));
    let scan_batch_rows = opts.scan_batch_rows.unwrap_or_else(|| {
        SCAN_BATCH_ROWS_PER_FRAGMENT.saturating_mul(u32::try_from(fragments).unwrap_or(u32::MAX))
    });
    eprintln!(
        "readperf: table {} ({fragments} fragments), scans bring at most {scan_batch_rows} rows a round",
        table.name()
    );
    let ctx = Context {
        cluster: cluster.clone(),
        scan_batch_rows,
        record: table.full_record(),
        has_ordered_index: table.def().index_number(ORDERED_INDEX).is_some(),
        unique: match table.def().unique_index(UNIQUE_INDEX) {
            Some(_) => Some(
                cluster
                    .unique_index(table.name(), UNIQUE_INDEX)
                    .await
                    .map_err(|e| format!("cannot look up unique index {UNIQUE_INDEX}: {e}"))?,
            ),
            None => None,
        },
        table,
        expected,
        opts: opts.clone(),
    };
    let mut report = Report {
        options: opts.clone(),
        windows: Vec::new(),
        seed,
        scan_batch_rows,
        cases: Vec::new(),
        selectivity: Vec::new(),
    };
    if opts.iterations == 0 {
        return Ok(report);
    }
    match opts.scan_selectivity_pct {
        Some(pct) => report.selectivity = run_selectivity(&ctx, pct).await?,
        None => {
            let (windows, cases) = run_cases(&ctx, seed).await?;
            report.windows = windows;
            report.cases = cases;
        }
    }
    Ok(report)
}

/// Creates the table, dropping an older one of the name first (as
/// testReadPerf's `-c` does).
async fn create_table(cluster: &Cluster, opts: &Options) -> Result<Table, String> {
    match cluster.drop_table(&opts.table).await {
        Ok(()) => eprintln!("readperf: dropped the old table {}", opts.table),
        Err(e) if e.code == ErrorCode::NoSuchTable => {}
        Err(e) => return Err(format!("cannot drop table {}: {e}", opts.table)),
    }
    let table = cluster
        .create_table(opts.table_def())
        .await
        .map_err(|e| format!("cannot create table {}: {e}", opts.table))?;
    let indexes: Vec<&str> = table
        .def()
        .indexes
        .iter()
        .map(|i| i.name.as_str())
        .collect();
    eprintln!(
        "readperf: created table {} (not logged{}; ordered indexes {:?})",
        opts.table,
        if opts.read_backup {
            ", READ_BACKUP"
        } else {
            ""
        },
        indexes
    );
    Ok(table)
}

/// Writes every row (`write`: an upsert, so loading again repairs a
/// table), `LOAD_TASKS` loaders each keeping `LOAD_TRANSACTIONS_IN_FLIGHT`
/// transactions of `LOAD_ROWS_PER_TRANSACTION` rows out at once.
async fn load(cluster: &Cluster, table: &Table, expected: Expected) -> Result<(), String> {
    let size = expected.size;
    let chunks = size.div_ceil(LOAD_ROWS_PER_TRANSACTION);
    let next_chunk = std::sync::Arc::new(std::sync::atomic::AtomicU32::new(0));
    let loaded = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..LOAD_TASKS {
        let cluster = cluster.clone();
        let record = table.full_record();
        let next_chunk = next_chunk.clone();
        let loaded = loaded.clone();
        tasks.spawn(async move {
            use std::sync::atomic::Ordering::Relaxed;
            loop {
                let mut txns = Vec::with_capacity(LOAD_TRANSACTIONS_IN_FLIGHT);
                let mut firsts = Vec::with_capacity(LOAD_TRANSACTIONS_IN_FLIGHT);
                while txns.len() < LOAD_TRANSACTIONS_IN_FLIGHT {
                    let chunk = next_chunk.fetch_add(1, Relaxed);
                    if chunk >= chunks {
                        break;
                    }
                    let first = chunk * LOAD_ROWS_PER_TRANSACTION;
                    txns.push(load_transaction(&cluster, &record, expected, first)?);
                    firsts.push(first);
                }
                if txns.is_empty() {
                    return Ok::<(), String>(());
                }
                let results = Transaction::execute_all(&mut txns, ExecType::Commit).await;
                for (result, &first) in results.into_iter().zip(&firsts) {
                    match result {
                        Ok(()) => {}
                        Err(e) if e.class() != ErrorClass::Permanent => {
                            retry_load(&cluster, &record, expected, first, e).await?
                        }
                        Err(e) => return Err(format!("loading keys from {first}: {e}")),
                    }
                    let n = LOAD_ROWS_PER_TRANSACTION.min(size - first);
                    loaded.fetch_add(u64::from(n), Relaxed);
                }
            }
        });
    }
    let start = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.tick().await;
    let mut outcome = Ok(());
    while !tasks.is_empty() {
        tokio::select! {
            joined = tasks.join_next() => {
                let r = joined
                    .expect("the set is not empty")
                    .unwrap_or_else(|e| Err(format!("a loader stopped: {e}")));
                if outcome.is_ok() {
                    outcome = r;
                }
                if outcome.is_err() {
                    // Stop the others: the run fails anyway.
                    tasks.abort_all();
                }
            }
            _ = tick.tick() => {
                let n = loaded.load(std::sync::atomic::Ordering::Relaxed);
                eprintln!(
                    "readperf: loaded {n} of {size} rows ({:.0} rows/s)",
                    n as f64 / start.elapsed().as_secs_f64()
                );
            }
        }
    }
    outcome?;
    let secs = start.elapsed().as_secs_f64();
    eprintln!(
        "readperf: loaded {size} rows in {secs:.2}s ({:.0} rows/s)",
        f64::from(size) / secs
    );
    Ok(())
}

/// A transaction writing the rows of keys `first..` (at most
/// `LOAD_ROWS_PER_TRANSACTION` of them), not executed.
fn load_transaction(
    cluster: &Cluster,
    record: &Record,
    expected: Expected,
    first: u32,
) -> Result<Transaction, String> {
    let mut tx = cluster.transaction();
    let end = first
        .saturating_add(LOAD_ROWS_PER_TRANSACTION)
        .min(expected.size);
    for key in first..end {
        tx.write(record, &expected.values(key))
            .map_err(|e| format!("key {key}: {e}"))?;
    }
    Ok(tx)
}

/// Runs one load transaction again until it commits (a temporary error
/// or an unknown outcome: its writes are upserts, so running them twice
/// is harmless).
async fn retry_load(
    cluster: &Cluster,
    record: &Record,
    expected: Expected,
    first: u32,
    mut error: ShoalError,
) -> Result<(), String> {
    for _ in 0..LOAD_RETRIES_MAX {
        let mut tx = load_transaction(cluster, record, expected, first)?;
        match tx.execute(ExecType::Commit).await {
            Ok(()) => return Ok(()),
            Err(e) if e.class() != ErrorClass::Permanent => error = e,
            Err(e) => return Err(format!("loading keys from {first}: {e}")),
        }
    }
    Err(format!(
        "loading keys from {first}: {LOAD_RETRIES_MAX} temporary errors in a row, the last {error}"
    ))
}

/// What every case needs.
struct Context {
    cluster: Cluster,
    table: Table,
    record: Record,
    has_ordered_index: bool,
    /// The unique index `IDX_U`, if the table has it.
    unique: Option<UniqueIndex>,
    expected: Expected,
    scan_batch_rows: u32,
    opts: Options,
}

impl Context {
    /// A committed-read scan of every column, in rounds of
    /// `scan_batch_rows` rows at most.
    fn scan(&self, tx: &Transaction) -> ScanBuilder {
        tx.scan_record(&self.record)
            .batch(self.scan_batch_rows, SCAN_BATCH_BYTES_DEFAULT)
    }

    fn window_check(&self, first: u32, ordered: bool) -> ResultCheck {
        ResultCheck::new(
            self.expected,
            Selection::Window {
                first,
                count: self.opts.range,
            },
            ordered,
        )
    }
}

fn err(e: ShoalError) -> String {
    e.to_string()
}

async fn run_cases(ctx: &Context, seed: u64) -> Result<(Vec<u32>, Vec<CaseReport>), String> {
    use rand::{Rng, SeedableRng};
    let opts = &ctx.opts;
    let mut rng = rand::rngs::SmallRng::seed_from_u64(seed);
    let mut totals: Vec<CaseTotals> = CASES.iter().map(|_| CaseTotals::default()).collect();
    let mut windows = Vec::new();
    for iteration in 1..=opts.iterations {
        let first = rng.random_range(0..=opts.size - opts.range);
        windows.push(first);
        eprintln!(
            "readperf: iteration {iteration}/{}, keys [{first}, {}) (seed {seed})",
            opts.iterations,
            u64::from(first) + u64::from(opts.range)
        );
        for (&case, total) in CASES.iter().zip(totals.iter_mut()) {
            if skip_note(ctx, case).is_some() {
                continue;
            }
            let before = CpuSample::now();
            let run = run_case(ctx, case, first).await.map_err(|e| {
                format!(
                    "{} over keys [{first}, {}), iteration {iteration}: {e} (wrong result or error; the benchmark stops)",
                    case.name(),
                    u64::from(first) + u64::from(opts.range)
                )
            })?;
            if let (Some(a), Some(b)) = (before, CpuSample::now()) {
                total.cpu.add(&a, &b);
            }
            eprintln!(
                "  {}: {} rows in {:.2} ms = {:.2} us/row{}",
                case.name(),
                run.rows,
                run.elapsed.as_secs_f64() * 1e3,
                run.elapsed.as_secs_f64() * 1e6 / run.rows.max(1) as f64,
                if case == Case::InterpretedScan {
                    format!(
                        ", {} rows examined = {:.0} rows examined / sec",
                        run.examined,
                        run.examined as f64 / run.elapsed.as_secs_f64()
                    )
                } else {
                    String::new()
                }
            );
            total.rows += run.rows;
            total.elapsed += run.elapsed;
            total.examined += run.examined;
            total.iterations += 1;
            let us = run.elapsed.as_secs_f64() * 1e6 / run.rows.max(1) as f64;
            total.best_us_per_row = Some(total.best_us_per_row.map_or(us, |b| b.min(us)));
        }
    }
    let reports = CASES
        .iter()
        .zip(&totals)
        .map(|(&case, t)| {
            if let Some(note) = skip_note(ctx, case) {
                return CaseReport {
                    case: case.name(),
                    us_per_row: None,
                    rows_per_sec: None,
                    best_us_per_row: None,
                    rows: 0,
                    iterations: 0,
                    rows_examined_per_sec: None,
                    cores_busy_pct: None,
                    client_cpu_ns_per_row: None,
                    note: Some(note),
                };
            }
            let secs = t.elapsed.as_secs_f64();
            let measured = t.cpu.ticks_per_core() >= CPU_TICKS_MIN;
            let report = CaseReport {
                case: case.name(),
                us_per_row: Some(secs * 1e6 / t.rows.max(1) as f64),
                rows_per_sec: Some(t.rows as f64 / secs.max(1e-9)),
                best_us_per_row: t.best_us_per_row,
                rows: t.rows,
                iterations: t.iterations,
                rows_examined_per_sec: (case == Case::InterpretedScan)
                    .then(|| t.examined as f64 / secs.max(1e-9)),
                cores_busy_pct: measured.then(|| t.cpu.busy_pct()),
                client_cpu_ns_per_row: measured.then(|| t.cpu.process_ns_per_op(t.rows)),
                note: None,
            };
            eprintln!(
                "readperf: {}: best iteration {:.2} us/row; CPU: {}",
                case.name(),
                t.best_us_per_row.unwrap_or(0.0),
                if measured {
                    t.cpu.report(t.rows)
                } else {
                    format!(
                        "ran {:.0} ms in all, too short for /proc's 10 ms ticks",
                        secs * 1e3
                    )
                }
            );
            report
        })
        .collect();
    Ok((windows, reports))
}

/// Why a case is not run, if it is not.
fn skip_note(ctx: &Context, case: Case) -> Option<String> {
    if let Some(cases) = &ctx.opts.cases {
        if !cases.iter().any(|c| c == case.flag_name()) {
            return Some("skipped (not among --cases)".to_string());
        }
    }
    match case {
        Case::SerialUnique | Case::BatchUnique if ctx.unique.is_none() => Some(format!(
            "skipped (table {} has no unique index {UNIQUE_INDEX})",
            ctx.table.name()
        )),
        c if c.needs_ordered_index() && !ctx.has_ordered_index => Some(format!(
            "skipped (table {} has no ordered index {ORDERED_INDEX})",
            ctx.table.name()
        )),
        _ => None,
    }
}

/// Times one case over the window starting at `first`, checking its rows.
async fn run_case(ctx: &Context, case: Case, first: u32) -> Result<CaseRun, String> {
    let range = ctx.opts.range;
    let lock = ctx.opts.lock();
    match case {
        Case::SerialPk => {
            let mut check = ctx.window_check(first, false);
            let mut tx = ctx.cluster.transaction();
            let mut buf = RowBuf::new();
            let start = Instant::now();
            for i in 0..range {
                let key = first + i;
                let op = tx
                    .read_into(&ctx.record, &[Value::UInt(u64::from(key))], lock, buf)
                    .map_err(err)?;
                let exec = if i + 1 == range {
                    ExecType::Commit
                } else {
                    ExecType::NoCommit
                };
                tx.execute(exec).await.map_err(err)?;
                let row = tx
                    .take_row(op)
                    .ok_or_else(|| format!("the read of key {key} returned no row"))?;
                check.row_buf(&row)?;
                buf = row;
            }
            let elapsed = start.elapsed();
            let rows = check.finish()?;
            Ok(CaseRun {
                rows,
                elapsed,
                examined: 0,
            })
        }
        Case::BatchPk => {
            let mut check = ctx.window_check(first, false);
            let mut tx = ctx.cluster.transaction();
            let bufs: Vec<RowBuf> = (0..range).map(|_| RowBuf::new()).collect();
            let start = Instant::now();
            let mut ops = Vec::with_capacity(range as usize);
            for (i, buf) in bufs.into_iter().enumerate() {
                let key = first + i as u32;
                ops.push((
                    key,
                    tx.read_into(&ctx.record, &[Value::UInt(u64::from(key))], lock, buf)
                        .map_err(err)?,
                ));
            }
            tx.execute(ExecType::Commit).await.map_err(err)?;
            for (key, op) in ops {
                let row = tx
                    .row(op)
                    .ok_or_else(|| format!("the read of key {key} returned no row"))?;
                check.row_buf(row)?;
            }
            let elapsed = start.elapsed();
            let rows = check.finish()?;
            Ok(CaseRun {
                rows,
                elapsed,
                examined: 0,
            })
        }
        Case::SerialUnique => {
            let index = ctx.unique.as_ref().ok_or("no unique index")?;
            let mut check = ctx.window_check(first, false);
            let mut tx = ctx.cluster.transaction();
            let start = Instant::now();
            for i in 0..range {
                let key = first + i;
                let b = ctx.expected.b_of(key);
                let op = tx
                    .read_unique(&ctx.record, index, &[Value::UInt(u64::from(b))], lock)
                    .map_err(err)?;
                let exec = if i + 1 == range {
                    ExecType::Commit
                } else {
                    ExecType::NoCommit
                };
                tx.execute(exec).await.map_err(err)?;
                let row = tx
                    .row(op)
                    .ok_or_else(|| format!("the read of B = {b} returned no row"))?;
                check.row_buf(row)?;
            }
            let elapsed = start.elapsed();
            let rows = check.finish()?;
            Ok(CaseRun {
                rows,
                elapsed,
                examined: 0,
            })
        }
        Case::BatchUnique => {
            let index = ctx.unique.as_ref().ok_or("no unique index")?;
            let mut check = ctx.window_check(first, false);
            let mut tx = ctx.cluster.transaction();
            let start = Instant::now();
            let mut ops = Vec::with_capacity(range as usize);
            for i in 0..range {
                let b = ctx.expected.b_of(first + i);
                ops.push((
                    b,
                    tx.read_unique(&ctx.record, index, &[Value::UInt(u64::from(b))], lock)
                        .map_err(err)?,
                ));
            }
            tx.execute(ExecType::Commit).await.map_err(err)?;
            for (b, op) in ops {
                let row = tx
                    .row(op)
                    .ok_or_else(|| format!("the read of B = {b} returned no row"))?;
                check.row_buf(row)?;
            }
            let elapsed = start.elapsed();
            let rows = check.finish()?;
            Ok(CaseRun {
                rows,
                elapsed,
                examined: 0,
            })
        }
        Case::IndexEqBound => {
            let mut check = ctx.window_check(first, false);
            let tx = ctx.cluster.transaction();
            let mut examined = 0;
            let start = Instant::now();
            for i in 0..range {
                let key = first + i;
                let mut scan = ctx
                    .scan(&tx)
                    .index(ORDERED_INDEX)
                    .eq(&[Value::UInt(u64::from(key))])
                    .open()
                    .await
                    .map_err(err)?;
                while let Some(row) = scan.next_row().await.map_err(err)? {
                    let f = Fields::of(row)?;
                    if f.a != key {
                        return Err(format!(
                            "the scan of A = {key} returned the row of key {} (A={})",
                            f.key, f.a
                        ));
                    }
                    check.row(f)?;
                }
                examined += scan.rows_examined();
            }
            let elapsed = start.elapsed();
            let rows = check.finish()?;
            Ok(CaseRun {
                rows,
                elapsed,
                examined,
            })
        }
        Case::IndexRange | Case::IndexOrdered => {
            let ordered = case == Case::IndexOrdered;
            let mut check = ctx.window_check(first, ordered);
            let tx = ctx.cluster.transaction();
            let low = [Value::UInt(u64::from(first))];
            let high = [Value::UInt(u64::from(first) + u64::from(range))];
            let start = Instant::now();
            let mut scan = ctx
                .scan(&tx)
                .index(ORDERED_INDEX)
                .range(Bound::Included(&low[..]), Bound::Excluded(&high[..]));
            if ordered {
                scan = scan.ordered();
            }
            let mut scan = scan.open().await.map_err(err)?;
            while let Some(row) = scan.next_row().await.map_err(err)? {
                check.row_buf(row)?;
            }
            let elapsed = start.elapsed();
            let rows = check.finish()?;
            Ok(CaseRun {
                rows,
                elapsed,
                examined: scan.rows_examined(),
            })
        }
        Case::InterpretedScan => {
            let mut check = ctx.window_check(first, false);
            let tx = ctx.cluster.transaction();
            let filter = FilterExpr::And(vec![
                FilterExpr::Cmp {
                    col: KEY_COL,
                    op: CmpOp::Ge,
                    value: Value::UInt(u64::from(first)),
                },
                FilterExpr::Cmp {
                    col: KEY_COL,
                    op: CmpOp::Lt,
                    value: Value::UInt(u64::from(first) + u64::from(range)),
                },
            ]);
            let start = Instant::now();
            let mut scan = ctx.scan(&tx).filter(filter).open().await.map_err(err)?;
            while let Some(row) = scan.next_row().await.map_err(err)? {
                check.row_buf(row)?;
            }
            let elapsed = start.elapsed();
            let rows = check.finish()?;
            Ok(CaseRun {
                rows,
                elapsed,
                examined: scan.rows_examined(),
            })
        }
    }
}

/// `--scan-selectivity`: per iteration, a full scan with `B < limit` and
/// an `IDX_O` range scan of `A` in `[0, limit)`: the same number of rows,
/// found by examining every row or by walking the index.
async fn run_selectivity(ctx: &Context, pct: f64) -> Result<Vec<SelectivityScan>, String> {
    let limit = selected_rows(ctx.opts.size, pct);
    let mut shapes = vec![format!(
        "full scan B < {limit} ({pct} % of {} rows)",
        ctx.opts.size
    )];
    if ctx.has_ordered_index {
        shapes.push(format!("{ORDERED_INDEX} range scan A in [0, {limit})"));
    }
    let mut totals: Vec<CaseTotals> = shapes.iter().map(|_| CaseTotals::default()).collect();
    for iteration in 1..=ctx.opts.iterations {
        for (s, (shape, total)) in shapes.iter().zip(totals.iter_mut()).enumerate() {
            let tx = ctx.cluster.transaction();
            let before = CpuSample::now();
            let start = Instant::now();
            let (mut check, scan) = if s == 0 {
                let filter = FilterExpr::Cmp {
                    col: B_COL,
                    op: CmpOp::Lt,
                    value: Value::UInt(u64::from(limit)),
                };
                (
                    ResultCheck::new(ctx.expected, Selection::BBelow { limit }, false),
                    ctx.scan(&tx).filter(filter),
                )
            } else {
                let high = [Value::UInt(u64::from(limit))];
                (
                    ResultCheck::new(
                        ctx.expected,
                        Selection::Window {
                            first: 0,
                            count: limit,
                        },
                        false,
                    ),
                    ctx.scan(&tx)
                        .index(ORDERED_INDEX)
                        .range(Bound::Unbounded, Bound::Excluded(&high[..])),
                )
            };
            let fail =
                |e: String| format!("{shape}, iteration {iteration}: {e} (the benchmark stops)");
            let mut scan = scan.open().await.map_err(err).map_err(fail)?;
            while let Some(row) = scan.next_row().await.map_err(err).map_err(fail)? {
                check.row_buf(row).map_err(fail)?;
            }
            let elapsed = start.elapsed();
            let rows = check.finish().map_err(fail)?;
            if let (Some(a), Some(b)) = (before, CpuSample::now()) {
                total.cpu.add(&a, &b);
            }
            eprintln!(
                "  {shape}: {rows} rows, {} examined, in {:.2} ms = {:.0} rows examined / sec",
                scan.rows_examined(),
                elapsed.as_secs_f64() * 1e3,
                scan.rows_examined() as f64 / elapsed.as_secs_f64()
            );
            total.rows += rows;
            total.examined += scan.rows_examined();
            total.elapsed += elapsed;
            total.iterations += 1;
        }
    }
    Ok(shapes
        .into_iter()
        .zip(totals)
        .map(|(scan, t)| {
            let secs = t.elapsed.as_secs_f64().max(1e-9);
            let measured = t.cpu.ticks_per_core() >= CPU_TICKS_MIN;
            if measured {
                eprintln!("readperf: {scan} CPU: {}", t.cpu.report(t.examined));
            }
            SelectivityScan {
                ms_per_scan: secs * 1e3 / f64::from(t.iterations.max(1)),
                rows_returned: t.rows,
                rows_examined: t.examined,
                rows_examined_per_sec: t.examined as f64 / secs,
                rows_returned_per_sec: t.rows as f64 / secs,
                cores_busy_pct: measured.then(|| t.cpu.busy_pct()),
                scan,
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_ndb_flags() {
        let o = Options::parse(&args("")).unwrap();
        assert_eq!((o.range, o.size, o.iterations), (1000, 1_000_000, 3));
        assert!(!o.create && !o.load && !o.json && !o.shared_locks);
        assert_eq!(o.table, "READPERF");
        assert_eq!(o.connect, "127.0.0.1:1186");
        assert_eq!(o.lock(), LockMode::CommittedRead);

        let o = Options::parse(&args(
            "-r 50 -s 2000 -i 0 -c -d -shared --json --json-file /tmp/x --connect 127.0.0.1:9 --seed 7 --scan-batch 64 T1",
        ))
        .unwrap();
        assert_eq!((o.range, o.size, o.iterations), (50, 2000, 0));
        assert!(o.create && o.load && o.json && o.shared_locks);
        assert_eq!(o.lock(), LockMode::Shared);
        assert_eq!(o.connect, "127.0.0.1:9");
        assert_eq!((o.seed, o.scan_batch_rows), (Some(7), Some(64)));
        assert_eq!(o.table, "T1");
        assert_eq!(o.json_file.as_deref(), Some("/tmp/x"));

        let o = Options::parse(&args("--scan-selectivity 1 --indexes primary")).unwrap();
        assert_eq!(o.scan_selectivity_pct, Some(1.0));
        assert_eq!(o.indexes, IndexSet::Primary);
        assert_eq!(o.cases, None);

        assert!(!o.read_backup && o.spin_us == 0 && o.neighbour.is_none());
        let o = Options::parse(&args("--read-backup --spin-us 100 --neighbour 2")).unwrap();
        assert!(o.read_backup && o.spin_us == 100);
        assert_eq!(o.neighbour, Some(2));
        assert!(Options::parse(&args("--neighbour 0")).is_err());
        assert!(Options::parse(&args("--neighbour 70000")).is_err());
        assert!(o.table_def().options.read_backup);

        let o = Options::parse(&args("--cases range,ordered")).unwrap();
        assert_eq!(
            o.cases,
            Some(vec!["range".to_string(), "ordered".to_string()])
        );
    }

    #[test]
    fn refuses_bad_flags() {
        for bad in [
            "-r",
            "-r x",
            "-r 0",
            "-s 0",
            "-s 4294967296",
            "-r 11 -s 10",
            "-bogus",
            "--indexes some",
            "--scan-selectivity 0",
            "--scan-selectivity 101",
            "--scan-selectivity x",
            "-s 10 --scan-selectivity 1",
            "--cases",
            "--cases range,sorted",
            "--cases range --scan-selectivity 1",
            "--spin-us",
            "--spin-us 10001",
            "--spin-us -1",
            "T1 T2",
        ] {
            assert!(Options::parse(&args(bad)).is_err(), "{bad:?} was accepted");
        }
    }

    #[test]
    fn table_shapes() {
        let all = Options::default().table_def();
        assert!(all.options.no_logging && !all.options.hash_only_primary_key);
        assert_eq!(all.index_number(ORDERED_INDEX), Some(0));
        assert_eq!(all.indexes[0].columns, vec![A_COL]);
        assert_eq!(all.columns[C_COL as usize].ty, ColumnType::Binary(8));
        let primary = Options::parse(&args("--indexes primary"))
            .unwrap()
            .table_def();
        assert!(primary.indexes.is_empty() && !primary.options.hash_only_primary_key);
        let none = Options::parse(&args("--indexes none")).unwrap().table_def();
        assert!(none.indexes.is_empty() && none.options.hash_only_primary_key);
    }

    #[test]
    fn b_is_a_permutation_of_the_keys() {
        for size in [1u32, 7, 1000, 7919, 7919 * 2] {
            let e = Expected::new(size);
            let mut seen = vec![false; size as usize];
            for k in 0..size {
                let b = e.b_of(k) as usize;
                assert!(!seen[b], "size {size}: B={b} twice");
                seen[b] = true;
            }
        }
        assert_eq!(selected_rows(1_000_000, 1.0), 10_000);
    }

    /// The fields of a row as a correct table holds them.
    fn good(e: &Expected, key: u32, c: &mut [u8; 8]) -> (u32, u32, u32) {
        *c = Expected::c_of(key);
        (key, key, e.b_of(key))
    }

    fn feed(check: &mut ResultCheck, e: &Expected, keys: &[u32]) -> Result<(), String> {
        for &k in keys {
            let mut c = [0; 8];
            let (key, a, b) = good(e, k, &mut c);
            check.row(Fields { key, a, b, c: &c })?;
        }
        Ok(())
    }

    #[test]
    fn checks_windows() {
        let e = Expected::new(100);
        let window = Selection::Window {
            first: 10,
            count: 5,
        };
        // Any order, unordered.
        let mut ok = ResultCheck::new(e, window, false);
        feed(&mut ok, &e, &[12, 10, 14, 11, 13]).unwrap();
        assert_eq!(ok.finish(), Ok(5));
        // Ascending, ordered.
        let mut ok = ResultCheck::new(e, window, true);
        feed(&mut ok, &e, &[10, 11, 12, 13, 14]).unwrap();
        assert_eq!(ok.finish(), Ok(5));
        // Out of order when ordered.
        let mut c = ResultCheck::new(e, window, true);
        assert!(feed(&mut c, &e, &[10, 12, 11])
            .unwrap_err()
            .contains("after"));
        // A duplicate.
        let mut c = ResultCheck::new(e, window, false);
        assert!(feed(&mut c, &e, &[10, 11, 10])
            .unwrap_err()
            .contains("twice"));
        // Outside the window, on both sides.
        for k in [9, 15, 100] {
            let mut c = ResultCheck::new(e, window, false);
            assert!(feed(&mut c, &e, &[k]).is_err(), "key {k} accepted");
        }
        // A missing row is named at the end.
        let mut c = ResultCheck::new(e, window, false);
        feed(&mut c, &e, &[10, 11, 13, 14]).unwrap();
        let msg = c.finish().unwrap_err();
        assert!(
            msg.contains("returned 4 rows, expected 5") && msg.contains("key 12"),
            "{msg}"
        );
    }

    #[test]
    fn checks_values() {
        let e = Expected::new(100);
        let window = Selection::Window {
            first: 0,
            count: 100,
        };
        let c8 = Expected::c_of(5);
        let wrong_c = Expected::c_of(6);
        for (key, a, b, c) in [
            (5, 6, e.b_of(5), &c8),
            (5, 5, e.b_of(5) + 1, &c8),
            (5, 5, e.b_of(5), &wrong_c),
        ] {
            let mut check = ResultCheck::new(e, window, false);
            let f = Fields {
                key,
                a,
                b,
                c: &c[..],
            };
            assert!(check.row(f).unwrap_err().contains("expected"));
        }
        let mut check = ResultCheck::new(e, window, false);
        let short = [0u8; 4];
        let f = Fields {
            key: 5,
            a: 5,
            b: e.b_of(5),
            c: &short,
        };
        assert!(check.row(f).is_err(), "a short C passed");
    }

    #[test]
    fn checks_b_selections() {
        let e = Expected::new(1000);
        let limit = 10;
        let keys: Vec<u32> = (0..1000).filter(|&k| e.b_of(k) < limit).collect();
        assert_eq!(keys.len(), 10);
        let mut ok = ResultCheck::new(e, Selection::BBelow { limit }, false);
        feed(&mut ok, &e, &keys).unwrap();
        assert_eq!(ok.finish(), Ok(10));
        // A row the filter drops.
        let other = (0..1000).find(|&k| e.b_of(k) >= limit).unwrap();
        let mut c = ResultCheck::new(e, Selection::BBelow { limit }, false);
        assert!(feed(&mut c, &e, &[other]).unwrap_err().contains("drops"));
        // One missing.
        let mut c = ResultCheck::new(e, Selection::BBelow { limit }, false);
        feed(&mut c, &e, &keys[1..]).unwrap();
        let msg = c.finish().unwrap_err();
        assert!(msg.contains(&format!("key {} missing", keys[0])), "{msg}");
    }
}
