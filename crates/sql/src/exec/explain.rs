//! `EXPLAIN SELECT …` (and `DESCRIBE SELECT …`): how the planner reads
//! each table, in MySQL's traditional layout, one row per table in join
//! order. Nothing is read: subqueries count as not yet run (their values
//! NULL), so a plan that depends on one shows the shape, not the keys.
//!
//! `partitions` names the fragments read (`p0,p1`, NDB's partitions): a
//! key read's, or the one an index scan is pruned to when its range fixes
//! the distribution key, else every fragment.
//!
//! `type` is MySQL's: `const` for one key (primary or unique), `range`
//! for several keys or an ordered-index range, `eq_ref` for a joined
//! table read by primary key per row before it, `ALL` for a scan. `Extra`
//! says where the WHERE runs: `Using where with pushed condition` (the
//! data nodes filter, as NDB says it), `Using where` (the SQL node does);
//! and `Using join buffer (hash join)` / `(nested loops)` for joined
//! tables read once and matched in memory, `Using temporary` for
//! grouping, `Using filesort` for a sort no index serves.

use super::join::{is_join, Join, TableAccess};
use super::join_select::rewritten;
use super::plan::{plan, Access, Plan};
use super::select::{compile, from_target, plain_select, where_clause, Compiled};
use super::show::strings;
use super::Env;
use crate::outcome::{Outcome, SqlError};
use shoal_client::{Cluster, Table};
use shoal_types::distribution::distribution_key_columns;
use sqlparser::ast::{Expr, Query, Statement};
use std::collections::BTreeSet;
use std::ops::Bound;

const COLUMNS: [&str; 12] = [
    "id",
    "select_type",
    "table",
    "partitions",
    "type",
    "possible_keys",
    "key",
    "key_len",
    "ref",
    "rows",
    "filtered",
    "Extra",
];

/// One row of the answer.
struct Line {
    table: Option<String>,
    /// The table's fragments the access reads (`p0,p2`).
    partitions: Option<String>,
    kind: Option<&'static str>,
    key: Option<String>,
    reference: Option<String>,
    rows: Option<usize>,
    extra: Vec<&'static str>,
}

impl Line {
    fn cells(self) -> Vec<Option<String>> {
        let extra = (!self.extra.is_empty()).then(|| self.extra.join("; "));
        vec![
            Some("1".into()),
            Some("SIMPLE".into()),
            self.table,
            self.partitions,
            self.kind.map(str::to_string),
            self.key.clone(),
            self.key,
            None,
            self.reference,
            self.rows.map(|r| r.to_string()),
            Some("100.00".into()),
            extra,
        ]
    }
}

/// The partitions (fragments) of `table` that `p` reads, as MySQL's
/// `partitions` column lists them: each key's fragment for key reads, the
/// one fragment an index scan is pruned to when its range is an equality
/// covering the distribution key (as TC prunes it), else all of them.
/// `None` if the table's distribution is unknown or nothing is read.
fn partitions(table: &Table, p: &Plan) -> Option<String> {
    let count = table.fragment_count()?;
    let all = || (0..count).collect::<BTreeSet<u32>>();
    let read = match &p.access {
        Access::PrimaryKeys(keys) => keys
            .iter()
            .map(|k| table.fragment_of_values(k))
            .collect::<Option<BTreeSet<u32>>>(),
        Access::IndexScan {
            index,
            low: Bound::Included(low),
            high: Bound::Included(high),
        } if low == high => {
            let def = table.def();
            let n = distribution_key_columns(def);
            def.indexes
                .iter()
                .find(|i| !i.dropped && i.name == *index)
                .filter(|i| i.columns.get(..n) == def.primary_key.get(..n))
                .and_then(|_| table.fragment_of_values(low))
                .map(|f| BTreeSet::from([f]))
        }
        _ => None,
    };
    let names: Vec<String> = read
        .unwrap_or_else(all)
        .iter()
        .map(|f| format!("p{f}"))
        .collect();
    // No key at all (`WHERE id = NULL`): nothing is read, as MySQL's NULL.
    (!names.is_empty()).then(|| names.join(","))
}

