//! Row lock manager: shared and exclusive row locks held by transactions,
//! with FIFO wait queues, kept only for rows that are locked.
//!
//! Invariants:
//! - A row has an entry only while someone holds or waits for its lock, so
//!   unlocked rows cost nothing; every entry has at least one holder
//!   (whenever the holders leave, the front waiters are granted at once).
//! - The holders are one exclusive owner or any number of shared owners.
//! - Waiters are granted strictly from the front, so a waiting exclusive
//!   request is never starved by a stream of shared ones. The one exception
//!   is an upgrade (a shared holder asking for exclusive), which goes to the
//!   front: it cannot make progress behind requests that wait for it.
//! - An owner waits for at most one lock per row (asserted).
//!
//! The manager never times out or detects deadlocks: it has no clock. The
//! kernel does, and calls [`LockManager::cancel_wait`] when it gives up.

use crate::rows::RowId;
use hashbrown::HashMap;
use std::collections::VecDeque;
use std::hash::{BuildHasherDefault, Hasher};

/// Who holds or waits for a lock: a transaction (so a transaction never
/// waits for itself).
pub type LockOwner = u64;
/// Opaque to this module: returned to the kernel when a wait is granted,
/// so it can resume the waiting operation.
pub type WaitToken = u64;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    Shared,
    Exclusive,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockOutcome {
    Granted,
    /// Queued; the token comes back from `release` when granted.
    Waiting,
}

/// Hashes a row id with one multiply. Row ids are dense small integers:
/// multiplying by an odd constant keeps their low bits distinct (so
/// consecutive rows land in distinct buckets) and fills the high bits
/// hashbrown uses for its control bytes. A general-purpose hasher would
/// cost more than the lookup it serves.
#[derive(Clone, Copy, Debug, Default)]
struct RowIdHasher(u64);

impl Hasher for RowIdHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Only row ids are hashed (via `write_u32`); kept correct anyway.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.0 = u64::from(n).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The holders of one row lock. Nearly every locked row has exactly one,
/// which is kept inline so taking a lock does not allocate.
#[derive(Debug)]
enum Holders {
    None,
    One(LockOwner),
    Many(Vec<LockOwner>),
}

impl Holders {
    #[inline]
    fn contains(&self, owner: LockOwner) -> bool {
        match self {
            Holders::None => false,
            Holders::One(o) => *o == owner,
            Holders::Many(v) => v.contains(&owner),
        }
    }

