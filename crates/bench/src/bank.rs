//! `shoal bench bank`: NDB's test bank workload, extended to prove what a
//! node failure must not break. Accounts spread over every fragment; tasks
//! move money between random pairs of accounts (read both with exclusive
//! locks, then update both and insert a history row under the attempt's
//! unique id, and commit), counting each attempt as committed, aborted or
//! unknown and starting a new attempt (new id) after a temporary error. A
//! checker sums every balance in one locking transaction during the run
//! (`--check-every-secs`) and at the end. Then the history is audited
//! ([`history`]): every committed id's row is there and right, no aborted
//! id left one, unknown ones are resolved, and every account's balance is
//! what the history says. The command exits non-zero if the total changed
//! or the audit failed. `--timeline-ms` records throughput per step
//! ([`timeline`]), so a failover shows as a dip.
//!
//! ```text
//! shoal bench bank --accounts 1000 --threads 8 --duration-secs 10 --check-every-secs 2 --timeline-ms 100
//! ```

pub mod history;
mod report;
pub mod timeline;
mod transfer;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use shoal_client::{
    Cluster, ColumnDef, ColumnType, ErrorClass, ErrorCode, ExecType, Record, TableDef, Transaction,
    Value,
};

use history::{Audit, THREADS_MAX};
pub use report::Report;
use timeline::{Counters, STEP_MS_MIN};
use transfer::{balances, transfer_task};

const TABLE: &str = "BANK_ACCOUNTS";
const HISTORY_TABLE: &str = "BANK_HISTORY";
/// Every account starts with this balance.
const INITIAL_BALANCE: i64 = 1_000;
/// Accounts created per batch at set-up.
const SETUP_BATCH: u64 = 500;

#[derive(Clone, Debug)]
pub struct Options {
    pub accounts: u64,
    pub threads: u32,
    pub duration: Duration,
    pub check_every: Option<Duration>,
    /// Step of the timeline; `None`: no timeline, a progress line a second.
    pub timeline: Option<Duration>,
    /// How long the checker and the audit retry temporary errors.
    pub retry: Duration,
    pub connect: String,
    pub json: bool,
    /// Only sum the balances of the existing accounts table and check the
    /// total (after a restart: nothing committed may be lost).
    pub check_only: bool,
}

const USAGE: &str = "usage: shoal bench bank [--accounts N] [--threads T] [--duration-secs S] \
[--check-every-secs C] [--timeline-ms M] [--retry-secs R] [--connect HOST:PORT] [--json]
  --accounts N          accounts (default 1000)
  --threads T           transfer tasks (default 8)
  --duration-secs S     how long transfers run (default 10)
  --check-every-secs C  also check the total every C seconds during the run
  --timeline-ms M       print transfers per step of M ms (at least 10) to stderr,
                        and add the steps to the JSON report
  --retry-secs R        how long the checker and the history audit retry
                        temporary errors before failing (default 60)
  --connect HOST:PORT   mgmd (default 127.0.0.1:1186)
  --json                print the result as JSON
  --check-only          transfer nothing and create nothing: sum the balances
                        of the existing accounts 0..N-1 (N from --accounts) and
                        exit non-zero if the table or an account is missing or
                        the total is not N x 1000
Each committed transfer adds a row to BANK_HISTORY, kept in data memory.";

