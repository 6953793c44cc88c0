//! Scalar expressions: sqlparser's [`Expr`] compiled once per statement
//! into a [`Scalar`] whose columns are resolved to the table's column ids
//! and whose session values (`@@version`, `DATABASE()`, ...) are folded to
//! constants, then evaluated per row with MySQL's rules: NULL propagates,
//! comparisons pick integer, floating-point, string or time comparison by
//! their operands (strings compare by bytes, trailing spaces ignored, as
//! `utf8mb4_bin` does), booleans are `1` / `0`.
//!
//! Invariants: compiling is where names fail (1054 unknown column, 1193
//! unknown variable, 1235 unsupported), so a statement fails the same on
//! an empty table as on a full one; evaluating fails only on values
//! (1690 out of range).

use super::Env;
use crate::outcome::SqlError;
use crate::sqltypes::{format_datetime, parse_datetime, parse_number, value_text};
use shoal_types::{ColumnType, TableDef, Value};
use sqlparser::ast::{
    BinaryOperator, CastKind, DataType, Expr, Function, FunctionArg, FunctionArgExpr,
    FunctionArguments, UnaryOperator, Value as SqlValue,
};
use std::cmp::Ordering;

/// Deepest expression compiled (each level is a recursion).
pub const EXPR_DEPTH_MAX: usize = 200;

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cmp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    /// `<=>`: equality where NULL equals NULL, never NULL itself.
    NullSafeEq,
}

impl Cmp {
    /// The same comparison with its operands swapped.
    pub fn flipped(self) -> Cmp {
        match self {
            Cmp::Lt => Cmp::Gt,
            Cmp::Le => Cmp::Ge,
            Cmp::Gt => Cmp::Lt,
            Cmp::Ge => Cmp::Le,
            other => other,
        }
    }

    fn holds(self, ord: Ordering) -> bool {
        match self {
            Cmp::Eq | Cmp::NullSafeEq => ord == Ordering::Equal,
            Cmp::Ne => ord != Ordering::Equal,
            Cmp::Lt => ord == Ordering::Less,
            Cmp::Le => ord != Ordering::Greater,
            Cmp::Gt => ord == Ordering::Greater,
            Cmp::Ge => ord != Ordering::Less,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arith {
    Add,
    Sub,
    Mul,
    Div,
    IntDiv,
    Mod,
}

/// Functions evaluated per row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Func {
    Concat,
    Length,
    CharLength,
    Upper,
    Lower,
    Abs,
    Coalesce,
    IfNull,
    If,
    NullIf,
    Floor,
    Ceil,
    Round,
    Greatest,
    Least,
}

/// A compiled expression.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar {
    Const(Value),
    /// A column of the statement's table, by id.
    Column(u16),
    Neg(Box<Scalar>),
    Not(Box<Scalar>),
    Arith(Arith, Box<Scalar>, Box<Scalar>),
    Cmp(Cmp, Box<Scalar>, Box<Scalar>),
    And(Vec<Scalar>),
    Or(Vec<Scalar>),
    Xor(Box<Scalar>, Box<Scalar>),
    IsNull(Box<Scalar>, bool),
    /// `IS [NOT] TRUE` / `IS [NOT] FALSE`: (expr, TRUE wanted, negated).
    IsBool(Box<Scalar>, bool, bool),
    Like {
        expr: Box<Scalar>,
        pattern: Box<Scalar>,
        escape: Option<char>,
        negated: bool,
    },
    InList {
        expr: Box<Scalar>,
        list: Vec<Scalar>,
        negated: bool,
    },
    Between {
        expr: Box<Scalar>,
        low: Box<Scalar>,
        high: Box<Scalar>,
        negated: bool,
    },
    Case {
        operand: Option<Box<Scalar>>,
        whens: Vec<(Scalar, Scalar)>,
        otherwise: Option<Box<Scalar>>,
    },
    Func(Func, Vec<Scalar>),
    /// `CAST(x AS SIGNED | UNSIGNED | CHAR | BINARY | DOUBLE | DATETIME)`.
    Cast(Box<Scalar>, CastTo),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CastTo {
    Signed,
    Unsigned,
    Char,
    Binary,
    Double,
    DateTime,
}

/// The columns an expression may name: one table's.
pub struct Scope<'a> {
    pub def: &'a TableDef,
    /// Names the table goes by (its name, its alias, `db.table`).
    pub names: Vec<String>,
    /// Where a clause that may call aggregate functions (a SELECT's list,
    /// HAVING, ORDER BY) registers them ([`super::aggregate`]); `None`
    /// elsewhere, where a call is 1111.
    pub aggregates: Option<&'a super::aggregate::Aggregates>,
    /// Select-list names an unqualified column name stands for before
    /// the table's columns (HAVING's aliases).
    pub aliases: &'a [(String, Scalar)],
}

impl Scope<'_> {
    /// The column id of `name` (ASCII case-insensitive, as MySQL's column
    /// names are).
    pub fn column(&self, name: &str) -> Option<u16> {
        let cols = &self.def.columns;
        cols.iter()
            .position(|c| c.name == name)
            .or_else(|| cols.iter().position(|c| c.name.eq_ignore_ascii_case(name)))
            .map(|i| i as u16)
    }
}

/// Compiles expressions of one clause of a statement.
pub struct Compiler<'a> {
    pub env: &'a Env<'a>,
    pub scope: Option<&'a Scope<'a>>,
    /// The clause, for messages ("field list", "where clause", ...).
    pub clause: &'a str,
}

pub fn unknown_column(name: &str, clause: &str) -> SqlError {
    SqlError::new(
        1054,
        "42S22",
        format!("Unknown column '{name}' in '{clause}'"),
    )
}

fn out_of_range(what: &str) -> SqlError {
    SqlError::new(
        1690,
        "22003",
        format!("BIGINT value is out of range in '{what}'"),
    )
}

