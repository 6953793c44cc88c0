//! Grouping SELECTs: GROUP BY (expressions, select-list positions and
//! aliases), aggregates with or without GROUP BY, HAVING, and DISTINCT,
//! then ORDER BY and LIMIT over the groups.
//!
//! Rows stream from the fetch into a group table, an ordered map from
//! each group's key ([`super::group_key`]) to the group's first row and
//! its aggregates' accumulators, so groups come out in GROUP BY order
//! (ascending, NULL first, as MariaDB sorts them) and the same every run.
//! A group's row is its first row's columns (columns neither grouped nor
//! aggregated show any row's value, as in MariaDB's default sql_mode
//! without ONLY_FULL_GROUP_BY) followed by its aggregates' results; the
//! select list, HAVING and ORDER BY are compiled over such rows.
//!
//! Invariants: a statement holds at most `rows_max` groups and DISTINCT
//! values together and at most `group_bytes_max` bytes of them (1038
//! past either, [`Budget`]); aggregates without GROUP BY give exactly
//! one row, even over no rows; HAVING without GROUP BY or aggregates
//! filters rows one by one, as MySQL's does.

use super::aggregate::{decimal_value_text, Accumulator, AggCall};
use super::expr::{truth, Compiler, Scalar, Scope};
use super::fetch::fetch_each;
use super::group_key::{encode_value, encode_values, row_bytes, Budget};
use super::plan::plan;
use super::result_type::{call_column, class_column, class_of, Class};
use super::select::{named_output, sort_rows, Output, Target};
use super::{result_too_large, Env};
use crate::outcome::{Column, Outcome, SqlError};
use crate::sqltypes::{expression_column, result_column, text as to_text};
use shoal_client::{Cluster, LockMode, Transaction, Value};
use sqlparser::ast::{Distinct, Expr, GroupByExpr, Select};
use std::collections::{BTreeMap, BTreeSet};

/// What a group costs in memory besides its key and row (the map's
/// node, the accumulators' vector).
const GROUP_ENTRY_BYTES: usize = 96;

/// How a SELECT groups, compiled.
pub struct Grouping {
    keys: Keys,
    /// The aggregate calls; call `i` is column `width + i` of a group row.
    calls: Vec<AggCall>,
    /// Over group rows.
    having: Option<Scalar>,
    /// SELECT DISTINCT over groups: result rows are deduplicated after
    /// HAVING (a DISTINCT without grouping groups by the select list
    /// instead).
    distinct: bool,
    /// The table's columns.
    width: usize,
    /// Per table column: whether a group row needs it (the others are
    /// not held).
    needed: Vec<bool>,
    /// How each select item is described and shown.
    shown: Vec<Shown>,
}

enum Keys {
    /// Rows group by these values over the table's rows (none: all rows
    /// form one group, which exists even without rows).
    Exprs(Vec<Scalar>),
    /// Each row is a group of its own (HAVING alone).
    EveryRow,
}

/// How a select item of a grouping SELECT is described and shown.
enum Shown {
    /// A table column: described as the column.
    Column(u16),
    /// An aggregate call itself: described as MariaDB describes the call
    /// (`None`: by its value), shown with its exact text.
    Call(usize, Option<Column>),
    /// An expression, by what its class tells.
    Expression(Class),
}

/// The rest of a SELECT that applies to the groups.
pub struct Shape<'a> {
    /// The statement (the columns it names are the ones read).
    pub query: &'a sqlparser::ast::Query,
    pub outputs: &'a [Output],
    pub order: &'a [(Scalar, bool)],
    pub offset: u64,
    pub limit: Option<u64>,
}

fn cant_group_on(name: &str) -> SqlError {
    SqlError::new(1056, "42000", format!("Can't group on '{name}'"))
}

