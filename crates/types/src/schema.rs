//! Table schemas: columns with types, nullability and defaults, a primary
//! key of one or more columns, and per-table options. mgmd owns schemas and
//! persists them; data nodes and clients cache them by (id, version).

use crate::error::{ErrorCode, ShoalError};
use crate::ids::{SchemaVersion, TableId};
use crate::value::Value;
use serde::{Deserialize, Serialize};

/// Largest encoded row (fixed + variable part), as in NDB.
pub const ROW_BYTES_MAX: usize = 30_000;
/// Largest encoded primary key.
pub const KEY_BYTES_MAX: usize = 3_072;
/// Most ordered indexes on one table.
pub const INDEXES_MAX: usize = 64;
/// Most columns in one index.
pub const INDEX_COLUMNS_MAX: usize = 16;
/// Most unique indexes on one table (each write of the table reports the
/// old and new keys of every one it changes: bounded per operation).
pub const UNIQUE_INDEXES_MAX: usize = 16;
/// The column of a unique index's table that holds the base row's
/// encoded primary key (after the index's own columns).
pub const UNIQUE_PK_COLUMN: &str = "$pk";
/// Largest ordered-index key (`crate::index_key`'s encoding).
pub const INDEX_KEY_BYTES_MAX: usize = 3_072;
/// The name of the ordered index a table gets on its primary key.
pub const PRIMARY_INDEX_NAME: &str = "PRIMARY";
/// Most columns in one table.
pub const COLUMNS_MAX: usize = 512;
/// Longest table or column name.
pub const NAME_LEN_MAX: usize = 64;

/// A column's type. Lengths of CHAR/VARCHAR/BINARY/VARBINARY are in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ColumnType {
    TinyInt {
        unsigned: bool,
    },
    SmallInt {
        unsigned: bool,
    },
    Int {
        unsigned: bool,
    },
    BigInt {
        unsigned: bool,
    },
    Float,
    Double,
    /// Fixed length, right-padded with spaces; trailing spaces are not significant.
    Char(u16),
    VarChar(u16),
    /// Fixed length, right-padded with zero bytes.
    Binary(u16),
    VarBinary(u16),
    /// Seconds since 1970-01-01 UTC, 0..=u32::MAX (stored in 4 bytes).
    Timestamp,
    /// Seconds since 1970-01-01 UTC, years 1000..=9999 (stored in 8 bytes).
    DateTime,
    /// Days since 1970-01-01, years 1000..=9999 (stored in 4 bytes).
    Date,
    /// Microseconds, -838:59:59..=838:59:59 (stored in 8 bytes).
    Time,
    /// An exact number of `precision` digits (1..=38), `scale` of them
    /// after the point (≤ precision, ≤ 30): the unscaled value in 16 bytes.
    Decimal {
        precision: u8,
        scale: u8,
    },
}

impl ColumnType {
    /// Bytes in the fixed part for fixed-size types; `None` for VARCHAR/VARBINARY.
    pub fn fixed_size(self) -> Option<usize> {
        Some(match self {
            ColumnType::TinyInt { .. } => 1,
            ColumnType::SmallInt { .. } => 2,
            ColumnType::Int { .. }
            | ColumnType::Float
            | ColumnType::Timestamp
            | ColumnType::Date => 4,
            ColumnType::BigInt { .. }
            | ColumnType::Double
            | ColumnType::DateTime
            | ColumnType::Time => 8,
            ColumnType::Decimal { .. } => 16,
            ColumnType::Char(n) | ColumnType::Binary(n) => n as usize,
            ColumnType::VarChar(_) | ColumnType::VarBinary(_) => return None,
        })
    }

    /// Largest encoded value in bytes.
    pub fn max_size(self) -> usize {
        match self {
            ColumnType::VarChar(n) | ColumnType::VarBinary(n) => n as usize,
            other => other.fixed_size().expect("fixed type"),
        }
    }

    pub fn is_var(self) -> bool {
        self.fixed_size().is_none()
    }

