//! LQH: one batch of a scan of a fragment (NDB's SCAN_FRAGREQ), committed
//! read. The rows are walked in row-id order from the coordinator's
//! cursor; each committed row the filter keeps is encoded straight into
//! the answer. Nothing is kept between batches: the cursor travels with
//! the request, so a scan's coordinator failing leaves nothing here.
//!
//! Why a row-id cursor is enough for a committed read (PROTOCOL.md §12):
//! a row keeps its id from its insert to its delete, and the ids are the
//! same on every replica, so a row committed before the scan began and
//! untouched until it ended is at one id the walk passes exactly once;
//! rows inserted or deleted meanwhile may or may not be seen, and a row
//! seen is always its newest committed image at that moment.

use super::body::{read_image_into, read_list, ReadList};
use super::{err, Lqh};
use crate::dih::Dih;
use crate::signal::{BlockSignal, ClusterSignal};
use shoal_types::distribution::FragmentId;
use shoal_types::filter::Filter;
use shoal_types::{ErrorCode, SchemaVersion, ShoalError, TableId};
use shoal_wire::node::{ScanSignal, SCAN_FRAG_END};
use std::collections::VecDeque;

/// The fields of a `ScanFragReq` a batch reads.
struct ScanFragReq<'a> {
    table: TableId,
    version: SchemaVersion,
    frag: FragmentId,
    frag_version: u32,
    from_row: u32,
    max_rows: u32,
    max_bytes: u32,
    columns: &'a [u8],
    filter: &'a [u8],
}

/// What one batch found.
struct Batch {
    rows: Vec<u8>,
    count: u32,
    examined: u32,
    next_row: u32,
}

impl Lqh {
    /// Runs one batch of a `ScanFragReq` and answers the coordinator.
    pub(super) fn scan_frag(&self, sig: ScanSignal, dih: &Dih, out: &mut VecDeque<BlockSignal>) {
        let ScanSignal::FragReq {
            scan,
            from: to,
            table,
            version,
            frag,
            batch,
            frag_version,
            from_row,
            max_rows,
            max_bytes,
            columns,
            filter,
            ..
        } = sig
        else {
            return;
        };
        let req = ScanFragReq {
            table,
            version,
            frag,
            frag_version,
            from_row,
            max_rows,
            max_bytes,
            columns: &columns,
            filter: &filter,
        };
        let answer = match self.scan_batch(&req, dih) {
            Ok(b) => ScanSignal::FragConf {
                to,
                scan,
                frag,
                batch,
                next_row: b.next_row,
                examined: b.examined,
                count: b.count,
                rows: b.rows,
            },
            Err(e) => ScanSignal::FragRef {
                to,
                scan,
                frag,
                batch,
                code: e.code as u16,
                detail: e.detail,
            },
        };
        out.push_back(BlockSignal::Cluster(ClusterSignal::Scan(answer)));
    }

    fn scan_batch(&self, req: &ScanFragReq, dih: &Dih) -> Result<Batch, ShoalError> {
        let Some(entry) = self.frags.get(&(req.table, req.frag)) else {
            return Err(if self.tables.contains_key(&req.table) {
                err(
                    ErrorCode::DistributionChanged,
                    format!(
                        "fragment {} of table {} is not on data node {}; the scan's route is out of date",
                        req.frag, req.table, self.cfg.node_id
                    ),
                )
            } else {
                err(
                    ErrorCode::NoSuchTable,
                    format!(
                        "table id {} is not known to this node (dropped?)",
                        req.table
                    ),
                )
            });
        };
        if entry.version != req.version {
            return Err(err(
                ErrorCode::InvalidSchemaVersion,
                format!(
                    "table id {} is at version {}, the scan used version {}",
                    req.table, entry.version, req.version
                ),
            ));
        }
        if !dih.epoch_now().restored {
            return Err(err(
                ErrorCode::NodeNotReady,
                "this data node is still restoring its rows after a restart of the cluster; retry",
            ));
        }
        let own = self.cfg.node_id;
        match dih.frag(req.table, req.frag) {
            Some(f)
                if f.is_ready(own)
                    && (f.version == req.frag_version || self.cfg.faults.ignore_dist_version) => {}
            current => {
                return Err(err(
                    ErrorCode::DistributionChanged,
                    format!(
                        "fragment {} of table {}: the scan routed by distribution version {}, data node {own} is at {} (a replica failed or moved); retry the scan",
                        req.frag,
                        req.table,
                        req.frag_version,
                        current.map_or(0, |f| f.version)
                    ),
                ))
            }
        }
        let layout = &entry.layout;
        let cols = read_list(req.columns)?;
        if let ReadList::Columns(ids) = cols {
            layout.check_column_ids(ReadList::Columns(ids).ids(layout))?;
        }
        let filter = Filter::verify(req.filter, &layout.table)?;
        let match_all = filter.is_match_all();
        let max_rows = req.max_rows.max(1);
        let max_bytes = req.max_bytes as usize;
        let examine_max = u32::try_from(self.cfg.scan_examine_rows_max)
            .unwrap_or(u32::MAX)
            .max(1);
        let mut batch = Batch {
            rows: Vec::new(),
            count: 0,
            examined: 0,
            next_row: SCAN_FRAG_END,
        };
        let mut at = req.from_row;
        while let Some(id) = entry.frag.next_row(at) {
            // At least one row per batch, whatever its size: a scan always
            // moves on.
            let full =
                batch.count >= max_rows || (batch.count > 0 && batch.rows.len() >= max_bytes);
            if full || batch.examined >= examine_max {
                batch.next_row = id;
                if self.cfg.faults.scan_skips_row_at_batch_end {
                    batch.next_row = id.saturating_add(1).min(SCAN_FRAG_END - 1);
                }
                return Ok(batch);
            }
            batch.examined += 1;
            // Uncommitted inserts, and rows a copy has not confirmed, are
            // not there for a committed read.
            if !entry.frag.is_tentative(id) && !entry.is_unverified(id) {
                let (fixed, var) = entry.frag.row(id);
                if match_all || filter.matches(|c| layout.column_bytes(fixed, var, c)) {
                    read_image_into(layout, fixed, var, cols, &mut batch.rows);
                    batch.count += 1;
                }
            }
            at = match id.checked_add(1) {
                Some(next) if next != SCAN_FRAG_END => next,
                _ => break,
            };
        }
        Ok(batch)
    }
}
