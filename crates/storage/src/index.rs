//! Primary-key hash index: maps a key hash to the row ids stored under it,
//! in 8 bytes per entry, with every byte of its table charged to `Memory`.
//!
//! Invariants:
//! - An entry is `(tag, row id)`: `tag` is 32 bits derived from the key hash,
//!   enough to rebuild the table's bucket hash when it grows (so no key is
//!   ever re-read or re-hashed) and to skip most non-matching rows without
//!   touching them. Key equality is decided by the caller on the row.
//! - `charged_bytes == table.allocation_size()` after every call.
//! - The table only grows or shrinks in [`HashIndex::install`] and
//!   [`HashIndex::remove`], never inside a hashbrown call, so every change
//!   in its allocation is charged before it is made.

use crate::memory::Memory;
use crate::rows::RowId;
use hashbrown::HashTable;

#[derive(Clone, Copy, Debug)]
struct Entry {
    tag: u32,
    row: RowId,
}

/// The 32 bits of the key hash an entry keeps. Multiplying first folds all
/// 64 bits into the upper half, so the tag stays well spread even if the
/// kernel picks fragments by some bits of the same hash.
#[inline]
fn tag_of(hash: u64) -> u32 {
    (hash.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 32) as u32
}

/// The bucket hash hashbrown sees, rebuilt from the tag alone. Its low bits
/// pick the bucket and its top 7 bits fill the control byte, so spread the
/// tag over all 64 bits.
#[inline]
fn table_hash(tag: u32) -> u64 {
    u64::from(tag).wrapping_mul(0xBF58_476D_1CE4_E5B9) ^ (u64::from(tag) << 32)
}

#[inline]
fn entry_hash(e: &Entry) -> u64 {
    table_hash(e.tag)
}

/// What hashbrown allocates for a table of `capacity` entries: buckets at
/// a 7/8 load, rounded up to a power of two, 8 bytes and one control byte
/// each, plus one group of trailing control bytes. Used to refuse a growth
/// that cannot fit before allocating it; the real size is checked after.
fn table_bytes_estimate(capacity: usize) -> usize {
    if capacity == 0 {
        return 0;
    }
    let buckets = if capacity < 8 {
        if capacity < 4 {
            4
        } else {
            8
        }
    } else {
        (capacity * 8 / 7).next_power_of_two()
    };
    buckets * (std::mem::size_of::<Entry>() + 1) + 16
}

/// A bigger table, allocated but neither filled nor installed yet, and the
/// bytes installing it adds to the index's charge.
pub(crate) struct Growth {
    table: HashTable<Entry>,
    pub(crate) charge_bytes: usize,
}

/// Tables at or below this many entries of capacity are not shrunk until
/// they are empty: shrinking them frees little and would churn on a
/// fragment that hovers around a few rows.
const SHRINK_CAPACITY_MIN: usize = 64;

#[derive(Debug, Default)]
pub(crate) struct HashIndex {
    table: HashTable<Entry>,
    /// Capacity right after the last rebuild, when the table had no
    /// tombstones. `table.capacity()` drops below it as removals leave
    /// tombstones, and that is when a rebuild at the same size (a rehash,
    /// no new memory) beats growing.
    full_capacity: usize,
    charged_bytes: usize,
}

impl std::fmt::Debug for Growth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Growth")
            .field("charge_bytes", &self.charge_bytes)
            .finish()
    }
}

impl HashIndex {
    #[inline]
    pub(crate) fn charged_bytes(&self) -> usize {
        self.charged_bytes
    }

    /// The row under `hash` for which `is_row` says yes (it compares keys).
    #[inline]
    pub(crate) fn find(&self, hash: u64, mut is_row: impl FnMut(RowId) -> bool) -> Option<RowId> {
        let tag = tag_of(hash);
        self.table
            .find(table_hash(tag), |e| e.tag == tag && is_row(e.row))
            .map(|e| e.row)
    }

    /// The first row stored under `hash`'s tag, without comparing keys: a
    /// guess, right unless two keys share the tag, used only to bring the
    /// row into the cache before its real lookup.
    #[inline]
    pub(crate) fn guess(&self, hash: u64) -> Option<RowId> {
        let tag = tag_of(hash);
        self.table
            .find(table_hash(tag), |e| e.tag == tag)
            .map(|e| e.row)
    }

