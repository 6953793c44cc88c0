//! Pushed-down scan filters: a small postfix bytecode program that a client
//! builds and a data node runs against each stored row, so that only
//! matching rows cross the network.
//!
//! Invariants: the program bytes come from untrusted peers, so
//! [`Filter::verify`] checks everything once per scan (opcodes, operands,
//! column ids and types, constants, stack depth and every limit below) and
//! pre-decodes the program; [`Filter::matches`] then runs per row with no
//! lookups, no validation and no heap allocation, and cannot fail.
//!
//! **Encoding** (little-endian). Instructions run over a stack of SQL
//! three-valued booleans (TRUE, FALSE, UNKNOWN); each is an opcode byte and
//! its operands:
//!
//! | opcode | operands | pushes |
//! |---|---|---|
//! | `0x01` TRUE, `0x02` FALSE | — | that value |
//! | `0x10` CMP_CONST | `op:u8 col:u16 len:u16 bytes[len]` | `col <op> constant` |
//! | `0x11` CMP_COLS | `op:u8 col_a:u16 col_b:u16` | `col_a <op> col_b` |
//! | `0x12` IS_NULL, `0x13` IS_NOT_NULL | `col:u16` | TRUE or FALSE |
//! | `0x14` LIKE, `0x15` NOT_LIKE | `col:u16 len:u16 pattern[len]` | the match |
//! | `0x20` AND, `0x21` OR | — (pop two) | Kleene AND / OR |
//! | `0x22` NOT | — (pop one) | Kleene NOT |
//!
//! `op` is a [`CmpOp`]. Constants are canonical value bytes (see
//! [`crate::value`]) and never NULL. A program must leave exactly one value;
//! the row matches only if it is TRUE. The empty program matches every row.
//!
//! **Semantics.** A NULL operand makes a comparison or LIKE UNKNOWN.
//! Integers compare by value whatever their widths and signedness, FLOAT
//! and DOUBLE as IEEE-754 f64, TIMESTAMP and DATETIME as seconds, DATE as
//! days, TIME as microseconds, DECIMAL by numeric value whatever the two
//! scales, CHAR and VARCHAR byte by byte without their trailing spaces
//! (CHAR's are padding; VARCHAR's are ignored as the SQL node compares
//! two strings, for `utf8mb4_bin`'s PAD SPACE: `'a '` equals `'a'`; like
//! CHAR in index keys, a value followed by a byte below 0x20 then sorts
//! after the value alone, where PAD SPACE puts it before), BINARY and
//! VARBINARY byte by byte, every byte counting. LIKE counts trailing
//! spaces of a VARCHAR (as SQL's LIKE does). CMP_COLS pairs only columns of one
//! of those eight families. In LIKE, `%` matches any run, `_` one character (one byte on
//! binary columns) and `\` makes the next byte literal.

use crate::decimal::Decimal;
use crate::error::{ErrorCode, ShoalError};
use crate::layout::NULL_LEN;
use crate::schema::{ColumnDef, ColumnType, TableDef};
use crate::value::validate_bytes;
use std::cmp::Ordering;

mod expr;
#[cfg(test)]
mod tests;

pub use expr::FilterExpr;

/// Largest program in bytes.
pub const FILTER_BYTES_MAX: usize = 16 * 1024;
/// Most instructions in one program.
pub const FILTER_INSTRUCTIONS_MAX: usize = 1024;
/// Deepest evaluation stack; also the size of the per-row stack array.
pub const FILTER_STACK_MAX: usize = 64;
/// Longest LIKE pattern in bytes. With a row of at most
/// [`crate::schema::ROW_BYTES_MAX`] bytes it bounds one LIKE to
/// O(value × pattern) steps.
pub const LIKE_PATTERN_MAX: usize = 1024;
/// The most work a filter may take on one row, in byte comparisons (one
/// LIKE of the longest pattern over the longest column fits): a few ms.
pub const FILTER_COST_MAX: u64 = 32 << 20;

/// Opcode bytes, public so that tests elsewhere can write raw programs.
pub mod opcode {
    pub const TRUE: u8 = 0x01;
    pub const FALSE: u8 = 0x02;
    pub const CMP_CONST: u8 = 0x10;
    pub const CMP_COLS: u8 = 0x11;
    pub const IS_NULL: u8 = 0x12;
    pub const IS_NOT_NULL: u8 = 0x13;
    pub const LIKE: u8 = 0x14;
    pub const NOT_LIKE: u8 = 0x15;
    pub const AND: u8 = 0x20;
    pub const OR: u8 = 0x21;
    pub const NOT: u8 = 0x22;
}

