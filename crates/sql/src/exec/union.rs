//! `SELECT … UNION [ALL | DISTINCT] SELECT …`, with ORDER BY and LIMIT
//! over the whole.
//!
//! Each SELECT runs on its own ([`super::select::select_values`]), in
//! the statement's transaction; the results are appended left to right,
//! and a `UNION` (DISTINCT) removes every duplicate of the rows to its
//! left, as MySQL's left-to-right evaluation does. The result's columns
//! are the first SELECT's (names and types); ORDER BY names them by
//! position or name.
//!
//! Invariants: the rows held are bounded by `Limits.rows_max` and
//! `held_bytes_max`, the text answer by `result_bytes_max`.

use super::group_key::{encode_values, row_bytes};
use super::select::{describe, limit_of, select_values, sort_rows};
use super::{too_many_rows, Env, TextRows};
use crate::outcome::{Column, Outcome, SqlError};
use shoal_client::{Cluster, Transaction, Value};
use sqlparser::ast::{
    Expr, OrderByKind, OrderBySort, Query, SetExpr, SetOperator, SetQuantifier, Value as SqlValue,
};
use std::collections::BTreeSet;

fn different_widths() -> SqlError {
    SqlError::new(
        1222,
        "21000",
        "The used SELECT statements have a different number of columns",
    )
}

/// Whether `query` is a set operation this module runs.
pub fn is_union(query: &Query) -> bool {
    matches!(query.body.as_ref(), SetExpr::SetOperation { .. })
}

/// A branch's SELECT as a query of its own.
fn branch(body: &SetExpr) -> Query {
    Query {
        with: None,
        body: Box::new(body.clone()),
        order_by: None,
        limit_clause: None,
        fetch: None,
        locks: Vec::new(),
        for_clause: None,
        settings: None,
        format_clause: None,
        pipe_operators: Vec::new(),
    }
}

/// The branches of a set expression, left to right, each with whether
/// the union that adds it removes duplicates (the first: `false`).
fn branches<'a>(body: &'a SetExpr, out: &mut Vec<(&'a SetExpr, bool)>) -> Result<(), SqlError> {
    match body {
        SetExpr::SetOperation {
            left,
            op,
            set_quantifier,
            right,
        } => {
            if *op != SetOperator::Union {
                return Err(SqlError::not_supported(format!("{op}")));
            }
            let distinct = match set_quantifier {
                SetQuantifier::All => false,
                SetQuantifier::Distinct | SetQuantifier::None => true,
                other => return Err(SqlError::not_supported(format!("UNION {other}"))),
            };
            branches(left, out)?;
            let first = out.len();
            branches(right, out)?;
            // The right side's first branch is added by this union.
            if let Some(b) = out.get_mut(first) {
                b.1 = distinct;
            }
            Ok(())
        }
        // A parenthesized SELECT is a branch; a parenthesized UNION is an
        // operand of its own (its DISTINCT must not reach rows outside
        // it), which is not supported yet rather than flattened.
        SetExpr::Query(q)
            if q.order_by.is_none()
                && q.limit_clause.is_none()
                && q.locks.is_empty()
                && q.with.is_none()
                && matches!(q.body.as_ref(), SetExpr::Select(_)) =>
        {
            branches(&q.body, out)
        }
        SetExpr::Select(_) => {
            out.push((body, false));
            Ok(())
        }
        other => Err(SqlError::not_supported(format!("{other} in a UNION"))),
    }
}

