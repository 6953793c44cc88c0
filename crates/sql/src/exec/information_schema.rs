//! `information_schema`: the tables tools and ORMs read the schema from
//! (SCHEMATA, TABLES, COLUMNS, STATISTICS), with MySQL's column names.
//!
//! Nothing is stored: a SELECT of one of them builds the table's rows
//! from mgmd's schema (the helpers SHOW uses) and runs its WHERE, GROUP
//! BY, aggregates, ORDER BY, LIMIT and select list over those rows in
//! memory, compiled by the same compiler as any SELECT over a
//! [`TableDef`] made for the virtual table.
//!
//! Invariants: an account sees the rows of the databases it may use
//! only (`catalog::databases`); rows come in a fixed order (schema,
//! table, then position), so a statement without ORDER BY answers the
//! same every time; writing to `information_schema` is 1044, as MySQL;
//! a SELECT that joins one of these tables is 1235.

use super::aggregate::Aggregates;
use super::expr::{truth, Compiler, Scalar, Scope};
use super::group::{self, Shape};
use super::select::{limit_of, lock_of, order_keys, outputs, plain_select, sort_rows, Output};
use super::users::privileges;
use super::{too_many_rows, Env, TextRows};
use crate::catalog::{self, collation, key_flag, ndb_table_comment, TableName};
use crate::outcome::{Column, Outcome, SqlError};
use crate::sqltypes::{expression_column, result_column, sql_type_name, text as to_text};
use shoal_client::{Cluster, Value};
use shoal_types::{ColumnDef, ColumnType, TableDef};
use sqlparser::ast::{
    Expr, Ident, ObjectName, Query, Select, SelectItem, SetExpr, Statement, TableFactor,
    TableObject, TableWithJoins,
};

/// The database's name.
pub const DATABASE: &str = privileges::OPEN_DATABASE;

/// The tables Shoal answers, as MySQL spells them.
pub const TABLES: &[&str] = &["COLUMNS", "SCHEMATA", "STATISTICS", "TABLES"];

/// A column of a virtual table: its name, type and whether it may be NULL.
#[derive(Clone, Copy)]
enum Kind {
    Text(u16),
    UInt,
    Int,
}

fn layout(table: &str) -> &'static [(&'static str, Kind, bool)] {
    use Kind::{Int, Text, UInt};
    const NAME: Kind = Text(64);
    match table {
        "SCHEMATA" => &[
            ("CATALOG_NAME", NAME, false),
            ("SCHEMA_NAME", NAME, false),
            ("DEFAULT_CHARACTER_SET_NAME", NAME, false),
            ("DEFAULT_COLLATION_NAME", NAME, false),
            ("SQL_PATH", Text(512), true),
            ("DEFAULT_ENCRYPTION", Text(3), false),
        ],
        "TABLES" => &[
            ("TABLE_CATALOG", NAME, false),
            ("TABLE_SCHEMA", NAME, false),
            ("TABLE_NAME", NAME, false),
            ("TABLE_TYPE", NAME, false),
            ("ENGINE", NAME, true),
            ("VERSION", Int, true),
            ("ROW_FORMAT", Text(10), true),
            ("TABLE_ROWS", UInt, true),
            ("AVG_ROW_LENGTH", UInt, true),
            ("DATA_LENGTH", UInt, true),
            ("MAX_DATA_LENGTH", UInt, true),
            ("INDEX_LENGTH", UInt, true),
            ("DATA_FREE", UInt, true),
            ("AUTO_INCREMENT", UInt, true),
            ("CREATE_TIME", Text(19), true),
            ("UPDATE_TIME", Text(19), true),
            ("CHECK_TIME", Text(19), true),
            ("TABLE_COLLATION", NAME, true),
            ("CHECKSUM", UInt, true),
            ("CREATE_OPTIONS", Text(256), true),
            ("TABLE_COMMENT", Text(2048), true),
        ],
        "COLUMNS" => &[
            ("TABLE_CATALOG", NAME, false),
            ("TABLE_SCHEMA", NAME, false),
            ("TABLE_NAME", NAME, false),
            ("COLUMN_NAME", NAME, false),
            ("ORDINAL_POSITION", UInt, false),
            ("COLUMN_DEFAULT", Text(1024), true),
            ("IS_NULLABLE", Text(3), false),
            ("DATA_TYPE", NAME, false),
            ("CHARACTER_MAXIMUM_LENGTH", Int, true),
            ("CHARACTER_OCTET_LENGTH", Int, true),
            ("NUMERIC_PRECISION", UInt, true),
            ("NUMERIC_SCALE", UInt, true),
            ("DATETIME_PRECISION", UInt, true),
            ("CHARACTER_SET_NAME", NAME, true),
            ("COLLATION_NAME", NAME, true),
            ("COLUMN_TYPE", Text(256), false),
            ("COLUMN_KEY", Text(3), false),
            ("EXTRA", Text(256), false),
            ("PRIVILEGES", Text(154), false),
            ("COLUMN_COMMENT", Text(1024), false),
            ("GENERATION_EXPRESSION", Text(1024), false),
            ("SRS_ID", UInt, true),
        ],
        "STATISTICS" => &[
            ("TABLE_CATALOG", NAME, false),
            ("TABLE_SCHEMA", NAME, false),
            ("TABLE_NAME", NAME, false),
            ("NON_UNIQUE", Int, false),
            ("INDEX_SCHEMA", NAME, false),
            ("INDEX_NAME", NAME, false),
            ("SEQ_IN_INDEX", UInt, false),
            ("COLUMN_NAME", NAME, false),
            ("COLLATION", Text(1), true),
            ("CARDINALITY", Int, true),
            ("SUB_PART", Int, true),
            ("PACKED", Text(10), true),
            ("NULLABLE", Text(3), false),
            ("INDEX_TYPE", Text(16), false),
            ("COMMENT", Text(16), false),
            ("INDEX_COMMENT", Text(1024), false),
            ("IS_VISIBLE", Text(3), false),
            ("EXPRESSION", Text(1024), true),
        ],
        _ => &[],
    }
}

