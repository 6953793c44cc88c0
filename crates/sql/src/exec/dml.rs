//! UPDATE, DELETE and TRUNCATE on one table, and what every write
//! shares (running a batch and naming a duplicate, column lists,
//! defaults); INSERT and REPLACE are in [`super::insert`].
//!
//! Writes are queued in the statement's transaction and executed with
//! `NoCommit` a batch at a time; the session commits. Values are
//! converted for their columns with MySQL's strict-mode errors
//! ([`coerce`]) before anything is sent, so a bad value fails the
//! statement without touching the transaction.
//!
//! - UPDATE / DELETE with a WHERE that is exactly primary-key equalities
//!   and constant values write blind (a missing key: 0 rows); otherwise
//!   they find their rows with the plan's reads under exclusive locks
//!   (key reads or a locking scan) and then update / delete each by key
//!   in the same transaction. An UPDATE that changes the primary key
//!   deletes the row and inserts it again.
//! - TRUNCATE deletes every row by scan, a batch per transaction (it is
//!   DDL: never part of the session's transaction), then restarts the
//!   AUTO_INCREMENT counter.

use super::auto_increment;
use super::error::{duplicate, from_shoal, unique_index_in};
use super::expr::{Compiler, Scalar};
use super::plan::{plan, Access};
use super::select::{fetch, sort_rows, target, Target};
use super::subquery::materialize;
use super::Env;
use crate::catalog;
use crate::outcome::{Outcome, SqlError};
use crate::sqltypes::{coerce, text};
use shoal_client::{
    Cluster, ErrorCode, ExecType, LockMode, OpId, Record, ShoalError, Table, Transaction, Value,
};
use shoal_types::TableDef;
use sqlparser::ast::{
    Assignment, AssignmentTarget, Delete, Expr, FromTable, ObjectName, OrderByExpr, OrderBySort,
    Truncate, Update,
};

pub(super) fn affected(n: u64, info: String) -> Outcome {
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

/// 1062 for `row`, whose `columns` hold the values of key `key` that
/// another row has.
pub(super) fn duplicate_entry(columns: &[u16], row: &[Value], key: &str) -> SqlError {
    duplicate(&entry(columns, row), key)
}

/// 1062 for operation `row`'s duplicate (`e` names a unique index, or the
/// clash was on the primary key).
pub(super) fn duplicate_of(def: &TableDef, e: &ShoalError, row: &[Value]) -> SqlError {
    match unique_index_in(e).and_then(|name| def.unique_index(&name).cloned()) {
        Some(u) => duplicate(&entry(&u.columns, row), &u.name),
        None => duplicate(&entry(&def.primary_key, row), "PRIMARY"),
    }
}

/// Runs the queued operations; a failure is turned into MySQL's error,
/// naming the duplicate for a 630 (`rows[i]` is operation `ops[i]`'s row).
pub(super) async fn execute(
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

pub(super) fn column_id(def: &TableDef, name: &str, clause: &str) -> Result<u16, SqlError> {
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
pub(super) fn named_column(target: &Target, name: &ObjectName) -> Result<u16, SqlError> {
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
pub(super) fn record_of(table: &Table, columns: &[u16]) -> Result<Record, SqlError> {
    let names: Vec<&str> = columns
        .iter()
        .map(|&c| table.def().columns[usize::from(c)].name.as_str())
        .collect();
    table.record(&names).map_err(|e| from_shoal(&e))
}

pub(super) fn is_default(e: &Expr) -> bool {
    matches!(e, Expr::Identifier(i) if i.quote_style.is_none() && i.value.eq_ignore_ascii_case("DEFAULT"))
}

/// The value an insert gives a column it leaves out (or sets DEFAULT).
pub(super) fn default_of(def: &TableDef, c: u16) -> Result<Value, SqlError> {
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

/// `SET col = expr, …` (UPDATE's, and ON DUPLICATE KEY UPDATE's): each
/// column and its new value, `compile`d (DEFAULT: the column's default).
pub(super) fn compile_sets(
    target: &Target,
    assignments: &[Assignment],
    compile: impl Fn(&Expr) -> Result<Scalar, SqlError>,
) -> Result<Vec<(u16, Scalar)>, SqlError> {
    let def = target.table.def();
    let mut sets = Vec::with_capacity(assignments.len());
    for a in assignments {
        let AssignmentTarget::ColumnName(n) = &a.target else {
            return Err(SqlError::not_supported("tuple assignments"));
        };
        let col = named_column(target, n)?;
        let value = if is_default(&a.value) {
            Scalar::Const(default_of(def, col)?)
        } else {
            compile(&a.value)?
        };
        sets.push((col, value));
    }
    Ok(sets)
}

/// The columns whose values differ between two whole rows.
pub(super) fn changed_columns(old: &[Value], new: &[Value]) -> Vec<u16> {
    (0..old.len().min(new.len()) as u16)
        .filter(|&c| new[usize::from(c)] != old[usize::from(c)])
        .collect()
}

/// Queues the change of a row from `old` to `new` (`diff`: the columns
/// that differ): an update of those columns, or, when the primary key
/// changes, a delete of the old row and an insert of the new one.
pub(super) fn queue_change(
    txn: &mut Transaction,
    table: &Table,
    old: &[Value],
    new: &[Value],
    diff: &[u16],
) -> Result<OpId, SqlError> {
    let def = table.def();
    if diff.iter().any(|c| def.primary_key.contains(c)) {
        let old_key: Vec<Value> = def
            .primary_key
            .iter()
            .map(|&k| old[usize::from(k)].clone())
            .collect();
        txn.delete(table, &old_key).map_err(|e| from_shoal(&e))?;
        return txn
            .insert(&table.full_record(), new)
            .map_err(|e| from_shoal(&e));
    }
    let mut columns = def.primary_key.clone();
    columns.extend(diff.iter().copied());
    let values: Vec<Value> = columns
        .iter()
        .map(|&c| new[usize::from(c)].clone())
        .collect();
    txn.update(&record_of(table, &columns)?, &values)
        .map_err(|e| from_shoal(&e))
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
    // Its subqueries first (read before any row is written, so a
    // subquery over the table itself sees it as it was).
    let materialized = materialize(env, cluster, txn, upd, false).await?;
    let env = &Env {
        subqueries: Some(&materialized),
        ..env.clone()
    };
    let target = target(cluster, env, &upd.table).await?;
    let def = target.table.def().clone();
    let scope = target.scope();
    let c = Compiler {
        env,
        scope: Some(&scope),
        clause: "field list",
    };
    let sets = compile_sets(&target, &upd.assignments, |e| c.compile(e))?;
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
        let diff = changed_columns(&old, &new);
        if !diff.is_empty() {
            changes.push((old, new, diff));
        }
    }
    let changed = changes.len() as u64;
    let mut pending: Vec<(OpId, Vec<Value>)> = Vec::new();
    for (old, new, diff) in changes {
        let op = queue_change(txn, &target.table, &old, &new, &diff)?;
        pending.push((op, new));
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
    let materialized = materialize(env, cluster, txn, del, false).await?;
    let env = &Env {
        subqueries: Some(&materialized),
        ..env.clone()
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
    let table = catalog::fresh_table(cluster, &name).await?;
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
