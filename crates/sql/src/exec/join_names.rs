//! The names of a join's wide row, and the rewriting of a statement's
//! column references into them.
//!
//! A join runs every clause over one wide row: each table's columns
//! after the ones before it ([`super::join`]). Column `c` of table number
//! `n` is named `"\0n\0c"` there ([`hidden_name`]), a name no SQL
//! identifier can spell, so it never collides with a column or an alias
//! the statement names. Every clause (ON, WHERE, the select list, GROUP
//! BY, HAVING, ORDER BY) is rewritten to these names before compiling,
//! so the single-table compiler ([`super::expr`]) serves joins
//! unchanged; the rewriting is also where `t.c` finds its table, where
//! an unqualified name two tables have is 1052, and where a column
//! `USING` merged answers to the earlier table's. Once rewritten, a
//! condition's names tell which tables it reads, which is how access
//! planning picks the conditions a table's reads can use.

use super::join::Joined;
use crate::outcome::SqlError;
use sqlparser::ast::{
    visit_expressions_mut, BinaryOperator, Expr, Ident, Query, Spanned, VisitMut, VisitorMut,
};
use std::collections::BTreeSet;
use std::ops::ControlFlow;

/// The wide row's name for column `column` of table number `table`.
pub(super) fn hidden_name(table: usize, column: &str) -> String {
    format!("\0{table}\0{column}")
}

/// `(table number, column name)` of a [`hidden_name`].
fn parse_hidden(name: &str) -> Option<(usize, &str)> {
    let rest = name.strip_prefix('\0')?;
    let (table, column) = rest.split_once('\0')?;
    Some((table.parse().ok()?, column))
}

/// The column name a result shows for a [`hidden_name`] (others as they
/// are).
pub fn shown_name(name: &str) -> &str {
    parse_hidden(name).map_or(name, |(_, c)| c)
}

/// `USING (c, ...)`: for each column, the earlier table that has it
/// equals table `me`'s.
/// Also returns table `me`'s columns it merges and the wide-row columns
/// they merge into.
pub(super) fn using(
    tables: &[Joined],
    me: usize,
    names: &[sqlparser::ast::ObjectName],
) -> Result<(Expr, Vec<u16>, Vec<u16>), SqlError> {
    let mut parts = Vec::new();
    let mut merged = Vec::new();
    let mut common = Vec::new();
    for n in names {
        let name = n.to_string();
        let Some(right) = tables[me].target.scope().column(&name) else {
            return Err(super::expr::unknown_column(&name, "from clause"));
        };
        let right_name = &tables[me].target.table.def().columns[usize::from(right)].name;
        // The earlier table with the column (one merged by an earlier
        // USING is the same column as the one it merged into).
        let mut lefts = tables[..me].iter().enumerate().filter_map(|(i, t)| {
            t.target
                .scope()
                .column(&name)
                .filter(|c| !t.merged.contains(c))
                .map(|c| (i, t.target.table.def().columns[usize::from(c)].name.clone()))
        });
        let (Some((li, left_name)), None) = (lefts.next(), lefts.next()) else {
            let several = tables[..me]
                .iter()
                .filter(|t| t.target.scope().column(&name).is_some())
                .count()
                > 1;
            return Err(if several {
                SqlError::new(
                    1052,
                    "23000",
                    format!("Column '{name}' in from clause is ambiguous"),
                )
            } else {
                super::expr::unknown_column(&name, "from clause")
            });
        };
        merged.push(right);
        if let Some(c) = tables[li].target.scope().column(&left_name) {
            common.push((tables[li].offset + usize::from(c)) as u16);
        }
        parts.push(Expr::BinaryOp {
            left: Box::new(Expr::Identifier(Ident::new(hidden_name(li, &left_name)))),
            op: BinaryOperator::Eq,
            right: Box::new(Expr::Identifier(Ident::new(hidden_name(me, right_name)))),
        });
    }
    let on = and_all(parts).ok_or_else(|| SqlError::syntax("USING needs a column"))?;
    Ok((on, merged, common))
}

