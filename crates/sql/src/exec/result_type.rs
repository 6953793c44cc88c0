//! What an expression's results are before any row is read: its
//! [`Class`] (integer, exact decimal, floating point, string, time), and
//! the result columns MariaDB 10.11 describes aggregate calls and
//! numeric expressions with (a prepare describes them; an execution's
//! columns must agree).
//!
//! DECIMAL columns and literals are exact values ([`shoal_types::Decimal`]);
//! SUM and AVG of integers are exact in [`super::aggregate`], and an
//! expression over them is evaluated with integers or doubles but
//! described as DECIMAL and printed with the scale MariaDB gives it
//! (`AVG(k) + 1`: 4 fraction digits).

use super::aggregate::{AggCall, AggFunc};
use super::expr::Scalar;
use crate::outcome::{Column, ColumnKind};
use crate::sqltypes::result_column;
use shoal_types::decimal::DECIMAL_SCALE_MAX;
use shoal_types::{ColumnType, TableDef, Value};

/// Digits of a DECIMAL at most (MariaDB's `DECIMAL_MAX_PRECISION`).
const DECIMAL_PRECISION_MAX: u32 = 65;

/// Fraction digits AVG adds to its argument's (MariaDB's default
/// `div_precision_increment`).
pub const AVG_SCALE_INCREMENT: u8 = 4;

/// What an expression's values are, as far as a statement can tell
/// before it reads a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Integers (and booleans).
    Int,
    /// Exact decimals with this many fraction digits: SUM and AVG of
    /// integers and arithmetic on them (their values are evaluated as
    /// integers or doubles, and printed with this scale).
    Decimal(u8),
    /// Floating point.
    Real,
    /// Text or binary strings.
    Str,
    /// TIMESTAMP, DATETIME, DATE and TIME.
    Temporal,
    /// Not told before a row (NULL, branches of different types).
    Unknown,
}

fn value_class(v: &Value) -> Class {
    match v {
        Value::Int(_) | Value::UInt(_) => Class::Int,
        Value::Float(_) | Value::Double(_) => Class::Real,
        Value::Str(_) | Value::Bytes(_) => Class::Str,
        Value::Timestamp(_) | Value::DateTime(_) | Value::Date(_) | Value::Time(_) => {
            Class::Temporal
        }
        Value::Decimal(d) => Class::Decimal(d.scale),
        Value::Null => Class::Unknown,
    }
}

fn column_class(ty: ColumnType) -> Class {
    match ty {
        ColumnType::TinyInt { .. }
        | ColumnType::SmallInt { .. }
        | ColumnType::Int { .. }
        | ColumnType::BigInt { .. } => Class::Int,
        ColumnType::Float | ColumnType::Double => Class::Real,
        ColumnType::Char(_)
        | ColumnType::VarChar(_)
        | ColumnType::Binary(_)
        | ColumnType::VarBinary(_) => Class::Str,
        ColumnType::Timestamp | ColumnType::DateTime | ColumnType::Date | ColumnType::Time => {
            Class::Temporal
        }
        ColumnType::Decimal { scale, .. } => Class::Decimal(scale),
    }
}

/// The class of what `call` returns.
pub fn result_class(call: &AggCall) -> Class {
    match (call.func, call.arg_class) {
        (AggFunc::Count, _) => Class::Int,
        (AggFunc::Sum, Class::Int | Class::Temporal) => Class::Decimal(0),
        (AggFunc::Sum, Class::Decimal(s)) => Class::Decimal(s),
        (AggFunc::Avg, Class::Int | Class::Temporal) => Class::Decimal(AVG_SCALE_INCREMENT),
        (AggFunc::Avg, Class::Decimal(s)) => Class::Decimal(s.saturating_add(AVG_SCALE_INCREMENT)),
        (AggFunc::Sum | AggFunc::Avg, _) => Class::Real,
        (AggFunc::Min | AggFunc::Max, c) => c,
    }
}

/// Two branches' classes together (CASE, IF, COALESCE, ...).
fn unify(a: Class, b: Class) -> Class {
    match (a, b) {
        _ if a == b => a,
        (Class::Int, Class::Decimal(s)) | (Class::Decimal(s), Class::Int) => Class::Decimal(s),
        (Class::Decimal(x), Class::Decimal(y)) => Class::Decimal(x.max(y)),
        (
            Class::Int | Class::Decimal(_) | Class::Real,
            Class::Int | Class::Decimal(_) | Class::Real,
        ) => Class::Real,
        _ => Class::Unknown,
    }
}

