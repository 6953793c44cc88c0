//! The statements other than reads and writes of rows: transaction
//! control, SET, USE, SHOW, DESCRIBE, EXPLAIN, DDL. They run boxed (see
//! `Session::statement_in_scope`): their futures are large and rare.

use super::Session;
use crate::catalog;
use crate::exec::error::from_shoal;
use crate::exec::split::Parsed;
use crate::exec::users;
use crate::exec::{ddl, dml, explain, show};
use crate::outcome::{Outcome, SqlError};
use shoal_client::ExecType;
use sqlparser::ast::{Statement, Use};

impl Session {
    pub(super) async fn other_statement(&mut self, parsed: &Parsed) -> Result<Outcome, SqlError> {
        let text = parsed.text.as_str();
        match &parsed.statement {
            Statement::StartTransaction {
                statements,
                exception,
                ..
            } => {
                if !statements.is_empty() || exception.is_some() {
                    return Err(SqlError::not_supported("BEGIN ... END blocks"));
                }
                self.implicit_commit().await?;
                self.in_transaction = true;
                Ok(Outcome::ok())
            }
            Statement::Commit { chain, .. } => {
                if *chain {
                    return Err(SqlError::not_supported("COMMIT AND CHAIN"));
                }
                self.implicit_commit().await?;
                Ok(Outcome::ok())
            }
            Statement::Rollback { chain, savepoint } => {
                if *chain || savepoint.is_some() {
                    return Err(SqlError::not_supported("savepoints and ROLLBACK AND CHAIN"));
                }
                self.in_transaction = false;
                if let Some(mut t) = self.txn.take() {
                    t.execute(ExecType::Rollback)
                        .await
                        .map_err(|e| from_shoal(&e))?;
                }
                Ok(Outcome::ok())
            }
            Statement::Set(set) => self.set(set).await,
            Statement::Use(u) => {
                let name = match u {
                    Use::Object(n) | Use::Database(n) | Use::Schema(n) => catalog::single_name(n)?,
                    other => return Err(SqlError::not_supported(format!("{other}"))),
                };
                self.use_db(&name).await?;
                Ok(Outcome::ok())
            }
            Statement::ShowDatabases { show_options, .. }
            | Statement::ShowSchemas { show_options, .. } => {
                show::databases(&self.cluster, show_options).await
            }
            Statement::ShowTables {
                full, show_options, ..
            } => show::tables(&self.env(), &self.cluster, *full, show_options).await,
            Statement::ShowColumns {
                full, show_options, ..
            } => {
                // SHOW COLUMNS FROM t [FROM db]: sqlparser keeps `t` as the
                // parent and a second FROM as part of the name.
                let Some(table) = show_options
                    .show_in
                    .as_ref()
                    .and_then(|i| i.parent_name.as_ref())
                else {
                    return Err(SqlError::syntax("SHOW COLUMNS needs FROM table"));
                };
                let pattern = match &show_options.filter_position {
                    Some(
                        sqlparser::ast::ShowStatementFilterPosition::Infix(f)
                        | sqlparser::ast::ShowStatementFilterPosition::Suffix(f),
                    ) => match f {
                        sqlparser::ast::ShowStatementFilter::Like(p) => Some(p.clone()),
                        other => {
                            return Err(SqlError::not_supported(format!("SHOW COLUMNS {other}")))
                        }
                    },
                    None => None,
                };
                show::columns(&self.env(), &self.cluster, table, None, *full, pattern).await
            }
            Statement::Explain {
                statement,
                analyze: false,
                query_plan: false,
                estimate: false,
                format: None,
                options: None,
                ..
            } => {
                let first = explain::explain(&self.env(), &self.cluster, statement, text).await;
                match first {
                    // Planned on a definition another node has changed since.
                    Err(e) if self.stale_explains(&e).await => {
                        explain::explain(&self.env(), &self.cluster, statement, text).await
                    }
                    other => other,
                }
            }
            Statement::ExplainTable { table_name, .. } => {
                show::columns(&self.env(), &self.cluster, table_name, None, false, None).await
            }
            Statement::ShowCreate { obj_type, obj_name } => match obj_type {
                sqlparser::ast::ShowCreateObject::Table => {
                    show::create_table(&self.env(), &self.cluster, obj_name).await
                }
                other => Err(SqlError::not_supported(format!("SHOW CREATE {other}"))),
            },
            // GLOBAL or SESSION: sessions start from the global values.
            Statement::ShowVariables { filter, .. } => {
                show::variables(&self.env(), filter.as_ref())
            }
            Statement::ShowStatus { filter, .. } => show::status(filter.as_ref()),
            Statement::ShowVariable { variable } => {
                let first = variable.first().map(|w| w.value.to_ascii_uppercase());
                match first.as_deref() {
                    Some("WARNINGS" | "ERRORS" | "COUNT") => {
                        show::warnings(&self.diagnostics, text)
                    }
                    Some("ENGINES") | Some("STORAGE") => Ok(show::engines()),
                    Some("INDEX" | "INDEXES" | "KEYS") => {
                        show::index(&self.env(), &self.cluster, variable).await
                    }
                    _ => Err(SqlError::not_supported(format!("{}", parsed.statement))),
                }
            }
            Statement::CreateDatabase {
                db_name,
                if_not_exists,
                ..
            } => {
                users::privileges::check_database(&catalog::single_name(db_name)?)?;
                self.implicit_commit().await?;
                ddl::create_database(&self.cluster, db_name, *if_not_exists).await
            }
            Statement::CreateSchema {
                schema_name,
                if_not_exists,
                ..
            } => {
                self.implicit_commit().await?;
                let sqlparser::ast::SchemaName::Simple(name) = schema_name else {
                    return Err(SqlError::not_supported(format!("{schema_name}")));
                };
                users::privileges::check_database(&catalog::single_name(name)?)?;
                ddl::create_database(&self.cluster, name, *if_not_exists).await
            }
            Statement::CreateTable(ct) => {
                self.implicit_commit().await?;
                ddl::create_table(&self.env(), &self.cluster, ct, parsed.partitioning.as_ref())
                    .await
            }
            Statement::CreateIndex(ci) => {
                self.implicit_commit().await?;
                ddl::create_index(&self.env(), &self.cluster, ci).await
            }
            Statement::AlterTable(at) => {
                self.implicit_commit().await?;
                ddl::alter_table(&self.env(), &self.cluster, at).await
            }
            Statement::Truncate(t) => {
                self.implicit_commit().await?;
                dml::truncate(&self.env(), &self.cluster, t).await
            }
            Statement::Drop {
                object_type,
                if_exists,
                names,
                table,
                ..
            } => {
                let kind = ddl::drop_kind(object_type)
                    .ok_or_else(|| SqlError::not_supported(format!("DROP {object_type}")))?;
                self.implicit_commit().await?;
                match kind {
                    "table" => {
                        ddl::drop_tables(&self.env(), &self.cluster, names, *if_exists).await
                    }
                    "index" => {
                        ddl::drop_index_statement(
                            &self.env(),
                            &self.cluster,
                            names,
                            table.as_ref(),
                            *if_exists,
                        )
                        .await
                    }
                    _ => {
                        let [name] = names.as_slice() else {
                            return Err(SqlError::syntax("DROP DATABASE drops one database"));
                        };
                        let name = catalog::single_name(name)?;
                        users::privileges::check_database(&name)?;
                        let out = ddl::drop_database(&self.cluster, &name, *if_exists).await?;
                        if self.database.as_deref() == Some(name.as_str()) {
                            self.database = None;
                        }
                        Ok(out)
                    }
                }
            }
            Statement::UnlockTables => Ok(Outcome::ok()),
            other => Err(SqlError::not_supported(statement_kind(other))),
        }
    }

    pub(super) async fn use_db(&mut self, name: &str) -> Result<(), SqlError> {
        // Database privileges are read again at USE, as MySQL does.
        self.privileges = None;
        let privileges = self.privileges().await;
        let exists = catalog::database_exists(&self.cluster, name);
        if !users::privileges::scope(privileges, exists).await? {
            return Err(catalog::unknown_database(name));
        }
        self.database = Some(name.to_string());
        Ok(())
    }
}

/// A statement's kind for "not supported" (its first words, not its
/// whole text).
fn statement_kind(s: &Statement) -> String {
    let text = s.to_string();
    text.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
