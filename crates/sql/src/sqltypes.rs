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
//! [`ROW_BYTES_MAX`] leaves.
//!
//! TIMESTAMP and DATETIME are seconds since 1970 in UTC; the SQL node
//! reads and writes them as `'YYYY-MM-DD HH:MM:SS'` in UTC (no time zone
//! conversion yet).

use crate::outcome::{Column, ColumnKind, SqlError};
use shoal_types::schema::ROW_BYTES_MAX;
use shoal_types::value::{DATETIME_MAX, DATETIME_MIN};
use shoal_types::{ColumnDef, ColumnType, Value};
use sqlparser::ast::{BinaryLength, CharacterLength, DataType, ExactNumberInfo};

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
// Declared types (CREATE TABLE)

/// A column type as declared, before the row's budget sizes the variable
/// ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Declared {
    Fixed(ColumnType),
    /// `VARCHAR(n)`: n characters.
    VarText {
        chars: u64,
    },
    /// `VARBINARY(n)`: n bytes.
    VarBytes {
        bytes: u64,
    },
    /// `TEXT` and its kin: what the row leaves.
    Text,
    /// `BLOB` and its kin: what the row leaves.
    Blob,
}

fn unsupported_type(dt: &DataType) -> SqlError {
    SqlError::not_supported(format!("column type {dt}"))
}

fn char_length(len: &Option<CharacterLength>, default: u64) -> Result<u64, SqlError> {
    match len {
        None => Ok(default),
        Some(CharacterLength::IntegerLength { length, .. }) => Ok(*length),
        Some(CharacterLength::Max) => Err(SqlError::syntax("a length of MAX is not MySQL")),
    }
}

/// What a declared SQL type becomes. Errors: a type Shoal has no column
/// for (1235), a bad length (1074 / 1439 as MySQL).
pub fn declared_type(name: &str, dt: &DataType) -> Result<Declared, SqlError> {
    use ColumnType as T;
    let fixed = |t| Ok(Declared::Fixed(t));
    match dt {
        DataType::TinyInt(_) | DataType::Bool | DataType::Boolean => {
            fixed(T::TinyInt { unsigned: false })
        }
        DataType::TinyIntUnsigned(_) | DataType::UTinyInt => fixed(T::TinyInt { unsigned: true }),
        DataType::SmallInt(_) | DataType::Int2(_) => fixed(T::SmallInt { unsigned: false }),
        DataType::SmallIntUnsigned(_) | DataType::Int2Unsigned(_) | DataType::USmallInt => {
            fixed(T::SmallInt { unsigned: true })
        }
        // MEDIUMINT has no 3-byte type here: an INT holds it.
        DataType::MediumInt(_) | DataType::Int(_) | DataType::Integer(_) | DataType::Int4(_) => {
            fixed(T::Int { unsigned: false })
        }
        DataType::MediumIntUnsigned(_)
        | DataType::IntUnsigned(_)
        | DataType::IntegerUnsigned(_)
        | DataType::Int4Unsigned(_) => fixed(T::Int { unsigned: true }),
        DataType::BigInt(_) | DataType::Int8(_) => fixed(T::BigInt { unsigned: false }),
        DataType::BigIntUnsigned(_) | DataType::Int8Unsigned(_) | DataType::UBigInt => {
            fixed(T::BigInt { unsigned: true })
        }
        DataType::Float(info) => match info {
            // FLOAT(p) with p > 24 is a DOUBLE in MySQL.
            ExactNumberInfo::Precision(p) if *p > 24 => fixed(T::Double),
            _ => fixed(T::Float),
        },
        DataType::Real | DataType::Double(_) | DataType::DoublePrecision => fixed(T::Double),
        DataType::Char(len) | DataType::Character(len) => {
            let chars = char_length(len, 1)?;
            if chars > CHAR_CHARS_MAX {
                return Err(SqlError::new(
                    1074,
                    "42000",
                    format!(
                        "Column length too big for column '{name}' (max = {CHAR_CHARS_MAX}); use BLOB or TEXT instead"
                    ),
                ));
            }
            if chars == 0 {
                return Err(SqlError::not_supported("CHAR(0)"));
            }
            fixed(T::Char(chars as u16 * UTF8MB4_BYTES))
        }
        DataType::Varchar(len) | DataType::CharacterVarying(len) | DataType::CharVarying(len) => {
            let chars = match len {
                None => return Err(SqlError::syntax("VARCHAR needs a length: VARCHAR(n)")),
                Some(_) => char_length(len, 0)?,
            };
            if chars == 0 {
                return Err(SqlError::not_supported("VARCHAR(0)"));
            }
            Ok(Declared::VarText { chars })
        }
        DataType::Binary(len) => {
            let bytes = len.unwrap_or(1);
            if bytes > BINARY_BYTES_MAX {
                return Err(SqlError::new(
                    1074,
                    "42000",
                    format!(
                        "Column length too big for column '{name}' (max = {BINARY_BYTES_MAX}); use BLOB or TEXT instead"
                    ),
                ));
            }
            if bytes == 0 {
                return Err(SqlError::not_supported("BINARY(0)"));
            }
            fixed(T::Binary(bytes as u16))
        }
        DataType::Varbinary(len) => match len {
            Some(BinaryLength::IntegerLength { length }) if *length > 0 => {
                Ok(Declared::VarBytes { bytes: *length })
            }
            Some(BinaryLength::IntegerLength { .. }) => {
                Err(SqlError::not_supported("VARBINARY(0)"))
            }
            _ => Err(SqlError::syntax("VARBINARY needs a length: VARBINARY(n)")),
        },
        DataType::Text | DataType::TinyText | DataType::MediumText | DataType::LongText => {
            Ok(Declared::Text)
        }
        DataType::Blob(_) | DataType::TinyBlob | DataType::MediumBlob | DataType::LongBlob => {
            Ok(Declared::Blob)
        }
        DataType::Timestamp(_, _) => fixed(T::Timestamp),
        DataType::Datetime(_) => fixed(T::DateTime),
        other => Err(unsupported_type(other)),
    }
}

