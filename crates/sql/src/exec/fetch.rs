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
use shoal_client::{Cluster, ErrorCode, ExecType, LockMode, RowBuf, Table, Transaction, Value};
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
    let def = table.def();
    let width = def.columns.len();
    let (record, all) = match columns {
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
    let keep = |row: &[Value]| -> Result<bool, SqlError> {
        match where_ {
            Some(w) if !plan.exact => Ok(truth(&w.eval(row)?) == Some(true)),
            _ => Ok(true),
        }
    };
    match &plan.access {
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
            let batch_max = limits.batch_ops_max.max(1);
            let batches = keys.len().div_ceil(batch_max);
            for (n, batch) in keys.chunks(batch_max).enumerate() {
                let mut ops = Vec::with_capacity(batch.len());
                for key in batch {
                    let op = match &unique {
                        Some(u) => txn.read_unique(&record, u, key, lock),
                        None => txn.read(&record, key, lock),
                    }
                    .map_err(|e| from_shoal(&e))?;
                    txn.ignore_error(op);
                    ops.push(op);
                }
                // The last batch of a read in its own transaction commits
                // it (one round trip for a point select).
                let exec = if commit_last && n + 1 == batches {
                    ExecType::Commit
                } else {
                    ExecType::NoCommit
                };
                txn.execute(exec).await.map_err(|e| from_shoal(&e))?;
                for op in ops {
                    if let Some(e) = txn.op_error(op) {
                        if e.code == ErrorCode::TupleNotFound {
                            continue;
                        }
                        return Err(from_shoal(e));
                    }
                    let Some(row) = txn.row(op) else { continue };
                    let v = values_of(row, width, &all);
                    if keep(&v)? && !on_row(v)? {
                        return Ok(());
                    }
                }
            }
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
                let mut scan = builder.open().await.map_err(|e| from_shoal(&e))?;
                while let Some(row) = scan.next_row().await.map_err(|e| from_shoal(&e))? {
                    let v = values_of(row, width, &all);
                    if keep(&v)? && !on_row(v)? {
                        break;
                    }
                }
            } else {
                let mut scan = builder
                    .lock(lock)
                    .open_locking(txn)
                    .await
                    .map_err(|e| from_shoal(&e))?;
                while let Some(row) = scan.next_row().await.map_err(|e| from_shoal(&e))? {
                    let v = values_of(row, width, &all);
                    if keep(&v)? && !on_row(v)? {
                        break;
                    }
                }
            }
        }
    }
    Ok(())
}

fn as_slice(b: &Bound<Vec<Value>>) -> Bound<&[Value]> {
    match b {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}
