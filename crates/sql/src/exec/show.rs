//! The SHOW statements and DESCRIBE: what connectors and tools ask
//! (SHOW DATABASES / TABLES / [FULL] COLUMNS / INDEX / CREATE TABLE /
//! VARIABLES / STATUS / WARNINGS / ENGINES), answered from mgmd's schema
//! and the session's variables.

use super::expr::like;
use super::information_schema;
use super::warnings::{Diagnostics, Level};
use super::Env;
use crate::catalog::{self, collation, key_flag, show_create, TableName};
use crate::outcome::{Column, Outcome, SqlError};
use crate::sqltypes::{expression_column, sql_type_name, text};
use shoal_client::{Cluster, Value};
use shoal_types::schema::PRIMARY_INDEX_NAME;
use shoal_types::TableDef;
use sqlparser::ast::{
    Ident, ObjectName, ShowStatementFilter, ShowStatementFilterPosition, ShowStatementOptions,
};

/// A result set of text columns.
pub fn strings(columns: &[&str], rows: Vec<Vec<Option<String>>>) -> Outcome {
    Outcome::Rows {
        columns: columns
            .iter()
            .map(|c| {
                let mut col: Column = expression_column(c, None);
                col.length = 256;
                col
            })
            .collect(),
        rows: rows
            .into_iter()
            .map(|r| r.into_iter().map(|v| v.map(String::into_bytes)).collect())
            .collect(),
    }
}

fn like_filter(f: Option<&ShowStatementFilter>) -> Result<Option<String>, SqlError> {
    match f {
        None => Ok(None),
        Some(ShowStatementFilter::Like(p)) | Some(ShowStatementFilter::NoKeyword(p)) => {
            Ok(Some(p.clone()))
        }
        Some(other) => Err(SqlError::not_supported(format!("SHOW ... {other}"))),
    }
}

fn options_filter(o: &ShowStatementOptions) -> Result<Option<String>, SqlError> {
    match &o.filter_position {
        None => Ok(None),
        Some(ShowStatementFilterPosition::Infix(f) | ShowStatementFilterPosition::Suffix(f)) => {
            like_filter(Some(f))
        }
    }
}

fn matches(pattern: &Option<String>, name: &str) -> bool {
    pattern
        .as_ref()
        .is_none_or(|p| like(&Value::Str(name.into()), &Value::Str(p.clone()), Some('\\')))
}

/// SHOW DATABASES [LIKE ...]
pub async fn databases(cluster: &Cluster, o: &ShowStatementOptions) -> Result<Outcome, SqlError> {
    let pattern = options_filter(o)?;
    let rows = catalog::databases(cluster)
        .await?
        .into_iter()
        .filter(|d| matches(&pattern, d))
        .map(|d| vec![Some(d)])
        .collect();
    Ok(strings(&["Database"], rows))
}

/// The database a SHOW ... FROM / IN names, or the current one.
fn database_of(env: &Env<'_>, o: &ShowStatementOptions) -> Result<String, SqlError> {
    match o.show_in.as_ref().and_then(|i| i.parent_name.as_ref()) {
        Some(n) => catalog::single_name(n),
        None => env
            .database
            .map(str::to_string)
            .ok_or_else(catalog::no_database_selected),
    }
}

/// SHOW [FULL] TABLES [FROM db] [LIKE ...]
pub async fn tables(
    env: &Env<'_>,
    cluster: &Cluster,
    full: bool,
    o: &ShowStatementOptions,
) -> Result<Outcome, SqlError> {
    let db = database_of(env, o)?;
    if !catalog::database_exists(cluster, &db).await? {
        return Err(catalog::unknown_database(&db));
    }
    let pattern = options_filter(o)?;
    let names: Vec<String> = if db == information_schema::DATABASE {
        information_schema::TABLES
            .iter()
            .map(|t| t.to_string())
            .collect()
    } else {
        catalog::tables_of(cluster, &db)
            .await?
            .into_iter()
            .map(|t| TableName::from_shoal(&t.name).table)
            .collect()
    };
    let rows: Vec<Vec<Option<String>>> = names
        .into_iter()
        .filter(|t| matches(&pattern, t))
        .map(|t| {
            let mut row = vec![Some(t)];
            if full {
                let kind = if db == information_schema::DATABASE {
                    "SYSTEM VIEW"
                } else {
                    "BASE TABLE"
                };
                row.push(Some(kind.into()));
            }
            row
        })
        .collect();
    let head = format!("Tables_in_{db}");
    if full {
        Ok(strings(&[&head, "Table_type"], rows))
    } else {
        Ok(strings(&[&head], rows))
    }
}

