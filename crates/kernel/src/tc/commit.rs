//! TC: the end of a transaction — the commit waves (backups, then
//! primaries), complete, and abort.

use super::{conf, reject, AbortReply, Tc, TxnState, Wave};
use crate::node::Output;
use crate::signal::{BlockSignal, TxnRef};
use shoal_wire::TransState;
use std::collections::VecDeque;

impl Tc {
    /// Sends one round of `CommitReq`s; skips a round with nobody in it.
    pub(super) fn commit_wave(
        &mut self,
        txn: TxnRef,
        wave: Wave,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let t = self.txns.get_mut(&txn).expect("present");
        debug_assert!(
            matches!(
                t.state,
                TxnState::Executing | TxnState::Committing(Wave::Backups)
            ) || t.taken_over_from.is_some(),
            "commit wave {wave:?} from another state"
        );
        t.state = TxnState::Committing(wave);
        t.awaiting.clear();
        for part in &t.parts {
            let node = part.node;
            let frags = match wave {
                Wave::Backups => &part.backup,
                Wave::Primaries => &part.primary,
            };
            if frags.is_empty() {
                continue;
            }
            q.push_back(BlockSignal::CommitReq {
                txn,
                node,
                frags: crate::signal::FragList::new(frags),
                release: wave == Wave::Primaries,
                visible_at_complete: wave == Wave::Backups
                    && t.ack_after_complete
                    && !self.cfg.faults.backups_show_commit_early,
                epoch: t.epoch,
            });
            t.awaiting.push(node);
        }
        if t.awaiting.is_empty() {
            match wave {
                Wave::Backups => self.commit_wave(txn, Wave::Primaries, q, out),
                Wave::Primaries => self.committed(txn, q, out),
            }
        }
    }

    /// Every replica holds the commit: answer the client, then let the
    /// backups release their locks.
    pub(super) fn committed(
        &mut self,
        txn: TxnRef,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let t = self.txns.get_mut(&txn).expect("present");
        assert!(
            matches!(t.state, TxnState::Committing(Wave::Primaries)),
            "committed outside the primaries' wave"
        );
        t.committed = true;
        let results = super::answer::take_results(&mut t.results);
        // A transaction whose backups apply at complete is whole (on
        // every replica, in every redo log) only once they confirm it.
        let whole = !t.ack_after_complete;
        let counted = t.epoch_counted && whole;
        if self.cfg.report_commit_points && whole {
            out.push(Output::CommitDone {
                conn: t.conn,
                trans: t.trans,
                txn,
            });
        }
        // The replicas keep a commit marker until the client acknowledges.
        let ack_wanted = !t.client_gone;
        let reply = conf(
            t.trans,
            t.request,
            TransState::Committed,
            ack_wanted,
            results,
        );
        if t.ack_after_complete {
            t.held_reply = Some(reply);
        } else if !t.client_gone {
            let (conn, epoch, durable) = (t.conn, t.epoch, t.durable_answer);
            self.answer_committed(conn, epoch, durable, reply, out);
        }
        let t = self.txns.get_mut(&txn).expect("present");
        t.state = TxnState::Completing;
        t.awaiting.clear();
        if counted {
            // Every replica has the commit (and logged it): the epoch no
            // longer waits for this transaction.
            t.epoch_counted = false;
            let epoch = t.epoch;
            self.epochs.remove(epoch);
        }
        // Only a held answer waits for the backups to confirm; otherwise
        // the transaction is done here once the orders are out (a
        // coordinator taking over finds a backup's record marked committed
        // and completes it again).
        let confirm = t.ack_after_complete;
        for part in &t.parts {
            if !part.backup.is_empty() {
                q.push_back(BlockSignal::CompleteReq {
                    txn,
                    node: part.node,
                    confirm,
                });
                if confirm {
                    t.awaiting.push(part.node);
                }
            }
        }
        if t.awaiting.is_empty() {
            self.completed(txn, q, out);
        }
    }