fn sql_literal(v: &SqlValue) -> Result<Value, SqlError> {
    Ok(match v {
        SqlValue::Number(n, _) => {
            if let Ok(i) = n.parse::<i64>() {
                Value::Int(i)
            } else if let Ok(u) = n.parse::<u64>() {
                Value::UInt(u)
            } else {
                Value::Double(
                    n.parse::<f64>()
                        .map_err(|_| SqlError::syntax(format!("bad number {n}")))?,
                )
            }
        }
        SqlValue::SingleQuotedString(s) | SqlValue::DoubleQuotedString(s) => Value::Str(s.clone()),
        SqlValue::NationalStringLiteral(s) => Value::Str(s.clone()),
        SqlValue::HexStringLiteral(h) => {
            // Checked first: slicing two bytes at a time must not cut a
            // multi-byte character.
            if !h.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(SqlError::syntax(format!("bad hexadecimal literal x'{h}'")));
            }
            let h = if h.len() % 2 == 1 {
                format!("0{h}")
            } else {
                h.clone()
            };
            let bytes = (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| SqlError::syntax(format!("bad hexadecimal literal x'{h}'")))?;
            Value::Bytes(bytes)
        }
        SqlValue::SingleQuotedByteStringLiteral(bits) => {
            // b'0101': a bit string, as bytes (big-endian).
            let n = u64::from_str_radix(bits, 2)
                .map_err(|_| SqlError::syntax(format!("bad bit literal b'{bits}'")))?;
            let bytes = n.to_be_bytes();
            let first = bytes.iter().position(|&b| b != 0).unwrap_or(7);
            Value::Bytes(bytes[first..].to_vec())
        }
        SqlValue::Boolean(b) => Value::Int(i64::from(*b)),
        SqlValue::Null => Value::Null,
        SqlValue::Placeholder(p) => {
            return Err(SqlError::not_supported(format!(
                "parameter {p} outside a prepared statement"
            )))
        }
        other => return Err(SqlError::not_supported(format!("literal {other}"))),
    })
}

/// The name of a function call, upper case.
fn function_name(f: &Function) -> String {
    f.name.to_string().to_ascii_uppercase()
}

fn function_args(f: &Function) -> Result<Vec<&Expr>, SqlError> {
    match &f.args {
        FunctionArguments::None => Ok(Vec::new()),
        FunctionArguments::List(list) => {
            if list.duplicate_treatment.is_some() || !list.clauses.is_empty() {
                return Err(SqlError::not_supported(format!("{f}")));
            }
            list.args
                .iter()
                .map(|a| match a {
                    FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => Ok(e),
                    _ => Err(SqlError::not_supported(format!("{f}"))),
                })
                .collect()
        }
        FunctionArguments::Subquery(_) => Err(SqlError::not_supported("subqueries")),
    }
}

/// Aggregate function names (those Shoal does not have answer 1235).
pub fn is_aggregate(name: &str) -> bool {
    matches!(
        name,
        "COUNT"
            | "SUM"
            | "MIN"
            | "MAX"
            | "AVG"
            | "GROUP_CONCAT"
            | "BIT_AND"
            | "BIT_OR"
            | "STD"
            | "STDDEV"
            | "VARIANCE"
    )
}

