//! Locking scans (`Shared`, `Exclusive`): a committed-read scan finds the
//! rows, and the scan's transaction then reads each batch of them again by
//! primary key with the lock asked for (NDB takes the lock inside the
//! scan; here the key reads take it, with every rule of key locking: lock
//! waits, the deadlock timeout, the bound on operations per transaction).
//! Each locked image is checked against the filter (and an index scan's
//! ranges) again, since the row may have changed between the scan's read
//! and the lock; a row deleted meanwhile is skipped. Rows come in the
//! order the scan found them (an ordered index scan's order holds for
//! rows whose index columns did not change meanwhile). The locks are the transaction's: they stay until
//! it commits or rolls back, closing the scan early frees only the scan,
//! and the transaction may update or delete the rows it locked.
//!
//! What this gives: every row returned was locked when it was read, and
//! stays locked, so the rows a locking scan returns are a consistent set
//! for the rest of the transaction (two-phase locking). Rows inserted after
//! the scan passed their place are not seen (no range locks, as in NDB).

use super::Scan;
use crate::record::Record;
use crate::row_buf::RowBuf;
use crate::transaction::{OpId, Transaction};
use shoal_types::filter::FilterExpr;
use shoal_types::index_key::encode_key;
use shoal_types::{ErrorCode, ShoalError, Value};
use shoal_wire::scan::KeyRange;
use shoal_wire::{ExecType, LockMode};
use std::collections::VecDeque;

/// Rows a locking scan locks per round trip, at most.
pub const LOCK_BATCH_ROWS_MAX: u32 = 1024;

/// A scan whose rows are locked in its transaction
/// ([`super::ScanBuilder::open_locking`]).
pub struct LockingScan<'t> {
    scan: Scan,
    txn: &'t mut Transaction,
    record: Record,
    lock: LockMode,
    filter: Option<FilterExpr>,
    /// An index scan's index columns and ranges (encoded keys).
    bounds: Option<(Vec<u16>, Vec<super::OwnedRange>)>,
    batch: usize,
    locked: VecDeque<RowBuf>,
    current: Option<RowBuf>,
    keys: Vec<Vec<Value>>,
    ops: Vec<OpId>,
}

impl std::fmt::Debug for LockingScan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockingScan")
            .field("scan", &self.scan)
            .field("lock", &self.lock)
            .field("batch", &self.batch)
            .finish()
    }
}

impl<'t> LockingScan<'t> {
    pub(super) fn new(
        scan: Scan,
        txn: &'t mut Transaction,
        record: Record,
        lock: LockMode,
        filter: Option<FilterExpr>,
        bounds: Option<(Vec<u16>, Vec<super::OwnedRange>)>,
        batch: usize,
    ) -> Self {
        LockingScan {
            scan,
            txn,
            record,
            lock,
            filter,
            bounds,
            batch,
            locked: VecDeque::new(),
            current: None,
            keys: Vec::new(),
            ops: Vec::new(),
        }
    }

    /// The next row, locked in the transaction; `None` at the end. An
    /// error (a lock wait timed out, the transaction failed) ends the scan;
    /// the transaction is then aborted if the error says so.
    pub async fn next_row(&mut self) -> Result<Option<&RowBuf>, ShoalError> {
        loop {
            if let Some(row) = self.locked.pop_front() {
                self.current = Some(row);
                return Ok(self.current.as_ref());
            }
            if !self.lock_next_batch().await? {
                return Ok(None);
            }
        }
    }

    /// Every remaining row (for tests and small tables).
    pub async fn collect_all(&mut self) -> Result<Vec<RowBuf>, ShoalError> {
        let mut rows = Vec::new();
        while let Some(row) = self.next_row().await? {
            rows.push(row.clone());
        }
        Ok(rows)
    }

    /// Rows the data nodes looked at for the scan so far.
    pub fn rows_examined(&self) -> u64 {
        self.scan.rows_examined()
    }

    /// Takes up to a batch of rows from the scan and locks them; false
    /// once the scan has none left.
    async fn lock_next_batch(&mut self) -> Result<bool, ShoalError> {
        let def = self.record.table().def().clone();
        self.keys.clear();
        while self.keys.len() < self.batch {
            let Some(row) = self.scan.next_row().await? else {
                break;
            };
            let values = row.values();
            let key = def
                .primary_key
                .iter()
                .map(|k| {
                    values
                        .iter()
                        .find(|(c, _)| c == k)
                        .map(|(_, v)| v.clone())
                        .ok_or_else(|| {
                            ShoalError::with_detail(
                                ErrorCode::Internal,
                                format!(
                                    "a scanned row of {:?} without its key column {k}",
                                    def.name
                                ),
                            )
                        })
                })
                .collect::<Result<Vec<Value>, _>>()?;
            self.keys.push(key);
        }
        if self.keys.is_empty() {
            return Ok(false);
        }
        self.ops.clear();
        for key in &self.keys {
            let op = self.txn.read(&self.record, key, self.lock)?;
            // Deleted since the scan saw it: skipped, not an abort.
            self.txn.ignore_error(op);
            self.ops.push(op);
        }
        self.txn.execute(ExecType::NoCommit).await?;
        for &op in &self.ops {
            if let Some(e) = self.txn.op_error(op) {
                if e.code == ErrorCode::TupleNotFound {
                    continue;
                }
                return Err(e.clone());
            }
            let Some(row) = self.txn.take_row(op) else {
                continue;
            };
            let mut values = vec![Value::Null; def.columns.len()];
            for (c, v) in row.values() {
                values[usize::from(c)] = v;
            }
            let mut keep = self
                .filter
                .as_ref()
                .is_none_or(|f| f.eval_values(&def, &values) == Some(true));
            if let (true, Some((columns, ranges))) = (keep, &self.bounds) {
                let of_row: Vec<Value> = columns
                    .iter()
                    .map(|&c| values[usize::from(c)].clone())
                    .collect();
                let mut key = Vec::new();
                encode_key(&def, columns, &of_row, &mut key)?;
                keep = ranges.iter().any(|(low, high)| {
                    let r = KeyRange {
                        low: low.as_ref().map(|(b, i)| (&b[..], *i)),
                        high: high.as_ref().map(|(b, i)| (&b[..], *i)),
                    };
                    r.above_low(&key) && r.below_high(&key)
                });
            }
            if keep {
                self.locked.push_back(row);
            }
        }
        Ok(true)
    }
}
