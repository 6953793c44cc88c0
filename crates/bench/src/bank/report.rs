//! The bank's report: what the run did and whether it kept its promises
//! (the total unchanged, the history and balances verified), as text or
//! JSON.

use serde::Serialize;

use super::timeline::Step;

#[derive(Debug, Serialize)]
pub struct Report {
    pub accounts: u64,
    pub threads: u32,
    pub seconds: f64,
    /// Committed transfers (the same as `committed`).
    pub transfers: u64,
    pub transfers_per_sec: f64,
    /// Aborted attempts (the same as `aborted`).
    pub aborts: u64,
    pub aborts_per_sec: f64,
    pub checks: u64,
    /// Seconds the checks during the run took (each a shared-lock scan
    /// that holds every account while it sums them: transfers wait).
    pub check_seconds: f64,
    /// Committed transfers per second of the run outside the checks.
    pub transfers_per_sec_excluding_checks: f64,
    pub expected_total: i64,
    /// The total of every check, in order; all must equal `expected_total`.
    pub totals: Vec<i64>,
    /// Attempts whose commit returned `Ok`.
    pub committed: u64,
    /// Attempts that ended with a temporary (or, before the commit was
    /// sent, any non-permanent) error: they must have left nothing.
    pub aborted: u64,
    /// Attempts whose commit ended with an unknown-result error.
    pub unknown: u64,
    /// Unknown attempts whose history row was found.
    pub unknown_resolved_committed: u64,
    /// Unknown attempts whose history row was not found.
    pub unknown_resolved_aborted: u64,
    /// History rows found under the ids the run issued.
    pub history_rows: u64,
    /// Every committed id has its row, right; no aborted id has one; the
    /// row count is committed + unknown found present.
    pub history_verified: bool,
    /// Every account's balance is its start value plus the transfers the
    /// history says happened.
    pub balances_verified: bool,
    /// The first offending ids or accounts, described (empty if none).
    pub problems: Vec<String>,
    /// Per `--timeline-ms` step (empty without it).
    pub timeline: Vec<Step>,
    /// The total never changed, and the history and balances verified.
    pub ok: bool,
}

impl Report {
    fn total_unchanged(&self) -> bool {
        self.totals.iter().all(|&t| t == self.expected_total)
    }

    pub(super) fn judge(&mut self) {
        self.ok = self.total_unchanged() && self.history_verified && self.balances_verified;
    }

    /// Why the run failed, with the first offending ids; `None` if it
    /// passed.
    pub fn failure(&self) -> Option<String> {
        if self.ok {
            return None;
        }
        let mut why = Vec::new();
        if !self.total_unchanged() {
            why.push(format!(
                "the total changed: expected {}, checks saw {:?}",
                self.expected_total, self.totals
            ));
        }
        if !self.history_verified {
            why.push("the history does not match the outcomes the client saw".to_string());
        }
        if !self.balances_verified {
            why.push("balances do not match the history".to_string());
        }
        let mut msg = why.join("; ");
        for p in &self.problems {
            msg.push_str("\n  ");
            msg.push_str(p);
        }
        Some(msg)
    }
}
pub(super) fn print_text(report: &Report) {
    let verdict = |ok: bool| if ok { "verified" } else { "FAILED" };
    println!(
        "bank: {} transfers in {:.1} s ({:.0}/s; {:.0}/s outside the checks), {} aborts ({:.0}/s), {} check(s) by shared-lock scan taking {:.2} s",
        report.transfers,
        report.seconds,
        report.transfers_per_sec,
        report.transfers_per_sec_excluding_checks,
        report.aborts,
        report.aborts_per_sec,
        report.checks,
        report.check_seconds
    );
    println!(
        "bank: attempts: {} committed, {} aborted, {} unknown \
         ({} found committed, {} found aborted)",
        report.committed,
        report.aborted,
        report.unknown,
        report.unknown_resolved_committed,
        report.unknown_resolved_aborted
    );
    println!(
        "bank: history: {} rows, {}; balances: {}",
        report.history_rows,
        verdict(report.history_verified),
        verdict(report.balances_verified)
    );
    println!(
        "bank: total {} (expected {}): {}",
        report.totals.last().copied().unwrap_or_default(),
        report.expected_total,
        if report.total_unchanged() {
            "unchanged"
        } else {
            "CHANGED"
        }
    );
}
#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> Report {
        Report {
            accounts: 2,
            threads: 1,
            seconds: 1.0,
            transfers: 3,
            transfers_per_sec: 3.0,
            aborts: 1,
            aborts_per_sec: 1.0,
            checks: 1,
            check_seconds: 0.1,
            transfers_per_sec_excluding_checks: 3.3,
            expected_total: 2000,
            totals: vec![2000],
            committed: 3,
            aborted: 1,
            unknown: 0,
            unknown_resolved_committed: 0,
            unknown_resolved_aborted: 0,
            history_rows: 3,
            history_verified: true,
            balances_verified: true,
            problems: Vec::new(),
            timeline: Vec::new(),
            ok: false,
        }
    }

    #[test]
    fn ok_needs_the_total_the_history_and_the_balances() {
        let mut r = report();
        r.judge();
        assert!(r.ok);
        assert_eq!(r.failure(), None);

        let mut r = report();
        r.totals.push(1999);
        r.judge();
        assert!(!r.ok);
        assert!(r.failure().unwrap().contains("total changed"));

        let mut r = report();
        r.history_verified = false;
        r.problems = vec!["id 0:7 (0x7): aborted but its history row is present".into()];
        r.judge();
        assert!(!r.ok);
        let why = r.failure().unwrap();
        assert!(why.contains("history") && why.contains("id 0:7"), "{why}");

        let mut r = report();
        r.balances_verified = false;
        r.judge();
        assert!(r.failure().unwrap().contains("balances"));
    }

    #[test]
    fn the_report_serializes_the_new_fields() {
        let mut r = report();
        r.timeline.push(Step {
            t_ms: 100,
            transfers: 3,
            aborts: 1,
            unknown: 0,
        });
        r.judge();
        let v: serde_json::Value = serde_json::to_value(&r).unwrap();
        for key in [
            "committed",
            "aborted",
            "unknown",
            "history_verified",
            "unknown_resolved_committed",
            "unknown_resolved_aborted",
            "transfers",
            "totals",
            "ok",
        ] {
            assert!(v.get(key).is_some(), "{key} missing from {v}");
        }
        assert_eq!(v["timeline"][0]["t_ms"], 100);
        assert_eq!(v["timeline"][0]["transfers"], 3);
    }
}
