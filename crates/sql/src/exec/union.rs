//! `SELECT … UNION [ALL | DISTINCT] SELECT …`, with ORDER BY and LIMIT
//! over the whole.
//!
//! Each SELECT runs on its own ([`super::select::select_values`]), in
//! the statement's transaction; the results are appended left to right,
//! and a `UNION` (DISTINCT) removes every duplicate of the rows to its
//! left, as MySQL's left-to-right evaluation does. The result's columns
//! are named by the first SELECT and typed by all of them
//! ([`merged`]: `SELECT 1 UNION SELECT 'abc'` is a string column, as in
//! MySQL; typed by the first alone, its binary form failed on `'abc'`);
//! each value is converted to its column's type before duplicates go.
//! ORDER BY names the columns by position or name.
//!
//! Invariants: the rows held are bounded by `Limits.rows_max` and
//! `held_bytes_max`, the text answer by `result_bytes_max`.

use super::group_key::{encode_values, row_bytes};
use super::select::{describe, limit_of, select_values, sort_rows};
use super::{too_many_rows, Env, TextRows};
use crate::outcome::{Column, ColumnKind, Outcome, SqlError};
use crate::sqltypes::value_text;
use shoal_client::{Cluster, Transaction, Value};
use shoal_types::Decimal;
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

