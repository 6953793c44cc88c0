//! Row store: fixed-size row slots in 32 KiB pages plus a heap of variable
//! parts, addressed by stable, compact `u32` row ids.
//!
//! Invariants:
//! - A slot is `[flag byte][fixed part]`. The flag says free, committed or
//!   tentative; it is the only per-row overhead of the store.
//! - Row id = `page_no * slots_per_page + slot`. Ids below `high_water`
//!   have been handed out at least once; a free one is on the free list,
//!   doubly linked through the first 8 bytes of its slot (next, then
//!   previous; so slots are at least 8 bytes wide and the free list costs
//!   no memory of its own; the head's previous link is not kept). Doubly
//!   linked because a backup replica stores each row at the id its primary
//!   chose ([`RowStore::insert_charged_at`]), which takes an arbitrary slot
//!   off the list in O(1).
//! - Pages are charged when allocated and kept until the fragment is
//!   dropped, as in NDB: their slots are reused, not returned.
//! - A var part lives in its own allocation in [`VarHeap`]; its handle is
//!   stored little-endian at `var_handle_offset` inside the fixed part. An
//!   empty var part has no allocation: its handle is [`VAR_NONE`].
//! - `charged_bytes` is exactly what this store has charged to `Memory`.

use crate::memory::{Memory, OutOfMemory, PAGE_BYTES};

/// A row's stable id inside its fragment.
pub type RowId = u32;

/// "No row": ends the free list. Never a valid row id.
const ROW_NONE: u32 = u32::MAX;
/// Handle of an empty var part (no allocation).
pub(crate) const VAR_NONE: u32 = u32::MAX;

const FLAG_FREE: u8 = 0;
const FLAG_COMMITTED: u8 = 1;
const FLAG_TENTATIVE: u8 = 2;

/// Bytes a var part of `len` bytes is charged: the bytes rounded up to the
/// allocator's 8-byte granule plus 16 bytes for the allocation's header and
/// its slot in the heap. An empty var part has no allocation and costs 0.
#[inline]
pub(crate) fn var_charge(len: usize) -> usize {
    if len == 0 {
        0
    } else {
        len.next_multiple_of(8) + 16
    }
}

/// Division by a constant chosen at run time, by multiplication (Lemire,
/// "Faster Remainder by Direct Computation", 2019). Row id -> page is on
/// every row access, and a hardware divide costs several times a multiply.
#[derive(Clone, Copy, Debug)]
struct FastDiv {
    divisor: u32,
    /// `ceil(2^64 / divisor)`; needs 65 bits when `divisor == 1`.
    magic: u128,
}

impl FastDiv {
    fn new(divisor: u32) -> Self {
        assert!(divisor > 0);
        FastDiv {
            divisor,
            magic: u128::from(u64::MAX) / u128::from(divisor) + 1,
        }
    }

    /// `(n / divisor, n % divisor)`.
    #[inline]
    fn div_rem(self, n: u32) -> (u32, u32) {
        let q = ((self.magic * u128::from(n)) >> 64) as u32;
        (q, n - q * self.divisor)
    }
}

/// Variable parts: one boxed slice each, handles reused through a free list.
#[derive(Debug, Default)]
struct VarHeap {
    parts: Vec<Box<[u8]>>,
    free: Vec<u32>,
    charged_bytes: usize,
}

impl VarHeap {
    #[inline]
    fn get(&self, handle: u32) -> &[u8] {
        if handle == VAR_NONE {
            &[]
        } else {
            &self.parts[handle as usize]
        }
    }

    /// Stores `bytes` (already charged by the caller) and returns the handle.
    fn alloc(&mut self, bytes: &[u8]) -> u32 {
        if bytes.is_empty() {
            return VAR_NONE;
        }
        self.charged_bytes += var_charge(bytes.len());
        match self.free.pop() {
            Some(h) => {
                self.parts[h as usize] = bytes.into();
                h
            }
            None => {
                // VAR_NONE is reserved, so at most u32::MAX handles exist;
                // that many var parts cannot fit in any real data_memory.
                assert!(
                    self.parts.len() < VAR_NONE as usize,
                    "var heap handle space exhausted"
                );
                self.parts.push(bytes.into());
                (self.parts.len() - 1) as u32
            }
        }
    }