/// A comparison; the discriminant is its byte in the program.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum CmpOp {
    Eq = 0,
    Ne = 1,
    Lt = 2,
    Le = 3,
    Gt = 4,
    Ge = 5,
}

impl CmpOp {
    pub const ALL: [CmpOp; 6] = [
        CmpOp::Eq,
        CmpOp::Ne,
        CmpOp::Lt,
        CmpOp::Le,
        CmpOp::Gt,
        CmpOp::Ge,
    ];

    pub fn from_u8(byte: u8) -> Option<CmpOp> {
        CmpOp::ALL.get(byte as usize).copied()
    }

    pub fn as_u8(self) -> u8 {
        self as u8
    }

    /// Whether the comparison holds; `None` is an unordered pair of floats
    /// (a NaN), for which IEEE-754 makes only "not equal" true.
    fn holds(self, ord: Option<Ordering>) -> bool {
        let Some(ord) = ord else {
            return self == CmpOp::Ne;
        };
        match self {
            CmpOp::Eq => ord == Ordering::Equal,
            CmpOp::Ne => ord != Ordering::Equal,
            CmpOp::Lt => ord == Ordering::Less,
            CmpOp::Le => ord != Ordering::Greater,
            CmpOp::Gt => ord == Ordering::Greater,
            CmpOp::Ge => ord != Ordering::Less,
        }
    }
}

/// An SQL truth value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tri {
    False,
    True,
    Unknown,
}

impl Tri {
    fn from_bool(b: bool) -> Tri {
        if b {
            Tri::True
        } else {
            Tri::False
        }
    }

    fn and(self, other: Tri) -> Tri {
        match (self, other) {
            (Tri::False, _) | (_, Tri::False) => Tri::False,
            (Tri::True, Tri::True) => Tri::True,
            _ => Tri::Unknown,
        }
    }

    fn or(self, other: Tri) -> Tri {
        match (self, other) {
            (Tri::True, _) | (_, Tri::True) => Tri::True,
            (Tri::False, Tri::False) => Tri::False,
            _ => Tri::Unknown,
        }
    }

    fn not(self) -> Tri {
        match self {
            Tri::False => Tri::True,
            Tri::True => Tri::False,
            Tri::Unknown => Tri::Unknown,
        }
    }
}

/// Which columns may be compared with each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    Integer,
    Float,
    Time,
    Date,
    TimeOfDay,
    Decimal,
    Text,
    Binary,
}

impl Family {
    fn of(ty: ColumnType) -> Family {
        match ty {
            ColumnType::TinyInt { .. }
            | ColumnType::SmallInt { .. }
            | ColumnType::Int { .. }
            | ColumnType::BigInt { .. } => Family::Integer,
            ColumnType::Float | ColumnType::Double => Family::Float,
            ColumnType::Timestamp | ColumnType::DateTime => Family::Time,
            ColumnType::Date => Family::Date,
            ColumnType::Time => Family::TimeOfDay,
            ColumnType::Decimal { .. } => Family::Decimal,
            ColumnType::Char(_) | ColumnType::VarChar(_) => Family::Text,
            ColumnType::Binary(_) | ColumnType::VarBinary(_) => Family::Binary,
        }
    }
}

/// How to turn a column's stored bytes into something comparable, resolved
/// at verify time so that evaluation does not look at the schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    I8,
    U8,
    I16,
    U16,
    I32,
    U32,
    I64,
    U64,
    F32,
    F64,
    /// DECIMAL with this scale.
    Dec(u8),
    /// CHAR and VARCHAR: trailing spaces do not count (CHAR's are
    /// padding; VARCHAR's are ignored, as the SQL node compares strings).
    Text,
    /// BINARY, VARBINARY: every byte counts.
    Raw,
}

