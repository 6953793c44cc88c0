//! The binary protocol's values: a prepared statement's parameters read
//! from `COM_STMT_EXECUTE` and turned into SQL literals, and result values
//! (text, as the executor makes them) turned into binary row values.
//!
//! Invariant: a literal made here reads back, under MySQL's rules and
//! whatever `sql_mode` says about backslashes, as exactly the value the
//! client sent: text goes in single quotes with quotes doubled, and bytes
//! that are not such text (invalid UTF-8, NUL, a backslash) go as `X'…'`.

use mysql_common::constants::ColumnType;

use super::errors;
use super::wire::{put_lenenc_bytes, Malformed, Reader};
use crate::outcome::{Column, ColumnKind, SqlError};
use shoal_types::Value;

/// A parameter's type as `COM_STMT_EXECUTE` declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ParamType {
    pub(crate) code: u8,
    pub(crate) unsigned: bool,
}

/// Why a parameter could not be read.
#[derive(Debug)]
pub(crate) enum ParamError {
    /// The packet ended inside the value.
    Malformed(Malformed),
    /// A value no SQL literal stands for (an unknown type, NaN, a broken
    /// date).
    Invalid(String),
}

impl From<Malformed> for ParamError {
    fn from(m: Malformed) -> ParamError {
        ParamError::Malformed(m)
    }
}

const T_DECIMAL: u8 = ColumnType::MYSQL_TYPE_DECIMAL as u8;
const T_TINY: u8 = ColumnType::MYSQL_TYPE_TINY as u8;
const T_SHORT: u8 = ColumnType::MYSQL_TYPE_SHORT as u8;
const T_LONG: u8 = ColumnType::MYSQL_TYPE_LONG as u8;
const T_FLOAT: u8 = ColumnType::MYSQL_TYPE_FLOAT as u8;
const T_DOUBLE: u8 = ColumnType::MYSQL_TYPE_DOUBLE as u8;
const T_NULL: u8 = ColumnType::MYSQL_TYPE_NULL as u8;
const T_TIMESTAMP: u8 = ColumnType::MYSQL_TYPE_TIMESTAMP as u8;
const T_LONGLONG: u8 = ColumnType::MYSQL_TYPE_LONGLONG as u8;
const T_INT24: u8 = ColumnType::MYSQL_TYPE_INT24 as u8;
const T_DATE: u8 = ColumnType::MYSQL_TYPE_DATE as u8;
const T_TIME: u8 = ColumnType::MYSQL_TYPE_TIME as u8;
const T_DATETIME: u8 = ColumnType::MYSQL_TYPE_DATETIME as u8;
const T_YEAR: u8 = ColumnType::MYSQL_TYPE_YEAR as u8;
const T_VARCHAR: u8 = ColumnType::MYSQL_TYPE_VARCHAR as u8;
const T_BIT: u8 = ColumnType::MYSQL_TYPE_BIT as u8;
const T_JSON: u8 = ColumnType::MYSQL_TYPE_JSON as u8;
const T_NEWDECIMAL: u8 = ColumnType::MYSQL_TYPE_NEWDECIMAL as u8;
const T_ENUM: u8 = ColumnType::MYSQL_TYPE_ENUM as u8;
const T_SET: u8 = ColumnType::MYSQL_TYPE_SET as u8;
const T_TINY_BLOB: u8 = ColumnType::MYSQL_TYPE_TINY_BLOB as u8;
const T_MEDIUM_BLOB: u8 = ColumnType::MYSQL_TYPE_MEDIUM_BLOB as u8;
const T_LONG_BLOB: u8 = ColumnType::MYSQL_TYPE_LONG_BLOB as u8;
const T_BLOB: u8 = ColumnType::MYSQL_TYPE_BLOB as u8;
const T_VAR_STRING: u8 = ColumnType::MYSQL_TYPE_VAR_STRING as u8;
const T_STRING: u8 = ColumnType::MYSQL_TYPE_STRING as u8;
const T_GEOMETRY: u8 = ColumnType::MYSQL_TYPE_GEOMETRY as u8;

