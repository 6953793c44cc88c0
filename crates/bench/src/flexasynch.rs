//! `shoal bench flexasynch`: NDB's flexAsynch, with its flags and its output.
//!
//! Each of `-t` threads owns a disjoint key range. Per loop (`-l`) every
//! thread runs the phases insert, read, update, read, delete; `-r N` adds N
//! more read passes after each read. A phase is `-o` rounds; a round starts
//! `-p` transactions of `-c` operations each, executes them all at once
//! (the client batches them into few frames) and waits for all, like
//! flexAsynch's prepare-all / send-poll-all rounds.
//!
//! Throughput of a phase is its operations over the wall time from the
//! moment every thread is told to start to the moment the last finishes.
//! The summary line per phase is average/min/max over loops (reads: over
//! every read pass), stddev as a percentage of the mean.
//!
//! Every read checks the values it gets against what the phase before
//! wrote, so a fast wrong answer cannot pass as a fast right one. The
//! check compares each column's bytes with the expected encoding, written
//! into a reused buffer, and rows land in row buffers each thread hands
//! from transaction to transaction (`Transaction::read_into`), so checking
//! allocates nothing per row, as in flexAsynch with NdbRecord.
//! Temporary errors retry the transaction (counted); anything else stops
//! the run with the error.
//!
//! Threads and connections: `-con` cluster connections, each with its own
//! tokio runtime (one worker per thread assigned to it); threads are
//! tasks on the runtime of connection `thread % con`.

use crate::stats::{summarize, Summary};
use hdrhistogram::Histogram;
use serde::Serialize;
use shoal_client::{
    Cluster, ColumnDef, ColumnType, ErrorClass, ErrorCode, ExecType, LockMode, OpId, Record,
    RowBuf, ShoalError, TableDef, Transaction, Value,
};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const USAGE: &str = "\
usage: shoal bench flexasynch [flags]
  -t N        threads (default 1)
  -p N        parallel transactions per thread per round (default 32)
  -c N        operations per transaction (default 1)
  -a N        attributes per row, the primary key included (default 25)
  -s N        size of each attribute in 4-byte words (default 1)
  -o N        rounds per phase per thread (default 500)
  -l N        loops of insert, read, update, read, delete (default 1)
  -r N        extra read passes after each read (default 0)
  -con N      cluster connections (default 1)
  -dirty      reads are committed reads (no lock)
  -simple     reads take shared locks (the default)
  -temp       a table that is neither logged nor checkpointed (NDB's NOLOGGING):
              comes back empty after a restart of the whole cluster
  -ndbrecord  accepted for compatibility (the API always uses records)
  --ordered-index  the table also has ordered indexes, PRIMARY (on COL0) and
              IDX_COL1 (on COL1), kept at every write (its name ends in _OI)
  --unique-index   the table also has the unique hash index UIX_COL1 (on
              COL1), kept in every writing transaction (its name ends in _UI)
  --connect HOST:PORT   mgmd (default 127.0.0.1:1186)
  --latency   also record per-transaction latency (p50/p99 in µs)
  --json      print the results as one JSON object instead of lines
  --keep      do not delete the rows at the end of the last loop
  -durable    every write commits durably (answered once its epoch is on disk
              on every data node)";

/// The benchmark's settings, with flexAsynch's defaults.
#[derive(Clone, Debug, Serialize)]
pub struct Options {
    pub threads: u32,
    pub parallel: u32,
    pub ops_per_trans: u32,
    pub attributes: u32,
    pub attribute_words: u32,
    pub rounds: u32,
    pub loops: u32,
    pub extra_reads: u32,
    pub connections: u32,
    pub dirty_reads: bool,
    /// `-temp`: the table is not logged.
    pub temp: bool,
    /// `-durable`: writes ask for durable commits.
    pub durable: bool,
    /// `--ordered-index`: the table has the PRIMARY ordered index and one
    /// on COL1, to measure what keeping them costs writes.
    pub ordered_index: bool,
    /// `--unique-index`: the table has a unique hash index on COL1, kept
    /// in every writing transaction.
    pub unique_index: bool,
    pub connect: String,
    pub latency: bool,
    pub json: bool,
    pub keep: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            threads: 1,
            parallel: 32,
            ops_per_trans: 1,
            attributes: 25,
            attribute_words: 1,
            rounds: 500,
            loops: 1,
            extra_reads: 0,
            connections: 1,
            dirty_reads: false,
            temp: false,
            durable: false,
            ordered_index: false,
            unique_index: false,
            connect: "127.0.0.1:1186".into(),
            latency: false,
            json: false,
            keep: false,
        }
    }
}