impl Options {
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let mut o = Options {
            accounts: 1000,
            threads: 8,
            duration: Duration::from_secs(10),
            check_every: None,
            timeline: None,
            retry: Duration::from_secs(60),
            connect: "127.0.0.1:1186".into(),
            json: false,
            check_only: false,
        };
        let mut it = args.iter();
        while let Some(flag) = it.next() {
            let mut value = |name: &str| -> Result<&String, String> {
                it.next()
                    .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
            };
            let number = |name: &str, v: &String| -> Result<u64, String> {
                v.parse()
                    .map_err(|_| format!("{name}: {v:?} is not a number\n{USAGE}"))
            };
            match flag.as_str() {
                "--accounts" => o.accounts = number(flag, value(flag)?)?,
                "--threads" => {
                    o.threads = number(flag, value(flag)?)?
                        .try_into()
                        .map_err(|_| format!("--threads: too many\n{USAGE}"))?
                }
                "--duration-secs" => o.duration = Duration::from_secs(number(flag, value(flag)?)?),
                "--check-every-secs" => {
                    o.check_every = Some(Duration::from_secs(number(flag, value(flag)?)?))
                }
                "--timeline-ms" => {
                    let ms = number(flag, value(flag)?)?;
                    if ms < STEP_MS_MIN {
                        return Err(format!("--timeline-ms: at least {STEP_MS_MIN}\n{USAGE}"));
                    }
                    o.timeline = Some(Duration::from_millis(ms));
                }
                "--retry-secs" => o.retry = Duration::from_secs(number(flag, value(flag)?)?),
                "--connect" => o.connect = value(flag)?.clone(),
                "--json" => o.json = true,
                "--check-only" => o.check_only = true,
                "-h" | "--help" => return Err(USAGE.into()),
                other => return Err(format!("unknown flag {other:?}\n{USAGE}")),
            }
        }
        if o.accounts < 2 || o.threads == 0 {
            return Err(format!("need at least 2 accounts and 1 thread\n{USAGE}"));
        }
        // Attempts are logged with 32-bit account numbers, and the task
        // number is the high part of each history id.
        if o.accounts > u64::from(u32::MAX) || o.threads >= THREADS_MAX {
            return Err(format!(
                "at most {} accounts and {} threads\n{USAGE}",
                u32::MAX,
                THREADS_MAX - 1
            ));
        }
        Ok(o)
    }
}
pub fn main(args: &[String]) -> Result<(), String> {
    let opts = Options::parse(args)?;
    if opts.check_only {
        return check_only(&opts);
    }
    let report = run(&opts)?;
    if opts.json {
        println!("{}", serde_json::to_string(&report).expect("serializes"));
    } else {
        report::print_text(&report);
    }
    match report.failure() {
        Some(why) => Err(why),
        None => Ok(()),
    }
}
pub fn run(opts: &Options) -> Result<Report, String> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    rt.block_on(run_async(opts))
}

/// `--check-only`: the existing accounts' total, checked.
fn check_only(opts: &Options) -> Result<(), String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    rt.block_on(async {
        let cluster = Cluster::connect(&opts.connect)
            .await
            .map_err(|e| format!("cannot connect to mgmd at {}: {e}", opts.connect))?;
        let accounts = cluster
            .table(TABLE)
            .await
            .map_err(|e| format!("{TABLE}: {e} (run the bank without --check-only first)"))?
            .full_record();
        let total: i64 = balances(&cluster, &accounts, opts.accounts, opts.retry)
            .await?
            .iter()
            .sum();
        cluster.close().await;
        let expected = INITIAL_BALANCE * opts.accounts as i64;
        if opts.json {
            println!(
                "{}",
                serde_json::json!({"accounts": opts.accounts, "total": total, "expected_total": expected, "ok": total == expected})
            );
        } else {
            println!(
                "bank: {} accounts, total {total} (expected {expected}): {}",
                opts.accounts,
                if total == expected { "ok" } else { "WRONG" }
            );
        }
        if total == expected {
            Ok(())
        } else {
            Err(format!(
                "the total of {} accounts is {total}, expected {expected}: money was lost or made",
                opts.accounts
            ))
        }
    })
}

/// The two tables, as records of all their columns.
#[derive(Clone)]
struct Tables {
    accounts: Record,
    history: Record,
}

