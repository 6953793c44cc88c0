//! Randomized tests of the two row types against the slow, obviously right
//! way of reading an answer: `AttrSlice::parse`, then `validate_bytes` and
//! `decode_value` for each attribute (the model below).
//!
//! For random tables (column types, nullability, key columns) and random
//! records (column subsets in any order, or the full record):
//! - every value read through a [`RowBuf`] or a [`Row`] — as a `Value`, as
//!   raw bytes, through every typed accessor — equals what the model
//!   decodes, and an accessor of another type is refused, never panics;
//! - any answer, well-formed, mutated or random, is accepted exactly when
//!   the model accepts it; malformed ones (truncated, wrong sizes, unknown
//!   or repeated column ids, columns missing, extra bytes) are refused with
//!   `ProtocolViolation` and leave the buffer empty;
//! - one buffer refilled again and again, through different records, always
//!   holds exactly the last answer.

use proptest::prelude::*;
use shoal_client::{Record, Row, RowBuf, ShoalError, Table};
use shoal_types::layout::{AttrListWriter, AttrSlice};
use shoal_types::value::{decode_value, validate_bytes, DATETIME_MAX, DATETIME_MIN};
use shoal_types::{ColumnDef, ColumnType, ErrorCode, TableDef, Value};
use std::collections::HashSet;

// ---- strategies ----

/// An answer before encoding: (column id, value bytes or NULL) in the
/// order sent.
type Attrs = Vec<(u16, Option<Vec<u8>>)>;

fn column_type() -> impl Strategy<Value = ColumnType> {
    prop_oneof![
        any::<bool>().prop_map(|unsigned| ColumnType::TinyInt { unsigned }),
        any::<bool>().prop_map(|unsigned| ColumnType::SmallInt { unsigned }),
        any::<bool>().prop_map(|unsigned| ColumnType::Int { unsigned }),
        any::<bool>().prop_map(|unsigned| ColumnType::BigInt { unsigned }),
        Just(ColumnType::Float),
        Just(ColumnType::Double),
        (1u16..=6).prop_map(ColumnType::Char),
        (1u16..=6).prop_map(ColumnType::VarChar),
        (1u16..=6).prop_map(ColumnType::Binary),
        (1u16..=6).prop_map(ColumnType::VarBinary),
        Just(ColumnType::Timestamp),
        Just(ColumnType::DateTime),
    ]
}

/// A valid table of 1..=10 columns `c0`, `c1`…, with a key of 1..=3 of
/// them in random order.
fn table() -> impl Strategy<Value = Table> {
    prop::collection::vec((column_type(), any::<bool>()), 1..=10)
        .prop_flat_map(|cols| {
            let n = cols.len();
            let key =
                prop::sample::subsequence((0..n).collect::<Vec<_>>(), 1..=n.min(3)).prop_shuffle();
            (Just(cols), key)
        })
        .prop_map(|(cols, key)| {
            let defs = cols
                .iter()
                .enumerate()
                .map(|(i, &(ty, nullable))| {
                    let c = ColumnDef::new(format!("c{i}"), ty);
                    if nullable && !key.contains(&i) {
                        c.nullable()
                    } else {
                        c
                    }
                })
                .collect();
            let names: Vec<String> = key.iter().map(|i| format!("c{i}")).collect();
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            Table::new(TableDef::new("t", defs, &names).expect("a valid table"))
        })
}

/// A record of `table`: the full record, or a subset of its columns in
/// any order (possibly none).
fn record_of(table: &Table) -> impl Strategy<Value = Record> {
    let n = table.def().columns.len();
    let table = table.clone();
    prop::option::of(prop::sample::subsequence((0..n).collect::<Vec<_>>(), 0..=n).prop_shuffle())
        .prop_map(move |cols| match cols {
            None => table.full_record(),
            Some(cols) => {
                let names: Vec<String> = cols.iter().map(|i| format!("c{i}")).collect();
                let names: Vec<&str> = names.iter().map(String::as_str).collect();
                table.record(&names).expect("a valid record")
            }
        })
}

