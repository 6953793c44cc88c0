//! DATETIME, TIMESTAMP, DATE and TIME as SQL reads and writes them:
//! `'YYYY-MM-DD HH:MM:SS'`, `'YYYY-MM-DD'` and `'[-]HH:MM:SS'`, parsed
//! strictly (an impossible date is no date), and converted for columns
//! with MySQL's strict-mode error 1292.
//!
//! TIME keeps no fractional seconds in SQL (as a TIME column declared
//! without a precision): a fraction rounds to the nearest second.

use super::{incorrect, value_text};
use crate::outcome::SqlError;
use shoal_types::temporal::{
    civil_from_days, date_from_ymd, days_from_civil, days_in_month, DATE_MAX, DATE_MIN, TIME_MAX,
};
use shoal_types::value::{DATETIME_MAX, DATETIME_MIN};
use shoal_types::{ColumnType, Value};

const MICROS_PER_SECOND: i64 = 1_000_000;
const SECONDS_PER_DAY: i64 = 86_400;

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

/// Reads a date as a DATE: `YYYY-MM-DD`, `YYYYMMDD`, or a date and time
/// (whose time is dropped, as MySQL stores a DATETIME in a DATE); `None`
/// if it is not a valid date within 1000..=9999.
pub fn parse_date(s: &str) -> Option<i32> {
    let days = parse_datetime(s)?.div_euclid(SECONDS_PER_DAY);
    i32::try_from(days)
        .ok()
        .filter(|d| (DATE_MIN..=DATE_MAX).contains(d))
}

/// Reads a TIME as microseconds (whole seconds: a fraction rounds):
/// `[-][D ]H:MM:SS[.f]`, `[-]H:MM`, `[-]HHMMSS[.f]` (also `MMSS`, `SS`),
/// or a date and time, whose time of day it takes. `None` if it is none
/// of those or lies outside ±838:59:59.
pub fn parse_time(s: &str) -> Option<i64> {
    let t = s.trim();
    // A full date and time: its time of day.
    if t.len() > 10 && t.as_bytes().get(4) == Some(&b'-') {
        let secs = parse_datetime(t)?;
        return Some(secs.rem_euclid(SECONDS_PER_DAY) * MICROS_PER_SECOND);
    }
    let (negative, body) = match t.strip_prefix('-') {
        Some(rest) => (true, rest.trim_start()),
        None => (false, t),
    };
    let (whole, fraction) = match body.split_once('.') {
        Some((w, f)) if !f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()) => (w, Some(f)),
        Some(_) => return None,
        None => (body, None),
    };
    let number = |x: &str| -> Option<i64> {
        if x.is_empty() || x.len() > 9 || !x.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        x.parse().ok()
    };
    let (days, clock) = match whole.split_once(' ') {
        Some((d, c)) => (number(d)?, c.trim()),
        None => (0, whole),
    };
    let (h, m, sec) = if clock.contains(':') {
        let mut parts = clock.split(':');
        let h = number(parts.next()?)?;
        let m = number(parts.next()?)?;
        let sec = match parts.next() {
            Some(x) => number(x)?,
            None => 0,
        };
        if parts.next().is_some() {
            return None;
        }
        (h, m, sec)
    } else {
        if days != 0 {
            return None;
        }
        // Digits from the right: SS, MMSS, HHMMSS (hours may take more).
        let n = number(clock)?;
        (n / 10_000, n / 100 % 100, n % 100)
    };
    if m > 59 || sec > 59 {
        return None;
    }
    let mut secs = (days.checked_mul(24)? + h).checked_mul(3600)? + m * 60 + sec;
    if let Some(f) = fraction {
        // Rounds half up on the first digit: .5 and more adds a second.
        secs += i64::from(f.as_bytes()[0] >= b'5');
    }
    let micros = secs.checked_mul(MICROS_PER_SECOND)?;
    (micros <= TIME_MAX).then_some(if negative { -micros } else { micros })
}

pub use shoal_types::temporal::{format_date as date_text, format_time as time_text};

/// A date and time's day, as a DATE (a DATETIME in a DATE context).
pub fn date_of_seconds(secs: i64) -> Option<i32> {
    i32::try_from(secs.div_euclid(SECONDS_PER_DAY))
        .ok()
        .filter(|d| (DATE_MIN..=DATE_MAX).contains(d))
}

/// A DATE as seconds since 1970 at its midnight (to compare it with a
/// DATETIME, as MySQL does).
pub fn seconds_of_date(days: i32) -> i64 {
    i64::from(days) * SECONDS_PER_DAY
}

/// (year, month, day) of a DATE.
pub fn ymd(days: i32) -> (i64, u32, u32) {
    civil_from_days(i64::from(days))
}

fn incorrect_temporal(kind: &str, shown: &str, col: &str, row: usize) -> SqlError {
    SqlError::new(
        1292,
        "22007",
        format!("Incorrect {kind} value: '{shown}' for column '{col}' at row {row}"),
    )
}

