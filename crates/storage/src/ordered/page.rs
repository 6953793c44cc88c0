//! One B+tree node's entries in a single fixed-size buffer: a sorted slot
//! array growing up from the start and a heap of keys growing down from
//! the end, so that inserting or removing an entry shifts only slots.
//!
//! Layout of the buffer, for `len` entries of `S`-byte slots:
//!
//! ```text
//! [slot 0][slot 1]...[slot len-1][free][key records, any order][end]
//!                                      ^ heap_start            ^ PAGE_BYTES
//! slot   = [at: u16 LE][row: u32 LE][child: u32 LE, inner nodes only]
//! at     = offset of the entry's key record (bits 0-13) | PREFIXED (bit 15)
//! record = [key] when the key is `common_len` bytes long, else
//!          [length: 1 byte (< 128) or 2 bytes (bit 7 of the first set)][key]
//! ```
//!
//! Slots are in entry order; key records lie in the heap in the order they
//! arrived. A removed entry leaves its record dead in the heap (unless it is
//! the lowest one, which gives its bytes straight back); an insert that fits
//! in the page's live bytes but not in the gap between slots and heap first
//! compacts the heap, which is O(page) but rare. Keys of the page's common
//! length carry no length byte, so an index of fixed-width keys costs what
//! the old packed layout did: slot plus key.
//!
//! Invariants:
//! - Entries are in ascending `(key, row)` order (the tree keeps it; the
//!   page only shifts slots).
//! - `used_bytes() = S * len + heap_live <= PAGE_BYTES`, where `heap_live`
//!   is the bytes of the live records; `S * len <= heap_start`, and every
//!   live record lies in `heap_start..PAGE_BYTES`, no two overlapping.
//! - A record has no length prefix exactly when its key is `common_len`
//!   bytes long, and a prefix is as short as the length allows.
//! - The hole, if any, lies in the heap and overlaps no live record; the
//!   bytes between `heap_start` and the end that are neither live nor in
//!   the hole are dead, and only a compaction gives them back.
//! - An empty page has `heap_start == PAGE_BYTES` and no live bytes.
//! - An allocated page's buffer is exactly `PAGE_BYTES` long, so what a
//!   node costs is known without asking the allocator; a freed page holds
//!   an empty buffer, which allocates nothing.

use std::cmp::Ordering;

/// Longest key a page entry may hold.
pub(super) const KEY_BYTES_MAX: usize = 4096;
/// Slot bytes of a leaf entry: record offset + row id.
pub(super) const LEAF_SLOT_BYTES: usize = 6;
/// Slot bytes of an inner entry: record offset + separator row id + child
/// node.
pub(super) const INNER_SLOT_BYTES: usize = 10;
/// Longest length prefix of a key record.
const LEN_PREFIX_BYTES_MAX: usize = 2;
/// Bytes of every node's buffer. A full node plus one more entry must
/// always split into two halves that each fit, and with entries of at most
/// `E` bytes that holds exactly when the page has room for two of them:
/// the best split point leaves no half above `(used + 2E) / 2`. `E` is an
/// inner entry with a longest key and its 2-byte length prefix. (A split's
/// halves keep the page's common length, so every entry costs in them what
/// it cost in the page; the split point is chosen on those costs.)
pub(super) const PAGE_BYTES: usize = 2 * (KEY_BYTES_MAX + LEN_PREFIX_BYTES_MAX + INNER_SLOT_BYTES);

/// Bit of a slot's `at` field saying the record has a length prefix.
const PREFIXED: u16 = 0x8000;
/// Bits of a slot's `at` field holding the record's offset.
const AT_MASK: u16 = 0x3FFF;

const _: () = assert!(PAGE_BYTES <= AT_MASK as usize + 1, "offsets are 14 bits");
const _: () = assert!(KEY_BYTES_MAX < 1 << 15, "lengths fit a 2-byte prefix");

/// Total order of entries: key bytes, then row id.
#[inline]
pub(super) fn cmp_entry(a_key: &[u8], a_row: u32, b_key: &[u8], b_row: u32) -> Ordering {
    a_key.cmp(b_key).then(a_row.cmp(&b_row))
}

/// Bytes of the length prefix of a `key_len`-byte key.
#[inline]
fn prefix_bytes(key_len: usize) -> usize {
    if key_len < 0x80 {
        1
    } else {
        2
    }
}