impl Options {
    /// Parses NDB-style flags (`-t 4`, `-con 2`, `-dirty`).
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let mut o = Options::default();
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let mut number = |name: &str| -> Result<u32, String> {
                let v = it
                    .next()
                    .ok_or_else(|| format!("{name} needs a number\n{USAGE}"))?;
                let n: u32 = v
                    .parse()
                    .map_err(|_| format!("{name} needs a number, got {v:?}\n{USAGE}"))?;
                if n == 0 {
                    return Err(format!("{name} must be at least 1\n{USAGE}"));
                }
                Ok(n)
            };
            match flag.as_str() {
                "-t" => o.threads = number("-t")?,
                "-p" => o.parallel = number("-p")?,
                "-c" => o.ops_per_trans = number("-c")?,
                "-a" => o.attributes = number("-a")?,
                "-s" => o.attribute_words = number("-s")?,
                "-o" => o.rounds = number("-o")?,
                "-l" => o.loops = number("-l")?,
                "-r" => {
                    let v = it
                        .next()
                        .ok_or_else(|| format!("-r needs a number\n{USAGE}"))?;
                    o.extra_reads = v
                        .parse()
                        .map_err(|_| format!("-r needs a number, got {v:?}\n{USAGE}"))?;
                }
                "-con" => o.connections = number("-con")?,
                "-dirty" => o.dirty_reads = true,
                "-simple" => o.dirty_reads = false,
                "-temp" => o.temp = true,
                "-durable" => o.durable = true,
                "--ordered-index" | "-ordered_index" => o.ordered_index = true,
                "--unique-index" | "-unique_index" => o.unique_index = true,
                "-ndbrecord" => {}
                "--connect" | "-connect" => {
                    o.connect = it
                        .next()
                        .ok_or_else(|| format!("--connect needs HOST:PORT\n{USAGE}"))?
                        .clone();
                }
                "--latency" => o.latency = true,
                "--json" => o.json = true,
                "--keep" => o.keep = true,
                "-h" | "--help" | "-?" => return Err(USAGE.to_string()),
                other => return Err(format!("unknown flag {other:?}\n{USAGE}")),
            }
        }
        if o.attributes < 2 {
            return Err("-a must be at least 2 (the primary key and one value)".into());
        }
        if o.connections > o.threads {
            return Err(format!(
                "-con {} is more than -t {}: every connection needs a thread",
                o.connections, o.threads
            ));
        }
        let rows = u64::from(o.threads)
            * u64::from(o.rounds)
            * u64::from(o.parallel)
            * u64::from(o.ops_per_trans);
        if rows > u64::from(u32::MAX) {
            return Err(format!(
                "-t * -o * -p * -c = {rows} rows; the key is a 32-bit column, at most {}",
                u32::MAX
            ));
        }
        // Each row's attributes must fit the row size limit.
        let row_bytes = u64::from(o.attributes) * u64::from(o.attribute_words) * 4;
        if row_bytes > shoal_types::schema::ROW_BYTES_MAX as u64 {
            return Err(format!(
                "-a {} -s {} makes {row_bytes}-byte rows; at most {} bytes",
                o.attributes,
                o.attribute_words,
                shoal_types::schema::ROW_BYTES_MAX
            ));
        }
        Ok(o)
    }

    fn rows_per_thread(&self) -> u32 {
        self.rounds * self.parallel * self.ops_per_trans
    }

    fn table_name(&self) -> String {
        format!(
            "FLEXASYNCH_A{}_S{}{}{}{}",
            self.attributes,
            self.attribute_words,
            if self.temp { "_TEMP" } else { "" },
            if self.ordered_index { "_OI" } else { "" },
            if self.unique_index { "_UI" } else { "" }
        )
    }

    fn table_def(&self) -> TableDef {
        let mut cols = vec![ColumnDef::new("COL0", ColumnType::Int { unsigned: true })];
        for i in 1..self.attributes {
            let ty = if self.attribute_words == 1 {
                ColumnType::Int { unsigned: true }
            } else {
                ColumnType::Binary((self.attribute_words * 4) as u16)
            };
            cols.push(ColumnDef::new(format!("COL{i}"), ty));
        }
        let mut def = TableDef::new(self.table_name(), cols, &["COL0"])
            .expect("flexasynch table definition is valid");
        def.options.no_logging = self.temp;
        if self.unique_index {
            // COL1 differs between rows in every generation (the key times
            // an odd number, plus a shift per generation far larger than
            // the rows), so no write meets another row's value.
            def = def
                .with_unique_index("UIX_COL1", &["COL1"])
                .expect("flexasynch unique index definition is valid");
        }
        if self.ordered_index {
            // As a SQL table with a secondary key: mgmd adds PRIMARY.
            return def
                .with_index("IDX_COL1", &["COL1"])
                .expect("flexasynch index definition is valid");
        }
        // As NDB's flexAsynch creates its tables through the NDB API: the
        // primary key by hash only, no ordered index to keep.
        def.options.hash_only_primary_key = true;
        def
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Phase {
    Insert,
    Read,
    Update,
    Delete,
}

impl Phase {
    fn name(self) -> &'static str {
        match self {
            Phase::Insert => "insert",
            Phase::Read => "read",
            Phase::Update => "update",
            Phase::Delete => "delete",
        }
    }
}

