//! The client's side of filters: an expression tree that compiles to the
//! bytecode, and a plain evaluator over `Value`s that serves as the
//! reference model in tests.

use super::{opcode, token, unit_len, CmpOp, Family, Filter, Token};
use super::{FILTER_BYTES_MAX, FILTER_INSTRUCTIONS_MAX};
use crate::error::{ErrorCode, ShoalError};
use crate::layout::NULL_LEN;
use crate::schema::{ColumnDef, ColumnType, TableDef};
use crate::value::trim_trailing_spaces;
use crate::value::{encode_value, Value};

/// A filter as an expression tree, for clients to build and compile.
#[derive(Clone, Debug, PartialEq)]
pub enum FilterExpr {
    True,
    False,
    /// Column `col` compared with a non-NULL constant.
    Cmp {
        col: u16,
        op: CmpOp,
        value: Value,
    },
    CmpCols {
        a: u16,
        op: CmpOp,
        b: u16,
    },
    IsNull(u16),
    IsNotNull(u16),
    Like {
        col: u16,
        pattern: Vec<u8>,
    },
    NotLike {
        col: u16,
        pattern: Vec<u8>,
    },
    /// TRUE when empty.
    And(Vec<FilterExpr>),
    /// FALSE when empty.
    Or(Vec<FilterExpr>),
    Not(Box<FilterExpr>),
}

fn column_of(table: &TableDef, col: u16) -> Result<&ColumnDef, ShoalError> {
    table.columns.get(col as usize).ok_or_else(|| {
        ShoalError::with_detail(
            ErrorCode::NoSuchColumn,
            format!("filter: table {:?} has no column id {col}", table.name),
        )
    })
}

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// A length operand; lengths of 0xFFFF and more cannot be written.
fn put_len(out: &mut Vec<u8>, len: usize, what: &str) -> Result<(), ShoalError> {
    match u16::try_from(len) {
        Ok(n) if n != NULL_LEN => {
            put_u16(out, n);
            Ok(())
        }
        _ => Err(ShoalError::with_detail(
            ErrorCode::BadFilter,
            format!("filter: {what} of {len} bytes is too long"),
        )),
    }
}

impl FilterExpr {
    /// Encodes the program and verifies it as a data node would, so a
    /// client never sends a filter the node will refuse.
    pub fn compile(&self, table: &TableDef) -> Result<Vec<u8>, ShoalError> {
        let mut out = Vec::new();
        self.emit(table, &mut out, 0)?;
        Filter::verify(&out, table)?;
        Ok(out)
    }

    fn emit(&self, table: &TableDef, out: &mut Vec<u8>, depth: usize) -> Result<(), ShoalError> {
        // Nested one-element And/Or emit no instructions of their own, so
        // nesting is bounded separately from the instruction count; the
        // byte check stops a huge tree before it costs memory.
        if depth > FILTER_INSTRUCTIONS_MAX || out.len() > FILTER_BYTES_MAX {
            return Err(ShoalError::with_detail(
                ErrorCode::BadFilter,
                format!(
                    "filter: expression is too large (limits: {FILTER_INSTRUCTIONS_MAX} \
                     instructions, {FILTER_BYTES_MAX} bytes)"
                ),
            ));
        }
        match self {
            FilterExpr::True => out.push(opcode::TRUE),
            FilterExpr::False => out.push(opcode::FALSE),
            FilterExpr::Cmp { col, op, value } => {
                let def = column_of(table, *col)?;
                if value.is_null() {
                    return Err(ShoalError::with_detail(
                        ErrorCode::BadFilter,
                        format!(
                            "filter: comparing column {:?} with NULL is never TRUE; use IsNull",
                            def.name
                        ),
                    ));
                }
                let mut bytes = Vec::new();
                encode_value(def, value, &mut bytes)?;
                out.extend_from_slice(&[opcode::CMP_CONST, op.as_u8()]);
                put_u16(out, *col);
                put_len(out, bytes.len(), "constant")?;
                out.extend_from_slice(&bytes);
            }
            FilterExpr::CmpCols { a, op, b } => {
                column_of(table, *a)?;
                column_of(table, *b)?;
                out.extend_from_slice(&[opcode::CMP_COLS, op.as_u8()]);
                put_u16(out, *a);
                put_u16(out, *b);
            }
            FilterExpr::IsNull(col) | FilterExpr::IsNotNull(col) => {
                column_of(table, *col)?;
                out.push(if matches!(self, FilterExpr::IsNull(_)) {
                    opcode::IS_NULL
                } else {
                    opcode::IS_NOT_NULL
                });
                put_u16(out, *col);
            }
            FilterExpr::Like { col, pattern } | FilterExpr::NotLike { col, pattern } => {
                column_of(table, *col)?;
                out.push(if matches!(self, FilterExpr::Like { .. }) {
                    opcode::LIKE
                } else {
                    opcode::NOT_LIKE
                });
                put_u16(out, *col);
                put_len(out, pattern.len(), "LIKE pattern")?;
                out.extend_from_slice(pattern);
            }
            FilterExpr::And(items) => {
                emit_chain(items, opcode::AND, opcode::TRUE, table, out, depth)?
            }
            FilterExpr::Or(items) => {
                emit_chain(items, opcode::OR, opcode::FALSE, table, out, depth)?
            }
            FilterExpr::Not(inner) => {
                inner.emit(table, out, depth + 1)?;
                out.push(opcode::NOT);
            }
        }
        Ok(())
    }

