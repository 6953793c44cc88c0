//! SELECT over several tables: `FROM a, b`, `[INNER | CROSS] JOIN`,
//! `LEFT [OUTER] JOIN`, with `ON` or `USING`, nested loops from left to
//! right.
//!
//! The tables' rows are joined into one wide row (each table's columns
//! after the ones before it), and every expression of the statement is
//! compiled over that row: before compiling, each column reference is
//! rewritten into the wide row's name for it ([`hidden_name`], which no
//! SQL name can spell; [`super::join_names`]), so the single-table
//! compiler serves unchanged; an unqualified name two tables have is
//! 1052, as in MySQL.
//!
//! How each table is read (the first one by its own WHERE conditions,
//! through the single-table planner):
//! - by primary key when the conditions give every key column a value
//!   from the tables before it (`b.id = a.b_id`): the outer rows' keys
//!   are read in batches, each key once;
//! - otherwise once, filtered by the conditions on it alone (pushed to
//!   the data nodes), then matched in memory: through a hash of the
//!   columns the conditions equate with the earlier tables' values, or
//!   against every row when there are none.
//!
//! The conditions used for access are checked again on the wide row, so
//! the access is only ever a narrowing. Every intermediate result is
//! bounded by `Limits.rows_max` and `held_bytes_max` (1038 past either).

use super::expr::{truth, Compiler, Scalar, Scope};
use super::group_key::{encode_values, row_bytes};
use super::join_names::{
    and_all, conjuncts, equality_on, hidden_name, localize, rewrite, shown_name, tables_of, using,
};
use super::plan::{plan, Access, Plan};
use super::select::{target, Target};
use super::{too_many_rows, Env};
use crate::outcome::SqlError;
use crate::sqltypes::coerce;
use shoal_client::{Cluster, LockMode, Transaction, Value};
use shoal_types::TableDef;
use sqlparser::ast::{Expr, JoinConstraint, JoinOperator, TableWithJoins};
use std::collections::BTreeMap;

/// How a table joins the ones before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The first table, a comma or `[INNER | CROSS] JOIN`.
    Inner,
    /// `LEFT [OUTER] JOIN`: a row of the tables before with no match is
    /// kept, this table's columns NULL.
    Left,
}

/// One table of a join.
pub struct Joined {
    pub target: Target,
    pub kind: Kind,
    /// Its first column's place in the wide row.
    pub offset: usize,
    /// `ON` (rewritten; `USING` made into equalities), if any.
    on: Option<Expr>,
    /// Its own columns a `USING` merged into an earlier table's: an
    /// unqualified name and `*` mean the earlier one, as in MySQL.
    pub(super) merged: Vec<u16>,
}

/// The tables of a FROM with joins, and their wide row.
pub struct Join {
    pub tables: Vec<Joined>,
    /// The wide row's columns ([`hidden_name`]s); no keys.
    pub def: TableDef,
    /// The wide-row columns `USING` made common, in order: `*` lists
    /// them first, as MySQL does.
    coalesced: Vec<u16>,
}

/// How one table of a join is read and matched ([`Join::access`]).
pub struct TableAccess {
    /// Its ON, over the wide row.
    pub on: Option<Scalar>,
    /// The conditions on it alone, over its own columns: pushed to its
    /// reads.
    pub local_where: Option<Scalar>,
    /// Its columns the conditions equate with values of the tables
    /// before it (over the wide row).
    pub equal: BTreeMap<u16, Scalar>,
    /// Read by primary key, once per distinct key of the rows before.
    pub by_key: bool,
}

/// Whether a SELECT's FROM needs this module: several tables or a join.
pub fn is_join(from: &[TableWithJoins]) -> bool {
    let real: Vec<&TableWithJoins> = from
        .iter()
        .filter(|f| {
            !(f.joins.is_empty()
                && matches!(&f.relation, sqlparser::ast::TableFactor::Table { name, alias: None, .. }
                    if name.to_string().eq_ignore_ascii_case("dual")))
        })
        .collect();
    real.len() > 1 || real.iter().any(|f| !f.joins.is_empty())
}

