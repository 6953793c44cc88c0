//! A session's variables: the system variables a client reads (`@@name`,
//! `SHOW VARIABLES`) and the ones it may set, with their checks, and user
//! variables (`@name`), bounded in bytes per session.

use super::{Session, MAX_ALLOWED_PACKET_DEFAULT, SERVER_VERSION, VERSION_COMMENT};
use crate::exec::ddl;
use crate::exec::expr::Compiler;
use crate::outcome::{Outcome, SqlError};
use shoal_client::Value;
use sqlparser::ast::{ContextModifier, Expr, ObjectName, Set, SetAssignment};
use std::collections::BTreeMap;

/// Variables a client may read (`@@name`, `SHOW VARIABLES`) and their
/// defaults. Writable ones are listed in [`WRITABLE`].
pub(super) fn default_variables() -> BTreeMap<String, Value> {
    let s = |v: &str| Value::Str(v.to_string());
    let n = |v: u64| Value::UInt(v);
    [
        ("autocommit", n(1)),
        ("auto_increment_increment", n(1)),
        ("auto_increment_offset", n(1)),
        ("character_set_client", s("utf8mb4")),
        ("character_set_connection", s("utf8mb4")),
        ("character_set_database", s("utf8mb4")),
        ("character_set_results", s("utf8mb4")),
        ("character_set_server", s("utf8mb4")),
        ("character_set_system", s("utf8mb3")),
        ("collation_connection", s("utf8mb4_bin")),
        ("collation_database", s("utf8mb4_bin")),
        ("collation_server", s("utf8mb4_bin")),
        ("default_storage_engine", s("ndbcluster")),
        ("foreign_key_checks", n(1)),
        ("init_connect", s("")),
        ("interactive_timeout", n(28_800)),
        ("license", s("Apache-2.0")),
        ("lower_case_table_names", n(0)),
        ("max_allowed_packet", n(MAX_ALLOWED_PACKET_DEFAULT)),
        ("max_execution_time", n(0)),
        ("net_buffer_length", n(16_384)),
        ("net_read_timeout", n(30)),
        ("net_write_timeout", n(60)),
        // New tables read from any replica (NDB 8.0's default; RonDB's).
        ("ndb_read_backup", n(1)),
        ("performance_schema", n(0)),
        ("protocol_version", n(10)),
        ("query_cache_size", n(0)),
        ("query_cache_type", s("OFF")),
        ("sql_auto_is_null", n(0)),
        ("sql_mode", s("ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION")),
        ("sql_notes", n(1)),
        ("sql_safe_updates", n(0)),
        ("sql_select_limit", n(u64::MAX)),
        ("sql_warnings", n(0)),
        ("storage_engine", s("ndbcluster")),
        ("system_time_zone", s("UTC")),
        ("time_zone", s("SYSTEM")),
        ("transaction_isolation", s("READ-COMMITTED")),
        ("transaction_read_only", n(0)),
        ("tx_isolation", s("READ-COMMITTED")),
        ("tx_read_only", n(0)),
        ("unique_checks", n(1)),
        ("version", s(SERVER_VERSION)),
        ("version_comment", s(VERSION_COMMENT)),
        ("version_compile_machine", s(std::env::consts::ARCH)),
        ("version_compile_os", s(std::env::consts::OS)),
        ("wait_timeout", n(28_800)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Session variables a client may set (accepted and remembered; only
/// `autocommit` and `ndb_read_backup` change behaviour so far).
const WRITABLE: &[&str] = &[
    "autocommit",
    "auto_increment_increment",
    "auto_increment_offset",
    "character_set_client",
    "character_set_connection",
    "character_set_database",
    "character_set_results",
    "character_set_server",
    "collation_connection",
    "collation_database",
    "collation_server",
    "default_storage_engine",
    "foreign_key_checks",
    "interactive_timeout",
    "max_execution_time",
    "ndb_read_backup",
    "net_read_timeout",
    "net_write_timeout",
    "sql_auto_is_null",
    "sql_mode",
    "sql_notes",
    "sql_safe_updates",
    "sql_select_limit",
    "sql_warnings",
    "storage_engine",
    "time_zone",
    "transaction_isolation",
    "transaction_read_only",
    "tx_isolation",
    "tx_read_only",
    "unique_checks",
    "wait_timeout",
];

/// The bytes one session's user variables may hold together.
const USER_VARIABLE_BYTES_MAX: usize = 64 << 20;

impl Session {
    /// A SET's value: an expression, or a bare word (`ON`, `utf8mb4`).
    fn set_value(&self, name: &str, e: &Expr) -> Result<Value, SqlError> {
        if let Expr::Identifier(i) = e {
            if !i.value.starts_with('@') && i.quote_style.is_none() {
                if i.value.eq_ignore_ascii_case("DEFAULT") {
                    return default_variables()
                        .get(name)
                        .cloned()
                        .ok_or_else(|| unknown_variable(name));
                }
                return Ok(Value::Str(i.value.clone()));
            }
        }
        let env = self.env();
        Compiler {
            env: &env,
            scope: None,
            clause: "field list",
        }
        .compile(e)?
        .eval(&[])
    }

    /// Sets system variable `name` (lower case) of the session.
    async fn set_system(&mut self, name: &str, value: Value) -> Result<(), SqlError> {
        if !WRITABLE.contains(&name) {
            return Err(if self.variables.contains_key(name) {
                SqlError::new(
                    1238,
                    "HY000",
                    format!("Variable '{name}' is a read only variable"),
                )
            } else {
                unknown_variable(name)
            });
        }
        if name == "ndb_read_backup" {
            let on = switch_value(name, &value)?;
            self.variables
                .insert(name.into(), Value::UInt(u64::from(on)));
            return Ok(());
        }
        if name == "autocommit" {
            let on = switch_value(name, &value)?;
            if on && !self.autocommit {
                // Switching autocommit on commits the open transaction.
                self.implicit_commit().await?;
            }
            self.autocommit = on;
            self.variables
                .insert(name.into(), Value::UInt(u64::from(on)));
            return Ok(());
        }
        if name == "transaction_isolation" || name == "tx_isolation" {
            // Every isolation level reads committed rows (as in NDB).
            let v = Value::Str("READ-COMMITTED".into());
            self.variables
                .insert("transaction_isolation".into(), v.clone());
            self.variables.insert("tx_isolation".into(), v);
            return Ok(());
        }
        self.variables.insert(name.into(), value);
        Ok(())
    }

    pub(super) async fn set(&mut self, set: &Set) -> Result<Outcome, SqlError> {
        match set {
            Set::SetNames {
                charset_name,
                collation_name,
            } => {
                let cs = Value::Str(charset_name.value.clone());
                for v in [
                    "character_set_client",
                    "character_set_connection",
                    "character_set_results",
                ] {
                    self.variables.insert(v.into(), cs.clone());
                }
                let coll = collation_name
                    .clone()
                    .unwrap_or_else(|| "utf8mb4_bin".into());
                ddl::accept_collation(&coll);
                self.variables
                    .insert("collation_connection".into(), Value::Str(coll));
                Ok(Outcome::ok())
            }
            Set::SetNamesDefault {} => Ok(Outcome::ok()),
            Set::SetTransaction { .. } => Ok(Outcome::ok()),
            Set::SetTimeZone { value, .. } => {
                let v = self.set_value("time_zone", value)?;
                self.variables.insert("time_zone".into(), v);
                Ok(Outcome::ok())
            }
            Set::SingleAssignment {
                scope,
                variable,
                values,
                ..
            } => {
                let [value] = values.as_slice() else {
                    return Err(SqlError::syntax("SET takes one value per variable"));
                };
                self.assign(*scope, variable, value).await?;
                Ok(Outcome::ok())
            }
            Set::MultipleAssignments { assignments } => {
                for SetAssignment { scope, name, value } in assignments {
                    self.assign(*scope, name, value).await?;
                }
                Ok(Outcome::ok())
            }
            other => Err(SqlError::not_supported(format!("{other}"))),
        }
    }

    async fn assign(
        &mut self,
        scope: Option<ContextModifier>,
        name: &ObjectName,
        value: &Expr,
    ) -> Result<(), SqlError> {
        let parts: Vec<String> = name
            .0
            .iter()
            .filter_map(|p| p.as_ident().map(|i| i.value.clone()))
            .collect();
        let (global, var) = match parts.as_slice() {
            [one] if one.starts_with("@@") => (false, one[2..].to_string()),
            [one] if one.starts_with('@') => {
                let v = self.set_value("", value)?;
                let name = one[1..].to_ascii_lowercase();
                // Bounded in bytes per session, each value by the
                // expression bound, their sum by this.
                let bytes = |v: &Value| match v {
                    Value::Str(s) => s.len(),
                    Value::Bytes(b) => b.len(),
                    _ => 8,
                };
                let held: usize = self
                    .user_variables
                    .iter()
                    .filter(|(k, _)| **k != name)
                    .map(|(k, v)| k.len() + bytes(v))
                    .sum();
                if held + name.len() + bytes(&v) > USER_VARIABLE_BYTES_MAX {
                    return Err(SqlError::new(
                        1038,
                        "HY001",
                        format!("user variables would take more than {USER_VARIABLE_BYTES_MAX} bytes in this session; set fewer or shorter ones"),
                    ));
                }
                self.user_variables.insert(name, v);
                return Ok(());
            }
            [one] => (scope == Some(ContextModifier::Global), one.clone()),
            [s, one] if s.starts_with("@@") => (s[2..].eq_ignore_ascii_case("global"), one.clone()),
            _ => return Err(SqlError::syntax(format!("bad variable {name}"))),
        };
        let var = var.to_ascii_lowercase();
        if global {
            return Err(SqlError::new(
                1227,
                "42000",
                format!("Access denied; SET GLOBAL {var} is not supported by the SQL node yet"),
            ));
        }
        let v = self.set_value(&var, value)?;
        self.set_system(&var, v).await
    }
}

fn unknown_variable(name: &str) -> SqlError {
    SqlError::new(1193, "HY000", format!("Unknown system variable '{name}'"))
}

fn wrong_value(name: &str, v: &str) -> SqlError {
    SqlError::new(
        1231,
        "42000",
        format!("Variable '{name}' can't be set to the value of '{v}'"),
    )
}

/// An ON/OFF variable's value: ON, TRUE, OFF, FALSE, 1 or 0, as MariaDB
/// takes them (a binary string such as `X'4F4E'` by its text). Any other
/// number or word is refused (1231), as is NULL; a number with a fraction
/// or an exponent is of the wrong type (1232).
fn switch_value(name: &str, value: &Value) -> Result<bool, SqlError> {
    let word = |s: &str| match s.to_ascii_uppercase().as_str() {
        "ON" | "TRUE" | "1" => Ok(true),
        "OFF" | "FALSE" | "0" => Ok(false),
        _ => Err(wrong_value(name, s)),
    };
    match value {
        Value::Str(s) => word(s),
        Value::Bytes(b) => match std::str::from_utf8(b) {
            Ok(s) => word(s),
            Err(_) => Err(wrong_value(name, &String::from_utf8_lossy(b))),
        },
        Value::Int(1) | Value::UInt(1) => Ok(true),
        Value::Int(0) | Value::UInt(0) => Ok(false),
        Value::Int(n) => Err(wrong_value(name, &n.to_string())),
        Value::UInt(n) => Err(wrong_value(name, &n.to_string())),
        Value::Null => Err(wrong_value(name, "NULL")),
        _ => Err(SqlError::new(
            1232,
            "42000",
            format!("Incorrect argument type to variable '{name}'"),
        )),
    }
}
