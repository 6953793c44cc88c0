//! SQL's types over Shoal's column types: what a declared SQL type becomes
//! (`CREATE TABLE`), how SQL names and describes a Shoal column, how a
//! value from a statement is converted for a column with MySQL's errors
//! (strict mode), and how values are written in the text protocol.
//!
//! Strings are utf8mb4: `CHAR(n)` / `VARCHAR(n)` hold n characters, so
//! Shoal stores them in 4n bytes (`Char(4n)` / `VarChar(4n)`), as NDB does.
//! Reading a table back, a text column of `b` bytes is `b / 4` characters
//! when `b` is a multiple of 4 (every column SQL made), and otherwise `b`
//! characters limited by bytes only (a column the native API made with
//! a byte length of its own). `BINARY` / `VARBINARY` lengths are bytes.
//! `TEXT` / `BLOB` become `VARCHAR` / `VARBINARY` of what the row's
//! [`ROW_BYTES_MAX`](shoal_types::schema::ROW_BYTES_MAX) leaves.
//!
//! TIMESTAMP and DATETIME are seconds since 1970 in UTC; the SQL node
//! reads and writes them as `'YYYY-MM-DD HH:MM:SS'` in UTC (no time zone
//! conversion yet). DATE and TIME are in [`temporal`], DECIMAL in
//! [`decimal`].

pub mod decimal;
mod declared;
pub mod temporal;

use crate::outcome::{Column, ColumnKind, SqlError};
pub use declared::{declared_type, size_columns, Declared};
use shoal_types::value::{DATETIME_MAX, DATETIME_MIN};
use shoal_types::{ColumnDef, ColumnType, Value};
pub use temporal::{format_datetime, parse_date, parse_datetime, parse_time};

/// Bytes of one utf8mb4 character at most.
pub const UTF8MB4_BYTES: u16 = 4;
/// Longest `CHAR(n)`, in characters (MySQL's limit).
pub const CHAR_CHARS_MAX: u64 = 255;
/// Longest `BINARY(n)`, in bytes (MySQL's limit).
pub const BINARY_BYTES_MAX: u64 = 255;
/// The smallest size a `TEXT` / `BLOB` column gets when the row leaves
/// less: the create then fails as too large (1118).
pub const LOB_BYTES_MIN: usize = 256;

/// The characters a text column of type `ty` holds at most, if it has
/// such a limit (see the module's note on byte lengths).
pub fn char_limit(ty: ColumnType) -> Option<usize> {
    match ty {
        ColumnType::Char(n) | ColumnType::VarChar(n) if n.is_multiple_of(UTF8MB4_BYTES) => {
            Some(usize::from(n / UTF8MB4_BYTES))
        }
        _ => None,
    }
}

/// A text column's length in characters as SQL shows it.
fn shown_chars(n: u16) -> u16 {
    if n.is_multiple_of(UTF8MB4_BYTES) {
        n / UTF8MB4_BYTES
    } else {
        n
    }
}

/// The type as `DESCRIBE` and `SHOW CREATE TABLE` spell it.
pub fn sql_type_name(ty: ColumnType) -> String {
    let u = |unsigned: bool| if unsigned { " unsigned" } else { "" };
    match ty {
        ColumnType::TinyInt { unsigned } => format!("tinyint{}", u(unsigned)),
        ColumnType::SmallInt { unsigned } => format!("smallint{}", u(unsigned)),
        ColumnType::Int { unsigned } => format!("int{}", u(unsigned)),
        ColumnType::BigInt { unsigned } => format!("bigint{}", u(unsigned)),
        ColumnType::Float => "float".into(),
        ColumnType::Double => "double".into(),
        ColumnType::Char(n) => format!("char({})", shown_chars(n)),
        ColumnType::VarChar(n) => format!("varchar({})", shown_chars(n)),
        ColumnType::Binary(n) => format!("binary({n})"),
        ColumnType::VarBinary(n) => format!("varbinary({n})"),
        ColumnType::Timestamp => "timestamp".into(),
        ColumnType::DateTime => "datetime".into(),
        ColumnType::Date => "date".into(),
        ColumnType::Time => "time".into(),
        ColumnType::Decimal { precision, scale } => format!("decimal({precision},{scale})"),
    }
}

