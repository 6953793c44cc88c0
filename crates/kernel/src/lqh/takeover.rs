//! LQH and a failed coordinator: stop running its operations, and report
//! what this node holds of its transactions to the node taking over
//! (NDB's LQH_TRANSREQ / LQH_TRANSCONF).

use super::apply::already_failed;
use super::Lqh;
use crate::dih::Dih;
use crate::signal::{tc_incarnation_of, tc_node_of, BlockSignal, ClusterSignal, FragKey, TxnRef};
use std::collections::VecDeque;

impl Lqh {
    /// The node `takeover` takes over failed coordinator `failed`: report
    /// every record and commit marker of its transactions here, after
    /// ending their lock waits and queued operations (none of them can
    /// have committed anywhere: commit comes only after every operation
    /// answered).
    pub(super) fn takeover_req(
        &mut self,
        failed: u16,
        incarnation: u32,
        takeover: u16,
        now_ms: u64,
        dih: &Dih,
        out: &mut VecDeque<BlockSignal>,
    ) {
        let inc8 = incarnation as u8;
        // One entry per node: its latest failed start. An earlier start's
        // takeover finished before this start could join, so nothing of
        // it is still on its way.
        self.failed_coordinators.insert(failed, inc8);
        let own = self.cfg.node_id;
        let mine: Vec<TxnRef> = self
            .txns
            .iter()
            .filter(|(t, _)| tc_node_of(*t) == failed && tc_incarnation_of(*t) == inc8)
            .map(|(t, _)| t)
            .collect();
        let mut reported = 0u32;
        for txn in mine {
            self.stop_waiting(txn, out);
            let t = self.txns.get_mut(&txn).expect("listed");
            t.failed = true;
            if t.rows.is_empty() && !t.committed {
                // Nothing held here (its operations failed, or were only
                // seen): no commit round would ever reach this node for
                // it, so it ends now, aborted.
                self.finish(txn, false, now_ms, dih, out);
                continue;
            }
            let mut frags: Vec<FragKey> = Vec::new();
            for &(f, _, _) in &t.rows {
                if !frags.contains(&f) {
                    frags.push(f);
                }
            }
            out.push_back(BlockSignal::from(ClusterSignal::TakeoverTxn {
                to: takeover,
                reporter: own,
                txn,
                api_node: t.api_node,
                trans: t.trans,
                committed: t.committed,
                epoch: if t.committed { t.epoch } else { 0 },
                frags,
            }));
            reported += 1;
        }
        // Commits whose client may not know: the markers.
        if let Some(finished) = self.finished.get(usize::from(failed)) {
            for f in finished.commits() {
                if tc_incarnation_of(f.txn) != inc8 || self.txns.contains_key(&f.txn) {
                    continue;
                }
                out.push_back(BlockSignal::from(ClusterSignal::TakeoverTxn {
                    to: takeover,
                    reporter: own,
                    txn: f.txn,
                    api_node: f.api_node,
                    trans: f.trans,
                    committed: true,
                    epoch: f.epoch,
                    frags: Vec::new(),
                }));
                reported += 1;
            }
        }
        out.push_back(BlockSignal::from(ClusterSignal::TakeoverConf {
            to: takeover,
            reporter: own,
            failed,
            txns: reported,
        }));
        self.resume_granted(now_ms, dih, out);
    }

    /// Ends `txn`'s lock wait and queued operations here (they are
    /// answered "failed": the answers go to whoever took the coordinator
    /// over, who ignores them).
    fn stop_waiting(&mut self, txn: TxnRef, out: &mut VecDeque<BlockSignal>) {
        let Some(t) = self.txns.get_mut(&txn) else {
            return;
        };
        self.ops_in_use -= t.queued.len();
        for (at, _) in t.queued.drain(..) {
            out.push_back(already_failed(txn, at.op_no));
        }
        if let Some(token) = t.waiting.take() {
            if let Some(w) = self.waiting.remove(&token) {
                self.ops_in_use -= w.counted as usize;
                let held = super::holds_row(t, (w.op.table, w.at.frag), w.row);
                super::drop_wait(&mut self.frags, &mut self.granted, token, &w, held);
                out.push_back(already_failed(txn, w.at.op_no));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::KernelConfig;
    use crate::signal::first_txn_ref;

    #[test]
    fn a_failed_start_refuses_only_its_own_transactions() {
        let mut lqh = Lqh::new(KernelConfig::default());
        let dih = Dih::new(1);
        let mut out = VecDeque::new();
        lqh.takeover_req(2, 7, 1, 0, &dih, &mut out);
        assert!(lqh.coordinator_failed(first_txn_ref(2, 7) + 5));
        assert!(!lqh.coordinator_failed(first_txn_ref(2, 8)));
        assert!(!lqh.coordinator_failed(first_txn_ref(3, 7)));
        // The next start joins: the failed one is still refused.
        lqh.coordinator_joined(2, 8);
        assert!(lqh.coordinator_failed(first_txn_ref(2, 7)));
        // 256 starts later (the ones between never joined), the low bits
        // repeat: the new start's transactions run.
        lqh.coordinator_joined(2, 7 + 256);
        assert!(!lqh.coordinator_failed(first_txn_ref(2, 7 + 256)));
        // Failures replace each other: one entry per node, however many
        // starts fail.
        for inc in 8..2000 {
            lqh.takeover_req(2, inc, 1, 0, &dih, &mut out);
            lqh.coordinator_joined(2, inc + 1);
        }
        assert_eq!(lqh.failed_coordinators.len(), 1);
        assert!(!lqh.coordinator_failed(first_txn_ref(2, 2000)));
        assert!(lqh.coordinator_failed(first_txn_ref(2, 1999)));
    }
}