impl Join {
    /// Resolves every table of `from` and checks the join operators.
    pub async fn resolve(
        env: &Env<'_>,
        cluster: &Cluster,
        from: &[TableWithJoins],
    ) -> Result<Join, SqlError> {
        // Each table with how it joins and its constraint, in order.
        let mut pieces: Vec<(Target, Kind, JoinConstraint)> = Vec::new();
        for f in from {
            let single = TableWithJoins {
                relation: f.relation.clone(),
                joins: Vec::new(),
            };
            pieces.push((
                target(cluster, env, &single).await?,
                Kind::Inner,
                JoinConstraint::None,
            ));
            for j in &f.joins {
                let (kind, constraint) = match &j.join_operator {
                    JoinOperator::Join(c) | JoinOperator::Inner(c) | JoinOperator::CrossJoin(c) => {
                        (Kind::Inner, c.clone())
                    }
                    JoinOperator::StraightJoin(c) => (Kind::Inner, c.clone()),
                    JoinOperator::Left(c) | JoinOperator::LeftOuter(c) => (Kind::Left, c.clone()),
                    JoinOperator::Right(_) | JoinOperator::RightOuter(_) => {
                        return Err(SqlError::not_supported(
                            "RIGHT JOIN (write it as a LEFT JOIN with the tables swapped)",
                        ))
                    }
                    other => {
                        return Err(SqlError::not_supported(format!("join {other:?}")));
                    }
                };
                let single = TableWithJoins {
                    relation: j.relation.clone(),
                    joins: Vec::new(),
                };
                pieces.push((target(cluster, env, &single).await?, kind, constraint));
            }
        }
        if pieces.len() > env.limits.join_tables_max {
            return Err(SqlError::new(
                1116,
                "HY000",
                format!(
                    "Too many tables; the SQL node can only join {} tables",
                    env.limits.join_tables_max
                ),
            ));
        }
        // The wide row.
        let mut def = pieces[0].0.table.def().clone();
        def.columns.clear();
        def.primary_key.clear();
        def.unique_indexes.clear();
        let mut tables: Vec<Joined> = Vec::with_capacity(pieces.len());
        for (i, (t, _, _)) in pieces.iter().enumerate() {
            for other in &pieces[..i] {
                if other.0.names.iter().any(|a| t.names.first() == Some(a)) {
                    return Err(SqlError::new(
                        1066,
                        "42000",
                        format!(
                            "Not unique table/alias: '{}'",
                            t.names.first().map_or("", String::as_str)
                        ),
                    ));
                }
            }
            for c in &t.table.def().columns {
                let mut wide = c.clone();
                wide.name = hidden_name(i, &c.name);
                wide.default = None;
                wide.auto_increment = false;
                def.columns.push(wide);
            }
        }
        let mut offset = 0;
        let mut coalesced: Vec<u16> = Vec::new();
        for (target, kind, constraint) in pieces {
            let width = target.table.def().columns.len();
            tables.push(Joined {
                target,
                kind,
                offset,
                on: None,
                merged: Vec::new(),
            });
            offset += width;
            let me = tables.len() - 1;
            let on = match constraint {
                JoinConstraint::None => None,
                JoinConstraint::On(e) => Some(e),
                JoinConstraint::Using(names) => {
                    let (on, merged, common) = using(&tables, me, &names)?;
                    tables[me].merged = merged;
                    for c in common {
                        if !coalesced.contains(&c) {
                            coalesced.push(c);
                        }
                    }
                    Some(on)
                }
                JoinConstraint::Natural => {
                    return Err(SqlError::not_supported("NATURAL JOIN (use USING)"))
                }
            };
            if let Some(on) = on {
                // ON sees this table and the ones before it only.
                let rewritten = rewrite(&tables, &on, "on clause")?;
                if tables_of(&rewritten).iter().any(|&t| t > me) {
                    return Err(SqlError::new(
                        1054,
                        "42S22",
                        format!("Unknown column in '{on}' in 'on clause'"),
                    ));
                }
                tables[me].on = Some(rewritten);
            }
        }
        Ok(Join {
            tables,
            def,
            coalesced,
        })
    }