/// Reads one non-NULL parameter of type `ty` and answers it as an SQL literal.
pub(crate) fn read_param_literal(
    reader: &mut Reader<'_>,
    ty: ParamType,
) -> Result<String, ParamError> {
    let what = "a parameter value";
    let literal = match (ty.code, ty.unsigned) {
        (T_NULL, _) => "NULL".to_string(),
        (T_TINY, false) => i8::from_le_bytes(reader.array(what)?).to_string(),
        (T_TINY, true) => reader.u8(what)?.to_string(),
        (T_SHORT | T_YEAR, false) => i16::from_le_bytes(reader.array(what)?).to_string(),
        (T_SHORT | T_YEAR, true) => reader.u16(what)?.to_string(),
        (T_LONG | T_INT24, false) => i32::from_le_bytes(reader.array(what)?).to_string(),
        (T_LONG | T_INT24, true) => reader.u32(what)?.to_string(),
        (T_LONGLONG, false) => i64::from_le_bytes(reader.array(what)?).to_string(),
        (T_LONGLONG, true) => reader.u64(what)?.to_string(),
        (T_FLOAT, _) => float_literal(f64::from(f32::from_le_bytes(reader.array(what)?)), true)?,
        (T_DOUBLE, _) => float_literal(f64::from_le_bytes(reader.array(what)?), false)?,
        (T_DECIMAL | T_NEWDECIMAL, _) => {
            let text = reader.lenenc_bytes(what)?;
            match std::str::from_utf8(text) {
                Ok(number) if is_decimal_number(number) => number.to_string(),
                _ => bytes_literal(text),
            }
        }
        (T_DATE | T_DATETIME | T_TIMESTAMP, _) => {
            let len = usize::from(reader.u8(what)?);
            datetime_literal(reader.bytes(len, what)?)?
        }
        (T_TIME, _) => {
            let len = usize::from(reader.u8(what)?);
            time_literal(reader.bytes(len, what)?)?
        }
        (
            T_VARCHAR | T_BIT | T_JSON | T_ENUM | T_SET | T_TINY_BLOB | T_MEDIUM_BLOB | T_LONG_BLOB
            | T_BLOB | T_VAR_STRING | T_STRING | T_GEOMETRY,
            _,
        ) => bytes_literal(reader.lenenc_bytes(what)?),
        (code, _) => {
            return Err(ParamError::Invalid(format!(
                "unknown parameter type {code}"
            )))
        }
    };
    Ok(literal)
}

/// A literal for bytes: quoted text when that reads back the same under
/// any `sql_mode`, else a hex string.
pub(crate) fn bytes_literal(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) if !text.contains(['\\', '\0']) => {
            let mut out = String::with_capacity(text.len() + 2);
            out.push('\'');
            for c in text.chars() {
                if c == '\'' {
                    out.push('\'');
                }
                out.push(c);
            }
            out.push('\'');
            out
        }
        _ => {
            let mut out = String::with_capacity(bytes.len() * 2 + 3);
            out.push_str("X'");
            for byte in bytes {
                out.push_str(&format!("{byte:02X}"));
            }
            out.push('\'');
            out
        }
    }
}

/// A float as an approximate-value literal (`…e0`), which MySQL reads as
/// a DOUBLE rather than a DECIMAL. `single`: the value came as a FLOAT, so
/// its shortest single-precision form is the one the client meant.
fn float_literal(value: f64, single: bool) -> Result<String, ParamError> {
    if !value.is_finite() {
        return Err(ParamError::Invalid(format!("{value} has no SQL literal")));
    }
    let mut text = if single {
        format!("{:?}", value as f32)
    } else {
        format!("{value:?}")
    };
    if !text.contains('e') {
        text.push_str("e0");
    }
    Ok(text)
}

