//! The bank's work against the cluster while it runs: the transfer tasks
//! (one attempt after another, each logged with its outcome) and the
//! checker that reads every balance.
//!
//! An attempt's outcome is decided by where it failed and by the error's
//! class: the history row travels with the commit request, so nothing
//! before it can leave a row; at commit, a temporary error means nothing
//! happened and an unknown-result error means it may have. A permanent
//! error stops the run.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use shoal_client::{
    Cluster, ErrorClass, ErrorCode, ExecType, LockMode, Record, ShoalError, Transaction, Value,
};

use super::history::{show_id, Attempt, AttemptLog, Outcome};
use super::timeline::Counters;
use super::Tables;

/// A transfer moves 1 to this much.
const AMOUNT_MAX: u16 = 100;
/// How long a transfer task pauses after "no data node reachable" or "node
/// not ready", so that it does not spin while the cluster recovers.
const BACKOFF: Duration = Duration::from_millis(10);
/// How long the checker pauses after a temporary error other than a
/// deadlock timeout (which has already waited).
const CHECK_BACKOFF: Duration = Duration::from_millis(50);

/// One transfer task: attempts until `stop`, logging every attempt.
/// Returns its log, or the permanent error that stopped it.
pub(super) async fn transfer_task(
    cluster: Cluster,
    tables: Tables,
    thread: u32,
    accounts: u64,
    stop: Arc<AtomicBool>,
    counters: Arc<Counters>,
) -> Result<AttemptLog, String> {
    let mut rng = SmallRng::seed_from_u64(0xBA4C + u64::from(thread));
    let mut log = AttemptLog::new(thread);
    while !stop.load(Ordering::Relaxed) {
        let from = rng.random_range(0..accounts);
        let to = (from + rng.random_range(1..accounts)) % accounts;
        let amount = rng.random_range(1..=AMOUNT_MAX);
        let id = log.next_id();
        let result = transfer(&cluster, &tables, id, from, to, amount).await;
        let outcome = outcome_of(&result)
            .map_err(|e| format!("transfer {} ({from} -> {to}): {e}", show_id(id)))?;
        log.attempts.push(Attempt {
            from: from as u32,
            to: to as u32,
            amount,
            outcome,
        });
        let counter = match outcome {
            Outcome::Committed => &counters.transfers,
            Outcome::Aborted => &counters.aborts,
            Outcome::Unknown => &counters.unknown,
        };
        counter.fetch_add(1, Ordering::Relaxed);
        if let Err(f) = &result {
            if needs_backoff(f.error()) {
                tokio::time::sleep(BACKOFF).await;
            }
        }
    }
    Ok(log)
}

/// How a transfer failed: before its commit request (and so its history
/// row) was sent, or with it.
#[derive(Debug)]
enum Failure {
    BeforeCommit(ShoalError),
    AtCommit(ShoalError),
}

impl Failure {
    fn error(&self) -> &ShoalError {
        match self {
            Failure::BeforeCommit(e) | Failure::AtCommit(e) => e,
        }
    }
}

/// What an attempt's result means for its history row, or the permanent
/// error that must stop the run.
fn outcome_of(result: &Result<(), Failure>) -> Result<Outcome, &ShoalError> {
    match result {
        Ok(()) => Ok(Outcome::Committed),
        Err(f) if f.error().class() == ErrorClass::Permanent => Err(f.error()),
        // The history row travels with the commit request: an attempt that
        // failed before sending it left nothing, even when the error's
        // class is "unknown result" (a read that timed out).
        Err(Failure::BeforeCommit(_)) => Ok(Outcome::Aborted),
        Err(Failure::AtCommit(e)) if e.class() == ErrorClass::UnknownResult => Ok(Outcome::Unknown),
        Err(Failure::AtCommit(_)) => Ok(Outcome::Aborted),
    }
}