    /// Whether the next insert needs [`HashIndex::prepare_growth`] first.
    #[inline]
    pub(crate) fn needs_growth(&self) -> bool {
        self.table.len() == self.table.capacity()
    }

    /// Allocates the table the next insert needs, unless even a lower bound
    /// of its size exceeds `free_bytes` (then returns that bound, so a
    /// doomed insert does not allocate a large table only to drop it).
    pub(crate) fn prepare_growth(&self, free_bytes: usize) -> Result<Growth, usize> {
        let needed = self.table.len() + 1;
        // Rebuild at the same size (no new memory) when tombstones, not
        // entries, filled the table and the rebuild leaves at least an
        // eighth of it free, so rebuilds stay amortized O(1) per insert;
        // otherwise at least double.
        let rehash_in_place = needed <= self.full_capacity - self.full_capacity / 8;
        let mut capacity = if rehash_in_place {
            self.full_capacity
        } else {
            needed.max(self.full_capacity + 1)
        };
        let old_bytes = self.table.allocation_size();
        let mut estimate = table_bytes_estimate(capacity).saturating_sub(old_bytes);
        if estimate > free_bytes && needed <= self.full_capacity {
            // Memory is short but deletes left room: reuse it, even if the
            // table will need rebuilding again soon.
            capacity = self.full_capacity;
            estimate = 0;
        }
        if estimate > free_bytes {
            return Err(estimate);
        }
        let table = HashTable::with_capacity(capacity);
        let charge_bytes = table.allocation_size().saturating_sub(old_bytes);
        if charge_bytes > free_bytes {
            return Err(charge_bytes);
        }
        Ok(Growth {
            table,
            charge_bytes,
        })
    }

    /// Moves the entries into the grown table. `growth.charge_bytes` has been
    /// charged by the caller.
    pub(crate) fn install(&mut self, growth: Growth) {
        let mut table = growth.table;
        // A same-size rebuild would charge nothing; a smaller one cannot
        // happen, since growth capacity is never below the current one.
        assert!(table.allocation_size() >= self.table.allocation_size());
        for e in self.table.drain() {
            table.insert_unique(entry_hash(&e), e, entry_hash);
        }
        self.table = table;
        self.full_capacity = self.table.capacity();
        self.charged_bytes += growth.charge_bytes;
        debug_assert_eq!(self.charged_bytes, self.table.allocation_size());
    }

    /// Adds an entry; the table must have room (see `needs_growth`).
    #[inline]
    pub(crate) fn insert(&mut self, hash: u64, row: RowId) {
        assert!(!self.needs_growth(), "index insert without room");
        let tag = tag_of(hash);
        self.table
            .insert_unique(table_hash(tag), Entry { tag, row }, entry_hash);
    }

    /// Removes the entry of `row`, stored under `hash`, and shrinks the
    /// table (releasing memory) once it is mostly empty.
    pub(crate) fn remove(&mut self, mem: &mut Memory, hash: u64, row: RowId) {
        let tag = tag_of(hash);
        match self.table.find_entry(table_hash(tag), |e| e.row == row) {
            Ok(entry) => {
                let (e, _) = entry.remove();
                assert_eq!(e.tag, tag, "row {row} was indexed under another hash");
            }
            Err(_) => panic!("row {row} is not in the index under this hash"),
        }
        let len = self.table.len();
        if len == 0 || (len * 8 < self.full_capacity && self.full_capacity > SHRINK_CAPACITY_MIN) {
            self.rebuild_smaller(mem, len * 2);
        }
    }

    fn rebuild_smaller(&mut self, mem: &mut Memory, capacity: usize) {
        let mut table = if capacity == 0 {
            HashTable::new()
        } else {
            HashTable::with_capacity(capacity)
        };
        for e in self.table.drain() {
            table.insert_unique(entry_hash(&e), e, entry_hash);
        }
        let new_bytes = table.allocation_size();
        assert!(new_bytes <= self.charged_bytes);
        mem.release(self.charged_bytes - new_bytes);
        self.table = table;
        self.full_capacity = self.table.capacity();
        self.charged_bytes = new_bytes;
    }

