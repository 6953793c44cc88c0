//! A SELECT over a join ([`super::join`]): its clauses rewritten for the
//! wide row and compiled as a single table's would be, then grouped
//! ([`super::group::run_over`]) or sorted, limited and shown.

use super::aggregate::Aggregates;
use super::expr::{column_type, Scalar};
use super::group::{self, Shape};
use super::join::{Join, Kind};
use super::join_names::shown_name;
use super::select::{limit_of, lock_of, order_keys, outputs, sort_rows, Output};
use super::{Env, TextRows};
use crate::outcome::{Column, Outcome, SqlError};
use crate::sqltypes::{expression_column, result_column};
use shoal_client::{Cluster, Transaction, Value};
use sqlparser::ast::{
    Expr, GroupByExpr, OrderByKind, Query, Select, SelectItem, SelectItemQualifiedWildcardKind,
    SetExpr,
};

/// The statement with every column reference rewritten for the wide row
/// (`*` and `t.*` made their columns); select-list aliases that ORDER BY
/// and HAVING name are left for the compiler to find.
pub(super) fn rewritten(
    join: &Join,
    query: &Query,
    select: &Select,
) -> Result<(Query, Select), SqlError> {
    let mut select = select.clone();
    let aliases: Vec<String> = select
        .projection
        .iter()
        .filter_map(|i| match i {
            SelectItem::ExprWithAlias { alias, .. } => Some(alias.value.to_lowercase()),
            _ => None,
        })
        .collect();
    let is_alias =
        |e: &Expr| matches!(e, Expr::Identifier(i) if aliases.contains(&i.value.to_lowercase()));
    let mut projection = Vec::with_capacity(select.projection.len());
    for item in &select.projection {
        match item {
            SelectItem::UnnamedExpr(e) => {
                projection.push(SelectItem::UnnamedExpr(join.rewrite(e, "field list")?))
            }
            SelectItem::ExprWithAlias { expr, alias } => {
                projection.push(SelectItem::ExprWithAlias {
                    expr: join.rewrite(expr, "field list")?,
                    alias: alias.clone(),
                })
            }
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                let qualifier = match item {
                    SelectItem::QualifiedWildcard(
                        SelectItemQualifiedWildcardKind::ObjectName(n),
                        _,
                    ) => Some(n.to_string()),
                    SelectItem::QualifiedWildcard(other, _) => {
                        return Err(SqlError::not_supported(format!("select item {other}")))
                    }
                    _ => None,
                };
                for (column, _) in join.wildcard(qualifier.as_deref())? {
                    let name = join.def.columns[usize::from(column)].name.clone();
                    projection.push(SelectItem::UnnamedExpr(Expr::Identifier(
                        sqlparser::ast::Ident::new(name),
                    )));
                }
            }
            other => return Err(SqlError::not_supported(format!("select item {other}"))),
        }
    }
    select.projection = projection;
    if let Some(w) = &select.selection {
        select.selection = Some(join.rewrite(w, "where clause")?);
    }
    if let GroupByExpr::Expressions(exprs, _) = &mut select.group_by {
        for e in exprs.iter_mut() {
            *e = join.rewrite(e, "group statement")?;
        }
    }
    if let Some(h) = &select.having {
        if !is_alias(h) {
            select.having = Some(join.rewrite(h, "having clause")?);
        }
    }
    let mut query = query.clone();
    if let Some(order_by) = &mut query.order_by {
        if let OrderByKind::Expressions(items) = &mut order_by.kind {
            for item in items.iter_mut() {
                if !is_alias(&item.expr) {
                    item.expr = join.rewrite(&item.expr, "order clause")?;
                }
            }
        }
    }
    *query.body = SetExpr::Select(Box::new(select.clone()));
    Ok((query, select))
}

/// A join SELECT's clauses, compiled over the wide row.
struct Compiled {
    query: Query,
    select: Select,
    outputs: Vec<Output>,
    order: Vec<(Scalar, bool)>,
    grouping: Option<group::Grouping>,
}

