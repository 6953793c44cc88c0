//! The SHOW statements and DESCRIBE: what connectors and tools ask
//! (SHOW DATABASES / TABLES / [FULL] COLUMNS / INDEX / CREATE TABLE /
//! VARIABLES / STATUS / WARNINGS / ENGINES), answered from mgmd's schema
//! and the session's variables.

use super::expr::like;
use super::Env;
use crate::catalog::{self, collation, key_flag, show_create, TableName};
use crate::outcome::{Column, Outcome, SqlError};
use crate::sqltypes::{expression_column, sql_type_name, text};
use shoal_client::{Cluster, Value};
use shoal_types::schema::PRIMARY_INDEX_NAME;
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
    let rows: Vec<Vec<Option<String>>> = catalog::tables_of(cluster, &db)
        .await?
        .into_iter()
        .map(|t| TableName::from_shoal(&t.name).table)
        .filter(|t| matches(&pattern, t))
        .map(|t| {
            let mut row = vec![Some(t)];
            if full {
                row.push(Some("BASE TABLE".into()));
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
    let t = catalog::table(cluster, &name).await?;
    let def = t.def();
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
    let t = catalog::table(cluster, &name).await?;
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
    let t = catalog::table(cluster, &name).await?;
    let def = t.def();
    let mut rows = Vec::new();
    let mut push = |key: &str, unique: bool, cols: &[u16], kind: &str| {
        for (seq, &c) in cols.iter().enumerate() {
            let col = &def.columns[usize::from(c)];
            rows.push(vec![
                Some(name.table.clone()),
                Some(if unique { "0" } else { "1" }.into()),
                Some(key.to_string()),
                Some((seq + 1).to_string()),
                Some(col.name.clone()),
                Some("A".into()),
                Some("0".into()),
                None,
                None,
                Some(if col.nullable { "YES" } else { "" }.into()),
                Some(kind.into()),
                Some(String::new()),
                Some(String::new()),
            ]);
        }
    };
    push(
        PRIMARY_INDEX_NAME,
        true,
        &def.primary_key,
        if def.options.hash_only_primary_key {
            "HASH"
        } else {
            "BTREE"
        },
    );
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

/// SHOW WARNINGS / ERRORS: none are kept yet.
pub fn warnings() -> Outcome {
    strings(&["Level", "Code", "Message"], Vec::new())
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
