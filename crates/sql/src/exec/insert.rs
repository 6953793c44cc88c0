//! INSERT [IGNORE], REPLACE and INSERT ... ON DUPLICATE KEY UPDATE, with
//! rows from VALUES, SET or a SELECT.
//!
//! Every row is worked out and converted for its columns ([`coerce`],
//! MySQL's strict-mode errors) before anything is sent, so a bad value
//! fails the statement without touching the transaction. An
//! AUTO_INCREMENT column left out, DEFAULT, NULL or 0 gets its value once
//! every row is converted ([`super::auto_increment`]).
//!
//! - INSERT queues an insert per row and runs them a batch at a time; a
//!   duplicate key fails with 1062 naming the entry and the key
//!   (`PRIMARY` or the unique index). IGNORE skips such a row instead
//!   (unique-index clashes are found by reading the entries first:
//!   [`super::unique_ignore`]).
//! - REPLACE reads each row's key (exclusive lock) and then writes it:
//!   affected rows count 1 per new row and 2 per replaced one, as MySQL
//!   does; on a table with unique indexes it goes row by row, first
//!   deleting the other rows that hold the new row's unique values.
//! - ON DUPLICATE KEY UPDATE goes row by row ([`super::upsert`]).
//! - INSERT ... SELECT reads the whole SELECT first (so a table may be
//!   copied into itself) and then inserts its rows as above.

use super::auto_increment::{self, AutoColumn};
use super::dml::{affected, default_of, execute, is_default, named_column};
use super::error::from_shoal;
use super::expr::Compiler;
use super::select::{select_values, Target};
use super::upsert::OnDuplicate;
use super::{too_many_rows, Env};
use crate::catalog;
use crate::outcome::{Outcome, SqlError};
use crate::sqltypes::coerce;
use shoal_client::{Cluster, ErrorCode, ExecType, LockMode, OpId, Record, Transaction, Value};
use shoal_types::TableDef;
use sqlparser::ast::{AssignmentTarget, Expr, Insert, OnInsert, SetExpr, TableObject};

/// One value a row gives a column: DEFAULT, or a value.
enum Given {
    Default,
    Value(Value),
}

/// INSERT [IGNORE], REPLACE and INSERT ... ON DUPLICATE KEY UPDATE.
/// Returns the outcome, and the first AUTO_INCREMENT value it generated
/// for a row that went in, if any (the session's `LAST_INSERT_ID()` from
/// then on).
pub async fn insert(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    ins: &Insert,
) -> Result<(Outcome, Option<u64>), SqlError> {
    if ins.returning.is_some() || ins.partitioned.is_some() || ins.overwrite || ins.or.is_some() {
        return Err(SqlError::not_supported(format!("{ins}")));
    }
    let TableObject::TableName(name) = &ins.table else {
        return Err(SqlError::not_supported("INSERT INTO a table function"));
    };
    let resolved = catalog::resolve(name, env.database)?;
    let table = catalog::table(cluster, &resolved).await?;
    let target = Target {
        names: vec![resolved.table.clone(), resolved.shown()],
        name: resolved,
        table,
    };
    let def = target.table.def().clone();
    let (columns, rows) = given_rows(env, cluster, txn, ins, &target).await?;
    for (i, c) in columns.iter().enumerate() {
        if columns[..i].contains(c) {
            return Err(SqlError::new(
                1110,
                "42000",
                format!(
                    "Column '{}' specified twice",
                    def.columns[usize::from(*c)].name
                ),
            ));
        }
    }
    let on_duplicate = match &ins.on {
        None => None,
        Some(OnInsert::DuplicateKeyUpdate(assignments)) => {
            if ins.replace_into {
                return Err(SqlError::syntax("REPLACE takes no ON DUPLICATE KEY UPDATE"));
            }
            Some(OnDuplicate::compile(
                env,
                &target,
                &columns,
                ins.insert_alias.as_ref(),
                assignments,
            )?)
        }
        Some(other) => return Err(SqlError::not_supported(format!("{other}"))),
    };
    let auto = AutoColumn::of(env, &target.table);
    let auto_col = auto.map(|a| a.column);
    // Per row: its AUTO_INCREMENT value is to be generated.
    let mut generate: Vec<bool> = Vec::new();
    let mut full_rows: Vec<Vec<Value>> = Vec::with_capacity(rows.len());
    for (n, row) in rows.into_iter().enumerate() {
        let row_no = n + 1;
        if row.len() != columns.len() {
            return Err(SqlError::new(
                1136,
                "21S01",
                format!("Column count doesn't match value count at row {row_no}"),
            ));
        }
        let mut values: Vec<Option<Value>> = vec![None; def.columns.len()];
        for (&col, given) in columns.iter().zip(row) {
            let is_auto = auto_col == Some(col);
            let v = match given {
                Given::Default if is_auto => continue,
                Given::Default => default_of(&def, col)?,
                Given::Value(v) => v,
            };
            if is_auto && v.is_null() {
                continue;
            }
            let v = coerce(&v, &def.columns[usize::from(col)], row_no)?;
            if is_auto && auto.is_some_and(|a| a.generates(&v)) {
                continue;
            }
            values[usize::from(col)] = Some(v);
        }
        if let Some(a) = auto_col {
            generate.push(values[usize::from(a)].is_none());
        }
        let full: Vec<Value> = values
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v {
                Some(v) => Ok(v),
                // Filled in once every row is converted.
                None if auto_col == Some(i as u16) => Ok(Value::Null),
                None => {
                    default_of(&def, i as u16).and_then(|d| coerce(&d, &def.columns[i], row_no))
                }
            })
            .collect::<Result<_, _>>()?;
        if full_rows.len() >= env.limits.rows_max {
            return Err(too_many_rows(env.limits.rows_max, "an INSERT"));
        }
        full_rows.push(full);
    }
    if let Some(a) = auto {
        auto_increment::assign(cluster, &target.table, a, &mut full_rows, &generate).await?;
    }
    let written = match &on_duplicate {
        Some(od) => od.run(cluster, txn, &target, &full_rows).await?,
        None => write_rows(env, cluster, txn, ins, &target, &full_rows).await?,
    };
    let rows_total = full_rows.len() as u64;
    let info = if rows_total > 1 || ins.replace_into || on_duplicate.is_some() {
        format!(
            "Records: {rows_total}  Duplicates: {}  Warnings: {}",
            written.duplicates, written.skipped
        )
    } else {
        String::new()
    };
    let reported = match auto_col {
        Some(c) => auto_increment::reported(&full_rows, c, &generate, &written.went_in),
        None => auto_increment::Reported::default(),
    };
    let mut outcome = affected(written.affected, info);
    if let Outcome::Ok {
        warnings,
        last_insert_id,
        ..
    } = &mut outcome
    {
        *warnings = written.skipped.min(u64::from(u16::MAX)) as u16;
        // MySQL's OK packet: the first generated value, else the last
        // row's explicit one, of the rows that went in.
        *last_insert_id = reported
            .first_generated
            .or(reported.last_value)
            .unwrap_or(0);
    }
    Ok((outcome, reported.first_generated))
}

