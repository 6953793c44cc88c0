//! Evaluating compiled [`Scalar`]s on a row with MySQL's rules: NULL
//! propagates, comparisons pick integer, floating-point, string or time
//! comparison by their operands (strings by bytes, trailing spaces
//! ignored, as `utf8mb4_bin` does), booleans are `1` / `0`, LIKE, the
//! functions and casts. The compiler ([`super::expr`]) folds constants
//! through the same code.
//!
//! Invariant: evaluating fails only on values (1690 out of range, 1301
//! a string past [`STRING_BYTES_MAX`]), never on names.

use super::eval_types::{
    compare_time, compare_with_text, date_of, date_part, decimal_arith, decimal_round,
    decimal_to_integer, double_round, integer_round, seconds,
};
use super::expr::{out_of_range, Arith, CastTo, Cmp, Func, Scalar};
use crate::outcome::SqlError;
use crate::sqltypes::{coerce, parse_datetime, parse_number, value_text};
use shoal_types::decimal::DECIMAL_SCALE_MAX;
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
fn exact(n: Num) -> Option<Decimal> {
    match n {
        Num::Int(i) => Some(Decimal::from_int(i)),
        Num::Dec(d) => Some(d),
        Num::Float(_) => None,
    }
}

fn int_value(i: i128, what: &str) -> Result<Value, SqlError> {
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

/// Strips trailing spaces (utf8mb4_bin is a PAD SPACE collation).
fn pad_trim(b: &[u8]) -> &[u8] {
    let end = b.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1);
    &b[..end]
}

/// Compares two non-NULL values as MySQL would (`None`: a NULL, or two
/// floats that do not compare).
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    if a.is_null() || b.is_null() {
        return None;
    }
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => Some(pad_trim(x.as_bytes()).cmp(pad_trim(y.as_bytes()))),
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
    let name = match op {
        Arith::Add => "+",
        Arith::Sub => "-",
        Arith::Mul => "*",
        Arith::Div => "/",
        Arith::IntDiv => "DIV",
        Arith::Mod => "%",
    };
    let what = format!(
        "{} {name} {}",
        String::from_utf8_lossy(&value_text(a)),
        String::from_utf8_lossy(&value_text(b))
    );
    // Two integers divide exactly too, as DECIMALs (`10 / 4` is 2.5000).
    let integers = is_integer(a) && is_integer(b);
    if matches!(x, Num::Dec(_)) || matches!(y, Num::Dec(_)) || (op == Arith::Div && integers) {
        if let (Some(x), Some(y)) = (exact(x), exact(y)) {
            return decimal_arith(op, x, y, &what);
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
                    (Num::Int(x), Num::Int(y)) => int_value(x / y, &what)?,
                    _ => int_value((float(x) / d).trunc() as i128, &what)?,
                }
            }
        }
        (Arith::Mod, Num::Int(x), Num::Int(y)) => {
            if y == 0 {
                Value::Null
            } else {
                int_value(x % y, &what)?
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
            .ok_or_else(|| out_of_range(&what))?;
            // MySQL types the result BIGINT UNSIGNED when an operand is
            // unsigned and BIGINT when both are signed: `-128 + 0` with
            // an unsigned 0 is out of range, and so is BIGINT max + 1.
            if matches!(a, Value::UInt(_)) || matches!(b, Value::UInt(_)) {
                Value::UInt(u64::try_from(r).map_err(|_| unsigned_out_of_range(&what))?)
            } else if integers {
                Value::Int(i64::try_from(r).map_err(|_| out_of_range(&what))?)
            } else {
                int_value(r, &what)?
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

fn function(f: Func, args: &[Scalar], row: &[Value]) -> Result<Value, SqlError> {
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