/// Valid canonical bytes for `def`, or NULL (rarely for NOT NULL columns:
/// the readers accept NULL anywhere, as the slow way does).
fn value_bytes(def: &ColumnDef) -> BoxedStrategy<Option<Vec<u8>>> {
    let bytes: BoxedStrategy<Vec<u8>> = match def.ty {
        ColumnType::DateTime => (DATETIME_MIN..=DATETIME_MAX)
            .prop_map(|x| x.to_le_bytes().to_vec())
            .boxed(),
        ColumnType::Char(n) => {
            let n = n as usize;
            prop_oneof![
                "[a-z ]{0,6}".prop_map(move |s| {
                    let mut b = s.into_bytes();
                    b.resize(n, b' ');
                    b.truncate(n);
                    b
                }),
                prop::collection::vec(any::<u8>(), n..=n),
            ]
            .boxed()
        }
        ColumnType::VarChar(n) | ColumnType::VarBinary(n) => prop_oneof![
            "[a-zé]{0,3}".prop_map(move |s| {
                let mut b = s.into_bytes();
                b.truncate(n as usize);
                b
            }),
            prop::collection::vec(any::<u8>(), 0..=n as usize),
        ]
        .boxed(),
        ty => {
            let n = ty.fixed_size().expect("fixed-size type");
            prop::collection::vec(any::<u8>(), n..=n).boxed()
        }
    };
    if def.nullable {
        prop::option::of(bytes).boxed()
    } else {
        prop::option::weighted(0.95, bytes).boxed()
    }
}

/// A well-formed answer for `record`: one attribute per column, in record
/// order or shuffled.
fn answer_for(record: &Record) -> impl Strategy<Value = Attrs> {
    let columns = &record.table().def().columns;
    let values: Vec<_> = record
        .columns()
        .iter()
        .map(|&c| value_bytes(&columns[c as usize]).prop_map(move |v| (c, v)))
        .collect();
    (values, any::<bool>()).prop_flat_map(|(attrs, keep_order)| {
        if keep_order {
            Just(attrs).boxed()
        } else {
            Just(attrs).prop_shuffle().boxed()
        }
    })
}

