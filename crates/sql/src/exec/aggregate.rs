//! Aggregate functions: `COUNT`, `SUM`, `AVG`, `MIN`, `MAX` (each also
//! with `DISTINCT`) compiled into calls, and the accumulators a group
//! folds its rows into, with the texts MariaDB gives their results
//! (their types: [`super::result_type`]).
//!
//! A clause that may call aggregates (a SELECT's list, HAVING, ORDER BY)
//! compiles with an [`Aggregates`] in its scope: each call is registered
//! there once (the same call twice shares one slot) and compiles to
//! `Column(width + slot)`, a column past the table's own in the group's
//! row ([`super::group`]). Elsewhere (WHERE, GROUP BY, an aggregate's own
//! argument, UPDATE's SET) a call is 1111, as MySQL answers.
//!
//! Results, as MariaDB 10.11's: COUNT is a BIGINT that is never NULL;
//! SUM of integers (or times) is an exact DECIMAL (summed in `i128`, so
//! it cannot overflow silently), AVG of them a DECIMAL with 4 more
//! fraction digits (`div_precision_increment`), rounded half away from
//! zero; SUM and AVG of anything else are DOUBLE; MIN and MAX keep their
//! argument's type. Without rows, everything but COUNT is NULL.

use super::expr::{compare, float, number, Compiler, Num, Scalar, Scope};
use super::group_key::{encode_values, value_bytes, Budget};
use super::result_type::{class_of, result_class, Class, AVG_SCALE_INCREMENT};
use crate::outcome::SqlError;
use shoal_types::{Decimal, Value};
use sqlparser::ast::{
    DuplicateTreatment, Function, FunctionArg, FunctionArgExpr, FunctionArguments,
};
use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Aggregate calls one statement may hold (each a column of the group's
/// row, whose ids are `u16`).
pub const CALLS_MAX: usize = 1024;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AggFunc {
    Count,
    Sum,
    Avg,
    Min,
    Max,
}

impl AggFunc {
    fn name(self) -> &'static str {
        match self {
            AggFunc::Count => "COUNT",
            AggFunc::Sum => "SUM",
            AggFunc::Avg => "AVG",
            AggFunc::Min => "MIN",
            AggFunc::Max => "MAX",
        }
    }
}

/// One aggregate call of a statement.
#[derive(Clone, Debug, PartialEq)]
pub struct AggCall {
    pub func: AggFunc,
    /// `DISTINCT`: each distinct argument (tuple) counts once.
    pub distinct: bool,
    /// The arguments, over the table's rows; empty for `COUNT(*)`.
    pub args: Vec<Scalar>,
    /// What the argument is, told before any row ([`class_of`]).
    pub arg_class: Class,
}

/// Where a statement's aggregate calls are registered while its clauses
/// compile. Interior mutability because the expression compiler is
/// shared (`&self`); a mutex rather than a cell because scopes live in
/// futures that move between threads (never contended: one statement
/// compiles on one task).
pub struct Aggregates {
    /// The table's columns: slot `i` is column `width + i` of a group row.
    width: usize,
    calls: Mutex<Vec<AggCall>>,
}

impl Aggregates {
    pub fn new(width: usize) -> Aggregates {
        Aggregates {
            width,
            calls: Mutex::new(Vec::new()),
        }
    }

    /// The calls, locked (a panic while registering cannot leave them
    /// half-changed: a push is the only change).
    fn locked(&self) -> MutexGuard<'_, Vec<AggCall>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    pub fn is_empty(&self) -> bool {
        self.locked().is_empty()
    }

    /// The calls registered so far, by slot.
    pub fn calls(&self) -> Vec<AggCall> {
        self.locked().clone()
    }

    /// The group-row column of `call` (registering it unless an equal
    /// call already is).
    fn register(&self, call: AggCall) -> Result<Scalar, SqlError> {
        let mut calls = self.locked();
        let slot = match calls.iter().position(|c| *c == call) {
            Some(i) => i,
            None => {
                if calls.len() >= CALLS_MAX || self.width + calls.len() >= usize::from(u16::MAX) {
                    return Err(SqlError::new(
                        1235,
                        "42000",
                        format!("A statement may hold at most {CALLS_MAX} aggregate calls"),
                    ));
                }
                calls.push(call);
                calls.len() - 1
            }
        };
        Ok(Scalar::Column((self.width + slot) as u16))
    }
}