    /// The wide row's width.
    pub fn width(&self) -> usize {
        self.def.columns.len()
    }

    /// The scope expressions rewritten by [`Join::rewrite`] compile in.
    pub fn scope<'a>(&'a self, aggregates: Option<&'a super::aggregate::Aggregates>) -> Scope<'a> {
        Scope {
            def: &self.def,
            names: Vec::new(),
            aggregates,
            aliases: &[],
        }
    }

    /// `e` with its column references made the wide row's names.
    pub fn rewrite(&self, e: &Expr, clause: &str) -> Result<Expr, SqlError> {
        rewrite(&self.tables, e, clause)
    }

    /// The wide-row columns of `qualifier.*` (`None`: every table's).
    pub fn wildcard(&self, qualifier: Option<&str>) -> Result<Vec<(u16, String)>, SqlError> {
        let mut out: Vec<(u16, String)> = Vec::new();
        let mut found = qualifier.is_none();
        if qualifier.is_none() {
            for &c in &self.coalesced {
                out.push((
                    c,
                    shown_name(&self.def.columns[usize::from(c)].name).to_string(),
                ));
            }
        }
        for t in &self.tables {
            if let Some(q) = qualifier {
                if !t.target.names.iter().any(|n| n == q) {
                    continue;
                }
                found = true;
            }
            for (n, c) in t.target.table.def().columns.iter().enumerate() {
                let wide = (t.offset + n) as u16;
                let hidden = qualifier.is_none()
                    && (t.merged.contains(&(n as u16)) || self.coalesced.contains(&wide));
                if !hidden {
                    out.push((wide, c.name.clone()));
                }
            }
        }
        if !found {
            return Err(SqlError::new(
                1051,
                "42S02",
                format!("Unknown table '{}'", qualifier.unwrap_or_default()),
            ));
        }
        Ok(out)
    }

    /// The table a wide-row column belongs to, and its own column id.
    pub fn source_of(&self, column: u16) -> Option<(&Joined, u16)> {
        let c = usize::from(column);
        self.tables
            .iter()
            .rev()
            .find(|t| t.offset <= c)
            .map(|t| (t, (c - t.offset) as u16))
    }

    /// How table `i` is read and matched, given the WHERE's conjuncts
    /// (rewritten).
    pub fn access(
        &self,
        env: &Env<'_>,
        i: usize,
        where_conjuncts: &[&Expr],
    ) -> Result<TableAccess, SqlError> {
        let t = &self.tables[i];
        let scope = self.scope(None);
        let compile = |e: &Expr, clause: &str| {
            Compiler {
                env,
                scope: Some(&scope),
                clause,
            }
            .compile(e)
        };
        // The conditions that may narrow this table's reads: its ON, and
        // the WHERE unless NULL rows of it must stay (LEFT).
        let mut usable: Vec<&Expr> = t.on.as_ref().map(conjuncts).unwrap_or_default();
        if t.kind == Kind::Inner {
            usable.extend(where_conjuncts.iter().copied());
        }
        let on = t.on.as_ref().map(|e| compile(e, "on clause")).transpose()?;
        // This table's own conditions, over its own columns.
        let local: Vec<Expr> = usable
            .iter()
            .filter(|e| {
                let tables = tables_of(e);
                !tables.is_empty() && tables.iter().all(|&x| x == i)
            })
            .map(|e| localize(e, i))
            .collect();
        let local_where = and_all(local)
            .map(|e| {
                let s = t.target.scope();
                Compiler {
                    env,
                    scope: Some(&s),
                    clause: "where clause",
                }
                .compile(&e)
            })
            .transpose()?;
        // Equalities of this table's columns with earlier tables' values:
        // (its column id, the value's expression).
        let mut equal: BTreeMap<u16, Scalar> = BTreeMap::new();
        if i > 0 {
            for e in &usable {
                if let Some((col, other)) = equality_on(e, i) {
                    if let Some(c) = t.target.scope().column(col) {
                        equal.entry(c).or_insert(compile(other, "on clause")?);
                    }
                }
            }
        }
        let def = t.target.table.def();
        let by_key = i > 0 && def.primary_key.iter().all(|k| equal.contains_key(k));
        Ok(TableAccess {
            on,
            local_where,
            equal,
            by_key,
        })
    }