/// What a thread is told to do next.
#[derive(Clone, Copy, Debug)]
struct Command {
    phase: Phase,
    /// The generation the rows hold (reads check it; writes write it).
    generation: u32,
    /// Deletes tolerate missing rows (clean-up of an earlier run).
    cleanup: bool,
}

/// What a thread reports after a phase.
struct PhaseResult {
    ops: u64,
    retries: u64,
    latency: Option<Histogram<u64>>,
    error: Option<String>,
}

/// One phase's runs: per-run rates (ops/s), retries, merged latencies.
type PhaseSamples = (Phase, Vec<f64>, u64, Option<Histogram<u64>>);

/// Per-phase results, for the summary and `--json`.
#[derive(Debug, Serialize)]
pub struct PhaseReport {
    pub phase: &'static str,
    #[serde(flatten)]
    pub summary: Summary,
    pub retries: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_p50_us: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_p99_us: Option<f64>,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub options: Options,
    pub phases: Vec<PhaseReport>,
}

/// The first word of the value column `col` of row `key` holds in
/// generation `generation`.
fn word_of(key: u32, col: u32, generation: u32) -> u32 {
    key.wrapping_mul(31)
        .wrapping_add(col)
        .wrapping_add(generation.wrapping_mul(0x9E37_79B9))
}

/// The value column `col` of row `key` holds in generation `generation`.
fn value_of(opts: &Options, key: u32, col: u32, generation: u32) -> Value {
    if opts.attribute_words == 1 {
        Value::UInt(u64::from(word_of(key, col, generation)))
    } else {
        let mut bytes = Vec::with_capacity(opts.attribute_words as usize * 4);
        expected_bytes(opts, key, col, generation, &mut bytes);
        Value::Bytes(bytes)
    }
}

/// Writes into `out` the canonical bytes of [`value_of`] (an INT UNSIGNED
/// for `-s 1`, else a BINARY of `-s` words): what a read must return.
fn expected_bytes(opts: &Options, key: u32, col: u32, generation: u32, out: &mut Vec<u8>) {
    out.clear();
    let first = word_of(key, col, generation);
    for w in 0..opts.attribute_words {
        out.extend_from_slice(&nth_word(first, w).to_le_bytes());
    }
}

/// Word `w` of a value whose first word is `first` (every value of `-s N`
/// words counts up from its first).
#[inline]
fn nth_word(first: u32, w: u32) -> u32 {
    first.wrapping_add(w)
}

/// Buffers a thread reuses for every read it checks.
#[derive(Default)]
struct ReadBuffers {
    /// Row buffers handed to `read_into` and taken back after the check;
    /// at most one per read in flight.
    rows: Vec<RowBuf>,
    /// The expected bytes of one value.
    expected: Vec<u8>,
    /// Lists of a transaction's reads (key, operation), emptied after the
    /// check; at most one per transaction in flight.
    read_lists: Vec<Vec<(u32, OpId)>>,
    /// Where the value columns sit in a row read (`ValueSpan::of`).
    span: Option<ValueSpan>,
}

impl ReadBuffers {
    /// Keeps a transaction's list of reads, emptied, for a later one.
    fn give_back(&mut self, mut list: Vec<(u32, OpId)>) {
        list.clear();
        self.read_lists.push(list);
    }
}

/// Entry point of `shoal bench flexasynch ARGS`.
pub fn main(args: &[String]) -> Result<(), String> {
    let opts = Options::parse(args)?;
    let report = run(&opts)?;
    if opts.json {
        println!(
            "{}",
            serde_json::to_string(&report).expect("report serializes")
        );
    } else {
        for p in &report.phases {
            println!(
                "{} average: {:.0}/s min: {:.0}/s max: {:.0}/s stddev: {:.0}%",
                p.phase, p.summary.average, p.summary.min, p.summary.max, p.summary.stddev_pct
            );
            if let (Some(p50), Some(p99)) = (p.latency_p50_us, p.latency_p99_us) {
                println!("{} latency p50: {p50:.1}us p99: {p99:.1}us", p.phase);
            }
        }
    }
    Ok(())
}

struct Worker {
    commands: tokio::sync::mpsc::UnboundedSender<Command>,
}