impl Kind {
    fn of(ty: ColumnType) -> Kind {
        match ty {
            ColumnType::TinyInt { unsigned: false } => Kind::I8,
            ColumnType::TinyInt { unsigned: true } => Kind::U8,
            ColumnType::SmallInt { unsigned: false } => Kind::I16,
            ColumnType::SmallInt { unsigned: true } => Kind::U16,
            ColumnType::Int { unsigned: false } | ColumnType::Date => Kind::I32,
            ColumnType::Int { unsigned: true } | ColumnType::Timestamp => Kind::U32,
            ColumnType::BigInt { unsigned: false } | ColumnType::DateTime | ColumnType::Time => {
                Kind::I64
            }
            ColumnType::Decimal { scale, .. } => Kind::Dec(scale),
            ColumnType::BigInt { unsigned: true } => Kind::U64,
            ColumnType::Float => Kind::F32,
            ColumnType::Double => Kind::F64,
            ColumnType::Char(_) | ColumnType::VarChar(_) => Kind::Text,
            ColumnType::Binary(_) | ColumnType::VarBinary(_) => Kind::Raw,
        }
    }

    /// `None` for bytes of the wrong length: stored rows are canonical, but
    /// a wrong length must not panic, so it reads as UNKNOWN.
    fn read(self, b: &[u8]) -> Option<Scalar<'_>> {
        Some(match self {
            Kind::I8 => Scalar::Int(i8::from_le_bytes(b.try_into().ok()?).into()),
            Kind::U8 => Scalar::Int(u8::from_le_bytes(b.try_into().ok()?).into()),
            Kind::I16 => Scalar::Int(i16::from_le_bytes(b.try_into().ok()?).into()),
            Kind::U16 => Scalar::Int(u16::from_le_bytes(b.try_into().ok()?).into()),
            Kind::I32 => Scalar::Int(i32::from_le_bytes(b.try_into().ok()?).into()),
            Kind::U32 => Scalar::Int(u32::from_le_bytes(b.try_into().ok()?).into()),
            Kind::I64 => Scalar::Int(i64::from_le_bytes(b.try_into().ok()?).into()),
            Kind::U64 => Scalar::Int(u64::from_le_bytes(b.try_into().ok()?).into()),
            Kind::F32 => Scalar::Float(f32::from_le_bytes(b.try_into().ok()?).into()),
            Kind::F64 => Scalar::Float(f64::from_le_bytes(b.try_into().ok()?)),
            Kind::Dec(scale) => {
                Scalar::Dec(Decimal::new(i128::from_le_bytes(b.try_into().ok()?), scale))
            }
            Kind::Text => Scalar::Bytes(crate::value::trim_trailing_spaces(b)),
            Kind::Raw => Scalar::Bytes(b),
        })
    }
}

/// A comparable value. Every integer width and signedness fits in an i128,
/// so mixed comparisons are exact; an f32 widens to f64 without loss.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Scalar<'a> {
    Int(i128),
    Float(f64),
    Dec(Decimal),
    Bytes(&'a [u8]),
}

fn compare(op: CmpOp, a: Scalar<'_>, b: Scalar<'_>) -> Tri {
    let ord = match (a, b) {
        (Scalar::Int(x), Scalar::Int(y)) => Some(x.cmp(&y)),
        (Scalar::Float(x), Scalar::Float(y)) => x.partial_cmp(&y),
        (Scalar::Dec(x), Scalar::Dec(y)) => Some(x.cmp_value(y)),
        (Scalar::Bytes(x), Scalar::Bytes(y)) => Some(x.cmp(y)),
        // Verify only pairs columns of one family.
        _ => return Tri::Unknown,
    };
    Tri::from_bool(op.holds(ord))
}

/// One pre-decoded instruction; slices point into the program bytes.
#[derive(Clone, Debug)]
enum Insn<'p> {
    Push(Tri),
    CmpConst {
        col: u16,
        kind: Kind,
        op: CmpOp,
        constant: Scalar<'p>,
    },
    CmpCols {
        a: u16,
        kind_a: Kind,
        b: u16,
        kind_b: Kind,
        op: CmpOp,
    },
    IsNull {
        col: u16,
        negated: bool,
    },
    Like {
        col: u16,
        pattern: &'p [u8],
        /// `_` and `%` step over UTF-8 characters rather than bytes.
        text: bool,
        trim: bool,
        negated: bool,
    },
    And,
    Or,
    Not,
}

impl Insn<'_> {
    /// (values popped, values pushed).
    fn stack_effect(&self) -> (usize, usize) {
        match self {
            Insn::And | Insn::Or => (2, 1),
            Insn::Not => (1, 1),
            _ => (0, 1),
        }
    }
}

/// A verified program, ready to run against rows of the table it was
/// verified for.
#[derive(Clone, Debug)]
pub struct Filter<'p> {
    insns: Vec<Insn<'p>>,
    /// The most work one row can take (see [`Filter::cost_per_row`]).
    cost: u64,
}

