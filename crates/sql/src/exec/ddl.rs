//! Schema statements, each through mgmd by the native client:
//! CREATE / DROP DATABASE, CREATE TABLE, DROP TABLE; the index statements
//! (CREATE / DROP INDEX, ALTER TABLE ADD / DROP INDEX) are
//! [`super::index_ddl`]'s.
//!
//! CREATE TABLE takes every column type Shoal has ([`declared_type`]),
//! NULL / NOT NULL, DEFAULT constants, PRIMARY KEY (column or table
//! constraint), UNIQUE [KEY] (a unique hash index), KEY / INDEX (an
//! ordered index), ENGINE (any: every table is a Shoal table), COMMENT
//! "NDB_TABLE=READ_BACKUP=1[,NOLOGGING=1]" and PARTITION BY KEY (a
//! leading part of the primary key) [PARTITIONS n], AUTO_INCREMENT on an
//! integer column that is a key (1075 otherwise) and the table option
//! AUTO_INCREMENT=n (the counter's start, [`super::auto_increment`]). A
//! table needs a primary key (1173): Shoal has no hidden key column yet.
//! DEFAULT CURRENT_TIMESTAMP comes later (1235).

use super::auto_increment;
use super::error::from_shoal;
use super::expr::Compiler;
use super::split::Partitioning;
use super::users::privileges;
use super::warnings;
use super::Env;
use crate::catalog::{self, single_name, TableName, SHOAL_DATABASE, SYSTEM_DATABASES};
use crate::outcome::{Outcome, SqlError};
use crate::sqltypes::{coerce, declared_type, size_columns, Declared};
use shoal_client::{Cluster, ErrorCode, ShoalError};
use shoal_types::schema::{
    check_database_name, COLUMNS_MAX, INDEX_KEY_BYTES_MAX, KEY_BYTES_MAX, PRIMARY_INDEX_NAME,
};
use shoal_types::{ColumnDef, TableDef, Value};
use sqlparser::ast::{
    ColumnOption, CommentDef, CreateTable, CreateTableOptions, Expr, IndexColumn, ObjectName,
    ObjectType, SqlOption, TableConstraint,
};
use sqlparser::tokenizer::Token;

pub use super::index_ddl::{alter_table, create_index, drop_index_statement};

pub(super) fn with_warnings(warnings: u16, affected_rows: u64) -> Outcome {
    Outcome::Ok {
        affected_rows,
        last_insert_id: 0,
        warnings,
        info: String::new(),
    }
}

/// An OK that notes `e`: what IF EXISTS / IF NOT EXISTS turn an error
/// into, as MySQL does.
pub(super) fn noted(e: &SqlError) -> Outcome {
    warnings::note(e);
    with_warnings(1, 0)
}

/// Accepts collation `name` (CREATE TABLE, SET NAMES ... COLLATE): Shoal
/// compares strings by their bytes, as utf8mb4_bin does, whatever the
/// statement asked for; any other collation is accepted with a warning
/// saying so, rather than refused, so schemas written for MySQL load.
pub fn accept_collation(name: &str) {
    let name = name.trim_matches(|c| c == '\'' || c == '"' || c == '`');
    if name.eq_ignore_ascii_case("utf8mb4_bin") || name.eq_ignore_ascii_case("binary") {
        return;
    }
    warnings::warning(&SqlError::new(
        1273,
        "HY000",
        format!(
            "Collation '{name}' is accepted but not applied: Shoal compares strings in binary, as utf8mb4_bin (case and accents matter)"
        ),
    ));
}

/// The collation a table option names (`[DEFAULT] COLLATE [=] name`).
fn collate_option(o: &SqlOption) -> Option<String> {
    match o {
        SqlOption::KeyValue { key, value }
            if key.value.eq_ignore_ascii_case("COLLATE")
                || key.value.eq_ignore_ascii_case("DEFAULT COLLATE") =>
        {
            Some(match value {
                Expr::Identifier(i) => i.value.clone(),
                Expr::Value(v) => v
                    .value
                    .clone()
                    .into_string()
                    .unwrap_or_else(|| v.to_string()),
                other => other.to_string(),
            })
        }
        _ => None,
    }
}

