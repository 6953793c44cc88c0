//! One B+tree node's entries, packed in a single fixed-size buffer.
//!
//! Layout of the buffer, for `len` entries of `S`-byte slots:
//!
//! ```text
//! [slot 0][slot 1]...[slot len-1][key 0][key 1]...[key len-1][free]
//! slot = [end: u16 LE][row: u32 LE][child: u32 LE, inner nodes only]
//! ```
//!
//! Keys are packed in entry order right after the slots; `end` is where a
//! key ends, counted from the first key byte, so key `i` is
//! `end(i-1)..end(i)` (from 0 for the first).
//!
//! Invariants:
//! - Entries are in ascending `(key, row)` order (the tree keeps it; the
//!   page only shifts bytes).
//! - `used_bytes() = S * len + key_bytes <= PAGE_BYTES`; the ends are
//!   non-decreasing and the last is `key_bytes`.
//! - An allocated page's buffer is exactly `PAGE_BYTES` long, so what a
//!   node costs is known without asking the allocator; a freed page holds
//!   an empty buffer, which allocates nothing.

use std::cmp::Ordering;

/// Longest key a page entry may hold.
pub(super) const KEY_BYTES_MAX: usize = 4096;
/// Slot bytes of a leaf entry: end + row id.
pub(super) const LEAF_SLOT_BYTES: usize = 6;
/// Slot bytes of an inner entry: end + separator row id + child node.
pub(super) const INNER_SLOT_BYTES: usize = 10;
/// Bytes of every node's buffer. A full node plus one more entry must
/// always split into two halves that each fit, and with entries of at most
/// `E` bytes that holds exactly when the page has room for two of them:
/// the best split point leaves no half above `(used + 2E) / 2`.
pub(super) const PAGE_BYTES: usize = 2 * (KEY_BYTES_MAX + INNER_SLOT_BYTES);

const _: () = assert!(PAGE_BYTES <= u16::MAX as usize, "ends are u16");

/// Total order of entries: key bytes, then row id.
#[inline]
pub(super) fn cmp_entry(a_key: &[u8], a_row: u32, b_key: &[u8], b_row: u32) -> Ordering {
    a_key.cmp(b_key).then(a_row.cmp(&b_row))
}

pub(super) struct Page<const S: usize> {
    buf: Box<[u8]>,
    len: u16,
    key_bytes: u16,
}

impl<const S: usize> Page<S> {
    /// A page with a buffer and no entries.
    pub(super) fn new() -> Self {
        Page {
            buf: vec![0; PAGE_BYTES].into_boxed_slice(),
            len: 0,
            key_bytes: 0,
        }
    }

    /// A page without a buffer: the state of a freed node.
    pub(super) fn unallocated() -> Self {
        Page {
            buf: Box::default(),
            len: 0,
            key_bytes: 0,
        }
    }

