//! Unit tests per instruction and type family, verify refusals, and
//! randomized checks of the bytecode path against `eval_values`.

use super::expr::like_by_sets;
use super::*;
use crate::decimal::Decimal;
use crate::temporal::{DATE_MAX, DATE_MIN, TIME_MAX};
use crate::value::{encode_value, Value};
use crate::value::{DATETIME_MAX, DATETIME_MIN};
use proptest::prelude::*;
use ColumnType as T;

const TI: u16 = 1; // TINYINT
const TU: u16 = 2; // TINYINT UNSIGNED
const SU: u16 = 3; // SMALLINT UNSIGNED
const BS: u16 = 4; // BIGINT
const BU: u16 = 5; // BIGINT UNSIGNED
const F: u16 = 6; // FLOAT
const D: u16 = 7; // DOUBLE
const C: u16 = 8; // CHAR(6)
const VC: u16 = 9; // VARCHAR(8)
const B: u16 = 10; // BINARY(4)
const VB: u16 = 11; // VARBINARY(8)
const TS: u16 = 12; // TIMESTAMP
const DT: u16 = 13; // DATETIME

fn table() -> TableDef {
    let types = [
        T::TinyInt { unsigned: false },
        T::TinyInt { unsigned: true },
        T::SmallInt { unsigned: true },
        T::BigInt { unsigned: false },
        T::BigInt { unsigned: true },
        T::Float,
        T::Double,
        T::Char(6),
        T::VarChar(8),
        T::Binary(4),
        T::VarBinary(8),
        T::Timestamp,
        T::DateTime,
    ];
    let mut cols = vec![ColumnDef::new("id", T::Int { unsigned: false })];
    for (i, ty) in types.into_iter().enumerate() {
        cols.push(ColumnDef::new(format!("c{}", i + 1), ty).nullable());
    }
    TableDef::new("t", cols, &["id"]).unwrap()
}

/// A row of `table()`: id 0, the given cells, NULL elsewhere.
fn row(cells: &[(u16, Value)]) -> Vec<Value> {
    let mut r = vec![Value::Null; table().columns.len()];
    r[0] = Value::Int(0);
    for (c, v) in cells {
        r[*c as usize] = v.clone();
    }
    r
}

fn stored(table: &TableDef, row: &[Value]) -> Vec<Option<Vec<u8>>> {
    table
        .columns
        .iter()
        .zip(row)
        .map(|(def, v)| {
            (!v.is_null()).then(|| {
                let mut b = Vec::new();
                encode_value(def, v, &mut b).unwrap();
                b
            })
        })
        .collect()
}

fn run(table: &TableDef, program: &[u8], cells: &[Option<Vec<u8>>]) -> bool {
    Filter::verify(program, table)
        .unwrap()
        .matches(|c| cells[c as usize].as_deref())
}

/// The three-valued result through the bytecode path (the row matches `e`
/// or `NOT e`, or neither), checked against the model.
fn tri_in(table: &TableDef, e: &FilterExpr, row: &[Value]) -> Option<bool> {
    let cells = stored(table, row);
    let yes = run(table, &e.compile(table).unwrap(), &cells);
    let not = FilterExpr::Not(Box::new(e.clone()));
    let no = run(table, &not.compile(table).unwrap(), &cells);
    assert!(!(yes && no), "{e:?} is both TRUE and FALSE");
    let got = if yes {
        Some(true)
    } else if no {
        Some(false)
    } else {
        None
    };
    assert_eq!(got, e.eval_values(table, row), "model disagrees on {e:?}");
    got
}

fn tri(e: &FilterExpr, cells: &[(u16, Value)]) -> Option<bool> {
    tri_in(&table(), e, &row(cells))
}

fn cmp(col: u16, op: CmpOp, v: impl Into<Value>) -> FilterExpr {
    FilterExpr::Cmp {
        col,
        op,
        value: v.into(),
    }
}

fn cols(a: u16, op: CmpOp, b: u16) -> FilterExpr {
    FilterExpr::CmpCols { a, op, b }
}

fn like(col: u16, pattern: &[u8]) -> FilterExpr {
    FilterExpr::Like {
        col,
        pattern: pattern.to_vec(),
    }
}

use CmpOp::{Eq, Ge, Gt, Le, Lt, Ne};

#[test]
fn cmp_op_bytes_round_trip() {
    for (i, op) in CmpOp::ALL.iter().enumerate() {
        assert_eq!(op.as_u8() as usize, i);
        assert_eq!(CmpOp::from_u8(i as u8), Some(*op));
    }
    assert_eq!(CmpOp::from_u8(6), None);
}