/// The table `name` of information_schema (any case), as MySQL spells it.
pub fn table_named(name: &str) -> Option<&'static str> {
    TABLES
        .iter()
        .copied()
        .find(|t| t.eq_ignore_ascii_case(name))
}

/// The definition of virtual table `table` (one of [`TABLES`]), for
/// compiling statements and describing it.
pub fn definition(table: &str) -> Result<TableDef, SqlError> {
    let columns: Vec<ColumnDef> = layout(table)
        .iter()
        .map(|&(name, kind, nullable)| {
            let ty = match kind {
                // Characters as Shoal sizes them: utf8mb4, 4 bytes each.
                Kind::Text(n) => ColumnType::VarChar(n.saturating_mul(4)),
                Kind::UInt => ColumnType::BigInt { unsigned: true },
                Kind::Int => ColumnType::BigInt { unsigned: false },
            };
            let mut c = ColumnDef::new(name, ty);
            c.nullable = nullable;
            c
        })
        .collect();
    let first = columns.first().map(|c| c.name.clone()).unwrap_or_default();
    let mut def = TableDef::new(format!("{DATABASE}.{table}"), columns, &[first.as_str()])
        .map_err(|e| SqlError::new(1105, "HY000", format!("information_schema.{table}: {e}")))?;
    // No key: nothing describes its columns as part of one.
    def.primary_key.clear();
    Ok(def)
}

/// Whether `database` (as a statement spells it) is information_schema.
fn is_database(database: &str) -> bool {
    database.eq_ignore_ascii_case(DATABASE)
}

/// The information_schema table `name` stands for, if it names one (any
/// table of that database: unknown ones are 1109 later).
fn named(name: &ObjectName, current: Option<&str>) -> Option<String> {
    let parts: Vec<&str> = name
        .0
        .iter()
        .map(|p| p.as_ident().map(|i| i.value.as_str()))
        .collect::<Option<_>>()?;
    match parts.as_slice() {
        // DUAL is no table, whatever the current database.
        [table] if table.eq_ignore_ascii_case("dual") => None,
        [table] if current.is_some_and(is_database) => Some(table.to_string()),
        [database, table] if is_database(database) => Some(table.to_string()),
        _ => None,
    }
}

fn in_from(from: &[TableWithJoins], current: Option<&str>) -> bool {
    from.iter().any(|f| {
        std::iter::once(&f.relation)
            .chain(f.joins.iter().map(|j| &j.relation))
            .any(|r| matches!(r, TableFactor::Table { name, .. } if named(name, current).is_some()))
    })
}