impl Compiler<'_> {
    pub fn compile(&self, e: &Expr) -> Result<Scalar, SqlError> {
        self.compile_at(e, 0)
    }

    fn compile_at(&self, e: &Expr, depth: usize) -> Result<Scalar, SqlError> {
        if depth > EXPR_DEPTH_MAX {
            return Err(SqlError::new(
                1436,
                "HY000",
                format!("Expression nested deeper than {EXPR_DEPTH_MAX} levels"),
            ));
        }
        let c = |e: &Expr| self.compile_at(e, depth + 1);
        let b = |e: &Expr| c(e).map(Box::new);
        Ok(match e {
            // A prepare describes a statement whose parameters it does
            // not know yet: they count as NULL.
            Expr::Value(v)
                if self.env.describe_only && matches!(v.value, SqlValue::Placeholder(_)) =>
            {
                Scalar::Const(Value::Null)
            }
            Expr::Value(v) => Scalar::Const(sql_literal(&v.value)?),
            Expr::Nested(inner) => c(inner)?,
            Expr::Identifier(ident) => {
                let name = ident.value.as_str();
                if let Some(var) = name.strip_prefix("@@") {
                    Scalar::Const(self.env.system_variable(var)?)
                } else if let Some(var) = name.strip_prefix('@') {
                    Scalar::Const(self.env.user_variable(var))
                } else if ident.quote_style.is_none() && name.eq_ignore_ascii_case("CURRENT_USER") {
                    Scalar::Const(Value::Str(self.env.user_at_host()))
                } else {
                    self.column(None, name)?
                }
            }
            Expr::CompoundIdentifier(parts) => {
                let first = parts.first().map_or("", |p| p.value.as_str());
                if let Some(scope_word) = first.strip_prefix("@@") {
                    // @@session.x, @@global.x, @@local.x
                    let var = parts.get(1).map_or("", |p| p.value.as_str());
                    if parts.len() != 2
                        || !["session", "global", "local"]
                            .iter()
                            .any(|s| s.eq_ignore_ascii_case(scope_word))
                    {
                        return Err(SqlError::syntax(format!("bad variable {e}")));
                    }
                    Scalar::Const(self.env.system_variable(var)?)
                } else {
                    let (qualifier, name) = match parts.as_slice() {
                        [t, col] => (Some(t.value.clone()), col.value.as_str()),
                        [d, t, col] => {
                            (Some(format!("{}.{}", d.value, t.value)), col.value.as_str())
                        }
                        _ => return Err(SqlError::syntax(format!("bad column name {e}"))),
                    };
                    self.column(qualifier.as_deref(), name)?
                }
            }
            Expr::UnaryOp { op, expr } => match op {
                UnaryOperator::Minus => match c(expr)? {
                    Scalar::Const(Value::Int(i)) if i != i64::MIN => Scalar::Const(Value::Int(-i)),
                    Scalar::Const(Value::UInt(u)) if u == 1 << 63 => {
                        Scalar::Const(Value::Int(i64::MIN))
                    }
                    Scalar::Const(Value::Double(f)) => Scalar::Const(Value::Double(-f)),
                    other => Scalar::Neg(Box::new(other)),
                },
                UnaryOperator::Plus => c(expr)?,
                UnaryOperator::Not | UnaryOperator::BangNot => Scalar::Not(b(expr)?),
                other => return Err(SqlError::not_supported(format!("operator {other}"))),
            },
            Expr::BinaryOp { left, op, right } => {
                let (l, r) = (b(left)?, b(right)?);
                match op {
                    BinaryOperator::Plus => Scalar::Arith(Arith::Add, l, r),
                    BinaryOperator::Minus => Scalar::Arith(Arith::Sub, l, r),
                    BinaryOperator::Multiply => Scalar::Arith(Arith::Mul, l, r),
                    BinaryOperator::Divide => Scalar::Arith(Arith::Div, l, r),
                    BinaryOperator::MyIntegerDivide | BinaryOperator::DuckIntegerDivide => {
                        Scalar::Arith(Arith::IntDiv, l, r)
                    }
                    BinaryOperator::Modulo => Scalar::Arith(Arith::Mod, l, r),
                    BinaryOperator::Eq => Scalar::Cmp(Cmp::Eq, l, r),
                    BinaryOperator::NotEq => Scalar::Cmp(Cmp::Ne, l, r),
                    BinaryOperator::Lt => Scalar::Cmp(Cmp::Lt, l, r),
                    BinaryOperator::LtEq => Scalar::Cmp(Cmp::Le, l, r),
                    BinaryOperator::Gt => Scalar::Cmp(Cmp::Gt, l, r),
                    BinaryOperator::GtEq => Scalar::Cmp(Cmp::Ge, l, r),
                    BinaryOperator::Spaceship => Scalar::Cmp(Cmp::NullSafeEq, l, r),
                    BinaryOperator::And => and(*l, *r),
                    // `||` is OR in MySQL's default sql_mode.
                    BinaryOperator::Or | BinaryOperator::StringConcat => or(*l, *r),
                    BinaryOperator::Xor => Scalar::Xor(l, r),
                    other => return Err(SqlError::not_supported(format!("operator {other}"))),
                }
            }
            Expr::IsNull(inner) => Scalar::IsNull(b(inner)?, false),
            Expr::IsNotNull(inner) => Scalar::IsNull(b(inner)?, true),
            Expr::IsTrue(inner) => Scalar::IsBool(b(inner)?, true, false),
            Expr::IsNotTrue(inner) => Scalar::IsBool(b(inner)?, true, true),
            Expr::IsFalse(inner) => Scalar::IsBool(b(inner)?, false, false),
            Expr::IsNotFalse(inner) => Scalar::IsBool(b(inner)?, false, true),
            Expr::IsUnknown(inner) => Scalar::IsNull(b(inner)?, false),
            Expr::IsNotUnknown(inner) => Scalar::IsNull(b(inner)?, true),
            Expr::IsDistinctFrom(l, r) => {
                Scalar::Not(Box::new(Scalar::Cmp(Cmp::NullSafeEq, b(l)?, b(r)?)))
            }
            Expr::IsNotDistinctFrom(l, r) => Scalar::Cmp(Cmp::NullSafeEq, b(l)?, b(r)?),
            Expr::InList {
                expr,
                list,
                negated,
            } => Scalar::InList {
                expr: b(expr)?,
                list: list.iter().map(c).collect::<Result<_, _>>()?,
                negated: *negated,
            },
            Expr::Between {
                expr,
                negated,
                low,
                high,
            } => Scalar::Between {
                expr: b(expr)?,
                low: b(low)?,
                high: b(high)?,
                negated: *negated,
            },
            Expr::Like {
                negated,
                any,
                expr,
                pattern,
                escape_char,
            } => {
                if *any {
                    return Err(SqlError::not_supported("LIKE ANY"));
                }
                let escape = match escape_char.as_deref() {
                    None => Some('\\'),
                    Some(Expr::Value(v)) => match &v.value {
                        SqlValue::SingleQuotedString(s) | SqlValue::DoubleQuotedString(s) => {
                            let mut chars = s.chars();
                            match (chars.next(), chars.next()) {
                                (None, _) => None,
                                (Some(ch), None) => Some(ch),
                                _ => {
                                    return Err(SqlError::new(
                                        1210,
                                        "HY000",
                                        "Incorrect arguments to ESCAPE",
                                    ))
                                }
                            }
                        }
                        _ => {
                            return Err(SqlError::new(
                                1210,
                                "HY000",
                                "Incorrect arguments to ESCAPE",
                            ))
                        }
                    },
                    Some(_) => {
                        return Err(SqlError::new(
                            1210,
                            "HY000",
                            "Incorrect arguments to ESCAPE",
                        ))
                    }
                };
                Scalar::Like {
                    expr: b(expr)?,
                    pattern: b(pattern)?,
                    escape,
                    negated: *negated,
                }
            }
            Expr::Case {
                operand,
                conditions,
                else_result,
                ..
            } => Scalar::Case {
                operand: operand.as_deref().map(b).transpose()?,
                whens: conditions
                    .iter()
                    .map(|w| Ok((c(&w.condition)?, c(&w.result)?)))
                    .collect::<Result<_, SqlError>>()?,
                otherwise: else_result.as_deref().map(b).transpose()?,
            },
            Expr::Cast {
                kind: CastKind::Cast | CastKind::TryCast | CastKind::SafeCast,
                expr,
                data_type,
                ..
            } => Scalar::Cast(b(expr)?, cast_target(data_type)?),
            Expr::Convert {
                expr,
                data_type: Some(data_type),
                charset: None,
                ..
            } => Scalar::Cast(b(expr)?, cast_target(data_type)?),
            Expr::TypedString(ts) => {
                let text = match &ts.value.value {
                    SqlValue::SingleQuotedString(s) | SqlValue::DoubleQuotedString(s) => s.clone(),
                    other => return Err(SqlError::syntax(format!("bad literal {other}"))),
                };
                match ts.data_type {
                    DataType::Date | DataType::Datetime(_) | DataType::Timestamp(_, _) => {
                        let secs = parse_datetime(&text).ok_or_else(|| {
                            SqlError::new(
                                1525,
                                "HY000",
                                format!("Incorrect DATETIME value: '{text}'"),
                            )
                        })?;
                        Scalar::Const(Value::DateTime(secs))
                    }
                    _ => return Err(SqlError::not_supported(format!("{e}"))),
                }
            }
            Expr::Function(f) => self.function(f, depth)?,
            Expr::Subquery(_) | Expr::InSubquery { .. } | Expr::Exists { .. } => {
                return Err(SqlError::not_supported("subqueries"))
            }
            other => return Err(SqlError::not_supported(format!("expression {other}"))),
        })
    }

    fn column(&self, qualifier: Option<&str>, name: &str) -> Result<Scalar, SqlError> {
        let shown = match qualifier {
            Some(q) => format!("{q}.{name}"),
            None => name.to_string(),
        };
        let Some(scope) = self.scope else {
            return Err(unknown_column(&shown, self.clause));
        };
        if let Some(q) = qualifier {
            if !scope.names.iter().any(|n| n == q) {
                return Err(unknown_column(&shown, self.clause));
            }
        } else if let Some((_, s)) = scope
            .aliases
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
        {
            return Ok(s.clone());
        }
        scope
            .column(name)
            .map(Scalar::Column)
            .ok_or_else(|| unknown_column(&shown, self.clause))
    }

    fn function(&self, f: &Function, depth: usize) -> Result<Scalar, SqlError> {
        let name = function_name(f);
        if is_aggregate(&name) {
            return super::aggregate::compile_call(self, f, &name);
        }
        if f.over.is_some() || f.filter.is_some() || !f.within_group.is_empty() {
            return Err(SqlError::not_supported(format!("{f}")));
        }
        let args = function_args(f)?;
        let argc = |n: std::ops::RangeInclusive<usize>| {
            if n.contains(&args.len()) {
                Ok(())
            } else {
                Err(SqlError::new(
                    1582,
                    "42000",
                    format!("Incorrect parameter count in the call to native function '{name}'"),
                ))
            }
        };
        let konst = |v: Value| Ok(Scalar::Const(v));
        let env = self.env;
        match name.as_str() {
            "DATABASE" | "SCHEMA" => {
                argc(0..=0)?;
                konst(
                    env.database
                        .map_or(Value::Null, |d| Value::Str(d.to_string())),
                )
            }
            "USER" | "CURRENT_USER" | "SESSION_USER" | "SYSTEM_USER" => {
                argc(0..=0)?;
                konst(Value::Str(env.user_at_host()))
            }
            "CONNECTION_ID" => {
                argc(0..=0)?;
                konst(Value::UInt(u64::from(env.connection_id)))
            }
            "VERSION" => {
                argc(0..=0)?;
                env.system_variable("version").map(Scalar::Const)
            }
            "LAST_INSERT_ID" => {
                argc(0..=0)?;
                konst(Value::UInt(env.last_insert_id))
            }
            "NOW" | "CURRENT_TIMESTAMP" | "LOCALTIME" | "LOCALTIMESTAMP" | "SYSDATE" => {
                argc(0..=1)?;
                konst(Value::DateTime(env.now_secs))
            }
            "UNIX_TIMESTAMP" if args.is_empty() => konst(Value::Int(env.now_secs)),
            _ => {
                let compiled: Vec<Scalar> = args
                    .iter()
                    .map(|a| self.compile_at(a, depth + 1))
                    .collect::<Result<_, _>>()?;
                let func = match name.as_str() {
                    "CONCAT" => {
                        argc(1..=usize::MAX)?;
                        Func::Concat
                    }
                    "LENGTH" | "OCTET_LENGTH" => {
                        argc(1..=1)?;
                        Func::Length
                    }
                    "CHAR_LENGTH" | "CHARACTER_LENGTH" => {
                        argc(1..=1)?;
                        Func::CharLength
                    }
                    "UPPER" | "UCASE" => {
                        argc(1..=1)?;
                        Func::Upper
                    }
                    "LOWER" | "LCASE" => {
                        argc(1..=1)?;
                        Func::Lower
                    }
                    "ABS" => {
                        argc(1..=1)?;
                        Func::Abs
                    }
                    "COALESCE" => {
                        argc(1..=usize::MAX)?;
                        Func::Coalesce
                    }
                    "IFNULL" => {
                        argc(2..=2)?;
                        Func::IfNull
                    }
                    "IF" => {
                        argc(3..=3)?;
                        Func::If
                    }
                    "NULLIF" => {
                        argc(2..=2)?;
                        Func::NullIf
                    }
                    "FLOOR" => {
                        argc(1..=1)?;
                        Func::Floor
                    }
                    "CEIL" | "CEILING" => {
                        argc(1..=1)?;
                        Func::Ceil
                    }
                    "ROUND" => {
                        argc(1..=1)?;
                        Func::Round
                    }
                    "MOD" => {
                        argc(2..=2)?;
                        let mut it = compiled.into_iter();
                        let (a, b) = (it.next().expect("2"), it.next().expect("2"));
                        return Ok(Scalar::Arith(Arith::Mod, Box::new(a), Box::new(b)));
                    }
                    "GREATEST" => {
                        argc(2..=usize::MAX)?;
                        Func::Greatest
                    }
                    "LEAST" => {
                        argc(2..=usize::MAX)?;
                        Func::Least
                    }
                    _ => {
                        return Err(SqlError::new(
                            1305,
                            "42000",
                            format!("FUNCTION {name} does not exist"),
                        ))
                    }
                };
                Ok(Scalar::Func(func, compiled))
            }
        }
    }
}