/// The table a SHOW COLUMNS / INDEX names: `t`, `db.t`, or `t FROM db`.
fn table_of(
    env: &Env<'_>,
    table: &ObjectName,
    db: Option<&ObjectName>,
) -> Result<TableName, SqlError> {
    match db {
        Some(d) => Ok(TableName {
            database: catalog::single_name(d)?,
            table: catalog::single_name(table)?,
        }),
        None => catalog::resolve(table, env.database),
    }
}

/// SHOW [FULL] COLUMNS FROM t, DESCRIBE t.
pub async fn columns(
    env: &Env<'_>,
    cluster: &Cluster,
    table: &ObjectName,
    db: Option<&ObjectName>,
    full: bool,
    pattern: Option<String>,
) -> Result<Outcome, SqlError> {
    let name = table_of(env, table, db)?;
    let def = &table_def(cluster, &name).await?;
    let mut rows = Vec::new();
    for (i, c) in def.columns.iter().enumerate() {
        if !matches(&pattern, &c.name) {
            continue;
        }
        let default = match &c.default {
            Some(v) => text(v).map(|b| String::from_utf8_lossy(&b).into_owned()),
            None => None,
        };
        let mut row = vec![Some(c.name.clone()), Some(sql_type_name(c.ty))];
        if full {
            row.push(collation(c.ty).map(str::to_string));
        }
        row.push(Some(if c.nullable { "YES" } else { "NO" }.into()));
        row.push(Some(key_flag(def, i as u16).into()));
        row.push(default);
        let extra = if c.auto_increment {
            "auto_increment"
        } else {
            ""
        };
        row.push(Some(extra.into()));
        if full {
            row.push(Some("select,insert,update,references".into()));
            row.push(Some(String::new()));
        }
        rows.push(row);
    }
    if full {
        Ok(strings(
            &[
                "Field",
                "Type",
                "Collation",
                "Null",
                "Key",
                "Default",
                "Extra",
                "Privileges",
                "Comment",
            ],
            rows,
        ))
    } else {
        Ok(strings(
            &["Field", "Type", "Null", "Key", "Default", "Extra"],
            rows,
        ))
    }
}

/// SHOW CREATE TABLE t.
pub async fn create_table(
    env: &Env<'_>,
    cluster: &Cluster,
    table: &ObjectName,
) -> Result<Outcome, SqlError> {
    let name = catalog::resolve(table, env.database)?;
    let t = catalog::fresh_table(cluster, &name).await?;
    let mut ddl = show_create(t.def(), &name);
    // MySQL shows the counter's next value as a table option (not when
    // it stands at 1).
    if let Some(next) = super::auto_increment::next_shown(cluster, &t).await? {
        let engine = "\n) ENGINE=ndbcluster";
        if let Some(at) = ddl.rfind(engine) {
            ddl.insert_str(at + engine.len(), &format!(" AUTO_INCREMENT={next}"));
        }
    }
    Ok(strings(
        &["Table", "Create Table"],
        vec![vec![Some(name.table.clone()), Some(ddl)]],
    ))
}

/// One column of one index, as SHOW INDEX and
/// `information_schema.STATISTICS` list them.
pub struct IndexEntry {
    /// The index's name (`PRIMARY` for the primary key).
    pub key: String,
    pub unique: bool,
    /// The column's position in the index, from 1.
    pub seq: u64,
    pub column: String,
    pub nullable: bool,
    /// `BTREE` or `HASH`.
    pub kind: &'static str,
}

