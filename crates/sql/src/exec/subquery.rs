//! Subqueries that do not name the outer query's columns: `x [NOT] IN
//! (SELECT …)`, `[NOT] EXISTS (SELECT …)` and a scalar `(SELECT …)`.
//!
//! Each is run once, before the statement around it compiles, in the
//! statement's transaction (so it sees the transaction's writes and
//! takes the locks its own FOR UPDATE / FOR SHARE asks for); its result
//! becomes constants the compiler puts in its place ([`Materialized`]):
//! a list for IN, a truth for EXISTS, one value for a scalar subquery.
//! A subquery that names a column of the outer query (correlated) fails
//! to compile on its own. One kind is run anyway, as a semi-join: an
//! `[NOT] EXISTS` over one table whose WHERE ties one of its columns to
//! one outer column by `=` (`EXISTS (SELECT … FROM b WHERE b.a_id = a.id
//! AND …)`). It runs once for the values of the inner column that meet the
//! rest of its WHERE ([`Answer::SemiJoin`]), and the compiler puts `a.id
//! IS NOT NULL AND a.id IN (those values)` in its place: the same truth for
//! every outer row, NULLs included, and a key list the planner can read
//! by. Not yet in a join's WHERE (1235). Other correlated subqueries fail
//! with 1054, saying they are not supported yet.
//!
//! Subqueries are keyed by their text: two identical ones have the same
//! result, as neither depends on the outer row. Only the statement's own
//! subqueries are run here; subqueries inside them run when they do.
//!
//! Invariants: an IN subquery holds at most [`IN_VALUES_MAX`] values
//! (1038 past it, with what to do instead); a scalar subquery gives at
//! most one row (1242) of one column (1241), as MySQL requires.

use super::join_names::conjuncts;
use super::select::select_values;
use super::Env;
use crate::catalog;
use crate::outcome::SqlError;
use shoal_client::{Cluster, Transaction, Value};
use sqlparser::ast::{
    visit_expressions, BinaryOperator, Distinct, Expr, GroupByExpr, LimitClause, Query, SelectItem,
    SetExpr, TableFactor, Value as SqlValue, Visit, Visitor,
};
use std::collections::BTreeMap;
use std::ops::ControlFlow;

/// Values an `IN (SELECT …)` may hold: each outer row is compared with
/// every one of them.
pub const IN_VALUES_MAX: usize = 65_536;

/// What a subquery gave.
#[derive(Clone, Debug)]
pub enum Answer {
    /// `IN (SELECT …)`: the first column's values.
    In(Vec<Value>),
    /// `EXISTS (SELECT …)`.
    Exists(bool),
    /// `(SELECT …)`: its one value (NULL without a row).
    Scalar(Value),
    /// A correlated `EXISTS` run as a semi-join: true for an outer row
    /// whose `outer` (an expression of the outer query) is one of
    /// `values` (the inner column's values, none NULL).
    SemiJoin {
        outer: Box<Expr>,
        values: Vec<Value>,
    },
}

/// The statement's subqueries' results, by how each is used and its
/// text (`(SELECT a FROM t)` and `EXISTS (SELECT a FROM t)` are two).
#[derive(Clone, Debug, Default)]
pub struct Materialized {
    results: BTreeMap<(Use, String), Answer>,
}

impl Materialized {
    /// The result of `query` used as `how` (as compiled where it stands).
    pub fn get(&self, how: Use, query: &Query) -> Option<&Answer> {
        self.results.get(&(how, query.to_string()))
    }

    pub fn is_empty(&self) -> bool {
        self.results.is_empty()
    }

    /// A correlated EXISTS runs as a semi-join ([`Answer::SemiJoin`]).
    pub fn has_semi_join(&self) -> bool {
        self.results
            .values()
            .any(|a| matches!(a, Answer::SemiJoin { .. }))
    }
}

/// How a subquery is used.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Use {
    In,
    Exists,
    Scalar,
}

/// Collects the subqueries of the statement itself (not those nested in
/// them): the ones met while no query other than the top one is open.
struct Collect {
    /// Queries open around the current node.
    depth: usize,
    /// The depth the statement's own expressions are at.
    top: usize,
    found: Vec<(Query, Use)>,
    /// The texts of ANY / ALL subqueries met (their operands).
    quantified: Vec<String>,
}

impl Visitor for Collect {
    type Break = ();

    fn pre_visit_query(&mut self, _query: &Query) -> ControlFlow<()> {
        self.depth += 1;
        ControlFlow::Continue(())
    }