    /// SQL spelling, for messages and `show`.
    pub fn sql_name(self) -> String {
        let u = |unsigned: bool| if unsigned { " UNSIGNED" } else { "" };
        match self {
            ColumnType::TinyInt { unsigned } => format!("TINYINT{}", u(unsigned)),
            ColumnType::SmallInt { unsigned } => format!("SMALLINT{}", u(unsigned)),
            ColumnType::Int { unsigned } => format!("INT{}", u(unsigned)),
            ColumnType::BigInt { unsigned } => format!("BIGINT{}", u(unsigned)),
            ColumnType::Float => "FLOAT".into(),
            ColumnType::Double => "DOUBLE".into(),
            ColumnType::Char(n) => format!("CHAR({n})"),
            ColumnType::VarChar(n) => format!("VARCHAR({n})"),
            ColumnType::Binary(n) => format!("BINARY({n})"),
            ColumnType::VarBinary(n) => format!("VARBINARY({n})"),
            ColumnType::Timestamp => "TIMESTAMP".into(),
            ColumnType::DateTime => "DATETIME".into(),
            ColumnType::Date => "DATE".into(),
            ColumnType::Time => "TIME".into(),
            ColumnType::Decimal { precision, scale } => format!("DECIMAL({precision},{scale})"),
        }
    }

    /// Whether some values of the type's size are not valid values (a
    /// range to check, as for DATETIME): bytes of the right length must
    /// still go through `validate_bytes`.
    pub fn has_range(self) -> bool {
        matches!(
            self,
            ColumnType::DateTime | ColumnType::Date | ColumnType::Time | ColumnType::Decimal { .. }
        )
    }

    /// The largest value an AUTO_INCREMENT column of this type may be
    /// given; `None` for a type that cannot be one (not an integer).
    /// BIGINT UNSIGNED stops one short of `u64::MAX`, as MySQL does (it
    /// keeps that value to mean "out of range"), so a counter's next
    /// value always fits a `u64`.
    pub fn auto_increment_max(self) -> Option<u64> {
        Some(match self {
            ColumnType::TinyInt { unsigned: false } => i8::MAX as u64,
            ColumnType::TinyInt { unsigned: true } => u64::from(u8::MAX),
            ColumnType::SmallInt { unsigned: false } => i16::MAX as u64,
            ColumnType::SmallInt { unsigned: true } => u64::from(u16::MAX),
            ColumnType::Int { unsigned: false } => i32::MAX as u64,
            ColumnType::Int { unsigned: true } => u64::from(u32::MAX),
            ColumnType::BigInt { unsigned: false } => i64::MAX as u64,
            ColumnType::BigInt { unsigned: true } => u64::MAX - 1,
            _ => return None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ColumnDef {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: ColumnType,
    pub nullable: bool,
    /// Value used when an insert leaves the column out. `None` means NULL
    /// for nullable columns and "must be given" for NOT NULL ones.
    #[serde(default)]
    pub default: Option<Value>,
    /// SQL's AUTO_INCREMENT: inserts that leave the column out (or give
    /// NULL or 0) get the table's next value from its cluster-wide
    /// counter (`shoal_client`'s `auto_increment` module). At most one
    /// per table, an integer column, NOT NULL ([`TableDef::validate`]);
    /// a key ([`TableDef::check_auto_increment_key`]). Left out of the
    /// encoding when false, so tables without one encode as before.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub auto_increment: bool,
}

impl ColumnDef {
    pub fn new(name: impl Into<String>, ty: ColumnType) -> Self {
        ColumnDef {
            name: name.into(),
            ty,
            nullable: false,
            default: None,
            auto_increment: false,
        }
    }

    /// Marks the column AUTO_INCREMENT.
    pub fn auto_increment(mut self) -> Self {
        self.auto_increment = true;
        self
    }

    pub fn nullable(mut self) -> Self {
        self.nullable = true;
        self
    }

    pub fn default_value(mut self, v: impl Into<Value>) -> Self {
        self.default = Some(v.into());
        self
    }
}

/// Per-table options, set in a create request; mgmd stores them with the
/// table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableOptions {
    /// Fragments for the table; `None` = the cluster default.
    #[serde(default)]
    pub fragment_count: Option<u32>,
    /// Serve reads from any replica (NDB's READ_BACKUP).
    #[serde(default)]
    pub read_backup: bool,
    /// Distribute by the first this-many primary-key columns instead of the
    /// whole key, so rows sharing them share a fragment; `None` = whole key.
    #[serde(default)]
    pub distribution_key_columns: Option<u16>,
    /// The primary key is reachable by hash only: no ordered index on it
    /// (NDB's `PRIMARY KEY ... USING HASH`), so key ranges scan the table.
    #[serde(default)]
    pub hash_only_primary_key: bool,
    /// Neither logged nor checkpointed (NDB's NOLOGGING): faster writes,
    /// and the table comes back empty after a restart of the cluster.
    #[serde(default)]
    pub no_logging: bool,
    /// This table is the hidden table of a unique index of that table
    /// (set by mgmd): clients reach it only through the index.
    #[serde(default)]
    pub index_of: Option<TableId>,
}

/// An ordered index of a table (NDB's ordered index, SQL's `KEY`): one
/// per fragment on each replica, its entries kept at commit with the rows,
/// ordered by the index columns' values (`crate::index_key`), NULLs first.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexDef {
    pub name: String,
    /// Column indexes, in key order.
    pub columns: Vec<u16>,
    /// Dropped: the index keeps its number (scans name indexes by
    /// number), holds no entries, and its name may be used again.
    #[serde(default)]
    pub dropped: bool,
}

/// A unique hash index of a table (NDB's unique index, SQL's `UNIQUE
/// KEY`): a hidden table keyed by the index columns' values, holding each
/// row's primary key ([`UNIQUE_PK_COLUMN`]), partitioned by those values,
/// and written by TC in the same transaction as every insert, update and
/// delete of the table. A row with NULL in any index column has no entry
/// (SQL: NULLs are never equal, so any number of them is allowed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct UniqueIndexDef {
    pub name: String,
    /// Column indexes of the base table, in key order.
    pub columns: Vec<u16>,
    /// The hidden table (assigned by mgmd; 0 in a create request).
    pub table: TableId,
    /// Being built over a table that has rows: writes keep it already,
    /// reads through it are refused until the build is done.
    #[serde(default)]
    pub building: bool,
}

impl UniqueIndexDef {
    /// The hidden table's name for unique index `index` of table `base`.
    pub fn table_name(base: &str, index: &str) -> String {
        format!("{base}$unique${index}")
    }