fn access_denied(database: &str) -> SqlError {
    match privileges::current() {
        Some(p) => privileges::database_denied(&p.account, database),
        None => SqlError::new(
            1044,
            "42000",
            format!("Access denied for user to database '{database}'"),
        ),
    }
}

/// CREATE DATABASE / SCHEMA.
pub async fn create_database(
    cluster: &Cluster,
    name: &ObjectName,
    if_not_exists: bool,
) -> Result<Outcome, SqlError> {
    let name = single_name(name)?;
    let exists = || {
        SqlError::new(
            1007,
            "HY000",
            format!("Can't create database '{name}'; database exists"),
        )
    };
    if name == SHOAL_DATABASE || SYSTEM_DATABASES.contains(&name.as_str()) {
        return if if_not_exists {
            Ok(noted(&exists()))
        } else {
            Err(exists())
        };
    }
    if check_database_name(&name).is_err() {
        return Err(SqlError::new(
            1102,
            "42000",
            format!("Incorrect database name '{name}'"),
        ));
    }
    match cluster.create_database(&name).await {
        Ok(()) => Ok(with_warnings(0, 1)),
        Err(e) if e.code == ErrorCode::TableExists => {
            if if_not_exists {
                Ok(noted(&exists()))
            } else {
                Err(exists())
            }
        }
        Err(e) => Err(from_shoal(&e)),
    }
}

/// DROP DATABASE / SCHEMA: its tables go with it (affected rows: how
/// many).
pub async fn drop_database(
    cluster: &Cluster,
    name: &str,
    if_exists: bool,
) -> Result<Outcome, SqlError> {
    if name == SHOAL_DATABASE {
        return Err(SqlError::not_supported(
            "DROP DATABASE shoal (it holds the native API's tables: drop them one by one)",
        ));
    }
    if SYSTEM_DATABASES.contains(&name) {
        return Err(access_denied(name));
    }
    match cluster.drop_database(name).await {
        Ok(tables) => Ok(with_warnings(0, tables.len() as u64)),
        Err(e) if e.code == ErrorCode::NoSuchTable => {
            let missing = SqlError::new(
                1008,
                "HY000",
                format!("Can't drop database '{name}'; database doesn't exist"),
            );
            if if_exists {
                Ok(noted(&missing))
            } else {
                Err(missing)
            }
        }
        Err(e) => Err(from_shoal(&e)),
    }
}

/// The column an index names (a plain column, no prefix length).
fn index_column(c: &IndexColumn) -> Result<String, SqlError> {
    match &c.column.expr {
        Expr::Identifier(i) => Ok(i.value.clone()),
        other => Err(SqlError::not_supported(format!("index on {other}"))),
    }
}

pub(super) fn index_columns(cols: &[IndexColumn]) -> Result<Vec<String>, SqlError> {
    cols.iter().map(index_column).collect()
}

pub(super) fn key_too_long() -> SqlError {
    SqlError::new(
        1071,
        "42000",
        format!("Specified key was too long; max key length is {KEY_BYTES_MAX} bytes"),
    )
}

/// The NDB_TABLE options of a table comment (`NDB_TABLE=READ_BACKUP=1`).
fn apply_comment(def: &mut TableDef, comment: &str) -> Result<(), SqlError> {
    let Some(rest) = comment.trim().strip_prefix("NDB_TABLE=") else {
        return Ok(());
    };
    for option in rest.split(',') {
        let (key, value) = option.split_once('=').unwrap_or((option, "1"));
        let on = matches!(value.trim(), "1" | "TRUE" | "true" | "ON" | "on");
        match key.trim().to_ascii_uppercase().as_str() {
            "READ_BACKUP" => def.options.read_backup = on,
            "NOLOGGING" => def.options.no_logging = on,
            // Placement is the cluster's; balance hints are taken as given.
            "PARTITION_BALANCE" => {}
            other => {
                return Err(SqlError::not_supported(format!("NDB_TABLE option {other}")));
            }
        }
    }
    Ok(())
}

