//! Memcomparable index keys: the bytes an ordered index keeps for a row's
//! indexed columns, built so that comparing two keys with `memcmp` gives the
//! SQL order of their value tuples, column by column.
//!
//! A key is the concatenation, in index column order, of each column's
//! encoding:
//!
//! | column value | bytes |
//! |---|---|
//! | NULL | `0x00` (so NULL sorts before every value) |
//! | any other value | `0x01`, then the value as below |
//! | TINYINT..BIGINT UNSIGNED | big-endian, full width (1/2/4/8) |
//! | TINYINT..BIGINT signed | big-endian, full width, sign bit flipped |
//! | FLOAT / DOUBLE | IEEE bits big-endian (4 / 8); all bits inverted if the sign bit is set, else the sign bit set |
//! | TIMESTAMP | u32 big-endian |
//! | DATETIME | i64 big-endian, sign bit flipped |
//! | DATE | i32 days big-endian, sign bit flipped |
//! | TIME | i64 microseconds big-endian, sign bit flipped |
//! | DECIMAL(p,s) | i128 unscaled value big-endian, sign bit flipped (one scale per column, so the unscaled order is the numeric order) |
//! | BINARY(n) | its n stored bytes as they are |
//! | CHAR(n) | trailing spaces trimmed, then as VARCHAR |
//! | VARCHAR / VARBINARY | each byte copied, `0x00` written as `0x00 0xFF`; then `0x00 0x00` |
//!
//! Invariants:
//! - Each column's encoding is prefix-free (fixed width, or ended by the
//!   `0x00 0x00` terminator that an escaped string body cannot contain), so
//!   byte order of whole keys is the lexicographic order of the column
//!   tuples, and the key of the first k columns is a byte prefix of the full
//!   key: a bound on a prefix of an index's columns is just a shorter key.
//! - Floats order as [`f32::total_cmp`] / [`f64::total_cmp`] do:
//!   -inf < ... < -0 < +0 < ... < +inf < NaN (a NaN with its sign bit set,
//!   which SQL never produces, sorts before -inf).
//! - Strings compare bytewise, "binary collation", for now. CHAR ignores
//!   trailing spaces as SQL's PAD SPACE does, but unlike PAD SPACE a CHAR
//!   value followed by a byte below 0x20 sorts after the value alone.
//!
//! The data node encodes keys from stored column bytes with
//! [`encode_column`] (or [`encode_stored_row`]), allocating nothing beyond
//! the output buffer; clients encode bounds from [`Value`]s with
//! [`encode_key`]; [`decode_key`] is the checked inverse.

use crate::error::{ErrorCode, ShoalError};
use crate::layout::RowLayout;
use crate::schema::{ColumnDef, ColumnType, TableDef};
use crate::value::{decode_value, encode_value, validate_bytes, Value};

/// First byte of a NULL column.
const MARK_NULL: u8 = 0x00;
/// First byte of a non-NULL column.
const MARK_VALUE: u8 = 0x01;
/// Follows an escaped `0x00` inside a string body.
const ESCAPED_ZERO: u8 = 0xFF;
/// Follows the final `0x00` of a string: the terminator is `0x00 0x00`.
const STRING_END: u8 = 0x00;

/// Largest encoding of one column of type `ty`, marker byte included
/// (a key's limit is [`crate::schema::INDEX_KEY_BYTES_MAX`]).
pub fn column_key_bytes_max(ty: ColumnType) -> usize {
    1 + match ty {
        // Every byte may be 0x00 and double; then the terminator.
        ColumnType::Char(n) | ColumnType::VarChar(n) | ColumnType::VarBinary(n) => {
            2 * n as usize + 2
        }
        other => other.fixed_size().expect("fixed-size type"),
    }
}