/// Whether `text` is a plain decimal number (what a DECIMAL parameter
/// holds), safe to splice into SQL unquoted.
fn is_decimal_number(text: &str) -> bool {
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    let mut parts = digits.splitn(2, '.');
    let whole = parts.next().unwrap_or_default();
    let fraction = parts.next();
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    (!whole.is_empty() || fraction.is_some_and(|f| !f.is_empty()))
        && all_digits(whole)
        && fraction.is_none_or(all_digits)
}

/// A binary DATE/DATETIME/TIMESTAMP (length 0, 4, 7 or 11) as a quoted
/// literal.
fn datetime_literal(bytes: &[u8]) -> Result<String, ParamError> {
    let mut reader = Reader::new(bytes);
    let what = "a date";
    let text = match bytes.len() {
        0 => "0000-00-00 00:00:00".to_string(),
        4 | 7 | 11 => {
            let year = reader.u16(what)?;
            let month = reader.u8(what)?;
            let day = reader.u8(what)?;
            let mut text = format!("{year:04}-{month:02}-{day:02}");
            if bytes.len() >= 7 {
                let [hour, minute, second] = reader.array(what)?;
                text.push_str(&format!(" {hour:02}:{minute:02}:{second:02}"));
            }
            if bytes.len() == 11 {
                text.push_str(&format!(".{:06}", reader.u32(what)?));
            }
            text
        }
        n => return Err(ParamError::Invalid(format!("a date of {n} bytes"))),
    };
    Ok(format!("'{text}'"))
}

/// A binary TIME (length 0, 8 or 12) as a quoted literal; days count as
/// hours, as MySQL's TIME ranges past 24 hours.
fn time_literal(bytes: &[u8]) -> Result<String, ParamError> {
    let mut reader = Reader::new(bytes);
    let what = "a time";
    let text = match bytes.len() {
        0 => "00:00:00".to_string(),
        8 | 12 => {
            let negative = reader.u8(what)? == 1;
            let days = reader.u32(what)?;
            let [hour, minute, second] = reader.array(what)?;
            let hours = u64::from(days) * 24 + u64::from(hour);
            let sign = if negative { "-" } else { "" };
            let mut text = format!("{sign}{hours:02}:{minute:02}:{second:02}");
            if bytes.len() == 12 {
                text.push_str(&format!(".{:06}", reader.u32(what)?));
            }
            text
        }
        n => return Err(ParamError::Invalid(format!("a time of {n} bytes"))),
    };
    Ok(format!("'{text}'"))
}

/// Appends the binary form of `value` of `column`: integers, floats and
/// strings as they are; the other values through their text, as
/// [`encode_value`] reads it.
pub(crate) fn encode_typed(
    out: &mut Vec<u8>,
    column: &Column,
    value: &Value,
) -> Result<(), SqlError> {
    let width = match column.kind {
        ColumnKind::Tiny => 1,
        ColumnKind::Short => 2,
        ColumnKind::Long => 4,
        ColumnKind::LongLong => 8,
        _ => 0,
    };
    let written = match (column.kind, value) {
        (_, Value::Int(i)) if width > 0 => {
            put_int_value(out, i128::from(*i), column.unsigned, width)
        }
        (_, Value::UInt(u)) if width > 0 => {
            put_int_value(out, i128::from(*u), column.unsigned, width)
        }
        (ColumnKind::Double, Value::Double(f)) => {
            out.extend_from_slice(&f.to_le_bytes());
            true
        }
        (ColumnKind::Float, Value::Float(f)) => {
            out.extend_from_slice(&f.to_le_bytes());
            true
        }
        (ColumnKind::VarString | ColumnKind::String, Value::Str(s)) => {
            put_lenenc_bytes(out, s.as_bytes());
            true
        }
        (ColumnKind::VarString | ColumnKind::String, Value::Bytes(b)) => {
            put_lenenc_bytes(out, b);
            true
        }
        _ => false,
    };
    if written {
        return Ok(());
    }
    match crate::sqltypes::text(value) {
        Some(text) => encode_value(out, column, &text),
        None => Err(errors::internal(format!(
            "a NULL of column '{}' outside the NULL bitmap",
            column.name
        ))),
    }
}

