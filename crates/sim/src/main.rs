//! `shoal-sim`: runs the simulator for one seed or many.
//!
//!     cargo run --release -p shoal-sim -- --seed 42            # replay one seed
//!     cargo run --release -p shoal-sim -- --seeds 1000         # 1000 seeds from a random start
//!     cargo run --release -p shoal-sim -- --seed 7 --seeds 50 --txns 20000
//!     cargo run --release -p shoal-sim -- --seeds 100 --nodes 4 --replicas 2
//!
//! Without `--nodes`/`--replicas`, each seed picks its cluster shape (1–4
//! data nodes, 1 or 2 replicas, read from backup or not) and its load
//! (15 transactions at once over 32 keys, or 1000 over 1024: `--wide`)
//! from the seed.

use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use shoal_sim::{run, SimOptions};

const USAGE: &str =
    "usage: shoal-sim [--seed N] [--seeds COUNT] [--txns PER_SEED] [--nodes N --replicas R]
  --seed N       first seed (default: random, printed)
  --seeds COUNT  how many consecutive seeds to run (default 1)
  --txns M       transactions per seed (default 5000)
  --nodes N      data nodes, 1-8 (default: chosen by each seed)
  --replicas R   replicas, 1-4, dividing N (default: chosen by each seed)
  --read-backup  the table reads from backups (with --nodes/--replicas)
  --wide         1000 transactions at once over 1024 keys (with --nodes/--replicas)";

struct Args {
    seed: Option<u64>,
    seeds: u64,
    txns: u64,
    shape: Option<(u16, u16)>,
    read_backup: bool,
    wide: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut seed = None;
    let mut seeds = 1;
    let mut txns = 5000;
    let mut nodes = None;
    let mut replicas = None;
    let mut read_backup = false;
    let mut wide = false;
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = |name: &str| -> Result<u64, String> {
            let v = args
                .next()
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))?;
            v.parse()
                .map_err(|_| format!("{name}: {v:?} is not a number\n{USAGE}"))
        };
        match flag.as_str() {
            "--seed" => seed = Some(value("--seed")?),
            "--seeds" => seeds = value("--seeds")?,
            "--txns" => txns = value("--txns")?,
            "--nodes" => nodes = Some(value("--nodes")?),
            "--replicas" => replicas = Some(value("--replicas")?),
            "--read-backup" => read_backup = true,
            "--wide" => wide = true,
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let shape = match (nodes, replicas) {
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
    Ok(Args {
        seed,
        seeds,
        txns,
        shape,
        read_backup,
        wide,
    })
}

fn main() -> ExitCode {
    let Args {
        seed,
        seeds,
        txns,
        shape,
        read_backup,
        wide,
    } = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    let first = seed.unwrap_or_else(|| {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    println!("running {seeds} seed(s) from {first}, {txns} transactions each");
    let started = Instant::now();
    for i in 0..seeds {
        let seed = first.wrapping_add(i);
        let opts = match shape {
            Some((data_nodes, replicas)) => SimOptions {
                seed,
                transactions: txns,
                data_nodes,
                replicas,
                read_backup,
                wide,
            },
            None => SimOptions::shape_for_seed(seed, txns),
        };
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