/// Whether a SELECT reads an information_schema table (then
/// [`select`] runs it, not the cluster's SELECT).
pub fn is_read_by(query: &Query, current: Option<&str>) -> bool {
    match query.body.as_ref() {
        SetExpr::Select(s) => in_from(&s.from, current),
        _ => false,
    }
}

/// 1044 if `statement` would write to information_schema (as MySQL
/// refuses it: the database is the server's, not the account's).
pub fn refuse_write(statement: &Statement, current: Option<&str>) -> Result<(), SqlError> {
    let mut names: Vec<&ObjectName> = Vec::new();
    let mut databases: Vec<&ObjectName> = Vec::new();
    match statement {
        Statement::Insert(i) => {
            if let TableObject::TableName(n) = &i.table {
                names.push(n);
            }
        }
        Statement::Update(u) => {
            if let TableFactor::Table { name, .. } = &u.table.relation {
                names.push(name);
            }
        }
        Statement::Delete(d) => {
            let from = match &d.from {
                sqlparser::ast::FromTable::WithFromKeyword(f)
                | sqlparser::ast::FromTable::WithoutKeyword(f) => f,
            };
            for f in from {
                if let TableFactor::Table { name, .. } = &f.relation {
                    names.push(name);
                }
            }
        }
        Statement::CreateTable(ct) => names.push(&ct.name),
        Statement::CreateIndex(ci) => names.push(&ci.table_name),
        Statement::AlterTable(at) => names.push(&at.name),
        Statement::Truncate(t) => names.extend(t.table_names.iter().map(|t| &t.name)),
        Statement::Drop {
            object_type,
            names: dropped,
            table,
            ..
        } => match object_type {
            sqlparser::ast::ObjectType::Table => names.extend(dropped),
            sqlparser::ast::ObjectType::Index => names.extend(table),
            sqlparser::ast::ObjectType::Database | sqlparser::ast::ObjectType::Schema => {
                databases.extend(dropped)
            }
            _ => {}
        },
        Statement::CreateDatabase { db_name, .. } => databases.push(db_name),
        _ => {}
    }
    let written = names.iter().any(|n| named(n, current).is_some())
        || databases
            .iter()
            .any(|d| matches!(d.0.as_slice(), [p] if p.as_ident().is_some_and(|i| is_database(&i.value))));
    if written {
        return Err(denied());
    }
    Ok(())
}

/// 1044 for information_schema, naming the session's account.
pub fn denied() -> SqlError {
    match privileges::current() {
        Some(p) => privileges::database_denied(&p.account, DATABASE),
        None => SqlError::new(
            1044,
            "42000",
            format!("Access denied to database '{DATABASE}'"),
        ),
    }
}

fn unknown_table(name: &str) -> SqlError {
    SqlError::new(
        1109,
        "42S02",
        format!(
            "Unknown table '{}' in {DATABASE} (Shoal has {})",
            name.to_ascii_uppercase(),
            TABLES.join(", ")
        ),
    )
}

/// The virtual table a SELECT reads and the names its columns may be
/// qualified with: the SELECT reads that one table alone.
fn source(select: &Select, current: Option<&str>) -> Result<(&'static str, Vec<String>), SqlError> {
    let [from] = select.from.as_slice() else {
        return Err(joined());
    };
    if !from.joins.is_empty() {
        return Err(joined());
    }
    let TableFactor::Table {
        name, alias, args, ..
    } = &from.relation
    else {
        return Err(joined());
    };
    if args.is_some() {
        return Err(SqlError::not_supported("table functions"));
    }
    let Some(written) = named(name, current) else {
        return Err(joined());
    };
    let table = table_named(&written).ok_or_else(|| unknown_table(&written))?;
    let names = match alias {
        Some(a) => vec![a.name.value.clone()],
        None => {
            let mut names = vec![
                written.clone(),
                table.to_string(),
                table.to_ascii_lowercase(),
            ];
            for n in names.clone() {
                names.push(format!("{DATABASE}.{n}"));
            }
            names.push(name.to_string());
            names.sort();
            names.dedup();
            names
        }
    };
    Ok((table, names))
}

