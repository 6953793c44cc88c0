//! The bank's history: every transfer attempt gets a unique id and inserts a
//! row under it in the same transaction as its two updates; at the end the
//! rows are read back and judged against what the client was told.
//!
//! What the audit proves, given that the bench is the table's only writer:
//! - every committed attempt (its execute returned `Ok`) left its row, with
//!   the right accounts and amount: no committed transfer was lost;
//! - every aborted attempt (a temporary or permanent error) left no row:
//!   nothing of it stayed;
//! - every attempt whose outcome was unknown is resolved by its row
//!   (present: committed; absent: aborted), for information;
//! - every account's balance equals its start value plus the transfers the
//!   history says happened: no transfer was applied twice, half or out of
//!   order (a lost update), including the resolved unknown ones.
//!
//! There is no scan in the client, so "no extra rows" is checked over every
//! id the run issued: the rows found must be exactly the committed ids plus
//! the unknown ids found present.
//!
//! Invariants:
//! - An id is `thread << SEQ_BITS | seq`; attempt `seq` of a task sits at
//!   index `seq` of its [`AttemptLog`], so the log stores no ids.
//! - An [`Attempt`] takes 12 bytes: a run of 10 minutes at 20,000 attempts
//!   a second keeps about 140 MB of logs.

use std::time::{Duration, Instant};

use shoal_client::{
    Cluster, ErrorClass, ErrorCode, ExecType, LockMode, Record, Transaction, Value,
};

/// Low bits of an id: the attempt's sequence number within its task.
pub const SEQ_BITS: u32 = 40;
/// Transfer tasks are numbered below this (the id's high bits).
pub const THREADS_MAX: u32 = 1 << (64 - SEQ_BITS);
/// History reads per transaction at verification.
pub const READ_BATCH: usize = 500;
/// Read transactions in flight at once at verification.
const READS_IN_FLIGHT: usize = 8;
/// Offending ids or accounts described in full; the rest are counted.
pub const PROBLEMS_SHOWN: usize = 10;

/// The id of attempt `seq` of transfer task `thread`.
pub fn history_id(thread: u32, seq: u64) -> u64 {
    assert!(thread < THREADS_MAX, "task {thread} out of the id range");
    assert!(seq < 1 << SEQ_BITS, "attempt {seq} out of the id range");
    (u64::from(thread) << SEQ_BITS) | seq
}

/// The task and sequence number an id was made from.
pub fn split_id(id: u64) -> (u32, u64) {
    ((id >> SEQ_BITS) as u32, id & ((1 << SEQ_BITS) - 1))
}

/// How an id reads in messages: `id 3:17 (0x30000000011)`.
pub fn show_id(id: u64) -> String {
    let (thread, seq) = split_id(id);
    format!("id {thread}:{seq} ({id:#x})")
}

/// What the client was told about an attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Outcome {
    /// The commit's execute returned `Ok`.
    Committed,
    /// A temporary or permanent error: the attempt had no effect.
    Aborted,
    /// An unknown-result error at commit: it may or may not have happened.
    Unknown,
}

/// One transfer attempt as its task saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attempt {
    pub from: u32,
    pub to: u32,
    pub amount: u16,
    pub outcome: Outcome,
}

const _: () = assert!(std::mem::size_of::<Attempt>() == 12);

/// Every attempt of one transfer task, in order: `attempts[seq]` has the
/// id `history_id(thread, seq)`.
#[derive(Debug)]
pub struct AttemptLog {
    pub thread: u32,
    pub attempts: Vec<Attempt>,
}

impl AttemptLog {
    pub fn new(thread: u32) -> AttemptLog {
        assert!(thread < THREADS_MAX);
        AttemptLog {
            thread,
            attempts: Vec::new(),
        }
    }

    /// The id the next attempt will use.
    pub fn next_id(&self) -> u64 {
        history_id(self.thread, self.attempts.len() as u64)
    }

    /// Every attempt with its id.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &Attempt)> + '_ {
        (0u64..)
            .zip(&self.attempts)
            .map(|(seq, a)| (history_id(self.thread, seq), a))
    }
}

/// A history row as read back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HistoryRow {
    pub from: u64,
    pub to: u64,
    pub amount: i64,
}

impl HistoryRow {
    fn of(a: &Attempt) -> HistoryRow {
        HistoryRow {
            from: u64::from(a.from),
            to: u64::from(a.to),
            amount: i64::from(a.amount),
        }
    }
}