/// Converts `v` (not NULL) for a DATE or TIME column as MySQL's strict
/// mode does: a string must be a valid date (time), a number reads as
/// `YYYYMMDD` (`HHMMSS`), a DATETIME gives its date (time of day); 1292
/// otherwise.
pub fn coerce_temporal(
    v: &Value,
    ty: ColumnType,
    col: &str,
    row: usize,
) -> Result<Value, SqlError> {
    let shown = || String::from_utf8_lossy(&value_text(v)).into_owned();
    match ty {
        ColumnType::Date => {
            let days = match v {
                Value::Date(d) => Some(*d),
                Value::DateTime(s) => date_of_seconds(*s),
                Value::Timestamp(s) => date_of_seconds(i64::from(*s)),
                Value::Time(_) => None,
                other => parse_date(&String::from_utf8_lossy(&value_text(other))),
            };
            days.map(Value::Date)
                .ok_or_else(|| incorrect_temporal("date", &shown(), col, row))
        }
        ColumnType::Time => {
            let micros = match v {
                Value::Time(t) => (-TIME_MAX..=TIME_MAX).contains(t).then_some(*t),
                Value::DateTime(s) => Some(s.rem_euclid(SECONDS_PER_DAY) * MICROS_PER_SECOND),
                Value::Timestamp(s) => {
                    Some(i64::from(*s).rem_euclid(SECONDS_PER_DAY) * MICROS_PER_SECOND)
                }
                Value::Date(_) => None,
                other => parse_time(&String::from_utf8_lossy(&value_text(other))),
            };
            micros
                .map(Value::Time)
                .ok_or_else(|| incorrect_temporal("time", &shown(), col, row))
        }
        _ => Err(incorrect("value", &shown(), col, row)),
    }
}

/// `v` as a DATE or TIME that compares as SQL compares `v` with the
/// column's values (keys, index bounds, pushed-down filters), if one
/// exists: a DATETIME with a time of day is between two dates, so none.
pub fn exact_temporal(v: &Value, ty: ColumnType) -> Option<Value> {
    match ty {
        ColumnType::Date => match v {
            Value::Date(d) => Some(Value::Date(*d)),
            Value::Str(s) => {
                let secs = parse_datetime(s)?;
                (secs.rem_euclid(SECONDS_PER_DAY) == 0)
                    .then(|| date_of_seconds(secs).map(Value::Date))
                    .flatten()
            }
            Value::DateTime(s) if s.rem_euclid(SECONDS_PER_DAY) == 0 => {
                date_of_seconds(*s).map(Value::Date)
            }
            _ => None,
        },
        ColumnType::Time => match v {
            Value::Time(t) if (-TIME_MAX..=TIME_MAX).contains(t) => Some(Value::Time(*t)),
            Value::Str(s) => parse_time(s).map(Value::Time),
            _ => None,
        },
        _ => None,
    }
}

/// Whether a DATETIME is within DATETIME's range.
pub fn datetime_in_range(secs: i64) -> bool {
    (DATETIME_MIN..=DATETIME_MAX).contains(&secs)
}

/// A DATE at `y-m-d`, if valid (for functions building dates).
pub fn date(y: i64, m: u32, d: u32) -> Option<i32> {
    date_from_ymd(y, m, d)
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
    fn dates_and_times_parse_strictly() {
        assert_eq!(parse_date("2024-01-05"), date_from_ymd(2024, 1, 5));
        assert_eq!(parse_date("20240105"), date_from_ymd(2024, 1, 5));
        assert_eq!(parse_date("2024-01-05 10:00:00"), date_from_ymd(2024, 1, 5));
        for bad in ["2024-02-30", "0999-12-31", "2024-1", "x", ""] {
            assert_eq!(parse_date(bad), None, "{bad}");
        }
        let hms = |h: i64, m: i64, s: i64| (h * 3600 + m * 60 + s) * 1_000_000;
        assert_eq!(parse_time("12:34:56"), Some(hms(12, 34, 56)));
        assert_eq!(parse_time("-01:00:00"), Some(-hms(1, 0, 0)));
        assert_eq!(parse_time("838:59:59"), Some(TIME_MAX));
        assert_eq!(parse_time("1 02:00:00"), Some(hms(26, 0, 0)));
        assert_eq!(parse_time("10:30"), Some(hms(10, 30, 0)));
        assert_eq!(parse_time("123456"), Some(hms(12, 34, 56)));
        assert_eq!(parse_time("0:0:1.5"), Some(hms(0, 0, 2)));
        assert_eq!(parse_time("2024-01-05 10:11:12"), Some(hms(10, 11, 12)));
        for bad in ["839:00:00", "10:60:00", "x", "", "1:2:3:4", "99999999999"] {
            assert_eq!(parse_time(bad), None, "{bad}");
        }
        assert_eq!(time_text(-hms(1, 2, 3)), "-01:02:03");
        assert_eq!(date_text(0), "1970-01-01");
    }

    #[test]
    fn columns_take_dates_and_times_with_mysql_errors() {
        let d = coerce_temporal(&"2024-02-29".into(), ColumnType::Date, "d", 1).unwrap();
        assert_eq!(d, Value::Date(date_from_ymd(2024, 2, 29).unwrap()));
        let e = coerce_temporal(&"2024-02-30".into(), ColumnType::Date, "d", 3).unwrap_err();
        assert_eq!(e.code, 1292);
        assert!(
            e.message.contains("Incorrect date value: '2024-02-30'"),
            "{}",
            e.message
        );
        assert_eq!(
            coerce_temporal(&Value::Int(20240105), ColumnType::Date, "d", 1).unwrap(),
            Value::Date(date_from_ymd(2024, 1, 5).unwrap())
        );
        assert_eq!(
            coerce_temporal(&"900:00:00".into(), ColumnType::Time, "t", 1)
                .unwrap_err()
                .code,
            1292
        );
    }
}