/// Calls `f` with every column `s` reads.
fn each_column(s: &Scalar, f: &mut dyn FnMut(u16)) {
    let mut each = |x: &Scalar| each_column(x, f);
    match s {
        Scalar::Const(_) => {}
        Scalar::Column(c) => f(*c),
        Scalar::Neg(x)
        | Scalar::Not(x)
        | Scalar::IsNull(x, _)
        | Scalar::IsBool(x, _, _)
        | Scalar::Cast(x, _) => each(x),
        Scalar::Arith(_, a, b) | Scalar::Cmp(_, a, b) | Scalar::Xor(a, b) => {
            each(a);
            each(b);
        }
        Scalar::And(items) | Scalar::Or(items) | Scalar::Func(_, items) => {
            items.iter().for_each(each)
        }
        Scalar::Like { expr, pattern, .. } => {
            each(expr);
            each(pattern);
        }
        Scalar::InList { expr, list, .. } => {
            each(expr);
            list.iter().for_each(each);
        }
        Scalar::Between {
            expr, low, high, ..
        } => {
            each(expr);
            each(low);
            each(high);
        }
        Scalar::Case {
            operand,
            whens,
            otherwise,
        } => {
            if let Some(o) = operand {
                each(o);
            }
            for (w, r) in whens {
                each(w);
                each(r);
            }
            if let Some(o) = otherwise {
                each(o);
            }
        }
    }
}

/// Whether `s` reads an aggregate's result (a column at or past the
/// table's `width`).
fn reads_aggregate(s: &Scalar, width: usize) -> bool {
    let mut found = false;
    each_column(s, &mut |c| found |= usize::from(c) >= width);
    found
}

/// Compiles the grouping of a SELECT whose list and ORDER BY compiled in
/// `scope` (which registered their aggregates): its GROUP BY and HAVING.
/// `None` if it does not group.
pub fn compile(
    env: &Env<'_>,
    select: &Select,
    scope: Option<&Scope<'_>>,
    outputs: &[Output],
    order: &[(Scalar, bool)],
) -> Result<Option<Grouping>, SqlError> {
    let group_by = match &select.group_by {
        GroupByExpr::Expressions(exprs, modifiers) => {
            if let Some(m) = modifiers.first() {
                return Err(SqlError::not_supported(format!("GROUP BY ... {m}")));
            }
            exprs.as_slice()
        }
        GroupByExpr::All(_) => return Err(SqlError::not_supported("GROUP BY ALL")),
    };
    let width = scope.map_or(0, |s| s.def.columns.len());
    // GROUP BY reads the table's rows: no aggregates (1111), and a name
    // is the table's column before it is a select item's (as MySQL
    // resolves it).
    let plain = scope.map(|s| Scope {
        def: s.def,
        names: s.names.clone(),
        aggregates: None,
        aliases: &[],
    });
    let c = Compiler {
        env,
        scope: plain.as_ref(),
        clause: "group statement",
    };
    let mut keys = Vec::with_capacity(group_by.len());
    for e in group_by {
        let table_column = match e {
            Expr::Identifier(i) => plain.as_ref().and_then(|s| s.column(&i.value)),
            _ => None,
        };
        let key = match table_column {
            Some(col) => Scalar::Column(col),
            None => match named_output(e, outputs, "group statement")? {
                Some(o) if reads_aggregate(&o.scalar, width) => return Err(cant_group_on(&o.name)),
                Some(o) => o.scalar.clone(),
                None => c.compile(e)?,
            },
        };
        keys.push(key);
    }
    let having = match &select.having {
        None => None,
        Some(h) => {
            // A select-list name stands for its item, unless it names a
            // grouped column (MySQL prefers the GROUP BY column).
            let grouped = |name: &str| {
                plain
                    .as_ref()
                    .and_then(|s| s.column(name))
                    .is_some_and(|col| keys.contains(&Scalar::Column(col)))
            };
            let aliases: Vec<(String, Scalar)> = outputs
                .iter()
                .filter(|o| !grouped(&o.name))
                .map(|o| (o.name.clone(), o.scalar.clone()))
                .collect();
            let having_scope = scope.map(|s| Scope {
                def: s.def,
                names: s.names.clone(),
                aggregates: s.aggregates,
                aliases: &aliases,
            });
            let c = Compiler {
                env,
                scope: having_scope.as_ref(),
                clause: "having clause",
            };
            Some(c.compile(h)?)
        }
    };
    let calls = scope
        .and_then(|s| s.aggregates)
        .map(|a| a.calls())
        .unwrap_or_default();
    let distinct = matches!(select.distinct, Some(Distinct::Distinct));
    let (keys, distinct) = if !keys.is_empty() || !calls.is_empty() {
        (Keys::Exprs(keys), distinct)
    } else if distinct {
        // DISTINCT alone groups by the select list.
        (
            Keys::Exprs(outputs.iter().map(|o| o.scalar.clone()).collect()),
            false,
        )
    } else if having.is_some() {
        (Keys::EveryRow, false)
    } else {
        return Ok(None);
    };
    let mut needed = vec![false; width];
    for s in outputs
        .iter()
        .map(|o| &o.scalar)
        .chain(having.iter())
        .chain(order.iter().map(|(s, _)| s))
    {
        each_column(s, &mut |c| {
            if let Some(n) = needed.get_mut(usize::from(c)) {
                *n = true;
            }
        });
    }
    let shown = outputs
        .iter()
        .map(|o| match (&o.scalar, scope) {
            (Scalar::Column(c), Some(_)) if usize::from(*c) < width => Shown::Column(*c),
            (Scalar::Column(c), Some(s)) if usize::from(*c) - width < calls.len() => {
                let slot = usize::from(*c) - width;
                Shown::Call(slot, call_column(&calls[slot], &o.name, s.def))
            }
            (scalar, Some(s)) => Shown::Expression(class_of(scalar, s.def, &calls)),
            (_, None) => Shown::Expression(Class::Unknown),
        })
        .collect();
    Ok(Some(Grouping {
        keys,
        calls,
        having,
        distinct,
        width,
        needed,
        shown,
    }))
}