    /// Every wide row the join makes for which `where_` (rewritten, not
    /// compiled) holds, read in `txn` with `lock`.
    pub async fn rows(
        &self,
        env: &Env<'_>,
        cluster: &Cluster,
        txn: &mut Transaction,
        where_: Option<&Expr>,
        lock: LockMode,
    ) -> Result<Vec<Vec<Value>>, SqlError> {
        let width = self.width();
        let scope = self.scope(None);
        let compile = |e: &Expr, clause: &str| {
            Compiler {
                env,
                scope: Some(&scope),
                clause,
            }
            .compile(e)
        };
        let where_conjuncts: Vec<&Expr> = where_.map(conjuncts).unwrap_or_default();
        let where_all = where_.map(|w| compile(w, "where clause")).transpose()?;
        let mut rows: Vec<Vec<Value>> = vec![Vec::new()];
        for (i, t) in self.tables.iter().enumerate() {
            let TableAccess {
                on,
                local_where,
                equal,
                by_key,
            } = self.access(env, i, &where_conjuncts)?;
            let def = t.target.table.def();
            let mut next = Held::new(&env.limits);
            // Joins `outer` with `candidates` of this table: every pair ON
            // accepts, or the outer row alone for a LEFT JOIN.
            let join_one = |outer: &[Value],
                            candidates: &mut dyn Iterator<Item = &Vec<Value>>,
                            next: &mut Held|
             -> Result<(), SqlError> {
                let mut matched = false;
                for inner in candidates {
                    let mut wide = outer.to_vec();
                    wide.extend(inner.iter().cloned());
                    let mut full = wide.clone();
                    full.resize(width, Value::Null);
                    if let Some(on) = &on {
                        if truth(&on.eval(&full)?) != Some(true) {
                            continue;
                        }
                    }
                    matched = true;
                    next.push(wide)?;
                }
                if !matched && t.kind == Kind::Left {
                    let mut wide = outer.to_vec();
                    wide.resize(t.offset + def.columns.len(), Value::Null);
                    next.push(wide)?;
                }
                Ok(())
            };
            if by_key {
                let key_exprs: Vec<&Scalar> = def.primary_key.iter().map(|k| &equal[k]).collect();
                let chunk = env.limits.key_lookups_max.max(1);
                for outer_chunk in rows.chunks(chunk) {
                    // Each outer row's key, converted for the key columns
                    // (`None`: it can match no row).
                    let mut keys: Vec<Option<Vec<Value>>> = Vec::with_capacity(outer_chunk.len());
                    let mut wanted: BTreeMap<Vec<u8>, Vec<Value>> = BTreeMap::new();
                    for outer in outer_chunk {
                        let mut full = outer.clone();
                        full.resize(width, Value::Null);
                        let key = key_of(&key_exprs, &full, def, &def.primary_key)?;
                        if let Some(k) = &key {
                            wanted.entry(encode_values(k)).or_insert_with(|| k.clone());
                        }
                        keys.push(key);
                    }
                    let plan = Plan {
                        access: Access::PrimaryKeys(wanted.into_values().collect()),
                        filter: None,
                        ordered: None,
                        exact: false,
                    };
                    let found = super::fetch::fetch(
                        cluster,
                        txn,
                        &t.target.table,
                        &plan,
                        local_where.as_ref(),
                        lock,
                        None,
                        false,
                        &env.limits,
                    )
                    .await?;
                    let by_key: BTreeMap<Vec<u8>, Vec<Value>> = found
                        .into_iter()
                        .map(|r| {
                            let k: Vec<Value> = def
                                .primary_key
                                .iter()
                                .map(|&c| r[usize::from(c)].clone())
                                .collect();
                            (encode_values(&k), r)
                        })
                        .collect();
                    for (outer, key) in outer_chunk.iter().zip(&keys) {
                        let hit = key.as_ref().and_then(|k| by_key.get(&encode_values(k)));
                        join_one(outer, &mut hit.into_iter(), &mut next)?;
                    }
                }
            } else {
                let p = plan(def, local_where.as_ref(), &[], env.limits.key_lookups_max);
                let inner = super::fetch::fetch(
                    cluster,
                    txn,
                    &t.target.table,
                    &p,
                    local_where.as_ref(),
                    lock,
                    None,
                    false,
                    &env.limits,
                )
                .await?;
                if i == 0 {
                    for row in inner {
                        next.push(row)?;
                    }
                } else if equal.is_empty() {
                    for outer in &rows {
                        join_one(outer, &mut inner.iter(), &mut next)?;
                    }
                } else {
                    // A hash of the inner rows by the equated columns.
                    let columns: Vec<u16> = equal.keys().copied().collect();
                    let exprs: Vec<&Scalar> = equal.values().collect();
                    let mut hash: BTreeMap<Vec<u8>, Vec<usize>> = BTreeMap::new();
                    for (n, row) in inner.iter().enumerate() {
                        let k: Vec<Value> = columns
                            .iter()
                            .map(|&c| row[usize::from(c)].clone())
                            .collect();
                        if k.iter().any(Value::is_null) {
                            continue;
                        }
                        hash.entry(encode_values(&k)).or_default().push(n);
                    }
                    for outer in &rows {
                        let mut full = outer.clone();
                        full.resize(width, Value::Null);
                        let key = key_of(&exprs, &full, def, &columns)?;
                        let hits: &[usize] = key
                            .as_ref()
                            .and_then(|k| hash.get(&encode_values(k)))
                            .map_or(&[], Vec::as_slice);
                        join_one(outer, &mut hits.iter().map(|&n| &inner[n]), &mut next)?;
                    }
                }
            }
            rows = next.rows;
        }
        let mut out = Vec::with_capacity(rows.len());
        for mut row in rows {
            row.resize(width, Value::Null);
            if let Some(w) = &where_all {
                if truth(&w.eval(&row)?) != Some(true) {
                    continue;
                }
            }
            out.push(row);
        }
        Ok(out)
    }
}

