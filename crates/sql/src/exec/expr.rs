//! Scalar expressions: sqlparser's [`Expr`] compiled once per statement
//! into a [`Scalar`] whose columns are resolved to the table's column ids
//! and whose session values (`@@version`, `DATABASE()`, ...) are folded to
//! constants, then evaluated per row ([`super::eval`]) with MySQL's rules.
//! Function calls compile in [`super::expr_funcs`].
//!
//! Invariants: compiling is where names fail (1054 unknown column, 1193
//! unknown variable, 1235 unsupported), so a statement fails the same on
//! an empty table as on a full one; evaluating fails only on values
//! (1690 out of range).

use super::eval_types::DatePart;
use super::subquery::{Answer, Use};
use super::Env;
use crate::outcome::SqlError;
use crate::sqltypes::{parse_date, parse_datetime, parse_time};
use shoal_types::{ColumnType, Decimal, TableDef, Value};
use sqlparser::ast::{BinaryOperator, CastKind, DataType, Expr, UnaryOperator, Value as SqlValue};
use std::cmp::Ordering;
use std::sync::Arc;

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

    pub(super) fn holds(self, ord: Ordering) -> bool {
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
    /// `ROUND(x)` and `ROUND(x, digits)`.
    Round,
    /// `TRUNCATE(x, digits)`.
    Truncate,
    Greatest,
    Least,
    /// `DATE(x)`.
    Date,
    /// `YEAR(x)`, `MONTH(x)`, `DAY(x)`.
    DatePart(DatePart),
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
    /// Made by [`Scalar::in_list`].
    InList {
        expr: Box<Scalar>,
        list: Vec<Scalar>,
        negated: bool,
        /// When the list is long and every item a non-NULL integer
        /// constant: the items sorted, so that an integer value is looked
        /// up in it rather than compared with each item (a subquery's
        /// list may hold 65,536 values, met by every row).
        ints: Option<Arc<[i128]>>,
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
    /// `CAST(x AS SIGNED | UNSIGNED | CHAR | BINARY | DOUBLE | DATETIME |
    /// DATE | TIME | DECIMAL(p,s))`.
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
    Date,
    Time,
    Decimal { precision: u8, scale: u8 },
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

/// `CURRENT_USER()`: the account the session logged in as, its host as
/// the account names it (`app@%`), where `USER()` names the client's
/// address. Outside a session's statement (no privileges in scope), the
/// client's address stands in.
pub(super) fn current_user(env: &Env<'_>) -> Value {
    match super::users::privileges::current() {
        Some(p) => Value::Str(format!("{}@{}", p.account.user, p.account.host)),
        None => Value::Str(env.user_at_host()),
    }
}

/// A subquery where the statement did not run it first (1235).
fn subquery_here() -> SqlError {
    SqlError::not_supported("a subquery in this place (subqueries work in a SELECT's clauses and an UPDATE's or DELETE's WHERE)")
}

pub fn unknown_column(name: &str, clause: &str) -> SqlError {
    SqlError::new(
        1054,
        "42S22",
        format!("Unknown column '{name}' in '{clause}'"),
    )
}

/// Lists shorter than this are compared item by item: a search would not
/// pay for itself.
const SORTED_IN_LIST_MIN: usize = 16;

impl Scalar {
    /// `expr [NOT] IN (list)`, with the sorted integers of a long list of
    /// integer constants beside it (see [`Scalar::InList`]).
    pub fn in_list(expr: Box<Scalar>, list: Vec<Scalar>, negated: bool) -> Scalar {
        let ints = if list.len() >= SORTED_IN_LIST_MIN {
            list.iter()
                .map(|item| match item {
                    Scalar::Const(Value::Int(i)) => Some(i128::from(*i)),
                    Scalar::Const(Value::UInt(u)) => Some(i128::from(*u)),
                    _ => None,
                })
                .collect::<Option<Vec<i128>>>()
                .map(|mut ints| {
                    ints.sort_unstable();
                    ints.dedup();
                    Arc::from(ints)
                })
        } else {
            None
        };
        Scalar::InList {
            expr,
            list,
            negated,
            ints,
        }
    }
}

/// Arithmetic of two numeric constants, computed once here, so that the
/// planner sees a constant (`id BETWEEN 5 AND 5 + 99` reads a range of
/// the primary key, not the table). Left to run with the statement when
/// it fails or gives NULL (division by zero), so its error comes as
/// before; numbers raise no warnings on the way.
pub(super) fn folded(op: Arith, l: Box<Scalar>, r: Box<Scalar>) -> Scalar {
    let number = |s: &Scalar| {
        matches!(
            s,
            Scalar::Const(
                Value::Int(_)
                    | Value::UInt(_)
                    | Value::Float(_)
                    | Value::Double(_)
                    | Value::Decimal(_)
            )
        )
    };
    let both = number(&l) && number(&r);
    let s = Scalar::Arith(op, l, r);
    if both {
        if let Ok(v) = s.eval(&[]) {
            if !v.is_null() {
                return Scalar::Const(v);
            }
        }
    }
    s
}

pub(super) fn out_of_range(what: &str) -> SqlError {
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
            } else if let Some(d) = Decimal::parse(n).filter(|_| !n.contains(['e', 'E'])) {
                // `1.5` is an exact DECIMAL in MySQL (`1.5e0` a DOUBLE),
                // and so is an integer too long for a BIGINT.
                Value::Decimal(d)
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

impl Compiler<'_> {
    pub fn compile(&self, e: &Expr) -> Result<Scalar, SqlError> {
        self.compile_at(e, 0)
    }

    pub(super) fn compile_at(&self, e: &Expr, depth: usize) -> Result<Scalar, SqlError> {
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
                    Scalar::Const(current_user(self.env))
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
                    Scalar::Const(Value::Decimal(d)) => {
                        Scalar::Const(Value::Decimal(Decimal::new(-d.unscaled, d.scale)))
                    }
                    other => Scalar::Neg(Box::new(other)),
                },
                UnaryOperator::Plus => c(expr)?,
                UnaryOperator::Not | UnaryOperator::BangNot => Scalar::Not(b(expr)?),
                other => return Err(SqlError::not_supported(format!("operator {other}"))),
            },
            Expr::BinaryOp { left, op, right } => {
                let (l, r) = (b(left)?, b(right)?);
                match op {
                    BinaryOperator::Plus => folded(Arith::Add, l, r),
                    BinaryOperator::Minus => folded(Arith::Sub, l, r),
                    BinaryOperator::Multiply => folded(Arith::Mul, l, r),
                    BinaryOperator::Divide => folded(Arith::Div, l, r),
                    BinaryOperator::MyIntegerDivide | BinaryOperator::DuckIntegerDivide => {
                        folded(Arith::IntDiv, l, r)
                    }
                    BinaryOperator::Modulo => folded(Arith::Mod, l, r),
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
            } => Scalar::in_list(
                b(expr)?,
                list.iter().map(c).collect::<Result<_, _>>()?,
                *negated,
            ),
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
                let incorrect = |kind: &str| {
                    SqlError::new(1525, "HY000", format!("Incorrect {kind} value: '{text}'"))
                };
                match ts.data_type {
                    DataType::Date => Scalar::Const(Value::Date(
                        parse_date(&text).ok_or_else(|| incorrect("DATE"))?,
                    )),
                    DataType::Time(..) => Scalar::Const(Value::Time(
                        parse_time(&text).ok_or_else(|| incorrect("TIME"))?,
                    )),
                    DataType::Datetime(_) | DataType::Timestamp(_, _) => {
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
            // The parser reads FLOOR(x) and CEIL(x) as forms of their own.
            Expr::Floor { expr, field } | Expr::Ceil { expr, field } => {
                if !matches!(
                    field,
                    sqlparser::ast::CeilFloorKind::DateTimeField(
                        sqlparser::ast::DateTimeField::NoDateTime
                    )
                ) {
                    return Err(SqlError::new(
                        1582,
                        "42000",
                        format!("Incorrect parameter count in the call to native function '{e}'"),
                    ));
                }
                let func = if matches!(e, Expr::Floor { .. }) {
                    Func::Floor
                } else {
                    Func::Ceil
                };
                Scalar::Func(func, vec![self.compile_at(expr, depth + 1)?])
            }
            Expr::InSubquery {
                expr,
                subquery,
                negated,
            } => match self.subquery(Use::In, subquery) {
                Some(Answer::In(values)) => Scalar::in_list(
                    b(expr)?,
                    values.iter().cloned().map(Scalar::Const).collect(),
                    *negated,
                ),
                None if self.env.describe_only => Scalar::Const(Value::Null),
                _ => return Err(subquery_here()),
            },
            Expr::Exists { subquery, negated } => match self.subquery(Use::Exists, subquery) {
                Some(Answer::Exists(found)) => {
                    Scalar::Const(Value::Int(i64::from(*found != *negated)))
                }
                Some(Answer::SemiJoin { outer, values }) => {
                    // Never NULL: `outer` is not NULL when IN is asked.
                    let outer = self.compile_at(outer, depth + 1)?;
                    let semi = Scalar::And(vec![
                        Scalar::IsNull(Box::new(outer.clone()), true),
                        Scalar::in_list(
                            Box::new(outer),
                            values.iter().cloned().map(Scalar::Const).collect(),
                            false,
                        ),
                    ]);
                    if *negated {
                        Scalar::Not(Box::new(semi))
                    } else {
                        semi
                    }
                }
                None if self.env.describe_only => Scalar::Const(Value::Null),
                _ => return Err(subquery_here()),
            },
            Expr::Subquery(q) => match self.subquery(Use::Scalar, q) {
                Some(Answer::Scalar(v)) => Scalar::Const(v.clone()),
                None if self.env.describe_only => Scalar::Const(Value::Null),
                _ => return Err(subquery_here()),
            },
            other => return Err(SqlError::not_supported(format!("expression {other}"))),
        })
    }

    /// What subquery `q` gave, if the statement ran it.
    fn subquery(&self, how: Use, q: &sqlparser::ast::Query) -> Option<&Answer> {
        self.env.subqueries.and_then(|m| m.get(how, q))
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
        DataType::Datetime(_) | DataType::Timestamp(_, _) => CastTo::DateTime,
        DataType::Date => CastTo::Date,
        DataType::Time(..) => CastTo::Time,
        DataType::Decimal(info) | DataType::Numeric(info) | DataType::Dec(info) => {
            match crate::sqltypes::decimal::declared_decimal("CAST", info)? {
                ColumnType::Decimal { precision, scale } => CastTo::Decimal { precision, scale },
                _ => return Err(SqlError::not_supported(format!("CAST to {dt}"))),
            }
        }
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

pub use super::eval::{compare, like, truth, STRING_BYTES_MAX};
pub(crate) use super::eval::{float, number, Num};

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