/// Runs the benchmark and returns its figures; progress goes to stderr.
pub fn run(opts: &Options) -> Result<Report, String> {
    let (results_tx, results_rx) = mpsc::channel::<PhaseResult>();
    let mut runtimes = Vec::new();
    let mut workers = Vec::new();
    let mut threads_of = vec![0usize; opts.connections as usize];
    for t in 0..opts.threads {
        threads_of[(t % opts.connections) as usize] += 1;
    }
    // Connect and make sure the table exists (and is empty) first.
    let mut clusters = Vec::new();
    for (c, &n) in threads_of.iter().enumerate() {
        let rt = if n == 1 {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
        } else {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(n)
                .enable_all()
                .build()
        }
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
        let cluster = rt.block_on(Cluster::connect(&opts.connect)).map_err(|e| {
            format!(
                "connection {c}: cannot connect to mgmd at {}: {e}",
                opts.connect
            )
        })?;
        clusters.push(cluster);
        runtimes.push(rt);
    }
    let existed = runtimes[0].block_on(prepare_table(&clusters[0], opts))?;
    for t in 0..opts.threads {
        let c = (t % opts.connections) as usize;
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let cluster = clusters[c].clone();
        let opts = opts.clone();
        let results = results_tx.clone();
        runtimes[c].spawn(worker(cluster, opts, t, rx, results));
        workers.push(Worker { commands: tx });
    }
    // A current_thread runtime only runs its tasks while something blocks
    // on it: park one OS thread in each for the whole run.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let drivers: Vec<_> = runtimes
        .into_iter()
        .map(|rt| {
            let mut stop = stop_rx.clone();
            std::thread::spawn(move || {
                rt.block_on(async move {
                    let _ = stop.wait_for(|s| *s).await;
                });
                rt.shutdown_timeout(Duration::from_secs(1));
            })
        })
        .collect();

    let run_phase =
        |cmd: Command, label: &str| -> Result<(f64, u64, Option<Histogram<u64>>), String> {
            let cpu_before = crate::cpu::CpuSample::now();
            let start = Instant::now();
            for w in &workers {
                w.commands
                    .send(cmd)
                    .map_err(|_| "a benchmark thread stopped".to_string())?;
            }
            let mut ops = 0;
            let mut retries = 0;
            let mut hist: Option<Histogram<u64>> = None;
            let mut first_error = None;
            for _ in 0..workers.len() {
                let r = results_rx
                    .recv()
                    .map_err(|_| "a benchmark thread stopped".to_string())?;
                ops += r.ops;
                retries += r.retries;
                if first_error.is_none() {
                    first_error = r.error;
                }
                if let Some(h) = r.latency {
                    match &mut hist {
                        Some(all) => all.add(&h).expect("histograms have the same bounds"),
                        None => hist = Some(h),
                    }
                }
            }
            let secs = start.elapsed().as_secs_f64();
            if let Some(e) = first_error {
                return Err(format!("{label} failed: {e}"));
            }
            let rate = ops as f64 / secs.max(1e-9);
            let cpu = match (cpu_before, crate::cpu::CpuSample::now()) {
                (Some(a), Some(b)) => format!(" [{}]", a.report_until(&b, ops)),
                _ => String::new(),
            };
            eprintln!(
                "  {label}: {ops} ops in {secs:.2}s = {rate:.0}/s{}{cpu}",
                if retries > 0 {
                    format!(" ({retries} retried)")
                } else {
                    String::new()
                }
            );
            Ok((rate, retries, hist))
        };

    let result = (|| -> Result<Vec<PhaseReport>, String> {
        if existed {
            eprintln!(
                "flexasynch: table {} exists; deleting any rows an earlier run left",
                opts.table_name()
            );
            run_phase(
                Command {
                    phase: Phase::Delete,
                    generation: 0,
                    cleanup: true,
                },
                "cleanup",
            )?;
        }
        let mut samples: Vec<PhaseSamples> =
            [Phase::Insert, Phase::Update, Phase::Delete, Phase::Read]
                .iter()
                .map(|&p| (p, Vec::new(), 0, None))
                .collect();
        let mut record =
            |phase: Phase, (rate, retries, hist): (f64, u64, Option<Histogram<u64>>)| {
                let entry = samples
                    .iter_mut()
                    .find(|s| s.0 == phase)
                    .expect("every phase has an entry");
                entry.1.push(rate);
                entry.2 += retries;
                if let Some(h) = hist {
                    match &mut entry.3 {
                        Some(all) => all.add(&h).expect("histograms have the same bounds"),
                        None => entry.3 = Some(h),
                    }
                }
            };
        let rows = u64::from(opts.threads) * u64::from(opts.rows_per_thread());
        for l in 0..opts.loops {
            eprintln!(
                "flexasynch: loop {}/{} ({} rows, {} threads x {} parallel x {} ops)",
                l + 1,
                opts.loops,
                rows,
                opts.threads,
                opts.parallel,
                opts.ops_per_trans
            );
            let g = l * 2 + 1;
            let read = |g: u32| Command {
                phase: Phase::Read,
                generation: g,
                cleanup: false,
            };
            record(
                Phase::Insert,
                run_phase(
                    Command {
                        phase: Phase::Insert,
                        generation: g,
                        cleanup: false,
                    },
                    "insert",
                )?,
            );
            for _ in 0..=opts.extra_reads {
                record(Phase::Read, run_phase(read(g), "read")?);
            }
            record(
                Phase::Update,
                run_phase(
                    Command {
                        phase: Phase::Update,
                        generation: g + 1,
                        cleanup: false,
                    },
                    "update",
                )?,
            );
            for _ in 0..=opts.extra_reads {
                record(Phase::Read, run_phase(read(g + 1), "read")?);
            }
            if l + 1 < opts.loops || !opts.keep {
                record(
                    Phase::Delete,
                    run_phase(
                        Command {
                            phase: Phase::Delete,
                            generation: 0,
                            cleanup: false,
                        },
                        "delete",
                    )?,
                );
            }
        }
        Ok(samples
            .into_iter()
            .filter(|s| !s.1.is_empty())
            .map(|(phase, rates, retries, hist)| PhaseReport {
                phase: phase.name(),
                summary: summarize(&rates),
                retries,
                latency_p50_us: hist
                    .as_ref()
                    .map(|h| h.value_at_quantile(0.50) as f64 / 1000.0),
                latency_p99_us: hist
                    .as_ref()
                    .map(|h| h.value_at_quantile(0.99) as f64 / 1000.0),
            })
            .collect())
    })();
    drop(workers);
    let _ = stop_tx.send(true);
    for d in drivers {
        let _ = d.join();
    }
    Ok(Report {
        options: opts.clone(),
        phases: result?,
    })
}

