//! TC: the epoch each committing transaction belongs to, and how far this
//! coordinator's epochs are complete (every transaction of them committed
//! on every replica, so every replica has logged it).
//!
//! A transaction is counted from its commit decision (or, for one whose
//! last replica may decide, from the moment that operation is sent: the
//! replica decides in this epoch or a later one) until every replica has
//! confirmed the commit, or until it ends aborted.

use super::{Tc, TxnState, Wave};
use crate::dih::EpochNow;
use crate::node::{ConnId, Output};
use crate::signal::{BlockSignal, TxnRef};
use shoal_wire::Signal;
use std::collections::VecDeque;

#[derive(Default)]
pub(super) struct EpochBook {
    /// Committing transactions per epoch, ascending by epoch: a few
    /// entries (the epochs still in flight), so a short deque searched
    /// from the back beats a tree on every commit's path.
    committing: VecDeque<(u64, u32)>,
    /// An epoch's count fell to zero: the complete epoch may have
    /// advanced.
    changed: bool,
}

impl EpochBook {
    fn add(&mut self, epoch: u64) {
        // New commits are mostly of the newest epoch: look from the back.
        let at = self.committing.iter().rposition(|&(e, _)| e <= epoch);
        match at {
            Some(i) if self.committing[i].0 == epoch => self.committing[i].1 += 1,
            Some(i) => self.committing.insert(i + 1, (epoch, 1)),
            None => self.committing.push_front((epoch, 1)),
        }
    }

    pub(super) fn remove(&mut self, epoch: u64) {
        let i = self
            .committing
            .iter()
            .position(|&(e, _)| e == epoch)
            .expect("a counted transaction's epoch is in the book");
        self.committing[i].1 -= 1;
        if self.committing[i].1 == 0 {
            self.committing.remove(i);
            self.changed = true;
        }
    }

    fn oldest(&self) -> Option<u64> {
        self.committing.front().map(|&(e, _)| e)
    }

    fn count(&self) -> usize {
        self.committing.iter().map(|&(_, n)| n as usize).sum()
    }
}

impl Tc {
    /// Counts `txn` as committing in `epoch` (epochs run), or moves it
    /// there from the epoch it was counted in.
    pub(super) fn count_in_epoch(&mut self, txn: TxnRef, epoch: u64) {
        if epoch == 0 {
            return;
        }
        let Some(t) = self.txns.get_mut(&txn) else {
            return;
        };
        if t.epoch_counted {
            if t.epoch == epoch {
                return;
            }
            self.epochs.remove(t.epoch);
        }
        t.epoch = epoch;
        t.epoch_counted = true;
        self.epochs.add(epoch);
    }

    /// `txn` no longer holds its epoch back (committed everywhere, or
    /// ended aborted).
    pub(super) fn uncount_epoch(&mut self, txn: TxnRef) {
        if let Some(t) = self.txns.get_mut(&txn) {
            if t.epoch_counted {
                t.epoch_counted = false;
                self.epochs.remove(t.epoch);
            }
        }
    }

    /// Every transaction this node coordinates of an epoch up to the one
    /// returned is committed on every replica (`current` is never
    /// complete: commits still join it).
    pub fn completed_through(&self, current: u64) -> u64 {
        let before_current = current.saturating_sub(1);
        match self.committing_oldest() {
            Some(oldest) => before_current.min(oldest - 1),
            None => before_current,
        }
    }

    fn committing_oldest(&self) -> Option<u64> {
        self.epochs.oldest()
    }

    /// The commit decision of a transaction whose operations all
    /// succeeded: its epoch is the current one, unless a switch is being
    /// prepared, which holds it until the switch is done.
    pub(super) fn decide_commit(
        &mut self,
        txn: TxnRef,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        let now = self.epoch_now;
        let t = self.txns.get_mut(&txn).expect("present");
        let wave = if t.backups_committed {
            // Its last replica decided, in the epoch it reported.
            Wave::Primaries
        } else {
            if now.holding && !self.cfg.faults.epoch_switch_without_hold {
                t.held_for_epoch = true;
                self.held.push(txn);
                return;
            }
            self.count_in_epoch(txn, now.current);
            Wave::Backups
        };
        let t = self.txns.get_mut(&txn).expect("present");
        if self.cfg.report_commit_points {
            out.push(Output::CommitPoint {
                conn: t.conn,
                trans: t.trans,
                txn,
                results: t.results.iter().flatten().cloned().collect(),
            });
        }
        self.commit_wave(txn, wave, q, out);
    }

