//! The rows a plan reaches, read through the native client: key reads
//! (batched) or a scan (pushed filter, index bounds, merged order),
//! locking or not, with the WHERE evaluated again on every row. SELECT,
//! grouping, UPDATE and DELETE share it.

use super::error::from_shoal;
use super::expr::{truth, Scalar};
use super::group_key::row_bytes;
use super::plan::{Access, Plan};
use super::{held_too_much, too_many_rows, Limits};
use crate::outcome::SqlError;
use shoal_client::{
    Cluster, ErrorCode, ExecType, LockMode, LockingScan, Record, RowBuf, Scan, Table, Transaction,
    UniqueIndex, Value,
};
use std::collections::VecDeque;
use std::ops::Bound;

/// A row read into a vector of the table's values by column id (columns
/// the read did not return are NULL).
fn values_of(row: &RowBuf, width: usize, columns: &[u16]) -> Vec<Value> {
    let mut v = vec![Value::Null; width];
    for &c in columns {
        if let Some(x) = row.get_idx(c) {
            v[usize::from(c)] = x;
        }
    }
    v
}

/// Rows of `table` the plan reaches for which `where_` holds, with every
/// column, read with `lock` in `txn` (`NoCommit`); at most `stop_after`
/// of them (in the access's order); a scan's at most `limits.rows_max`.
#[allow(clippy::too_many_arguments)]
pub async fn fetch(
    cluster: &Cluster,
    txn: &mut Transaction,
    table: &Table,
    plan: &Plan,
    where_: Option<&Scalar>,
    lock: LockMode,
    stop_after: Option<usize>,
    commit_last: bool,
    limits: &Limits,
) -> Result<Vec<Vec<Value>>, SqlError> {
    #[rustfmt::skip]
    let rows = fetch_columns(
        cluster, txn, table, plan, where_, lock, stop_after, commit_last, limits, None,
    )
    .await?;
    Ok(rows)
}

/// [`fetch`], reading only `columns` (ids; `None`: every column); the
/// others read as NULL.
#[allow(clippy::too_many_arguments)]
pub async fn fetch_columns(
    cluster: &Cluster,
    txn: &mut Transaction,
    table: &Table,
    plan: &Plan,
    where_: Option<&Scalar>,
    lock: LockMode,
    stop_after: Option<usize>,
    commit_last: bool,
    limits: &Limits,
    columns: Option<&[u16]>,
) -> Result<Vec<Vec<Value>>, SqlError> {
    let want = stop_after.unwrap_or(usize::MAX);
    // Key reads are bounded by the lookups planned; a scan by rows_max.
    let scanning = matches!(plan.access, Access::IndexScan { .. } | Access::FullScan);
    let rows_max = limits.rows_max;
    let mut rows: Vec<Vec<Value>> = Vec::new();
    // The rows held are bounded in bytes too: a statement that reads
    // them all first (a sort, INSERT ... SELECT, a subquery, a join).
    let mut bytes = 0usize;
    let bytes_max = limits.held_bytes_max;
    let mut take = |row: Vec<Value>| -> Result<bool, SqlError> {
        if scanning && rows.len() >= rows_max {
            return Err(too_many_rows(rows_max, "a query"));
        }
        bytes = bytes.saturating_add(row_bytes(&row));
        if bytes > bytes_max {
            return Err(held_too_much(bytes_max));
        }
        rows.push(row);
        Ok(rows.len() < want)
    };
    fetch_each(
        cluster,
        txn,
        table,
        plan,
        where_,
        lock,
        commit_last,
        limits,
        columns,
        &mut take,
    )
    .await?;
    Ok(rows)
}

/// Hands each row of `table` the plan reaches for which `where_` holds
/// to `on_row`, in the access's order, until it answers `false`; holds
/// none itself. Reads only `columns` (ids; `None`: every column); the
/// others are NULL in the rows handed on.
#[allow(clippy::too_many_arguments)]
pub async fn fetch_each(
    cluster: &Cluster,
    txn: &mut Transaction,
    table: &Table,
    plan: &Plan,
    where_: Option<&Scalar>,
    lock: LockMode,
    commit_last: bool,
    limits: &Limits,
    columns: Option<&[u16]>,
    on_row: &mut (dyn FnMut(Vec<Value>) -> Result<bool, SqlError> + Send),
) -> Result<(), SqlError> {
    #[rustfmt::skip]
    let mut cursor = Cursor::open(
        cluster, txn, table, plan, where_, lock, commit_last, limits, columns,
    )
    .await?;
    while let Some(row) = cursor.next().await? {
        if !on_row(row)? {
            break;
        }
    }
    Ok(())
}

/// The rows a plan reaches, one at a time as the caller asks for them
/// ([`Cursor::next`]): a batch of key reads or a scan's batch is read
/// only when the rows before it were taken, so a caller that streams
/// rows on holds one batch at most. Dropping it early closes its scan.
pub struct Cursor<'a> {
    width: usize,
    /// The column ids read (the others are NULL in each row).
    read: Vec<u16>,
    /// The WHERE to check again on each row (`None` when the access is
    /// exact).
    recheck: Option<&'a Scalar>,
    source: Source<'a>,
}

enum Source<'a> {
    Keys(KeyReads<'a>),
    Scan(Scan),
    /// Boxed: it is three times the size of the others.
    Locking(Box<LockingScan<'a>>),
}

/// Key reads (primary or unique) in batches of `batch_max`.
struct KeyReads<'a> {
    txn: &'a mut Transaction,
    record: Record,
    unique: Option<UniqueIndex>,
    keys: &'a [Vec<Value>],
    /// Keys read so far.
    done: usize,
    batch_max: usize,
    lock: LockMode,
    commit_last: bool,
    /// The last batch's rows not yet taken.
    ready: VecDeque<Vec<Value>>,
}

