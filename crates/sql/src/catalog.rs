//! SQL's names over Shoal's: databases and tables as SQL sees them.
//!
//! A Shoal table named `db.t` is table `t` of SQL database `db` (a
//! database mgmd keeps, `Cluster::create_database`); a table whose name
//! has no dot — one the native API made — is in database [`SHOAL_DATABASE`],
//! which always exists. `information_schema` and `mysql` are reported as
//! existing databases, for tools that look for them: `mysql` is empty,
//! and `information_schema`'s tables are answered by
//! `exec::information_schema`, never looked up here.
//!
//! Invariants: every name handed to the cluster is built here
//! ([`TableName::shoal_name`]), and table names are compared exactly
//! (case-sensitive, as MySQL's on Linux); column names are matched
//! case-insensitively where statements name them. Every database or
//! table a statement names is checked against the session's privileges
//! here ([`privileges`]: 1044 for a database not granted), and SHOW
//! DATABASES lists only the databases granted.

use crate::exec::error::from_shoal;
use crate::exec::users::privileges;
use crate::outcome::SqlError;
use crate::sqltypes::{sql_type_name, value_text};
use shoal_client::{Cluster, ErrorCode, Table};
use shoal_types::schema::{database_of, PRIMARY_INDEX_NAME};
use shoal_types::{ColumnType, TableDef, Value};
use sqlparser::ast::ObjectName;

/// The database of the tables whose Shoal names have no database part.
pub const SHOAL_DATABASE: &str = "shoal";
/// Databases reported for tools, always empty here.
pub const SYSTEM_DATABASES: &[&str] = &["information_schema", "mysql"];

/// A table as SQL names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TableName {
    pub database: String,
    pub table: String,
}

impl TableName {
    /// The name of the table in the cluster.
    pub fn shoal_name(&self) -> String {
        if self.database == SHOAL_DATABASE {
            self.table.clone()
        } else {
            format!("{}.{}", self.database, self.table)
        }
    }

    /// SQL's name for the cluster's table `name`.
    pub fn from_shoal(name: &str) -> TableName {
        match name.split_once('.') {
            Some((d, t)) => TableName {
                database: d.to_string(),
                table: t.to_string(),
            },
            None => TableName {
                database: SHOAL_DATABASE.to_string(),
                table: name.to_string(),
            },
        }
    }

    /// `db.table` as MySQL's messages show it.
    pub fn shown(&self) -> String {
        format!("{}.{}", self.database, self.table)
    }
}

pub fn no_database_selected() -> SqlError {
    SqlError::new(1046, "3D000", "No database selected")
}

pub fn unknown_database(name: &str) -> SqlError {
    SqlError::new(1049, "42000", format!("Unknown database '{name}'"))
}

pub fn no_such_table(name: &TableName) -> SqlError {
    SqlError::new(
        1146,
        "42S02",
        format!("Table '{}' doesn't exist", name.shown()),
    )
}

/// Resolves `name` (`t` in the current database, or `db.t`).
pub fn resolve(name: &ObjectName, current: Option<&str>) -> Result<TableName, SqlError> {
    let parts: Vec<String> = name
        .0
        .iter()
        .map(|p| {
            p.as_ident()
                .map(|i| i.value.clone())
                .ok_or_else(|| SqlError::syntax(format!("bad table name {name}")))
        })
        .collect::<Result<_, _>>()?;
    let resolved = match parts.as_slice() {
        [table] => TableName {
            database: current.ok_or_else(no_database_selected)?.to_string(),
            table: table.clone(),
        },
        [database, table] => TableName {
            database: database.clone(),
            table: table.clone(),
        },
        _ => return Err(SqlError::syntax(format!("bad table name {name}"))),
    };
    privileges::check_database(&resolved.database)?;
    Ok(resolved)
}

/// A single identifier (a database, index or column name).
pub fn single_name(name: &ObjectName) -> Result<String, SqlError> {
    match name.0.as_slice() {
        [p] => p
            .as_ident()
            .map(|i| i.value.clone())
            .ok_or_else(|| SqlError::syntax(format!("bad name {name}"))),
        _ => Err(SqlError::syntax(format!("bad name {name}"))),
    }
}

/// Every database the session may use, sorted: the cluster's SQL
/// databases, `shoal`, and the system ones.
pub async fn databases(cluster: &Cluster) -> Result<Vec<String>, SqlError> {
    let mut all = cluster.databases().await.map_err(|e| from_shoal(&e))?;
    all.push(SHOAL_DATABASE.to_string());
    all.extend(SYSTEM_DATABASES.iter().map(|s| s.to_string()));
    all.retain(|d| privileges::may_see(d));
    all.sort();
    all.dedup();
    Ok(all)
}

/// Whether database `name` exists; 1044 first if the session may not
/// use it (whether it exists or not, as MySQL answers).
pub async fn database_exists(cluster: &Cluster, name: &str) -> Result<bool, SqlError> {
    privileges::check_database(name)?;
    if name == SHOAL_DATABASE || SYSTEM_DATABASES.contains(&name) {
        return Ok(true);
    }
    Ok(cluster
        .databases()
        .await
        .map_err(|e| from_shoal(&e))?
        .iter()
        .any(|d| d == name))
}

