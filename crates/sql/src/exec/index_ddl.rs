//! Index statements, each through mgmd by the native client: CREATE /
//! DROP INDEX and ALTER TABLE ADD / DROP INDEX (ordered or unique), and
//! ALTER TABLE's AUTO_INCREMENT = n. An index the AUTO_INCREMENT column
//! needs to stay a key is not dropped (1075).

use super::auto_increment;
use super::ddl::{duplicate_key_name, index_columns, index_name_for, key_too_long};
use super::error::from_shoal;
use super::Env;
use crate::catalog::{self, single_name, TableName};
use crate::outcome::{Outcome, SqlError};
use shoal_client::{Cluster, ErrorCode};
use shoal_types::schema::{INDEX_KEY_BYTES_MAX, KEY_BYTES_MAX, PRIMARY_INDEX_NAME};
use shoal_types::{IndexDef, TableDef};
use sqlparser::ast::{AlterTable, AlterTableOperation, CreateIndex, ObjectName, TableConstraint};

/// A table's column names resolved case-insensitively (MySQL's column
/// names are), as the table spells them; 1072 for a missing one.
fn key_columns(def: &TableDef, names: &[String]) -> Result<Vec<String>, SqlError> {
    names
        .iter()
        .map(|n| {
            def.columns
                .iter()
                .find(|c| c.name == *n)
                .or_else(|| def.columns.iter().find(|c| c.name.eq_ignore_ascii_case(n)))
                .map(|c| c.name.clone())
                .ok_or_else(|| {
                    SqlError::new(
                        1072,
                        "42000",
                        format!("Key column '{n}' doesn't exist in table"),
                    )
                })
        })
        .collect()
}

/// Adds an index to an existing table.
async fn add_index(
    cluster: &Cluster,
    table: &TableName,
    name: Option<String>,
    columns: &[String],
    unique: bool,
) -> Result<(), SqlError> {
    let current = catalog::fresh_table(cluster, table).await?;
    let def = current.def();
    let cols = key_columns(def, columns)?;
    let mut taken: Vec<String> = def
        .indexes
        .iter()
        .filter(|i| !i.dropped)
        .map(|i| i.name.clone())
        .collect();
    taken.extend(def.unique_indexes.iter().map(|u| u.name.clone()));
    taken.push(PRIMARY_INDEX_NAME.to_string());
    let name = match name {
        Some(n) if n.eq_ignore_ascii_case(PRIMARY_INDEX_NAME) => {
            return Err(SqlError::new(
                1280,
                "42000",
                format!("Incorrect index name '{n}'"),
            ))
        }
        Some(n) if taken.iter().any(|t| t.eq_ignore_ascii_case(&n)) => {
            return Err(duplicate_key_name(&n))
        }
        Some(n) => n,
        None => index_name_for(&cols[0], &taken),
    };
    let col_refs: Vec<&str> = cols.iter().map(String::as_str).collect();
    let ids = def
        .column_ids(&name, &col_refs)
        .map_err(|e| from_shoal(&e))?;
    if unique {
        let key: usize = ids
            .iter()
            .map(|&i| def.columns[usize::from(i)].ty.max_size() + 2)
            .sum();
        if key > KEY_BYTES_MAX {
            return Err(key_too_long());
        }
    } else {
        let probe = IndexDef {
            name: name.clone(),
            columns: ids,
            dropped: false,
        };
        if probe.key_bytes_max(def) > INDEX_KEY_BYTES_MAX {
            return Err(key_too_long());
        }
    }
    let shoal_name = table.shoal_name();
    let result = if unique {
        cluster
            .create_unique_index(&shoal_name, &name, &col_refs)
            .await
    } else {
        cluster.create_index(&shoal_name, &name, &col_refs).await
    };
    match result {
        Ok(_) => Ok(()),
        Err(e) if e.code == ErrorCode::TableExists => Err(duplicate_key_name(&name)),
        Err(e) if e.code == ErrorCode::TupleAlreadyExists => Err(SqlError::new(
            1062,
            "23000",
            format!("Duplicate entry for key '{name}': {}", e.detail),
        )),
        Err(e) if e.code == ErrorCode::NoSuchTable => Err(catalog::no_such_table(table)),
        Err(e) => Err(from_shoal(&e)),
    }
}

