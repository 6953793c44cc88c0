//! Evaluating calls of MySQL's functions (`CONCAT`, `ROUND`, `GREATEST`,
//! `DATE`, ... : [`Func`]) on a row, with their helpers: rounding to a
//! number of digits, letter case as MySQL's collations map it, and
//! GREATEST's and LEAST's common type. [`super::eval`] calls in here for
//! a [`Scalar::Func`] and lends its number and comparison rules.

use super::eval::{compare, exact, float, int_value, number, truth, Num, STRING_BYTES_MAX};
use super::eval_types::{
    date_of, date_part, decimal_round, decimal_to_integer, double_round, integer_round,
};
use super::expr::{out_of_range, Func, Scalar};
use crate::outcome::SqlError;
use crate::sqltypes::value_text;
use shoal_types::decimal::DECIMAL_SCALE_MAX;
use shoal_types::{Decimal, Value};
use std::cmp::Ordering;

pub(super) fn function(f: Func, args: &[Scalar], row: &[Value]) -> Result<Value, SqlError> {
    let arg = |i: usize| args[i].eval(row);
    Ok(match f {
        Func::Concat => {
            let mut out = Vec::new();
            let mut binary = false;
            for a in args {
                let v = a.eval(row)?;
                if v.is_null() {
                    return Ok(Value::Null);
                }
                binary |= matches!(v, Value::Bytes(_));
                out.extend(value_text(&v));
                if out.len() > STRING_BYTES_MAX {
                    // MySQL's answer past max_allowed_packet.
                    return Err(SqlError::new(
                        1301,
                        "HY000",
                        format!("Result of concat() was larger than {STRING_BYTES_MAX} bytes"),
                    ));
                }
            }
            if binary {
                Value::Bytes(out)
            } else {
                Value::Str(String::from_utf8_lossy(&out).into_owned())
            }
        }
        Func::Length => match arg(0)? {
            Value::Null => Value::Null,
            v => Value::Int(value_text(&v).len() as i64),
        },
        Func::CharLength => match arg(0)? {
            Value::Null => Value::Null,
            Value::Bytes(b) => Value::Int(b.len() as i64),
            v => Value::Int(String::from_utf8_lossy(&value_text(&v)).chars().count() as i64),
        },
        Func::Upper | Func::Lower => match arg(0)? {
            Value::Null => Value::Null,
            // Binary strings have no letter case.
            Value::Bytes(b) => Value::Bytes(b),
            v => {
                let s = String::from_utf8_lossy(&value_text(&v)).into_owned();
                Value::Str(
                    s.chars()
                        .map(|c| simple_case(c, f == Func::Upper))
                        .collect(),
                )
            }
        },
        Func::Abs => match number(&arg(0)?) {
            None => Value::Null,
            Some(Num::Int(i)) => int_value(i.abs(), "abs")?,
            Some(Num::Float(x)) => Value::Double(x.abs()),
            Some(Num::Dec(d)) => match d.unscaled.checked_abs() {
                Some(n) => Value::Decimal(Decimal::new(n, d.scale)),
                None => return Err(super::eval_types::decimal_out_of_range("abs")),
            },
        },
        Func::Coalesce => {
            for a in args {
                let v = a.eval(row)?;
                if !v.is_null() {
                    return Ok(v);
                }
            }
            Value::Null
        }
        Func::IfNull => match arg(0)? {
            Value::Null => arg(1)?,
            v => v,
        },
        Func::If => {
            if truth(&arg(0)?) == Some(true) {
                arg(1)?
            } else {
                arg(2)?
            }
        }
        Func::NullIf => {
            let (a, b) = (arg(0)?, arg(1)?);
            if compare(&a, &b) == Some(Ordering::Equal) {
                Value::Null
            } else {
                a
            }
        }
        Func::Round | Func::Truncate if args.len() == 2 => {
            round_to_digits(args, row, f == Func::Truncate)?
        }
        Func::Floor | Func::Ceil | Func::Round | Func::Truncate => match number(&arg(0)?) {
            None => Value::Null,
            Some(Num::Int(i)) => int_value(i, "rounding")?,
            Some(Num::Dec(d)) => {
                let i = decimal_to_integer(d, f == Func::Floor, f == Func::Ceil)
                    .ok_or_else(|| out_of_range("rounding"))?;
                int_value(i, "rounding")?
            }
            Some(Num::Float(x)) => {
                let r = match f {
                    Func::Floor => x.floor(),
                    Func::Ceil => x.ceil(),
                    // MySQL rounds a double with rint(): halves to even.
                    _ => x.round_ties_even(),
                };
                if r.abs() < 9.2e18 {
                    Value::Int(r as i64)
                } else {
                    Value::Double(r)
                }
            }
        },
        Func::Greatest | Func::Least => {
            let mut all = Vec::with_capacity(args.len());
            for a in args {
                let v = a.eval(row)?;
                if v.is_null() {
                    return Ok(Value::Null);
                }
                all.push(v);
            }
            let mut best: Option<Value> = None;
            for v in all.iter().cloned() {
                best = Some(match best {
                    None => v,
                    Some(b) => {
                        let ord = compare(&v, &b).unwrap_or(Ordering::Equal);
                        let take = if f == Func::Greatest {
                            ord == Ordering::Greater
                        } else {
                            ord == Ordering::Less
                        };
                        if take {
                            v
                        } else {
                            b
                        }
                    }
                });
            }
            in_common_type(best.unwrap_or(Value::Null), &all)
        }
        Func::Date => date_of(&arg(0)?),
        Func::DatePart(part) => date_part(&arg(0)?, part),
    })
}