fn cast_target(dt: &DataType) -> Result<CastTo, SqlError> {
    Ok(match dt {
        DataType::Signed | DataType::SignedInteger => CastTo::Signed,
        DataType::Unsigned | DataType::UnsignedInteger => CastTo::Unsigned,
        DataType::Char(_) | DataType::Character(_) | DataType::Varchar(_) | DataType::Text => {
            CastTo::Char
        }
        DataType::Binary(_) | DataType::Varbinary(_) => CastTo::Binary,
        DataType::Double(_) | DataType::DoublePrecision | DataType::Real | DataType::Float(_) => {
            CastTo::Double
        }
        DataType::Datetime(_) | DataType::Timestamp(_, _) | DataType::Date => CastTo::DateTime,
        other => return Err(SqlError::not_supported(format!("CAST to {other}"))),
    })
}

/// `a AND b`, flattening nested ANDs.
pub fn and(a: Scalar, b: Scalar) -> Scalar {
    let mut items = Vec::new();
    for s in [a, b] {
        match s {
            Scalar::And(inner) => items.extend(inner),
            other => items.push(other),
        }
    }
    Scalar::And(items)
}

fn or(a: Scalar, b: Scalar) -> Scalar {
    let mut items = Vec::new();
    for s in [a, b] {
        match s {
            Scalar::Or(inner) => items.extend(inner),
            other => items.push(other),
        }
    }
    Scalar::Or(items)
}

