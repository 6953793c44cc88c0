//! Evaluating compiled [`Scalar`]s on a row with MySQL's rules: NULL
//! propagates, comparisons pick integer, floating-point, string or time
//! comparison by their operands (strings by bytes, trailing spaces
//! ignored, as `utf8mb4_bin` does), booleans are `1` / `0`, LIKE, the
//! functions ([`super::eval_funcs`]) and casts. The compiler
//! ([`super::expr`]) folds constants through the same code.
//!
//! Invariant: evaluating fails only on values (1690 out of range, 1301
//! a string past [`STRING_BYTES_MAX`]), never on names.

use super::eval_funcs::function;
pub(crate) use super::eval_funcs::round_digits;
use super::eval_types::{
    compare_time, compare_with_text, date_of, decimal_arith, decimal_to_integer, seconds,
};
use super::expr::{out_of_range, Arith, CastTo, Cmp, Scalar};
use crate::outcome::SqlError;
use crate::sqltypes::{coerce, parse_datetime, parse_number, value_text};
use shoal_types::value::trim_trailing_spaces;
use shoal_types::{ColumnDef, ColumnType, Decimal, Value};
use std::cmp::Ordering;

fn boolean(b: Option<bool>) -> Value {
    b.map_or(Value::Null, |b| Value::Int(i64::from(b)))
}

/// The longest string an expression may build (MySQL bounds them by
/// `max_allowed_packet`, the SQL node's default of 64 MiB).
pub const STRING_BYTES_MAX: usize = 64 << 20;

/// A number as arithmetic sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Num {
    Int(i128),
    Float(f64),
    /// A DECIMAL: arithmetic with integers and decimals stays exact.
    Dec(Decimal),
}

/// The numeric prefix of a string, as MySQL reads "12abc" (12) or "x" (0).
fn lenient_number(s: &str) -> Num {
    if let Some(v) = parse_number(s) {
        return match v {
            Value::Int(i) => Num::Int(i.into()),
            Value::UInt(u) => Num::Int(u.into()),
            Value::Double(f) => Num::Float(f),
            _ => Num::Int(0),
        };
    }
    let t = s.trim_start();
    let mut end = 0;
    let bytes = t.as_bytes();
    let mut seen_digit = false;
    let mut seen_dot = false;
    while end < bytes.len() {
        let b = bytes[end];
        if b.is_ascii_digit() {
            seen_digit = true;
        } else if b == b'.' && !seen_dot {
            seen_dot = true;
        } else if !((b == b'-' || b == b'+') && end == 0) {
            break;
        }
        end += 1;
    }
    if !seen_digit {
        return Num::Int(0);
    }
    Num::Float(t[..end].parse::<f64>().unwrap_or(0.0))
}

pub(crate) fn number(v: &Value) -> Option<Num> {
    Some(match v {
        Value::Null => return None,
        Value::Int(i) => Num::Int((*i).into()),
        Value::UInt(u) => Num::Int((*u).into()),
        Value::Float(f) => Num::Float(f64::from(*f)),
        Value::Double(f) => Num::Float(*f),
        Value::Str(s) => lenient_number(s),
        Value::Bytes(b) => lenient_number(&String::from_utf8_lossy(b)),
        Value::Decimal(d) => Num::Dec(*d),
        // A time in a numeric context: YYYYMMDDHHMMSS (YYYYMMDD, HHMMSS).
        Value::Timestamp(_) | Value::DateTime(_) | Value::Date(_) | Value::Time(_) => {
            let negative = matches!(v, Value::Time(t) if *t < 0);
            let text: String = String::from_utf8_lossy(&value_text(v))
                .chars()
                .filter(char::is_ascii_digit)
                .collect();
            let n: i128 = text.parse().unwrap_or(0);
            Num::Int(if negative { -n } else { n })
        }
    })
}

pub(crate) fn float(n: Num) -> f64 {
    match n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
        Num::Dec(d) => d.to_f64(),
    }
}

/// An exact number as a decimal (`None` for a float).
pub(super) fn exact(n: Num) -> Option<Decimal> {
    match n {
        Num::Int(i) => Some(Decimal::from_int(i)),
        Num::Dec(d) => Some(d),
        Num::Float(_) => None,
    }
}

