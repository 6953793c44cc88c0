//! `SELECT`: of expressions without a table, or of one table's rows
//! (joins are in [`super::join_select`], UNION in [`super::union`];
//! a statement's subqueries run first, [`super::subquery`]). Its clauses compile
//! here; a SELECT that groups (GROUP BY, HAVING, DISTINCT, aggregates)
//! runs in [`super::group`], the others read their rows through
//! [`super::fetch`] (re-exported: UPDATE and DELETE share it) and sort
//! them here.

use super::aggregate::Aggregates;
use super::expr::{column_type, compare, Compiler, Scalar, Scope};
pub use super::fetch::fetch;
use super::fetch::{fetch_columns, Cursor};
use super::group::{self, Grouping};
use super::item_name::item_name;
use super::plan::plan;
use super::subquery::materialize;
use super::{Env, TextRows};
use crate::answer::ResultStream;
use crate::catalog::{self, TableName};
use crate::outcome::{Column, Outcome, SqlError};
use crate::sqltypes::{expression_column, result_column};
use shoal_client::{Cluster, LockMode, Table, Transaction, Value};
use shoal_types::{ColumnDef, ColumnType, TableDef};
use sqlparser::ast::{
    Distinct, Expr, LimitClause, LockType, OrderByKind, OrderBySort, Query, Select, SelectItem,
    SetExpr, TableFactor, TableWithJoins, Value as SqlValue,
};
use std::cmp::Ordering;
use std::sync::OnceLock;

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
            aggregates: None,
            aliases: &[],
        }
    }
}

/// The table a SELECT without one has: no columns (so that its clauses
/// compile with a scope that aggregates can be registered in).
fn no_table() -> Option<&'static TableDef> {
    static DEF: OnceLock<Option<TableDef>> = OnceLock::new();
    DEF.get_or_init(|| {
        let mut def = TableDef::new(
            "dual",
            vec![ColumnDef::new("x", ColumnType::Int { unsigned: false })],
            &["x"],
        )
        .ok()?;
        def.columns.clear();
        def.primary_key.clear();
        Some(def)
    })
    .as_ref()
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

/// One column of the result: its name and expression (over the table's
/// rows, or over group rows when the SELECT groups).
pub struct Output {
    pub name: String,
    pub scalar: Scalar,
}