// ---------------------------------------------------------------------------
// Evaluation

fn boolean(b: Option<bool>) -> Value {
    b.map_or(Value::Null, |b| Value::Int(i64::from(b)))
}

/// The longest string an expression may build (MySQL bounds them by
/// `max_allowed_packet`, the SQL node's default of 64 MiB).
pub const STRING_BYTES_MAX: usize = 64 << 20;

/// A number as arithmetic sees it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Num {
    Int(i128),
    Float(f64),
}

/// The numeric prefix of a string, as MySQL reads "12abc" (12) or "x" (0).
fn lenient_number(s: &str) -> Num {
    if let Some(v) = parse_number(s) {
        return match v {
            Value::Int(i) => Num::Int(i.into()),
            Value::UInt(u) => Num::Int(u.into()),
            Value::Double(f) => Num::Float(f),
            _ => Num::Int(0),
        };
    }
    let t = s.trim_start();
    let mut end = 0;
    let bytes = t.as_bytes();
    let mut seen_digit = false;
    let mut seen_dot = false;
    while end < bytes.len() {
        let b = bytes[end];
        if b.is_ascii_digit() {
            seen_digit = true;
        } else if b == b'.' && !seen_dot {
            seen_dot = true;
        } else if !((b == b'-' || b == b'+') && end == 0) {
            break;
        }
        end += 1;
    }
    if !seen_digit {
        return Num::Int(0);
    }
    Num::Float(t[..end].parse::<f64>().unwrap_or(0.0))
}

pub(crate) fn number(v: &Value) -> Option<Num> {
    Some(match v {
        Value::Null => return None,
        Value::Int(i) => Num::Int((*i).into()),
        Value::UInt(u) => Num::Int((*u).into()),
        Value::Float(f) => Num::Float(f64::from(*f)),
        Value::Double(f) => Num::Float(*f),
        Value::Str(s) => lenient_number(s),
        Value::Bytes(b) => lenient_number(&String::from_utf8_lossy(b)),
        // A time in a numeric context: YYYYMMDDHHMMSS.
        Value::Timestamp(_) | Value::DateTime(_) => {
            let text: String = String::from_utf8_lossy(&value_text(v))
                .chars()
                .filter(char::is_ascii_digit)
                .collect();
            Num::Int(text.parse().unwrap_or(0))
        }
    })
}

pub(crate) fn float(n: Num) -> f64 {
    match n {
        Num::Int(i) => i as f64,
        Num::Float(f) => f,
    }
}

fn int_value(i: i128, what: &str) -> Result<Value, SqlError> {
    if let Ok(v) = i64::try_from(i) {
        Ok(Value::Int(v))
    } else if let Ok(v) = u64::try_from(i) {
        Ok(Value::UInt(v))
    } else {
        Err(out_of_range(what))
    }
}

/// Whether a value counts as true (`None`: NULL).
pub fn truth(v: &Value) -> Option<bool> {
    number(v).map(|n| float(n) != 0.0)
}

fn is_temporal(v: &Value) -> bool {
    matches!(v, Value::Timestamp(_) | Value::DateTime(_))
}

fn seconds(v: &Value) -> Option<i64> {
    match v {
        Value::Timestamp(s) => Some(i64::from(*s)),
        Value::DateTime(s) => Some(*s),
        _ => None,
    }
}

/// Strips trailing spaces (utf8mb4_bin is a PAD SPACE collation).
fn pad_trim(b: &[u8]) -> &[u8] {
    let end = b.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1);
    &b[..end]
}

/// Compares two non-NULL values as MySQL would (`None`: a NULL, or two
/// floats that do not compare).
pub fn compare(a: &Value, b: &Value) -> Option<Ordering> {
    if a.is_null() || b.is_null() {
        return None;
    }
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => Some(pad_trim(x.as_bytes()).cmp(pad_trim(y.as_bytes()))),
        (Value::Bytes(_) | Value::Str(_), Value::Bytes(_) | Value::Str(_)) => {
            Some(a.as_bytes()?.cmp(b.as_bytes()?))
        }
        _ if is_temporal(a) && is_temporal(b) => Some(seconds(a)?.cmp(&seconds(b)?)),
        _ if is_temporal(a) || is_temporal(b) => {
            let (t, other, flip) = if is_temporal(a) {
                (a, b, false)
            } else {
                (b, a, true)
            };
            let t = seconds(t)?;
            let ord = match other {
                Value::Str(s) => match parse_datetime(s) {
                    Some(o) => t.cmp(&o),
                    None => format_datetime(t).as_bytes().cmp(s.as_bytes()),
                },
                _ => {
                    let x = float(number(&Value::DateTime(t))?);
                    x.partial_cmp(&float(number(other)?))?
                }
            };
            Some(if flip { ord.reverse() } else { ord })
        }
        _ => match (number(a)?, number(b)?) {
            (Num::Int(x), Num::Int(y)) => Some(x.cmp(&y)),
            (x, y) => float(x).partial_cmp(&float(y)),
        },
    }
}