    /// Frees a var part and returns the bytes its charge was.
    fn free(&mut self, handle: u32) -> usize {
        if handle == VAR_NONE {
            return 0;
        }
        let part = std::mem::take(&mut self.parts[handle as usize]);
        let charge = var_charge(part.len());
        self.charged_bytes -= charge;
        self.free.push(handle);
        charge
    }

    /// Replaces the part behind `handle` (charges settled by the caller)
    /// and returns the new handle.
    fn replace(&mut self, handle: u32, bytes: &[u8]) -> u32 {
        if handle == VAR_NONE {
            return self.alloc(bytes);
        }
        if bytes.is_empty() {
            self.free(handle);
            return VAR_NONE;
        }
        let part = &mut self.parts[handle as usize];
        self.charged_bytes = self.charged_bytes - var_charge(part.len()) + var_charge(bytes.len());
        if part.len() == bytes.len() {
            // Same size: overwrite in place and spare the allocator.
            part.copy_from_slice(bytes);
        } else {
            *part = bytes.into();
        }
        handle
    }
}

/// Fixed-size row slots in pages plus their var parts.
#[derive(Debug)]
pub(crate) struct RowStore {
    fixed_size: usize,
    /// Flag byte + fixed part (at least 4 bytes, for the free-list link).
    slot_bytes: usize,
    slots_per_page: u32,
    page_div: FastDiv,
    pages: Vec<Box<[u8]>>,
    /// Row ids `< high_water` have been used; the rest of the last page is
    /// untouched, so a fresh page does not have to be threaded onto the
    /// free list slot by slot.
    high_water: u32,
    free_head: u32,
    live_rows: usize,
    var_handle_offset: Option<usize>,
    var: VarHeap,
}

impl RowStore {
    pub(crate) fn new(fixed_size: usize, var_handle_offset: Option<usize>) -> Self {
        assert!(fixed_size > 0, "a row has at least one fixed byte");
        if let Some(at) = var_handle_offset {
            assert!(at + 4 <= fixed_size, "var handle outside the fixed part");
        }
        let slot_bytes = 1 + fixed_size.max(8);
        let slots_per_page = PAGE_BYTES / slot_bytes;
        assert!(
            slots_per_page > 0,
            "fixed part of {fixed_size} bytes does not fit a page"
        );
        RowStore {
            fixed_size,
            slot_bytes,
            slots_per_page: slots_per_page as u32,
            page_div: FastDiv::new(slots_per_page as u32),
            pages: Vec::new(),
            high_water: 0,
            free_head: ROW_NONE,
            live_rows: 0,
            var_handle_offset,
            var: VarHeap::default(),
        }
    }

    #[inline]
    pub(crate) fn live_rows(&self) -> usize {
        self.live_rows
    }

    /// Every byte this store has charged: pages and var parts.
    #[inline]
    pub(crate) fn charged_bytes(&self) -> usize {
        self.pages.len() * PAGE_BYTES + self.var.charged_bytes
    }

    #[inline]
    pub(crate) fn page_count(&self) -> usize {
        self.pages.len()
    }

    /// Byte range of a slot inside its page.
    #[inline]
    fn locate(&self, id: RowId) -> (usize, usize) {
        assert!(id < self.high_water, "row id {id} out of range");
        let (page, slot) = self.page_div.div_rem(id);
        (page as usize, slot as usize * self.slot_bytes)
    }

    #[inline]
    fn flag(&self, id: RowId) -> u8 {
        let (page, at) = self.locate(id);
        self.pages[page][at]
    }

    /// The whole slot of a row in use (flag byte first).
    #[inline]
    fn live_slot(&self, id: RowId) -> &[u8] {
        let (page, at) = self.locate(id);
        let slot = &self.pages[page][at..at + self.slot_bytes];
        assert!(slot[0] != FLAG_FREE, "row {id} is not in use");
        slot
    }

