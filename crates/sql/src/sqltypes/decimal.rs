//! DECIMAL(p,s) in SQL: the declared type's checks (MySQL's errors 1425,
//! 1426 and 1427), and values converted for a DECIMAL column as MySQL's
//! strict mode does: rounded half away from zero to the column's scale
//! (with MySQL's note 1265 when a statement stores it), refused past its precision
//! (1264) or when a string is not a number (1366).

use super::{incorrect, out_of_range, parse_number, value_text};
use crate::outcome::SqlError;
use shoal_types::decimal::{Decimal, DECIMAL_PRECISION_MAX, DECIMAL_SCALE_MAX};
use shoal_types::{ColumnType, Value};
use sqlparser::ast::ExactNumberInfo;

/// MySQL's DECIMAL without a precision: DECIMAL(10,0).
pub const DEFAULT_PRECISION: u64 = 10;

/// The column type of `DECIMAL[(p[,s])]` declared for column `name`.
pub fn declared_decimal(name: &str, info: &ExactNumberInfo) -> Result<ColumnType, SqlError> {
    let (precision, scale) = match *info {
        ExactNumberInfo::None => (DEFAULT_PRECISION, 0),
        ExactNumberInfo::Precision(p) => (p, 0),
        ExactNumberInfo::PrecisionAndScale(p, s) => (
            p,
            u64::try_from(s).map_err(|_| {
                SqlError::syntax(format!("the scale of column '{name}' cannot be negative"))
            })?,
        ),
    };
    declared_digits(name, precision, scale)
}

/// Checks a DECIMAL's precision and scale as MySQL numbers its errors.
pub fn declared_digits(name: &str, precision: u64, scale: u64) -> Result<ColumnType, SqlError> {
    if scale > u64::from(DECIMAL_SCALE_MAX) {
        return Err(SqlError::new(
            1425,
            "42000",
            format!(
                "Too big scale {scale} specified for '{name}'. Maximum is {DECIMAL_SCALE_MAX}."
            ),
        ));
    }
    if precision > u64::from(DECIMAL_PRECISION_MAX) {
        return Err(SqlError::new(
            1426,
            "42000",
            format!(
                "Too big precision {precision} specified for '{name}'. Maximum is {DECIMAL_PRECISION_MAX} (Shoal keeps DECIMAL exact in 128 bits); use DOUBLE for wider numbers."
            ),
        ));
    }
    if scale > precision {
        return Err(SqlError::new(
            1427,
            "42000",
            format!(
                "For float(M,D), double(M,D) or decimal(M,D), M must be >= D (column '{name}')."
            ),
        ));
    }
    if precision == 0 {
        return Err(SqlError::syntax(format!(
            "DECIMAL(0) has no digits (column '{name}'); give a precision of 1..={DECIMAL_PRECISION_MAX}"
        )));
    }
    Ok(ColumnType::Decimal {
        precision: precision as u8,
        scale: scale as u8,
    })
}

/// A number as a decimal, if it is one: integers and decimals exactly,
/// doubles through their shortest text, strings that are numbers.
/// `Err(true)`: a number too large for any decimal; `Err(false)`: not a
/// number.
pub fn to_decimal(v: &Value) -> Result<Decimal, bool> {
    match v {
        Value::Decimal(d) => Ok(*d),
        Value::Int(i) => Ok(Decimal::from_int((*i).into())),
        Value::UInt(u) => Ok(Decimal::from_int((*u).into())),
        Value::Double(f) => Decimal::from_f64(*f, DECIMAL_SCALE_MAX).ok_or(f.is_finite()),
        Value::Float(f) => {
            // The FLOAT's own shortest digits, not its double's.
            Decimal::parse(&format!("{f}")).ok_or(f.is_finite())
        }
        Value::Str(_) | Value::Bytes(_) => {
            let text = String::from_utf8_lossy(v.as_bytes().unwrap_or_default()).into_owned();
            match Decimal::parse(&text) {
                Some(d) => Ok(d),
                // A number still, only one past 38 digits.
                None => Err(parse_number(&text).is_some()),
            }
        }
        _ => Err(false),
    }
}