/// The units LIKE matches on: characters of text, bytes of binary.
fn like_units(v: &Value) -> Vec<u32> {
    match v {
        Value::Bytes(b) => b.iter().map(|&x| u32::from(x)).collect(),
        other => String::from_utf8_lossy(&value_text(other))
            .chars()
            .map(u32::from)
            .collect(),
    }
}

#[derive(Clone, Copy, PartialEq)]
enum LikeToken {
    Any,
    One,
    Literal(u32),
}

/// `value LIKE pattern`: `%` any run, `_` one unit, `escape` quotes the
/// next unit. Iterative with one backtrack point (linear-ish, no
/// recursion).
pub fn like(value: &Value, pattern: &Value, escape: Option<char>) -> bool {
    let v = like_units(value);
    let p = like_units(pattern);
    let esc = escape.map(u32::from);
    let mut tokens = Vec::with_capacity(p.len());
    let mut i = 0;
    while i < p.len() {
        let t = p[i];
        if Some(t) == esc && i + 1 < p.len() {
            tokens.push(LikeToken::Literal(p[i + 1]));
            i += 2;
            continue;
        }
        tokens.push(match t {
            0x25 => LikeToken::Any,
            0x5F => LikeToken::One,
            other => LikeToken::Literal(other),
        });
        i += 1;
    }
    let (mut vi, mut ti) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while vi < v.len() {
        match tokens.get(ti) {
            Some(LikeToken::Any) => {
                backtrack = Some((ti, vi));
                ti += 1;
            }
            Some(LikeToken::One) => {
                vi += 1;
                ti += 1;
            }
            Some(LikeToken::Literal(c)) if *c == v[vi] => {
                vi += 1;
                ti += 1;
            }
            _ => match backtrack {
                Some((bt, bv)) => {
                    backtrack = Some((bt, bv + 1));
                    ti = bt + 1;
                    vi = bv + 1;
                }
                None => return false,
            },
        }
    }
    tokens[ti..].iter().all(|t| *t == LikeToken::Any)
}

impl Scalar {
    /// The expression's value for `row` (the table's values by column id;
    /// empty without a table).
    pub fn eval(&self, row: &[Value]) -> Result<Value, SqlError> {
        Ok(match self {
            Scalar::Const(v) => v.clone(),
            Scalar::Column(c) => row.get(usize::from(*c)).cloned().unwrap_or(Value::Null),
            Scalar::Neg(e) => match number(&e.eval(row)?) {
                None => Value::Null,
                Some(Num::Int(i)) => int_value(-i, "negation")?,
                Some(Num::Float(f)) => Value::Double(-f),
            },
            Scalar::Not(e) => boolean(truth(&e.eval(row)?).map(|b| !b)),
            Scalar::Arith(op, a, b) => arith(*op, &a.eval(row)?, &b.eval(row)?)?,
            Scalar::Cmp(op, a, b) => {
                let (x, y) = (a.eval(row)?, b.eval(row)?);
                if *op == Cmp::NullSafeEq {
                    match (x.is_null(), y.is_null()) {
                        (true, true) => Value::Int(1),
                        (true, false) | (false, true) => Value::Int(0),
                        _ => boolean(Some(compare(&x, &y) == Some(Ordering::Equal))),
                    }
                } else if x.is_null() || y.is_null() {
                    Value::Null
                } else {
                    boolean(Some(compare(&x, &y).is_some_and(|o| op.holds(o))))
                }
            }
            Scalar::And(items) => {
                let mut unknown = false;
                for i in items {
                    match truth(&i.eval(row)?) {
                        Some(false) => return Ok(Value::Int(0)),
                        None => unknown = true,
                        Some(true) => {}
                    }
                }
                boolean((!unknown).then_some(true))
            }
            Scalar::Or(items) => {
                let mut unknown = false;
                for i in items {
                    match truth(&i.eval(row)?) {
                        Some(true) => return Ok(Value::Int(1)),
                        None => unknown = true,
                        Some(false) => {}
                    }
                }
                boolean((!unknown).then_some(false))
            }
            Scalar::Xor(a, b) => {
                let (x, y) = (truth(&a.eval(row)?), truth(&b.eval(row)?));
                boolean(x.zip(y).map(|(x, y)| x != y))
            }
            Scalar::IsNull(e, negated) => boolean(Some(e.eval(row)?.is_null() != *negated)),
            Scalar::IsBool(e, want, negated) => {
                let is = truth(&e.eval(row)?) == Some(*want);
                boolean(Some(is != *negated))
            }
            Scalar::Like {
                expr,
                pattern,
                escape,
                negated,
            } => {
                let (v, p) = (expr.eval(row)?, pattern.eval(row)?);
                if v.is_null() || p.is_null() {
                    Value::Null
                } else {
                    boolean(Some(like(&v, &p, *escape) != *negated))
                }
            }
            Scalar::InList {
                expr,
                list,
                negated,
            } => {
                let v = expr.eval(row)?;
                if v.is_null() {
                    return Ok(Value::Null);
                }
                let mut unknown = false;
                for item in list {
                    let x = item.eval(row)?;
                    if x.is_null() {
                        unknown = true;
                    } else if compare(&v, &x) == Some(Ordering::Equal) {
                        return Ok(boolean(Some(!*negated)));
                    }
                }
                boolean((!unknown).then_some(*negated))
            }
            Scalar::Between {
                expr,
                low,
                high,
                negated,
            } => {
                let v = expr.eval(row)?;
                let (lo, hi) = (low.eval(row)?, high.eval(row)?);
                let above = if lo.is_null() || v.is_null() {
                    None
                } else {
                    Some(compare(&v, &lo).is_some_and(|o| o != Ordering::Less))
                };
                let below = if hi.is_null() || v.is_null() {
                    None
                } else {
                    Some(compare(&v, &hi).is_some_and(|o| o != Ordering::Greater))
                };
                let within = match (above, below) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                };
                boolean(within.map(|w| w != *negated))
            }
            Scalar::Case {
                operand,
                whens,
                otherwise,
            } => {
                let subject = operand.as_ref().map(|o| o.eval(row)).transpose()?;
                for (cond, result) in whens {
                    let c = cond.eval(row)?;
                    let hit = match &subject {
                        Some(s) => {
                            !s.is_null() && !c.is_null() && compare(s, &c) == Some(Ordering::Equal)
                        }
                        None => truth(&c) == Some(true),
                    };
                    if hit {
                        return result.eval(row);
                    }
                }
                match otherwise {
                    Some(o) => o.eval(row)?,
                    None => Value::Null,
                }
            }
            Scalar::Func(f, args) => function(*f, args, row)?,
            Scalar::Cast(e, to) => cast(&e.eval(row)?, *to)?,
        })
    }
}