    #[inline]
    fn len(&self) -> usize {
        match self {
            Holders::None => 0,
            Holders::One(_) => 1,
            Holders::Many(v) => v.len(),
        }
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn push(&mut self, owner: LockOwner) {
        match self {
            Holders::None => *self = Holders::One(owner),
            Holders::One(first) => *self = Holders::Many(vec![*first, owner]),
            Holders::Many(v) => v.push(owner),
        }
    }

    /// Removes `owner`; whether it was a holder.
    fn remove(&mut self, owner: LockOwner) -> bool {
        match self {
            Holders::None => false,
            Holders::One(o) => {
                let was = *o == owner;
                if was {
                    *self = Holders::None;
                }
                was
            }
            Holders::Many(v) => match v.iter().position(|&o| o == owner) {
                Some(i) => {
                    v.swap_remove(i);
                    if v.is_empty() {
                        *self = Holders::None;
                    }
                    true
                }
                None => false,
            },
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Waiter {
    owner: LockOwner,
    mode: LockMode,
    token: WaitToken,
}

/// The lock of one row: who holds it, in which mode, and who waits.
#[derive(Debug)]
struct LockQueue {
    /// Mode of the holders: `Exclusive` means exactly one holder.
    mode: LockMode,
    holders: Holders,
    /// Unallocated until someone waits.
    waiters: VecDeque<Waiter>,
}

impl LockQueue {
    fn is_waiting(&self, owner: LockOwner) -> bool {
        self.waiters.iter().any(|w| w.owner == owner)
    }

    fn acquire(
        &mut self,
        row: RowId,
        owner: LockOwner,
        mode: LockMode,
        token: WaitToken,
    ) -> LockOutcome {
        if self.holders.contains(owner) {
            if self.mode == LockMode::Exclusive || mode == LockMode::Shared {
                return LockOutcome::Granted;
            }
            if self.holders.len() == 1 {
                self.mode = LockMode::Exclusive;
                return LockOutcome::Granted;
            }
            assert!(
                !self.is_waiting(owner),
                "owner {owner} already waits for row {row}"
            );
            self.waiters.push_front(Waiter { owner, mode, token });
            return LockOutcome::Waiting;
        }
        assert!(
            !self.is_waiting(owner),
            "owner {owner} already waits for row {row}"
        );
        if self.waiters.is_empty() && mode == LockMode::Shared && self.mode == LockMode::Shared {
            self.holders.push(owner);
            return LockOutcome::Granted;
        }
        self.waiters.push_back(Waiter { owner, mode, token });
        LockOutcome::Waiting
    }

    /// Grants waiters from the front while they are compatible.
    fn grant_waiters(&mut self, granted: &mut Vec<WaitToken>) {
        while let Some(w) = self.waiters.front() {
            let upgrade = self.holders.contains(w.owner);
            let grantable = if self.holders.is_empty() {
                true
            } else if upgrade {
                self.holders.len() == 1
            } else {
                w.mode == LockMode::Shared && self.mode == LockMode::Shared
            };
            if !grantable {
                break;
            }
            let w = self.waiters.pop_front().expect("front exists");
            if upgrade {
                self.mode = w.mode;
            } else {
                if self.holders.is_empty() {
                    self.mode = w.mode;
                }
                self.holders.push(w.owner);
            }
            granted.push(w.token);
        }
        if self.waiters.is_empty() && self.waiters.capacity() > 0 {
            // Contention is over: give the queue's memory back rather than
            // keep it for the life of the lock.
            self.waiters = VecDeque::new();
        }
    }

    fn is_unused(&self) -> bool {
        self.holders.is_empty() && self.waiters.is_empty()
    }
}

/// Row locks of one fragment, keyed by row id.
#[derive(Default, Debug)]
pub struct LockManager {
    rows: HashMap<RowId, LockQueue, BuildHasherDefault<RowIdHasher>>,
}

impl LockManager {
    /// Takes a lock on `row` for `owner`, or queues the request. A request
    /// the owner's current lock already covers is granted at once; a
    /// shared holder asking for exclusive is granted at once if it is the
    /// only holder, and otherwise waits at the front of the queue.
    pub fn acquire(
        &mut self,
        row: RowId,
        owner: LockOwner,
        mode: LockMode,
        token: WaitToken,
    ) -> LockOutcome {
        match self.rows.entry(row) {
            hashbrown::hash_map::Entry::Vacant(v) => {
                v.insert(LockQueue {
                    mode,
                    holders: Holders::One(owner),
                    waiters: VecDeque::new(),
                });
                LockOutcome::Granted
            }
            hashbrown::hash_map::Entry::Occupied(o) => {
                o.into_mut().acquire(row, owner, mode, token)
            }
        }
    }

    /// Drops whatever lock `owner` holds on `row` (no-op if none) and
    /// pushes the tokens of the waiters that this grants to `granted`.
    /// A request `owner` still has waiting on the row stays queued; the
    /// kernel cancels it with [`LockManager::cancel_wait`].
    pub fn release(&mut self, row: RowId, owner: LockOwner, granted: &mut Vec<WaitToken>) {
        let Some(queue) = self.rows.get_mut(&row) else {
            return;
        };
        if !queue.holders.remove(owner) {
            return;
        }
        queue.grant_waiters(granted);
        if queue.is_unused() {
            self.rows.remove(&row);
        }
    }

    /// For a row that no longer exists (its insert was rolled back or its
    /// delete committed), held exclusively by `owner`: drops the row's whole
    /// entry and pushes the tokens of every waiter, in queue order, to
    /// `restart`. Those requests are not granted: the row id may be reused
    /// for another key, so each must look its key up again.
    pub fn release_vanished(&mut self, row: RowId, owner: LockOwner, restart: &mut Vec<WaitToken>) {
        let Some(queue) = self.rows.remove(&row) else {
            return;
        };
        debug_assert!(
            queue.holders.contains(owner) && queue.mode == LockMode::Exclusive,
            "only the exclusive holder makes a row vanish"
        );
        restart.extend(queue.waiters.iter().map(|w| w.token));
    }

    /// Withdraws `owner`'s waiting request on `row` (no-op if none), e.g.
    /// after a lock wait timeout, and pushes the tokens of the waiters that
    /// this lets through to `granted`.
    pub fn cancel_wait(&mut self, row: RowId, owner: LockOwner, granted: &mut Vec<WaitToken>) {
        let Some(queue) = self.rows.get_mut(&row) else {
            return;
        };
        let Some(at) = queue.waiters.iter().position(|w| w.owner == owner) else {
            return;
        };
        queue.waiters.remove(at);
        queue.grant_waiters(granted);
        if queue.is_unused() {
            self.rows.remove(&row);
        }
    }

    /// The strongest mode `owner` holds on `row`.
    #[inline]
    pub fn holds(&self, row: RowId, owner: LockOwner) -> Option<LockMode> {
        let queue = self.rows.get(&row)?;
        queue.holders.contains(owner).then_some(queue.mode)
    }

    /// Whether any owner holds or waits for a lock on `row`.
    #[inline]
    pub fn is_locked(&self, row: RowId) -> bool {
        self.rows.contains_key(&row)
    }

    /// Rows with a holder or a waiter.
    #[inline]
    pub fn locked_rows(&self) -> usize {
        self.rows.len()
    }

    /// Whether `owner` has a request waiting on `row`.
    pub fn is_waiting(&self, row: RowId, owner: LockOwner) -> bool {
        self.rows.get(&row).is_some_and(|q| q.is_waiting(owner))
    }
}

#[cfg(test)]
mod tests {
    use super::LockMode::{Exclusive as X, Shared as S};
    use super::LockOutcome::{Granted, Waiting};
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use std::collections::BTreeMap;

    #[test]
    fn a_vanished_row_sends_every_waiter_back_to_look_again() {
        let mut lm = LockManager::default();
        let row: RowId = 3;
        assert_eq!(lm.acquire(row, 1, X, 0), Granted);
        assert_eq!(lm.acquire(row, 2, S, 20), Waiting);
        assert_eq!(lm.acquire(row, 3, X, 30), Waiting);
        let mut restart = Vec::new();
        lm.release_vanished(row, 1, &mut restart);
        assert_eq!(restart, vec![20, 30]);
        assert_eq!(lm.locked_rows(), 0);
        // The id is free for a new row: a fresh lock is granted at once.
        assert_eq!(lm.acquire(row, 4, X, 0), Granted);
    }

    fn released(lm: &mut LockManager, row: RowId, owner: LockOwner) -> Vec<WaitToken> {
        let mut g = Vec::new();
        lm.release(row, owner, &mut g);
        g
    }

    #[test]
    fn shared_locks_share_and_exclusive_waits() {
        let mut lm = LockManager::default();
        assert_eq!(lm.acquire(1, 10, S, 100), Granted);
        assert_eq!(lm.acquire(1, 11, S, 101), Granted);
        assert_eq!(lm.acquire(1, 12, X, 102), Waiting);
        // FIFO: a shared request behind a waiting exclusive one waits too.
        assert_eq!(lm.acquire(1, 13, S, 103), Waiting);
        assert_eq!(lm.holds(1, 10), Some(S));
        assert_eq!(lm.holds(1, 12), None);
        assert!(lm.is_waiting(1, 12));
        assert_eq!(released(&mut lm, 1, 10), Vec::<u64>::new());
        assert_eq!(released(&mut lm, 1, 11), vec![102]);
        assert_eq!(lm.holds(1, 12), Some(X));
        assert_eq!(released(&mut lm, 1, 12), vec![103]);
        assert_eq!(lm.holds(1, 13), Some(S));
        assert_eq!(released(&mut lm, 1, 13), Vec::<u64>::new());
        assert_eq!(lm.locked_rows(), 0);
    }

    #[test]
    fn reentrant_and_upgrade() {
        let mut lm = LockManager::default();
        assert_eq!(lm.acquire(1, 10, X, 0), Granted);
        assert_eq!(lm.acquire(1, 10, S, 0), Granted);
        assert_eq!(lm.acquire(1, 10, X, 0), Granted);
        assert_eq!(lm.holds(1, 10), Some(X));
        // Sole shared holder upgrades at once.
        assert_eq!(lm.acquire(2, 10, S, 0), Granted);
        assert_eq!(lm.acquire(2, 10, X, 0), Granted);
        assert_eq!(lm.holds(2, 10), Some(X));
        // With another holder the upgrade waits, ahead of earlier waiters.
        assert_eq!(lm.acquire(3, 10, S, 0), Granted);
        assert_eq!(lm.acquire(3, 11, S, 0), Granted);
        assert_eq!(lm.acquire(3, 12, X, 112), Waiting);
        assert_eq!(lm.acquire(3, 10, X, 110), Waiting);
        assert_eq!(released(&mut lm, 3, 11), vec![110]);
        assert_eq!(lm.holds(3, 10), Some(X));
        // One release drops the whole hold, upgraded or not.
        assert_eq!(released(&mut lm, 3, 10), vec![112]);
        assert_eq!(lm.holds(3, 10), None);
        // Releasing what one does not hold changes nothing.
        assert_eq!(released(&mut lm, 3, 99), Vec::<u64>::new());
        assert_eq!(released(&mut lm, 77, 99), Vec::<u64>::new());
        assert_eq!(lm.holds(3, 12), Some(X));
    }

    #[test]
    fn one_release_grants_every_compatible_waiter() {
        let mut lm = LockManager::default();
        assert_eq!(lm.acquire(5, 1, X, 0), Granted);
        for o in 2..6 {
            assert_eq!(lm.acquire(5, o, S, o), Waiting);
        }
        assert_eq!(lm.acquire(5, 6, X, 6), Waiting);
        assert_eq!(lm.acquire(5, 7, S, 7), Waiting);
        assert_eq!(released(&mut lm, 5, 1), vec![2, 3, 4, 5]);
        for o in 2..6 {
            assert_eq!(
                released(&mut lm, 5, o),
                if o == 5 { vec![6] } else { vec![] }
            );
        }
        assert_eq!(released(&mut lm, 5, 6), vec![7]);
    }

    #[test]
    fn cancel_wait_lets_the_queue_move() {
        let mut lm = LockManager::default();
        let mut g = Vec::new();
        assert_eq!(lm.acquire(1, 1, S, 0), Granted);
        assert_eq!(lm.acquire(1, 2, X, 2), Waiting);
        assert_eq!(lm.acquire(1, 3, S, 3), Waiting);
        assert_eq!(lm.acquire(1, 4, S, 4), Waiting);
        lm.cancel_wait(1, 9, &mut g);
        assert!(g.is_empty());
        lm.cancel_wait(1, 2, &mut g);
        assert_eq!(g, vec![3, 4]);
        assert!(!lm.is_waiting(1, 2));
        // A cancelled upgrade keeps the shared lock.
        assert_eq!(lm.acquire(1, 1, X, 1), Waiting);
        g.clear();
        lm.cancel_wait(1, 1, &mut g);
        assert!(g.is_empty());
        assert_eq!(lm.holds(1, 1), Some(S));
        for o in [1, 3, 4] {
            lm.release(1, o, &mut g);
        }
        assert_eq!(lm.locked_rows(), 0);
    }

    #[test]
    #[should_panic(expected = "already waits")]
    fn waiting_twice_on_a_row_is_a_bug() {
        let mut lm = LockManager::default();
        lm.acquire(1, 1, X, 0);
        lm.acquire(1, 2, S, 0);
        lm.acquire(1, 2, X, 0);
    }

    const OWNERS: u64 = 6;
    const ROWS: u32 = 3;

    /// What the lock table must look like: who holds which mode, and who
    /// waits for which (the order is the manager's business; the model
    /// only checks what it may not violate).
    #[derive(Default)]
    struct Model {
        held: BTreeMap<(RowId, LockOwner), LockMode>,
        waiting: BTreeMap<(RowId, LockOwner), LockMode>,
        tokens: BTreeMap<WaitToken, (RowId, LockOwner)>,
    }

    impl Model {
        fn apply_grants(&mut self, granted: &[WaitToken]) {
            for t in granted {
                let key = self.tokens.remove(t).expect("granted a live token");
                let mode = self.waiting.remove(&key).expect("granted a waiter");
                self.held.insert(key, mode);
            }
        }

        /// No exclusive holder shares its row; the manager agrees with
        /// the model on every (row, owner).
        fn check(&self, lm: &LockManager, seed: u64, step: usize) {
            for row in 0..ROWS {
                let modes: Vec<LockMode> = self
                    .held
                    .iter()
                    .filter(|(k, _)| k.0 == row)
                    .map(|(_, &m)| m)
                    .collect();
                if modes.contains(&X) {
                    assert_eq!(
                        modes.len(),
                        1,
                        "seed {seed} step {step}: exclusive lock shared on row {row}"
                    );
                }
                for owner in 0..OWNERS {
                    let key = (row, owner);
                    assert_eq!(
                        lm.holds(row, owner),
                        self.held.get(&key).copied(),
                        "seed {seed} step {step}"
                    );
                    assert_eq!(lm.is_waiting(row, owner), self.waiting.contains_key(&key));
                }
            }
        }
    }

    /// Random acquire/release/cancel against a model: no incompatible
    /// holders ever coexist, a request waits only when something stands in
    /// its way, every grant answers a live wait, and once holders keep
    /// releasing, every waiter is granted and no entry is left.
    #[test]
    fn model_random_sequences() {
        for seed in 0..200u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut lm = LockManager::default();
            let mut m = Model::default();
            let mut next_token = 0u64;
            let mut g = Vec::new();
            for step in 0..300 {
                let row = rng.random_range(0..ROWS);
                let owner = rng.random_range(0..OWNERS);
                let key = (row, owner);
                g.clear();
                match rng.random_range(0..10) {
                    0..=5 => {
                        if m.waiting.contains_key(&key) {
                            continue;
                        }
                        let mode = if rng.random_bool(0.5) { S } else { X };
                        let token = next_token;
                        next_token += 1;
                        let before = m.held.get(&key).copied();
                        let covered = before == Some(X) || (before.is_some() && mode == S);
                        let conflict = m
                            .held
                            .iter()
                            .any(|(&(r, o), &h)| r == row && o != owner && (h == X || mode == X));
                        let queued = m.waiting.keys().any(|&(r, _)| r == row);
                        match lm.acquire(row, owner, mode, token) {
                            Granted => {
                                assert!(
                                    covered || !conflict,
                                    "seed {seed} step {step}: conflicting grant"
                                );
                                let new = if before == Some(X) || mode == X { X } else { S };
                                m.held.insert(key, new);
                            }
                            Waiting => {
                                assert!(!covered, "seed {seed} step {step}: covered request waits");
                                assert!(
                                    conflict || queued,
                                    "seed {seed} step {step}: needless wait"
                                );
                                m.waiting.insert(key, mode);
                                m.tokens.insert(token, key);
                            }
                        }
                    }
                    6..=8 => {
                        lm.release(row, owner, &mut g);
                        m.held.remove(&key);
                        m.apply_grants(&g);
                    }
                    _ => {
                        lm.cancel_wait(row, owner, &mut g);
                        if m.waiting.remove(&key).is_some() {
                            m.tokens.retain(|_, k| *k != key);
                        }
                        m.apply_grants(&g);
                    }
                }
                m.check(&lm, seed, step);
            }
            // Holders keep releasing until nothing is held: every waiter
            // must have been granted along the way.
            let mut rounds = 0;
            while !m.held.is_empty() {
                rounds += 1;
                assert!(rounds < 100, "seed {seed}: waiters never granted");
                let holders: Vec<_> = m.held.keys().copied().collect();
                for (row, owner) in holders {
                    g.clear();
                    lm.release(row, owner, &mut g);
                    m.held.remove(&(row, owner));
                    m.apply_grants(&g);
                    m.check(&lm, seed, usize::MAX);
                }
            }
            assert!(
                m.waiting.is_empty(),
                "seed {seed}: {:?} still waiting",
                m.waiting
            );
            assert_eq!(lm.locked_rows(), 0);
        }
    }
}