/// The classes of `items` together; NULL constants say nothing.
fn unify_all<'a>(
    items: impl Iterator<Item = &'a Scalar>,
    def: &TableDef,
    calls: &[AggCall],
) -> Class {
    let mut out: Option<Class> = None;
    for s in items {
        if matches!(s, Scalar::Const(Value::Null)) {
            continue;
        }
        let c = class_of(s, def, calls);
        out = Some(out.map_or(c, |o| unify(o, c)));
    }
    out.unwrap_or(Class::Unknown)
}

/// The class of `s`, an expression over `def`'s rows or over group rows
/// whose columns past `def`'s are `calls`' results.
pub fn class_of(s: &Scalar, def: &TableDef, calls: &[AggCall]) -> Class {
    use super::expr::{Arith, CastTo, Func};
    let width = def.columns.len();
    match s {
        Scalar::Const(v) => value_class(v),
        Scalar::Column(c) => {
            let c = usize::from(*c);
            match def.columns.get(c) {
                Some(col) => column_class(col.ty),
                None => calls.get(c - width).map_or(Class::Unknown, result_class),
            }
        }
        Scalar::Neg(x) => match class_of(x, def, calls) {
            c @ (Class::Int | Class::Decimal(_) | Class::Real) => c,
            Class::Str => Class::Real,
            _ => Class::Unknown,
        },
        Scalar::Not(_)
        | Scalar::Cmp(..)
        | Scalar::And(_)
        | Scalar::Or(_)
        | Scalar::Xor(..)
        | Scalar::IsNull(..)
        | Scalar::IsBool(..)
        | Scalar::Like { .. }
        | Scalar::InList { .. }
        | Scalar::Between { .. } => Class::Int,
        Scalar::Arith(op, a, b) => {
            let (x, y) = (class_of(a, def, calls), class_of(b, def, calls));
            let scale = |c: Class| match c {
                Class::Int => Some(0u8),
                Class::Decimal(s) => Some(s),
                _ => None,
            };
            match op {
                // Exact numbers divide exactly, with 4 more fraction
                // digits than the dividend (`10 / 4` is 2.5000).
                Arith::Div => match (scale(x), scale(y)) {
                    (Some(p), Some(_)) => Class::Decimal(
                        p.saturating_add(super::eval_types::DIV_SCALE_INCREMENT)
                            .min(DECIMAL_SCALE_MAX),
                    ),
                    _ => Class::Real,
                },
                Arith::IntDiv => Class::Int,
                _ => match (scale(x), scale(y)) {
                    (Some(0), Some(0)) => Class::Int,
                    (Some(p), Some(q)) => Class::Decimal(if *op == Arith::Mul {
                        p.saturating_add(q).min(DECIMAL_SCALE_MAX)
                    } else {
                        p.max(q)
                    }),
                    _ if [x, y].iter().any(|c| matches!(c, Class::Real | Class::Str)) => {
                        Class::Real
                    }
                    _ => Class::Unknown,
                },
            }
        }
        Scalar::Case {
            whens, otherwise, ..
        } => unify_all(
            whens.iter().map(|(_, r)| r).chain(otherwise.as_deref()),
            def,
            calls,
        ),
        Scalar::Func(f, args) => match f {
            Func::Concat | Func::Upper | Func::Lower => Class::Str,
            Func::Length | Func::CharLength | Func::Floor | Func::Ceil | Func::DatePart(_) => {
                Class::Int
            }
            // ROUND(x) gives an integer; with digits, x's class, a
            // DECIMAL with the constant digits' scale (see
            // `eval_funcs::round_to_digits`).
            Func::Round | Func::Truncate => match (args.first(), args.get(1)) {
                (Some(x), Some(digits)) => match class_of(x, def, calls) {
                    Class::Int => Class::Int,
                    Class::Real | Class::Str => Class::Real,
                    Class::Decimal(scale) => match digits {
                        Scalar::Const(v) => super::eval::round_digits(v)
                            .map_or(Class::Unknown, |d| {
                                Class::Decimal(d.clamp(0, i64::from(DECIMAL_SCALE_MAX)) as u8)
                            }),
                        _ => Class::Decimal(scale),
                    },
                    _ => Class::Unknown,
                },
                _ => Class::Int,
            },
            Func::Date => Class::Temporal,
            Func::Abs | Func::NullIf => args
                .first()
                .map_or(Class::Unknown, |a| class_of(a, def, calls)),
            Func::If => unify_all(args.iter().skip(1), def, calls),
            Func::Coalesce | Func::IfNull | Func::Greatest | Func::Least => {
                unify_all(args.iter(), def, calls)
            }
        },
        Scalar::Cast(_, to) => match to {
            CastTo::Signed | CastTo::Unsigned => Class::Int,
            CastTo::Char | CastTo::Binary => Class::Str,
            CastTo::Double => Class::Real,
            CastTo::DateTime | CastTo::Date | CastTo::Time => Class::Temporal,
            CastTo::Decimal { scale, .. } => Class::Decimal(*scale),
        },
    }
}