/// ROUND's and TRUNCATE's digit count (`None`: NULL). A fraction rounds
/// (`ROUND(1.5, 1.6)` keeps 2 digits), as MariaDB reads it.
pub(crate) fn round_digits(v: &Value) -> Option<i64> {
    let clamp = |i: i128| i.clamp(i64::MIN.into(), i64::MAX.into()) as i64;
    Some(match number(v)? {
        Num::Int(i) => clamp(i),
        // `as` saturates, and a NaN (which no double literal makes) is 0.
        Num::Float(f) => f.round() as i64,
        Num::Dec(d) => decimal_to_integer(d, false, false).map_or(0, clamp),
    })
}

/// `ROUND(x, digits)` or `TRUNCATE(x, digits)`, in `x`'s type as MariaDB
/// gives it: an integer stays an integer (a DECIMAL when rounding takes
/// it past BIGINT UNSIGNED), a double a double, and a DECIMAL a DECIMAL
/// with `digits` fraction digits when `digits` is a constant
/// (`ROUND(1.5, 3)` is 1.500) or with `x`'s own when it varies by row.
fn round_to_digits(args: &[Scalar], row: &[Value], truncate: bool) -> Result<Value, SqlError> {
    let (x, d) = (args[0].eval(row)?, args[1].eval(row)?);
    let (Some(n), Some(digits)) = (number(&x), round_digits(&d)) else {
        return Ok(Value::Null);
    };
    let what = if truncate { "truncate" } else { "round" };
    Ok(match n {
        Num::Int(i) => {
            let r = integer_round(i, digits, truncate);
            int_value(r, what).unwrap_or_else(|_| Value::Decimal(Decimal::from_int(r)))
        }
        Num::Float(f) => Value::Double(double_round(f, digits, truncate)),
        Num::Dec(dec) => {
            let scale = if matches!(args[1], Scalar::Const(_)) {
                digits.clamp(0, i64::from(DECIMAL_SCALE_MAX)) as u8
            } else {
                dec.scale
            };
            let shown = String::from_utf8_lossy(&value_text(&x)).into_owned();
            let r = decimal_round(dec, digits, truncate, scale).ok_or_else(|| {
                super::eval_types::decimal_out_of_range(&format!("{what}({shown}, {digits})"))
            })?;
            Value::Decimal(r)
        }
    })
}

/// A letter in the other case where that is one letter, as MySQL's
/// collations map case (`ß` stays `ß`; Unicode's full mapping makes it
/// `SS`).
fn simple_case(c: char, upper: bool) -> char {
    fn single(mut mapped: impl Iterator<Item = char>) -> Option<char> {
        let first = mapped.next()?;
        mapped.next().is_none().then_some(first)
    }
    let mapped = if upper {
        single(c.to_uppercase())
    } else {
        single(c.to_lowercase())
    };
    mapped.unwrap_or(c)
}

