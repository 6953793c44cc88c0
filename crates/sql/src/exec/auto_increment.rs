//! AUTO_INCREMENT in SQL: which inserted rows get a generated value, the
//! values themselves from the cluster-wide counter (the native client's
//! `auto_increment` module, NDB's SYSTAB_0 and prefetched ranges), and
//! explicit values raising the counter past them.
//!
//! MySQL's rules: a row that leaves the column out, or gives it DEFAULT,
//! NULL or 0 (0 unless `sql_mode` has `NO_AUTO_VALUE_ON_ZERO`), gets the
//! next value; the rows of one statement get consecutive values as far
//! as the SQL node's cached range allows; a positive explicit value
//! raises the counter, so the rows after it get values above it.
//! `LAST_INSERT_ID()` is the first value the last statement that
//! generated any generated for a row that went in (a row `INSERT IGNORE`
//! skipped counts for nothing).
//!
//! As with NDB, several SQL nodes each hand out ranges they cached:
//! values are unique but interleave across nodes, and an explicit value
//! inside another node's cached range makes that node hand the value out
//! again later (a duplicate-key error). `shoal_client::auto_increment`
//! says more.

use super::error::from_shoal;
use super::Env;
use crate::outcome::SqlError;
use shoal_client::{AutoIncrementValues, Cluster, ErrorCode, ShoalError, Table, Value};
use shoal_types::ColumnType;
use sqlparser::ast::SqlOption;

/// The AUTO_INCREMENT column of an INSERT's table, and how the session's
/// `sql_mode` treats 0.
#[derive(Clone, Copy, Debug)]
pub struct AutoColumn {
    pub column: u16,
    ty: ColumnType,
    /// 0 asks for a value (no `NO_AUTO_VALUE_ON_ZERO`).
    zero_generates: bool,
}

impl AutoColumn {
    /// The table's AUTO_INCREMENT column, if it has one.
    pub fn of(env: &Env<'_>, table: &Table) -> Option<AutoColumn> {
        let def = table.def();
        let column = def.auto_increment_column()?;
        let no_auto_on_zero = env
            .variables
            .get("sql_mode")
            .and_then(Value::as_str)
            .is_some_and(|m| {
                m.split(',')
                    .any(|f| f.trim().eq_ignore_ascii_case("NO_AUTO_VALUE_ON_ZERO"))
            });
        Some(AutoColumn {
            column,
            ty: def.columns[usize::from(column)].ty,
            zero_generates: !no_auto_on_zero,
        })
    }

    /// Whether a value given for the column (NULL, or converted for it)
    /// asks for a generated one.
    pub fn generates(&self, v: &Value) -> bool {
        match v {
            Value::Null => true,
            Value::Int(0) | Value::UInt(0) => self.zero_generates,
            _ => false,
        }
    }

    /// The column's value for counter value `v` (within the type: the
    /// counter never passes its largest).
    fn value(&self, v: u64) -> Value {
        match self.ty {
            ColumnType::TinyInt { unsigned: true }
            | ColumnType::SmallInt { unsigned: true }
            | ColumnType::Int { unsigned: true }
            | ColumnType::BigInt { unsigned: true } => Value::UInt(v),
            _ => Value::Int(i64::try_from(v).unwrap_or(i64::MAX)),
        }
    }
}

/// 1467 for exhausted values (MySQL's "Failed to read auto-increment
/// value from storage engine", with why); others as usual.
fn counter_error(e: &ShoalError) -> SqlError {
    if e.code == ErrorCode::BadValue {
        SqlError::new(
            1467,
            "HY000",
            format!(
                "Failed to read auto-increment value from storage engine ({})",
                e.detail
            ),
        )
    } else {
        from_shoal(e)
    }
}

/// A positive explicit value (it raises the counter).
fn explicit(v: &Value) -> Option<u64> {
    match v {
        Value::Int(i) if *i > 0 => Some(*i as u64),
        Value::UInt(u) if *u > 0 => Some(*u),
        _ => None,
    }
}

/// What an INSERT reports of its AUTO_INCREMENT column, counting only
/// the rows that went in (`INSERT IGNORE` skips some after their values
/// were assigned; MySQL reports nothing of those): the first generated
/// value (`LAST_INSERT_ID()` from then on), and the last row's value
/// (what the OK packet reports when nothing was generated).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reported {
    pub first_generated: Option<u64>,
    pub last_value: Option<u64>,
}