/// A join's intermediate result, bounded in rows (`rows_max`) and bytes
/// (`held_bytes_max`): 1038 past either.
struct Held {
    rows: Vec<Vec<Value>>,
    bytes: usize,
    rows_max: usize,
    bytes_max: usize,
}

impl Held {
    fn new(limits: &super::Limits) -> Held {
        Held {
            rows: Vec::new(),
            bytes: 0,
            rows_max: limits.rows_max,
            bytes_max: limits.held_bytes_max,
        }
    }

    fn push(&mut self, row: Vec<Value>) -> Result<(), SqlError> {
        if self.rows.len() >= self.rows_max {
            return Err(too_many_rows(self.rows_max, "a join"));
        }
        self.bytes = self.bytes.saturating_add(row_bytes(&row));
        if self.bytes > self.bytes_max {
            return Err(super::held_too_much(self.bytes_max));
        }
        self.rows.push(row);
        Ok(())
    }
}

/// The values `exprs` give `columns` of `def` for `row`, converted for
/// them; `None` when one is NULL or cannot be one of the column's values
/// (no row can match).
fn key_of(
    exprs: &[&Scalar],
    row: &[Value],
    def: &TableDef,
    columns: &[u16],
) -> Result<Option<Vec<Value>>, SqlError> {
    let mut key = Vec::with_capacity(columns.len());
    for (e, &c) in exprs.iter().zip(columns) {
        let v = e.eval(row)?;
        if v.is_null() {
            return Ok(None);
        }
        match coerce(&v, &def.columns[usize::from(c)], 1) {
            // Converted exactly: the stored values it can equal.
            Ok(k) if super::eval::compare(&k, &v) == Some(std::cmp::Ordering::Equal) => key.push(k),
            _ => return Ok(None),
        }
    }
    Ok(Some(key))
}