/// Creates the table if it is missing; returns whether it already existed
/// (it may then hold rows of an interrupted run).
async fn prepare_table(cluster: &Cluster, opts: &Options) -> Result<bool, String> {
    let want = opts.table_def();
    match cluster.table(&want.name).await {
        Ok(table) => {
            let same =
                table.def().columns == want.columns && table.def().primary_key == want.primary_key;
            if !same {
                return Err(format!(
                    "table {} exists with another definition; drop it first",
                    want.name
                ));
            }
            Ok(true)
        }
        Err(e) if e.code == ErrorCode::NoSuchTable => {
            match cluster.create_table(want.clone()).await {
                Ok(_) => Ok(false),
                // Another flexasynch created it meanwhile.
                Err(e) if e.code == ErrorCode::TableExists => Ok(true),
                Err(e) => Err(format!("cannot create table {}: {e}", want.name)),
            }
        }
        Err(e) => Err(format!("cannot look up table {}: {e}", want.name)),
    }
}

async fn worker(
    cluster: Cluster,
    opts: Options,
    thread: u32,
    mut commands: tokio::sync::mpsc::UnboundedReceiver<Command>,
    results: mpsc::Sender<PhaseResult>,
) {
    let record = match cluster.table(&opts.table_name()).await {
        Ok(t) => t.full_record(),
        Err(e) => {
            // Report the failure on the first command.
            let msg = format!("thread {thread}: cannot open table: {e}");
            while commands.recv().await.is_some() {
                let _ = results.send(PhaseResult {
                    ops: 0,
                    retries: 0,
                    latency: None,
                    error: Some(msg.clone()),
                });
            }
            return;
        }
    };
    let mut buffers = ReadBuffers {
        span: ValueSpan::of(&record, &opts),
        ..ReadBuffers::default()
    };
    while let Some(cmd) = commands.recv().await {
        let result = run_thread_phase(&cluster, &record, &opts, thread, cmd, &mut buffers).await;
        if results.send(result).is_err() {
            return;
        }
    }
}

/// One thread's share of one phase: `-o` rounds of `-p` transactions.
async fn run_thread_phase(
    cluster: &Cluster,
    record: &Record,
    opts: &Options,
    thread: u32,
    cmd: Command,
    buffers: &mut ReadBuffers,
) -> PhaseResult {
    let mut out = PhaseResult {
        ops: 0,
        retries: 0,
        latency: opts.latency.then(|| {
            Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid histogram bounds")
        }),
        error: None,
    };
    let first_key = thread * opts.rows_per_thread();
    let per_round = opts.parallel * opts.ops_per_trans;
    for round in 0..opts.rounds {
        let round_key = first_key + round * per_round;
        // Like flexAsynch: prepare `-p` transactions, send them all, then
        // poll for all the answers (`Transaction::execute_all`).
        let start = Instant::now();
        let mut txns = Vec::with_capacity(opts.parallel as usize);
        let mut reads = Vec::with_capacity(opts.parallel as usize);
        for p in 0..opts.parallel {
            let first = round_key + p * opts.ops_per_trans;
            match prepare(cluster, record, opts, cmd, first, cmd.cleanup, buffers) {
                Ok((tx, r)) => {
                    txns.push(tx);
                    reads.push(r);
                }
                Err(e) => {
                    out.error.get_or_insert(format!("keys from {first}: {e}"));
                }
            }
        }
        let results = Transaction::execute_all(&mut txns, ExecType::Commit).await;
        let elapsed = start.elapsed();
        for (p, (result, (tx, r))) in results
            .into_iter()
            .zip(txns.iter_mut().zip(&reads))
            .enumerate()
        {
            let first = round_key + p as u32 * opts.ops_per_trans;
            let outcome = match result.and_then(|()| verify(tx, r, opts, cmd, buffers)) {
                Ok(()) => Ok((0, elapsed)),
                Err(e) if e.class() != ErrorClass::Permanent => {
                    // Retry this one alone (temporary error or unknown outcome).
                    let maybe_done = cmd.cleanup || e.class() == ErrorClass::UnknownResult;
                    run_transaction(cluster, record, opts, cmd, first, maybe_done, buffers)
                        .await
                        .map(|(retries, t)| (retries + 1, t))
                }
                Err(e) => Err(format!("keys {first}..{}: {e}", first + opts.ops_per_trans)),
            };
            match outcome {
                Ok((retries, elapsed)) => {
                    out.ops += u64::from(opts.ops_per_trans);
                    out.retries += retries;
                    if let Some(h) = &mut out.latency {
                        let _ = h.record(elapsed.as_nanos().max(1) as u64);
                    }
                }
                Err(e) => {
                    out.error.get_or_insert(e);
                }
            }
        }
        for list in reads {
            buffers.give_back(list);
        }
        if out.error.is_some() {
            break;
        }
    }
    out
}

