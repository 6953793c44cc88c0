//! Column values and their canonical byte encoding (the "attribute bytes"
//! that travel on the wire and sit in stored rows):
//!
//! | type | bytes |
//! |---|---|
//! | TINYINT/SMALLINT/INT/BIGINT | 1/2/4/8, little-endian two's complement or unsigned |
//! | FLOAT / DOUBLE | 4 / 8, IEEE-754 little-endian |
//! | CHAR(n) | exactly n, right-padded with spaces |
//! | BINARY(n) | exactly n, right-padded with 0x00 |
//! | VARCHAR(n) / VARBINARY(n) | 0..=n bytes (the length travels beside them) |
//! | TIMESTAMP | 4, u32 seconds since 1970-01-01 UTC |
//! | DATETIME | 8, i64 seconds since 1970-01-01 UTC, years 1000..=9999 |
//! | DATE | 4, i32 days since 1970-01-01, 1000-01-01..=9999-12-31 |
//! | TIME | 8, i64 microseconds, -838:59:59..=838:59:59 |
//! | DECIMAL(p,s) | 16, i128 unscaled value (the number × 10^s), fewer than p digits |

use crate::decimal::Decimal;
use crate::error::{ErrorCode, ShoalError};
use crate::schema::{ColumnDef, ColumnType};
use crate::temporal::{DATE_MAX, DATE_MIN, TIME_MAX};
use serde::{Deserialize, Serialize};

/// Seconds since 1970 of 1000-01-01 00:00:00 and 9999-12-31 23:59:59.
pub const DATETIME_MIN: i64 = -30_610_224_000;
pub const DATETIME_MAX: i64 = 253_402_300_799;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    Null,
    Int(i64),
    UInt(u64),
    Float(f32),
    Double(f64),
    /// CHAR / VARCHAR text.
    Str(String),
    /// BINARY / VARBINARY bytes.
    Bytes(Vec<u8>),
    /// TIMESTAMP, seconds since 1970.
    Timestamp(u32),
    /// DATETIME, seconds since 1970.
    DateTime(i64),
    /// DATE, days since 1970-01-01 ([`crate::temporal`]).
    Date(i32),
    /// TIME, microseconds (negative allowed, as in SQL).
    Time(i64),
    /// DECIMAL: exact, with its scale.
    Decimal(Decimal),
}

impl Value {
    pub fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }

    /// The value as a signed integer, if it is one that fits.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            Value::Int(v) => Some(v),
            Value::UInt(v) => i64::try_from(v).ok(),
            Value::Timestamp(v) => Some(v as i64),
            Value::DateTime(v) => Some(v),
            _ => None,
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::Int(v) => u64::try_from(v).ok(),
            Value::UInt(v) => Some(v),
            Value::Timestamp(v) => Some(v as u64),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::Str(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_bytes(&self) -> Option<&[u8]> {
        match self {
            Value::Str(s) => Some(s.as_bytes()),
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }

    fn kind(&self) -> &'static str {
        match self {
            Value::Null => "NULL",
            Value::Int(_) | Value::UInt(_) => "integer",
            Value::Float(_) | Value::Double(_) => "floating-point number",
            Value::Str(_) => "string",
            Value::Bytes(_) => "byte string",
            Value::Timestamp(_) => "timestamp",
            Value::DateTime(_) => "datetime",
            Value::Date(_) => "date",
            Value::Time(_) => "time",
            Value::Decimal(_) => "decimal",
        }
    }
}

macro_rules! from_int {
    ($($t:ty => $v:ident),*) => { $(
        impl From<$t> for Value {
            fn from(x: $t) -> Value { Value::$v(x.into()) }
        }
    )* };
}
from_int!(i8 => Int, i16 => Int, i32 => Int, i64 => Int, u8 => UInt, u16 => UInt, u32 => UInt, u64 => UInt);