fn compile(
    env: &Env<'_>,
    join: &Join,
    query: &Query,
    select: &Select,
    text: &str,
) -> Result<Compiled, SqlError> {
    let (query, select) = rewritten(join, query, select)?;
    let aggregates = Aggregates::new(join.width());
    let scope = join.scope(Some(&aggregates));
    let mut outputs = outputs(env, text, &select.projection, None, Some(&scope))?;
    for o in &mut outputs {
        o.name = shown_name(&o.name).to_string();
    }
    let order = order_keys(env, &query, &outputs, Some(&scope))?;
    let grouping = group::compile(env, &select, Some(&scope), &outputs, &order)?;
    Ok(Compiled {
        query,
        select,
        outputs,
        order,
        grouping,
    })
}

/// The result column of output `o`; `sample`: its first value, if any.
fn column_of(join: &Join, o: &Output, sample: Option<&Value>) -> Column {
    if let Scalar::Column(c) = &o.scalar {
        if let Some((t, local)) = join.source_of(*c) {
            let def = t.target.table.def();
            let mut col = result_column(
                &def.columns[usize::from(local)],
                t.target.names.first().map_or("", String::as_str),
                &t.target.name.database,
                def.primary_key.contains(&local),
            );
            col.name = o.name.clone();
            // A LEFT JOIN's table may show NULLs whatever its columns say.
            col.nullable |= t.kind == Kind::Left;
            return col;
        }
    }
    let mut col = expression_column(&o.name, sample);
    if sample.is_none() && column_type(&o.scalar, Some(&join.def)).is_some() {
        col.nullable = true;
    }
    col
}

/// The result columns of a join SELECT, without running it (a prepare).
pub async fn describe(
    env: &Env<'_>,
    cluster: &Cluster,
    query: &Query,
    select: &Select,
    text: &str,
) -> Result<Vec<Column>, SqlError> {
    lock_of(query)?;
    let join = Join::resolve(env, cluster, &select.from).await?;
    let c = compile(env, &join, query, select, text)?;
    if let Some(g) = &c.grouping {
        return Ok(group::columns(g, &c.outputs, None, None));
    }
    Ok(c.outputs
        .iter()
        .map(|o| column_of(&join, o, None))
        .collect())
}

/// Runs a join SELECT in `txn`: the result, and its rows as values.
pub async fn select(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    query: &Query,
    select: &Select,
    text: &str,
) -> Result<(Outcome, Vec<Vec<Value>>), SqlError> {
    let lock = lock_of(query)?;
    let (offset, limit) = limit_of(env, query.limit_clause.as_ref())?;
    let join = Join::resolve(env, cluster, &select.from).await?;
    let c = compile(env, &join, query, select, text)?;
    let mut rows = join
        .rows(env, cluster, txn, c.select.selection.as_ref(), lock)
        .await?;
    if let Some(g) = &c.grouping {
        let shape = Shape {
            query: &c.query,
            outputs: &c.outputs,
            order: &c.order,
            offset,
            limit,
        };
        return group::run_over(env, g, rows, shape);
    }
    sort_rows(&mut rows, &c.order)?;
    let mut out_rows = TextRows::new(&env.limits);
    let mut typed_rows = Vec::new();
    let kept = rows
        .iter()
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        .take(limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX)));
    for row in kept {
        let values: Vec<Value> = c
            .outputs
            .iter()
            .map(|o| o.scalar.eval(row))
            .collect::<Result<_, _>>()?;
        out_rows.push(&values)?;
        typed_rows.push(values);
    }
    let first = typed_rows.first();
    let columns = c
        .outputs
        .iter()
        .enumerate()
        .map(|(i, o)| column_of(&join, o, first.map(|f| &f[i])))
        .collect();
    let outcome = Outcome::Rows {
        columns,
        rows: out_rows.into_rows(),
    };
    Ok((outcome, typed_rows))
}