/// The result columns of a UNION: its first SELECT's. Every branch is
/// described (compiled, not run), so a branch of another width is 1222
/// even when it would give no rows.
pub async fn columns(
    env: &Env<'_>,
    cluster: &Cluster,
    query: &Query,
) -> Result<Vec<Column>, SqlError> {
    let mut list = Vec::new();
    branches(&query.body, &mut list)?;
    let Some((first, _)) = list.first() else {
        return Err(SqlError::syntax("a UNION needs a SELECT"));
    };
    // Described as a prepare is: subqueries are not run for it.
    let env = &Env {
        describe_only: true,
        ..env.clone()
    };
    let mut cols = Box::pin(describe(env, cluster, &branch(first), "")).await?;
    for (other, _) in &list[1..] {
        let width = Box::pin(describe(env, cluster, &branch(other), ""))
            .await?
            .len();
        if width != cols.len() {
            return Err(different_widths());
        }
    }
    for c in &mut cols {
        // A later SELECT may give NULL where the first never does.
        c.nullable = true;
    }
    Ok(cols)
}

/// Runs a UNION in `txn`: the result, and its rows as values.
pub async fn select(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    query: &Query,
) -> Result<(Outcome, Vec<Vec<Value>>), SqlError> {
    if query.with.is_some()
        || !query.locks.is_empty()
        || query.fetch.is_some()
        || query.for_clause.is_some()
        || !query.pipe_operators.is_empty()
    {
        return Err(SqlError::not_supported(
            "WITH, FETCH, FOR or a locking clause on a UNION",
        ));
    }
    let mut list = Vec::new();
    branches(&query.body, &mut list)?;
    let columns = columns(env, cluster, query).await?;
    let width = columns.len();
    let mut rows: Vec<Vec<Value>> = Vec::new();
    let mut held = 0usize;
    for (body, distinct) in list {
        let got = Box::pin(select_values(env, cluster, txn, &branch(body), "")).await?;
        if got.first().is_some_and(|r| r.len() != width) {
            return Err(different_widths());
        }
        if rows.len().saturating_add(got.len()) > env.limits.rows_max {
            return Err(too_many_rows(env.limits.rows_max, "a UNION"));
        }
        held = held.saturating_add(got.iter().map(|r| row_bytes(r)).sum::<usize>());
        if held > env.limits.held_bytes_max {
            return Err(super::held_too_much(env.limits.held_bytes_max));
        }
        rows.extend(got);
        if distinct {
            // Every duplicate of the rows so far goes, the first stays.
            let mut seen = BTreeSet::new();
            rows.retain(|r| seen.insert(encode_values(r)));
        }
    }
    // ORDER BY the result's columns, by position or name.
    let mut keys = Vec::new();
    if let Some(order_by) = &query.order_by {
        let OrderByKind::Expressions(items) = &order_by.kind else {
            return Err(SqlError::not_supported("ORDER BY ALL"));
        };
        for item in items {
            let desc = matches!(item.options.sort, Some(OrderBySort::Desc));
            let position = match &item.expr {
                Expr::Value(v) => match &v.value {
                    SqlValue::Number(n, _) => n
                        .parse::<usize>()
                        .ok()
                        .filter(|p| (1..=width).contains(p))
                        .map(|p| p - 1),
                    _ => None,
                },
                Expr::Identifier(i) => columns
                    .iter()
                    .position(|c| c.name.eq_ignore_ascii_case(&i.value)),
                _ => {
                    return Err(SqlError::not_supported(
                        "ORDER BY of a UNION by anything but a result column",
                    ))
                }
            };
            let Some(p) = position else {
                return Err(SqlError::new(
                    1054,
                    "42S22",
                    format!("Unknown column '{}' in 'order clause'", item.expr),
                ));
            };
            keys.push((super::expr::Scalar::Column(p as u16), desc));
        }
    }
    sort_rows(&mut rows, &keys)?;
    let (offset, limit) = limit_of(env, query.limit_clause.as_ref())?;
    let rows: Vec<Vec<Value>> = rows
        .into_iter()
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        .take(limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX)))
        .collect();
    let mut out_rows = TextRows::new(&env.limits);
    for row in &rows {
        out_rows.push(row)?;
    }
    let outcome = Outcome::Rows {
        columns,
        rows: out_rows.into_rows(),
    };
    Ok((outcome, rows))
}