impl From<f32> for Value {
    fn from(x: f32) -> Value {
        Value::Float(x)
    }
}
impl From<f64> for Value {
    fn from(x: f64) -> Value {
        Value::Double(x)
    }
}
impl From<&str> for Value {
    fn from(x: &str) -> Value {
        Value::Str(x.to_string())
    }
}
impl From<String> for Value {
    fn from(x: String) -> Value {
        Value::Str(x)
    }
}
impl From<&[u8]> for Value {
    fn from(x: &[u8]) -> Value {
        Value::Bytes(x.to_vec())
    }
}
impl From<Vec<u8>> for Value {
    fn from(x: Vec<u8>) -> Value {
        Value::Bytes(x)
    }
}
impl From<Decimal> for Value {
    fn from(x: Decimal) -> Value {
        Value::Decimal(x)
    }
}
impl<T: Into<Value>> From<Option<T>> for Value {
    fn from(x: Option<T>) -> Value {
        x.map_or(Value::Null, Into::into)
    }
}

fn mismatch(col: &ColumnDef, v: &Value) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::BadValue,
        format!(
            "column {:?} is {}; a {} does not fit",
            col.name,
            col.ty.sql_name(),
            v.kind()
        ),
    )
}

fn out_of_range(col: &ColumnDef, v: &Value) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::BadValue,
        format!(
            "column {:?} is {}; {:?} is out of range",
            col.name,
            col.ty.sql_name(),
            v
        ),
    )
}

fn too_long(col: &ColumnDef, len: usize) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::ValueTooLong,
        format!(
            "column {:?} is {}; the value has {len} bytes",
            col.name,
            col.ty.sql_name()
        ),
    )
}

