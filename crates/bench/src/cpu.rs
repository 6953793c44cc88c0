//! Where a benchmark phase's CPU went: how busy each core of the machine
//! was (from `/proc/stat`) and how much CPU this process used per
//! operation (from `/proc/self/stat`). Linux only; elsewhere nothing is
//! measured and nothing is printed.
//!
//! Why: on a small machine the client and the data node share cores, and
//! a throughput figure alone does not say which of them was the limit.

use std::fmt::Write as _;

/// Clock ticks per second of `/proc` times (USER_HZ, 100 on Linux).
const TICKS_PER_SEC: f64 = 100.0;

/// A reading of the counters.
#[derive(Clone, Debug)]
pub struct CpuSample {
    /// Per core: (busy ticks, all ticks).
    cores: Vec<(u64, u64)>,
    /// This process's user + system ticks.
    process_ticks: u64,
}

impl CpuSample {
    /// Reads the counters now; `None` where `/proc` is not there.
    pub fn now() -> Option<CpuSample> {
        let stat = std::fs::read_to_string("/proc/stat").ok()?;
        let cores = parse_cores(&stat);
        let own = std::fs::read_to_string("/proc/self/stat").ok()?;
        let process_ticks = parse_process_ticks(&own)?;
        Some(CpuSample {
            cores,
            process_ticks,
        })
    }

    /// What happened between `self` and `later`, for `ops` operations:
    /// e.g. "cores busy 98 % 77 %; this process 1,234 ns CPU per op".
    pub fn report_until(&self, later: &CpuSample, ops: u64) -> String {
        let mut span = CpuTotals::default();
        span.add(self, later);
        span.report(ops)
    }
}

/// Counters added up over several intervals: one benchmark case timed
/// once per iteration, with other work in between that must not count.
#[derive(Clone, Debug, Default)]
pub struct CpuTotals {
    /// Per core: (busy ticks, all ticks).
    cores: Vec<(u64, u64)>,
    /// This process's user + system ticks.
    process_ticks: u64,
}

impl CpuTotals {
    /// Adds the interval from `from` to `to`.
    pub fn add(&mut self, from: &CpuSample, to: &CpuSample) {
        if self.cores.len() < from.cores.len() {
            self.cores.resize(from.cores.len(), (0, 0));
        }
        for (sum, (a, b)) in self.cores.iter_mut().zip(from.cores.iter().zip(&to.cores)) {
            sum.0 += b.0.saturating_sub(a.0);
            sum.1 += b.1.saturating_sub(a.1);
        }
        self.process_ticks += to.process_ticks.saturating_sub(from.process_ticks);
    }

    /// Ticks each core counted, on average: `TICKS_PER_SEC` per second of
    /// wall time measured. Fewer than a handful say nothing (a busy share
    /// is then a guess at the tick boundaries).
    pub fn ticks_per_core(&self) -> f64 {
        if self.cores.is_empty() {
            return 0.0;
        }
        self.cores.iter().map(|c| c.1 as f64).sum::<f64>() / self.cores.len() as f64
    }

    /// How busy each core was, in percent.
    pub fn busy_pct(&self) -> Vec<f64> {
        self.cores
            .iter()
            .map(|&(busy, all)| 100.0 * busy as f64 / all.max(1) as f64)
            .collect()
    }

    /// This process's CPU time per operation, in nanoseconds.
    pub fn process_ns_per_op(&self, ops: u64) -> f64 {
        self.process_ticks as f64 / TICKS_PER_SEC * 1e9 / ops.max(1) as f64
    }

    /// E.g. "cores busy 98 % 77 %; this process 1,234 ns CPU per op".
    pub fn report(&self, ops: u64) -> String {
        let mut out = String::from("cores busy");
        for busy in self.busy_pct() {
            let _ = write!(out, " {busy:.0} %");
        }
        if ops > 0 {
            let _ = write!(
                out,
                "; this process {:.0} ns CPU per op",
                self.process_ns_per_op(ops)
            );
        }
        out
    }
}

/// Per-core (busy, all) ticks from `/proc/stat`'s `cpuN` lines: busy is
/// everything but idle and iowait.
fn parse_cores(stat: &str) -> Vec<(u64, u64)> {
    stat.lines()
        .filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit))
        .map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            let all: u64 = v.iter().take(8).sum();
            let idle = v.get(3).copied().unwrap_or(0) + v.get(4).copied().unwrap_or(0);
            (all.saturating_sub(idle), all)
        })
        .collect()
}

/// utime + stime (fields 14 and 15) of a `/proc/<pid>/stat` line. The
/// command name (field 2) may hold spaces: fields are counted after its
/// closing parenthesis.
fn parse_process_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state): utime is field 14, index 11.
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_lines() {
        let stat = "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 5 0 5 40 0 0 0 0 0 0\ncpu1 5 0 5 38 2 0 0 0 0 0\nintr 1 2\n";
        assert_eq!(parse_cores(stat), vec![(10, 50), (10, 50)]);
        let own = "1234 (shoal bench) S 1 2 3 4 5 6 7 8 9 10 17 4 0 0 20 0";
        assert_eq!(parse_process_ticks(own), Some(21));
        let a = CpuSample {
            cores: vec![(0, 0), (0, 0)],
            process_ticks: 0,
        };
        let b = CpuSample {
            cores: vec![(90, 100), (40, 100)],
            process_ticks: 100,
        };
        assert_eq!(
            a.report_until(&b, 1_000_000),
            "cores busy 90 % 40 %; this process 1000 ns CPU per op"
        );
    }

    #[test]
    fn totals_add_intervals() {
        let sample = |busy: u64, all: u64, own: u64| CpuSample {
            cores: vec![(busy, all), (busy / 2, all)],
            process_ticks: own,
        };
        let mut t = CpuTotals::default();
        assert_eq!(t.ticks_per_core(), 0.0);
        t.add(&sample(0, 0, 0), &sample(10, 20, 5));
        // Time between the intervals does not count.
        t.add(&sample(1000, 5000, 700), &sample(1030, 5020, 705));
        assert_eq!(t.busy_pct(), vec![100.0, 50.0]);
        assert_eq!(t.ticks_per_core(), 40.0);
        assert_eq!(t.process_ns_per_op(100), 1e6);
    }

    #[test]
    fn reads_this_machine() {
        if std::path::Path::new("/proc/stat").exists() {
            let s = CpuSample::now().expect("readable /proc");
            assert!(!s.cores.is_empty());
        }
    }
}