pub fn is_text(ty: ColumnType) -> bool {
    matches!(ty, ColumnType::Char(_) | ColumnType::VarChar(_))
}

pub fn is_integer(ty: ColumnType) -> bool {
    matches!(
        ty,
        ColumnType::TinyInt { .. }
            | ColumnType::SmallInt { .. }
            | ColumnType::Int { .. }
            | ColumnType::BigInt { .. }
    )
}

/// The MySQL column kind of a Shoal type.
pub fn column_kind(ty: ColumnType) -> ColumnKind {
    match ty {
        ColumnType::TinyInt { .. } => ColumnKind::Tiny,
        ColumnType::SmallInt { .. } => ColumnKind::Short,
        ColumnType::Int { .. } => ColumnKind::Long,
        ColumnType::BigInt { .. } => ColumnKind::LongLong,
        ColumnType::Float => ColumnKind::Float,
        ColumnType::Double => ColumnKind::Double,
        ColumnType::Char(_) | ColumnType::Binary(_) => ColumnKind::String,
        ColumnType::VarChar(_) | ColumnType::VarBinary(_) => ColumnKind::VarString,
        ColumnType::Timestamp => ColumnKind::Timestamp,
        ColumnType::DateTime => ColumnKind::DateTime,
        ColumnType::Date => ColumnKind::Date,
        ColumnType::Time => ColumnKind::Time,
        ColumnType::Decimal { .. } => ColumnKind::NewDecimal,
    }
}

/// A result set's column for table column `def`.
pub fn result_column(def: &ColumnDef, table: &str, schema: &str, primary_key: bool) -> Column {
    let (length, decimals, unsigned) = match def.ty {
        ColumnType::TinyInt { unsigned } => (4, 0, unsigned),
        ColumnType::SmallInt { unsigned } => (6, 0, unsigned),
        ColumnType::Int { unsigned } => (11, 0, unsigned),
        ColumnType::BigInt { unsigned } => (20, 0, unsigned),
        ColumnType::Float => (12, 31, false),
        ColumnType::Double => (22, 31, false),
        ColumnType::Char(n) | ColumnType::VarChar(n) => (u32::from(n), 0, false),
        ColumnType::Binary(n) | ColumnType::VarBinary(n) => (u32::from(n), 0, false),
        ColumnType::Timestamp | ColumnType::DateTime => (19, 0, false),
        ColumnType::Date => (10, 0, false),
        ColumnType::Time => (10, 0, false),
        // Digits, a sign and a point, as MySQL counts a DECIMAL's length.
        ColumnType::Decimal { precision, scale } => (
            u32::from(precision) + 1 + u32::from(scale > 0),
            scale,
            false,
        ),
    };
    Column {
        name: def.name.clone(),
        table: table.to_string(),
        schema: schema.to_string(),
        kind: column_kind(def.ty),
        length,
        decimals,
        nullable: def.nullable,
        unsigned,
        binary: !is_text(def.ty),
        primary_key,
    }
}

/// A result set's column for an expression, typed by the value it gave
/// (`None`: no row to tell; a string then).
pub fn expression_column(name: &str, sample: Option<&Value>) -> Column {
    let (kind, length, decimals, binary, unsigned) = match sample {
        Some(Value::Int(_)) => (ColumnKind::LongLong, 21, 0, true, false),
        Some(Value::UInt(_)) => (ColumnKind::LongLong, 20, 0, true, true),
        Some(Value::Float(_)) | Some(Value::Double(_)) => (ColumnKind::Double, 23, 31, true, false),
        Some(Value::Bytes(b)) => (ColumnKind::VarString, b.len().max(1) as u32, 0, true, false),
        Some(Value::Str(s)) => (
            ColumnKind::VarString,
            (s.len().max(1) * 4) as u32,
            0,
            false,
            false,
        ),
        Some(Value::Timestamp(_)) => (ColumnKind::Timestamp, 19, 0, true, false),
        Some(Value::DateTime(_)) => (ColumnKind::DateTime, 19, 0, true, false),
        Some(Value::Date(_)) => (ColumnKind::Date, 10, 0, true, false),
        Some(Value::Time(_)) => (ColumnKind::Time, 10, 0, true, false),
        Some(Value::Decimal(d)) => (
            ColumnKind::NewDecimal,
            // MySQL's length of a DECIMAL(38, scale) expression.
            40 + u32::from(d.scale > 0),
            d.scale,
            true,
            false,
        ),
        Some(Value::Null) => (ColumnKind::Null, 0, 0, true, false),
        None => (ColumnKind::VarString, 256, 0, false, false),
    };
    Column {
        name: name.to_string(),
        table: String::new(),
        schema: String::new(),
        kind,
        length,
        decimals,
        nullable: true,
        unsigned,
        binary,
        primary_key: false,
    }
}

