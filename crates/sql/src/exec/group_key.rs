//! What grouping holds and what it may hold: the byte keys groups and
//! DISTINCT sets are found by, and the budget of a statement's groups.
//!
//! A key encodes values so that values SQL finds equal encode alike
//! (`2` and `2.0`, `'a'` and `'a '`: `utf8mb4_bin` pads) and so that
//! byte order is SQL's order (NULL first, then numbers, strings and
//! times each in their order): an ordered map of keys hands groups out
//! sorted as MariaDB's GROUP BY sorts them.
//!
//! Invariant: everything a statement's grouping holds is charged to its
//! [`Budget`] first, so it stays within `rows_max` entries and
//! `group_bytes_max` bytes (1038 past either).

use crate::outcome::SqlError;
use shoal_types::Value;

/// Tags: the order of value kinds in a key.
const TAG_NULL: u8 = 0x00;
const TAG_NUMBER: u8 = 0x10;
const TAG_STRING: u8 = 0x20;
const TAG_TIME: u8 = 0x30;
/// TIME values: a time of day is no point in time, so apart from those.
const TAG_TIME_OF_DAY: u8 = 0x38;

/// Appends `b` escaped (0x00 → 0x00 0xFF) and terminated (0x00 0x00), so
/// that a string sorts before its extensions.
fn put_escaped(out: &mut Vec<u8>, b: &[u8]) {
    // Runs without a zero byte are copied whole (text rarely has one).
    let mut rest = b;
    while let Some(at) = rest.iter().position(|&x| x == 0) {
        out.extend_from_slice(&rest[..=at]);
        out.push(0xFF);
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
    out.extend_from_slice(&[0, 0]);
}

/// A double's bits in an order that sorts as the doubles do.
fn ordered_f64(x: f64) -> [u8; 8] {
    // -0.0 equals 0.0.
    let x = if x == 0.0 { 0.0 } else { x };
    let bits = x.to_bits();
    let bits = if bits >> 63 == 1 {
        !bits
    } else {
        bits ^ (1 << 63)
    };
    bits.to_be_bytes()
}

fn put_number(out: &mut Vec<u8>, approx: f64, exact: i128) {
    put_number_parts(out, approx, exact, 0);
}

/// A number's key: its double (which orders), then its exact whole part
/// (floor) and its fraction in units of 10^-30, which tell apart numbers
/// the double cannot (integers past 2^53, decimals that differ in their
/// last digits).
fn put_number_parts(out: &mut Vec<u8>, approx: f64, whole: i128, fraction: i128) {
    out.push(TAG_NUMBER);
    out.extend_from_slice(&ordered_f64(approx));
    out.extend_from_slice(&((whole as u128) ^ (1 << 127)).to_be_bytes());
    out.extend_from_slice(&((fraction as u128) ^ (1 << 127)).to_be_bytes());
}

/// Appends one value's key.
pub fn encode_value(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.push(TAG_NULL),
        Value::Int(i) => put_number(out, *i as f64, i128::from(*i)),
        Value::UInt(u) => put_number(out, *u as f64, i128::from(*u)),
        Value::Float(f) => put_double(out, f64::from(*f)),
        Value::Double(f) => put_double(out, *f),
        Value::Str(s) => {
            out.push(TAG_STRING);
            // utf8mb4_bin is PAD SPACE: trailing spaces do not count.
            put_escaped(out, shoal_types::value::trim_trailing_spaces(s.as_bytes()));
        }
        Value::Bytes(b) => {
            out.push(TAG_STRING);
            put_escaped(out, b);
        }
        Value::Timestamp(s) => put_time(out, i64::from(*s)),
        Value::DateTime(s) => put_time(out, *s),
        // A DATE equals the DATETIME at its midnight.
        Value::Date(d) => put_time(out, crate::sqltypes::temporal::seconds_of_date(*d)),
        Value::Time(t) => {
            out.push(TAG_TIME_OF_DAY);
            out.extend_from_slice(&((*t as u64) ^ (1 << 63)).to_be_bytes());
        }
        Value::Decimal(d) => put_decimal(out, *d),
    }
}