    #[inline]
    fn live_slot_mut(&mut self, id: RowId) -> &mut [u8] {
        let (page, at) = self.locate(id);
        let slot = &mut self.pages[page][at..at + self.slot_bytes];
        assert!(slot[0] != FLAG_FREE, "row {id} is not in use");
        slot
    }

    /// The first byte of a row's slot, in use or not (for warming: any
    /// id below the high water is a valid place to read). Reading the
    /// slot's last byte too, for the rest of a 25-column row, measured no
    /// faster: the hardware brings the adjacent line.
    #[inline]
    pub(crate) fn first_byte(&self, id: RowId) -> u8 {
        if id >= self.high_water {
            return 0;
        }
        self.flag(id)
    }

    #[inline]
    pub(crate) fn fixed(&self, id: RowId) -> &[u8] {
        &self.live_slot(id)[1..1 + self.fixed_size]
    }

    #[inline]
    fn var_handle(&self, fixed: &[u8]) -> u32 {
        match self.var_handle_offset {
            Some(at) => u32::from_le_bytes(fixed[at..at + 4].try_into().expect("4 bytes")),
            None => VAR_NONE,
        }
    }

    /// The var part of a row, given its fixed part (empty if none).
    #[inline]
    pub(crate) fn var_of(&self, fixed: &[u8]) -> &[u8] {
        self.var.get(self.var_handle(fixed))
    }

    #[inline]
    pub(crate) fn row(&self, id: RowId) -> (&[u8], &[u8]) {
        let fixed = self.fixed(id);
        (fixed, self.var_of(fixed))
    }

    /// A committed row's image, in one look at its slot; `None` if the
    /// id is past the store's end, free, or an uncommitted insert's (what
    /// a committed read must not see).
    #[inline]
    pub(crate) fn committed_row(&self, id: RowId) -> Option<(&[u8], &[u8])> {
        if id >= self.high_water {
            return None;
        }
        let (page, at) = self.locate(id);
        let slot = &self.pages[page][at..at + self.slot_bytes];
        if slot[0] != FLAG_COMMITTED {
            return None;
        }
        let fixed = &slot[1..1 + self.fixed_size];
        Some((fixed, self.var_of(fixed)))
    }

    #[inline]
    pub(crate) fn is_tentative(&self, id: RowId) -> bool {
        self.live_slot(id)[0] == FLAG_TENTATIVE
    }

    /// Marks a row committed. Committing a committed row is a no-op, so a
    /// replayed commit does no harm.
    #[inline]
    pub(crate) fn commit(&mut self, id: RowId) {
        self.live_slot_mut(id)[0] = FLAG_COMMITTED;
    }

    /// New pages an insert at row id `at` (`None`: wherever the store
    /// puts it) adds; [`RowStore::push_page`] may supply them first.
    #[inline]
    pub(crate) fn pages_wanted(&self, at: Option<RowId>) -> usize {
        match at {
            None => usize::from(self.needs_page()),
            Some(id) => (self.page_div.div_rem(id).0 as usize + 1).saturating_sub(self.pages.len()),
        }
    }

    /// Appends a zeroed page of [`PAGE_BYTES`] for the next insert (which
    /// charges it as a new page).
    #[inline]
    pub(crate) fn push_page(&mut self, page: Box<[u8]>) {
        assert_eq!(page.len(), PAGE_BYTES, "a page of another size");
        self.pages.push(page);
    }

    /// Whether the next insert needs a new page.
    #[inline]
    fn needs_page(&self) -> bool {
        self.free_head == ROW_NONE
            && self.high_water as usize == self.pages.len() * self.slots_per_page as usize
    }