/// Temporary errors in a row before the run gives up on a transaction.
const RETRIES_MAX: u64 = 100;

/// Runs one transaction of `-c` operations on keys `first..first + c`,
/// retrying temporary errors. Returns the retries and the latency of the
/// attempt that succeeded.
async fn run_transaction(
    cluster: &Cluster,
    record: &Record,
    opts: &Options,
    cmd: Command,
    first: u32,
    // After an unknown outcome the writes may have happened: tolerate it.
    mut maybe_done: bool,
    buffers: &mut ReadBuffers,
) -> Result<(u64, Duration), String> {
    let mut retries = 0;
    loop {
        let start = Instant::now();
        match attempt(cluster, record, opts, cmd, first, maybe_done, buffers).await {
            Ok(()) => return Ok((retries, start.elapsed())),
            Err(e) if e.class() == ErrorClass::Temporary && retries < RETRIES_MAX => retries += 1,
            Err(e) if e.class() == ErrorClass::UnknownResult && retries < RETRIES_MAX => {
                retries += 1;
                maybe_done = true;
            }
            Err(e) => return Err(format!("keys {first}..{}: {e}", first + opts.ops_per_trans)),
        }
    }
}

async fn attempt(
    cluster: &Cluster,
    record: &Record,
    opts: &Options,
    cmd: Command,
    first: u32,
    maybe_done: bool,
    buffers: &mut ReadBuffers,
) -> Result<(), ShoalError> {
    let (mut tx, reads) = prepare(cluster, record, opts, cmd, first, maybe_done, buffers)?;
    tx.execute(ExecType::Commit).await?;
    let checked = verify(&mut tx, &reads, opts, cmd, buffers);
    buffers.give_back(reads);
    checked
}

/// A transaction with the `-c` operations on keys `first..first + c`
/// queued, and the reads to check afterwards.
fn prepare(
    cluster: &Cluster,
    record: &Record,
    opts: &Options,
    cmd: Command,
    first: u32,
    maybe_done: bool,
    buffers: &mut ReadBuffers,
) -> Result<(Transaction, Vec<(u32, OpId)>), ShoalError> {
    let mut tx = cluster.transaction();
    tx.set_durable(opts.durable);
    let mut reads = buffers.read_lists.pop().unwrap_or_default();
    let lock = if opts.dirty_reads {
        LockMode::CommittedRead
    } else {
        LockMode::Shared
    };
    for key in first..first + opts.ops_per_trans {
        let pk = [Value::UInt(u64::from(key))];
        let op = match cmd.phase {
            Phase::Insert | Phase::Update => {
                let mut values = Vec::with_capacity(opts.attributes as usize);
                values.push(Value::UInt(u64::from(key)));
                for col in 1..opts.attributes {
                    values.push(value_of(opts, key, col, cmd.generation));
                }
                if cmd.phase == Phase::Insert {
                    tx.insert(record, &values)?
                } else {
                    tx.update(record, &values)?
                }
            }
            Phase::Delete => tx.delete(record, &pk)?,
            Phase::Read => {
                let buf = buffers.rows.pop().unwrap_or_default();
                let op = tx.read_into(record, &pk, lock, buf)?;
                reads.push((key, op));
                op
            }
        };
        if maybe_done && cmd.phase != Phase::Read {
            tx.ignore_error(op);
        }
    }
    Ok((tx, reads))
}

/// Checks that every read returned the values the phase wrote, and takes
/// the row buffers back for the next transactions.
fn verify(
    tx: &mut Transaction,
    reads: &[(u32, OpId)],
    opts: &Options,
    cmd: Command,
    buffers: &mut ReadBuffers,
) -> Result<(), ShoalError> {
    for &(key, op) in reads {
        let row = tx.take_row(op).ok_or_else(|| {
            ShoalError::with_detail(
                ErrorCode::Internal,
                format!("read of key {key} returned no row"),
            )
        })?;
        let checked = check_row(&row, key, opts, cmd, buffers.span, &mut buffers.expected);
        buffers.rows.push(row);
        checked?;
    }
    Ok(())
}

/// Where a thread finds the value columns in a row buffer laid out by
/// its record: when they are fixed-size slots one after another (the
/// table has only fixed-size columns), their bytes are one span, checked
/// against the expected bytes of every column at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ValueSpan {
    /// Bytes of the null bitmap (before every slot).
    null_bytes: usize,
    start: usize,
    len: usize,
}

