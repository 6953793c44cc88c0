//! LQH: one batch of a scan of a fragment (NDB's SCAN_FRAGREQ), committed
//! read. The rows are walked in row-id order from the coordinator's
//! cursor; each committed row the filter keeps is encoded straight into
//! the answer. Nothing is kept between batches: the cursor travels with
//! the request, so a scan's coordinator failing leaves nothing here.
//!
//! An index scan walks one ordered index of the fragment instead, range
//! by range, from a cursor of (range, key, row id): the index holds
//! committed rows only (its entries change at commit with the rows), so
//! every entry it yields is a committed row's.
//!
//! Why a row-id cursor is enough for a committed read (PROTOCOL.md §12):
//! a row keeps its id from its insert to its delete, and the ids are the
//! same on every replica, so a row committed before the scan began and
//! untouched until it ended is at one id the walk passes exactly once;
//! rows inserted or deleted meanwhile may or may not be seen, and a row
//! seen is always its newest committed image at that moment.

use super::body::{read_image_into, read_list, ReadList};
use super::{err, FragEntry, Lqh};
use crate::dih::Dih;
use crate::signal::{BlockSignal, ClusterSignal};
use shoal_storage::RowId;
use shoal_types::distribution::FragmentId;
use shoal_types::filter::Filter;
use shoal_types::{ErrorCode, RowLayout, SchemaVersion, ShoalError, TableId};
use shoal_wire::node::{ScanCursor, ScanSignal, SCAN_FRAG_END};
use shoal_wire::scan::{decode_bounds, KeyRange, SCAN_DESCENDING, SCAN_NO_INDEX, SCAN_ORDERED};
use std::collections::VecDeque;

/// The worst-case filter work one batch may do, in byte comparisons
/// (some ms): a batch looks at fewer rows when its filter is costly.
const SCAN_FILTER_WORK_PER_BATCH: u64 = shoal_types::filter::FILTER_COST_MAX;

/// The most a batch reserves for its rows at once (see `Batch::offer`).
const BATCH_RESERVE_BYTES_MAX: usize = 256 << 10;

/// The fields of a `ScanFragReq` a batch reads.
struct ScanFragReq<'a> {
    table: TableId,
    version: SchemaVersion,
    frag: FragmentId,
    frag_version: u32,
    index: u16,
    flags: u8,
    bounds: &'a [u8],
    from: &'a ScanCursor,
    max_rows: u32,
    max_bytes: u32,
    columns: &'a [u8],
    filter: &'a [u8],
}

/// What one batch found, and its bounds.
struct Batch<'a> {
    layout: &'a RowLayout,
    cols: ReadList<'a>,
    filter: Filter<'a>,
    match_all: bool,
    /// Each row after its index key (an ordered scan).
    with_keys: bool,
    max_rows: u32,
    max_bytes: usize,
    examine_max: u32,
    rows: Vec<u8>,
    count: u32,
    examined: u32,
    /// An index entry named a row that is not there (a bug): the batch
    /// fails rather than read it.
    corrupt: Option<String>,
}

impl Batch<'_> {
    /// No more rows go in (at least one always does: a scan moves on).
    fn full(&self) -> bool {
        self.count >= self.max_rows
            || (self.count > 0 && self.rows.len() >= self.max_bytes)
            || self.examined >= self.examine_max
    }

    /// Looks at a committed row; adds it if the filter keeps it.
    fn offer(&mut self, key: &[u8], fixed: &[u8], var: &[u8]) {
        self.examined += 1;
        let layout = self.layout;
        if self.match_all || self.filter.matches(|c| layout.column_bytes(fixed, var, c)) {
            if self.with_keys {
                // `u16 key_len | key | u32 attrs_len | attrs`: the lengths
                // let the coordinator frame rows without parsing them.
                self.rows
                    .extend_from_slice(&(key.len() as u16).to_le_bytes());
                self.rows.extend_from_slice(key);
                let len_at = self.rows.len();
                self.rows.extend_from_slice(&[0; 4]);
                read_image_into(layout, fixed, var, self.cols, &mut self.rows);
                let len = (self.rows.len() - len_at - 4) as u32;
                self.rows[len_at..len_at + 4].copy_from_slice(&len.to_le_bytes());
            } else {
                read_image_into(layout, fixed, var, self.cols, &mut self.rows);
            }
            self.count += 1;
            if self.count == 1 {
                // Room for the batch at the first row's size, once, rather
                // than a doubling every few rows: bounded by the batch's
                // bytes (it stops at its first row past them) and by
                // `BATCH_RESERVE_BYTES_MAX` (a larger batch grows as its
                // rows come; a filter that keeps few reserves little).
                let first = self.rows.len();
                let want = first
                    .saturating_mul(self.max_rows as usize)
                    .min(self.max_bytes.saturating_add(first))
                    .min(BATCH_RESERVE_BYTES_MAX);
                self.rows.reserve(want.saturating_sub(first));
            }
        }
    }
}

