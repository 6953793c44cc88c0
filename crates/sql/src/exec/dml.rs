//! INSERT, REPLACE, UPDATE, DELETE and TRUNCATE on one table.
//!
//! Writes are queued in the statement's transaction and executed with
//! `NoCommit` a batch at a time; the session commits. Values are
//! converted for their columns with MySQL's strict-mode errors
//! ([`coerce`]) before anything is sent, so a bad value fails the
//! statement without touching the transaction.
//!
//! - INSERT queues an insert per row (IGNORE: a duplicate is skipped, not
//!   an error); a duplicate key fails with 1062 naming the entry and the
//!   key (`PRIMARY` or the unique index). An AUTO_INCREMENT column left
//!   out, DEFAULT, NULL or 0 gets its value once every row is converted
//!   ([`super::auto_increment`]).
//! - REPLACE reads each row's key (exclusive lock) and then writes it
//!   (insert or overwrite): affected rows count 1 per new row and 2 per
//!   replaced one, as MySQL does. A clash on a unique index is a 1062
//!   (MySQL would delete the clashing row; not yet).
//! - UPDATE / DELETE with a WHERE that is exactly primary-key equalities
//!   and constant values write blind (a missing key: 0 rows); otherwise
//!   they find their rows with the plan's reads under exclusive locks
//!   (key reads or a locking scan) and then update / delete each by key
//!   in the same transaction. An UPDATE that changes the primary key
//!   deletes the row and inserts it again.
//! - TRUNCATE deletes every row by scan, a batch per transaction (it is
//!   DDL: never part of the session's transaction), then restarts the
//!   AUTO_INCREMENT counter.

use super::auto_increment::{self, AutoColumn};
use super::error::{duplicate, from_shoal, unique_index_in};
use super::expr::{Compiler, Scalar};
use super::plan::{plan, Access};
use super::select::{fetch, sort_rows, target, Target};
use super::{too_many_rows, Env};
use crate::catalog;
use crate::outcome::{Outcome, SqlError};
use crate::sqltypes::{coerce, text};
use shoal_client::{
    Cluster, ErrorCode, ExecType, LockMode, OpId, Record, ShoalError, Table, Transaction, Value,
};
use shoal_types::TableDef;
use sqlparser::ast::{
    AssignmentTarget, Delete, Expr, FromTable, Insert, ObjectName, OrderByExpr, OrderBySort,
    SetExpr, TableObject, Truncate, Update,
};

fn affected(n: u64, info: String) -> Outcome {
    Outcome::Ok {
        affected_rows: n,
        last_insert_id: 0,
        warnings: 0,
        info,
    }
}

/// The entry a duplicate names: the key's values joined by `-` (MySQL
/// shows at most 64 characters of it).
fn entry(columns: &[u16], row: &[Value]) -> String {
    columns
        .iter()
        .map(|&c| {
            String::from_utf8_lossy(&text(&row[usize::from(c)]).unwrap_or_else(|| b"NULL".to_vec()))
                .into_owned()
        })
        .collect::<Vec<_>>()
        .join("-")
        .chars()
        .take(64)
        .collect()
}

/// 1062 for operation `row`'s duplicate (`e` names a unique index, or the
/// clash was on the primary key).
fn duplicate_of(def: &TableDef, e: &ShoalError, row: &[Value]) -> SqlError {
    match unique_index_in(e).and_then(|name| def.unique_index(&name).cloned()) {
        Some(u) => duplicate(&entry(&u.columns, row), &u.name),
        None => duplicate(&entry(&def.primary_key, row), "PRIMARY"),
    }
}