/// Bytes a column of this type takes in the row at most (as
/// `TableDef::validate` counts them).
fn row_bytes(ty: ColumnType) -> usize {
    ty.max_size() + if ty.is_var() { 2 } else { 0 }
}

fn row_too_large(row_bytes: usize) -> SqlError {
    SqlError::new(
        1118,
        "42000",
        format!(
            "Row size too large. The maximum row size for a Shoal table is {ROW_BYTES_MAX} bytes, this one needs at least {row_bytes}; use shorter columns"
        ),
    )
}

/// Sizes the declared columns of one table within [`ROW_BYTES_MAX`]:
/// fixed columns and `VARBINARY(n)` as declared, `VARCHAR(n)` at 4n bytes,
/// lowered towards n bytes (longest first) if the row would not fit, and
/// `TEXT` / `BLOB` sharing what is left. Fails (1118) when even that does
/// not fit.
pub fn size_columns(declared: &[Declared]) -> Result<Vec<ColumnType>, SqlError> {
    let cap = |n: u64| n.min(u64::from(u16::MAX));
    let mut types: Vec<Option<ColumnType>> = declared
        .iter()
        .map(|d| match *d {
            Declared::Fixed(t) => Some(t),
            Declared::VarText { chars } => Some(ColumnType::VarChar(cap(
                chars.saturating_mul(u64::from(UTF8MB4_BYTES))
            ) as u16)),
            Declared::VarBytes { bytes } => Some(ColumnType::VarBinary(cap(bytes) as u16)),
            Declared::Text | Declared::Blob => None,
        })
        .collect();
    let lobs = declared
        .iter()
        .filter(|d| matches!(d, Declared::Text | Declared::Blob))
        .count();
    let reserve = lobs * (LOB_BYTES_MIN + 2);
    let used = |types: &[Option<ColumnType>]| -> usize {
        types.iter().flatten().map(|&t| row_bytes(t)).sum()
    };
    // Lower the longest VARCHARs first, never below one byte a character,
    // a multiple of 4 bytes, until the row fits with the LOB minimum.
    while used(&types) + reserve > ROW_BYTES_MAX {
        let longest = types
            .iter()
            .enumerate()
            .filter_map(|(i, t)| match (t, declared[i]) {
                (Some(ColumnType::VarChar(n)), Declared::VarText { chars })
                    if u64::from(*n) > chars.min(u64::from(u16::MAX)) + 3 =>
                {
                    Some((i, *n))
                }
                _ => None,
            })
            .max_by_key(|&(_, n)| n);
        let Some((i, n)) = longest else {
            return Err(row_too_large(used(&types) + reserve));
        };
        let over = used(&types) + reserve - ROW_BYTES_MAX;
        let Declared::VarText { chars } = declared[i] else {
            unreachable!("only VARCHARs are lowered")
        };
        let floor = chars.min(u64::from(u16::MAX)) as usize;
        let wanted = (usize::from(n).saturating_sub(over)).max(floor);
        // A multiple of 4 keeps the column's character count exact.
        let lowered = (wanted.div_ceil(4) * 4).min(usize::from(n) - 4).max(floor);
        types[i] = Some(ColumnType::VarChar(lowered as u16));
    }
    if let Some(each) = (ROW_BYTES_MAX - used(&types)).checked_div(lobs) {
        // Each LOB takes its share, less its 2-byte length, rounded down
        // to whole characters.
        let share = each.saturating_sub(2) / 4 * 4;
        if share < LOB_BYTES_MIN {
            return Err(row_too_large(used(&types) + reserve));
        }
        let share = share.min(usize::from(u16::MAX) / 4 * 4) as u16;
        for (t, d) in types.iter_mut().zip(declared) {
            match d {
                Declared::Text => *t = Some(ColumnType::VarChar(share)),
                Declared::Blob => *t = Some(ColumnType::VarBinary(share)),
                _ => {}
            }
        }
    }
    Ok(types
        .into_iter()
        .map(|t| t.expect("every type sized"))
        .collect())
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
                Value::Timestamp(_) | Value::DateTime(_) => {
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
                Value::Timestamp(_) | Value::DateTime(_) => {
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
    }
}

// ---------------------------------------------------------------------------
// Text protocol

/// A value in the text protocol (`None`: NULL): integers in decimal,
/// floats as MySQL prints them, strings as their bytes, times as
/// `'YYYY-MM-DD HH:MM:SS'`.
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

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day number (days since 1970-01-01).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// Seconds since 1970 (UTC) as `YYYY-MM-DD HH:MM:SS`.
pub fn format_datetime(secs: i64) -> String {
    let (days, rest) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}",
        rest / 3600,
        rest / 60 % 60,
        rest % 60
    )
}