    /// Sends a `Committed` answer, or, for a client that asked for a
    /// durable commit, keeps it until `epoch` is durable.
    pub(super) fn answer_committed(
        &mut self,
        conn: ConnId,
        epoch: u64,
        durable: bool,
        reply: Signal,
        out: &mut Vec<Output>,
    ) {
        if durable && epoch > self.durable_epoch {
            self.durable_waits
                .entry(epoch)
                .or_default()
                .push((conn, reply));
        } else {
            out.push(Output::Send {
                conn,
                signal: reply,
            });
        }
    }

    /// `epoch` is durable on every live node: the answers waiting for it
    /// go out.
    pub fn epoch_durable(
        &mut self,
        epoch: u64,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        self.durable_epoch = self.durable_epoch.max(epoch);
        while let Some(entry) = self.durable_waits.first_entry() {
            if *entry.key() > self.durable_epoch {
                break;
            }
            for (conn, signal) in entry.remove() {
                out.push(Output::Send { conn, signal });
            }
        }
        self.takeovers_durable(q, out);
    }

    /// Whether the complete epoch may have moved since the last call.
    pub fn take_epoch_change(&mut self) -> bool {
        std::mem::take(&mut self.epochs.changed)
    }

    /// The transactions counted as committing, one line each (to debug a
    /// stalled epoch).
    pub fn describe_committing(&self) -> Vec<String> {
        self.txns
            .iter()
            .filter(|(_, t)| t.epoch_counted)
            .map(|(r, t)| {
                format!(
                    "{r:#x} epoch {} state {:?} outstanding {} held {} parts {:?}",
                    t.epoch,
                    t.state,
                    t.outstanding,
                    t.held_for_epoch,
                    t.parts.iter().map(|p| p.node).collect::<Vec<_>>()
                )
            })
            .collect()
    }

    /// Transactions counted as committing (for the simulator's checks).
    pub fn committing_count(&self) -> usize {
        self.epochs.count()
    }

    /// The epoch protocol's state changed (a switch prepared or done, a
    /// restore finished). When a switch is done, the commits held
    /// meanwhile are decided.
    pub fn set_epoch_now(
        &mut self,
        now: EpochNow,
        q: &mut VecDeque<BlockSignal>,
        out: &mut Vec<Output>,
    ) {
        self.epoch_now = now;
        if now.holding {
            return;
        }
        for txn in std::mem::take(&mut self.held) {
            // Still waiting for the decision: not aborted meanwhile (a
            // failed replica, a vanished client end it as usual).
            let Some(t) = self.txns.get_mut(&txn) else {
                continue;
            };
            if t.held_for_epoch {
                t.held_for_epoch = false;
                if matches!(t.state, TxnState::Executing) && t.outstanding == 0 {
                    self.decide_commit(txn, q, out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::EpochBook;

    #[test]
    fn the_book_keeps_epochs_in_order_and_reports_the_oldest() {
        let mut b = EpochBook::default();
        for e in [5, 7, 5, 6, 4, 7] {
            b.add(e);
        }
        assert_eq!(
            b.committing.iter().copied().collect::<Vec<_>>(),
            vec![(4, 1), (5, 2), (6, 1), (7, 2)]
        );
        assert_eq!((b.oldest(), b.count()), (Some(4), 6));
        b.remove(5);
        assert!(!b.changed, "epoch 5 still has a transaction");
        b.remove(4);
        assert!(b.changed);
        assert_eq!(b.oldest(), Some(5));
        for e in [5, 6, 7, 7] {
            b.remove(e);
        }
        assert_eq!((b.oldest(), b.count()), (None, 0));
    }
}
