//! `shoal bench bank`: NDB's test bank workload. Accounts spread over every
//! fragment; threads move money between random pairs of accounts (read both
//! with exclusive locks, update both, commit), retrying temporary errors;
//! a checker sums every balance in one locking transaction (a consistent
//! snapshot) during the run (`--check-every-secs`) and at the end. The total
//! never changes if transactions are atomic and serializable; the command
//! exits non-zero if it does.
//!
//! ```text
//! shoal bench bank --accounts 1000 --threads 8 --duration-secs 10 --check-every-secs 2
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;
use shoal_client::{
    Cluster, ColumnDef, ColumnType, ErrorClass, ErrorCode, ExecType, LockMode, Record, ShoalError,
    TableDef, Transaction, Value,
};

const TABLE: &str = "BANK_ACCOUNTS";
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
    pub connect: String,
    pub json: bool,
}

const USAGE: &str = "usage: shoal bench bank [--accounts N] [--threads T] [--duration-secs S] \
[--check-every-secs C] [--connect HOST:PORT] [--json]
  --accounts N          accounts (default 1000)
  --threads T           transfer tasks (default 8)
  --duration-secs S     how long transfers run (default 10)
  --check-every-secs C  also check the total every C seconds during the run
  --connect HOST:PORT   mgmd (default 127.0.0.1:1186)
  --json                print the result as JSON";

impl Options {
    pub fn parse(args: &[String]) -> Result<Options, String> {
        let mut o = Options {
            accounts: 1000,
            threads: 8,
            duration: Duration::from_secs(10),
            check_every: None,
            connect: "127.0.0.1:1186".into(),
            json: false,
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
                "--threads" => o.threads = number(flag, value(flag)?)? as u32,
                "--duration-secs" => o.duration = Duration::from_secs(number(flag, value(flag)?)?),
                "--check-every-secs" => {
                    o.check_every = Some(Duration::from_secs(number(flag, value(flag)?)?))
                }
                "--connect" => o.connect = value(flag)?.clone(),
                "--json" => o.json = true,
                "-h" | "--help" => return Err(USAGE.into()),
                other => return Err(format!("unknown flag {other:?}\n{USAGE}")),
            }
        }
        if o.accounts < 2 || o.threads == 0 {
            return Err(format!("need at least 2 accounts and 1 thread\n{USAGE}"));
        }
        Ok(o)
    }
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub accounts: u64,
    pub threads: u32,
    pub seconds: f64,
    pub transfers: u64,
    pub transfers_per_sec: f64,
    pub aborts: u64,
    pub aborts_per_sec: f64,
    pub checks: u64,
    pub expected_total: i64,
    /// The total of every check, in order; all must equal `expected_total`.
    pub totals: Vec<i64>,
    pub ok: bool,
}