/// The tables of database `database`, by name.
pub async fn tables_of(cluster: &Cluster, database: &str) -> Result<Vec<TableDef>, SqlError> {
    privileges::check_database(database)?;
    let mut tables: Vec<TableDef> = cluster
        .tables()
        .await
        .map_err(|e| from_shoal(&e))?
        .into_iter()
        .filter(|t| match database_of(&t.name) {
            Some(d) => d == database,
            None => database == SHOAL_DATABASE,
        })
        .collect();
    tables.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(tables)
}

/// The table called `name` (1146 if it does not exist).
pub async fn table(cluster: &Cluster, name: &TableName) -> Result<Table, SqlError> {
    privileges::check_database(&name.database)?;
    if SYSTEM_DATABASES.contains(&name.database.as_str()) {
        return Err(no_such_table(name));
    }
    match cluster.table(&name.shoal_name()).await {
        Ok(t) if t.def().options.index_of.is_none() => Ok(t),
        Ok(_) => Err(no_such_table(name)),
        Err(e) if e.code == ErrorCode::NoSuchTable => Err(no_such_table(name)),
        Err(e) => Err(from_shoal(&e)),
    }
}

/// The table called `name` as mgmd has it now, not as this node cached
/// it: for SHOW, DESCRIBE and DDL, which must not answer from a
/// definition another node has changed since (they are rare; one request
/// to mgmd each).
pub async fn fresh_table(cluster: &Cluster, name: &TableName) -> Result<Table, SqlError> {
    cluster.invalidate_table(&name.shoal_name());
    table(cluster, name).await
}

/// Quotes an identifier as MySQL's `SHOW CREATE TABLE` does.
pub fn quote(name: &str) -> String {
    format!("`{}`", name.replace('`', "``"))
}

/// A value as an SQL literal (defaults in `SHOW CREATE TABLE`).
pub fn literal(v: &Value) -> String {
    match v {
        Value::Null => "NULL".into(),
        other => {
            let text = String::from_utf8_lossy(&value_text(other)).into_owned();
            format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
        }
    }
}

/// The NDB_TABLE options a table's comment carries. READ_BACKUP is said
/// either way: a table made through SQL is READ_BACKUP unless told
/// otherwise (`ndb_read_backup`), so a dump replays a table without it
/// right only if its comment says so.
pub fn ndb_table_comment(def: &TableDef) -> String {
    let mut options = vec![if def.options.read_backup {
        "READ_BACKUP=1"
    } else {
        "READ_BACKUP=0"
    }];
    if def.options.no_logging {
        options.push("NOLOGGING=1");
    }
    format!("NDB_TABLE={}", options.join(","))
}

/// `SHOW CREATE TABLE`'s statement for a table (best effort: what Shoal
/// keeps of it).
pub fn show_create(def: &TableDef, name: &TableName) -> String {
    let col_names = |ids: &[u16]| -> String {
        ids.iter()
            .map(|&c| quote(&def.columns[usize::from(c)].name))
            .collect::<Vec<_>>()
            .join(",")
    };
    let mut lines = Vec::new();
    for c in &def.columns {
        let mut line = format!("  {} {}", quote(&c.name), sql_type_name(c.ty));
        if !c.nullable {
            line.push_str(" NOT NULL");
        }
        match &c.default {
            Some(v) => line.push_str(&format!(" DEFAULT {}", literal(v))),
            None if c.nullable => line.push_str(" DEFAULT NULL"),
            None => {}
        }
        if c.auto_increment {
            line.push_str(" AUTO_INCREMENT");
        }
        lines.push(line);
    }
    let hash = if def.options.hash_only_primary_key {
        " USING HASH"
    } else {
        ""
    };
    lines.push(format!(
        "  PRIMARY KEY ({}){hash}",
        col_names(&def.primary_key)
    ));
    for u in &def.unique_indexes {
        lines.push(format!(
            "  UNIQUE KEY {} ({})",
            quote(&u.name),
            col_names(&u.columns)
        ));
    }
    for i in def
        .indexes
        .iter()
        .filter(|i| !i.dropped && i.name != PRIMARY_INDEX_NAME)
    {
        lines.push(format!(
            "  KEY {} ({})",
            quote(&i.name),
            col_names(&i.columns)
        ));
    }
    let mut out = format!(
        "CREATE TABLE {} (\n{}\n) ENGINE=ndbcluster DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin",
        quote(&name.table),
        lines.join(",\n")
    );
    out.push_str(&format!(" COMMENT='{}'", ndb_table_comment(def)));
    out
}

/// What `DESCRIBE` shows in `Key` for a column: `PRI` (in the primary
/// key), `UNI` (a one-column unique index), `MUL` (first column of
/// another index), or nothing.
pub fn key_flag(def: &TableDef, col: u16) -> &'static str {
    if def.primary_key.contains(&col) {
        "PRI"
    } else if def
        .unique_indexes
        .iter()
        .any(|u| u.columns.first() == Some(&col) && u.columns.len() == 1)
    {
        "UNI"
    } else if def
        .indexes
        .iter()
        .any(|i| !i.dropped && i.columns.first() == Some(&col))
        || def
            .unique_indexes
            .iter()
            .any(|u| u.columns.first() == Some(&col))
    {
        "MUL"
    } else {
        ""
    }
}

/// The collation a column shows (`NULL` for non-text columns).
pub fn collation(ty: ColumnType) -> Option<&'static str> {
    crate::sqltypes::is_text(ty).then_some("utf8mb4_bin")
}