/// `e` with column references to `tables` made [`hidden_name`]s (spans
/// kept, so results are named by the statement's text). A name no table
/// has is left alone (a select-list alias, or the compiler's 1054).
pub(super) fn rewrite(tables: &[Joined], e: &Expr, clause: &str) -> Result<Expr, SqlError> {
    let mut e = e.clone();
    let mut error = None;
    let _ = outside_subqueries(&mut e, |x| {
        let span = x.span();
        let found = match &*x {
            Expr::Identifier(i) if i.value.starts_with('\0') => None,
            Expr::Identifier(i) => {
                // A column USING merged answers to the earlier table's.
                let mut hits = tables.iter().enumerate().filter_map(|(n, t)| {
                    t.target
                        .scope()
                        .column(&i.value)
                        .filter(|c| !t.merged.contains(c))
                        .map(|c| hidden_name(n, &t.target.table.def().columns[usize::from(c)].name))
                });
                match (hits.next(), hits.next()) {
                    (Some(h), None) => Some(h),
                    (Some(_), Some(_)) => {
                        error = Some(SqlError::new(
                            1052,
                            "23000",
                            format!("Column '{}' in {clause} is ambiguous", i.value),
                        ));
                        return ControlFlow::Break(());
                    }
                    _ => None,
                }
            }
            Expr::CompoundIdentifier(parts) if parts.len() == 2 || parts.len() == 3 => {
                let qualifier = if parts.len() == 2 {
                    parts[0].value.clone()
                } else {
                    format!("{}.{}", parts[0].value, parts[1].value)
                };
                let column = &parts[parts.len() - 1].value;
                tables
                    .iter()
                    .enumerate()
                    .find(|(_, t)| t.target.names.contains(&qualifier))
                    .and_then(|(n, t)| {
                        t.target.scope().column(column).map(|c| {
                            hidden_name(n, &t.target.table.def().columns[usize::from(c)].name)
                        })
                    })
            }
            _ => None,
        };
        if let Some(name) = found {
            *x = Expr::Identifier(Ident {
                value: name,
                quote_style: None,
                span,
            });
        }
        ControlFlow::Continue(())
    });
    match error {
        Some(e) => Err(e),
        None => Ok(e),
    }
}

/// Calls `f` on every expression of `e` (children first) except those
/// inside a subquery: a subquery's names are its own tables' (it runs
/// on its own, [`super::subquery`]).
fn outside_subqueries(
    e: &mut Expr,
    f: impl FnMut(&mut Expr) -> ControlFlow<()>,
) -> ControlFlow<()> {
    struct Outside<F> {
        depth: usize,
        f: F,
    }
    impl<F: FnMut(&mut Expr) -> ControlFlow<()>> VisitorMut for Outside<F> {
        type Break = ();
        fn pre_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
            self.depth += 1;
            ControlFlow::Continue(())
        }
        fn post_visit_query(&mut self, _q: &mut Query) -> ControlFlow<()> {
            self.depth -= 1;
            ControlFlow::Continue(())
        }
        fn post_visit_expr(&mut self, e: &mut Expr) -> ControlFlow<()> {
            if self.depth == 0 {
                (self.f)(e)
            } else {
                ControlFlow::Continue(())
            }
        }
    }
    e.visit(&mut Outside { depth: 0, f })
}

/// The tables a rewritten expression refers to.
pub(super) fn tables_of(e: &Expr) -> BTreeSet<usize> {
    let mut out = BTreeSet::new();
    let mut e = e.clone();
    let _ = visit_expressions_mut(&mut e, |x| {
        if let Expr::Identifier(i) = &*x {
            if let Some((t, _)) = parse_hidden(&i.value) {
                out.insert(t);
            }
        }
        ControlFlow::<()>::Continue(())
    });
    out
}

/// `e` with table `table`'s wide names made its plain column names (to
/// compile over that table alone).
pub(super) fn localize(e: &Expr, table: usize) -> Expr {
    let mut e = e.clone();
    let _ = visit_expressions_mut(&mut e, |x| {
        if let Expr::Identifier(i) = &*x {
            if let Some((t, c)) = parse_hidden(&i.value) {
                if t == table {
                    let plain = Ident {
                        value: c.to_string(),
                        quote_style: Some('`'),
                        span: i.span,
                    };
                    *x = Expr::Identifier(plain);
                }
            }
        }
        ControlFlow::<()>::Continue(())
    });
    e
}

/// The AND-ed parts of a condition.
pub fn conjuncts(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            let mut out = conjuncts(left);
            out.extend(conjuncts(right));
            out
        }
        Expr::Nested(inner) => conjuncts(inner),
        other => vec![other],
    }
}

pub(super) fn and_all(parts: Vec<Expr>) -> Option<Expr> {
    parts.into_iter().reduce(|a, b| Expr::BinaryOp {
        left: Box::new(Expr::Nested(Box::new(a))),
        op: BinaryOperator::And,
        right: Box::new(Expr::Nested(Box::new(b))),
    })
}

/// `table.column = expression of earlier tables` (either way round):
/// the column's own name and the expression.
pub(super) fn equality_on(e: &Expr, table: usize) -> Option<(&str, &Expr)> {
    let Expr::BinaryOp {
        left,
        op: BinaryOperator::Eq,
        right,
    } = e
    else {
        return None;
    };
    for (a, b) in [
        (left.as_ref(), right.as_ref()),
        (right.as_ref(), left.as_ref()),
    ] {
        if let Expr::Identifier(i) = a {
            if let Some((t, c)) = parse_hidden(&i.value) {
                if t == table && tables_of(b).iter().all(|&x| x < table) {
                    return Some((c, b));
                }
            }
        }
    }
    None
}