/// The indexes of `def`, column by column: the primary key, the unique
/// indexes (hash), then the ordered ones.
pub fn index_entries(def: &TableDef) -> Vec<IndexEntry> {
    let mut entries = Vec::new();
    let mut push = |key: &str, unique: bool, cols: &[u16], kind: &'static str| {
        for (seq, &c) in cols.iter().enumerate() {
            let Some(col) = def.columns.get(usize::from(c)) else {
                continue;
            };
            entries.push(IndexEntry {
                key: key.to_string(),
                unique,
                seq: seq as u64 + 1,
                column: col.name.clone(),
                nullable: col.nullable,
                kind,
            });
        }
    };
    let primary_kind = if def.options.hash_only_primary_key {
        "HASH"
    } else {
        "BTREE"
    };
    push(PRIMARY_INDEX_NAME, true, &def.primary_key, primary_kind);
    for u in &def.unique_indexes {
        push(&u.name, true, &u.columns, "HASH");
    }
    for i in def
        .indexes
        .iter()
        .filter(|i| !i.dropped && i.name != PRIMARY_INDEX_NAME)
    {
        push(&i.name, false, &i.columns, "BTREE");
    }
    entries
}

/// The definition of table `name`: the cluster's, or an
/// information_schema table's.
async fn table_def(cluster: &Cluster, name: &TableName) -> Result<TableDef, SqlError> {
    if name.database == information_schema::DATABASE {
        if let Some(t) = information_schema::table_named(&name.table) {
            return information_schema::definition(t);
        }
    }
    Ok(catalog::fresh_table(cluster, name).await?.def().clone())
}

/// SHOW INDEX / INDEXES / KEYS FROM t [FROM db].
pub async fn index(env: &Env<'_>, cluster: &Cluster, words: &[Ident]) -> Result<Outcome, SqlError> {
    let word = |i: usize| words.get(i).map(|w| w.value.to_ascii_uppercase());
    if !matches!(word(1).as_deref(), Some("FROM" | "IN")) || words.len() < 3 {
        return Err(SqlError::syntax("SHOW INDEX FROM table"));
    }
    let table = ObjectName::from(vec![words[2].clone()]);
    let db = match (word(3).as_deref(), words.get(4)) {
        (Some("FROM" | "IN"), Some(d)) => Some(ObjectName::from(vec![d.clone()])),
        (None, _) => None,
        _ => return Err(SqlError::syntax("SHOW INDEX FROM table [FROM database]")),
    };
    let name = table_of(env, &table, db.as_ref())?;
    let def = table_def(cluster, &name).await?;
    let rows = index_entries(&def)
        .into_iter()
        .map(|e| {
            vec![
                Some(name.table.clone()),
                Some(if e.unique { "0" } else { "1" }.into()),
                Some(e.key),
                Some(e.seq.to_string()),
                Some(e.column),
                Some("A".into()),
                Some("0".into()),
                None,
                None,
                Some(if e.nullable { "YES" } else { "" }.into()),
                Some(e.kind.into()),
                Some(String::new()),
                Some(String::new()),
            ]
        })
        .collect();
    Ok(strings(
        &[
            "Table",
            "Non_unique",
            "Key_name",
            "Seq_in_index",
            "Column_name",
            "Collation",
            "Cardinality",
            "Sub_part",
            "Packed",
            "Null",
            "Index_type",
            "Comment",
            "Index_comment",
        ],
        rows,
    ))
}

/// SHOW [SESSION | GLOBAL] VARIABLES [LIKE ...]
pub fn variables(env: &Env<'_>, filter: Option<&ShowStatementFilter>) -> Result<Outcome, SqlError> {
    let pattern = like_filter(filter)?;
    let rows = env
        .variables
        .iter()
        .filter(|(k, _)| matches(&pattern, k))
        .map(|(k, v)| {
            vec![
                Some(k.clone()),
                Some(text(v).map_or(String::new(), |b| String::from_utf8_lossy(&b).into_owned())),
            ]
        })
        .collect();
    Ok(strings(&["Variable_name", "Value"], rows))
}