// ---------------------------------------------------------------------------
// Values for columns

/// The error of a value that does not fit column `col` (1264 out of
/// range).
fn out_of_range(col: &str, row: usize) -> SqlError {
    SqlError::new(
        1264,
        "22003",
        format!("Out of range value for column '{col}' at row {row}"),
    )
}

fn incorrect(kind: &str, shown: &str, col: &str, row: usize) -> SqlError {
    SqlError::new(
        1366,
        "HY000",
        format!("Incorrect {kind} value: '{shown}' for column '{col}' at row {row}"),
    )
}

pub fn too_long(col: &str, row: usize) -> SqlError {
    SqlError::new(
        1406,
        "22001",
        format!("Data too long for column '{col}' at row {row}"),
    )
}

pub fn null_not_allowed(col: &str) -> SqlError {
    SqlError::new(1048, "23000", format!("Column '{col}' cannot be null"))
}

fn incorrect_datetime(shown: &str, col: &str, row: usize) -> SqlError {
    SqlError::new(
        1292,
        "22007",
        format!("Incorrect datetime value: '{shown}' for column '{col}' at row {row}"),
    )
}

/// Parses a decimal number as MySQL reads a string in a numeric context,
/// strictly: the whole (trimmed) string must be a number.
pub fn parse_number(s: &str) -> Option<Value> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    if let Ok(i) = t.parse::<i64>() {
        return Some(Value::Int(i));
    }
    if let Ok(u) = t.parse::<u64>() {
        return Some(Value::UInt(u));
    }
    let f = t.parse::<f64>().ok()?;
    // `parse` takes "inf" and "nan", which SQL does not.
    (f.is_finite()
        && t.bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'+' | b'-')))
    .then_some(Value::Double(f))
}

/// Rounds a double to an integer as MySQL stores one (half away from
/// zero), if in `lo..=hi`.
fn round_in(f: f64, lo: i128, hi: i128) -> Option<i128> {
    let r = f.round();
    (r.is_finite() && r >= lo as f64 && r <= hi as f64).then_some(r as i128)
}

fn int_range(ty: ColumnType) -> (i128, i128) {
    match ty {
        ColumnType::TinyInt { unsigned: false } => (i8::MIN.into(), i8::MAX.into()),
        ColumnType::TinyInt { unsigned: true } => (0, u8::MAX.into()),
        ColumnType::SmallInt { unsigned: false } => (i16::MIN.into(), i16::MAX.into()),
        ColumnType::SmallInt { unsigned: true } => (0, u16::MAX.into()),
        ColumnType::Int { unsigned: false } => (i32::MIN.into(), i32::MAX.into()),
        ColumnType::Int { unsigned: true } => (0, u32::MAX.into()),
        ColumnType::BigInt { unsigned: false } => (i64::MIN.into(), i64::MAX.into()),
        ColumnType::BigInt { unsigned: true } => (0, u64::MAX.into()),
        _ => unreachable!("an integer type"),
    }
}

fn int_value(ty: ColumnType, v: i128) -> Value {
    match ty {
        ColumnType::TinyInt { unsigned: true }
        | ColumnType::SmallInt { unsigned: true }
        | ColumnType::Int { unsigned: true }
        | ColumnType::BigInt { unsigned: true } => Value::UInt(v as u64),
        _ => Value::Int(v as i64),
    }
}

/// The text a value reads as in a string context.
pub fn value_text(v: &Value) -> Vec<u8> {
    text(v).unwrap_or_default()
}

