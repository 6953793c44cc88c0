//! `SELECT`: of expressions without a table, or of one table's rows
//! (joins, grouping, aggregates, DISTINCT and subqueries come later and
//! answer 1235). Also the row fetch UPDATE and DELETE share ([`fetch`]):
//! the plan's key reads or scan, locking or not, with the WHERE evaluated
//! again on every row.

use super::error::from_shoal;
use super::expr::{column_type, compare, Compiler, Scalar, Scope};
use super::plan::{plan, Access, Plan};
use super::split::slice;
use super::{result_too_large, too_many_rows, Env, Limits};
use crate::catalog::{self, TableName};
use crate::outcome::{Column, Outcome, SqlError};
use crate::sqltypes::{expression_column, result_column, text as to_text};
use shoal_client::{Cluster, ErrorCode, ExecType, LockMode, RowBuf, Table, Transaction, Value};
use sqlparser::ast::{
    Distinct, Expr, GroupByExpr, LimitClause, LockType, OrderByKind, OrderBySort, Query, Select,
    SelectItem, SetExpr, Spanned, TableFactor, TableWithJoins, Value as SqlValue,
};
use std::cmp::Ordering;
use std::ops::Bound;

/// The table a statement works on.
pub struct Target {
    pub name: TableName,
    pub table: Table,
    /// Names the statement may qualify its columns with.
    pub names: Vec<String>,
}

impl Target {
    pub fn scope(&self) -> Scope<'_> {
        Scope {
            def: self.table.def(),
            names: self.names.clone(),
        }
    }
}

/// Resolves a single table of a FROM (or UPDATE / DELETE) clause.
pub async fn target(
    cluster: &Cluster,
    env: &Env<'_>,
    from: &TableWithJoins,
) -> Result<Target, SqlError> {
    if !from.joins.is_empty() {
        return Err(SqlError::not_supported("joins (they come later)"));
    }
    let TableFactor::Table {
        name, alias, args, ..
    } = &from.relation
    else {
        return Err(SqlError::not_supported(
            "derived tables and table functions",
        ));
    };
    if args.is_some() {
        return Err(SqlError::not_supported("table functions"));
    }
    let resolved = catalog::resolve(name, env.database)?;
    let table = catalog::table(cluster, &resolved).await?;
    let mut names = vec![resolved.table.clone(), resolved.shown()];
    if let Some(a) = alias {
        // With an alias, MySQL knows the table by it only.
        names = vec![a.name.value.clone()];
    }
    Ok(Target {
        name: resolved,
        table,
        names,
    })
}

/// A constant expression's integer value (LIMIT, OFFSET).
fn constant_count(env: &Env<'_>, e: &Expr, what: &str) -> Result<u64, SqlError> {
    let c = Compiler {
        env,
        scope: None,
        clause: what,
    };
    match c.compile(e)?.eval(&[])? {
        Value::Int(i) if i >= 0 => Ok(i as u64),
        Value::UInt(u) => Ok(u),
        _ => Err(SqlError::syntax(format!(
            "{what} needs a non-negative integer, got {e}"
        ))),
    }
}

/// `(offset, limit)` of a LIMIT clause.
pub fn limit_of(env: &Env<'_>, l: Option<&LimitClause>) -> Result<(u64, Option<u64>), SqlError> {
    match l {
        None => Ok((0, None)),
        Some(LimitClause::LimitOffset {
            limit,
            offset,
            limit_by,
        }) => {
            if !limit_by.is_empty() {
                return Err(SqlError::not_supported("LIMIT BY"));
            }
            let limit = limit
                .as_ref()
                .map(|e| constant_count(env, e, "LIMIT"))
                .transpose()?;
            let offset = offset
                .as_ref()
                .map(|o| constant_count(env, &o.value, "OFFSET"))
                .transpose()?
                .unwrap_or(0);
            Ok((offset, limit))
        }
        Some(LimitClause::OffsetCommaLimit { offset, limit }) => Ok((
            constant_count(env, offset, "OFFSET")?,
            Some(constant_count(env, limit, "LIMIT")?),
        )),
    }
}