/// Runs the queued operations; a failure is turned into MySQL's error,
/// naming the duplicate for a 630 (`rows[i]` is operation `ops[i]`'s row).
async fn execute(
    txn: &mut Transaction,
    exec: ExecType,
    def: &TableDef,
    ops: &[OpId],
    rows: &[&[Value]],
) -> Result<(), SqlError> {
    match txn.execute(exec).await {
        Ok(()) => Ok(()),
        Err(e) if e.code == ErrorCode::TupleAlreadyExists => {
            let failed = ops.iter().position(|&op| {
                txn.op_error(op)
                    .is_some_and(|oe| oe.code == ErrorCode::TupleAlreadyExists)
            });
            match failed {
                Some(i) => Err(duplicate_of(def, &e, rows[i])),
                None => Err(from_shoal(&e)),
            }
        }
        Err(e) => Err(from_shoal(&e)),
    }
}

fn column_id(def: &TableDef, name: &str, clause: &str) -> Result<u16, SqlError> {
    def.columns
        .iter()
        .position(|c| c.name == name)
        .or_else(|| {
            def.columns
                .iter()
                .position(|c| c.name.eq_ignore_ascii_case(name))
        })
        .map(|i| i as u16)
        .ok_or_else(|| super::expr::unknown_column(name, clause))
}

/// The column an assignment or column list names (`col` or `t.col`).
fn named_column(target: &Target, name: &ObjectName) -> Result<u16, SqlError> {
    let parts: Vec<&str> = name
        .0
        .iter()
        .filter_map(|p| p.as_ident().map(|i| i.value.as_str()))
        .collect();
    let col = match parts.as_slice() {
        [c] => *c,
        [t, c] if target.names.iter().any(|n| n == t) => c,
        _ => return Err(super::expr::unknown_column(&name.to_string(), "field list")),
    };
    column_id(target.table.def(), col, "field list")
}

/// A record of `columns` (ids) of `table`.
fn record_of(table: &Table, columns: &[u16]) -> Result<Record, SqlError> {
    let names: Vec<&str> = columns
        .iter()
        .map(|&c| table.def().columns[usize::from(c)].name.as_str())
        .collect();
    table.record(&names).map_err(|e| from_shoal(&e))
}

fn is_default(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("DEFAULT"))
}

/// The value an insert gives a column it leaves out (or sets DEFAULT).
fn default_of(def: &TableDef, c: u16) -> Result<Value, SqlError> {
    let col = &def.columns[usize::from(c)];
    match (&col.default, col.nullable) {
        (Some(v), _) => Ok(v.clone()),
        (None, true) => Ok(Value::Null),
        (None, false) => Err(SqlError::new(
            1364,
            "HY000",
            format!("Field '{}' doesn't have a default value", col.name),
        )),
    }
}

