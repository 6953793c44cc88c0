//! A fragment's ordered indexes: one [`OrderedIndex`] per index of the
//! table, keyed by the index columns' values (`shoal_types::index_key`)
//! and the row id. `Fragment` keeps them with its rows: an entry goes in
//! when an insert commits, moves when a committed update changes its
//! columns, and goes out when a delete commits — so an entry never names
//! an uncommitted or deleted row.
//!
//! An index added to a table that has rows is built in steps while writes
//! go on: rows below its build cursor are indexed and kept like any
//! other; rows at or above it are left to the build, which reads their
//! image as it is when it reaches them. A dropped index keeps its number
//! and holds nothing.
//!
//! Memory: entries are charged to `Memory` like rows. A commit must not
//! fail, so commit-time changes may take the index past `data_memory` by
//! what the committing operations' entries need (prepare-time charges of
//! their rows are what refuses new work once memory is full). A build
//! that runs out of memory fails instead.

use crate::memory::{Memory, OutOfMemory};
use crate::ordered::{OrderedIndex, OrderedInsertError};
use crate::rows::{RowId, RowStore};
use shoal_types::index_key::encode_column;
use shoal_types::{ColumnType, IndexDef, RowLayout, TableDef};

/// `FragIndex::built_below` of an index whose build is done.
const BUILT: RowId = RowId::MAX;

struct FragIndex {
    /// (column, type), in key order.
    columns: Vec<(u16, ColumnType)>,
    tree: OrderedIndex,
    /// Every column is a primary-key column: an update (which never
    /// changes the key) never moves its entry.
    key_only: bool,
    /// Rows below this id are indexed ([`BUILT`]: every row).
    built_below: RowId,
    dropped: bool,
}

impl FragIndex {
    fn new(table: &TableDef, def: &IndexDef, built_below: RowId) -> FragIndex {
        FragIndex {
            columns: def
                .columns
                .iter()
                .map(|&c| (c, table.columns[c as usize].ty))
                .collect(),
            tree: OrderedIndex::new(),
            key_only: def.columns.iter().all(|c| table.primary_key.contains(c)),
            built_below: if def.dropped { BUILT } else { built_below },
            dropped: def.dropped,
        }
    }

    /// Row `id`'s entries are kept with it (`broken_build`: the
    /// self-test's fault, a build keeps none of its rows' changes).
    #[inline]
    fn keeps(&self, id: RowId, broken_build: bool) -> bool {
        !self.dropped && id < self.built_below && !(broken_build && self.built_below != BUILT)
    }
}

/// The ordered indexes of one fragment.
pub(crate) struct FragIndexes {
    indexes: Vec<FragIndex>,
    /// Scratch: a key being built, and the keys of a row before an update.
    key: Vec<u8>,
    old_keys: Vec<Vec<u8>>,
    /// Broken on purpose (the simulator's self-test): a committed update
    /// leaves its entries under their old keys.
    pub(crate) broken: bool,
    /// Broken on purpose (the simulator's self-test): while an index is
    /// being built, writes to rows it passed do not change it.
    pub(crate) broken_build: bool,
}

impl FragIndexes {
    /// The indexes of a new, empty fragment: built (there is nothing to
    /// build).
    pub(crate) fn new(layout: &RowLayout) -> FragIndexes {
        let table = &layout.table;
        FragIndexes {
            indexes: table
                .indexes
                .iter()
                .map(|i| FragIndex::new(table, i, BUILT))
                .collect(),
            key: Vec::new(),
            old_keys: Vec::new(),
            broken: false,
            broken_build: false,
        }
    }

    /// Takes the table's indexes as they are now: a new one starts its
    /// build at row 0, a dropped one gives its memory back. Returns
    /// whether this change started a build.
    pub(crate) fn sync(&mut self, mem: &mut Memory, table: &TableDef) -> bool {
        let mut started = false;
        for (i, def) in table.indexes.iter().enumerate() {
            match self.indexes.get_mut(i) {
                None => {
                    let index = FragIndex::new(table, def, 0);
                    started |= index.built_below != BUILT;
                    self.indexes.push(index);
                }
                Some(index) if def.dropped && !index.dropped => {
                    index.tree.release_all(mem);
                    index.dropped = true;
                    index.built_below = BUILT;
                }
                Some(_) => {}
            }
        }
        started
    }

    /// Some index is still being built.
    pub(crate) fn building(&self) -> bool {
        self.indexes.iter().any(|i| i.built_below != BUILT)
    }

    /// Index `index` holds every committed row (built and not dropped).
    pub(crate) fn ready(&self, index: usize) -> bool {
        self.indexes
            .get(index)
            .is_some_and(|i| !i.dropped && i.built_below == BUILT)
    }

    /// Builds on: indexes up to `budget` more rows of `rows`. Returns
    /// whether a build is still under way; out of memory, the builds
    /// under way stop and their entries go (the index cannot be had).
    pub(crate) fn build_step(
        &mut self,
        mem: &mut Memory,
        layout: &RowLayout,
        rows: &RowStore,
        budget: usize,
    ) -> Result<bool, OutOfMemory> {
        let mut left = budget.max(1);
        for index in &mut self.indexes {
            while index.built_below != BUILT && left > 0 {
                let Some(id) = rows.next_row(index.built_below) else {
                    index.built_below = BUILT;
                    break;
                };
                left -= 1;
                if !rows.is_tentative(id) {
                    let (fixed, var) = rows.row(id);
                    Self::build_key(layout, index, fixed, var, &mut self.key);
                    match index.tree.insert(mem, &self.key, id) {
                        Ok(_) => {}
                        Err(OrderedInsertError::OutOfMemory(e)) => {
                            self.abandon_builds(mem);
                            return Err(e);
                        }
                        Err(OrderedInsertError::KeyTooLong { key_bytes }) => {
                            unreachable!("schema bounds index keys; got {key_bytes} bytes")
                        }
                    }
                }
                index.built_below = match id.checked_add(1) {
                    Some(next) if next != BUILT => next,
                    _ => BUILT,
                };
            }
        }
        Ok(self.building())
    }

