//! One fragment replica: the row store, its primary-key hash index and its
//! row locks, kept consistent with each other and with `Memory`.
//!
//! Invariants:
//! - Every row in the store is in the index exactly once, under the hash
//!   of its key, and nothing else is.
//! - `charged_bytes()` is exactly what this fragment has charged to
//!   `Memory` (pages, var parts, index); `drop_all` returns all of it.
//! - An operation that fails with `OutOfMemory` has changed nothing.

use crate::changed::ChangedRows;
use crate::frag_ordered::FragIndexes;
use crate::index::HashIndex;
use crate::key::KeyMatcher;
use crate::locks::LockManager;
use crate::memory::{Memory, OutOfMemory};
use crate::rows::{self, RowId, RowStore};
use shoal_types::RowLayout;
use std::sync::Arc;

pub struct Fragment {
    layout: Arc<RowLayout>,
    /// Row locks of this fragment, keyed by row id. The kernel drives it.
    pub locks: LockManager,
    rows: RowStore,
    index: HashIndex,
    key: KeyMatcher,
    /// Row ids whose committed contents changed since the local
    /// checkpoint last wrote them.
    changed: ChangedRows,
    /// The table's ordered indexes: entries of committed rows only.
    ordered: FragIndexes,
}

impl std::fmt::Debug for Fragment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fragment")
            .field("table", &self.layout.table.name)
            .field("rows", &self.rows.live_rows())
            .field("pages", &self.rows.page_count())
            .field("charged_bytes", &self.charged_bytes())
            .field("locked_rows", &self.locks.locked_rows())
            .finish()
    }
}

impl Fragment {
    /// An empty fragment; it charges nothing until the first insert.
    pub fn new(layout: Arc<RowLayout>) -> Self {
        let rows = RowStore::new(layout.fixed_size, layout.var_handle_offset);
        let key = KeyMatcher::new(&layout);
        let ordered = FragIndexes::new(&layout);
        Fragment {
            ordered,
            layout,
            locks: LockManager::default(),
            rows,
            index: HashIndex::default(),
            key,
            changed: ChangedRows::default(),
        }
    }

    pub fn layout(&self) -> &Arc<RowLayout> {
        &self.layout
    }

    /// Finds the row (committed or tentative) whose encoded primary key is
    /// `key`; `hash` is `shoal_types::hash_key(key)`.
    #[inline]
    pub fn lookup(&self, hash: u64, key: &[u8]) -> Option<RowId> {
        let rows = &self.rows;
        let matcher = &self.key;
        let found = if let Some(n) = matcher.prefix_len() {
            // Every key column is fixed: compare without touching the var
            // part, which lives in another allocation.
            if key.len() != n {
                return None;
            }
            self.index.find(hash, |id| rows.fixed(id)[..n] == *key)
        } else {
            self.index.find(hash, |id| {
                let (fixed, var) = rows.row(id);
                matcher.matches(fixed, var, key)
            })
        };
        debug_assert!(found.is_none_or(|id| {
            let (fixed, var) = rows.row(id);
            self.layout.key_matches(fixed, var, key)
        }));
        found
    }

    /// The row the index holds first under `hash`'s tag, without reading
    /// any row: a guess for warming (see [`Fragment::touch`]), right unless
    /// two keys share the tag. Only [`Fragment::lookup`] finds a key's row.
    #[inline]
    pub fn guess(&self, hash: u64) -> Option<RowId> {
        self.index.guess(hash)
    }

    /// Reads the first byte of row `id`'s slot (any id; nothing if out of
    /// range), to bring it into the cache. The caller drops the byte in
    /// `std::hint::black_box` so the read is not optimized away.
    #[inline]
    pub fn touch(&self, id: RowId) -> u8 {
        self.rows.first_byte(id)
    }

    /// The stored image of a row: (fixed part, var part; empty if none).
    #[inline]
    pub fn row(&self, id: RowId) -> (&[u8], &[u8]) {
        self.rows.row(id)
    }

    /// A committed row's image (fixed part, var part); `None` if `id`
    /// holds no row or an uncommitted insert. One look at the row's slot,
    /// for scans, which ask this of every row they pass.
    #[inline]
    pub fn committed_row(&self, id: RowId) -> Option<(&[u8], &[u8])> {
        self.rows.committed_row(id)
    }

    /// Whether the row was inserted by a transaction that has not committed.
    #[inline]
    pub fn is_tentative(&self, id: RowId) -> bool {
        self.rows.is_tentative(id)
    }

