//! Calendar arithmetic for DATE and TIME values: a DATE is a day number
//! (days since 1970-01-01, proleptic Gregorian), a TIME a signed count of
//! microseconds within MySQL's range of ±838:59:59.
//!
//! Invariant: nothing here panics on any input (day numbers are widened to
//! `i64` before any arithmetic).

/// Day number of 1000-01-01, the first DATE.
pub const DATE_MIN: i32 = -354_285;
/// Day number of 9999-12-31, the last DATE.
pub const DATE_MAX: i32 = 2_932_896;
/// Microseconds of 838:59:59, the largest TIME (and, negated, the smallest).
pub const TIME_MAX: i64 = (838 * 3600 + 59 * 60 + 59) * 1_000_000;

/// Days since 1970-01-01 of a proleptic Gregorian date (any y, m in
/// 1..=12, d in 1..=31; not checked).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The (year, month, day) of a day number.
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
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

pub fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// The DATE of a calendar day, if it is one and within 1000..=9999.
pub fn date_from_ymd(y: i64, m: u32, d: u32) -> Option<i32> {
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    let days = days_from_civil(y, m, d);
    i32::try_from(days)
        .ok()
        .filter(|n| (DATE_MIN..=DATE_MAX).contains(n))
}

/// `YYYY-MM-DD`.
pub fn format_date(days: i32) -> String {
    let (y, m, d) = civil_from_days(i64::from(days));
    format!("{y:04}-{m:02}-{d:02}")
}

/// `[-]HH:MM:SS`, with `.ffffff` when there are microseconds; hours may
/// run past 24 (up to 838).
pub fn format_time(micros: i64) -> String {
    let sign = if micros < 0 { "-" } else { "" };
    let abs = micros.unsigned_abs();
    let (secs, frac) = (abs / 1_000_000, abs % 1_000_000);
    let mut out = format!(
        "{sign}{:02}:{:02}:{:02}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    );
    if frac != 0 {
        out.push_str(&format!(".{frac:06}"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn range_ends() {
        assert_eq!(date_from_ymd(1000, 1, 1), Some(DATE_MIN));
        assert_eq!(date_from_ymd(9999, 12, 31), Some(DATE_MAX));
        assert_eq!(date_from_ymd(999, 12, 31), None);
        assert_eq!(date_from_ymd(2024, 2, 30), None);
        assert_eq!(date_from_ymd(2023, 2, 29), None);
        assert_eq!(date_from_ymd(1970, 1, 1), Some(0));
        assert_eq!(format_date(DATE_MIN), "1000-01-01");
        assert_eq!(format_date(DATE_MAX), "9999-12-31");
        assert_eq!(format_time(-TIME_MAX), "-838:59:59");
        assert_eq!(format_time(1_500_000), "00:00:01.500000");
        assert_eq!(format_time(-1_000_000), "-00:00:01");
    }

    proptest! {
        #[test]
        fn day_numbers_round_trip(days in DATE_MIN..=DATE_MAX) {
            let (y, m, d) = civil_from_days(i64::from(days));
            prop_assert_eq!(date_from_ymd(y, m, d), Some(days));
        }
    }
}