/// 1111: an aggregate where none may be.
pub fn invalid_group_function() -> SqlError {
    SqlError::new(1111, "HY000", "Invalid use of group function")
}

/// Compiles aggregate call `f` (named `name`, upper case) of a clause:
/// its group-row column.
pub fn compile_call(c: &Compiler<'_>, f: &Function, name: &str) -> Result<Scalar, SqlError> {
    let Some(scope) = c.scope else {
        return Err(invalid_group_function());
    };
    let Some(aggregates) = scope.aggregates else {
        return Err(invalid_group_function());
    };
    let func = match name {
        "COUNT" => AggFunc::Count,
        "SUM" => AggFunc::Sum,
        "AVG" => AggFunc::Avg,
        "MIN" => AggFunc::Min,
        "MAX" => AggFunc::Max,
        other => {
            return Err(SqlError::not_supported(format!(
                "aggregate function {other}()"
            )))
        }
    };
    if f.over.is_some() || f.filter.is_some() || !f.within_group.is_empty() {
        return Err(SqlError::not_supported(format!("{f}")));
    }
    if !matches!(f.parameters, FunctionArguments::None) {
        return Err(SqlError::syntax(format!("bad aggregate call {f}")));
    }
    let FunctionArguments::List(list) = &f.args else {
        return Err(SqlError::syntax(format!("{name}() needs an argument")));
    };
    if !list.clauses.is_empty() {
        return Err(SqlError::not_supported(format!("{f}")));
    }
    let distinct = list.duplicate_treatment == Some(DuplicateTreatment::Distinct);
    // The argument compiles against the table alone: no aggregate inside
    // an aggregate (1111), no select-list alias.
    let inner_scope = Scope {
        def: scope.def,
        names: scope.names.clone(),
        aggregates: None,
        aliases: &[],
    };
    let inner = Compiler {
        env: c.env,
        scope: Some(&inner_scope),
        clause: c.clause,
    };
    let mut args = Vec::with_capacity(list.args.len());
    let mut star = false;
    for a in &list.args {
        match a {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => args.push(inner.compile(e)?),
            FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => star = true,
            _ => return Err(SqlError::syntax(format!("bad argument in {f}"))),
        }
    }
    let well_formed = match (func, star) {
        (AggFunc::Count, true) => !distinct && list.args.len() == 1,
        (AggFunc::Count, false) if distinct => !args.is_empty(),
        (_, false) => args.len() == 1,
        (_, true) => false,
    };
    if !well_formed {
        return Err(SqlError::syntax(format!(
            "You have an error in your SQL syntax near '{f}'"
        )));
    }
    let arg_class = args
        .first()
        .map_or(Class::Int, |a| class_of(a, scope.def, &[]));
    aggregates.register(AggCall {
        func,
        distinct,
        args,
        arg_class,
    })
}

// ---------------------------------------------------------------------------
// Folding

/// One call's state in one group.
pub struct Accumulator {
    state: State,
    /// DISTINCT: the argument values (encoded) folded so far.
    seen: Option<BTreeSet<Vec<u8>>>,
}

enum State {
    Count(i64),
    /// SUM / AVG of integers and decimals: exact, the sum in units of
    /// 10^-`scale` (the argument's scale).
    Exact {
        sum: i128,
        rows: i64,
        scale: u8,
    },
    /// SUM / AVG of anything else: in floating point.
    Real {
        sum: f64,
        rows: i64,
    },
    Best(Option<Value>),
}

fn out_of_range(call: AggFunc) -> SqlError {
    SqlError::new(
        1690,
        "22003",
        format!("DECIMAL value is out of range in '{}'", call.name()),
    )
}

impl Accumulator {
    pub fn new(call: &AggCall) -> Accumulator {
        let state = match (call.func, call.arg_class) {
            (AggFunc::Count, _) => State::Count(0),
            (AggFunc::Sum | AggFunc::Avg, Class::Int | Class::Temporal) => State::Exact {
                sum: 0,
                rows: 0,
                scale: 0,
            },
            (AggFunc::Sum | AggFunc::Avg, Class::Decimal(scale)) => State::Exact {
                sum: 0,
                rows: 0,
                scale,
            },
            (AggFunc::Sum | AggFunc::Avg, _) => State::Real { sum: 0.0, rows: 0 },
            (AggFunc::Min | AggFunc::Max, _) => State::Best(None),
        };
        // MIN and MAX are the same with DISTINCT: no set.
        let seen = (call.distinct && !matches!(call.func, AggFunc::Min | AggFunc::Max))
            .then(BTreeSet::new);
        Accumulator { state, seen }
    }