/// Appends the canonical bytes of a non-NULL `v` for column `col`.
/// NULL is not encodable here: it travels as a length marker.
pub fn encode_value(col: &ColumnDef, v: &Value, out: &mut Vec<u8>) -> Result<(), ShoalError> {
    macro_rules! int {
        ($signed:ty, $unsigned:ty, $unsigned_flag:expr) => {{
            if $unsigned_flag {
                let x = v.as_u64().ok_or_else(|| {
                    if matches!(v, Value::Int(_)) {
                        out_of_range(col, v)
                    } else {
                        mismatch(col, v)
                    }
                })?;
                let x = <$unsigned>::try_from(x).map_err(|_| out_of_range(col, v))?;
                out.extend_from_slice(&x.to_le_bytes());
            } else {
                let x = match *v {
                    Value::Int(x) => x,
                    Value::UInt(x) => i64::try_from(x).map_err(|_| out_of_range(col, v))?,
                    _ => return Err(mismatch(col, v)),
                };
                let x = <$signed>::try_from(x).map_err(|_| out_of_range(col, v))?;
                out.extend_from_slice(&x.to_le_bytes());
            }
        }};
    }
    match col.ty {
        ColumnType::TinyInt { unsigned } => int!(i8, u8, unsigned),
        ColumnType::SmallInt { unsigned } => int!(i16, u16, unsigned),
        ColumnType::Int { unsigned } => int!(i32, u32, unsigned),
        ColumnType::BigInt { unsigned } => int!(i64, u64, unsigned),
        ColumnType::Float => {
            let x = match *v {
                Value::Float(x) => x,
                Value::Double(x) => x as f32,
                Value::Int(x) => x as f32,
                Value::UInt(x) => x as f32,
                _ => return Err(mismatch(col, v)),
            };
            out.extend_from_slice(&x.to_le_bytes());
        }
        ColumnType::Double => {
            let x = match *v {
                Value::Float(x) => x as f64,
                Value::Double(x) => x,
                Value::Int(x) => x as f64,
                Value::UInt(x) => x as f64,
                _ => return Err(mismatch(col, v)),
            };
            out.extend_from_slice(&x.to_le_bytes());
        }
        ColumnType::Char(n) | ColumnType::Binary(n) => {
            let b = v.as_bytes().ok_or_else(|| mismatch(col, v))?;
            if b.len() > n as usize {
                return Err(too_long(col, b.len()));
            }
            let pad = if matches!(col.ty, ColumnType::Char(_)) {
                b' '
            } else {
                0
            };
            out.extend_from_slice(b);
            out.resize(out.len() + n as usize - b.len(), pad);
        }
        ColumnType::VarChar(n) | ColumnType::VarBinary(n) => {
            let b = v.as_bytes().ok_or_else(|| mismatch(col, v))?;
            if b.len() > n as usize {
                return Err(too_long(col, b.len()));
            }
            out.extend_from_slice(b);
        }
        ColumnType::Timestamp => {
            let x = match *v {
                Value::Timestamp(x) => x,
                Value::Int(_) | Value::UInt(_) => v
                    .as_u64()
                    .and_then(|x| u32::try_from(x).ok())
                    .ok_or_else(|| out_of_range(col, v))?,
                _ => return Err(mismatch(col, v)),
            };
            out.extend_from_slice(&x.to_le_bytes());
        }
        ColumnType::DateTime => {
            let x = match *v {
                Value::DateTime(x) | Value::Int(x) => x,
                Value::Timestamp(x) => x as i64,
                Value::UInt(x) => i64::try_from(x).map_err(|_| out_of_range(col, v))?,
                _ => return Err(mismatch(col, v)),
            };
            if !(DATETIME_MIN..=DATETIME_MAX).contains(&x) {
                return Err(out_of_range(col, v));
            }
            out.extend_from_slice(&x.to_le_bytes());
        }
        ColumnType::Date => {
            let Value::Date(x) = *v else {
                return Err(mismatch(col, v));
            };
            if !(DATE_MIN..=DATE_MAX).contains(&x) {
                return Err(out_of_range(col, v));
            }
            out.extend_from_slice(&x.to_le_bytes());
        }
        ColumnType::Time => {
            let Value::Time(x) = *v else {
                return Err(mismatch(col, v));
            };
            if !(-TIME_MAX..=TIME_MAX).contains(&x) {
                return Err(out_of_range(col, v));
            }
            out.extend_from_slice(&x.to_le_bytes());
        }
        ColumnType::Decimal { precision, scale } => {
            let d = match *v {
                Value::Decimal(d) => d,
                Value::Int(i) => Decimal::from_int(i.into()),
                Value::UInt(u) => Decimal::from_int(u.into()),
                _ => return Err(mismatch(col, v)),
            };
            // Rounding is the caller's choice (SQL rounds, with a note):
            // a value with more fraction digits than the column keeps is
            // refused rather than silently changed.
            let Some(d) = d.rescale_exact(scale) else {
                return Err(ShoalError::with_detail(
                    ErrorCode::BadValue,
                    format!(
                        "column {:?} is {} and keeps {scale} digit(s) after the point; {d} has more: round it first",
                        col.name,
                        col.ty.sql_name()
                    ),
                ));
            };
            if !d.fits(precision) {
                return Err(out_of_range(col, v));
            }
            out.extend_from_slice(&d.unscaled.to_le_bytes());
        }
    }
    Ok(())
}