    /// The hidden table of this index of `base` (id and version 0: mgmd
    /// assigns them): the index columns (NOT NULL) as primary key, then
    /// [`UNIQUE_PK_COLUMN`].
    pub fn table_def(&self, base: &TableDef) -> Result<TableDef, ShoalError> {
        let mut columns = Vec::with_capacity(self.columns.len() + 1);
        for &c in &self.columns {
            let col = base.columns.get(c as usize).ok_or_else(|| {
                bad(format!(
                    "unique index {:?} names column index {c}, which does not exist",
                    self.name
                ))
            })?;
            columns.push(ColumnDef::new(col.name.clone(), col.ty));
        }
        columns.push(ColumnDef::new(
            UNIQUE_PK_COLUMN,
            ColumnType::VarBinary(KEY_BYTES_MAX as u16),
        ));
        let def = TableDef {
            id: TableId(0),
            version: SchemaVersion(0),
            name: Self::table_name(&base.name, &self.name),
            primary_key: (0..self.columns.len() as u16).collect(),
            columns,
            options: TableOptions {
                fragment_count: base.options.fragment_count,
                read_backup: base.options.read_backup,
                distribution_key_columns: None,
                hash_only_primary_key: true,
                no_logging: base.options.no_logging,
                index_of: Some(base.id),
            },
            distribution: None,
            indexes: Vec::new(),
            unique_indexes: Vec::new(),
        };
        def.validate()?;
        Ok(def)
    }
}

impl IndexDef {
    /// The most bytes a key of this index can take encoded.
    pub fn key_bytes_max(&self, table: &TableDef) -> usize {
        self.columns
            .iter()
            .filter_map(|&c| table.columns.get(c as usize))
            .map(|c| {
                1 + match c.ty {
                    // Escaped bytes (each may double) and a terminator.
                    ColumnType::Char(n) | ColumnType::VarChar(n) | ColumnType::VarBinary(n) => {
                        2 * n as usize + 2
                    }
                    other => other.max_size(),
                }
            })
            .sum()
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TableDef {
    /// Assigned by mgmd at create time (0 in a create request).
    pub id: TableId,
    /// Assigned by mgmd at create time (0 in a create request).
    pub version: SchemaVersion,
    pub name: String,
    pub columns: Vec<ColumnDef>,
    /// Column indexes of the primary key, in key order.
    pub primary_key: Vec<u16>,
    #[serde(default)]
    pub options: TableOptions,
    /// Assigned by mgmd at create time: node groups and fragments. `None`
    /// in a create request (and in tests that build a table by hand: one
    /// fragment on the local node).
    #[serde(default)]
    pub distribution: Option<crate::distribution::DistributionSpec>,
    /// Ordered indexes, by number (their position). mgmd puts the primary
    /// key's first ([`PRIMARY_INDEX_NAME`]) unless the table asks for
    /// hash only.
    #[serde(default)]
    pub indexes: Vec<IndexDef>,
    /// Unique hash indexes (dropped ones are removed).
    #[serde(default)]
    pub unique_indexes: Vec<UniqueIndexDef>,
}

fn bad(detail: String) -> ShoalError {
    ShoalError::with_detail(ErrorCode::BadTableDefinition, detail)
}

fn check_name(kind: &str, name: &str) -> Result<(), ShoalError> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if name.is_empty() || name.len() > NAME_LEN_MAX || !ok_chars {
        return Err(bad(format!(
            "{kind} name {name:?} must be 1..={NAME_LEN_MAX} characters of A-Z, a-z, 0-9, _ or $"
        )));
    }
    Ok(())
}

/// A table's name: `table`, or `database.table` for a table of an SQL
/// database (each part a name of its own; a table without a database is
/// in the SQL node's database `shoal`).
fn check_table_name(name: &str) -> Result<(), ShoalError> {
    match name.split_once('.') {
        Some((database, table)) => {
            check_name("database", database)?;
            check_name("table", table)
        }
        None => check_name("table", name),
    }
}

/// The database part of a table's name (`None`: the table has none).
pub fn database_of(table: &str) -> Option<&str> {
    table.split_once('.').map(|(d, _)| d)
}

/// Checks a database name (SQL's `CREATE DATABASE`).
pub fn check_database_name(name: &str) -> Result<(), ShoalError> {
    check_name("database", name)
}

impl TableDef {
    /// A table definition for a create request; `primary_key` names columns.
    pub fn new(
        name: impl Into<String>,
        columns: Vec<ColumnDef>,
        primary_key: &[&str],
    ) -> Result<Self, ShoalError> {
        let mut pk = Vec::with_capacity(primary_key.len());
        for key_name in primary_key {
            let idx = columns
                .iter()
                .position(|c| c.name == *key_name)
                .ok_or_else(|| bad(format!("primary key column {key_name:?} is not a column")))?;
            pk.push(idx as u16);
        }
        let def = TableDef {
            id: TableId(0),
            version: SchemaVersion(0),
            name: name.into(),
            columns,
            primary_key: pk,
            options: TableOptions::default(),
            distribution: None,
            indexes: Vec::new(),
            unique_indexes: Vec::new(),
        };
        def.validate()?;
        Ok(def)
    }