    /// Stores a new row, flagged tentative, and indexes it under `hash`.
    /// `fixed.len()` must equal `layout.fixed_size`; the var-handle bytes
    /// inside `fixed` are owned by the store (overwritten).
    ///
    /// The caller has checked that no row with this key exists (`lookup`);
    /// the index does not check again. Charges, all or nothing: a new page
    /// if no slot is free, `var_charge(var.len())`, and the index's growth.
    pub fn insert_tentative(
        &mut self,
        mem: &mut Memory,
        hash: u64,
        fixed: &[u8],
        var: &[u8],
    ) -> Result<RowId, OutOfMemory> {
        assert_eq!(
            fixed.len(),
            self.layout.fixed_size,
            "fixed part has the wrong size"
        );
        let charge = self.rows.insert_charge(var.len())?;
        self.charge_with_index_growth(mem, charge)?;
        for _ in 0..self.rows.pages_wanted(None) {
            self.rows.push_page(mem.new_page());
        }
        let id = self.rows.insert_charged(fixed, var, true);
        self.index.insert(hash, id);
        Ok(id)
    }

    /// Charges `charge` bytes plus whatever growth the index needs for one
    /// more row, all or nothing, and installs that growth.
    #[inline]
    fn charge_with_index_growth(
        &mut self,
        mem: &mut Memory,
        charge: usize,
    ) -> Result<(), OutOfMemory> {
        let mut charge = charge;
        let growth = if self.index.needs_growth() {
            let free = mem.free_bytes().saturating_sub(charge);
            let growth = self
                .index
                .prepare_growth(free)
                .map_err(|bound| OutOfMemory {
                    requested_bytes: charge + bound,
                    free_bytes: mem.free_bytes(),
                })?;
            charge += growth.charge_bytes;
            Some(growth)
        } else {
            None
        };
        mem.try_charge(charge)?;
        if let Some(growth) = growth {
            self.index.install(growth);
        }
        Ok(())
    }

    /// Stores a new row at row id `row`, flagged tentative, and indexes it
    /// under `hash`: a backup replica keeping the row under the id its
    /// primary chose. `row` must be free ([`Fragment::is_free`]) and no
    /// row with this key may exist (the caller looked). Charges, all or
    /// nothing, the pages up to `row`, the var part and the index growth.
    pub fn insert_tentative_at(
        &mut self,
        mem: &mut Memory,
        hash: u64,
        row: RowId,
        fixed: &[u8],
        var: &[u8],
    ) -> Result<(), OutOfMemory> {
        assert_eq!(
            fixed.len(),
            self.layout.fixed_size,
            "fixed part has the wrong size"
        );
        let charge = self.rows.insert_charge_at(row, var.len())?;
        self.charge_with_index_growth(mem, charge)?;
        for _ in 0..self.rows.pages_wanted(Some(row)) {
            self.rows.push_page(mem.new_page());
        }
        self.rows.insert_charged_at(row, fixed, var, true);
        self.index.insert(hash, row);
        Ok(())
    }

    /// Whether row id `row` holds no row.
    #[inline]
    pub fn is_free(&self, row: RowId) -> bool {
        self.rows.is_free(row)
    }

    /// One past the highest row id in use or ever used: scans in row-id
    /// order stop here.
    #[inline]
    pub fn id_end(&self) -> RowId {
        self.rows.id_end()
    }

    /// Appends the encoded primary key of row `row` to `out`.
    pub fn key_of(&self, row: RowId, out: &mut Vec<u8>) {
        let (fixed, var) = self.rows.row(row);
        self.layout.key_of_row(fixed, var, out);
    }

    /// Clears the tentative flag (the inserting transaction committed)
    /// and enters the row in the ordered indexes. Committing a committed
    /// row is a no-op.
    #[inline]
    pub fn commit_insert(&mut self, mem: &mut Memory, id: RowId) {
        let was_tentative = self.rows.is_tentative(id);
        self.rows.commit(id);
        self.changed.mark(id);
        if was_tentative && !self.ordered.is_empty() {
            let (fixed, var) = self.rows.row(id);
            self.ordered.add(mem, &self.layout, id, fixed, var);
        }
    }

