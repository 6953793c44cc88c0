//! The transactions of one coordinator that LQH has finished (committed
//! and completed, or aborted), remembered so that a repeated `LqhKeyReq`
//! of one of them is dropped instead of starting the transaction again,
//! and so that a committed one is a *commit marker* (NDB's): a coordinator
//! taking over from a failed one finds the commits whose client may not
//! have heard of them.
//!
//! The coordinator sends its low-water mark (its oldest transaction that
//! is unfinished, or committed without the client's acknowledgement) with
//! every `LqhKeyReq`; transactions below it are over everywhere and
//! acknowledged, so they need no entry: an operation of one is a repeat.
//! Entries above it are kept sorted, and pruned as the mark rises. The
//! list is bounded: while an old transaction holds the mark back (a
//! client idling with an open transaction), at most
//! [`FINISHED_REMEMBERED_MAX`] entries are kept, the oldest forgotten
//! first.

use crate::signal::TxnRef;
use shoal_types::TransId;
use std::collections::VecDeque;

/// A finished transaction: its handle, its client, and how it ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Finished {
    pub txn: TxnRef,
    pub api_node: u16,
    pub trans: TransId,
    pub committed: bool,
    /// The epoch it committed in (0: not committed, or no epochs run): a
    /// takeover finishing its commit elsewhere must use the same.
    pub epoch: u64,
}

/// Finished transactions remembered per coordinator above its low-water
/// mark, at most.
pub const FINISHED_REMEMBERED_MAX: usize = 1 << 16;

#[derive(Default)]
pub struct FinishedTxns {
    /// Every transaction below this is finished.
    low_water: TxnRef,
    /// Finished transactions at or above `low_water`, ascending.
    above: VecDeque<Finished>,
}

impl FinishedTxns {
    /// Takes a low-water mark from the coordinator (they may arrive out of
    /// order: a lower one changes nothing).
    pub fn advance(&mut self, low_water: TxnRef) {
        if low_water <= self.low_water {
            return;
        }
        self.low_water = low_water;
        while self.above.front().is_some_and(|f| f.txn < low_water) {
            self.above.pop_front();
        }
    }

    pub fn insert(&mut self, f: Finished) {
        let txn = f.txn;
        if txn < self.low_water {
            return;
        }
        // Transactions mostly finish in the order they began: search from
        // the back.
        let at = self.above.iter().rev().position(|g| g.txn <= txn);
        let at = match at {
            Some(back) if self.above[self.above.len() - 1 - back].txn == txn => return,
            Some(back) => self.above.len() - back,
            None => 0,
        };
        if at == self.above.len() {
            self.above.push_back(f);
        } else {
            self.above.insert(at, f);
        }
        if self.above.len() > FINISHED_REMEMBERED_MAX {
            self.above.pop_front();
        }
    }

    /// Whether `txn` is known to be over.
    pub fn contains(&self, txn: TxnRef) -> bool {
        if txn < self.low_water {
            return true;
        }
        // A transaction newer than every finished one (the usual first
        // operation of a new transaction) needs no search.
        match self.above.back() {
            Some(newest) if txn < newest.txn => {
                self.above.binary_search_by_key(&txn, |f| f.txn).is_ok()
            }
            Some(newest) => txn == newest.txn,
            None => false,
        }
    }

    /// How `txn` ended, if it is remembered (not below the low-water
    /// mark: those are over and acknowledged, their outcome no longer
    /// asked for).
    pub fn get(&self, txn: TxnRef) -> Option<&Finished> {
        let at = self.above.binary_search_by_key(&txn, |f| f.txn).ok()?;
        self.above.get(at)
    }

    /// The remembered commits (markers), oldest first.
    pub fn commits(&self) -> impl Iterator<Item = &Finished> {
        self.above.iter().filter(|f| f.committed)
    }

    pub fn remembered(&self) -> usize {
        self.above.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn fin(txn: TxnRef) -> Finished {
        Finished {
            txn,
            api_node: 9,
            trans: TransId(txn * 10),
            committed: txn % 2 == 1,
            epoch: 0,
        }
    }

    #[test]
    fn below_the_low_water_mark_is_finished() {
        let mut f = FinishedTxns::default();
        assert!(!f.contains(5));
        f.insert(fin(7));
        f.insert(fin(5));
        assert_eq!(f.commits().map(|c| c.txn).collect::<Vec<_>>(), [5, 7]);
        assert!(f.contains(5) && f.contains(7) && !f.contains(6));
        f.advance(6);
        assert!(f.contains(3) && f.contains(5) && !f.contains(6) && f.contains(7));
        assert_eq!(f.remembered(), 1);
        f.advance(2); // a stale mark
        assert!(f.contains(5));
    }

    #[test]
    fn bounded() {
        let mut f = FinishedTxns::default();
        for t in 0..(FINISHED_REMEMBERED_MAX as u64 + 10) {
            f.insert(fin(t));
        }
        assert_eq!(f.remembered(), FINISHED_REMEMBERED_MAX);
        assert!(f.contains(FINISHED_REMEMBERED_MAX as u64 + 9));
        assert!(!f.contains(0));
    }

    proptest! {
        /// Agrees with a set model under any order of inserts and marks.
        #[test]
        fn matches_a_set(steps in prop::collection::vec((any::<bool>(), 0u64..200), 0..300)) {
            let mut f = FinishedTxns::default();
            let mut model = BTreeSet::new();
            let mut mark = 0;
            for (is_mark, v) in steps {
                if is_mark {
                    f.advance(v);
                    mark = mark.max(v);
                } else {
                    f.insert(fin(v));
                    model.insert(v);
                }
                for t in 0..200 {
                    prop_assert_eq!(f.contains(t), t < mark || model.contains(&t), "txn {}", t);
                }
            }
        }
    }
}