/// The columns an INSERT gives (ids), and each row's values for them.
async fn given_rows(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    ins: &Insert,
    target: &Target,
) -> Result<(Vec<u16>, Vec<Vec<Given>>), SqlError> {
    let def = target.table.def();
    let c = Compiler {
        env,
        scope: None,
        clause: "field list",
    };
    let given = |e: &Expr| -> Result<Given, SqlError> {
        if is_default(e) {
            Ok(Given::Default)
        } else {
            Ok(Given::Value(c.compile(e)?.eval(&[])?))
        }
    };
    if !ins.assignments.is_empty() {
        let mut cols = Vec::new();
        let mut values = Vec::new();
        for a in &ins.assignments {
            let AssignmentTarget::ColumnName(n) = &a.target else {
                return Err(SqlError::not_supported("tuple assignments"));
            };
            cols.push(named_column(target, n)?);
            values.push(given(&a.value)?);
        }
        return Ok((cols, vec![values]));
    }
    let cols: Vec<u16> = if ins.columns.is_empty() {
        (0..def.columns.len() as u16).collect()
    } else {
        ins.columns
            .iter()
            .map(|n| named_column(target, n))
            .collect::<Result<_, _>>()?
    };
    let Some(source) = &ins.source else {
        return Err(SqlError::syntax("INSERT needs VALUES, SET or a SELECT"));
    };
    let SetExpr::Values(values) = source.body.as_ref() else {
        // INSERT ... SELECT: the whole result first, then the writes.
        let rows = select_values(env, cluster, txn, source, "").await?;
        if rows.len() > env.limits.rows_max {
            return Err(too_many_rows(env.limits.rows_max, "an INSERT"));
        }
        let rows = rows
            .into_iter()
            .map(|r| r.into_iter().map(Given::Value).collect())
            .collect();
        return Ok((cols, rows));
    };
    if source.order_by.is_some() || source.limit_clause.is_some() {
        return Err(SqlError::syntax("VALUES takes no ORDER BY or LIMIT"));
    }
    let rows = values
        .rows
        .iter()
        .map(|r| r.content.iter().map(&given).collect())
        .collect::<Result<_, _>>()?;
    Ok((cols, rows))
}

/// What writing a statement's rows did.
#[derive(Default)]
pub struct Written {
    /// MySQL's affected rows.
    pub affected: u64,
    /// Rows that met an existing key (replaced, updated or skipped).
    pub duplicates: u64,
    /// Rows IGNORE skipped (each a warning).
    pub skipped: u64,
    /// Per row: it went in as a new row.
    pub went_in: Vec<bool>,
}

