//! The bank's timeline: what the transfer tasks did in each step of N ms,
//! sampled from their counters by a ticker task, so a failover shows as a
//! dip (how deep, how long) rather than as a lower average.
//!
//! The transfer path only bumps relaxed atomics; the ticker reads them and
//! keeps the differences. One [`Step`] per tick: a run of 10 minutes at
//! 100 ms keeps 6,000 of them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::sync::oneshot;
use tokio::time::MissedTickBehavior;

/// The shortest step `--timeline-ms` accepts (bounds the memory and the
/// lines printed).
pub const STEP_MS_MIN: u64 = 10;

/// What the transfer tasks have done so far, bumped as they go.
#[derive(Debug, Default)]
pub struct Counters {
    pub transfers: AtomicU64,
    pub aborts: AtomicU64,
    pub unknown: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> [u64; 3] {
        [
            self.transfers.load(Ordering::Relaxed),
            self.aborts.load(Ordering::Relaxed),
            self.unknown.load(Ordering::Relaxed),
        ]
    }

    /// `after 312 committed, 2 aborted and 0 unknown attempts`, for errors.
    pub fn describe(&self) -> String {
        let [transfers, aborts, unknown] = self.snapshot();
        format!("after {transfers} committed, {aborts} aborted and {unknown} unknown attempts")
    }
}

/// One step of the timeline: what happened between the previous step's
/// `t_ms` and this one's (ms since the transfers started).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Step {
    pub t_ms: u64,
    pub transfers: u64,
    pub aborts: u64,
    pub unknown: u64,
}

/// The line printed for a step that lasted `step_ms`:
/// `bank: t=12.3 s  +312 transfers  3120/s  aborts 2`.
pub fn line(step: &Step, step_ms: u64) -> String {
    let rate = step.transfers as f64 * 1000.0 / step_ms.max(1) as f64;
    let mut s = format!(
        "bank: t={:.1} s  +{} transfers  {rate:.0}/s  aborts {}",
        step.t_ms as f64 / 1000.0,
        step.transfers,
        step.aborts
    );
    if step.unknown > 0 {
        s.push_str(&format!("  unknown {}", step.unknown));
    }
    s
}

/// Samples `counters` every `every` from `started` until `done` fires (or
/// its sender is dropped), printing a line per step to stderr; the last
/// step is the partial one up to `done`. The counters must be zero at
/// `started`.
pub async fn record(
    counters: Arc<Counters>,
    started: Instant,
    every: Duration,
    mut done: oneshot::Receiver<()>,
) -> Vec<Step> {
    let start = tokio::time::Instant::from_std(started);
    let mut ticks = tokio::time::interval_at(start + every, every);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut steps = Vec::new();
    let (mut last_ms, mut last) = (0u64, [0u64; 3]);
    loop {
        let finished = tokio::select! {
            _ = ticks.tick() => false,
            _ = &mut done => true,
        };
        let mut t_ms = started.elapsed().as_millis() as u64;
        let now = counters.snapshot();
        if finished && now != last {
            // The last counts must land in a step of their own.
            t_ms = t_ms.max(last_ms + 1);
        }
        if t_ms > last_ms {
            let step = Step {
                t_ms,
                transfers: now[0] - last[0],
                aborts: now[1] - last[1],
                unknown: now[2] - last[2],
            };
            eprintln!("{}", line(&step, t_ms - last_ms));
            steps.push(step);
            (last_ms, last) = (t_ms, now);
        }
        if finished {
            return steps;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_has_time_count_rate_and_aborts() {
        let step = Step {
            t_ms: 12_300,
            transfers: 312,
            aborts: 2,
            unknown: 0,
        };
        assert_eq!(
            line(&step, 100),
            "bank: t=12.3 s  +312 transfers  3120/s  aborts 2"
        );
        let step = Step { unknown: 1, ..step };
        assert!(line(&step, 100).ends_with("aborts 2  unknown 1"));
    }

    #[test]
    fn the_ticker_accounts_for_every_transfer() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let steps = rt.block_on(async {
            let counters = Arc::new(Counters::default());
            let (tx, rx) = oneshot::channel();
            let ticker = tokio::spawn(record(
                counters.clone(),
                Instant::now(),
                Duration::from_millis(20),
                rx,
            ));
            for _ in 0..10 {
                counters.transfers.fetch_add(7, Ordering::Relaxed);
                counters.aborts.fetch_add(1, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(9)).await;
            }
            counters.unknown.fetch_add(1, Ordering::Relaxed);
            tx.send(()).unwrap();
            ticker.await.unwrap()
        });
        assert!(steps.len() >= 2, "{steps:?}");
        assert!(steps.windows(2).all(|w| w[0].t_ms < w[1].t_ms));
        assert_eq!(steps.iter().map(|s| s.transfers).sum::<u64>(), 70);
        assert_eq!(steps.iter().map(|s| s.aborts).sum::<u64>(), 10);
        assert_eq!(steps.iter().map(|s| s.unknown).sum::<u64>(), 1);
    }
}
