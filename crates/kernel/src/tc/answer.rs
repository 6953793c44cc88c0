//! TC: what comes back from LQH — operation answers, and the
//! confirmations of each commit, complete and abort round.

use super::{conf, AbortReply, Tc, TxnState, Wave, RESULT_FIXED_BYTES};
use crate::dih::Dih;
use crate::node::Output;
use crate::signal::{BlockSignal, ClusterSignal, TxnRef};
use shoal_types::{ErrorCode, ShoalError};
use shoal_wire::signals::OP_IGNORE_ERROR;
use shoal_wire::{ExecType, OpResult, TransState};
use std::collections::VecDeque;

/// An operation's answer from LQH.
pub(super) enum Answer {
    /// Done; with the unique-index changes its primary found.
    Done(OpResult, Box<[u8]>),
    /// Done, and the last replica committed its copy (`commit_at_last`)
    /// in this epoch.
    CommittedAtLast(OpResult, u64),
    Failed(ShoalError),
}

impl Tc {
    pub fn handle(
        &mut self,
        now_ms: u64,
        from: u16,
        sig: BlockSignal,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        match sig {
            BlockSignal::LqhKeyConf {
                txn,
                op_no,
                committed,
                epoch,
                result,
                fired,
            } => {
                // A write that committed at its last replica was sent
                // expecting no index changes: any reported are for an
                // index this TC does not keep yet (see `unique`).
                let answer = if committed {
                    Answer::CommittedAtLast(result, epoch)
                } else {
                    Answer::Done(result, fired)
                };
                self.op_answered(now_ms, txn, op_no, answer, dih, q, out)
            }
            BlockSignal::LqhKeyRef { txn, op_no, error } => {
                self.op_answered(now_ms, txn, op_no, Answer::Failed(error), dih, q, out)
            }
            // Confirmations: a repeated or late one (its round is over, or
            // the transaction is gone) is ignored, so the commit-phase
            // signals may be delivered more than once.
            BlockSignal::CommitConf { txn, node, release } => {
                let Some(t) = self.txns.get_mut(&txn) else {
                    return;
                };
                let TxnState::Committing(wave) = t.state else {
                    return;
                };
                if (wave == Wave::Primaries) != release || !t.confirmed_by(node) {
                    return;
                }
                if t.awaiting.is_empty() {
                    match wave {
                        Wave::Backups => self.commit_wave(txn, Wave::Primaries, q, out),
                        Wave::Primaries => self.committed(txn, q, out),
                    }
                }
            }
            BlockSignal::CompleteConf { txn, node } => {
                let Some(t) = self.txns.get_mut(&txn) else {
                    return;
                };
                if !matches!(t.state, TxnState::Completing) || !t.confirmed_by(node) {
                    return;
                }
                if t.awaiting.is_empty() {
                    self.completed(txn, q, out);
                }
            }
            BlockSignal::AbortConf {
                txn,
                node,
                committed,
            } => {
                let Some(t) = self.txns.get_mut(&txn) else {
                    return;
                };
                if !matches!(t.state, TxnState::Aborting(_)) || !t.confirmed_by(node) {
                    return;
                }
                if committed {
                    // Its last replica decided before the coordinator heard:
                    // the transaction committed after all.
                    t.found_committed = true;
                }
                if t.awaiting.is_empty() {
                    t.last_active_ms = now_ms;
                    self.aborted(txn, q, out);
                }
            }
            BlockSignal::Cluster(c) => self.cluster_signal(from, *c, dih, q, out),
            other => panic!("TC got a signal meant for another block: {other:?}"),
        }
    }

    fn cluster_signal(
        &mut self,
        _from: u16,
        sig: ClusterSignal,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        match sig {
            ClusterSignal::TakeoverTxn {
                reporter,
                txn,
                api_node,
                trans,
                committed,
                epoch,
                frags,
                ..
            } => self.takeover_report(reporter, txn, api_node, trans, committed, epoch, frags),
            ClusterSignal::TakeoverConf {
                reporter, failed, ..
            } => self.takeover_reported(reporter, failed, dih, q, out),
            ClusterSignal::Scan(s) => self.scan_answer(s, dih, q, out),
            other => panic!("TC got a signal meant for another block: {other:?}"),
        }
    }