/// Whether a DEFAULT expression is "the current time" (not a constant).
fn is_now(e: &Expr) -> bool {
    match e {
        Expr::Function(f) => {
            let n = f.name.to_string().to_ascii_uppercase();
            matches!(
                n.as_str(),
                "NOW" | "CURRENT_TIMESTAMP" | "LOCALTIME" | "LOCALTIMESTAMP"
            )
        }
        Expr::Identifier(i) => i.value.eq_ignore_ascii_case("CURRENT_TIMESTAMP"),
        _ => false,
    }
}

/// A name for an unnamed index: its first column's, made unique as MySQL
/// does (`c`, `c_2`, ...).
pub(super) fn index_name_for(first: &str, taken: &[String]) -> String {
    if !taken.iter().any(|t| t.eq_ignore_ascii_case(first)) {
        return first.to_string();
    }
    (2..)
        .map(|n| format!("{first}_{n}"))
        .find(|cand| !taken.iter().any(|t| t.eq_ignore_ascii_case(cand)))
        .expect("a free name")
}

pub(super) fn duplicate_key_name(name: &str) -> SqlError {
    SqlError::new(1061, "42000", format!("Duplicate key name '{name}'"))
}

/// CREATE TABLE.
pub async fn create_table(
    env: &Env<'_>,
    cluster: &Cluster,
    ct: &CreateTable,
    partitioning: Option<&Partitioning>,
) -> Result<Outcome, SqlError> {
    if ct.or_replace || ct.temporary || ct.external {
        return Err(SqlError::not_supported(
            "CREATE OR REPLACE / TEMPORARY / EXTERNAL TABLE",
        ));
    }
    if ct.query.is_some() || ct.like.is_some() || ct.clone.is_some() {
        return Err(SqlError::not_supported(
            "CREATE TABLE ... AS SELECT / LIKE (they come later)",
        ));
    }
    if ct.partition_by.is_some()
        || ct.cluster_by.is_some()
        || ct.order_by.is_some()
        || ct.primary_key.is_some()
    {
        return Err(SqlError::not_supported(format!("{ct}")));
    }
    let name = catalog::resolve(&ct.name, env.database)?;
    if SYSTEM_DATABASES.contains(&name.database.as_str()) {
        return Err(access_denied(&name.database));
    }
    if !catalog::database_exists(cluster, &name.database).await? {
        return Err(catalog::unknown_database(&name.database));
    }
    if ct.columns.is_empty() {
        return Err(SqlError::new(
            1113,
            "42000",
            "A table must have at least 1 column",
        ));
    }
    if ct.columns.len() > COLUMNS_MAX {
        return Err(SqlError::new(1117, "HY000", "Too many columns"));
    }
    let constant = Compiler {
        env,
        scope: None,
        clause: "field list",
    };
    let mut names: Vec<String> = Vec::with_capacity(ct.columns.len());
    let mut declared: Vec<Declared> = Vec::with_capacity(ct.columns.len());
    let mut nullable: Vec<Option<bool>> = Vec::new();
    let mut defaults: Vec<Option<Value>> = Vec::new();
    // Columns declared AUTO_INCREMENT (more than one is 1075).
    let mut autos: Vec<usize> = Vec::new();
    let mut primary: Option<Vec<String>> = None;
    // (name, columns) of unique and ordered indexes, in order.
    let mut uniques: Vec<(Option<String>, Vec<String>)> = Vec::new();
    let mut ordered: Vec<(Option<String>, Vec<String>)> = Vec::new();
    let multiple_pk = || SqlError::new(1068, "42000", "Multiple primary key defined");
    for col in &ct.columns {
        let cname = col.name.value.clone();
        if names.iter().any(|n| n.eq_ignore_ascii_case(&cname)) {
            return Err(SqlError::new(
                1060,
                "42S21",
                format!("Duplicate column name '{cname}'"),
            ));
        }
        declared.push(declared_type(&cname, &col.data_type)?);
        let mut null = None;
        let mut default = None;
        for opt in &col.options {
            match &opt.option {
                ColumnOption::Null => null = Some(true),
                ColumnOption::NotNull => null = Some(false),
                ColumnOption::Default(e) => {
                    if is_now(e) {
                        return Err(SqlError::not_supported(
                            "DEFAULT CURRENT_TIMESTAMP (it comes later)",
                        ));
                    }
                    let v = constant.compile(e).and_then(|s| s.eval(&[])).map_err(|_| {
                        SqlError::new(
                            1067,
                            "42000",
                            format!("Invalid default value for '{cname}'"),
                        )
                    })?;
                    default = Some(v);
                }
                ColumnOption::PrimaryKey(_) => {
                    if primary.is_some() {
                        return Err(multiple_pk());
                    }
                    primary = Some(vec![cname.clone()]);
                }
                ColumnOption::Unique(_) => uniques.push((None, vec![cname.clone()])),
                ColumnOption::Collation(c) => accept_collation(&c.to_string()),
                ColumnOption::CharacterSet(_) | ColumnOption::Comment(_) => {}
                ColumnOption::DialectSpecific(tokens) => {
                    let auto = tokens.iter().any(|t| {
                        matches!(t, Token::Word(w) if w.value.eq_ignore_ascii_case("AUTO_INCREMENT"))
                    });
                    if auto {
                        autos.push(names.len());
                    }
                }
                other => {
                    return Err(SqlError::not_supported(format!("column option {other}")));
                }
            }
        }
        names.push(cname);
        nullable.push(null);
        defaults.push(default);
    }
    for c in &ct.constraints {
        match c {
            TableConstraint::PrimaryKey(pk) => {
                if primary.is_some() {
                    return Err(multiple_pk());
                }
                primary = Some(index_columns(&pk.columns)?);
            }
            TableConstraint::Unique(u) => uniques.push((
                u.index_name
                    .as_ref()
                    .or(u.name.as_ref())
                    .map(|i| i.value.clone()),
                index_columns(&u.columns)?,
            )),
            TableConstraint::Index(i) => ordered.push((
                i.name.as_ref().map(|n| n.value.clone()),
                index_columns(&i.columns)?,
            )),
            other => return Err(SqlError::not_supported(format!("constraint {other}"))),
        }
    }
    let Some(primary) = primary else {
        return Err(SqlError::new(
            1173,
            "42000",
            "This table type requires a primary key (Shoal tables need one: add PRIMARY KEY)",
        ));
    };
    // Key columns as the table spells them; they are NOT NULL.
    let resolve_cols = |cols: &[String]| -> Result<Vec<usize>, SqlError> {
        cols.iter()
            .map(|n| {
                names
                    .iter()
                    .position(|c| c == n)
                    .or_else(|| names.iter().position(|c| c.eq_ignore_ascii_case(n)))
                    .ok_or_else(|| {
                        SqlError::new(
                            1072,
                            "42000",
                            format!("Key column '{n}' doesn't exist in table"),
                        )
                    })
            })
            .collect()
    };
    if autos.len() > 1 {
        return Err(auto_increment::not_a_key());
    }
    // AUTO_INCREMENT columns are NOT NULL, as in MySQL.
    for &a in &autos {
        nullable[a] = Some(false);
    }
    let pk_ids = resolve_cols(&primary)?;
    for &k in &pk_ids {
        if nullable[k] == Some(true) {
            return Err(SqlError::new(
                1171,
                "42000",
                "All parts of a PRIMARY KEY must be NOT NULL; if you need NULL in a key, use UNIQUE instead",
            ));
        }
        nullable[k] = Some(false);
    }
    let types = size_columns(&declared)?;
    for &a in &autos {
        auto_increment::check_column(&names[a], types[a], defaults[a].is_some())?;
    }
    let mut columns = Vec::with_capacity(names.len());
    for (i, n) in names.iter().enumerate() {
        let mut c = ColumnDef::new(n.clone(), types[i]);
        c.nullable = nullable[i].unwrap_or(true);
        if let Some(d) = &defaults[i] {
            if !d.is_null() {
                c.default = Some(coerce(d, &c, 1).map_err(|_| {
                    SqlError::new(1067, "42000", format!("Invalid default value for '{n}'"))
                })?);
            } else if !c.nullable {
                return Err(SqlError::new(
                    1067,
                    "42000",
                    format!("Invalid default value for '{n}'"),
                ));
            }
        }
        columns.push(c);
    }
    let pk_names: Vec<&str> = pk_ids.iter().map(|&k| names[k].as_str()).collect();
    let key_bytes: usize = pk_ids
        .iter()
        .map(|&k| types[k].max_size() + if types[k].is_var() { 2 } else { 0 })
        .sum();
    if key_bytes > KEY_BYTES_MAX {
        return Err(key_too_long());
    }
    let mut def =
        TableDef::new(name.shoal_name(), columns, &pk_names).map_err(|e| bad_table(&name, &e))?;
    let mut taken: Vec<String> = vec![PRIMARY_INDEX_NAME.to_string()];
    for (iname, cols) in uniques {
        let ids = resolve_cols(&cols)?;
        let cols: Vec<&str> = ids.iter().map(|&i| names[i].as_str()).collect();
        let iname = match iname {
            Some(n) if taken.iter().any(|t| t.eq_ignore_ascii_case(&n)) => {
                return Err(duplicate_key_name(&n))
            }
            Some(n) => n,
            None => index_name_for(cols[0], &taken),
        };
        let key: usize = ids.iter().map(|&i| types[i].max_size() + 2).sum();
        if key > KEY_BYTES_MAX {
            return Err(key_too_long());
        }
        def = def
            .with_unique_index(&iname, &cols)
            .map_err(|e| bad_table(&name, &e))?;
        taken.push(iname);
    }
    for (iname, cols) in ordered {
        let ids = resolve_cols(&cols)?;
        let cols: Vec<&str> = ids.iter().map(|&i| names[i].as_str()).collect();
        let iname = match iname {
            Some(n) if taken.iter().any(|t| t.eq_ignore_ascii_case(&n)) => {
                return Err(duplicate_key_name(&n))
            }
            Some(n) => n,
            None => index_name_for(cols[0], &taken),
        };
        def = def
            .with_index(&iname, &cols)
            .map_err(|e| bad_table(&name, &e))?;
        let index = def.indexes.last().expect("just added");
        if index.key_bytes_max(&def) > INDEX_KEY_BYTES_MAX {
            return Err(key_too_long());
        }
        taken.push(iname);
    }
    let mut comments: Vec<String> = Vec::new();
    if let Some(CommentDef::WithEq(s) | CommentDef::WithoutEq(s)) = &ct.comment {
        comments.push(s.clone());
    }
    let options: &[SqlOption] = match &ct.table_options {
        CreateTableOptions::None => &[],
        CreateTableOptions::Plain(o)
        | CreateTableOptions::With(o)
        | CreateTableOptions::Options(o)
        | CreateTableOptions::TableProperties(o) => o,
    };
    for o in options {
        if let SqlOption::Comment(CommentDef::WithEq(s) | CommentDef::WithoutEq(s)) = o {
            comments.push(s.clone());
        }
        if let Some(collation) = collate_option(o) {
            accept_collation(&collation);
        }
        // ENGINE, CHARSET, COLLATE, ROW_FORMAT, ...: every table is a
        // Shoal table with utf8mb4 strings compared in binary.
    }
    // The session's `ndb_read_backup` (on by default, as in NDB 8.0),
    // unless the comment says otherwise.
    def.options.read_backup = !matches!(env.variables.get("ndb_read_backup"), Some(Value::UInt(0)));
    for c in &comments {
        apply_comment(&mut def, c)?;
    }
    if let Some(p) = partitioning {
        apply_partitioning(&mut def, p)?;
    }
    // Marked once its indexes are there: it must be a key of one.
    for &a in &autos {
        def.columns[a].auto_increment = true;
        def.check_auto_increment_key()
            .map_err(|_| auto_increment::not_a_key())?;
    }
    let start = auto_increment::start_option(options)?;
    def.validate().map_err(|e| bad_table(&name, &e))?;
    match cluster.create_table(def).await {
        Ok(t) => {
            auto_increment::start(cluster, &t, start).await?;
            Ok(Outcome::ok())
        }
        Err(e) if e.code == ErrorCode::TableExists => {
            let exists = SqlError::new(
                1050,
                "42S01",
                format!("Table '{}' already exists", name.table),
            );
            if ct.if_not_exists {
                Ok(noted(&exists))
            } else {
                Err(exists)
            }
        }
        Err(e) if e.code == ErrorCode::NoSuchTable => {
            Err(catalog::unknown_database(&name.database))
        }
        Err(e) => Err(from_shoal(&e)),
    }
}