pub fn main(args: &[String]) -> Result<(), String> {
    let opts = Options::parse(args)?;
    let report = run(&opts)?;
    if opts.json {
        println!("{}", serde_json::to_string(&report).expect("serializes"));
    } else {
        println!(
            "bank: {} transfers in {:.1} s ({:.0}/s), {} aborts ({:.0}/s), {} check(s)",
            report.transfers,
            report.seconds,
            report.transfers_per_sec,
            report.aborts,
            report.aborts_per_sec,
            report.checks
        );
        println!(
            "bank: total {} (expected {}): {}",
            report.totals.last().copied().unwrap_or_default(),
            report.expected_total,
            if report.ok { "unchanged" } else { "CHANGED" }
        );
    }
    if report.ok {
        Ok(())
    } else {
        Err(format!(
            "the total changed: expected {}, checks saw {:?}",
            report.expected_total, report.totals
        ))
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

async fn run_async(opts: &Options) -> Result<Report, String> {
    let cluster = Cluster::connect(&opts.connect)
        .await
        .map_err(|e| format!("cannot connect to mgmd at {}: {e}", opts.connect))?;
    let rec = set_up(&cluster, opts.accounts).await?;
    let expected_total = INITIAL_BALANCE * opts.accounts as i64;
    eprintln!(
        "bank: {} accounts, {} threads, {:.0} s",
        opts.accounts,
        opts.threads,
        opts.duration.as_secs_f64()
    );

    let stop = Arc::new(AtomicBool::new(false));
    let transfers = Arc::new(AtomicU64::new(0));
    let aborts = Arc::new(AtomicU64::new(0));
    let mut workers = Vec::new();
    for t in 0..opts.threads {
        let (cluster, rec) = (cluster.clone(), rec.clone());
        let (stop, transfers, aborts) = (stop.clone(), transfers.clone(), aborts.clone());
        let accounts = opts.accounts;
        workers.push(tokio::spawn(async move {
            let mut rng = SmallRng::seed_from_u64(0xBA4C + u64::from(t));
            while !stop.load(Ordering::Relaxed) {
                let from = rng.random_range(0..accounts);
                let to = (from + rng.random_range(1..accounts)) % accounts;
                let amount = rng.random_range(1..=100);
                match transfer(&cluster, &rec, from, to, amount).await {
                    Ok(()) => transfers.fetch_add(1, Ordering::Relaxed),
                    Err(e) if e.class() != ErrorClass::Permanent => {
                        aborts.fetch_add(1, Ordering::Relaxed)
                    }
                    Err(e) => return Err(format!("transfer {from} -> {to}: {e}")),
                };
            }
            Ok(())
        }));
    }

    let started = Instant::now();
    let mut totals = Vec::new();
    let mut last_check = Instant::now();
    let mut last_report = (Instant::now(), 0u64, 0u64);
    while started.elapsed() < opts.duration {
        tokio::time::sleep(Duration::from_millis(200)).await;
        if workers.iter().any(|w| w.is_finished()) {
            break;
        }
        if last_report.0.elapsed() >= Duration::from_secs(1) {
            let (t, a) = (
                transfers.load(Ordering::Relaxed),
                aborts.load(Ordering::Relaxed),
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
                let total = total_balance(&cluster, &rec, opts.accounts).await?;
                eprintln!("bank: check: total {total} (expected {expected_total})");
                totals.push(total);
                last_check = Instant::now();
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let seconds = started.elapsed().as_secs_f64();
    for w in workers {
        w.await
            .map_err(|e| format!("a transfer task panicked: {e}"))??;
    }
    totals.push(total_balance(&cluster, &rec, opts.accounts).await?);
    let (transfers, aborts) = (
        transfers.load(Ordering::Relaxed),
        aborts.load(Ordering::Relaxed),
    );
    cluster.close().await;
    Ok(Report {
        accounts: opts.accounts,
        threads: opts.threads,
        seconds,
        transfers,
        transfers_per_sec: transfers as f64 / seconds,
        aborts,
        aborts_per_sec: aborts as f64 / seconds,
        checks: totals.len() as u64,
        ok: totals.iter().all(|&t| t == expected_total),
        expected_total,
        totals,
    })
}

/// (Re)creates the accounts table with every balance at the start value.
async fn set_up(cluster: &Cluster, accounts: u64) -> Result<Record, String> {
    match cluster.drop_table(TABLE).await {
        Ok(()) => {}
        Err(e) if e.code == ErrorCode::NoSuchTable => {}
        Err(e) => return Err(format!("dropping the old {TABLE}: {e}")),
    }
    let def = TableDef::new(
        TABLE,
        vec![
            ColumnDef::new("id", ColumnType::BigInt { unsigned: true }),
            ColumnDef::new("balance", ColumnType::BigInt { unsigned: false }),
        ],
        &["id"],
    )
    .map_err(|e| e.to_string())?;
    let rec = cluster
        .create_table(def)
        .await
        .map_err(|e| format!("creating {TABLE}: {e}"))?
        .full_record();
    let mut first = 0;
    while first < accounts {
        let last = (first + SETUP_BATCH).min(accounts);
        let mut txns: Vec<Transaction> = (first..last)
            .map(|id| {
                let mut tx = cluster.transaction();
                tx.insert(&rec, &[Value::UInt(id), Value::Int(INITIAL_BALANCE)])
                    .expect("values fit");
                tx
            })
            .collect();
        for r in Transaction::execute_all(&mut txns, ExecType::Commit).await {
            r.map_err(|e| format!("creating the accounts: {e}"))?;
        }
        first = last;
    }
    Ok(rec)
}

fn balance_of(tx: &Transaction, op: shoal_client::OpId) -> Result<i64, ShoalError> {
    match tx.row(op).and_then(|r| r.get("balance")) {
        Some(Value::Int(b)) => Ok(b),
        other => Err(ShoalError::with_detail(
            ErrorCode::Internal,
            format!("balance read as {other:?}"),
        )),
    }
}

/// One transfer: lock both accounts (in the order drawn, so opposite
/// transfers can deadlock and one of them times out), move the money.
async fn transfer(
    cluster: &Cluster,
    rec: &Record,
    from: u64,
    to: u64,
    amount: i64,
) -> Result<(), ShoalError> {
    let mut tx = cluster.transaction();
    let a = tx.read(rec, &[Value::UInt(from)], LockMode::Exclusive)?;
    let b = tx.read(rec, &[Value::UInt(to)], LockMode::Exclusive)?;
    tx.execute(ExecType::NoCommit).await?;
    let (balance_a, balance_b) = (balance_of(&tx, a)?, balance_of(&tx, b)?);
    tx.update(rec, &[Value::UInt(from), Value::Int(balance_a - amount)])?;
    tx.update(rec, &[Value::UInt(to), Value::Int(balance_b + amount)])?;
    tx.execute(ExecType::Commit).await
}

/// The sum of every balance, read with shared locks in one transaction: a
/// consistent snapshot even while transfers run. Retries deadlock timeouts.
async fn total_balance(cluster: &Cluster, rec: &Record, accounts: u64) -> Result<i64, String> {
    for _ in 0..100 {
        let mut tx = cluster.transaction();
        let ops: Vec<_> = (0..accounts)
            .map(|id| {
                tx.read(rec, &[Value::UInt(id)], LockMode::Shared)
                    .expect("values fit")
            })
            .collect();
        match tx.execute(ExecType::Commit).await {
            Ok(()) => {
                let mut total = 0;
                for op in ops {
                    total += balance_of(&tx, op).map_err(|e| e.to_string())?;
                }
                return Ok(total);
            }
            Err(e) if e.class() != ErrorClass::Permanent => continue,
            Err(e) => return Err(format!("summing the balances: {e}")),
        }
    }
    Err("summing the balances: 100 attempts timed out on locks".into())
}