/// True for the errors after which a task should pause before its next
/// attempt (no data node reachable, or the node not ready): retrying at
/// once would only spin.
fn needs_backoff(e: &ShoalError) -> bool {
    matches!(e.code, ErrorCode::ClusterFailure | ErrorCode::NodeNotReady)
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
/// transfers can deadlock and one of them times out), then move the money
/// and insert the history row under `id` in the commit request.
async fn transfer(
    cluster: &Cluster,
    tables: &Tables,
    id: u64,
    from: u64,
    to: u64,
    amount: u16,
) -> Result<(), Failure> {
    let rec = &tables.accounts;
    let amount = i64::from(amount);
    let mut tx = cluster.transaction();
    let prepare = async {
        let a = tx.read(rec, &[Value::UInt(from)], LockMode::Exclusive)?;
        let b = tx.read(rec, &[Value::UInt(to)], LockMode::Exclusive)?;
        tx.execute(ExecType::NoCommit).await?;
        let (balance_a, balance_b) = (balance_of(&tx, a)?, balance_of(&tx, b)?);
        tx.update(rec, &[Value::UInt(from), Value::Int(balance_a - amount)])?;
        tx.update(rec, &[Value::UInt(to), Value::Int(balance_b + amount)])?;
        tx.insert(
            &tables.history,
            &[
                Value::UInt(id),
                Value::UInt(from),
                Value::UInt(to),
                Value::Int(amount),
            ],
        )?;
        Ok(())
    };
    prepare.await.map_err(Failure::BeforeCommit)?;
    tx.execute(ExecType::Commit)
        .await
        .map_err(Failure::AtCommit)
}

/// Every balance, read by a shared-lock scan in one transaction (NDB's
/// bank checks by scan): a consistent snapshot even while transfers run,
/// since every row stays locked once read until the transaction ends.
/// Every account must be there. Retries temporary errors (deadlock
/// timeouts, node failures) for up to `retry`.
pub(super) async fn balances(
    cluster: &Cluster,
    rec: &Record,
    accounts: u64,
    retry: Duration,
) -> Result<Vec<i64>, String> {
    let deadline = Instant::now() + retry;
    loop {
        match scan_balances(cluster, rec, accounts).await {
            Ok(balances) => return Ok(balances),
            Err(e) if e.class() == ErrorClass::Permanent => {
                return Err(format!("summing the balances: {e}"))
            }
            Err(e) if Instant::now() >= deadline => {
                return Err(format!(
                    "summing the balances: still failing after {:.0} s: {e}",
                    retry.as_secs_f64()
                ))
            }
            Err(e) if e.code == ErrorCode::DeadlockTimeout => {}
            Err(_) => tokio::time::sleep(CHECK_BACKOFF).await,
        }
    }
}

/// One try of [`balances`].
async fn scan_balances(
    cluster: &Cluster,
    rec: &Record,
    accounts: u64,
) -> Result<Vec<i64>, ShoalError> {
    let mut tx = cluster.transaction();
    let mut found: Vec<Option<i64>> = vec![None; accounts as usize];
    {
        let mut scan = tx
            .scan_record(rec)
            .lock(LockMode::Shared)
            .batch(1024, 1 << 20)
            .open_locking(&mut tx)
            .await?;
        while let Some(row) = scan.next_row().await? {
            let (Some(Value::UInt(id)), Some(Value::Int(balance))) =
                (row.get("id"), row.get("balance"))
            else {
                return Err(ShoalError::with_detail(
                    ErrorCode::Internal,
                    format!("an account row read as {:?}", row.values()),
                ));
            };
            match found.get_mut(id as usize) {
                Some(slot @ None) => *slot = Some(balance),
                Some(Some(_)) => {
                    return Err(ShoalError::with_detail(
                        ErrorCode::Internal,
                        format!("account {id} came twice from one scan"),
                    ))
                }
                None => {
                    return Err(ShoalError::with_detail(
                        ErrorCode::Internal,
                        format!("account {id} exists, beyond the {accounts} accounts"),
                    ))
                }
            }
        }
    }
    tx.execute(ExecType::Commit).await?;
    found
        .into_iter()
        .enumerate()
        .map(|(id, b)| {
            b.ok_or_else(|| {
                ShoalError::with_detail(
                    ErrorCode::Internal,
                    format!("account {id} is missing: its row is gone"),
                )
            })
        })
        .collect()
}
#[cfg(test)]
mod tests {
    use super::*;

    fn err(code: ErrorCode) -> ShoalError {
        ShoalError::new(code)
    }

    #[test]
    fn outcomes_follow_the_error_class_and_the_phase() {
        use Failure::*;
        assert_eq!(outcome_of(&Ok(())), Ok(Outcome::Committed));
        for code in [
            ErrorCode::DeadlockTimeout,
            ErrorCode::ClusterFailure,
            ErrorCode::NodeFailureAbort,
        ] {
            assert_eq!(
                outcome_of(&Err(BeforeCommit(err(code)))),
                Ok(Outcome::Aborted)
            );
            assert_eq!(outcome_of(&Err(AtCommit(err(code)))), Ok(Outcome::Aborted));
        }
        let unknown = ErrorCode::CommitOutcomeUnknown;
        assert_eq!(
            outcome_of(&Err(AtCommit(err(unknown)))),
            Ok(Outcome::Unknown)
        );
        // A read that timed out: the commit (and the row) was never sent.
        let timeout = ErrorCode::ReceiveTimeout;
        assert_eq!(
            outcome_of(&Err(BeforeCommit(err(timeout)))),
            Ok(Outcome::Aborted)
        );
        assert_eq!(
            outcome_of(&Err(AtCommit(err(timeout)))),
            Ok(Outcome::Unknown)
        );
        let permanent = Err(AtCommit(err(ErrorCode::TupleAlreadyExists)));
        assert_eq!(
            outcome_of(&permanent).unwrap_err().code,
            ErrorCode::TupleAlreadyExists
        );
    }

    #[test]
    fn only_unreachable_nodes_back_off() {
        assert!(needs_backoff(&err(ErrorCode::ClusterFailure)));
        assert!(needs_backoff(&err(ErrorCode::NodeNotReady)));
        assert!(!needs_backoff(&err(ErrorCode::DeadlockTimeout)));
        assert!(!needs_backoff(&err(ErrorCode::NodeFailureAbort)));
    }
}