fn arith(op: Arith, a: &Value, b: &Value) -> Result<Value, SqlError> {
    let (Some(x), Some(y)) = (number(a), number(b)) else {
        return Ok(Value::Null);
    };
    let name = match op {
        Arith::Add => "+",
        Arith::Sub => "-",
        Arith::Mul => "*",
        Arith::Div => "/",
        Arith::IntDiv => "DIV",
        Arith::Mod => "%",
    };
    let what = format!(
        "{} {name} {}",
        String::from_utf8_lossy(&value_text(a)),
        String::from_utf8_lossy(&value_text(b))
    );
    Ok(match (op, x, y) {
        (Arith::Div, x, y) => {
            let d = float(y);
            if d == 0.0 {
                Value::Null
            } else {
                Value::Double(float(x) / d)
            }
        }
        (Arith::IntDiv, x, y) => {
            let d = float(y);
            if d == 0.0 {
                Value::Null
            } else {
                match (x, y) {
                    (Num::Int(x), Num::Int(y)) => int_value(x / y, &what)?,
                    _ => int_value((float(x) / d).trunc() as i128, &what)?,
                }
            }
        }
        (Arith::Mod, Num::Int(x), Num::Int(y)) => {
            if y == 0 {
                Value::Null
            } else {
                int_value(x % y, &what)?
            }
        }
        (Arith::Mod, x, y) => {
            let d = float(y);
            if d == 0.0 {
                Value::Null
            } else {
                Value::Double(float(x) % d)
            }
        }
        (op, Num::Int(x), Num::Int(y)) => {
            let r = match op {
                Arith::Add => x.checked_add(y),
                Arith::Sub => x.checked_sub(y),
                _ => x.checked_mul(y),
            };
            int_value(r.ok_or_else(|| out_of_range(&what))?, &what)?
        }
        (op, x, y) => {
            let (x, y) = (float(x), float(y));
            let r = match op {
                Arith::Add => x + y,
                Arith::Sub => x - y,
                _ => x * y,
            };
            if !r.is_finite() {
                return Err(SqlError::new(
                    1690,
                    "22003",
                    format!("DOUBLE value is out of range in '{what}'"),
                ));
            }
            Value::Double(r)
        }
    })
}

fn function(f: Func, args: &[Scalar], row: &[Value]) -> Result<Value, SqlError> {
    let arg = |i: usize| args[i].eval(row);
    Ok(match f {
        Func::Concat => {
            let mut out = Vec::new();
            let mut binary = false;
            for a in args {
                let v = a.eval(row)?;
                if v.is_null() {
                    return Ok(Value::Null);
                }
                binary |= matches!(v, Value::Bytes(_));
                out.extend(value_text(&v));
                if out.len() > STRING_BYTES_MAX {
                    // MySQL's answer past max_allowed_packet.
                    return Err(SqlError::new(
                        1301,
                        "HY000",
                        format!("Result of concat() was larger than {STRING_BYTES_MAX} bytes"),
                    ));
                }
            }
            if binary {
                Value::Bytes(out)
            } else {
                Value::Str(String::from_utf8_lossy(&out).into_owned())
            }
        }
        Func::Length => match arg(0)? {
            Value::Null => Value::Null,
            v => Value::Int(value_text(&v).len() as i64),
        },
        Func::CharLength => match arg(0)? {
            Value::Null => Value::Null,
            Value::Bytes(b) => Value::Int(b.len() as i64),
            v => Value::Int(String::from_utf8_lossy(&value_text(&v)).chars().count() as i64),
        },
        Func::Upper | Func::Lower => match arg(0)? {
            Value::Null => Value::Null,
            // Binary strings have no letter case.
            Value::Bytes(b) => Value::Bytes(b),
            v => {
                let s = String::from_utf8_lossy(&value_text(&v)).into_owned();
                Value::Str(if f == Func::Upper {
                    s.to_uppercase()
                } else {
                    s.to_lowercase()
                })
            }
        },
        Func::Abs => match number(&arg(0)?) {
            None => Value::Null,
            Some(Num::Int(i)) => int_value(i.abs(), "abs")?,
            Some(Num::Float(x)) => Value::Double(x.abs()),
        },
        Func::Coalesce => {
            for a in args {
                let v = a.eval(row)?;
                if !v.is_null() {
                    return Ok(v);
                }
            }
            Value::Null
        }
        Func::IfNull => match arg(0)? {
            Value::Null => arg(1)?,
            v => v,
        },
        Func::If => {
            if truth(&arg(0)?) == Some(true) {
                arg(1)?
            } else {
                arg(2)?
            }
        }
        Func::NullIf => {
            let (a, b) = (arg(0)?, arg(1)?);
            if compare(&a, &b) == Some(Ordering::Equal) {
                Value::Null
            } else {
                a
            }
        }
        Func::Floor | Func::Ceil | Func::Round => match number(&arg(0)?) {
            None => Value::Null,
            Some(Num::Int(i)) => int_value(i, "rounding")?,
            Some(Num::Float(x)) => {
                let r = match f {
                    Func::Floor => x.floor(),
                    Func::Ceil => x.ceil(),
                    _ => x.round(),
                };
                if r.abs() < 9.2e18 {
                    Value::Int(r as i64)
                } else {
                    Value::Double(r)
                }
            }
        },
        Func::Greatest | Func::Least => {
            let mut best: Option<Value> = None;
            for a in args {
                let v = a.eval(row)?;
                if v.is_null() {
                    return Ok(Value::Null);
                }
                best = Some(match best {
                    None => v,
                    Some(b) => {
                        let ord = compare(&v, &b).unwrap_or(Ordering::Equal);
                        let take = if f == Func::Greatest {
                            ord == Ordering::Greater
                        } else {
                            ord == Ordering::Less
                        };
                        if take {
                            v
                        } else {
                            b
                        }
                    }
                });
            }
            best.unwrap_or(Value::Null)
        }
    })
}