/// Appends the key encoding of one column from its stored canonical bytes
/// (as [`RowLayout::column_bytes`] returns them; `None` is NULL).
///
/// # Panics
/// If the bytes of a fixed-size type do not have its size: stored bytes
/// were validated when the row was written, so that is a bug.
#[inline]
pub fn encode_column(ty: ColumnType, value: Option<&[u8]>, out: &mut Vec<u8>) {
    let Some(bytes) = value else {
        out.push(MARK_NULL);
        return;
    };
    out.push(MARK_VALUE);
    if let Some(width) = ty.fixed_size() {
        assert_eq!(
            bytes.len(),
            width,
            "{} column bytes must be {width} long",
            ty.sql_name()
        );
    }
    match ty {
        ColumnType::TinyInt { unsigned }
        | ColumnType::SmallInt { unsigned }
        | ColumnType::Int { unsigned }
        | ColumnType::BigInt { unsigned } => push_int(bytes, !unsigned, out),
        ColumnType::Timestamp => push_int(bytes, false, out),
        ColumnType::DateTime | ColumnType::Date | ColumnType::Time | ColumnType::Decimal { .. } => {
            push_int(bytes, true, out)
        }
        ColumnType::Float => {
            let bits = u32::from_le_bytes(bytes.try_into().expect("4 bytes"));
            let ordered = if bits & F32_SIGN != 0 {
                !bits
            } else {
                bits | F32_SIGN
            };
            out.extend_from_slice(&ordered.to_be_bytes());
        }
        ColumnType::Double => {
            let bits = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
            let ordered = if bits & F64_SIGN != 0 {
                !bits
            } else {
                bits | F64_SIGN
            };
            out.extend_from_slice(&ordered.to_be_bytes());
        }
        ColumnType::Binary(_) => out.extend_from_slice(bytes),
        ColumnType::Char(_) => push_byte_string(crate::value::trim_trailing_spaces(bytes), out),
        ColumnType::VarChar(_) | ColumnType::VarBinary(_) => push_byte_string(bytes, out),
    }
}

const F32_SIGN: u32 = 1 << 31;
const F64_SIGN: u64 = 1 << 63;

/// Little-endian stored integer to big-endian, flipping the sign bit of a
/// signed one so that negative numbers sort first.
#[inline]
fn push_int(le_bytes: &[u8], signed: bool, out: &mut Vec<u8>) {
    let at = out.len();
    out.extend(le_bytes.iter().rev());
    if signed {
        out[at] ^= 0x80;
    }
}

/// Escapes every 0x00 as 0x00 0xFF and ends with 0x00 0x00: a shorter
/// string's terminator then sorts before any continuation of it, even one
/// starting with 0x00, and no terminator can appear inside a body.
#[inline]
fn push_byte_string(bytes: &[u8], out: &mut Vec<u8>) {
    out.reserve(bytes.len() + 2);
    let mut rest = bytes;
    while let Some(zero_at) = rest.iter().position(|&b| b == 0) {
        out.extend_from_slice(&rest[..=zero_at]);
        out.push(ESCAPED_ZERO);
        rest = &rest[zero_at + 1..];
    }
    out.extend_from_slice(rest);
    out.extend_from_slice(&[0x00, STRING_END]);
}

/// Appends the key of a stored row for an index on `columns` (ids checked
/// when the index was defined).
pub fn encode_stored_row(
    layout: &RowLayout,
    fixed: &[u8],
    var: &[u8],
    columns: &[u16],
    out: &mut Vec<u8>,
) {
    for &col in columns {
        let ty = layout.columns()[col as usize].ty;
        encode_column(ty, layout.column_bytes(fixed, var, col), out);
    }
}

fn column(table: &TableDef, col: u16) -> Result<&ColumnDef, ShoalError> {
    table.columns.get(col as usize).ok_or_else(|| {
        ShoalError::with_detail(
            ErrorCode::NoSuchColumn,
            format!("table {:?} has no column id {col}", table.name),
        )
    })
}

/// Appends the key of `values` for an index on `columns` of `table` (client
/// side). `values` may be shorter than `columns`: a bound on the first
/// `values.len()` columns. `Value::Null` encodes NULL, also for a NOT NULL
/// column, where it is simply a bound below every stored key. On error
/// `out` is left as it was.
pub fn encode_key(
    table: &TableDef,
    columns: &[u16],
    values: &[Value],
    out: &mut Vec<u8>,
) -> Result<(), ShoalError> {
    if values.len() > columns.len() {
        return Err(ShoalError::with_detail(
            ErrorCode::BadRequest,
            format!(
                "the index on table {:?} has {} column(s); got {} value(s)",
                table.name,
                columns.len(),
                values.len()
            ),
        ));
    }
    let start = out.len();
    let result = encode_values(table, columns, values, out);
    if result.is_err() {
        out.truncate(start);
    }
    result
}

fn encode_values(
    table: &TableDef,
    columns: &[u16],
    values: &[Value],
    out: &mut Vec<u8>,
) -> Result<(), ShoalError> {
    let mut canonical = Vec::new();
    for (&col, value) in columns.iter().zip(values) {
        let def = column(table, col)?;
        if value.is_null() {
            encode_column(def.ty, None, out);
        } else {
            canonical.clear();
            encode_value(def, value, &mut canonical)?;
            encode_column(def.ty, Some(&canonical), out);
        }
    }
    Ok(())
}

fn malformed(table: &TableDef, detail: impl std::fmt::Display) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::BadRequest,
        format!("index key of table {:?}: {detail}", table.name),
    )
}