fn joined() -> SqlError {
    SqlError::not_supported(format!(
        "a SELECT that reads {DATABASE} together with other tables (read its table alone)"
    ))
}

/// The select list with `*` made the table's columns.
fn expanded(select: &Select, def: &TableDef) -> Result<Vec<SelectItem>, SqlError> {
    let mut items = Vec::with_capacity(select.projection.len());
    for item in &select.projection {
        match item {
            SelectItem::Wildcard(_) | SelectItem::QualifiedWildcard(..) => {
                items.extend(
                    def.columns
                        .iter()
                        .map(|c| SelectItem::UnnamedExpr(Expr::Identifier(Ident::new(&c.name)))),
                );
            }
            other => items.push(other.clone()),
        }
    }
    Ok(items)
}

/// Runs a SELECT of one information_schema table.
pub async fn select(
    env: &Env<'_>,
    cluster: &Cluster,
    query: &Query,
    text: &str,
) -> Result<Outcome, SqlError> {
    let select = plain_select(query)?;
    // Locking clauses have nothing to lock here; they are checked only.
    lock_of(query)?;
    let (table, names) = source(select, env.database)?;
    let def = definition(table)?;
    let (offset, limit) = limit_of(env, query.limit_clause.as_ref())?;
    let projection = expanded(select, &def)?;
    let aggregates = Aggregates::new(def.columns.len());
    let scope = Scope {
        def: &def,
        names: names.clone(),
        aggregates: Some(&aggregates),
        aliases: &[],
    };
    let outputs = outputs(env, text, &projection, None, Some(&scope))?;
    let order = order_keys(env, query, &outputs, Some(&scope))?;
    let mut grouped = select.clone();
    grouped.projection = projection;
    let grouping = group::compile(env, &grouped, Some(&scope), &outputs, &order)?;
    let plain = Scope {
        def: &def,
        names,
        aggregates: None,
        aliases: &[],
    };
    let where_ = select
        .selection
        .as_ref()
        .map(|w| {
            Compiler {
                env,
                scope: Some(&plain),
                clause: "where clause",
            }
            .compile(w)
        })
        .transpose()?;
    let mut rows = Vec::new();
    for row in rows_of(env, cluster, table).await? {
        if let Some(w) = &where_ {
            if truth(&w.eval(&row)?) != Some(true) {
                continue;
            }
        }
        rows.push(row);
    }
    if let Some(g) = &grouping {
        let shape = Shape {
            query,
            outputs: &outputs,
            order: &order,
            offset,
            limit,
        };
        return group::run_over(env, g, rows, shape).map(|(outcome, _)| outcome);
    }
    sort_rows(&mut rows, &order)?;
    shown(env, &def, table, &outputs, rows, offset, limit)
}

/// The plain SELECT's result: its rows past OFFSET, at most LIMIT, each
/// the select list's values.
fn shown(
    env: &Env<'_>,
    def: &TableDef,
    table: &str,
    outputs: &[Output],
    rows: Vec<Vec<Value>>,
    offset: u64,
    limit: Option<u64>,
) -> Result<Outcome, SqlError> {
    let kept = rows
        .iter()
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        .take(limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX)));
    let mut out_rows = TextRows::new(&env.limits);
    let mut first: Option<Vec<Value>> = None;
    for row in kept {
        let values: Vec<Value> = outputs
            .iter()
            .map(|o| o.scalar.eval(row))
            .collect::<Result<_, _>>()?;
        out_rows.push(&values)?;
        if first.is_none() {
            first = Some(values);
        }
    }
    let columns: Vec<Column> = outputs
        .iter()
        .enumerate()
        .map(|(i, o)| match &o.scalar {
            Scalar::Column(c) => match def.columns.get(usize::from(*c)) {
                Some(col) => {
                    let mut column = result_column(col, table, DATABASE, false);
                    column.name = o.name.clone();
                    column
                }
                None => expression_column(&o.name, None),
            },
            _ => expression_column(&o.name, first.as_ref().and_then(|f| f.get(i))),
        })
        .collect();
    Ok(Outcome::Rows {
        columns,
        rows: out_rows.into_rows(),
    })
}