fn cast(v: &Value, to: CastTo) -> Result<Value, SqlError> {
    if v.is_null() {
        return Ok(Value::Null);
    }
    Ok(match to {
        CastTo::Signed | CastTo::Unsigned => {
            let n = match number(v).expect("not NULL") {
                Num::Int(i) => i,
                Num::Float(f) => f.round() as i128,
            };
            if to == CastTo::Signed {
                Value::Int(n as i64)
            } else {
                Value::UInt(n as u64)
            }
        }
        CastTo::Char => Value::Str(String::from_utf8_lossy(&value_text(v)).into_owned()),
        CastTo::Binary => Value::Bytes(value_text(v)),
        CastTo::Double => Value::Double(float(number(v).expect("not NULL"))),
        CastTo::DateTime => match v {
            Value::Timestamp(s) => Value::DateTime(i64::from(*s)),
            Value::DateTime(_) => v.clone(),
            other => parse_datetime(&String::from_utf8_lossy(&value_text(other)))
                .map_or(Value::Null, Value::DateTime),
        },
    })
}

/// The static type of an expression's results where one can be told
/// without a row (for result columns of a query with no rows).
pub fn column_type(s: &Scalar, def: Option<&TableDef>) -> Option<ColumnType> {
    match s {
        Scalar::Column(c) => def
            .and_then(|d| d.columns.get(usize::from(*c)))
            .map(|c| c.ty),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn like_matches_as_mysql() {
        let s = |x: &str| Value::Str(x.into());
        let esc = Some('\\');
        assert!(like(&s("abc"), &s("a%"), esc));
        assert!(like(&s("abc"), &s("%c"), esc));
        assert!(like(&s("abc"), &s("a_c"), esc));
        assert!(!like(&s("abc"), &s("a_"), esc));
        assert!(like(&s("héllo"), &s("h_llo"), esc));
        assert!(like(&s("a%b"), &s("a\\%b"), esc));
        assert!(!like(&s("axb"), &s("a\\%b"), esc));
        assert!(like(&s(""), &s("%"), esc));
        assert!(like(&s("mississippi"), &s("%iss%pi"), esc));
        assert!(!like(&s("abc"), &s("ABC"), esc), "binary collation");
    }

    #[test]
    fn comparisons_follow_mysql_types() {
        let s = |x: &str| Value::Str(x.into());
        assert_eq!(
            compare(&Value::Int(2), &Value::UInt(10)),
            Some(Ordering::Less)
        );
        assert_eq!(
            compare(&Value::Int(2), &Value::Double(2.0)),
            Some(Ordering::Equal)
        );
        assert_eq!(
            compare(&Value::Int(10), &s("9")),
            Some(Ordering::Greater),
            "numeric"
        );
        assert_eq!(
            compare(&s("10"), &s("9")),
            Some(Ordering::Less),
            "as strings"
        );
        assert_eq!(
            compare(&s("a "), &s("a")),
            Some(Ordering::Equal),
            "PAD SPACE"
        );
        assert_eq!(
            compare(&Value::DateTime(86_400), &s("1970-01-02 00:00:00")),
            Some(Ordering::Equal)
        );
        assert_eq!(compare(&Value::Null, &Value::Int(1)), None);
    }

    #[test]
    fn arithmetic_and_overflow() {
        assert_eq!(
            arith(Arith::Add, &Value::Int(1), &Value::Int(1)).unwrap(),
            Value::Int(2)
        );
        assert_eq!(
            arith(Arith::Div, &Value::Int(1), &Value::Int(2)).unwrap(),
            Value::Double(0.5)
        );
        assert_eq!(
            arith(Arith::Div, &Value::Int(1), &Value::Int(0)).unwrap(),
            Value::Null
        );
        assert_eq!(
            arith(Arith::IntDiv, &Value::Int(7), &Value::Int(2)).unwrap(),
            Value::Int(3)
        );
        assert_eq!(
            arith(Arith::Mod, &Value::Int(7), &Value::Int(3)).unwrap(),
            Value::Int(1)
        );
        assert_eq!(
            arith(Arith::Add, &Value::UInt(u64::MAX), &Value::Int(1))
                .unwrap_err()
                .code,
            1690
        );
        assert_eq!(
            arith(Arith::Add, &Value::UInt(u64::MAX), &Value::Int(-1)).unwrap(),
            Value::UInt(u64::MAX - 1)
        );
        assert_eq!(
            arith(Arith::Add, &Value::Null, &Value::Int(1)).unwrap(),
            Value::Null
        );
    }
}