    /// Bytes this accumulator holds besides its DISTINCT set.
    pub fn bytes(&self) -> usize {
        std::mem::size_of::<Accumulator>()
            + match &self.state {
                State::Best(Some(v)) => value_bytes(v),
                _ => 0,
            }
    }

    /// Folds one row of the group in; DISTINCT values are charged to
    /// `budget`, as is a MIN / MAX value that grows.
    pub fn fold(
        &mut self,
        call: &AggCall,
        row: &[Value],
        budget: &mut Budget,
    ) -> Result<(), SqlError> {
        if call.args.is_empty() {
            if let State::Count(n) = &mut self.state {
                *n += 1;
            }
            return Ok(());
        }
        let mut args = Vec::with_capacity(call.args.len());
        for a in &call.args {
            let v = a.eval(row)?;
            if v.is_null() {
                // Aggregates skip NULLs (COUNT(DISTINCT a, b): tuples
                // holding one).
                return Ok(());
            }
            args.push(v);
        }
        if let Some(seen) = &mut self.seen {
            let key = encode_values(&args);
            if seen.contains(&key) {
                return Ok(());
            }
            budget.charge(1, key.len() + DISTINCT_ENTRY_BYTES)?;
            seen.insert(key);
        }
        let Some(v) = args.into_iter().next() else {
            return Ok(());
        };
        match &mut self.state {
            State::Count(n) => *n += 1,
            State::Exact { sum, rows, scale } => {
                let exact = match number(&v) {
                    Some(Num::Int(i)) => Some(Decimal::from_int(i)),
                    Some(Num::Dec(d)) => Some(d),
                    // Not exact after all (a class told wrong): rounded to
                    // the scale, as MySQL stores a number in a decimal.
                    Some(Num::Float(f)) => Decimal::from_f64(f, *scale),
                    None => return Ok(()),
                };
                let x = exact
                    .and_then(|d| d.rescale(*scale))
                    .ok_or_else(|| out_of_range(call.func))?
                    .unscaled;
                // Past 38 digits the sum is out of DECIMAL's range (and
                // i128::MIN, which no negation or division survives, is
                // never reached).
                *sum = sum
                    .checked_add(x)
                    .filter(|s| {
                        Decimal::new(*s, *scale).fits(shoal_types::decimal::DECIMAL_PRECISION_MAX)
                    })
                    .ok_or_else(|| out_of_range(call.func))?;
                *rows += 1;
            }
            State::Real { sum, rows } => {
                if let Some(n) = number(&v) {
                    *sum += float(n);
                    *rows += 1;
                }
            }
            State::Best(best) => {
                let take = match best {
                    None => true,
                    Some(b) => {
                        let want = if call.func == AggFunc::Min {
                            Ordering::Less
                        } else {
                            Ordering::Greater
                        };
                        compare(&v, b) == Some(want)
                    }
                };
                if take {
                    let old = best.as_ref().map_or(0, value_bytes);
                    let new = value_bytes(&v);
                    budget.charge(0, new.saturating_sub(old))?;
                    *best = Some(v);
                }
            }
        }
        Ok(())
    }