#[test]
fn integers_compare_by_value_across_widths_and_signedness() {
    let cells = [
        (TI, Value::Int(-1)),
        (TU, Value::UInt(255)),
        (SU, Value::UInt(65535)),
        (BS, Value::Int(i64::MIN)),
        (BU, Value::UInt(u64::MAX)),
    ];
    assert_eq!(tri(&cols(TI, Lt, TU), &cells), Some(true));
    assert_eq!(tri(&cols(TU, Lt, SU), &cells), Some(true));
    assert_eq!(tri(&cols(BS, Lt, BU), &cells), Some(true));
    assert_eq!(tri(&cols(BU, Gt, TI), &cells), Some(true));
    assert_eq!(tri(&cols(TI, Eq, TI), &cells), Some(true));
    assert_eq!(tri(&cmp(BU, Gt, i64::MAX), &cells), Some(true));
    assert_eq!(tri(&cmp(BU, Eq, u64::MAX), &cells), Some(true));
    assert_eq!(tri(&cmp(TI, Lt, 0), &cells), Some(true));
    assert_eq!(tri(&cmp(TU, Ge, 255u8), &cells), Some(true));
    assert_eq!(tri(&cmp(BS, Le, i64::MIN), &cells), Some(true));
    let equal = [
        (TI, Value::Int(7)),
        (BU, Value::UInt(7)),
        (SU, Value::UInt(8)),
    ];
    assert_eq!(tri(&cols(TI, Eq, BU), &equal), Some(true));
    assert_eq!(tri(&cols(TI, Ne, SU), &equal), Some(true));
    assert_eq!(tri(&cols(SU, Ge, BU), &equal), Some(true));
}

#[test]
fn floats_follow_ieee_nan_rules() {
    let nan = [(F, Value::Float(f32::NAN)), (D, Value::Double(1.5))];
    for op in CmpOp::ALL {
        let want = Some(op == Ne);
        assert_eq!(tri(&cmp(F, op, 1.0f32), &nan), want, "{op:?}");
        assert_eq!(tri(&cols(F, op, F), &nan), want, "{op:?}");
        assert_eq!(tri(&cmp(D, op, f64::NAN), &nan), want, "{op:?}");
    }
    let both = [(F, Value::Float(1.5)), (D, Value::Double(1.5))];
    assert_eq!(tri(&cols(F, Eq, D), &both), Some(true));
    assert_eq!(tri(&cmp(D, Lt, f64::INFINITY), &both), Some(true));
    let zeros = [(F, Value::Float(-0.0)), (D, Value::Double(0.0))];
    assert_eq!(tri(&cols(F, Eq, D), &zeros), Some(true));
}

/// CHAR's trailing spaces are padding; VARCHAR's are ignored (as the SQL
/// node compares strings, for `utf8mb4_bin`); LIKE counts a VARCHAR's.
#[test]
fn char_and_varchar_compare_without_trailing_spaces() {
    let cells = [(C, "ab".into()), (VC, "ab".into())];
    assert_eq!(tri(&cmp(C, Eq, "ab"), &cells), Some(true));
    assert_eq!(tri(&cmp(C, Eq, "ab   "), &cells), Some(true));
    // Untrimmed, the stored "ab    " would sort after "ab\0".
    assert_eq!(tri(&cmp(C, Lt, "ab\0"), &cells), Some(true));
    assert_eq!(tri(&cols(C, Eq, VC), &cells), Some(true));
    assert_eq!(tri(&cmp(VC, Eq, "ab  "), &cells), Some(true));
    let spaced = [(C, "ab".into()), (VC, "ab ".into())];
    assert_eq!(tri(&cols(C, Eq, VC), &spaced), Some(true));
    assert_eq!(tri(&cmp(VC, Eq, "ab"), &spaced), Some(true));
    assert_eq!(tri(&cmp(VC, Gt, "ab"), &spaced), Some(false));
    assert_eq!(tri(&cmp(VC, Lt, "ab\0"), &spaced), Some(true));
    assert_eq!(tri(&like(VC, b"ab"), &spaced), Some(false));
    assert_eq!(tri(&like(VC, b"ab "), &spaced), Some(true));
    let blank = [(C, "".into()), (VC, "  ".into())];
    assert_eq!(tri(&cmp(C, Eq, "      "), &blank), Some(true));
    assert_eq!(tri(&cmp(VC, Eq, ""), &blank), Some(true));
}

#[test]
fn varchar_and_binary_compare_bytes_before_trailing_spaces() {
    for (a, b) in [("B", "a"), ("z", "é"), ("ab", "abc"), ("", "a")] {
        assert_eq!(
            tri(&cmp(VC, Lt, b), &[(VC, a.into())]),
            Some(true),
            "{a} < {b}"
        );
        assert_eq!(
            tri(&cmp(VC, Gt, a), &[(VC, b.into())]),
            Some(true),
            "{b} > {a}"
        );
    }
    let cells = [(B, Value::Bytes(vec![1])), (VB, Value::Bytes(vec![1]))];
    // BINARY keeps its zero padding.
    assert_eq!(tri(&cmp(B, Eq, vec![1u8, 0, 0, 0]), &cells), Some(true));
    assert_eq!(tri(&cmp(B, Eq, vec![1u8]), &cells), Some(true));
    assert_eq!(tri(&cols(VB, Lt, B), &cells), Some(true));
    assert_eq!(tri(&cmp(VB, Gt, vec![0u8, 255]), &cells), Some(true));
}

#[test]
fn timestamp_and_datetime_compare_as_seconds() {
    let cells = [(TS, Value::Timestamp(5)), (DT, Value::DateTime(5))];
    assert_eq!(tri(&cols(TS, Eq, DT), &cells), Some(true));
    let before = [(TS, Value::Timestamp(0)), (DT, Value::DateTime(-1))];
    assert_eq!(tri(&cols(DT, Lt, TS), &before), Some(true));
    let late = [(TS, Value::Timestamp(u32::MAX))];
    assert_eq!(
        tri(&cmp(TS, Gt, Value::Timestamp(1 << 31)), &late),
        Some(true)
    );
    assert_eq!(
        tri(&cmp(DT, Eq, 0), &[(DT, Value::DateTime(0))]),
        Some(true)
    );
}