/// One column of the result: its name and expression.
struct Output {
    name: String,
    scalar: Scalar,
}

/// The name MySQL gives an unaliased select item: its text as written.
fn item_name(text: &str, e: &Expr) -> String {
    match e {
        Expr::Identifier(i) => i.value.clone(),
        Expr::CompoundIdentifier(parts) if !parts[0].value.starts_with('@') => {
            parts.last().map(|p| p.value.clone()).unwrap_or_default()
        }
        _ => slice(text, e.span())
            .map(str::to_string)
            .unwrap_or_else(|| e.to_string()),
    }
}

fn outputs(
    env: &Env<'_>,
    text: &str,
    projection: &[SelectItem],
    target: Option<&Target>,
) -> Result<Vec<Output>, SqlError> {
    let scope = target.map(Target::scope);
    let c = Compiler {
        env,
        scope: scope.as_ref(),
        clause: "field list",
    };
    let mut out = Vec::new();
    for item in projection {
        match item {
            SelectItem::UnnamedExpr(e) => out.push(Output {
                name: item_name(text, e),
                scalar: c.compile(e)?,
            }),
            SelectItem::ExprWithAlias { expr, alias } => out.push(Output {
                name: alias.value.clone(),
                scalar: c.compile(expr)?,
            }),
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(_, _) => {
                let Some(t) = target else {
                    return Err(SqlError::new(1096, "HY000", "No tables used"));
                };
                if let SelectItem::QualifiedWildcard(kind, _) = item {
                    let q = kind.to_string();
                    if !t.names.contains(&q) {
                        return Err(SqlError::new(1051, "42S02", format!("Unknown table '{q}'")));
                    }
                }
                for (i, col) in t.table.def().columns.iter().enumerate() {
                    out.push(Output {
                        name: col.name.clone(),
                        scalar: Scalar::Column(i as u16),
                    });
                }
            }
            other => return Err(SqlError::not_supported(format!("select item {other}"))),
        }
    }
    Ok(out)
}

/// ORDER BY items compiled: positions and aliases name select items.
fn order_keys(
    env: &Env<'_>,
    query: &Query,
    outputs: &[Output],
    target: Option<&Target>,
) -> Result<Vec<(Scalar, bool)>, SqlError> {
    let Some(order_by) = &query.order_by else {
        return Ok(Vec::new());
    };
    let OrderByKind::Expressions(items) = &order_by.kind else {
        return Err(SqlError::not_supported("ORDER BY ALL"));
    };
    let scope = target.map(Target::scope);
    let c = Compiler {
        env,
        scope: scope.as_ref(),
        clause: "order clause",
    };
    let mut keys = Vec::with_capacity(items.len());
    for item in items {
        let desc = match item.options.sort {
            None | Some(OrderBySort::Asc) => false,
            Some(OrderBySort::Desc) => true,
            _ => return Err(SqlError::not_supported(format!("ORDER BY {item}"))),
        };
        if item.with_fill.is_some() || item.options.nulls_first.is_some() {
            return Err(SqlError::not_supported(format!("ORDER BY {item}")));
        }
        let scalar = match &item.expr {
            Expr::Value(v) if matches!(v.value, SqlValue::Number(_, _)) => {
                let SqlValue::Number(n, _) = &v.value else {
                    unreachable!()
                };
                let pos: usize = n.parse().unwrap_or(0);
                outputs
                    .get(pos.wrapping_sub(1))
                    .map(|o| o.scalar.clone())
                    .ok_or_else(|| {
                        SqlError::new(
                            1054,
                            "42S22",
                            format!("Unknown column '{n}' in 'order clause'"),
                        )
                    })?
            }
            Expr::Identifier(i)
                if outputs
                    .iter()
                    .any(|o| o.name.eq_ignore_ascii_case(&i.value)) =>
            {
                let o = outputs
                    .iter()
                    .find(|o| o.name.eq_ignore_ascii_case(&i.value))
                    .expect("found");
                o.scalar.clone()
            }
            e => c.compile(e)?,
        };
        keys.push((scalar, desc));
    }
    Ok(keys)
}