pub(super) fn int_value(i: i128, what: &str) -> Result<Value, SqlError> {
    if let Ok(v) = i64::try_from(i) {
        Ok(Value::Int(v))
    } else if let Ok(v) = u64::try_from(i) {
        Ok(Value::UInt(v))
    } else {
        Err(out_of_range(what))
    }
}

/// A signed or unsigned integer (not a string or a time that reads as
/// one).
fn is_integer(v: &Value) -> bool {
    matches!(v, Value::Int(_) | Value::UInt(_))
}

fn unsigned_out_of_range(what: &str) -> SqlError {
    SqlError::new(
        1690,
        "22003",
        format!("BIGINT UNSIGNED value is out of range in '{what}'"),
    )
}

/// Whether a value counts as true (`None`: NULL).
pub fn truth(v: &Value) -> Option<bool> {
    number(v).map(|n| float(n) != 0.0)
}

/// A date or a date and time (TIME compares apart).
fn is_temporal(v: &Value) -> bool {
    matches!(v, Value::Timestamp(_) | Value::DateTime(_) | Value::Date(_))
}

/// Compares two non-NULL values as MySQL would (`None`: a NULL, or two
/// floats that do not compare).
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    if a.is_null() || b.is_null() {
        return None;
    }
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => {
            Some(trim_trailing_spaces(x.as_bytes()).cmp(trim_trailing_spaces(y.as_bytes())))
        }
        (Value::Bytes(_) | Value::Str(_), Value::Bytes(_) | Value::Str(_)) => {
            Some(a.as_bytes()?.cmp(b.as_bytes()?))
        }
        _ if is_temporal(a) && is_temporal(b) => Some(seconds(a)?.cmp(&seconds(b)?)),
        (Value::Time(t), other) | (other, Value::Time(t)) if compare_time(*t, other).is_some() => {
            let ord = compare_time(*t, other)?;
            Some(if matches!(a, Value::Time(_)) {
                ord
            } else {
                ord.reverse()
            })
        }
        _ if is_temporal(a) || is_temporal(b) => {
            let (t, other, flip) = if is_temporal(a) {
                (a, b, false)
            } else {
                (b, a, true)
            };
            let secs = seconds(t)?;
            let ord = match other {
                Value::Str(s) => compare_with_text(t, secs, s),
                _ => float(number(t)?).partial_cmp(&float(number(other)?))?,
            };
            Some(if flip { ord.reverse() } else { ord })
        }
        _ => match (number(a)?, number(b)?) {
            (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
            (x, y) => match (exact(x), exact(y)) {
                (Some(x), Some(y)) => Some(x.cmp_value(y)),
                _ => float(x).partial_cmp(&float(y)),
            },
        },
    }
}

