//! Evaluation rules of the exact and calendar types, apart from
//! [`super::eval`]'s general ones: DECIMAL arithmetic that stays exact
//! (MySQL's result scales; division adds [`DIV_SCALE_INCREMENT`] digits
//! to the dividend's, as MariaDB's `div_precision_increment`), ROUND and
//! TRUNCATE to a number of digits (exact values half away from zero,
//! doubles as MariaDB's `my_double_round`), and how a
//! DATE or TIME compares with other values and what the date functions
//! give.
//!
//! Invariant: a result that would need more than
//! [`DECIMAL_PRECISION_MAX`] digits fails with 1690, never wraps.

use super::expr::Arith;
use crate::outcome::SqlError;
use crate::sqltypes::temporal::{date_of_seconds, parse_time, seconds_of_date, ymd};
use crate::sqltypes::{parse_datetime, value_text};
use shoal_types::decimal::{pow10, Decimal, DECIMAL_PRECISION_MAX, DECIMAL_SCALE_MAX};
use shoal_types::Value;
use std::cmp::Ordering;

/// Fraction digits a division adds to its dividend's.
pub const DIV_SCALE_INCREMENT: u8 = 4;

pub(crate) fn decimal_out_of_range(what: &str) -> SqlError {
    SqlError::new(
        1690,
        "22003",
        format!("DECIMAL value is out of range in '{what}'"),
    )
}

/// A decimal result within MySQL's limits: at most 30 fraction digits
/// (more are rounded away, as MySQL does for a product) and 38 digits.
fn bounded(d: Option<Decimal>, what: &str) -> Result<Value, SqlError> {
    let d = d
        .and_then(|d| d.rescale(d.scale.min(DECIMAL_SCALE_MAX)))
        .filter(|d| d.fits(DECIMAL_PRECISION_MAX))
        .ok_or_else(|| decimal_out_of_range(what))?;
    Ok(Value::Decimal(d))
}

/// `a op b` for two exact operands, at least one a DECIMAL.
pub(crate) fn decimal_arith(
    op: Arith,
    a: Decimal,
    b: Decimal,
    what: &str,
) -> Result<Value, SqlError> {
    match op {
        Arith::Add => bounded(a.checked_add(b), what),
        Arith::Sub => bounded(a.checked_sub(b), what),
        Arith::Mul => bounded(a.checked_mul(b), what),
        Arith::Div => {
            if b.unscaled == 0 {
                return Ok(Value::Null);
            }
            let scale = a
                .scale
                .saturating_add(DIV_SCALE_INCREMENT)
                .min(DECIMAL_SCALE_MAX);
            bounded(a.checked_div(b, scale), what)
        }
        Arith::IntDiv | Arith::Mod => {
            if b.unscaled == 0 {
                return Ok(Value::Null);
            }
            let scale = a.scale.max(b.scale);
            let (Some(x), Some(y)) = (a.rescale(scale), b.rescale(scale)) else {
                return Err(decimal_out_of_range(what));
            };
            if op == Arith::Mod {
                // The remainder keeps the dividend's sign, as in MySQL.
                // (checked: i128::MIN % -1 overflows.)
                let r = x.unscaled.checked_rem(y.unscaled);
                bounded(r.map(|r| Decimal::new(r, scale)), what)
            } else {
                let Some(q) = x.unscaled.checked_div(y.unscaled) else {
                    return Err(decimal_out_of_range(what));
                };
                match i64::try_from(q) {
                    Ok(i) => Ok(Value::Int(i)),
                    Err(_) => Err(super::expr::out_of_range(what)),
                }
            }
        }
    }
}

/// FLOOR, CEILING and ROUND of a decimal: the integer it gives.
pub(crate) fn decimal_to_integer(d: Decimal, floor: bool, ceil: bool) -> Option<i128> {
    let rounded = d.rescale(0)?.unscaled;
    let truncated = match 10i128.checked_pow(u32::from(d.scale)) {
        Some(p) => d.unscaled / p,
        None => 0,
    };
    let exact = d.rescale_exact(0).is_some();
    Some(if floor {
        if d.unscaled < 0 && !exact {
            truncated - 1
        } else {
            truncated
        }
    } else if ceil {
        if d.unscaled > 0 && !exact {
            truncated + 1
        } else {
            truncated
        }
    } else {
        rounded
    })
}