/// The line of a table read by `p` (its WHERE: `filtered`, compiled).
fn access_line(table: &Table, name: String, p: &Plan, has_where: bool) -> Line {
    let (kind, key, rows) = match &p.access {
        Access::PrimaryKeys(keys) => (
            if keys.len() == 1 { "const" } else { "range" },
            Some("PRIMARY".to_string()),
            Some(keys.len()),
        ),
        Access::UniqueKeys { index, keys } => (
            if keys.len() == 1 { "const" } else { "range" },
            Some(index.clone()),
            Some(keys.len()),
        ),
        Access::IndexScan { index, .. } => ("range", Some(index.clone()), None),
        Access::FullScan => ("ALL", None, None),
    };
    let mut extra = Vec::new();
    if p.filter.is_some() {
        extra.push("Using where with pushed condition");
    } else if has_where && !p.exact {
        extra.push("Using where");
    }
    Line {
        table: Some(name),
        partitions: partitions(table, p),
        kind: Some(kind),
        reference: matches!(kind, "const").then(|| "const".to_string()),
        key,
        rows,
        extra,
    }
}

/// Answers `EXPLAIN statement`.
pub async fn explain(
    env: &Env<'_>,
    cluster: &Cluster,
    statement: &Statement,
    text: &str,
) -> Result<Outcome, SqlError> {
    let Statement::Query(query) = statement else {
        return Err(SqlError::not_supported(
            "EXPLAIN of a statement other than SELECT",
        ));
    };
    // Compiled as a prepare is: nothing runs.
    let env = &Env {
        describe_only: true,
        ..env.clone()
    };
    let select = plain_select(query)?;
    let lines = if is_join(&select.from) {
        join_lines(env, cluster, query, select).await?
    } else {
        vec![single_line(env, cluster, query, text).await?]
    };
    Ok(strings(
        &COLUMNS,
        lines.into_iter().map(Line::cells).collect(),
    ))
}

async fn single_line(
    env: &Env<'_>,
    cluster: &Cluster,
    query: &Query,
    text: &str,
) -> Result<Line, SqlError> {
    let select = plain_select(query)?;
    let Some(target) = from_target(env, cluster, select).await? else {
        return Ok(Line {
            table: None,
            partitions: None,
            kind: None,
            key: None,
            reference: None,
            rows: None,
            extra: vec!["No tables used"],
        });
    };
    let Compiled {
        order, grouping, ..
    } = compile(env, query, select, text, Some(&target))?;
    let where_ = where_clause(env, select, Some(&target))?;
    let plain_order: Vec<(u16, bool)> = order
        .iter()
        .map_while(|(s, d)| match s {
            super::expr::Scalar::Column(c) => Some((*c, *d)),
            _ => None,
        })
        .collect();
    let plain_order = if plain_order.len() == order.len() {
        plain_order
    } else {
        Vec::new()
    };
    let p = plan(
        target.table.def(),
        where_.as_ref(),
        &plain_order,
        env.limits.key_lookups_max,
    );
    let name = target.names.first().cloned().unwrap_or_default();
    let mut line = access_line(&target.table, name, &p, where_.is_some());
    if grouping.is_some() {
        line.extra.push("Using temporary");
    }
    let sorted_by_access = order.is_empty() || (p.ordered.is_some() && !plain_order.is_empty());
    if !sorted_by_access {
        line.extra.push("Using filesort");
    }
    Ok(line)
}

async fn join_lines(
    env: &Env<'_>,
    cluster: &Cluster,
    query: &Query,
    select: &sqlparser::ast::Select,
) -> Result<Vec<Line>, SqlError> {
    let join = Join::resolve(env, cluster, &select.from).await?;
    let (_, rewritten) = rewritten(&join, query, select)?;
    let conjuncts: Vec<&Expr> = rewritten
        .selection
        .as_ref()
        .map(super::join_names::conjuncts)
        .unwrap_or_default();
    let mut lines = Vec::with_capacity(join.tables.len());
    for (i, t) in join.tables.iter().enumerate() {
        let TableAccess {
            local_where,
            equal,
            by_key,
            ..
        } = join.access(env, i, &conjuncts)?;
        let name = t.target.names.first().cloned().unwrap_or_default();
        if by_key {
            // A key per row before it: any fragment.
            let all = Plan {
                access: Access::FullScan,
                filter: None,
                ordered: None,
                exact: false,
            };
            lines.push(Line {
                table: Some(name),
                partitions: partitions(&t.target.table, &all),
                kind: Some("eq_ref"),
                key: Some("PRIMARY".into()),
                reference: Some("func".into()),
                rows: Some(1),
                extra: if local_where.is_some() {
                    vec!["Using where"]
                } else {
                    Vec::new()
                },
            });
            continue;
        }
        let p = plan(
            t.target.table.def(),
            local_where.as_ref(),
            &[],
            env.limits.key_lookups_max,
        );
        let mut line = access_line(&t.target.table, name, &p, local_where.is_some());
        if i > 0 {
            line.extra.push(if equal.is_empty() {
                "Using join buffer (nested loops)"
            } else {
                "Using join buffer (hash join)"
            });
        }
        lines.push(line);
    }
    Ok(lines)
}