/// The units LIKE matches on: characters of text, bytes of binary.
fn like_units(v: &Value) -> Vec<u32> {
    match v {
        Value::Bytes(b) => b.iter().map(|&x| u32::from(x)).collect(),
        other => String::from_utf8_lossy(&value_text(other))
            .chars()
            .map(u32::from)
            .collect(),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum LikeToken {
    Any,
    One,
    Literal(u32),
}

/// `value LIKE pattern`: `%` any run, `_` one unit, `escape` quotes the
/// next unit. Iterative with one backtrack point (linear-ish, no
/// recursion).
pub fn like(value: &Value, pattern: &Value, escape: Option<char>) -> bool {
    let v = like_units(value);
    let p = like_units(pattern);
    let esc = escape.map(u32::from);
    let mut tokens = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        let t = p[i];
        if Some(t) == esc && i + 1 < p.len() {
            tokens.push(LikeToken::Literal(p[i + 1]));
            i += 2;
            continue;
        }
        tokens.push(match t {
            0x25 => LikeToken::Any,
            0x5F => LikeToken::One,
            other => LikeToken::Literal(other),
        });
        i += 1;
    }
    let (mut vi, mut ti) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while vi < v.len() {
        match tokens.get(ti) {
            Some(LikeToken::Any) => {
                backtrack = Some((ti, vi));
                ti += 1;
            }
            Some(LikeToken::One) => {
                vi += 1;
                ti += 1;
            }
            Some(LikeToken::Literal(c)) if *c == v[vi] => {
                vi += 1;
                ti += 1;
            }
            _ => match backtrack {
                Some((bt, bv)) => {
                    backtrack = Some((bt, bv + 1));
                    ti = bt + 1;
                    vi = bv + 1;
                }
                None => return false,
            },
        }
    }
    tokens[ti..].iter().all(|t| *t == LikeToken::Any)
}

impl Scalar {
    /// The expression's value for `row` (the table's values by column id;
    /// empty without a table).
    pub fn eval(&self, row: &[Value]) -> Result<Value, SqlError> {
        Ok(match self {
            Scalar::Const(v) => v.clone(),
            Scalar::Column(c) => row.get(usize::from(*c)).cloned().unwrap_or(Value::Null),
            Scalar::Neg(e) => match number(&e.eval(row)?) {
                None => Value::Null,
                Some(Num::Int(i)) => int_value(-i, "negation")?,
                Some(Num::Float(f)) => Value::Double(-f),
                Some(Num::Dec(d)) => match d.unscaled.checked_neg() {
                    Some(n) => Value::Decimal(Decimal::new(n, d.scale)),
                    None => return Err(super::eval_types::decimal_out_of_range("negation")),
                },
            },
            Scalar::Not(e) => boolean(truth(&e.eval(row)?).map(|b| !b)),
            Scalar::Arith(op, a, b) => arith(*op, &a.eval(row)?, &b.eval(row)?)?,
            Scalar::Cmp(op, a, b) => {
                let (x, y) = (a.eval(row)?, b.eval(row)?);
                if *op == Cmp::NullSafeEq {
                    match (x.is_null(), y.is_null()) {
                        (true, true) => Value::Int(1),
                        (true, false) | (false, true) => Value::Int(0),
                        _ => boolean(Some(compare(&x, &y) == Some(Ordering::Equal))),
                    }
                } else if x.is_null() || y.is_null() {
                    Value::Null
                } else {
                    boolean(Some(compare(&x, &y).is_some_and(|o| op.holds(o))))
                }
            }
            Scalar::And(items) => {
                let mut unknown = false;
                for i in items {
                    match truth(&i.eval(row)?) {
                        Some(false) => return Ok(Value::Int(0)),
                        None => unknown = true,
                        Some(true) => {}
                    }
                }
                boolean((!unknown).then_some(true))
            }
            Scalar::Or(items) => {
                let mut unknown = false;
                for i in items {
                    match truth(&i.eval(row)?) {
                        Some(true) => return Ok(Value::Int(1)),
                        None => unknown = true,
                        Some(false) => {}
                    }
                }
                boolean((!unknown).then_some(false))
            }
            Scalar::Xor(a, b) => {
                let (x, y) = (truth(&a.eval(row)?), truth(&b.eval(row)?));
                boolean(x.zip(y).map(|(x, y)| x != y))
            }
            Scalar::IsNull(e, negated) => boolean(Some(e.eval(row)?.is_null() != *negated)),
            Scalar::IsBool(e, want, negated) => {
                let is = truth(&e.eval(row)?) == Some(*want);
                boolean(Some(is != *negated))
            }
            Scalar::Like {
                expr,
                pattern,
                escape,
                negated,
            } => {
                let (v, p) = (expr.eval(row)?, pattern.eval(row)?);
                if v.is_null() || p.is_null() {
                    Value::Null
                } else {
                    boolean(Some(like(&v, &p, *escape) != *negated))
                }
            }
            Scalar::InList {
                expr,
                list,
                negated,
                ints,
            } => {
                // An empty list (a subquery without rows) holds nothing:
                // IN is false and NOT IN true even for NULL, as in MySQL.
                if list.is_empty() {
                    return Ok(boolean(Some(*negated)));
                }
                let v = expr.eval(row)?;
                if v.is_null() {
                    return Ok(Value::Null);
                }
                // An integer against integers is exact equality, as
                // `compare` has it; the list holds no NULL to make it unknown.
                let int = match v {
                    Value::Int(i) => Some(i128::from(i)),
                    Value::UInt(u) => Some(i128::from(u)),
                    _ => None,
                };
                if let (Some(ints), Some(int)) = (ints, int) {
                    let found = ints.binary_search(&int).is_ok();
                    return Ok(boolean(Some(found != *negated)));
                }
                let mut unknown = false;
                for item in list {
                    let x = item.eval(row)?;
                    if x.is_null() {
                        unknown = true;
                    } else if compare(&v, &x) == Some(Ordering::Equal) {
                        return Ok(boolean(Some(!*negated)));
                    }
                }
                boolean((!unknown).then_some(*negated))
            }
            Scalar::Between {
                expr,
                low,
                high,
                negated,
            } => {
                let v = expr.eval(row)?;
                let (lo, hi) = (low.eval(row)?, high.eval(row)?);
                let above = if lo.is_null() || v.is_null() {
                    None
                } else {
                    Some(compare(&v, &lo).is_some_and(|o| o != Ordering::Less))
                };
                let below = if hi.is_null() || v.is_null() {
                    None
                } else {
                    Some(compare(&v, &hi).is_some_and(|o| o != Ordering::Greater))
                };
                let within = match (above, below) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                };
                boolean(within.map(|w| w != *negated))
            }
            Scalar::Case {
                operand,
                whens,
                otherwise,
            } => {
                let subject = operand.as_ref().map(|o| o.eval(row)).transpose()?;
                for (cond, result) in whens {
                    let c = cond.eval(row)?;
                    let hit = match &subject {
                        Some(s) => {
                            !s.is_null() && !c.is_null() && compare(s, &c) == Some(Ordering::Equal)
                        }
                        None => truth(&c) == Some(true),
                    };
                    if hit {
                        return result.eval(row);
                    }
                }
                match otherwise {
                    Some(o) => o.eval(row)?,
                    None => Value::Null,
                }
            }
            Scalar::Func(f, args) => function(*f, args, row)?,
            Scalar::Cast(e, to) => cast(&e.eval(row)?, *to)?,
        })
    }
}