/// Sorts rows by `keys` (NULLs first ascending, last descending, as
/// MySQL does); stable.
pub fn sort_rows(rows: &mut Vec<Vec<Value>>, keys: &[(Scalar, bool)]) -> Result<(), SqlError> {
    if keys.is_empty() || rows.len() < 2 {
        return Ok(());
    }
    let mut keyed: Vec<(Vec<Value>, Vec<Value>)> = Vec::with_capacity(rows.len());
    for row in rows.drain(..) {
        let k = keys
            .iter()
            .map(|(s, _)| s.eval(&row))
            .collect::<Result<Vec<_>, _>>()?;
        keyed.push((k, row));
    }
    keyed.sort_by(|(a, _), (b, _)| {
        for (i, (_, desc)) in keys.iter().enumerate() {
            let ord = match (a[i].is_null(), b[i].is_null()) {
                (true, true) => Ordering::Equal,
                (true, false) => Ordering::Less,
                (false, true) => Ordering::Greater,
                _ => compare(&a[i], &b[i]).unwrap_or(Ordering::Equal),
            };
            let ord = if *desc { ord.reverse() } else { ord };
            if ord != Ordering::Equal {
                return ord;
            }
        }
        Ordering::Equal
    });
    rows.extend(keyed.into_iter().map(|(_, r)| r));
    Ok(())
}

/// The lock a SELECT asks for.
fn lock_of(query: &Query) -> Result<LockMode, SqlError> {
    match query.locks.as_slice() {
        [] => Ok(LockMode::CommittedRead),
        [l] => {
            if l.nonblock.is_some() {
                return Err(SqlError::not_supported("NOWAIT and SKIP LOCKED"));
            }
            Ok(match l.lock_type {
                LockType::Share => LockMode::Shared,
                LockType::Update => LockMode::Exclusive,
            })
        }
        _ => Err(SqlError::not_supported("several locking clauses")),
    }
}

/// The SELECT of a query, if this slice runs it (1235 otherwise).
fn plain_select(query: &Query) -> Result<&Select, SqlError> {
    if query.with.is_some() {
        return Err(SqlError::not_supported("WITH"));
    }
    if query.fetch.is_some() || query.for_clause.is_some() || !query.pipe_operators.is_empty() {
        return Err(SqlError::not_supported(format!("{query}")));
    }
    let select = match query.body.as_ref() {
        SetExpr::Select(s) => s,
        SetExpr::Query(_) => return Err(SqlError::not_supported("parenthesized queries")),
        SetExpr::SetOperation { op, .. } => {
            return Err(SqlError::not_supported(format!(
                "{op} (set operations come later)"
            )))
        }
        _ => return Err(SqlError::not_supported(format!("{query}"))),
    };
    match &select.distinct {
        None | Some(Distinct::All) => {}
        Some(_) => return Err(SqlError::not_supported("DISTINCT (it comes with GROUP BY)")),
    }
    let grouped = match &select.group_by {
        GroupByExpr::Expressions(e, m) => !e.is_empty() || !m.is_empty(),
        GroupByExpr::All(_) => true,
    };
    if grouped || select.having.is_some() {
        return Err(SqlError::not_supported(
            "GROUP BY and HAVING (they come later)",
        ));
    }
    if select.into.is_some() {
        return Err(SqlError::not_supported("SELECT ... INTO"));
    }
    if select.top.is_some() || !select.lateral_views.is_empty() || select.qualify.is_some() {
        return Err(SqlError::not_supported(format!("{select}")));
    }
    Ok(select)
}