/// Bytes of the record of a `key_len`-byte key in a page whose common key
/// length is `common_len`.
#[inline]
fn record_bytes(common_len: usize, key_len: usize) -> usize {
    if key_len == common_len {
        key_len
    } else {
        prefix_bytes(key_len) + key_len
    }
}

/// Where the record a slot's `at` field names lies in `buf`: its start,
/// the start of its key and its end.
#[inline]
fn record_extent(buf: &[u8], at: u16, common_len: usize) -> (usize, usize, usize) {
    let start = (at & AT_MASK) as usize;
    if at & PREFIXED == 0 {
        return (start, start, start + common_len);
    }
    let first = buf[start] as usize;
    if first < 0x80 {
        (start, start + 1, start + 1 + first)
    } else {
        let len = (first & 0x7F) | (buf[start + 1] as usize) << 7;
        (start, start + 2, start + 2 + len)
    }
}

pub(super) struct Page<const S: usize> {
    buf: Box<[u8]>,
    len: u16,
    /// Lowest byte of the heap; records are allocated below it.
    heap_start: u16,
    /// Bytes of the live records.
    heap_live: u16,
    /// Length of the keys stored without a prefix; set by the first entry
    /// of an empty page (or taken from the page a split copies from).
    common_len: u16,
    /// A dead stretch of the heap that the next records may reuse (the
    /// largest one freed since the last compaction, or what is left of it),
    /// so that an update which removes and inserts a key of one length in
    /// one page needs no compaction. `hole_bytes == 0`: none.
    hole_at: u16,
    hole_bytes: u16,
}

impl<const S: usize> Page<S> {
    /// A page with a buffer and no entries.
    pub(super) fn new() -> Self {
        Page {
            buf: vec![0; PAGE_BYTES].into_boxed_slice(),
            len: 0,
            heap_start: PAGE_BYTES as u16,
            heap_live: 0,
            common_len: 0,
            hole_at: 0,
            hole_bytes: 0,
        }
    }

    /// A page without a buffer: the state of a freed node.
    pub(super) fn unallocated() -> Self {
        Page {
            buf: Box::default(),
            len: 0,
            heap_start: PAGE_BYTES as u16,
            heap_live: 0,
            common_len: 0,
            hole_at: 0,
            hole_bytes: 0,
        }
    }

    pub(super) fn is_allocated(&self) -> bool {
        !self.buf.is_empty()
    }

    #[inline]
    pub(super) fn len(&self) -> usize {
        self.len as usize
    }

    /// Bytes of the live slots and records.
    #[inline]
    pub(super) fn used_bytes(&self) -> usize {
        S * self.len() + self.heap_live as usize
    }

    /// Bytes an entry with a `key_len`-byte key takes in this page.
    #[inline]
    pub(super) fn entry_bytes(&self, key_len: usize) -> usize {
        if self.len == 0 {
            S + key_len
        } else {
            S + record_bytes(self.common_len as usize, key_len)
        }
    }

    /// Whether one more entry with a key of `key_len` bytes fits.
    #[inline]
    pub(super) fn fits(&self, key_len: usize) -> bool {
        self.used_bytes() + self.entry_bytes(key_len) <= PAGE_BYTES
    }

    #[inline]
    fn at(&self, i: usize) -> u16 {
        u16::from_le_bytes([self.buf[S * i], self.buf[S * i + 1]])
    }

    #[inline]
    fn set_at(&mut self, i: usize, at: u16) {
        self.buf[S * i..S * i + 2].copy_from_slice(&at.to_le_bytes());
    }

    #[inline]
    fn extent(&self, i: usize) -> (usize, usize, usize) {
        debug_assert!(i < self.len());
        record_extent(&self.buf, self.at(i), self.common_len as usize)
    }

    #[inline]
    pub(super) fn key(&self, i: usize) -> &[u8] {
        let (_, start, end) = self.extent(i);
        &self.buf[start..end]
    }

