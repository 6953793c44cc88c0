//! LQH: the end of a transaction on this node — commit (keeping or
//! releasing locks), complete, abort.

use super::apply::apply_pending;
use super::Lqh;
use crate::dih::Dih;
use crate::signal::{BlockSignal, FragKey, TxnRef};
use std::collections::VecDeque;

impl Lqh {
    /// Commits the transaction's changes in `frags` (one round of the
    /// commit protocol); with `release`, also releases its locks there.
    /// Locks kept are released by [`Lqh::finish`] at complete.
    pub(super) fn commit_frags(
        &mut self,
        txn: TxnRef,
        frags: &[FragKey],
        release: bool,
        now_ms: u64,
        dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        let Lqh {
            txns,
            frags: entries,
            mem,
            restart,
            granted,
            ops_in_use,
            first_commits,
            cfg,
            ..
        } = self;
        let Some(t) = txns.get_mut(&txn) else {
            return;
        };
        if !t.committed && cfg.report_commit_points {
            first_commits.push((txn, t.api_node, t.trans));
        }
        t.rows.retain(|&(fkey, row, hash)| {
            if !frags.contains(&fkey) {
                return true;
            }
            let Some(entry) = entries.get_mut(&fkey) else {
                *ops_in_use -= 1;
                return false;
            };
            if apply_pending(entry, mem, txn, row, hash, true) {
                // The row is gone (a committed delete): its lock goes too,
                // whatever `release` says, so the row id can be reused.
                entry.frag.locks.release_vanished(row, txn, restart);
                *ops_in_use -= 1;
                false
            } else if release {
                entry.frag.locks.release(row, txn, granted);
                *ops_in_use -= 1;
                false
            } else {
                true
            }
        });
        t.committed = true;
        if t.rows.is_empty() && t.waiting.is_none() && t.queued.is_empty() {
            let (api_node, trans) = (t.api_node, t.trans);
            self.txns.remove(&txn);
            self.remember_finished(txn, api_node, trans, true);
        }
        self.resume_granted(now_ms, dih, out);
    }

    /// Ends a transaction here: commits (`commit = true`) or drops what is
    /// still pending, cancels its lock wait, releases every lock.
    pub(super) fn finish(
        &mut self,
        txn: TxnRef,
        commit: bool,
        now_ms: u64,
        dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        let Lqh {
            txns,
            frags,
            mem,
            waiting,
            restart,
            granted,
            ops_in_use,
            first_commits,
            cfg,
            ..
        } = self;
        let Some(t) = txns.get_mut(&txn) else {
            return;
        };
        if commit && !t.committed && cfg.report_commit_points && !t.rows.is_empty() {
            first_commits.push((txn, t.api_node, t.trans));
        }
        *ops_in_use -= t.queued.len();
        t.queued.clear();
        if let Some(token) = t.waiting.take() {
            if let Some(w) = waiting.remove(&token) {
                *ops_in_use -= w.counted as usize;
                if let Some(entry) = frags.get_mut(&(w.op.table, w.at.frag)) {
                    entry.frag.locks.cancel_wait(w.row, txn, granted);
                }
            }
        }
        *ops_in_use -= t.rows.len();
        for &(fkey, row, hash) in &t.rows {
            let Some(entry) = frags.get_mut(&fkey) else {
                continue;
            };
            if apply_pending(entry, mem, txn, row, hash, commit) {
                entry.frag.locks.release_vanished(row, txn, restart);
            } else {
                entry.frag.locks.release(row, txn, granted);
            }
        }
        let (api_node, trans, committed) = (t.api_node, t.trans, commit || t.committed);
        txns.remove(&txn);
        self.remember_finished(txn, api_node, trans, committed);
        self.resume_granted(now_ms, dih, out);
    }
}