    /// Every replica released the transaction: send a held answer, forget
    /// it (and, if it was counted in its epoch, uncount it).
    pub(super) fn completed(
        &mut self,
        txn: TxnRef,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let t = self.txns.get_mut(&txn).expect("present");
        if t.ack_after_complete && self.cfg.report_commit_points {
            out.push(Output::CommitDone {
                conn: t.conn,
                trans: t.trans,
                txn,
            });
        }
        if let Some(reply) = t.held_reply.take() {
            if !t.client_gone {
                let (conn, epoch, durable) = (t.conn, t.epoch, t.durable_answer);
                self.answer_committed(conn, epoch, durable, reply, out);
            }
        }
        self.remove(txn, q, out);
    }

    pub(super) fn abort(
        &mut self,
        txn: TxnRef,
        reply: AbortReply,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let t = self.txns.get_mut(&txn).expect("present");
        if t.outstanding_chained > 0 && matches!(t.state, TxnState::Executing) {
            t.pending_abort = Some(reply);
        } else {
            self.send_aborts(txn, reply, q, out);
        }
    }

    pub(super) fn send_aborts(
        &mut self,
        txn: TxnRef,
        reply: AbortReply,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let t = self.txns.get_mut(&txn).expect("present");
        assert!(
            !t.committed && !t.backups_committed,
            "aborting a committed transaction"
        );
        t.found_committed = false;
        if self.cfg.report_commit_points {
            out.push(Output::AbortDecided { txn });
        }
        t.awaiting = t.parts.iter().map(|p| p.node).collect();
        t.state = TxnState::Aborting(reply);
        if t.awaiting.is_empty() {
            return self.aborted(txn, q, out);
        }
        for part in &t.parts {
            q.push_back(BlockSignal::AbortReq {
                txn,
                node: part.node,
            });
        }
    }

    /// Every node confirmed the abort: tell the client (or keep a
    /// tombstone for its next request), forget the transaction.
    pub(super) fn aborted(
        &mut self,
        txn: TxnRef,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let t = self.txns.get_mut(&txn).expect("present");
        let TxnState::Aborting(reply) = std::mem::replace(&mut t.state, TxnState::Open) else {
            panic!("aborted outside Aborting");
        };
        if t.found_committed {
            // The only operation's last replica committed it before its
            // primary failed: the abort turned into the commit there.
            t.committed = true;
            let (conn, trans, request, gone) = (t.conn, t.trans, t.request, t.client_gone);
            let results: Vec<shoal_wire::OpResult> = t
                .results
                .drain(..)
                .map(|r| {
                    r.unwrap_or(shoal_wire::OpResult {
                        code: 0,
                        data: Vec::new(),
                    })
                })
                .collect();
            if self.cfg.report_commit_points {
                out.push(Output::CommitDone { conn, trans, txn });
            }
            if !gone {
                out.push(Output::Send {
                    conn,
                    signal: conf(trans, request, TransState::Committed, true, results),
                });
            }
            return self.remove(txn, q, out);
        }
        t.parts.clear();
        let (conn, trans, request, gone) = (t.conn, t.trans, t.request, t.client_gone);
        if self.cfg.report_commit_points {
            out.push(Output::AbortDone { txn });
        }
        match reply {
            AbortReply::RolledBack if !gone => {
                out.push(Output::Send {
                    conn,
                    signal: conf(trans, request, TransState::Aborted, false, Vec::new()),
                });
                self.remove(txn, q, out);
            }
            AbortReply::Failed { error, op_index } if !gone => {
                out.push(Output::Send {
                    conn,
                    signal: reject(trans, request, &error, op_index),
                });
                self.remove(txn, q, out);
            }
            AbortReply::Later(error) if !gone => t.state = TxnState::Ended(error),
            _ => self.remove(txn, q, out),
        }
    }
}
