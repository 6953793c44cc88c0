//! Which row ids of a fragment changed since a local checkpoint last
//! wrote them: one bit per row id, set by every committed change (insert,
//! update, delete) and cleared by the checkpoint's scan as it writes the
//! row (or, for a freed id, the delete). A partial checkpoint writes only
//! the ids whose bit is set (RonDB's partial LCP, at row granularity).
//!
//! A bit set by an abort (a tentative insert removed) only costs an extra
//! delete record in the next checkpoint.
//!
//! The same set of ids serves a restarting replica too: the rows it
//! restored from its own files that the copy has not confirmed yet.

use crate::rows::RowId;

#[derive(Clone, Debug, Default)]
pub struct ChangedRows {
    words: Vec<u64>,
    /// Bits set.
    count: usize,
}

impl ChangedRows {
    #[inline]
    pub fn mark(&mut self, id: RowId) {
        let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
        if word >= self.words.len() {
            self.words.resize(word + 1, 0);
        }
        let w = &mut self.words[word];
        if *w & bit == 0 {
            *w |= bit;
            self.count += 1;
        }
    }

    /// Whether `id` changed; clears its bit.
    #[inline]
    pub fn take(&mut self, id: RowId) -> bool {
        let (word, bit) = (id as usize / 64, 1u64 << (id % 64));
        match self.words.get_mut(word) {
            Some(w) if *w & bit != 0 => {
                *w &= !bit;
                self.count -= 1;
                true
            }
            _ => false,
        }
    }

    /// The first changed id at or after `from`, below `end`.
    pub fn next(&self, from: RowId, end: RowId) -> Option<RowId> {
        let mut word = from as usize / 64;
        let mut mask = !0u64 << (from % 64);
        while word < self.words.len() && (word as u64) * 64 < u64::from(end) {
            let bits = self.words[word] & mask;
            if bits != 0 {
                let id = (word as u64 * 64 + u64::from(bits.trailing_zeros())) as RowId;
                return (id < end).then_some(id);
            }
            word += 1;
            mask = !0;
        }
        None
    }

    /// Whether `id` is marked (the mark stays).
    #[inline]
    pub fn contains(&self, id: RowId) -> bool {
        self.words
            .get(id as usize / 64)
            .is_some_and(|w| w & (1u64 << (id % 64)) != 0)
    }

    /// Ids changed and not written yet.
    pub fn count(&self) -> usize {
        self.count
    }

    pub fn clear(&mut self) {
        self.words.clear();
        self.count = 0;
    }

    /// Marks every id `other` marks.
    pub fn union_with(&mut self, other: &ChangedRows) {
        if other.words.len() > self.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (w, &o) in self.words.iter_mut().zip(&other.words) {
            self.count += (o & !*w).count_ones() as usize;
            *w |= o;
        }
    }

    /// Bytes held (not charged to data memory: one bit per row id).
    pub fn heap_bytes(&self) -> usize {
        self.words.capacity() * 8
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_are_found_in_order_and_taken_once() {
        let mut c = ChangedRows::default();
        for id in [3, 64, 65, 200, 3] {
            c.mark(id);
        }
        assert_eq!(c.count(), 4);
        assert_eq!(c.next(0, 1000), Some(3));
        assert_eq!(c.next(4, 1000), Some(64));
        assert_eq!(c.next(66, 1000), Some(200));
        assert_eq!(c.next(66, 200), None);
        assert!(c.contains(64) && !c.contains(66) && !c.contains(1 << 20));
        assert!(c.take(64));
        assert!(!c.take(64));
        assert!(!c.take(10_000));
        assert_eq!(c.next(4, 1000), Some(65));
        assert_eq!(c.count(), 3);
    }

    #[test]
    fn a_union_marks_both_sides_and_counts_each_id_once() {
        let mut a = ChangedRows::default();
        let mut b = ChangedRows::default();
        for id in [1, 64, 300] {
            a.mark(id);
        }
        for id in [1, 65, 1000] {
            b.mark(id);
        }
        a.union_with(&b);
        assert_eq!(a.count(), 5);
        for id in [1, 64, 65, 300, 1000] {
            assert!(a.contains(id), "{id}");
        }
        assert!(!a.contains(2) && !a.contains(999));
        // The shorter side grows; a union with itself changes nothing.
        let mut c = ChangedRows::default();
        c.union_with(&a);
        let copy = c.clone();
        c.union_with(&copy);
        assert_eq!(c.count(), 5);
        assert_eq!(c.next(0, 2000), Some(1));
        assert_eq!(c.next(301, 2000), Some(1000));
    }
}