/// The table of a SELECT's FROM (`None`: no table, or DUAL).
async fn from_target(
    env: &Env<'_>,
    cluster: &Cluster,
    select: &Select,
) -> Result<Option<Target>, SqlError> {
    let from: Vec<&TableWithJoins> = select
        .from
        .iter()
        .filter(|f| {
            !matches!(&f.relation, TableFactor::Table { name, alias: None, .. }
                if f.joins.is_empty() && name.to_string().eq_ignore_ascii_case("dual"))
        })
        .collect();
    match from.as_slice() {
        [] => Ok(None),
        [one] => Ok(Some(target(cluster, env, one).await?)),
        _ => Err(SqlError::not_supported("joins (they come later)")),
    }
}

/// The result columns a SELECT will return, without running it (a
/// prepare's answer; parameters count as NULL).
pub async fn describe(
    env: &Env<'_>,
    cluster: &Cluster,
    query: &Query,
    text: &str,
) -> Result<Vec<Column>, SqlError> {
    let select = plain_select(query)?;
    lock_of(query)?;
    let target = from_target(env, cluster, select).await?;
    let outputs = outputs(env, text, &select.projection, target.as_ref())?;
    order_keys(env, query, &outputs, target.as_ref())?;
    Ok(outputs
        .iter()
        .map(|o| match (&o.scalar, &target) {
            (Scalar::Column(c), Some(t)) => {
                let def = t.table.def();
                let mut col = result_column(
                    &def.columns[usize::from(*c)],
                    t.names.first().map_or("", String::as_str),
                    &t.name.database,
                    def.primary_key.contains(c),
                );
                col.name = o.name.clone();
                col
            }
            (s, None) => expression_column(&o.name, s.eval(&[]).ok().as_ref()),
            (_, Some(_)) => expression_column(&o.name, None),
        })
        .collect())
}