/// The result columns of a SELECT of an information_schema table (a
/// prepare): it only reads the schema, so it runs.
pub async fn describe(
    env: &Env<'_>,
    cluster: &Cluster,
    query: &Query,
    text: &str,
) -> Result<Vec<Column>, SqlError> {
    match select(env, cluster, query, text).await? {
        Outcome::Rows { columns, .. } => Ok(columns),
        Outcome::Ok { .. } | Outcome::Streamed => Ok(Vec::new()),
    }
}

fn s(v: impl Into<String>) -> Value {
    Value::Str(v.into())
}

fn u(v: u64) -> Value {
    Value::UInt(v)
}

/// The tables the session may see, by database then name, with the
/// virtual tables of information_schema itself.
async fn visible_tables(cluster: &Cluster) -> Result<Vec<(TableName, Option<TableDef>)>, SqlError> {
    let databases = catalog::databases(cluster).await?;
    let mut all: Vec<(TableName, Option<TableDef>)> = Vec::new();
    let tables = cluster
        .tables()
        .await
        .map_err(|e| super::error::from_shoal(&e))?;
    for def in tables {
        let name = TableName::from_shoal(&def.name);
        if def.options.index_of.is_none() && databases.contains(&name.database) {
            all.push((name, Some(def)));
        }
    }
    if databases.iter().any(|d| d == DATABASE) {
        for t in TABLES {
            all.push((
                TableName {
                    database: DATABASE.to_string(),
                    table: t.to_string(),
                },
                None,
            ));
        }
    }
    all.sort_by(|a, b| (&a.0.database, &a.0.table).cmp(&(&b.0.database, &b.0.table)));
    Ok(all)
}

/// Every row of virtual table `table`, by column position.
async fn rows_of(
    env: &Env<'_>,
    cluster: &Cluster,
    table: &str,
) -> Result<Vec<Vec<Value>>, SqlError> {
    let mut rows = Vec::new();
    let mut push = |row: Vec<Value>| -> Result<(), SqlError> {
        if rows.len() >= env.limits.rows_max {
            return Err(too_many_rows(
                env.limits.rows_max,
                "an information_schema table",
            ));
        }
        rows.push(row);
        Ok(())
    };
    if table == "SCHEMATA" {
        for d in catalog::databases(cluster).await? {
            push(vec![
                s("def"),
                s(d),
                s("utf8mb4"),
                s("utf8mb4_bin"),
                Value::Null,
                s("NO"),
            ])?;
        }
        return Ok(rows);
    }
    for (name, def) in visible_tables(cluster).await? {
        let def = match def {
            Some(def) => def,
            None => definition(&name.table)?,
        };
        let system = name.database == DATABASE;
        match table {
            "TABLES" => {
                // The next AUTO_INCREMENT value costs a read of its
                // counter: only for tables that have one.
                let auto = if !system && def.auto_increment_column().is_some() {
                    match catalog::table(cluster, &name).await {
                        Ok(t) => Some(
                            super::auto_increment::next_shown(cluster, &t)
                                .await?
                                .unwrap_or(1),
                        ),
                        // Dropped since it was listed: no counter to show.
                        Err(e) if e.code == 1146 => None,
                        Err(e) => return Err(e),
                    }
                } else {
                    None
                };
                push(tables_row(&name, &def, system, auto))?;
            }
            "COLUMNS" => {
                for row in columns_rows(&name, &def) {
                    push(row)?;
                }
            }
            "STATISTICS" => {
                for row in statistics_rows(&name, &def) {
                    push(row)?;
                }
            }
            _ => {}
        }
    }
    Ok(rows)
}

fn tables_row(name: &TableName, def: &TableDef, system: bool, auto: Option<u64>) -> Vec<Value> {
    let opt = |v: Option<u64>| v.map_or(Value::Null, u);
    let (kind, engine, version, format) = if system {
        ("SYSTEM VIEW", Value::Null, Value::Null, Value::Null)
    } else {
        ("BASE TABLE", s("ndbcluster"), Value::Int(10), s("Dynamic"))
    };
    let comment = if system {
        String::new()
    } else {
        ndb_table_comment(def)
    };
    vec![
        s("def"),
        s(name.database.clone()),
        s(name.table.clone()),
        s(kind),
        engine,
        version,
        format,
        // Row counts are not kept per table; MySQL allows an estimate,
        // and NULL says there is none.
        Value::Null,
        Value::Null,
        Value::Null,
        Value::Null,
        Value::Null,
        Value::Null,
        opt(auto),
        Value::Null,
        Value::Null,
        Value::Null,
        if system {
            Value::Null
        } else {
            s("utf8mb4_bin")
        },
        Value::Null,
        s(""),
        s(comment),
    ]
}