    #[inline]
    pub(super) fn key_len(&self, i: usize) -> usize {
        let (_, start, end) = self.extent(i);
        end - start
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

    fn write_slot(&mut self, i: usize, at: u16, row: u32, child: u32) {
        let base = S * i;
        self.buf[base..base + 2].copy_from_slice(&at.to_le_bytes());
        self.buf[base + 2..base + 6].copy_from_slice(&row.to_le_bytes());
        if S == INNER_SLOT_BYTES {
            self.buf[base + 6..base + 10].copy_from_slice(&child.to_le_bytes());
        }
    }

    /// Writes the record of `key` at `start` and returns its `at` field.
    fn write_record(&mut self, start: usize, key: &[u8]) -> u16 {
        let len = key.len();
        if len == self.common_len as usize {
            self.buf[start..start + len].copy_from_slice(key);
            return start as u16;
        }
        let key_start = if len < 0x80 {
            self.buf[start] = len as u8;
            start + 1
        } else {
            self.buf[start] = 0x80 | (len & 0x7F) as u8;
            self.buf[start + 1] = (len >> 7) as u8;
            start + 2
        };
        self.buf[key_start..key_start + len].copy_from_slice(key);
        start as u16 | PREFIXED
    }

    /// Takes `bytes` of heap for a new record, from the hole if it is
    /// large enough, else below the heap (compacting first if the gap
    /// above the slots, which must also take `slot_bytes` more, is short).
    fn alloc_record(&mut self, bytes: usize, slot_bytes: usize) -> usize {
        let slots_end = S * self.len() + slot_bytes;
        if bytes > 0 && self.hole_bytes as usize >= bytes && slots_end <= self.heap_start as usize {
            let start = self.hole_at as usize;
            self.hole_at += bytes as u16;
            self.hole_bytes -= bytes as u16;
            self.heap_live += bytes as u16;
            return start;
        }
        if (self.heap_start as usize) < slots_end + bytes {
            self.compact();
        }
        let start = self.heap_start as usize - bytes;
        self.heap_start = start as u16;
        self.heap_live += bytes as u16;
        start
    }

    /// Moves the live records to the end of the buffer, in entry order,
    /// so that every free byte lies between the slots and the heap. O(page);
    /// only an insert the gap cannot take runs it.
    fn compact(&mut self) {
        let heap_start = self.heap_start as usize;
        let mut old = [0u8; PAGE_BYTES];
        old[heap_start..].copy_from_slice(&self.buf[heap_start..]);
        let common_len = self.common_len as usize;
        let mut top = PAGE_BYTES;
        for i in 0..self.len() {
            let at = self.at(i);
            let (start, _, end) = record_extent(&old, at, common_len);
            top -= end - start;
            self.buf[top..top + end - start].copy_from_slice(&old[start..end]);
            self.set_at(i, top as u16 | (at & PREFIXED));
        }
        assert_eq!(PAGE_BYTES - top, self.heap_live as usize, "live heap bytes");
        self.heap_start = top as u16;
        self.hole_bytes = 0;
        self.hole_at = 0;
    }

    /// Inserts an entry at position `i` (`child` is ignored in a leaf).
    /// The caller has checked that it fits.
    pub(super) fn insert(&mut self, i: usize, key: &[u8], row: u32, child: u32) {
        let n = self.len();
        assert!(
            i <= n && key.len() <= KEY_BYTES_MAX && self.fits(key.len()),
            "page insert without room"
        );
        if n == 0 {
            self.common_len = key.len() as u16;
        }
        let bytes = record_bytes(self.common_len as usize, key.len());
        let start = self.alloc_record(bytes, S);
        let at = self.write_record(start, key);
        self.buf.copy_within(S * i..S * n, S * (i + 1));
        self.write_slot(i, at, row, child);
        self.len += 1;
    }

    /// Removes the entry at position `i`; its record stays dead in the heap
    /// unless it is the lowest one.
    pub(super) fn remove(&mut self, i: usize) {
        let n = self.len();
        assert!(i < n, "page remove past the end");
        let (start, _, end) = self.extent(i);
        self.free_record(start, end - start);
        self.buf.copy_within(S * (i + 1)..S * n, S * i);
        self.len -= 1;
        if self.len == 0 {
            self.clear_heap();
        }
    }

    /// Accounts the record at `start` as dead: the heap gives it back at
    /// once if it is the lowest record, else it may become the hole.
    fn free_record(&mut self, start: usize, bytes: usize) {
        self.heap_live -= bytes as u16;
        if start == self.heap_start as usize {
            self.heap_start += bytes as u16;
            if self.hole_bytes > 0 && self.hole_at == self.heap_start {
                self.heap_start += self.hole_bytes;
                self.hole_bytes = 0;
                self.hole_at = 0;
            }
        } else if bytes > self.hole_bytes as usize {
            self.hole_at = start as u16;
            self.hole_bytes = bytes as u16;
        }
    }

    fn clear_heap(&mut self) {
        assert_eq!(self.heap_live, 0, "an empty page holds no records");
        self.heap_start = PAGE_BYTES as u16;
        self.hole_at = 0;
        self.hole_bytes = 0;
    }

    /// Replaces the key and row of entry `i`, keeping its child. The new
    /// key must fit once the old one is gone (the tree only empties keys,
    /// and an empty key never takes more than the key it replaces).
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
    /// Their records stay dead here until a compaction needs the bytes.
    pub(super) fn move_tail_to(&mut self, at: usize, right: &mut Page<S>) {
        let n = self.len();
        assert!(at <= n);
        right.append_range(self, at..n);
        for j in at..n {
            let (start, _, end) = self.extent(j);
            self.heap_live -= (end - start) as u16;
        }
        self.len = at as u16;
        if at == 0 {
            self.clear_heap();
        }
    }

    /// Bytes that appending copies of entries `range` of `other` adds to
    /// this page (slots and records).
    pub(super) fn appended_bytes(&self, other: &Page<S>, range: std::ops::Range<usize>) -> usize {
        let common_len = if self.len == 0 {
            other.common_len
        } else {
            self.common_len
        };
        if common_len == other.common_len && 2 * range.len() > other.len() {
            // Every entry costs here what it costs there: count the few
            // that are left out instead of the many that are not.
            let left_out: usize = (0..range.start)
                .chain(range.end..other.len())
                .map(|j| {
                    let (start, _, end) = other.extent(j);
                    S + end - start
                })
                .sum();
            return other.used_bytes() - left_out;
        }
        range
            .map(|j| S + record_bytes(common_len as usize, other.key_len(j)))
            .sum()
    }

    /// Appends copies of entries `range` of `other`; they must fit. An
    /// empty page takes `other`'s common key length, so each entry costs
    /// what it did there.
    pub(super) fn append_range(&mut self, other: &Page<S>, range: std::ops::Range<usize>) {
        if range.is_empty() {
            return;
        }
        let n = self.len();
        if n == 0 {
            self.common_len = other.common_len;
        }
        let added = self.appended_bytes(other, range.clone());
        assert!(
            self.used_bytes() + added <= PAGE_BYTES,
            "page append without room"
        );
        if (self.heap_start as usize) < S * n + added {
            self.compact();
        }
        let m = range.len();
        for (k, j) in range.enumerate() {
            let key = other.key(j);
            let bytes = record_bytes(self.common_len as usize, key.len());
            let start = self.heap_start as usize - bytes;
            self.heap_start = start as u16;
            self.heap_live += bytes as u16;
            let at = self.write_record(start, key);
            let child = if S == INNER_SLOT_BYTES {
                other.child(j)
            } else {
                0
            };
            self.write_slot(n + k, at, other.row(j), child);
        }
        self.len += m as u16;
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

    /// Asserts the layout invariants of the module doc: slot and heap
    /// bounds, record encoding, no two records overlapping, the hole
    /// overlapping none, and the live-byte count.
    pub(super) fn check(&self) {
        assert_eq!(
            self.buf.len(),
            PAGE_BYTES,
            "allocated page has the page size"
        );
        let n = self.len();
        let heap_start = self.heap_start as usize;
        assert!(
            S * n <= heap_start && heap_start <= PAGE_BYTES,
            "heap start"
        );
        assert!(self.used_bytes() <= PAGE_BYTES);
        if n == 0 {
            assert_eq!(heap_start, PAGE_BYTES, "empty page's heap");
            assert_eq!(self.heap_live, 0);
            assert_eq!(self.hole_bytes, 0);
            return;
        }
        let common_len = self.common_len as usize;
        assert!(common_len <= KEY_BYTES_MAX);
        // Records that take bytes, with the hole as one more (dead) stretch.
        let mut stretches: Vec<(usize, usize, bool)> = Vec::with_capacity(n + 1);
        let mut live = 0;
        for i in 0..n {
            let at = self.at(i);
            assert_eq!(at & !(AT_MASK | PREFIXED), 0, "slot {i}'s spare bit");
            let prefixed = at & PREFIXED != 0;
            assert!(
                !prefixed || ((at & AT_MASK) as usize) < PAGE_BYTES,
                "slot {i}'s record is past the page"
            );
            let (start, key_start, end) = self.extent(i);
            assert!(end <= PAGE_BYTES, "slot {i}'s record is past the page");
            let key_len = end - key_start;
            assert!(key_len <= KEY_BYTES_MAX, "slot {i}'s key is too long");
            if prefixed {
                assert_ne!(
                    key_len, common_len,
                    "slot {i}: a common-length key with a prefix"
                );
                assert_eq!(
                    key_start - start,
                    prefix_bytes(key_len),
                    "slot {i}: a prefix longer than it needs"
                );
            }
            assert_eq!(end - start, record_bytes(common_len, key_len));
            live += end - start;
            if end > start {
                assert!(start >= heap_start, "slot {i}'s record is below the heap");
                stretches.push((start, end, false));
            }
        }
        assert_eq!(live, self.heap_live as usize, "live heap bytes");
        if self.hole_bytes > 0 {
            let hole_at = self.hole_at as usize;
            assert!(
                hole_at >= heap_start && hole_at + self.hole_bytes as usize <= PAGE_BYTES,
                "hole outside the heap"
            );
            stretches.push((hole_at, hole_at + self.hole_bytes as usize, true));
        }
        stretches.sort_unstable();
        for pair in stretches.windows(2) {
            assert!(
                pair[0].1 <= pair[1].0,
                "heap stretches overlap: {:?} and {:?}",
                pair[0],
                pair[1]
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};

    type Inner = Page<INNER_SLOT_BYTES>;
    type Leaf = Page<LEAF_SLOT_BYTES>;

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
        // The largest entry has the longest key and a length prefix, so
        // the page's common key length must be another one.
        let mut p = Inner::new();
        let key = vec![7u8; KEY_BYTES_MAX];
        p.insert(0, b"x", 0, 0);
        p.insert(1, &key, 1, 0);
        p.remove(0);
        assert!(p.fits(KEY_BYTES_MAX));
        p.insert(1, &key, 2, 0);
        p.check();
        assert_eq!(p.used_bytes(), PAGE_BYTES);
        assert!(!p.fits(0));
    }

    #[test]
    fn common_length_keys_cost_slot_plus_key() {
        let mut p = Leaf::new();
        while p.fits(4) {
            p.insert(p.len(), &(p.len() as u32).to_be_bytes(), 0, 0);
        }
        assert_eq!(p.len(), PAGE_BYTES / (LEAF_SLOT_BYTES + 4));
        p.check();
    }

    /// Random inserts, removes and splits against a `Vec`, with `check()`
    /// after each: dead records, the hole and compaction never lose or
    /// overlap a key.
    #[test]
    fn random_edits_match_a_vec() {
        let mut rng = SmallRng::seed_from_u64(5);
        let mut p = Leaf::new();
        let mut model: Vec<(Vec<u8>, u32)> = Vec::new();
        let mut compactions_possible = 0;
        for step in 0..30_000u32 {
            let len = match rng.random_range(0..6) {
                0..=2 => 5,
                3 => rng.random_range(0..10),
                4 => rng.random_range(100..300),
                _ => rng.random_range(0..=KEY_BYTES_MAX),
            };
            let key: Vec<u8> = (0..len).map(|_| rng.random()).collect();
            if rng.random_bool(0.55) && p.fits(len) {
                let at = rng.random_range(0..=model.len());
                if (p.heap_start as usize) < LEAF_SLOT_BYTES * (p.len() + 1) + len {
                    compactions_possible += 1;
                }
                p.insert(at, &key, step, 0);
                model.insert(at, (key, step));
            } else if !model.is_empty() {
                let at = rng.random_range(0..model.len());
                p.remove(at);
                model.remove(at);
            }
            if step % 1000 == 999 && p.len() > 0 {
                let at = rng.random_range(0..=p.len());
                let mut right = Leaf::new();
                p.move_tail_to(at, &mut right);
                p.check();
                right.check();
                assert_eq!(leaf_entries(&right), model[at..]);
                assert_eq!(p.appended_bytes(&right, 0..right.len()), right.used_bytes());
                p.append_range(&right, 0..right.len());
            }
            p.check();
            assert_eq!(leaf_entries(&p), model);
        }
        assert!(compactions_possible > 100, "{compactions_possible}");
    }

    fn leaf_entries(p: &Leaf) -> Vec<(Vec<u8>, u32)> {
        (0..p.len())
            .map(|i| (p.key(i).to_vec(), p.row(i)))
            .collect()
    }
}