/// Runs a SELECT in `txn`.
pub async fn select(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    query: &Query,
    text: &str,
) -> Result<Outcome, SqlError> {
    let select = plain_select(query)?;
    let lock = lock_of(query)?;
    let (offset, limit) = limit_of(env, query.limit_clause.as_ref())?;
    let target = from_target(env, cluster, select).await?;
    let outputs = outputs(env, text, &select.projection, target.as_ref())?;
    let keys = order_keys(env, query, &outputs, target.as_ref())?;
    let Some(target) = target else {
        // No table: one row of constants (unless a WHERE or LIMIT says no).
        let row: Vec<Value> = outputs
            .iter()
            .map(|o| o.scalar.eval(&[]))
            .collect::<Result<_, _>>()?;
        let mut keep = offset == 0 && limit != Some(0);
        if let Some(w) = &select.selection {
            let c = Compiler {
                env,
                scope: None,
                clause: "where clause",
            };
            keep &= super::expr::truth(&c.compile(w)?.eval(&[])?) == Some(true);
        }
        let columns = outputs
            .iter()
            .zip(&row)
            .map(|(o, v)| expression_column(&o.name, Some(v)))
            .collect();
        let rows = if keep {
            vec![row.iter().map(to_text).collect()]
        } else {
            Vec::new()
        };
        return Ok(Outcome::Rows { columns, rows });
    };
    let def = target.table.def();
    let scope = target.scope();
    let where_ = select
        .selection
        .as_ref()
        .map(|w| {
            Compiler {
                env,
                scope: Some(&scope),
                clause: "where clause",
            }
            .compile(w)
        })
        .transpose()?;
    // The ORDER BY as plain columns, for an index that serves it.
    let plain_order: Vec<(u16, bool)> = keys
        .iter()
        .map_while(|(s, d)| match s {
            Scalar::Column(c) => Some((*c, *d)),
            _ => None,
        })
        .collect();
    let plain_order = if plain_order.len() == keys.len() {
        plain_order
    } else {
        Vec::new()
    };
    let plan = plan(
        def,
        where_.as_ref(),
        &plain_order,
        env.limits.key_lookups_max,
    );
    let sorted_by_access = keys.is_empty() || (plan.ordered.is_some() && !plain_order.is_empty());
    let stop_after = match (sorted_by_access, limit) {
        (true, Some(l)) => Some(offset.saturating_add(l) as usize),
        _ => None,
    };
    let mut rows = fetch(
        cluster,
        txn,
        &target.table,
        &plan,
        where_.as_ref(),
        lock,
        stop_after,
        env.own_transaction,
        &env.limits,
    )
    .await?;
    if !sorted_by_access {
        sort_rows(&mut rows, &keys)?;
    }
    let rows: Vec<Vec<Value>> = rows
        .into_iter()
        .skip(offset as usize)
        .take(limit.map_or(usize::MAX, |l| l as usize))
        .collect();
    let mut out_rows = Vec::with_capacity(rows.len());
    let mut bytes = 0usize;
    let mut first: Option<Vec<Value>> = None;
    for row in &rows {
        let values: Vec<Value> = outputs
            .iter()
            .map(|o| o.scalar.eval(row))
            .collect::<Result<_, _>>()?;
        let texts: Vec<Option<Vec<u8>>> = values.iter().map(to_text).collect();
        bytes += texts
            .iter()
            .map(|t| t.as_ref().map_or(1, |b| b.len() + 1))
            .sum::<usize>();
        if bytes > env.limits.result_bytes_max {
            return Err(result_too_large(env.limits.result_bytes_max));
        }
        out_rows.push(texts);
        if first.is_none() {
            first = Some(values);
        }
    }
    let columns: Vec<Column> = outputs
        .iter()
        .enumerate()
        .map(|(i, o)| match &o.scalar {
            Scalar::Column(c) => {
                let mut col = result_column(
                    &def.columns[usize::from(*c)],
                    target.names.first().map_or("", String::as_str),
                    &target.name.database,
                    def.primary_key.contains(c),
                );
                col.name = o.name.clone();
                col
            }
            s => {
                let mut col = expression_column(&o.name, first.as_ref().map(|f| &f[i]));
                if first.is_none() && column_type(s, Some(def)).is_some() {
                    col.nullable = true;
                }
                col
            }
        })
        .collect();
    Ok(Outcome::Rows {
        columns,
        rows: out_rows,
    })
}

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
/// of them (in the access's order), at most `limits.rows_max`.
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
    let def = table.def();
    let width = def.columns.len();
    let all: Vec<u16> = (0..width as u16).collect();
    let want = stop_after.unwrap_or(usize::MAX);
    let mut rows: Vec<Vec<Value>> = Vec::new();
    let keep = |row: &[Value]| -> Result<bool, SqlError> {
        match where_ {
            Some(w) if !plan.exact => Ok(super::expr::truth(&w.eval(row)?) == Some(true)),
            _ => Ok(true),
        }
    };
    let record = table.full_record();
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
                    if keep(&v)? {
                        rows.push(v);
                        if rows.len() >= want {
                            return Ok(rows);
                        }
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
                    if keep(&v)? {
                        if rows.len() >= limits.rows_max {
                            return Err(too_many_rows(limits.rows_max, "a query"));
                        }
                        rows.push(v);
                        if rows.len() >= want {
                            break;
                        }
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
                    if keep(&v)? {
                        if rows.len() >= limits.rows_max {
                            return Err(too_many_rows(limits.rows_max, "a query"));
                        }
                        rows.push(v);
                        if rows.len() >= want {
                            break;
                        }
                    }
                }
            }
        }
    }
    Ok(rows)
}

fn as_slice(b: &Bound<Vec<Value>>) -> Bound<&[Value]> {
    match b {
        Bound::Included(v) => Bound::Included(v.as_slice()),
        Bound::Excluded(v) => Bound::Excluded(v.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}