/// The result columns of a UNION: named by its first SELECT, typed by
/// all of them ([`merged`]). Every branch is described (compiled, not
/// run), so a branch of another width is 1222 even when it would give no
/// rows.
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
        let theirs = Box::pin(describe(env, cluster, &branch(other), "")).await?;
        if theirs.len() != cols.len() {
            return Err(different_widths());
        }
        for (c, t) in cols.iter_mut().zip(&theirs) {
            *c = merged(c, t);
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
    let mut branch_rows = Vec::with_capacity(list.len());
    let mut total = 0usize;
    for (body, distinct) in list {
        let got = Box::pin(select_values(env, cluster, txn, &branch(body), "")).await?;
        if got.first().is_some_and(|r| r.len() != width) {
            return Err(different_widths());
        }
        total = total.saturating_add(got.len());
        if total > env.limits.rows_max {
            return Err(too_many_rows(env.limits.rows_max, "a UNION"));
        }
        held = held.saturating_add(got.iter().map(|r| row_bytes(r)).sum::<usize>());
        if held > env.limits.held_bytes_max {
            return Err(super::held_too_much(env.limits.held_bytes_max));
        }
        branch_rows.push((got, distinct));
    }
    // A string column whose values are all numbers keeps them numbers: an
    // expression over a table is described as a string until it has run
    // (its type is not known before), and its numbers sort as numbers.
    let strings: Vec<bool> = (0..width)
        .map(|i| {
            branch_rows.iter().any(|(got, _)| {
                got.iter()
                    .any(|r| matches!(r.get(i), Some(Value::Str(_) | Value::Bytes(_))))
            })
        })
        .collect();
    for (got, distinct) in branch_rows {
        rows.extend(got.into_iter().map(|row| {
            row.into_iter()
                .zip(&columns)
                .zip(&strings)
                .map(|((v, c), &strings)| converted(v, c, strings))
                .collect()
        }));
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

/// How [`merged`] sees a result column's kind.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Null,
    /// An integer of this width rank (TINYINT 0 … BIGINT 3).
    Int(u8),
    Decimal,
    Real,
    Temporal,
    Text,
}

fn family(kind: ColumnKind) -> Family {
    match kind {
        ColumnKind::Null => Family::Null,
        ColumnKind::Tiny => Family::Int(0),
        ColumnKind::Short => Family::Int(1),
        ColumnKind::Long => Family::Int(2),
        ColumnKind::LongLong => Family::Int(3),
        ColumnKind::NewDecimal => Family::Decimal,
        ColumnKind::Float | ColumnKind::Double => Family::Real,
        ColumnKind::Timestamp | ColumnKind::DateTime | ColumnKind::Date | ColumnKind::Time => {
            Family::Temporal
        }
        ColumnKind::VarString | ColumnKind::String => Family::Text,
    }
}

const INT_KINDS: [ColumnKind; 4] = [
    ColumnKind::Tiny,
    ColumnKind::Short,
    ColumnKind::Long,
    ColumnKind::LongLong,
];

/// The column a UNION gives at one position for two of its SELECTs'
/// columns there (`a` names it), by MySQL's type aggregation as far as
/// Shoal's kinds go: integers widen (one step more when one is unsigned
/// and the other not, past BIGINT to DECIMAL); integers and decimals give
/// a DECIMAL; any number with a float a DOUBLE; DATE, DATETIME and
/// TIMESTAMP a DATETIME; anything else mixed a string (binary if either
/// side is a binary string). NULL takes the other side's type.
pub(crate) fn merged(a: &Column, b: &Column) -> Column {
    let mut c = a.clone();
    c.primary_key = false;
    c.nullable = a.nullable || b.nullable;
    c.length = a.length.max(b.length);
    c.decimals = a.decimals.max(b.decimals);
    let text = |c: &mut Column| {
        c.kind = ColumnKind::VarString;
        c.unsigned = false;
        c.decimals = 0;
        let binary_string = |x: &Column| family(x.kind) == Family::Text && x.binary;
        c.binary = binary_string(a) || binary_string(b);
        // A text column's length counts 4 bytes a character; a number's
        // or a date's is its characters.
        let binary = c.binary;
        let bytes = |x: &Column| {
            if family(x.kind) == Family::Text || binary {
                x.length
            } else {
                x.length.saturating_mul(4)
            }
        };
        c.length = bytes(a).max(bytes(b));
    };
    match (family(a.kind), family(b.kind)) {
        (_, Family::Null) => {
            c = Column {
                nullable: true,
                primary_key: false,
                ..a.clone()
            }
        }
        (Family::Null, _) => {
            c = Column {
                name: a.name.clone(),
                table: a.table.clone(),
                schema: a.schema.clone(),
                nullable: true,
                primary_key: false,
                ..b.clone()
            }
        }
        (Family::Int(x), Family::Int(y)) => {
            // Signed with unsigned: a signed kind one step wider than the
            // unsigned one (and at least the signed one), DECIMAL past
            // BIGINT.
            let rank = match (a.unsigned, b.unsigned) {
                (false, true) => x.max(y + 1),
                (true, false) => y.max(x + 1),
                _ => x.max(y),
            };
            c.unsigned = a.unsigned && b.unsigned;
            c.decimals = 0;
            match INT_KINDS.get(usize::from(rank)) {
                Some(&kind) => c.kind = kind,
                None => c.kind = ColumnKind::NewDecimal,
            }
        }
        (Family::Int(_) | Family::Decimal, Family::Int(_) | Family::Decimal) => {
            c.kind = ColumnKind::NewDecimal;
            c.unsigned = false;
            // The most integer digits either side has, then the fraction.
            let whole = |x: &Column| x.length.saturating_sub(u32::from(x.decimals));
            c.length = whole(a).max(whole(b)) + u32::from(c.decimals);
        }
        (Family::Int(_) | Family::Decimal | Family::Real, Family::Real)
        | (Family::Real, Family::Int(_) | Family::Decimal) => {
            let floats = a.kind == ColumnKind::Float && b.kind == ColumnKind::Float;
            c.kind = if floats {
                ColumnKind::Float
            } else {
                ColumnKind::Double
            };
            c.unsigned = false;
            c.decimals = 31;
        }
        (Family::Temporal, Family::Temporal) if a.kind == b.kind => {}
        (Family::Temporal, Family::Temporal)
            if a.kind != ColumnKind::Time && b.kind != ColumnKind::Time =>
        {
            c.kind = ColumnKind::DateTime;
        }
        (Family::Text, Family::Text) => {
            c.kind = if a.kind == b.kind {
                a.kind
            } else {
                ColumnKind::VarString
            };
            c.binary = a.binary || b.binary;
            c.unsigned = false;
        }
        _ => text(&mut c),
    }
    c
}

/// `v` as a value of column `c`'s type, so that values of different
/// SELECTs compare (and lose their duplicates) as MySQL's do: a number
/// or a date under a string column is its text, an integer under a
/// DECIMAL a decimal at the column's scale, a number under a DOUBLE a
/// double, a date under a DATETIME its midnight.
///
/// `strings`: some value of the column is a string. A string column
/// whose values are all numbers (an expression described as a string
/// before it ran) keeps them numbers.
fn converted(v: Value, c: &Column, strings: bool) -> Value {
    match (family(c.kind), v) {
        (_, Value::Null) => Value::Null,
        (Family::Text, v @ (Value::Str(_) | Value::Bytes(_))) => v,
        (Family::Text, v) if !strings => v,
        (Family::Text, v) => {
            let text = value_text(&v);
            match String::from_utf8(text) {
                Ok(s) => Value::Str(s),
                Err(e) => Value::Bytes(e.into_bytes()),
            }
        }
        (Family::Decimal, Value::Int(i)) => {
            decimal_of(i128::from(i), c.decimals).unwrap_or(Value::Int(i))
        }
        (Family::Decimal, Value::UInt(u)) => {
            decimal_of(i128::from(u), c.decimals).unwrap_or(Value::UInt(u))
        }
        (Family::Decimal, Value::Decimal(d)) => Value::Decimal(d.rescale(c.decimals).unwrap_or(d)),
        (Family::Temporal, Value::Date(days)) if c.kind == ColumnKind::DateTime => {
            Value::DateTime(i64::from(days) * 86_400)
        }
        (Family::Real, Value::Int(i)) => Value::Double(i as f64),
        (Family::Real, Value::UInt(u)) => Value::Double(u as f64),
        (Family::Real, Value::Decimal(d)) => Value::Double(d.to_f64()),
        (_, v) => v,
    }
}

fn decimal_of(i: i128, scale: u8) -> Option<Value> {
    Decimal::from_int(i).rescale(scale).map(Value::Decimal)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqltypes::expression_column;

    /// Whatever two SELECTs give at one position, the merged column holds
    /// both sides' values in the binary protocol (its text form is the
    /// value's text), and merging is the same either way round.
    #[test]
    fn a_union_column_holds_every_select_value() {
        let samples = [
            Value::Int(-3),
            Value::UInt(u64::MAX),
            Value::Double(2.5),
            Value::Decimal(Decimal::new(15, 1)),
            Value::Str("abc".into()),
            Value::Bytes(vec![0xff]),
            Value::Date(3),
            Value::DateTime(86_400),
            Value::Timestamp(86_400),
            Value::Time(5_000_000),
            Value::Null,
        ];
        for a in &samples {
            for b in &samples {
                let (ca, cb) = (
                    expression_column("x", Some(a)),
                    expression_column("x", Some(b)),
                );
                let col = merged(&ca, &cb);
                assert_eq!(col.kind, merged(&cb, &ca).kind, "{a:?} ∪ {b:?}");
                for v in [a, b] {
                    let v = converted(v.clone(), &col, true);
                    if v.is_null() {
                        continue;
                    }
                    let mut out = Vec::new();
                    crate::protocol::binary::encode_value(&mut out, &col, &value_text(&v))
                        .unwrap_or_else(|e| {
                            panic!("{a:?} ∪ {b:?}: {v:?} as {:?}: {e:?}", col.kind)
                        });
                }
            }
        }
        let int = expression_column("x", Some(&Value::Int(1)));
        let text = expression_column("x", Some(&Value::Str("a".into())));
        assert_eq!(merged(&int, &text).kind, ColumnKind::VarString);
        assert!(!merged(&int, &text).binary, "a number and text: text");
        let unsigned = expression_column("x", Some(&Value::UInt(1)));
        assert_eq!(merged(&int, &unsigned).kind, ColumnKind::NewDecimal);
    }
}