/// The groups, finished: their rows in key order (each followed by its
/// number), each one's exact texts of its calls, and the budget left.
struct Finished {
    rows: Vec<Vec<Value>>,
    exacts: Vec<Vec<Option<Vec<u8>>>>,
    budget: Budget,
}

/// One group: its first row (the columns a group row needs) and its
/// aggregates' accumulators.
struct Group {
    first: Vec<Value>,
    accs: Vec<Accumulator>,
}

/// The groups of one statement, by key, within its budget.
struct GroupTable<'g> {
    g: &'g Grouping,
    groups: BTreeMap<Vec<u8>, Group>,
    budget: Budget,
    rows_seen: u64,
}

impl<'g> GroupTable<'g> {
    fn new(g: &'g Grouping, env: &Env<'_>) -> GroupTable<'g> {
        GroupTable {
            g,
            groups: BTreeMap::new(),
            budget: Budget::new(env.limits.rows_max, env.limits.group_bytes_max),
            rows_seen: 0,
        }
    }

    /// Folds one of the table's rows into its group.
    fn add(&mut self, mut row: Vec<Value>) -> Result<(), SqlError> {
        let g = self.g;
        let key = match &g.keys {
            Keys::Exprs(exprs) => {
                let mut key = Vec::new();
                for e in exprs {
                    // A plain column is encoded where it lies, not cloned.
                    match e {
                        Scalar::Column(c) if usize::from(*c) < row.len() => {
                            encode_value(&mut key, &row[usize::from(*c)]);
                        }
                        _ => encode_value(&mut key, &e.eval(&row)?),
                    }
                }
                key
            }
            Keys::EveryRow => {
                self.rows_seen += 1;
                self.rows_seen.to_be_bytes().to_vec()
            }
        };
        if let Some(group) = self.groups.get_mut(&key) {
            for (acc, call) in group.accs.iter_mut().zip(&g.calls) {
                acc.fold(call, &row, &mut self.budget)?;
            }
            return Ok(());
        }
        let mut accs: Vec<Accumulator> = g.calls.iter().map(Accumulator::new).collect();
        for (acc, call) in accs.iter_mut().zip(&g.calls) {
            acc.fold(call, &row, &mut self.budget)?;
        }
        // Only the columns a group row reads are held.
        for (v, needed) in row.iter_mut().zip(&g.needed) {
            if !needed {
                *v = Value::Null;
            }
        }
        let bytes = key.len()
            + row_bytes(&row)
            + accs.iter().map(Accumulator::bytes).sum::<usize>()
            + GROUP_ENTRY_BYTES;
        self.budget.charge(1, bytes)?;
        self.groups.insert(key, Group { first: row, accs });
        Ok(())
    }

    fn finish(self) -> Finished {
        let g = self.g;
        let mut groups: Vec<Group> = self.groups.into_values().collect();
        if groups.is_empty() && matches!(&g.keys, Keys::Exprs(e) if e.is_empty()) {
            // Aggregates over no rows: one row all the same.
            groups.push(Group {
                first: vec![Value::Null; g.width],
                accs: g.calls.iter().map(Accumulator::new).collect(),
            });
        }
        let mut rows = Vec::with_capacity(groups.len());
        let mut exacts = Vec::with_capacity(groups.len());
        for (i, group) in groups.into_iter().enumerate() {
            let mut row = group.first;
            let mut exact = Vec::with_capacity(g.calls.len());
            for (acc, call) in group.accs.iter().zip(&g.calls) {
                let (v, text) = acc.finish(call);
                row.push(v);
                exact.push(text);
            }
            row.push(Value::UInt(i as u64));
            rows.push(row);
            exacts.push(exact);
        }
        Finished {
            rows,
            exacts,
            budget: self.budget,
        }
    }
}

