//! Transaction records in a slab: a small map from the transaction to a
//! slot, and the records themselves in a vector whose freed slots are
//! reused last-freed-first.
//!
//! Why not a `HashMap<TxnRef, Record>`: transactions come and go hundreds
//! of thousands of times a second. In a map every new record lands in a
//! cold bucket (a cache miss to fill it) and its vectors are allocated
//! anew; here the next record takes the slot just freed — still in cache,
//! its vectors' capacity kept — and the map holds only 16-byte entries.
//!
//! The handling of one signal looks its transaction up again and again
//! (each step of a commit takes the record anew): the pool remembers the
//! slot of the last transaction it found, so the repeats cost a compare,
//! not a hash and a probe.

use crate::detmap::{new_map, DetHashMap};
use crate::signal::TxnRef;

/// A record that can be emptied for reuse.
pub trait Recycle: Default {
    /// Empties the record as `Default` would, keeping (modest) capacity.
    fn recycle(&mut self);
}

/// Capacity a recycled vector keeps at most: a huge transaction's vectors
/// are not carried by every later record of its slot.
pub const KEEP_CAPACITY_MAX: usize = 64;

/// Empties `v`, keeping its allocation unless it grew large.
pub fn clear_keeping<T>(v: &mut Vec<T>) {
    if v.capacity() > KEEP_CAPACITY_MAX {
        *v = Vec::new();
    } else {
        v.clear();
    }
}

pub struct Pool<V> {
    index: DetHashMap<TxnRef, u32>,
    slots: Vec<V>,
    free: Vec<u32>,
    /// The last transaction found and its slot (`NO_TXN`: none); always
    /// an entry of `index`.
    last: (TxnRef, u32),
}

/// No transaction has this reference (each begins with a node id ≥ 1).
const NO_TXN: TxnRef = 0;

impl<V: Recycle> Pool<V> {
    /// An empty pool whose index hashes with `hash_seed`.
    pub fn new(hash_seed: u64) -> Self {
        Pool {
            index: new_map(hash_seed),
            slots: Vec::new(),
            free: Vec::new(),
            last: (NO_TXN, 0),
        }
    }

    /// `txn`'s slot, remembered for the next look-up.
    #[inline]
    fn slot_of(&mut self, txn: &TxnRef) -> Option<usize> {
        if self.last.0 == *txn && *txn != NO_TXN {
            debug_assert_eq!(self.index.get(txn), Some(&self.last.1));
            return Some(self.last.1 as usize);
        }
        let &i = self.index.get(txn)?;
        self.last = (*txn, i);
        Some(i as usize)
    }

    /// Forgets the remembered slot if it is `txn`'s.
    #[inline]
    fn forget_last(&mut self, txn: &TxnRef) {
        if self.last.0 == *txn {
            self.last = (NO_TXN, 0);
        }
    }

    pub fn len(&self) -> usize {
        self.index.len()
    }

    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    pub fn contains_key(&self, txn: &TxnRef) -> bool {
        self.index.contains_key(txn)
    }

    #[inline]
    pub fn get(&self, txn: &TxnRef) -> Option<&V> {
        if self.last.0 == *txn && *txn != NO_TXN {
            return Some(&self.slots[self.last.1 as usize]);
        }
        self.index.get(txn).map(|&i| &self.slots[i as usize])
    }

    #[inline]
    pub fn get_mut(&mut self, txn: &TxnRef) -> Option<&mut V> {
        let i = self.slot_of(txn)?;
        Some(&mut self.slots[i])
    }

    /// `txn`'s record, a fresh one if it has none.
    #[inline]
    pub fn get_or_insert(&mut self, txn: TxnRef) -> &mut V {
        if self.last.0 == txn && txn != NO_TXN {
            return &mut self.slots[self.last.1 as usize];
        }
        let slots = &mut self.slots;
        let free = &mut self.free;
        let &mut i = self.index.entry(txn).or_insert_with(|| match free.pop() {
            Some(i) => i,
            None => {
                slots.push(V::default());
                (slots.len() - 1) as u32
            }
        });
        self.last = (txn, i);
        &mut self.slots[i as usize]
    }