/// Converts `v`, a value from a statement, for column `col` (a write's
/// value; `row` counts from 1 for messages), as MySQL's strict mode does:
/// numbers are rounded into integer columns and refused out of range
/// (1264), strings must be numbers for numeric columns (1366) and fit
/// text columns (1406), dates must be dates (1292), NULL needs a
/// nullable column (1048).
pub fn coerce(v: &Value, col: &ColumnDef, row: usize) -> Result<Value, SqlError> {
    let name = col.name.as_str();
    if v.is_null() {
        return if col.nullable {
            Ok(Value::Null)
        } else {
            Err(null_not_allowed(name))
        };
    }
    match col.ty {
        ty @ (ColumnType::TinyInt { .. }
        | ColumnType::SmallInt { .. }
        | ColumnType::Int { .. }
        | ColumnType::BigInt { .. }) => {
            let (lo, hi) = int_range(ty);
            let n: i128 = match v {
                Value::Int(i) => (*i).into(),
                Value::UInt(u) => (*u).into(),
                Value::Float(f) => {
                    round_in(f64::from(*f), lo, hi).ok_or_else(|| out_of_range(name, row))?
                }
                Value::Double(f) => round_in(*f, lo, hi).ok_or_else(|| out_of_range(name, row))?,
                Value::Str(_) | Value::Bytes(_) => {
                    let s = String::from_utf8_lossy(v.as_bytes().expect("bytes")).into_owned();
                    match parse_number(&s) {
                        Some(Value::Int(i)) => i.into(),
                        Some(Value::UInt(u)) => u.into(),
                        Some(Value::Double(f)) => {
                            round_in(f, lo, hi).ok_or_else(|| out_of_range(name, row))?
                        }
                        _ => return Err(incorrect("integer", &s, name, row)),
                    }
                }
                Value::Decimal(d) => d
                    .rescale(0)
                    .map(|d| d.unscaled)
                    .ok_or_else(|| out_of_range(name, row))?,
                Value::Timestamp(_) | Value::DateTime(_) | Value::Date(_) | Value::Time(_) => {
                    let s = String::from_utf8_lossy(&value_text(v)).into_owned();
                    return Err(incorrect("integer", &s, name, row));
                }
                Value::Null => unreachable!("handled"),
            };
            if n < lo || n > hi {
                return Err(out_of_range(name, row));
            }
            Ok(int_value(ty, n))
        }
        ColumnType::Float | ColumnType::Double => {
            let f = match v {
                Value::Int(i) => *i as f64,
                Value::UInt(u) => *u as f64,
                Value::Float(f) => f64::from(*f),
                Value::Double(f) => *f,
                Value::Str(_) | Value::Bytes(_) => {
                    let s = String::from_utf8_lossy(v.as_bytes().expect("bytes")).into_owned();
                    match parse_number(&s) {
                        Some(Value::Int(i)) => i as f64,
                        Some(Value::UInt(u)) => u as f64,
                        Some(Value::Double(f)) => f,
                        _ => return Err(incorrect("double", &s, name, row)),
                    }
                }
                Value::Decimal(d) => d.to_f64(),
                Value::Timestamp(_) | Value::DateTime(_) | Value::Date(_) | Value::Time(_) => {
                    let s = String::from_utf8_lossy(&value_text(v)).into_owned();
                    return Err(incorrect("double", &s, name, row));
                }
                Value::Null => unreachable!("handled"),
            };
            if !f.is_finite() {
                return Err(out_of_range(name, row));
            }
            if col.ty == ColumnType::Float {
                if f.abs() > f64::from(f32::MAX) {
                    return Err(out_of_range(name, row));
                }
                Ok(Value::Float(f as f32))
            } else {
                Ok(Value::Double(f))
            }
        }
        ColumnType::Char(n) | ColumnType::VarChar(n) => {
            let text = match v {
                Value::Str(s) => s.clone(),
                Value::Bytes(b) => match String::from_utf8(b.clone()) {
                    Ok(s) => s,
                    Err(_) => {
                        let hex: String = b.iter().take(8).map(|x| format!("\\x{x:02X}")).collect();
                        return Err(incorrect("string", &hex, name, row));
                    }
                },
                other => String::from_utf8_lossy(&value_text(other)).into_owned(),
            };
            // CHAR drops trailing spaces (they are its padding).
            let text = if matches!(col.ty, ColumnType::Char(_)) {
                text.trim_end_matches(' ').to_string()
            } else {
                text
            };
            let chars_ok = char_limit(col.ty).is_none_or(|limit| text.chars().count() <= limit);
            if !chars_ok || text.len() > usize::from(n) {
                return Err(too_long(name, row));
            }
            Ok(Value::Str(text))
        }
        ColumnType::Binary(n) | ColumnType::VarBinary(n) => {
            let bytes = match v {
                Value::Str(s) => s.as_bytes().to_vec(),
                Value::Bytes(b) => b.clone(),
                other => value_text(other),
            };
            if bytes.len() > usize::from(n) {
                return Err(too_long(name, row));
            }
            Ok(Value::Bytes(bytes))
        }
        ColumnType::Timestamp | ColumnType::DateTime => {
            let secs = match v {
                Value::Timestamp(s) => i64::from(*s),
                Value::DateTime(s) => *s,
                Value::Date(d) => temporal::seconds_of_date(*d),
                Value::Str(_) | Value::Bytes(_) => {
                    let s = String::from_utf8_lossy(v.as_bytes().expect("bytes")).into_owned();
                    parse_datetime(&s).ok_or_else(|| incorrect_datetime(&s, name, row))?
                }
                Value::Int(_) | Value::UInt(_) => {
                    let s = String::from_utf8_lossy(&value_text(v)).into_owned();
                    parse_datetime(&s).ok_or_else(|| incorrect_datetime(&s, name, row))?
                }
                other => {
                    let s = String::from_utf8_lossy(&value_text(other)).into_owned();
                    return Err(incorrect_datetime(&s, name, row));
                }
            };
            if col.ty == ColumnType::Timestamp {
                // MySQL's TIMESTAMP range starts one second after the epoch
                // (0 is its zero date); Shoal's ends in 2106.
                match u32::try_from(secs) {
                    Ok(s) if s > 0 => Ok(Value::Timestamp(s)),
                    _ => Err(incorrect_datetime(&format_datetime(secs), name, row)),
                }
            } else if (DATETIME_MIN..=DATETIME_MAX).contains(&secs) {
                Ok(Value::DateTime(secs))
            } else {
                Err(incorrect_datetime(&format_datetime(secs), name, row))
            }
        }
        ty @ (ColumnType::Date | ColumnType::Time) => temporal::coerce_temporal(v, ty, name, row),
        ColumnType::Decimal { precision, scale } => {
            decimal::coerce_decimal(v, precision, scale, name, row)
        }
    }
}