/// The verdict on a run's history, built one attempt at a time.
#[derive(Debug)]
pub struct Audit {
    pub committed: u64,
    pub aborted: u64,
    pub unknown: u64,
    pub unknown_resolved_committed: u64,
    pub unknown_resolved_aborted: u64,
    /// History rows found under the ids the run issued.
    pub rows_found: u64,
    /// Offences against the history (missing, extra or wrong rows).
    pub history_problems: u64,
    /// Accounts whose balance differs from what the history implies.
    pub balance_mismatches: u64,
    /// The first [`PROBLEMS_SHOWN`] offences, described.
    pub problems: Vec<String>,
    /// Per account: the money moved by the transfers the history says
    /// happened (committed, and unknown found present).
    net: Vec<i64>,
}

impl Audit {
    pub fn new(accounts: u64) -> Audit {
        Audit {
            committed: 0,
            aborted: 0,
            unknown: 0,
            unknown_resolved_committed: 0,
            unknown_resolved_aborted: 0,
            rows_found: 0,
            history_problems: 0,
            balance_mismatches: 0,
            problems: Vec::new(),
            net: vec![0; accounts as usize],
        }
    }

    fn note(&mut self, problem: String) {
        if self.problems.len() < PROBLEMS_SHOWN {
            self.problems.push(problem);
        }
    }

    fn history_problem(&mut self, problem: String) {
        self.history_problems += 1;
        self.note(problem);
    }

    fn apply(&mut self, a: &Attempt) {
        self.net[a.from as usize] -= i64::from(a.amount);
        self.net[a.to as usize] += i64::from(a.amount);
    }

    /// Judges one attempt against what the read-back found under its id.
    pub fn judge(&mut self, id: u64, a: &Attempt, found: Option<HistoryRow>) {
        let want = HistoryRow::of(a);
        if let Some(row) = found {
            self.rows_found += 1;
            if row != want && a.outcome != Outcome::Aborted {
                self.history_problem(format!(
                    "{}: {:?} as {want:?}, but its row says {row:?}",
                    show_id(id),
                    a.outcome
                ));
            }
        }
        match (a.outcome, found) {
            (Outcome::Committed, found) => {
                self.committed += 1;
                // The client was told it committed: the accounts must show
                // it whatever the history says.
                self.apply(a);
                if found.is_none() {
                    self.history_problem(format!(
                        "{}: committed ({want:?}) but its history row is missing",
                        show_id(id)
                    ));
                }
            }
            (Outcome::Aborted, found) => {
                self.aborted += 1;
                if let Some(row) = found {
                    self.history_problem(format!(
                        "{}: aborted but its history row is present ({row:?})",
                        show_id(id)
                    ));
                }
            }
            (Outcome::Unknown, Some(_)) => {
                self.unknown += 1;
                self.unknown_resolved_committed += 1;
                self.apply(a);
            }
            (Outcome::Unknown, None) => {
                self.unknown += 1;
                self.unknown_resolved_aborted += 1;
            }
        }
    }

    /// After every attempt was judged: the rows found must be exactly the
    /// committed ids plus the unknown ids found present.
    pub fn check_row_count(&mut self) {
        let expected = self.committed + self.unknown_resolved_committed;
        if self.rows_found != expected {
            self.history_problem(format!(
                "{} history rows found, expected {expected} ({} committed + {} unknown found present)",
                self.rows_found, self.committed, self.unknown_resolved_committed
            ));
        }
    }

    /// Compares every account's balance with its start value plus the
    /// transfers the history says happened.
    pub fn check_balances(&mut self, initial: i64, balances: &[i64]) {
        assert_eq!(balances.len(), self.net.len(), "one balance per account");
        for (account, (&balance, &net)) in balances.iter().zip(&self.net).enumerate() {
            let expected = initial + net;
            if balance != expected {
                self.balance_mismatches += 1;
                if self.problems.len() < PROBLEMS_SHOWN {
                    self.problems.push(format!(
                        "account {account}: balance {balance}, expected {expected} from the history"
                    ));
                }
            }
        }
    }

    pub fn history_verified(&self) -> bool {
        self.history_problems == 0
    }

    pub fn balances_verified(&self) -> bool {
        self.balance_mismatches == 0
    }
}

/// Reads back the history row of every attempt in `logs` and judges it.
/// Temporary errors are retried for up to `retry` per group of reads.
pub async fn verify(
    cluster: &Cluster,
    history: &Record,
    logs: &[AttemptLog],
    audit: &mut Audit,
    retry: Duration,
) -> Result<(), String> {
    let group_len = READ_BATCH * READS_IN_FLIGHT;
    let mut group: Vec<(u64, Attempt)> = Vec::with_capacity(group_len);
    let all = logs.iter().flat_map(|log| log.iter());
    let mut all = all.peekable();
    while all.peek().is_some() {
        group.clear();
        group.extend(all.by_ref().take(group_len).map(|(id, a)| (id, *a)));
        let found = read_group(cluster, history, &group, retry).await?;
        for ((id, a), row) in group.iter().zip(found) {
            audit.judge(*id, a, row);
        }
    }
    audit.check_row_count();
    Ok(())
}