/// `unscaled` rounded half away from zero (`truncate`: toward zero) to a
/// multiple of `unit` (`None`: a unit past `i128`, which every value
/// rounds to 0 under); `None` if the multiple leaves `i128`.
fn round_to_unit(unscaled: i128, unit: Option<i128>, truncate: bool) -> Option<i128> {
    let Some(unit) = unit else { return Some(0) };
    let (q, r) = (unscaled / unit, unscaled % unit);
    // |r| < unit, so neither side overflows.
    let away = !truncate && r.abs() >= unit - r.abs();
    (q + if away { unscaled.signum() } else { 0 }).checked_mul(unit)
}

/// `ROUND(x, digits)` / `TRUNCATE(x, digits)` of an integer: itself for
/// `digits >= 0`, else rounded to tens, hundreds, ... (exact values
/// round half away from zero, as in MySQL).
pub(crate) fn integer_round(i: i128, digits: i64, truncate: bool) -> i128 {
    if digits >= 0 {
        return i;
    }
    let unit = u32::try_from(digits.unsigned_abs()).ok().and_then(pow10);
    // |i| < 2^64 and a unit is at most 10^38: the multiple fits.
    round_to_unit(i, unit, truncate).expect("an integer rounds within i128")
}

/// `ROUND(x, digits)` / `TRUNCATE(x, digits)` of a decimal, given with
/// `scale` fraction digits; `None` past [`DECIMAL_PRECISION_MAX`] digits.
pub(crate) fn decimal_round(x: Decimal, digits: i64, truncate: bool, scale: u8) -> Option<Decimal> {
    let kept = if digits >= i64::from(x.scale) {
        x
    } else {
        // `digits` may be as low as i64::MIN (a huge negative argument).
        let dropped = i64::from(x.scale).saturating_sub(digits);
        let unit = u32::try_from(dropped).ok().and_then(pow10);
        Decimal::new(round_to_unit(x.unscaled, unit, truncate)?, x.scale)
    };
    // The digits past `digits` are zeros now: dropping them is exact.
    kept.rescale(scale)
        .filter(|d| d.fits(DECIMAL_PRECISION_MAX))
}

/// 10^n as a double, as C's literal `1eN` is (MariaDB's `log_10` table);
/// infinite past 10^308.
fn double_power_of_ten(n: u64) -> f64 {
    match n {
        // Every power up to 10^22 is exact, and so is each product.
        0..=22 => 10f64.powi(n as i32),
        23..=308 => format!("1e{n}").parse().expect("a double literal"),
        _ => f64::INFINITY,
    }
}

/// `ROUND(x, digits)` / `TRUNCATE(x, digits)` of a double as MariaDB's
/// `my_double_round` does it: scaled by a power of ten, rounded with
/// `rint` (halves to even), scaled back; `x` itself where scaling
/// overflows.
pub(crate) fn double_round(x: f64, digits: i64, truncate: bool) -> f64 {
    let power = double_power_of_ten(digits.unsigned_abs());
    let (divided, multiplied) = (x / power, x * power);
    if digits < 0 && power.is_infinite() {
        0.0
    } else if digits >= 0 && (multiplied.is_infinite() || multiplied.is_nan()) {
        // Past what a double scales to (0 × ∞ is NaN): nothing to round.
        x
    } else if truncate {
        match (x >= 0.0, digits < 0) {
            (true, true) => divided.floor() * power,
            (true, false) => multiplied.floor() / power,
            (false, true) => divided.ceil() * power,
            (false, false) => multiplied.ceil() / power,
        }
    } else if digits < 0 {
        divided.round_ties_even() * power
    } else {
        multiplied.round_ties_even() / power
    }
}

/// A DATE, DATETIME or TIMESTAMP as seconds since 1970 (a DATE at its
/// midnight): the scale on which MySQL compares them with each other.
pub(crate) fn seconds(v: &Value) -> Option<i64> {
    match v {
        Value::Timestamp(s) => Some(i64::from(*s)),
        Value::DateTime(s) => Some(*s),
        Value::Date(d) => Some(seconds_of_date(*d)),
        _ => None,
    }
}