fn arith(op: Arith, a: &Value, b: &Value) -> Result<Value, SqlError> {
    let (Some(x), Some(y)) = (number(a), number(b)) else {
        return Ok(Value::Null);
    };
    // The operation's text is only for an error's message: arithmetic is
    // pure, so it is run again with the text when it fails, instead of
    // formatting the text for every row.
    match arith_named(op, a, b, x, y, "") {
        Err(_) => arith_named(op, a, b, x, y, &operation_text(op, a, b)),
        ok => ok,
    }
}

fn operation_text(op: Arith, a: &Value, b: &Value) -> String {
    let name = match op {
        Arith::Add => "+",
        Arith::Sub => "-",
        Arith::Mul => "*",
        Arith::Div => "/",
        Arith::IntDiv => "DIV",
        Arith::Mod => "%",
    };
    format!(
        "{} {name} {}",
        String::from_utf8_lossy(&value_text(a)),
        String::from_utf8_lossy(&value_text(b))
    )
}

fn arith_named(
    op: Arith,
    a: &Value,
    b: &Value,
    x: Num,
    y: Num,
    what: &str,
) -> Result<Value, SqlError> {
    // Two integers divide exactly too, as DECIMALs (`10 / 4` is 2.5000).
    let integers = is_integer(a) && is_integer(b);
    if matches!(x, Num::Dec(_)) || matches!(y, Num::Dec(_)) || (op == Arith::Div && integers) {
        if let (Some(x), Some(y)) = (exact(x), exact(y)) {
            return decimal_arith(op, x, y, what);
        }
    }
    Ok(match (op, x, y) {
        (Arith::Div, x, y) => {
            let d = float(y);
            if d == 0.0 {
                Value::Null
            } else {
                Value::Double(float(x) / d)
            }
        }
        (Arith::IntDiv, x, y) => {
            let d = float(y);
            if d == 0.0 {
                Value::Null
            } else {
                match (x, y) {
                    (Num::Int(x), Num::Int(y)) => int_value(x / y, what)?,
                    _ => int_value((float(x) / d).trunc() as i128, what)?,
                }
            }
        }
        (Arith::Mod, Num::Int(x), Num::Int(y)) => {
            if y == 0 {
                Value::Null
            } else {
                int_value(x % y, what)?
            }
        }
        (Arith::Mod, x, y) => {
            let d = float(y);
            if d == 0.0 {
                Value::Null
            } else {
                Value::Double(float(x) % d)
            }
        }
        (op, Num::Int(x), Num::Int(y)) => {
            let r = match op {
                Arith::Add => x.checked_add(y),
                Arith::Sub => x.checked_sub(y),
                _ => x.checked_mul(y),
            }
            .ok_or_else(|| out_of_range(what))?;
            // MySQL types the result BIGINT UNSIGNED when an operand is
            // unsigned and BIGINT when both are signed: `-128 + 0` with
            // an unsigned 0 is out of range, and so is BIGINT max + 1.
            if matches!(a, Value::UInt(_)) || matches!(b, Value::UInt(_)) {
                Value::UInt(u64::try_from(r).map_err(|_| unsigned_out_of_range(what))?)
            } else if integers {
                Value::Int(i64::try_from(r).map_err(|_| out_of_range(what))?)
            } else {
                int_value(r, what)?
            }
        }
        (op, x, y) => {
            let (x, y) = (float(x), float(y));
            let r = match op {
                Arith::Add => x + y,
                Arith::Sub => x - y,
                _ => x * y,
            };
            if !r.is_finite() {
                return Err(SqlError::new(
                    1690,
                    "22003",
                    format!("DOUBLE value is out of range in '{what}'"),
                ));
            }
            Value::Double(r)
        }
    })
}