impl<'a> Cursor<'a> {
    /// Starts reading: a scan is opened now, key reads wait for the
    /// first [`Cursor::next`].
    #[allow(clippy::too_many_arguments)]
    pub async fn open(
        cluster: &Cluster,
        txn: &'a mut Transaction,
        table: &Table,
        plan: &'a Plan,
        where_: Option<&'a Scalar>,
        lock: LockMode,
        commit_last: bool,
        limits: &Limits,
        columns: Option<&[u16]>,
    ) -> Result<Cursor<'a>, SqlError> {
        let def = table.def();
        let width = def.columns.len();
        let (record, read) = match columns {
            Some(ids) => {
                let names: Vec<&str> = ids
                    .iter()
                    .filter_map(|&c| def.columns.get(usize::from(c)).map(|c| c.name.as_str()))
                    .collect();
                let record = table.record(&names).map_err(|e| from_shoal(&e))?;
                (record, ids.to_vec())
            }
            None => (table.full_record(), (0..width as u16).collect()),
        };
        let recheck = if plan.exact { None } else { where_ };
        let source = match &plan.access {
            Access::PrimaryKeys(keys) | Access::UniqueKeys { keys, .. } => {
                let unique = match &plan.access {
                    Access::UniqueKeys { index, .. } => Some(
                        cluster
                            .unique_index(table.name(), index)
                            .await
                            .map_err(|e| from_shoal(&e))?,
                    ),
                    _ => None,
                };
                Source::Keys(KeyReads {
                    txn,
                    record,
                    unique,
                    keys,
                    done: 0,
                    batch_max: limits.batch_ops_max.max(1),
                    lock,
                    commit_last,
                    ready: VecDeque::new(),
                })
            }
            Access::IndexScan { .. } | Access::FullScan => {
                let mut builder = txn.scan_record(&record);
                if let Access::IndexScan { index, low, high } = &plan.access {
                    builder = builder.index(index);
                    if !matches!((low, high), (Bound::Unbounded, Bound::Unbounded)) {
                        builder = builder.range(as_slice(low), as_slice(high));
                    }
                    if let Some(desc) = plan.ordered {
                        builder = builder.ordered();
                        if desc {
                            builder = builder.descending();
                        }
                    }
                }
                if let Some(f) = &plan.filter {
                    builder = builder.filter(f.clone());
                }
                if lock == LockMode::CommittedRead {
                    Source::Scan(builder.open().await.map_err(|e| from_shoal(&e))?)
                } else {
                    let scan = builder.lock(lock).open_locking(txn).await;
                    Source::Locking(Box::new(scan.map_err(|e| from_shoal(&e))?))
                }
            }
        };
        Ok(Cursor {
            width,
            read,
            recheck,
            source,
        })
    }

    /// The next row for which the WHERE holds (`None`: no more).
    pub async fn next(&mut self) -> Result<Option<Vec<Value>>, SqlError> {
        loop {
            let row = match &mut self.source {
                Source::Keys(k) => match k.next(self.width, &self.read).await? {
                    Some(v) => v,
                    None => return Ok(None),
                },
                Source::Scan(s) => match s.next_row().await.map_err(|e| from_shoal(&e))? {
                    Some(row) => values_of(row, self.width, &self.read),
                    None => return Ok(None),
                },
                Source::Locking(s) => match s.next_row().await.map_err(|e| from_shoal(&e))? {
                    Some(row) => values_of(row, self.width, &self.read),
                    None => return Ok(None),
                },
            };
            let keep = match self.recheck {
                Some(w) => truth(&w.eval(&row)?) == Some(true),
                None => true,
            };
            if keep {
                return Ok(Some(row));
            }
        }
    }
}

impl KeyReads<'_> {
    /// The next row read (found keys only), reading the next batch when
    /// the last one is used up. The last batch of a read in its own
    /// transaction commits it (one round trip for a point select).
    async fn next(&mut self, width: usize, read: &[u16]) -> Result<Option<Vec<Value>>, SqlError> {
        loop {
            if let Some(row) = self.ready.pop_front() {
                return Ok(Some(row));
            }
            if self.done >= self.keys.len() {
                return Ok(None);
            }
            let end = self
                .done
                .saturating_add(self.batch_max)
                .min(self.keys.len());
            let batch = self.keys.get(self.done..end).unwrap_or_default();
            self.done = end;
            let mut ops = Vec::with_capacity(batch.len());
            for key in batch {
                let op = match &self.unique {
                    Some(u) => self.txn.read_unique(&self.record, u, key, self.lock),
                    None => self.txn.read(&self.record, key, self.lock),
                }
                .map_err(|e| from_shoal(&e))?;
                self.txn.ignore_error(op);
                ops.push(op);
            }
            let exec = if self.commit_last && self.done == self.keys.len() {
                ExecType::Commit
            } else {
                ExecType::NoCommit
            };
            self.txn.execute(exec).await.map_err(|e| from_shoal(&e))?;
            for op in ops {
                if let Some(e) = self.txn.op_error(op) {
                    if e.code == ErrorCode::TupleNotFound {
                        continue;
                    }
                    return Err(from_shoal(e));
                }
                if let Some(row) = self.txn.row(op) {
                    self.ready.push_back(values_of(row, width, read));
                }
            }
        }
    }
}

fn as_slice(b: &Bound<Vec<Value>>) -> Bound<&[Value]> {
    match b {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}