/// Appends `value` as a `width`-byte little-endian integer if it fits
/// its width and signedness.
fn put_int_value(out: &mut Vec<u8>, value: i128, unsigned: bool, width: usize) -> bool {
    let bits = 8 * width as u32;
    let (low, high) = if unsigned {
        (0, (1i128 << bits) - 1)
    } else {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    };
    if value < low || value > high {
        return false;
    }
    out.extend_from_slice(&value.to_le_bytes()[..width]);
    true
}

/// Appends the binary form of the text value `text` of `column`.
pub(crate) fn encode_value(
    out: &mut Vec<u8>,
    column: &Column,
    text: &[u8],
) -> Result<(), SqlError> {
    let bad = || {
        errors::internal(format!(
            "the value '{}' of column '{}' is not a {:?}",
            String::from_utf8_lossy(text.get(..64).unwrap_or(text)),
            column.name,
            column.kind
        ))
    };
    let parsed = std::str::from_utf8(text).map_err(|_| bad());
    match column.kind {
        ColumnKind::Tiny => put_int(out, parsed?, column.unsigned, 1).ok_or_else(bad)?,
        ColumnKind::Short => put_int(out, parsed?, column.unsigned, 2).ok_or_else(bad)?,
        ColumnKind::Long => put_int(out, parsed?, column.unsigned, 4).ok_or_else(bad)?,
        ColumnKind::LongLong => put_int(out, parsed?, column.unsigned, 8).ok_or_else(bad)?,
        ColumnKind::Float => {
            let value: f32 = parsed?.trim().parse().map_err(|_| bad())?;
            out.extend_from_slice(&value.to_le_bytes());
        }
        ColumnKind::Double => {
            let value: f64 = parsed?.trim().parse().map_err(|_| bad())?;
            out.extend_from_slice(&value.to_le_bytes());
        }
        // The binary protocol sends a DECIMAL as its text, too.
        ColumnKind::VarString | ColumnKind::String | ColumnKind::NewDecimal => {
            put_lenenc_bytes(out, text)
        }
        ColumnKind::Timestamp | ColumnKind::DateTime | ColumnKind::Date => {
            put_datetime(out, parsed?).ok_or_else(bad)?;
        }
        ColumnKind::Time => put_time(out, parsed?).ok_or_else(bad)?,
        // A NULL-typed column holds only NULLs, which never get here.
        ColumnKind::Null => return Err(bad()),
    }
    Ok(())
}

/// Appends `text` as a `width`-byte little-endian integer; `None` if it is
/// not an integer or does not fit.
fn put_int(out: &mut Vec<u8>, text: &str, unsigned: bool, width: usize) -> Option<()> {
    let value: i128 = text.trim().parse().ok()?;
    put_int_value(out, value, unsigned, width).then_some(())
}