async fn run_async(opts: &Options) -> Result<Report, String> {
    let cluster = Cluster::connect(&opts.connect)
        .await
        .map_err(|e| format!("cannot connect to mgmd at {}: {e}", opts.connect))?;
    let tables = set_up(&cluster, opts.accounts, opts.retry).await?;
    let expected_total = INITIAL_BALANCE * opts.accounts as i64;
    eprintln!(
        "bank: {} accounts, {} threads, {:.0} s",
        opts.accounts,
        opts.threads,
        opts.duration.as_secs_f64()
    );

    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let started = Instant::now();
    let mut workers = Vec::new();
    for thread in 0..opts.threads {
        workers.push(tokio::spawn(transfer_task(
            cluster.clone(),
            tables.clone(),
            thread,
            opts.accounts,
            stop.clone(),
            counters.clone(),
        )));
    }
    let ticker = opts.timeline.map(|every| {
        let (done, done_rx) = tokio::sync::oneshot::channel();
        let task = tokio::spawn(timeline::record(counters.clone(), started, every, done_rx));
        (done, task)
    });

    let mut totals = Vec::new();
    let mut check_seconds = 0.0;
    let mut last_check = Instant::now();
    let mut last_report = (Instant::now(), 0u64, 0u64);
    while started.elapsed() < opts.duration {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if workers.iter().any(|w| w.is_finished()) {
            break;
        }
        if ticker.is_none() && last_report.0.elapsed() >= Duration::from_secs(1) {
            let (t, a) = (
                counters.transfers.load(Ordering::Relaxed),
                counters.aborts.load(Ordering::Relaxed),
            );
            let dt = last_report.0.elapsed().as_secs_f64();
            eprintln!(
                "bank: {:5.1} s: {:.0} transfers/s, {:.0} aborts/s",
                started.elapsed().as_secs_f64(),
                (t - last_report.1) as f64 / dt,
                (a - last_report.2) as f64 / dt
            );
            last_report = (Instant::now(), t, a);
        }
        if let Some(every) = opts.check_every {
            if last_check.elapsed() >= every {
                let check_began = Instant::now();
                let total: i64 = balances(&cluster, &tables.accounts, opts.accounts, opts.retry)
                    .await
                    .map_err(|e| format!("{e} ({})", counters.describe()))?
                    .iter()
                    .sum();
                check_seconds += check_began.elapsed().as_secs_f64();
                eprintln!("bank: check: total {total} (expected {expected_total})");
                totals.push(total);
                last_check = Instant::now();
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let seconds = started.elapsed().as_secs_f64();
    let mut logs = Vec::with_capacity(workers.len());
    for w in workers {
        logs.push(
            w.await
                .map_err(|e| format!("a transfer task panicked: {e}"))??,
        );
    }
    let timeline = match ticker {
        Some((done, task)) => {
            let _ = done.send(());
            task.await
                .map_err(|e| format!("the timeline task panicked: {e}"))?
        }
        None => Vec::new(),
    };

    // Past this point a failure loses the report: say what the run did.
    let with_counts = |e: String| format!("{e} ({})", counters.describe());
    // Shared locks on every account: this waits for any transaction still
    // in flight on the data nodes (an unknown outcome), so the history read
    // next sees every transfer in its final state.
    let final_balances = balances(&cluster, &tables.accounts, opts.accounts, opts.retry)
        .await
        .map_err(with_counts)?;
    totals.push(final_balances.iter().sum());
    let mut audit = Audit::new(opts.accounts);
    history::verify(&cluster, &tables.history, &logs, &mut audit, opts.retry)
        .await
        .map_err(with_counts)?;
    audit.check_balances(INITIAL_BALANCE, &final_balances);
    cluster.close().await;

    let (transfers, aborts) = (audit.committed, audit.aborted);
    let mut report = Report {
        accounts: opts.accounts,
        threads: opts.threads,
        seconds,
        transfers,
        transfers_per_sec: transfers as f64 / seconds,
        transfers_per_sec_excluding_checks: transfers as f64
            / (seconds - check_seconds).max(seconds / 1000.0).max(1e-9),
        check_seconds,
        aborts,
        aborts_per_sec: aborts as f64 / seconds,
        checks: totals.len() as u64,
        expected_total,
        totals,
        committed: audit.committed,
        aborted: audit.aborted,
        unknown: audit.unknown,
        unknown_resolved_committed: audit.unknown_resolved_committed,
        unknown_resolved_aborted: audit.unknown_resolved_aborted,
        history_rows: audit.rows_found,
        history_verified: audit.history_verified(),
        balances_verified: audit.balances_verified(),
        problems: audit.problems,
        timeline,
        ok: false,
    };
    report.judge();
    Ok(report)
}

/// (Re)creates the accounts table with every balance at the start value,
/// and an empty history table.
async fn set_up(cluster: &Cluster, accounts: u64, retry: Duration) -> Result<Tables, String> {
    for table in [TABLE, HISTORY_TABLE] {
        match cluster.drop_table(table).await {
            Ok(()) => {}
            Err(e) if e.code == ErrorCode::NoSuchTable => {}
            Err(e) => return Err(format!("dropping the old {table}: {e}")),
        }
    }
    let unsigned = ColumnType::BigInt { unsigned: true };
    let signed = ColumnType::BigInt { unsigned: false };
    let accounts_def = TableDef::new(
        TABLE,
        vec![
            ColumnDef::new("id", unsigned),
            ColumnDef::new("balance", signed),
        ],
        &["id"],
    )
    .map_err(|e| e.to_string())?;
    let history_def = TableDef::new(
        HISTORY_TABLE,
        vec![
            ColumnDef::new("id", unsigned),
            ColumnDef::new("from_account", unsigned),
            ColumnDef::new("to_account", unsigned),
            ColumnDef::new("amount", signed),
        ],
        &["id"],
    )
    .map_err(|e| e.to_string())?;
    let rec = cluster
        .create_table(accounts_def)
        .await
        .map_err(|e| format!("creating {TABLE}: {e}"))?
        .full_record();
    let history = cluster
        .create_table(history_def)
        .await
        .map_err(|e| format!("creating {HISTORY_TABLE}: {e}"))?
        .full_record();
    // Each account is written (an upsert: nothing else writes the new
    // table yet, so a repeat of a write whose outcome was lost does no
    // harm); temporary errors and unknown outcomes (a data node failed)
    // are retried for up to `retry`.
    let deadline = Instant::now() + retry;
    let mut first = 0;
    while first < accounts {
        let last = (first + SETUP_BATCH).min(accounts);
        let mut todo: Vec<u64> = (first..last).collect();
        while !todo.is_empty() {
            let mut txns: Vec<Transaction> = todo
                .iter()
                .map(|&id| {
                    let mut tx = cluster.transaction();
                    tx.write(&rec, &[Value::UInt(id), Value::Int(INITIAL_BALANCE)])
                        .expect("values fit");
                    tx
                })
                .collect();
            let results = Transaction::execute_all(&mut txns, ExecType::Commit).await;
            let mut again = Vec::new();
            for (id, r) in todo.iter().zip(results) {
                match r {
                    Ok(_) => {}
                    Err(e) if e.class() != ErrorClass::Permanent && Instant::now() < deadline => {
                        again.push(*id)
                    }
                    Err(e) => return Err(format!("creating account {id}: {e}")),
                }
            }
            if !again.is_empty() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            todo = again;
        }
        first = last;
    }
    Ok(Tables {
        accounts: rec,
        history,
    })
}
#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn options_parse_and_refuse() {
        let o = Options::parse(&args("--timeline-ms 100 --retry-secs 5 --threads 3")).unwrap();
        assert_eq!(o.timeline, Some(Duration::from_millis(100)));
        assert_eq!(o.retry, Duration::from_secs(5));
        assert_eq!(o.threads, 3);
        let o = Options::parse(&[]).unwrap();
        assert_eq!((o.timeline, o.retry), (None, Duration::from_secs(60)));
        for bad in [
            "--timeline-ms 5",
            "--threads 0",
            "--accounts 1",
            "--accounts 4294967296",
            "--threads 16777216",
            "--threads 4294967296",
            "--frobnicate",
        ] {
            assert!(Options::parse(&args(bad)).is_err(), "{bad}");
        }
    }
}