    /// The call's result: its value (for expressions, HAVING and ORDER
    /// BY) and, for an exact decimal, its exact text (what a select item
    /// that is the call itself shows).
    pub fn finish(&self, call: &AggCall) -> (Value, Option<Vec<u8>>) {
        match &self.state {
            State::Count(n) => (Value::Int(*n), None),
            State::Exact { rows: 0, .. } | State::Real { rows: 0, .. } => (Value::Null, None),
            State::Exact {
                sum,
                rows,
                scale: 0,
            } => {
                if call.func == AggFunc::Sum {
                    let scale = match result_class(call) {
                        Class::Decimal(s) => s,
                        _ => 0,
                    };
                    (int_or_double(*sum), Some(decimal_text(*sum, 0, scale)))
                } else {
                    let scale = match result_class(call) {
                        Class::Decimal(s) => s,
                        _ => AVG_SCALE_INCREMENT,
                    };
                    let value = Value::Double(*sum as f64 / *rows as f64);
                    let text = 10i128
                        .checked_pow(u32::from(scale))
                        .and_then(|p| sum.checked_mul(p))
                        .map(|scaled| {
                            decimal_text(rounded_div(scaled, i128::from(*rows)), scale, scale)
                        });
                    let text = text.or_else(|| {
                        // Past i128 when scaled: the double's digits.
                        Some(
                            format!("{:.*}", usize::from(scale), *sum as f64 / *rows as f64)
                                .into_bytes(),
                        )
                    });
                    (value, text)
                }
            }
            // A DECIMAL argument: the result is a DECIMAL value too.
            State::Exact { sum, rows, scale } => {
                let total = Decimal::new(*sum, *scale);
                let value = if call.func == AggFunc::Sum {
                    Some(total)
                } else {
                    total.checked_div(
                        Decimal::from_int(i128::from(*rows)),
                        scale.saturating_add(AVG_SCALE_INCREMENT),
                    )
                };
                match value {
                    Some(d) => (Value::Decimal(d), Some(d.to_string().into_bytes())),
                    // Past 38 digits once scaled: the double's digits.
                    None => (Value::Double(total.to_f64() / *rows as f64), None),
                }
            }
            State::Real { sum, rows } => {
                if call.func == AggFunc::Sum {
                    (Value::Double(*sum), None)
                } else {
                    (Value::Double(*sum / *rows as f64), None)
                }
            }
            State::Best(v) => (v.clone().unwrap_or(Value::Null), None),
        }
    }
}

/// What one DISTINCT entry costs besides its key (the set's node).
const DISTINCT_ENTRY_BYTES: usize = 48;

fn int_or_double(i: i128) -> Value {
    if let Ok(v) = i64::try_from(i) {
        Value::Int(v)
    } else if let Ok(v) = u64::try_from(i) {
        Value::UInt(v)
    } else {
        Value::Double(i as f64)
    }
}

/// `n / d` (d > 0) rounded half away from zero, as MariaDB rounds
/// decimals.
fn rounded_div(n: i128, d: i128) -> i128 {
    let (q, r) = (n / d, n % d);
    if r.unsigned_abs() * 2 >= d.unsigned_abs() {
        q + n.signum()
    } else {
        q
    }
}

/// The text of `units` × 10^-`scale`, written with `shown` fraction
/// digits (`shown` ≥ `scale`).
pub fn decimal_text(units: i128, scale: u8, shown: u8) -> Vec<u8> {
    let digits = units.unsigned_abs().to_string();
    let scale = usize::from(scale);
    let (int_part, frac) = if digits.len() > scale {
        digits.split_at(digits.len() - scale)
    } else {
        ("", digits.as_str())
    };
    let mut out = String::with_capacity(digits.len() + 3 + usize::from(shown));
    if units < 0 {
        out.push('-');
    }
    out.push_str(if int_part.is_empty() { "0" } else { int_part });
    if shown > 0 {
        out.push('.');
        for _ in frac.len()..scale {
            out.push('0');
        }
        out.push_str(frac);
        for _ in scale..usize::from(shown) {
            out.push('0');
        }
    }
    out.into_bytes()
}