/// Runs a grouping SELECT of `target` (or of no table) in `txn`.
#[allow(clippy::too_many_arguments)]
pub async fn run(
    env: &Env<'_>,
    cluster: &Cluster,
    txn: &mut Transaction,
    g: &Grouping,
    target: Option<&Target>,
    where_: Option<&Scalar>,
    lock: LockMode,
    shape: Shape<'_>,
) -> Result<(Outcome, Vec<Vec<Value>>), SqlError> {
    let mut table = GroupTable::new(g, env);
    match target {
        None => {
            let keep = match where_ {
                Some(w) => truth(&w.eval(&[])?) == Some(true),
                None => true,
            };
            if keep {
                table.add(Vec::new())?;
            }
        }
        Some(t) => {
            let plan = plan(t.table.def(), where_, &[], env.limits.key_lookups_max);
            let columns = super::projection::needed_columns(shape.query, t.table.def(), &plan);
            let mut add = |row: Vec<Value>| -> Result<bool, SqlError> {
                table.add(row)?;
                Ok(true)
            };
            fetch_each(
                cluster,
                txn,
                &t.table,
                &plan,
                where_,
                lock,
                env.own_transaction,
                &env.limits,
                columns.as_deref(),
                &mut add,
            )
            .await?;
        }
    }
    finish(env, g, table, target, shape)
}

/// Runs a grouping SELECT over rows already read (a join's wide rows).
pub fn run_over(
    env: &Env<'_>,
    g: &Grouping,
    rows: Vec<Vec<Value>>,
    shape: Shape<'_>,
) -> Result<(Outcome, Vec<Vec<Value>>), SqlError> {
    let mut table = GroupTable::new(g, env);
    for row in rows {
        table.add(row)?;
    }
    finish(env, g, table, None, shape)
}