    /// Replaces a row's image in place (an update committed). `var: None`
    /// keeps the current var part. Fails only if a larger var part does
    /// not fit; the caller reserves memory at prepare to avoid that.
    ///
    /// The key must not change (the index is not touched); debug builds
    /// check it.
    pub fn replace(
        &mut self,
        mem: &mut Memory,
        id: RowId,
        fixed: &[u8],
        var: Option<&[u8]>,
    ) -> Result<(), OutOfMemory> {
        #[cfg(debug_assertions)]
        let old_key = {
            let (f, v) = self.rows.row(id);
            let mut key = Vec::new();
            self.layout.key_of_row(f, v, &mut key);
            key
        };
        let indexed = !self.ordered.is_empty() && !self.rows.is_tentative(id);
        if indexed {
            let (f, v) = self.rows.row(id);
            self.ordered.before_update(&self.layout, f, v);
        }
        self.rows.replace(mem, id, fixed, var)?;
        self.changed.mark(id);
        if indexed {
            let (f, v) = self.rows.row(id);
            self.ordered.after_update(mem, &self.layout, id, f, v);
        }
        #[cfg(debug_assertions)]
        {
            let (f, v) = self.rows.row(id);
            debug_assert!(
                self.key.matches(f, v, &old_key),
                "replace changed the key of row {id}"
            );
        }
        Ok(())
    }

    /// Removes a row from the index and frees its memory (a delete
    /// committed, or a tentative insert aborted). `hash` is its key hash.
    pub fn remove(&mut self, mem: &mut Memory, hash: u64, id: RowId) {
        if !self.ordered.is_empty() && !self.rows.is_tentative(id) {
            let (fixed, var) = self.rows.row(id);
            self.ordered.remove(mem, &self.layout, id, fixed, var);
        }
        self.index.remove(mem, hash, id);
        self.rows.remove(mem, id);
        self.changed.mark(id);
    }

    /// Bytes a var part of `len` bytes is charged (so the kernel can
    /// reserve the growth of an update before commit): `len` rounded up to
    /// 8 plus 16 bytes of allocation overhead; an empty var part has no
    /// allocation and is charged 0.
    #[inline]
    pub fn var_charge(len: usize) -> usize {
        rows::var_charge(len)
    }

    /// Committed plus tentative rows.
    #[inline]
    pub fn row_count(&self) -> usize {
        self.rows.live_rows()
    }

    /// Frees everything this fragment holds (table dropped). The fragment
    /// is empty afterwards and may be used again.
    pub fn drop_all(&mut self, mem: &mut Memory) {
        self.ordered.release_all(mem);
        self.index.release_all(mem);
        self.rows.release_all(mem);
        self.locks = LockManager::default();
        self.changed.clear();
    }

    /// Bytes this fragment has charged to `Memory`: pages, var parts, the
    /// hash index and the ordered indexes.
    pub fn charged_bytes(&self) -> usize {
        self.rows.charged_bytes() + self.index.charged_bytes() + self.ordered.charged_bytes()
    }

    /// Takes the table's ordered indexes as `layout` has them now (the
    /// columns are the same): a new index starts its build, a dropped one
    /// gives its memory back. Returns whether this change started a build
    /// (go on with [`Fragment::build_indexes`]).
    pub fn sync_indexes(&mut self, mem: &mut Memory, layout: Arc<RowLayout>) -> bool {
        debug_assert_eq!(
            layout.table.columns, self.layout.table.columns,
            "an index change keeps the columns"
        );
        self.layout = layout;
        self.ordered.sync(mem, &self.layout.table)
    }

    /// Builds the indexes under way on, over up to `budget` rows. Returns
    /// whether a build is still under way; out of memory, the builds stop
    /// and those indexes are dropped here.
    pub fn build_indexes(&mut self, mem: &mut Memory, budget: usize) -> Result<bool, OutOfMemory> {
        self.ordered
            .build_step(mem, &self.layout, &self.rows, budget)
    }

    /// Drops every index still being built here (the build failed on
    /// another fragment of the table).
    pub fn abandon_index_builds(&mut self, mem: &mut Memory) {
        self.ordered.abandon_builds(mem);
    }

    /// Ordered index `index` holds every committed row (it exists, is
    /// built and not dropped).
    pub fn ordered_ready(&self, index: usize) -> bool {
        self.ordered.ready(index)
    }

    /// Breaks index maintenance on purpose (the simulator's self-test
    /// only): committed updates leave their entries under the old keys.
    pub fn break_index_updates(&mut self) {
        self.ordered.broken = true;
    }

    /// Breaks index builds on purpose (the simulator's self-test only):
    /// while an index is built, writes to rows it passed leave it as is.
    pub fn break_index_builds(&mut self) {
        self.ordered.broken_build = true;
    }