impl Lqh {
    /// Runs one batch of a `ScanFragReq` and answers the coordinator.
    pub(super) fn scan_frag(&self, sig: ScanSignal, dih: &Dih, out: &mut VecDeque<BlockSignal>) {
        let ScanSignal::FragReq {
            scan,
            tc: to,
            table,
            version,
            frag,
            batch,
            frag_version,
            index,
            flags,
            bounds,
            from,
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
            index,
            flags,
            bounds: &bounds,
            from: &from,
            max_rows,
            max_bytes,
            columns: &columns,
            filter: &filter,
        };
        let answer = match self.scan_batch(&req, dih) {
            Ok((rows, count, examined, next)) => ScanSignal::FragConf {
                to,
                scan,
                frag,
                batch,
                next,
                examined,
                count,
                rows,
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
        out.push_back(BlockSignal::from(ClusterSignal::Scan(answer)));
    }

    /// Checks the request against this replica, then walks it: (rows,
    /// count, examined, where to go on).
    fn scan_batch(
        &self,
        req: &ScanFragReq,
        dih: &Dih,
    ) -> Result<(Vec<u8>, u32, u32, ScanCursor), ShoalError> {
        let entry = self.scan_entry(req, dih)?;
        let layout = &*entry.layout;
        let cols = read_list(req.columns)?;
        if let ReadList::Columns(ids) = cols {
            layout.check_column_ids(ReadList::Columns(ids).ids(layout))?;
        }
        let filter = Filter::verify(req.filter, &layout.table)?;
        let cost = filter.cost_per_row();
        let mut batch = Batch {
            layout,
            cols,
            match_all: filter.is_match_all(),
            filter,
            with_keys: req.index != SCAN_NO_INDEX && req.flags & SCAN_ORDERED != 0,
            max_rows: req.max_rows.max(1),
            max_bytes: req.max_bytes as usize,
            // Bounded by rows, and by the filter's worst-case work.
            examine_max: u32::try_from(
                self.cfg
                    .scan_examine_rows_max
                    .min((SCAN_FILTER_WORK_PER_BATCH / cost.max(1)) as usize),
            )
            .unwrap_or(u32::MAX)
            .max(1),
            rows: Vec::new(),
            count: 0,
            examined: 0,
            corrupt: None,
        };
        let next = if req.index == SCAN_NO_INDEX {
            self.table_walk(entry, req.from.row, &mut batch)
        } else {
            let index = usize::from(req.index);
            if index >= entry.frag.ordered_count() {
                // mgmd added it, and this node has not heard yet (or was
                // away): the coordinator knew it.
                return Err(err(
                    ErrorCode::NodeNotReady,
                    format!(
                        "data node {} does not know ordered index number {} of table {} yet; retry",
                        self.cfg.node_id, req.index, req.table
                    ),
                ));
            }
            if layout.table.indexes[index].dropped {
                return Err(err(
                    ErrorCode::BadRequest,
                    format!(
                        "table {} has no ordered index number {}",
                        req.table, req.index
                    ),
                ));
            }
            if !entry.frag.ordered_ready(index) {
                return Err(err(
                    ErrorCode::NodeNotReady,
                    format!(
                        "ordered index {:?} of table {} is still being built on data node {}; retry",
                        layout.table.indexes[index].name, req.table, self.cfg.node_id
                    ),
                ));
            }
            let ranges = decode_bounds(req.bounds)
                .map_err(|e| err(ErrorCode::BadRequest, format!("malformed scan bounds: {e}")))?;
            let descending = req.flags & SCAN_DESCENDING != 0;
            index_walk(
                entry,
                usize::from(req.index),
                &ranges,
                descending,
                req.from,
                &mut batch,
            )
        };
        if let Some(why) = batch.corrupt {
            return Err(err(ErrorCode::Internal, why));
        }
        Ok((batch.rows, batch.count, batch.examined, next))
    }

    /// The fragment, if this replica may serve the scan's batch.
    fn scan_entry(&self, req: &ScanFragReq, dih: &Dih) -> Result<&FragEntry, ShoalError> {
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
                    && (f.version == req.frag_version || self.cfg.faults.ignore_dist_version) =>
            {
                Ok(entry)
            }
            current => Err(err(
                ErrorCode::DistributionChanged,
                format!(
                    "fragment {} of table {}: the scan routed by distribution version {}, data node {own} is at {} (a replica failed or moved); retry the scan",
                    req.frag,
                    req.table,
                    req.frag_version,
                    current.map_or(0, |f| f.version)
                ),
            )),
        }
    }

    /// A table scan's batch: rows in row-id order from `from`.
    fn table_walk(&self, entry: &FragEntry, from: RowId, batch: &mut Batch) -> ScanCursor {
        let mut at = from;
        while let Some(id) = entry.frag.next_row(at) {
            if batch.full() {
                let mut row = id;
                if self.cfg.faults.scan_skips_row_at_batch_end {
                    row = id.saturating_add(1).min(SCAN_FRAG_END - 1);
                }
                return ScanCursor {
                    range: 0,
                    row,
                    key: Vec::new(),
                };
            }
            // Uncommitted inserts, and rows a copy has not confirmed, are
            // not there for a committed read.
            match entry.frag.committed_row(id) {
                Some((fixed, var)) if !entry.is_unverified(id) => batch.offer(&[], fixed, var),
                _ => batch.examined += 1,
            }
            at = match id.checked_add(1) {
                Some(next) if next != SCAN_FRAG_END => next,
                _ => break,
            };
        }
        ScanCursor::end()
    }
}

/// An index scan's batch: the ranges in scan order from `from`, each
/// walked in the index's order (or backwards).
fn index_walk(
    entry: &FragEntry,
    index: usize,
    ranges: &[KeyRange],
    descending: bool,
    from: &ScanCursor,
    batch: &mut Batch,
) -> ScanCursor {
    let n = ranges.len();
    let mut range_no = usize::from(from.range);
    let mut resume = (!from.key.is_empty()).then_some((&from.key[..], from.row));
    while range_no < n {
        let range = if descending {
            &ranges[n - 1 - range_no]
        } else {
            &ranges[range_no]
        };
        let frag = &entry.frag;
        let stopped = match (descending, resume) {
            (false, Some((key, row))) => walk(
                frag.ordered_from(index, key, row),
                resume,
                range,
                false,
                entry,
                batch,
            ),
            (false, None) => match range.low {
                Some((low, _)) => walk(
                    frag.ordered_from(index, low, 0),
                    None,
                    range,
                    false,
                    entry,
                    batch,
                ),
                None => walk(
                    frag.ordered_from(index, &[], 0),
                    None,
                    range,
                    false,
                    entry,
                    batch,
                ),
            },
            (true, Some((key, row))) => walk(
                frag.ordered_back_from(index, key, row),
                resume,
                range,
                true,
                entry,
                batch,
            ),
            (true, None) => match range.high.and_then(|(high, _)| prefix_successor(high)) {
                Some(past) => walk(
                    frag.ordered_back_from(index, &past, 0),
                    None,
                    range,
                    true,
                    entry,
                    batch,
                ),
                None => walk(
                    frag.ordered_back_all(index),
                    None,
                    range,
                    true,
                    entry,
                    batch,
                ),
            },
        };
        if batch.corrupt.is_some() {
            return ScanCursor::end();
        }
        if let Some((key, row)) = stopped {
            return ScanCursor {
                range: range_no as u16,
                row,
                key,
            };
        }
        range_no += 1;
        resume = None;
    }
    ScanCursor::end()
}

/// Walks one range from an iterator positioned at (or before) its start;
/// `skip`: the entry the last batch ended on (not looked at again).
/// Returns where it stopped, if it stopped before the range's end.
fn walk<'a>(
    entries: impl Iterator<Item = (&'a [u8], RowId)>,
    skip: Option<(&[u8], RowId)>,
    range: &KeyRange,
    descending: bool,
    entry: &'a FragEntry,
    batch: &mut Batch,
) -> Option<(Vec<u8>, RowId)> {
    // The last entry looked at, kept by reference (no copy per entry).
    let mut last: Option<(&'a [u8], RowId)> = None;
    // Only the first entry can be the one the cursor names (the walk
    // starts at it, if it is still there).
    let mut first = true;
    // Entries come in order: once one is inside the range's start, so is
    // every later one, and only the end is compared from then on.
    let mut started = false;
    for (key, row) in entries {
        if std::mem::take(&mut first) && skip.is_some_and(|(k, r)| k == key && r == row) {
            continue;
        }
        let past_end = if descending {
            !range.above_low(key)
        } else {
            !range.below_high(key)
        };
        if past_end {
            return None;
        }
        if !started {
            started = if descending {
                range.below_high(key)
            } else {
                range.above_low(key)
            };
        }
        if batch.full() {
            return Some(match last.or(skip) {
                Some((k, r)) => (k.to_vec(), r),
                // Nothing of this range looked at yet: from its start.
                None => (Vec::new(), 0),
            });
        }
        let Some((fixed, var)) = entry.frag.committed_row(row) else {
            batch.corrupt = Some(format!(
                "ordered index entry {key:?} names row {row}, which holds no committed row"
            ));
            return None;
        };
        if !started || entry.is_unverified(row) {
            batch.examined += 1;
        } else {
            batch.offer(key, fixed, var);
        }
        last = Some((key, row));
    }
    None
}

/// The smallest byte string greater than every string that starts with
/// `prefix`, if any (`None`: the prefix is all 0xFF bytes, or empty).
fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let end = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut next = prefix[..=end].to_vec();
    next[end] += 1;
    Some(next)
}