    /// The reference semantics, evaluated straight over `Value`s (`row` is
    /// indexed by column id; missing entries are NULL): `Some(true)`,
    /// `Some(false)`, or `None` for UNKNOWN. It is deliberately simple and
    /// independent of the bytecode path, which tests check against it.
    /// Parts that would not compile (a NULL constant, a value of the wrong
    /// type, columns of different families) evaluate to UNKNOWN.
    pub fn eval_values(&self, table: &TableDef, row: &[Value]) -> Option<bool> {
        let cell = |c: u16| {
            let ty = table.columns.get(c as usize)?.ty;
            Some((ty, row.get(c as usize).unwrap_or(&Value::Null)))
        };
        match self {
            FilterExpr::True => Some(true),
            FilterExpr::False => Some(false),
            FilterExpr::Cmp { col, op, value } => {
                let (ty, v) = cell(*col)?;
                model_compare(*op, &model_scalar(ty, v)?, &model_scalar(ty, value)?)
            }
            FilterExpr::CmpCols { a, op, b } => {
                let ((ty_a, va), (ty_b, vb)) = (cell(*a)?, cell(*b)?);
                if Family::of(ty_a) != Family::of(ty_b) {
                    return None;
                }
                model_compare(*op, &model_scalar(ty_a, va)?, &model_scalar(ty_b, vb)?)
            }
            FilterExpr::IsNull(col) => Some(cell(*col)?.1.is_null()),
            FilterExpr::IsNotNull(col) => Some(!cell(*col)?.1.is_null()),
            FilterExpr::Like { col, pattern } => model_like(cell(*col)?, pattern),
            FilterExpr::NotLike { col, pattern } => model_like(cell(*col)?, pattern).map(|m| !m),
            // SQL's n-ary reading: any FALSE (TRUE) decides an AND (OR);
            // otherwise any UNKNOWN makes it UNKNOWN.
            FilterExpr::And(items) | FilterExpr::Or(items) => {
                let decisive = Some(matches!(self, FilterExpr::Or(_)));
                let results: Vec<_> = items.iter().map(|e| e.eval_values(table, row)).collect();
                if results.contains(&decisive) {
                    decisive
                } else if results.contains(&None) {
                    None
                } else {
                    decisive.map(|d| !d)
                }
            }
            FilterExpr::Not(inner) => inner.eval_values(table, row).map(|m| !m),
        }
    }
}

/// Left-deep folding keeps the stack at most one deeper than the deepest
/// child.
fn emit_chain(
    items: &[FilterExpr],
    join: u8,
    empty: u8,
    table: &TableDef,
    out: &mut Vec<u8>,
    depth: usize,
) -> Result<(), ShoalError> {
    let Some((first, rest)) = items.split_first() else {
        out.push(empty);
        return Ok(());
    };
    first.emit(table, out, depth + 1)?;
    for item in rest {
        item.emit(table, out, depth + 1)?;
        out.push(join);
    }
    Ok(())
}

// ---- the reference model's value handling ----

/// A value as the model compares it. Built from `Value`s the way
/// [`encode_value`] would store them (FLOAT rounds to f32, CHAR loses its
/// trailing spaces, BINARY is padded with zeros) and compared (VARCHAR
/// without its trailing spaces), without reading bytes.
#[derive(Clone, Debug, PartialEq, PartialOrd)]
enum ModelScalar {
    Int(i128),
    Float(f64),
    /// A decimal as (integer part, fraction × 10^30): both exact, and the
    /// pair orders as the numbers do whatever their scales.
    Dec(i128, i128),
    Bytes(Vec<u8>),
}