/// A decimal keys as the number it is: its floor and its fraction at 30
/// digits (a scale never exceeds 30, so both are exact), so `2.00` groups
/// with `2` and decimals no double tells apart still differ, in order.
fn put_decimal(out: &mut Vec<u8>, d: shoal_types::Decimal) {
    let one = shoal_types::decimal::pow10(u32::from(d.scale)).unwrap_or(1);
    let whole = d.unscaled.div_euclid(one);
    let rest = d.unscaled.rem_euclid(one);
    let up = shoal_types::decimal::pow10(u32::from(
        shoal_types::decimal::DECIMAL_SCALE_MAX.saturating_sub(d.scale),
    ))
    .unwrap_or(1);
    // rest < 10^scale, so rest × 10^(30 - scale) < 10^30: no overflow.
    put_number_parts(out, d.to_f64(), whole, rest.saturating_mul(up));
}

fn put_double(out: &mut Vec<u8>, f: f64) {
    // An integral double keys as the integer it equals.
    let exact = if f.is_finite() && f.fract() == 0.0 && f.abs() < 1e38 {
        f as i128
    } else {
        0
    };
    put_number(out, f, exact);
}

fn put_time(out: &mut Vec<u8>, secs: i64) {
    out.push(TAG_TIME);
    out.extend_from_slice(&((secs as u64) ^ (1 << 63)).to_be_bytes());
}

/// The key of a tuple of values.
pub fn encode_values(values: &[Value]) -> Vec<u8> {
    let mut out = Vec::with_capacity(values.len() * 16);
    for v in values {
        encode_value(&mut out, v);
    }
    out
}

/// Bytes a value takes held in memory.
pub fn value_bytes(v: &Value) -> usize {
    std::mem::size_of::<Value>()
        + match v {
            Value::Str(s) => s.len(),
            Value::Bytes(b) => b.len(),
            _ => 0,
        }
}

/// Bytes a held row of values takes.
pub fn row_bytes(row: &[Value]) -> usize {
    std::mem::size_of::<Vec<Value>>() + row.iter().map(value_bytes).sum::<usize>()
}

/// What one statement's grouping holds: groups, DISTINCT values, and the
/// rows a DISTINCT over groups keeps apart.
#[derive(Debug)]
pub struct Budget {
    entries: usize,
    bytes: usize,
    entries_max: usize,
    bytes_max: usize,
}

impl Budget {
    pub fn new(entries_max: usize, bytes_max: usize) -> Budget {
        Budget {
            entries: 0,
            bytes: 0,
            entries_max,
            bytes_max,
        }
    }