/// Decodes a key of an index on `columns` of `table` back into values: one
/// per column the key holds, so a key of the first k columns gives k
/// values. CHAR values come back without trailing spaces and BINARY ones
/// zero-padded to their width. Rejects anything [`encode_key`] cannot
/// produce (bad markers, bad escapes, truncation, trailing bytes, strings
/// too long for the column, CHAR with trailing spaces, DATETIME, DATE,
/// TIME or DECIMAL out of range) with an error, never a panic.
pub fn decode_key(table: &TableDef, columns: &[u16], key: &[u8]) -> Result<Vec<Value>, ShoalError> {
    let mut values = Vec::with_capacity(columns.len());
    let mut rest = key;
    for &col in columns {
        let def = column(table, col)?;
        let Some((&marker, after)) = rest.split_first() else {
            continue;
        };
        rest = after;
        match marker {
            MARK_NULL => values.push(Value::Null),
            MARK_VALUE => {
                let (value, used) = decode_column_value(table, def, rest)?;
                values.push(value);
                rest = &rest[used..];
            }
            other => {
                return Err(malformed(
                    table,
                    format!(
                        "column {:?} starts with {other:#04x}, neither 0x00 (NULL) nor 0x01",
                        def.name
                    ),
                ))
            }
        }
    }
    if !rest.is_empty() {
        return Err(malformed(
            table,
            format!("{} byte(s) after the last column", rest.len()),
        ));
    }
    Ok(values)
}

/// Decodes one non-NULL column value from the front of `input`, returning it
/// and the bytes it took.
fn decode_column_value(
    table: &TableDef,
    def: &ColumnDef,
    input: &[u8],
) -> Result<(Value, usize), ShoalError> {
    let truncated = || malformed(table, format!("column {:?} is truncated", def.name));
    match def.ty {
        ColumnType::Char(n) | ColumnType::VarChar(n) | ColumnType::VarBinary(n) => {
            let (bytes, used) = read_byte_string(input)
                .map_err(|what| malformed(table, format!("column {:?}: {what}", def.name)))?;
            if bytes.len() > n as usize {
                return Err(malformed(
                    table,
                    format!(
                        "column {:?} is {} but holds {} bytes",
                        def.name,
                        def.ty.sql_name(),
                        bytes.len()
                    ),
                ));
            }
            if matches!(def.ty, ColumnType::Char(_)) && bytes.last() == Some(&b' ') {
                return Err(malformed(
                    table,
                    format!(
                        "column {:?} is CHAR and keys hold it without trailing spaces",
                        def.name
                    ),
                ));
            }
            Ok((decode_value(def.ty, &bytes), used))
        }
        ColumnType::Binary(n) => {
            let bytes = input.get(..n as usize).ok_or_else(truncated)?;
            Ok((Value::Bytes(bytes.to_vec()), n as usize))
        }
        ty => {
            let width = ty.fixed_size().expect("fixed-size type");
            let encoded = input.get(..width).ok_or_else(truncated)?;
            // Undo the transformation into the stored little-endian bytes.
            let mut stored = [0u8; 16];
            let stored = &mut stored[..width];
            match ty {
                ColumnType::Float => {
                    let bits = u32::from_be_bytes(encoded.try_into().expect("4 bytes"));
                    let bits = if bits & F32_SIGN != 0 {
                        bits ^ F32_SIGN
                    } else {
                        !bits
                    };
                    stored.copy_from_slice(&bits.to_le_bytes());
                }
                ColumnType::Double => {
                    let bits = u64::from_be_bytes(encoded.try_into().expect("8 bytes"));
                    let bits = if bits & F64_SIGN != 0 {
                        bits ^ F64_SIGN
                    } else {
                        !bits
                    };
                    stored.copy_from_slice(&bits.to_le_bytes());
                }
                _ => {
                    for (s, e) in stored.iter_mut().zip(encoded.iter().rev()) {
                        *s = *e;
                    }
                    let signed = match ty {
                        ColumnType::TinyInt { unsigned }
                        | ColumnType::SmallInt { unsigned }
                        | ColumnType::Int { unsigned }
                        | ColumnType::BigInt { unsigned } => !unsigned,
                        ColumnType::DateTime
                        | ColumnType::Date
                        | ColumnType::Time
                        | ColumnType::Decimal { .. } => true,
                        _ => false,
                    };
                    if signed {
                        stored[width - 1] ^= 0x80;
                    }
                }
            }
            validate_bytes(def, stored)?;
            Ok((decode_value(ty, stored), width))
        }
    }
}