/// [`Reported`] of `rows` after [`assign`] filled column `column`:
/// `generate` says which rows had their value generated and `inserted`
/// which went in (a missing flag counts as false).
pub fn reported(
    rows: &[Vec<Value>],
    column: u16,
    generate: &[bool],
    inserted: &[bool],
) -> Reported {
    let col = usize::from(column);
    let mut out = Reported::default();
    for (i, row) in rows.iter().enumerate() {
        if !inserted.get(i).copied().unwrap_or(false) {
            continue;
        }
        let v = row.get(col).and_then(Value::as_u64);
        if generate.get(i).copied().unwrap_or(false) && out.first_generated.is_none() {
            out.first_generated = v;
        }
        out.last_value = v;
    }
    out
}

/// Fills the column of each row whose `generate` flag is set, in row
/// order, and raises the counter past the explicit values. Round trips:
/// none while the cached range lasts, one per range fetched, and one per
/// explicit value above what the node has seen of the counter, deferred
/// to the next generated row or the end (so a run of explicit values
/// costs at most one).
pub async fn assign(
    cluster: &Cluster,
    table: &Table,
    auto: AutoColumn,
    rows: &mut [Vec<Value>],
    generate: &[bool],
) -> Result<(), SqlError> {
    let col = usize::from(auto.column);
    let mut remaining = generate.iter().filter(|g| **g).count() as u64;
    let mut values = AutoIncrementValues::default();
    let mut raise: Option<u64> = None;
    for (row, &gen) in rows.iter_mut().zip(generate) {
        if gen {
            if let Some(v) = raise.take() {
                values.skip_through(v);
                cluster
                    .raise_auto_increment(table, v)
                    .await
                    .map_err(|e| counter_error(&e))?;
            }
            if values.is_empty() {
                values = cluster
                    .auto_increment_values(table, remaining)
                    .await
                    .map_err(|e| counter_error(&e))?;
            }
            let Some(v) = values.next() else {
                return Err(counter_error(&ShoalError::with_detail(
                    ErrorCode::Internal,
                    "the counter handed out fewer values than asked",
                )));
            };
            remaining -= 1;
            row[col] = auto.value(v);
        } else if let Some(v) = explicit(&row[col]) {
            raise = Some(raise.map_or(v, |r| r.max(v)));
        }
    }
    if let Some(v) = raise {
        cluster
            .raise_auto_increment(table, v)
            .await
            .map_err(|e| counter_error(&e))?;
    }
    Ok(())
}

/// Restarts the counter of a table being truncated (if it has one).
pub async fn reset(cluster: &Cluster, table: &Table) -> Result<(), SqlError> {
    if table.def().auto_increment_column().is_none() {
        return Ok(());
    }
    cluster
        .reset_auto_increment(table)
        .await
        .map_err(|e| counter_error(&e))
}

/// The next value, for `SHOW CREATE TABLE`'s `AUTO_INCREMENT=n` (`None`
/// if the table has no counter or it stands at 1, as MySQL leaves it
/// out then).
pub async fn next_shown(cluster: &Cluster, table: &Table) -> Result<Option<u64>, SqlError> {
    if table.def().auto_increment_column().is_none() {
        return Ok(None);
    }
    let next = cluster
        .auto_increment_next(table)
        .await
        .map_err(|e| counter_error(&e))?;
    Ok((next > 1).then_some(next))
}

/// Checks an AUTO_INCREMENT column of a CREATE TABLE: an integer type
/// (1063 otherwise, as MySQL) and no DEFAULT (1067).
pub fn check_column(name: &str, ty: ColumnType, has_default: bool) -> Result<(), SqlError> {
    if ty.auto_increment_max().is_none() {
        return Err(SqlError::new(
            1063,
            "42000",
            format!("Incorrect column specifier for column '{name}'"),
        ));
    }
    if has_default {
        return Err(SqlError::new(
            1067,
            "42000",
            format!("Invalid default value for '{name}'"),
        ));
    }
    Ok(())
}

/// The table option `AUTO_INCREMENT [=] n` of a CREATE TABLE, if given.
pub fn start_option(options: &[SqlOption]) -> Result<Option<u64>, SqlError> {
    for o in options {
        if let SqlOption::KeyValue { key, value } = o {
            if key.value.eq_ignore_ascii_case("AUTO_INCREMENT") {
                return parse_start(&value.to_string()).map(Some);
            }
        }
    }
    Ok(None)
}

