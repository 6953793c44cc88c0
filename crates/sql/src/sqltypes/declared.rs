//! Declared column types (`CREATE TABLE`): what each SQL type becomes,
//! and the sizing of variable-length columns within a row's budget.

use super::{decimal, BINARY_BYTES_MAX, CHAR_CHARS_MAX, LOB_BYTES_MIN, UTF8MB4_BYTES};
use crate::outcome::SqlError;
use shoal_types::schema::ROW_BYTES_MAX;
use shoal_types::ColumnType;
use sqlparser::ast::{BinaryLength, CharacterLength, DataType, ExactNumberInfo};

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
        DataType::Date => fixed(T::Date),
        DataType::Time(precision, _) => match precision {
            None | Some(0) => fixed(T::Time),
            Some(_) => Err(SqlError::not_supported(
                "fractional seconds in TIME(n); declare TIME",
            )),
        },
        DataType::Decimal(info) | DataType::Numeric(info) | DataType::Dec(info) => {
            decimal::declared_decimal(name, info).map(Declared::Fixed)
        }
        DataType::DecimalUnsigned(_) => Err(SqlError::not_supported(
            "DECIMAL UNSIGNED; declare DECIMAL and a CHECK in the application",
        )),
        // MySQL's FIXED is DECIMAL; sqlparser knows it by name only.
        DataType::Custom(type_name, modifiers)
            if type_name.to_string().eq_ignore_ascii_case("FIXED") =>
        {
            let digit = |i: usize, default: u64| match modifiers.get(i) {
                None => Ok(default),
                Some(m) => m
                    .trim()
                    .parse::<u64>()
                    .map_err(|_| SqlError::syntax(format!("bad FIXED({m}) for column '{name}'"))),
            };
            let precision = if modifiers.is_empty() {
                decimal::DEFAULT_PRECISION
            } else {
                digit(0, decimal::DEFAULT_PRECISION)?
            };
            decimal::declared_digits(name, precision, digit(1, 0)?).map(Declared::Fixed)
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqltypes::{char_limit, sql_type_name};

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
