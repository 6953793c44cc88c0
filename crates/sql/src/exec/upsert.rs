//! INSERT ... ON DUPLICATE KEY UPDATE.
//!
//! Row by row, as MySQL goes (a later row sees what an earlier one did):
//! the row holding the new row's primary key, else the first row holding
//! one of its unique-index values (in the table's index order), is read
//! with an exclusive lock; if there is none the new row is inserted,
//! otherwise the assignments are applied to that row. Affected rows
//! count 1 per inserted row, 2 per updated row that changed and 0 per
//! one left as it was, as MySQL does without CLIENT_FOUND_ROWS.
//!
//! In the assignments a column names the existing row's value (as
//! updated by the assignments before it), `VALUES(col)` the value the
//! statement would have inserted, and with `INSERT ... AS new[(a, b)]`
//! `new.col` (or a column alias) names it too. They compile over the
//! existing row followed by the inserted one: the inserted row's
//! columns are named by [`inserted_name`], which no SQL name can spell.

use super::dml::{changed_columns, compile_sets, execute, queue_change};
use super::error::from_shoal;
use super::expr::{Compiler, Scalar, Scope};
use super::insert::{read_own_row, Written};
use super::select::Target;
use super::unique_ignore::UniqueGuard;
use super::Env;
use crate::outcome::SqlError;
use crate::sqltypes::coerce;
use shoal_client::{Cluster, ExecType, Transaction, Value};
use shoal_types::TableDef;
use sqlparser::ast::{
    visit_expressions_mut, Assignment, Expr, FunctionArg, FunctionArgExpr, FunctionArguments,
    Ident, InsertAliases,
};
use std::ops::ControlFlow;

/// A compiled ON DUPLICATE KEY UPDATE clause.
pub struct OnDuplicate {
    /// Column and its new value, over the existing row followed by the
    /// inserted one, in the order written.
    sets: Vec<(u16, Scalar)>,
}

/// The name the inserted row's column `name` goes by in the assignments
/// (a NUL byte cannot appear in an identifier the parser accepts).
fn inserted_name(name: &str) -> String {
    format!("\0inserted\0{name}")
}

/// `e`'s references to the inserted row made into [`inserted_name`]s:
/// `VALUES(col)`, and with a row alias `alias.col` and column aliases.
fn rewrite(
    e: &Expr,
    def: &TableDef,
    columns: &[u16],
    alias: Option<&InsertAliases>,
) -> Result<Expr, SqlError> {
    let mut e = e.clone();
    let row_alias = alias.and_then(|a| a.row_alias.0.last().and_then(|p| p.as_ident()).cloned());
    let col_aliases: &[Ident] = alias
        .and_then(|a| a.col_aliases.as_deref())
        .unwrap_or_default();
    if !col_aliases.is_empty() && col_aliases.len() != columns.len() {
        return Err(SqlError::new(
            1136,
            "21S01",
            "Column count doesn't match value count at row 1",
        ));
    }
    // A name of the inserted row: a column alias, else a column's name.
    let inserted = |name: &str| -> Option<String> {
        if let Some(i) = col_aliases
            .iter()
            .position(|a| a.value.eq_ignore_ascii_case(name))
        {
            let c = columns[i];
            return Some(inserted_name(&def.columns[usize::from(c)].name));
        }
        if !col_aliases.is_empty() {
            return None;
        }
        def.columns
            .iter()
            .find(|c| c.name.eq_ignore_ascii_case(name))
            .map(|c| inserted_name(&c.name))
    };
    let mut error = None;
    let _ = visit_expressions_mut(&mut e, |x| {
        let replaced = match &*x {
            Expr::Function(f)
                if f.name.0.len() == 1 && f.name.to_string().eq_ignore_ascii_case("values") =>
            {
                let arg = match &f.args {
                    FunctionArguments::List(l) if l.args.len() == 1 => match &l.args[0] {
                        FunctionArg::Unnamed(FunctionArgExpr::Expr(a)) => Some(a),
                        _ => None,
                    },
                    _ => None,
                };
                let name = match arg {
                    // Already made an inserted name (a column alias).
                    Some(Expr::Identifier(i)) if i.value.starts_with('\0') => Some(i.value.clone()),
                    Some(Expr::Identifier(i)) => def
                        .columns
                        .iter()
                        .find(|c| c.name.eq_ignore_ascii_case(&i.value))
                        .map(|c| inserted_name(&c.name)),
                    Some(Expr::CompoundIdentifier(parts)) => parts.last().and_then(|i| {
                        def.columns
                            .iter()
                            .find(|c| c.name.eq_ignore_ascii_case(&i.value))
                            .map(|c| inserted_name(&c.name))
                    }),
                    _ => None,
                };
                match name {
                    Some(n) => Some(Expr::Identifier(Ident::new(n))),
                    None => {
                        error = Some(SqlError::new(
                            1054,
                            "42S22",
                            format!("Unknown column in '{x}' in 'field list'"),
                        ));
                        return ControlFlow::Break(());
                    }
                }
            }
            Expr::CompoundIdentifier(parts)
                if parts.len() == 2
                    && row_alias
                        .as_ref()
                        .is_some_and(|a| a.value.eq_ignore_ascii_case(&parts[0].value)) =>
            {
                match inserted(&parts[1].value) {
                    Some(n) => Some(Expr::Identifier(Ident::new(n))),
                    None => {
                        error = Some(SqlError::new(
                            1054,
                            "42S22",
                            format!("Unknown column '{x}' in 'field list'"),
                        ));
                        return ControlFlow::Break(());
                    }
                }
            }
            // A bare column alias of the inserted row (a table column of
            // the same name wins, as it would in MySQL's name lookup).
            Expr::Identifier(i)
                if !col_aliases.is_empty()
                    && !def
                        .columns
                        .iter()
                        .any(|c| c.name.eq_ignore_ascii_case(&i.value)) =>
            {
                inserted(&i.value).map(|n| Expr::Identifier(Ident::new(n)))
            }
            _ => None,
        };
        if let Some(r) = replaced {
            *x = r;
        }
        ControlFlow::Continue(())
    });
    match error {
        Some(e) => Err(e),
        None => Ok(e),
    }
}