fn bad_table(name: &TableName, e: &ShoalError) -> SqlError {
    if e.code == ErrorCode::BadTableDefinition {
        SqlError::new(
            1005,
            "HY000",
            format!("Can't create table '{}' ({})", name.shown(), e.detail),
        )
    } else {
        from_shoal(e)
    }
}

fn apply_partitioning(def: &mut TableDef, p: &Partitioning) -> Result<(), SqlError> {
    if let Some(n) = p.partitions {
        if n == 0 {
            return Err(SqlError::new(
                1499,
                "HY000",
                "Number of partitions = 0 is not an allowed value",
            ));
        }
        def.options.fragment_count = Some(n);
    }
    if !p.key.is_empty() {
        let pk: Vec<&str> = def
            .primary_key
            .iter()
            .map(|&k| def.columns[usize::from(k)].name.as_str())
            .collect();
        let leading = p.key.len() <= pk.len()
            && p.key
                .iter()
                .zip(&pk)
                .all(|(a, b)| a.eq_ignore_ascii_case(b));
        if !leading {
            return Err(SqlError::not_supported(
                "PARTITION BY KEY of columns other than the leading primary-key columns",
            ));
        }
        if p.key.len() < pk.len() {
            def.options.distribution_key_columns = Some(p.key.len() as u16);
        }
    }
    Ok(())
}