    /// Adds a unique hash index on the named columns (in key order); mgmd
    /// creates its hidden table with the table.
    pub fn with_unique_index(mut self, name: &str, columns: &[&str]) -> Result<Self, ShoalError> {
        let columns = self.column_ids(name, columns)?;
        self.unique_indexes.push(UniqueIndexDef {
            name: name.to_string(),
            columns,
            table: TableId(0),
            building: false,
        });
        self.validate()?;
        Ok(self)
    }

    /// The column ids of `columns`, named by index `index`.
    pub fn column_ids(&self, index: &str, columns: &[&str]) -> Result<Vec<u16>, ShoalError> {
        columns
            .iter()
            .map(|c| {
                self.column_index(c).ok_or_else(|| {
                    bad(format!(
                        "index {index:?} names column {c:?}, which is not a column"
                    ))
                })
            })
            .collect()
    }

    /// The unique index named `name`.
    pub fn unique_index(&self, name: &str) -> Option<&UniqueIndexDef> {
        self.unique_indexes.iter().find(|u| u.name == name)
    }

    /// The unique index whose hidden table is `table`.
    pub fn unique_index_by_table(&self, table: TableId) -> Option<&UniqueIndexDef> {
        self.unique_indexes.iter().find(|u| u.table == table)
    }

    /// Adds an ordered index on the named columns (in key order).
    pub fn with_index(mut self, name: &str, columns: &[&str]) -> Result<Self, ShoalError> {
        let cols = self.column_ids(name, columns)?;
        self.indexes.push(IndexDef {
            name: name.to_string(),
            columns: cols,
            dropped: false,
        });
        self.validate()?;
        Ok(self)
    }