/// Appends `YYYY-MM-DD[ HH:MM:SS[.ffffff]]` in the binary form: a length
/// byte (0, 4, 7 or 11: the shortest that holds the value) and the fields.
fn put_datetime(out: &mut Vec<u8>, text: &str) -> Option<()> {
    let (date, time) = match text.trim().split_once(' ') {
        Some((date, time)) => (date, Some(time)),
        None => (text.trim(), None),
    };
    let mut date_parts = date.split('-');
    let year: u16 = date_parts.next()?.parse().ok()?;
    let month: u8 = date_parts.next()?.parse().ok()?;
    let day: u8 = date_parts.next()?.parse().ok()?;
    if date_parts.next().is_some() {
        return None;
    }
    let (mut hour, mut minute, mut second, mut micros) = (0u8, 0u8, 0u8, 0u32);
    if let Some(time) = time {
        let (hms, fraction) = match time.split_once('.') {
            Some((hms, fraction)) => (hms, Some(fraction)),
            None => (time, None),
        };
        let mut time_parts = hms.split(':');
        hour = time_parts.next()?.parse().ok()?;
        minute = time_parts.next()?.parse().ok()?;
        second = time_parts.next()?.parse().ok()?;
        if time_parts.next().is_some() {
            return None;
        }
        if let Some(fraction) = fraction {
            if fraction.is_empty()
                || fraction.len() > 6
                || !fraction.bytes().all(|b| b.is_ascii_digit())
            {
                return None;
            }
            let scale = 10u32.pow(6 - fraction.len() as u32);
            micros = fraction.parse::<u32>().ok()? * scale;
        }
    }
    let len: u8 = if micros != 0 {
        11
    } else if hour != 0 || minute != 0 || second != 0 {
        7
    } else if year != 0 || month != 0 || day != 0 {
        4
    } else {
        0
    };
    out.push(len);
    if len >= 4 {
        out.extend_from_slice(&year.to_le_bytes());
        out.extend_from_slice(&[month, day]);
    }
    if len >= 7 {
        out.extend_from_slice(&[hour, minute, second]);
    }
    if len == 11 {
        out.extend_from_slice(&micros.to_le_bytes());
    }
    Some(())
}