/// `v` as a value of column type `ty` that compares exactly as SQL would
/// compare `v` with the column's values (for keys, index bounds and
/// pushed-down filters); `None` when no such value exists (a fraction for
/// an integer column, a number for a text column, a string with trailing
/// spaces for a VARCHAR, ...): the caller then compares in the SQL node.
pub fn exact_for_column(v: &Value, ty: ColumnType) -> Option<Value> {
    match ty {
        ColumnType::TinyInt { .. }
        | ColumnType::SmallInt { .. }
        | ColumnType::Int { .. }
        | ColumnType::BigInt { .. } => {
            let n: i128 = match v {
                Value::Int(i) => (*i).into(),
                Value::UInt(u) => (*u).into(),
                Value::Double(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => *f as i128,
                Value::Float(f) if f.fract() == 0.0 && f.abs() < 1.0e7 => *f as i128,
                Value::Decimal(d) => d.rescale_exact(0)?.unscaled,
                Value::Str(s) => match s.parse::<i64>() {
                    Ok(i) => i.into(),
                    Err(_) => s.parse::<u64>().ok()?.into(),
                },
                _ => return None,
            };
            let (lo, hi) = int_range(ty);
            (lo..=hi).contains(&n).then(|| int_value(ty, n))
        }
        ColumnType::Float => {
            let f = match v {
                Value::Int(i) => *i as f64,
                Value::UInt(u) => *u as f64,
                Value::Float(f) => return Some(Value::Float(*f)),
                Value::Double(f) => *f,
                // MySQL compares a decimal with a float as doubles.
                Value::Decimal(d) => d.to_f64(),
                _ => return None,
            };
            // Only a value a FLOAT holds exactly compares alike.
            (f64::from(f as f32) == f).then_some(Value::Float(f as f32))
        }
        ColumnType::Double => match v {
            Value::Int(i) if i.unsigned_abs() < (1 << 53) => Some(Value::Double(*i as f64)),
            Value::UInt(u) if *u < (1 << 53) => Some(Value::Double(*u as f64)),
            Value::Float(f) => Some(Value::Double(f64::from(*f))),
            Value::Double(f) => Some(Value::Double(*f)),
            Value::Decimal(d) => Some(Value::Double(d.to_f64())),
            _ => None,
        },
        // A byte string that is text (a prepared statement's parameter
        // comes as X'...') compares as that text.
        ColumnType::Char(n) | ColumnType::VarChar(n) => {
            let s = match v {
                Value::Str(s) => s.as_str(),
                Value::Bytes(b) => std::str::from_utf8(b).ok()?,
                _ => return None,
            };
            (!s.ends_with(' ') && s.len() <= usize::from(n)).then(|| Value::Str(s.to_string()))
        }
        ColumnType::Binary(n) => match v.as_bytes() {
            Some(b) if b.len() == usize::from(n) => Some(Value::Bytes(b.to_vec())),
            _ => None,
        },
        ColumnType::VarBinary(n) => match v.as_bytes() {
            Some(b) if b.len() <= usize::from(n) => Some(Value::Bytes(b.to_vec())),
            _ => None,
        },
        ColumnType::Timestamp | ColumnType::DateTime => {
            let secs = match v {
                Value::Timestamp(s) => i64::from(*s),
                Value::DateTime(s) => *s,
                Value::Date(d) => temporal::seconds_of_date(*d),
                Value::Str(s) => parse_datetime(s)?,
                _ => return None,
            };
            if ty == ColumnType::Timestamp {
                u32::try_from(secs).ok().map(Value::Timestamp)
            } else {
                (DATETIME_MIN..=DATETIME_MAX)
                    .contains(&secs)
                    .then_some(Value::DateTime(secs))
            }
        }
        ColumnType::Date | ColumnType::Time => temporal::exact_temporal(v, ty),
        ColumnType::Decimal { precision, scale } => decimal::exact_decimal(v, precision, scale),
    }
}

// ---------------------------------------------------------------------------
// Text protocol

/// A value in the text protocol (`None`: NULL): integers in decimal,
/// floats as MySQL prints them, strings as their bytes, times as
/// `'YYYY-MM-DD HH:MM:SS'`, `'YYYY-MM-DD'` and `'[-]HH:MM:SS'`, decimals
/// with exactly their scale's digits after the point.
pub fn text(v: &Value) -> Option<Vec<u8>> {
    Some(match v {
        Value::Null => return None,
        Value::Int(i) => i.to_string().into_bytes(),
        Value::UInt(u) => u.to_string().into_bytes(),
        Value::Float(f) => format_float(*f).into_bytes(),
        Value::Double(f) => format_double(*f).into_bytes(),
        Value::Str(s) => s.as_bytes().to_vec(),
        Value::Bytes(b) => b.clone(),
        Value::Timestamp(s) => format_datetime(i64::from(*s)).into_bytes(),
        Value::DateTime(s) => format_datetime(*s).into_bytes(),
        Value::Date(d) => temporal::date_text(*d).into_bytes(),
        Value::Time(t) => temporal::time_text(*t).into_bytes(),
        Value::Decimal(d) => d.to_string().into_bytes(),
    })
}

/// `digits` significant digits of `x` and its decimal exponent.
fn significant(x: f64, digits: usize) -> (String, i32) {
    let s = format!("{:.*e}", digits.saturating_sub(1), x.abs());
    let (mantissa, exp) = s.split_once('e').expect("an exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    (digits, exp.parse().expect("a number"))
}

/// Writes `digits` (no sign, no point, first digit non-zero) × 10^`exp`
/// as MySQL does: positional from 1e-7 up to 1e15, otherwise `1.5e20`.
fn place(negative: bool, digits: &str, exp: i32) -> String {
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    if (-7..15).contains(&exp) {
        if exp < 0 {
            out.push_str("0.");
            for _ in 0..(-exp - 1) {
                out.push('0');
            }
            out.push_str(digits);
        } else {
            let int_len = exp as usize + 1;
            if digits.len() <= int_len {
                out.push_str(digits);
                for _ in digits.len()..int_len {
                    out.push('0');
                }
            } else {
                out.push_str(&digits[..int_len]);
                out.push('.');
                out.push_str(&digits[int_len..]);
            }
        }
    } else {
        out.push_str(&digits[..1]);
        if digits.len() > 1 {
            out.push('.');
            out.push_str(&digits[1..]);
        }
        out.push('e');
        out.push_str(&exp.to_string());
    }
    out
}

/// A DOUBLE as MySQL prints it: the shortest digits that read back as the
/// same number.
pub fn format_double(x: f64) -> String {
    if x == 0.0 {
        return "0".into();
    }
    if !x.is_finite() {
        return if x.is_nan() {
            "NaN".into()
        } else if x > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        };
    }
    let s = format!("{:e}", x.abs());
    let (mantissa, exp) = s.split_once('e').expect("an exponent");
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    place(x < 0.0, &digits, exp.parse().expect("a number"))
}

/// A FLOAT as MySQL prints it: six significant digits.
pub fn format_float(x: f32) -> String {
    let x = f64::from(x);
    if x == 0.0 {
        return "0".into();
    }
    if !x.is_finite() {
        return format_double(x);
    }
    let (digits, exp) = significant(x, 6);
    place(x < 0.0, &digits, exp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_mysql_does() {
        assert_eq!(format_double(0.1), "0.1");
        assert_eq!(format_double(-2.5), "-2.5");
        assert_eq!(format_double(100.0), "100");
        assert_eq!(format_double(1e20), "1e20");
        assert_eq!(format_double(1.5e-10), "1.5e-10");
        assert_eq!(format_double(123456789012345.0), "123456789012345");
        assert_eq!(format_double(0.000001), "0.000001");
        assert_eq!(format_float(1.234_567_9), "1.23457");
        assert_eq!(format_float(1.1), "1.1");
        assert_eq!(format_float(-0.5), "-0.5");
        assert_eq!(format_float(1234567.0), "1234570");
        assert_eq!(format_float(1e20), "1e20");
        assert_eq!(format_float(0.0), "0");
    }

    #[test]
    fn values_convert_with_mysql_errors() {
        let int = ColumnDef::new("a", ColumnType::TinyInt { unsigned: false });
        assert_eq!(coerce(&Value::Int(127), &int, 1).unwrap(), Value::Int(127));
        assert_eq!(coerce(&Value::Int(128), &int, 2).unwrap_err().code, 1264);
        assert_eq!(coerce(&Value::Double(1.5), &int, 1).unwrap(), Value::Int(2));
        assert_eq!(coerce(&"12".into(), &int, 1).unwrap(), Value::Int(12));
        let e = coerce(&"x1".into(), &int, 3).unwrap_err();
        assert_eq!((e.code, e.message.contains("at row 3")), (1366, true));
        assert_eq!(coerce(&Value::Null, &int, 1).unwrap_err().code, 1048);
        let u = ColumnDef::new("u", ColumnType::Int { unsigned: true });
        assert_eq!(coerce(&Value::Int(-1), &u, 1).unwrap_err().code, 1264);
        let v = ColumnDef::new("v", ColumnType::VarChar(8));
        assert_eq!(
            coerce(&"éé".into(), &v, 1).unwrap(),
            Value::Str("éé".into())
        );
        assert_eq!(coerce(&"abc".into(), &v, 1).unwrap_err().code, 1406);
        assert_eq!(
            coerce(&Value::Int(42), &v, 1).unwrap(),
            Value::Str("42".into())
        );
        let ts = ColumnDef::new("t", ColumnType::Timestamp).nullable();
        assert_eq!(
            coerce(&"1970-01-01 00:00:10".into(), &ts, 1).unwrap(),
            Value::Timestamp(10)
        );
        assert_eq!(
            coerce(&"1969-12-31 00:00:00".into(), &ts, 1)
                .unwrap_err()
                .code,
            1292
        );
        assert_eq!(coerce(&Value::Null, &ts, 1).unwrap(), Value::Null);
    }
}