/// Checks that `bytes` are valid canonical bytes for `col` (the data node
/// runs this on every value it receives: clients are not trusted).
pub fn validate_bytes(col: &ColumnDef, bytes: &[u8]) -> Result<(), ShoalError> {
    match col.ty.fixed_size() {
        Some(n) if bytes.len() != n => Err(ShoalError::with_detail(
            ErrorCode::BadValue,
            format!(
                "column {:?} is {} and takes exactly {n} bytes, got {}",
                col.name,
                col.ty.sql_name(),
                bytes.len()
            ),
        )),
        None if bytes.len() > col.ty.max_size() => Err(too_long(col, bytes.len())),
        _ => {
            // The length was checked above, so a fixed-size type decodes.
            let in_range = match col.ty {
                ColumnType::DateTime => {
                    matches!(decode_value(col.ty, bytes), Value::DateTime(x) if (DATETIME_MIN..=DATETIME_MAX).contains(&x))
                }
                ColumnType::Date => {
                    matches!(decode_value(col.ty, bytes), Value::Date(x) if (DATE_MIN..=DATE_MAX).contains(&x))
                }
                ColumnType::Time => {
                    matches!(decode_value(col.ty, bytes), Value::Time(x) if (-TIME_MAX..=TIME_MAX).contains(&x))
                }
                ColumnType::Decimal { precision, .. } => {
                    matches!(decode_value(col.ty, bytes), Value::Decimal(d) if d.fits(precision))
                }
                _ => true,
            };
            if in_range {
                Ok(())
            } else {
                Err(out_of_range(col, &decode_value(col.ty, bytes)))
            }
        }
    }
}

/// `b` without its trailing spaces: a CHAR column's padding (CHAR(n)
/// is stored as 4·n bytes for utf8mb4, so most of a short value is
/// padding), and what PAD SPACE comparison ignores. Eight bytes at a time.
#[inline]
pub fn trim_trailing_spaces(b: &[u8]) -> &[u8] {
    const SPACES: [u8; 8] = [b' '; 8];
    let mut end = b.len();
    while end >= 8 && b[end - 8..end] == SPACES {
        end -= 8;
    }
    while end > 0 && b[end - 1] == b' ' {
        end -= 1;
    }
    &b[..end]
}

/// `b` as text: the stored bytes are UTF-8 (checked when written), so
/// the fast check passes; anything else is shown with replacement
/// characters rather than refused.
#[inline]
pub fn text_of(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(b).into_owned(),
    }
}