#[test]
fn decimals_compare_by_value_across_scales() {
    let dec = |precision, scale| T::Decimal { precision, scale };
    let cols_of = vec![
        ColumnDef::new("id", T::Int { unsigned: false }),
        ColumnDef::new("a", dec(5, 2)).nullable(),
        ColumnDef::new("b", dec(10, 0)).nullable(),
        ColumnDef::new("d", T::Date).nullable(),
        ColumnDef::new("t", T::Time).nullable(),
    ];
    let table = TableDef::new("t", cols_of, &["id"]).unwrap();
    let d = |s: &str| Value::Decimal(Decimal::parse(s).unwrap());
    let row = vec![
        Value::Int(0),
        d("2.00"),
        d("2"),
        Value::Date(-5),
        Value::Time(-1),
    ];
    assert_eq!(tri_in(&table, &cols(1, Eq, 2), &row), Some(true));
    assert_eq!(tri_in(&table, &cmp(1, Lt, d("2.01")), &row), Some(true));
    assert_eq!(tri_in(&table, &cmp(1, Gt, d("-3.5")), &row), Some(true));
    assert_eq!(tri_in(&table, &cmp(2, Eq, 2), &row), Some(true));
    assert_eq!(
        tri_in(&table, &cmp(3, Lt, Value::Date(0)), &row),
        Some(true)
    );
    assert_eq!(
        tri_in(&table, &cmp(4, Lt, Value::Time(0)), &row),
        Some(true)
    );
    let other = vec![Value::Int(0), d("-0.50"), d("-1"), Value::Null, Value::Null];
    assert_eq!(tri_in(&table, &cols(1, Gt, 2), &other), Some(true));
    // A DECIMAL column is not comparable with a DATE one.
    let mut program = Vec::new();
    program.extend_from_slice(&[opcode::CMP_COLS, 0, 1, 0, 3, 0]);
    assert!(Filter::verify(&program, &table).is_err());
}

#[test]
fn nulls_make_comparisons_and_like_unknown() {
    let some = [(TI, Value::Int(1)), (VC, "x".into())];
    for op in CmpOp::ALL {
        assert_eq!(tri(&cmp(BU, op, 1u64), &some), None);
        assert_eq!(tri(&cols(TI, op, BU), &some), None);
        assert_eq!(tri(&cols(BU, op, TI), &some), None);
        assert_eq!(tri(&cols(F, op, D), &some), None);
    }
    assert_eq!(tri(&like(C, b"%"), &some), None);
    let not_like = FilterExpr::NotLike {
        col: VB,
        pattern: b"%".to_vec(),
    };
    assert_eq!(tri(&not_like, &some), None);
    assert_eq!(tri(&FilterExpr::IsNull(BU), &some), Some(true));
    assert_eq!(tri(&FilterExpr::IsNotNull(BU), &some), Some(false));
    assert_eq!(tri(&FilterExpr::IsNull(TI), &some), Some(false));
    assert_eq!(tri(&FilterExpr::IsNotNull(VC), &some), Some(true));
}

#[test]
fn and_or_not_follow_kleene_tables() {
    // TI is NULL, so this leaf is UNKNOWN.
    let leaf = |t: Option<bool>| match t {
        Some(true) => FilterExpr::True,
        Some(false) => FilterExpr::False,
        None => cmp(TI, Eq, 1),
    };
    let vals = [Some(true), Some(false), None];
    for a in vals {
        assert_eq!(tri(&FilterExpr::Not(Box::new(leaf(a))), &[]), a.map(|x| !x));
        for b in vals {
            let and = match (a, b) {
                (Some(false), _) | (_, Some(false)) => Some(false),
                (Some(true), Some(true)) => Some(true),
                _ => None,
            };
            let or = match (a, b) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            };
            let pair = vec![leaf(a), leaf(b)];
            assert_eq!(
                tri(&FilterExpr::And(pair.clone()), &[]),
                and,
                "{a:?} AND {b:?}"
            );
            assert_eq!(tri(&FilterExpr::Or(pair), &[]), or, "{a:?} OR {b:?}");
        }
    }
    assert_eq!(tri(&FilterExpr::And(vec![]), &[]), Some(true));
    assert_eq!(tri(&FilterExpr::Or(vec![]), &[]), Some(false));
    let three = FilterExpr::Or(vec![FilterExpr::False, leaf(None), FilterExpr::True]);
    assert_eq!(tri(&three, &[]), Some(true));
}

#[test]
fn like_wildcards_and_escapes() {
    let cases: &[(&[u8], &[u8], bool)] = &[
        (b"", b"", true),
        (b"", b"a", false),
        (b"%", b"", true),
        (b"%", b"anything", true),
        (b"a%", b"abc", true),
        (b"a%", b"ba", false),
        (b"%a%b%", b"xaybz", true),
        (b"%a%b%", b"ba", false),
        (b"%a%b%", b"ab", true),
        (b"a_c", b"abc", true),
        (b"a_c", b"ac", false),
        (b"a\\%", b"a%", true),
        (b"a\\%", b"ab", false),
        (b"a\\_", b"a_", true),
        (b"a\\_", b"ab", false),
        (b"\\\\", b"\\", true),
        (b"\\a", b"a", true),
        (b"%%", b"x", true),
        (b"%ab", b"aab", true),
        (b"%aab", b"aaab", true),
        (b"_%_", b"a", false),
    ];
    for &(pattern, value, want) in cases {
        for text in [false, true] {
            assert_eq!(
                like_match(value, pattern, text),
                want,
                "{pattern:?} {value:?}"
            );
            assert_eq!(
                like_by_sets(value, pattern, text),
                want,
                "{pattern:?} {value:?}"
            );
        }
    }
}