    /// The table's ordered indexes (numbered as in its definition).
    pub fn ordered_count(&self) -> usize {
        self.ordered.count()
    }

    /// Entries of ordered index `index` (one per committed row).
    pub fn ordered_entries(&self, index: usize) -> usize {
        self.ordered.entries(index)
    }

    /// The key row `id`'s committed image has in ordered index `index`.
    pub fn ordered_key_of(&self, index: usize, id: RowId, out: &mut Vec<u8>) {
        let (fixed, var) = self.rows.row(id);
        self.ordered.key_of(&self.layout, index, fixed, var, out)
    }

    /// Entries (key, row) of ordered index `index` from (`key`, `row`)
    /// on, ascending (`key` empty, `row` 0: from the first).
    pub fn ordered_from<'a>(
        &'a self,
        index: usize,
        key: &[u8],
        row: RowId,
    ) -> impl Iterator<Item = (&'a [u8], RowId)> + 'a {
        self.ordered.from(index, key, row)
    }

    /// Entries of ordered index `index` from (`key`, `row`) back,
    /// descending.
    pub fn ordered_back_from<'a>(
        &'a self,
        index: usize,
        key: &[u8],
        row: RowId,
    ) -> impl Iterator<Item = (&'a [u8], RowId)> + 'a {
        self.ordered.back_from(index, key, row)
    }

    /// Every entry of ordered index `index`, descending.
    pub fn ordered_back_all(&self, index: usize) -> impl Iterator<Item = (&[u8], RowId)> + '_ {
        self.ordered.back_all(index)
    }

    /// Bytes of the hash index's table (part of `charged_bytes`).
    pub fn index_bytes(&self) -> usize {
        self.index.charged_bytes()
    }

    /// The first row (committed or tentative) with id `>= from`, so scans,
    /// checkpoints and redo can walk the fragment in row-id order:
    /// `let mut at = 0; while let Some(id) = f.next_row(at) { ...; at = id + 1 }`.
    pub fn next_row(&self, from: RowId) -> Option<RowId> {
        self.rows.next_row(from)
    }

    /// The row ids whose committed contents changed (insert committed,
    /// update, delete) since a local checkpoint last took them.
    pub fn changed_rows(&mut self) -> &mut ChangedRows {
        &mut self.changed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::memory::PAGE_BYTES;
    use rand::rngs::SmallRng;
    use rand::{Rng, SeedableRng};
    use shoal_types::{hash_key, AttrSlice, ColumnDef, ColumnType, TableDef, Value};
    use std::collections::HashMap;

    /// `k INT UNSIGNED` key + `v INT UNSIGNED`: an 8-byte fixed row.
    fn int_layout() -> Arc<RowLayout> {
        let t = TableDef::new(
            "kv",
            vec![
                ColumnDef::new("k", ColumnType::Int { unsigned: true }),
                ColumnDef::new("v", ColumnType::Int { unsigned: true }),
            ],
            &["k"],
        )
        .unwrap();
        let l = RowLayout::new(&t);
        assert_eq!(l.fixed_size, 8);
        Arc::new(l)
    }

    /// `k VARBINARY` key + `v INT` + `s VARCHAR`: keys and values in the var part.
    fn var_layout() -> Arc<RowLayout> {
        let t = TableDef::new(
            "vk",
            vec![
                ColumnDef::new("k", ColumnType::VarBinary(8)),
                ColumnDef::new("v", ColumnType::Int { unsigned: true }),
                ColumnDef::new("s", ColumnType::VarChar(40)).nullable(),
            ],
            &["k"],
        )
        .unwrap();
        Arc::new(RowLayout::new(&t))
    }

    fn int_row(k: u32, v: u32) -> (Vec<u8>, [u8; 8]) {
        let mut fixed = [0u8; 8];
        fixed[..4].copy_from_slice(&k.to_le_bytes());
        fixed[4..].copy_from_slice(&v.to_le_bytes());
        (k.to_le_bytes().to_vec(), fixed)
    }

    /// Builds a row of `var_layout` with the layout itself.
    fn var_row(layout: &RowLayout, k: &[u8], v: u32, s: &str) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
        let mut key = Vec::new();
        layout
            .encode_key(&[Value::Bytes(k.to_vec())], &mut key)
            .unwrap();
        let mut attrs = Vec::new();
        let v = Value::UInt(v.into());
        let s = Value::Str(s.into());
        shoal_types::layout::encode_attrs(&layout.table, &[(1, &v), (2, &s)], &mut attrs).unwrap();
        let (attrs, _) = AttrSlice::parse(&attrs).unwrap();
        let (fixed, var) = layout.build_row(&key, attrs).unwrap();
        (key, fixed, var)
    }

    #[test]
    fn insert_lookup_commit_remove() {
        let mut mem = Memory::new(1 << 20);
        let mut f = Fragment::new(int_layout());
        let (key, fixed) = int_row(7, 70);
        let h = hash_key(&key);
        assert_eq!(f.lookup(h, &key), None);
        let id = f.insert_tentative(&mut mem, h, &fixed, &[]).unwrap();
        assert_eq!(f.lookup(h, &key), Some(id));
        assert_eq!(f.lookup(h, &key[..3]), None);
        assert!(f.is_tentative(id));
        f.commit_insert(&mut mem, id);
        assert!(!f.is_tentative(id));
        assert_eq!(f.row(id), (&fixed[..], &[][..]));
        assert_eq!(f.row_count(), 1);
        assert_eq!(f.next_row(0), Some(id));
        let (_, newer) = int_row(7, 71);
        f.replace(&mut mem, id, &newer, None).unwrap();
        assert_eq!(f.row(id).0, &newer);
        f.remove(&mut mem, h, id);
        assert_eq!(f.lookup(h, &key), None);
        assert_eq!(f.row_count(), 0);
        assert_eq!(f.next_row(0), None);
        assert_eq!(mem.used_bytes(), PAGE_BYTES);
        assert_eq!(f.charged_bytes(), PAGE_BYTES);
        f.drop_all(&mut mem);
        assert_eq!(mem.used_bytes(), 0);
    }

    #[test]
    fn warming_guesses_rows_and_touches_any_id_safely() {
        let mut mem = Memory::new(1 << 22);
        let mut f = Fragment::new(int_layout());
        let mut ids = Vec::new();
        for k in 0..2000u32 {
            let (key, fixed) = int_row(k, k);
            let id = f
                .insert_tentative(&mut mem, hash_key(&key), &fixed, &[])
                .unwrap();
            f.commit_insert(&mut mem, id);
            ids.push(id);
        }
        // A guess is the row unless another key shares the hash's tag,
        // which no two of these keys do.
        for k in 0..2000u32 {
            assert_eq!(f.guess(hash_key(&k.to_le_bytes())), Some(ids[k as usize]));
        }
        assert_eq!(f.guess(hash_key(&5000u32.to_le_bytes())), None);
        // Touching reads, whatever the id: in use, freed, past the end.
        let (key, _) = int_row(5, 5);
        f.remove(&mut mem, hash_key(&key), ids[5]);
        assert_eq!(f.guess(hash_key(&key)), None);
        // The byte read is the slot's flag: in use (committed), free, or
        // nothing past the end.
        assert_eq!(f.touch(ids[0]), 1);
        assert_eq!(f.touch(ids[5]), 0);
        for id in [f.id_end(), f.id_end() + 1, RowId::MAX] {
            assert_eq!(f.touch(id), 0);
        }
        assert_eq!(f.lookup(hash_key(&key), &key), None);
        assert_eq!(f.row_count(), 1999);
    }

    #[test]
    fn new_pages_come_from_the_spare_ones_first() {
        let mut mem = Memory::new(1 << 22);
        mem.give_zeroed_pages(vec![vec![0u8; PAGE_BYTES].into_boxed_slice(); 3]);
        let mut f = Fragment::new(int_layout());
        // The first insert takes a page: a spare one, charged as any.
        let (key, fixed) = int_row(1, 10);
        let id = f
            .insert_tentative(&mut mem, hash_key(&key), &fixed, &[])
            .unwrap();
        assert_eq!(mem.spare_pages(), 2);
        assert!(mem.used_bytes() >= PAGE_BYTES);
        // At a row id two pages further, both pages up to it.
        assert_eq!(
            f.rows.pages_wanted(Some(id)),
            0,
            "the row's own page is there"
        );
        let far = (PAGE_BYTES / (fixed.len() + 1) * 2) as RowId;
        let (key2, fixed2) = int_row(2, 20);
        f.insert_tentative_at(&mut mem, hash_key(&key2), far, &fixed2, &[])
            .unwrap();
        assert_eq!(mem.spare_pages(), 0);
        assert_eq!(f.lookup(hash_key(&key2), &key2), Some(far));
        // None left: fresh pages, as before.
        let (key3, fixed3) = int_row(3, 30);
        f.insert_tentative_at(&mut mem, hash_key(&key3), far * 2, &fixed3, &[])
            .unwrap();
        assert_eq!(f.row(far * 2).0, &fixed3[..]);
        assert!(
            f.is_free(far + 1),
            "untouched slots of spare pages read as free"
        );
        mem.give_zeroed_pages(vec![vec![0u8; PAGE_BYTES].into_boxed_slice(); 600]);
        assert_eq!(mem.spare_pages(), crate::memory::SPARE_PAGES_MAX);
        mem.drop_spare_pages();
        assert_eq!(mem.spare_pages(), 0);
    }

    #[test]
    fn var_parts_follow_replace() {
        let layout = var_layout();
        let mut mem = Memory::new(1 << 20);
        let mut f = Fragment::new(layout.clone());
        let (key, mut fixed, var) = var_row(&layout, b"ab", 1, "hello");
        // The handle bytes the caller passes are ignored.
        let at = layout.var_handle_offset.unwrap();
        fixed[at..at + 4].copy_from_slice(&[0xAA; 4]);
        let h = hash_key(&key);
        let id = f.insert_tentative(&mut mem, h, &fixed, &var).unwrap();
        assert_eq!(f.row(id).1, &var[..]);
        assert_eq!(f.lookup(h, &key), Some(id));
        let base = mem.used_bytes();
        let (_, fixed2, var2) = var_row(&layout, b"ab", 2, "a much longer string than before");
        f.replace(&mut mem, id, &fixed2, Some(&var2)).unwrap();
        assert_eq!(f.row(id).1, &var2[..]);
        assert_eq!(
            mem.used_bytes(),
            base - Fragment::var_charge(var.len()) + Fragment::var_charge(var2.len())
        );
        assert_eq!(
            layout.column_bytes(f.row(id).0, f.row(id).1, 1),
            Some(&2u32.to_le_bytes()[..])
        );
        // Fixed-only update keeps the var part and its handle.
        let (_, fixed3, _) = var_row(&layout, b"ab", 3, "ignored");
        f.replace(&mut mem, id, &fixed3, None).unwrap();
        assert_eq!(f.row(id).1, &var2[..]);
        assert_eq!(f.lookup(h, &key), Some(id));
        f.remove(&mut mem, h, id);
        assert_eq!(mem.used_bytes(), PAGE_BYTES);
    }

    #[test]
    fn replace_that_does_not_fit_changes_nothing() {
        let layout = var_layout();
        let (key, fixed, var) = var_row(&layout, b"k", 1, "x");
        let mut mem = Memory::new(PAGE_BYTES + 1024);
        let mut f = Fragment::new(layout.clone());
        let id = f
            .insert_tentative(&mut mem, hash_key(&key), &fixed, &var)
            .unwrap();
        let used = mem.used_bytes();
        let (_, fixed2, _) = var_row(&layout, b"k", 2, "y");
        let big = vec![0u8; 2048];
        let err = f.replace(&mut mem, id, &fixed2, Some(&big)).unwrap_err();
        assert_eq!(err.free_bytes, mem.free_bytes());
        assert_eq!(mem.used_bytes(), used);
        assert_eq!(
            f.row(id),
            (&fixed_with_handle(&f, id, &fixed)[..], &var[..])
        );
    }

    fn fixed_with_handle(f: &Fragment, id: RowId, fixed: &[u8]) -> Vec<u8> {
        let at = f.layout().var_handle_offset.unwrap();
        let mut out = fixed.to_vec();
        out[at..at + 4].copy_from_slice(&f.row(id).0[at..at + 4]);
        out
    }

    /// Inserts fail at the limit with nothing changed; removing rows lets
    /// inserts succeed again in the freed slots, without new pages.
    #[test]
    fn out_of_memory_and_reuse() {
        let limit = 2 * PAGE_BYTES + 8 * 1024;
        let mut mem = Memory::new(limit);
        let mut f = Fragment::new(int_layout());
        let mut n = 0u32;
        let err = loop {
            let (key, fixed) = int_row(n, n);
            match f.insert_tentative(&mut mem, hash_key(&key), &fixed, &[]) {
                Ok(_) => n += 1,
                Err(e) => break e,
            }
        };
        assert!(n > 1000, "{n}");
        assert!(err.requested_bytes > err.free_bytes);
        let used = mem.used_bytes();
        let charged = f.charged_bytes();
        assert_eq!(used, charged);
        // Retrying fails identically and changes nothing.
        let (key, fixed) = int_row(n, n);
        assert_eq!(
            f.insert_tentative(&mut mem, hash_key(&key), &fixed, &[]),
            Err(err)
        );
        assert_eq!(mem.used_bytes(), used);
        assert_eq!(f.row_count(), n as usize);
        assert_eq!(f.lookup(hash_key(&key), &key), None);
        for i in 0..n {
            let (key, fixed) = int_row(i, i);
            let id = f.lookup(hash_key(&key), &key).unwrap();
            assert_eq!(f.row(id).0, &fixed);
        }
        // Free a tenth of the rows (not enough to shrink the index) and
        // insert as many new ones: same slots, same memory.
        let mut freed = Vec::new();
        for i in (0..n).step_by(10) {
            let (key, _) = int_row(i, i);
            let h = hash_key(&key);
            let id = f.lookup(h, &key).unwrap();
            f.remove(&mut mem, h, id);
            freed.push(id);
        }
        let pages_before = mem.used_bytes() - f.index_bytes();
        for (j, _) in freed.iter().enumerate() {
            let (key, fixed) = int_row(n + j as u32, 0);
            let id = f
                .insert_tentative(&mut mem, hash_key(&key), &fixed, &[])
                .unwrap();
            assert!(freed.contains(&id));
        }
        assert_eq!(mem.used_bytes() - f.index_bytes(), pages_before);
        assert_eq!(mem.used_bytes(), used);
        f.drop_all(&mut mem);
        assert_eq!(mem.used_bytes(), 0);
    }

    /// Bytes per row of an 8-byte row with a 4-byte key, index included,
    /// right after the index doubled (its emptiest) and right before.
    #[test]
    fn per_row_overhead_is_small() {
        let mut mem = Memory::new(1 << 30);
        let mut f = Fragment::new(int_layout());
        let mut worst = 0.0f64;
        let mut best = f64::MAX;
        for n in 1..=200_000u32 {
            let (key, fixed) = int_row(n, n);
            f.insert_tentative(&mut mem, hash_key(&key), &fixed, &[])
                .unwrap();
            if n >= 10_000 {
                let per_row = mem.used_bytes() as f64 / f64::from(n);
                worst = worst.max(per_row);
                best = best.min(per_row);
            }
        }
        // Rows: 9 bytes (flag + 8) and a partly filled last page; index:
        // 9 bytes per bucket at a load of 7/16 to 7/8.
        assert!(worst < 35.0, "worst {worst:.1} bytes/row");
        assert!(best > 18.0, "best {best:.1} bytes/row");
        f.drop_all(&mut mem);
    }

    #[derive(Debug, Clone)]
    struct ModelRow {
        id: RowId,
        fixed: Vec<u8>,
        var: Vec<u8>,
        tentative: bool,
    }

    /// Random insert/commit/replace/remove/lookup on a fragment with
    /// variable keys and var parts, at a small memory limit, against a
    /// HashMap model. Every lookup and row image must agree with the
    /// model, every failure must be OutOfMemory with nothing changed, and
    /// after removing everything only the pages stay charged.
    #[test]
    fn model_random_operations() {
        let layout = var_layout();
        for seed in 0..12u64 {
            let mut rng = SmallRng::seed_from_u64(seed);
            let mut mem = Memory::new(PAGE_BYTES + 4 * 1024);
            let mut f = Fragment::new(layout.clone());
            let mut model: HashMap<Vec<u8>, ModelRow> = HashMap::new();
            let mut ooms = 0;
            for step in 0..3_000 {
                let k: Vec<u8> = (0..rng.random_range(0..=3))
                    .map(|_| rng.random_range(0..6u8))
                    .collect();
                let s: String = "s".repeat(rng.random_range(0..=40));
                let v = rng.random::<u32>();
                let (key, fixed, var) = var_row(&layout, &k, v, &s);
                let h = hash_key(&key);
                let found = f.lookup(h, &key);
                assert_eq!(
                    found,
                    model.get(&key).map(|r| r.id),
                    "seed {seed} step {step}"
                );
                let used = mem.used_bytes();
                match (rng.random_range(0..10), model.get_mut(&key)) {
                    (0..=3, None) => match f.insert_tentative(&mut mem, h, &fixed, &var) {
                        Ok(id) => {
                            assert!(
                                model.values().all(|r| r.id != id),
                                "row id handed out twice"
                            );
                            model.insert(
                                key.clone(),
                                ModelRow {
                                    id,
                                    fixed,
                                    var,
                                    tentative: true,
                                },
                            );
                        }
                        Err(e) => {
                            ooms += 1;
                            assert_eq!(e.free_bytes, mem.free_bytes());
                            assert_eq!(mem.used_bytes(), used);
                            assert_eq!(f.lookup(h, &key), None);
                        }
                    },
                    (4..=5, Some(row)) => {
                        f.commit_insert(&mut mem, row.id);
                        row.tentative = false;
                    }
                    (6..=7, Some(row)) => {
                        let new_var = rng.random_bool(0.7).then_some(&var[..]);
                        match f.replace(&mut mem, row.id, &fixed, new_var) {
                            Ok(()) => {
                                row.fixed = fixed;
                                if let Some(var) = new_var {
                                    row.var = var.to_vec();
                                }
                            }
                            Err(_) => {
                                ooms += 1;
                                assert_eq!(mem.used_bytes(), used);
                            }
                        }
                    }
                    (8..=9, Some(row)) => {
                        let id = row.id;
                        f.remove(&mut mem, h, id);
                        model.remove(&key);
                        assert!(mem.used_bytes() <= used);
                    }
                    _ => {}
                }
                assert_eq!(f.row_count(), model.len());
                assert_eq!(f.charged_bytes(), mem.used_bytes());
            }
            for row in model.values() {
                let (fixed, var) = f.row(row.id);
                assert_eq!(fixed, &fixed_with_handle(&f, row.id, &row.fixed)[..]);
                assert_eq!(var, &row.var[..]);
                assert_eq!(f.is_tentative(row.id), row.tentative);
            }
            // A scan in row-id order sees exactly the model's rows.
            let mut scanned = Vec::new();
            let mut at = 0;
            while let Some(id) = f.next_row(at) {
                scanned.push(id);
                at = id + 1;
            }
            let mut ids: Vec<RowId> = model.values().map(|r| r.id).collect();
            ids.sort_unstable();
            assert_eq!(scanned, ids);
            assert!(ooms > 0, "seed {seed}: the limit was never hit");
            for (key, row) in model.drain() {
                f.remove(&mut mem, hash_key(&key), row.id);
            }
            assert_eq!(f.row_count(), 0);
            assert_eq!(f.index_bytes(), 0);
            assert_eq!(mem.used_bytes(), f.charged_bytes());
            assert_eq!(mem.used_bytes() % PAGE_BYTES, 0, "only pages stay charged");
            f.drop_all(&mut mem);
            assert_eq!(mem.used_bytes(), 0);
        }
    }

    /// The same kind of sequence with fixed keys, where the fixed part
    /// alone decides key equality.
    #[test]
    fn model_fixed_keys() {
        let mut rng = SmallRng::seed_from_u64(99);
        let mut mem = Memory::new(PAGE_BYTES + 4096);
        let mut f = Fragment::new(int_layout());
        let mut model: HashMap<u32, (RowId, u32)> = HashMap::new();
        for _ in 0..20_000 {
            let k = rng.random_range(0..600u32);
            let v = rng.random::<u32>();
            let (key, fixed) = int_row(k, v);
            let h = hash_key(&key);
            assert_eq!(f.lookup(h, &key), model.get(&k).map(|r| r.0));
            match model.get(&k).copied() {
                None => {
                    if let Ok(id) = f.insert_tentative(&mut mem, h, &fixed, &[]) {
                        f.commit_insert(&mut mem, id);
                        model.insert(k, (id, v));
                    }
                }
                Some((id, old)) => {
                    assert_eq!(f.row(id).0, &int_row(k, old).1);
                    if rng.random_bool(0.5) {
                        f.replace(&mut mem, id, &fixed, None).unwrap();
                        model.insert(k, (id, v));
                    } else {
                        f.remove(&mut mem, h, id);
                        model.remove(&k);
                    }
                }
            }
        }
        for (k, (id, _)) in model.drain() {
            f.remove(&mut mem, hash_key(&k.to_le_bytes()), id);
        }
        assert_eq!(mem.used_bytes(), PAGE_BYTES);
    }

    #[test]
    #[should_panic(expected = "wrong size")]
    fn wrong_fixed_size_panics() {
        let mut mem = Memory::new(1 << 20);
        let mut f = Fragment::new(int_layout());
        let _ = f.insert_tentative(&mut mem, 0, &[0; 7], &[]);
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn unknown_row_panics() {
        let f = Fragment::new(int_layout());
        let _ = f.row(3);
    }
}