    pub(super) fn is_allocated(&self) -> bool {
        !self.buf.is_empty()
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    #[inline]
    pub(super) fn used_bytes(&self) -> usize {
        S * self.len() + self.key_bytes as usize
    }

    /// Whether one more entry with a key of `key_len` bytes fits.
    #[inline]
    pub(super) fn fits(&self, key_len: usize) -> bool {
        self.used_bytes() + S + key_len <= PAGE_BYTES
    }

    #[inline]
    fn end(&self, i: usize) -> usize {
        u16::from_le_bytes([self.buf[S * i], self.buf[S * i + 1]]) as usize
    }

    #[inline]
    fn set_end(&mut self, i: usize, end: usize) {
        self.buf[S * i..S * i + 2].copy_from_slice(&(end as u16).to_le_bytes());
    }

    #[inline]
    fn start(&self, i: usize) -> usize {
        if i == 0 {
            0
        } else {
            self.end(i - 1)
        }
    }

    #[inline]
    pub(super) fn key(&self, i: usize) -> &[u8] {
        debug_assert!(i < self.len());
        let base = S * self.len();
        &self.buf[base + self.start(i)..base + self.end(i)]
    }

    #[inline]
    pub(super) fn key_len(&self, i: usize) -> usize {
        self.end(i) - self.start(i)
    }

    #[inline]
    pub(super) fn row(&self, i: usize) -> u32 {
        let at = S * i + 2;
        u32::from_le_bytes(self.buf[at..at + 4].try_into().expect("4 bytes"))
    }

    /// The child node of inner entry `i`.
    #[inline]
    pub(super) fn child(&self, i: usize) -> u32 {
        debug_assert_eq!(S, INNER_SLOT_BYTES);
        let at = S * i + 6;
        u32::from_le_bytes(self.buf[at..at + 4].try_into().expect("4 bytes"))
    }

    fn write_slot(&mut self, i: usize, end: usize, row: u32, child: u32) {
        let at = S * i;
        self.buf[at..at + 2].copy_from_slice(&(end as u16).to_le_bytes());
        self.buf[at + 2..at + 6].copy_from_slice(&row.to_le_bytes());
        if S == INNER_SLOT_BYTES {
            self.buf[at + 6..at + 10].copy_from_slice(&child.to_le_bytes());
        }
    }

    /// Inserts an entry at position `i` (`child` is ignored in a leaf).
    /// The caller has checked that it fits.
    pub(super) fn insert(&mut self, i: usize, key: &[u8], row: u32, child: u32) {
        let n = self.len();
        let key_bytes = self.key_bytes as usize;
        let key_len = key.len();
        assert!(i <= n && self.fits(key_len), "page insert without room");
        let old_base = S * n;
        let new_base = S * (n + 1);
        let start = self.start(i);
        // Every move goes up, so do the highest first: keys after the new
        // one, keys before it, then the slots after its slot.
        self.buf.copy_within(
            old_base + start..old_base + key_bytes,
            new_base + start + key_len,
        );
        self.buf.copy_within(old_base..old_base + start, new_base);
        self.buf[new_base + start..new_base + start + key_len].copy_from_slice(key);
        self.buf.copy_within(S * i..S * n, S * (i + 1));
        for j in i + 1..=n {
            let end = self.end(j);
            self.set_end(j, end + key_len);
        }
        self.write_slot(i, start + key_len, row, child);
        self.len += 1;
        self.key_bytes += key_len as u16;
    }

    /// Removes the entry at position `i`.
    pub(super) fn remove(&mut self, i: usize) {
        let n = self.len();
        assert!(i < n, "page remove past the end");
        let key_bytes = self.key_bytes as usize;
        let (start, end) = (self.start(i), self.end(i));
        let key_len = end - start;
        let old_base = S * n;
        let new_base = S * (n - 1);
        // Every move goes down, so do the lowest first.
        self.buf.copy_within(S * (i + 1)..S * n, S * i);
        for j in i..n - 1 {
            let e = self.end(j);
            self.set_end(j, e - key_len);
        }
        self.buf.copy_within(old_base..old_base + start, new_base);
        self.buf
            .copy_within(old_base + end..old_base + key_bytes, new_base + start);
        self.len -= 1;
        self.key_bytes -= key_len as u16;
    }

    /// Replaces the key and row of entry `i`, keeping its child. The new
    /// key must fit in place of the old one (the tree only shortens keys).
    pub(super) fn set_key(&mut self, i: usize, key: &[u8], row: u32) {
        let child = if S == INNER_SLOT_BYTES {
            self.child(i)
        } else {
            0
        };
        self.remove(i);
        self.insert(i, key, row, child);
    }

    /// Moves entries `at..` to the end of `right`, which must have room.
    pub(super) fn move_tail_to(&mut self, at: usize, right: &mut Page<S>) {
        let n = self.len();
        assert!(at <= n);
        right.append_range(self, at..n);
        let start = self.start(at);
        self.buf.copy_within(S * n..S * n + start, S * at);
        self.len = at as u16;
        self.key_bytes = start as u16;
    }

    /// Appends copies of entries `range` of `other`; they must fit.
    pub(super) fn append_range(&mut self, other: &Page<S>, range: std::ops::Range<usize>) {
        if range.is_empty() {
            return;
        }
        let n = self.len();
        let m = range.len();
        let key_bytes = self.key_bytes as usize;
        let from_start = other.start(range.start);
        let from_end = other.end(range.end - 1);
        let added_key_bytes = from_end - from_start;
        assert!(
            self.used_bytes() + S * m + added_key_bytes <= PAGE_BYTES,
            "page append without room"
        );
        let new_base = S * (n + m);
        self.buf.copy_within(S * n..S * n + key_bytes, new_base);
        let other_base = S * other.len();
        self.buf[new_base + key_bytes..new_base + key_bytes + added_key_bytes]
            .copy_from_slice(&other.buf[other_base + from_start..other_base + from_end]);
        for (k, j) in range.enumerate() {
            let end = other.end(j) - from_start + key_bytes;
            let child = if S == INNER_SLOT_BYTES {
                other.child(j)
            } else {
                0
            };
            self.write_slot(n + k, end, other.row(j), child);
        }
        self.len += m as u16;
        self.key_bytes += added_key_bytes as u16;
    }

    /// The first position in `lo..hi` where `pred` is false, for `pred`
    /// true on a prefix of that range.
    #[inline]
    fn partition_point(&self, mut lo: usize, mut hi: usize, pred: impl Fn(usize) -> bool) -> usize {
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if pred(mid) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }

    /// The first position whose entry is `>= (key, row)`.
    #[inline]
    pub(super) fn lower_bound(&self, key: &[u8], row: u32) -> usize {
        self.partition_point(0, self.len(), |j| {
            cmp_entry(self.key(j), self.row(j), key, row).is_lt()
        })
    }

    /// The first position whose entry is `> (key, row)`.
    #[inline]
    pub(super) fn upper_bound(&self, key: &[u8], row: u32) -> usize {
        self.partition_point(0, self.len(), |j| {
            cmp_entry(self.key(j), self.row(j), key, row).is_le()
        })
    }

    /// The position of `(key, row)`, or where it would go.
    #[inline]
    pub(super) fn find(&self, key: &[u8], row: u32) -> Result<usize, usize> {
        let i = self.lower_bound(key, row);
        if i < self.len() && self.row(i) == row && self.key(i) == key {
            Ok(i)
        } else {
            Err(i)
        }
    }

    /// In an inner node, the entry whose child covers `(key, row)`: the
    /// last one whose separator is `<= (key, row)`. Entry 0's separator
    /// stands for "below everything" and is not compared.
    #[inline]
    pub(super) fn route(&self, key: &[u8], row: u32) -> usize {
        let past = self.partition_point(1, self.len(), |j| {
            cmp_entry(self.key(j), self.row(j), key, row).is_le()
        });
        past - 1
    }

    /// Asserts the layout invariants of the module doc.
    pub(super) fn check(&self) {
        assert_eq!(
            self.buf.len(),
            PAGE_BYTES,
            "allocated page has the page size"
        );
        assert!(self.used_bytes() <= PAGE_BYTES);
        let mut prev_end = 0;
        for i in 0..self.len() {
            let end = self.end(i);
            assert!(end >= prev_end, "key ends go backwards at {i}");
            assert!(end - prev_end <= KEY_BYTES_MAX);
            prev_end = end;
        }
        assert_eq!(prev_end, self.key_bytes as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Inner = Page<INNER_SLOT_BYTES>;

    fn entries(p: &Inner) -> Vec<(Vec<u8>, u32, u32)> {
        (0..p.len())
            .map(|i| (p.key(i).to_vec(), p.row(i), p.child(i)))
            .collect()
    }

    #[test]
    fn edits_keep_entries_in_place() {
        let mut p = Inner::new();
        let mut model: Vec<(Vec<u8>, u32, u32)> = Vec::new();
        let keys: [&[u8]; 6] = [b"", b"m", b"abc", b"zzzz", b"", b"q\0q"];
        for (n, k) in keys.iter().enumerate() {
            let at = (n * 7) % (model.len() + 1);
            p.insert(at, k, n as u32, 100 + n as u32);
            model.insert(at, (k.to_vec(), n as u32, 100 + n as u32));
            p.check();
            assert_eq!(entries(&p), model);
        }
        p.set_key(2, b"", 9);
        model[2].0.clear();
        model[2].1 = 9;
        assert_eq!(entries(&p), model);
        p.remove(3);
        model.remove(3);
        p.check();
        assert_eq!(entries(&p), model);

        let mut right = Inner::new();
        right.insert(0, b"tail", 1, 1);
        p.move_tail_to(2, &mut right);
        let mut expected_right = vec![(b"tail".to_vec(), 1, 1)];
        expected_right.extend(model.drain(2..));
        p.check();
        right.check();
        assert_eq!(entries(&p), model);
        assert_eq!(entries(&right), expected_right);

        p.append_range(&right, 1..right.len());
        model.extend(expected_right.drain(1..));
        p.check();
        assert_eq!(entries(&p), model);
    }

    #[test]
    fn two_largest_entries_fill_a_page() {
        let mut p = Inner::new();
        let key = vec![7u8; KEY_BYTES_MAX];
        p.insert(0, &key, 0, 0);
        assert!(p.fits(KEY_BYTES_MAX));
        p.insert(1, &key, 1, 0);
        assert_eq!(p.used_bytes(), PAGE_BYTES);
        assert!(!p.fits(0));
    }
}
