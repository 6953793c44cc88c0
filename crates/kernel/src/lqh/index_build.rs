//! LQH: ordered indexes added to, or dropped from, a table that has rows
//! (mgmd's index change). A new index is built in steps, a bounded number
//! of rows per tick, while writes go on: `Fragment` keeps the rows below
//! each build's cursor indexed and leaves the rest to the build. A scan of
//! an index still building on a replica is refused with a temporary
//! error. When every local fragment of the table has built its new
//! indexes, the node says so (and then acknowledges the change to mgmd).

use super::{err, Lqh};
use shoal_types::{ErrorCode, RowLayout, ShoalError, TableDef, TableId};
use std::sync::Arc;

/// How an index change of one table ended on this node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum IndexBuildDone {
    Built(TableId),
    /// Out of data memory: the new indexes are dropped on this node.
    Failed(TableId, String),
}

impl Lqh {
    /// Takes `def`'s indexes for table `def.id` (same columns, same
    /// version). Returns whether it started a build (it finishes at a
    /// later [`Lqh::index_build_tick`]; a change that only drops is done).
    pub fn alter_indexes(&mut self, def: &TableDef) -> Result<bool, ShoalError> {
        let Some(frags) = self.tables.get(&def.id) else {
            return Err(err(
                ErrorCode::NoSuchTable,
                format!("table id {} is not known to this node", def.id),
            ));
        };
        let layout = Arc::new(RowLayout::new(def));
        let mut building = false;
        for &f in frags {
            let entry = self.frags.get_mut(&(def.id, f)).expect("listed fragment");
            if entry.layout.table.indexes.len() > def.indexes.len() {
                // Index numbers are never taken back (a dropped one stays
                // listed): a definition with fewer is not a later one.
                return Err(err(
                    ErrorCode::BadRequest,
                    format!(
                        "an index change of table id {} lists {} indexes, this node has {}",
                        def.id,
                        def.indexes.len(),
                        entry.layout.table.indexes.len()
                    ),
                ));
            }
            if entry.layout.table.columns != def.columns || entry.version != def.version {
                return Err(err(
                    ErrorCode::InvalidSchemaVersion,
                    format!(
                        "an index change of table id {} names version {}, this node has {} (or other columns)",
                        def.id, def.version, entry.version
                    ),
                ));
            }
            entry.layout = layout.clone();
            building |= entry.frag.sync_indexes(&mut self.mem, layout.clone());
        }
        if building {
            self.index_builds.insert(def.id);
        }
        Ok(building)
    }

    /// Whether an ordered index of `table` is still being built here.
    pub fn is_building_indexes(&self, table: TableId) -> bool {
        self.index_builds.contains(&table)
    }

    /// Builds on (a bounded number of rows per table); the tables whose
    /// builds ended.
    pub fn index_build_tick(&mut self) -> Vec<IndexBuildDone> {
        let mut done = Vec::new();
        let tables: Vec<TableId> = self.index_builds.iter().copied().collect();
        for table in tables {
            let frags = self.tables.get(&table).cloned().unwrap_or_default();
            let per_frag = (self.cfg.index_build_rows_per_tick / frags.len().max(1)).max(1);
            let mut still = false;
            let mut failed = None;
            for &f in &frags {
                let entry = self.frags.get_mut(&(table, f)).expect("listed fragment");
                match entry.frag.build_indexes(&mut self.mem, per_frag) {
                    Ok(building) => still |= building,
                    Err(e) => {
                        failed = Some(format!(
                            "out of data memory building an ordered index of table id {table} (fragment {f}): needed {} bytes, {} free",
                            e.requested_bytes, e.free_bytes
                        ));
                        break;
                    }
                }
            }
            if let Some(why) = failed {
                // The index cannot be had here: none of its fragments keep
                // a part of it.
                for &f in &frags {
                    let entry = self.frags.get_mut(&(table, f)).expect("listed fragment");
                    entry.frag.abandon_index_builds(&mut self.mem);
                }
                self.index_builds.remove(&table);
                done.push(IndexBuildDone::Failed(table, why));
            } else if !still {
                self.index_builds.remove(&table);
                done.push(IndexBuildDone::Built(table));
            }
        }
        done
    }
}