    /// Takes `entries` more entries of `bytes` bytes, or fails with 1038
    /// naming the bound that would be passed.
    pub fn charge(&mut self, entries: usize, bytes: usize) -> Result<(), SqlError> {
        self.entries = self.entries.saturating_add(entries);
        self.bytes = self.bytes.saturating_add(bytes);
        if self.entries > self.entries_max {
            return Err(SqlError::new(
                1038,
                "HY001",
                format!(
                    "Out of memory for GROUP BY / DISTINCT: more than {} groups and distinct values held at once (the SQL node's rows_max); narrow the statement with WHERE, or group by fewer distinct values",
                    self.entries_max
                ),
            ));
        }
        if self.bytes > self.bytes_max {
            return Err(SqlError::new(
                1038,
                "HY001",
                format!(
                    "Out of memory for GROUP BY / DISTINCT: more than {} bytes of groups and distinct values held at once (the SQL node's group_bytes_max); narrow the statement with WHERE, or group by fewer or shorter values",
                    self.bytes_max
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::expr::compare;
    use std::cmp::Ordering;

    fn key(v: &Value) -> Vec<u8> {
        encode_values(std::slice::from_ref(v))
    }

    #[test]
    fn escaping_matches_the_byte_by_byte_definition() {
        let plain = |b: &[u8]| {
            let mut out = Vec::new();
            for &x in b {
                out.push(x);
                if x == 0 {
                    out.push(0xFF);
                }
            }
            out.extend_from_slice(&[0, 0]);
            out
        };
        for b in [
            &b""[..],
            b"\0",
            b"a\0",
            b"\0a",
            b"\0\0",
            b"ab\0c\0\0d",
            b"abc",
        ] {
            let mut out = Vec::new();
            put_escaped(&mut out, b);
            assert_eq!(out, plain(b), "{b:?}");
        }
    }

    #[test]
    fn equal_values_key_alike() {
        assert_eq!(key(&Value::Int(2)), key(&Value::Double(2.0)));
        assert_eq!(key(&Value::Int(2)), key(&Value::UInt(2)));
        assert_eq!(key(&Value::Double(0.0)), key(&Value::Double(-0.0)));
        assert_eq!(key(&Value::Str("a".into())), key(&Value::Str("a  ".into())));
        assert_ne!(
            key(&Value::Bytes(b"a".to_vec())),
            key(&Value::Bytes(b"a ".to_vec()))
        );
        assert_ne!(
            key(&Value::Int(1 << 53)),
            key(&Value::Int((1 << 53) + 1)),
            "integers past a double's precision stay apart"
        );
        assert_eq!(key(&Value::Timestamp(5)), key(&Value::DateTime(5)));
        let dec = |s: &str| Value::Decimal(shoal_types::Decimal::parse(s).unwrap());
        assert_eq!(key(&dec("2.00")), key(&Value::Int(2)));
        assert_eq!(key(&dec("1.50")), key(&dec("1.5")));
        assert!(key(&dec("-1.5")) < key(&dec("1.25")));
        assert!(key(&Value::Time(-1)) < key(&Value::Time(0)));
        assert_eq!(key(&Value::Date(1)), key(&Value::DateTime(86_400)));
    }

    /// Keys sort as SQL compares, over a spread of values of each kind
    /// (a model: `compare`, NULL first).
    #[test]
    fn keys_sort_as_sql_compares() {
        let mut seed = 0x1234_5678_9ABC_DEF1u64;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let pools: Vec<Vec<Value>> = vec![
            (0..60)
                .map(|_| match next() % 5 {
                    0 => Value::Int((next() % 2000) as i64 - 1000),
                    1 => Value::Int(next() as i64),
                    2 => Value::UInt(next()),
                    3 => Value::Double((next() % 20_000) as f64 / 7.0 - 1000.0),
                    _ => Value::Null,
                })
                .collect(),
            (0..60)
                .map(|_| {
                    let len = next() % 4;
                    let s: String = (0..len)
                        .map(|_| ['a', 'b', ' ', '\0', 'é'][(next() % 5) as usize])
                        .collect();
                    if next() % 6 == 0 {
                        Value::Null
                    } else {
                        Value::Str(s)
                    }
                })
                .collect(),
        ];
        for pool in pools {
            for a in &pool {
                for b in &pool {
                    let want = match (a.is_null(), b.is_null()) {
                        (true, true) => Ordering::Equal,
                        (true, false) => Ordering::Less,
                        (false, true) => Ordering::Greater,
                        _ => compare(a, b).unwrap(),
                    };
                    assert_eq!(key(a).cmp(&key(b)), want, "{a:?} vs {b:?}");
                }
            }
        }
    }

    #[test]
    fn the_budget_fails_past_either_bound() {
        let mut b = Budget::new(2, 100);
        b.charge(2, 50).unwrap();
        let e = b.charge(1, 0).unwrap_err();
        assert_eq!(e.code, 1038);
        assert!(e.message.contains("rows_max"), "{e}");
        let mut b = Budget::new(10, 100);
        let e = b.charge(1, 101).unwrap_err();
        assert!(e.message.contains("group_bytes_max"), "{e}");
    }
}