/// HAVING, DISTINCT, ORDER BY and LIMIT over the groups: the result, and
/// its rows as values (an exact decimal shown by its text becomes a
/// DECIMAL value), for INSERT ... SELECT and subqueries.
fn finish(
    env: &Env<'_>,
    g: &Grouping,
    table: GroupTable<'_>,
    target: Option<&Target>,
    shape: Shape<'_>,
) -> Result<(Outcome, Vec<Vec<Value>>), SqlError> {
    let Finished {
        rows,
        exacts,
        mut budget,
    } = table.finish();
    let mut kept = Vec::with_capacity(rows.len());
    let mut seen = BTreeSet::new();
    for row in rows {
        if let Some(h) = &g.having {
            if truth(&h.eval(&row)?) != Some(true) {
                continue;
            }
        }
        if g.distinct {
            let values = shape
                .outputs
                .iter()
                .map(|o| o.scalar.eval(&row))
                .collect::<Result<Vec<_>, _>>()?;
            let key = encode_values(&values);
            if seen.contains(&key) {
                continue;
            }
            budget.charge(1, key.len() + GROUP_ENTRY_BYTES)?;
            seen.insert(key);
        }
        kept.push(row);
    }
    drop(seen);
    let mut rows = kept;
    sort_rows(&mut rows, shape.order)?;
    let rows = rows
        .into_iter()
        .skip(usize::try_from(shape.offset).unwrap_or(usize::MAX))
        .take(
            shape
                .limit
                .map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX)),
        );
    let mut out_rows = Vec::new();
    let mut typed_rows: Vec<Vec<Value>> = Vec::new();
    let mut first: Option<Vec<Value>> = None;
    let mut bytes = 0usize;
    for row in rows {
        let number = match row.last() {
            Some(Value::UInt(n)) => *n as usize,
            _ => 0,
        };
        let mut values = Vec::with_capacity(shape.outputs.len());
        let mut texts = Vec::with_capacity(shape.outputs.len());
        let mut typed = Vec::with_capacity(shape.outputs.len());
        for (o, shown) in shape.outputs.iter().zip(&g.shown) {
            let v = o.scalar.eval(&row)?;
            let text = match shown {
                Shown::Call(slot, _) => exacts
                    .get(number)
                    .and_then(|e| e.get(*slot))
                    .cloned()
                    .flatten()
                    .or_else(|| to_text(&v)),
                Shown::Expression(Class::Decimal(scale)) => decimal_value_text(&v, *scale),
                _ => to_text(&v),
            };
            bytes += text.as_ref().map_or(1, |t| t.len() + 1);
            if bytes > env.limits.result_bytes_max {
                return Err(result_too_large(env.limits.result_bytes_max));
            }
            // Text that is an exact decimal: an aggregate's exact result,
            // or an expression of the DECIMAL class.
            let exact_text = match shown {
                Shown::Call(slot, _) => exacts
                    .get(number)
                    .and_then(|e| e.get(*slot))
                    .is_some_and(Option::is_some),
                Shown::Expression(Class::Decimal(_)) => true,
                _ => false,
            };
            typed.push(
                match text
                    .as_deref()
                    .filter(|_| exact_text)
                    .map(std::str::from_utf8)
                {
                    Some(Ok(t)) => shoal_types::Decimal::parse(t)
                        .map(Value::Decimal)
                        .unwrap_or_else(|| v.clone()),
                    _ => v.clone(),
                },
            );
            texts.push(text);
            values.push(v);
        }
        out_rows.push(texts);
        typed_rows.push(typed);
        if first.is_none() {
            first = Some(values);
        }
    }
    let outcome = Outcome::Rows {
        columns: columns(g, shape.outputs, target, first.as_deref()),
        rows: out_rows,
    };
    Ok((outcome, typed_rows))
}

/// The result columns of a grouping SELECT; `samples`: the first result
/// row's values, if there is one (what expressions with no class of
/// their own are described by).
pub fn columns(
    g: &Grouping,
    outputs: &[Output],
    target: Option<&Target>,
    samples: Option<&[Value]>,
) -> Vec<Column> {
    outputs
        .iter()
        .zip(&g.shown)
        .enumerate()
        .map(|(i, (o, shown))| {
            let sample = samples.and_then(|s| s.get(i));
            let by_value = || expression_column(&o.name, sample);
            match shown {
                Shown::Column(c) => match target {
                    Some(t) => {
                        let def = t.table.def();
                        match def.columns.get(usize::from(*c)) {
                            Some(col) => {
                                let mut col = result_column(
                                    col,
                                    t.names.first().map_or("", String::as_str),
                                    &t.name.database,
                                    def.primary_key.contains(c),
                                );
                                col.name = o.name.clone();
                                col
                            }
                            None => by_value(),
                        }
                    }
                    None => by_value(),
                },
                Shown::Call(_, Some(col)) => col.clone(),
                Shown::Call(_, None) => by_value(),
                Shown::Expression(class @ Class::Decimal(_)) => {
                    class_column(&o.name, *class).unwrap_or_else(by_value)
                }
                // A sample tells more (unsigned, a string's length).
                Shown::Expression(class) => match sample {
                    Some(v) if !v.is_null() => by_value(),
                    _ => class_column(&o.name, *class).unwrap_or_else(by_value),
                },
            }
        })
        .collect()
}