/// Reads `YYYY-MM-DD[ HH:MM:SS[.fraction]]` (also `T` for the space, and
/// `YYYYMMDD[HHMMSS]` digits) as seconds since 1970 UTC; `None` if it is
/// not a valid date and time (zero dates included). A fraction is
/// rounded to the second, as a column without fractional seconds does.
pub fn parse_datetime(s: &str) -> Option<i64> {
    let s = s.trim();
    let (y, mo, d, h, mi, se, frac) = if s.bytes().all(|b| b.is_ascii_digit()) {
        let n = |r: std::ops::Range<usize>| s.get(r)?.parse::<u32>().ok();
        match s.len() {
            8 => (n(0..4)?, n(4..6)?, n(6..8)?, 0, 0, 0, 0.0),
            14 => (
                n(0..4)?,
                n(4..6)?,
                n(6..8)?,
                n(8..10)?,
                n(10..12)?,
                n(12..14)?,
                0.0,
            ),
            _ => return None,
        }
    } else {
        let (date, time) = match s.split_once([' ', 'T']) {
            Some((d, t)) => (d, Some(t.trim())),
            None => (s, None),
        };
        let mut parts = date.split('-');
        let y: u32 = parts.next()?.parse().ok()?;
        let mo: u32 = parts.next()?.parse().ok()?;
        let d: u32 = parts.next()?.parse().ok()?;
        if parts.next().is_some() {
            return None;
        }
        let (h, mi, se, frac) = match time {
            None => (0, 0, 0, 0.0),
            Some(t) => {
                let (hms, frac) = match t.split_once('.') {
                    Some((hms, f)) if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) => {
                        (hms, format!("0.{f}").parse::<f64>().ok()?)
                    }
                    Some(_) => return None,
                    None => (t, 0.0),
                };
                let mut p = hms.split(':');
                let h: u32 = p.next()?.parse().ok()?;
                let mi: u32 = p.next().unwrap_or("0").parse().ok()?;
                let se: u32 = p.next().unwrap_or("0").parse().ok()?;
                if p.next().is_some() {
                    return None;
                }
                (h, mi, se, frac)
            }
        };
        (y, mo, d, h, mi, se, frac)
    };
    let y = i64::from(y);
    if !(1..=12).contains(&mo) || d == 0 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 59
    {
        return None;
    }
    let secs = days_from_civil(y, mo, d) * 86_400
        + i64::from(h) * 3600
        + i64::from(mi) * 60
        + i64::from(se);
    Some(secs + i64::from(frac >= 0.5))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datetimes_round_trip_and_refuse_bad_dates() {
        for s in [
            "1970-01-01 00:00:00",
            "2024-02-29 23:59:59",
            "1000-01-01 00:00:00",
            "9999-12-31 23:59:59",
            "2038-01-19 03:14:07",
        ] {
            let secs = parse_datetime(s).unwrap();
            assert_eq!(format_datetime(secs), s);
        }
        assert_eq!(parse_datetime("1970-01-01"), Some(0));
        assert_eq!(parse_datetime("19700101000001"), Some(1));
        assert_eq!(parse_datetime("1970-01-01 00:00:00.6"), Some(1));
        assert_eq!(
            parse_datetime("2024-01-01T10:00:00"),
            parse_datetime("2024-01-01 10:00:00")
        );
        for bad in [
            "2023-02-29",
            "0000-00-00 00:00:00",
            "2024-13-01",
            "x",
            "2024-01-01 24:00:00",
            "",
        ] {
            assert_eq!(parse_datetime(bad), None, "{bad}");
        }
        assert_eq!(format_datetime(DATETIME_MIN), "1000-01-01 00:00:00");
        assert_eq!(format_datetime(DATETIME_MAX), "9999-12-31 23:59:59");
    }

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

    #[test]
    fn declared_columns_fit_the_row() {
        let t = size_columns(&[
            Declared::Fixed(ColumnType::Int { unsigned: false }),
            Declared::VarText { chars: 10 },
            Declared::Text,
        ])
        .unwrap();
        assert_eq!(t[1], ColumnType::VarChar(40));
        let ColumnType::VarChar(lob) = t[2] else {
            panic!()
        };
        assert!(
            usize::from(lob) + 4 + 42 + 2 <= ROW_BYTES_MAX && lob > 20_000,
            "{lob}"
        );
        // Two VARCHAR(5000): 40000 bytes lowered to fit, never below 5000.
        let t = size_columns(&[
            Declared::VarText { chars: 5000 },
            Declared::VarText { chars: 5000 },
        ])
        .unwrap();
        let total: usize = t.iter().map(|t| row_bytes(*t)).sum();
        assert!(total <= ROW_BYTES_MAX, "{t:?}");
        assert!(
            t.iter()
                .all(|t| matches!(t, ColumnType::VarChar(n) if *n >= 5000 && n % 4 == 0)),
            "{t:?}"
        );
        assert_eq!(
            size_columns(&[
                Declared::VarText { chars: 20_000 },
                Declared::VarText { chars: 20_000 }
            ])
            .unwrap_err()
            .code,
            1118
        );
        assert_eq!(char_limit(ColumnType::VarChar(40)), Some(10));
        assert_eq!(char_limit(ColumnType::VarChar(7)), None);
        assert_eq!(sql_type_name(ColumnType::VarChar(40)), "varchar(10)");
    }
}