impl OnDuplicate {
    /// Compiles `assignments` for a statement inserting `columns` into
    /// `target`.
    pub fn compile(
        env: &Env<'_>,
        target: &Target,
        columns: &[u16],
        alias: Option<&InsertAliases>,
        assignments: &[Assignment],
    ) -> Result<OnDuplicate, SqlError> {
        let def = target.table.def();
        // The existing row's columns, then the inserted row's.
        let mut both = def.clone();
        for c in &def.columns {
            let mut inserted = c.clone();
            inserted.name = inserted_name(&c.name);
            both.columns.push(inserted);
        }
        let scope = Scope {
            def: &both,
            names: target.names.clone(),
            aggregates: None,
            aliases: &[],
        };
        let c = Compiler {
            env,
            scope: Some(&scope),
            clause: "field list",
        };
        let sets = compile_sets(target, assignments, |e| {
            c.compile(&rewrite(e, def, columns, alias)?)
        })?;
        Ok(OnDuplicate { sets })
    }

    /// Inserts or updates each of `rows` (whole rows, converted).
    pub async fn run(
        &self,
        cluster: &Cluster,
        txn: &mut Transaction,
        target: &Target,
        rows: &[Vec<Value>],
    ) -> Result<Written, SqlError> {
        let def = target.table.def();
        let record = target.table.full_record();
        let guard = UniqueGuard::new(cluster, &target.table).await?;
        let width = def.columns.len();
        let mut written = Written {
            went_in: Vec::with_capacity(rows.len()),
            ..Written::default()
        };
        for (i, row) in rows.iter().enumerate() {
            let own = read_own_row(txn, &record, def, row)?;
            let holders = match &guard {
                Some(g) => g.holders(txn, &record, row, def).await?,
                None => {
                    execute(txn, ExecType::NoCommit, def, &[], &[]).await?;
                    Vec::new()
                }
            };
            let existing = match txn.row(own) {
                Some(found) => Some(
                    (0..width as u16)
                        .map(|c| found.get_idx(c).unwrap_or(Value::Null))
                        .collect::<Vec<Value>>(),
                ),
                None => holders.into_iter().next(),
            };
            let Some(old) = existing else {
                let op = txn.insert(&record, row).map_err(|e| from_shoal(&e))?;
                execute(txn, ExecType::NoCommit, def, &[op], &[row.as_slice()]).await?;
                written.affected += 1;
                written.went_in.push(true);
                continue;
            };
            written.duplicates += 1;
            written.went_in.push(false);
            // The existing row as the assignments change it, then the
            // inserted row.
            let mut both = old.clone();
            both.extend(row.iter().cloned());
            for (col, s) in &self.sets {
                let v = s.eval(&both)?;
                both[usize::from(*col)] = coerce(&v, &def.columns[usize::from(*col)], i + 1)?;
            }
            both.truncate(width);
            let new = both;
            let diff = changed_columns(&old, &new);
            if diff.is_empty() {
                continue;
            }
            let op = queue_change(txn, &target.table, &old, &new, &diff)?;
            execute(txn, ExecType::NoCommit, def, &[op], &[new.as_slice()]).await?;
            written.affected += 2;
        }
        // The session commits an autocommit statement's transaction.
        Ok(written)
    }
}