    /// Puts the ordered index of the primary key first, unless the table
    /// asks for hash only or has it already (mgmd calls this at create).
    pub fn add_primary_index(&mut self) {
        let has = self
            .indexes
            .iter()
            .any(|i| i.name == PRIMARY_INDEX_NAME && !i.dropped);
        let primary = IndexDef {
            name: PRIMARY_INDEX_NAME.to_string(),
            columns: self.primary_key.clone(),
            dropped: false,
        };
        // A key too long for an ordered index (a long VARCHAR) keeps the
        // table hash only, as it could be before ordered indexes.
        let fits = primary.key_bytes_max(self) <= INDEX_KEY_BYTES_MAX;
        if !self.options.hash_only_primary_key && !has && fits {
            self.indexes.insert(0, primary);
        }
    }

    /// The number of the (not dropped) index named `name`.
    pub fn index_number(&self, name: &str) -> Option<u16> {
        self.indexes
            .iter()
            .position(|i| i.name == name && !i.dropped)
            .map(|i| i as u16)
    }

    pub fn column_index(&self, name: &str) -> Option<u16> {
        self.columns
            .iter()
            .position(|c| c.name == name)
            .map(|i| i as u16)
    }

    pub fn is_key_column(&self, col: u16) -> bool {
        self.primary_key.contains(&col)
    }

    /// The AUTO_INCREMENT column, if the table has one.
    pub fn auto_increment_column(&self) -> Option<u16> {
        self.columns
            .iter()
            .position(|c| c.auto_increment)
            .map(|i| i as u16)
    }

    /// Marks column `column` AUTO_INCREMENT (after the indexes that make
    /// it a key were added), checking every rule.
    pub fn with_auto_increment(mut self, column: &str) -> Result<Self, ShoalError> {
        let c = self
            .column_index(column)
            .ok_or_else(|| bad(format!("AUTO_INCREMENT column {column:?} is not a column")))?;
        self.columns[usize::from(c)].auto_increment = true;
        self.validate()?;
        self.check_auto_increment_key()?;
        Ok(self)
    }

    /// SQL's rule that an AUTO_INCREMENT column is a key: part of the
    /// primary key, or the first column of an index. Checked where a
    /// table is created, not in [`TableDef::validate`]: an index may be
    /// dropped later, and a stored definition must stay valid (data
    /// nodes and clients refuse invalid ones); the counter needs no key.
    pub fn check_auto_increment_key(&self) -> Result<(), ShoalError> {
        let Some(c) = self.auto_increment_column() else {
            return Ok(());
        };
        let keyed = self.primary_key.contains(&c)
            || self
                .indexes
                .iter()
                .any(|i| !i.dropped && i.columns.first() == Some(&c))
            || self
                .unique_indexes
                .iter()
                .any(|u| u.columns.first() == Some(&c));
        if keyed {
            Ok(())
        } else {
            Err(bad(format!(
                "there can be only one AUTO_INCREMENT column and it must be a key: column {:?} is neither part of the primary key nor the first column of an index",
                self.columns[usize::from(c)].name
            )))
        }
    }

    /// The per-column rules of AUTO_INCREMENT: at most one such column,
    /// an integer one, NOT NULL, without a DEFAULT.
    fn validate_auto_increment(&self) -> Result<(), ShoalError> {
        let mut autos = self.columns.iter().filter(|c| c.auto_increment);
        let Some(c) = autos.next() else {
            return Ok(());
        };
        if let Some(other) = autos.next() {
            return Err(bad(format!(
                "there can be only one AUTO_INCREMENT column and it must be a key: columns {:?} and {:?} are both AUTO_INCREMENT",
                c.name, other.name
            )));
        }
        if c.ty.auto_increment_max().is_none() {
            return Err(bad(format!(
                "AUTO_INCREMENT column {:?} must be an integer column, not {}",
                c.name,
                c.ty.sql_name()
            )));
        }
        if c.nullable {
            return Err(bad(format!(
                "AUTO_INCREMENT column {:?} must be NOT NULL",
                c.name
            )));
        }
        if c.default.is_some() {
            return Err(bad(format!(
                "AUTO_INCREMENT column {:?} takes no DEFAULT (its values come from the counter)",
                c.name
            )));
        }
        Ok(())
    }