/// DROP TABLE [IF EXISTS] t, ...
pub async fn drop_tables(
    env: &Env<'_>,
    cluster: &Cluster,
    names: &[ObjectName],
    if_exists: bool,
) -> Result<Outcome, SqlError> {
    let mut missing = Vec::new();
    for n in names {
        let name = catalog::resolve(n, env.database)?;
        let result = match catalog::fresh_table(cluster, &name).await {
            Ok(_) => cluster.drop_table(&name.shoal_name()).await.map_err(|e| {
                if e.code == ErrorCode::NoSuchTable {
                    None
                } else {
                    Some(from_shoal(&e))
                }
            }),
            Err(e) if e.code == 1146 => Err(None),
            Err(e) => Err(Some(e)),
        };
        match result {
            Ok(()) => {}
            Err(None) => missing.push(name.shown()),
            Err(Some(e)) => return Err(e),
        }
    }
    if !missing.is_empty() && !if_exists {
        return Err(SqlError::new(
            1051,
            "42S02",
            format!("Unknown table '{}'", missing.join(",")),
        ));
    }
    // IF EXISTS: a note per table that was not there, as MySQL gives.
    for m in &missing {
        warnings::note(&SqlError::new(
            1051,
            "42S02",
            format!("Unknown table '{m}'"),
        ));
    }
    Ok(with_warnings(
        missing.len().min(usize::from(u16::MAX)) as u16,
        0,
    ))
}

/// Which DROP a `Statement::Drop` is.
pub fn drop_kind(t: &ObjectType) -> Option<&'static str> {
    match t {
        ObjectType::Table => Some("table"),
        ObjectType::Database | ObjectType::Schema => Some("database"),
        ObjectType::Index => Some("index"),
        _ => None,
    }
}