    /// Drops every entry and releases the table's memory.
    pub(crate) fn release_all(&mut self, mem: &mut Memory) {
        mem.release(self.charged_bytes);
        *self = HashIndex::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insert(index: &mut HashIndex, mem: &mut Memory, hash: u64, row: RowId) -> bool {
        if index.needs_growth() {
            let g = match index.prepare_growth(mem.free_bytes()) {
                Ok(g) => g,
                Err(_) => return false,
            };
            if mem.try_charge(g.charge_bytes).is_err() {
                return false;
            }
            index.install(g);
        }
        index.insert(hash, row);
        true
    }

    fn hash(i: u32) -> u64 {
        shoal_types::hash_key(&i.to_le_bytes())
    }

    #[test]
    fn entries_are_eight_bytes() {
        assert_eq!(std::mem::size_of::<Entry>(), 8);
    }

    #[test]
    fn charge_tracks_allocation_through_growth_and_shrink() {
        let mut mem = Memory::new(1 << 20);
        let mut index = HashIndex::default();
        for i in 0..1000u32 {
            assert!(insert(&mut index, &mut mem, hash(i), i));
            assert_eq!(index.charged_bytes(), index.table.allocation_size());
            assert_eq!(mem.used_bytes(), index.charged_bytes());
        }
        for i in 0..1000u32 {
            assert_eq!(index.find(hash(i), |r| r == i), Some(i));
        }
        assert_eq!(index.find(hash(1000), |_| true), None);
        // Bytes per entry at the end of growth: 8 per bucket + 1 control.
        assert!(
            index.charged_bytes() < 1000 * 20,
            "{}",
            index.charged_bytes()
        );
        for i in 0..1000u32 {
            index.remove(&mut mem, hash(i), i);
            assert_eq!(index.charged_bytes(), index.table.allocation_size());
            assert_eq!(mem.used_bytes(), index.charged_bytes());
        }
        assert_eq!(mem.used_bytes(), 0);
    }

    #[test]
    fn growth_fails_cleanly_at_the_limit() {
        let mut mem = Memory::new(300);
        let mut index = HashIndex::default();
        let mut n = 0u32;
        while insert(&mut index, &mut mem, hash(n), n) {
            n += 1;
        }
        assert!(n > 0);
        let used = mem.used_bytes();
        assert_eq!(index.table.len(), n as usize);
        assert!(index.needs_growth());
        assert!(!insert(&mut index, &mut mem, hash(n), n));
        assert_eq!(mem.used_bytes(), used);
        for i in 0..n {
            assert_eq!(index.find(hash(i), |r| r == i), Some(i));
        }
    }

    #[test]
    fn churn_at_steady_size_does_not_grow_forever() {
        let mut mem = Memory::new(1 << 20);
        let mut index = HashIndex::default();
        for i in 0..100u32 {
            assert!(insert(&mut index, &mut mem, hash(i), i));
        }
        let mut peak = 0;
        for i in 100..20_000u32 {
            index.remove(&mut mem, hash(i - 100), i - 100);
            assert!(insert(&mut index, &mut mem, hash(i), i));
            peak = peak.max(mem.used_bytes());
        }
        assert!(peak <= 4096, "{peak}");
    }

    #[test]
    fn equal_hashes_are_told_apart_by_the_caller() {
        let mut mem = Memory::new(1 << 16);
        let mut index = HashIndex::default();
        for row in 0..10 {
            assert!(insert(&mut index, &mut mem, 42, row));
        }
        for row in 0..10 {
            assert_eq!(index.find(42, |r| r == row), Some(row));
        }
        index.remove(&mut mem, 42, 3);
        assert_eq!(index.find(42, |r| r == 3), None);
        assert_eq!(index.find(42, |r| r == 4), Some(4));
    }

    #[test]
    #[should_panic(expected = "not in the index")]
    fn removing_a_missing_row_panics() {
        let mut mem = Memory::new(1 << 16);
        let mut index = HashIndex::default();
        assert!(insert(&mut index, &mut mem, 1, 1));
        index.remove(&mut mem, 1, 2);
    }
}