    /// Checks every rule a table must satisfy; mgmd calls it before storing.
    pub fn validate(&self) -> Result<(), ShoalError> {
        if self.options.index_of.is_some() {
            // `[<database>.]<table>$unique$<index>`: three names and
            // separators.
            if self.name.is_empty() || self.name.len() > 3 * NAME_LEN_MAX + 9 {
                return Err(bad(format!("unique index table name {:?}", self.name)));
            }
        } else {
            check_table_name(&self.name)?;
        }
        if self.columns.is_empty() || self.columns.len() > COLUMNS_MAX {
            return Err(bad(format!(
                "a table needs 1..={COLUMNS_MAX} columns, got {}",
                self.columns.len()
            )));
        }
        let mut row_bytes = 0usize;
        for (i, c) in self.columns.iter().enumerate() {
            if !(self.options.index_of.is_some() && c.name == UNIQUE_PK_COLUMN) {
                check_name("column", &c.name)?;
            }
            if self.columns[..i].iter().any(|o| o.name == c.name) {
                return Err(bad(format!("column {:?} appears twice", c.name)));
            }
            match c.ty {
                ColumnType::Char(n)
                | ColumnType::VarChar(n)
                | ColumnType::Binary(n)
                | ColumnType::VarBinary(n)
                    if n == 0 || n as usize > ROW_BYTES_MAX =>
                {
                    return Err(bad(format!(
                        "column {:?}: length must be 1..={ROW_BYTES_MAX}, got {n}",
                        c.name
                    )));
                }
                ColumnType::Decimal { precision, scale }
                    if precision == 0
                        || precision > crate::decimal::DECIMAL_PRECISION_MAX
                        || scale > precision
                        || scale > crate::decimal::DECIMAL_SCALE_MAX =>
                {
                    return Err(bad(format!(
                        "column {:?}: DECIMAL({precision},{scale}) needs a precision of 1..={} and a scale of at most the precision and {}",
                        c.name,
                        crate::decimal::DECIMAL_PRECISION_MAX,
                        crate::decimal::DECIMAL_SCALE_MAX
                    )));
                }
                _ => {}
            }
            row_bytes += c.ty.max_size() + if c.ty.is_var() { 2 } else { 0 };
            if let Some(d) = &c.default {
                let mut buf = Vec::new();
                crate::value::encode_value(c, d, &mut buf)
                    .map_err(|e| bad(format!("column {:?}: bad default: {e}", c.name)))?;
            }
        }
        if row_bytes > ROW_BYTES_MAX {
            return Err(bad(format!(
                "largest row would be {row_bytes} bytes; the limit is {ROW_BYTES_MAX}"
            )));
        }
        if self.primary_key.is_empty() {
            return Err(bad(
                "a table needs a primary key of at least one column".into()
            ));
        }
        let mut key_bytes = 0usize;
        for (i, &k) in self.primary_key.iter().enumerate() {
            let col = self.columns.get(k as usize).ok_or_else(|| {
                bad(format!(
                    "primary key names column index {k}, which does not exist"
                ))
            })?;
            if self.primary_key[..i].contains(&k) {
                return Err(bad(format!(
                    "column {:?} appears twice in the primary key",
                    col.name
                )));
            }
            if col.nullable {
                return Err(bad(format!(
                    "primary key column {:?} must be NOT NULL",
                    col.name
                )));
            }
            key_bytes += col.ty.max_size() + if col.ty.is_var() { 2 } else { 0 };
        }
        if key_bytes > KEY_BYTES_MAX {
            return Err(bad(format!(
                "primary key may take {key_bytes} bytes; the limit is {KEY_BYTES_MAX}"
            )));
        }
        if let Some(n) = self.options.distribution_key_columns {
            if n == 0 || n as usize > self.primary_key.len() {
                return Err(bad(format!(
                    "distribution_key_columns must be 1..={} (the primary key's columns), got {n}",
                    self.primary_key.len()
                )));
            }
        }
        if self.options.fragment_count == Some(0) {
            return Err(bad("fragment_count must be at least 1".into()));
        }
        if let Some(d) = &self.distribution {
            d.map()
                .map_err(|e| bad(format!("distribution: {}", e.detail)))?;
        }
        self.validate_auto_increment()?;
        self.validate_indexes()?;
        self.validate_unique_indexes()
    }

