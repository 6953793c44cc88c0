//! `shoal-sim`: runs the simulator for one seed or many.
//!
//!     cargo run --release -p shoal-sim -- --seed 42            # replay one seed
//!     cargo run --release -p shoal-sim -- --seeds 1000         # 1000 seeds from a random start
//!     cargo run --release -p shoal-sim -- --seed 7 --seeds 50 --txns 20000

use std::process::ExitCode;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use shoal_sim::{run, SimOptions};

const USAGE: &str = "usage: shoal-sim [--seed N] [--seeds COUNT] [--txns PER_SEED]
  --seed N       first seed (default: random, printed)
  --seeds COUNT  how many consecutive seeds to run (default 1)
  --txns M       transactions per seed (default 5000)";

fn parse_args() -> Result<(Option<u64>, u64, u64), String> {
    let mut seed = None;
    let mut seeds = 1;
    let mut txns = 5000;
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
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    Ok((seed, seeds, txns))
}

fn main() -> ExitCode {
    let (seed, seeds, txns) = match parse_args() {
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
        match run(&SimOptions {
            seed,
            transactions: txns,
        }) {
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