#[test]
fn like_underscore_is_one_character_for_text_and_one_byte_for_binary() {
    let s = |x: &str| x.as_bytes().to_vec();
    for (col, value) in [(VC, Value::from("é€")), (VB, Value::Bytes(s("é€")))] {
        let chars = col == VC;
        assert_eq!(tri(&like(col, b"__"), &[(col, value.clone())]), Some(chars));
        assert_eq!(
            tri(&like(col, b"_____"), &[(col, value.clone())]),
            Some(!chars)
        );
        assert_eq!(
            tri(&like(col, "_€".as_bytes()), &[(col, value.clone())]),
            Some(chars)
        );
        assert_eq!(tri(&like(col, b"%_"), &[(col, value.clone())]), Some(true));
    }
    // A lone continuation byte or a truncated sequence is one unit.
    assert!(like_match(&[0xA9, b'a'], b"__", true));
    assert!(like_match(&[0xE2, 0x82, b'a'], b"___", true));
    assert!(like_match(&[0xC3, b'%'], b"_\\%", true));
    // `%` steps over whole characters, so `%__` needs two of them.
    assert!(!like_match("€".as_bytes(), b"%__", true));
    assert!(like_match("€".as_bytes(), b"%__", false));
}

#[test]
fn like_on_char_ignores_padding() {
    let cells = [(C, "ab".into()), (B, Value::Bytes(b"ab".to_vec()))];
    assert_eq!(tri(&like(C, b"ab"), &cells), Some(true));
    assert_eq!(tri(&like(C, b"%b"), &cells), Some(true));
    assert_eq!(tri(&like(C, b"ab_"), &cells), Some(false));
    // BINARY keeps its zero padding.
    assert_eq!(tri(&like(B, b"ab"), &cells), Some(false));
    assert_eq!(tri(&like(B, b"ab__"), &cells), Some(true));
    let not_like = FilterExpr::NotLike {
        col: C,
        pattern: b"a%".to_vec(),
    };
    assert_eq!(tri(&not_like, &cells), Some(false));
}

#[test]
fn like_adversarial_inputs_finish_quickly() {
    let value = vec![b'a'; 30_000];
    let mut pattern = b"%a".repeat(LIKE_PATTERN_MAX / 2 - 1);
    pattern.extend_from_slice(b"%b");
    assert_eq!(pattern.len(), LIKE_PATTERN_MAX);
    let start = std::time::Instant::now();
    assert!(!like_match(&value, &pattern, true));
    let mut tail = b"%".to_vec();
    tail.extend(std::iter::repeat_n(b'a', LIKE_PATTERN_MAX - 2));
    tail.push(b'b');
    assert!(!like_match(&value, &tail, false));
    let underscores = vec![b'_'; LIKE_PATTERN_MAX];
    assert!(!like_match(&value, &underscores, true));
    let mut almost = vec![b'a'; 2000];
    almost.push(b'b');
    assert!(like_match(&almost, &tail, false));
    assert!(!like_match(&value[..500], &tail, false));
    // Exponential backtracking would not finish at all; O(n*m) takes well
    // under a second even unoptimised.
    assert!(start.elapsed() < std::time::Duration::from_secs(20));
}

#[test]
fn empty_program_matches_everything() {
    let t = table();
    let f = Filter::verify(&[], &t).unwrap();
    assert!(f.is_match_all());
    assert!(f.matches(|_| None));
    assert!(!Filter::verify(&[opcode::TRUE], &t).unwrap().is_match_all());
    assert!(!run(&t, &[opcode::FALSE], &[]));
    assert!(run(&t, &[opcode::TRUE], &[]));
}

// ---- verify refusals ----

fn raw_cmp_const(op: u8, col: u16, bytes: &[u8]) -> Vec<u8> {
    let mut p = vec![opcode::CMP_CONST, op];
    p.extend_from_slice(&col.to_le_bytes());
    p.extend_from_slice(&(bytes.len() as u16).to_le_bytes());
    p.extend_from_slice(bytes);
    p
}

fn raw_cmp_cols(op: u8, a: u16, b: u16) -> Vec<u8> {
    let mut p = vec![opcode::CMP_COLS, op];
    p.extend_from_slice(&a.to_le_bytes());
    p.extend_from_slice(&b.to_le_bytes());
    p
}

fn raw_like(code: u8, col: u16, pattern: &[u8]) -> Vec<u8> {
    let mut p = vec![code];
    p.extend_from_slice(&col.to_le_bytes());
    p.extend_from_slice(&(pattern.len() as u16).to_le_bytes());
    p.extend_from_slice(pattern);
    p
}

fn refused(program: &[u8], needle: &str) {
    let e = Filter::verify(program, &table()).unwrap_err();
    assert_eq!(e.code, ErrorCode::BadFilter);
    assert!(e.detail.contains(needle), "{:?} lacks {needle:?}", e.detail);
}