/// SHOW STATUS [LIKE ...]: a few counters.
pub fn status(filter: Option<&ShowStatementFilter>) -> Result<Outcome, SqlError> {
    let pattern = like_filter(filter)?;
    let all = [
        ("Threads_connected", "1".to_string()),
        ("Uptime", "0".to_string()),
    ];
    let rows = all
        .iter()
        .filter(|(k, _)| matches(&pattern, k))
        .map(|(k, v)| vec![Some(k.to_string()), Some(v.clone())])
        .collect();
    Ok(strings(&["Variable_name", "Value"], rows))
}

/// SHOW WARNINGS / ERRORS [LIMIT [offset,] n] and SHOW COUNT(*)
/// WARNINGS / ERRORS over the session's list, `text` being the
/// statement (sqlparser keeps only its words, not LIMIT's numbers).
pub fn warnings(diagnostics: &Diagnostics, text: &str) -> Result<Outcome, SqlError> {
    let bad = || {
        SqlError::syntax(format!(
            "'{text}': expected SHOW WARNINGS | ERRORS [LIMIT [offset,] n] or SHOW COUNT(*) WARNINGS | ERRORS"
        ))
    };
    let spaced = text
        .replace(',', " , ")
        .replace('(', " ( ")
        .replace(')', " ) ");
    let words: Vec<String> = spaced
        .split_whitespace()
        .map(|w| w.trim_end_matches(';').to_ascii_uppercase())
        .filter(|w| !w.is_empty())
        .collect();
    let words: Vec<&str> = words.iter().map(String::as_str).collect();
    let count = |errors: bool| {
        let (name, n) = if errors {
            ("@@session.error_count", diagnostics.error_count())
        } else {
            ("@@session.warning_count", diagnostics.warning_count())
        };
        Outcome::Rows {
            columns: vec![expression_column(name, Some(&Value::UInt(n)))],
            rows: vec![vec![Some(n.to_string().into_bytes())]],
        }
    };
    let (errors, rest) = match words.as_slice() {
        ["SHOW", "COUNT", "(", "*", ")", kind] => {
            return match *kind {
                "WARNINGS" => Ok(count(false)),
                "ERRORS" => Ok(count(true)),
                _ => Err(bad()),
            }
        }
        ["SHOW", "WARNINGS", rest @ ..] => (false, rest),
        ["SHOW", "ERRORS", rest @ ..] => (true, rest),
        _ => return Err(bad()),
    };
    let number = |w: &str| w.parse::<u64>().map_err(|_| bad());
    let (offset, limit) = match rest {
        [] => (0, None),
        ["LIMIT", n] => (0, Some(number(n)?)),
        ["LIMIT", o, ",", n] => (number(o)?, Some(number(n)?)),
        ["LIMIT", n, "OFFSET", o] => (number(o)?, Some(number(n)?)),
        _ => return Err(bad()),
    };
    let rows: Vec<Vec<Option<String>>> = diagnostics
        .conditions()
        .iter()
        .filter(|c| !errors || c.level == Level::Error)
        .skip(usize::try_from(offset).unwrap_or(usize::MAX))
        .take(limit.map_or(usize::MAX, |l| usize::try_from(l).unwrap_or(usize::MAX)))
        .map(|c| {
            vec![
                Some(c.level.name().to_string()),
                Some(c.code.to_string()),
                Some(c.message.clone()),
            ]
        })
        .collect();
    let mut out = strings(&["Level", "Code", "Message"], rows);
    if let Outcome::Rows { columns, .. } = &mut out {
        // MySQL's types: Level VARCHAR(7), Code INT UNSIGNED, Message
        // VARCHAR(512).
        if let Some(code) = columns.get_mut(1) {
            *code = expression_column("Code", Some(&Value::UInt(0)));
            code.length = 4;
        }
    }
    Ok(out)
}

/// SHOW ENGINES.
pub fn engines() -> Outcome {
    strings(
        &[
            "Engine",
            "Support",
            "Comment",
            "Transactions",
            "XA",
            "Savepoints",
        ],
        vec![vec![
            Some("ndbcluster".into()),
            Some("DEFAULT".into()),
            Some("Shoal: every table lives in the cluster".into()),
            Some("YES".into()),
            Some("NO".into()),
            Some("NO".into()),
        ]],
    )
}
