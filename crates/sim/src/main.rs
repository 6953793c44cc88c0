//! `shoal-sim`: runs the simulator for one seed or many.
//!
//!     cargo run --release -p shoal-sim -- --seed 42            # replay one seed
//!     cargo run --release -p shoal-sim -- --seeds 1000         # 1000 seeds from a random start
//!     cargo run --release -p shoal-sim -- --seed 7 --seeds 50 --txns 20000
//!     cargo run --release -p shoal-sim -- --seeds 100 --nodes 4 --replicas 2 --failures
//!     cargo run --release -p shoal-sim -- --seeds 60 --break skip-takeover   # must fail
//!
//! Without `--nodes`/`--replicas`, each seed picks its cluster shape (1–4
//! data nodes, 1 to 3 replicas, read from backup or not), its load (15
//! transactions at once over 32 keys, or 1000 over 1024: `--wide`) and
//! whether data nodes fail (every shape whose node groups have two or more
//! replicas).

use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use shoal_kernel::Faults;
use shoal_sim::{run, SimOptions};

const USAGE: &str = "usage: shoal-sim [--seed N] [--seeds COUNT] [--txns PER_SEED] [--nodes N --replicas R] [--failures] [--break WHAT]
  --seed N        first seed (default: random, printed)
  --seeds COUNT   how many consecutive seeds to run (default 1)
  --txns M        transactions per seed (default 5000)
  --nodes N       data nodes, 1-8 (default: chosen by each seed)
  --replicas R    replicas, 1-4, dividing N (default: chosen by each seed)
  --read-backup   the table reads from backups (with --nodes/--replicas)
  --wide          1000 transactions at once over 1024 keys (with --nodes/--replicas)
  --failures      crash, freeze, cut and split data nodes (with --nodes/--replicas)
  --durable       redo logs and local checkpoints on simulated disks, epochs,
                  whole-cluster crashes and restarts from the files (any shape)
  --scans         clients keep committed-read scans with random filters going,
                  checked against the model
  --unique        the table has a unique index on its string column (values
                  clash often), checked against the model
  --break WHAT    break a protocol on purpose (skip-takeover, ignore-dist-version,
                  arbitrator-grants-all, epoch-switch-without-hold,
                  lcp-redo-start-after-scan, copy-since-one-epoch-late,
                  snapshot-without-logging, scan-skips-row-at-batch-end,
                  index-update-keeps-old-key, index-build-ignores-writes,
                  unique-entry-kept-on-abort, backups-show-commit-early):
                  the checks must catch it, so the run is expected to fail";

struct Args {
    seed: Option<u64>,
    seeds: u64,
    txns: u64,
    shape: Option<(u16, u16)>,
    read_backup: bool,
    wide: bool,
    failures: bool,
    durable: bool,
    scans: bool,
    unique: bool,
    faults: Faults,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        seed: None,
        seeds: 1,
        txns: 5000,
        shape: None,
        read_backup: false,
        wide: false,
        failures: false,
        durable: false,
        scans: false,
        unique: false,
        faults: Faults::default(),
    };
    let (mut nodes, mut replicas) = (None, None);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut text = |name: &str| -> Result<String, String> {
            args.next()
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))
        };
        let number = |name: &str, v: String| -> Result<u64, String> {
            v.parse()
                .map_err(|_| format!("{name}: {v:?} is not a number\n{USAGE}"))
        };
        match flag.as_str() {
            "--seed" => a.seed = Some(number("--seed", text("--seed")?)?),
            "--seeds" => a.seeds = number("--seeds", text("--seeds")?)?,
            "--txns" => a.txns = number("--txns", text("--txns")?)?,
            "--nodes" => nodes = Some(number("--nodes", text("--nodes")?)?),
            "--replicas" => replicas = Some(number("--replicas", text("--replicas")?)?),
            "--read-backup" => a.read_backup = true,
            "--wide" => a.wide = true,
            "--failures" => a.failures = true,
            "--durable" => a.durable = true,
            "--scans" => a.scans = true,
            "--unique" => a.unique = true,
            "--break" => match text("--break")?.as_str() {
                "skip-takeover" => a.faults.skip_takeover = true,
                "ignore-dist-version" => a.faults.ignore_dist_version = true,
                "arbitrator-grants-all" => a.faults.arbitrator_grants_all = true,
                "epoch-switch-without-hold" => a.faults.epoch_switch_without_hold = true,
                "lcp-redo-start-after-scan" => a.faults.lcp_redo_start_after_scan = true,
                "copy-since-one-epoch-late" => a.faults.copy_since_one_epoch_late = true,
                "snapshot-without-logging" => a.faults.snapshot_without_logging = true,
                "index-update-keeps-old-key" => a.faults.index_update_keeps_old_key = true,
                "backups-show-commit-early" => {
                    a.faults.backups_show_commit_early = true;
                    a.read_backup = true;
                    a.scans = true;
                }
                "unique-entry-kept-on-abort" => {
                    a.faults.unique_entry_kept_on_abort = true;
                    a.unique = true;
                }
                "index-build-ignores-writes" => {
                    a.faults.index_build_ignores_writes = true;
                    a.scans = true;
                }
                "scan-skips-row-at-batch-end" => {
                    a.faults.scan_skips_row_at_batch_end = true;
                    a.scans = true;
                }
                other => return Err(format!("--break {other:?}: unknown\n{USAGE}")),
            },
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    a.shape = match (nodes, replicas) {
        (None, None) => None,
        (Some(n), Some(r)) if (1..=8).contains(&n) && (1..=4).contains(&r) && n % r == 0 => {
            Some((n as u16, r as u16))
        }
        (Some(n), Some(r)) => {
            return Err(format!(
                "--nodes {n} --replicas {r}: need 1-8 nodes, 1-4 replicas, replicas dividing nodes"
            ))
        }
        _ => return Err(format!("give --nodes and --replicas together\n{USAGE}")),
    };
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let first = args.seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    let seeds = args.seeds;
    println!(
        "running {seeds} seed(s) from {first}, {} transactions each",
        args.txns
    );
    let started = Instant::now();
    for i in 0..seeds {
        let seed = first.wrapping_add(i);
        let mut opts = match args.shape {
            Some((data_nodes, replicas)) => SimOptions {
                seed,
                transactions: args.txns,
                data_nodes,
                replicas,
                read_backup: args.read_backup,
                wide: args.wide,
                failures: args.failures,
                durable: args.durable,
                scans: args.scans,
                unique: args.unique,
                faults: Faults::default(),
            },
            None => SimOptions::shape_for_seed(seed, args.txns),
        };
        opts.durable = args.durable;
        opts.scans = args.scans;
        opts.unique = args.unique;
        opts.faults = args.faults.clone();
        if opts.faults != Faults::default() && args.shape.is_none() {
            // A broken protocol shows under failures.
            opts.failures = opts.replicas >= 2;
        }
        match run(&opts) {
            Ok(report) => {
                if seeds <= 20 || (i + 1) % 100 == 0 || i + 1 == seeds {
                    println!(
                        "[{}/{seeds}, {:.1} s] {report}",
                        i + 1,
                        started.elapsed().as_secs_f64()
                    );
                }
            }
            Err(failure) => {
                eprintln!("{failure}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!("all {seeds} seed(s) passed");
    ExitCode::SUCCESS
}