#[test]
fn verify_enforces_every_limit() {
    refused(
        &vec![opcode::TRUE; FILTER_BYTES_MAX + 1],
        "FILTER_BYTES_MAX",
    );

    // TRUE (TRUE AND)* with n instructions.
    let chain = |n: usize| {
        let mut p = vec![opcode::TRUE];
        p.extend([opcode::TRUE, opcode::AND].repeat((n - 1) / 2));
        if n.is_multiple_of(2) {
            p.push(opcode::NOT);
        }
        p
    };
    assert!(Filter::verify(&chain(FILTER_INSTRUCTIONS_MAX), &table()).is_ok());
    refused(&chain(FILTER_INSTRUCTIONS_MAX + 1), "instruction 1024 ");
    refused(
        &chain(FILTER_INSTRUCTIONS_MAX + 1),
        "FILTER_INSTRUCTIONS_MAX",
    );

    let deep = |n: usize| {
        let mut p = vec![opcode::TRUE; n];
        p.extend(vec![opcode::OR; n - 1]);
        p
    };
    assert!(Filter::verify(&deep(FILTER_STACK_MAX), &table()).is_ok());
    refused(&deep(FILTER_STACK_MAX + 1), "instruction 64 ");
    refused(&deep(FILTER_STACK_MAX + 1), "FILTER_STACK_MAX");

    let longest = vec![b'a'; LIKE_PATTERN_MAX];
    assert!(Filter::verify(&raw_like(opcode::LIKE, VC, &longest), &table()).is_ok());
    let mut too_long = raw_like(opcode::LIKE, VC, &[b'a'; LIKE_PATTERN_MAX + 1]);
    refused(&too_long, "LIKE_PATTERN_MAX");
    too_long.insert(0, opcode::TRUE);
    refused(&too_long, "instruction 1 (byte 1)");
}

#[test]
fn verify_refuses_malformed_programs() {
    for code in [0x00, 0x03, 0x16, 0x23, 0xFF] {
        refused(&[code], "unknown opcode");
    }
    let valid = [
        raw_cmp_const(0, TI, &[1]),
        raw_cmp_cols(0, TI, BU),
        raw_like(opcode::LIKE, VC, b"a%"),
        vec![opcode::IS_NULL, TI as u8, 0],
        vec![opcode::IS_NOT_NULL, TI as u8, 0],
    ];
    for program in &valid {
        assert!(Filter::verify(program, &table()).is_ok(), "{program:?}");
        for cut in 1..program.len() {
            refused(&program[..cut], "truncated operand");
        }
    }
    refused(&[opcode::AND], "underflow");
    refused(
        &[opcode::TRUE, opcode::OR],
        "instruction 1 (byte 1): stack underflow",
    );
    refused(&[opcode::NOT], "underflow");
    refused(&[opcode::TRUE, opcode::TRUE], "exactly one value");
    refused(&[opcode::IS_NULL, 99, 0], "column 99 does not exist");
    refused(&raw_cmp_cols(0, TI, 14), "column 14 does not exist");
    refused(&raw_cmp_const(6, TI, &[1]), "comparison byte 6");
    refused(&raw_cmp_cols(0xFF, TI, TI), "comparison byte 255");
}

#[test]
fn verify_refuses_constants_that_do_not_fit() {
    refused(&raw_cmp_const(0, 0, &[1, 2, 3]), "not canonical");
    refused(&raw_cmp_const(0, 0, &[]), "not canonical");
    refused(&raw_cmp_const(0, VC, b"123456789"), "not canonical");
    refused(&raw_cmp_const(0, C, b"abc"), "not canonical");
    refused(
        &raw_cmp_const(0, DT, &i64::MAX.to_le_bytes()),
        "not canonical",
    );
    let mut null = raw_cmp_const(0, TI, &[]);
    null[4..6].copy_from_slice(&NULL_LEN.to_le_bytes());
    refused(&null, "IS NULL");
    assert!(Filter::verify(&raw_cmp_const(0, VC, b""), &table()).is_ok());
}

#[test]
fn verify_refuses_mismatched_types() {
    for (a, b) in [(TI, F), (BU, TS), (D, DT), (C, B), (VC, VB), (TS, VC)] {
        refused(&raw_cmp_cols(0, a, b), "not comparable");
        refused(&raw_cmp_cols(0, b, a), "not comparable");
    }
    for (a, b) in [(TI, BU), (F, D), (TS, DT), (C, VC), (B, VB)] {
        assert!(Filter::verify(&raw_cmp_cols(0, a, b), &table()).is_ok());
    }
    for col in [0, TU, F, TS, DT] {
        refused(&raw_like(opcode::LIKE, col, b"%"), "LIKE needs");
        refused(&raw_like(opcode::NOT_LIKE, col, b"%"), "LIKE needs");
    }
    refused(&raw_like(opcode::LIKE, VC, b"ab\\"), "lone `\\`");
    refused(&raw_like(opcode::LIKE, VB, b"\\"), "lone `\\`");
    refused(&raw_like(opcode::LIKE, VC, b"\\\\\\"), "lone `\\`");
    assert!(Filter::verify(&raw_like(opcode::LIKE, VC, b"a\\\\"), &table()).is_ok());
}