    /// Bytes an insert with a var part of `var_len` bytes will charge. Fails
    /// when the fragment's row ids are exhausted (2^32 - 1 rows), which no
    /// memory can fix, so `free_bytes` is reported as 0.
    pub(crate) fn insert_charge(&self, var_len: usize) -> Result<usize, OutOfMemory> {
        let mut bytes = var_charge(var_len);
        if self.needs_page() {
            let ids_after = (self.pages.len() + 1) * self.slots_per_page as usize;
            if ids_after > ROW_NONE as usize {
                return Err(OutOfMemory {
                    requested_bytes: PAGE_BYTES,
                    free_bytes: 0,
                });
            }
            bytes += PAGE_BYTES;
        }
        Ok(bytes)
    }

    /// Stores a row. The caller has charged `insert_charge(var.len())`.
    pub(crate) fn insert_charged(&mut self, fixed: &[u8], var: &[u8], tentative: bool) -> RowId {
        self.check_row_shape(fixed, var);
        let id = if self.free_head != ROW_NONE {
            let id = self.free_head;
            self.unlink_free(id);
            id
        } else {
            if self.needs_page() {
                // Zeroed memory comes from the OS lazily; the zero flag
                // byte is FLAG_FREE, so untouched slots read as free.
                self.pages.push(vec![0u8; PAGE_BYTES].into_boxed_slice());
            }
            self.high_water += 1;
            self.high_water - 1
        };
        self.store_at(id, fixed, var, tentative);
        id
    }

    /// Bytes an insert at row id `id` with a var part of `var_len` bytes
    /// will charge: the var part, and the pages up to `id` not allocated
    /// yet. Fails like [`RowStore::insert_charge`] past the last row id.
    pub(crate) fn insert_charge_at(&self, id: RowId, var_len: usize) -> Result<usize, OutOfMemory> {
        if id == ROW_NONE {
            return Err(OutOfMemory {
                requested_bytes: PAGE_BYTES,
                free_bytes: 0,
            });
        }
        let pages_needed =
            (self.page_div.div_rem(id).0 as usize + 1).saturating_sub(self.pages.len());
        Ok(var_charge(var_len) + pages_needed * PAGE_BYTES)
    }

    /// Whether row id `id` holds no row (never used, or freed).
    #[inline]
    pub(crate) fn is_free(&self, id: RowId) -> bool {
        id >= self.high_water || self.flag(id) == FLAG_FREE
    }

    /// Stores a row at row id `id`, which must be free (the id a primary
    /// replica chose, so every replica keeps the row under the same id).
    /// The caller has charged `insert_charge_at(id, var.len())`. Ids
    /// skipped between the old high water and `id` go on the free list.
    pub(crate) fn insert_charged_at(
        &mut self,
        id: RowId,
        fixed: &[u8],
        var: &[u8],
        tentative: bool,
    ) {
        self.check_row_shape(fixed, var);
        assert!(self.is_free(id), "row id {id} is in use");
        assert_ne!(id, ROW_NONE, "row id {id} is reserved");
        let pages_needed = self.page_div.div_rem(id).0 as usize + 1;
        while self.pages.len() < pages_needed {
            self.pages.push(vec![0u8; PAGE_BYTES].into_boxed_slice());
        }
        if id >= self.high_water {
            // The ids in between become free ids like any freed one.
            while self.high_water < id {
                let skipped = self.high_water;
                self.high_water += 1;
                self.link_free(skipped);
            }
            self.high_water = id + 1;
        } else {
            self.unlink_free(id);
        }
        self.store_at(id, fixed, var, tentative);
    }

    /// Panics unless `fixed` has the table's fixed size and a var part is
    /// given only to a table with var columns (a bug in the caller).
    fn check_row_shape(&self, fixed: &[u8], var: &[u8]) {
        assert_eq!(
            fixed.len(),
            self.fixed_size,
            "fixed part has the wrong size"
        );
        if self.var_handle_offset.is_none() {
            assert!(
                var.is_empty(),
                "var part given for a table without var columns"
            );
        }
    }