impl ValueSpan {
    fn of(record: &Record, opts: &Options) -> Option<ValueSpan> {
        let width = 4 * opts.attribute_words as usize;
        let def = record.table().def();
        let start = record.offset_of(1)?;
        for col in 1..opts.attributes as u16 {
            let fixed = def.columns.get(usize::from(col))?.ty.fixed_size() == Some(width);
            if !fixed || record.offset_of(col)? != start + usize::from(col - 1) * width {
                return None;
            }
        }
        // Every column's null bit must lie in the bytes checked for none.
        let null_bytes = (opts.attributes as usize).div_ceil(8);
        for col in 0..opts.attributes as u16 {
            if record.null_bit_of(col)? >= 8 * null_bytes {
                return None;
            }
        }
        (record.offset_of(0)? >= null_bytes).then_some(ValueSpan {
            null_bytes,
            start,
            len: width * (opts.attributes as usize - 1),
        })
    }
}

/// Compares every value column of the row of `key` with the bytes the
/// phase wrote, without decoding them: as one span when `span` says
/// where (no NULL anywhere, then every byte), else column by column.
fn check_row(
    row: &RowBuf,
    key: u32,
    opts: &Options,
    cmd: Command,
    span: Option<ValueSpan>,
    want: &mut Vec<u8>,
) -> Result<(), ShoalError> {
    if let Some(span) = span {
        let bytes = row.as_bytes();
        let no_nulls = bytes
            .get(..span.null_bytes)
            .is_some_and(|b| b.iter().all(|&b| b == 0));
        let values = bytes.get(span.start..span.start + span.len).unwrap_or(&[]);
        // Column `c` (from 1) holds `words` words counting up from
        // `word_of(key, c)`, as `expected_bytes` writes them. No early
        // exit, so the loops compile to straight-line compares.
        let words = opts.attribute_words as usize;
        let mut same = no_nulls && values.len() == span.len;
        let le = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        if words == 1 {
            for (c, word) in (1u32..).zip(values.chunks_exact(4)) {
                same &= le(word) == word_of(key, c, cmd.generation);
            }
        } else {
            for (c, column) in (1u32..).zip(values.chunks_exact(4 * words)) {
                let first = word_of(key, c, cmd.generation);
                for (w, word) in (0u32..).zip(column.chunks_exact(4)) {
                    same &= le(word) == nth_word(first, w);
                }
            }
        }
        if same {
            return Ok(());
        }
        // Something differs: the column by column check names it.
    }
    for col in 1..opts.attributes {
        let same = if opts.attribute_words == 1 {
            // One word: compared as a number (a 4-byte memcmp call costs
            // more than the comparison).
            let word = word_of(key, col, cmd.generation);
            row.get_raw(col as u16)?
                .and_then(|b| <[u8; 4]>::try_from(b).ok())
                .is_some_and(|b| u32::from_le_bytes(b) == word)
        } else {
            expected_bytes(opts, key, col, cmd.generation, want);
            row.get_raw(col as u16)? == Some(want.as_slice())
        };
        if !same {
            let got = row.get_idx(col as u16);
            let want = value_of(opts, key, col, cmd.generation);
            return Err(ShoalError::with_detail(
                ErrorCode::Internal,
                format!("key {key} COL{col}: read {got:?}, expected {want:?} (wrong data; the benchmark stops)"),
            ));
        }
    }
    if span.is_some() {
        return Err(ShoalError::with_detail(
            ErrorCode::Internal,
            format!("key {key}: the row's bytes differ from those written, but no column does (wrong data; the benchmark stops)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn parses_ndb_flags() {
        let o = Options::parse(&args(
            "-t 2 -p 64 -c 4 -a 2 -s 1 -o 10 -l 3 -r 2 -con 2 -temp -ndbrecord -dirty --json",
        ))
        .unwrap();
        assert_eq!(
            (o.threads, o.parallel, o.ops_per_trans, o.attributes),
            (2, 64, 4, 2)
        );
        assert_eq!(
            (
                o.attribute_words,
                o.rounds,
                o.loops,
                o.extra_reads,
                o.connections
            ),
            (1, 10, 3, 2, 2)
        );
        assert!(o.dirty_reads && o.json && o.temp && !o.durable);
        assert_eq!(o.connect, "127.0.0.1:1186");
        // A table that is not logged has its own name (and definition).
        assert_eq!(o.table_name(), "FLEXASYNCH_A2_S1_TEMP");
        assert!(o.table_def().options.no_logging);
        let logged = Options::parse(&args("-a 2 -durable")).unwrap();
        assert!(logged.durable && !logged.temp);
        assert_eq!(logged.table_name(), "FLEXASYNCH_A2_S1");
        assert!(!logged.table_def().options.no_logging);
        assert!(logged.table_def().options.hash_only_primary_key);
        assert!(logged.table_def().indexes.is_empty());
        let indexed = Options::parse(&args("-a 2 -temp --ordered-index")).unwrap();
        assert_eq!(indexed.table_name(), "FLEXASYNCH_A2_S1_TEMP_OI");
        let def = indexed.table_def();
        assert!(!def.options.hash_only_primary_key);
        assert_eq!(def.index_number("IDX_COL1"), Some(0));
        assert_eq!(def.indexes[0].columns, vec![1]);
        let unique = Options::parse(&args("-a 2 -temp --unique-index")).unwrap();
        assert_eq!(unique.table_name(), "FLEXASYNCH_A2_S1_TEMP_UI");
        assert_eq!(unique.table_def().unique_indexes[0].columns, vec![1]);
    }

    #[test]
    fn refuses_bad_flags() {
        assert!(Options::parse(&args("-t")).is_err());
        assert!(Options::parse(&args("-t x")).is_err());
        assert!(Options::parse(&args("-t 0")).is_err());
        assert!(Options::parse(&args("-bogus")).is_err());
        assert!(Options::parse(&args("-a 1")).is_err());
        assert!(Options::parse(&args("-t 1 -con 2")).is_err());
        assert!(
            Options::parse(&args("-t 1000 -o 100000 -p 1000")).is_err(),
            "too many rows for a u32 key"
        );
        assert!(
            Options::parse(&args("-a 100 -s 100")).is_err(),
            "row too large"
        );
    }

    #[test]
    fn table_shapes() {
        let o = Options::parse(&args("-a 3 -s 4")).unwrap();
        let def = o.table_def();
        assert_eq!(def.columns.len(), 3);
        assert_eq!(def.columns[1].ty, ColumnType::Binary(16));
        assert!(matches!(value_of(&o, 7, 1, 1), Value::Bytes(b) if b.len() == 16));
        assert_ne!(
            value_of(&o, 7, 1, 1),
            value_of(&o, 7, 1, 2),
            "generations differ"
        );
    }

    #[test]
    fn expected_bytes_are_the_encoding_of_the_values_written() {
        for flags in ["-a 4 -s 1", "-a 4 -s 3"] {
            let o = Options::parse(&args(flags)).unwrap();
            let def = o.table_def();
            let mut want = Vec::new();
            for (key, col, generation) in [(0, 1, 1), (7, 3, 2), (u32::MAX, 2, 9)] {
                let mut encoded = Vec::new();
                let cdef = &def.columns[col as usize];
                shoal_types::value::encode_value(
                    cdef,
                    &value_of(&o, key, col, generation),
                    &mut encoded,
                )
                .unwrap();
                expected_bytes(&o, key, col, generation, &mut want);
                assert_eq!(want, encoded, "{flags}: key {key} col {col}");
            }
        }
    }

    #[test]
    fn a_row_is_checked_in_one_span_and_any_wrong_value_is_named() {
        for flags in ["-a 25 -s 1", "-a 4 -s 3"] {
            let o = Options::parse(&args(flags)).unwrap();
            let table = shoal_client::Table::new(o.table_def());
            let record = table.full_record();
            let span = ValueSpan::of(&record, &o);
            assert!(span.is_some(), "{flags}");
            let cmd = Command {
                phase: Phase::Read,
                generation: 3,
                cleanup: false,
            };
            let key = 77;
            // The answer a read of `key` gets, with `wrong` in column `bad`.
            let answer = |bad: Option<(u32, Value)>| {
                let mut values = vec![Value::UInt(u64::from(key))];
                for col in 1..o.attributes {
                    values.push(match &bad {
                        Some((c, v)) if *c == col => v.clone(),
                        _ => value_of(&o, key, col, cmd.generation),
                    });
                }
                let by_id: Vec<(u16, &Value)> = (0u16..).zip(&values).collect();
                let mut out = Vec::new();
                shoal_types::layout::encode_attrs(table.def(), &by_id, &mut out).unwrap();
                out
            };
            let mut row = RowBuf::new();
            let mut want = Vec::new();
            row.fill(&record, &answer(None)).unwrap();
            for span in [span, None] {
                check_row(&row, key, &o, cmd, span, &mut want).expect(flags);
            }
            // The row of another key or generation fails.
            check_row(&row, key + 1, &o, cmd, span, &mut want).unwrap_err();
            let later = Command {
                generation: 4,
                ..cmd
            };
            check_row(&row, key, &o, later, span, &mut want).unwrap_err();
            // A wrong value or a NULL in any column is named.
            for col in 1..o.attributes {
                for wrong in [value_of(&o, key + 1, col, cmd.generation), Value::Null] {
                    row.fill(&record, &answer(Some((col, wrong.clone()))))
                        .unwrap();
                    for span in [span, None] {
                        let e = check_row(&row, key, &o, cmd, span, &mut want).unwrap_err();
                        assert!(
                            e.detail.contains(&format!("COL{col}:")),
                            "{flags} {wrong:?}: {e}"
                        );
                    }
                }
            }
        }
    }
}