#[test]
fn compile_reports_bad_expressions() {
    let t = table();
    let null = cmp(TI, Eq, Value::Null).compile(&t).unwrap_err();
    assert_eq!(null.code, ErrorCode::BadFilter);
    assert!(null.detail.contains("IsNull"), "{}", null.detail);
    assert_eq!(
        FilterExpr::IsNull(40).compile(&t).unwrap_err().code,
        ErrorCode::NoSuchColumn
    );
    assert_eq!(
        cmp(TI, Eq, "x").compile(&t).unwrap_err().code,
        ErrorCode::BadValue
    );
    assert_eq!(
        cmp(TI, Eq, 300).compile(&t).unwrap_err().code,
        ErrorCode::BadValue
    );
    assert_eq!(
        cmp(VC, Eq, "123456789").compile(&t).unwrap_err().code,
        ErrorCode::ValueTooLong
    );
    assert_eq!(
        cols(TI, Eq, VC).compile(&t).unwrap_err().code,
        ErrorCode::BadFilter
    );
    assert_eq!(
        like(TI, b"%").compile(&t).unwrap_err().code,
        ErrorCode::BadFilter
    );

    // Right-deep nesting needs one stack slot per level.
    let mut e = FilterExpr::True;
    for _ in 0..FILTER_STACK_MAX {
        e = FilterExpr::And(vec![FilterExpr::True, e]);
    }
    let err = e.compile(&t).unwrap_err();
    assert!(err.detail.contains("FILTER_STACK_MAX"), "{}", err.detail);
    // One-element groups emit nothing, so only the nesting guard stops them.
    let mut e = FilterExpr::True;
    for _ in 0..5000 {
        e = FilterExpr::Or(vec![e]);
    }
    assert_eq!(e.compile(&t).unwrap_err().code, ErrorCode::BadFilter);
    // Left-deep is fine however long.
    let wide = FilterExpr::And(vec![cmp(TI, Ne, 3); 300]);
    assert_eq!(tri(&wide, &[(TI, Value::Int(4))]), Some(true));
}

// ---- randomized checks against the model ----

fn arb_type() -> impl Strategy<Value = ColumnType> {
    prop_oneof![
        any::<bool>().prop_map(|unsigned| T::TinyInt { unsigned }),
        any::<bool>().prop_map(|unsigned| T::SmallInt { unsigned }),
        any::<bool>().prop_map(|unsigned| T::Int { unsigned }),
        any::<bool>().prop_map(|unsigned| T::BigInt { unsigned }),
        Just(T::Float),
        Just(T::Double),
        (1u16..6).prop_map(T::Char),
        (1u16..6).prop_map(T::VarChar),
        (1u16..5).prop_map(T::Binary),
        (1u16..6).prop_map(T::VarBinary),
        Just(T::Timestamp),
        Just(T::DateTime),
        Just(T::Date),
        Just(T::Time),
        (1u8..=38)
            .prop_flat_map(|p| (Just(p), 0..=p.min(30)))
            .prop_map(|(precision, scale)| T::Decimal { precision, scale }),
    ]
}

/// Integers from a small shared range (so that comparisons across columns
/// hit equality), the type's bounds, or anywhere in range.
fn arb_int(lo: i128, hi: i128) -> BoxedStrategy<Value> {
    let to_value = |x: i128| match i64::try_from(x) {
        Ok(v) => Value::Int(v),
        Err(_) => Value::UInt(x as u64),
    };
    prop_oneof![(lo.max(-2)..=hi.min(2)), Just(lo), Just(hi), lo..=hi,]
        .prop_map(to_value)
        .boxed()
}

// "\t" sorts below the space that pads CHAR, so padding shows in order.
const TEXT_PIECES: &[&str] = &["a", "b", " ", "\t", "é", "€", "%", "_", "\\"];
const LIKE_UNITS: &[&[u8]] = &[
    b"a",
    b"b",
    b"%",
    b"_",
    b"\\",
    "é".as_bytes(),
    "€".as_bytes(),
    &[0xC3],
    &[0xA9],
    &[0x82],
];
const BYTE_PIECES: &[u8] = &[0, 1, b' ', b'a', b'b', 0xC3, 0xA9, b'%'];