fn cast(v: &Value, to: CastTo) -> Result<Value, SqlError> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    Ok(match to {
        CastTo::Signed | CastTo::Unsigned => {
            let n = match number(v).expect("not NULL") {
                Num::Int(i) => i,
                Num::Float(f) => f.round() as i128,
                Num::Dec(d) => decimal_to_integer(d, false, false).unwrap_or(0),
            };
            if to == CastTo::Signed {
                Value::Int(n as i64)
            } else {
                Value::UInt(n as u64)
            }
        }
        CastTo::Char => Value::Str(String::from_utf8_lossy(&value_text(v)).into_owned()),
        CastTo::Binary => Value::Bytes(value_text(v)),
        CastTo::Double => Value::Double(float(number(v).expect("not NULL"))),
        CastTo::DateTime => match v {
            Value::Timestamp(s) => Value::DateTime(i64::from(*s)),
            Value::DateTime(_) => v.clone(),
            Value::Date(d) => Value::DateTime(crate::sqltypes::temporal::seconds_of_date(*d)),
            other => parse_datetime(&String::from_utf8_lossy(&value_text(other)))
                .map_or(Value::Null, Value::DateTime),
        },
        // A value that does not convert is NULL, as CAST gives it (with
        // a warning in MySQL).
        CastTo::Date => date_of(v),
        CastTo::Time => coerce(v, &ColumnDef::new("", ColumnType::Time), 1).unwrap_or(Value::Null),
        CastTo::Decimal { precision, scale } => {
            let col = ColumnDef::new("", ColumnType::Decimal { precision, scale });
            match coerce(v, &col, 1) {
                Ok(d) => d,
                Err(e) if e.code == 1264 => {
                    let shown = String::from_utf8_lossy(&value_text(v)).into_owned();
                    return Err(super::eval_types::decimal_out_of_range(&format!(
                        "CAST({shown} AS DECIMAL({precision},{scale}))"
                    )));
                }
                Err(_) => Value::Null,
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long list of integer constants is searched; the answer is the
    /// one comparing with each item gives, for values of every kind.
    #[test]
    fn a_searched_in_list_answers_as_a_scanned_one() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let value = |r: u64| match r % 7 {
            0 => Value::Int((r >> 8) as i64 % 40 - 20),
            1 => Value::UInt((r >> 8) % 40),
            2 => Value::Double(((r >> 8) % 40) as f64 - 20.0),
            3 => Value::Str(((r >> 8) % 40).to_string()),
            4 => Value::Null,
            5 => Value::Int(i64::MIN + (r >> 60) as i64),
            _ => Value::UInt(u64::MAX - (r >> 60)),
        };
        for _ in 0..2000 {
            let len = (next() % 40) as usize;
            let ints_only = next() % 3 != 0;
            let list: Vec<Scalar> = (0..len)
                .map(|_| {
                    let r = next();
                    Scalar::Const(if ints_only {
                        match r % 3 {
                            0 => Value::Int((r >> 8) as i64 % 40 - 20),
                            1 => Value::UInt((r >> 8) % 40),
                            _ => Value::Int(i64::MIN + (r >> 60) as i64),
                        }
                    } else {
                        value(r)
                    })
                })
                .collect();
            let negated = next() % 2 == 0;
            let v = value(next());
            let searched =
                Scalar::in_list(Box::new(Scalar::Const(v.clone())), list.clone(), negated);
            let scanned = Scalar::InList {
                expr: Box::new(Scalar::Const(v.clone())),
                list: list.clone(),
                negated,
                ints: None,
            };
            if ints_only && len >= 16 {
                assert!(matches!(&searched, Scalar::InList { ints: Some(_), .. }));
            }
            assert_eq!(
                searched.eval(&[]).unwrap(),
                scanned.eval(&[]).unwrap(),
                "{v:?} IN {list:?} negated {negated}"
            );
        }
    }

    #[test]
    fn like_matches_as_mysql() {
        let s = |x: &str| Value::Str(x.into());
        let esc = Some('\\');
        assert!(like(&s("abc"), &s("a%"), esc));
        assert!(like(&s("abc"), &s("%c"), esc));
        assert!(like(&s("abc"), &s("a_c"), esc));
        assert!(!like(&s("abc"), &s("a_"), esc));
        assert!(like(&s("héllo"), &s("h_llo"), esc));
        assert!(like(&s("a%b"), &s("a\\%b"), esc));
        assert!(!like(&s("axb"), &s("a\\%b"), esc));
        assert!(like(&s(""), &s("%"), esc));
        assert!(like(&s("mississippi"), &s("%iss%pi"), esc));
        assert!(!like(&s("abc"), &s("ABC"), esc), "binary collation");
    }

    #[test]
    fn comparisons_follow_mysql_types() {
        let s = |x: &str| Value::Str(x.into());
        assert_eq!(
            compare(&Value::Int(2), &Value::UInt(10)),
            Some(Ordering::Less)
        );
        assert_eq!(
            compare(&Value::Int(2), &Value::Double(2.0)),
            Some(Ordering::Equal)
        );
        assert_eq!(
            compare(&Value::Int(10), &s("9")),
            Some(Ordering::Greater),
            "numeric"
        );
        assert_eq!(
            compare(&s("10"), &s("9")),
            Some(Ordering::Less),
            "as strings"
        );
        assert_eq!(
            compare(&s("a "), &s("a")),
            Some(Ordering::Equal),
            "PAD SPACE"
        );
        assert_eq!(
            compare(&Value::DateTime(86_400), &s("1970-01-02 00:00:00")),
            Some(Ordering::Equal)
        );
        assert_eq!(compare(&Value::Null, &Value::Int(1)), None);
    }

    #[test]
    fn arithmetic_and_overflow() {
        assert_eq!(
            arith(Arith::Add, &Value::Int(1), &Value::Int(1)).unwrap(),
            Value::Int(2)
        );
        assert_eq!(
            arith(Arith::Div, &Value::Int(1), &Value::Int(2)).unwrap(),
            Value::Decimal(Decimal::new(5000, 4))
        );
        assert_eq!(
            arith(Arith::Div, &Value::Double(1.0), &Value::Int(2)).unwrap(),
            Value::Double(0.5)
        );
        assert_eq!(
            arith(Arith::Add, &Value::Int(i64::MAX), &Value::Int(1))
                .unwrap_err()
                .code,
            1690
        );
        assert_eq!(
            arith(Arith::Add, &Value::Int(-1), &Value::UInt(0))
                .unwrap_err()
                .code,
            1690
        );
        assert_eq!(
            arith(Arith::Div, &Value::Int(1), &Value::Int(0)).unwrap(),
            Value::Null
        );
        assert_eq!(
            arith(Arith::IntDiv, &Value::Int(7), &Value::Int(2)).unwrap(),
            Value::Int(3)
        );
        assert_eq!(
            arith(Arith::Mod, &Value::Int(7), &Value::Int(3)).unwrap(),
            Value::Int(1)
        );
        assert_eq!(
            arith(Arith::Add, &Value::UInt(u64::MAX), &Value::Int(1))
                .unwrap_err()
                .code,
            1690
        );
        assert_eq!(
            arith(Arith::Add, &Value::UInt(u64::MAX), &Value::Int(-1)).unwrap(),
            Value::UInt(u64::MAX - 1)
        );
        assert_eq!(
            arith(Arith::Add, &Value::Null, &Value::Int(1)).unwrap(),
            Value::Null
        );
    }
}