/// GREATEST's or LEAST's answer in the type of all its numeric
/// arguments, as MySQL gives it: a DOUBLE if any is a float, else a
/// DECIMAL with the most fraction digits if any is a DECIMAL
/// (`GREATEST(1.5, 2)` is 2.0).
fn in_common_type(v: Value, all: &[Value]) -> Value {
    let numeric = |a: &Value| {
        matches!(
            a,
            Value::Int(_) | Value::UInt(_) | Value::Decimal(_) | Value::Float(_) | Value::Double(_)
        )
    };
    if !all.iter().all(numeric) {
        return v;
    }
    if all
        .iter()
        .any(|a| matches!(a, Value::Float(_) | Value::Double(_)))
    {
        return number(&v).map_or(v, |n| Value::Double(float(n)));
    }
    let scale = all
        .iter()
        .filter_map(|a| match a {
            Value::Decimal(d) => Some(d.scale),
            _ => None,
        })
        .max();
    match (scale, number(&v).and_then(exact)) {
        (Some(scale), Some(d)) => d.rescale(scale).map_or(v, Value::Decimal),
        _ => v,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_and_truncate_to_digits_as_mariadb() {
        let dec = |s: &str| Value::Decimal(Decimal::parse(s).unwrap());
        let call = |f: Func, x: Value, d: Scalar| function(f, &[Scalar::Const(x), d], &[]).unwrap();
        let round = |x: Value, d: i64| call(Func::Round, x, Scalar::Const(Value::Int(d)));
        let truncate = |x: Value, d: i64| call(Func::Truncate, x, Scalar::Const(Value::Int(d)));
        assert_eq!(round(dec("3.14159"), 2), dec("3.14"));
        assert_eq!(round(dec("1.5"), 3), dec("1.500"), "a constant's scale");
        assert_eq!(round(dec("-2.5"), 0), dec("-3"), "half away from zero");
        assert_eq!(round(dec("123.456"), -1), dec("120"));
        assert_eq!(round(dec("-999.99"), -1), dec("-1000"));
        assert_eq!(round(dec("0.5"), -40), dec("0"));
        assert_eq!(truncate(dec("3.789"), 1), dec("3.7"));
        assert_eq!(truncate(dec("-3.789"), 1), dec("-3.7"));
        assert_eq!(round(Value::Int(15), -1), Value::Int(20));
        assert_eq!(round(Value::Int(-15), -1), Value::Int(-20));
        assert_eq!(round(Value::Int(15), 2), Value::Int(15));
        assert_eq!(truncate(Value::Int(1234), -2), Value::Int(1200));
        assert_eq!(round(Value::Int(15), -100), Value::Int(0));
        assert_eq!(
            round(Value::Int(i64::MIN), -5),
            dec("-9223372036854800000"),
            "past BIGINT: a DECIMAL"
        );
        assert_eq!(round(Value::Double(2.5), 0), Value::Double(2.0), "rint");
        assert_eq!(round(Value::Double(1.25), 1), Value::Double(1.2));
        assert_eq!(round(Value::Double(2.675), 2), Value::Double(2.68));
        assert_eq!(round(Value::Double(1.005), 2), Value::Double(1.0));
        assert_eq!(round(Value::Double(12345.678), -2), Value::Double(12300.0));
        assert_eq!(round(Value::Double(1.5), -400), Value::Double(0.0));
        assert_eq!(round(Value::Double(1e300), 10), Value::Double(1e300));
        assert_eq!(truncate(Value::Double(-1.99), 0), Value::Double(-1.0));
        assert_eq!(round(Value::Null, 1), Value::Null);
        assert_eq!(
            call(Func::Round, dec("1.5"), Scalar::Const(Value::Null)),
            Value::Null
        );
        // Fractional digits round: 1.6 is 2.
        assert_eq!(
            call(Func::Round, dec("1.555"), Scalar::Const(Value::Double(1.6))),
            dec("1.56")
        );
        // Digits that vary by row keep the argument's scale.
        assert_eq!(
            function(
                Func::Round,
                &[Scalar::Column(0), Scalar::Column(1)],
                &[dec("1.555"), Value::Int(1)]
            )
            .unwrap(),
            dec("1.600")
        );
    }

    #[test]
    fn greatest_and_letter_case_as_mysql() {
        assert_eq!(simple_case('ß', true), 'ß');
        let greatest = |args: &[Value]| {
            let args: Vec<Scalar> = args.iter().cloned().map(Scalar::Const).collect();
            function(Func::Greatest, &args, &[]).unwrap()
        };
        assert_eq!(
            greatest(&[Value::Decimal(Decimal::new(15, 1)), Value::Int(2)]),
            Value::Decimal(Decimal::new(20, 1))
        );
        assert_eq!(
            greatest(&[Value::Double(1.5), Value::Int(2)]),
            Value::Double(2.0)
        );
        assert_eq!(greatest(&[Value::Int(1), Value::Int(2)]), Value::Int(2));
        assert_eq!(simple_case('é', true), 'É');
    }
}