// ---------------------------------------------------------------------------
// Result columns

/// Digits of an integer column's values (MariaDB's `decimal_precision`).
fn integer_digits(ty: ColumnType) -> u32 {
    match ty {
        ColumnType::TinyInt { .. } => 3,
        ColumnType::SmallInt { .. } => 5,
        ColumnType::Int { .. } => 10,
        ColumnType::BigInt { unsigned: false } => 19,
        ColumnType::BigInt { unsigned: true } => 20,
        ColumnType::Timestamp | ColumnType::DateTime => 14,
        ColumnType::Date | ColumnType::Time => 8,
        ColumnType::Decimal { precision, .. } => u32::from(precision),
        _ => 21,
    }
}

/// A DECIMAL(precision, scale) result column.
pub fn decimal_column(name: &str, precision: u32, scale: u8) -> Column {
    let precision = precision.min(DECIMAL_PRECISION_MAX);
    Column {
        name: name.to_string(),
        table: String::new(),
        schema: String::new(),
        kind: ColumnKind::NewDecimal,
        // Digits, a sign and a point (MariaDB's
        // my_decimal_precision_to_length_no_truncation).
        length: precision + 1 + u32::from(scale > 0),
        decimals: scale,
        nullable: true,
        unsigned: false,
        binary: true,
        primary_key: false,
    }
}

fn number_column(name: &str, kind: ColumnKind, length: u32, decimals: u8) -> Column {
    Column {
        name: name.to_string(),
        table: String::new(),
        schema: String::new(),
        kind,
        length,
        decimals,
        nullable: true,
        unsigned: false,
        binary: true,
        primary_key: false,
    }
}

/// The result column of an expression of class `class`, when the class
/// alone tells it (numbers); `None` for the others.
pub fn class_column(name: &str, class: Class) -> Option<Column> {
    match class {
        Class::Int => Some(number_column(name, ColumnKind::LongLong, 21, 0)),
        Class::Decimal(s) => Some(decimal_column(name, DECIMAL_PRECISION_MAX, s)),
        Class::Real => Some(number_column(name, ColumnKind::Double, 23, 31)),
        _ => None,
    }
}

/// The result column of `call` named `name`, as MariaDB describes it;
/// `None` where only a value tells (MIN / MAX of a string expression).
pub fn call_column(call: &AggCall, name: &str, def: &TableDef) -> Option<Column> {
    let arg_column = match call.args.as_slice() {
        [Scalar::Column(c)] => def.columns.get(usize::from(*c)),
        _ => None,
    };
    match call.func {
        AggFunc::Count => {
            let mut c = number_column(name, ColumnKind::LongLong, 21, 0);
            c.nullable = false;
            Some(c)
        }
        AggFunc::Sum | AggFunc::Avg => match result_class(call) {
            Class::Decimal(scale) => {
                let digits = arg_column.map_or(21, |c| integer_digits(c.ty));
                let more = if call.func == AggFunc::Sum {
                    // MariaDB: a sum holds at most 22 digits more than
                    // its argument (DECIMAL_LONGLONG_DIGITS).
                    22
                } else {
                    u32::from(AVG_SCALE_INCREMENT)
                };
                Some(decimal_column(name, digits + more, scale))
            }
            _ => Some(number_column(name, ColumnKind::Double, 23, 31)),
        },
        AggFunc::Min | AggFunc::Max => match arg_column {
            Some(col) => {
                let mut c = result_column(col, "", "", false);
                c.name = name.to_string();
                c.nullable = true;
                Some(c)
            }
            None => class_column(name, call.arg_class),
        },
    }
}