/// INSERT [IGNORE] and REPLACE of `full_rows`.
async fn write_rows(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    ins: &Insert,
    target: &Target,
    full_rows: &[Vec<Value>],
) -> Result<Written, SqlError> {
    let def = target.table.def();
    let mut written = Written {
        went_in: Vec::with_capacity(full_rows.len()),
        ..Written::default()
    };
    let mut unique_guard = if ins.ignore || ins.replace_into {
        super::unique_ignore::UniqueGuard::new(cluster, &target.table).await?
    } else {
        None
    };
    let record = target.table.full_record();
    let batch = env.limits.batch_ops_max.max(1);
    let chunks = full_rows.len().div_ceil(batch);
    for (n, chunk) in full_rows.chunks(batch).enumerate() {
        let exec = env.exec_type(n + 1 == chunks);
        let refs: Vec<&[Value]> = chunk.iter().map(Vec::as_slice).collect();
        if let (true, Some(guard)) = (ins.replace_into, unique_guard.as_ref()) {
            // A table with unique indexes: row by row, as MySQL's REPLACE
            // goes, each first deleting the other rows that hold its
            // primary key or one of its unique values.
            for (k, row) in chunk.iter().enumerate() {
                let read = read_own_row(txn, &record, def, row)?;
                let holders = guard.holders(txn, &record, row, def).await?;
                if txn.row(read).is_some() {
                    written.duplicates += 1;
                    written.affected += 1;
                }
                for holder in &holders {
                    let key: Vec<Value> = def
                        .primary_key
                        .iter()
                        .map(|&c| holder[usize::from(c)].clone())
                        .collect();
                    txn.delete(&target.table, &key)
                        .map_err(|e| from_shoal(&e))?;
                }
                written.duplicates += holders.len() as u64;
                written.affected += holders.len() as u64;
                let op = txn.write(&record, row).map_err(|e| from_shoal(&e))?;
                let exec = if k + 1 == chunk.len() {
                    exec
                } else {
                    ExecType::NoCommit
                };
                execute(txn, exec, def, &[op], &[row.as_slice()]).await?;
                written.affected += 1;
                written.went_in.push(true);
            }
        } else if ins.replace_into {
            // Which keys exist (locked until the end of the transaction).
            let mut reads = Vec::with_capacity(chunk.len());
            for row in chunk {
                reads.push(read_own_row(txn, &record, def, row)?);
            }
            execute(txn, ExecType::NoCommit, def, &[], &[]).await?;
            let replaced = reads.iter().filter(|&&op| txn.row(op).is_some()).count() as u64;
            written.duplicates += replaced;
            written.affected += replaced;
            let mut ops = Vec::with_capacity(chunk.len());
            for row in chunk {
                ops.push(txn.write(&record, row).map_err(|e| from_shoal(&e))?);
            }
            execute(txn, exec, def, &ops, &refs).await?;
            written.affected += chunk.len() as u64;
            written.went_in.extend(chunk.iter().map(|_| true));
        } else {
            // IGNORE skips a row whose unique-index values another row
            // holds (a clash there would fail the whole transaction).
            let clashes = match unique_guard.as_mut() {
                Some(guard) => guard.clashes(txn, &record, chunk).await?,
                None => vec![false; chunk.len()],
            };
            let mut ops = Vec::with_capacity(chunk.len());
            let mut kept_refs = Vec::with_capacity(chunk.len());
            for (row, &clash) in chunk.iter().zip(&clashes) {
                if clash {
                    ops.push(None);
                    continue;
                }
                let op = txn.insert(&record, row).map_err(|e| from_shoal(&e))?;
                if ins.ignore {
                    txn.ignore_error(op);
                }
                ops.push(Some(op));
                kept_refs.push(row.as_slice());
            }
            let sent: Vec<_> = ops.iter().flatten().copied().collect();
            execute(txn, exec, def, &sent, &kept_refs).await?;
            for (k, (op, row)) in ops.into_iter().zip(chunk).enumerate() {
                let ok = match op.and_then(|op| txn.op_error(op)) {
                    _ if op.is_none() => false,
                    Some(e) if e.code == ErrorCode::TupleAlreadyExists => false,
                    Some(e) => return Err(from_shoal(e)),
                    None => true,
                };
                if ok {
                    written.affected += 1;
                } else {
                    written.skipped += 1;
                    written.duplicates += 1;
                    // MySQL's warning for the skipped row: the key it met.
                    let (key, columns) = unique_guard
                        .as_ref()
                        .and_then(|g| g.clash_of(k))
                        .unwrap_or(("PRIMARY", &def.primary_key));
                    super::warnings::warning(&super::dml::duplicate_entry(columns, row, key));
                }
                written.went_in.push(ok);
            }
        }
    }
    Ok(written)
}

/// Queues a read of the row that holds `row`'s primary key (locked until
/// the transaction ends; absent is no error): whether it exists decides
/// whether a REPLACE replaces and an ON DUPLICATE KEY UPDATE updates.
pub(super) fn read_own_row(
    txn: &mut Transaction,
    record: &Record,
    def: &TableDef,
    row: &[Value],
) -> Result<OpId, SqlError> {
    let key: Vec<Value> = def
        .primary_key
        .iter()
        .map(|&c| row[usize::from(c)].clone())
        .collect();
    let op = txn
        .read(record, &key, LockMode::Exclusive)
        .map_err(|e| from_shoal(&e))?;
    txn.ignore_error(op);
    Ok(op)
}