/// Appends `[-]H:MM:SS[.ffffff]` in the binary form: a length byte (0, 8
/// or 12: the shortest that holds the value), the sign, whole days, then
/// the hours, minutes and seconds within the day and the microseconds.
fn put_time(out: &mut Vec<u8>, text: &str) -> Option<()> {
    let text = text.trim();
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    let (hms, fraction) = match body.split_once('.') {
        Some((hms, fraction)) => (hms, Some(fraction)),
        None => (body, None),
    };
    let mut parts = hms.split(':');
    let hours: u32 = parts.next()?.parse().ok()?;
    let minute: u8 = parts.next()?.parse().ok()?;
    let second: u8 = parts.next()?.parse().ok()?;
    if parts.next().is_some() || minute > 59 || second > 59 {
        return None;
    }
    let micros = match fraction {
        None => 0,
        Some(f) if !f.is_empty() && f.len() <= 6 && f.bytes().all(|b| b.is_ascii_digit()) => {
            f.parse::<u32>().ok()? * 10u32.pow(6 - f.len() as u32)
        }
        Some(_) => return None,
    };
    let len: u8 = if micros != 0 {
        12
    } else if hours != 0 || minute != 0 || second != 0 {
        8
    } else {
        0
    };
    out.push(len);
    if len >= 8 {
        out.push(u8::from(negative));
        out.extend_from_slice(&(hours / 24).to_le_bytes());
        out.extend_from_slice(&[(hours % 24) as u8, minute, second]);
    }
    if len == 12 {
        out.extend_from_slice(&micros.to_le_bytes());
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn param(code: u8, unsigned: bool, bytes: &[u8]) -> Result<String, ParamError> {
        let mut reader = Reader::new(bytes);
        let literal = read_param_literal(&mut reader, ParamType { code, unsigned });
        if literal.is_ok() {
            assert!(reader.is_empty(), "type {code} left bytes behind");
        }
        literal
    }

    fn ok(code: u8, unsigned: bool, bytes: &[u8]) -> String {
        param(code, unsigned, bytes).expect("a literal")
    }

    #[test]
    fn integer_parameters() {
        assert_eq!(ok(T_TINY, false, &[0xFF]), "-1");
        assert_eq!(ok(T_TINY, true, &[0xFF]), "255");
        assert_eq!(ok(T_SHORT, false, &(-300i16).to_le_bytes()), "-300");
        assert_eq!(ok(T_LONG, true, &u32::MAX.to_le_bytes()), "4294967295");
        assert_eq!(
            ok(T_LONGLONG, false, &i64::MIN.to_le_bytes()),
            i64::MIN.to_string()
        );
        assert_eq!(
            ok(T_LONGLONG, true, &u64::MAX.to_le_bytes()),
            u64::MAX.to_string()
        );
        assert!(matches!(
            param(T_LONG, false, &[1, 2]),
            Err(ParamError::Malformed(_))
        ));
    }

    #[test]
    fn float_parameters_are_double_literals() {
        assert_eq!(ok(T_DOUBLE, false, &0.1f64.to_le_bytes()), "0.1e0");
        assert_eq!(ok(T_FLOAT, false, &0.1f32.to_le_bytes()), "0.1e0");
        assert_eq!(ok(T_DOUBLE, false, &1e300f64.to_le_bytes()), "1e300");
        assert_eq!(ok(T_DOUBLE, false, &(-2.0f64).to_le_bytes()), "-2.0e0");
        assert!(matches!(
            param(T_DOUBLE, false, &f64::NAN.to_le_bytes()),
            Err(ParamError::Invalid(_))
        ));
    }

    #[test]
    fn string_parameters() {
        assert_eq!(ok(T_VAR_STRING, false, b"\x04it's"), "'it''s'");
        assert_eq!(ok(T_STRING, false, b"\x00"), "''");
        assert_eq!(ok(T_BLOB, false, b"\x03a\\b"), "X'615C62'");
        assert_eq!(ok(T_BLOB, false, b"\x02\xFF\x00"), "X'FF00'");
        assert_eq!(ok(T_VAR_STRING, false, "\x02é".as_bytes()), "'é'");
        assert!(matches!(
            param(T_VAR_STRING, false, b"\x09abc"),
            Err(ParamError::Malformed(_))
        ));
    }

    #[test]
    fn decimal_parameters_splice_only_numbers() {
        assert_eq!(ok(T_NEWDECIMAL, false, b"\x05-1.50"), "-1.50");
        assert_eq!(ok(T_NEWDECIMAL, false, b"\x02.5"), ".5");
        assert_eq!(ok(T_NEWDECIMAL, false, b"\x061;DROP"), "'1;DROP'");
        assert_eq!(ok(T_NEWDECIMAL, false, b"\x01."), "'.'");
    }

    #[test]
    fn date_and_time_parameters() {
        assert_eq!(ok(T_DATE, false, &[4, 0xE8, 0x07, 2, 29]), "'2024-02-29'");
        assert_eq!(
            ok(T_DATETIME, false, &[7, 0xE8, 0x07, 2, 29, 13, 5, 9]),
            "'2024-02-29 13:05:09'"
        );
        assert_eq!(
            ok(
                T_TIMESTAMP,
                false,
                &[11, 0xE8, 0x07, 2, 29, 13, 5, 9, 0x40, 0xE2, 1, 0]
            ),
            "'2024-02-29 13:05:09.123456'"
        );
        assert_eq!(ok(T_DATETIME, false, &[0]), "'0000-00-00 00:00:00'");
        assert_eq!(
            ok(T_TIME, false, &[8, 1, 1, 0, 0, 0, 2, 3, 4]),
            "'-26:03:04'"
        );
        assert!(matches!(
            param(T_DATE, false, &[3, 1, 2, 3]),
            Err(ParamError::Invalid(_))
        ));
        assert!(matches!(
            param(T_DATE, false, &[4, 1]),
            Err(ParamError::Malformed(_))
        ));
    }

    #[test]
    fn unknown_types_are_refused() {
        assert!(matches!(param(99, false, &[]), Err(ParamError::Invalid(_))));
    }

    /// Literals read back as the bytes they stand for through the parser
    /// the executor uses (MySQL dialect, backslash escapes on).
    #[test]
    fn string_literals_read_back_through_sqlparser() {
        use sqlparser::dialect::MySqlDialect;
        use sqlparser::tokenizer::{Token, Tokenizer};
        for text in [
            "",
            "plain",
            "it's",
            "''",
            "a\"b",
            "tab\there",
            "ünï",
            "`x`",
            "?",
            "--",
            "/*",
        ] {
            let literal = bytes_literal(text.as_bytes());
            let tokens = Tokenizer::new(&MySqlDialect {}, &literal)
                .tokenize()
                .expect("tokenizes");
            assert_eq!(
                tokens,
                vec![Token::SingleQuotedString(text.to_string())],
                "{literal}"
            );
        }
        let tokens = Tokenizer::new(&MySqlDialect {}, &bytes_literal(b"a\\b"))
            .tokenize()
            .expect("tokenizes");
        assert_eq!(tokens, vec![Token::HexStringLiteral("615C62".to_string())]);
    }

    fn column(kind: ColumnKind, unsigned: bool) -> Column {
        Column {
            name: "c".into(),
            table: String::new(),
            schema: String::new(),
            kind,
            length: 0,
            decimals: 0,
            nullable: true,
            unsigned,
            binary: true,
            primary_key: false,
        }
    }

    fn encode(kind: ColumnKind, unsigned: bool, text: &str) -> Result<Vec<u8>, SqlError> {
        let mut out = Vec::new();
        encode_value(&mut out, &column(kind, unsigned), text.as_bytes()).map(|()| out)
    }

    #[test]
    fn integer_values_fit_their_width_or_are_refused() {
        assert_eq!(
            encode(ColumnKind::Tiny, false, "-128").ok(),
            Some(vec![0x80])
        );
        assert!(encode(ColumnKind::Tiny, false, "128").is_err());
        assert_eq!(encode(ColumnKind::Tiny, true, "255").ok(), Some(vec![0xFF]));
        assert!(encode(ColumnKind::Tiny, true, "-1").is_err());
        assert_eq!(
            encode(ColumnKind::Long, false, "-2").ok(),
            Some((-2i32).to_le_bytes().to_vec())
        );
        assert_eq!(
            encode(ColumnKind::LongLong, true, "18446744073709551615").ok(),
            Some(u64::MAX.to_le_bytes().to_vec())
        );
        assert_eq!(
            encode(ColumnKind::Long, false, "x").map_err(|e| e.code),
            Err(1105)
        );
    }

    #[test]
    fn other_values() {
        assert_eq!(
            encode(ColumnKind::Double, false, "1.5").ok(),
            Some(1.5f64.to_le_bytes().to_vec())
        );
        assert_eq!(
            encode(ColumnKind::Float, false, "1e3").ok(),
            Some(1000f32.to_le_bytes().to_vec())
        );
        assert_eq!(
            encode(ColumnKind::VarString, false, "ab").ok(),
            Some(vec![2, b'a', b'b'])
        );
        assert_eq!(
            encode(ColumnKind::DateTime, false, "2024-02-29 13:05:09.5").ok(),
            Some(vec![11, 0xE8, 0x07, 2, 29, 13, 5, 9, 0x20, 0xA1, 0x07, 0])
        );
        assert_eq!(
            encode(ColumnKind::Timestamp, false, "2024-02-29 00:00:00").ok(),
            Some(vec![4, 0xE8, 0x07, 2, 29])
        );
        assert_eq!(
            encode(ColumnKind::DateTime, false, "0000-00-00 00:00:00").ok(),
            Some(vec![0])
        );
        assert!(encode(ColumnKind::DateTime, false, "2024-02").is_err());
        assert!(encode(ColumnKind::DateTime, false, "2024-02-01 1:2:3.1234567").is_err());
        assert!(encode(ColumnKind::Null, false, "1").is_err());
        assert_eq!(
            encode(ColumnKind::Date, false, "2024-02-29").ok(),
            Some(vec![4, 0xE8, 0x07, 2, 29])
        );
        assert_eq!(
            encode(ColumnKind::Time, false, "-26:03:04").ok(),
            Some(vec![8, 1, 1, 0, 0, 0, 2, 3, 4])
        );
        assert_eq!(
            encode(ColumnKind::Time, false, "00:00:00").ok(),
            Some(vec![0])
        );
        assert_eq!(
            encode(ColumnKind::NewDecimal, false, "-0.50").ok(),
            Some(b"\x05-0.50".to_vec())
        );
        assert!(encode(ColumnKind::Time, false, "1:60:00").is_err());
    }
}