/// (NUMERIC_PRECISION, NUMERIC_SCALE, DATETIME_PRECISION) as MySQL gives
/// them for a type.
fn numeric(ty: ColumnType) -> (Option<u64>, Option<u64>, Option<u64>) {
    match ty {
        ColumnType::TinyInt { .. } => (Some(3), Some(0), None),
        ColumnType::SmallInt { .. } => (Some(5), Some(0), None),
        ColumnType::Int { .. } => (Some(10), Some(0), None),
        ColumnType::BigInt { unsigned } => (Some(if unsigned { 20 } else { 19 }), Some(0), None),
        ColumnType::Float => (Some(12), None, None),
        ColumnType::Double => (Some(22), None, None),
        ColumnType::Decimal { precision, scale } => {
            (Some(precision.into()), Some(scale.into()), None)
        }
        ColumnType::Timestamp | ColumnType::DateTime | ColumnType::Time => (None, None, Some(0)),
        _ => (None, None, None),
    }
}

/// (CHARACTER_MAXIMUM_LENGTH, CHARACTER_OCTET_LENGTH) of a string type.
fn lengths(ty: ColumnType) -> (Option<i64>, Option<i64>) {
    match ty {
        ColumnType::Char(n) | ColumnType::VarChar(n) => {
            // Declared in characters, stored 4 bytes each (utf8mb4).
            let chars = if n % 4 == 0 { n / 4 } else { n };
            (Some(chars.into()), Some(i64::from(chars) * 4))
        }
        ColumnType::Binary(n) | ColumnType::VarBinary(n) => (Some(n.into()), Some(n.into())),
        _ => (None, None),
    }
}

fn columns_rows(name: &TableName, def: &TableDef) -> Vec<Vec<Value>> {
    let opt_u = |v: Option<u64>| v.map_or(Value::Null, u);
    let opt_i = |v: Option<i64>| v.map_or(Value::Null, Value::Int);
    def.columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let type_name = sql_type_name(c.ty);
            let data_type = type_name
                .split(['(', ' '])
                .next()
                .unwrap_or_default()
                .to_string();
            let default = c
                .default
                .as_ref()
                .and_then(to_text)
                .map_or(Value::Null, |b| s(String::from_utf8_lossy(&b)));
            let (precision, scale, datetime) = numeric(c.ty);
            let (chars, octets) = lengths(c.ty);
            let collation = collation(c.ty);
            vec![
                s("def"),
                s(name.database.clone()),
                s(name.table.clone()),
                s(c.name.clone()),
                u(i as u64 + 1),
                default,
                s(if c.nullable { "YES" } else { "NO" }),
                s(data_type),
                opt_i(chars),
                opt_i(octets),
                opt_u(precision),
                opt_u(scale),
                opt_u(datetime),
                collation.map_or(Value::Null, |_| s("utf8mb4")),
                collation.map_or(Value::Null, s),
                s(type_name),
                s(key_flag(def, i as u16)),
                s(if c.auto_increment {
                    "auto_increment"
                } else {
                    ""
                }),
                s("select,insert,update,references"),
                s(""),
                s(""),
                Value::Null,
            ]
        })
        .collect()
}

fn statistics_rows(name: &TableName, def: &TableDef) -> Vec<Vec<Value>> {
    super::show::index_entries(def)
        .into_iter()
        .map(|e| {
            vec![
                s("def"),
                s(name.database.clone()),
                s(name.table.clone()),
                Value::Int(if e.unique { 0 } else { 1 }),
                s(name.database.clone()),
                s(e.key),
                u(e.seq),
                s(e.column),
                s("A"),
                Value::Null,
                Value::Null,
                Value::Null,
                s(if e.nullable { "YES" } else { "" }),
                s(e.kind),
                s(""),
                s(""),
                s("YES"),
                Value::Null,
            ]
        })
        .collect()
}