    /// Writes a row into the free slot `id` (already off the free list).
    fn store_at(&mut self, id: RowId, fixed: &[u8], var: &[u8], tentative: bool) {
        let handle = self.var.alloc(var);
        let var_handle_offset = self.var_handle_offset;
        let (page, at) = self.locate(id);
        let slot = &mut self.pages[page][at..at + 1 + self.fixed_size];
        slot[0] = if tentative {
            FLAG_TENTATIVE
        } else {
            FLAG_COMMITTED
        };
        slot[1..].copy_from_slice(fixed);
        if let Some(off) = var_handle_offset {
            slot[1 + off..1 + off + 4].copy_from_slice(&handle.to_le_bytes());
        }
        self.live_rows += 1;
    }

    /// The free-list links of free slot `id`: (next, previous).
    #[inline]
    fn free_links(&self, id: RowId) -> (u32, u32) {
        let (page, at) = self.locate(id);
        let s = &self.pages[page][at..at + 9];
        debug_assert_eq!(s[0], FLAG_FREE, "row {id} is not free");
        (
            u32::from_le_bytes(s[1..5].try_into().expect("4 bytes")),
            u32::from_le_bytes(s[5..9].try_into().expect("4 bytes")),
        )
    }

    #[inline]
    fn set_free_links(&mut self, id: RowId, next: Option<u32>, prev: Option<u32>) {
        let (page, at) = self.locate(id);
        let s = &mut self.pages[page][at..at + 9];
        s[0] = FLAG_FREE;
        if let Some(next) = next {
            s[1..5].copy_from_slice(&next.to_le_bytes());
        }
        if let Some(prev) = prev {
            s[5..9].copy_from_slice(&prev.to_le_bytes());
        }
    }

    /// Puts free slot `id` at the head of the free list.
    fn link_free(&mut self, id: RowId) {
        let head = self.free_head;
        self.set_free_links(id, Some(head), Some(ROW_NONE));
        if head != ROW_NONE {
            self.set_free_links(head, None, Some(id));
        }
        self.free_head = id;
    }

    /// Takes free slot `id` off the free list, wherever it is on it.
    ///
    /// Taking the head leaves the next slot's previous link as it was: the
    /// head's previous link means nothing (a slot is the head when it is
    /// `free_head`). Writing it would touch a second slot, anywhere in
    /// the fragment, on every insert into freed ids — a second cache miss
    /// per insert after deletes.
    fn unlink_free(&mut self, id: RowId) {
        let (next, prev) = self.free_links(id);
        if self.free_head == id {
            self.free_head = next;
            return;
        }
        debug_assert_ne!(
            prev, ROW_NONE,
            "a free slot other than the head has a previous"
        );
        self.set_free_links(prev, Some(next), None);
        if next != ROW_NONE {
            self.set_free_links(next, None, Some(prev));
        }
    }

    /// Overwrites a row's fixed part and, if `var` is given, its var part.
    /// Fails, changing nothing, only if a larger var part does not fit.
    pub(crate) fn replace(
        &mut self,
        mem: &mut Memory,
        id: RowId,
        fixed: &[u8],
        var: Option<&[u8]>,
    ) -> Result<(), OutOfMemory> {
        assert_eq!(
            fixed.len(),
            self.fixed_size,
            "fixed part has the wrong size"
        );
        let mut handle = self.var_handle(self.fixed(id));
        if let Some(var) = var {
            assert!(
                self.var_handle_offset.is_some() || var.is_empty(),
                "var part given for a table without var columns"
            );
            let old_charge = var_charge(self.var.get(handle).len());
            let new_charge = var_charge(var.len());
            // Settle only the difference, so shrinking never fails and
            // growing needs only the growth to fit.
            if new_charge > old_charge {
                mem.try_charge(new_charge - old_charge)?;
            } else {
                mem.release(old_charge - new_charge);
            }
            handle = self.var.replace(handle, var);
        }
        let var_handle_offset = self.var_handle_offset;
        let fixed_size = self.fixed_size;
        let slot = self.live_slot_mut(id);
        slot[1..1 + fixed_size].copy_from_slice(fixed);
        if let Some(off) = var_handle_offset {
            slot[1 + off..1 + off + 4].copy_from_slice(&handle.to_le_bytes());
        }
        Ok(())
    }