    fn post_visit_query(&mut self, _query: &Query) -> ControlFlow<()> {
        self.depth -= 1;
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        if self.depth != self.top {
            return ControlFlow::Continue(());
        }
        match expr {
            Expr::InSubquery { subquery, .. } => self.found.push(((**subquery).clone(), Use::In)),
            Expr::Exists { subquery, .. } => self.found.push(((**subquery).clone(), Use::Exists)),
            // `x > ANY (SELECT …)` is not a scalar subquery: left for the
            // compiler to refuse (1235) rather than run as one.
            Expr::AnyOp { right, .. } | Expr::AllOp { right, .. } => {
                if let Expr::Subquery(q) = right.as_ref() {
                    self.quantified.push(q.to_string());
                }
            }
            Expr::Subquery(q) if !self.quantified.contains(&q.to_string()) => {
                self.found.push(((**q).clone(), Use::Scalar))
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}

/// Runs the subqueries of `node` (a query: `is_query`, or another
/// statement) in `txn`; `Materialized::default()` when it has none.
pub async fn materialize<V: Visit>(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    node: &V,
    is_query: bool,
) -> Result<Materialized, SqlError> {
    let mut collect = Collect {
        depth: 0,
        top: usize::from(is_query),
        found: Vec::new(),
        quantified: Vec::new(),
    };
    let _ = node.visit(&mut collect);
    if collect.found.is_empty() {
        return Ok(Materialized::default());
    }
    // Boxed: rare, and its future holds whole queries (kilobytes) that a
    // statement without subqueries should not carry.
    Box::pin(run_found(env, cluster, txn, collect.found)).await
}

/// Runs each distinct subquery `materialize` found, once.
async fn run_found(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    found: Vec<(Query, Use)>,
) -> Result<Materialized, SqlError> {
    let mut out = Materialized::default();
    for (query, how) in found {
        let key = (how, query.to_string());
        if out.results.contains_key(&key) {
            continue;
        }
        // EXISTS needs one row and a scalar subquery two (the second is
        // the error): a subquery without a LIMIT of its own reads no more.
        let mut query = query;
        let limited = query.limit_clause.is_none() && !matches!(how, Use::In);
        if limited {
            let n = if matches!(how, Use::Exists) { 1 } else { 2 };
            query.limit_clause = Some(LimitClause::LimitOffset {
                limit: Some(Expr::value(SqlValue::Number(n.to_string(), false))),
                offset: None,
                limit_by: Vec::new(),
            });
        }
        // A boxed future: a subquery's SELECT may hold subqueries too.
        let rows = match Box::pin(select_values(env, cluster, txn, &query, "")).await {
            Ok(rows) => rows,
            Err(e) if e.code == 1054 => {
                if matches!(how, Use::Exists) {
                    if limited {
                        // As written: the LIMIT 1 was ours.
                        query.limit_clause = None;
                    }
                    if let Some(semi) = semi_join(env, cluster, txn, &query).await? {
                        out.results.insert(key, semi);
                        continue;
                    }
                }
                return Err(SqlError::new(
                    1054,
                    "42S22",
                    format!(
                        "{} (a subquery that names the outer query's columns, a correlated one, is supported only as EXISTS over one table tied to the outer query by one `inner = outer` equality)",
                        e.message
                    ),
                ));
            }
            Err(e) => return Err(e),
        };
        let one_column = |rows: &[Vec<Value>]| -> Result<(), SqlError> {
            if rows.first().is_some_and(|r| r.len() != 1) {
                return Err(SqlError::new(
                    1241,
                    "21000",
                    "Operand should contain 1 column(s)",
                ));
            }
            Ok(())
        };
        let result = match how {
            Use::Exists => Answer::Exists(!rows.is_empty()),
            Use::In => {
                one_column(&rows)?;
                if rows.len() > IN_VALUES_MAX {
                    return Err(too_many_values("An IN subquery gave"));
                }
                Answer::In(rows.into_iter().filter_map(|mut r| r.pop()).collect())
            }
            Use::Scalar => {
                one_column(&rows)?;
                if rows.len() > 1 {
                    return Err(SqlError::new(
                        1242,
                        "21000",
                        "Subquery returns more than 1 row",
                    ));
                }
                Answer::Scalar(
                    rows.into_iter()
                        .next()
                        .and_then(|mut r| r.pop())
                        .unwrap_or(Value::Null),
                )
            }
        };
        out.results.insert(key, result);
    }
    Ok(out)
}

/// 1038: a subquery gave more values than a list compared with each
/// outer row may hold.
fn too_many_values(what: &str) -> SqlError {
    SqlError::new(
        1038,
        "HY001",
        format!("{what} more than {IN_VALUES_MAX} values; write it as a join"),
    )
}

/// Runs the correlated `EXISTS` subquery `query` as a semi-join if it
/// has the form the module describes; `None` if it does not (the caller
/// reports the original 1054).
async fn semi_join(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    query: &Query,
) -> Result<Option<Answer>, SqlError> {
    let Some((outer, inner_query)) = decorrelated(env, cluster, query).await? else {
        return Ok(None);
    };
    let rows = Box::pin(select_values(env, cluster, txn, &inner_query, "")).await;
    let rows = match rows {
        Ok(rows) => rows,
        // Another outer column elsewhere in its WHERE: not this form.
        Err(e) if e.code == 1054 => return Ok(None),
        Err(e) => return Err(e),
    };
    if rows.len() > IN_VALUES_MAX {
        return Err(too_many_values(
            "A correlated EXISTS matched distinct values of its inner column:",
        ));
    }
    let values = rows.into_iter().filter_map(|mut r| r.pop()).collect();
    Ok(Some(Answer::SemiJoin {
        outer: Box::new(outer),
        values,
    }))
}

/// Splits a correlated EXISTS subquery of the semi-join form into the
/// outer expression and the uncorrelated query of the inner column's
/// distinct non-NULL values meeting the rest of its WHERE.
async fn decorrelated(
    env: &Env<'_>,
    cluster: &Cluster,
    query: &Query,
) -> Result<Option<(Expr, Query)>, SqlError> {
    let SetExpr::Select(select) = query.body.as_ref() else {
        return Ok(None);
    };
    let plain = query.with.is_none()
        && query.limit_clause.is_none()
        && query.order_by.is_none()
        && query.locks.is_empty()
        && select.having.is_none()
        && matches!(&select.group_by, GroupByExpr::Expressions(e, m) if e.is_empty() && m.is_empty());
    // An aggregate makes one row of no rows (`EXISTS (SELECT COUNT(*) …)`
    // is always true): a select list with any function is not this form.
    let calls_nothing = select.projection.iter().all(|item| match item {
        SelectItem::UnnamedExpr(e) | SelectItem::ExprWithAlias { expr: e, .. } => {
            let mut calls = false;
            let _ = visit_expressions(e, |x| {
                calls |= matches!(x, Expr::Function(_));
                ControlFlow::<()>::Continue(())
            });
            !calls
        }
        _ => true,
    });
    let [from] = select.from.as_slice() else {
        return Ok(None);
    };
    let (true, true, TableFactor::Table { name, alias, .. }) = (
        plain && calls_nothing,
        from.joins.is_empty(),
        &from.relation,
    ) else {
        return Ok(None);
    };
    let Some(selection) = &select.selection else {
        return Ok(None);
    };
    let resolved = catalog::resolve(name, env.database)?;
    let table = catalog::table(cluster, &resolved).await?;
    let def = table.def();
    let inner_names: Vec<String> = match alias {
        Some(a) => vec![a.name.value.clone()],
        None => vec![resolved.table.clone()],
    };
    // A column reference: inner (of the subquery's table) or outer.
    let side = |e: &Expr| -> Option<bool> {
        let (qualifier, column) = match e {
            Expr::Identifier(i) => (None, &i.value),
            Expr::CompoundIdentifier(parts) => match parts.as_slice() {
                [q, c] => (Some(&q.value), &c.value),
                _ => return None,
            },
            _ => return None,
        };
        let has = def
            .columns
            .iter()
            .any(|c| c.name.eq_ignore_ascii_case(column));
        Some(match qualifier {
            Some(q) => inner_names.iter().any(|n| n.eq_ignore_ascii_case(q)) && has,
            // Unqualified: the inner table's if it has it, as MySQL
            // resolves names from the inside out.
            None => has,
        })
    };
    let mut tie = None;
    let mut rest = Vec::new();
    for c in conjuncts(selection) {
        if let Expr::BinaryOp {
            left,
            op: BinaryOperator::Eq,
            right,
        } = c
        {
            let pair = match (side(left), side(right)) {
                (Some(true), Some(false)) => Some((left, right)),
                (Some(false), Some(true)) => Some((right, left)),
                _ => None,
            };
            if let (Some((inner, outer)), None) = (pair, &tie) {
                tie = Some(((**inner).clone(), (**outer).clone()));
                continue;
            }
        }
        rest.push(c.clone());
    }
    let Some((inner, outer)) = tie else {
        return Ok(None);
    };
    rest.push(Expr::IsNotNull(Box::new(inner.clone())));
    let mut where_ = rest.remove(0);
    for c in rest {
        where_ = Expr::BinaryOp {
            left: Box::new(where_),
            op: BinaryOperator::And,
            right: Box::new(c),
        };
    }
    let mut inner_select = (**select).clone();
    inner_select.distinct = Some(Distinct::Distinct);
    inner_select.projection = vec![SelectItem::UnnamedExpr(inner)];
    inner_select.selection = Some(where_);
    let mut inner_query = query.clone();
    inner_query.body = Box::new(SetExpr::Select(Box::new(inner_select)));
    Ok(Some((outer, inner_query)))
}