    fn validate_unique_indexes(&self) -> Result<(), ShoalError> {
        if self.unique_indexes.len() > UNIQUE_INDEXES_MAX {
            return Err(bad(format!(
                "a table has at most {UNIQUE_INDEXES_MAX} unique indexes, got {}",
                self.unique_indexes.len()
            )));
        }
        if !self.unique_indexes.is_empty() && self.options.index_of.is_some() {
            return Err(bad(
                "a unique index's table has no indexes of its own".into()
            ));
        }
        for (i, u) in self.unique_indexes.iter().enumerate() {
            check_name("index", &u.name)?;
            let taken = self.unique_indexes[..i].iter().any(|o| o.name == u.name)
                || self.index_number(&u.name).is_some();
            if taken {
                return Err(bad(format!("index {:?} appears twice", u.name)));
            }
            if u.columns.is_empty() || u.columns.len() > INDEX_COLUMNS_MAX {
                return Err(bad(format!(
                    "unique index {:?} needs 1..={INDEX_COLUMNS_MAX} columns, got {}",
                    u.name,
                    u.columns.len()
                )));
            }
            let mut key_bytes = 0usize;
            for (j, &c) in u.columns.iter().enumerate() {
                let Some(col) = self.columns.get(c as usize) else {
                    return Err(bad(format!(
                        "unique index {:?} names column index {c}, which does not exist",
                        u.name
                    )));
                };
                if u.columns[..j].contains(&c) {
                    return Err(bad(format!(
                        "unique index {:?} names column {:?} twice",
                        u.name, col.name
                    )));
                }
                key_bytes += col.ty.max_size() + if col.ty.is_var() { 2 } else { 0 };
            }
            // Its values are the hidden table's primary key.
            if key_bytes > KEY_BYTES_MAX {
                return Err(bad(format!(
                    "unique index {:?} keys may take {key_bytes} bytes; the limit is {KEY_BYTES_MAX}",
                    u.name
                )));
            }
        }
        Ok(())
    }