    /// Frees `txn`'s record for reuse; false if it had none.
    #[inline]
    pub fn remove(&mut self, txn: &TxnRef) -> bool {
        self.forget_last(txn);
        match self.index.remove(txn) {
            Some(i) => {
                self.slots[i as usize].recycle();
                self.free.push(i);
                true
            }
            None => false,
        }
    }

    /// Frees `txn`'s record for reuse after `read` has looked at it (one
    /// lookup, where `get` and `remove` take two); `None` if it had none.
    #[inline]
    pub fn take<R>(&mut self, txn: &TxnRef, read: impl FnOnce(&V) -> R) -> Option<R> {
        self.forget_last(txn);
        let i = self.index.remove(txn)? as usize;
        let r = read(&self.slots[i]);
        self.slots[i].recycle();
        self.free.push(i as u32);
        Some(r)
    }

    /// Every record, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (TxnRef, &V)> {
        self.index
            .iter()
            .map(|(&t, &i)| (t, &self.slots[i as usize]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Rec {
        items: Vec<u32>,
    }

    impl Recycle for Rec {
        fn recycle(&mut self) {
            clear_keeping(&mut self.items);
        }
    }

    #[test]
    fn a_freed_slot_is_reused_empty_with_its_capacity() {
        let mut p: Pool<Rec> = Pool::new(7);
        p.get_or_insert(1).items.extend([1, 2, 3]);
        p.get_or_insert(2).items.push(9);
        assert_eq!(p.len(), 2);
        let cap = p.get(&1).unwrap().items.capacity();
        assert!(p.remove(&1));
        assert!(!p.remove(&1));
        assert!(p.get(&1).is_none());
        let r = p.get_or_insert(3);
        assert!(r.items.is_empty());
        assert_eq!(r.items.capacity(), cap, "the slot of 1 was reused");
        assert_eq!(p.get(&2).unwrap().items, [9]);
        let mut keys: Vec<TxnRef> = p.iter().map(|(t, _)| t).collect();
        keys.sort_unstable();
        assert_eq!(keys, [2, 3]);
    }

    /// The remembered slot follows removals and reuse: a look-up never
    /// finds a freed record, nor another transaction's in its old slot.
    #[test]
    fn the_remembered_slot_never_outlives_its_record() {
        let mut p: Pool<Rec> = Pool::new(7);
        p.get_or_insert(1).items.push(1);
        p.get_or_insert(2).items.push(2);
        assert_eq!(p.get_mut(&1).unwrap().items, [1]);
        assert_eq!(p.take(&1, |r| r.items.clone()), Some(vec![1]));
        assert!(p.get(&1).is_none() && p.get_mut(&1).is_none());
        // 3 takes 1's slot; 1 is still unknown, 3 is found, then 2.
        p.get_or_insert(3).items.push(3);
        assert!(p.get(&1).is_none());
        assert_eq!(p.get(&3).unwrap().items, [3]);
        assert_eq!(p.get_mut(&2).unwrap().items, [2]);
        assert!(p.remove(&2));
        assert!(p.get(&2).is_none() && p.get_mut(&2).is_none());
        assert!(!p.remove(&2));
        assert_eq!(p.get_or_insert(3).items, [3], "3 kept its record");
        assert!(p.get_or_insert(2).items.is_empty(), "2 begins afresh");
        assert_eq!(p.len(), 2);
    }

    #[test]
    fn large_vectors_are_not_kept() {
        let mut p: Pool<Rec> = Pool::new(7);
        p.get_or_insert(1).items.extend(0..1000);
        p.remove(&1);
        assert!(p.get_or_insert(2).items.capacity() <= KEEP_CAPACITY_MAX);
    }
}