/// Decodes canonical bytes (already validated) of column type `ty`.
pub fn decode_value(ty: ColumnType, b: &[u8]) -> Value {
    match ty {
        ColumnType::TinyInt { unsigned: false } => Value::Int(b[0] as i8 as i64),
        ColumnType::TinyInt { unsigned: true } => Value::UInt(b[0] as u64),
        ColumnType::SmallInt { unsigned: false } => {
            Value::Int(i16::from_le_bytes([b[0], b[1]]) as i64)
        }
        ColumnType::SmallInt { unsigned: true } => {
            Value::UInt(u16::from_le_bytes([b[0], b[1]]) as u64)
        }
        ColumnType::Int { unsigned: false } => {
            Value::Int(i32::from_le_bytes(b[..4].try_into().expect("4")) as i64)
        }
        ColumnType::Int { unsigned: true } => {
            Value::UInt(u32::from_le_bytes(b[..4].try_into().expect("4")) as u64)
        }
        ColumnType::BigInt { unsigned: false } => {
            Value::Int(i64::from_le_bytes(b[..8].try_into().expect("8")))
        }
        ColumnType::BigInt { unsigned: true } => {
            Value::UInt(u64::from_le_bytes(b[..8].try_into().expect("8")))
        }
        ColumnType::Float => Value::Float(f32::from_le_bytes(b[..4].try_into().expect("4"))),
        ColumnType::Double => Value::Double(f64::from_le_bytes(b[..8].try_into().expect("8"))),
        ColumnType::Char(_) => Value::Str(text_of(trim_trailing_spaces(b))),
        ColumnType::VarChar(_) => Value::Str(text_of(b)),
        ColumnType::Binary(_) | ColumnType::VarBinary(_) => Value::Bytes(b.to_vec()),
        ColumnType::Timestamp => {
            Value::Timestamp(u32::from_le_bytes(b[..4].try_into().expect("4")))
        }
        ColumnType::DateTime => Value::DateTime(i64::from_le_bytes(b[..8].try_into().expect("8"))),
        ColumnType::Date => Value::Date(i32::from_le_bytes(b[..4].try_into().expect("4"))),
        ColumnType::Time => Value::Time(i64::from_le_bytes(b[..8].try_into().expect("8"))),
        ColumnType::Decimal { scale, .. } => Value::Decimal(Decimal::new(
            i128::from_le_bytes(b[..16].try_into().expect("16")),
            scale,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trimming_trailing_spaces_matches_the_plain_definition() {
        let plain = |b: &[u8]| -> usize { b.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1) };
        // Every mix of spaces and non-spaces up to 17 bytes: past two
        // eight-byte steps, with every tail.
        for len in 0..=17usize {
            for mask in 0u32..1 << len {
                let b: Vec<u8> = (0..len)
                    .map(|i| if mask >> i & 1 == 1 { b'x' } else { b' ' })
                    .collect();
                assert_eq!(trim_trailing_spaces(&b).len(), plain(&b), "{b:?}");
            }
        }
        assert_eq!(text_of(b"caf\xc3\xa9"), "caf\u{e9}");
        assert_eq!(text_of(&[0xff, b'a']), "\u{fffd}a");
    }

    fn col(ty: ColumnType) -> ColumnDef {
        ColumnDef::new("c", ty)
    }

    fn round_trip(ty: ColumnType, v: Value) -> Value {
        let c = col(ty);
        let mut buf = Vec::new();
        encode_value(&c, &v, &mut buf).unwrap();
        validate_bytes(&c, &buf).unwrap();
        decode_value(ty, &buf)
    }

    #[test]
    fn integers_round_trip_and_check_range() {
        assert_eq!(
            round_trip(ColumnType::TinyInt { unsigned: false }, Value::Int(-128)),
            Value::Int(-128)
        );
        assert_eq!(
            round_trip(ColumnType::SmallInt { unsigned: true }, Value::Int(65535)),
            Value::UInt(65535)
        );
        assert_eq!(
            round_trip(ColumnType::BigInt { unsigned: true }, Value::UInt(u64::MAX)),
            Value::UInt(u64::MAX)
        );
        let mut buf = Vec::new();
        let c = col(ColumnType::TinyInt { unsigned: true });
        assert_eq!(
            encode_value(&c, &Value::Int(-1), &mut buf)
                .unwrap_err()
                .code,
            ErrorCode::BadValue
        );
        assert_eq!(
            encode_value(&c, &Value::Int(256), &mut buf)
                .unwrap_err()
                .code,
            ErrorCode::BadValue
        );
        assert_eq!(
            encode_value(&c, &Value::Str("x".into()), &mut buf)
                .unwrap_err()
                .code,
            ErrorCode::BadValue
        );
    }

    #[test]
    fn strings_pad_and_limit() {
        assert_eq!(
            round_trip(ColumnType::Char(5), "ab".into()),
            Value::Str("ab".into())
        );
        assert_eq!(
            round_trip(ColumnType::Binary(3), Value::Bytes(vec![1])),
            Value::Bytes(vec![1, 0, 0])
        );
        assert_eq!(
            round_trip(ColumnType::VarChar(5), "héé".into()),
            Value::Str("héé".into())
        );
        let c = col(ColumnType::VarChar(2));
        let err = encode_value(&c, &"abc".into(), &mut Vec::new()).unwrap_err();
        assert_eq!(err.code, ErrorCode::ValueTooLong);
        assert!(validate_bytes(&c, b"abc").is_err());
        assert!(validate_bytes(&col(ColumnType::Int { unsigned: false }), b"abc").is_err());
    }

    #[test]
    fn times_and_floats() {
        assert_eq!(
            round_trip(ColumnType::Timestamp, Value::Timestamp(7)),
            Value::Timestamp(7)
        );
        assert_eq!(
            round_trip(ColumnType::DateTime, Value::DateTime(-5)),
            Value::DateTime(-5)
        );
        assert!(encode_value(
            &col(ColumnType::DateTime),
            &Value::DateTime(i64::MAX),
            &mut Vec::new()
        )
        .is_err());
        assert_eq!(
            round_trip(ColumnType::Double, Value::Double(1.5)),
            Value::Double(1.5)
        );
        assert_eq!(
            round_trip(ColumnType::Float, Value::Int(3)),
            Value::Float(3.0)
        );
    }

    const NEW_TYPES: [ColumnType; 4] = [
        ColumnType::Date,
        ColumnType::Time,
        ColumnType::Decimal {
            precision: 5,
            scale: 2,
        },
        ColumnType::Decimal {
            precision: 38,
            scale: 0,
        },
    ];

    #[test]
    fn dates_times_and_decimals_check_their_ranges() {
        use crate::temporal::{DATE_MAX, TIME_MAX};
        let dec = col(NEW_TYPES[2]);
        let d = |s: &str| Value::Decimal(Decimal::parse(s).unwrap());
        assert_eq!(round_trip(NEW_TYPES[2], d("-1.5")), d("-1.50"));
        assert_eq!(round_trip(NEW_TYPES[2], Value::Int(7)), d("7.00"));
        assert_eq!(round_trip(NEW_TYPES[2], d("999.99")), d("999.99"));
        for bad in [
            d("1000"),
            d("1.234"),
            Value::Double(1.5),
            Value::Str("1".into()),
        ] {
            assert!(
                encode_value(&dec, &bad, &mut Vec::new()).is_err(),
                "{bad:?}"
            );
        }
        assert_eq!(
            round_trip(ColumnType::Date, Value::Date(DATE_MAX)),
            Value::Date(DATE_MAX)
        );
        assert!(encode_value(
            &col(ColumnType::Date),
            &Value::Date(DATE_MAX + 1),
            &mut Vec::new()
        )
        .is_err());
        assert!(encode_value(
            &col(ColumnType::Time),
            &Value::Time(TIME_MAX + 1),
            &mut Vec::new()
        )
        .is_err());
        assert!(encode_value(&col(ColumnType::Time), &Value::Int(1), &mut Vec::new()).is_err());
        assert!(validate_bytes(&dec, &100_000i128.to_le_bytes()).is_err());
        assert!(validate_bytes(&dec, &99_999i128.to_le_bytes()).is_ok());
        assert!(validate_bytes(&col(ColumnType::Date), &(DATE_MAX + 1).to_le_bytes()).is_err());
    }

    proptest::proptest! {
        /// Any bytes: refused, or decoded into a value that encodes back
        /// into exactly those bytes; never a panic.
        #[test]
        fn new_types_refuse_or_round_trip_any_bytes(
            which in 0usize..4,
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..20),
        ) {
            let ty = NEW_TYPES[which];
            let c = col(ty);
            if validate_bytes(&c, &bytes).is_ok() {
                let v = decode_value(ty, &bytes);
                let mut again = Vec::new();
                encode_value(&c, &v, &mut again).unwrap();
                proptest::prop_assert_eq!(again, bytes);
            }
        }

        /// Values in range round-trip through their bytes.
        #[test]
        fn new_types_round_trip_values(days in crate::temporal::DATE_MIN..=crate::temporal::DATE_MAX,
                                       micros in -crate::temporal::TIME_MAX..=crate::temporal::TIME_MAX,
                                       unscaled in -99_999i128..=99_999) {
            proptest::prop_assert_eq!(round_trip(ColumnType::Date, Value::Date(days)), Value::Date(days));
            proptest::prop_assert_eq!(round_trip(ColumnType::Time, Value::Time(micros)), Value::Time(micros));
            let d = Value::Decimal(Decimal::new(unscaled, 2));
            proptest::prop_assert_eq!(round_trip(NEW_TYPES[2], d.clone()), d);
        }
    }
}