fn arb_value(ty: ColumnType) -> BoxedStrategy<Value> {
    let int = |bits: u32, unsigned: bool| {
        if unsigned {
            arb_int(0, (1i128 << bits) - 1)
        } else {
            arb_int(-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        }
    };
    let floats = || {
        prop_oneof![
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(-0.0),
            (-2i8..=2).prop_map(f64::from),
            any::<f64>(),
        ]
    };
    match ty {
        T::TinyInt { unsigned } => int(8, unsigned),
        T::SmallInt { unsigned } => int(16, unsigned),
        T::Int { unsigned } => int(32, unsigned),
        T::BigInt { unsigned } => int(64, unsigned),
        T::Float => floats().prop_map(|x| Value::Float(x as f32)).boxed(),
        T::Double => floats().prop_map(Value::Double).boxed(),
        T::Char(n) | T::VarChar(n) => {
            prop::collection::vec(prop::sample::select(TEXT_PIECES), 0..=n as usize)
                .prop_map(move |pieces| {
                    let mut s = String::new();
                    for p in pieces {
                        if s.len() + p.len() <= n as usize {
                            s.push_str(p);
                        }
                    }
                    Value::Str(s)
                })
                .boxed()
        }
        T::Binary(n) | T::VarBinary(n) => {
            prop::collection::vec(prop::sample::select(BYTE_PIECES), 0..=n as usize)
                .prop_map(Value::Bytes)
                .boxed()
        }
        T::Timestamp => prop_oneof![0u32..3, Just(u32::MAX), any::<u32>()]
            .prop_map(Value::Timestamp)
            .boxed(),
        T::DateTime => prop_oneof![
            -2i64..3,
            Just(DATETIME_MIN),
            Just(DATETIME_MAX),
            DATETIME_MIN..=DATETIME_MAX
        ]
        .prop_map(Value::DateTime)
        .boxed(),
        T::Date => prop_oneof![
            -2i32..3,
            Just(DATE_MIN),
            Just(DATE_MAX),
            DATE_MIN..=DATE_MAX
        ]
        .prop_map(Value::Date)
        .boxed(),
        T::Time => prop_oneof![
            -2i64..3,
            Just(-TIME_MAX),
            Just(TIME_MAX),
            -TIME_MAX..=TIME_MAX
        ]
        .prop_map(Value::Time)
        .boxed(),
        T::Decimal { precision, scale } => {
            let limit = 10i128.pow(u32::from(precision)) - 1;
            // Small whole numbers at this scale meet equal values of other
            // DECIMAL columns whatever their scales.
            let whole = (-2i128..3).prop_filter_map("fits the precision", move |x| {
                Decimal::from_int(x)
                    .rescale(scale)
                    .filter(|d| d.fits(precision))
            });
            let any = prop_oneof![Just(-limit), Just(limit), -limit..=limit]
                .prop_map(move |u| Decimal::new(u, scale));
            prop_oneof![whole, any].prop_map(Value::Decimal).boxed()
        }
    }
}

fn arb_table() -> impl Strategy<Value = TableDef> {
    prop::collection::vec((arb_type(), any::<bool>()), 1..=6).prop_map(|specs| {
        let mut cols = vec![ColumnDef::new("id", T::Int { unsigned: false })];
        for (i, (ty, nullable)) in specs.into_iter().enumerate() {
            let c = ColumnDef::new(format!("c{}", i + 1), ty);
            cols.push(if nullable { c.nullable() } else { c });
        }
        TableDef::new("t", cols, &["id"]).unwrap()
    })
}

fn arb_row(table: &TableDef) -> impl Strategy<Value = Vec<Value>> {
    table
        .columns
        .iter()
        .map(|c| {
            if c.nullable {
                prop_oneof![1 => Just(Value::Null), 3 => arb_value(c.ty)].boxed()
            } else {
                arb_value(c.ty)
            }
        })
        .collect::<Vec<_>>()
}

fn arb_pattern() -> impl Strategy<Value = Vec<u8>> {
    const PIECES: &[&[u8]] = &[
        b"%",
        b"%",
        b"_",
        b"a",
        b"b",
        b" ",
        "é".as_bytes(),
        "€".as_bytes(),
        b"\\%",
        b"\\_",
        b"\\\\",
        b"\\a",
        &[0xC3],
        &[0xA9],
        &[0],
    ];
    prop::collection::vec(prop::sample::select(PIECES), 0..6).prop_map(|p| p.concat())
}

fn arb_expr(table: &TableDef) -> impl Strategy<Value = FilterExpr> {
    let types: Vec<ColumnType> = table.columns.iter().map(|c| c.ty).collect();
    let n = types.len() as u16;
    let value_types = types.clone();
    let op = || prop::sample::select(CmpOp::ALL.to_vec());
    let mut pairs = Vec::new();
    for a in 0..n {
        for b in 0..n {
            if Family::of(types[a as usize]) == Family::of(types[b as usize]) {
                pairs.push((a, b));
            }
        }
    }
    let like_cols: Vec<u16> = (0..n)
        .filter(|&c| matches!(Family::of(types[c as usize]), Family::Text | Family::Binary))
        .collect();
    let mut leaves: Vec<BoxedStrategy<FilterExpr>> = vec![
        Just(FilterExpr::True).boxed(),
        Just(FilterExpr::False).boxed(),
        (0..n).prop_map(FilterExpr::IsNull).boxed(),
        (0..n).prop_map(FilterExpr::IsNotNull).boxed(),
        (0..n, op())
            .prop_flat_map(move |(col, op)| {
                arb_value(value_types[col as usize]).prop_map(move |value| FilterExpr::Cmp {
                    col,
                    op,
                    value,
                })
            })
            .boxed(),
        (prop::sample::select(pairs), op())
            .prop_map(|((a, b), op)| FilterExpr::CmpCols { a, op, b })
            .boxed(),
    ];
    if !like_cols.is_empty() {
        leaves.push(
            (
                prop::sample::select(like_cols),
                arb_pattern(),
                any::<bool>(),
            )
                .prop_map(|(col, pattern, negated)| {
                    if negated {
                        FilterExpr::NotLike { col, pattern }
                    } else {
                        FilterExpr::Like { col, pattern }
                    }
                })
                .boxed(),
        );
    }
    prop::strategy::Union::new(leaves).prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(FilterExpr::And),
            prop::collection::vec(inner.clone(), 0..4).prop_map(FilterExpr::Or),
            inner.prop_map(|e| FilterExpr::Not(Box::new(e))),
        ]
    })
}