fn refuse(index: usize, offset: usize, rule: impl std::fmt::Display) -> ShoalError {
    ShoalError::with_detail(
        ErrorCode::BadFilter,
        format!("instruction {index} (byte {offset}): {rule}"),
    )
}

/// Reads operands; every shortfall is an error, never a panic.
struct Cursor<'p> {
    bytes: &'p [u8],
    pos: usize,
}

impl<'p> Cursor<'p> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'p [u8], String> {
        let left = self.bytes.len() - self.pos;
        if n > left {
            return Err(format!(
                "truncated operand: {what} needs {n} bytes, {left} left"
            ));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self, what: &str) -> Result<u8, String> {
        Ok(self.take(1, what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16, String> {
        let b = self.take(2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn op(&mut self) -> Result<CmpOp, String> {
        let b = self.u8("comparison")?;
        CmpOp::from_u8(b).ok_or_else(|| format!("comparison byte {b} is not 0..=5"))
    }

    fn column<'t>(&mut self, table: &'t TableDef) -> Result<(u16, &'t ColumnDef), String> {
        let col = self.u16("column id")?;
        match table.columns.get(col as usize) {
            Some(def) => Ok((col, def)),
            None => Err(format!(
                "column {col} does not exist (table {:?} has {} columns)",
                table.name,
                table.columns.len()
            )),
        }
    }
}

fn decode_one<'p>(cur: &mut Cursor<'p>, table: &TableDef) -> Result<Insn<'p>, String> {
    let code = cur.u8("opcode")?;
    Ok(match code {
        opcode::TRUE => Insn::Push(Tri::True),
        opcode::FALSE => Insn::Push(Tri::False),
        opcode::CMP_CONST => {
            let op = cur.op()?;
            let (col, def) = cur.column(table)?;
            let len = cur.u16("constant length")?;
            if len == NULL_LEN {
                return Err("a NULL constant is never TRUE; use IS NULL".into());
            }
            let bytes = cur.take(len as usize, "constant")?;
            validate_bytes(def, bytes)
                .map_err(|e| format!("constant is not canonical for column {col}: {}", e.detail))?;
            let kind = Kind::of(def.ty);
            let constant = kind
                .read(bytes)
                .ok_or_else(|| format!("constant has the wrong length for column {col}"))?;
            Insn::CmpConst {
                col,
                kind,
                op,
                constant,
            }
        }
        opcode::CMP_COLS => {
            let op = cur.op()?;
            let (a, def_a) = cur.column(table)?;
            let (b, def_b) = cur.column(table)?;
            if Family::of(def_a.ty) != Family::of(def_b.ty) {
                return Err(format!(
                    "column {a} ({}) and column {b} ({}) are not comparable",
                    def_a.ty.sql_name(),
                    def_b.ty.sql_name()
                ));
            }
            Insn::CmpCols {
                a,
                kind_a: Kind::of(def_a.ty),
                b,
                kind_b: Kind::of(def_b.ty),
                op,
            }
        }
        opcode::IS_NULL | opcode::IS_NOT_NULL => Insn::IsNull {
            col: cur.column(table)?.0,
            negated: code == opcode::IS_NOT_NULL,
        },
        opcode::LIKE | opcode::NOT_LIKE => {
            let (col, def) = cur.column(table)?;
            let family = Family::of(def.ty);
            if family != Family::Text && family != Family::Binary {
                return Err(format!(
                    "LIKE needs a CHAR, VARCHAR, BINARY or VARBINARY column; column {col} is {}",
                    def.ty.sql_name()
                ));
            }
            let len = cur.u16("pattern length")? as usize;
            if len > LIKE_PATTERN_MAX {
                return Err(format!(
                    "pattern of {len} bytes exceeds LIKE_PATTERN_MAX ({LIKE_PATTERN_MAX})"
                ));
            }
            let pattern = cur.take(len, "pattern")?;
            check_pattern(pattern)?;
            Insn::Like {
                col,
                pattern,
                text: family == Family::Text,
                // CHAR's trailing spaces are padding; a VARCHAR's count
                // in LIKE (SQL's LIKE does not pad).
                trim: matches!(def.ty, ColumnType::Char(_)),
                negated: code == opcode::NOT_LIKE,
            }
        }
        opcode::AND => Insn::And,
        opcode::OR => Insn::Or,
        opcode::NOT => Insn::Not,
        other => return Err(format!("unknown opcode {other:#04x}")),
    })
}

impl<'p> Filter<'p> {
    /// Checks `program` against `table` and decodes it. Work and memory are
    /// proportional to the program, which is bounded by the limits above.
    pub fn verify(program: &'p [u8], table: &TableDef) -> Result<Filter<'p>, ShoalError> {
        if program.len() > FILTER_BYTES_MAX {
            return Err(ShoalError::with_detail(
                ErrorCode::BadFilter,
                format!(
                    "program of {} bytes exceeds FILTER_BYTES_MAX ({FILTER_BYTES_MAX})",
                    program.len()
                ),
            ));
        }
        let mut insns = Vec::new();
        let mut depth = 0usize;
        let mut cur = Cursor {
            bytes: program,
            pos: 0,
        };
        while cur.pos < program.len() {
            let (index, offset) = (insns.len(), cur.pos);
            if index == FILTER_INSTRUCTIONS_MAX {
                return Err(refuse(
                    index,
                    offset,
                    format!("more than FILTER_INSTRUCTIONS_MAX ({FILTER_INSTRUCTIONS_MAX}) instructions"),
                ));
            }
            let insn = decode_one(&mut cur, table).map_err(|rule| refuse(index, offset, rule))?;
            let (pops, pushes) = insn.stack_effect();
            if depth < pops {
                return Err(refuse(
                    index,
                    offset,
                    format!("stack underflow: needs {pops} values, the stack holds {depth}"),
                ));
            }
            depth = depth - pops + pushes;
            if depth > FILTER_STACK_MAX {
                return Err(refuse(
                    index,
                    offset,
                    format!("stack deeper than FILTER_STACK_MAX ({FILTER_STACK_MAX})"),
                ));
            }
            insns.push(insn);
        }
        if !insns.is_empty() && depth != 1 {
            return Err(refuse(
                insns.len() - 1,
                program.len(),
                format!("the program must end with exactly one value on the stack, not {depth}"),
            ));
        }
        // A LIKE may compare each pattern byte with each value byte (the
        // greedy matcher's worst case); everything else is a step.
        let cost = insns
            .iter()
            .map(|i| match i {
                Insn::Like { col, pattern, .. } => {
                    let max = table.columns[usize::from(*col)].ty.max_size() as u64;
                    (pattern.len() as u64 + 1) * (max + 1)
                }
                _ => 1,
            })
            .sum();
        if cost > FILTER_COST_MAX {
            return Err(ShoalError::with_detail(
                ErrorCode::BadFilter,
                format!(
                    "the filter may take {cost} byte comparisons a row (its LIKE patterns times the longest values of their columns); at most {FILTER_COST_MAX}"
                ),
            ));
        }
        Ok(Filter { insns, cost })
    }

    /// The most work evaluating one row can take, in byte comparisons (a
    /// scan bounds the rows a batch looks at by it, so a filter of long
    /// LIKEs over long columns cannot hold a node).
    pub fn cost_per_row(&self) -> u64 {
        self.cost
    }

    /// The empty program: callers skip evaluation entirely.
    pub fn is_match_all(&self) -> bool {
        self.insns.is_empty()
    }

    /// Whether the row is TRUE under the filter. `col(id)` gives the stored
    /// canonical bytes of a column, `None` for NULL; it is called only with
    /// column ids that verify found in the table.
    pub fn matches<'r>(&self, mut col: impl FnMut(u16) -> Option<&'r [u8]>) -> bool {
        if self.insns.is_empty() {
            return true;
        }
        let mut stack = [Tri::Unknown; FILTER_STACK_MAX];
        let mut depth = 0usize;
        // Verify proved that no instruction underflows or overflows `stack`
        // and that exactly one value is left, so indexing cannot fail.
        for insn in &self.insns {
            let value = match *insn {
                Insn::And | Insn::Or => {
                    depth -= 1;
                    let (lhs, rhs) = (stack[depth - 1], stack[depth]);
                    stack[depth - 1] = if matches!(insn, Insn::And) {
                        lhs.and(rhs)
                    } else {
                        lhs.or(rhs)
                    };
                    continue;
                }
                Insn::Not => {
                    stack[depth - 1] = stack[depth - 1].not();
                    continue;
                }
                Insn::Push(t) => t,
                Insn::CmpConst {
                    col: c,
                    kind,
                    op,
                    constant,
                } => match col(c).and_then(|b| kind.read(b)) {
                    Some(v) => compare(op, v, constant),
                    None => Tri::Unknown,
                },
                Insn::CmpCols {
                    a,
                    kind_a,
                    b,
                    kind_b,
                    op,
                } => {
                    let va = col(a).and_then(|x| kind_a.read(x));
                    let vb = col(b).and_then(|x| kind_b.read(x));
                    match (va, vb) {
                        (Some(x), Some(y)) => compare(op, x, y),
                        _ => Tri::Unknown,
                    }
                }
                Insn::IsNull { col: c, negated } => Tri::from_bool(col(c).is_none() != negated),
                Insn::Like {
                    col: c,
                    pattern,
                    text,
                    trim,
                    negated,
                } => match col(c) {
                    None => Tri::Unknown,
                    Some(v) => {
                        let v = if trim {
                            crate::value::trim_trailing_spaces(v)
                        } else {
                            v
                        };
                        Tri::from_bool(like_match(v, pattern, text) != negated)
                    }
                },
            };
            stack[depth] = value;
            depth += 1;
        }
        depth == 1 && stack[0] == Tri::True
    }
}

// ---- LIKE ----
//
// A pattern and a value are both read in units: one byte for binary
// columns; for text columns one UTF-8 character, whose length its lead
// byte gives. A byte that is not a lead byte, or a lead byte not followed
// by its continuation bytes, is a unit of its own, so a broken sequence can
// never swallow a following `%`, `_` or `\`. Because every step (literal,
// `_` or `%`) moves the value by exactly one of its units, the positions
// visited form one chain, which is what makes the greedy matcher with a
// single backtrack point correct.

fn unit_len(s: &[u8], i: usize, text: bool) -> usize {
    if !text {
        return 1;
    }
    let want = match s[i] {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return 1,
    };
    match s.get(i + 1..i + want) {
        Some(rest) if rest.iter().all(|&b| b & 0xC0 == 0x80) => want,
        _ => 1,
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Token<'a> {
    /// `%`
    Any,
    /// `_`
    One,
    Literal(&'a [u8]),
}

/// The token at `pattern[p]` (p < len) and where the next one starts.
fn token(pattern: &[u8], p: usize, text: bool) -> (Token<'_>, usize) {
    match pattern[p] {
        b'%' => (Token::Any, p + 1),
        b'_' => (Token::One, p + 1),
        // Verify refuses a lone trailing `\`; were one to get here, it
        // stands for itself.
        b'\\' if p + 1 < pattern.len() => {
            let n = unit_len(pattern, p + 1, text);
            (Token::Literal(&pattern[p + 1..p + 1 + n]), p + 1 + n)
        }
        _ => {
            let n = unit_len(pattern, p, text);
            (Token::Literal(&pattern[p..p + n]), p + n)
        }
    }
}

fn check_pattern(pattern: &[u8]) -> Result<(), String> {
    let mut i = 0;
    while i < pattern.len() {
        if pattern[i] == b'\\' {
            if i + 1 == pattern.len() {
                return Err("LIKE pattern ends in a lone `\\`".into());
            }
            i += 1;
        }
        i += 1;
    }
    Ok(())
}

/// Greedy matching: on a mismatch, the latest `%` takes one more unit of
/// the value and the pattern resumes after it. Each retry moves that `%`'s
/// end forward, so the work is O(value × pattern) at worst. Earlier `%`s
/// never need to be revisited: whatever they could absorb, the latest one
/// can absorb too.
fn like_match(value: &[u8], pattern: &[u8], text: bool) -> bool {
    let (mut v, mut p) = (0usize, 0usize);
    // (pattern position after the latest `%`, value position it stops at)
    let mut retry: Option<(usize, usize)> = None;
    loop {
        if p < pattern.len() {
            let (tok, next) = token(pattern, p, text);
            let step = match tok {
                Token::Any => {
                    retry = Some((next, v));
                    p = next;
                    continue;
                }
                _ if v == value.len() => None,
                Token::One => Some(unit_len(value, v, text)),
                Token::Literal(lit) => {
                    let n = unit_len(value, v, text);
                    (&value[v..v + n] == lit).then_some(n)
                }
            };
            if let Some(n) = step {
                v += n;
                p = next;
                continue;
            }
        } else if v == value.len() {
            return true;
        }
        match retry {
            Some((rp, rv)) if rv < value.len() => {
                let nv = rv + unit_len(value, rv, text);
                retry = Some((rp, nv));
                p = rp;
                v = nv;
            }
            _ => return false,
        }
    }
}