/// A value of a DECIMAL(…, `scale`) expression as MariaDB prints it.
pub fn decimal_value_text(v: &Value, scale: u8) -> Option<Vec<u8>> {
    match v {
        Value::Int(i) => Some(decimal_text(i128::from(*i), 0, scale)),
        Value::UInt(u) => Some(decimal_text(i128::from(*u), 0, scale)),
        Value::Double(f) if f.is_finite() => {
            Some(format!("{:.*}", usize::from(scale), f).into_bytes())
        }
        Value::Decimal(d) => d.rescale(scale).map(|d| d.to_string().into_bytes()),
        other => crate::sqltypes::text(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(func: AggFunc, distinct: bool, class: Class) -> AggCall {
        AggCall {
            func,
            distinct,
            args: vec![Scalar::Column(0)],
            arg_class: class,
        }
    }

    fn run(c: &AggCall, values: &[Value]) -> (Value, Option<String>) {
        let mut budget = Budget::new(1000, 1 << 20);
        let mut acc = Accumulator::new(c);
        for v in values {
            acc.fold(c, std::slice::from_ref(v), &mut budget).unwrap();
        }
        let (v, t) = acc.finish(c);
        (v, t.map(|t| String::from_utf8(t).unwrap()))
    }

    #[test]
    fn decimal_texts_as_mariadb_prints_them() {
        assert_eq!(decimal_text(15000, 4, 4), b"1.5000");
        assert_eq!(decimal_text(-5000, 4, 4), b"-0.5000");
        assert_eq!(decimal_text(7, 4, 4), b"0.0007");
        assert_eq!(decimal_text(123, 0, 0), b"123");
        assert_eq!(decimal_text(-123, 0, 2), b"-123.00");
        assert_eq!(decimal_text(0, 0, 0), b"0");
        assert_eq!(rounded_div(50_000, 3), 16_667);
        assert_eq!(rounded_div(-50_000, 3), -16_667);
        assert_eq!(rounded_div(5, 10), 1, "half away from zero");
        assert_eq!(rounded_div(-5, 10), -1);
        assert_eq!(rounded_div(4, 10), 0);
        assert_eq!(
            decimal_value_text(&Value::Double(2.5), 4).unwrap(),
            b"2.5000"
        );
        assert_eq!(decimal_value_text(&Value::Int(3), 4).unwrap(), b"3.0000");
    }

    #[test]
    fn aggregates_fold_as_mariadb() {
        let ints = [Value::Int(1), Value::Int(2), Value::Null, Value::Int(2)];
        let sum = call(AggFunc::Sum, false, Class::Int);
        assert_eq!(run(&sum, &ints), (Value::Int(5), Some("5".into())));
        let avg = call(AggFunc::Avg, false, Class::Int);
        assert_eq!(run(&avg, &ints).1.as_deref(), Some("1.6667"));
        let avg_d = call(AggFunc::Avg, true, Class::Int);
        assert_eq!(run(&avg_d, &ints).1.as_deref(), Some("1.5000"));
        let sum_d = call(AggFunc::Sum, true, Class::Int);
        assert_eq!(run(&sum_d, &ints).1.as_deref(), Some("3"));
        let count = call(AggFunc::Count, false, Class::Int);
        assert_eq!(run(&count, &ints).0, Value::Int(3));
        let count_d = call(AggFunc::Count, true, Class::Int);
        assert_eq!(run(&count_d, &ints).0, Value::Int(2));
        let min = call(AggFunc::Min, false, Class::Int);
        assert_eq!(run(&min, &ints).0, Value::Int(1));
        let max = call(AggFunc::Max, false, Class::Str);
        let strs = [Value::Str("b".into()), Value::Str("ab".into())];
        assert_eq!(run(&max, &strs).0, Value::Str("b".into()));
        // Empty input: NULL for all but COUNT.
        for c in [&sum, &avg, &min] {
            assert_eq!(run(c, &[Value::Null]), (Value::Null, None));
        }
        assert_eq!(run(&count, &[]).0, Value::Int(0));
        // Past 64 bits, exactly.
        let big = [Value::UInt(u64::MAX), Value::UInt(u64::MAX)];
        assert_eq!(run(&sum, &big).1.as_deref(), Some("36893488147419103230"));
        // Doubles.
        let real = call(AggFunc::Avg, false, Class::Real);
        assert_eq!(
            run(&real, &[Value::Double(1.0), Value::Double(2.0)]).0,
            Value::Double(1.5)
        );
    }

    #[test]
    fn distinct_values_are_bounded() {
        let c = call(AggFunc::Count, true, Class::Int);
        let mut budget = Budget::new(2, 1 << 20);
        let mut acc = Accumulator::new(&c);
        for i in 0..2 {
            acc.fold(&c, &[Value::Int(i)], &mut budget).unwrap();
        }
        acc.fold(&c, &[Value::Int(1)], &mut budget).unwrap();
        let e = acc.fold(&c, &[Value::Int(7)], &mut budget).unwrap_err();
        assert_eq!(e.code, 1038, "{e}");
    }
}