/// Converts `v` (not NULL) for a DECIMAL(precision, scale) column.
pub fn coerce_decimal(
    v: &Value,
    precision: u8,
    scale: u8,
    col: &str,
    row: usize,
) -> Result<Value, SqlError> {
    let d = to_decimal(v).map_err(|too_large| {
        if too_large {
            out_of_range(col, row)
        } else {
            let shown = String::from_utf8_lossy(&value_text(v)).into_owned();
            incorrect("decimal", &shown, col, row)
        }
    })?;
    let stored = d
        .rescale(scale)
        .filter(|d| d.fits(precision))
        .ok_or_else(|| out_of_range(col, row))?;
    // Digits past the scale were rounded away: MySQL notes it for a value
    // stored in a column (a CAST, whose column has no name, does not).
    if !col.is_empty() && d.rescale_exact(scale).is_none() {
        crate::exec::warnings::stored_value_note(&SqlError::new(
            1265,
            "01000",
            format!("Data truncated for column '{col}' at row {row}"),
        ));
    }
    Ok(Value::Decimal(stored))
}

/// `v` as a value of a DECIMAL column with `scale` that compares exactly
/// as SQL compares `v` with the column's values, if there is one (not for
/// `1.234` against two fraction digits: it lies between two of them).
pub fn exact_decimal(v: &Value, precision: u8, scale: u8) -> Option<Value> {
    let d = match v {
        Value::Decimal(_) | Value::Int(_) | Value::UInt(_) | Value::Str(_) => to_decimal(v).ok()?,
        _ => return None,
    };
    d.rescale_exact(scale)
        .filter(|d| d.fits(precision))
        .map(Value::Decimal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(s: &str) -> Value {
        Value::Decimal(Decimal::parse(s).unwrap())
    }

    #[test]
    fn declared_types_follow_mysql_limits() {
        let t = |info| declared_decimal("c", &info);
        assert_eq!(
            t(ExactNumberInfo::None).unwrap(),
            ColumnType::Decimal {
                precision: 10,
                scale: 0
            }
        );
        assert_eq!(
            t(ExactNumberInfo::PrecisionAndScale(10, 2)).unwrap(),
            ColumnType::Decimal {
                precision: 10,
                scale: 2
            }
        );
        assert_eq!(t(ExactNumberInfo::Precision(39)).unwrap_err().code, 1426);
        assert_eq!(
            t(ExactNumberInfo::PrecisionAndScale(38, 31))
                .unwrap_err()
                .code,
            1425
        );
        assert_eq!(
            t(ExactNumberInfo::PrecisionAndScale(5, 6))
                .unwrap_err()
                .code,
            1427
        );
    }

    #[test]
    fn values_round_to_the_scale_and_check_the_precision() {
        let c = |v: &Value| coerce_decimal(v, 5, 2, "p", 1);
        assert_eq!(c(&dec("1.235")).unwrap(), dec("1.24"));
        assert_eq!(c(&dec("-1.235")).unwrap(), dec("-1.24"));
        assert_eq!(c(&Value::Double(1.005)).unwrap(), dec("1.01"));
        assert_eq!(c(&Value::Int(7)).unwrap(), dec("7.00"));
        assert_eq!(c(&"  -0.5 ".into()).unwrap(), dec("-0.50"));
        assert_eq!(c(&dec("999.994")).unwrap(), dec("999.99"));
        assert_eq!(c(&dec("999.995")).unwrap_err().code, 1264);
        assert_eq!(c(&Value::Int(1000)).unwrap_err().code, 1264);
        assert_eq!(c(&"1e50".into()).unwrap_err().code, 1264);
        assert_eq!(c(&"abc".into()).unwrap_err().code, 1366);
        assert_eq!(exact_decimal(&dec("1.5"), 5, 2), Some(dec("1.50")));
        assert_eq!(exact_decimal(&dec("1.234"), 5, 2), None);
        assert_eq!(exact_decimal(&Value::Double(1.5), 5, 2), None);
    }
}
