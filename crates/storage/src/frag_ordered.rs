//! A fragment's ordered indexes: one [`OrderedIndex`] per index of the
//! table, keyed by the index columns' values (`shoal_types::index_key`)
//! and the row id. `Fragment` keeps them with its rows: an entry goes in
//! when an insert commits, moves when a committed update changes its
//! columns, and goes out when a delete commits — so an entry never names
//! an uncommitted or deleted row.
//!
//! Memory: entries are charged to `Memory` like rows. A commit must not
//! fail, so commit-time changes may take the index past `data_memory` by
//! what the committing operations' entries need (prepare-time charges of
//! their rows are what refuses new work once memory is full).

use crate::memory::Memory;
use crate::ordered::OrderedIndex;
use crate::rows::RowId;
use shoal_types::index_key::encode_column;
use shoal_types::{ColumnType, RowLayout};

struct FragIndex {
    /// (column, type), in key order.
    columns: Vec<(u16, ColumnType)>,
    tree: OrderedIndex,
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
}

impl FragIndexes {
    pub(crate) fn new(layout: &RowLayout) -> FragIndexes {
        let table = &layout.table;
        FragIndexes {
            indexes: table
                .indexes
                .iter()
                .map(|i| FragIndex {
                    columns: i
                        .columns
                        .iter()
                        .map(|&c| (c, table.columns[c as usize].ty))
                        .collect(),
                    tree: OrderedIndex::new(),
                })
                .collect(),
            key: Vec::new(),
            old_keys: Vec::new(),
            broken: false,
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.indexes.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.indexes.is_empty()
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

    /// A committed row appears: its entry in every index.
    pub(crate) fn add(
        &mut self,
        mem: &mut Memory,
        layout: &RowLayout,
        id: RowId,
        fixed: &[u8],
        var: &[u8],
    ) {
        for index in &mut self.indexes {
            Self::build_key(layout, index, fixed, var, &mut self.key);
            let added = index.tree.insert_committed(mem, &self.key, id);
            debug_assert!(added || self.broken, "row {id} indexed twice");
        }
    }

    /// A committed row goes: its entry out of every index.
    pub(crate) fn remove(
        &mut self,
        mem: &mut Memory,
        layout: &RowLayout,
        id: RowId,
        fixed: &[u8],
        var: &[u8],
    ) {
        for index in &mut self.indexes {
            Self::build_key(layout, index, fixed, var, &mut self.key);
            let removed = index.tree.remove(mem, &self.key, id);
            debug_assert!(removed || self.broken, "row {id} was not indexed");
        }
    }

    /// Before a committed row's image changes: remembers its keys.
    pub(crate) fn before_update(&mut self, layout: &RowLayout, fixed: &[u8], var: &[u8]) {
        self.old_keys.resize_with(self.indexes.len(), Vec::new);
        for (index, old) in self.indexes.iter().zip(&mut self.old_keys) {
            Self::build_key(layout, index, fixed, var, old);
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
            Self::build_key(layout, index, fixed, var, &mut self.key);
            if self.key != *old {
                let removed = index.tree.remove(mem, old, id);
                debug_assert!(removed, "row {id} was not indexed");
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