pub(super) fn outputs(
    env: &Env<'_>,
    text: &str,
    projection: &[SelectItem],
    target: Option<&Target>,
    scope: Option<&Scope<'_>>,
) -> Result<Vec<Output>, SqlError> {
    let c = Compiler {
        env,
        scope,
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
pub(super) fn order_keys(
    env: &Env<'_>,
    query: &Query,
    outputs: &[Output],
    scope: Option<&Scope<'_>>,
) -> Result<Vec<(Scalar, bool)>, SqlError> {
    let Some(order_by) = &query.order_by else {
        return Ok(Vec::new());
    };
    let OrderByKind::Expressions(items) = &order_by.kind else {
        return Err(SqlError::not_supported("ORDER BY ALL"));
    };
    let c = Compiler {
        env,
        scope,
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
        let scalar = match named_output(&item.expr, outputs, "order clause")? {
            Some(o) => o.scalar.clone(),
            None => c.compile(&item.expr)?,
        };
        keys.push((scalar, desc));
    }
    Ok(keys)
}

/// The select item an ORDER BY or GROUP BY item names by position
/// (`1`: the first; 1054 out of range) or by name (an alias, or an
/// unaliased item's text).
pub fn named_output<'o>(
    e: &Expr,
    outputs: &'o [Output],
    clause: &str,
) -> Result<Option<&'o Output>, SqlError> {
    match e {
        Expr::Value(v) => match &v.value {
            SqlValue::Number(n, _) => {
                let pos: usize = n.parse().unwrap_or(0);
                match outputs.get(pos.wrapping_sub(1)) {
                    Some(o) => Ok(Some(o)),
                    None => Err(SqlError::new(
                        1054,
                        "42S22",
                        format!("Unknown column '{n}' in '{clause}'"),
                    )),
                }
            }
            _ => Ok(None),
        },
        Expr::Identifier(i) => Ok(outputs
            .iter()
            .find(|o| o.name.eq_ignore_ascii_case(&i.value))),
        _ => Ok(None),
    }
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
pub(super) fn lock_of(query: &Query) -> Result<LockMode, SqlError> {
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
pub(super) fn plain_select(query: &Query) -> Result<&Select, SqlError> {
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
        None | Some(Distinct::All) | Some(Distinct::Distinct) => {}
        Some(other) => return Err(SqlError::not_supported(format!("{other}"))),
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
pub(super) async fn from_target(
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

/// A SELECT's clauses, compiled.
pub(super) struct Compiled {
    pub outputs: Vec<Output>,
    pub order: Vec<(Scalar, bool)>,
    /// How it groups, if it does.
    pub grouping: Option<Grouping>,
}

/// Compiles a SELECT's list, ORDER BY, GROUP BY and HAVING: aggregates
/// may be called in the list, ORDER BY and HAVING (they make it group).
pub(super) fn compile(
    env: &Env<'_>,
    query: &Query,
    select: &Select,
    text: &str,
    target: Option<&Target>,
) -> Result<Compiled, SqlError> {
    let def: Option<&TableDef> = match target {
        Some(t) => Some(t.table.def()),
        None => no_table(),
    };
    let aggregates = Aggregates::new(def.map_or(0, |d| d.columns.len()));
    let scope = def.map(|def| Scope {
        def,
        names: target.map(|t| t.names.clone()).unwrap_or_default(),
        aggregates: Some(&aggregates),
        aliases: &[],
    });
    let outputs = outputs(env, text, &select.projection, target, scope.as_ref())?;
    let order = order_keys(env, query, &outputs, scope.as_ref())?;
    let grouping = group::compile(env, select, scope.as_ref(), &outputs, &order)?;
    Ok(Compiled {
        outputs,
        order,
        grouping,
    })
}

/// The WHERE, over the table's rows (no aggregates: 1111).
pub(super) fn where_clause(
    env: &Env<'_>,
    select: &Select,
    target: Option<&Target>,
) -> Result<Option<Scalar>, SqlError> {
    let scope = target.map(Target::scope);
    select
        .selection
        .as_ref()
        .map(|w| {
            Compiler {
                env,
                scope: scope.as_ref(),
                clause: "where clause",
            }
            .compile(w)
        })
        .transpose()
}

/// The result columns a SELECT will return, without running it (a
/// prepare's answer; parameters count as NULL).
pub async fn describe(
    env: &Env<'_>,
    cluster: &Cluster,
    query: &Query,
    text: &str,
) -> Result<Vec<Column>, SqlError> {
    if super::union::is_union(query) {
        return super::union::columns(env, cluster, query).await;
    }
    let select = plain_select(query)?;
    if super::join::is_join(&select.from) {
        return super::join_select::describe(env, cluster, query, select, text).await;
    }
    lock_of(query)?;
    let target = from_target(env, cluster, select).await?;
    let Compiled {
        outputs, grouping, ..
    } = compile(env, query, select, text, target.as_ref())?;
    where_clause(env, select, target.as_ref())?;
    if let Some(g) = &grouping {
        return Ok(group::columns(g, &outputs, target.as_ref(), None));
    }
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

/// What a SELECT produced: a grouping SELECT's finished result, or the
/// values of a plain one's select list per row.
enum Selected {
    /// A grouping SELECT's, a join's or a UNION's finished result, and
    /// its rows as values.
    Finished(Outcome, Vec<Vec<Value>>),
    Plain {
        outputs: Vec<Output>,
        target: Option<Target>,
        /// The select list's values, per row returned.
        rows: Vec<Vec<Value>>,
        /// Without a table: the one row's values even when WHERE or LIMIT
        /// dropped it (what its columns are described by).
        constants: Option<Vec<Value>>,
    },
    /// A plain SELECT's rows went to the stream as they were read.
    Streamed,
}

/// Runs a SELECT in `txn`. With a `stream`, a plain SELECT's result set
/// goes to it (its rows as they are read when the access gives their
/// order, else once sorted), and the answer is [`Outcome::Streamed`].
pub async fn select(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    query: &Query,
    text: &str,
    mut stream: Option<&mut ResultStream<'_>>,
) -> Result<Outcome, SqlError> {
    let selected = run(env, cluster, txn, query, text, stream.as_deref_mut()).await?;
    let (outputs, target, rows, constants) = match selected {
        Selected::Finished(outcome, _) => return Ok(outcome),
        Selected::Streamed => return Ok(Outcome::Streamed),
        Selected::Plain {
            outputs,
            target,
            rows,
            constants,
        } => (outputs, target, rows, constants),
    };
    let first = match &constants {
        Some(sample) => Some(sample.as_slice()),
        None => rows.first().map(Vec::as_slice),
    };
    let columns = plain_columns(&outputs, target.as_ref(), first);
    match stream {
        Some(stream) => {
            stream.columns(&columns);
            for values in &rows {
                stream.row(values).await?;
            }
            Ok(Outcome::Streamed)
        }
        None => {
            let mut out_rows = TextRows::new(&env.limits);
            for values in &rows {
                out_rows.push(values)?;
            }
            Ok(Outcome::Rows {
                columns,
                rows: out_rows.into_rows(),
            })
        }
    }
}

/// A plain SELECT's result columns: a table's column as declared, an
/// expression's typed by its value in the first row (`first`; without a
/// table, the row of constants even if it was not returned).
fn plain_columns(
    outputs: &[Output],
    target: Option<&Target>,
    first: Option<&[Value]>,
) -> Vec<Column> {
    let Some(target) = target else {
        return outputs
            .iter()
            .enumerate()
            .map(|(i, o)| expression_column(&o.name, first.and_then(|f| f.get(i))))
            .collect();
    };
    let def = target.table.def();
    outputs
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
                let mut col = expression_column(&o.name, first.and_then(|f| f.get(i)));
                if first.is_none() && column_type(s, Some(def)).is_some() {
                    col.nullable = true;
                }
                col
            }
        })
        .collect()
}

/// Runs a SELECT in `txn` for its values (INSERT ... SELECT, subqueries):
/// per row, the select list's values (an aggregate's exact decimal as a
/// DECIMAL value).
pub async fn select_values(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    query: &Query,
    text: &str,
) -> Result<Vec<Vec<Value>>, SqlError> {
    // The writes that follow end the transaction, never the reads.
    let env = Env {
        own_transaction: false,
        ..env.clone()
    };
    match run(&env, cluster, txn, query, text, None).await? {
        Selected::Plain { rows, .. } => Ok(rows),
        Selected::Finished(_, values) => Ok(values),
        Selected::Streamed => Err(SqlError::new(
            1105,
            "HY000",
            "Internal error: a SELECT streamed rows nobody asked for",
        )),
    }
}

/// The rare paths (UNION, subqueries, joins, grouping) run boxed (the
/// subqueries' inside `materialize`, once it found some): a
/// future is as large as its largest branch and is copied whole when
/// wrapped, and a point select should not pay for a join's. A plain
/// SELECT whose rows come in the order asked for streams them to
/// `stream` as they are read, holding none.
async fn run(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    query: &Query,
    text: &str,
    stream: Option<&mut ResultStream<'_>>,
) -> Result<Selected, SqlError> {
    if super::union::is_union(query) {
        let (outcome, values) = Box::pin(super::union::select(env, cluster, txn, query)).await?;
        return Ok(Selected::Finished(outcome, values));
    }
    let select = plain_select(query)?;
    // Its subqueries first: their results compile as constants.
    let materialized = materialize(env, cluster, txn, query, true).await?;
    let with_subqueries;
    let env = if materialized.is_empty() {
        env
    } else {
        with_subqueries = Env {
            subqueries: Some(&materialized),
            ..env.clone()
        };
        &with_subqueries
    };
    if super::join::is_join(&select.from) {
        if materialized.has_semi_join() {
            return Err(SqlError::not_supported(
                "a correlated EXISTS in the WHERE of a join",
            ));
        }
        let (outcome, values) = Box::pin(super::join_select::select(
            env, cluster, txn, query, select, text,
        ))
        .await?;
        return Ok(Selected::Finished(outcome, values));
    }
    let lock = lock_of(query)?;
    let (offset, limit) = limit_of(env, query.limit_clause.as_ref())?;
    let target = from_target(env, cluster, select).await?;
    let Compiled {
        outputs,
        order: keys,
        grouping,
    } = compile(env, query, select, text, target.as_ref())?;
    let where_ = where_clause(env, select, target.as_ref())?;
    if let Some(g) = &grouping {
        let shape = group::Shape {
            query,
            outputs: &outputs,
            order: &keys,
            offset,
            limit,
        };
        let (outcome, values) = Box::pin(group::run(
            env,
            cluster,
            txn,
            g,
            target.as_ref(),
            where_.as_ref(),
            lock,
            shape,
        ))
        .await?;
        return Ok(Selected::Finished(outcome, values));
    }
    let Some(target) = target else {
        // No table: one row of constants (unless a WHERE or LIMIT says no).
        let row: Vec<Value> = outputs
            .iter()
            .map(|o| o.scalar.eval(&[]))
            .collect::<Result<_, _>>()?;
        let mut keep = offset == 0 && limit != Some(0);
        if let Some(w) = &where_ {
            keep &= super::expr::truth(&w.eval(&[])?) == Some(true);
        }
        let rows = if keep { vec![row.clone()] } else { Vec::new() };
        return Ok(Selected::Plain {
            outputs,
            target: None,
            rows,
            constants: Some(row),
        });
    };
    let def = target.table.def();
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
    let columns = super::projection::needed_columns(query, def, &plan);
    if let (Some(stream), true) = (stream, sorted_by_access) {
        #[rustfmt::skip]
        let mut cursor = Cursor::open(
            cluster, txn, &target.table, &plan, where_.as_ref(), lock, env.own_transaction,
            &env.limits, columns.as_deref(),
        )
        .await?;
        let mut skipped = 0u64;
        let mut opened = false;
        while limit.is_none_or(|l| stream.rows() < l) {
            let Some(row) = cursor.next().await? else {
                break;
            };
            if skipped < offset {
                skipped += 1;
                continue;
            }
            let values = outputs
                .iter()
                .map(|o| o.scalar.eval(&row))
                .collect::<Result<Vec<Value>, SqlError>>()?;
            if !opened {
                stream.columns(&plain_columns(&outputs, Some(&target), Some(&values)));
                opened = true;
            }
            stream.row(&values).await?;
        }
        if !opened {
            stream.columns(&plain_columns(&outputs, Some(&target), None));
        }
        return Ok(Selected::Streamed);
    }
    let mut rows = fetch_columns(
        cluster,
        txn,
        &target.table,
        &plan,
        where_.as_ref(),
        lock,
        stop_after,
        env.own_transaction,
        &env.limits,
        columns.as_deref(),
    )
    .await?;
    if !sorted_by_access {
        sort_rows(&mut rows, &keys)?;
    }
    let rows = rows
        .into_iter()
        .skip(offset as usize)
        .take(limit.map_or(usize::MAX, |l| l as usize))
        .map(|row| {
            outputs
                .iter()
                .map(|o| o.scalar.eval(&row))
                .collect::<Result<Vec<Value>, SqlError>>()
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Selected::Plain {
        outputs,
        target: Some(target),
        rows,
        constants: None,
    })
}