async fn drop_index(cluster: &Cluster, table: &TableName, name: &str) -> Result<(), SqlError> {
    if name.eq_ignore_ascii_case(PRIMARY_INDEX_NAME) {
        return Err(SqlError::not_supported("dropping the primary key"));
    }
    let current = catalog::fresh_table(cluster, table).await?;
    // Index names are matched case-insensitively, as MySQL's are.
    let def = current.def();
    let actual = def
        .indexes
        .iter()
        .filter(|i| !i.dropped)
        .map(|i| i.name.as_str())
        .chain(def.unique_indexes.iter().map(|u| u.name.as_str()))
        .find(|n| n.eq_ignore_ascii_case(name))
        .map(str::to_string);
    let cant = || {
        SqlError::new(
            1091,
            "42000",
            format!("Can't DROP '{name}'; check that column/key exists"),
        )
    };
    let Some(actual) = actual else {
        return Err(cant());
    };
    // The AUTO_INCREMENT column must stay a key (MySQL's 1075).
    let mut after = def.clone();
    after.unique_indexes.retain(|u| u.name != actual);
    for i in after.indexes.iter_mut().filter(|i| i.name == actual) {
        i.dropped = true;
    }
    if after.check_auto_increment_key().is_err() {
        return Err(auto_increment::not_a_key());
    }
    match cluster.drop_index(&table.shoal_name(), &actual).await {
        Ok(_) => Ok(()),
        Err(e) if e.code == ErrorCode::NoSuchColumn => Err(cant()),
        Err(e) if e.code == ErrorCode::NoSuchTable => Err(catalog::no_such_table(table)),
        Err(e) => Err(from_shoal(&e)),
    }
}

/// CREATE [UNIQUE] INDEX name ON t (cols).
pub async fn create_index(
    env: &Env<'_>,
    cluster: &Cluster,
    ci: &CreateIndex,
) -> Result<Outcome, SqlError> {
    if ci.predicate.is_some() || !ci.include.is_empty() || !ci.with.is_empty() || ci.concurrently {
        return Err(SqlError::not_supported(format!("{ci}")));
    }
    let Some(name) = &ci.name else {
        return Err(SqlError::syntax("CREATE INDEX needs an index name"));
    };
    let name = single_name(name)?;
    let table = catalog::resolve(&ci.table_name, env.database)?;
    let cols = index_columns(&ci.columns)?;
    add_index(cluster, &table, Some(name), &cols, ci.unique).await?;
    Ok(Outcome::ok())
}

/// DROP INDEX name ON t.
pub async fn drop_index_statement(
    env: &Env<'_>,
    cluster: &Cluster,
    names: &[ObjectName],
    table: Option<&ObjectName>,
    if_exists: bool,
) -> Result<Outcome, SqlError> {
    let Some(table) = table else {
        return Err(SqlError::syntax("DROP INDEX needs ON table"));
    };
    let [name] = names else {
        return Err(SqlError::syntax("DROP INDEX drops one index"));
    };
    let table = catalog::resolve(table, env.database)?;
    match drop_index(cluster, &table, &single_name(name)?).await {
        Err(e) if e.code == 1091 && if_exists => Ok(super::ddl::noted(&e)),
        other => other.map(|()| Outcome::ok()),
    }
}

/// ALTER TABLE t ADD INDEX / KEY / UNIQUE ..., DROP INDEX ...,
/// AUTO_INCREMENT = n (each operation in turn; ALGORITHM= and LOCK= are
/// accepted). AUTO_INCREMENT = n only raises the counter: a value below
/// what it stands at is ignored, as InnoDB ignores one at or below the
/// column's largest value. Anything else answers 1235 before any
/// operation runs.
pub async fn alter_table(
    env: &Env<'_>,
    cluster: &Cluster,
    at: &AlterTable,
) -> Result<Outcome, SqlError> {
    let table = catalog::resolve(&at.name, env.database)?;
    for op in &at.operations {
        match op {
            AlterTableOperation::AddConstraint {
                constraint: TableConstraint::Unique(_) | TableConstraint::Index(_),
                ..
            }
            | AlterTableOperation::DropIndex { .. }
            | AlterTableOperation::AutoIncrement { .. }
            | AlterTableOperation::Algorithm { .. }
            | AlterTableOperation::Lock { .. } => {}
            other => {
                return Err(SqlError::not_supported(format!(
                    "ALTER TABLE ... {other} (only ADD / DROP INDEX and AUTO_INCREMENT=n for now)"
                )))
            }
        }
    }
    catalog::fresh_table(cluster, &table).await?;
    for op in &at.operations {
        match op {
            AlterTableOperation::AddConstraint { constraint, .. } => match constraint {
                TableConstraint::Unique(u) => {
                    let name = u
                        .index_name
                        .as_ref()
                        .or(u.name.as_ref())
                        .map(|i| i.value.clone());
                    add_index(cluster, &table, name, &index_columns(&u.columns)?, true).await?
                }
                TableConstraint::Index(i) => {
                    let name = i.name.as_ref().map(|n| n.value.clone());
                    add_index(cluster, &table, name, &index_columns(&i.columns)?, false).await?
                }
                _ => unreachable!("checked above"),
            },
            AlterTableOperation::DropIndex { name } => {
                drop_index(cluster, &table, &name.value).await?
            }
            AlterTableOperation::AutoIncrement { value, .. } => {
                let n = auto_increment::parse_start(&value.to_string())?;
                let t = catalog::table(cluster, &table).await?;
                auto_increment::start(cluster, &t, Some(n)).await?
            }
            _ => {}
        }
    }
    Ok(Outcome::ok())
}