fn arb_case() -> impl Strategy<Value = (TableDef, Vec<Vec<Value>>, FilterExpr)> {
    arb_table().prop_flat_map(|t| {
        let rows = prop::collection::vec(arb_row(&t), 1..4);
        let expr = arb_expr(&t);
        (Just(t), rows, expr)
    })
}

/// Every node of the tree, so that a wrong leaf cannot hide behind an
/// AND or OR that does not depend on it.
fn subexprs(e: &FilterExpr) -> Vec<&FilterExpr> {
    let mut all = vec![e];
    let mut i = 0;
    while i < all.len() {
        match all[i] {
            FilterExpr::And(items) | FilterExpr::Or(items) => all.extend(items),
            FilterExpr::Not(inner) => all.push(inner),
            _ => {}
        }
        i += 1;
    }
    all
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    #[test]
    fn bytecode_agrees_with_the_model((table, rows, expr) in arb_case()) {
        let program = expr.compile(&table).unwrap();
        let filter = Filter::verify(&program, &table).unwrap();
        for row in &rows {
            let cells = stored(&table, row);
            let want = expr.eval_values(&table, row);
            prop_assert_eq!(filter.matches(|c| cells[c as usize].as_deref()), want == Some(true));
            for e in subexprs(&expr) {
                // Through NOT as well, which separates FALSE from UNKNOWN.
                tri_in(&table, e, row);
            }
        }
    }

    /// The greedy matcher against the set simulation, over a small
    /// alphabet so that matches are common; half the patterns are a value
    /// with some units turned into wildcards.
    #[test]
    fn like_agrees_with_the_set_simulation(
        value in prop::collection::vec(prop::sample::select(LIKE_UNITS), 0..8),
        mask in prop::collection::vec(0u8..6, 8),
        noise in prop::collection::vec(prop::sample::select(LIKE_UNITS), 0..8),
        derived in any::<bool>(),
        text in any::<bool>(),
    ) {
        let pattern: Vec<u8> = if derived {
            value.iter().zip(&mask).flat_map(|(unit, m)| match m {
                0 => b"_".to_vec(),
                1 => b"%".to_vec(),
                2 => [b"%", *unit].concat(),
                _ if unit[0] == b'%' || unit[0] == b'_' || unit[0] == b'\\' => [b"\\", *unit].concat(),
                _ => unit.to_vec(),
            }).collect()
        } else {
            noise.concat()
        };
        let value = value.concat();
        prop_assert_eq!(
            like_match(&value, &pattern, text),
            like_by_sets(&value, &pattern, text),
            "{:?} LIKE {:?}", value, pattern
        );
    }

    #[test]
    fn verify_never_panics_on_random_bytes(program in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = Filter::verify(&program, &table());
    }

    /// Programs assembled from plausible pieces get past the opcode check
    /// far more often than random bytes; whatever verifies must also
    /// evaluate without panicking, even on malformed stored bytes.
    #[test]
    fn verified_programs_run_on_any_row_bytes(
        pieces in prop::collection::vec(
            (prop::sample::select(vec![0x01u8, 0x02, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x20, 0x21, 0x22]),
             0u8..7, 0u16..16, prop::collection::vec(any::<u8>(), 0..10)),
            0..12),
        cells in prop::collection::vec(prop::option::of(prop::collection::vec(any::<u8>(), 0..10)), 14),
    ) {
        let mut program = Vec::new();
        for (code, op, col, bytes) in pieces {
            match code {
                opcode::CMP_CONST => program.extend(raw_cmp_const(op, col, &bytes)),
                opcode::CMP_COLS => program.extend(raw_cmp_cols(op, col, bytes.len() as u16)),
                opcode::LIKE | opcode::NOT_LIKE => program.extend(raw_like(code, col, &bytes)),
                opcode::IS_NULL | opcode::IS_NOT_NULL => {
                    program.push(code);
                    program.extend(col.to_le_bytes());
                }
                _ => program.push(code),
            }
        }
        if let Ok(filter) = Filter::verify(&program, &table()) {
            let _ = filter.matches(|c| cells[c as usize].as_deref());
        }
    }
}

#[test]
fn a_filter_whose_likes_could_take_too_long_a_row_is_refused() {
    let table = TableDef::new(
        "long",
        vec![
            ColumnDef::new("k", T::Int { unsigned: true }),
            ColumnDef::new("v", T::VarBinary(29_000)),
        ],
        &["k"],
    )
    .unwrap();
    let long = vec![b'a'; LIKE_PATTERN_MAX];
    let one = FilterExpr::Like {
        col: 1,
        pattern: long.clone(),
    };
    let program = one.compile(&table).expect("one long LIKE fits");
    let f = Filter::verify(&program, &table).unwrap();
    assert!(f.cost_per_row() <= FILTER_COST_MAX && f.cost_per_row() > 29_000_000);
    let two = FilterExpr::And(vec![one.clone(), one]);
    let e = two.compile(&table).expect_err("two do not");
    assert_eq!(e.code, ErrorCode::BadFilter);
    assert!(e.detail.contains("byte comparisons"), "{e}");
    // Short patterns over the same column are cheap.
    let cheap = FilterExpr::Like {
        col: 1,
        pattern: b"a%".to_vec(),
    };
    let program = cheap.compile(&table).unwrap();
    assert!(Filter::verify(&program, &table).unwrap().cost_per_row() < 100_000);
}