/// Reads an escaped string and its terminator from the front of `input`.
fn read_byte_string(input: &[u8]) -> Result<(Vec<u8>, usize), &'static str> {
    let mut bytes = Vec::new();
    let mut at = 0;
    loop {
        let Some(zero_at) = input[at..].iter().position(|&b| b == 0) else {
            return Err("string has no terminator");
        };
        bytes.extend_from_slice(&input[at..at + zero_at]);
        at += zero_at + 1;
        match input.get(at) {
            Some(&ESCAPED_ZERO) => {
                bytes.push(0);
                at += 1;
            }
            Some(&STRING_END) => return Ok((bytes, at + 1)),
            Some(_) => return Err("0x00 in a string is followed by neither 0xFF nor 0x00"),
            None => return Err("string has no terminator"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decimal::Decimal;
    use crate::layout::{encode_attrs, AttrSlice};
    use crate::temporal::{DATE_MAX, DATE_MIN, TIME_MAX};
    use crate::value::{DATETIME_MAX, DATETIME_MIN};
    use proptest::prelude::*;
    use std::cmp::Ordering;

    /// A table whose columns 1..=n have `types` (all nullable); column 0
    /// is its primary key.
    fn table_of(types: &[ColumnType]) -> TableDef {
        let mut columns = vec![ColumnDef::new("pk", ColumnType::Int { unsigned: true })];
        for (i, &ty) in types.iter().enumerate() {
            columns.push(ColumnDef::new(format!("c{i}"), ty).nullable());
        }
        TableDef::new("t", columns, &["pk"]).unwrap()
    }

    fn columns_of(types: &[ColumnType]) -> Vec<u16> {
        (1..=types.len() as u16).collect()
    }

    fn key_of(types: &[ColumnType], values: &[Value]) -> Vec<u8> {
        let table = table_of(types);
        let columns = columns_of(types);
        let mut out = Vec::new();
        encode_key(&table, &columns, values, &mut out).unwrap();
        out
    }

    fn key1(ty: ColumnType, v: impl Into<Value>) -> Vec<u8> {
        key_of(&[ty], &[v.into()])
    }

    /// SQL order of two values of one column, written directly from the
    /// values: the model the encoding is checked against.
    fn reference_cmp(ty: ColumnType, a: &Value, b: &Value) -> Ordering {
        match (a, b) {
            (Value::Null, Value::Null) => Ordering::Equal,
            (Value::Null, _) => Ordering::Less,
            (_, Value::Null) => Ordering::Greater,
            (Value::Int(x), Value::Int(y)) => x.cmp(y),
            (Value::UInt(x), Value::UInt(y)) => x.cmp(y),
            (Value::Float(x), Value::Float(y)) => x.total_cmp(y),
            (Value::Double(x), Value::Double(y)) => x.total_cmp(y),
            (Value::Timestamp(x), Value::Timestamp(y)) => x.cmp(y),
            (Value::DateTime(x), Value::DateTime(y)) => x.cmp(y),
            (Value::Date(x), Value::Date(y)) => x.cmp(y),
            (Value::Time(x), Value::Time(y)) => x.cmp(y),
            (Value::Decimal(x), Value::Decimal(y)) => x.cmp_value(*y),
            (Value::Str(x), Value::Str(y)) => match ty {
                ColumnType::Char(_) => x.trim_end_matches(' ').cmp(y.trim_end_matches(' ')),
                _ => x.as_bytes().cmp(y.as_bytes()),
            },
            (Value::Bytes(x), Value::Bytes(y)) => match ty {
                ColumnType::Binary(n) => padded(x, n).cmp(&padded(y, n)),
                _ => x.cmp(y),
            },
            _ => panic!("values of different kinds: {a:?} {b:?}"),
        }
    }

    fn padded(bytes: &[u8], n: u16) -> Vec<u8> {
        let mut v = bytes.to_vec();
        v.resize(n as usize, 0);
        v
    }

    /// What decoding a value's key must give back.
    fn normalized(ty: ColumnType, v: &Value) -> Value {
        match (ty, v) {
            (ColumnType::Char(_), Value::Str(s)) => Value::Str(s.trim_end_matches(' ').into()),
            (ColumnType::Binary(n), Value::Bytes(b)) => Value::Bytes(padded(b, n)),
            _ => v.clone(),
        }
    }

    /// Equality that tells NaNs apart by their bits instead of never
    /// matching.
    fn same(a: &Value, b: &Value) -> bool {
        match (a, b) {
            (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
            (Value::Double(x), Value::Double(y)) => x.to_bits() == y.to_bits(),
            _ => a == b,
        }
    }

    fn any_type() -> impl Strategy<Value = ColumnType> {
        prop_oneof![
            any::<bool>().prop_map(|unsigned| ColumnType::TinyInt { unsigned }),
            any::<bool>().prop_map(|unsigned| ColumnType::SmallInt { unsigned }),
            any::<bool>().prop_map(|unsigned| ColumnType::Int { unsigned }),
            any::<bool>().prop_map(|unsigned| ColumnType::BigInt { unsigned }),
            Just(ColumnType::Float),
            Just(ColumnType::Double),
            (1u16..6).prop_map(ColumnType::Char),
            (1u16..6).prop_map(ColumnType::VarChar),
            (1u16..6).prop_map(ColumnType::Binary),
            (1u16..6).prop_map(ColumnType::VarBinary),
            Just(ColumnType::Timestamp),
            Just(ColumnType::DateTime),
            Just(ColumnType::Date),
            Just(ColumnType::Time),
            (1u8..=38)
                .prop_flat_map(|p| (Just(p), 0..=p.min(30)))
                .prop_map(|(precision, scale)| ColumnType::Decimal { precision, scale }),
        ]
    }

    fn signed_in(min: i64, max: i64) -> BoxedStrategy<Value> {
        prop_oneof![
            Just(min),
            Just(max),
            Just(0i64),
            Just(-1i64),
            Just(1i64),
            min..=max
        ]
        .prop_map(Value::Int)
        .boxed()
    }

    fn unsigned_to(max: u64) -> BoxedStrategy<Value> {
        prop_oneof![Just(0u64), Just(max), Just(1u64), 0..=max]
            .prop_map(Value::UInt)
            .boxed()
    }

    /// Strings with 0x00, 0x01, spaces, and multi-byte characters, at most
    /// `n` bytes long.
    fn text(n: u16) -> BoxedStrategy<Value> {
        let ch = prop_oneof![
            Just('\0'),
            Just('\u{1}'),
            Just(' '),
            Just('a'),
            Just('b'),
            Just('é'),
            Just('\u{7f}'),
        ];
        proptest::collection::vec(ch, 0..=n as usize)
            .prop_map(move |chars| {
                let mut s = String::new();
                for c in chars {
                    if s.len() + c.len_utf8() <= n as usize {
                        s.push(c);
                    }
                }
                Value::Str(s)
            })
            .boxed()
    }

    fn bytes(n: u16) -> BoxedStrategy<Value> {
        let b = prop_oneof![
            Just(0u8),
            Just(1u8),
            Just(0x20u8),
            Just(0xFFu8),
            any::<u8>()
        ];
        proptest::collection::vec(b, 0..=n as usize)
            .prop_map(Value::Bytes)
            .boxed()
    }

    fn any_non_null(ty: ColumnType) -> BoxedStrategy<Value> {
        match ty {
            ColumnType::TinyInt { unsigned: false } => signed_in(i8::MIN.into(), i8::MAX.into()),
            ColumnType::SmallInt { unsigned: false } => signed_in(i16::MIN.into(), i16::MAX.into()),
            ColumnType::Int { unsigned: false } => signed_in(i32::MIN.into(), i32::MAX.into()),
            ColumnType::BigInt { unsigned: false } => signed_in(i64::MIN, i64::MAX),
            ColumnType::TinyInt { unsigned: true } => unsigned_to(u8::MAX.into()),
            ColumnType::SmallInt { unsigned: true } => unsigned_to(u16::MAX.into()),
            ColumnType::Int { unsigned: true } => unsigned_to(u32::MAX.into()),
            ColumnType::BigInt { unsigned: true } => unsigned_to(u64::MAX),
            ColumnType::Float => prop_oneof![
                Just(0.0f32),
                Just(-0.0f32),
                Just(f32::INFINITY),
                Just(f32::NEG_INFINITY),
                Just(f32::NAN),
                Just(-f32::NAN),
                Just(f32::MIN_POSITIVE),
                Just(-1.5f32),
                any::<f32>(),
                any::<u32>().prop_map(f32::from_bits),
            ]
            .prop_map(Value::Float)
            .boxed(),
            ColumnType::Double => prop_oneof![
                Just(0.0f64),
                Just(-0.0f64),
                Just(f64::INFINITY),
                Just(f64::NEG_INFINITY),
                Just(f64::NAN),
                Just(-f64::NAN),
                Just(f64::MIN_POSITIVE),
                Just(-1.5f64),
                any::<f64>(),
                any::<u64>().prop_map(f64::from_bits),
            ]
            .prop_map(Value::Double)
            .boxed(),
            ColumnType::Char(n) | ColumnType::VarChar(n) => text(n),
            ColumnType::Binary(n) | ColumnType::VarBinary(n) => bytes(n),
            ColumnType::Timestamp => prop_oneof![Just(0u32), Just(u32::MAX), any::<u32>()]
                .prop_map(Value::Timestamp)
                .boxed(),
            ColumnType::DateTime => prop_oneof![
                Just(DATETIME_MIN),
                Just(DATETIME_MAX),
                Just(0i64),
                Just(-1i64),
                DATETIME_MIN..=DATETIME_MAX
            ]
            .prop_map(Value::DateTime)
            .boxed(),
            ColumnType::Date => prop_oneof![
                Just(DATE_MIN),
                Just(DATE_MAX),
                Just(0),
                Just(-1),
                DATE_MIN..=DATE_MAX
            ]
            .prop_map(Value::Date)
            .boxed(),
            ColumnType::Time => prop_oneof![
                Just(-TIME_MAX),
                Just(TIME_MAX),
                Just(0i64),
                Just(-1i64),
                -TIME_MAX..=TIME_MAX
            ]
            .prop_map(Value::Time)
            .boxed(),
            ColumnType::Decimal { precision, scale } => {
                let limit = 10i128.pow(u32::from(precision)) - 1;
                prop_oneof![
                    Just(-limit),
                    Just(limit),
                    Just(0i128),
                    Just(-1i128),
                    Just(1i128),
                    -limit..=limit
                ]
                .prop_map(move |u| Value::Decimal(Decimal::new(u, scale)))
                .boxed()
            }
        }
    }

    fn any_value(ty: ColumnType) -> BoxedStrategy<Value> {
        prop_oneof![1 => Just(Value::Null), 6 => any_non_null(ty)].boxed()
    }

    /// Column types and two value tuples for them.
    fn two_tuples() -> impl Strategy<Value = (Vec<ColumnType>, Vec<Value>, Vec<Value>)> {
        proptest::collection::vec(any_type(), 1..5).prop_flat_map(|types| {
            let tuple: Vec<BoxedStrategy<Value>> = types.iter().map(|&t| any_value(t)).collect();
            // Half the time the second tuple copies a prefix of the first,
            // so that ties in the leading columns are common.
            let second = (tuple.clone(), 0..=types.len());
            (Just(types), tuple, second).prop_map(|(types, a, (b, shared))| {
                let mut b: Vec<Value> = b;
                b[..shared].clone_from_slice(&a[..shared]);
                (types, a, b)
            })
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn byte_order_is_sql_order_and_keys_decode(
            (types, a, b) in two_tuples(),
            prefix_len in 0usize..5,
        ) {
            let table = table_of(&types);
            let columns = columns_of(&types);
            let ka = key_of(&types, &a);
            let kb = key_of(&types, &b);
            let expected = types
                .iter()
                .zip(a.iter().zip(&b))
                .map(|(&ty, (x, y))| reference_cmp(ty, x, y))
                .find(|o| o.is_ne())
                .unwrap_or(Ordering::Equal);
            prop_assert_eq!(ka.cmp(&kb), expected, "{:?} vs {:?}", a, b);

            for (values, key) in [(&a, &ka), (&b, &kb)] {
                let decoded = decode_key(&table, &columns, key).unwrap();
                prop_assert_eq!(decoded.len(), values.len());
                for ((&ty, v), d) in types.iter().zip(values.iter()).zip(&decoded) {
                    let want = normalized(ty, v);
                    prop_assert!(same(&want, d), "{:?}: {:?} decoded as {:?}", ty, want, d);
                }
            }

            // The key of the first k columns is a prefix of the full key,
            // and is the key encode_key gives for a k-value bound.
            let k = prefix_len.min(types.len());
            let mut bound = Vec::new();
            encode_key(&table, &columns, &a[..k], &mut bound).unwrap();
            prop_assert!(ka.starts_with(&bound));
            let decoded = decode_key(&table, &columns, &bound).unwrap();
            prop_assert_eq!(decoded.len(), k);
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(
            types in proptest::collection::vec(any_type(), 1..4),
            key in proptest::collection::vec(
                prop_oneof![Just(0u8), Just(1u8), Just(0xFFu8), any::<u8>()],
                0..40,
            ),
        ) {
            let table = table_of(&types);
            let columns = columns_of(&types);
            let decoded = decode_key(&table, &columns, &key);
            let lossy = |v: &Value| matches!(v, Value::Str(s) if s.contains('\u{FFFD}'));
            // Strings that are not UTF-8 decode lossily (as stored values
            // do), so only the others can round-trip exactly.
            if let Some(values) = decoded.ok().filter(|vs| !vs.iter().any(lossy)) {
                // Whatever decodes must be exactly what encoding gives.
                let mut again = Vec::new();
                encode_key(&table, &columns, &values, &mut again).unwrap();
                prop_assert_eq!(again, key);
            }
        }
    }

    #[test]
    fn orders_of_hand_picked_values() {
        let int = ColumnType::Int { unsigned: false };
        assert!(key1(int, -1i32) < key1(int, 0i32));
        assert!(key1(int, i32::MIN) < key1(int, -1i32));
        assert!(key1(int, 1i32) < key1(int, i32::MAX));
        assert!(key_of(&[int], &[Value::Null]) < key1(int, i32::MIN));
        assert_eq!(key1(int, 1i32), [1, 0x80, 0, 0, 1]);
        let uint = ColumnType::SmallInt { unsigned: true };
        assert_eq!(key1(uint, 0x1234u16), [1, 0x12, 0x34]);

        let f = ColumnType::Float;
        let order = [
            f32::NEG_INFINITY,
            -1.0,
            -f32::MIN_POSITIVE,
            -0.0,
            0.0,
            f32::MIN_POSITIVE,
            1.0,
            f32::INFINITY,
            f32::NAN,
        ];
        for w in order.windows(2) {
            assert!(key1(f, w[0]) < key1(f, w[1]), "{} < {}", w[0], w[1]);
        }
        assert_eq!(key1(f, 1.0f32).len(), 5, "FLOAT stays 4 bytes wide");

        let vc = ColumnType::VarChar(8);
        assert_eq!(key1(vc, ""), [1, 0, 0]);
        assert_eq!(key1(vc, "a\0b"), [1, b'a', 0, 0xFF, b'b', 0, 0]);
        assert!(key1(vc, "") < key1(vc, "\0"));
        assert!(key1(vc, "a") < key1(vc, "a\0"));
        assert!(key1(vc, "a\0") < key1(vc, "a\u{1}"));
        assert!(key1(vc, "a\0\0") < key1(vc, "a\0\u{1}"));

        let ch = ColumnType::Char(4);
        assert_eq!(key1(ch, "ab"), key1(ch, "ab  "));
        assert_eq!(key1(ch, "ab"), [1, b'a', b'b', 0, 0]);
        assert!(key1(ch, "ab") < key1(ch, "ab\u{1}"));

        let bin = ColumnType::Binary(3);
        assert_eq!(key1(bin, vec![7u8]), [1, 7, 0, 0]);

        // Columns after a shorter string still compare correctly: the
        // terminator sorts before every continuation.
        let two = [vc, int];
        assert!(
            key_of(&two, &["a".into(), Value::Int(i32::MAX.into())])
                < key_of(&two, &["a\0".into(), Value::Int(i32::MIN.into())])
        );
    }

    #[test]
    fn encode_key_reports_clear_errors_and_leaves_out_alone() {
        let types = [
            ColumnType::TinyInt { unsigned: true },
            ColumnType::VarChar(2),
        ];
        let table = table_of(&types);
        let mut out = vec![9];
        let err = |values: &[Value], columns: &[u16], out: &mut Vec<u8>| {
            encode_key(&table, columns, values, out).unwrap_err().code
        };
        assert_eq!(
            err(
                &[Value::UInt(1), Value::UInt(1), Value::UInt(1)],
                &[1, 2],
                &mut out
            ),
            ErrorCode::BadRequest
        );
        assert_eq!(
            err(&[Value::Int(-1)], &[1, 2], &mut out),
            ErrorCode::BadValue
        );
        assert_eq!(err(&["x".into()], &[1], &mut out), ErrorCode::BadValue);
        assert_eq!(
            err(&[Value::UInt(1), "abc".into()], &[1, 2], &mut out),
            ErrorCode::ValueTooLong
        );
        assert_eq!(
            err(&[Value::UInt(1)], &[7], &mut out),
            ErrorCode::NoSuchColumn
        );
        assert_eq!(out, [9], "a failed encode appends nothing");
        encode_key(&table, &[1, 2], &[], &mut out).unwrap();
        assert_eq!(out, [9], "an empty bound is an empty key");
    }

    #[test]
    fn decode_key_rejects_malformed_keys() {
        let types = [ColumnType::Char(3), ColumnType::DateTime];
        let table = table_of(&types);
        let columns = [1u16, 2];
        let bad = [
            &[2u8][..],                               // marker
            &[1, b'a', 0],                            // unterminated
            &[1, b'a', 0, 7],                         // bad escape
            &[1, b'a', b' ', 0, 0],                   // CHAR with a trailing space
            &[1, b'a', b'b', b'c', b'd', 0, 0],       // too long
            &[1, 0, 0, 1, 0x80],                      // truncated DATETIME
            &[1, 0, 0, 1, 0xFF, 0, 0, 0, 0, 0, 0, 0], // DATETIME out of range
            &[1, 0, 0, 0, 0],                         // bytes after the last column
        ];
        for key in bad {
            assert!(decode_key(&table, &columns, key).is_err(), "{key:?}");
        }
        assert_eq!(decode_key(&table, &columns, &[]).unwrap(), vec![]);
        assert_eq!(
            decode_key(&table, &columns, &[0, 0]).unwrap(),
            vec![Value::Null, Value::Null]
        );
        assert!(decode_key(&table, &[5], &[0]).is_err());

        // Sign-flipped big-endian i128 of 10^2 in a DECIMAL(2,0): one digit
        // too many, and a DATE and a TIME just past their ranges.
        let types = [
            ColumnType::Decimal {
                precision: 2,
                scale: 0,
            },
            ColumnType::Date,
            ColumnType::Time,
        ];
        let table = table_of(&types);
        let mut decimal = vec![1u8, 0x80];
        decimal.extend_from_slice(&[0; 14]);
        decimal.push(100);
        assert!(decode_key(&table, &[1], &decimal).is_err());
        let mut date = vec![1u8];
        date.extend_from_slice(&((DATE_MAX + 1) as u32 ^ 0x8000_0000).to_be_bytes());
        assert!(decode_key(&table, &[2], &date).is_err());
        let mut time = vec![1u8];
        time.extend_from_slice(&((TIME_MAX + 1) as u64 ^ (1 << 63)).to_be_bytes());
        assert!(decode_key(&table, &[3], &time).is_err());
    }

    #[test]
    fn new_types_order_as_their_values() {
        let dec = ColumnType::Decimal {
            precision: 5,
            scale: 2,
        };
        let d = |s: &str| Value::Decimal(Decimal::parse(s).unwrap());
        let order = [
            "-999.99", "-1.50", "-0.01", "0.00", "0.01", "1.25", "999.99",
        ];
        for w in order.windows(2) {
            assert!(
                key1(dec, d(w[0])) < key1(dec, d(w[1])),
                "{} < {}",
                w[0],
                w[1]
            );
        }
        // An integer or a shorter scale is the same number.
        assert_eq!(key1(dec, d("1.5")), key1(dec, d("1.50")));
        assert_eq!(key1(dec, Value::Int(3)), key1(dec, d("3.00")));
        assert!(key1(ColumnType::Time, Value::Time(-1)) < key1(ColumnType::Time, Value::Time(0)));
        assert!(key1(ColumnType::Date, Value::Date(-1)) < key1(ColumnType::Date, Value::Date(0)));
    }

    #[test]
    fn stored_rows_encode_like_client_values() {
        let table = TableDef::new(
            "t",
            vec![
                ColumnDef::new("id", ColumnType::Int { unsigned: false }),
                ColumnDef::new("name", ColumnType::VarChar(10)).nullable(),
                ColumnDef::new("code", ColumnType::Char(4)),
                ColumnDef::new("score", ColumnType::Double).nullable(),
            ],
            &["id"],
        )
        .unwrap();
        let layout = RowLayout::new(&table);
        let mut pk = Vec::new();
        layout.encode_key(&[Value::Int(-7)], &mut pk).unwrap();
        let score = Value::Double(-2.5);
        let code = Value::from("x\0");
        let mut attrs = Vec::new();
        encode_attrs(
            &table,
            &[(1, &Value::Null), (2, &code), (3, &score)],
            &mut attrs,
        )
        .unwrap();
        let (attrs, _) = AttrSlice::parse(&attrs).unwrap();
        let (fixed, var) = layout.build_row(&pk, attrs).unwrap();

        let index = [2u16, 1, 3, 0];
        let mut from_row = Vec::new();
        encode_stored_row(&layout, &fixed, &var, &index, &mut from_row);
        let mut from_values = Vec::new();
        let values = [code, Value::Null, score, Value::Int(-7)];
        encode_key(&table, &index, &values, &mut from_values).unwrap();
        assert_eq!(from_row, from_values);
        assert_eq!(decode_key(&table, &index, &from_row).unwrap(), values);
    }

    #[test]
    fn worst_case_sizes_bound_the_encoding() {
        let cases = [
            (ColumnType::VarBinary(3), Value::Bytes(vec![0; 3])),
            (ColumnType::Char(2), Value::from("\0\0")),
            (ColumnType::BigInt { unsigned: false }, Value::Int(-1)),
            (ColumnType::Binary(5), Value::Bytes(vec![])),
        ];
        for (ty, v) in cases {
            assert_eq!(key1(ty, v).len(), column_key_bytes_max(ty), "{ty:?}");
        }
    }
}