fn encode(attrs: &[(u16, Option<Vec<u8>>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut w = AttrListWriter::begin(&mut out);
    for (c, v) in attrs {
        w.push(&mut out, *c, v.as_deref());
    }
    w.finish(&mut out);
    out
}

/// A table, a record of it and a well-formed answer.
fn case() -> impl Strategy<Value = (Record, Attrs)> {
    table()
        .prop_flat_map(|t| record_of(&t))
        .prop_flat_map(|r| (Just(r.clone()), answer_for(&r)))
}

/// Ways to spoil an answer; `Mutation::apply` says whether the result is
/// surely malformed.
#[derive(Clone, Debug)]
enum Mutation {
    Truncate(prop::sample::Index),
    Extra(Vec<u8>),
    WrongSize(prop::sample::Index, bool),
    UnknownColumn(prop::sample::Index),
    NotAskedFor(prop::sample::Index, prop::sample::Index),
    Repeat(prop::sample::Index),
    Drop(prop::sample::Index),
    DateTimeOutOfRange(prop::sample::Index),
    FlipByte(prop::sample::Index, u8),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    use prop::sample::Index;
    prop_oneof![
        any::<Index>().prop_map(Mutation::Truncate),
        prop::collection::vec(any::<u8>(), 1..4).prop_map(Mutation::Extra),
        (any::<Index>(), any::<bool>()).prop_map(|(i, longer)| Mutation::WrongSize(i, longer)),
        any::<Index>().prop_map(Mutation::UnknownColumn),
        (any::<Index>(), any::<Index>()).prop_map(|(i, j)| Mutation::NotAskedFor(i, j)),
        any::<Index>().prop_map(Mutation::Repeat),
        any::<Index>().prop_map(Mutation::Drop),
        any::<Index>().prop_map(Mutation::DateTimeOutOfRange),
        (any::<Index>(), 1u8..=255).prop_map(|(i, x)| Mutation::FlipByte(i, x)),
    ]
}

impl Mutation {
    /// The spoiled answer's bytes, and whether it is surely malformed
    /// (some mutations do not apply to every answer, and a flipped byte
    /// may leave it well-formed).
    fn apply(&self, record: &Record, attrs: &[(u16, Option<Vec<u8>>)]) -> (Vec<u8>, bool) {
        let table = record.table();
        let columns = &table.def().columns;
        let mut attrs = attrs.to_vec();
        let n = attrs.len();
        let mut malformed = true;
        match self {
            Mutation::Truncate(i) => {
                let bytes = encode(&attrs);
                let cut = i.index(bytes.len());
                return (bytes[..cut].to_vec(), true);
            }
            Mutation::Extra(extra) => {
                let mut bytes = encode(&attrs);
                bytes.extend_from_slice(extra);
                return (bytes, true);
            }
            Mutation::WrongSize(i, longer) if n > 0 => {
                let (c, v) = &mut attrs[i.index(n)];
                let ty = columns[*c as usize].ty;
                let v = v.get_or_insert_with(Vec::new);
                match (ty.fixed_size(), longer) {
                    (Some(size), true) => v.resize(size + 1, 0),
                    (Some(size), false) => v.resize(size.saturating_sub(1), 0),
                    (None, _) => v.resize(ty.max_size() + 1, b'x'),
                }
            }
            Mutation::UnknownColumn(i) if n > 0 => {
                attrs[i.index(n)].0 = columns.len() as u16 + (i.index(3) as u16);
            }
            Mutation::NotAskedFor(i, j) if n > 0 && n < columns.len() => {
                let others: Vec<u16> = (0..columns.len() as u16)
                    .filter(|c| !record.columns().contains(c))
                    .collect();
                attrs[i.index(n)].0 = others[j.index(others.len())];
            }
            Mutation::Repeat(i) if n > 0 => {
                // In place of another column (or, alone, beside itself).
                let k = i.index(n);
                let dup = attrs[k].clone();
                if n == 1 {
                    attrs.push(dup);
                } else {
                    attrs[(k + 1) % n] = dup;
                }
            }
            Mutation::Drop(i) if n > 0 => {
                attrs.remove(i.index(n));
            }
            Mutation::DateTimeOutOfRange(i) => {
                let Some(k) = (0..n)
                    .map(|d| (i.index(n.max(1)) + d) % n)
                    .find(|&k| columns[attrs[k].0 as usize].ty == ColumnType::DateTime)
                else {
                    return (encode(&attrs), false);
                };
                attrs[k].1 = Some((DATETIME_MAX + 1).to_le_bytes().to_vec());
            }
            Mutation::FlipByte(i, x) => {
                let mut bytes = encode(&attrs);
                let k = i.index(bytes.len());
                bytes[k] ^= x;
                return (bytes, false);
            }
            // The mutation does not apply to this answer.
            _ => malformed = false,
        }
        (encode(&attrs), malformed)
    }
}

// ---- the model: the slow way ----

type Decoded = Vec<(u16, Value, Option<Vec<u8>>)>;

/// What the slow way makes of an answer: every attribute as (column id,
/// value, raw bytes) in the order sent, or `None` when it is malformed.
/// With `record`, the answer must hold exactly the record's columns.
fn model(table: &Table, record: Option<&Record>, answer: &[u8]) -> Option<Decoded> {
    let (attrs, rest) = AttrSlice::parse(answer).ok()?;
    if !rest.is_empty() {
        return None;
    }
    if record.is_some_and(|r| r.columns().len() != attrs.len()) {
        return None;
    }
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (col, v) in attrs.iter() {
        let def = table.def().columns.get(col as usize)?;
        if !seen.insert(col) || record.is_some_and(|r| !r.columns().contains(&col)) {
            return None;
        }
        let value = match v {
            None => Value::Null,
            Some(b) => {
                validate_bytes(def, b).ok()?;
                decode_value(def.ty, b)
            }
        };
        out.push((col, value, v.map(<[u8]>::to_vec)));
    }
    Some(out)
}

/// Equality that tells NaNs apart by their bits (a NaN read back must be
/// the same NaN).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Float(x), Value::Float(y)) => x.to_bits() == y.to_bits(),
        (Value::Double(x), Value::Double(y)) => x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

/// Which typed accessors read which column types (the documented rule).
fn accepts(accessor: &str, ty: ColumnType) -> bool {
    use ColumnType::*;
    match accessor {
        "get_i8" => ty == TinyInt { unsigned: false },
        "get_u8" => ty == TinyInt { unsigned: true },
        "get_i16" => ty == SmallInt { unsigned: false },
        "get_u16" => ty == SmallInt { unsigned: true },
        "get_i32" => ty == Int { unsigned: false },
        "get_u32" => matches!(ty, Int { unsigned: true } | Timestamp),
        "get_i64" => matches!(ty, BigInt { unsigned: false } | DateTime),
        "get_u64" => ty == BigInt { unsigned: true },
        "get_f32" => ty == Float,
        "get_f64" => ty == Double,
        "get_bytes" => matches!(ty, Char(_) | VarChar(_) | Binary(_) | VarBinary(_)),
        "get_str" => matches!(ty, Char(_) | VarChar(_)),
        _ => unreachable!("unknown accessor {accessor}"),
    }
}

// ---- both row types behind one face ----

type Typed = Result<Option<Vec<u8>>, ShoalError>;

trait Access {
    fn get_idx(&self, col: u16) -> Option<Value>;
    fn get(&self, name: &str) -> Option<Value>;
    fn is_null(&self, col: u16) -> Result<bool, ShoalError>;
    fn get_raw(&self, col: u16) -> Result<Option<&[u8]>, ShoalError>;
    fn get_str(&self, col: u16) -> Result<Option<&str>, ShoalError>;
    /// Every byte-returning and number-returning accessor, numbers as
    /// their little-endian bytes (which must be the canonical bytes).
    fn typed(&self, col: u16) -> Vec<(&'static str, Typed)>;
}

macro_rules! access {
    ($t:ty) => {
        impl Access for $t {
            fn get_idx(&self, col: u16) -> Option<Value> {
                <$t>::get_idx(self, col)
            }
            fn get(&self, name: &str) -> Option<Value> {
                <$t>::get(self, name)
            }
            fn is_null(&self, col: u16) -> Result<bool, ShoalError> {
                <$t>::is_null(self, col)
            }
            fn get_raw(&self, col: u16) -> Result<Option<&[u8]>, ShoalError> {
                <$t>::get_raw(self, col)
            }
            fn get_str(&self, col: u16) -> Result<Option<&str>, ShoalError> {
                <$t>::get_str(self, col)
            }
            fn typed(&self, col: u16) -> Vec<(&'static str, Typed)> {
                fn le<T, const N: usize>(
                    r: Result<Option<T>, ShoalError>,
                    f: fn(T) -> [u8; N],
                ) -> Typed {
                    r.map(|o| o.map(|x| f(x).to_vec()))
                }
                vec![
                    ("get_i8", le(self.get_i8(col), i8::to_le_bytes)),
                    ("get_u8", le(self.get_u8(col), u8::to_le_bytes)),
                    ("get_i16", le(self.get_i16(col), i16::to_le_bytes)),
                    ("get_u16", le(self.get_u16(col), u16::to_le_bytes)),
                    ("get_i32", le(self.get_i32(col), i32::to_le_bytes)),
                    ("get_u32", le(self.get_u32(col), u32::to_le_bytes)),
                    ("get_i64", le(self.get_i64(col), i64::to_le_bytes)),
                    ("get_u64", le(self.get_u64(col), u64::to_le_bytes)),
                    ("get_f32", le(self.get_f32(col), f32::to_le_bytes)),
                    ("get_f64", le(self.get_f64(col), f64::to_le_bytes)),
                    (
                        "get_bytes",
                        self.get_bytes(col).map(|o| o.map(<[u8]>::to_vec)),
                    ),
                ]
            }
        }
    };
}
access!(RowBuf);
access!(Row);

/// Checks a filled row against the model's decoding of its answer.
fn check_row(row: &impl Access, table: &Table, decoded: &Decoded) -> Result<(), TestCaseError> {
    let columns = &table.def().columns;
    for (col, value, raw) in decoded {
        let def = &columns[*col as usize];
        let got = row.get_idx(*col);
        prop_assert!(
            got.as_ref().is_some_and(|g| same(g, value)),
            "column {col} ({:?}): {got:?}, the slow way {value:?}",
            def.ty
        );
        let by_name = row.get(&def.name);
        prop_assert!(by_name.is_some_and(|g| same(&g, value)));
        prop_assert_eq!(row.is_null(*col).ok(), Some(raw.is_none()));
        prop_assert_eq!(row.get_raw(*col).ok(), Some(raw.as_deref()));
        for (accessor, result) in row.typed(*col) {
            if accepts(accessor, def.ty) {
                prop_assert_eq!(
                    result.ok(),
                    Some(raw.clone()),
                    "{} on {:?}",
                    accessor,
                    def.ty
                );
            } else {
                prop_assert_eq!(result.map_err(|e| e.code), Err(ErrorCode::BadRequest));
            }
        }
        let text = row.get_str(*col);
        match (accepts("get_str", def.ty), value) {
            (false, _) => prop_assert_eq!(text.map_err(|e| e.code), Err(ErrorCode::BadRequest)),
            (true, Value::Null) => prop_assert_eq!(text.ok(), Some(None)),
            (true, Value::Str(s)) => match text {
                Ok(t) => prop_assert_eq!(t, Some(s.as_str())),
                // `decode_value` replaced what is not UTF-8.
                Err(e) => {
                    prop_assert_eq!(e.code, ErrorCode::BadValue);
                    prop_assert!(s.contains(char::REPLACEMENT_CHARACTER), "{:?}", s);
                }
            },
            (true, other) => prop_assert!(false, "a string column decoded to {other:?}"),
        }
    }
    // Columns the row does not hold, in the table and beyond it.
    let held: HashSet<u16> = decoded.iter().map(|d| d.0).collect();
    for col in (0..columns.len() as u16 + 2).filter(|c| !held.contains(c)) {
        prop_assert!(row.get_idx(col).is_none());
        prop_assert_eq!(
            row.is_null(col).map_err(|e| e.code),
            Err(ErrorCode::NoSuchColumn)
        );
        prop_assert_eq!(
            row.get_raw(col).map_err(|e| e.code),
            Err(ErrorCode::NoSuchColumn)
        );
        for (_, result) in row.typed(col) {
            prop_assert_eq!(result.map_err(|e| e.code), Err(ErrorCode::NoSuchColumn));
        }
    }
    Ok(())
}

/// Fills `buf` with `answer` for `record` and checks the outcome against
/// the model: accepted exactly when the model accepts, and then equal to
/// it; refused with `ProtocolViolation` and empty otherwise. Returns
/// whether it was accepted.
fn fill_and_check(buf: &mut RowBuf, record: &Record, answer: &[u8]) -> Result<bool, TestCaseError> {
    let table = record.table();
    let want = model(table, Some(record), answer);
    match (buf.fill(record, answer), want) {
        (Ok(()), Some(decoded)) => {
            prop_assert!(buf.is_filled());
            prop_assert_eq!(buf.len(), record.columns().len());
            check_row(buf, table, &decoded)?;
            // `values` lists the columns in record order.
            let values = buf.values();
            prop_assert_eq!(
                values.iter().map(|v| v.0).collect::<Vec<_>>(),
                record.columns().to_vec()
            );
            Ok(true)
        }
        (Err(e), None) => {
            prop_assert_eq!(e.code, ErrorCode::ProtocolViolation);
            prop_assert!(!buf.is_filled() && buf.is_empty() && buf.values().is_empty());
            Ok(false)
        }
        (got, want) => Err(TestCaseError::fail(format!(
            "fast path {got:?}, slow path {want:?} on {answer:?}"
        ))),
    }
}

/// Parses `answer` as a [`Row`] and checks it against the model (no
/// record: any columns of the table, each at most once).
fn parse_and_check(table: &Table, answer: &[u8]) -> Result<(), TestCaseError> {
    match (
        Row::parse(table.clone(), answer.to_vec()),
        model(table, None, answer),
    ) {
        (Ok(row), Some(decoded)) => {
            prop_assert_eq!(row.len(), decoded.len());
            check_row(&row, table, &decoded)
        }
        (Err(e), None) => {
            prop_assert_eq!(e.code, ErrorCode::ProtocolViolation);
            Ok(())
        }
        (got, want) => Err(TestCaseError::fail(format!(
            "Row::parse {got:?}, slow path {want:?} on {answer:?}"
        ))),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Well-formed answers read back exactly as the slow way decodes them,
    /// through every accessor of both row types.
    #[test]
    fn well_formed_answers_read_as_the_slow_way((record, attrs) in case()) {
        let answer = encode(&attrs);
        let mut buf = RowBuf::new();
        prop_assert!(fill_and_check(&mut buf, &record, &answer)?);
        parse_and_check(record.table(), &answer)?;
    }

    /// Spoiled answers: refused when surely malformed, and in every case
    /// accepted exactly when the slow way accepts (a flipped byte may
    /// leave an answer well-formed).
    #[test]
    fn malformed_answers_are_refused(
        (record, attrs) in case(),
        m in mutation(),
    ) {
        let (answer, malformed) = m.apply(&record, &attrs);
        let mut buf = RowBuf::new();
        let accepted = fill_and_check(&mut buf, &record, &answer)?;
        if malformed {
            prop_assert!(!accepted, "{:?} accepted", m);
        }
        parse_and_check(record.table(), &answer)?;
    }

    /// Random bytes, with a plausible count in front or not, never panic
    /// and agree with the slow way.
    #[test]
    fn random_bytes_agree_with_the_slow_way(
        record in table().prop_flat_map(|t| record_of(&t)),
        count in prop::option::of(0u16..12),
        body in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut answer = Vec::new();
        if let Some(c) = count {
            answer.extend_from_slice(&c.to_le_bytes());
        }
        answer.extend_from_slice(&body);
        let mut buf = RowBuf::new();
        fill_and_check(&mut buf, &record, &answer)?;
        parse_and_check(record.table(), &answer)?;
    }

    /// One buffer refilled through different records of different tables,
    /// with answers good and bad, always holds exactly the last answer.
    #[test]
    fn a_refilled_buffer_holds_the_last_answer(
        fills in prop::collection::vec((case(), prop::option::of(mutation())), 1..6),
    ) {
        let mut buf = RowBuf::new();
        for ((record, attrs), m) in fills {
            let answer = match m {
                Some(m) => m.apply(&record, &attrs).0,
                None => encode(&attrs),
            };
            fill_and_check(&mut buf, &record, &answer)?;
        }
    }
}
