//! Compiling function calls: a call's name and arguments checked
//! (1582 a wrong count, 1305 an unknown function) and made either a
//! constant of the session (`DATABASE()`, `NOW()`, `CONNECTION_ID()`,
//! ...), an aggregate ([`super::aggregate`]), or a [`Func`] evaluated
//! per row ([`super::eval_funcs`]).

use super::eval_types::DatePart;
use super::expr::{current_user, folded, Arith, Compiler, Func, Scalar};
use crate::outcome::SqlError;
use shoal_types::Value;
use sqlparser::ast::{Expr, Function, FunctionArg, FunctionArgExpr, FunctionArguments};

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
    pub(super) fn function(&self, f: &Function, depth: usize) -> Result<Scalar, SqlError> {
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
            "CURRENT_USER" => {
                argc(0..=0)?;
                konst(current_user(env))
            }
            "USER" | "SESSION_USER" | "SYSTEM_USER" => {
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
            "CURDATE" | "CURRENT_DATE" => {
                argc(0..=0)?;
                konst(
                    crate::sqltypes::temporal::date_of_seconds(env.now_secs)
                        .map_or(Value::Null, Value::Date),
                )
            }
            "CURTIME" | "CURRENT_TIME" => {
                argc(0..=1)?;
                konst(Value::Time(env.now_secs.rem_euclid(86_400) * 1_000_000))
            }
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
                        argc(1..=2)?;
                        Func::Round
                    }
                    "TRUNCATE" => {
                        argc(2..=2)?;
                        Func::Truncate
                    }
                    "MOD" => {
                        argc(2..=2)?;
                        let mut it = compiled.into_iter();
                        let (a, b) = (it.next().expect("2"), it.next().expect("2"));
                        return Ok(folded(Arith::Mod, Box::new(a), Box::new(b)));
                    }
                    "GREATEST" => {
                        argc(2..=usize::MAX)?;
                        Func::Greatest
                    }
                    "LEAST" => {
                        argc(2..=usize::MAX)?;
                        Func::Least
                    }
                    "DATE" => {
                        argc(1..=1)?;
                        Func::Date
                    }
                    "YEAR" | "MONTH" | "DAY" | "DAYOFMONTH" => {
                        argc(1..=1)?;
                        Func::DatePart(match name.as_str() {
                            "YEAR" => DatePart::Year,
                            "MONTH" => DatePart::Month,
                            _ => DatePart::Day,
                        })
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