    /// Frees a row's slot and var part; releases the var part's charge.
    pub(crate) fn remove(&mut self, mem: &mut Memory, id: RowId) {
        let handle = self.var_handle(self.fixed(id));
        mem.release(self.var.free(handle));
        self.live_slot_mut(id);
        self.link_free(id);
        self.live_rows -= 1;
    }

    /// One past the highest row id ever used: a scan in row-id order ends here.
    #[inline]
    pub(crate) fn id_end(&self) -> RowId {
        self.high_water
    }

    /// The first row in use with id `>= from`, for scans in row-id order.
    pub(crate) fn next_row(&self, from: RowId) -> Option<RowId> {
        (from..self.high_water).find(|&id| self.flag(id) != FLAG_FREE)
    }

    /// Frees everything and releases every byte charged.
    pub(crate) fn release_all(&mut self, mem: &mut Memory) {
        mem.release(self.charged_bytes());
        *self = RowStore::new(self.fixed_size, self.var_handle_offset);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fast_div_matches_hardware_division() {
        let divisors = [1u32, 2, 3, 7, 9, 1092, 3276, 3640, 8191, 32767];
        let numerators = [
            0u32,
            1,
            2,
            3639,
            3640,
            3641,
            1 << 20,
            u32::MAX - 1,
            u32::MAX,
        ];
        for &d in &divisors {
            let fd = FastDiv::new(d);
            for &n in &numerators {
                assert_eq!(fd.div_rem(n), (n / d, n % d), "{n} / {d}");
            }
            let mut x = 0x9E37_79B9u32;
            for _ in 0..1000 {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                assert_eq!(fd.div_rem(x), (x / d, x % d), "{x} / {d}");
            }
        }
    }

    #[test]
    fn var_charge_rounds_up_and_empty_is_free() {
        assert_eq!(var_charge(0), 0);
        assert_eq!(var_charge(1), 24);
        assert_eq!(var_charge(8), 24);
        assert_eq!(var_charge(9), 32);
    }

    #[test]
    fn ids_are_dense_and_reused_after_free() {
        let mut mem = Memory::new(4 * PAGE_BYTES);
        let mut rows = RowStore::new(8, None);
        let per_page = rows.slots_per_page as usize;
        assert_eq!(per_page, PAGE_BYTES / 9); // 8-byte rows: 9-byte slots
        let mut ids = Vec::new();
        for i in 0..per_page + 1 {
            let charge = rows.insert_charge(0).unwrap();
            assert_eq!(
                charge,
                if i == 0 || i == per_page {
                    PAGE_BYTES
                } else {
                    0
                }
            );
            mem.try_charge(charge).unwrap();
            ids.push(rows.insert_charged(&(i as u64).to_le_bytes(), &[], false));
        }
        assert_eq!(ids, (0..per_page as u32 + 1).collect::<Vec<_>>());
        assert_eq!(rows.page_count(), 2);
        assert_eq!(
            rows.fixed(per_page as u32),
            &(per_page as u64).to_le_bytes()
        );
        rows.remove(&mut mem, 5);
        rows.remove(&mut mem, 7);
        assert_eq!(rows.next_row(5), Some(6));
        assert_eq!(rows.next_row(7), Some(8));
        // A scan's one look at a slot: free and past the end are no row.
        assert_eq!(
            rows.committed_row(6),
            Some((&6u64.to_le_bytes()[..], &[][..]))
        );
        assert_eq!(rows.committed_row(5), None);
        assert_eq!(rows.committed_row(per_page as u32 + 1), None);
        assert_eq!(rows.committed_row(RowId::MAX), None);
        // Last freed, first reused; no new page needed.
        assert_eq!(rows.insert_charge(0).unwrap(), 0);
        assert_eq!(rows.insert_charged(&[1; 8], &[], true), 7);
        assert!(rows.is_tentative(7));
        assert_eq!(rows.committed_row(7), None, "an uncommitted insert");
        rows.commit(7);
        assert!(!rows.is_tentative(7));
        assert_eq!(rows.committed_row(7), Some((&[1u8; 8][..], &[][..])));
        assert_eq!(rows.insert_charged(&[2; 8], &[], false), 5);
        assert_eq!(rows.live_rows(), per_page + 1);
        assert_eq!(rows.charged_bytes(), 2 * PAGE_BYTES);
        rows.release_all(&mut mem);
        assert_eq!(mem.used_bytes(), 0);
    }

    /// The free ids below the high water, walking the list both ways.
    fn free_list(rows: &RowStore) -> Vec<RowId> {
        let mut ids = Vec::new();
        let mut prev = ROW_NONE;
        let mut at = rows.free_head;
        while at != ROW_NONE {
            let (next, back) = rows.free_links(at);
            // The head's previous link is not kept.
            if prev != ROW_NONE {
                assert_eq!(back, prev, "previous link of {at}");
            }
            ids.push(at);
            prev = at;
            at = next;
        }
        ids
    }

    /// Inserts that take the head, inserts at chosen ids and removes, in
    /// a random mix against a model: the free list holds exactly the free
    /// ids below the high water (its head's back link is not kept, every
    /// other one is), and the store always says which ids are free.
    #[test]
    fn the_free_list_follows_a_random_mix_of_inserts_and_removes() {
        let mut mem = Memory::new(64 * PAGE_BYTES);
        let mut rows = RowStore::new(8, None);
        let mut live = std::collections::BTreeSet::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = |n: u32| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % u64::from(n)) as u32
        };
        for step in 0..8000 {
            match next(4) {
                0 => {
                    let charge = rows.insert_charge(0).unwrap();
                    mem.try_charge(charge).unwrap();
                    let id = rows.insert_charged(&[1; 8], &[], false);
                    assert!(live.insert(id), "step {step}: {id} was live");
                }
                1 => {
                    // A free id below the high water or a little beyond,
                    // or one far ahead (the pages up to it charged).
                    let id = if next(2) == 0 {
                        next(rows.id_end() + 8)
                    } else {
                        next(3000)
                    };
                    if !rows.is_free(id) {
                        continue;
                    }
                    let charge = rows.insert_charge_at(id, 0).unwrap();
                    mem.try_charge(charge).unwrap();
                    rows.insert_charged_at(id, &[2; 8], &[], false);
                    assert!(live.insert(id), "step {step}: {id} was live");
                }
                _ => {
                    if live.is_empty() {
                        continue;
                    }
                    let nth = next(live.len() as u32) as usize;
                    let id = *live.iter().nth(nth).unwrap();
                    rows.remove(&mut mem, id);
                    live.remove(&id);
                }
            }
            let mut free = free_list(&rows);
            free.sort_unstable();
            let want: Vec<RowId> = (0..rows.id_end()).filter(|i| !live.contains(i)).collect();
            assert_eq!(free, want, "step {step}");
            assert!(want.iter().all(|&i| rows.is_free(i)));
            assert!(live.iter().all(|&i| !rows.is_free(i)));
            assert_eq!(rows.live_rows(), live.len());
        }
    }

    #[test]
    fn insert_at_takes_any_free_id() {
        let mut mem = Memory::new(8 * PAGE_BYTES);
        let mut rows = RowStore::new(8, None);
        let per_page = rows.slots_per_page;
        // Far ahead: pages up to it are charged, the ids skipped are free.
        let far = per_page + 3;
        let charge = rows.insert_charge_at(far, 0).unwrap();
        assert_eq!(charge, 2 * PAGE_BYTES);
        mem.try_charge(charge).unwrap();
        rows.insert_charged_at(far, &[9; 8], &[], true);
        assert!(!rows.is_free(far) && rows.is_tentative(far));
        assert_eq!(rows.id_end(), far + 1);
        let mut free = free_list(&rows);
        free.sort_unstable();
        assert_eq!(free, (0..far).collect::<Vec<_>>());
        // From the middle of the free list.
        assert_eq!(rows.insert_charge_at(5, 0).unwrap(), 0);
        rows.insert_charged_at(5, &[5; 8], &[], false);
        assert!(!free_list(&rows).contains(&5));
        assert_eq!(free_list(&rows).len() as u32, far - 1);
        // Plain inserts still take free ids (never 5 or `far`).
        for _ in 0..far - 1 {
            let id = rows.insert_charged(&[1; 8], &[], false);
            assert!(id != 5 && id != far);
        }
        assert!(free_list(&rows).is_empty());
        assert_eq!(rows.insert_charged(&[1; 8], &[], false), far + 1);
        assert_eq!(rows.live_rows() as u32, far + 2);
        assert!(rows.insert_charge_at(ROW_NONE, 0).is_err());
    }

    #[test]
    fn var_parts_keep_their_handle_bytes() {
        let mut mem = Memory::new(PAGE_BYTES * 2);
        // 12-byte fixed part with the var handle at offset 8.
        let mut rows = RowStore::new(12, Some(8));
        let fixed = [7u8; 12];
        let charge = rows.insert_charge(3).unwrap();
        assert_eq!(charge, PAGE_BYTES + 24);
        mem.try_charge(charge).unwrap();
        let a = rows.insert_charged(&fixed, b"abc", false);
        let (f, v) = rows.row(a);
        assert_eq!(&f[..8], &[7; 8]);
        assert_eq!(v, b"abc");
        // Grow, shrink to empty, grow again: the charge follows the size.
        rows.replace(&mut mem, a, &[9; 12], Some(&[1; 20])).unwrap();
        assert_eq!(rows.row(a).1, &[1; 20]);
        assert_eq!(mem.used_bytes(), PAGE_BYTES + 40);
        rows.replace(&mut mem, a, &[9; 12], Some(&[])).unwrap();
        assert_eq!(rows.row(a).1, b"");
        assert_eq!(mem.used_bytes(), PAGE_BYTES);
        rows.replace(&mut mem, a, &[3; 12], None).unwrap();
        assert_eq!(
            rows.row(a),
            (
                &[3u8, 3, 3, 3, 3, 3, 3, 3, 0xFF, 0xFF, 0xFF, 0xFF][..],
                &[][..]
            )
        );
        rows.replace(&mut mem, a, &[3; 12], Some(b"xyz")).unwrap();
        assert_eq!(rows.row(a).1, b"xyz");
        rows.remove(&mut mem, a);
        assert_eq!(mem.used_bytes(), PAGE_BYTES);
        assert_eq!(rows.charged_bytes(), PAGE_BYTES);
    }

    #[test]
    fn tiny_rows_still_hold_the_free_list_link() {
        let mut mem = Memory::new(PAGE_BYTES);
        let mut rows = RowStore::new(1, None);
        mem.try_charge(rows.insert_charge(0).unwrap()).unwrap();
        let a = rows.insert_charged(&[1], &[], false);
        let b = rows.insert_charged(&[2], &[], false);
        rows.remove(&mut mem, a);
        rows.remove(&mut mem, b);
        assert_eq!(rows.insert_charged(&[3], &[], false), b);
        assert_eq!(rows.insert_charged(&[4], &[], false), a);
        assert_eq!(rows.fixed(a), &[4]);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn row_id_out_of_range_panics() {
        let rows = RowStore::new(8, None);
        let _ = rows.fixed(0);
    }

    #[test]
    #[should_panic(expected = "not in use")]
    fn freed_row_panics() {
        let mut mem = Memory::new(PAGE_BYTES);
        let mut rows = RowStore::new(8, None);
        mem.try_charge(rows.insert_charge(0).unwrap()).unwrap();
        let a = rows.insert_charged(&[0; 8], &[], false);
        rows.remove(&mut mem, a);
        let _ = rows.fixed(a);
    }

    #[test]
    #[should_panic(expected = "wrong size")]
    fn wrong_fixed_size_panics() {
        let mut rows = RowStore::new(8, None);
        rows.insert_charged(&[0; 7], &[], false);
    }
}