/// Compares `t` (a TIME) with `other` (not NULL): another TIME, or a
/// string read as a time (its text otherwise); `None` to leave the pair
/// to the numeric comparison.
pub(crate) fn compare_time(t: i64, other: &Value) -> Option<Ordering> {
    match other {
        Value::Time(o) => Some(t.cmp(o)),
        Value::Str(s) => Some(match parse_time(s) {
            Some(o) => t.cmp(&o),
            None => value_text(&Value::Time(t)).as_slice().cmp(s.as_bytes()),
        }),
        _ => None,
    }
}

/// Compares a date or time `t` (its seconds) with a string as MySQL does:
/// as a date and time when the string is one, else as text.
pub(crate) fn compare_with_text(t: &Value, secs: i64, s: &str) -> Ordering {
    match parse_datetime(s) {
        Some(o) => secs.cmp(&o),
        None => value_text(t).as_slice().cmp(s.as_bytes()),
    }
}

/// `DATE(x)`: the date of a date, a date and time, or a string that is
/// one; NULL otherwise.
pub(crate) fn date_of(v: &Value) -> Value {
    let days = match v {
        Value::Date(d) => Some(*d),
        Value::DateTime(s) => date_of_seconds(*s),
        Value::Timestamp(s) => date_of_seconds(i64::from(*s)),
        Value::Null => None,
        other => {
            parse_datetime(&String::from_utf8_lossy(&value_text(other))).and_then(date_of_seconds)
        }
    };
    days.map_or(Value::Null, Value::Date)
}

/// Which part of a date `YEAR`, `MONTH` and `DAY` take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatePart {
    Year,
    Month,
    Day,
}

/// `YEAR(x)`, `MONTH(x)`, `DAY(x)` of anything `DATE(x)` reads.
pub(crate) fn date_part(v: &Value, part: DatePart) -> Value {
    let Value::Date(days) = date_of(v) else {
        return Value::Null;
    };
    let (y, m, d) = ymd(days);
    Value::Int(match part {
        DatePart::Year => y,
        DatePart::Month => i64::from(m),
        DatePart::Day => i64::from(d),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap()
    }

    fn text(v: Value) -> String {
        String::from_utf8(value_text(&v)).unwrap()
    }

    #[test]
    fn decimal_arithmetic_keeps_mysql_scales() {
        let run = |op, a: &str, b: &str| text(decimal_arith(op, d(a), d(b), "x").unwrap());
        assert_eq!(run(Arith::Add, "1.50", "2"), "3.50");
        assert_eq!(run(Arith::Sub, "1.5", "2.25"), "-0.75");
        assert_eq!(run(Arith::Mul, "1.50", "3"), "4.50");
        assert_eq!(run(Arith::Mul, "0.1", "0.2"), "0.02");
        assert_eq!(run(Arith::Div, "10.00", "3"), "3.333333");
        assert_eq!(run(Arith::Div, "1", "3"), "0.3333");
        assert_eq!(run(Arith::Mod, "-7.5", "2"), "-1.5");
        assert_eq!(run(Arith::IntDiv, "7.5", "2"), "3");
        assert_eq!(
            decimal_arith(Arith::Div, d("1"), d("0"), "x").unwrap(),
            Value::Null
        );
        let big = "9".repeat(38);
        let e = decimal_arith(Arith::Add, d(&big), d("1"), "x").unwrap_err();
        assert_eq!(e.code, 1690);
        assert!(e.message.contains("DECIMAL value is out of range"));
    }

    #[test]
    fn rounding_to_integers() {
        let r = |s: &str, floor, ceil| decimal_to_integer(d(s), floor, ceil).unwrap();
        assert_eq!(r("-1.5", true, false), -2);
        assert_eq!(r("-1.5", false, true), -1);
        assert_eq!(r("-1.5", false, false), -2);
        assert_eq!(r("2.0", true, false), 2);
        assert_eq!(r("2.1", false, true), 3);
    }

    #[test]
    fn date_functions() {
        let day = Value::Str("2024-03-09 10:11:12".into());
        assert_eq!(text(date_of(&day)), "2024-03-09");
        assert_eq!(date_part(&day, DatePart::Month), Value::Int(3));
        assert_eq!(
            date_part(&Value::Str("x".into()), DatePart::Day),
            Value::Null
        );
        assert_eq!(
            compare_time(3_600_000_000, &Value::Str("01:00:00".into())),
            Some(Ordering::Equal)
        );
    }
}