/// Reads the rows of `group` (up to `READS_IN_FLIGHT` transactions of
/// `READ_BATCH` reads), in order; retries the transactions that fail with
/// a temporary or unknown-result error.
async fn read_group(
    cluster: &Cluster,
    history: &Record,
    group: &[(u64, Attempt)],
    retry: Duration,
) -> Result<Vec<Option<HistoryRow>>, String> {
    let deadline = Instant::now() + retry;
    let batches: Vec<&[(u64, Attempt)]> = group.chunks(READ_BATCH).collect();
    let mut done: Vec<Option<Vec<Option<HistoryRow>>>> = vec![None; batches.len()];
    loop {
        let pending: Vec<usize> = (0..batches.len()).filter(|&i| done[i].is_none()).collect();
        if pending.is_empty() {
            break;
        }
        let mut txns = Vec::with_capacity(pending.len());
        let mut ops = Vec::with_capacity(pending.len());
        for &i in &pending {
            let mut tx = cluster.transaction();
            let batch_ops: Vec<_> = batches[i]
                .iter()
                .map(|(id, a)| {
                    // A shared lock waits for a commit still in progress;
                    // only unknown outcomes can still be in progress.
                    let lock = match a.outcome {
                        Outcome::Unknown => LockMode::Shared,
                        _ => LockMode::CommittedRead,
                    };
                    let op = tx
                        .read(history, &[Value::UInt(*id)], lock)
                        .expect("values fit");
                    tx.ignore_error(op);
                    op
                })
                .collect();
            txns.push(tx);
            ops.push(batch_ops);
        }
        let answers = Transaction::execute_all(&mut txns, ExecType::Commit).await;
        let mut failed = None;
        for (k, answer) in answers.into_iter().enumerate() {
            let i = pending[k];
            match answer {
                Ok(()) => {
                    let rows = batches[i]
                        .iter()
                        .zip(&ops[k])
                        .map(|((id, _), &op)| history_row(&txns[k], op, *id))
                        .collect::<Result<Vec<_>, String>>()?;
                    done[i] = Some(rows);
                }
                Err(e) if e.class() == ErrorClass::Permanent => {
                    return Err(format!("reading back the history: {e}"));
                }
                Err(e) => failed = Some(e),
            }
        }
        if let Some(e) = failed {
            if Instant::now() >= deadline {
                return Err(format!(
                    "reading back the history: still failing after {:.0} s: {e}",
                    retry.as_secs_f64()
                ));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Ok(done
        .into_iter()
        .flat_map(|rows| rows.expect("all read"))
        .collect())
}

/// The row a read found, `None` for "not found", an error for anything else.
fn history_row(
    tx: &Transaction,
    op: shoal_client::OpId,
    id: u64,
) -> Result<Option<HistoryRow>, String> {
    let Some(row) = tx.row(op) else {
        return match tx.op_error(op) {
            Some(e) if e.code == ErrorCode::TupleNotFound => Ok(None),
            other => Err(format!(
                "reading back {}: no row and no \"not found\" ({other:?})",
                show_id(id)
            )),
        };
    };
    match (
        row.get("from_account"),
        row.get("to_account"),
        row.get("amount"),
    ) {
        (Some(Value::UInt(from)), Some(Value::UInt(to)), Some(Value::Int(amount))) => {
            Ok(Some(HistoryRow { from, to, amount }))
        }
        other => Err(format!("reading back {}: bad row {other:?}", show_id(id))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attempt(from: u32, to: u32, amount: u16, outcome: Outcome) -> Attempt {
        Attempt {
            from,
            to,
            amount,
            outcome,
        }
    }

    fn row_of(a: &Attempt) -> Option<HistoryRow> {
        Some(HistoryRow::of(a))
    }

    #[test]
    fn ids_are_unique_and_split_back() {
        let mut seen = std::collections::HashSet::new();
        for thread in [0, 1, 7, THREADS_MAX - 1] {
            for seq in [0, 1, 2, (1 << SEQ_BITS) - 1] {
                let id = history_id(thread, seq);
                assert!(seen.insert(id), "{thread}:{seq} collides");
                assert_eq!(split_id(id), (thread, seq));
            }
        }
        assert_eq!(history_id(3, 17), (3 << 40) | 17);
        assert!(show_id(history_id(3, 17)).starts_with("id 3:17 "));
    }

    #[test]
    #[should_panic(expected = "out of the id range")]
    fn a_sequence_number_may_not_spill_into_the_task() {
        history_id(0, 1 << SEQ_BITS);
    }

    #[test]
    fn logs_number_their_attempts() {
        let mut log = AttemptLog::new(5);
        assert_eq!(log.next_id(), history_id(5, 0));
        log.attempts.push(attempt(0, 1, 1, Outcome::Aborted));
        log.attempts.push(attempt(1, 0, 1, Outcome::Committed));
        assert_eq!(log.next_id(), history_id(5, 2));
        let ids: Vec<u64> = log.iter().map(|(id, _)| id).collect();
        assert_eq!(ids, vec![history_id(5, 0), history_id(5, 1)]);
    }

    #[test]
    fn a_clean_history_verifies() {
        let mut audit = Audit::new(3);
        let c = attempt(0, 1, 10, Outcome::Committed);
        let a = attempt(1, 2, 20, Outcome::Aborted);
        let u1 = attempt(2, 0, 5, Outcome::Unknown);
        let u2 = attempt(0, 2, 7, Outcome::Unknown);
        audit.judge(1, &c, row_of(&c));
        audit.judge(2, &a, None);
        audit.judge(3, &u1, row_of(&u1));
        audit.judge(4, &u2, None);
        audit.check_row_count();
        audit.check_balances(100, &[95, 110, 95]);
        assert!(audit.history_verified(), "{:?}", audit.problems);
        assert!(audit.balances_verified(), "{:?}", audit.problems);
        assert_eq!(
            (audit.committed, audit.aborted, audit.unknown),
            (1, 1, 2),
            "counts"
        );
        assert_eq!(audit.unknown_resolved_committed, 1);
        assert_eq!(audit.unknown_resolved_aborted, 1);
        assert_eq!(audit.rows_found, 2);
    }

    #[test]
    fn a_lost_commit_is_caught() {
        let mut audit = Audit::new(2);
        let c = attempt(0, 1, 10, Outcome::Committed);
        audit.judge(history_id(1, 9), &c, None);
        audit.check_row_count();
        assert!(!audit.history_verified());
        assert!(
            audit.problems[0].contains("id 1:9 "),
            "{:?}",
            audit.problems
        );
        assert!(
            audit.problems[0].contains("missing"),
            "{:?}",
            audit.problems
        );
        // The row count is off too.
        assert_eq!(audit.history_problems, 2);
    }

    #[test]
    fn a_trace_of_an_abort_is_caught() {
        let mut audit = Audit::new(2);
        let a = attempt(0, 1, 10, Outcome::Aborted);
        audit.judge(7, &a, row_of(&a));
        audit.check_row_count();
        assert!(!audit.history_verified());
        assert!(
            audit.problems[0].contains("aborted"),
            "{:?}",
            audit.problems
        );
        assert_eq!(audit.rows_found, 1);
    }

    #[test]
    fn a_wrong_row_is_caught() {
        let mut audit = Audit::new(2);
        let c = attempt(0, 1, 10, Outcome::Committed);
        let wrong = HistoryRow {
            from: 0,
            to: 1,
            amount: 11,
        };
        audit.judge(7, &c, Some(wrong));
        audit.check_row_count();
        assert_eq!(audit.history_problems, 1, "{:?}", audit.problems);
    }

    #[test]
    fn a_transfer_applied_twice_or_half_is_caught_by_the_balances() {
        let mut audit = Audit::new(3);
        let c = attempt(0, 1, 10, Outcome::Committed);
        audit.judge(1, &c, row_of(&c));
        audit.check_row_count();
        assert!(audit.history_verified());
        // Twice: the total is still 300, but the accounts tell.
        audit.check_balances(100, &[80, 120, 100]);
        assert_eq!(audit.balance_mismatches, 2);
        // An unknown attempt resolved as aborted whose updates stayed.
        let mut audit = Audit::new(2);
        let u = attempt(0, 1, 10, Outcome::Unknown);
        audit.judge(1, &u, None);
        audit.check_row_count();
        audit.check_balances(100, &[90, 110]);
        assert!(audit.history_verified());
        assert!(!audit.balances_verified());
    }

    #[test]
    fn only_the_first_problems_are_described() {
        let mut audit = Audit::new(2);
        let c = attempt(0, 1, 1, Outcome::Committed);
        for id in 0..100 {
            audit.judge(id, &c, None);
        }
        assert_eq!(audit.history_problems, 100);
        assert_eq!(audit.problems.len(), PROBLEMS_SHOWN);
    }
}