/// The `n` of `AUTO_INCREMENT = n` (a non-negative integer).
pub fn parse_start(text: &str) -> Result<u64, SqlError> {
    text.trim_matches('\'').parse::<u64>().map_err(|_| {
        SqlError::syntax(format!(
            "AUTO_INCREMENT={text}: the table option takes a non-negative integer"
        ))
    })
}

/// Starts a table's counter at `start` at least (its AUTO_INCREMENT=n):
/// the counter is raised past `n - 1` (at most to past the column's
/// largest value, where inserts then fail with 1467, as they would in
/// MySQL). Nothing for a table without an AUTO_INCREMENT column.
pub async fn start(cluster: &Cluster, table: &Table, start: Option<u64>) -> Result<(), SqlError> {
    let def = table.def();
    let (Some(n), Some(c)) = (start, def.auto_increment_column()) else {
        return Ok(());
    };
    let Some(max) = def.columns[usize::from(c)].ty.auto_increment_max() else {
        return Ok(());
    };
    if n <= 1 {
        return Ok(());
    }
    cluster
        .raise_auto_increment(table, (n - 1).min(max))
        .await
        .map_err(|e| counter_error(&e))
}

/// 1075: MySQL's "only one auto column and it must be a key".
pub fn not_a_key() -> SqlError {
    SqlError::new(
        1075,
        "42000",
        "Incorrect table definition; there can be only one auto column and it must be defined as a key",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_and_zero_ask_for_a_value_unless_the_mode_says_otherwise() {
        let mut a = AutoColumn {
            column: 0,
            ty: ColumnType::Int { unsigned: false },
            zero_generates: true,
        };
        assert!(a.generates(&Value::Null));
        assert!(a.generates(&Value::Int(0)));
        assert!(a.generates(&Value::UInt(0)));
        assert!(!a.generates(&Value::Int(5)));
        assert!(!a.generates(&Value::Int(-1)));
        a.zero_generates = false;
        assert!(!a.generates(&Value::Int(0)));
        assert!(a.generates(&Value::Null));
    }

    #[test]
    fn values_take_the_column_type_and_only_positive_values_raise() {
        let signed = AutoColumn {
            column: 0,
            ty: ColumnType::TinyInt { unsigned: false },
            zero_generates: true,
        };
        assert_eq!(signed.value(7), Value::Int(7));
        let unsigned = AutoColumn {
            ty: ColumnType::BigInt { unsigned: true },
            ..signed
        };
        assert_eq!(unsigned.value(7), Value::UInt(7));
        assert_eq!(explicit(&Value::Int(3)), Some(3));
        assert_eq!(explicit(&Value::UInt(9)), Some(9));
        assert_eq!(explicit(&Value::Int(-3)), None);
        assert_eq!(explicit(&Value::Int(0)), None);
        assert_eq!(explicit(&Value::Null), None);
    }

    #[test]
    fn only_rows_that_went_in_are_reported() {
        let rows: Vec<Vec<Value>> = [1, 2, 3, 40]
            .iter()
            .map(|&i| vec![Value::Int(i), Value::Int(0)])
            .collect();
        let generate = [true, true, true, false];
        // All in: the first generated, the last row's value.
        let all = reported(&rows, 0, &generate, &[true; 4]);
        assert_eq!(all.first_generated, Some(1));
        assert_eq!(all.last_value, Some(40));
        // The first row ignored: the second's value, not the first's.
        let r = reported(&rows, 0, &generate, &[false, true, false, false]);
        assert_eq!(r.first_generated, Some(2));
        assert_eq!(r.last_value, Some(2));
        // Only the explicit row went in: nothing generated, its value.
        let r = reported(&rows, 0, &generate, &[false, false, false, true]);
        assert_eq!(
            r,
            Reported {
                first_generated: None,
                last_value: Some(40)
            }
        );
        // Nothing went in: nothing reported.
        assert_eq!(
            reported(&rows, 0, &generate, &[false; 4]),
            Reported::default()
        );
    }

    #[test]
    fn exhausted_values_are_1467_and_other_errors_map_as_usual() {
        let e = counter_error(&ShoalError::with_detail(ErrorCode::BadValue, "past 127"));
        assert_eq!(e.code, 1467);
        assert!(e.message.contains("past 127"), "{}", e.message);
        assert_eq!(
            counter_error(&ShoalError::new(ErrorCode::NodeFailed)).code,
            1297
        );
    }
}