    fn validate_indexes(&self) -> Result<(), ShoalError> {
        if self.indexes.len() > INDEXES_MAX {
            return Err(bad(format!(
                "a table has at most {INDEXES_MAX} indexes, got {}",
                self.indexes.len()
            )));
        }
        for (i, index) in self.indexes.iter().enumerate() {
            if index.name != PRIMARY_INDEX_NAME {
                check_name("index", &index.name)?;
            }
            if !index.dropped
                && self.indexes[..i]
                    .iter()
                    .any(|o| o.name == index.name && !o.dropped)
            {
                return Err(bad(format!("index {:?} appears twice", index.name)));
            }
            if index.columns.is_empty() || index.columns.len() > INDEX_COLUMNS_MAX {
                return Err(bad(format!(
                    "index {:?} needs 1..={INDEX_COLUMNS_MAX} columns, got {}",
                    index.name,
                    index.columns.len()
                )));
            }
            for (j, &c) in index.columns.iter().enumerate() {
                if c as usize >= self.columns.len() {
                    return Err(bad(format!(
                        "index {:?} names column index {c}, which does not exist",
                        index.name
                    )));
                }
                if index.columns[..j].contains(&c) {
                    return Err(bad(format!(
                        "index {:?} names column {:?} twice",
                        index.name, self.columns[c as usize].name
                    )));
                }
            }
            let key_bytes = index.key_bytes_max(self);
            if key_bytes > INDEX_KEY_BYTES_MAX {
                return Err(bad(format!(
                    "index {:?} keys may take {key_bytes} bytes; the limit is {INDEX_KEY_BYTES_MAX}",
                    index.name
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cols() -> Vec<ColumnDef> {
        vec![
            ColumnDef::new("id", ColumnType::Int { unsigned: true }),
            ColumnDef::new("name", ColumnType::VarChar(32)).nullable(),
        ]
    }

    #[test]
    fn valid_table() {
        let t = TableDef::new("t1", cols(), &["id"]).unwrap();
        assert_eq!(t.primary_key, vec![0]);
        assert_eq!(t.column_index("name"), Some(1));
    }

    #[test]
    fn rejects_bad_tables() {
        assert!(TableDef::new("t1", cols(), &["nope"]).is_err());
        assert!(
            TableDef::new("t1", cols(), &["name"]).is_err(),
            "nullable pk"
        );
        assert!(TableDef::new("t-1", cols(), &["id"]).is_err(), "bad name");
        assert!(
            TableDef::new("db.t1", cols(), &["id"]).is_ok(),
            "a database's table"
        );
        assert!(
            TableDef::new("db.t.x", cols(), &["id"]).is_err(),
            "two dots"
        );
        assert!(
            TableDef::new(".t1", cols(), &["id"]).is_err(),
            "no database name"
        );
        assert_eq!(database_of("db.t1"), Some("db"));
        assert_eq!(database_of("t1"), None);
        assert!(TableDef::new("t1", cols(), &[]).is_err(), "no pk");
        let mut dup = cols();
        dup.push(ColumnDef::new("id", ColumnType::Double));
        assert!(TableDef::new("t1", dup, &["id"]).is_err());
        let big = vec![
            ColumnDef::new("id", ColumnType::Int { unsigned: false }),
            ColumnDef::new("a", ColumnType::VarBinary(20_000)),
            ColumnDef::new("b", ColumnType::VarBinary(20_000)),
        ];
        assert!(TableDef::new("t1", big, &["id"]).is_err(), "row too big");
        let bad_default = vec![
            ColumnDef::new("id", ColumnType::Int { unsigned: false }),
            ColumnDef::new("a", ColumnType::TinyInt { unsigned: false }).default_value(1000i64),
        ];
        assert!(TableDef::new("t1", bad_default, &["id"]).is_err());
    }

    #[test]
    fn auto_increment_columns_follow_mysqls_rules() {
        let int = ColumnType::Int { unsigned: false };
        let auto_pk = vec![
            ColumnDef::new("id", int).auto_increment(),
            ColumnDef::new("v", int).nullable(),
        ];
        let t = TableDef::new("t1", auto_pk, &["id"]).unwrap();
        assert_eq!(t.auto_increment_column(), Some(0));
        assert!(t.check_auto_increment_key().is_ok());
        // At most one; an integer; NOT NULL; no DEFAULT.
        let two = vec![
            ColumnDef::new("id", int).auto_increment(),
            ColumnDef::new("v", int).auto_increment(),
        ];
        assert!(TableDef::new("t1", two, &["id"]).is_err());
        let double = vec![ColumnDef::new("id", ColumnType::Double).auto_increment()];
        assert!(TableDef::new("t1", double, &["id"]).is_err());
        let nullable = vec![
            ColumnDef::new("id", int),
            ColumnDef::new("v", int).nullable().auto_increment(),
        ];
        assert!(TableDef::new("t1", nullable, &["id"]).is_err());
        let defaulted = vec![ColumnDef::new("id", int)
            .auto_increment()
            .default_value(5i64)];
        assert!(TableDef::new("t1", defaulted, &["id"]).is_err());
        // A key: part of the primary key, or an index's first column.
        let plain = vec![ColumnDef::new("id", int), ColumnDef::new("v", int)];
        let t = TableDef::new("t1", plain, &["id"]).unwrap();
        let e = t.clone().with_auto_increment("v").unwrap_err();
        assert!(e.detail.contains("must be a key"), "{e}");
        let second = t.clone().with_index("iv", &["id", "v"]).unwrap();
        assert!(
            second.with_auto_increment("v").is_err(),
            "not the first column"
        );
        let indexed = t.clone().with_index("iv", &["v", "id"]).unwrap();
        let auto = indexed.with_auto_increment("v").unwrap();
        assert_eq!(auto.auto_increment_column(), Some(1));
        let mut dropped = auto.clone();
        dropped.indexes[0].dropped = true;
        assert!(dropped.validate().is_ok(), "a stored table stays valid");
        assert!(dropped.check_auto_increment_key().is_err());
        let unique = t.with_unique_index("uv", &["v"]).unwrap();
        assert!(unique.with_auto_increment("v").is_ok());
    }

    #[test]
    fn auto_increment_maxima_are_the_types_and_fit_a_counter() {
        let max = |ty| ColumnType::auto_increment_max(ty).unwrap();
        assert_eq!(max(ColumnType::TinyInt { unsigned: false }), 127);
        assert_eq!(max(ColumnType::TinyInt { unsigned: true }), 255);
        assert_eq!(max(ColumnType::SmallInt { unsigned: false }), 32_767);
        assert_eq!(max(ColumnType::SmallInt { unsigned: true }), 65_535);
        assert_eq!(max(ColumnType::Int { unsigned: false }), 2_147_483_647);
        assert_eq!(max(ColumnType::Int { unsigned: true }), 4_294_967_295);
        assert_eq!(max(ColumnType::BigInt { unsigned: false }), i64::MAX as u64);
        assert_eq!(max(ColumnType::BigInt { unsigned: true }), u64::MAX - 1);
        assert_eq!(ColumnType::VarChar(3).auto_increment_max(), None);
        assert_eq!(ColumnType::Timestamp.auto_increment_max(), None);
    }
}