/// INSERT [IGNORE] and REPLACE. Returns the outcome, and the first
/// AUTO_INCREMENT value it generated for a row that went in, if any (the
/// session's `LAST_INSERT_ID()` from then on).
pub async fn insert(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    ins: &Insert,
) -> Result<(Outcome, Option<u64>), SqlError> {
    if ins.on.is_some() {
        return Err(SqlError::not_supported(
            "INSERT ... ON DUPLICATE KEY UPDATE (it comes later)",
        ));
    }
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
    // The columns given, and each row's expressions for them.
    let (columns, rows): (Vec<u16>, Vec<Vec<&Expr>>) = if !ins.assignments.is_empty() {
        let mut cols = Vec::new();
        let mut exprs = Vec::new();
        for a in &ins.assignments {
            let AssignmentTarget::ColumnName(n) = &a.target else {
                return Err(SqlError::not_supported("tuple assignments"));
            };
            cols.push(named_column(&target, n)?);
            exprs.push(&a.value);
        }
        (cols, vec![exprs])
    } else {
        let cols = if ins.columns.is_empty() {
            (0..def.columns.len() as u16).collect()
        } else {
            ins.columns
                .iter()
                .map(|n| named_column(&target, n))
                .collect::<Result<Vec<_>, _>>()?
        };
        let Some(source) = &ins.source else {
            return Err(SqlError::syntax("INSERT needs VALUES"));
        };
        let SetExpr::Values(values) = source.body.as_ref() else {
            return Err(SqlError::not_supported(
                "INSERT ... SELECT (it comes later)",
            ));
        };
        if source.order_by.is_some() || source.limit_clause.is_some() {
            return Err(SqlError::syntax("VALUES takes no ORDER BY or LIMIT"));
        }
        let rows = values
            .rows
            .iter()
            .map(|r| r.content.iter().collect())
            .collect();
        (cols, rows)
    };
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
    // Every row converted before anything is sent.
    let c = Compiler {
        env,
        scope: None,
        clause: "field list",
    };
    let auto = AutoColumn::of(env, &target.table);
    let auto_col = auto.map(|a| a.column);
    // Per row: its AUTO_INCREMENT value is to be generated.
    let mut generate: Vec<bool> = Vec::new();
    let mut full_rows: Vec<Vec<Value>> = Vec::with_capacity(rows.len());
    for (n, row) in rows.iter().enumerate() {
        let row_no = n + 1;
        if row.len() != columns.len() {
            return Err(SqlError::new(
                1136,
                "21S01",
                format!("Column count doesn't match value count at row {row_no}"),
            ));
        }
        let mut values: Vec<Option<Value>> = vec![None; def.columns.len()];
        for (&col, e) in columns.iter().zip(row) {
            let is_auto = auto_col == Some(col);
            if is_auto && is_default(e) {
                continue;
            }
            let v = if is_default(e) {
                default_of(&def, col)?
            } else {
                c.compile(e)?.eval(&[])?
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
    // Per row: it went in (what LAST_INSERT_ID() and the OK packet count).
    let mut went_in: Vec<bool> = Vec::with_capacity(full_rows.len());
    let mut unique_guard = if ins.ignore || ins.replace_into {
        super::unique_ignore::UniqueGuard::new(cluster, &target.table).await?
    } else {
        None
    };
    let record = target.table.full_record();
    let batch = env.limits.batch_ops_max.max(1);
    let mut inserted = 0u64;
    let mut replaced = 0u64;
    let mut skipped = 0u64;
    let chunks = full_rows.len().div_ceil(batch);
    for (n, chunk) in full_rows.chunks(batch).enumerate() {
        let exec = env.exec_type(n + 1 == chunks);
        let refs: Vec<&[Value]> = chunk.iter().map(Vec::as_slice).collect();
        if let (true, Some(guard)) = (ins.replace_into, unique_guard.as_ref()) {
            // A table with unique indexes: row by row, as MySQL's REPLACE
            // goes, each first deleting the other rows that hold its
            // primary key or one of its unique values.
            for (k, row) in chunk.iter().enumerate() {
                let read = read_own_row(txn, &record, &def, row)?;
                let holders = guard.holders(txn, &record, row, &def.primary_key).await?;
                if txn.row(read).is_some() {
                    replaced += 1;
                }
                for holder in &holders {
                    txn.delete(&target.table, holder)
                        .map_err(|e| from_shoal(&e))?;
                }
                replaced += holders.len() as u64;
                let op = txn.write(&record, row).map_err(|e| from_shoal(&e))?;
                let exec = if k + 1 == chunk.len() {
                    exec
                } else {
                    ExecType::NoCommit
                };
                execute(txn, exec, &def, &[op], &[row.as_slice()]).await?;
                inserted += 1;
                went_in.push(true);
            }
        } else if ins.replace_into {
            // Which keys exist (locked until the end of the transaction).
            let mut reads = Vec::with_capacity(chunk.len());
            for row in chunk {
                reads.push(read_own_row(txn, &record, &def, row)?);
            }
            execute(txn, ExecType::NoCommit, &def, &[], &[]).await?;
            replaced += reads.iter().filter(|&&op| txn.row(op).is_some()).count() as u64;
            let mut ops = Vec::with_capacity(chunk.len());
            for row in chunk {
                ops.push(txn.write(&record, row).map_err(|e| from_shoal(&e))?);
            }
            execute(txn, exec, &def, &ops, &refs).await?;
            inserted += chunk.len() as u64;
            went_in.extend(chunk.iter().map(|_| true));
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
            execute(txn, exec, &def, &sent, &kept_refs).await?;
            for op in ops {
                let ok = match op.and_then(|op| txn.op_error(op)) {
                    _ if op.is_none() => false,
                    Some(e) if e.code == ErrorCode::TupleAlreadyExists => false,
                    Some(e) => return Err(from_shoal(e)),
                    None => true,
                };
                if ok {
                    inserted += 1;
                } else {
                    skipped += 1;
                }
                went_in.push(ok);
            }
        }
    }
    let rows_total = full_rows.len() as u64;
    let info = if rows_total > 1 || ins.replace_into {
        format!(
            "Records: {rows_total}  Duplicates: {}  Warnings: {skipped}",
            replaced + skipped
        )
    } else {
        String::new()
    };
    let reported = match auto_col {
        Some(c) => auto_increment::reported(&full_rows, c, &generate, &went_in),
        None => auto_increment::Reported::default(),
    };
    let mut outcome = affected(inserted + replaced, info);
    if let Outcome::Ok {
        warnings,
        last_insert_id,
        ..
    } = &mut outcome
    {
        *warnings = skipped.min(u64::from(u16::MAX)) as u16;
        // MySQL's OK packet: the first generated value, else the last
        // row's explicit one, of the rows that went in.
        *last_insert_id = reported
            .first_generated
            .or(reported.last_value)
            .unwrap_or(0);
    }
    Ok((outcome, reported.first_generated))
}

/// Queues a REPLACE's read of the row that holds `row`'s primary key
/// (locked until the transaction ends; absent is no error): whether it
/// exists counts it as replaced.
fn read_own_row(
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

/// ORDER BY and LIMIT of an UPDATE or DELETE.
/// ORDER BY keys (expression, descending) and a LIMIT.
type OrderLimit = (Vec<(Scalar, bool)>, Option<usize>);

fn order_and_limit(
    env: &Env<'_>,
    target: &Target,
    order_by: &[OrderByExpr],
    limit: Option<&Expr>,
) -> Result<OrderLimit, SqlError> {
    let scope = target.scope();
    let c = Compiler {
        env,
        scope: Some(&scope),
        clause: "order clause",
    };
    let mut keys = Vec::with_capacity(order_by.len());
    for o in order_by {
        let desc = match o.options.sort {
            None | Some(OrderBySort::Asc) => false,
            Some(OrderBySort::Desc) => true,
            _ => return Err(SqlError::not_supported(format!("ORDER BY {o}"))),
        };
        keys.push((c.compile(&o.expr)?, desc));
    }
    let limit = match limit {
        None => None,
        Some(e) => {
            let lc = Compiler {
                env,
                scope: None,
                clause: "LIMIT",
            };
            match lc.compile(e)?.eval(&[])? {
                Value::Int(i) if i >= 0 => Some(i as usize),
                Value::UInt(u) => Some(u as usize),
                _ => {
                    return Err(SqlError::syntax(format!(
                        "LIMIT needs a non-negative integer, got {e}"
                    )))
                }
            }
        }
    };
    Ok((keys, limit))
}

/// The rows an UPDATE or DELETE works on, locked exclusively.
async fn locked_rows(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    target: &Target,
    where_: Option<&Scalar>,
    keys: &[(Scalar, bool)],
    limit: Option<usize>,
) -> Result<Vec<Vec<Value>>, SqlError> {
    let def = target.table.def();
    let p = plan(def, where_, &[], env.limits.key_lookups_max);
    let stop_after = if keys.is_empty() { limit } else { None };
    let mut rows = fetch(
        cluster,
        txn,
        &target.table,
        &p,
        where_,
        LockMode::Exclusive,
        stop_after,
        false,
        &env.limits,
    )
    .await?;
    sort_rows(&mut rows, keys)?;
    if let Some(l) = limit {
        rows.truncate(l);
    }
    Ok(rows)
}

fn compile_where(
    env: &Env<'_>,
    target: &Target,
    selection: Option<&Expr>,
) -> Result<Option<Scalar>, SqlError> {
    let scope = target.scope();
    selection
        .map(|w| {
            Compiler {
                env,
                scope: Some(&scope),
                clause: "where clause",
            }
            .compile(w)
        })
        .transpose()
}

/// UPDATE of one table.
pub async fn update(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    upd: &Update,
) -> Result<Outcome, SqlError> {
    if upd.from.is_some() || upd.returning.is_some() || upd.or.is_some() {
        return Err(SqlError::not_supported("UPDATE ... FROM / RETURNING"));
    }
    let target = target(cluster, env, &upd.table).await?;
    let def = target.table.def().clone();
    let scope = target.scope();
    let c = Compiler {
        env,
        scope: Some(&scope),
        clause: "field list",
    };
    let mut sets: Vec<(u16, Scalar)> = Vec::with_capacity(upd.assignments.len());
    for a in &upd.assignments {
        let AssignmentTarget::ColumnName(n) = &a.target else {
            return Err(SqlError::not_supported("tuple assignments"));
        };
        let col = named_column(&target, n)?;
        let value = if is_default(&a.value) {
            Scalar::Const(default_of(&def, col)?)
        } else {
            c.compile(&a.value)?
        };
        sets.push((col, value));
    }
    let where_ = compile_where(env, &target, upd.selection.as_ref())?;
    let (keys, limit) = order_and_limit(env, &target, &upd.order_by, upd.limit.as_ref())?;
    let p = plan(&def, where_.as_ref(), &[], env.limits.key_lookups_max);
    let blind = p.exact
        && keys.is_empty()
        && limit.is_none()
        && sets
            .iter()
            .all(|(col, s)| matches!(s, Scalar::Const(_)) && !def.primary_key.contains(col));
    let batch = env.limits.batch_ops_max.max(1);
    if let (true, Access::PrimaryKeys(pks)) = (blind, &p.access) {
        let mut columns = def.primary_key.clone();
        let mut values = Vec::with_capacity(sets.len());
        for (col, s) in &sets {
            let Scalar::Const(v) = s else {
                unreachable!("constants")
            };
            let v = coerce(v, &def.columns[usize::from(*col)], 1)?;
            match columns.iter().position(|c| c == col) {
                // A column set twice keeps its last value, as MySQL does.
                Some(i) => values[i - def.primary_key.len()] = v,
                None => {
                    columns.push(*col);
                    values.push(v);
                }
            }
        }
        let record = record_of(&target.table, &columns)?;
        let mut matched = 0u64;
        let chunks = pks.len().div_ceil(batch);
        for (n, chunk) in pks.chunks(batch).enumerate() {
            let exec = env.exec_type(n + 1 == chunks);
            let mut ops = Vec::with_capacity(chunk.len());
            let mut rows = Vec::with_capacity(chunk.len());
            for key in chunk {
                let mut row: Vec<Value> = key.clone();
                row.extend(values.iter().cloned());
                let op = txn.update(&record, &row).map_err(|e| from_shoal(&e))?;
                txn.ignore_error(op);
                ops.push(op);
                // For a 1062's message: the row as the table orders it.
                let mut full = vec![Value::Null; def.columns.len()];
                for (&c, v) in columns.iter().zip(&row) {
                    full[usize::from(c)] = v.clone();
                }
                rows.push(full);
            }
            let refs: Vec<&[Value]> = rows.iter().map(Vec::as_slice).collect();
            execute(txn, exec, &def, &ops, &refs).await?;
            for &op in &ops {
                match txn.op_error(op) {
                    Some(e) if e.code == ErrorCode::TupleNotFound => {}
                    Some(e) => return Err(from_shoal(e)),
                    None => matched += 1,
                }
            }
        }
        return Ok(affected(
            matched,
            format!("Rows matched: {matched}  Changed: {matched}  Warnings: 0"),
        ));
    }
    let rows = locked_rows(env, cluster, txn, &target, where_.as_ref(), &keys, limit).await?;
    let matched = rows.len() as u64;
    // Every new row is worked out before anything is sent, so a bad value
    // fails the statement with nothing of it done.
    let mut changes: Vec<(Vec<Value>, Vec<Value>, Vec<u16>)> = Vec::new();
    for (i, old) in rows.into_iter().enumerate() {
        let mut new = old.clone();
        for (col, s) in &sets {
            let v = s.eval(&new)?;
            new[usize::from(*col)] = coerce(&v, &def.columns[usize::from(*col)], i + 1)?;
        }
        let diff: Vec<u16> = (0..def.columns.len() as u16)
            .filter(|&c| new[usize::from(c)] != old[usize::from(c)])
            .collect();
        if !diff.is_empty() {
            changes.push((old, new, diff));
        }
    }
    let changed = changes.len() as u64;
    let mut pending: Vec<(OpId, Vec<Value>)> = Vec::new();
    for (old, new, diff) in changes {
        let key_changed = diff.iter().any(|c| def.primary_key.contains(c));
        if key_changed {
            let old_key: Vec<Value> = def
                .primary_key
                .iter()
                .map(|&k| old[usize::from(k)].clone())
                .collect();
            txn.delete(&target.table, &old_key)
                .map_err(|e| from_shoal(&e))?;
            let op = txn
                .insert(&target.table.full_record(), &new)
                .map_err(|e| from_shoal(&e))?;
            pending.push((op, new));
        } else {
            let mut columns = def.primary_key.clone();
            columns.extend(diff.iter().copied());
            let record = record_of(&target.table, &columns)?;
            let values: Vec<Value> = columns
                .iter()
                .map(|&c| new[usize::from(c)].clone())
                .collect();
            let op = txn.update(&record, &values).map_err(|e| from_shoal(&e))?;
            pending.push((op, new));
        }
        if pending.len() >= batch {
            flush(txn, ExecType::NoCommit, &def, &mut pending).await?;
        }
    }
    flush(txn, env.exec_type(true), &def, &mut pending).await?;
    Ok(affected(
        changed,
        format!("Rows matched: {matched}  Changed: {changed}  Warnings: 0"),
    ))
}

async fn flush(
    txn: &mut Transaction,
    exec: ExecType,
    def: &TableDef,
    pending: &mut Vec<(OpId, Vec<Value>)>,
) -> Result<(), SqlError> {
    if pending.is_empty() {
        return Ok(());
    }
    let ops: Vec<OpId> = pending.iter().map(|(op, _)| *op).collect();
    let refs: Vec<&[Value]> = pending.iter().map(|(_, r)| r.as_slice()).collect();
    let result = execute(txn, exec, def, &ops, &refs).await;
    pending.clear();
    result
}

/// DELETE from one table.
pub async fn delete(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    del: &Delete,
) -> Result<Outcome, SqlError> {
    if !del.tables.is_empty() || del.using.is_some() || del.returning.is_some() {
        return Err(SqlError::not_supported("multi-table DELETE"));
    }
    let from = match &del.from {
        FromTable::WithFromKeyword(f) | FromTable::WithoutKeyword(f) => f,
    };
    let [one] = from.as_slice() else {
        return Err(SqlError::not_supported("multi-table DELETE"));
    };
    let target = target(cluster, env, one).await?;
    let def = target.table.def().clone();
    let where_ = compile_where(env, &target, del.selection.as_ref())?;
    let (keys, limit) = order_and_limit(env, &target, &del.order_by, del.limit.as_ref())?;
    let p = plan(&def, where_.as_ref(), &[], env.limits.key_lookups_max);
    let batch = env.limits.batch_ops_max.max(1);
    let mut deleted = 0u64;
    if let (true, Access::PrimaryKeys(pks)) =
        (p.exact && keys.is_empty() && limit.is_none(), &p.access)
    {
        let chunks = pks.len().div_ceil(batch);
        for (n, chunk) in pks.chunks(batch).enumerate() {
            let exec = env.exec_type(n + 1 == chunks);
            let mut ops = Vec::with_capacity(chunk.len());
            for key in chunk {
                let op = txn.delete(&target.table, key).map_err(|e| from_shoal(&e))?;
                txn.ignore_error(op);
                ops.push(op);
            }
            execute(txn, exec, &def, &[], &[]).await?;
            for &op in &ops {
                match txn.op_error(op) {
                    Some(e) if e.code == ErrorCode::TupleNotFound => {}
                    Some(e) => return Err(from_shoal(e)),
                    None => deleted += 1,
                }
            }
        }
        return Ok(affected(deleted, String::new()));
    }
    let rows = locked_rows(env, cluster, txn, &target, where_.as_ref(), &keys, limit).await?;
    let chunks = rows.len().div_ceil(batch);
    for (n, chunk) in rows.chunks(batch).enumerate() {
        let exec = env.exec_type(n + 1 == chunks);
        for row in chunk {
            let key: Vec<Value> = def
                .primary_key
                .iter()
                .map(|&k| row[usize::from(k)].clone())
                .collect();
            txn.delete(&target.table, &key)
                .map_err(|e| from_shoal(&e))?;
        }
        execute(txn, exec, &def, &[], &[]).await?;
        deleted += chunk.len() as u64;
    }
    Ok(affected(deleted, String::new()))
}

/// TRUNCATE [TABLE] t: deletes every row, a batch per transaction.
pub async fn truncate(env: &Env<'_>, cluster: &Cluster, t: &Truncate) -> Result<Outcome, SqlError> {
    if t.partitions.is_some() || t.table_names.len() != 1 {
        return Err(SqlError::not_supported(
            "TRUNCATE of several tables or partitions",
        ));
    }
    let name = catalog::resolve(&t.table_names[0].name, env.database)?;
    let table = catalog::table(cluster, &name).await?;
    let key_names: Vec<&str> = table
        .def()
        .primary_key
        .iter()
        .map(|&k| table.def().columns[usize::from(k)].name.as_str())
        .collect();
    let batch = env.limits.batch_ops_max.max(1);
    let scanner = cluster.transaction();
    let mut scan = scanner
        .scan(&table)
        .columns(&key_names)
        .open()
        .await
        .map_err(|e| from_shoal(&e))?;
    let mut keys: Vec<Vec<Value>> = Vec::with_capacity(batch);
    loop {
        let row = scan.next_row().await.map_err(|e| from_shoal(&e))?;
        let done = row.is_none();
        if let Some(row) = row {
            let values = row.values();
            let key: Vec<Value> = table
                .def()
                .primary_key
                .iter()
                .map(|k| {
                    values
                        .iter()
                        .find(|(c, _)| c == k)
                        .map_or(Value::Null, |(_, v)| v.clone())
                })
                .collect();
            keys.push(key);
        }
        if keys.len() >= batch || (done && !keys.is_empty()) {
            let mut tx = cluster.transaction();
            for key in keys.drain(..) {
                let op = tx.delete(&table, &key).map_err(|e| from_shoal(&e))?;
                // Deleted by someone else meanwhile: fine.
                tx.ignore_error(op);
            }
            tx.execute(ExecType::Commit)
                .await
                .map_err(|e| from_shoal(&e))?;
        }
        if done {
            break;
        }
    }
    auto_increment::reset(cluster, &table).await?;
    Ok(Outcome::ok())
}
