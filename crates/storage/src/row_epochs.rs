//! The epoch of each row's last committed change, by row id (NDB keeps a
//! GCI in every row header). A restarting replica that restored its own
//! files through epoch S needs from a live replica only the rows whose
//! epoch is later than S: the copy compares against these.
//!
//! Four bytes a row: an epoch past `u32::MAX - 1`, or a row whose epoch
//! was never set, reads as "unknown", which is later than every epoch —
//! such a row is always copied. Being wrong on the high side only sends
//! more; a row must never read older than its last change.

use crate::rows::RowId;

const UNKNOWN: u32 = u32::MAX;

#[derive(Clone, Debug, Default)]
pub struct RowEpochs {
    epochs: Vec<u32>,
}

impl RowEpochs {
    /// Row `id` changed in `epoch` (or holds a change of no later one).
    /// Epoch 0 (no epochs run, or not known) is stored as unknown: a row
    /// must never read older than its change.
    #[inline]
    pub fn set(&mut self, id: RowId, epoch: u64) {
        let i = id as usize;
        if i >= self.epochs.len() {
            self.epochs.resize(i + 1, UNKNOWN);
        }
        self.epochs[i] = match u32::try_from(epoch) {
            Ok(0) | Err(_) => UNKNOWN,
            Ok(e) => e,
        };
    }

    /// The epoch of row `id`'s last change (`u64::MAX`: unknown).
    #[inline]
    pub fn get(&self, id: RowId) -> u64 {
        match self.epochs.get(id as usize) {
            Some(&e) if e != UNKNOWN => u64::from(e),
            _ => u64::MAX,
        }
    }

    /// Whether row `id` may have changed after epoch `since`.
    #[inline]
    pub fn changed_after(&self, id: RowId, since: u64) -> bool {
        self.get(id) > since
    }

    pub fn clear(&mut self) {
        self.epochs.clear();
    }

    /// Bytes held (not charged to data memory: four per row id).
    pub fn heap_bytes(&self) -> usize {
        self.epochs.capacity() * 4
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_too_large_epochs_count_as_changed() {
        let mut e = RowEpochs::default();
        e.set(5, 10);
        assert_eq!(e.get(5), 10);
        assert!(!e.changed_after(5, 10));
        assert!(e.changed_after(5, 9));
        // Epoch 0, or never set: unknown.
        e.set(6, 0);
        assert_eq!(e.get(6), u64::MAX);
        assert!(e.changed_after(4, u64::MAX - 1));
        assert!(e.changed_after(1000, 0));
        // Too large for four bytes: unknown too.
        e.set(5, u64::from(u32::MAX) + 7);
        assert_eq!(e.get(5), u64::MAX);
        assert!(e.changed_after(5, u64::from(u32::MAX) + 100));
    }
}