    /// Drops every index still being built (its build cannot finish).
    pub(crate) fn abandon_builds(&mut self, mem: &mut Memory) {
        for i in &mut self.indexes {
            if i.built_below != BUILT {
                i.tree.release_all(mem);
                i.built_below = BUILT;
                i.dropped = true;
            }
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.indexes.len()
    }

    /// No index keeps entries (nothing to maintain).
    pub(crate) fn is_empty(&self) -> bool {
        self.indexes.iter().all(|i| i.dropped)
    }

    /// Entries of index `index`.
    pub(crate) fn entries(&self, index: usize) -> usize {
        self.indexes[index].tree.len()
    }

    pub(crate) fn charged_bytes(&self) -> usize {
        self.indexes.iter().map(|i| i.tree.charged_bytes()).sum()
    }

    pub(crate) fn release_all(&mut self, mem: &mut Memory) {
        for i in &mut self.indexes {
            i.tree.release_all(mem);
        }
    }

    fn build_key(
        layout: &RowLayout,
        index: &FragIndex,
        fixed: &[u8],
        var: &[u8],
        out: &mut Vec<u8>,
    ) {
        out.clear();
        for &(c, ty) in &index.columns {
            encode_column(ty, layout.column_bytes(fixed, var, c), out);
        }
    }

    /// The key of row image (`fixed`, `var`) in index `index`.
    pub(crate) fn key_of(
        &self,
        layout: &RowLayout,
        index: usize,
        fixed: &[u8],
        var: &[u8],
        out: &mut Vec<u8>,
    ) {
        Self::build_key(layout, &self.indexes[index], fixed, var, out)
    }

    /// A committed row appears: its entry in every index that keeps it.
    pub(crate) fn add(
        &mut self,
        mem: &mut Memory,
        layout: &RowLayout,
        id: RowId,
        fixed: &[u8],
        var: &[u8],
    ) {
        for index in &mut self.indexes {
            if !index.keeps(id, self.broken_build) {
                continue;
            }
            Self::build_key(layout, index, fixed, var, &mut self.key);
            let added = index.tree.insert_committed(mem, &self.key, id);
            debug_assert!(
                added || self.broken || self.broken_build,
                "row {id} indexed twice"
            );
        }
    }

    /// A committed row goes: its entry out of every index that keeps it.
    pub(crate) fn remove(
        &mut self,
        mem: &mut Memory,
        layout: &RowLayout,
        id: RowId,
        fixed: &[u8],
        var: &[u8],
    ) {
        for index in &mut self.indexes {
            if !index.keeps(id, self.broken_build) {
                continue;
            }
            Self::build_key(layout, index, fixed, var, &mut self.key);
            let removed = index.tree.remove(mem, &self.key, id);
            debug_assert!(
                removed || self.broken || self.broken_build,
                "row {id} was not indexed"
            );
        }
    }

    /// Before a committed row's image changes: remembers its keys.
    pub(crate) fn before_update(&mut self, layout: &RowLayout, fixed: &[u8], var: &[u8]) {
        self.old_keys.resize_with(self.indexes.len(), Vec::new);
        for (index, old) in self.indexes.iter().zip(&mut self.old_keys) {
            if !index.dropped && !index.key_only {
                Self::build_key(layout, index, fixed, var, old);
            }
        }
    }

    /// After it changed: entries whose key changed move.
    pub(crate) fn after_update(
        &mut self,
        mem: &mut Memory,
        layout: &RowLayout,
        id: RowId,
        fixed: &[u8],
        var: &[u8],
    ) {
        if self.broken {
            return;
        }
        for (index, old) in self.indexes.iter_mut().zip(&self.old_keys) {
            if index.key_only || !index.keeps(id, self.broken_build) {
                continue;
            }
            Self::build_key(layout, index, fixed, var, &mut self.key);
            if self.key != *old {
                let removed = index.tree.remove(mem, old, id);
                // A build broken on purpose (a checker self-test) missed
                // this row's writes: its entry is under an older key.
                debug_assert!(
                    removed || self.broken || self.broken_build,
                    "row {id} was not indexed"
                );
                index.tree.insert_committed(mem, &self.key, id);
            }
        }
    }

    /// Entries of index `index` from (`key`, `row`) on, ascending.
    pub(crate) fn from<'a>(
        &'a self,
        index: usize,
        key: &[u8],
        row: RowId,
    ) -> impl Iterator<Item = (&'a [u8], RowId)> + 'a {
        self.indexes[index].tree.iter_from(key, row)
    }

    /// Entries of index `index` from (`key`, `row`) back, descending.
    pub(crate) fn back_from<'a>(
        &'a self,
        index: usize,
        key: &[u8],
        row: RowId,
    ) -> impl Iterator<Item = (&'a [u8], RowId)> + 'a {
        self.indexes[index].tree.iter_back_from(key, row)
    }

    /// Every entry of index `index`, descending.
    pub(crate) fn back_all(&self, index: usize) -> impl Iterator<Item = (&[u8], RowId)> + '_ {
        self.indexes[index].tree.iter_back()
    }
}
