//! `INSERT IGNORE` into a table with unique indexes. A row whose
//! unique-index values another row holds must be skipped, as MySQL does;
//! but in Shoal such a clash fails the whole transaction on the data
//! nodes (TC adds the index entry as an operation of the same request),
//! so a skipped row must never be sent. As NDB's handler does for IGNORE,
//! the rows' index entries are read first: a row is skipped if one of its
//! values is already in an index, or was taken by an earlier row of the
//! same statement.
//!
//! `REPLACE` likewise reads, for each row, the rows holding its
//! unique-index values (locked), so it can delete them before it writes
//! the row, as MySQL's REPLACE does.
//!
//! A row inserted by another transaction between the read and the insert
//! still clashes (1062), as it would in NDB. Indexes still being built are
//! not read (their entries are not all there yet).

use super::error::from_shoal;
use crate::outcome::SqlError;
use shoal_client::{
    Cluster, ErrorCode, ExecType, LockMode, Record, Table, Transaction, UniqueIndex, Value,
};
use shoal_types::TableDef;
use std::collections::HashSet;

/// The unique indexes of one INSERT IGNORE's table, and the values the
/// statement's rows took so far.
pub struct UniqueGuard {
    indexes: Vec<(UniqueIndex, Vec<u16>)>,
    /// Each index's name, as `indexes` orders them.
    names: Vec<String>,
    /// Per row of the last [`UniqueGuard::clashes`]: the index it
    /// clashed on (a skipped row's warning names it).
    clashed: Vec<Option<usize>>,
    /// `index number: values` of the rows kept so far (the statement's
    /// rows are bounded by the packet size, and so is this).
    taken: HashSet<String>,
}

impl UniqueGuard {
    /// `None` when `table` has no unique index to check.
    pub async fn new(cluster: &Cluster, table: &Table) -> Result<Option<UniqueGuard>, SqlError> {
        let def = table.def();
        let mut indexes = Vec::new();
        let mut names = Vec::new();
        for u in def.unique_indexes.iter().filter(|u| !u.building) {
            names.push(u.name.clone());
            let index = cluster
                .unique_index(table.name(), &u.name)
                .await
                .map_err(|e| from_shoal(&e))?;
            indexes.push((index, u.columns.clone()));
        }
        Ok((!indexes.is_empty()).then_some(UniqueGuard {
            indexes,
            names,
            clashed: Vec::new(),
            taken: HashSet::new(),
        }))
    }

    /// For each of `rows` (whole rows by column id): whether it clashes
    /// and must be skipped. Reads the index entries in `txn`.
    pub async fn clashes(
        &mut self,
        txn: &mut Transaction,
        record: &Record,
        rows: &[Vec<Value>],
    ) -> Result<Vec<bool>, SqlError> {
        let mut clash = vec![false; rows.len()];
        self.clashed = vec![None; rows.len()];
        let mut keys: Vec<Vec<String>> = Vec::with_capacity(rows.len());
        let mut reads = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let mut row_keys = Vec::new();
            for (n, (index, columns)) in self.indexes.iter().enumerate() {
                let Some(key) = index_key(row, columns) else {
                    continue;
                };
                let op = txn
                    .read_unique(record, index, &key, LockMode::Shared)
                    .map_err(|e| from_shoal(&e))?;
                txn.ignore_error(op);
                reads.push((i, n, op));
                row_keys.push(format!("{n}:{key:?}"));
            }
            keys.push(row_keys);
        }
        if reads.is_empty() {
            return Ok(clash);
        }
        txn.execute(ExecType::NoCommit)
            .await
            .map_err(|e| from_shoal(&e))?;
        for (i, n, op) in reads {
            if txn.row(op).is_some() {
                if !clash[i] {
                    self.clashed[i] = Some(n);
                }
                clash[i] = true;
            } else if let Some(e) = txn.op_error(op) {
                if e.code != ErrorCode::TupleNotFound {
                    return Err(from_shoal(e));
                }
            }
        }
        for (i, row_keys) in keys.into_iter().enumerate() {
            if clash[i] {
                continue;
            }
            if let Some(k) = row_keys.iter().find(|k| self.taken.contains(*k)) {
                clash[i] = true;
                self.clashed[i] = k.split_once(':').and_then(|(n, _)| n.parse::<usize>().ok());
                continue;
            }
            self.taken.extend(row_keys);
        }
        Ok(clash)
    }

    /// The unique index (name, columns) row `i` of the last
    /// [`UniqueGuard::clashes`] clashed on, if it did.
    pub fn clash_of(&self, i: usize) -> Option<(&str, &[u16])> {
        let n = (*self.clashed.get(i)?)?;
        Some((
            self.names.get(n)?.as_str(),
            self.indexes.get(n)?.1.as_slice(),
        ))
    }

    /// The rows other than `row` itself (by primary key) that hold one of
    /// `row`'s unique-index values, whole (values by column id) and read
    /// with an exclusive lock in `txn`, in the order of the table's unique
    /// indexes: the rows a REPLACE of `row` deletes, and the row an
    /// ON DUPLICATE KEY UPDATE updates. `record` is the table's full
    /// record. Executes `txn`'s pending operations (NoCommit) with the
    /// reads.
    pub async fn holders(
        &self,
        txn: &mut Transaction,
        record: &Record,
        row: &[Value],
        def: &TableDef,
    ) -> Result<Vec<Vec<Value>>, SqlError> {
        let mut reads = Vec::new();
        for (index, columns) in &self.indexes {
            let Some(key) = index_key(row, columns) else {
                continue;
            };
            let op = txn
                .read_unique(record, index, &key, LockMode::Exclusive)
                .map_err(|e| from_shoal(&e))?;
            txn.ignore_error(op);
            reads.push(op);
        }
        // One round trip, with whatever the caller queued before (the
        // statement's read of the row's own key).
        txn.execute(ExecType::NoCommit)
            .await
            .map_err(|e| from_shoal(&e))?;
        let pk = &def.primary_key;
        let own: Vec<&Value> = pk.iter().filter_map(|&c| row.get(usize::from(c))).collect();
        let mut holders: Vec<Vec<Value>> = Vec::new();
        for op in reads {
            let Some(found) = txn.row(op) else {
                if let Some(e) = txn.op_error(op) {
                    if e.code != ErrorCode::TupleNotFound {
                        return Err(from_shoal(e));
                    }
                }
                continue;
            };
            let whole: Vec<Value> = (0..def.columns.len() as u16)
                .map(|c| found.get_idx(c).unwrap_or(Value::Null))
                .collect();
            let key: Vec<&Value> = pk.iter().map(|&c| &whole[usize::from(c)]).collect();
            let same_key = |h: &Vec<Value>| {
                pk.iter()
                    .all(|&c| h[usize::from(c)] == whole[usize::from(c)])
            };
            if key != own && !holders.iter().any(same_key) {
                holders.push(whole);
            }
        }
        Ok(holders)
    }
}

/// `row`'s values of an index's `columns`; `None` when one is NULL (such
/// a row has no entry in the index, so it clashes with none: SQL's rule).
fn index_key(row: &[Value], columns: &[u16]) -> Option<Vec<Value>> {
    columns
        .iter()
        .map(|&c| {
            row.get(usize::from(c))
                .filter(|v| !matches!(v, Value::Null))
                .cloned()
        })
        .collect()
}