/// Rust's own operators on one variant: IEEE-754 for floats (every
/// comparison with NaN is false but `!=`), lexicographic for bytes.
fn model_compare(op: CmpOp, a: &ModelScalar, b: &ModelScalar) -> Option<bool> {
    if std::mem::discriminant(a) != std::mem::discriminant(b) {
        return None;
    }
    Some(match op {
        CmpOp::Eq => a == b,
        CmpOp::Ne => a != b,
        CmpOp::Lt => a < b,
        CmpOp::Le => a <= b,
        CmpOp::Gt => a > b,
        CmpOp::Ge => a >= b,
    })
}

fn model_scalar(ty: ColumnType, v: &Value) -> Option<ModelScalar> {
    let int = |v: &Value| match *v {
        Value::Int(x) | Value::DateTime(x) => Some(i128::from(x)),
        Value::UInt(x) => Some(i128::from(x)),
        Value::Timestamp(x) => Some(i128::from(x)),
        _ => None,
    };
    Some(match Family::of(ty) {
        Family::Integer | Family::Time => ModelScalar::Int(int(v)?),
        Family::Date => match *v {
            Value::Date(x) => ModelScalar::Int(i128::from(x)),
            _ => return None,
        },
        Family::TimeOfDay => match *v {
            Value::Time(x) => ModelScalar::Int(i128::from(x)),
            _ => return None,
        },
        Family::Decimal => {
            let (unscaled, scale) = match *v {
                Value::Decimal(d) => (d.unscaled, d.scale),
                _ => (int(v)?, 0),
            };
            let unit = 10i128.checked_pow(u32::from(scale))?;
            let lift = 10i128.checked_pow(30u32.checked_sub(u32::from(scale))?)?;
            ModelScalar::Dec(unscaled / unit, (unscaled % unit) * lift)
        }
        // FLOAT stores an f32, so the model rounds straight to f32 as
        // encode_value does (going through f64 first could round twice).
        Family::Float => ModelScalar::Float(match (ty, v) {
            (ColumnType::Float, Value::Float(x)) => f64::from(*x),
            (ColumnType::Float, Value::Double(x)) => f64::from(*x as f32),
            (ColumnType::Float, Value::Int(x)) => f64::from(*x as f32),
            (ColumnType::Float, Value::UInt(x)) => f64::from(*x as f32),
            (_, Value::Float(x)) => f64::from(*x),
            (_, Value::Double(x)) => *x,
            (_, Value::Int(x)) => *x as f64,
            (_, Value::UInt(x)) => *x as f64,
            _ => return None,
        }),
        Family::Text | Family::Binary => {
            let mut b = v.as_bytes()?.to_vec();
            match ty {
                // CHAR loses them when stored; VARCHAR compares PAD SPACE.
                ColumnType::Char(_) | ColumnType::VarChar(_) => {
                    b.truncate(trim_trailing_spaces(&b).len())
                }
                ColumnType::Binary(n) if b.len() < n as usize => b.resize(n as usize, 0),
                _ => {}
            }
            ModelScalar::Bytes(b)
        }
    })
}

fn model_like((ty, v): (ColumnType, &Value), pattern: &[u8]) -> Option<bool> {
    let family = Family::of(ty);
    if family != Family::Text && family != Family::Binary {
        return None;
    }
    let value = if let ColumnType::VarChar(_) = ty {
        // LIKE counts a VARCHAR's trailing spaces: its bytes as stored.
        v.as_bytes()?.to_vec()
    } else {
        let ModelScalar::Bytes(value) = model_scalar(ty, v)? else {
            return None;
        };
        value
    };
    Some(like_by_sets(&value, pattern, family == Family::Text))
}

/// LIKE as a set-of-positions simulation over the pattern's tokens: a
/// second, independent algorithm for the model, not for the hot path.
pub(super) fn like_by_sets(value: &[u8], pattern: &[u8], text: bool) -> bool {
    let mut bounds = vec![0usize];
    while let Some(&at) = bounds.last().filter(|&&at| at < value.len()) {
        bounds.push(at + unit_len(value, at, text));
    }
    let mut live = vec![false; bounds.len()];
    live[0] = true;
    let mut p = 0;
    while p < pattern.len() {
        let (tok, next) = token(pattern, p, text);
        let mut after = vec![false; bounds.len()];
        for k in 0..bounds.len() {
            after[k] = match tok {
                Token::Any => live[k] || (k > 0 && after[k - 1]),
                _ if k == 0 => false,
                Token::One => live[k - 1],
                Token::Literal(lit) => live[k - 1] && &value[bounds[k - 1]..bounds[k]] == lit,
            };
        }
        live = after;
        p = next;
    }
    live[bounds.len() - 1]
}