    /// An operation's answer: its result, or the error that fails it.
    #[allow(clippy::too_many_arguments)]
    fn op_answered(
        &mut self,
        now_ms: u64,
        txn: TxnRef,
        op_no: u32,
        answer: Answer,
        dih: &Dih,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        // Answers for a transaction that is already aborting (or gone), for
        // an earlier request, or repeated, are dropped.
        let Some(t) = self
            .txns
            .get_mut(&txn)
            .filter(|t| matches!(t.state, TxnState::Executing))
        else {
            return;
        };
        let Some(i) = op_no
            .checked_sub(t.op_base)
            .map(|i| i as usize)
            .filter(|&i| i < t.answered.len() && !t.answered[i])
        else {
            return;
        };
        if matches!(answer, Answer::CommittedAtLast(..)) && t.commit_at_last_op != Some(op_no) {
            // Only the operation sent with `commit_at_last` can have been
            // committed by its last replica; anything else comes from a
            // broken or forged peer: ignore it.
            return;
        }
        t.answered[i] = true;
        let op_index = i as u16;
        t.outstanding -= 1;
        if t.op_chains[i].len() > 1 {
            t.outstanding_chained -= 1;
        }
        if let Answer::CommittedAtLast(_, epoch) = answer {
            // The last replica committed: so must everyone. (The only
            // abort that can be pending is for a vanished client, which
            // hears nothing either way.)
            t.backups_committed = true;
            t.pending_abort = None;
            self.count_in_epoch(txn, epoch);
        }
        let t = self.txns.get_mut(&txn).expect("present");
        if t.pending_abort.is_some() {
            if t.outstanding_chained == 0 {
                let reply = t.pending_abort.take().expect("checked");
                self.send_aborts(txn, reply, q, out);
            }
            return;
        }
        if i >= t.results.len() {
            let k = i - t.results.len();
            return self.derived_answered(now_ms, txn, k, answer, dih, q, out);
        }
        let result = match answer {
            Answer::Done(result, fired) => {
                if !fired.is_empty() {
                    if let Err(error) = self.fire(txn, op_index, &fired, dih, q) {
                        return self.abort(txn, AbortReply::Failed { error, op_index }, q, out);
                    }
                }
                result
            }
            Answer::CommittedAtLast(result, _) => result,
            Answer::Failed(error) => {
                let ignorable = matches!(
                    error.code,
                    ErrorCode::TupleNotFound | ErrorCode::TupleAlreadyExists
                );
                if !(ignorable && t.op_flags[i] & OP_IGNORE_ERROR != 0) {
                    return self.abort(txn, AbortReply::Failed { error, op_index }, q, out);
                }
                OpResult {
                    code: error.code as u16,
                    data: Vec::new(),
                }
            }
        };
        let t = self.txns.get_mut(&txn).expect("present");
        t.answer_bytes += RESULT_FIXED_BYTES + result.data.len();
        if t.answer_bytes > self.cfg.max_answer_bytes && !t.backups_committed {
            // The answer would not fit a frame to the client: fail the
            // request now, before it can commit.
            let error = answer_too_large(self.cfg.max_answer_bytes);
            return self.abort(txn, AbortReply::Failed { error, op_index }, q, out);
        }
        t.results[i] = Some(result);
        if t.outstanding == 0 {
            self.execute_done(now_ms, txn, q, out);
        }
    }

    /// Every operation of the request answered.
    pub(super) fn execute_done(
        &mut self,
        now_ms: u64,
        txn: TxnRef,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let t = self.txns.get_mut(&txn).expect("present");
        match t.exec {
            ExecType::NoCommit => {
                t.state = TxnState::Open;
                // Idle time counts from the answer, not from the request:
                // time spent waiting for locks is not inactivity.
                t.last_active_ms = now_ms;
                let results = take_results(&mut t.results);
                out.push(Output::Send {
                    conn: t.conn,
                    signal: conf(t.trans, t.request, TransState::Open, false, results),
                });
            }
            ExecType::Commit if !t.parts.is_empty() => self.decide_commit(txn, q, out),
            ExecType::Commit => {
                // Committed reads only: nothing to commit anywhere.
                let results = take_results(&mut t.results);
                out.push(Output::Send {
                    conn: t.conn,
                    signal: conf(t.trans, t.request, TransState::Committed, false, results),
                });
                self.remove(txn, q, out);
            }
            ExecType::Rollback => unreachable!("rollback never executes operations"),
        }
    }
}

/// The error for a request whose answer would not fit a frame to the
/// client.
pub(super) fn answer_too_large(max: usize) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::RequestTooLarge,
        format!(
            "the answer to this request would take more than {max} bytes (the largest frame to a client); read fewer rows or columns per execute"
        ),
    )
}

/// The results of a request whose operations have all been answered.
pub(super) fn take_results(results: &mut Vec<Option<OpResult>>) -> Vec<OpResult> {
    results
        .drain(..)
        .map(|r| {
            // Every operation answered (the count reached zero) and each
            // answer filled its slot; an empty result stands in should an
            // invariant break, rather than taking the node down.
            debug_assert!(r.is_some(), "an unanswered operation");
            r.unwrap_or(OpResult {
                code: ErrorCode::Internal as u16,
                data: Vec::new(),
            })
        })
        .collect()
}
