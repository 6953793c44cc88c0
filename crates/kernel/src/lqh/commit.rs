//! LQH: the end of a transaction on this node — commit (keeping or
//! releasing locks), complete, abort.

use super::apply::{apply_pending, Applied};
use super::redo::log_change;
use super::{Lqh, OpAt};
use crate::config::KernelConfig;
use crate::dih::Dih;
use crate::signal::{BlockSignal, FragKey, TxnRef};
use shoal_types::distribution::FragmentId;
use shoal_wire::{KeyOp, OpType};
use std::collections::VecDeque;

/// Whether this node, the last replica of an operation sent with
/// `commit_at_last`, commits the transaction at once. Not while an epoch
/// switch is prepared: it answers "prepared" and the coordinator decides
/// once the switch is done.
pub(super) fn last_replica_decides(at: &OpAt, dih: &Dih, cfg: &KernelConfig) -> bool {
    at.commit_at_last && (!dih.epoch_now().holding || cfg.faults.epoch_switch_without_hold)
}

impl Lqh {
    /// The last replica's decision: commits the transaction's changes of
    /// fragment `frag` in `epoch` (keeping the lock until complete). An
    /// update of a committed row was written in place (it has no pending
    /// change), so it is logged here.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn last_replica_commit(
        &mut self,
        txn: TxnRef,
        op: &KeyOp,
        frag: FragmentId,
        row: u32,
        epoch: u64,
        now_ms: u64,
        dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        let fkey = (op.table, frag);
        let in_place = matches!(op.op, OpType::Update | OpType::Write)
            && self
                .frags
                .get(&fkey)
                .is_some_and(|e| !e.pending.contains_key(&row) && !e.frag.is_free(row));
        if let Some(t) = self.txns.get_mut(&txn) {
            t.epoch = epoch;
        }
        self.commit_frags(txn, &[fkey], false, now_ms, dih, out);
        if in_place {
            if let Some(entry) = self.frags.get_mut(&fkey) {
                log_change(&mut self.redo, entry, fkey, row, epoch, false);
            }
        }
    }

    /// Records that the transaction commits, changing nothing yet: its
    /// changes stay pending, its locks held, until [`Lqh::finish`] at
    /// complete applies and logs them. The backups' round of a
    /// transaction on a table read from any replica: a committed read
    /// here must not see the change before every replica knows of the
    /// decision (a coordinator cut off from the others would otherwise
    /// show a commit the survivors then abort).
    pub(super) fn commit_decided(&mut self, txn: TxnRef) {
        let Some(t) = self.txns.get_mut(&txn) else {
            return;
        };
        if !t.committed && self.cfg.report_commit_points {
            self.first_commits.push((txn, t.api_node, t.trans, t.epoch));
        }
        t.committed = true;
        self.forget_if_done(txn);
    }

    /// A committed transaction that holds nothing more here (no row, no
    /// wait, nothing queued) is done on this node: its record goes, its
    /// outcome is remembered.
    fn forget_if_done(&mut self, txn: TxnRef) {
        let Some(t) = self.txns.get(&txn) else {
            return;
        };
        debug_assert!(t.committed, "only a committed record is forgotten here");
        if t.rows.is_empty() && t.waiting.is_none() && t.queued.is_empty() {
            let (api_node, trans, epoch) = (t.api_node, t.trans, t.epoch);
            self.txns.remove(&txn);
            self.remember_finished(txn, api_node, trans, true, epoch);
        }
    }

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
            redo,
            ..
        } = self;
        let Some(t) = txns.get_mut(&txn) else {
            return;
        };
        if !t.committed && cfg.report_commit_points {
            first_commits.push((txn, t.api_node, t.trans, t.epoch));
        }
        let epoch = t.epoch;
        t.rows.retain(|&(fkey, row, hash)| {
            if !frags.contains(&fkey) {
                return true;
            }
            let Some(entry) = entries.get_mut(&fkey) else {
                *ops_in_use -= 1;
                return false;
            };
            let applied = apply_pending(entry, mem, txn, row, hash, true);
            if matches!(applied, Applied::Written | Applied::Deleted) {
                log_change(redo, entry, fkey, row, epoch, applied == Applied::Deleted);
            }
            if applied.gone() {
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
        self.forget_if_done(txn);
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
            redo,
            ..
        } = self;
        let Some(t) = txns.get_mut(&txn) else {
            return;
        };
        if commit && !t.committed && cfg.report_commit_points && !t.rows.is_empty() {
            first_commits.push((txn, t.api_node, t.trans, t.epoch));
        }
        let epoch = t.epoch;
        *ops_in_use -= t.queued.len();
        t.queued.clear();
        if let Some(token) = t.waiting.take() {
            if let Some(w) = waiting.remove(&token) {
                *ops_in_use -= w.counted as usize;
                let held = super::holds_row(t, (w.op.table, w.at.frag), w.row);
                super::drop_wait(frags, granted, token, &w, held);
            }
        }
        *ops_in_use -= t.rows.len();
        for &(fkey, row, hash) in &t.rows {
            let Some(entry) = frags.get_mut(&fkey) else {
                continue;
            };
            let commit = commit
                || (cfg.faults.unique_entry_kept_on_abort
                    && entry.layout.table.options.index_of.is_some());
            let applied = apply_pending(entry, mem, txn, row, hash, commit);
            if matches!(applied, Applied::Written | Applied::Deleted) {
                log_change(redo, entry, fkey, row, epoch, applied == Applied::Deleted);
            }
            if applied.gone() {
                entry.frag.locks.release_vanished(row, txn, restart);
            } else {
                entry.frag.locks.release(row, txn, granted);
            }
        }
        let (api_node, trans, committed) = (t.api_node, t.trans, commit || t.committed);
        txns.remove(&txn);
        let epoch = if committed { epoch } else { 0 };
        self.remember_finished(txn, api_node, trans, committed, epoch);
        self.resume_granted(now_ms, dih, out);
    }
}
